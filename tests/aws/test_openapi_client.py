"""A client generated from /openapi.json (openapi-python-client, as a team would generate one) is typed for every
answer: the success body of each operation and the one error body of every error status, checked by mypy --strict
and by calling the API through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import urllib3

from infra.local.gateway import LocalGateway
from tests.readme import ROOT

CLIENT_VENV = ROOT / ".venv" / "openapi-client" / "bin"

# Written against the generated package as a team's code would be: mypy --strict proves the types it relies on
# (assert_type), running it proves the parsing.
USAGE = """
from __future__ import annotations

import json
import sys
from typing import assert_type

from jobsched_client import Client
from jobsched_client.api.jobs import get_job, put_job
from jobsched_client.api.runs import trigger_job
from jobsched_client.models import ErrorResponse, JobBody, JobView, RunView
from jobsched_client.types import Unset


def refusal(answer: object) -> dict[str, object]:
    assert isinstance(answer, ErrorResponse), answer
    field = answer.error.field
    assert_type(answer.error.code, str)
    assert_type(field, None | str | Unset)
    return {"code": answer.error.code, "field": None if isinstance(field, Unset) else field}


def main(base_url: str) -> dict[str, object]:
    client = Client(base_url=base_url, raise_on_unexpected_status=True)
    bad = JobBody.from_dict(
        {"schedule": {"expression": "0 * * * *", "timezone": "Mars/Olympus"}, "target": {"type": "callback"}}
    )
    refused = put_job.sync("payments", "on-mars", client=client, body=bad)
    assert_type(refused, ErrorResponse | JobView | None)
    found = get_job.sync("payments", "hourly", client=client)
    assert_type(found, ErrorResponse | JobView | None)
    assert isinstance(found, JobView), found
    started = trigger_job.sync("payments", "hourly", client=client)
    assert_type(started, ErrorResponse | RunView | None)
    assert isinstance(started, RunView), started
    return {
        "invalid": refusal(refused),
        "missing": refusal(get_job.sync("payments", "nowhere", client=client)),
        "foreign": refusal(get_job.sync("marketing", "anything", client=client)),
        "found": found.name,
        "started": started.status,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
"""


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # The client's venv first on PATH: openapi-python-client's post-hook formats with its own ruff.
    environment = {**os.environ, "PATH": f"{CLIENT_VENV}:{os.environ['PATH']}"}
    return subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=cwd, env=environment, timeout=timeout
    )


def test_a_generated_client_is_typed_for_every_answer(gateway: LocalGateway, tmp_path: Path) -> None:
    generated = run(
        [
            str(CLIENT_VENV / "openapi-python-client"),
            "generate",
            "--url",
            f"{gateway.url}/openapi.json",
            "--meta",
            "none",
            "--output-path",
            str(tmp_path / "jobsched_client"),
        ],
        tmp_path,
    )
    assert generated.returncode == 0 and "Warning" not in generated.stdout + generated.stderr, generated.stdout
    parsers = {
        path.stem: path.read_text().split("def _parse_response", 1)[1].split(":\n", 1)[0]
        for path in (tmp_path / "jobsched_client" / "api").rglob("*.py")
        if path.stem != "__init__"
    }
    document = json.loads(urllib3.request("GET", f"{gateway.url}/openapi.json").data)
    assert len(parsers) == sum(len(operations) for operations in document["paths"].values())  # every operation
    untyped_errors = sorted(name for name, signature in parsers.items() if "ErrorResponse" not in signature)
    assert untyped_errors == []
    untyped_success = sorted(
        name for name, signature in parsers.items() if "-> Any |" in signature and name != "delete_job"
    )
    assert untyped_success == []  # only 204 No Content has no body to type

    usage = tmp_path / "usage.py"
    usage.write_text(USAGE)
    # The generated package's own client.py does not pass --strict against today's httpx stubs; what a team's
    # code sees of it (follow-imports=silent) must.
    checked = run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-incremental",
            "--python-executable",
            str(CLIENT_VENV / "python"),
            str(usage),
        ],
        tmp_path,
    )
    assert checked.returncode == 0, checked.stdout

    ran = run([str(CLIENT_VENV / "python"), str(usage), gateway.url], tmp_path, timeout=60)
    assert ran.returncode == 0, ran.stderr
    answers = json.loads(ran.stdout)
    assert answers["invalid"] == {"code": "invalid_request", "field": "schedule.timezone"}
    assert answers["missing"]["code"] == "job_not_found"
    assert answers["foreign"] == {"code": "forbidden", "field": "team"}
    assert answers["found"] == "hourly" and answers["started"] == "SCHEDULED"
