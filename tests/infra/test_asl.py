"""Every state machine jobsched can compile, and the template's own, validated by an Amazon States Language
validator independent of moto (the npm package ``asl-validator``, run in its own process): moto accepts machines
AWS refuses (two map tasks once compiled states of the same names; AWS requires names unique in the machine).

One validator process checks them all. What no validator here checks and AWS enforces is stated beside it: the
definition's size (test_dag_compile.py) and a state name's length (80 characters), below."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobsched.core.spec import MAX_DAG_TASKS, JobSpec
from jobsched.dag.definition import compile_definition
from jobsched.registry.jobfile import load_job_file
from tests.helpers import largest_dag_tasks

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = Path(__file__).with_name("validate_asl.js")  # asl-validator from node_modules, one JSON line a file
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobsched-dev-WorkNormal"
MAX_STATE_NAME = 80  # AWS's limit on a state's name; no validator here checks it


def lambda_task(name: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "depends_on": list(depends_on), "target": {"type": "lambda", "function": "f"}, **extra}


def each_kind() -> dict[str, Any]:
    """A task of every kind a DAG may hold, waits, data between tasks, both maps of both formats, approvals."""
    long = "x" * 63  # the longest task name: its map's states have the longest names
    return {
        "name": "every-kind",
        "team": "data",
        "dag": {
            "tasks": [
                lambda_task("tasks"),  # the name of the machine's own parallel state once
                lambda_task(
                    "waits",
                    "tasks",
                    wait_for=[{"s3": "s3://data-landing/in/{logical_date:%Y-%m-%d}/_SUCCESS"}],
                    wait={"timeout": "2h", "on_timeout": "fail"},
                ),
                {"name": "call", "depends_on": ["waits"], "target": {"type": "http", "url": "https://example.com/x"}},
                {
                    "name": "report",
                    "depends_on": ["call"],
                    "target": {"type": "callback", "timeout": "1h"},
                    "heartbeat_timeout": "5m",
                    "retry": {"max_attempts": 3},
                },
                {**lambda_task("inline", "report"), "map": {"over": "{{ tasks.report.output.parts }}"}},
                {
                    **lambda_task(long, "report"),
                    "map": {"mode": "distributed", "format": "csv", "over": "{{ tasks.report.output.manifest }}"},
                    "retry": {"max_attempts": 2},
                },
                {
                    **lambda_task("json-map", "report"),
                    "map": {"mode": "distributed", "over": "{{ tasks.report.output.manifest }}"},
                },
                {"name": "approve", "depends_on": ["inline", long, "json-map"], "target": {"type": "approval"}},
                lambda_task("last", "approve"),
            ]
        },
    }


def many_maps() -> dict[str, Any]:
    names = [f"m{index:03d}-" + "x" * 58 for index in range(MAX_DAG_TASKS)]
    tasks = [lambda_task(names[0])] + [
        {
            **lambda_task(name, names[index - 1]),
            "map": {"mode": "distributed" if index % 2 else "inline", "over": "{{ tasks." + names[0] + ".output.p }}"},
        }
        for index, name in enumerate(names)
        if index
    ]
    return {"name": "many-maps", "team": "data", "dag": {"tasks": tasks}}


def largest() -> dict[str, Any]:
    return {"name": "largest", "team": "data", "dag": {"tasks": largest_dag_tasks(MAX_DAG_TASKS)}}


def compiled_machines() -> dict[str, dict[str, Any]]:
    specs = {f"examples/{path.relative_to(ROOT / 'examples')}": load_job_file(path) for path in example_files()}
    specs |= {name: JobSpec.model_validate(document()) for name, document in built_here().items()}
    return {name: compile_definition(spec, queue_url=QUEUE) for name, spec in specs.items() if spec.dag is not None}


def example_files() -> list[Path]:
    return [
        p
        for p in sorted((ROOT / "examples").rglob("*.yaml"))
        # Not job files: the organisation's policy and the company's calendars and windows (and a change to them).
        if "invalid" not in p.parts
        and "tests" not in p.parts
        and p.name not in ("policy.yaml", "company.yaml", "company-next.yaml")
    ]


def built_here() -> dict[str, Any]:
    return {"every kind": each_kind, "100 maps": many_maps, "largest": largest}


def template_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for logical, resource in template["Resources"].items():
        if resource["Type"] == "AWS::StepFunctions::StateMachine":
            text = resource["Properties"]["DefinitionString"]
            assert isinstance(text, str), f"{logical}: a definition with CloudFormation functions is not validated"
            found[f"template {logical}"] = json.loads(text)
    return found


def state_names(states: dict[str, Any]) -> list[str]:
    names = []
    for name, state in states.items():
        names.append(name)
        for branch in state.get("Branches", []):
            names += state_names(branch["States"])
        if "ItemProcessor" in state:
            names += state_names(state["ItemProcessor"]["States"])
    return names


def validate(machines: dict[str, dict[str, Any]], folder: Path) -> dict[str, Any]:
    """One validator process for every machine: {name: its answer}."""
    paths = {}
    for index, (name, definition) in enumerate(machines.items()):
        path = folder / f"machine-{index}.json"
        path.write_text(json.dumps(definition))
        paths[str(path)] = name
    done = subprocess.run(
        ["node", str(VALIDATOR), *paths], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip().startswith("{")]
    if len(answers) != len(paths):  # one JSON answer a file; anything else is the tool's failure
        pytest.fail(
            f"asl-validator answered {len(answers)} of {len(paths)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return {paths[str(answer["path"])]: answer for answer in answers}


@pytest.fixture(scope="module")
def machines(dev: tuple[dict[str, Any], Path]) -> dict[str, dict[str, Any]]:
    return compiled_machines() | template_machines(dev[0])


def test_every_machine_jobsched_compiles_is_valid_amazon_states_language(
    machines: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    assert {"every kind", "100 maps", "largest", "examples/jobs/cost-cleanup.yaml"} <= set(machines)
    assert any(name.startswith("template ") for name in machines), "the template's own machines are validated too"
    answers = validate(machines, tmp_path)
    refused = {name: answer["errors"] for name, answer in answers.items() if not answer["isValid"]}
    assert refused == {}, json.dumps(refused, indent=1)[:4000]
    for name, definition in machines.items():
        names = state_names(definition["States"])
        assert len(names) == len(set(names)), name
        assert max(len(n) for n in names) <= MAX_STATE_NAME, name


def test_the_validator_refuses_what_aws_refuses(tmp_path: Path) -> None:
    """The validator is not a test that cannot fail: a machine whose two maps repeat a state name (what the
    compiler made before) is refused, naming the names."""
    repeated = {
        "StartAt": "a",
        "States": {
            "a": {
                "Type": "Map",
                "ItemProcessor": {"StartAt": "item", "States": {"item": {"Type": "Pass", "End": True}}},
                "Next": "b",
            },
            "b": {
                "Type": "Map",
                "ItemProcessor": {"StartAt": "item", "States": {"item": {"Type": "Pass", "End": True}}},
                "End": True,
            },
        },
    }
    [answer] = validate({"repeated": repeated}, tmp_path).values()
    assert not answer["isValid"] and "DUPLICATE_STATE_NAMES" in json.dumps(answer["errors"]), answer
