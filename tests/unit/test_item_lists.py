"""A distributed map's object, checked before Step Functions reads it: every refusal names what is allowed."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from jobsched.core.item_lists import (
    MAX_DISTRIBUTED_ITEMS,
    MAX_ITEM_BYTES,
    MAX_ITEMS_OBJECT_BYTES,
    BadItems,
    count_items,
    items_object,
)
from tests.helpers import AtOnce, on_threads


def test_a_json_list_and_a_csv_file_are_counted_as_step_functions_reads_them() -> None:
    assert count_items(json.dumps([{"n": 1}, 2, "three", None]).encode(), "json") == 4
    assert count_items(b"[]", "json") == 0
    assert count_items(b' \n[ {"a": [1, {"b": "]"}]} ,\t"x" ]\n', "json") == 2
    assert count_items(b"\xef\xbb\xbfaccount,region\r\n1,eu\r\n2,us\r\n", "csv") == 2  # a BOM, CRLF
    assert count_items(b'account,note\n1,"a, quoted\nline"\n', "csv") == 1  # a quoted field with a newline
    assert count_items(b"account,region\n1\n", "csv") == 1  # a short row: its missing fields are ""
    assert count_items(b"account,region\n", "csv") == 0


@pytest.mark.parametrize(
    ("data", "form", "error"),
    [
        (b'{"items": []}', "json", "holds a JSON object, not a list"),
        (b" 42", "json", "holds a JSON number, not a list"),
        (b"[1, 2", "json", "not JSON"),
        (b"[1 2]", "json", "expected , or ] at character 3"),
        (b"[1, 2] [3]", "json", "text after the list"),
        (b"<list/>", "json", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "json", "nests deeper than 64"),  # deep enough to exhaust a parser
        (b"[[" + b"[" * 70 + b"]" * 70 + b"]]", "json", "item 0 nests deeper than 64"),
        (b"[NaN]", "json", "item 0 cannot be read: NaN is not JSON"),
        (b'[1, {"a": 1e400}]', "json", "item 1 cannot be read: the number 1e400 is out of range"),
        (b"[" + b"9" * 5000 + b"]", "json", "item 0 cannot be read: an integer of 5000 digits"),
        (b'[{"k": "' + b"x" * 7_600_000 + b'"}]', "json", "item 0 is over 64 KB as text"),
        (b",".join(b"%d" % i for i in range(1_100_000))[: 8 * 1024 * 1024 - 16], "csv", "the CSV header is over 16 KB"),
        (b",".join(b"c%d" % i for i in range(5_000)), "csv", "the CSV header is over 16 KB"),
        (b",".join(b"c%d" % i for i in range(1_500)), "csv", "the CSV header names 1500 columns"),
        (b'a\n"' + b"x\n" * 10_000 + b'"\n', "csv", "CSV row 2 is over 16 KB"),  # one quoted field over many lines
        (b"\xff\xfe[]", "json", "not UTF-8"),
        (b"", "csv", "no header row"),
        (b"a,a\n1,2\n", "csv", "names a column twice"),
        (b"a,b\n1,2,3\n", "csv", "row 2 has 3 fields; the header names 2"),
        (b"a,b\n1,2\n\n3,4\n", "csv", "row 3 is empty"),
        (json.dumps(list(range(MAX_DISTRIBUTED_ITEMS + 1))).encode(), "json", f"at most {MAX_DISTRIBUTED_ITEMS}"),
        (b"[" + b"{}," * 2_000_000 + b"{}]", "json", f"more than {MAX_DISTRIBUTED_ITEMS} items"),  # stops early
        (json.dumps(["x" * MAX_ITEM_BYTES]).encode(), "json", "item 0 is"),
        (b" " * (MAX_ITEMS_OBJECT_BYTES + 1), "json", "at most 8 MB"),
    ],
)
def test_what_a_map_cannot_run_over_is_refused_with_why(data: bytes, form: str, error: str) -> None:
    with pytest.raises(BadItems, match=error.replace("(", r"\(")):
        count_items(data, form)  # type: ignore[arg-type]


def test_only_an_s3_uri_of_a_valid_bucket_names_the_object() -> None:
    assert items_object("s3://data-lists/runs/2027/parts.json") == ("data-lists", "runs/2027/parts.json")
    for value in ("https://example.com/x", "s3://Bad_Bucket/x", "s3://a..b/x", "s3://bucket/", ["s3://b/k"], None):
        with pytest.raises(BadItems, match="is not s3://bucket/key"):
            items_object(value)
    with pytest.raises(BadItems, match="1024 bytes"):
        items_object("s3://data-lists/" + "k" * 1025)


@pytest.mark.parametrize(
    ("data", "form"),
    [
        (b"[" + b"{}," * (MAX_ITEMS_OBJECT_BYTES // 3 - 10) + b"{}]", "json"),  # millions of tiny items
        (b"a\n" + b"x\n" * (MAX_ITEMS_OBJECT_BYTES // 2 - 10), "csv"),  # millions of tiny rows
    ],
    ids=["json", "csv"],
)
def test_checking_the_largest_object_holds_no_more_than_its_text_in_memory(data: bytes, form: str) -> None:
    """A worker shared by every team checks the object: parsed whole, these took 202 MB and 1,194 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(BadItems, match="more than"):
            count_items(data, form)  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.2 * len(data), peak  # the decoded text, and one item at a time


def test_a_worker_reads_at_most_two_map_objects_at_once() -> None:
    """Its batch runs on threads, and each object read holds up to 8 MB of text."""
    from jobsched.core.spec import JobSpec
    from jobsched.pipeline.dag.inputs import Inputs
    from jobsched.pipeline.dag.turn import TaskTurn

    gauge = AtOnce()

    class SlowBucket:
        def read_object(self, team: str, bucket: str, key: str, *, max_bytes: int) -> bytes | None:
            with gauge:
                return b"[1, 2, 3]"

    each = {
        "name": "each",
        "target": {"type": "lambda", "function": "f", "payload": {"n": "{{ item }}"}},
        "map": {"mode": "distributed", "over": "s3://data-lists/{logical_date}.json"},
    }
    spec = JobSpec.model_validate({"name": "etl", "team": "data", "dag": {"tasks": [each]}})
    assert spec.dag is not None
    inputs = Inputs(None, objects=SlowBucket())  # type: ignore[arg-type]
    run = SimpleNamespace(team="data", scheduled_at=datetime(2027, 1, 4, tzinfo=UTC))
    stored = SimpleNamespace(spec=spec)
    turn = TaskTurn(stored, run, spec.dag.tasks[0], "each", 1, "token", datetime.now(UTC))  # type: ignore[arg-type]
    answers: list[Any] = []
    on_threads(lambda: answers.append(inputs.map_answer(turn)), 6)
    assert gauge.most == 2
    assert answers == [{"bucket": "data-lists", "key": "2027-01-04.json", "count": 3}] * 6
