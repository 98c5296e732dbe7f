"""A container run's own lines: the awslogs stream of each of its task's containers, read as the run's team.

The stream is ``{awslogs-stream-prefix}/{container}/{task id}`` in the container's ``awslogs-group`` (the task
definition's log configuration; ECS's naming). The group must be the team's (its ``jobsched-team`` tag): a task
definition pointing at another team's group shows a line saying so, never that group's lines.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.records import LogLine
from jobsched.core.tz import UTC
from jobsched.tenancy.ownership import NotOwned, OwnershipGuard, ResourceKind, ResourceRef

MISSING_STREAM = ("ResourceNotFoundException",)
BATCH_DEFAULT_LOG_GROUP = "/aws/batch/job"


class ContainerLogs:
    def __init__(self, sessions: TeamSessions, guard: OwnershipGuard) -> None:
        self.sessions, self.guard = sessions, guard

    def lines(self, team: str, work: dict[str, str], *, since: datetime, until: datetime, limit: int) -> list[LogLine]:
        if work.get("job_id"):
            return self._batch_lines(team, work, since, until, limit)
        task_arn, definition = work.get("task_arn"), work.get("task_definition")
        if not task_arn or not definition:
            return []
        ecs = self.sessions.client(team, "ecs")
        containers = ecs.describe_task_definition(taskDefinition=definition)["taskDefinition"]["containerDefinitions"]
        task_id = task_arn.rsplit("/", 1)[-1]
        found: list[LogLine] = []
        for container in containers:
            options = awslogs_options(container)
            if options is None:
                continue
            stream = f"{options['awslogs-stream-prefix']}/{container['name']}/{task_id}"
            component = f"container:{container['name']}"
            found += self._owned_events(
                team, options["awslogs-group"], stream, component, since, until, limit - len(found)
            )
        return sorted(found, key=lambda line: line.at)[:limit]

    def _batch_lines(
        self, team: str, work: dict[str, str], since: datetime, until: datetime, limit: int
    ) -> list[LogLine]:
        """A Batch job's stream (DescribeJobs names it), in its definition's awslogs group or Batch's default
        ``/aws/batch/job``, which is shared by every job of the account: its lines are shown only from a group
        tagged for the team."""
        batch = self.sessions.client(team, "batch")
        found = batch.describe_jobs(jobs=[work["job_id"]]).get("jobs", [])
        container = (found[0].get("container") or {}) if found else {}
        stream = container.get("logStreamName")
        if not stream:
            return []
        options = (container.get("logConfiguration") or {}).get("options") or {}
        group = str(options.get("awslogs-group") or BATCH_DEFAULT_LOG_GROUP)
        return self._owned_events(team, group, str(stream), "container:job", since, until, limit)

    def _owned_events(
        self, team: str, group: str, stream: str, component: str, since: datetime, until: datetime, limit: int
    ) -> list[LogLine]:
        """The stream's lines if its group is the team's; else one line saying why they are not shown."""
        try:
            self.guard.check(ResourceRef(ResourceKind.LOG_GROUP, group, "logConfiguration.awslogs-group"), team)
        except NotOwned as refused:
            return [LogLine(since, component, "WARNING", f"not shown: {refused}", {"log_group": group})]
        return self._events(team, group, stream, component, since, until, limit)

    def _events(
        self, team: str, group: str, stream: str, component: str, since: datetime, until: datetime, limit: int
    ) -> list[LogLine]:
        if limit <= 0:
            return []
        logs = self.sessions.client(team, "logs")
        try:
            events = logs.get_log_events(
                logGroupName=group,
                logStreamName=stream,
                startTime=int(since.timestamp() * 1000),
                endTime=int(until.timestamp() * 1000) + 1,
                limit=min(limit, 10_000),
                startFromHead=True,
            )["events"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in MISSING_STREAM:
                return []  # the container wrote nothing (or has not started)
            raise
        fields = {"log_group": group, "log_stream": stream}
        return [
            LogLine(datetime.fromtimestamp(event["timestamp"] / 1000, UTC), component, "", event["message"], fields)
            for event in events
        ]


def awslogs_options(container: dict[str, Any]) -> dict[str, str] | None:
    """The container's awslogs group and stream prefix, if it logs to CloudWatch Logs with both."""
    configuration = container.get("logConfiguration") or {}
    options = configuration.get("options") or {}
    if configuration.get("logDriver") != "awslogs" or not {"awslogs-group", "awslogs-stream-prefix"} <= set(options):
        return None
    return {str(k): str(v) for k, v in options.items()}
