"""``make iam``: every AWS call the recorded suites made, judged against the template they were made under, the
walls between teams probed, and the grants no call used counted.

    python -m infra.iam.check build/iam/calls

prints one line, ``iam: N calls (M distinct role/action pairs) allowed, K cross-team probes denied, U unused grants
(why each is kept), X unexplained``, writes the details beside the recordings (``report.txt``), and exits 1 when
anything is unexplained: a recorded call IAM would deny, a probe IAM would allow that is not listed as a wall only the
adapters hold, or an SDK call the request table does not know. Grants no recorded call used are counted and listed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infra.iam.evaluate import Asked, Verdict, implied, judge
from infra.iam.probes import ADAPTER_WALLS, cross_team_probes, resource_kind_probes
from infra.iam.recording import RecordedCall, load_recording
from infra.iam.requests import IamRequest, queue_arn
from infra.iam.template import Policies, policies

KEPT_GRANTS = Path(__file__).with_name("kept-grants.json")
MOTO_ONLY = "moto only: "  # how a kept reason says its path runs in the unrecorded moto suites (tests/aws) only


@dataclass
class Report:
    allowed: list[Verdict] = field(default_factory=list)
    denied: list[Verdict] = field(default_factory=list)  # recorded calls IAM would refuse
    probes_denied: list[Verdict] = field(default_factory=list)
    probes_allowed: list[Verdict] = field(default_factory=list)  # walls IAM does not hold
    adapter_walls: list[tuple[Verdict, str]] = field(default_factory=list)  # ... and said so, with the reason
    unmapped: list[RecordedCall] = field(default_factory=list)
    unused: list[tuple[str, str, str]] = field(default_factory=list)  # (role, action, statement) never deciding
    unused_kept: list[tuple[str, str, str, str]] = field(default_factory=list)  # ... with the reason it stays

    @property
    def unexplained(self) -> int:
        """What fails ``make iam``. Grants no call used are counted and listed (``unused``), not yet failed on: the
        recorded suites do not reach every path (kubernetes targets, the console), so a grant unused here may be
        needed there; kept-grants.json gives the reasons already written."""
        return len(self.denied) + len(self.probes_allowed) + len(self.unmapped)

    def line(self) -> str:
        pairs = {(v.asked.role_arn.rsplit("/", 1)[-1], v.asked.request.action) for v in self.allowed}
        moto_only = sum(1 for *_, reason in self.unused_kept if reason.startswith(MOTO_ONLY))
        return (
            f"iam: {len(self.allowed)} calls ({len(pairs)} distinct role/action pairs) allowed, "
            f"{len(self.probes_denied)} cross-team probes denied, {len(self.unused) + len(self.unused_kept)} unused "
            f"grants ({len(self.unused_kept) - moto_only} used by AWS itself or bundled, {moto_only} on paths only "
            f"the moto suites drive, {len(self.unused)} with no reason), {self.unexplained} unexplained"
        )


def recorded_requests(
    calls: list[RecordedCall], seen_tags: dict[str, dict[str, str]], found: Policies, roles: dict[str, str]
) -> list[Asked]:
    asked: set[Asked] = set()
    sessions: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
    for call in calls:
        role = call.principal.assumed_role or roles.get(call.principal.function, f"unknown:{call.principal.function}")
        request = replace(call.request, resource=canonical(call.request.resource, seen_tags))
        tags = tags_of(request.resource, seen_tags) or found.tags.get(request.resource) or {}
        one = Asked(role, call.principal.session_tags, request, tuple(sorted(tags.items())), why=call.operation)
        asked.add(one)
        asked.update(implied(one, found))
        if call.principal.assumed_role:
            sessions.add(
                (roles.get(call.principal.function, ""), call.principal.assumed_role, call.principal.session_tags)
            )
    # A function that acts as a team's session assumed it first (locally, one process shares one session).
    for function_role, assumed, session_tags in sessions:
        context = (("sts:tags", json.dumps([list(t) for t in session_tags])),) if session_tags else ()
        one = Asked(
            function_role, (), IamRequest("sts:AssumeRole", assumed, context), why="sts:AssumeRole (a team's session)"
        )
        asked.add(one)
        asked.update(implied(one, found))
    return sorted(asked, key=lambda a: json.dumps([a.role_arn, a.request.to_json(), a.session_tags], sort_keys=True))


def machine_requests(calls: list[RecordedCall], found: Policies, physical: dict[str, str]) -> list[Asked]:
    """What the DAG machines the API created ask as their role (Step Functions calls, made by moto's interpreter
    locally, so never recorded): a task state's message to a work queue (``sqs:sendMessage``, with its KMS), a
    distributed map's ItemReader (``s3:getObject`` in the account), its child executions (start, read, stop)."""
    role = next((r.arn for r in found.roles.values() if r.logical.startswith("WorkflowsStateMachineRole")), None)
    machines = sorted({c.request.resource for c in calls if c.request.action == "states:CreateStateMachine"})
    if role is None or not machines:
        return []
    account = role.split(":")[4]
    work = re.compile(r"-Work(High|Normal|Low)(-\d+)?$")
    queues = [queue_arn(url, "us-east-1") for url in physical.values() if work.search(url)]
    execution = machines[0].replace(":stateMachine:", ":execution:") + ":child"
    wanted = [IamRequest("sqs:SendMessage", queue) for queue in queues] + [
        IamRequest("s3:GetObject", "arn:aws:s3:::a-teams-bucket/items.csv", (("s3:ResourceAccount", account),)),
        IamRequest("states:StartExecution", machines[0]),
        IamRequest("states:DescribeExecution", execution),
        IamRequest("states:StopExecution", execution),
    ]
    asked = [Asked(role, (), request, why="a DAG machine's own call") for request in wanted]
    return asked + [extra for one in asked for extra in implied(one, found)]


def canonical(resource: str, seen_tags: dict[str, dict[str, str]]) -> str:
    """A task or job definition named without its revision is authorized as the revision it resolves to: the
    latest one the code read (DescribeTaskDefinition, DescribeJobDefinitions)."""
    if not re.search(r":(ecs|batch):.*:(task|job)-definition/[^:]+$", resource):
        return resource
    revisions = [arn for arn in seen_tags if arn.startswith(f"{resource}:") and arn.rsplit(":", 1)[1].isdigit()]
    return max(revisions, key=lambda arn: int(arn.rsplit(":", 1)[1])) if revisions else f"{resource}:1"


def tags_of(resource: str, seen_tags: dict[str, dict[str, str]]) -> dict[str, str]:
    """The tags the code read of a resource; a log stream's are its log group's (streams carry none)."""
    if ":log-stream:" in resource:
        resource = resource.split(":log-stream:", 1)[0]
    return seen_tags.get(resource, {})


def evaluate(record_dir: Path, kept: dict[str, str]) -> Report:
    report = Report()
    decided: set[str] = set()
    groups = sorted(record_dir.glob("*.deployment.json"))
    if not groups:
        raise SystemExit(f"no recordings in {record_dir} (the end-to-end suites record with JOBSCHED_IAM_RECORD_DIR)")
    all_roles: dict[str, Policies] = {}
    for deployment_file in groups:
        deployment = json.loads(deployment_file.read_text())
        calls, seen_tags = load_recording(
            [deployment_file.with_name(deployment_file.name.replace(".deployment.json", ".calls.jsonl"))]
        )
        found = policies(deployment["template"], deployment["physical"], account="123456789012", region="us-east-1")
        all_roles[deployment_file.name] = found
        report.unmapped += [c for c in calls if c.request.unmapped]
        asked = recorded_requests(
            [c for c in calls if not c.request.unmapped], seen_tags, found, deployment["function_roles"]
        )
        asked += machine_requests(calls, found, deployment["physical"])
        probes = cross_team_probes(asked) + resource_kind_probes(found, deployment["physical"])
        decided |= judge_into(report, asked + probes, found)
    _unused(report, all_roles, decided, kept)
    return report


def judge_into(report: Report, asked: list[Asked], found: Policies) -> set[str]:
    """Judge ``asked`` into ``report``; the statements that decided an allowed request."""
    decided: set[str] = set()
    for verdict in judge(asked, found):
        decided.update(verdict.allowed_by)
        _sort(report, verdict)
    return decided


def _sort(report: Report, verdict: Verdict) -> None:
    if verdict.asked.expect_allowed:
        (report.allowed if verdict.as_expected else report.denied).append(verdict)
        return
    if verdict.as_expected:
        report.probes_denied.append(verdict)
        return
    reason = ADAPTER_WALLS.get(verdict.asked.request.action)
    if reason is not None:
        report.adapter_walls.append((verdict, reason))
    else:
        report.probes_allowed.append(verdict)


def _unused(report: Report, found: dict[str, Policies], decided: set[str], kept: dict[str, str]) -> None:
    seen: set[tuple[str, str, str]] = set()
    for policies_of in found.values():
        for role in policies_of.roles.values():
            role_name = role.logical
            for name, document in role.identity:
                for statement in document["Statement"]:
                    if statement.get("Effect") != "Allow" or f"identity:{name}#{statement['Sid']}" in decided:
                        continue
                    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                    for action in actions:
                        entry = (role_name, action, f"{name}#{statement['Sid']}")
                        if entry in seen:
                            continue
                        seen.add(entry)
                        reason = _kept_reason(kept, role_name, action)
                        if reason:
                            report.unused_kept.append((*entry, reason))
                        else:
                            report.unused.append(entry)


def _kept_reason(kept: dict[str, str], role: str, action: str) -> str | None:
    """A kept grant is named ``RolePrefix action`` (the role's logical id starts with the prefix), or ``* action``."""
    for key, reason in kept.items():
        prefix, _, kept_action = key.partition(" ")
        if kept_action == action and (prefix == "*" or role.startswith(prefix)):
            return reason
    return None


def write_report(report: Report, path: Path) -> None:
    def line(v: Verdict) -> str:
        tags = dict(v.asked.session_tags).get("jobsched-team", "")
        who = v.asked.role_arn.rsplit("/", 1)[-1] + (f" (team {tags})" if tags else "")
        request = v.asked.request
        return f"  {who}: {request.action} on {request.resource} [{v.asked.why}] -> {v.result} {v.errors or ''}"

    sections: list[tuple[str, list[str]]] = [
        ("recorded calls IAM would deny", [line(v) for v in report.denied]),
        ("cross-team probes IAM allows (walls not in IAM)", [line(v) for v in report.probes_allowed]),
        ("cross-team probes IAM denies", [line(v) for v in report.probes_denied]),
        (
            "walls only the adapters hold, and why IAM cannot say them",
            [f"{line(v)}\n    {why}" for v, why in report.adapter_walls],
        ),
        (
            "SDK calls the request table does not know",
            [f"  {c.principal.function}: {c.operation} {c.request.context}" for c in report.unmapped],
        ),
        (
            "grants no recorded call used, with no reason kept (unreached paths, or grants to remove)",
            [f"  {r}: {a} ({s})" for r, a, s in report.unused],
        ),
        ("grants kept though unused, and why", [f"  {r}: {a} ({s}): {why}" for r, a, s, why in report.unused_kept]),
        (
            "allowed, and the statement that decided",
            [f"{line(v)} by {', '.join(v.allowed_by)}" for v in report.allowed],
        ),
    ]
    text = [report.line(), ""]
    for title, lines in sections:
        text += [f"{title}: {len(lines)}", *lines, ""]
    path.write_text("\n".join(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record_dir", type=Path)
    arguments = parser.parse_args(argv)
    kept: dict[str, Any] = json.loads(KEPT_GRANTS.read_text()) if KEPT_GRANTS.exists() else {}
    report = evaluate(arguments.record_dir, {k: v for k, v in kept.items() if not k.startswith("_")})
    write_report(report, arguments.record_dir / "report.txt")
    print(report.line())
    if report.unexplained:
        print(f"details: {arguments.record_dir / 'report.txt'}", file=sys.stderr)
    return 1 if report.unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
