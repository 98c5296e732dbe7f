"""Time zones from the pinned ``tzdata`` package, never from the host.

Every dispatcher, worker and laptop must compute the same instants for the same schedule; the host's
zoneinfo files differ between Lambda runtime versions and developer machines, the pinned package does not.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo

UTC = ZoneInfo("UTC")


@cache
def available_zones() -> frozenset[str]:
    """Every IANA zone name the pinned tzdata knows."""
    listing = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in listing.splitlines() if line.strip())


@cache
def get_zone(name: str) -> ZoneInfo:
    """The zone called ``name``, loaded from tzdata; KeyError for unknown names."""
    if name not in available_zones():
        raise KeyError(name)
    resource = resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    with resource.open("rb") as handle:
        return ZoneInfo.from_file(handle, key=name)


def suggest_zone(name: str) -> str | None:
    """The closest known zone name, for 'did you mean' messages."""
    by_lower = {zone.lower(): zone for zone in available_zones()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.75)
    return by_lower[close[0]] if close else None
