"""#51: a table with multi-Region strong consistency has no transactions: no DynamoDB adapter may call them (their
sagas are tested in tests/aws/test_spec_changes.py and tests/aws/test_batch_saga.py)."""

from __future__ import annotations

import re
from pathlib import Path

ADAPTERS = Path(__file__).resolve().parents[2] / "shared" / "jobsched" / "adapters" / "aws"


def test_no_dynamodb_adapter_calls_a_transaction() -> None:
    calls = re.compile(r"\.transact_(write|get)_items\(|TransactWriteItems|TransactGetItems")
    found = [
        f"{path.relative_to(ADAPTERS)}:{number}"
        for path in sorted(ADAPTERS.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if calls.search(line)
    ]
    assert found == []
