"""Emergency stops on the Jobs table: kept whole, read back, resumed once (a second resume is refused)."""

from __future__ import annotations

from dataclasses import replace

from jobsched.core.runs import parse_instant
from jobsched.core.stops import Selector, Stop
from tests.contract.conftest import Stores

AT = parse_instant("2027-01-04T09:00:00Z")


def test_a_stop_is_kept_whole_and_resumed_once(stores: Stores) -> None:
    jobs = stores.jobs
    stop = Stop(
        "stop-20270104T090000Z-abcdef",
        "INC-7",
        "arn:aws:iam::123456789012:role/team-ops",
        AT,
        Selector(("ops", "data"), {"warehouse": "true"}, ("ecs",)),
        stopped=("ops/a", "data/b"),
        already_paused=("ops/c",),
        cancelled=("ops/a 20270104T080000Z",),
    )
    assert jobs.get_stop(stop.stop_id) is None
    jobs.put_stop(stop)
    assert jobs.get_stop(stop.stop_id) == stop
    resumed = replace(stop, resumed_at=AT, resumed_by="alice", catchup="all", resumed=({"job": "ops/a"},))
    assert jobs.resume_stop_once(resumed)
    assert not jobs.resume_stop_once(resumed)
    assert jobs.get_stop(stop.stop_id) == resumed
    assert not jobs.resume_stop_once(replace(resumed, stop_id="stop-20270104T090000Z-000000"))  # no such stop
