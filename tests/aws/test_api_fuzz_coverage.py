"""Schema fuzzing with every check, the coverage phase of every operation but the job spec's PUT (which
``test_api_fuzz`` covers): a module of its own, so that the suite's workers run the parts side by side
(``tests/aws/fuzzing.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from infra.local.gateway import LocalGateway
from tests.aws.fuzzing import EVERY_CHECK, JOB_SPEC_OPERATION, schemathesis


def test_schemathesis_coverage_of_every_other_operation_finds_nothing(gateway: LocalGateway, tmp_path: Path) -> None:
    summary = schemathesis(
        gateway, tmp_path, *EVERY_CHECK, "--phases", "coverage", "--exclude-operation-id", JOB_SPEC_OPERATION
    )
    assert re.search(r"Tested: (2[4-9]|[3-9]\d)", summary), summary  # every other operation was reached
