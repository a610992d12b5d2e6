"""``nexmark_q7``: Nexmark query 7, highest bid: the bid with the highest price in each 10 s event-time window.

Definitions read: Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query7.java``
(commit 5fb0adbb30aa6c90ff854457bab3fc595a7139e1): bids in fixed windows of ``windowSizeSec`` (10 s by default),
the window's maximum price (a side input), and every bid of the window at that price; and nexmark/nexmark's
``nexmark-flink/src/main/resources/queries/q7.sql`` (commit 22a860fe2adbfc59fe678b17a1f3bdb669197b09): the maximum
price per 10 s tumbling window, joined back to the bids with ``dateTime BETWEEN window_end - 10 s AND
window_end``. The kit follows Beam's windows, ``[start, start + 10 s)``, starts on multiples of 10 s from the epoch
(Spark's ``window()``).

Semantic differences, on purpose:

- **one row per window.** Both references output every bid tied at the maximum price; here the window's row is
  the greatest ``(price, dateTime, auction, bidder, extra)``, Spark's ``max(struct(...))``, so that the
  aggregation keeps one bid per window as state instead of every bid of the window. A tie at the top is rare
  (prices spread over six orders of magnitude); when there is one, the other tied bids are not output.
- **the SQL's closed interval is not followed**: its ``BETWEEN`` also matches a bid exactly at a window's end (the
  next window's first millisecond) at that price; Beam's window, and this one, do not hold that bid.
- **event time with the kit's watermark**: the watermark is the largest ``dateTime`` of the bids seen (persons and
  auctions do not move it) minus 5 s; a bid whose window has ended by the watermark when it arrives is dropped
  (a late drop, with its window start), and each window is emitted once, in append mode, when the watermark
  passes its end. Windows still open when the input ends are emitted by neither engine nor the oracle.

Legacy: :func:`legacy.workloads.event_time_operator` (the DStream emulation of Spark's stateful operator, as
``ysb``): state per window start, the best bid so far. Modern: ``withWatermark``, ``groupBy(window(...))``,
``max(struct(price, ...))``. Compared per event-time window: ``window_start -> the bid``.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> rows["window_start"].diff().dropna().unique().tolist(), len(rows)
    ([10000.0], 4)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import nexmark_spec, read_bids

__all__ = ["SPEC", "WATERMARK_DELAY_MS", "WINDOW_MS", "oracle"]

WINDOW_MS = 10_000
"""The tumbling event-time window (a literal of the oracle's own; the engines take theirs from kit.semantics)."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness."""

_ORDER = ["price", "dateTime", "auction", "bidder", "extra"]
"""What decides the highest bid, in order: the price, then the tie-breakers."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """The highest bid per window of the bids the watermark let in; windows closed by the end only."""
    bids, rejects = read_bids(frame, dataset)
    times = bids["dateTime"].to_numpy(dtype=np.int64)
    watermark_then = bids["prior_max_ms"].to_numpy(dtype=np.int64) - WATERMARK_DELAY_MS
    final_watermark = int(times.max()) - WATERMARK_DELAY_MS if len(times) else -(2**62)
    bids["window_start"] = times - times % WINDOW_MS
    ends = bids["window_start"].to_numpy() + WINDOW_MS
    too_late = ends <= watermark_then
    kept = bids[~too_late & (ends <= final_watermark)]
    top = kept.sort_values(["window_start", *_ORDER], kind="stable").groupby("window_start").tail(1)
    late_dropped = bids.loc[too_late, ["seq", "window_start"]].reset_index(drop=True)
    return OracleResult(sorted_rows(SPEC, top), rejects, late_dropped)


SPEC = nexmark_spec(
    name="nexmark_q7",
    summary="Nexmark q7: highest bid per 10 s event-time window",
    key_columns=("window_start",),
    value_columns=("auction", "bidder", "price", "dateTime", "extra"),
    granularity="the highest bid per event-time window (each window emitted once, when final)",
    oracle=oracle,
    watermark_delay_ms=WATERMARK_DELAY_MS,
    horizon=lambda dataset: (WINDOW_MS + WATERMARK_DELAY_MS, "a 10 s window and the 5 s watermark delay"),
)
