"""The IncidentsPort, RegistryPort and TriggerStorePort contracts, for every adapter (moto and memory)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.core.records import StoredIncident, VersionConflict
from jobsched.core.runs import parse_instant
from tests.contract.conftest import Stores
from tests.contract.test_jobs_port import create

T0 = parse_instant("2027-01-04T09:00:00Z")
SUBJECT = "payments/job"


def incident(failures: int = 1) -> StoredIncident:
    values = {"subject": SUBJECT, "incident_class": "failing", "opened_at": "2027-01-04T09:00:00Z"}
    return StoredIncident(values | {"first_kind": "run_failed", "failures": failures}, unsent='[{"page": 1}]')


def test_an_incident_is_written_at_the_version_read_and_its_outbox_cleared_once_sent(stores: Stores) -> None:
    first = stores.jobs.put_incident(incident(), expected_version=0)
    assert first.version == 1
    with pytest.raises(VersionConflict):
        stores.jobs.put_incident(incident(), expected_version=0)  # opened concurrently by another event
    second = stores.jobs.put_incident(incident(failures=2), expected_version=1)
    with pytest.raises(VersionConflict):
        stores.jobs.put_incident(incident(failures=3), expected_version=1)
    stored = stores.jobs.get_incident(SUBJECT, "failing")
    assert stored is not None and stored.version == 2 and stored.incident.failures == 2 and stored.unsent
    stores.jobs.clear_incident_outbox(first)  # an old version's clear changes nothing
    assert (stores.jobs.get_incident(SUBJECT, "failing") or first).unsent
    stores.jobs.clear_incident_outbox(second)
    cleared = stores.jobs.get_incident(SUBJECT, "failing")
    assert cleared is not None and cleared.unsent is None and [i.version for i in stores.jobs.incidents(SUBJECT)] == [2]
    resolved = stores.jobs.put_incident(
        StoredIncident(cleared.values, cleared.version, None, resolved=True), expected_version=2
    )
    stores.jobs.clear_incident_outbox(resolved)  # a resolved incident goes once its notices are out
    assert stores.jobs.get_incident(SUBJECT, "failing") is None and stores.jobs.incidents(SUBJECT) == []


def test_a_deleted_job_takes_its_state_and_incidents_with_it(stores: Stores) -> None:
    stored = create(stores)
    create(stores, "other")
    assert stores.jobs.count_team_jobs("payments", at_least=10) == 2
    assert stores.jobs.count_team_jobs("payments", at_least=1) >= 1  # enough to say the limit is reached
    assert stores.jobs.count_team_jobs("search", at_least=10) == 0
    listed: list[str] = []
    after: str | None = None
    pages = 0
    while pages == 0 or after is not None:  # DynamoDB may end a full page with a token and then an empty page
        page, after = stores.jobs.team_page("payments", limit=1, after_name=after)
        listed, pages = listed + page, pages + 1
    assert listed == sorted([SUBJECT, "payments/other"]) and pages >= 2
    assert stores.jobs.team_page("search", limit=10, after_name=None) == ([], None)
    stores.jobs.put_incident(incident(), expected_version=0)
    with pytest.raises(VersionConflict):
        stores.jobs.delete(stored.changed_to(stored.spec, now=T0, principal="bob"), now=T0, principal="bob")
    stores.jobs.delete(stored, now=T0, principal="bob")
    stores.jobs.drop_incidents(SUBJECT)
    assert stores.jobs.get(SUBJECT) is None and stores.jobs.get_state(SUBJECT) is None
    assert stores.jobs.incidents(SUBJECT) == [] and stores.jobs.count_team_jobs("payments", at_least=10) == 1


def test_an_idempotency_key_names_the_run_of_the_first_request(stores: Stores) -> None:
    first = stores.jobs.reserve_idempotency_key(SUBJECT, "k1", run_id="run-1", now=T0, principal="alice")
    again = stores.jobs.reserve_idempotency_key(SUBJECT, "k1", run_id="run-2", now=T0, principal="alice")
    other = stores.jobs.reserve_idempotency_key(SUBJECT, "k2", run_id="run-3", now=T0, principal="alice")
    assert (first, again, other) == ("run-1", "run-1", "run-3")


def test_every_change_and_action_is_in_the_jobs_history_newest_first(stores: Stores) -> None:
    stored = create(stores)
    paused = stores.jobs.set_state(
        stored, "PAUSED", now=T0, principal="bob", reason="maintenance", next_visit_at=None, cursor=T0
    )
    for seconds, action in ((1, "trigger"), (2, "cancel")):
        at = T0 + timedelta(seconds=seconds)
        stores.jobs.record_action(SUBJECT, version=paused.version, now=at, principal="eve", action=action)
    first, token = stores.jobs.history(SUBJECT, limit=2)
    assert [entry.action for entry in first] == ["cancel", "trigger"] and token is not None
    rest, _ = stores.jobs.history(SUBJECT, limit=10, before=token)
    assert [(entry.action, entry.principal) for entry in rest] == [("pause", "bob"), ("create", "alice")]
    assert rest[0].reason == "maintenance" and rest[1].spec is not None
