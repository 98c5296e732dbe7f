"""#51: moving a live stage onto new tables, a key at a time (adapters.aws.moves). Each key has one home at every
instant: the old table's until its item is marked, the new table's after. These tests hold the protocol to that
through a crash after each of a move's writes, a process still writing the old way after a key moved, a delete
racing an unfinished copy, listings that span both tables, and a copier stopped and resumed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from jobsched.adapters.aws.dynamo import every_item, from_item, to_item
from jobsched.adapters.aws.moves.client import MovingClient, table_pairs
from jobsched.adapters.aws.moves.conditions import UndecidedCondition, holds_for_absent_item
from jobsched.adapters.aws.moves.copier import TableMover
from jobsched.adapters.aws.moves.phase import LEAD, SETTLE, Mode, PhaseReader
from jobsched.core.names import JOBS_TABLE, MOVE_COPIED, MOVE_COPYING, MOVE_MARK, RUNS_TABLE, JobsKeys
from tests.aws.harness import REGION, Clock, Crash

NEW_JOBS, NEW_RUNS, OLD_JOBS, OLD_RUNS = "t-Jobs2", "t-Runs2", "t-Jobs", "t-Runs"


class Moves:
    """Four tables in moto, and as many processes (clients with their own phase cache) as a test makes."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.raw = boto3.client("dynamodb", region_name=REGION)
        for definition, name in (
            (JOBS_TABLE, NEW_JOBS),
            (RUNS_TABLE, NEW_RUNS),
            (JOBS_TABLE, OLD_JOBS),
            (RUNS_TABLE, OLD_RUNS),
        ):
            self.raw.create_table(**definition.create_table_kwargs(name))
        self.pairs = table_pairs(NEW_JOBS, NEW_RUNS, OLD_JOBS, OLD_RUNS)
        self.jobs = self.pairs[0]

    def process(self, db: Any = None) -> MovingClient:
        return MovingClient(db or self.raw, self.pairs, PhaseReader(db or self.raw, NEW_JOBS, self.clock))

    def mover(self, db: Any = None) -> TableMover:
        return TableMover(self.process(db), self.raw, self.pairs, NEW_JOBS)

    def start_moving(self) -> None:
        """Announce the move and let the lead pass (every process then moves keys on first touch)."""
        self.mover().announce(self.clock())
        self.clock.advance(LEAD)

    def item(self, table: str, pk: str, sk: str) -> dict[str, Any] | None:
        asked = rkey(pk, sk) if table in (OLD_RUNS, NEW_RUNS) else key(pk, sk)
        found = self.raw.get_item(TableName=table, Key=asked, ConsistentRead=True).get("Item")
        return from_item(found) if found else None


def key(pk: str, sk: str) -> dict[str, Any]:
    return to_item({"pk": pk, "sk": sk})


def rkey(job: str, run_id: str) -> dict[str, Any]:
    return to_item({"job": job, "run_id": run_id})


@pytest.fixture
def moves(clock: Clock) -> Iterator[Moves]:
    with mock_aws():
        yield Moves(clock)


class CrashAfter:
    """A DynamoDB client that dies right after its ``n``-th call of ``operation`` (the call itself succeeds)."""

    def __init__(self, db: Any, operation: str, n: int) -> None:
        self.db, self.operation, self.left = db, operation, n

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.db, name)
        if name != self.operation:
            return call

        def counted(**request: Any) -> Any:
            answer = call(**request)
            self.left -= 1
            if self.left == 0:
                raise Crash(name)
            return answer

        return counted


def test_before_the_move_every_call_goes_to_the_old_tables(moves: Moves) -> None:
    db = moves.process()
    db.put_item(TableName=NEW_JOBS, Item=to_item({"pk": "a", "sk": "SPEC", "v": 1}))
    db.update_item(
        TableName=NEW_JOBS,
        Key=key("a", "SPEC"),
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"N": "2"}},
    )
    assert moves.item(OLD_JOBS, "a", "SPEC") == {"pk": "a", "sk": "SPEC", "v": 2}
    assert moves.item(NEW_JOBS, "a", "SPEC") is None
    assert from_item(db.get_item(TableName=NEW_JOBS, Key=key("a", "SPEC"))["Item"]) == {"pk": "a", "sk": "SPEC", "v": 2}


def test_an_announced_move_starts_at_its_instant_in_every_process_whatever_each_cached(moves: Moves) -> None:
    early = moves.process()
    assert early.phases.mode() is Mode.OLD  # read (no move yet) and cached for a minute
    phase = moves.mover().announce(moves.clock())
    assert phase.moving_from == moves.clock() + LEAD
    moves.clock.advance(timedelta(seconds=59))
    assert early.phases.mode() is Mode.OLD  # still the cached "no move": but the next read comes before the instant
    moves.clock.advance(timedelta(seconds=1))
    assert early.phases.mode() is Mode.OLD  # read again: the move is announced, not yet begun
    moves.clock.advance(LEAD - timedelta(seconds=60))
    assert early.phases.mode() is Mode.MOVING  # from the cached phase, at its instant
    assert moves.mover().announce(moves.clock()).moving_from == phase.moving_from  # announcing again changes nothing


def test_a_key_moves_on_first_touch_and_its_old_item_is_fenced(moves: Moves) -> None:
    moves.raw.put_item(TableName=OLD_JOBS, Item=to_item({"pk": "a", "sk": "STATE", "cursor": "c1"}))
    moves.start_moving()
    db = moves.process()
    got = from_item(db.get_item(TableName=NEW_JOBS, Key=key("a", "STATE"))["Item"])
    assert got == {"pk": "a", "sk": "STATE", "cursor": "c1"}
    assert moves.item(NEW_JOBS, "a", "STATE") == got
    assert moves.item(OLD_JOBS, "a", "STATE") == got | {MOVE_MARK: MOVE_COPIED}
    # A key that was nowhere: the old table gets a bare marked item, so no old-way writer creates it there.
    db.put_item(TableName=NEW_JOBS, Item=to_item({"pk": "b", "sk": "SPEC", "v": 1}))
    assert moves.item(OLD_JOBS, "b", "SPEC") == {"pk": "b", "sk": "SPEC", MOVE_MARK: MOVE_COPIED}


@pytest.mark.parametrize(("operation", "n"), [("update_item", 1), ("put_item", 1), ("update_item", 2)])
def test_a_crash_after_any_write_of_a_move_is_finished_by_the_next_touch(moves: Moves, operation: str, n: int) -> None:
    moves.raw.put_item(TableName=OLD_RUNS, Item=to_item({"job": "job", "run_id": "run-1", "status": "RUNNING"}))
    moves.start_moving()
    with pytest.raises(Crash):
        moves.process(CrashAfter(moves.raw, operation, n)).get_item(TableName=NEW_RUNS, Key=rkey("job", "run-1"))
    db = moves.process()
    db.update_item(
        TableName=NEW_RUNS,
        Key=rkey("job", "run-1"),
        UpdateExpression="SET #s = :done",
        ConditionExpression="#s = :running",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":done": {"S": "SUCCEEDED"}, ":running": {"S": "RUNNING"}},
    )
    assert moves.item(NEW_RUNS, "job", "run-1") == {"job": "job", "run_id": "run-1", "status": "SUCCEEDED"}
    old = moves.item(OLD_RUNS, "job", "run-1")
    assert old is not None and old["status"] == "RUNNING"  # frozen where it was; the new table's is the item
    assert old[MOVE_MARK] in (MOVE_COPYING, MOVE_COPIED)


def test_a_process_still_writing_the_old_way_is_fenced_and_its_write_lands_in_the_new_table(moves: Moves) -> None:
    moves.raw.put_item(TableName=OLD_JOBS, Item=to_item({"pk": "a", "sk": "STATE", "version": 1}))
    stale = moves.process()
    assert stale.phases.mode() is Mode.OLD  # cached before the move was announced
    moves.start_moving()
    moves.process().get_item(TableName=NEW_JOBS, Key=key("a", "STATE"))  # another process moved the key
    stale.phases._read_at = moves.clock()
    stale.phases._phase = None
    stale.update_item(
        TableName=NEW_JOBS,
        Key=key("a", "STATE"),
        UpdateExpression="SET version = :two",
        ConditionExpression="version = :one",
        ExpressionAttributeValues={":one": {"N": "1"}, ":two": {"N": "2"}},
    )
    assert moves.item(NEW_JOBS, "a", "STATE") == {"pk": "a", "sk": "STATE", "version": 2}
    assert moves.item(OLD_JOBS, "a", "STATE")["version"] == 1  # type: ignore[index]
    assert stale.phases.mode() is Mode.MOVING  # it saw the mark: the move is on for it too
    # A claim: the new way created it; the old way's create of the same key fails as it must.
    moves.process().put_item(
        TableName=NEW_RUNS, Item=to_item({"job": "j", "run_id": "r"}), ConditionExpression="attribute_not_exists(job)"
    )
    late = moves.process()
    late.phases._read_at, late.phases._phase = moves.clock(), None
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        late.put_item(
            TableName=NEW_RUNS,
            Item=to_item({"job": "j", "run_id": "r"}),
            ConditionExpression="attribute_not_exists(job)",
        )


def test_a_deleted_key_stays_deleted_though_its_copy_was_never_marked_finished(moves: Moves) -> None:
    moves.raw.put_item(TableName=OLD_RUNS, Item=to_item({"job": "job", "run_id": "run-1", "status": "RUNNING"}))
    moves.start_moving()
    with pytest.raises(Crash):  # copied, never marked copied
        moves.process(CrashAfter(moves.raw, "put_item", 1)).get_item(TableName=NEW_RUNS, Key=rkey("job", "run-1"))
    db = moves.process()
    db.delete_item(TableName=NEW_RUNS, Key=rkey("job", "run-1"), ConditionExpression="attribute_exists(job)")
    assert moves.item(OLD_RUNS, "job", "run-1")[MOVE_MARK] == MOVE_COPYING  # type: ignore[index]
    assert db.get_item(TableName=NEW_RUNS, Key=rkey("job", "run-1")) == {}
    assert (
        list(
            every_item(
                db,
                TableName=NEW_RUNS,
                KeyConditionExpression="job = :j",
                ExpressionAttributeValues={":j": {"S": "job"}},
            )
        )
        == []
    )
    assert moves.item(OLD_RUNS, "job", "run-1")[MOVE_MARK] == MOVE_COPIED  # type: ignore[index]  # finished by the listing
    # Over the tombstone, writes answer as over no item.
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        db.update_item(
            TableName=NEW_RUNS,
            Key=rkey("job", "run-1"),
            UpdateExpression="SET #s = :s",
            ConditionExpression="attribute_exists(job)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "SUCCEEDED"}},
        )
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        db.delete_item(TableName=NEW_RUNS, Key=rkey("job", "run-1"), ConditionExpression="attribute_exists(job)")
    db.update_item(
        TableName=NEW_RUNS,
        Key=rkey("job", "run-1"),
        UpdateExpression="ADD attempts :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    assert moves.item(NEW_RUNS, "job", "run-1") == {"job": "job", "run_id": "run-1", "attempts": 1}


def test_listings_span_both_tables_each_item_once(moves: Moves) -> None:
    for n in range(5):
        moves.raw.put_item(TableName=OLD_RUNS, Item=to_item({"job": "job", "run_id": f"run-{n}", "n": n}))
    moves.start_moving()
    db = moves.process()
    for n in (0, 3):
        db.get_item(TableName=NEW_RUNS, Key=rkey("job", f"run-{n}"))  # moved
    for n in (5, 6, 7):
        db.put_item(TableName=NEW_RUNS, Item=to_item({"job": "job", "run_id": f"run-{n}", "n": n}))
    db.delete_item(TableName=NEW_RUNS, Key=rkey("job", "run-4"))
    query: dict[str, Any] = {
        "TableName": NEW_RUNS,
        "KeyConditionExpression": "job = :j",
        "ExpressionAttributeValues": {":j": {"S": "job"}},
    }
    for limit in (None, 1, 2, 3, 10):
        limited: dict[str, Any] = {"Limit": limit} if limit else {}
        found = list(every_item(db, **query, **limited))
        assert sorted(item["n"] for item in found) == [0, 1, 2, 3, 5, 6, 7], limit
        assert all(set(item) == {"job", "run_id", "n"} for item in found)
    assert db.query(**query, Select="COUNT")["Count"] == 7
    # A query of the table itself reads in key order across both tables, as one table would: newest first here.
    for limit in (1, 2, 3, 10):
        newest = [item["n"] for item in every_item(db, **query, ScanIndexForward=False, Limit=limit)]
        assert newest == [7, 6, 5, 3, 2, 1, 0], limit
    [latest] = db.query(**query, ScanIndexForward=False, Limit=1)["Items"]
    assert from_item(latest)["n"] == 7  # the latest run is the latest, wherever it lives
    projected = list(every_item(db, **query, ProjectionExpression="run_id"))
    assert sorted(item["run_id"] for item in projected) == [f"run-{n}" for n in (0, 1, 2, 3, 5, 6, 7)]
    assert all(set(item) == {"run_id"} for item in projected)
    first = db.query(**query, Limit=2)
    # Limit counts items read, as DynamoDB's does (a moved old item is read, then left out): a cursor goes on.
    assert len(first["Items"]) <= 2 and "LastEvaluatedKey" in first


def test_an_index_listing_leaves_out_a_moved_item_though_the_index_does_not_project_its_mark(moves: Moves) -> None:
    """The due index projects only the cursor and version: a moved STATE item's old index entry (its cursor frozen
    where it was) must not be read as due, or the dispatcher sends its instants again."""
    for n in range(4):
        state = {"pk": f"t/j{n}", "sk": "STATE", "due_shard": 0, "next_fire_at": "2027-01-04T09:00:00Z"}
        moves.raw.put_item(
            TableName=OLD_JOBS, Item=to_item(state | {"cursor": "2027-01-04T08:00:00Z", "spec_version": 1})
        )
    moves.start_moving()
    db = moves.process()
    db.update_item(  # j0 and j1 moved and visited: due later now
        TableName=NEW_JOBS,
        Key=key("t/j0", "STATE"),
        UpdateExpression="SET next_fire_at = :later, #c = :c",
        ExpressionAttributeNames={"#c": "cursor"},
        ExpressionAttributeValues={":later": {"S": "2027-01-04T10:00:00Z"}, ":c": {"S": "2027-01-04T09:00:00Z"}},
    )
    db.get_item(TableName=NEW_JOBS, Key=key("t/j1", "STATE"))
    due: dict[str, Any] = {
        "TableName": NEW_JOBS,
        "IndexName": JobsKeys.DUE_INDEX,
        "KeyConditionExpression": "due_shard = :shard AND next_fire_at <= :until",
        "ExpressionAttributeValues": {":shard": {"N": "0"}, ":until": {"S": "2027-01-04T09:30:00Z"}},
    }
    listed = [item["pk"] for item in every_item(db, **due)]
    assert sorted(listed) == ["t/j1", "t/j2", "t/j3"]  # j1 once (from the global table), j0 not due any more
    assert db.query(**due, Select="COUNT")["Count"] == 3


def test_an_index_listings_cursor_is_always_a_key_the_caller_can_read(moves: Moves) -> None:
    """A team's jobs by name, a page at a time (the API's cursor is the last key's name): at the page where the old
    table runs out, the cursor is still a key, and the listing goes on with no job twice or left out."""
    for n in range(3):
        spec = {"pk": f"t/old{n}", "sk": "SPEC", JobsKeys.TEAM: "t", JobsKeys.NAME: f"old{n}"}
        moves.raw.put_item(TableName=OLD_JOBS, Item=to_item(spec))
    moves.start_moving()
    db = moves.process()
    for n in range(2):
        spec = {"pk": f"t/new{n}", "sk": "SPEC", JobsKeys.TEAM: "t", JobsKeys.NAME: f"new{n}"}
        db.put_item(TableName=NEW_JOBS, Item=to_item(spec))
    for limit in (1, 2, 3, 4, 5, 6):
        listed: list[str] = []
        request: dict[str, Any] = {
            "TableName": NEW_JOBS,
            "IndexName": JobsKeys.TEAM_INDEX,
            "KeyConditionExpression": "#team = :team",
            "ExpressionAttributeNames": {"#team": JobsKeys.TEAM},
            "ExpressionAttributeValues": {":team": {"S": "t"}},
            "Limit": limit,
        }
        for _ in range(20):
            page = db.query(**request)
            assert len(page["Items"]) <= limit
            listed += [from_item(item)[JobsKeys.NAME] for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            assert JobsKeys.NAME in page["LastEvaluatedKey"], (limit, page["LastEvaluatedKey"])
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        assert sorted(listed) == ["new0", "new1", "old0", "old1", "old2"], limit


def test_a_stale_copy_in_the_old_table_is_finished_by_a_listing_before_it_reads_the_new(moves: Moves) -> None:
    moves.raw.put_item(TableName=OLD_RUNS, Item=to_item({"job": "job", "run_id": "run-1", "n": 1}))
    moves.start_moving()
    with pytest.raises(Crash):  # marked, not copied: in neither table's listing until a move finishes it
        moves.process(CrashAfter(moves.raw, "update_item", 1)).get_item(TableName=NEW_RUNS, Key=rkey("job", "run-1"))
    query: dict[str, Any] = {
        "TableName": NEW_RUNS,
        "KeyConditionExpression": "job = :j",
        "ExpressionAttributeValues": {":j": {"S": "job"}},
    }
    assert [item["n"] for item in every_item(moves.process(), **query)] == [1]


def test_the_copier_moves_everything_resumes_after_a_crash_and_clears_tombstones(moves: Moves) -> None:
    for n in range(23):
        moves.raw.put_item(TableName=OLD_RUNS, Item=to_item({"job": f"job-{n % 4}", "run_id": f"run-{n}", "n": n}))
        moves.raw.put_item(TableName=OLD_JOBS, Item=to_item({"pk": f"job-{n}", "sk": "STATE", "n": n}))
    mover = moves.mover()
    assert mover.step(moves.clock()).phase == "not started"
    moves.start_moving()
    waiting = mover.step(moves.clock())
    assert waiting.wait_until is not None and waiting.moved == 0  # an old-way write may still be under way
    moves.clock.set(waiting.wait_until.isoformat())
    db = moves.process()
    db.delete_item(TableName=NEW_JOBS, Key=key("job-0", "STATE"))  # a tombstone for the clean-up to clear
    with pytest.raises(Crash):
        moves.mover(CrashAfter(moves.raw, "put_item", 3)).step(moves.clock(), page=5)
    steps = 0
    while (step := moves.mover().step(moves.clock(), page=5)).phase != "clean":
        steps += 1
        assert steps < 100
        if step.wait_until:
            assert step.phase == "done"
            moves.clock.set(step.wait_until.isoformat())
    for n in range(23):
        assert moves.item(NEW_RUNS, f"job-{n % 4}", f"run-{n}") == {"job": f"job-{n % 4}", "run_id": f"run-{n}", "n": n}
        assert moves.item(OLD_RUNS, f"job-{n % 4}", f"run-{n}")[MOVE_MARK] == MOVE_COPIED  # type: ignore[index]
    assert moves.item(NEW_JOBS, "job-0", "STATE") is None  # the delete held, and its tombstone is gone
    assert moves.item(NEW_JOBS, "job-1", "STATE") == {"pk": "job-1", "sk": "STATE", "n": 1}
    assert moves.process().phases.mode() is Mode.CLEAN
    assert timedelta(seconds=60) < SETTLE


def test_a_stage_installed_with_the_new_tables_has_nothing_to_move(moves: Moves) -> None:
    fresh = PhaseReader(moves.raw, NEW_JOBS, moves.clock, previous_tables=(OLD_JOBS, OLD_RUNS))
    assert fresh.mode() is Mode.CLEAN
    phase = moves.mover().phase()
    assert phase is not None and phase.phase == "clean"  # recorded: every process reads the same from now on
    db = moves.process()
    db.put_item(TableName=NEW_JOBS, Item=to_item({"pk": "a", "sk": "SPEC"}))
    assert moves.item(NEW_JOBS, "a", "SPEC") == {"pk": "a", "sk": "SPEC"}  # as it is: no mark, no tombstone
    assert moves.item(OLD_JOBS, "a", "SPEC") is None


def test_a_stage_deployed_before_waits_for_its_move(moves: Moves) -> None:
    moves.raw.put_item(TableName=OLD_JOBS, Item=to_item({"pk": "SWEEP", "sk": "Jobs"}))
    reader = PhaseReader(moves.raw, NEW_JOBS, moves.clock, previous_tables=(OLD_JOBS, OLD_RUNS))
    assert reader.mode() is Mode.OLD
    assert moves.mover().phase() is None


@pytest.mark.parametrize(
    ("condition", "values", "holds"),
    [
        ("attribute_not_exists(pk)", {}, True),
        ("attribute_exists(#run) AND #s = :v", {":v": {"S": "RUNNING"}}, False),
        ("NOT (#a = :v)", {":v": {"N": "1"}}, True),
        ("attribute_not_exists(a) OR a < :n", {":n": {"N": "3"}}, True),
        ("spec_version < :v", {":v": {"N": "4"}}, False),
        ("#x IN (:a, :b)", {":a": {"S": "1"}, ":b": {"S": "2"}}, False),
        ("size(#l) < :n AND begins_with(sk, :p)", {":n": {"N": "2"}, ":p": {"S": "x"}}, False),
        (
            "(attribute_not_exists(x) AND NOT contains(#t, :v)) OR x BETWEEN :a AND :b",
            {":v": {"S": "t"}, ":a": {"N": "1"}, ":b": {"N": "2"}},
            True,
        ),
    ],
)
def test_what_a_condition_says_of_no_item(condition: str, values: dict[str, Any], holds: bool) -> None:
    assert holds_for_absent_item(condition, values) is holds


def test_a_condition_whose_answer_on_no_item_is_unsure_is_refused() -> None:
    with pytest.raises(UndecidedCondition):
        holds_for_absent_item("status <> :v", {":v": {"S": "x"}})
    with pytest.raises(UndecidedCondition):
        holds_for_absent_item("a = ", {})


def test_the_commands_pages_and_waits_are_the_moves() -> None:
    """The CLI names them without importing the adapters (it starts without boto3)."""
    from jobsched.adapters.aws.moves import copier, phase
    from jobsched.cli import tables

    assert (tables.PAGE, tables.LEAD, tables.SETTLE) == (copier.PAGE, phase.LEAD, phase.SETTLE)
