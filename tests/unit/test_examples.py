"""The example target functions deployed with dev stages and used by the local runtime."""

from __future__ import annotations

import pytest

from functions.examples import echo, flaky, sleep


def envelope(attempt: int) -> dict[str, object]:
    return {"run_id": "20270104T100000Z", "attempt": attempt}


def test_echo_returns_its_input() -> None:
    event = {"jobsched": envelope(1), "payload": {"a": 1}}
    assert echo.handler(event, None) == {"echo": event}


def test_flaky_fails_the_first_attempts_then_succeeds() -> None:
    for attempt in (1, 2):
        with pytest.raises(flaky.FlakyFailure, match=f"attempt {attempt}"):
            flaky.handler({"jobsched": envelope(attempt), "payload": {"fail_times": 2}}, None)
    assert flaky.handler({"jobsched": envelope(3), "payload": {"fail_times": 2}}, None)["succeeded_on_attempt"] == 3


def test_sleep_sleeps() -> None:
    assert sleep.handler({"jobsched": envelope(1), "payload": {"seconds": 0.05}}, None) == {"slept_seconds": 0.05}
