"""``nexmark_q4``: Nexmark query 4, average price for a category: the mean closing price of the auctions per category.

Definitions read: Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query4.java``
(commit 5fb0adbb30aa6c90ff854457bab3fc595a7139e1) and ``WinningBids.java`` (06c69582be28020148a858f8bd707b82dd784544):
an auction's winning bid is its highest bid (ties: the earlier) with ``bid.dateTime < auction.expires`` and
``price >= auction.reserve``; an auction without one has no winner. An auction closes when the watermark passes its
``expires``; its winning price, keyed by the auction's category, is re-windowed into sliding windows of
``windowSizeSec`` (10 s) every ``windowPeriodSec`` (5 s) and averaged per category and window. nexmark/nexmark's
``nexmark-flink/src/main/resources/queries/q4.sql`` (commit 0f96e93c85ae6f5c29116f8b736e95cb5dc5a318) joins each
auction with its bids ``BETWEEN A.dateTime AND A.expires``, takes ``MAX(price)`` per auction without the reserve,
and keeps one running average per category, updated (retracted and re-emitted) as bids arrive.

The kit follows Beam (a result final when emitted, so both engines output it in append mode), with two
differences, on purpose:

- **a bid counts from the auction's start**, ``auction.dateTime <= bid.dateTime < expires`` (the SQL's lower bound,
  Beam's upper one). Beam merges into the auction any bid on it placed before ``expires``, also one placed before
  the auction existed (the generator bids on up to ``ID_LEAD`` auctions ahead), and bounds how long such a bid waits
  by a guess, twice the expected auction length: whether it wins then depends on when the auction arrives. With the
  lower bound an early bid can never win, and a waiting bid is forgotten exactly when the watermark passes it.
- **the winner is placed at** ``expires``, where Beam stamps it at the auction window's last millisecond,
  ``expires - 1``: the two differ only for an auction expiring exactly on a 5 s boundary.

Output: ``(category, window_start) -> auctions, total_price, average_price``: how many auctions of the category
closed in the window (``expires`` in ``[start, start + 10 s)``) with a winner, the sum of their winning prices, and
``total_price / auctions`` (a double; Beam rounds it to a long). Windows with starts on multiples of 5 s from the
epoch (Spark's ``window()``).

Event time with the kit's watermark over auctions and bids together (persons do not move it): the largest
``dateTime`` of the auctions and bids seen, minus 5 s. An auction or a bid at or behind the watermark when it
arrives is dropped (a late drop, no window detail). That is all the watermark decides: an admitted bid that
could win arrives before its auction closes (it is ahead of the watermark, so ahead of ``expires`` once the auction
is closed), and a closed auction's windows are still open when its price reaches them, so the rows do not depend
on how the stream is cut into batches. An auction closes once the watermark reaches its ``expires``; a window is
emitted once, when the watermark reaches its end; auctions and windows still open when the input ends are emitted
by no one. A bid that arrives before its auction waits for it, and is forgotten once the watermark passes it (an
auction it could belong to would be too late by then).

Legacy: two :func:`legacy.workloads.event_time_operator` stages with one watermark (``then``): state per auction
(the auction, its best price so far, the bids waiting for it), then per category (the open windows' sums). Modern:
Spark 4's ``transformWithStateInPandas`` per auction with event-time timers, emitting ``close_time`` as its output's
event time (``eventTimeColumnName``), chained into ``groupBy(window(close_time, 10 s, 5 s), category)``.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> int(rows["window_start"].nunique()), len(rows), int(rows["auctions"].sum())
    (8, 40, 480)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows, window_starts
from kit.workloads._nexmark import nexmark_spec, read_tables

__all__ = ["SLIDE_MS", "SPEC", "WATERMARK_DELAY_MS", "WINDOW_MS", "oracle"]

WINDOW_MS = 10_000
"""The sliding window's size over the auctions' closing times (a literal of the oracle's own; the engines take theirs
from kit.semantics)."""

SLIDE_MS = 5_000
"""How often a window starts."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness."""

_NONE = -(2**62)
"""No watermark yet (before the first auction or bid)."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Per category and closed window, the auctions closed in it with a winner, their winning prices' sum and mean."""
    tables, rejects = read_tables(frame, dataset, ("auctions", "bids"))
    auctions, bids = tables["auctions"], tables["bids"]
    # Each record's watermark: the largest dateTime of the auctions and bids before it (replay order), minus the delay.
    both = pd.concat([auctions[["seq", "dateTime"]], bids[["seq", "dateTime"]]]).sort_values("seq", kind="stable")
    times = both["dateTime"].to_numpy(dtype=np.int64)
    prior = np.concatenate([[_NONE], np.maximum.accumulate(times)[:-1]]) if len(times) else times
    watermark = pd.Series(np.where(prior == _NONE, _NONE, prior - WATERMARK_DELAY_MS), index=both["seq"].to_numpy())
    final_watermark = int(times.max()) - WATERMARK_DELAY_MS if len(times) else _NONE

    def admitted(table: pd.DataFrame) -> np.ndarray:
        return np.asarray(table["dateTime"].to_numpy() > watermark.loc[table["seq"]].to_numpy(), bool)

    kept_auctions, kept_bids = auctions[admitted(auctions)], bids[admitted(bids)]
    late = pd.concat([auctions.loc[~admitted(auctions), ["seq"]], bids.loc[~admitted(bids), ["seq"]]])

    closed = kept_auctions[kept_auctions["expires"] <= final_watermark]
    pairs = closed[["id", "dateTime", "expires", "reserve", "category"]].merge(
        kept_bids[["auction", "dateTime", "price"]], left_on="id", right_on="auction", suffixes=("", "_bid"))
    valid = pairs[(pairs["dateTime"] <= pairs["dateTime_bid"]) & (pairs["dateTime_bid"] < pairs["expires"])
                  & (pairs["price"] >= pairs["reserve"])]
    winners = valid.groupby(["id", "category", "expires"], as_index=False)["price"].max()

    placed = window_starts(winners["expires"], WINDOW_MS, SLIDE_MS).join(winners[["category", "price"]])
    placed = placed[placed["window_start"].to_numpy() + WINDOW_MS <= final_watermark]
    rows = placed.groupby(["category", "window_start"], as_index=False).agg(
        auctions=("price", "size"), total_price=("price", "sum"))
    rows["average_price"] = rows["total_price"] / rows["auctions"]
    return OracleResult(sorted_rows(SPEC, rows), rejects, late.sort_values("seq").reset_index(drop=True))


SPEC = nexmark_spec(
    name="nexmark_q4",
    summary="Nexmark q4: average closing price per category, per 10 s window of closing times sliding every 5 s",
    key_columns=("category", "window_start"),
    value_columns=("auctions", "total_price", "average_price"),
    granularity="per category and sliding event-time window of closing times (each window emitted once, when final)",
    oracle=oracle,
    watermark_delay_ms=WATERMARK_DELAY_MS,
    tables=("auctions", "bids"),
    horizon=lambda dataset: (WINDOW_MS + WATERMARK_DELAY_MS,
                             "auctions that close, a 10 s window of closing times and the 5 s watermark delay"),
)
