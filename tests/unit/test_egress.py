"""No server-side request forgery: one parser, every refused address class, pinning against rebinding.

Only loopback addresses are ever connected to here (the test servers); every other address is refused
before a connection is made, which is what these tests prove.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from jobsched.adapters.aws.notify import Notifier
from jobsched.adapters.aws.targets import TargetExecutor
from jobsched.core.errors import ChannelRefused
from jobsched.core.names import OWNER_TAG
from jobsched.core.run_records import RunContext
from jobsched.core.spec import HttpTarget
from jobsched.core.urls import UrlRefused, parse_url
from jobsched.tenancy.egress import AddressPolicy, EgressRefused, GuardedHttp
from jobsched.tenancy.ownership import OwnershipGuard, ResourceRef
from tests.helpers import RecordingServer, recording_server

DEPLOYED = AddressPolicy()
LOCAL = AddressPolicy.for_stage("local")

REFUSED_EVERYWHERE = [
    "169.254.169.254",
    "169.254.170.2",
    "169.254.1.1",
    "fe80::1",
    "fd00:ec2::254",
    "0.0.0.0",
    "::",
    # The metadata address inside IPv6 forms (#26): IPv4-compatible, IPv4-translated, NAT64, 6to4.
    "::a9fe:a9fe",
    "::ffff:0:a9fe:a9fe",
    "64:ff9b::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
]
REFUSED_DEPLOYED = [
    "127.0.0.1",
    "127.8.8.8",
    "::1",
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.1.1",
    "fd12:3456::1",
    "fc00::1",
    "100.64.0.1",
    "100.127.255.254",
    "224.0.0.1",
    "239.255.255.250",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "::ffff:10.0.0.1",
    "::ffff:8.8.8.8",
    "2002:a00:1::",
    "192.0.0.8",
    "198.18.0.1",
    # IPv6 outside global unicast 2000::/3, which Python's is_global lets through (#26).
    "::a00:1",  # IPv4-compatible ::/96
    "::ffff:0:a00:1",  # IPv4-translated ::ffff:0:0:0/96
    "fec0::1",  # site-local, deprecated
    "4000::1",  # unassigned
    "2001::1",  # Teredo
    "64:ff9b::808:808",  # NAT64 of a public address still crosses a translator
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"]


@pytest.mark.parametrize("address", REFUSED_EVERYWHERE + REFUSED_DEPLOYED)
def test_deployed_stages_refuse_every_non_public_address(address: str) -> None:
    assert DEPLOYED.refusal("host.example", ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_reachable(address: str) -> None:
    assert DEPLOYED.refusal("host.example", ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", REFUSED_EVERYWHERE)
def test_link_local_and_metadata_are_refused_even_locally_and_even_when_allowed(address: str) -> None:
    allowing = AddressPolicy.for_stage("local", ["169.254.0.0/16", "fe80::/10", "0.0.0.0/0", "::/0"])
    assert LOCAL.refusal("h", ipaddress.ip_address(address)) is not None
    assert allowing.refusal("h", ipaddress.ip_address(address)) is not None


def test_the_local_stage_reaches_loopback_only() -> None:
    assert LOCAL.refusal("localhost", ipaddress.ip_address("127.0.0.1")) is None
    assert LOCAL.refusal("localhost", ipaddress.ip_address("::1")) is None
    assert LOCAL.refusal("db", ipaddress.ip_address("10.0.0.1")) is not None


def test_the_platform_may_allow_hosts_and_networks() -> None:
    policy = AddressPolicy.for_stage("prod", ["10.20.0.0/16", "partner.internal"])
    assert policy.refusal("anything", ipaddress.ip_address("10.20.3.4")) is None
    assert policy.refusal("anything", ipaddress.ip_address("10.21.3.4")) is not None
    assert policy.refusal("partner.internal", ipaddress.ip_address("192.168.7.7")) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://0.0.0.0:18080\\@localhost/../health",  # the reported trick: urlsplit said "localhost"
        "http://localhost\\@10.0.0.1/",
        "https://user:pass@example.com/",
        "https://example.com@127.0.0.1/",
        "https://exa mple.com/",
        "https://example.com/\r\nX-Injected: 1",
        "https://[fe80::1%25eth0]/",
        "ftp://example.com/",
        "https:///nohost",
    ],
)
def test_the_one_parser_refuses_ambiguous_urls(url: str) -> None:
    with pytest.raises(UrlRefused):
        parse_url(url)


def test_the_parser_gives_what_is_sent() -> None:
    parsed = parse_url("https://Example.COM:8443/a/b?c=d#frag")
    assert (parsed.scheme, parsed.host, parsed.port, parsed.request_uri) == ("https", "example.com", 8443, "/a/b?c=d")
    assert parsed.host_header == "example.com:8443"
    assert parse_url("http://[::1]:80/").host_header == "[::1]"


# ------------------------------------------------------------------------------------ at call time


@pytest.fixture
def internal() -> Iterator[RecordingServer]:
    with recording_server() as server:
        yield server


def test_a_name_resolving_to_a_private_address_is_refused_before_connecting(
    internal: RecordingServer,
) -> None:
    port, seen = internal.port, internal.seen
    http = GuardedHttp(DEPLOYED, resolver=lambda host, _: ["127.0.0.1"])
    with pytest.raises(EgressRefused, match="not a public address"):
        http.request("POST", f"https://innocent.example:{port}/", body=b"{}")
    assert seen == []


def test_one_private_answer_among_public_ones_is_refused() -> None:
    http = GuardedHttp(DEPLOYED, resolver=lambda host, _: ["93.184.216.34", "10.0.0.7"])
    with pytest.raises(EgressRefused, match=r"10\.0\.0\.7"):
        http.request("GET", "https://mixed.example/")


def test_a_rebinding_resolver_reaches_only_the_address_that_was_checked(
    internal: RecordingServer,
) -> None:
    """The first answer is allowed, later answers are not: the connection uses the first, resolved once."""
    port, seen = internal.port, internal.seen
    answers = iter([["127.0.0.1"], ["127.0.0.2"], ["127.0.0.2"]])
    calls: list[str] = []

    def rebinding(host: str, _: int) -> list[str]:
        calls.append(host)
        return next(answers)

    policy = AddressPolicy.for_stage("prod", ["127.0.0.1/32"])  # 127.0.0.2 is refused
    response = GuardedHttp(policy, resolver=rebinding).request("POST", f"http://rebind.example:{port}/x", body=b"{}")
    assert response.status == 200 and calls == ["rebind.example"], "resolved once, connected to the checked address"
    assert seen[-1]["headers"]["Host"] == f"rebind.example:{port}"


def test_the_local_stage_calls_services_on_this_machine(internal: RecordingServer) -> None:
    port, seen = internal.port, internal.seen
    assert GuardedHttp(LOCAL).request("POST", f"http://localhost:{port}/", body=b"{}").status == 200
    assert len(seen) == 1


def _owned_everything() -> OwnershipGuard:
    class Owned:
        def tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
            return {OWNER_TAG: team}

    return OwnershipGuard(Owned(), ())


def test_a_refused_http_target_fails_the_run_without_resolving_its_secrets(
    internal: RecordingServer,
) -> None:
    port, seen = internal.port, internal.seen
    resolved: list[str] = []

    def resolver(reference: str, team: str, *, fresh: bool = False) -> str:
        resolved.append(reference)
        return "s3cret"

    executor = TargetExecutor(
        guard=_owned_everything(),
        secret_resolver=resolver,
        http=GuardedHttp(DEPLOYED, resolver=lambda host, _: ["127.0.0.1"]),
        sleep=lambda _: None,
    )
    context = RunContext("a/job", "a", "r1", 1, "2027-01-01T00:00:00Z", "c")
    target = HttpTarget(type="http", url=f"http://localhost:{port}/", secret_headers={"X-Key": "ssm:/a/key"})
    result = executor.execute(target, context)
    assert (
        result.outcome == "failed"
        and not result.retryable
        and (result.error or "").startswith("not allowed: localhost")
    )
    trick = HttpTarget.model_construct(  # stored before this check existed: refused at call time too
        type="http", url=f"http://0.0.0.0:{port}\\@localhost/", method="GET", headers={}, secret_headers={}
    )
    assert (executor.execute(trick, context).error or "").startswith("not allowed: ")
    assert resolved == [] and seen == [], "no secret resolved, no request sent"


def test_a_webhook_to_a_private_address_is_refused_not_retried(internal: RecordingServer) -> None:
    port, seen = internal.port, internal.seen
    notifier = Notifier(http=GuardedHttp(DEPLOYED))
    with pytest.raises(ChannelRefused):
        notifier.post(f"http://127.0.0.1:{port}/hook", {"page": 1})
    assert seen == []


def test_a_host_that_does_not_resolve_is_a_retryable_connection_error() -> None:
    def nothing(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    executor = TargetExecutor(
        guard=_owned_everything(), http=GuardedHttp(DEPLOYED, resolver=nothing), sleep=lambda _: None
    )
    result = executor.execute(
        HttpTarget(type="http", url="https://gone.example/"), RunContext("a/job", "a", "r1", 1, "t", "c")
    )
    assert result.outcome == "failed" and result.retryable and "cannot resolve gone.example" in (result.error or "")


def test_an_http_attempt_with_its_quick_retries_stays_within_its_timeout() -> None:
    """One attempt (#13): three tries of a never-answering endpoint used to take 3 x the timeout, past the worker's
    15 minutes; the timeout now bounds the whole attempt."""
    now = [0.0]
    timeouts: list[float] = []

    class Hanging:
        def request(self, method: str, url: str, *, timeout: Any, **_: Any) -> Any:
            timeouts.append(timeout.total)
            now[0] += timeout.total  # hangs until its timeout
            raise urllib3.exceptions.ReadTimeoutError(None, url, "hung")  # type: ignore[arg-type]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    executor = TargetExecutor(guard=_owned_everything(), http=Hanging(), sleep=sleep, monotonic=lambda: now[0])
    target = HttpTarget(type="http", url="https://hung.example/", timeout="14m")
    result = executor.execute(target, RunContext("a/job", "a", "r1", 1, "t", "c"))
    assert result.outcome == "failed" and result.retryable and "ReadTimeoutError" in (result.error or "")
    assert now[0] <= 14 * 60 and timeouts == [14 * 60], "one try used the whole attempt: no retry past it"


def test_quick_retries_share_the_attempts_timeout() -> None:
    now = [0.0]
    timeouts: list[float] = []

    class Refusing:
        def request(self, method: str, url: str, *, timeout: Any, **_: Any) -> Any:
            timeouts.append(timeout.total)
            now[0] += 0.1
            raise urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]

    executor = TargetExecutor(
        guard=_owned_everything(),
        http=Refusing(),
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        monotonic=lambda: now[0],
    )
    result = executor.execute(
        HttpTarget(type="http", url="https://down.example/", timeout="30s"), RunContext("a/job", "a", "r1", 1, "t", "c")
    )
    assert result.outcome == "failed" and len(timeouts) == 3
    assert timeouts[0] == 30 and timeouts[1] == pytest.approx(30 - 0.1 - 2) and sum(timeouts) < 90
