"""The house's sizes, held: the DAG path's stage rooms stay small and pass one value along, and no store adapter
announces state changes (the lifecycle does, once, for runs and tasks alike)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAG_ROOMS = ROOT / "shared" / "jobsched" / "pipeline" / "dag"
ADAPTERS = ROOT / "shared" / "jobsched" / "adapters"
MAX_ROOM_LINES = 400
MAX_STAGE_POSITIONALS = 3


def test_no_dag_stage_room_passes_400_lines() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in DAG_ROOMS.glob("*.py")}
    assert {"conductor.py", "readiness.py", "inputs.py", "recording.py", "run_end.py", "turn.py"} <= set(sizes)
    assert {name: size for name, size in sizes.items() if size > MAX_ROOM_LINES} == {}


def test_no_dag_stage_method_takes_more_than_three_positional_values() -> None:
    crowded = []
    for path in DAG_ROOMS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(positional) > MAX_STAGE_POSITIONALS:
                    crowded.append(f"{path.name}:{node.name}({', '.join(positional)})")
    assert crowded == []


def test_no_adapter_announces_state_changes_itself() -> None:
    hooks = [
        str(path.relative_to(ROOT))
        for path in ADAPTERS.rglob("*.py")
        if "on_finished" in path.read_text() or "on_retrying" in path.read_text()
    ]
    assert hooks == []
