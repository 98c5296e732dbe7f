"""The CDK app: one stack per account and region.

Run as a module (`python -m infra.app`, as cdk.json does) so that no folder of ours comes first on sys.path.

npx aws-cdk deploy -c stage=prod                 # account and region from the environment
npx aws-cdk deploy -c stage=dev -c examples=true -c asset_dir=build/lambda
"""

from __future__ import annotations

import os
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import StageConfig
from infra.stack import JobschedStack


def build(app: cdk.App) -> JobschedStack:
    config = StageConfig.from_context(app)
    account = app.node.try_get_context("account") or os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = app.node.try_get_context("region") or os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    stack = JobschedStack(app, f"jobsched-{config.stage}", config=config, env=env)
    # cdk-nag (AWS Solutions rules) runs at synthesis; accepted findings are acknowledged in the stack.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack


def main() -> None:
    """Under the CDK CLI, context and output come from it; ``make synth`` passes them as options."""
    import argparse

    parser = argparse.ArgumentParser(description="Synthesize the jobsched stack.")
    parser.add_argument("--stage")
    parser.add_argument("--asset-dir")
    parser.add_argument("--outdir")
    args = parser.parse_args()
    context = {k: v for k, v in {"stage": args.stage, "asset_dir": args.asset_dir}.items() if v}
    app = cdk.App(context=context or None, outdir=args.outdir)
    stack = build(app)
    assembly = app.synth()
    if args.outdir:
        print(Path(assembly.directory) / f"{stack.stack_name}.template.json")


if __name__ == "__main__":
    main()
