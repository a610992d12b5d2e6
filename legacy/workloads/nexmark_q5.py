"""``nexmark_q5`` (Nexmark hot items) on DStreams: the most-bid auctions per 10 s window sliding every 5 s.

DStreams have no event-time windows: :func:`legacy.workloads.event_time_operator` keeps the count per auction of
every open window (in one shard: a window's maximum needs all its auctions together), drops a bid from each window
the watermark has passed (reported with that window's start; it still counts in its other window), and emits a
window once, when the watermark passes its end: every auction tied at its highest count.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (window_start, auction, count, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q5_WINDOW, WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator, sliding_window_starts

__all__ = ["build"]

SIZE_MS, SLIDE_MS = NEXMARK_Q5_WINDOW


# --8<-- [start:nexmark_q5]
def _hot_items(state: dict | None, bids: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps a window start to ``{auction: [count, newest kafka_ts]}``."""
    state = state if state is not None else {}
    late = []
    for bid in bids:
        for start in sliding_window_starts(bid["dateTime"], SIZE_MS, SLIDE_MS):
            if start + SIZE_MS <= watermark:
                late.append((bid, start))
                continue
            count = state.setdefault(start, {}).setdefault(bid["auction"], [0, -1])
            count[0] += 1
            count[1] = max(count[1], bid["kafka_ts"])
    rows = []
    for start in [s for s in state if s + SIZE_MS <= watermark]:  # final: the watermark only grows
        counts = state.pop(start)
        top = max(c for c, _ in counts.values())
        rows += [(start, auction, c, ts) for auction, (c, ts) in counts.items() if c == top]
    return state, rows, late


def _one_shard(bid: dict) -> int:
    return 0


def build(ssc: Any, source: Any) -> Any:
    rows, late = event_time_operator(
        source.nexmark("bids"), delay_ms=WATERMARK_DELAY_MS, key=_one_shard, step=_hot_items, shards=1
    )
    source.drop_late(late)
    return rows
# --8<-- [end:nexmark_q5]
