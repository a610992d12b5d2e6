"""``nexmark_q12`` (Nexmark processing-time windows) on DStreams: each bidder's bids per 10 s window of batches.

A DStream window *is* a processing-time window: ``reduceByKeyAndWindow`` over 10 s sliding by 10 s counts each
bidder's bids of the batches whose batch time lies in ``(end - 10 s, end]`` and emits the counts once, at ``end``
(every 10 s from the StreamingContext's start, so ends need not be multiples of 10 s from the epoch). The batch
time reaches the rows through ``transform``; ``window_start`` is ``end - 10 s``. See ``kit.workloads.nexmark_q12``
for what is compared (each bidder's counts summed over its windows) and why.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (bidder, window_start, bid_count, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q12_WINDOW_MS as WINDOW_MS

__all__ = ["build"]


# --8<-- [start:nexmark_q12]
def _combine(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], max(a[1], b[1])


def _rows(time: Any, counts: Any) -> Any:
    """A window's counts as rows: ``time`` is the batch time that closed it, the window's end."""
    start = round(time.timestamp() * 1000) - WINDOW_MS
    return counts.map(lambda kv: (kv[0], start, kv[1][0], kv[1][1]))


def build(ssc: Any, source: Any) -> Any:
    per_bidder = source.nexmark("bids").map(lambda bid: (bid["bidder"], (1, bid["kafka_ts"])))
    windows = per_bidder.reduceByKeyAndWindow(_combine, None, WINDOW_MS / 1000, WINDOW_MS / 1000)
    return windows.transform(_rows)
# --8<-- [end:nexmark_q12]
