"""``nexmark_q4`` (Nexmark average price for a category) on DStreams: winning bids, then a mean per category window.

DStreams have neither event-time timers nor chained stateful operators: :func:`legacy.workloads.event_time_operator`
emulates both, with one watermark (the largest ``dateTime`` of the auctions and bids of the earlier batches, minus
5 s). Its first stage keeps, per auction, the auction, its best price so far and the bids that arrived before it;
it drops an auction or bid at or behind the watermark as late, and once the watermark reaches an auction's
``expires`` it emits the winning price (if any bid won) and forgets the auction. The second stage (``then``) adds
each winning price to the category's sliding windows of closing times, 10 s every 5 s, and emits a window once,
when the watermark reaches its end (see ``kit.workloads.nexmark_q4``).

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (category, window_start, auctions, total_price, average_price, last_input_ts)
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q4_WINDOW, WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator, sliding_window_starts

__all__ = ["build"]

SIZE_MS, SLIDE_MS = NEXMARK_Q4_WINDOW


# --8<-- [start:nexmark_q4]
def _auction_id(event: dict) -> int:
    return int(event["id"] if event["type"] == "auction" else event["auction"])


def _offer(auction: dict, bid: dict) -> None:
    """A bid on ``auction``: the best price if it is in the auction's time and at least the reserve."""
    if auction["dateTime"] <= bid["dateTime"] < auction["expires"] and bid["price"] >= auction["reserve"]:
        auction["best"] = max(auction["best"], bid["price"])
        auction["kafka_ts"] = max(auction["kafka_ts"], bid["kafka_ts"])


def _winning_bids(state: dict | None, events: list[dict], watermark: int) -> tuple[dict, list, list]:
    """First stage: ``state`` holds the open auctions by id and the bids waiting for their auction."""
    state = state if state is not None else {"open": {}, "waiting": {}}
    open_, waiting = state["open"], state["waiting"]
    late = []
    for event in events:
        if event["dateTime"] <= watermark:
            late.append((event, None))
            continue
        auction_id = _auction_id(event)
        if event["type"] == "auction":
            auction = open_[auction_id] = {
                "dateTime": event["dateTime"], "expires": event["expires"], "reserve": event["reserve"],
                "category": event["category"], "best": -1, "kafka_ts": event["kafka_ts"],
            }
            for bid in waiting.pop(auction_id, []):
                _offer(auction, bid)
        elif auction_id in open_:
            _offer(open_[auction_id], event)
        else:
            waiting.setdefault(auction_id, []).append(event)
    rows = []
    for auction_id in [a for a, auction in open_.items() if auction["expires"] <= watermark]:
        auction = open_.pop(auction_id)
        if auction["best"] >= 0:
            rows.append({"category": auction["category"], "close": auction["expires"], "price": auction["best"],
                         "kafka_ts": auction["kafka_ts"]})
    # A waiting bid behind the watermark can wait no longer: an auction it could win would now be too late.
    for auction_id in list(waiting):
        waiting[auction_id] = [bid for bid in waiting[auction_id] if bid["dateTime"] >= watermark]
        if not waiting[auction_id]:
            del waiting[auction_id]
    return state, rows, late


def _category(row: dict) -> int:
    return int(row["category"])


def _averages(state: dict | None, winners: list[dict], watermark: int) -> tuple[dict, list, list]:
    """Second stage: ``state`` maps ``(category, window start)`` to ``[auctions, total price, newest kafka_ts]``.

    A winner closed at or after the watermark of the batch before, so every window it falls in is still open.
    """
    state = state if state is not None else {}
    for winner in winners:
        for start in sliding_window_starts(winner["close"], SIZE_MS, SLIDE_MS):
            window = state.setdefault((winner["category"], start), [0, 0, -1])
            window[0] += 1
            window[1] += winner["price"]
            window[2] = max(window[2], winner["kafka_ts"])
    rows = []
    for category, start in [k for k in state if k[1] + SIZE_MS <= watermark]:  # final: the watermark only grows
        auctions, total, last_ts = state.pop((category, start))
        rows.append((category, start, auctions, total, total / auctions, last_ts))
    return state, rows, []


def build(ssc: Any, source: Any) -> Any:
    events = source.nexmark("auctions").union(source.nexmark("bids"))
    rows, late = event_time_operator(
        events, delay_ms=WATERMARK_DELAY_MS, key=_auction_id, step=_winning_bids, then=[(_category, _averages)]
    )
    source.drop_late(late)
    return rows
# --8<-- [end:nexmark_q4]
