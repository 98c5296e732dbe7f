"""Outbound HTTP that cannot be turned against the platform: one URL parser, an address policy, pinning.

The URL a team registers is parsed once, by ``parse_url``, for validation and for sending, so the two
can never disagree about the host (``http://0.0.0.0:1\\@localhost/`` is refused: no backslashes, no
userinfo). At call time the host is resolved, every address is checked against the stage's policy, and
the connection goes to the checked address (the Host header and TLS name stay the URL's host), so a
resolver that answers differently the second time (DNS rebinding) reaches nothing new. Redirects and
retries stay off.

Refused in every stage: link-local (169.254.0.0/16 and fe80::/10, so the instance and container metadata
endpoints 169.254.169.254 and 169.254.170.2), fd00:ec2::254, and unspecified addresses. In deployed stages
anything not globally routable is refused too: loopback, private (RFC 1918, RFC 4193), CGNAT, multicast,
reserved, IPv4-mapped/compatible/translated, 6to4, Teredo and NAT64 addresses, and any IPv6 address outside
global unicast 2000::/3. The local stage may reach loopback (``make run`` calls
services on this machine). The platform may allow hosts or CIDRs (CDK context ``egress_allow``); that
never opens link-local or metadata addresses.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import urllib3

from jobsched.core.names import LOCAL_STAGE
from jobsched.core.urls import (
    GLOBAL_UNICAST_V6,
    NON_PUBLIC_NETWORKS,
    IpAddress,
    ParsedUrl,
    embedded_ipv4,
    never_reachable,
    parse_url,
)


class EgressRefused(Exception):
    """The URL's host resolves to an address this stage may not reach. Nothing was sent."""


class UnresolvableHost(urllib3.exceptions.HTTPError):
    """The host did not resolve (perhaps for now): a connection error, retried like one."""


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses outbound HTTP may reach in this stage."""

    allow_loopback: bool = False  # the local stage
    allowed_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def for_stage(cls, stage: str, allow: Iterable[str] = ()) -> AddressPolicy:
        hosts: set[str] = set()
        networks = []
        for item in allow:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower())
        return cls(
            allow_loopback=stage == LOCAL_STAGE, allowed_hosts=frozenset(hosts), allowed_networks=tuple(networks)
        )

    def refusal(self, host: str, address: IpAddress) -> str | None:
        """Why ``host`` at ``address`` may not be reached (None: it may)."""
        if never_reachable(address):
            return f"{address} is a link-local or metadata address"
        if host in self.allowed_hosts or any(address in network for network in self.allowed_networks):
            return None
        if self.allow_loopback and address.is_loopback:
            return None
        if isinstance(address, ipaddress.IPv6Address):
            if embedded_ipv4(address) is not None:
                return f"{address} embeds an IPv4 address"
            if address not in GLOBAL_UNICAST_V6:  # is_global is true for ::/96, fec0::/10 and unassigned space
                return f"{address} is not a global unicast IPv6 address (2000::/3)"
        if address.is_multicast:
            return f"{address} is a multicast address"
        if not address.is_global or any(address in network for network in NON_PUBLIC_NETWORKS):
            return f"{address} is not a public address (loopback, private, CGNAT or reserved)"
        return None


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    found: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        if str(sockaddr[0]) not in found:
            found.append(str(sockaddr[0]))
    return found


@dataclass
class GuardedHttp:
    """``request`` like urllib3's, but only to addresses the policy allows, pinned to the checked one."""

    policy: AddressPolicy
    resolver: Resolver = system_resolver
    ca_certs: str | None = None

    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: urllib3.Timeout | float | None = None,
        **_: Any,
    ) -> urllib3.BaseHTTPResponse:
        target = parse_url(url)
        address = self.resolve(target)
        pool: urllib3.HTTPConnectionPool
        if target.scheme == "https":
            pool = urllib3.HTTPSConnectionPool(
                str(address),
                target.port,
                server_hostname=target.host,
                assert_hostname=target.host,
                cert_reqs="CERT_REQUIRED",
                ca_certs=self.ca_certs,
                retries=False,
            )
        else:
            pool = urllib3.HTTPConnectionPool(str(address), target.port, retries=False)
        try:
            return pool.urlopen(
                method,
                target.request_uri,
                body=body,
                headers={**(headers or {}), "Host": target.host_header},
                redirect=False,
                retries=False,
                timeout=timeout,
                assert_same_host=False,
            )
        finally:
            pool.close()

    def resolve(self, target: ParsedUrl) -> IpAddress:
        """The one address to connect to; every address the host resolves to must be allowed."""
        literal = target.literal_address
        try:
            addresses = (
                [literal]
                if literal is not None
                else [ipaddress.ip_address(a) for a in self.resolver(target.host, target.port)]
            )
        except (OSError, ValueError) as error:
            raise UnresolvableHost(f"cannot resolve {target.host}: {type(error).__name__}") from None
        if not addresses:
            raise UnresolvableHost(f"{target.host} resolves to no address")
        for address in addresses:
            reason = self.policy.refusal(target.host, address)
            if reason is not None:
                raise EgressRefused(f"{target.host} resolves to {address}: {reason}")
        return addresses[0]
