"""The API and CLI guide's commands, as typed (#46: "every command a page shows runs as typed"). They are shown
against a deployed API, which is not reachable here; each runs instead against an API that knows nothing (every
request answered 404 with the API's error body), from a folder holding a `jobs/` directory of job files. What that
proves: each command and every option it is shown with exist and parse (a usage error exits 2), and the command
reaches the API and reports its refusal (exit 1) or succeeds (exit 0) - never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.readme import ROOT, Shown, block_with, user_environment

GUIDE_BLOCK = "export JOBSCHED_API=https://"


class KnowsNothing(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"error": {"code": "job_not_found", "message": "nothing here", "field": "name"}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), KnowsNothing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def guide_commands() -> list[Shown]:
    return [shown for shown in block_with(GUIDE_BLOCK) if not shown.command.startswith("export ")]


@pytest.mark.parametrize("shown", guide_commands(), ids=lambda shown: shown.command[:70])
def test_each_command_of_the_guide_parses_and_reaches_the_api(shown: Shown, api: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "jobs", tmp_path / "jobs")
    shutil.copy(ROOT / "examples" / "company.yaml", tmp_path / "company.yaml")
    command = shown.command.split("  #")[0].strip()
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=user_environment(JOBSCHED_API=api),
        input="n\n",  # apply --prune asks before deleting
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), f"`{command}` exit {done.returncode}: {done.stdout[-800:]} {done.stderr[-1500:]}"
    assert "Traceback" not in done.stderr and "Usage:" not in done.stderr, done.stderr[-1500:]
