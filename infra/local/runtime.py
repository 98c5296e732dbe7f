"""The whole scheduler on a laptop: moto for AWS, the real handlers driven the way AWS drives them.

One machine (``machine.LocalMachine``: moto, the threads playing AWS's drivers, the API gateway and console,
the tables' snapshots) with one deployment of the stack on it (``stack.LocalStack``: the template deployed,
the handlers configured from it, EventBridge rules, SQS event source mappings, pages, container hosts), and the
examples `make run` seeds (``examples.Examples``). A second deployment (a second region, rehearsed on a laptop)
would be one more ``LocalStack`` on the same machine.

API Gateway -> the local gateway on 127.0.0.1 (identity: ``principal``, or X-Jobsched-Principal).
State survives a crash (``machine``): the tables are snapshot within a second of any write, and a start on a
saved state rebuilds the queues from them (``stack.LocalStack.recover``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from infra.local.alarms import LocalAlarms
from infra.local.deploy import Deployment
from infra.local.examples import Examples
from infra.local.logs import CapturedLogs
from infra.local.machine import LocalMachine
from infra.local.stack import DEFAULT_ADMIN, LocalStack
from jobsched.watch import signals


class LocalRuntime:
    def __init__(
        self,
        *,
        port: int = 8080,
        tick_seconds: float | None = None,
        principal: str = DEFAULT_ADMIN,
        examples: bool = True,
        state_dir: Path | None = None,
        moto_port: int | None = None,
        alarm_time_scale: float | None = None,
    ) -> None:
        self.port = port
        self.principal = principal
        self.examples = examples
        self.machine = LocalMachine(state_dir or Path(tempfile.mkdtemp(prefix="jobsched-local-")), moto_port)
        # Alarm periods shrink with the tick: a 1 s tick runs the clock 60x, so a 5-minute period lasts 5 s.
        scale = alarm_time_scale or (60.0 / tick_seconds if tick_seconds else 1.0)
        self.stack = LocalStack(
            self.machine, api_url=self.api_url, examples=examples, tick_seconds=tick_seconds, alarm_time_scale=scale
        )

    # ------------------------------------------------------------------------------ life

    def start(self) -> LocalRuntime:
        from jobsched.adapters.aws.clients import client

        machine, stack = self.machine, self.stack
        machine.start_moto()
        machine.note_api(self.api_url)
        stack.deploy()
        keys, first_format = stack.tables()
        saved = machine.restore_tables(keys, first_format)
        if saved is not None:
            stack.recover(saved)
        machine.start_snapshots(keys, client("dynamodb"))
        handle, context = stack.api()
        on_response = stack.alarms.api_response if stack.alarms is not None else None
        machine.start_gateway(handle, context, port=self.port, principal=self.principal, on_response=on_response)
        stack.start_drivers()
        if self.examples:
            Examples(self.api_url, self.endpoint, machine.loop, stack.invoke).seed()
        return self

    def stop(self) -> None:
        if self.stack.alarms is not None:
            signals.remove_sink(self.stack.alarms.metric)
        self.machine.stop()

    # ------------------------------------------------------------------------------ what tests and commands read

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return self.machine.endpoint

    @property
    def state_dir(self) -> Path:
        return self.machine.state_dir

    @property
    def gateway(self) -> Any:
        return self.machine.gateway

    @property
    def deployment(self) -> Deployment | None:
        return self.stack.deployment

    @property
    def template(self) -> dict[str, Any]:
        return self.stack.template

    @property
    def alarms(self) -> LocalAlarms | None:
        return self.stack.alarms

    @property
    def escalations(self) -> list[dict[str, Any]]:
        return self.stack.escalations

    @property
    def logs(self) -> CapturedLogs:
        return self.stack.logs

    @property
    def container_agent(self) -> Any:
        return self.stack.container_agent

    @property
    def batch_agent(self) -> Any:
        return self.stack.batch_agent

    def handler(self, path: str) -> Callable[..., Any]:
        return self.stack.handler(path)

    def invoke(self, function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        return self.stack.invoke(function, payload, timeout)

    def invocations(self, function: str) -> list[dict[str, Any]]:
        return self.stack.invocations(function)

    def lambda_arn(self, name: str) -> str:
        return self.stack.lambda_arn(name)

    def pause_source(self, function: str, paused: bool = True) -> None:
        self.stack.pause_source(function, paused)

    def pause_rule(self, function: str, paused: bool = True) -> None:
        self.stack.pause_rule(function, paused)
