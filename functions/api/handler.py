"""API: API Gateway (REST, IAM auth) -> the team API. Services are built on first request."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.queues import WorkQueues
from jobsched.api.app import ApiServices, build_handler
from jobsched.api.identity import Membership, MembershipCache, iam_role_tags
from jobsched.api.tokens import CallbackTokens
from jobsched.core.names import Settings
from jobsched.watch.observability import make_logger, make_tracer
from jobsched.wiring import build_dag_deployer, build_guard, default_worker, egress_policy, metered_runs, utc_now

logger = make_logger("api")
tracer = make_tracer("api")


@cache
def services() -> ApiServices:
    settings = Settings.from_env()
    return ApiServices(
        jobs=JobsStore(settings.jobs_table, team_defaults=settings.team_limits),
        runs=metered_runs(settings),
        queues=WorkQueues(settings.queue_urls, shards=settings.queue_shards),
        worker=default_worker(),
        tokens=CallbackTokens.from_env(),
        membership=MembershipCache(Membership.from_env, role_tags=iam_role_tags),
        clock=utc_now,
        dags=build_dag_deployer(settings),
        guard=build_guard(settings),
        egress=egress_policy(settings),
    )


api = build_handler(services)


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return api(event, context)
