"""Random and extreme values at every route, every handler that reads what a team or a caller controls, and every
bounded parser: deep nesting, huge numbers, non-ASCII and control characters, years 1 and 9999, thousands of
digits. Nothing may answer 5xx, and nothing may raise out of a handler (#26).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobsched.api.app import build_app, openapi_document
from jobsched.console.actions import ActionStores, confirm_identity, handle_action
from jobsched.console.widget import Viewer, render_widget
from tests.aws.api_client import ADMIN, ApiClient, team_role
from tests.aws.harness import Stack

EXTREME_TEXT = [
    "",
    "\u00b2",
    "\u0663",
    "9" * 5000,
    "99999999999999d",
    "P99999999999999D",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00+14:00",
    "a\r\nX-Injected: 1",
    "\x00",
    "\u4e2d\u6587",
    "\udcff",
    "../../etc/passwd",
    "[" * 100,
    "v2.\u00e9.\u00e9.\u00e9",
    "-1",
    "1e309",
]
texts = st.one_of(st.sampled_from(EXTREME_TEXT), st.text(max_size=40))
# What can travel in a URL or a header: no lone surrogates (a JSON body can carry them escaped, so bodies can).
plain_texts = st.one_of(
    st.sampled_from([t for t in EXTREME_TEXT if t.encode("utf-8", "ignore").decode() == t]),
    st.text(st.characters(codec="utf-8"), max_size=40),
)
numbers = st.one_of(
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 2**70, 10**400]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(["", "\x00"]), texts), inner, max_size=4)
    ),
    max_leaves=12,
)


DOCUMENT: dict[str, Any] = json.loads(openapi_document(build_app(lambda: None)))  # type: ignore[arg-type,return-value]
OPERATIONS = [(method.upper(), path, op) for path, ops in DOCUMENT["paths"].items() for method, op in ops.items()]


JOB = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "lambda", "function": "echo"}}


def body_fields(operation: dict[str, Any]) -> list[str]:
    """The top-level fields of the operation's body model, so values reach each field's own validator."""
    schema = (
        operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
    )
    if not schema:
        return []
    # Every body model as the document declares it (they were looked up in api.models, which missed the bodies
    # declared elsewhere: their fields were never reached).
    return list(DOCUMENT["components"]["schemas"][schema.rsplit("/", 1)[-1]].get("properties", {}))


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], str | None]:
    method, path, operation = draw(st.sampled_from(OPERATIONS))
    names = re.findall(r"{(\w+)}", path)
    known = {"team": "payments", "name": "hourly"}
    for name in names:
        # Mostly a real identifier, so the other values get past the path to the body and query they are in.
        value = draw(st.one_of(*[st.just(known.get(name, "20270104T090000Z"))] * 5, plain_texts))
        path = path.replace(f"{{{name}}}", quote(value or "x", safe=""))
    query = {
        p["name"]: draw(st.one_of(plain_texts, numbers.map(str)))
        for p in operation.get("parameters", [])
        if p["in"] == "query" and draw(st.booleans())
    }
    headers = {
        header: draw(plain_texts)
        for header in ("If-Match", "Idempotency-Key", "X-Jobsched-Token")
        if draw(st.integers(0, 3)) == 0
    }
    shape = draw(st.integers(0, 3))
    if shape == 0:
        body: str | None = None
    elif shape == 1:
        depth = draw(st.sampled_from([63, 64, 65, 1000, 60_000]))
        body = "[" * depth + "]" * depth
    else:
        fields = body_fields(operation)
        document = {field: draw(values) for field in fields if draw(st.booleans())} if fields else draw(values)
        if shape == 3 and isinstance(document, dict) and "schedule" in fields:
            document = {**JOB, **document}  # a spec that is otherwise valid, so the extreme field is what is judged
        body = json.dumps(document)
    target = f"{path}?{urlencode(query)}" if query else path
    return method, target, headers, body


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    client = ApiClient(stack, requests_per_minute=1_000_000)
    assert client.call("PUT", "/teams/payments/jobs/hourly", JOB).status == 201
    return client


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=requests(), caller=st.sampled_from([ADMIN, team_role("payments"), team_role("other"), None]))
def test_no_value_at_any_route_gets_a_5xx(
    api: ApiClient, request: tuple[str, str, dict[str, str], str | None], caller: str | None
) -> None:
    method, target, headers, body = request
    response = api.call(method, target, principal=caller, headers=headers, raw_body=body)  # raises if it escaped
    event(f"{response.status}")  # --hypothesis-show-statistics: which answers the values reached
    assert response.status < 500, (method, target, headers, (body or "")[:200], response.body)
    if response.status >= 400:
        assert isinstance(response.body, dict) and response.body["error"]["code"], response.body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(st.sampled_from(["view", "team", "job", "run_id", "widgetContext"]), values),
    oncall=st.booleans(),
)
def test_the_console_widget_renders_any_event(stack: Stack, params: dict[str, Any], oncall: bool) -> None:
    viewer = Viewer(None, every_team=True) if oncall else Viewer("payments")
    event = {"widgetContext": {"params": params, "timeRange": {"start": 1, "end": 10**15}}, **params}
    now = datetime(2027, 1, 4, tzinfo=UTC)
    page = render_widget(event, stack.jobs, stack.runs, now, viewer=viewer)
    assert isinstance(page, str) and "<script" not in page


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.dictionaries(st.sampled_from(["action", "job", "run_id", "force", "reason", "widgetContext"]), values))
def test_a_console_button_call_with_any_event_is_answered(stack: Stack, event: dict[str, Any]) -> None:
    stores = ActionStores(jobs=stack.jobs, runs=stack.runs, queues=stack.queues)
    now = datetime(2027, 1, 4, tzinfo=UTC)
    arn = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-ConsoleActions:team-payments"
    result = handle_action(event, invoked_function_arn=arn, request_id="req-1", stores=stores, now=now)
    assert 200 <= result.status < 500


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(detail=values, function=texts)
def test_the_console_audit_takes_any_record(stack: Stack, detail: Any, function: str) -> None:
    record = {"detail": detail}
    if isinstance(detail, dict):
        record["detail"] = {
            **detail,
            "eventName": "Invoke",
            "requestID": "req-1",
            "requestParameters": {"functionName": function},
        }
    assert confirm_identity(record, stack.jobs) is None  # no such request was made: it names nobody
