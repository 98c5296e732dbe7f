"""`jobsched local put-event`, `put-object`, `escalations` and `alarms` act on the stack the user means: the one
JOBSCHED_API names, else the only one running; with several running and nothing to say which, they refuse (#46:
they used to follow the last stack started, and an object went to another stack)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobsched.cli import local
from jobsched.cli.app import cli


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two stacks running (registered by this live process), each with one page delivered."""
    monkeypatch.setattr(local, "RUNNING", tmp_path / "running")
    monkeypatch.setattr(local, "LOCAL_POINTER", tmp_path / "current")
    monkeypatch.delenv("JOBSCHED_API", raising=False)
    found = {}
    for port in (8080, 8181):
        state = tmp_path / f"state-{port}"
        state.mkdir()
        page = {"subject": f"page of the stack on {port}", "notice": "n", "kind": "k", "message": "m"}
        (state / "escalations.jsonl").write_text(json.dumps(page) + "\n")
        entry = local._register(f"http://127.0.0.1:{port}", state)
        entry.rename(entry.with_name(f"{port}.json"))  # one process here stands for two
        found[str(port)] = state
    (tmp_path / "current").write_text(str(found["8181"]))  # the last one started
    return found


def escalations(env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["local", "escalations"], env=env or {})
    return result.exit_code, result.output


def test_jobsched_api_names_the_stack(stacks: dict[str, Path]) -> None:
    code, out = escalations({"JOBSCHED_API": "http://localhost:8080/"})
    assert code == 0 and "page of the stack on 8080" in out, out


def test_with_two_running_and_nothing_to_say_which_it_refuses_naming_both(stacks: dict[str, Path]) -> None:
    code, out = escalations()
    assert code == 1 and "2 local stacks are running" in out, out
    assert "http://127.0.0.1:8080" in out and "http://127.0.0.1:8181" in out


def test_an_api_no_stack_serves_is_refused(stacks: dict[str, Path]) -> None:
    code, out = escalations({"JOBSCHED_API": "http://127.0.0.1:9999"})
    assert code == 1 and "is no local stack running here" in out, out


def test_the_only_stack_running_is_the_one_and_a_dead_ones_file_is_dropped(
    stacks: dict[str, Path], tmp_path: Path
) -> None:
    dead = json.loads((tmp_path / "running" / "8181.json").read_text()) | {"pid": 2**22 + 7}
    (tmp_path / "running" / "8181.json").write_text(json.dumps(dead))  # killed with -9: its file stayed
    code, out = escalations()
    assert code == 0 and "page of the stack on 8080" in out, out
    assert not (tmp_path / "running" / "8181.json").exists()


def test_when_none_runs_the_last_one_started_is_read(stacks: dict[str, Path], tmp_path: Path) -> None:
    for entry in (tmp_path / "running").iterdir():
        entry.unlink()
    code, out = escalations()
    assert code == 0 and "page of the stack on 8181" in out, out
    assert os.environ.get("JOBSCHED_API") is None
