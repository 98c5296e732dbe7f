"""The CLI starts without its heavy imports (#46: 2.2 s of every call was imports). How fast is a figure that
scripts/bench_cli_startup.py prints; this test keeps the structure that makes it fast: `jobsched --help` and the
commands that only talk to the API load no models, no AWS SDK and no HTTP library until a command needs them."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "boto3", "botocore", "urllib3", "holidays", "croniter", "yaml", "jobsched.core.spec")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [name for name in json.loads(done.stdout.splitlines()[-1]) if name.split(".")[0] in HEAVY or name in HEAVY]


def test_importing_the_cli_loads_none_of_the_heavy_libraries() -> None:
    assert loaded_after("import jobsched.cli") == []


def test_help_loads_none_of_them_either() -> None:
    code = "import sys\nfrom jobsched.cli import cli\ntry:\n    cli(['--help'])\nexcept SystemExit:\n    pass"
    assert loaded_after(code) == []
