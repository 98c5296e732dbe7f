"""The DataChecksPort contract: a team's S3 objects, for every adapter (S3 on moto, and memory). A bucket that is
not the team's is refused before anything in it is read."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.data_checks import S3DataChecks
from jobsched.adapters.aws.ownership import AwsTagReader, TeamSessions
from jobsched.adapters.memory.data_checks import MemoryDataChecks
from jobsched.core.item_lists import BadItems
from jobsched.core.names import OWNER_TAG, reserved_prefixes
from jobsched.ports import DataChecksPort
from jobsched.tenancy.ownership import NotOwned, OwnershipGuard

OURS, THEIRS = "data-landing", "ads-landing"
LIST = b'[{"account": "1"}, {"account": "2"}]'


@pytest.fixture(params=["moto", "memory"])
def checks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[DataChecksPort]:
    if request.param == "memory":
        memory = MemoryDataChecks(owners={OURS: "data", THEIRS: "ads"})
        memory.put(OURS, "lists/accounts.json", LIST)
        memory.put(THEIRS, "lists/accounts.json", LIST)
        yield memory
        return
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket, team in ((OURS, "data"), (THEIRS, "ads")):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": team}]})
            s3.put_object(Bucket=bucket, Key="lists/accounts.json", Body=LIST)
        sessions = TeamSessions(None)
        yield S3DataChecks(sessions, OwnershipGuard(AwsTagReader(sessions), reserved_prefixes("test"), ttl=0))


def test_an_object_in_the_teams_bucket_is_read_and_a_missing_one_is_none(checks: DataChecksPort) -> None:
    assert checks.object_exists("data", OURS, "lists/accounts.json")
    assert checks.read_object("data", OURS, "lists/accounts.json", max_bytes=1024) == LIST
    assert checks.read_object("data", OURS, "lists/absent.json", max_bytes=1024) is None
    assert not checks.object_exists("data", OURS, "lists/absent.json")


def test_an_object_larger_than_allowed_is_refused_unread(checks: DataChecksPort) -> None:
    with pytest.raises(BadItems, match="at most"):
        checks.read_object("data", OURS, "lists/accounts.json", max_bytes=len(LIST) - 1)


def test_another_teams_bucket_is_refused_for_reading_and_for_waiting(checks: DataChecksPort) -> None:
    with pytest.raises(NotOwned) as refused:
        checks.read_object("data", THEIRS, "lists/accounts.json", max_bytes=1024)
    assert refused.value.resource.field == "map.over" and refused.value.team == "data"
    with pytest.raises(NotOwned):
        checks.object_exists("data", THEIRS, "lists/accounts.json")
