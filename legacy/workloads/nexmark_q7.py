"""``nexmark_q7`` (Nexmark highest bid) on DStreams: the highest bid per 10 s event-time window.

DStreams have no event-time windows: :func:`legacy.workloads.event_time_operator` keeps, per window start, the
best bid so far and the newest Kafka timestamp behind it, drops bids whose window the watermark (largest
``dateTime`` of the earlier batches minus 5 s) has passed, and emits each window once, when the watermark passes
its end. The highest bid is the greatest ``(price, dateTime, auction, bidder, extra)``, as Spark's
``max(struct(...))`` orders them (see ``kit.workloads.nexmark_q7`` for the differences from the references).

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (window_start, auction, bidder, price, dateTime, extra, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q7_WINDOW_MS as WINDOW_MS
from kit.semantics import WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:nexmark_q7]
def _window_start(bid: dict) -> int:
    return int(bid["dateTime"] - bid["dateTime"] % WINDOW_MS)


def _highest(state: dict | None, bids: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps a window start to ``(best bid, newest kafka_ts)``."""
    state = state if state is not None else {}
    late = []
    for bid in bids:
        start = _window_start(bid)
        if start + WINDOW_MS <= watermark:
            late.append((bid, start))
            continue
        ranked = (bid["price"], bid["dateTime"], bid["auction"], bid["bidder"], bid["extra"])
        best, last_ts = state.get(start, (ranked, -1))
        state[start] = (max(best, ranked), max(last_ts, bid["kafka_ts"]))
    # The watermark only grows and late bids are refused above, so a window past it is final.
    closed = [start for start in state if start + WINDOW_MS <= watermark]
    rows = []
    for start in closed:
        (price, when, auction, bidder, extra), last_ts = state.pop(start)
        rows.append((start, auction, bidder, price, when, extra, last_ts))
    return state, rows, late


def build(ssc: Any, source: Any) -> Any:
    rows, late = event_time_operator(
        source.nexmark("bids"), delay_ms=WATERMARK_DELAY_MS, key=_window_start, step=_highest
    )
    source.drop_late(late)
    return rows
# --8<-- [end:nexmark_q7]
