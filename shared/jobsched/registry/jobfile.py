"""Job files (YAML or JSON) to validated JobSpecs, with every error located.

YAML is read with YAML 1.2 booleans: only true/false are booleans, so ``skip_holidays: NO`` stays
Norway and ``overlap: off`` stays a string the schema can reject with a helpful message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from jobsched.core.errors import FieldError, SpecError, field_errors
from jobsched.core.spec import JobSpec

JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1's yes/no/on/off booleans."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def parse_document(text: str, *, suffix: str = ".yaml") -> Any:
    """The raw document; SpecError with the line number on a syntax error."""
    try:
        if suffix == ".json":
            return json.loads(text)
        return yaml.load(text, Loader=_Yaml12Loader)
    except json.JSONDecodeError as error:
        raise SpecError([FieldError("", "syntax", f"line {error.lineno}, column {error.colno}: {error.msg}")]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError([FieldError("", "syntax", f"{where}{problem}")]) from None


def validate_document(document: Any) -> JobSpec:
    """A JobSpec, or SpecError carrying every problem found."""
    if document is None:
        raise SpecError([FieldError("", "empty", "the document is empty; expected a job mapping")])
    if not isinstance(document, dict):
        raise SpecError([FieldError("", "not_a_mapping", f"expected a job mapping, got {type(document).__name__}")])
    try:
        return JobSpec.model_validate(document)
    except ValidationError as error:
        raise SpecError(field_errors(error, JobSpec)) from None


def load_job_file(path: Path) -> JobSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError([FieldError("", "unreadable", f"cannot read the file: {error}")]) from None
    return validate_document(parse_document(text, suffix=path.suffix.lower()))


@dataclass(frozen=True)
class JobFileResult:
    path: Path
    job: JobSpec | None
    errors: list[FieldError]


def find_job_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Files as given; directories searched recursively for .yaml/.yml/.json, in sorted order (a job file's test,
    ``NAME.test.yaml``, is not a job file: ``jobsched test`` reads those)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(
                candidate
                for candidate in path.rglob("*")
                if candidate.is_file()
                and candidate.suffix.lower() in JOB_FILE_SUFFIXES
                and not candidate.name.lower().endswith((".test.yaml", ".test.yml", ".test.json"))
            )
        else:
            yield path


def validate_files(paths: Iterable[Path]) -> list[JobFileResult]:
    """Validate every file, and flag a team/name defined by more than one file."""
    results: list[JobFileResult] = []
    owners: dict[str, Path] = {}
    for path in find_job_files(paths):
        if not path.exists():
            results.append(JobFileResult(path, None, [FieldError("", "not_found", "no such file")]))
            continue
        try:
            job = load_job_file(path)
        except SpecError as error:
            results.append(JobFileResult(path, None, error.errors))
            continue
        if job.key in owners:
            duplicate = FieldError("name", "duplicate_job", f"job {job.key} is also defined in {owners[job.key]}")
            results.append(JobFileResult(path, None, [duplicate]))
            continue
        owners[job.key] = path
        results.append(JobFileResult(path, job, []))
    return results
