"""URLs a team may name, parsed one way everywhere: what the spec accepts and egress checks again."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import urllib3
from urllib3.exceptions import LocationParseError

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "169.254.170.23", "fd00:ec2::254", "fd00:ec2::23")
)


# Special-purpose blocks that Python's is_global does not cover whole (IETF protocol assignments,
# benchmarking, CGNAT, NAT64): refused with the rest of the non-public space.
NON_PUBLIC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.0.0/24", "198.18.0.0/15", "100.64.0.0/10", "64:ff9b::/96", "64:ff9b:1::/48")
)


class UrlRefused(ValueError):
    """The URL itself is not acceptable (checked at registration and before every call)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ParsedUrl:
    scheme: str
    host: str  # lower case; IPv6 without brackets
    port: int
    request_uri: str  # path and query, as sent

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def literal_address(self) -> IpAddress | None:
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None


def parse_url(text: str) -> ParsedUrl:
    """The one parser of outbound URLs. Raises UrlRefused naming what is wrong."""
    if any(character == "\\" or ord(character) <= 32 or ord(character) == 127 for character in text):
        raise UrlRefused("invalid_url", f"'{text}': backslashes, spaces and control characters are not allowed")
    try:
        parsed = urllib3.util.parse_url(text)
    except LocationParseError:
        raise UrlRefused("invalid_url", f"'{text}' is not an http(s) URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UrlRefused("invalid_url", f"'{text}' is not an http(s) URL")
    if parsed.auth is not None or "@" in (text.split("//", 1)[-1].split("/", 1)[0]):
        raise UrlRefused("invalid_url", f"'{text}': user information (user@host) is not allowed in a URL")
    host = parsed.host.lower().strip("[]")
    if "%" in host:
        raise UrlRefused("invalid_url", f"'{text}': IPv6 zone identifiers are not allowed")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return ParsedUrl(parsed.scheme, host, port, parsed.request_uri)


def never_reachable(address: IpAddress) -> bool:
    """Link-local, metadata and unspecified addresses, also inside an IPv6 form that embeds them: refused in
    every stage, whatever is allowed."""
    embedded = embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else None
    return any(
        candidate.is_link_local or candidate.is_unspecified or candidate in METADATA_ADDRESSES
        for candidate in (address, *([embedded] if embedded else []))
    )


# IPv6 blocks whose low 32 bits are an IPv4 address (IPv4-compatible, IPv4-translated, NAT64); mapped, 6to4 and
# Teredo addresses have their own accessors.
_IPV4_IN_LOW_BITS = tuple(ipaddress.ip_network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries, if it carries one (a router may deliver to it)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in _IPV4_IN_LOW_BITS) and int(address) > 1:  # not :: or ::1
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None
