from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")


def synthesize(tmp: Path, **context: Any) -> tuple[dict[str, Any], Path]:
    import aws_cdk as cdk

    from infra.app import build

    app = cdk.App(context={k: v for k, v in context.items()}, outdir=str(tmp))
    stack = build(app)
    assembly = app.synth()
    template_path = Path(assembly.directory) / f"{stack.stack_name}.template.json"
    return json.loads(template_path.read_text()), Path(assembly.directory)


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    """Synthesized once per test session (a synthesis takes seconds)."""
    # With its dashboards (off by default in a non-prod stage) so that their widgets are checked too.
    yield synthesize(
        tmp_path_factory.mktemp("cdk-dev"),
        stage="dev",
        account="123456789012",
        region="us-east-1",
        dashboards="true",
        tracing="true",
        console_teams="payments,search",
    )


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    yield synthesize(tmp_path_factory.mktemp("cdk-prod"), stage="prod", account="123456789012", region="us-east-1")
