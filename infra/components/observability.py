"""Alarms, SLO burn rates and dashboards, each over a metric the handlers publish (``jobsched.watch.signals``)."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.components.api import Api
from infra.components.common import resource_name, search_schema, signal
from infra.components.functions import Functions
from infra.components.queues import Queues
from infra.config import StageConfig
from jobsched.console.actions import CONSOLE_ALIAS_PREFIX
from jobsched.console.widget import CONSOLE_JOB, CONSOLE_TEAM, ONCALL_ALIAS
from jobsched.core.names import PRIORITIES, WORK_QUEUES, Env
from jobsched.core.slo import TIERS

SLO_SUCCESS = 0.995  # error budget 0.5%: burn-rate alarms page when it is spent 14.4x (1 h) or 6x (6 h) too fast


# Logs Insights over the worker's "run message" lines (functions/worker/handler.py logs job, team, run_id,
# outcome and detail on each): tests check those fields are really there.
TOP_FAILING_JOBS = (
    "fields job, team, outcome",
    'filter message = "run message" and outcome = "failed"',
    "stats count(*) as failures by job, team",
    "sort failures desc",
    "limit 10",
)


LATEST_FAILURES = (
    "fields @timestamp, job, run_id, attempt, detail",
    'filter message = "run message" and outcome = "failed"',
    "sort @timestamp desc",
    "limit 20",
)


FIVE_MINUTES = Duration.minutes(5)

# Each alarm's section of the operator guide's alarm runbook (docs/operate/alarms.md): its description ends with
# the link, so a page that quotes the alarm names what to do. The base is the deployment's (CDK context
# ``runbook_url``: where the platform publishes the docs site), by default the page in this repository.
RUNBOOK_SECTIONS: tuple[tuple[str, str], ...] = (
    ("NotEmpty", "dead-letters"),
    ("Oldest", "old-messages"),
    ("MissedTicks", "missed-ticks"),
    ("Throttles", "throttles"),
    ("Errors", "function-errors"),
    ("JobsQuarantined", "quarantined-jobs"),
    ("LostRunMessages", "lost-run-messages"),
    ("EventStart", "event-start-latency"),
    ("EventsRefused", "events-refused"),
    ("Unpublished", "run-finished-unpublished"),
    ("UsageUnrecorded", "usage-unrecorded"),
    ("WaitTimeouts", "wait-timeouts"),
    ("DuplicateExecutions", "duplicate-executions"),
    ("Api5xx", "api-5xx"),
    ("FireLateness", "fire-lateness"),
    ("Slo", "slo-burn"),
)


def runbook_section(alarm: str) -> str:
    """The section of the alarm runbook for an alarm (every alarm has one: a test holds it)."""
    return next(section for part, section in RUNBOOK_SECTIONS if part in alarm)


# Dashboard variables replace these in the widgets' parameters (a PATTERN variable).


def runs(outcome: str, period: Duration = FIVE_MINUTES) -> cloudwatch.Metric:
    return signal("RunsFinished", "Sum", period, outcome=outcome)


def lateness(stat: str, priority: str = "normal") -> cloudwatch.Metric:
    return signal("FireLatenessSeconds", stat, FIVE_MINUTES, priority=priority)


def tier_bad_ratio(tier: str, period: Duration, *, scale: float = 1.0) -> cloudwatch.MathExpression:
    """The bad share of a tier's counted runs (``TierRunsEnded``, emitted by the SLO ledger), times ``scale``
    (1 / the tier's allowed share: its burn rate). Ids per tier, so several tiers share one widget."""
    name = tier.replace("-", "_")
    good, bad = f"FILL(good_{name}, 0)", f"FILL(bad_{name}, 0)"
    return cloudwatch.MathExpression(
        expression=f"{scale:g} * IF({good} + {bad} > 0, {bad} / ({good} + {bad}), 0)",
        using_metrics={
            f"good_{name}": signal("TierRunsEnded", "Sum", period, tier=tier, outcome="good"),
            f"bad_{name}": signal("TierRunsEnded", "Sum", period, tier=tier, outcome="bad"),
        },
        label=tier,
        period=period,
    )


def failure_ratio(period: Duration) -> cloudwatch.MathExpression:
    # M1 over every run that ended, wherever it ended: timed out counts as failed. FILL: a period
    # with failures and no time-outs has no `slow` datapoint, and without it no ratio at all.
    ok, bad = "FILL(ok, 0)", "(FILL(bad, 0) + FILL(slow, 0))"
    return cloudwatch.MathExpression(
        expression=f"IF({ok} + {bad} > 0, {bad} / ({ok} + {bad}), 0)",
        using_metrics={
            "ok": runs("succeeded", period),
            "bad": runs("failed", period),
            "slow": runs("timed_out", period),
        },
        period=period,
    )


class Observability(Construct):
    """The ops and escalation topics, every alarm (each over a metric the handlers publish), dashboards."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        key: kms.Key,
        queues: Queues,
        functions: Functions,
        api: Api,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.ops_topic = sns.Topic(
            self, "OpsAlarms", topic_name=resource_name(config, "ops-alarms"), master_key=key, enforce_ssl=True
        )
        # Alarms reach nobody unless CloudWatch may use the topic's key (and publish to the topic):
        # only for alarms of this account.
        account = Stack.of(self).account
        from_our_alarms = {
            "StringEquals": {"aws:SourceAccount": account},
            "ArnLike": {
                "aws:SourceArn": Stack.of(self).format_arn(
                    service="cloudwatch", resource="alarm", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                )
            },
        }
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublishToEncryptedTopics",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions=from_our_alarms,
            )
        )
        self.ops_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.ops_topic.topic_arn],
                conditions=from_our_alarms,
            )
        )
        self.escalation_topic = sns.Topic(
            self, "Escalations", topic_name=resource_name(config, "escalations"), master_key=key, enforce_ssl=True
        )
        # Jobs without their own escalation channel page here.
        self.escalation_topic.grant_publish(functions.pages)
        self.escalation_topic.grant_publish(functions.api)  # paging drills of jobs paging the deployment's topic
        self.escalation_topic.grant_publish(functions.console_actions)  # ... and the console's drill button
        for function in (functions.escalation, functions.pages):
            function.add_environment(Env.ESCALATION_TOPIC, self.escalation_topic.topic_arn)
        self.action = cw_actions.SnsAction(self.ops_topic)
        self.alarms: list[cloudwatch.Alarm] = []
        self._queue_alarms(queues)
        self._function_alarms(queues, functions, api)
        self._slo_alarms(functions)
        self.dashboards: tuple[cloudwatch.Dashboard, ...] = ()
        if config.dashboards:  # $3 each a month: a non-prod stage asks for them with -c dashboards=true
            self.dashboards = (
                self._executive_dashboard(functions),
                self._oncall_dashboard(queues, functions),
                self._debug_dashboard(functions),
                self._jobs_dashboard(functions),
            )

    def _alarm(
        self, name: str, metric: cloudwatch.IMetric, threshold: float, periods: int = 1, description: str = ""
    ) -> None:
        runbook = f"{self.config.runbook_url}#{runbook_section(name)}"
        created = cloudwatch.Alarm(
            self,
            name,
            alarm_name=resource_name(self.config, name),
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            alarm_description=f"{description or name}. Runbook: {runbook}",
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        created.add_alarm_action(self.action)
        self.alarms.append(created)

    def _queue_alarms(self, queues: Queues) -> None:
        """Dead letters and old messages on every queue, and what the dispatcher found lost or quarantined."""
        for priority in PRIORITIES:
            self._alarm(
                f"Dlq{priority.title()}NotEmpty",
                queues.dead[priority].metric_approximate_number_of_messages_visible(period=FIVE_MINUTES),
                0,
                description=f"messages reached the {priority} dead-letter queue",
            )
            for number, queue in enumerate(queues.shards[priority], start=1):
                self._alarm(
                    f"OldestMessage{priority.title()}{number if number > 1 else ''}",
                    queue.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES),
                    900 + 300,
                    description="a run message waited longer than the longest delay plus 5 minutes",
                )
        self._alarm(
            "EventsDlqNotEmpty",
            queues.intake_dead.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES),
            0,
            description="events matched by trigger rules could not be handled: runs they should start are waiting",
        )
        self._alarm(
            "SystemEventsDlqNotEmpty",
            queues.system_intake_dead.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES),
            0,
            description="container ends or Run Finished events could not be handled: runs may wait on them",
        )
        self._alarm(
            "EscalationDlqNotEmpty",
            queues.escalation_dead.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES),
            0,
            description="escalation events could not be handled: pages may not have gone out",
        )

    def _function_alarms(self, queues: Queues, functions: Functions, api: Api) -> None:
        """Errors, missed ticks and throttles of the functions and their queues; the API's 5xx; lateness."""
        self._alarm("EscalationErrors", functions.escalation.metric_errors(period=FIVE_MINUTES), 0)
        self._alarm(
            "PagesDlqNotEmpty",
            queues.pages_dead.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES),
            0,
            description="pages could not be delivered, not even to the deployment's escalation topic",
        )
        self._alarm("PagesErrors", functions.pages.metric_errors(period=FIVE_MINUTES), 0)
        self._alarm("DispatcherErrors", functions.dispatcher.metric_errors(period=FIVE_MINUTES), 0)
        self._alarm(
            "JobsQuarantined",
            signal("QuarantinedJobs", "Sum", FIVE_MINUTES),
            0,
            description="the dispatcher quarantined a job whose schedule costs more than its budget",
        )
        self._alarm(
            "LostRunMessages",
            signal("LostRunMessages", "Sum", FIVE_MINUTES),
            0,
            description="instants the dispatcher sent had no run record 15 minutes later: run messages lost",
        )
        self._alarm("HeartbeatErrors", functions.heartbeat.metric_errors(period=FIVE_MINUTES), 0)
        self._alarm("EventsErrors", functions.events.metric_errors(period=FIVE_MINUTES), 0)
        self._alarm(
            "EventStartP99",
            signal("EventStartLatencySeconds", "p99", FIVE_MINUTES),
            self.config.lateness_p99_threshold_seconds,
            periods=3,
            description="p99 event-to-start latency of runs started by events above the threshold for 15 minutes",
        )
        self._alarm(
            "EventsRefused",
            signal("EventsDropped", "Sum", FIVE_MINUTES, reason="not_owned"),
            0,
            description="a trigger's bucket or bus is no longer its team's (tags changed): its events are refused",
        )
        self._alarm(
            "EventsRunFinishedUnpublished",
            signal("RunEventsUnpublished", "Sum", FIVE_MINUTES),
            0,
            description="Run Finished events EventBridge did not take: consumers of the runs bus miss them",
        )
        self._alarm(
            "UsageUnrecorded",
            signal("UsageUnrecorded", "Sum", FIVE_MINUTES),
            0,
            description="attempts whose usage was not written: the teams' chargeback under-counts them",
        )
        self._alarm(
            "WaitTimeouts",
            signal("WaitTimeouts", "Sum", FIVE_MINUTES),
            0,
            description="runs or DAG tasks waited for their data (wait_for) until their timeout: data is late",
        )
        self._alarm(
            "DuplicateExecutions",
            signal("RunsByOutcome", "Sum", FIVE_MINUTES, outcome="duplicate_execution"),
            0,
            description="an attempt ran twice (M5): the exactly-once claim failed somewhere; must stay 0",
        )
        for name, queue, limit in (
            ("EscalationsOldest", queues.escalations, 900),
            # Pages back off up to 15 minutes, then go to the deployment's topic: older means stuck.
            ("PagesOldest", queues.pages, 1800),
        ):
            self._alarm(
                name,
                queue.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES),
                limit,
                description=f"a message waited more than {limit // 60} minutes on {name.removesuffix('Oldest')}",
            )
        for name, ticking in (("Dispatcher", functions.dispatcher), ("Heartbeat", functions.heartbeat)):
            # Both run every minute: no invocations at all is the loudest failure, so missing data breaches.
            missed_ticks = cloudwatch.Alarm(
                self,
                f"{name}MissedTicks",
                alarm_name=resource_name(self.config, f"{name}MissedTicks"),
                metric=ticking.metric_invocations(period=FIVE_MINUTES),
                threshold=3,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                alarm_description=f"fewer than 3 {name.lower()} ticks in 5 minutes. Runbook: "
                f"{self.config.runbook_url}#{runbook_section(f'{name}MissedTicks')}",
            )
            missed_ticks.add_alarm_action(self.action)
            self.alarms.append(missed_ticks)
        self._alarm(
            "Api5xx",
            api.rest_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            5,
            description="the API answered 5xx more than 5 times in 5 minutes (bad input gets 4xx)",
        )
        for priority in PRIORITIES:
            self._alarm(
                f"FireLatenessP99{priority.title()}",
                lateness("p99", priority),
                self.config.lateness_p99_threshold_seconds,
                periods=3,
                description=f"p99 fire lateness of {priority} runs above the threshold for 15 minutes",
            )

    def _slo_alarms(self, functions: Functions) -> None:
        """Burn rates of the run-success SLO (M1): fast (1 h) and slow (6 h); throttled functions."""
        budget = 1 - SLO_SUCCESS
        self._alarm(
            "SloFastBurn",
            failure_ratio(Duration.hours(1)),
            14.4 * budget,
            description="error budget burning 14.4x (1 h)",
        )
        self._alarm(
            "SloSlowBurn", failure_ratio(Duration.hours(6)), 6 * budget, description="error budget burning 6x (6 h)"
        )
        # Per SLO tier, from the platform's objectives (CDK context slo_tiers): critical and important page on
        # burn; best-effort never pages (its budget is shown on the team's SLO view, GET /teams/{team}/slo).
        tiers = self.config.slo_tiers
        for tier in ("critical", "important"):
            allowed = 1 - tiers.objectives[tier].success
            title = tier.title()
            self._alarm(
                f"SloFastBurn{title}",
                tier_bad_ratio(tier, Duration.hours(1)),
                tiers.fast_burn * allowed,
                description=f"{tier} tier: error budget burning {tiers.fast_burn:g}x (1 h)",
            )
            self._alarm(
                f"SloSlowBurn{title}",
                tier_bad_ratio(tier, Duration.hours(6)),
                tiers.slow_burn * allowed,
                description=f"{tier} tier: error budget burning {tiers.slow_burn:g}x (6 h)",
            )
        for name, function in (
            ("Dispatcher", functions.dispatcher),
            ("Worker", functions.worker),
            ("Api", functions.api),
        ):
            self._alarm(f"{name}Throttles", function.metric_throttles(period=FIVE_MINUTES), 0)

    def _executive_dashboard(self, functions: Functions) -> cloudwatch.Dashboard:
        executive = cloudwatch.Dashboard(self, "Executive", dashboard_name=resource_name(self.config, "executive"))
        executive.add_widgets(
            cloudwatch.GraphWidget(
                title="Runs per day by outcome",
                left=[runs(o, Duration.days(1)) for o in ("succeeded", "failed", "timed_out", "skipped", "missed")],
            ),
            cloudwatch.GraphWidget(title="Failure ratio vs SLO (1 h)", left=[failure_ratio(Duration.hours(1))]),
            cloudwatch.GraphWidget(
                title="Error budget burn rate per SLO tier (1 h; 1 spends exactly the budget)",
                left=[
                    tier_bad_ratio(
                        tier, Duration.hours(1), scale=1 / (1 - self.config.slo_tiers.objectives[tier].success)
                    )
                    for tier in TIERS
                ],
            ),
            cloudwatch.CustomWidget(
                function_arn=f"{functions.console.function_arn}:{ONCALL_ALIAS}",
                title="SLA compliance: teams x days, burn per tier, the week's top failing jobs (jobsched console)",
                params={"view": "executive"},
                width=24,
                height=10,
            ),
            cloudwatch.GraphWidget(
                title="Cost drivers: worker invocations and duration",
                left=[functions.worker.metric_invocations(), functions.worker.metric_duration()],
            ),
            cloudwatch.GraphWidget(
                title="Escalations per 100 runs (M8)",
                left=[
                    cloudwatch.MathExpression(
                        expression=f"100 * SUM(SEARCH('{search_schema('EscalationEvents')}', 'Sum', 3600))"
                        f" / SUM(SEARCH('{search_schema('RunsFinished')}', 'Sum', 3600))",
                        label="escalations per 100 runs",
                        period=Duration.hours(1),
                    )
                ],
            ),
        )
        return executive

    def _oncall_dashboard(self, queues: Queues, functions: Functions) -> cloudwatch.Dashboard:
        oncall = cloudwatch.Dashboard(self, "OnCall", dashboard_name=resource_name(self.config, "oncall"))
        oncall.add_widgets(
            cloudwatch.GraphWidget(
                title="Failed, timed out and retried runs",
                left=[runs("failed"), runs("timed_out"), signal("RunsRetried", "Sum", FIVE_MINUTES)],
            ),
            cloudwatch.GraphWidget(
                title="Run duration p50 / p95 / p99 (s)",
                left=[signal("RunDurationSeconds", stat, FIVE_MINUTES) for stat in ("p50", "p95", "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Fire lateness p99 by class (s)", left=[lateness("p99", priority) for priority in PRIORITIES]
            ),
            cloudwatch.GraphWidget(
                title="Backlog (M6): queued run messages, and runs waiting for a slot or quota",
                left=[q.metric_approximate_number_of_messages_visible() for p in PRIORITIES for q in queues.shards[p]],
                right=[signal("RunsByOutcome", "Sum", FIVE_MINUTES, outcome="waiting")],
            ),
            cloudwatch.GraphWidget(
                title="Worker concurrency against its maximum (M7)",
                left=[functions.worker.metric("ConcurrentExecutions", statistic="Maximum")],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=sum(q.max_concurrency for q in WORK_QUEUES.values()), label="maximum (all classes)"
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Duplicates (M5): suppressed redeliveries, and attempts that ran twice (must be 0)",
                left=[
                    signal("RunsByOutcome", "Sum", FIVE_MINUTES, outcome="duplicate"),
                    signal("RunsByOutcome", "Sum", FIVE_MINUTES, outcome="duplicate_execution"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Events: received, matched, deduplicated, and dropped by reason",
                left=[
                    signal("EventsReceived", "Sum", FIVE_MINUTES),
                    signal("EventsMatched", "Sum", FIVE_MINUTES),
                    signal("EventsDeduplicated", "Sum", FIVE_MINUTES),
                ],
                right=[
                    signal("EventsDropped", "Sum", FIVE_MINUTES, reason=reason)
                    for reason in ("paused", "deleted", "stale_rule", "not_owned", "rate_limited", "malformed")
                ],
            ),
            cloudwatch.GraphWidget(
                title="Event-to-start latency p50 / p99 (s)",
                left=[signal("EventStartLatencySeconds", stat, FIVE_MINUTES) for stat in ("p50", "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Waits for data: begun and timed out / wait p50, p95 (s)",
                left=[signal("WaitsBegun", "Sum", FIVE_MINUTES), signal("WaitTimeouts", "Sum", FIVE_MINUTES)],
                right=[signal("WaitSeconds", stat, FIVE_MINUTES) for stat in ("p50", "p95")],
            ),
            cloudwatch.GraphWidget(
                title="DLQ depth",
                left=[queues.dead[p].metric_approximate_number_of_messages_visible() for p in PRIORITIES],
            ),
            cloudwatch.GraphWidget(
                title="Oldest message age (s)",
                left=[q.metric_approximate_age_of_oldest_message() for p in PRIORITIES for q in queues.shards[p]],
            ),
            cloudwatch.GraphWidget(
                title="Escalation events and pages (one page per incident)",
                left=[queues.escalations.metric_number_of_messages_sent()],
                right=[
                    cloudwatch.MathExpression(
                        expression=f"SUM(SEARCH('{search_schema('Pages')}', 'Sum', 300))",
                        label="pages",
                        period=FIVE_MINUTES,
                    ),
                    signal("OverdueJobs", "Maximum", FIVE_MINUTES),
                    signal("DeadlineMisses", "Sum", FIVE_MINUTES),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Instants missed (by policy or outage) and lost (no run record 15 minutes on)",
                left=[signal("MissedInstants", "Sum", FIVE_MINUTES), signal("LostRunMessages", "Sum", FIVE_MINUTES)],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms),
            cloudwatch.CustomWidget(
                function_arn=f"{functions.console.function_arn}:{ONCALL_ALIAS}",
                title="Open incidents (jobsched console)",
                params={"view": "incidents"},
                width=24,
                height=8,
            ),
        )
        # Per job, from the worker's structured logs (job is a log field, never a metric dimension).
        worker_logs = [f"/aws/lambda/{resource_name(self.config, 'Worker')}"]
        oncall.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Top failing jobs (last period)",
                log_group_names=worker_logs,
                query_lines=list(TOP_FAILING_JOBS),
                width=12,
            ),
            cloudwatch.LogQueryWidget(
                title="Latest failures",
                log_group_names=worker_logs,
                query_lines=list(LATEST_FAILURES),
                width=12,
            ),
        )
        return oncall

    def _debug_dashboard(self, functions: Functions) -> cloudwatch.Dashboard:
        debug = cloudwatch.Dashboard(self, "Debug", dashboard_name=resource_name(self.config, "debug"))
        for name, function in (
            ("Dispatcher", functions.dispatcher),
            ("Worker", functions.worker),
            ("Api", functions.api),
        ):
            debug.add_widgets(
                cloudwatch.GraphWidget(
                    title=f"{name}: errors, throttles", left=[function.metric_errors(), function.metric_throttles()]
                ),
                cloudwatch.GraphWidget(
                    title=f"{name}: duration p99, concurrency",
                    left=[function.metric_duration(statistic="p99")],
                    right=[function.metric("ConcurrentExecutions", statistic="Maximum")],
                ),
            )
        return debug

    def _jobs_dashboard(self, functions: Functions) -> cloudwatch.Dashboard:
        """A team's jobs as the console renders them: the team and job typed into the dashboard's variables."""
        variables = [
            cloudwatch.DashboardVariable(
                id=kind,
                type=cloudwatch.VariableType.PATTERN,
                input_type=cloudwatch.VariableInputType.INPUT,
                value=placeholder,
                label=kind.title(),
                default_value=cloudwatch.DefaultValue.value(placeholder),
            )
            for kind, placeholder in (("team", CONSOLE_TEAM), ("job", CONSOLE_JOB))
        ]
        jobs = cloudwatch.Dashboard(
            self, "Jobs", dashboard_name=resource_name(self.config, "jobs"), variables=variables
        )
        # The team's alias, with the team variable in it: the dashboard invokes the typed team's alias.
        console = f"{functions.console.function_arn}:{CONSOLE_ALIAS_PREFIX}{CONSOLE_TEAM}"
        # (title, the view's parameters, height, whether the dashboard's time range bounds it)
        shown = (
            ("Jobs, worst first", {"view": "team", "team": CONSOLE_TEAM}, 12, False),
            ("SLOs: budget per tier, freshness, paging destinations", {"view": "slo", "team": CONSOLE_TEAM}, 12, False),
            ("Recent changes: specs, pauses, stops, limits", {"view": "changes", "team": CONSOLE_TEAM}, 8, False),
            ("Team timeline: a row per job", {"view": "timeline", "team": CONSOLE_TEAM}, 12, True),
            ("Job timeline", {"view": "job", "team": CONSOLE_TEAM, "job": CONSOLE_JOB}, 14, True),
        )
        jobs.add_widgets(
            *(
                cloudwatch.CustomWidget(
                    function_arn=console,
                    title=title,
                    params=params,
                    width=24,
                    height=height,
                    update_on_time_range_change=ranged,
                )
                for title, params, height, ranged in shown
            )
        )
        return jobs
