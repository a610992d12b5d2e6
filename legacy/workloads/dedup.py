"""``dedup`` on DStreams: drop repeated ``event_id``s, remembering each id for the lateness horizon.

:func:`event_time_operator` keyed by ``event_id`` keeps, in its shard state, every id seen and when it
may be forgotten (its event time plus the allowed lateness): the state of ``dropDuplicatesWithinWatermark``.
The first record of an id is output at once; later ones are dropped while the id is remembered. A record
whose event time is at or behind the watermark is dropped as too late, as Spark does: its id may already
be forgotten, so it could not be told apart from a re-delivery.

Example (``source`` a :class:`legacy.workloads.Source`)::

    firsts = build(ssc, source)   # DStream of (event_id, user, key, event_time, last_input_ts)
"""

from __future__ import annotations

import functools
from typing import Any

from kit.semantics import WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:dedup]
def _arrival(event: dict) -> tuple:
    return event["topic"], event["partition"], event["offset"]


def _step(state: dict | None, new: list[dict], watermark: int, *, delay_ms: int) -> tuple[dict, list, list]:
    forget_at: dict[str, int] = state or {}  # event_id -> watermark at which it may be forgotten
    rows, late = [], []
    # A batch's events come in no particular order; the first delivery of an id is the one kept.
    for event in sorted(new, key=_arrival):
        event_id, t = event["event_id"], event["event_time"]
        if t <= watermark:
            late.append((event, None))
        elif event_id not in forget_at:
            forget_at[event_id] = t + delay_ms
            rows.append((event_id, event["user"], event["key"], t, event["kafka_ts"]))
    return {i: at for i, at in forget_at.items() if at > watermark}, rows, late


def build(ssc: Any, source: Any) -> Any:
    step = functools.partial(_step, delay_ms=WATERMARK_DELAY_MS)
    rows, late = event_time_operator(
        source.events(), delay_ms=WATERMARK_DELAY_MS, key=lambda e: e["event_id"], step=step
    )
    source.drop_late(late)
    return rows
# --8<-- [end:dedup]
