"""/openapi.json as generated clients read it: named operations, grouped by resource, summarised."""

from __future__ import annotations

import json
import re
from typing import Any

from jobsched.api.app import build_app


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = json.loads(build_app(lambda: None).get_openapi_json_schema(title="jobsched", version="1"))  # type: ignore[arg-type,return-value]
    return [(method, path, op) for path, ops in document["paths"].items() for method, op in ops.items()]


def test_every_operation_has_a_camel_case_id_a_resource_tag_and_a_summary() -> None:
    found = operations()
    assert len(found) >= 20
    for method, path, op in found:
        where = f"{method.upper()} {path}"
        assert re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", op.get("operationId", "")), where
        assert op.get("tags") and op["tags"] != ["default"], where
        assert op.get("summary"), where
    ids = [op["operationId"] for _, _, op in found]
    assert len(ids) == len(set(ids)), "operation ids are unique"


def test_the_ids_a_client_calls_are_the_documented_ones() -> None:
    ids = {op["operationId"] for _, _, op in operations()}
    assert {"listJobs", "putJob", "getJob", "deleteJob", "listRuns", "getRun", "triggerJob", "cancelRun"} <= ids


def test_the_document_declares_itself_an_object() -> None:
    document = json.loads(build_app(lambda: None).get_openapi_json_schema(title="jobsched", version="1"))  # type: ignore[arg-type,return-value]
    answer = document["paths"]["/openapi.json"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer.get("type") == "object", answer
