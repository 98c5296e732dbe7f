"""The work queues per priority class, their dead-letter queues, and the escalation and pages queues."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.common import ESCALATION_TIMEOUT, INTAKE_TIMEOUT, PAGES_TIMEOUT, WORKER_TIMEOUT, resource_name
from infra.config import StageConfig
from jobsched.core.names import INTAKE_MAX_RECEIVES, INTAKE_QUEUE, PRIORITIES, SYSTEM_INTAKE_QUEUE, WORK_QUEUES


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.config, self.key = config, key
        self.work: dict[str, sqs.Queue] = {}
        self.shards: dict[str, list[sqs.Queue]] = {}  # every work queue of a class, the first being ``work``
        self.dead: dict[str, sqs.Queue] = {}
        for priority in PRIORITIES:
            definition = WORK_QUEUES[priority]
            dead = self._queue(f"{definition.logical_name}Dlq", f"{definition.logical_name}-dlq")
            self.dead[priority] = dead
            # The first keeps the name it always had; more (``work_queues``) share the class's dead-letter queue.
            self.shards[priority] = [
                self._queue(
                    f"{definition.logical_name}{suffix}",
                    f"{definition.logical_name}{suffix}",
                    # Longer than six worker timeouts, as Lambda's event source mapping asks.
                    visibility_timeout=Duration.seconds(WORKER_TIMEOUT.to_seconds() * 6),
                    dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=definition.max_receive_count, queue=dead),
                )
                for suffix in ["", *(str(number) for number in range(2, config.burst.work_queues + 1))]
            ]
            self.work[priority] = self.shards[priority][0]
        self.escalation_dead = self._queue("EscalationsDlq", "Escalations-dlq")
        self.escalations = self._queue(
            "Escalations",
            "Escalations",
            visibility_timeout=Duration.seconds(ESCALATION_TIMEOUT.to_seconds() * 6),  # six handler timeouts
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=5, queue=self.escalation_dead),
        )
        # Pages, one message per page and destination. A failed delivery comes back with backoff and,
        # after a few tries, goes to the deployment's topic; only that failing too reaches the DLQ.
        self.pages_dead = self._queue("PagesDlq", "Pages-dlq")
        self.pages = self._queue(
            "Pages",
            "Pages",
            visibility_timeout=Duration.seconds(PAGES_TIMEOUT.to_seconds() * 6),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=10, queue=self.pages_dead),
        )

        # Events matched by trigger rules (EventBridge sends them here; infra/components/functions.py).
        self.intake_dead = self._queue(f"{INTAKE_QUEUE}Dlq", f"{INTAKE_QUEUE}-dlq")
        self.intake = self._queue(
            INTAKE_QUEUE,
            INTAKE_QUEUE,
            visibility_timeout=Duration.seconds(INTAKE_TIMEOUT.to_seconds() * 6),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=INTAKE_MAX_RECEIVES, queue=self.intake_dead),
        )
        # The scheduler's own events (container work ending, Run Finished): never behind a team's storm.
        self.system_intake_dead = self._queue(f"{SYSTEM_INTAKE_QUEUE}Dlq", f"{SYSTEM_INTAKE_QUEUE}-dlq")
        self.system_intake = self._queue(
            SYSTEM_INTAKE_QUEUE,
            SYSTEM_INTAKE_QUEUE,
            visibility_timeout=Duration.seconds(INTAKE_TIMEOUT.to_seconds() * 6),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=INTAKE_MAX_RECEIVES, queue=self.system_intake_dead),
        )

    def _queue(self, construct_id: str, logical_name: str, **options: Any) -> sqs.Queue:
        """Every queue: our KMS key, TLS only, 14 days to look at what is in it."""
        return sqs.Queue(
            self,
            construct_id,
            queue_name=resource_name(self.config, logical_name),
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            retention_period=Duration.days(14),
            enforce_ssl=True,
            **options,
        )
