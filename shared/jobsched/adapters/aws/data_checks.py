"""The team's objects, on a bucket checked to be the team's, read as the team: whether an object a run waits for
is there (HeadObject), and the object a distributed map runs over (its size first, then its bytes).

The bucket's tags are read (cached) before every check, as a target's are before every call: a bucket
re-tagged to another team since the job was stored is refused (``NotOwned``), never read.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.item_lists import too_large
from jobsched.tenancy.ownership import OwnershipGuard, ResourceKind, ResourceRef

ABSENT = {"404", "NoSuchKey", "NotFound"}


class S3DataChecks:
    def __init__(self, sessions: TeamSessions, guard: OwnershipGuard) -> None:
        self.sessions, self.guard = sessions, guard

    def object_exists(self, team: str, bucket: str, key: str) -> bool:
        self.guard.check(ResourceRef(ResourceKind.BUCKET, bucket, "wait_for.s3"), team)
        try:
            self.sessions.client(team, "s3").head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code", "")) in ABSENT:
                return False
            raise
        return True

    def read_object(self, team: str, bucket: str, key: str, *, max_bytes: int) -> bytes | None:
        self.guard.check(ResourceRef(ResourceKind.BUCKET, bucket, "map.over"), team)
        s3 = self.sessions.client(team, "s3")
        try:
            size = int(s3.head_object(Bucket=bucket, Key=key)["ContentLength"])
            if size > max_bytes:
                raise too_large(size, max_bytes)
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code", "")) in ABSENT:
                return None
            raise
        data: bytes = body.read(max_bytes + 1)  # replaced since HeadObject: still never more than this
        if len(data) > max_bytes:
            raise too_large(None, max_bytes)
        return data
