"""Schemathesis as a user runs it against the local gateway (``tests/aws/test_api_fuzz*.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infra.local.gateway import LocalGateway

# Enough examples per operation that the fuzzing phase finds `depends_on: [{}]` (a TypeError, 502, before).
EXAMPLES = 25
# Every check but schema-valid requests' acceptance (``test_api_fuzz_acceptance``, which leaves some operations out).
EVERY_CHECK = ("--checks", "all", "--exclude-checks", "positive_data_acceptance")
# The every-check run is split over modules the suite's workers run side by side (it was one run of 310 s of coverage,
# 88 of fuzzing and 12 stateful here, 490 s on a busy machine: CI's longest test, against the CLI's 600 s timeout).
# A split loses nothing: the coverage phase judges each operation on its own; the fuzzing and stateful phases run whole.
JOB_SPEC_OPERATION = "putJob"  # its coverage alone is 3,746 of the 6,145 cases (192 s)


def schemathesis(gateway: LocalGateway, cwd: Path, *options: str) -> str:
    """The schemathesis CLI as a user runs it against the gateway; its summary, asserted free of failures."""
    common: tuple[str, ...] = ("--max-examples", str(EXAMPLES), "--seed", "1", "--continue-on-failure", "--no-color")
    # The instant range's pattern (years 1970-2199) beside format date-time makes the generator discard many
    # strings before it finds one: slower, not wrong.
    common += ("--suppress-health-check", "filter_too_much")
    result = subprocess.run(
        [str(Path(sys.executable).with_name("st")), "run", f"{gateway.url}/openapi.json", *options, *common],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=600,
    )
    summary = result.stdout[result.stdout.find("SUMMARY") :]
    print(summary)
    assert result.returncode == 0, result.stdout[-6000:]
    assert "0 failures" in summary or "No issues found" in summary or "passed" in summary, summary
    return summary
