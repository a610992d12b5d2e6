"""``nexmark_q8`` (Nexmark monitor new users) on DStreams: persons and their auctions within one 10 s window.

DStreams have no event-time join: :func:`legacy.workloads.event_time_operator` runs over persons and auctions
together with the min-of-inputs watermark Structured Streaming gives a join (``side``: each input's largest
``dateTime`` of the earlier batches, the smaller of the two, minus 5 s). State per ``(person id, window start)``:
the window's persons and auctions so far. A new row is paired with the other side's rows of its key and then kept,
so each pair is emitted once, in the batch where its second row arrives; a row whose window has ended by the
watermark is dropped as late (reported with its window start), and a window's state is evicted once the watermark
passes its end (see ``kit.workloads.nexmark_q8``).

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (person_id, auction, name, reserve, window_start, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q8_WINDOW_MS as WINDOW_MS
from kit.semantics import WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:nexmark_q8]
def _side(event: dict) -> int:
    return 0 if event["type"] == "person" else 1


def _key(event: dict) -> tuple[int, int]:
    person = event["id"] if event["type"] == "person" else event["seller"]
    return int(person), int(event["dateTime"] - event["dateTime"] % WINDOW_MS)


def _pairs(state: dict | None, events: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps ``(person id, window start)`` to ``[persons, auctions]``."""
    state = state if state is not None else {}
    rows, late = [], []
    for event in events:
        person_id, start = key = _key(event)
        if start + WINDOW_MS <= watermark:
            late.append((event, start))
            continue
        persons, auctions = state.setdefault(key, ([], []))
        if event["type"] == "person":
            person = (event["name"], event["kafka_ts"])
            rows += [(person_id, auction, person[0], reserve, start, max(person[1], ts)) for auction, reserve, ts
                     in auctions]
            persons.append(person)
        else:
            auction = (event["id"], event["reserve"], event["kafka_ts"])
            rows += [(person_id, auction[0], name, auction[1], start, max(ts, auction[2])) for name, ts in persons]
            auctions.append(auction)
    for key in [k for k in state if k[1] + WINDOW_MS <= watermark]:  # no admitted row can join them any more
        del state[key]
    return state, rows, late


def build(ssc: Any, source: Any) -> Any:
    events = source.nexmark("persons").union(source.nexmark("auctions"))
    rows, late = event_time_operator(
        events, delay_ms=WATERMARK_DELAY_MS, key=_key, step=_pairs, side=_side, sides=2
    )
    source.drop_late(late)
    return rows
# --8<-- [end:nexmark_q8]
