"""What the engines' jobs of the built-in workloads are parameterised with: windows, lateness, join bound.

``legacy/workloads`` and ``modern/workloads`` take their event-time parameters and the session merge step
from here; the oracles in ``kit/workloads`` do not. Each oracle holds the same numbers as literals of its
own, so a slip on one side is a difference the diff shows instead of a shared mistake
(``tests/test_verdicts.py`` asserts that no oracle module imports this module, ``kit.events`` or an
engine, and that both sides' numbers agree).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "JOIN_WITHIN_MS", "NEXMARK_AUCTION_SKIP", "NEXMARK_DOLLARS_TO_EUROS", "NEXMARK_Q11_GAP_MS", "NEXMARK_Q12_WINDOW_MS",
    "NEXMARK_Q3_CATEGORY", "NEXMARK_Q3_STATES", "NEXMARK_Q4_WINDOW", "NEXMARK_Q5_WINDOW", "NEXMARK_Q7_WINDOW_MS",
    "NEXMARK_Q8_WINDOW_MS", "WATERMARK_DELAY_MS", "WINDOWS", "YSB_WINDOW_MS", "close_sessions", "late_detail",
    "merge_session",
]

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness of every event-time workload (``withWatermark`` delay; the legacy emulation's)."""

WINDOWS: tuple[tuple[str, int, int], ...] = (("tumbling", 10_000, 10_000), ("sliding", 10_000, 5_000))
"""``windowed_counts``: ``(window_kind, size_ms, slide_ms)`` of each window kind."""

YSB_WINDOW_MS = 10_000
"""``ysb``: the tumbling window per campaign."""

JOIN_WITHIN_MS = 60_000
"""``join``: a click joins the impressions at most this long before it (inclusive)."""

NEXMARK_DOLLARS_TO_EUROS = 0.908
"""``nexmark_q1``: euros per dollar (nexmark/nexmark's q1.sql)."""

NEXMARK_AUCTION_SKIP = 123
"""``nexmark_q2``: keep the bids on auctions whose id is a multiple of this (Beam's ``auctionSkip``, q2.sql)."""

NEXMARK_Q3_STATES: tuple[str, ...] = ("OR", "ID", "CA")
"""``nexmark_q3``: the sellers' states kept (q3.sql, Beam's Query3)."""

NEXMARK_Q3_CATEGORY = 10
"""``nexmark_q3``: the auctions' category kept."""

NEXMARK_Q4_WINDOW: tuple[int, int] = (10_000, 5_000)
"""``nexmark_q4``: ``(size_ms, slide_ms)`` of the sliding window over the auctions' closing times (Beam's
``windowSizeSec``, ``windowPeriodSec``)."""

NEXMARK_Q5_WINDOW: tuple[int, int] = (10_000, 5_000)
"""``nexmark_q5``: ``(size_ms, slide_ms)`` of the sliding event-time window (Beam's ``windowSizeSec``,
``windowPeriodSec``)."""

NEXMARK_Q7_WINDOW_MS = 10_000
"""``nexmark_q7``: the tumbling event-time window of the highest bid (q7.sql's 10 s; Beam's ``windowSizeSec``)."""


NEXMARK_Q8_WINDOW_MS = 10_000
"""``nexmark_q8``: the tumbling event-time window a person and their auction must share (q8.sql's 10 s)."""

NEXMARK_Q11_GAP_MS = 10_000
"""``nexmark_q11``: the session gap of a bidder's bids (q11.sql's 10 s; Beam's ``windowSizeSec``)."""

NEXMARK_Q12_WINDOW_MS = 10_000
"""``nexmark_q12``: the tumbling *processing-time* window of a bidder's bids (q12.sql's 10 s)."""


def late_detail(kind: str, window_start: int) -> str:
    """How a late drop names the window it was dropped from, e.g. ``"sliding:1767225605000"``."""
    return f"{kind}:{window_start}"


def merge_session(sessions: list[list[int]], t: int, kafka_ts: int, gap_ms: int) -> list[list[int]]:
    """One user's open sessions, each ``[start, last event, events, last kafka_ts]``, with an event at ``t``.

    The event joins (and may bridge) every session it is within one gap of, ends included, as Spark's
    ``session_window`` merges; otherwise it opens a session. Both engines' stateful versions use this.
    """
    merged = [t, t, 1, kafka_ts]
    rest = []
    for s in sessions:
        # Overlap of [s.start, s.last + gap] and [t, t + gap], ends included as in Spark's session_window.
        if s[0] <= t + gap_ms and t <= s[1] + gap_ms:
            merged = [min(merged[0], s[0]), max(merged[1], s[1]), merged[2] + s[2], max(merged[3], s[3])]
        else:
            rest.append(s)
    return [*rest, merged]


def close_sessions(open_sessions: dict[Any, list[list[int]]], gap_ms: int, watermark: int) -> list[tuple[Any, ...]]:
    """Take the sessions the watermark has closed out of ``open_sessions`` (key → :func:`merge_session`'s lists).

    A session ``[start, last, events, kafka_ts]`` is final once ``last + gap_ms <= watermark``: the watermark only
    grows and a late event is refused before it reaches a session. Returns ``(key, start, end, events, kafka_ts)``
    per closed session, ``end`` being ``last + gap_ms``; a key left without sessions is removed.
    """
    rows = []
    for key in list(open_sessions):
        still_open = []
        for start, last, events, kafka_ts in open_sessions[key]:
            if last + gap_ms <= watermark:
                rows.append((key, start, last + gap_ms, events, kafka_ts))
            else:
                still_open.append([start, last, events, kafka_ts])
        if still_open:
            open_sessions[key] = still_open
        else:
            del open_sessions[key]
    return rows
