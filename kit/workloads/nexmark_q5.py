"""``nexmark_q5``: Nexmark query 5, hot items: the most-bid auction(s) per 10 s event-time window sliding every 5 s.

Definitions read: Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query5.java``
(commit 38eeec960f74fbf15c67e33de5d5c173691fbc2c): bids in sliding windows of ``windowSizeSec`` (10 s) every
``windowPeriodSec`` (5 s), a count per auction, and per window every auction with the maximum count; and
nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q5.sql`` (commit
0f96e93c85ae6f5c29116f8b736e95cb5dc5a318): the same with a 10 s ``HOP`` sliding every 2 s. The kit follows Beam's
10 s / 5 s (the kit's own sliding windows, ``windowed_counts``', are the same), windows ``[start, start + 10 s)``
with starts on multiples of 5 s from the epoch (Spark's ``window()``).

Output: ``(window_start, auction) -> count`` for every auction tied at the window's highest count (every tied
auction is a row, as in both references: Beam's ``TopCombineFn`` keeps all of them). Beam's rows,
``AuctionCount(auction, count)``, leave the window implicit; here ``window_start`` names it, so a row says which
window it is for. Event time with the kit's
watermark, as ``nexmark_q7``: the largest ``dateTime`` of the bids seen minus 5 s; a bid is dropped from a window
that has ended by the watermark when it arrives (it may still count in its other, later window: a late drop is
``(seq, window_start)``); each window is emitted once, when the watermark passes its end; windows still open at the
end are emitted by no one.

Legacy: :func:`legacy.workloads.event_time_operator`, the counts of every open window in one shard of state
(the maximum needs all of a window's auctions together). Modern: two chained event-time aggregations (Spark 4):
the count per ``(window, auction)``, then per window (re-windowed on ``window_time``) the maximum and the auctions
that reach it.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> one_count_per_window = bool(rows.groupby("window_start")["count"].nunique().eq(1).all())
    >>> int(rows["window_start"].nunique()), len(rows), one_count_per_window
    (8, 8, True)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows, window_starts
from kit.workloads._nexmark import nexmark_spec, read_bids

__all__ = ["SLIDE_MS", "SPEC", "WATERMARK_DELAY_MS", "WINDOW_MS", "oracle"]

WINDOW_MS = 10_000
"""The sliding window's size (a literal of the oracle's own; the engines take theirs from kit.semantics)."""

SLIDE_MS = 5_000
"""How often a window starts."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Per closed window, every auction with the window's highest bid count; late drops per window."""
    bids, rejects = read_bids(frame, dataset)
    times = bids["dateTime"].to_numpy(dtype=np.int64)
    final_watermark = int(times.max()) - WATERMARK_DELAY_MS if len(times) else -(2**62)
    placed = window_starts(bids["dateTime"], WINDOW_MS, SLIDE_MS).join(bids[["seq", "auction", "prior_max_ms"]])
    ends = placed["window_start"].to_numpy() + WINDOW_MS
    too_late = ends <= placed["prior_max_ms"].to_numpy() - WATERMARK_DELAY_MS
    kept = placed[~too_late & (ends <= final_watermark)]
    counts = kept.groupby(["window_start", "auction"]).size().rename("count").reset_index()
    top = counts[counts["count"] == counts.groupby("window_start")["count"].transform("max")]
    late_dropped = placed.loc[too_late, ["seq", "window_start"]].reset_index(drop=True)
    return OracleResult(sorted_rows(SPEC, top), rejects, late_dropped)


SPEC = nexmark_spec(
    name="nexmark_q5",
    summary="Nexmark q5: hot items, the auctions with the most bids per 10 s window sliding every 5 s",
    key_columns=("window_start", "auction"),
    value_columns=("count",),
    granularity="the most-bid auctions per sliding event-time window (each window emitted once, when final)",
    oracle=oracle,
    watermark_delay_ms=WATERMARK_DELAY_MS,
    horizon=lambda dataset: (WINDOW_MS + WATERMARK_DELAY_MS, "a 10 s window and the 5 s watermark delay"),
)
