"""The team API on API Gateway: IAM auth, the resource policy that walls teams off, usage plan, WAF."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.components.common import LOG_RETENTION, resource_name
from infra.components.functions import Functions
from infra.components.waivers import API_CACHE, API_TRACING_OFF, WAF_LOG4J, waive
from infra.config import StageConfig
from jobsched.core.names import OWNER_TAG


class Api(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, functions: Functions) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=LOG_RETENTION,
            encryption_key=functions.key,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        self.rest_api = apigw.RestApi(
            self,
            "Rest",
            rest_api_name=resource_name(config, "api"),
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                tracing_enabled=config.tracing,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            policy=_team_wall(config),
        )
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=False, validate_request_parameters=True
        )
        integration = apigw.LambdaIntegration(functions.api)
        self.rest_api.root.add_method("ANY", integration, request_validator=validator)
        self.rest_api.root.add_proxy(
            default_integration=integration,
            any_method=True,
            default_method_options=apigw.MethodOptions(
                authorization_type=apigw.AuthorizationType.IAM, request_validator=validator
            ),
        )
        waive(self.rest_api.deployment_stage, API_CACHE, *(() if config.tracing else (API_TRACING_OFF,)))
        self.rest_api.add_usage_plan(
            "Plan",
            name=resource_name(config, "api-plan"),
            throttle=apigw.ThrottleSettings(rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)],
        )
        if config.waf:
            self.web_acl = _web_acl(self, config)
            waive(self.web_acl, WAF_LOG4J)
            wafv2.CfnWebACLAssociation(
                self,
                "WebAclAssociation",
                resource_arn=self.rest_api.deployment_stage.stage_arn,
                web_acl_arn=self.web_acl.attr_arn,
            )
        CfnOutput(self, "ApiUrl", value=self.rest_api.url)


def _web_acl(scope: Construct, config: StageConfig) -> wafv2.CfnWebACL:
    """Rate per source IP and a body size cap in front of the API: a flood is refused before it costs a
    Lambda invocation (the handler's own limits count per caller and per team behind it)."""

    def rule(name: str, priority: int, statement: dict[str, Any]) -> wafv2.CfnWebACL.RuleProperty:
        return wafv2.CfnWebACL.RuleProperty(
            name=name,
            priority=priority,
            action=wafv2.CfnWebACL.RuleActionProperty(block={}),
            statement=statement,
            visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
            ),
        )

    return wafv2.CfnWebACL(
        scope,
        "WebAcl",
        name=resource_name(config, "api-acl"),
        scope="REGIONAL",
        default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
        visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
            cloud_watch_metrics_enabled=True,
            metric_name=resource_name(config, "api-acl"),
            sampled_requests_enabled=True,
        ),
        rules=[
            rule(
                "RatePerSourceIp",
                0,
                {"rateBasedStatement": {"limit": config.waf_rate_per_5_minutes, "aggregateKeyType": "IP"}},
            ),
            rule(
                "BodyOver256KB",
                1,
                {
                    "sizeConstraintStatement": {
                        "fieldToMatch": {"body": {"oversizeHandling": "MATCH"}},
                        "comparisonOperator": "GT",
                        "size": 256 * 1024,
                        "textTransformations": [{"priority": 0, "type": "NONE"}],
                    }
                },
            ),
        ],
    )


def _team_wall(config: StageConfig) -> iam.PolicyDocument:
    """The second wall behind the handler's membership check: a caller carrying a jobsched-team tag (role
    or session tag) may invoke only its own team's routes and the team-less ones. Callers without the
    tag, and platform admins, are left to the handler."""
    tag = f"${{aws:PrincipalTag/{OWNER_TAG}}}"
    conditions: dict[str, Any] = {"Null": {f"aws:PrincipalTag/{OWNER_TAG}": "false"}}
    admins = list(config.membership.get("admins", []))
    if admins:
        conditions["ArnNotLike"] = {"aws:PrincipalArn": admins}
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                not_resources=[
                    f"execute-api:/*/*/teams/{tag}",
                    f"execute-api:/*/*/teams/{tag}/*",
                    "execute-api:/*/GET/health",
                    "execute-api:/*/GET/openapi.json",
                    "execute-api:/*/POST/validate",
                    "execute-api:/*/POST/callbacks/*",
                ],
                conditions=conditions,
            )
        ]
    )
