"""Outcome colours and symbols, chosen for contrast (WCAG AA for the white symbol on each colour)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Look:
    colour: str  # background of the cell or bar
    symbol: str  # drawn on it, so colour is never the only signal
    label: str


OUTCOMES: dict[str, Look] = {
    "succeeded": Look("#1a7f37", "✓", "succeeded"),
    "retried": Look("#4b6b1f", "↻", "succeeded after a retry"),
    "failed": Look("#cf222e", "✗", "failed"),
    "timed_out": Look("#a0400b", "T", "timed out"),
    "missed": Look("#8250df", "!", "missed"),
    "skipped": Look("#57606a", "\u2013", "skipped"),
    "cancelled": Look("#424a53", "⊘", "cancelled"),
    "running": Look("#0969da", "▶", "running"),
    "waiting": Look("#7d4e00", "…", "waiting"),
    "pending": Look("#6e7781", "·", "pending"),
}
FALLBACK = Look("#57606a", "?", "unknown")
TEXT = "#1f2328"
MUTED = "#59636e"
BACKGROUND = "#ffffff"


def look(outcome: str) -> Look:
    return OUTCOMES.get(outcome.lower(), FALLBACK)


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
