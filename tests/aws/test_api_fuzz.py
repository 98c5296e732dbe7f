"""Schema fuzzing: schemathesis drives /openapi.json over HTTP (the local gateway on 127.0.0.1).

Every check schemathesis has, through its CLI; and the error answers of the API as the document declares them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.local.gateway import LocalGateway
from tests.aws.fuzzing import EVERY_CHECK, JOB_SPEC_OPERATION, schemathesis


def test_schemathesis_with_every_check_finds_nothing_in_the_job_specs_coverage(
    gateway: LocalGateway, tmp_path: Path
) -> None:
    """Every check: no 5xx, every status and body documented, schema-invalid requests refused, undeclared methods 405
    with the path's Allow. Here the coverage phase (with its content-type and method probes) of the job spec's PUT,
    the largest part of the run; the other operations' coverage, and the examples, fuzzing and stateful phases of
    every operation: tests/aws/test_api_fuzz_phases.py and test_api_fuzz_coverage.py (schema-valid requests
    accepted: test_api_fuzz_acceptance.py), modules of their own so that the suite's workers run them side by side."""
    summary = schemathesis(
        gateway, tmp_path, *EVERY_CHECK, "--phases", "coverage", "--include-operation-id", JOB_SPEC_OPERATION
    )
    assert "Tested: 1" in summary, summary


def test_the_error_answers_are_declared_on_every_operation(gateway: LocalGateway) -> None:
    import json

    import urllib3

    document = json.loads(urllib3.request("GET", f"{gateway.url}/openapi.json").data)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status in ("401", "403", "404", "413", "415", "422", "429"):
                declared = operation["responses"][status]["content"]["application/json"]["schema"]
                assert declared == {"$ref": "#/components/schemas/ErrorResponse"}, f"{method} {path} {status}"
    assert document["components"]["schemas"]["ErrorResponse"]["properties"]["error"]


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "BREW"])
def test_a_method_no_route_has_gets_405_with_the_json_error_body(gateway: LocalGateway, method: str) -> None:
    import http.client
    import json

    host, port = gateway.server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=5)
    connection.request(method, "/teams/payments/jobs")
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    assert response.status == 405 and response.getheader("Content-Type") == "application/json"
    assert body["error"]["code"] == "method_not_allowed" and method in body["error"]["message"]
    assert "GET" in (response.getheader("Allow") or "")


def request(gateway: LocalGateway, method: str, path: str, body: str, content_type: str) -> tuple[int, Any, Any]:
    import json

    import urllib3

    response = urllib3.request(method, gateway.url + path, body=body, headers={"Content-Type": content_type})
    return response.status, json.loads(response.data), response.headers


@pytest.mark.parametrize("content_type", ["multipart/form-data", "multipart/form-data; boundary=x", "text/plain"])
@pytest.mark.parametrize(
    "method, path", [("PUT", "/teams/payments/jobs/other"), ("POST", "/teams/payments/jobs/hourly/pause")]
)
def test_a_body_that_is_not_json_gets_415_in_the_one_error_body(
    gateway: LocalGateway, content_type: str, method: str, path: str
) -> None:
    status, body, _ = request(gateway, method, path, "a=1", content_type)
    assert status == 415 and body["error"]["code"] == "unsupported_media_type"
    assert body["error"]["field"] == "Content-Type" and "application/json" in body["error"]["message"]
    status, _, _ = request(gateway, "GET", "/teams/payments/jobs/other", "", "application/json")
    assert status == 404  # nothing was stored


def test_a_dependency_that_is_not_a_name_is_a_422_on_its_field(gateway: LocalGateway) -> None:
    spec = {"dag": {"tasks": [{"name": "a", "depends_on": [{}], "target": {"type": "callback"}}]}}
    import json

    status, body, _ = request(gateway, "PUT", "/teams/payments/jobs/dag", json.dumps(spec), "application/json")
    assert status == 422 and body["error"]["field"] == "dag.tasks[0].depends_on[0]"


@pytest.mark.parametrize(
    "path, allowed",
    [
        ("/teams/payments/jobs/hourly/trigger", "payload"),
        ("/teams/payments/jobs/hourly/backfill", "from, to"),
        ("/teams/payments/jobs/hourly/runs/20270104T090000Z/rerun", "force"),
    ],
)
def test_an_unknown_field_lists_the_fields_of_that_body(gateway: LocalGateway, path: str, allowed: str) -> None:
    status, body, _ = request(gateway, "POST", path, '{"bogus": 1}', "application/json")
    [bogus] = [error for error in body["error"]["errors"] if error["field"] == "bogus"]
    assert status == 422 and bogus["code"] == "extra_forbidden"
    message = bogus["message"]
    assert f"allowed here: {allowed}" in message and "schedule" not in message, message


def test_an_undeclared_method_gets_405_with_the_paths_own_methods(gateway: LocalGateway) -> None:
    status, body, headers = request(gateway, "OPTIONS", "/teams/payments/jobs/hourly", "", "application/json")
    assert status == 405 and headers["Allow"] == "DELETE, GET, PUT" and body["error"]["code"] == "method_not_allowed"
    status, body, _ = request(gateway, "OPTIONS", "/nowhere", "", "application/json")
    assert status == 404 and body["error"]["code"] == "no_route"
