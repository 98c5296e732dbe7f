"""What `make run` prints: one short line per thing a person cares about; the full stream in log files.

The handlers print what they print in Lambda (Powertools' JSON log lines, EMF metric blobs) and the runtime
logs through ``logging``. In the terminal that is a wall of JSON. ``route_output`` sends all of it to files
under the state directory (``logs/handlers.jsonl`` for what the handlers print, ``logs/runtime.log`` for the
runtime's own records) and shows in the terminal only: runs finishing with their job, instant, outcome and
lateness; pages; alarms changing state; quarantined jobs; warnings and errors. The local alarms read the
metrics from the runtime's own metric store, not from this stream, so nothing they evaluate changes.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

# Worker outcomes that are not news: a duplicate delivery, or a task waiting its turn as planned.
_QUIET_OUTCOMES = frozenset({"duplicate", "superseded"})
_QUIET_DETAILS = ("parked until its dependencies finish", "attempt in flight elsewhere")
# A run's end is told once by its "run finished" line, whoever ended it (worker, DAG, container, callback).
_ENDS = frozenset({"succeeded", "failed", "skipped", "cancelled", "timed_out"})


def run_line(record: dict[str, Any]) -> str | None:
    """A handler's JSON log line as a person reads it, or None when it is not one to show."""
    message = record.get("message")
    if message == "run finished":
        return _finished_line(record)
    if message == "run message":
        return _message_line(record)
    name = str(record.get("name") or "")
    if name.startswith("jobsched.local"):  # the runtime's own record, formatted by a handler's logger
        return _runtime_text(name, LEVELS.get(str(record.get("level")), logging.INFO), str(message or ""))
    if record.get("level") in ("ERROR", "CRITICAL"):
        return f"error {record.get('service', '')}: {message}"[:240]
    return None


def _where(record: dict[str, Any]) -> str:
    return f"{record.get('team')}/{str(record.get('job', '')).split('/')[-1]}"


def _finished_line(record: dict[str, Any]) -> str:
    lateness, took = record.get("lateness_s"), record.get("took_s")
    late = f"  late {float(lateness):.1f} s" if isinstance(lateness, int | float) else ""
    spent = f"  took {float(took):.1f} s" if isinstance(took, int | float) else ""
    attempt = f" attempt {record['attempt']}" if record.get("attempt") not in (None, 1) else ""
    kind = {"dag": " (DAG)", "container": " (container)"}.get(str(record.get("kind")), "")
    error = f"  {record['error']}" if record.get("error") else ""
    return f"run   {_where(record)} {record.get('run_id')}{attempt}{kind}  {record.get('status')}{late}{spent}{error}"[
        :240
    ]


def _message_line(record: dict[str, Any]) -> str | None:
    outcome, detail = str(record.get("outcome", "?")), str(record.get("detail") or "")
    task = str(record.get("task") or "")
    if outcome in _QUIET_OUTCOMES or detail.startswith(_QUIET_DETAILS):
        return None
    if outcome in _ENDS and not task:
        return None  # its "run finished" line says it
    if outcome == "waiting" and "held:" not in detail:
        return None  # a wait's polls and a slot's looks: the run's WAITING (or its hold) was said once
    if "[" in task:
        return None  # one item of a map: the map task's own line says how its items went
    shown_task = f" task {task}" if task else ""
    attempt = f" attempt {record['attempt']}" if record.get("attempt") not in (None, 1) else ""
    lateness = record.get("lateness_s")
    late = f"  late {float(lateness):.1f} s" if isinstance(lateness, int | float) else ""
    said = f"  {detail}" if detail else ""
    return f"run   {_where(record)} {record.get('run_id')}{shown_task}{attempt}  {outcome.upper()}{late}{said}"[:240]


LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR}


def runtime_line(record: logging.LogRecord) -> str | None:
    """The runtime's own record as a line, or None: start-up steps, alarms, pages, warnings and errors."""
    return _runtime_text(record.name, record.levelno, record.getMessage())


def _runtime_text(name: str, level: int, text: str) -> str | None:
    line = _runtime_line(name, level, text)
    return line[:240] if line is not None else None


def _runtime_line(name: str, level: int, text: str) -> str | None:
    if name == "jobsched.local.alarms" and " -> " in text:
        return text.split("\n", 1)[0]
    if text.startswith("PAGE "):
        return "page  " + text.removeprefix("PAGE ").split("\n", 1)[0]
    if "quarantined" in text and level >= logging.ERROR:
        return text.split("\n", 1)[0]
    if level >= logging.WARNING:
        return f"{logging.getLevelName(level).lower()} {name}: {text.splitlines()[0] if text else ''}"[:240]
    if name.startswith("jobsched.local") and level >= logging.INFO:
        return text.split("\n", 1)[0]
    return None


class Terminal:
    """The person's terminal: a timestamped line at a time, from any thread."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def say(self, line: str) -> None:
        with self.lock:
            self.stream.write(f"{datetime.now().astimezone().strftime('%H:%M:%S')}  {line}\n")
            self.stream.flush()

    def echo(self, text: str) -> None:
        with self.lock:
            self.stream.write(text + "\n")
            self.stream.flush()


class _HandlerStream(io.TextIOBase):
    """Stands in for stdout and stderr: every line to the log file, the ones a person reads to the terminal."""

    def __init__(self, file: TextIO, terminal: Terminal) -> None:
        self.file, self.terminal = file, terminal
        self.pending = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        buffered = getattr(self.pending, "text", "") + text
        *lines, self.pending.text = buffered.split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def _line(self, line: str) -> None:
        if not line.strip():
            return
        self.file.write(line + "\n")
        self.file.flush()
        try:
            record = json.loads(line)
        except ValueError:
            return  # not a structured line (a library's chatter): the file has it
        if isinstance(record, dict):
            shown = run_line(record)
            if shown:
                self.terminal.say(shown)


class _TerminalHandler(logging.Handler):
    def __init__(self, terminal: Terminal) -> None:
        super().__init__(logging.INFO)
        self.terminal = terminal

    def emit(self, record: logging.LogRecord) -> None:
        shown = runtime_line(record)
        if shown:
            self.terminal.say(shown)


def route_output(state_dir: Path, level: str) -> tuple[Terminal, Path]:
    """Send stdout, stderr and logging to files under ``state_dir/logs``; return the terminal and that folder."""
    folder = state_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    terminal = Terminal(sys.__stdout__ or sys.stdout)
    handlers = (folder / "handlers.jsonl").open("a", buffering=1)
    stream = _HandlerStream(handlers, terminal)
    sys.stdout = stream
    sys.stderr = stream
    runtime_log = logging.FileHandler(folder / "runtime.log")
    runtime_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [runtime_log, _TerminalHandler(terminal)]
    root.setLevel(level.upper())
    return terminal, folder
