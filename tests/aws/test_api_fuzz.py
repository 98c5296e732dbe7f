"""Schema fuzzing: schemathesis drives /openapi.json over HTTP (the local gateway on 127.0.0.1).

Checks: no 5xx for anything generated, and every response conforms to the schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import response_schema_conformance

from infra.local.gateway import LocalGateway
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Stack

JOB = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "lambda", "function": "echo"}}


@pytest.fixture
def gateway(stack: Stack) -> Iterator[LocalGateway]:
    api = ApiClient(stack, requests_per_minute=1_000_000)
    api.call("PUT", "/teams/payments/jobs/hourly", JOB)  # something for GETs to find
    server = LocalGateway(api.handle, principal=team_role("payments")).start()
    yield server
    server.stop()


def test_generated_requests_get_no_5xx_and_conforming_responses(gateway: LocalGateway) -> None:
    schema = schemathesis.openapi.from_url(f"{gateway.url}/openapi.json")
    failures: list[str] = []
    operations = list(schema.get_all_operations())
    assert len(operations) >= 15

    for result in operations:
        operation = result.ok()  # type: ignore[union-attr]

        @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def fuzz(case: schemathesis.Case) -> None:  # type: ignore[type-arg]
            response = case.call(base_url=gateway.url)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:200]}")
                return
            try:
                case.validate_response(response, checks=[response_schema_conformance])
            except Exception as error:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: {str(error)[:300]}")

        fuzz()
    assert not failures, "\n".join(failures[:20])


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
