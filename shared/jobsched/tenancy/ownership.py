"""Which team owns a resource a run touches, decided from its tags (ABAC), the same way everywhere.

A team's resources carry ``jobsched-team=<team>``. Targets the platform offers to every team carry
``jobsched-shared=true``; secrets, parameters and escalation topics are never shared that way. jobsched's
own resources (its queues, tables, functions, topics, DAG state machines, secret and parameters) are
never a team's, whatever their tags say.

IAM enforces the same rule in AWS (the target role's conditions); this check also holds where IAM is
not enforced (moto, the local runtime) and answers with a clear error before anything is called.
Tags are read through a port and cached briefly: a run pays at most one tag read per resource a minute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from jobsched.core.event_patterns import named_sources
from jobsched.core.names import OWNER_TAG, SHARED_TAG
from jobsched.core.spec import (
    DEFAULT_BUS,
    BatchTarget,
    EcsTarget,
    EventBridgeTarget,
    HttpTarget,
    JobSpec,
    JobTrigger,
    KubernetesTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
    parse_secret_ref,
)

TAG_CACHE_SECONDS = 60.0


class ResourceKind(Enum):
    FUNCTION = "Lambda function"
    QUEUE = "SQS queue"
    STATE_MACHINE = "state machine"
    EVENT_BUS = "event bus"
    TOPIC = "SNS topic"
    SECRET = "secret"
    PARAMETER = "SSM parameter"
    BUCKET = "S3 bucket"  # an s3 trigger's: its objects are the team's data, never shared
    CLUSTER = "ECS cluster"  # an ecs target's: the team's, or one the platform shares
    LOG_GROUP = "log group"  # a container's awslogs group: the team's, read as the team for `jobsched logs`
    TASK_DEFINITION = "ECS task definition"  # the image, roles and command a container run uses: the team's
    SUBNET = "subnet"  # where an ECS task's network interface lands: the team's, or one the platform shares
    SECURITY_GROUP = "security group"  # what the task may reach ("may reach beta's database"): likewise
    CAPACITY_PROVIDER = "ECS capacity provider"  # the instances it runs on: likewise (FARGATE is AWS's)
    JOB_QUEUE = "Batch job queue"  # a batch target's: the team's, or one the platform shares
    JOB_DEFINITION = "Batch job definition"  # the image, roles and command a batch run uses: the team's
    EKS_CLUSTER = "EKS cluster"  # a kubernetes target's: the team's, or one the platform shares
    NAMESPACE = "Kubernetes namespace"  # TEAM itself, or one the platform grants the team (never by prefix)
    SERVICE_ACCOUNT = "Kubernetes service account"  # only those the platform grants the team

    @property
    def shareable(self) -> bool:
        """Only targets may be offered to every team; credentials and page channels stay one team's."""
        return self in (
            ResourceKind.FUNCTION,
            ResourceKind.QUEUE,
            ResourceKind.STATE_MACHINE,
            ResourceKind.EVENT_BUS,
            ResourceKind.CLUSTER,
            ResourceKind.JOB_QUEUE,
            ResourceKind.EKS_CLUSTER,
            ResourceKind.SUBNET,
            ResourceKind.SECURITY_GROUP,
            ResourceKind.CAPACITY_PROVIDER,
        )


@dataclass(frozen=True)
class ResourceRef:
    kind: ResourceKind
    name: str  # as the job names it: a function name or ARN, a queue URL, a secret name...
    field: str = ""  # where the job names it: target.function, target.secret_headers.X-Token, ...

    @property
    def short_name(self) -> str:
        """The resource's own name, without ARN or URL around it (what reserved prefixes apply to)."""
        name = self.name
        if self.kind is ResourceKind.FUNCTION:
            if name.startswith("arn:"):
                return name.split(":")[6]
            return name.split(":", 1)[0]
        if self.kind is ResourceKind.QUEUE:
            return urlsplit(name).path.rstrip("/").rsplit("/", 1)[-1]
        if self.kind is ResourceKind.EVENT_BUS:
            return name.rsplit("event-bus/", 1)[-1] if name.startswith("arn:") else name
        if self.kind is ResourceKind.SECRET and name.startswith("arn:"):
            return name.split(":secret:", 1)[-1]
        if self.kind in (ResourceKind.STATE_MACHINE, ResourceKind.TOPIC):
            return name.rsplit(":", 1)[-1]
        return name

    def is_reserved(self, prefixes: tuple[str, ...]) -> bool:
        """One of jobsched's own resources, by name (whatever its tags say)."""
        return self.short_name.startswith(prefixes) or self.name.startswith(prefixes)


KUBERNETES_NAMED = (ResourceKind.NAMESPACE, ResourceKind.SERVICE_ACCOUNT)


class NotOwned(Exception):
    """A run (or a job being stored) names a resource its team may not use. Never retried."""

    def __init__(self, resource: ResourceRef, team: str, reason: str) -> None:
        super().__init__(f"{resource.kind.value} '{resource.name}' {reason}; team '{team}' may not use it")
        self.resource, self.team, self.reason = resource, team, reason


class TagReader(Protocol):
    def tags(self, team: str, resource: ResourceRef) -> dict[str, str] | None:
        """The resource's tags, read as ``team``; None when it does not exist or the team cannot see it."""


@runtime_checkable
class BucketEventsReader(Protocol):
    def bucket_sends_events(self, team: str, bucket: str) -> bool | None:
        """Whether the bucket sends its events to EventBridge; None when ``team`` cannot see it."""


def target_resources(target: Any, prefix: str = "target") -> list[ResourceRef]:
    """Every AWS resource one target reaches, with the field that names it."""
    if isinstance(target, LambdaTarget):
        return [ResourceRef(ResourceKind.FUNCTION, target.function, f"{prefix}.function")]
    if isinstance(target, SqsTarget):
        return [ResourceRef(ResourceKind.QUEUE, target.queue_url, f"{prefix}.queue_url")]
    if isinstance(target, StepFunctionsTarget):
        return [ResourceRef(ResourceKind.STATE_MACHINE, target.state_machine_arn, f"{prefix}.state_machine_arn")]
    if isinstance(target, EventBridgeTarget):
        return [ResourceRef(ResourceKind.EVENT_BUS, target.bus, f"{prefix}.bus")]
    if isinstance(target, HttpTarget):
        return [
            secret_resource(ref, f"{prefix}.secret_headers.{header}") for header, ref in target.secret_headers.items()
        ]
    if isinstance(target, EcsTarget):
        return [
            ResourceRef(ResourceKind.CLUSTER, target.cluster, f"{prefix}.cluster"),
            ResourceRef(ResourceKind.TASK_DEFINITION, target.task_definition, f"{prefix}.task_definition"),
            *ecs_placement(target, prefix),
        ]
    if isinstance(target, KubernetesTarget):
        return [
            ResourceRef(ResourceKind.EKS_CLUSTER, target.cluster, f"{prefix}.cluster"),
            ResourceRef(ResourceKind.NAMESPACE, target.namespace, f"{prefix}.namespace"),
            *(
                [ResourceRef(ResourceKind.SERVICE_ACCOUNT, target.service_account, f"{prefix}.service_account")]
                if target.service_account is not None
                else []
            ),
        ]
    if isinstance(target, BatchTarget):
        return [
            ResourceRef(ResourceKind.JOB_QUEUE, target.job_queue, f"{prefix}.job_queue"),
            ResourceRef(ResourceKind.JOB_DEFINITION, target.job_definition, f"{prefix}.job_definition"),
        ]
    return []


AWS_CAPACITY_PROVIDERS = ("FARGATE", "FARGATE_SPOT")  # AWS's own: nobody's to own


def ecs_placement(target: EcsTarget, prefix: str) -> list[ResourceRef]:
    """Where an ECS task runs and what it may reach: its subnets, security groups and capacity provider."""
    found: list[ResourceRef] = []
    if target.capacity_provider is not None and target.capacity_provider not in AWS_CAPACITY_PROVIDERS:
        provider = target.capacity_provider
        found.append(ResourceRef(ResourceKind.CAPACITY_PROVIDER, provider, f"{prefix}.capacity_provider"))
    if target.network is not None:
        found += [
            ResourceRef(ResourceKind.SUBNET, subnet, f"{prefix}.network.subnets[{index}]")
            for index, subnet in enumerate(target.network.subnets)
        ]
        found += [
            ResourceRef(ResourceKind.SECURITY_GROUP, group, f"{prefix}.network.security_groups[{index}]")
            for index, group in enumerate(target.network.security_groups)
        ]
    return found


def trigger_resources(trigger: JobTrigger, prefix: str = "trigger") -> list[ResourceRef]:
    """What a trigger listens on: a team bus (the default bus is every team's), or a bucket."""
    if trigger.s3 is not None:
        return [ResourceRef(ResourceKind.BUCKET, trigger.s3.bucket, f"{prefix}.s3.bucket")]
    if trigger.event is not None and trigger.event.bus != DEFAULT_BUS:
        return [ResourceRef(ResourceKind.EVENT_BUS, trigger.event.bus, f"{prefix}.event.bus")]
    return []


def secret_resource(reference: str, field: str = "") -> ResourceRef:
    source, name, _ = parse_secret_ref(reference)
    return ResourceRef(ResourceKind.PARAMETER if source == "ssm" else ResourceKind.SECRET, name, field)


def spec_resources(spec: JobSpec) -> Iterator[ResourceRef]:
    """Every resource a job names: its target or each DAG task's, its triggers' buses and buckets, the buckets
    it waits on or maps over, and its escalation topics."""
    for path, target in spec.targets():
        yield from target_resources(target, path)
    for index, trigger in enumerate(spec.triggers):
        yield from trigger_resources(trigger, f"triggers[{index}]")
    yield from data_buckets(spec)
    if spec.escalation is not None:
        if spec.escalation.webhook_secret:
            yield secret_resource(spec.escalation.webhook_secret, "escalation.webhook_secret")
        if spec.escalation.sns_topic:
            yield ResourceRef(ResourceKind.TOPIC, spec.escalation.sns_topic, "escalation.sns_topic")
        secondary = spec.escalation.secondary
        if secondary is not None and secondary.sns_topic:
            yield ResourceRef(ResourceKind.TOPIC, secondary.sns_topic, "escalation.secondary.sns_topic")


def shared_bus_sources(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """(field, source) of every source the job's triggers listen to on the bus every team shares."""
    for index, trigger in enumerate(spec.triggers):
        if trigger.event is not None and trigger.event.bus == DEFAULT_BUS:
            for location, source in named_sources(trigger.event.pattern):
                path = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in location)
                yield f"triggers[{index}].event.pattern{path}", source


def data_buckets(spec: JobSpec) -> Iterator[ResourceRef]:
    """The buckets a job reads: those it waits on, and those its distributed maps name."""
    for path, condition in spec.wait_conditions():
        if condition.s3 is not None:
            yield ResourceRef(ResourceKind.BUCKET, condition.bucket_and_key[0], f"{path}.s3")
    for index, task in enumerate(spec.dag.tasks if spec.dag is not None else []):
        if task.map is not None and (named := task.map.named_object) is not None:
            yield ResourceRef(ResourceKind.BUCKET, named[0], f"dag.tasks[{index}].map.over")


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True)
class TeamGrants:
    """What the platform grants each team by name, in the membership document: Kubernetes namespaces and service
    accounts in shared EKS clusters, and event sources on the bus every team shares. None of these carries AWS
    tags, and a team name may be another's prefix (``data``, ``data-eng``), so a name never decides by its shape:
    a team's namespaces are exactly its own name and those listed for it, its service accounts only those
    listed, and its event sources ``TEAM.*`` and those listed.

        {"kubernetes": {"data": {"namespaces": ["data-batch"], "service_accounts": ["trainer"]}},
         "event_sources": {"payments": ["com.acme.billing"]}}
    """

    namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    service_accounts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    event_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> TeamGrants:
        """From the membership document (its ``kubernetes`` and ``event_sources``)."""
        kubernetes = {str(t): g for t, g in (config.get("kubernetes") or {}).items() if isinstance(g, dict)}
        sources = config.get("event_sources") or {}
        return cls(
            namespaces={t: tuple(str(n) for n in g.get("namespaces", [])) for t, g in kubernetes.items()},
            service_accounts={t: tuple(str(a) for a in g.get("service_accounts", [])) for t, g in kubernetes.items()},
            event_sources={str(t): tuple(str(s) for s in granted) for t, granted in sources.items()},
        )

    def namespace_refusal(self, namespace: str, team: str) -> str | None:
        allowed = f"a team's namespaces are its name ({team}) and those the platform grants it"
        if namespace in SYSTEM_NAMESPACES or namespace.startswith("kube-"):
            return "is a system namespace"
        others = sorted(t for t, granted in self.namespaces.items() if t != team and namespace in granted)
        if others or (namespace != team and namespace in self.namespaces):
            return f"is granted to another team ({allowed})"
        if namespace == team or namespace in self.namespaces.get(team, ()):
            return None
        return f"is not the team's ({allowed})"

    def service_account_refusal(self, account: str, team: str) -> str | None:
        if account in self.service_accounts.get(team, ()):
            return None
        return "is not granted to the team (leave it out to run as the namespace's default service account)"

    def source_refusal(self, source: str, team: str) -> str | None:
        """Why ``team`` may not listen to ``source`` on the shared bus (None: it may). A source granted to two
        teams is neither's."""
        allowed = f"a team's sources on the shared bus are {team}.* and those the platform grants it"
        if any(t != team and source in granted for t, granted in self.event_sources.items()):
            return f"source '{source}' is granted to another team ({allowed})"
        if source.startswith(f"{team}.") or source in self.event_sources.get(team, ()):
            return None
        return f"source '{source}' is not the team's ({allowed})"


def refusal(
    resource: ResourceRef,
    team: str,
    tags: dict[str, str] | None,
    reserved: tuple[str, ...],
    grants: TeamGrants | None = None,
) -> str | None:
    """Why ``team`` may not use ``resource`` (None: it may). Pure: the rule, stated once."""
    if resource.kind is ResourceKind.NAMESPACE:
        return (grants or TeamGrants()).namespace_refusal(resource.name, team)
    if resource.kind is ResourceKind.SERVICE_ACCOUNT:
        return (grants or TeamGrants()).service_account_refusal(resource.name, team)
    if resource.is_reserved(reserved):
        return "is one of jobsched's own resources"
    if tags is None:
        return "does not exist or is not visible"
    if tags.get(OWNER_TAG) == team:
        return None
    if resource.kind.shareable and tags.get(SHARED_TAG) == "true":
        return None
    if OWNER_TAG in tags:
        return "belongs to another team"
    shared = f" or {SHARED_TAG}=true" if resource.kind.shareable else ""
    return f"is not tagged {OWNER_TAG}={team}{shared}"


class OwnershipGuard:
    """Checks a resource against a team before use; tag reads are cached for ``ttl`` seconds. ``grants`` gives the
    current Kubernetes grants (the membership's, reloaded by its cache): none, a team has only its own namespace."""

    def __init__(
        self,
        reader: TagReader,
        reserved: tuple[str, ...],
        *,
        ttl: float = TAG_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        grants: Callable[[], TeamGrants] = TeamGrants,
    ) -> None:
        self.reader, self.reserved, self.ttl, self.monotonic = reader, reserved, ttl, monotonic
        self.grants = grants
        self._cache: dict[tuple[str, ResourceKind, str], tuple[float, dict[str, str] | None]] = {}
        self._lock = threading.Lock()

    def check(self, resource: ResourceRef, team: str) -> None:
        """Raises NotOwned unless ``team`` may use ``resource``."""
        reason = refusal(resource, team, self._tags(team, resource), self.reserved, self._grants(resource))
        if reason is not None:
            raise NotOwned(resource, team, reason)

    def visibly_foreign(self, resource: ResourceRef, team: str) -> NotOwned | None:
        """At registration: refuse what is visibly ours or another team's; a resource that does not exist
        yet is accepted (the run checks again before every use)."""
        tags = self._tags(team, resource)
        if tags is None and not resource.is_reserved(self.reserved):
            return None
        reason = refusal(resource, team, tags, self.reserved, self._grants(resource))
        return NotOwned(resource, team, reason) if reason is not None else None

    def exists(self, resource: ResourceRef, team: str) -> bool:
        """Whether ``team`` can see the resource (its tags could be read); reserved names count as existing."""
        return resource.kind in KUBERNETES_NAMED or self._tags(team, resource) is not None

    def source_refusal(self, source: str, team: str) -> str | None:
        """Why ``team`` may not listen to ``source`` on the shared bus, by the platform's grants (None: it may)."""
        return self.grants().source_refusal(source, team)

    def _grants(self, resource: ResourceRef) -> TeamGrants | None:
        return self.grants() if resource.kind in KUBERNETES_NAMED else None

    def _tags(self, team: str, resource: ResourceRef) -> dict[str, str] | None:
        if resource.kind in KUBERNETES_NAMED:
            return {}  # nothing to read: the platform's grants decide (``refusal``)
        if resource.is_reserved(self.reserved):
            return None  # never read: the name alone decides
        key = (team, resource.kind, resource.name)
        now = self.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        tags = self.reader.tags(team, resource)
        with self._lock:
            self._cache[key] = (now, tags)
        return tags
