"""Schema fuzzing with every check, the examples, fuzzing and stateful phases over every operation: a module of its
own, so that the suite's workers run the parts side by side (``tests/aws/fuzzing.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from infra.local.gateway import LocalGateway
from tests.aws.fuzzing import EVERY_CHECK, schemathesis


def test_schemathesis_examples_fuzzing_and_stateful_phases_find_nothing(gateway: LocalGateway, tmp_path: Path) -> None:
    summary = schemathesis(gateway, tmp_path, *EVERY_CHECK, "--phases", "examples,fuzzing,stateful")
    assert re.search(r"Tested: (2[5-9]|[3-9]\d)", summary), summary  # every operation was reached
