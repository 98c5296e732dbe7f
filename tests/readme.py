"""The ```console blocks of the README and the guides (docs/guide, docs/operate, docs/reference) as (command,
shown output) pairs, so tests run what users type."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Shown:
    command: str  # as typed, continuation lines joined
    output: list[str]  # the lines the README shows under it ("..." stands for lines left out)
    block: int  # the block's first line in its page


def user_pages() -> list[Path]:
    """The README and every page of the user guide, the operator guide and the reference."""
    return [
        ROOT / "README.md",
        *sorted(page for part in ("guide", "operate", "reference") for page in (ROOT / "docs" / part).glob("*.md")),
    ]


def console_blocks() -> list[list[Shown]]:
    blocks: list[list[Shown]] = []
    for page in user_pages():
        blocks += _console_blocks(page.read_text())
    return blocks


def _console_blocks(text: str) -> list[list[Shown]]:
    blocks: list[list[Shown]] = []
    for match in re.finditer(r"^```console\n(.*?)^```", text, flags=re.S | re.M):
        line_number = text[: match.start()].count("\n") + 1
        shown: list[Shown] = []
        body = re.sub(r"\\\n\s*", " ", match.group(1))
        for line in body.splitlines():
            if line.startswith("$ "):
                shown.append(Shown(line[2:], [], line_number))
            elif shown:
                shown[-1].output.append(line)
        blocks.append(shown)
    return blocks


def block_with(command_prefix: str) -> list[Shown]:
    """The README's console block whose first command starts so."""
    [found] = [block for block in console_blocks() if block and block[0].command.startswith(command_prefix)]
    return found


def user_environment(**extra: str) -> dict[str, str]:
    """A shell after ``source .venv/bin/activate``: the venv's bin (jobsched, node, npx) first on PATH."""
    # A user's shell has none of the test run's own variables (make's MAKELEVEL among them).
    prefixes = ("JSII_", "PYTEST", "CDK_", "JOBSCHED_", "MAKE", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{ROOT / 'node_modules' / '.bin'}:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(ROOT / ".venv")
    env.update(extra)
    return env


def run_typed(command: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command through bash, from the repo root, as a user's shell runs it."""
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )


def jobsched(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as a user types it: the venv's entry point, from the repo root."""
    return subprocess.run(
        [str(ROOT / ".venv" / "bin" / "jobsched"), *args],
        cwd=cwd,
        env=user_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def matches(shown: list[str], printed: list[str]) -> bool:
    """Printed output agrees with what the README shows: line for line, where "..." stands for any lines."""
    pattern = "\n".join(".*?" if line.strip() == "..." else re.escape(line.rstrip()) for line in shown)
    return re.fullmatch(pattern.replace("\n.*?\n", "\n(?:.*\n)*?"), "\n".join(printed).rstrip()) is not None
