"""The laptop's machine: the moto server (AWS), the threads that play AWS's drivers, the local API gateway and
console, and the tables' snapshots. It holds no deployment: ``stack.LocalStack`` is one, deployed onto it (a
second region would be one more).

State survives a crash: the tables are snapshot to ``<state-dir>/tables.json`` within a second of any write
(atomically: a ``kill -9`` leaves the previous snapshot or the new one). Queue contents live in the moto
process and are lost with it; the deployment rebuilds them from the restored tables.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.local.console import LocalConsole
from infra.local.deploy import REGION
from infra.local.snapshots import Keys, Snapshots

log = logging.getLogger("jobsched.local")

SNAPSHOT_EVERY = 1.0  # seconds: at most this much of the tables' writes is lost to a kill -9
RUNTIME_FILE = "runtime.json"  # the API's URL and moto's endpoint, for `jobsched local put-event` and the like


@dataclass
class LocalContext:
    """Enough of a Lambda context for Powertools."""

    function_name: str
    memory_limit_in_mb: int = 256
    aws_request_id: str = ""
    invoked_function_arn: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalMachine:
    def __init__(self, state_dir: Path, moto_port: int | None = None) -> None:
        self.state_dir = state_dir
        self.moto_port = moto_port or free_port()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.snapshots = Snapshots(state_dir / "tables.json")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    def start_moto(self) -> None:
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "MOTO_PORT": str(self.moto_port),  # moto's Step Functions interpreter calls back here
                "POWERTOOLS_TRACE_DISABLED": "true",
            }
        )
        # moto in its own process: AWS emulation gets its own core instead of sharing the handlers' GIL.
        # With the interpreter fix DAG runs depend on (infra/local/moto_patches.py).
        self.server = subprocess.Popen(
            [sys.executable, "-m", "infra.local.moto_patches", "-H", "127.0.0.1", "-p", str(self.moto_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "MOTO_PORT": str(self.moto_port)},
        )
        _wait_for_port(self.moto_port, self.server)
        # DAG jobs run for real: moto's Step Functions interpreter executes the compiled state machines.
        urllib.request.urlopen(
            urllib.request.Request(
                f"{self.endpoint}/moto-api/config",
                data=json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode(),
                method="POST",
            ),
            timeout=10,
        ).close()
        log.info("moto server on %s", self.endpoint)

    def note_api(self, api_url: str) -> None:
        """Where `jobsched local put-event` and `put-object` find this machine's API and AWS."""
        (self.state_dir / RUNTIME_FILE).write_text(json.dumps({"api": api_url, "aws_endpoint": self.endpoint}))

    def loop(self, name: str, period: float, action: Callable[[], object], *, aligned: bool = False) -> None:
        """Run ``action`` every ``period`` seconds; ``aligned``: on wall-clock multiples of it, as EventBridge
        fires rate(1 minute) near the top of each minute rather than at the runtime's start phase."""

        def run() -> None:
            while not self.stopping.is_set():
                try:
                    action()
                except Exception:  # a failing round is logged; the runtime keeps going
                    if self.stopping.is_set():  # moto stopped under a long poll: shutdown, not a fault
                        log.debug("%s stopped mid-round", name, exc_info=True)
                    else:
                        log.exception("%s failed", name)
                self.stopping.wait(period - time.time() % period if aligned else period)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def start_gateway(self, handle: Callable[..., Any], context: LocalContext, **options: Any) -> None:
        """The API Gateway stand-in (and the console) on 127.0.0.1, in front of a deployment's API function."""
        from infra.local.gateway import LocalGateway

        console = LocalConsole(lambda: datetime.now(UTC))
        self.gateway = LocalGateway(handle, context=context, console=console, **options).start()

    # ------------------------------------------------------------------------------ tables

    def start_snapshots(self, keys: dict[str, Keys], dynamodb: Any) -> None:
        """Every write through ``dynamodb`` (the handlers' client) is saved within a second (``snapshots``)."""
        self.snapshots.keys = keys
        self.snapshots.watch(dynamodb)

        def snapshot() -> None:
            if self.snapshots.changed.is_set():
                self.snapshots.changed.clear()  # before reading: a write during it marks the next round
                self.save_state()

        self.loop("snapshots", SNAPSHOT_EVERY, snapshot)

    def save_state(self) -> None:
        import boto3

        self.snapshots.save(boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION))

    def restore_tables(
        self, keys: dict[str, Keys], first_format: dict[str, str]
    ) -> dict[str, list[dict[str, Any]]] | None:
        """The tables' items from the last snapshot (table name -> items), written back (None: nothing was saved).
        ``first_format``: where the items of a snapshot keyed by environment variable go (one written before the
        tables were saved by name: by a release before #51's global tables, so its tables are the previous ones)."""
        import boto3

        path = self.snapshots.path
        if not path.exists():
            return None
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        loaded: dict[str, Any] = json.loads(path.read_text())
        saved: dict[str, list[dict[str, Any]]] = (
            loaded["tables"] if loaded.get("format") == 2 else {first_format[v]: items for v, items in loaded.items()}
        )
        for table, items in saved.items():
            if table not in keys:
                log.warning("%s is not a table of this deployment: its %d saved items are left out", table, len(items))
                continue
            for start in range(0, len(items), 25):
                requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
                dynamodb.batch_write_item(RequestItems={table: requests})
        log.info("restored tables from %s", path)
        return {table: items for table, items in saved.items() if table in keys}

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=5)
        if hasattr(self, "gateway"):
            self.gateway.stop()
        self.save_state()
        if hasattr(self, "server"):
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:  # busy threads can outlive SIGTERM
                self.server.kill()
                self.server.wait(timeout=10)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the moto server exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the moto server did not listen on port {port} within {seconds:.0f} s")
