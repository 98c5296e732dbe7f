"""Team limits (parsed once, refused when malformed) and the fair order of a tick's messages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.adapters.aws.queues import WorkQueues
from jobsched.core.limits import TeamLimits
from jobsched.core.runs import RunMessage
from jobsched.tenancy.quotas import interleave_teams
from tests.helpers import utc

NOW = timedelta(0)


def test_defaults_are_on_and_overrides_replace_only_what_they_name() -> None:
    limits = TeamLimits.parse('{"max_running": 50}')
    assert limits.max_running == 50 and limits.max_jobs == TeamLimits().max_jobs
    assert TeamLimits.parse(None) == TeamLimits() and TeamLimits().max_running == 20
    assert limits.with_overrides({"max_running": None}).max_running == 50, "None keeps what was there"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_runing": 5}, "unknown team limit"),
        ({"max_running": 0}, "at least 1"),
        ({"max_running": 2.5}, "whole number"),
        ({"max_running": True}, "whole number"),
        ({"max_jobs": "10"}, "whole number"),
    ],
)
def test_a_malformed_limit_is_refused_with_the_reason(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TeamLimits().with_overrides(overrides)


def test_every_teams_kth_message_comes_before_any_teams_next_one_at_each_instant() -> None:
    later = timedelta(seconds=30)
    sent = [("a", NOW)] * 4 + [("b", NOW), ("c", NOW), ("c", NOW)] + [("a", later), ("b", later)]
    order = interleave_teams(sent, team=lambda item: item[0], due_in=lambda item: item[1])
    assert [team for team, _ in order] == ["a", "b", "c", "a", "c", "a", "a", "a", "b"]
    assert [due for _, due in order] == [NOW] * 7 + [later] * 2


def test_a_thousand_messages_of_one_team_put_one_ahead_of_another_teams_first() -> None:
    sent = [("bulk", NOW)] * 1000 + [("canary", NOW)]
    order = interleave_teams(sent, team=lambda item: item[0], due_in=lambda item: item[1])
    assert [team for team, _ in order].index("canary") == 1


def test_run_messages_carry_their_team_as_the_fair_queue_group() -> None:
    class RecordingSqs:
        def __init__(self) -> None:
            self.entries: list[dict[str, Any]] = []

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.entries += Entries
            return {}

    sqs = RecordingSqs()
    at = utc("2027-01-04T09:00Z")
    message = RunMessage.scheduled(job="payments/ledger", team="payments", at=at, fire_at=at, spec_version=1)
    assert WorkQueues({"normal": "https://sqs/normal"}, sqs).send_each("normal", [(message, NOW)]) == set()
    assert sqs.entries[0]["MessageGroupId"] == "payments"


def test_a_run_that_finds_its_slots_full_looks_again_soon_then_every_30_seconds() -> None:
    from jobsched.pipeline.claiming import slot_wait, waiting_for_slots

    assert [slot_wait(n).total_seconds() for n in range(9)] == [1, 1, 2, 4, 8, 16, 30, 30, 30]
    at = utc("2027-01-04T09:00:00Z")
    message = RunMessage.scheduled(job="t/j", team="t", at=at, fire_at=at, spec_version=1)
    first = waiting_for_slots(message, "full")
    assert first.wait == timedelta(seconds=1) and isinstance(first.resend, RunMessage)
    assert first.resend.slot_waits == 1
    assert first.resend.model_copy(update={"slot_waits": 0}) == message, "nothing else of the run changes"
