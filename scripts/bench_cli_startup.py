"""How long a `jobsched` command takes to start, beside Python's own start-up (#46: every call took 2.5-5 s,
2.2 s of it imports). Goal: `jobsched --help` and a `get` within 0.5 s of `python -c pass`.

Each command runs as a user types it (a subprocess of the venv's `jobsched`), ``--runs`` times; the median is
printed. The `get` asks a tiny HTTP server on this machine that answers at once, so what is timed is the CLI,
not an API. Then the imports that cost most, from `python -X importtime`.

    python scripts/bench_cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL_S = 0.5


class Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"jobs": [], "next_token": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def timed(command: list[str], runs: int) -> float:
    """The median wall time of ``command`` over ``runs`` runs (one warm-up first: the OS's file cache)."""
    subprocess.run(command, capture_output=True, check=True, cwd=ROOT)
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, cwd=ROOT)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def heaviest_imports(count: int) -> list[tuple[float, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import jobsched.cli"], capture_output=True, text=True, check=True
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]) / 1e6, parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = f"http://127.0.0.1:{server.server_address[1]}"
    jobsched = str(BIN / "jobsched")
    python = timed([sys.executable, "-c", "pass"], args.runs)
    shown = {
        "python -c pass": python,
        "jobsched --help": timed([jobsched, "--help"], args.runs),
        "jobsched get jobs --team bench": timed([jobsched, "get", "jobs", "--team", "bench", "--api", api], args.runs),
        "jobsched validate examples/jobs/ledger-sync.yaml": timed(
            [jobsched, "validate", "examples/jobs/ledger-sync.yaml"], args.runs
        ),
    }
    server.shutdown()
    print(f"median of {args.runs} runs each (s):")
    for command, seconds in shown.items():
        over = "" if command.startswith("python") else f"  (+{seconds - python:.3f} over python)"
        print(f"  {command:<52} {seconds:.3f}{over}")
    help_over = shown["jobsched --help"] - python
    get_over = shown["jobsched get jobs --team bench"] - python
    met = help_over <= GOAL_S and get_over <= GOAL_S
    print(f"cli_help_over_python_s={help_over:.3f} cli_get_over_python_s={get_over:.3f} goal={GOAL_S} met={met}")
    print("heaviest imports of `import jobsched.cli` (cumulative s):")
    for seconds, name in heaviest_imports(8):
        print(f"  {seconds:.3f} {name}")


if __name__ == "__main__":
    main()
