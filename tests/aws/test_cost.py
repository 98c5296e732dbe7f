"""Cost grows with work, not with registered jobs: a tick reads only the due jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobsched.adapters.aws.dynamo import to_item
from jobsched.adapters.items import job_state_values
from jobsched.core.records import StoredJob
from jobsched.core.spec import JobSpec
from tests.aws.harness import Clock, Stack


def test_a_tick_over_10000_registered_jobs_with_10_due_examines_about_10_items(stack: Stack, clock: Clock) -> None:
    now = clock()
    items: list[dict[str, Any]] = []
    for index in range(10_000):
        spec = JobSpec.model_validate(
            {
                "name": f"job-{index:05d}",
                "team": "bulk",
                "schedule": {"expression": "0 9 * * *"},
                "target": {"type": "callback"},
            }
        )
        stored = StoredJob(spec, 1, "ACTIVE", now, now, "bulk-load")
        # Ten due at 09:00 today; the rest tomorrow (idle, but registered and active).
        next_fire = now + timedelta(minutes=1) if index % 1000 == 0 else now + timedelta(days=1, minutes=1)
        items.append(to_item(stored.to_values()))
        items.append(to_item(job_state_values(spec.key, 1, now, next_fire)))
    for start in range(0, len(items), 25):
        stack.dynamodb.batch_write_item(
            RequestItems={stack.jobs_table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]}
        )
    examined = {"Query": 0, "BatchGetItem": 0, "Scan": 0, "GetItem": 0}

    def count(model: Any, parsed: Any, **_: Any) -> None:
        name = model.name
        if name == "Query":
            examined[name] += parsed.get("ScannedCount", 0)
        elif name == "BatchGetItem":
            examined[name] += sum(len(v) for v in parsed.get("Responses", {}).values())
        elif name in examined:
            examined[name] += 1

    stack.dynamodb.meta.events.register("after-call.dynamodb", count)
    report = stack.tick()
    assert report.due_jobs == 10 and report.advanced == 10
    # The due index, then each due job's spec and audit mark (STATE, keys only): 2 items per due job; the timing
    # wheel's marks (one item) and its slots since (empty: daily jobs wait on the due index).
    assert examined == {"Query": 10, "BatchGetItem": 20, "Scan": 0, "GetItem": 1}, examined
