"""``sessions`` on DStreams: per-user event-time sessions built by hand on :func:`event_time_operator`.

DStreams have no session windows (``window()`` is processing time) and no watermark, so this keeps, per
user, the sessions still open, ``[start, last event + gap)``, in the operator's shard state, and merges
each new event into them the way Spark's ``session_window`` does: an event overlapping one or more open
sessions joins them (out-of-order events can bridge two sessions into one), otherwise it opens its own.
A session is output once, when the global watermark reaches its end; an event is dropped as too late when
the session it would open already ends at or before the watermark (``event_time + gap <= watermark``).

Example (``source`` a :class:`legacy.workloads.Source`)::

    sessions = build(ssc, source)   # DStream of (user, session_start, session_end, events, last_input_ts)
"""

from __future__ import annotations

import functools
from typing import Any

from kit.semantics import WATERMARK_DELAY_MS, close_sessions, merge_session
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:sessions]
def _step(state: dict | None, new: list[dict], watermark: int, *, gap_ms: int) -> tuple[dict, list, list]:
    open_sessions: dict[str, list[list]] = state or {}
    late = []
    for event in new:
        if event["event_time"] + gap_ms <= watermark:
            late.append((event, None))
        else:
            user = event["user"]
            open_sessions[user] = merge_session(open_sessions.get(user, []), event["event_time"], event["kafka_ts"], gap_ms)
    rows = close_sessions(open_sessions, gap_ms, watermark)
    return open_sessions, rows, late


def build(ssc: Any, source: Any) -> Any:
    step = functools.partial(_step, gap_ms=source.dataset.session_gap_ms)
    rows, late = event_time_operator(
        source.events(), delay_ms=WATERMARK_DELAY_MS, key=lambda e: e["user"], step=step
    )
    source.drop_late(late)
    return rows
# --8<-- [end:sessions]
