"""``sessions`` in Structured Streaming three times: ``session_window``, and by hand with both arbitrary-state APIs.

``build``: ``withWatermark`` + ``groupBy("user", session_window("event_time", gap))`` in append mode.
Spark merges overlapping sessions ``[event, event + gap)``, drops a record when the session it would open
already ends at or behind the watermark (``event_time + gap <= watermark``), and emits each session once,
when the watermark reaches its end.

``build_with_state``: the same sessions kept by hand, per user, with ``applyInPandasWithState`` and
event-time timeouts: the open sessions are the group state, the timeout is the earliest open session's
end, and a session is emitted when the watermark reaches its end (from the data call or the timeout).
This is the form to start from when sessions need logic ``session_window`` cannot express.

``build_transform_with_state``: the same by hand with Spark 4's ``transformWithStateInPandas`` (a
:class:`Sessionizer`): the open sessions are a typed ``ListState`` (one row per session, no JSON), and an
event-time timer at the earliest open session's end closes it. It needs the RocksDB state store provider
(the kit's :mod:`kit.spark` default).

Example (``source`` a :class:`modern.workloads.Source`)::

    sessions = build(spark, source)              # user, session_start, session_end, events, last_input_ts
    by_hand = build_with_state(spark, source)    # the same rows
    by_processor = build_transform_with_state(spark, source)   # the same rows, too
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from kit.semantics import WATERMARK_DELAY_MS, merge_session

__all__ = ["Sessionizer", "build", "build_transform_with_state", "build_with_state", "sessions_by_processor"]


# --8<-- [start:sessions]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    gap = f"{source.dataset.session_gap_ms} milliseconds"
    events = source.events().withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
    sessions = events.groupBy("user", F.session_window("event_time", gap).alias("session")).agg(
        F.count("*").alias("events"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts")
    )
    return sessions.select(
        "user",
        F.unix_millis("session.start").alias("session_start"),
        F.unix_millis("session.end").alias("session_end"),
        "events",
        "last_input_ts",
    )
# --8<-- [end:sessions]


# --8<-- [start:sessions.state]
_OUTPUT = "user string, session_start long, session_end long, events long, last_input_ts long"
# One user's open sessions as a JSON list of [start, last event, events, last kafka_ts]. A string, because
# PySpark 4.3's worker cannot read back a state schema holding arrays (KeyError: 'elementType').
_STATE = "open_sessions string"


def _sessionize(gap_ms: int) -> Any:
    def sessionize(key: tuple, batches: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        (user,) = key
        sessions = json.loads(state.get[0]) if state.exists else []
        for batch in batches:  # empty when called for a timeout
            for t, kafka_ts in zip(batch["event_time_ms"].tolist(), batch["kafka_ts_ms"].tolist()):
                sessions = merge_session(sessions, t, kafka_ts, gap_ms)
        watermark = state.getCurrentWatermarkMs()
        closed = [s for s in sessions if s[1] + gap_ms <= watermark]
        still_open = [s for s in sessions if s[1] + gap_ms > watermark]
        if still_open:
            state.update((json.dumps(still_open),))
            # Spark times a key out when its timeout is *before* the watermark; sessions close when their
            # end is at or before it, hence the millisecond less.
            state.setTimeoutTimestamp(min(s[1] for s in still_open) + gap_ms - 1)
        else:
            state.remove()
        if closed:
            yield pd.DataFrame(
                {
                    "user": user,
                    "session_start": [s[0] for s in closed],
                    "session_end": [s[1] + gap_ms for s in closed],
                    "events": [s[2] for s in closed],
                    "last_input_ts": [s[3] for s in closed],
                }
            )

    return sessionize


def build_with_state(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.streaming.state import GroupStateTimeout

    gap_ms, delay_ms = source.dataset.session_gap_ms, WATERMARK_DELAY_MS
    # Spark drops rows at or behind the watermark before they reach the function, but a session keeps an
    # event until event_time + gap is behind it. So the watermark is declared on that column, with the gap
    # added to the delay: the watermark's value is unchanged (max(event_time) - delay), and the rows
    # dropped are exactly those session_window drops.
    events = source.events().select(
        "user",
        "event_time_ms",
        F.unix_millis("kafka_ts").alias("kafka_ts_ms"),
        F.timestamp_millis(F.col("event_time_ms") + gap_ms).alias("session_reach"),
    )
    events = events.withWatermark("session_reach", f"{delay_ms + gap_ms} milliseconds")
    return events.groupBy("user").applyInPandasWithState(
        _sessionize(gap_ms), _OUTPUT, _STATE, "append", GroupStateTimeout.EventTimeTimeout
    )
# --8<-- [end:sessions.state]


# --8<-- [start:sessions.transform_with_state]
class Sessionizer(StatefulProcessor):
    """One user's open sessions in a ListState, closed by an event-time timer at the earliest session's end.

    No TTL: TTL counts processing time (an update keeps a value for ``ttlDurationMs`` of wall clock), but a
    session ends in event time, when the watermark passes it. A replayed backlog or a stopped query would
    expire sessions that are still open. The timer is the event-time expiry.
    """

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = gap_ms

    def init(self, handle: Any) -> None:
        self.handle = handle
        # One row per open session: [start, last event, events, last kafka_ts], as merge_session keeps them.
        self.open = handle.getListState("open_sessions", "start long, last long, events long, kafka_ts long")

    def handleInitialState(self, key: Any, initialState: pd.DataFrame, timerValues: Any) -> None:
        # A cutover's seed (modern.seed): sessions the legacy job held open, kept with their timer. A first
        # micro-batch has no watermark, so none of them closes here.
        sessions = [list(s) for s in self.open.get()]
        sessions += initialState[["start", "last", "events", "kafka_ts"]].astype("int64").values.tolist()
        self._close(key[0], sessions, timerValues.getCurrentWatermarkInMs(), expiring=None)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        sessions = [list(s) for s in self.open.get()]
        for batch in rows:
            for t, kafka_ts in zip(batch["event_time_ms"].tolist(), batch["kafka_ts_ms"].tolist()):
                sessions = merge_session(sessions, t, kafka_ts, self.gap_ms)
        return self._close(key[0], sessions, timerValues.getCurrentWatermarkInMs(), expiring=None)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        sessions = [list(s) for s in self.open.get()]
        expiring = expiredTimerInfo.getExpiryTimeInMs()
        return self._close(key[0], sessions, timerValues.getCurrentWatermarkInMs(), expiring=expiring)

    def _close(self, user: str, sessions: list, watermark: int, expiring: int | None) -> Iterator[pd.DataFrame]:
        # Eager, not a generator: the state is updated whether or not the caller reads the rows.
        if expiring is not None:
            # A timer fires once the eviction watermark is past it (TimerStateImpl: expiry < watermark), but the
            # watermark this call is given can be the older one late rows are judged by: with it alone, the
            # session whose timer fires stays open, its timer (the one firing, deleted by Spark after this call)
            # is not renewed, and the session is never emitted (seen on the boundary dataset's probes).
            watermark = max(watermark, expiring + 1)
        closed = [s for s in sessions if s[1] + self.gap_ms <= watermark]
        still_open = [s for s in sessions if s[1] + self.gap_ms > watermark]
        # Spark fires an event-time timer when it is *before* the watermark; sessions close when their end
        # is at or before it, hence the millisecond less. Spark deletes the timer that is firing itself.
        wanted = {min(s[1] for s in still_open) + self.gap_ms - 1} if still_open else set()
        timers = set(self.handle.listTimers()) - {expiring}
        for timer in timers - wanted:
            self.handle.deleteTimer(timer)
        for timer in wanted - timers:
            self.handle.registerTimer(timer)
        if still_open:
            self.open.put([tuple(s) for s in still_open])
        else:
            self.open.clear()
        if not closed:
            return iter([])
        rows = {
            "user": user,
            "session_start": [s[0] for s in closed],
            "session_end": [s[1] + self.gap_ms for s in closed],
            "events": [s[2] for s in closed],
            "last_input_ts": [s[3] for s in closed],
        }
        return iter([pd.DataFrame(rows)])


def build_transform_with_state(spark: Any, source: Any) -> Any:
    return sessions_by_processor(source.events(), source.dataset.session_gap_ms)


def sessions_by_processor(events: Any, gap_ms: int, initial_state: Any = None) -> Any:
    """:class:`Sessionizer` per user of ``events``.

    ``initial_state``: sessions already open (``user, start, last, events, kafka_ts``, grouped by ``user``: a
    cutover's seed, :mod:`modern.seed`).
    """
    from pyspark.sql import functions as F  # noqa: N812

    # As in build_with_state: the watermark is declared on event_time + gap with the gap added to the delay,
    # so its value is max(event_time) - delay and the operator drops exactly the rows session_window drops.
    events = events.select(
        "user",
        "event_time_ms",
        F.unix_millis("kafka_ts").alias("kafka_ts_ms"),
        F.timestamp_millis(F.col("event_time_ms") + gap_ms).alias("session_reach"),
    )
    events = events.withWatermark("session_reach", f"{WATERMARK_DELAY_MS + gap_ms} milliseconds")
    return events.groupBy("user").transformWithStateInPandas(
        Sessionizer(gap_ms), _OUTPUT, outputMode="Append", timeMode="EventTime", initialState=initial_state
    )
# --8<-- [end:sessions.transform_with_state]
