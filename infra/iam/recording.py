"""What the code asks of AWS, recorded as IAM would be asked about it: while a recorder is installed, every botocore
API call made in this process (every client: one hook in ``BaseClient._make_api_call``) is turned into the IAM
requests it makes (``infra.iam.requests``) and kept once per distinct (caller, action, resource, context).

Who calls: a handler runs inside ``acting_as(function)`` (the local runtime does it around every invocation), so a
call made with the process's own credentials is that function's role's; a call made with credentials an
``sts:AssumeRole`` returned (a team's session) is that session's: the assumed role and its session tags. Threads a
handler starts inherit its caller (the recorder runs pool work in the submitter's context). A call made outside any
handler (a test's setup, the runtime's emulation of AWS itself) is counted, not evaluated.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from botocore.client import BaseClient

from infra.iam.requests import ACCOUNT, IamRequest, arn, iam_requests, named, queue_arn
from jobsched.core.names import JOB_TAG, OWNER_TAG, Env

TASK_TOKEN_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("jobsched_iam_caller", default=None)


@contextmanager
def acting_as(function: str) -> Iterator[None]:
    """Calls made inside are ``function``'s (its name as deployed; its role is the template's)."""
    token = CALLER.set(function)
    try:
        yield
    finally:
        CALLER.reset(token)


@contextmanager
def emulating() -> Iterator[None]:
    """Calls made inside are the local runtime's emulation of AWS (what IAM or a gateway decides), not a function's."""
    token = CALLER.set(None)
    try:
        yield
    finally:
        CALLER.reset(token)


@dataclass(frozen=True)
class Principal:
    function: str  # the deployed function whose role calls, or that assumed the session
    assumed_role: str | None = None  # the role ARN of a team's session
    session_tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RecordedCall:
    principal: Principal
    operation: str  # service:Operation, as the SDK named it
    request: IamRequest


@dataclass
class Recorder:
    calls: set[RecordedCall] = field(default_factory=set)
    sessions: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)  # access key -> role
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # resource ARN -> the tags the code read of it
    task_tokens: dict[str, str] = field(default_factory=dict)  # a DAG task's token -> its job (from its message)
    secret_arns: dict[str, str] = field(default_factory=dict)  # a secret's name -> its ARN (from answers)
    unattributed: int = 0  # calls made outside any handler: setup and emulation, not the scheduler's
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _saved: dict[str, Any] = field(default_factory=dict)

    def install(self) -> None:
        recorder, original, submit = self, BaseClient._make_api_call, ThreadPoolExecutor.submit
        self._saved = {"call": original, "submit": submit}

        def make_api_call(client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
            try:
                response = original(client, operation_name, api_params)
            except Exception:  # a call AWS answers with an error was still asked: IAM judged it first
                recorder.record(client, operation_name, api_params, None)
                raise
            recorder.record(client, operation_name, api_params, response)
            return response

        def submit_in_context(pool: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            return submit(pool, contextvars.copy_context().run, fn, *args, **kwargs)

        setattr(BaseClient, "_make_api_call", make_api_call)  # noqa: B010 - patched for the recording only
        setattr(ThreadPoolExecutor, "submit", submit_in_context)  # noqa: B010
        _active.append(self)

    def uninstall(self) -> None:
        if self._saved:
            setattr(BaseClient, "_make_api_call", self._saved["call"])  # noqa: B010
            setattr(ThreadPoolExecutor, "submit", self._saved["submit"])  # noqa: B010
            self._saved = {}
            _active.remove(self)

    def add(self, call: RecordedCall) -> None:
        with self._lock:
            self.calls.add(call)

    def record(self, client: BaseClient, operation: str, params: dict[str, Any], response: Any) -> None:
        function = CALLER.get()
        if function is None:
            with self._lock:
                self.unattributed += 1
            return
        service = client.meta.service_model.service_name
        credentials = client._request_signer._credentials  # which identity signed it
        key = credentials.access_key if credentials is not None else ""
        if service == "sts" and operation == "AssumeRole" and isinstance(response, dict):
            tags = tuple(sorted((t["Key"], t["Value"]) for t in params.get("Tags", [])))
            with self._lock:
                self.sessions[response["Credentials"]["AccessKeyId"]] = (params["RoleArn"], tags)
        with self._lock:
            assumed = self.sessions.get(key)
        principal = Principal(function, *(assumed or (None, ())))
        region = client.meta.region_name or "us-east-1"
        if isinstance(response, dict):
            seen = tags_seen(service, operation, params, response, region)
            with self._lock:  # an answer asked without its tags (no include=TAGS) does not erase them
                self.tags.update({arn: tags for arn, tags in seen.items() if tags or arn not in self.tags})
            if (service, operation) == ("sqs", "ReceiveMessage"):
                self._learn_tokens(response)
        for request in iam_requests(service, operation, params, region=region):
            if request.action in TASK_TOKEN_ACTIONS:
                request = replace(request, resource=self._machine_of(params.get("taskToken", "")))
            elif service == "secretsmanager":
                found = self._secret_arn(params.get("SecretId", ""), response)
                request = replace(request, resource=found or request.resource)
            with self._lock:
                self.calls.add(RecordedCall(principal, f"{service}:{operation}", request))

    def _secret_arn(self, secret: str, response: Any) -> str | None:
        """A secret named by name is its full ARN to IAM: the answer's, or an earlier answer's (an error has none)."""
        with self._lock:
            if isinstance(response, dict) and response.get("ARN"):
                self.secret_arns[secret] = response["ARN"]
            return self.secret_arns.get(secret)

    def _learn_tokens(self, response: dict[str, Any]) -> None:
        """A DAG task's message names its job and carries its token: SendTask* is authorized on that job's machine,
        which the token alone does not name."""
        for message in response.get("Messages", []):
            try:
                body = json.loads(message.get("Body", ""))
            except ValueError:
                continue
            if isinstance(body, dict) and isinstance(body.get("token"), str) and isinstance(body.get("job"), str):
                with self._lock:
                    self.task_tokens[body["token"]] = body["job"]

    def _machine_of(self, token: str) -> str:
        with self._lock:
            job = self.task_tokens.get(token)
            machines = [arn for arn, tags in self.tags.items() if ":stateMachine:" in arn and tags.get(JOB_TAG) == job]
        return machines[0] if job and machines else "*"

    def dump(self, path: Path) -> None:
        """JSON lines, one distinct call a line, then the tags read (``{"tags": {...}}``)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            for call in sorted(self.calls, key=lambda c: json.dumps(asdict(c), sort_keys=True)):
                out.write(json.dumps(asdict(call), sort_keys=True) + "\n")
            out.write(json.dumps({"tags": self.tags}, sort_keys=True) + "\n")


_active: list[Recorder] = []


def recorded_invoke(team: str, function_arn: str) -> None:
    """A Lambda target's Invoke that the local runtime answers in-process (moto would need Docker): in AWS it is
    made as the team's session, so it is recorded as one."""
    caller = CALLER.get()
    if not _active or caller is None:
        return
    principal = Principal(caller, os.environ.get(Env.TARGET_ROLE), ((OWNER_TAG, team),))
    for recorder in _active:
        recorder.add(RecordedCall(principal, "lambda:Invoke", IamRequest("lambda:InvokeFunction", function_arn)))


def _pairs(items: list[dict[str, str]], key: str = "Key", value: str = "Value") -> dict[str, str]:
    return {item[key]: item[value] for item in items}


def _each(items: list[dict[str, Any]], arn_key: str, tags: Any) -> dict[str, dict[str, str]]:
    return {item[arn_key]: tags(item) for item in items if item.get(arn_key)}


TagReader = Callable[[dict[str, Any], dict[str, Any], str], dict[str, dict[str, str]]]  # (params, answer, region)
# The resource tags a call's answer tells (what the adapters read before they act, and what IAM conditions on).
TAG_READERS: dict[tuple[str, str], TagReader] = {
    ("lambda", "ListTags"): lambda p, a, r: {p["Resource"]: dict(a.get("Tags", {}))},
    ("sqs", "ListQueueTags"): lambda p, a, r: {queue_arn(p["QueueUrl"], r): dict(a.get("Tags", {}))},
    ("stepfunctions", "ListTagsForResource"): lambda p, a, r: {
        p["resourceArn"]: _pairs(a.get("tags", []), "key", "value")
    },
    # A machine the API creates has the tags it was created with.
    ("stepfunctions", "CreateStateMachine"): lambda p, a, r: {
        a["stateMachineArn"]: _pairs(p.get("tags", []), "key", "value")
    },
    ("events", "ListTagsForResource"): lambda p, a, r: {p["ResourceARN"]: _pairs(a.get("Tags", []))},
    ("sns", "ListTagsForResource"): lambda p, a, r: {p["ResourceArn"]: _pairs(a.get("Tags", []))},
    ("secretsmanager", "DescribeSecret"): lambda p, a, r: {a["ARN"]: _pairs(a.get("Tags", []))},
    ("ssm", "ListTagsForResource"): lambda p, a, r: {
        named("ssm", "parameter", p["ResourceId"].lstrip("/"), r): _pairs(a.get("TagList", []))
    },
    ("s3", "GetBucketTagging"): lambda p, a, r: {f"arn:aws:s3:::{p['Bucket']}": _pairs(a.get("TagSet", []))},
    ("ecs", "DescribeClusters"): lambda p, a, r: _each(
        a.get("clusters", []), "clusterArn", lambda c: _pairs(c.get("tags", []), "key", "value")
    ),
    ("ecs", "DescribeTasks"): lambda p, a, r: _each(
        a.get("tasks", []), "taskArn", lambda t: _pairs(t.get("tags", []), "key", "value")
    ),
    # A task RunTask starts carries the tags it was started with.
    ("ecs", "RunTask"): lambda p, a, r: _each(
        a.get("tasks", []), "taskArn", lambda t: _pairs(p.get("tags", []), "key", "value")
    ),
    ("ecs", "ListTagsForResource"): lambda p, a, r: {p["resourceArn"]: _pairs(a.get("tags", []), "key", "value")},
    ("ecs", "DescribeTaskDefinition"): lambda p, a, r: _each(
        [a.get("taskDefinition", {})], "taskDefinitionArn", lambda d: _pairs(a.get("tags", []), "key", "value")
    ),
    ("logs", "ListTagsForResource"): lambda p, a, r: {p["resourceArn"]: dict(a.get("tags", {}))},
    ("batch", "DescribeJobQueues"): lambda p, a, r: _each(
        a.get("jobQueues", []), "jobQueueArn", lambda q: dict(q.get("tags", {}))
    ),
    ("batch", "DescribeJobDefinitions"): lambda p, a, r: _each(
        a.get("jobDefinitions", []), "jobDefinitionArn", lambda d: dict(d.get("tags", {}))
    ),
    ("iam", "ListRoleTags"): lambda p, a, r: {
        f"arn:aws:iam::{ACCOUNT}:role/{p['RoleName']}": _pairs(a.get("Tags", []))
    },
    ("eks", "DescribeCluster"): lambda p, a, r: {
        a.get("cluster", {}).get("arn") or arn("eks", r, f"cluster/{p['name']}"): dict(
            a.get("cluster", {}).get("tags", {})
        )
    },
}


def tags_seen(
    service: str, operation: str, params: dict[str, Any], response: dict[str, Any], region: str
) -> dict[str, dict[str, str]]:
    reader = TAG_READERS.get((service, operation))
    try:
        return reader(params, response, region) if reader else {}
    except (KeyError, TypeError):
        return {}


def load_recording(paths: list[Path]) -> tuple[list[RecordedCall], dict[str, dict[str, str]]]:
    found: set[RecordedCall] = set()
    tags: dict[str, dict[str, str]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            data = json.loads(line)
            if "tags" in data:
                tags.update(data["tags"])
                continue
            p = data["principal"]
            principal = Principal(p["function"], p["assumed_role"], tuple(tuple(t) for t in p["session_tags"]))
            found.add(RecordedCall(principal, data["operation"], IamRequest.from_json(data["request"])))
    return sorted(found, key=lambda c: json.dumps(asdict(c), sort_keys=True)), tags


# Where a test session's recordings go (``make test`` sets it): one calls file and one deployment file a runtime.
RECORD_DIR_ENV = "JOBSCHED_IAM_RECORD_DIR"


def dump_deployment(path: Path, template: dict[str, Any], physical: dict[str, str], roles: dict[str, str]) -> None:
    """What the calls are judged against: the template deployed, its physical ids, each function's role ARN."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"template": template, "physical": physical, "function_roles": roles}))
