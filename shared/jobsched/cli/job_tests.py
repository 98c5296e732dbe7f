"""``jobsched test FILE...``: job files' tests, run with no stack and no AWS (``cli.harness``). Exit 0 when every
test passes, 1 when one fails (each failure says what was expected and what happened), 2 for a malformed test."""

from __future__ import annotations

import json
from pathlib import Path

import click

from jobsched.cli.app import cli

TEST_SUFFIXES = (".test.yaml", ".test.yml")


@cli.command("test")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--stub", "stubs", multiple=True, help="TASK=FILE.json: that task (or `target`) answers the file's JSON.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def test_jobs(paths: tuple[Path, ...], stubs: tuple[str, ...], output_format: str) -> None:
    """Run job files' tests (FILE.test.yaml, or the folders holding them): each runs its job through a window of
    virtual time with stubbed targets, on the real dispatcher and worker, and checks what happened."""
    from pydantic import ValidationError

    from jobsched.cli.harness import Stub, run_test_file, stub_option
    from jobsched.core.errors import SpecError

    extra: dict[str, Stub] = {}
    for value in stubs:
        try:
            name, stub = stub_option(value, lambda path: path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as error:
            raise click.BadParameter(str(error), param_hint="--stub") from None
        extra[name] = stub
    files = [
        found
        for path in paths
        for found in (sorted(p for p in path.rglob("*") if p.name.endswith(TEST_SUFFIXES)) if path.is_dir() else [path])
    ]
    if not files:
        raise click.UsageError(f"no test files ({', '.join(TEST_SUFFIXES)}) under {', '.join(map(str, paths))}")
    outcomes = []
    for file in files:
        try:
            outcomes.append(run_test_file(file, extra))
        except (ValidationError, SpecError, ValueError, OSError) as error:
            raise click.UsageError(f"{file}: {str(error).splitlines()[0]}") from None
    if output_format == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "file": o.file,
                        "name": o.name,
                        "passed": o.passed,
                        "failures": o.failures,
                        "observed": o.observed.as_dict(),
                    }
                    for o in outcomes
                ],
                indent=2,
                default=str,
            )
        )
    else:
        for outcome in outcomes:
            click.echo(f"{'PASS' if outcome.passed else 'FAIL'}  {outcome.name}  ({outcome.file})")
            for failure in outcome.failures:
                click.echo(f"      {failure}")
        failed = sum(not outcome.passed for outcome in outcomes)
        click.echo(f"{len(outcomes) - failed} passed, {failed} failed", err=True)
    if any(not outcome.passed for outcome in outcomes):
        raise SystemExit(1)
