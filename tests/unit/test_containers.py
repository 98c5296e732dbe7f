"""What a stopped container task means for its run (pure): exit codes, ECS's stop codes, the failures that
another attempt cannot mend, and the run named by the task's environment."""

from __future__ import annotations

from jobsched.core.containers import TaskOutcome, attempt_token, short_name, stopped_result, task_outcome
from jobsched.pipeline.containers import run_named_by


def test_exit_zero_succeeds_and_any_other_code_fails_naming_the_container_and_the_reason() -> None:
    ok = stopped_result(TaskOutcome("STOPPED", {"etl": 0, "sidecar": 0}, stop_code="EssentialContainerExited"))
    assert ok.outcome == "succeeded" and ok.output == "exit codes: etl=0, sidecar=0"
    failed = stopped_result(
        TaskOutcome("STOPPED", {"etl": 3}, "Essential container in task exited", "EssentialContainerExited")
    )
    assert failed.outcome == "failed" and failed.retryable
    assert failed.error == "etl exited 3 (EssentialContainerExited: Essential container in task exited)"


def test_memory_kills_and_image_pulls_are_not_retried_and_capacity_is() -> None:
    oom = stopped_result(
        TaskOutcome("STOPPED", {"etl": 137}, container_reasons=("OutOfMemoryError: Container killed",))
    )
    assert not oom.retryable and oom.error is not None and oom.error.startswith("out of memory")
    pull = stopped_result(
        TaskOutcome("STOPPED", {"etl": None}, "CannotPullContainerError: pull access denied", "TaskFailedToStart")
    )
    assert not pull.retryable and "image could not be pulled" in (pull.error or "")
    spot = stopped_result(TaskOutcome("STOPPED", {"etl": None}, "Your Spot Task was interrupted.", "SpotInterruption"))
    assert spot.outcome == "failed" and spot.retryable and "no container exited" in (spot.error or "")
    never = stopped_result(TaskOutcome("STOPPED", {"etl": 0}, "ResourceInitializationError", "TaskFailedToStart"))
    assert never.outcome == "failed"  # a task that failed to start did not succeed, whatever a code says


def test_the_task_detail_and_the_run_it_names() -> None:
    detail = {
        "lastStatus": "STOPPED",
        "stopCode": "EssentialContainerExited",
        "containers": [{"name": "etl", "exitCode": 1, "reason": "boom"}],
        "overrides": {
            "containerOverrides": [
                {
                    "name": "etl",
                    "environment": [
                        {"name": "JOBSCHED_JOB", "value": "data/etl"},
                        {"name": "JOBSCHED_RUN_ID", "value": "20270104T090000Z"},
                        {"name": "JOBSCHED_ATTEMPT", "value": "2"},
                    ],
                }
            ]
        },
    }
    assert task_outcome(detail) == TaskOutcome("STOPPED", {"etl": 1}, "", "EssentialContainerExited", ("boom",))
    assert run_named_by(detail) == ("data/etl", "20270104T090000Z", 2)
    assert run_named_by({"overrides": {}}) is None
    assert (
        run_named_by(
            detail
            | {
                "overrides": {
                    "containerOverrides": [
                        {
                            "environment": [
                                {"name": "JOBSCHED_JOB", "value": "data/etl"},
                                {"name": "JOBSCHED_RUN_ID", "value": "r"},
                                {"name": "JOBSCHED_ATTEMPT", "value": "two"},
                            ]
                        }
                    ]
                }
            }
        )
        is None
    )


def test_an_attempts_token_is_short_stable_and_its_own() -> None:
    token = attempt_token("data/etl", "20270104T090000Z", 1)
    assert token == attempt_token("data/etl", "20270104T090000Z", 1) and len(token) <= 64
    assert token.startswith("jobsched-") and token != attempt_token("data/etl", "20270104T090000Z", 2)
    assert token != attempt_token("data/other", "20270104T090000Z", 1)
    assert (
        short_name("arn:aws:ecs:us-east-1:123456789012:cluster/data-batch") == "data-batch" == short_name("data-batch")
    )
