"""The batch handlers invoked concurrently in one process, as the local runtime invokes them.

AWS runs one invocation at a time per execution environment; the local runtime runs each function's
invocations on threads of one process. A handler that kept its batch processor at module level shared its
record list and its failure list between invocations: one invocation's records could be processed by another
(or twice, and its own never) and its failures reported by another, so a failed record was deleted as done.
Locally that lost DAG task messages (the task stayed PENDING while its state machine waited for it). Each
invocation here holds its own records and reports exactly its own failures.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from tests.aws.harness import EVENTS, FakeContext

INVOCATIONS = 6


def _records(invocation: int) -> list[dict[str, Any]]:
    template = json.loads((EVENTS / "worker_sqs_batch.json").read_text())["Records"][0]
    return [
        template | {"messageId": f"{invocation}-{kind}", "receiptHandle": f"{invocation}-{kind}", "body": kind}
        for kind in ("fail", "ok")
    ]


def _handlers() -> list[tuple[str, str]]:
    """(module, the function each record goes to): the three handlers that take SQS batches."""
    return [
        ("functions.worker.handler", "process_record"),
        ("functions.pages.handler", "deliver_record"),
        ("functions.escalation.handler", "record_handler"),
    ]


@pytest.mark.parametrize(("module_name", "record_function"), _handlers())
def test_concurrent_invocations_each_process_and_report_only_their_own_records(
    module_name: str, record_function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    module: ModuleType = importlib.import_module(module_name)
    # Every invocation's first record waits here until all invocations are inside their batch, so they overlap.
    overlap = threading.Barrier(INVOCATIONS, timeout=30)
    processed: list[str] = []
    lock = threading.Lock()

    def fake(record: SQSRecord, *batch: object) -> None:
        with lock:
            processed.append(record.message_id)
        if record.body == "fail":
            overlap.wait()
            raise RuntimeError(f"{record.message_id} fails on purpose")

    monkeypatch.setattr(module, record_function, fake)
    if module_name == "functions.worker.handler":  # the worker's batch (specs, team slots) is not tested here

        class NoBatch:
            def start_batch(self, messages: Any) -> None:
                return None

            def end_batch(self, batch: Any) -> None:
                return None

        monkeypatch.setattr(module, "default_worker", NoBatch)
    handler: Callable[..., dict[str, Any]] = module.handler

    def invoke(invocation: int) -> dict[str, Any]:
        return handler({"Records": _records(invocation)}, FakeContext(aws_request_id=f"req-{invocation}"))

    with ThreadPoolExecutor(max_workers=INVOCATIONS) as pool:
        responses = list(pool.map(invoke, range(INVOCATIONS)))

    assert sorted(processed) == sorted(f"{i}-{kind}" for i in range(INVOCATIONS) for kind in ("fail", "ok"))
    for invocation, response in enumerate(responses):
        assert response == {"batchItemFailures": [{"itemIdentifier": f"{invocation}-fail"}]}, invocation
