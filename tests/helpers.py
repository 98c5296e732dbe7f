"""Small helpers shared by the tests: schedules, and an HTTP endpoint on loopback that records requests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from jobsched.core.spec import Schedule
from jobsched.core.tz import UTC, get_zone
from jobsched.schedule.engine import CompiledSchedule, compile_schedule


def utc(text: str) -> datetime:
    """'2027-03-14T07:00Z' -> aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class Clock:
    """An injectable clock that tests move by hand."""

    def __init__(self, start: str) -> None:
        self.now = utc(start)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now

    def set(self, text: str) -> datetime:
        self.now = utc(text)
        return self.now


def compiled(
    expression: str,
    timezone: str = "UTC",
    *,
    key: str = "team/job",
    anchor: str | None = None,
    **fields: Any,
) -> CompiledSchedule:
    schedule = Schedule.model_validate({"expression": expression, "timezone": timezone, **fields})
    return compile_schedule(schedule, hash_key=key, anchor=utc(anchor) if anchor else None)


def fire_times(schedule: CompiledSchedule, after: str, count: int) -> list[str]:
    """The next fires as UTC 'YYYY-MM-DDTHH:MMZ'."""
    return [f"{o.at:%Y-%m-%dT%H:%M}Z" for o in schedule.next_fires(utc(after), count)]


def local_times(schedule: CompiledSchedule, after: str, count: int) -> list[str]:
    """The next fires as local wall time with abbreviation: '2027-11-07 01:30 EDT'."""
    zone = get_zone(schedule.schedule.timezone)
    return [f"{o.at.astimezone(zone):%Y-%m-%d %H:%M %Z}" for o in schedule.next_fires(utc(after), count)]


@dataclass
class RecordingServer:
    """What reached the endpoint: each request's headers and JSON body; ``statuses`` answer the next ones."""

    port: int
    seen: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@contextmanager
def recording_server() -> Iterator[RecordingServer]:
    """An HTTP endpoint on 127.0.0.1 (only loopback is ever a test target) that answers 200 unless told."""
    recording = RecordingServer(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            recording.seen.append({"headers": dict(self.headers), "body": body})
            self.send_response(recording.statuses.pop(0) if recording.statuses else 200)
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recording.port = server.server_port
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield recording
    finally:
        server.shutdown()


class SilentEndpoint(str):
    """The URL of a silent server; `connections` counts the connections it has accepted so far."""

    held: list[socket.socket]

    @property
    def connections(self) -> int:
        return len(self.held)


@contextmanager
def silent_server() -> Iterator[SilentEndpoint]:
    """A loopback endpoint that accepts connections and never answers: the hung target or webhook."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)  # kept open and unread

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        endpoint = SilentEndpoint(f"http://127.0.0.1:{listener.getsockname()[1]}/hook")
        endpoint.held = held
        yield endpoint
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def chromium(wait_seconds: float = 420.0) -> str:
    """Debian's chromium for screenshots: `make test` installs it in the background when missing
    (scripts/ensure_chromium.py), so this waits for that; it skips, saying why, where it cannot be had."""
    import shutil
    import time
    from pathlib import Path

    import pytest

    status_file = Path(__file__).resolve().parents[1] / "build" / "chromium.status"
    deadline = time.monotonic() + wait_seconds
    while True:
        found = shutil.which("chromium")
        if found:
            return found
        status = status_file.read_text().strip() if status_file.exists() else "not started (run `make test`)"
        if status != "installing" or time.monotonic() > deadline:
            pytest.skip(f"chromium is not available for screenshots: {status}")
        time.sleep(2)


def screenshot(browser: str, url: str, out: Path, *, width: int = 1100, height: int = 720) -> bytes:
    """A headless Chromium screenshot of ``url`` as PNG bytes (also written to ``out``)."""
    import subprocess

    subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--disable-dev-shm-usage",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    return out.read_bytes()


def rendered_text(browser: str, url: str) -> str:
    """The page as headless Chromium renders it (its DOM after scripts ran), as text: what a person reads."""
    import html
    import re
    import subprocess

    done = subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--dump-dom", url],
        check=True,
        capture_output=True,
        text=True,
        timeout=90,
    )
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", done.stdout, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


class AtOnce:
    """Counts how many callers are inside it at once (``most``): for tests of a bound on concurrent work. Each
    stays ``seconds``, so callers on other threads overlap when nothing holds them back."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds, self.running, self.most = seconds, 0, 0
        self._lock = threading.Lock()

    def __enter__(self) -> AtOnce:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.running -= 1


def on_threads(work: Callable[[], object], count: int) -> None:
    """``work`` on ``count`` threads at once, until each has returned."""
    threads = [threading.Thread(target=work) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def largest_dag_tasks(count: int) -> list[dict[str, Any]]:
    """The biggest DAG a spec can make: the longest task names, each task depending on the 20 before it, callback
    tasks of 7 days with heartbeats, 20 attempts."""
    names = [f"t{index:03d}-" + "x" * 58 for index in range(count)]
    return [
        {
            "name": name,
            "depends_on": names[max(0, index - 20) : index],
            "target": {"type": "callback", "timeout": "7d"},
            "heartbeat_timeout": "1d",
            "retry": {"max_attempts": 20, "backoff": {"initial": "1h", "max": "1d"}},
        }
        for index, name in enumerate(names)
    ]
