"""Validation errors people can act on: a stable code, the field path, what is wrong and what is allowed.

The same ``FieldError`` list feeds ``jobsched validate`` (``file: path: message``) and the API's 4xx bodies.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class FieldError:
    path: str  # dotted, with [i] for list items: "dag.tasks[2].depends_on[0]"; "" for the whole document
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(ValueError):
    """A document that is not a valid job; carries every error found, not the first only."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


def field_errors(error: ValidationError, model: type[BaseModel]) -> list[FieldError]:
    """Turn pydantic's errors into FieldErrors with friendly messages, in document order."""
    return field_errors_from(error.errors(include_url=False), model)


def field_errors_from(details: Any, model: type[BaseModel]) -> list[FieldError]:
    """The same for error dicts from elsewhere (the API's request validation)."""
    result = []
    for detail in details:
        tagged = tuple(detail["loc"])
        result.append(
            FieldError(
                path=format_path(_drop_union_tags(tagged)),
                code=str(detail["type"]),
                message=_message(detail, tagged, model),
            )
        )
    return _unique(result)


def format_path(location: tuple[Any, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _message(detail: Any, location: tuple[Any, ...], model: type[BaseModel]) -> str:
    """pydantic's error in words a job author acts on: what was given, what is allowed."""
    kind = detail["type"]
    context = detail.get("ctx") or {}
    given = detail.get("input")
    if kind == "extra_forbidden":
        return _unknown_field(location, model)
    if kind == "union_tag_invalid":
        return _unknown_type(context)
    if kind == "union_tag_not_found":
        return "'type' is required; allowed: " + ", ".join(_target_tags())
    fixed = _FIXED_MESSAGES.get(kind)
    if fixed is not None:
        return fixed
    if kind in ("literal_error", "enum"):
        expected = str(context.get("expected", "")).replace("'", "")
        return f"{given!r} is not allowed; allowed: {expected}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping of fields, got {_describe(given)}"
    if kind == "list_type":
        return f"expected a list, got {_describe(given)}"
    if kind.startswith(("string_type", "int_", "float_", "bool_")):
        return f"{detail['msg'].replace('Input should', 'should')}, got {_describe(given)}"
    if kind.startswith("datetime_"):
        return f"expected an ISO-8601 date and time with offset (2027-01-01T00:00:00Z), got {given!r}"
    return str(detail["msg"]).removeprefix("Value error, ")


_FIXED_MESSAGES = {
    "missing": "required field is missing",
    "timezone_aware": "must include a UTC offset or Z, e.g. 2027-01-01T00:00:00Z",
}


def _unknown_field(location: tuple[Any, ...], model: type[BaseModel]) -> str:
    allowed = _allowed_fields(location[:-1], model)
    field = str(location[-1]) if location else ""
    close = difflib.get_close_matches(field, allowed, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown field '{field}'{hint}; allowed here: {', '.join(allowed)}"


def _unknown_type(context: dict[str, Any]) -> str:
    tags = str(context.get("expected_tags", "")).replace("'", "")
    tag = context.get("tag")
    close = difflib.get_close_matches(str(tag), [t.strip() for t in tags.split(",")], n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown type {tag!r}{hint}; allowed: {tags}"


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) < 60 else text[:57] + '...'}"


def _drop_union_tags(location: tuple[Any, ...]) -> tuple[Any, ...]:
    """pydantic puts the discriminator value into the path (target.lambda.function); users never wrote it."""
    tags = set(_target_tags())
    kept: list[Any] = []
    for index, part in enumerate(location):
        previous = location[index - 1] if index else None
        if isinstance(part, str) and part in tags and previous == "target":
            continue
        if part in ("own", "company") and previous == "calendar":  # schedule.calendar's forms (core.spec.schedule)
            continue
        kept.append(part)
    return tuple(kept)


def _target_tags() -> tuple[str, ...]:
    from jobsched.core.spec import TARGET_TYPES

    return TARGET_TYPES


def _allowed_fields(location: tuple[Any, ...], model: type[BaseModel]) -> list[str]:
    """The field names valid at ``location``, found by walking the model's annotations."""
    current: Any = model
    for part in location:
        current = _step(current, part)
        if current is None:
            return []
    models = _models_in(current)
    names: list[str] = []
    for candidate in models:
        # As the client writes them: a field's alias (backfill's `from`, not `start`).
        written = (field.alias or name for name, field in candidate.model_fields.items())
        names.extend(name for name in written if name not in names)
    return names


def _step(annotation: Any, part: Any) -> Any:
    models = _models_in(annotation)
    for model in models:
        if isinstance(part, str) and part in model.model_fields:
            return model.model_fields[part].annotation
    for model in models:
        # A discriminated union member, named in the path by its tag (target.lambda.function).
        tag = model.model_fields.get("type")
        if tag is not None and part in get_args(tag.annotation):
            return model
    for inner in _unwrap(annotation):
        origin = get_origin(inner)
        if isinstance(part, int) and origin is list:
            return get_args(inner)[0]
        if isinstance(part, str) and origin is dict:
            return get_args(inner)[1]
    return None


def _unwrap(annotation: Any) -> list[Any]:
    """Flatten Annotated, Optional and unions into the member types."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [member for arg in get_args(annotation) for member in _unwrap(arg)]
    return [annotation]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    return [member for member in _unwrap(annotation) if isinstance(member, type) and issubclass(member, BaseModel)]


def _unique(errors: list[FieldError]) -> list[FieldError]:
    seen: set[tuple[str, str]] = set()
    result = []
    for error in errors:
        if (error.path, error.message) not in seen:
            seen.add((error.path, error.message))
            result.append(error)
    return result


class WorkflowsNotConfigured(RuntimeError):
    """This deployment has no state machine role or prefix, so DAG jobs cannot run here."""


class ExecutionNotOurs(RuntimeError):
    """An execution with the run's name exists but another input started it: never adopted."""


class BatchContention(Exception):
    """A batched trigger's current batch kept changing while one event was added: the intake leaves the event
    on its queue, and its redelivery adds it."""


class TriggerRefused(Exception):
    """EventBridge would not take a trigger's rule (its pattern, its bus, the bus's rule quota): a 422 on the
    trigger's field, raised before the job is stored."""

    def __init__(self, where: int | str, field: str, code: str, message: str) -> None:
        super().__init__(message)
        path = f"triggers[{where}]" if isinstance(where, int) else where  # a trigger's index, or a field's path
        self.error = FieldError(f"{path}.{field}" if field else path, code, message)


class ChannelRefused(RuntimeError):
    """The job names a topic or webhook its team may not use; nothing was sent there."""


class QueueSendError(RuntimeError):
    """Some messages could not be sent after retries; the caller must not advance past them."""
