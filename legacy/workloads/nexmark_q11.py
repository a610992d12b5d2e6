"""``nexmark_q11`` (Nexmark user sessions) on DStreams: bids per bidder per event-time session, 10 s gap.

DStreams have no session windows: :func:`legacy.workloads.event_time_operator` keeps, per bidder, the sessions
still open, ``[start, last bid + gap)``, and merges each new bid into them as Spark's ``session_window`` does
(:func:`kit.semantics.merge_session`, the kit's ``sessions`` workload's step); a session is emitted once, when the
watermark (largest ``dateTime`` of the earlier batches minus 5 s) reaches its end, and a bid is dropped as too
late when the session it would open already ends at or before the watermark (``dateTime + gap <= watermark``).

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (bidder, session_start, session_end, bid_count, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q11_GAP_MS as GAP_MS
from kit.semantics import WATERMARK_DELAY_MS, close_sessions, merge_session
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:nexmark_q11]
def _bidder(bid: dict) -> int:
    return int(bid["bidder"])


def _sessions(state: dict | None, bids: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps a bidder to its open ``[start, last, bids, kafka_ts]``."""
    open_sessions: dict[int, list[list[int]]] = state if state is not None else {}
    late = []
    for bid in bids:
        if bid["dateTime"] + GAP_MS <= watermark:
            late.append((bid, None))
            continue
        bidder = bid["bidder"]
        open_sessions[bidder] = merge_session(open_sessions.get(bidder, []), bid["dateTime"], bid["kafka_ts"], GAP_MS)
    rows = close_sessions(open_sessions, GAP_MS, watermark)
    return open_sessions, rows, late


def build(ssc: Any, source: Any) -> Any:
    rows, late = event_time_operator(
        source.nexmark("bids"), delay_ms=WATERMARK_DELAY_MS, key=_bidder, step=_sessions
    )
    source.drop_late(late)
    return rows
# --8<-- [end:nexmark_q11]
