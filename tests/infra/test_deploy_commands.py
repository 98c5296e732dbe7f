"""The README's deploy commands, run as a user types them: subprocesses from the repo root, for dev and prod.

The other infra tests synthesize the stack in-process, importing ``infra`` as a package; that is how a broken
``cdk.json`` app went unnoticed. Here ``make synth`` and the CDK CLI's synth (the real one, from
node_modules, with the README's context) must succeed, and their templates pass checkov and the upgrade
record.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from infra.upgrades import stateful_resources, upgrade_problems
from tests.readme import ROOT, run_typed, user_environment

RECORD = ROOT / "tests" / "infra" / "stateful-resources.json"
CHECKOV = ROOT / ".venv" / "checkov" / "bin" / "checkov"
STAGES = ("dev", "prod")


def readme_deploy_commands() -> list[str]:
    """The shell lines of the README's Deploy section, continuation lines joined, comments dropped."""
    section = (ROOT / "README.md").read_text().split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.join(shlex.split(line, comments=True)) for line in joined.splitlines() if line.strip()]


def run(command: str) -> subprocess.CompletedProcess[str]:
    result = run_typed(command, user_environment(), timeout=600)
    assert result.returncode == 0, f"`{command}` failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return result


def cli_synth(stage: str) -> str:
    """The README's `npx aws-cdk deploy` line for the stage, as `synth` (the same app, context and checks)."""
    deploys = [c for c in readme_deploy_commands() if c.startswith("npx aws-cdk deploy") and f"stage={stage}" in c]
    assert len(deploys) == 1, f"the README shows one `npx aws-cdk deploy -c stage={stage}` line: {deploys}"
    return deploys[0].replace("npx aws-cdk deploy", "npx aws-cdk synth", 1)


@pytest.fixture(scope="module")
def templates() -> Iterator[dict[str, dict[str, Any]]]:
    """`make synth` for each stage, then the CDK CLI's synth with the README's context: the CLI's templates."""
    commands = readme_deploy_commands()
    assert "make synth" in commands and "STAGE=prod make synth" in commands
    found = {}
    for stage in STAGES:
        made = run("make synth" if stage == "dev" else "STAGE=prod make synth")
        assert made.stdout.strip().endswith(f"cdk.out/jobsched-{stage}.template.json"), made.stdout[-500:]
        synthesized = run(cli_synth(stage))
        assert "Resources:" in synthesized.stdout  # the CLI prints the template it synthesized
        found[stage] = json.loads((ROOT / "cdk.out" / f"jobsched-{stage}.template.json").read_text())
    yield found


def test_no_folder_of_ours_shadows_a_library() -> None:
    """Running a file of ours as a script puts its folder first on sys.path: no module there may carry the
    name of the standard library's or an installed distribution's modules (infra/constructs/ hid the
    `constructs` library that aws-cdk-lib imports, and `cdk deploy` failed)."""
    ours = {"jobsched", "infra", "functions", "tests", "scripts"}
    theirs = set(sys.stdlib_module_names) | {
        name for name in importlib.metadata.packages_distributions() if not name.startswith("_")
    }
    folders = [ROOT, ROOT / "infra", ROOT / "scripts", ROOT / "shared", ROOT / "infra" / "components"]
    folders += [folder for folder in (ROOT / "functions").iterdir() if folder.is_dir()]
    shadowing = sorted(
        f"{entry.relative_to(ROOT)}"
        for folder in folders
        for entry in folder.iterdir()
        if (entry.suffix == ".py" or (entry.is_dir() and (entry / "__init__.py").exists()))
        and entry.stem in theirs - ours
    )
    assert shadowing == []


@pytest.mark.parametrize("stage", STAGES)
def test_the_readme_commands_synthesize_every_stage(templates: dict[str, dict[str, Any]], stage: str) -> None:
    resources = templates[stage]["Resources"]
    functions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    # The real asset (not the tests' stub code) on the pinned runtime.
    assert functions and all("S3Bucket" in f["Properties"]["Code"] for f in functions)
    assert (stage == "dev") == any(f["Properties"].get("FunctionName") == "jobsched-example-echo" for f in functions)


def test_the_cdk_app_runs_on_a_supported_node() -> None:
    result = run("node --version && npx aws-cdk --version")
    node, cdk = result.stdout.split("\n", 1)
    assert int(node.lstrip("v").split(".")[0]) >= 22, node
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert cdk.startswith(pinned), cdk


@pytest.mark.parametrize("stage", STAGES)
def test_checkov_finds_nothing_unexplained(templates: dict[str, dict[str, Any]], stage: str) -> None:
    """A second scanner beside cdk-nag: every finding is fixed, or skipped in the template with its reason
    (infra/components/waivers.py)."""
    template = ROOT / "cdk.out" / f"jobsched-{stage}.template.json"
    result = subprocess.run(
        [str(CHECKOV), "-f", str(template), "--framework", "cloudformation", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LOG_LEVEL": "ERROR"},
    )
    report = json.loads(result.stdout)
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in report["results"]["failed_checks"]]
    assert failed == [], failed[:10]
    assert report["summary"]["passed"] > 250 and report["summary"]["parsing_errors"] == 0
    skipped = report["results"]["skipped_checks"]
    assert len(skipped) == report["summary"]["skipped"] > 0
    unexplained = [c["resource"] for c in skipped if len(c["check_result"].get("suppress_comment") or "") < 40]
    assert unexplained == []


@pytest.mark.parametrize("stage", STAGES)
def test_an_upgrade_loses_nothing_stateful(templates: dict[str, dict[str, Any]], stage: str) -> None:
    """Tables with their keys and indexes, the key, secrets, queues, topics and log groups against the record of
    the last release (written on purpose by scripts/record_stateful_resources.py)."""
    record = json.loads(RECORD.read_text())[stage]
    current = stateful_resources(templates[stage])
    assert upgrade_problems(record, current, prod=stage == "prod") == []
