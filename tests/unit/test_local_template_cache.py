"""``make run`` reuses the template in its state dir only while nothing the synthesis depends on changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.local import deploy


@pytest.fixture
def synthesized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A checkout of the synthesis inputs in tmp_path; records each real synthesis (its examples flag)."""
    root = tmp_path / "checkout"
    for name in deploy.SYNTH_INPUTS:
        if "." in name:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(f"{name}\n")
        else:
            (root / name / "pkg").mkdir(parents=True)
            (root / name / "pkg" / "module.py").write_text("VALUE = 1\n")
    calls: list[bool] = []

    def synthesize(outdir: Path, *, examples: bool) -> dict[str, Any]:
        calls.append(examples)
        return {"Resources": {"Thing": {"Type": "AWS::SQS::Queue", "Properties": {"n": len(calls)}}}}

    monkeypatch.setattr(deploy, "ROOT", root)
    monkeypatch.setattr(deploy, "synthesize", synthesize)
    return calls


def test_the_template_is_reused_until_an_input_changes(tmp_path: Path, synthesized: list[bool]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    first, reused = deploy.synthesize_cached(state, examples=True)
    assert not reused and synthesized == [True]
    again, reused = deploy.synthesize_cached(state, examples=True)
    assert reused and again == first and synthesized == [True]

    (tmp_path / "checkout" / "infra" / "pkg" / "module.py").write_text("VALUE = 2\n")
    _, reused = deploy.synthesize_cached(state, examples=True)
    assert not reused and len(synthesized) == 2
    (tmp_path / "checkout" / "shared" / "pkg" / "new.py").write_text("")  # a new file counts too
    _, reused = deploy.synthesize_cached(state, examples=True)
    assert not reused and len(synthesized) == 3
    _, reused = deploy.synthesize_cached(state, examples=False)  # another stack: examples left out
    assert not reused and synthesized[-1] is False
    (tmp_path / "checkout" / "__pycache__").mkdir()
    (tmp_path / "checkout" / "infra" / "pkg" / "__pycache__").mkdir()
    (tmp_path / "checkout" / "infra" / "pkg" / "__pycache__" / "module.pyc").write_bytes(b"\0")
    _, reused = deploy.synthesize_cached(state, examples=False)  # compiled files are not inputs
    assert reused


def test_an_unreadable_cache_is_synthesized_again(tmp_path: Path, synthesized: list[bool]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / deploy.TEMPLATE_CACHE).write_text('{"key": "trunca')  # killed mid-write before writes were atomic
    template, reused = deploy.synthesize_cached(state, examples=True)
    assert not reused and synthesized == [True] and template["Resources"]
    assert deploy.synthesize_cached(state, examples=True) == (template, True)


def test_another_state_reuses_the_template_the_checkout_synthesized(tmp_path: Path, synthesized: list[bool]) -> None:
    """A second `make run` state, or each end-to-end module's stack, skips the synthesis of the same inputs."""
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    template, reused = deploy.synthesize_cached(first, examples=True)
    assert not reused
    assert deploy.synthesize_cached(second, examples=True) == (template, True) and synthesized == [True]
    assert (second / deploy.TEMPLATE_CACHE).exists()  # and the state keeps its own copy
    (tmp_path / "checkout" / "infra" / "pkg" / "module.py").write_text("VALUE = 3\n")
    _, reused = deploy.synthesize_cached(second, examples=True)
    assert not reused and len(synthesized) == 2
