"""``dedup`` in Structured Streaming: ``dropDuplicatesWithinWatermark``, and with ``transformWithState``.

``build``: ``withWatermark`` + ``dropDuplicatesWithinWatermark("event_id")``. Spark remembers each
``event_id`` until the watermark (largest event time seen minus 5 s) reaches its event time plus those 5 s,
outputs the first record of an id at once (append mode) and drops the rest; a record whose event time is at
or behind the watermark is dropped as too late.

``build_transform_with_state``: the same with Spark 4's ``transformWithState`` over Rows (a
:class:`FirstDelivery` per ``event_id``): a ``ValueState`` remembers the id, an event-time timer at
``event_time + delay`` forgets it, exactly when ``dropDuplicatesWithinWatermark`` evicts it, and the operator
drops the same too-late records (it filters its input on the watermark column as Spark's deduplication
does). It needs the RocksDB state store provider (the kit's :mod:`kit.spark` default).

Example (``source`` a :class:`modern.workloads.Source`)::

    firsts = build(spark, source)   # event_id, user, key, event_time (ms), last_input_ts
    by_processor = build_transform_with_state(spark, source)   # the same rows
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from kit.semantics import WATERMARK_DELAY_MS

__all__ = ["FirstDelivery", "build", "build_transform_with_state", "first_deliveries"]


# --8<-- [start:dedup]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    events = source.events().withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
    return events.dropDuplicatesWithinWatermark(["event_id"]).select(
        "event_id",
        "user",
        "key",
        F.col("event_time_ms").alias("event_time"),
        F.unix_millis("kafka_ts").alias("last_input_ts"),
    )
# --8<-- [end:dedup]


# --8<-- [start:dedup.transform_with_state]
_OUTPUT = "event_id string, user string, key string, event_time long, last_input_ts long"


class FirstDelivery(StatefulProcessor):
    """Per ``event_id``: output its first delivery, remember it in a ValueState, forget it by event-time timer.

    No TTL: TTL counts processing time from the last update, while dropDuplicatesWithinWatermark forgets an
    id when the *watermark* passes its event time plus the delay. With TTL, what is remembered would depend
    on how fast the query runs (a backlog, a restart), not on the data.

    Row-based (``transformWithState``, PySpark 4.1+), not ``transformWithStateInPandas``: almost every id comes
    once, and the pandas API builds a DataFrame for each id's rows and converts each id's output DataFrame to
    Arrow on its own, which took about half the operator's time (benchmarks/results/changes.md §32).
    """

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.seen = handle.getValueState("forget_at", "forget_at long")

    def handleInitialState(self, key: Any, initialState: Row, timerValues: Any) -> None:
        # A cutover's seed (modern.seed): an id the legacy job emitted, seen at event time seen_at.
        self._remember(initialState.seen_at)

    def _remember(self, event_time: int) -> None:
        forget_at = event_time + self.delay_ms
        self.seen.update((forget_at,))
        # dropDuplicatesWithinWatermark evicts an id when the watermark reaches forget_at; Spark fires a
        # timer when it is *before* the watermark, hence the millisecond less.
        self.handle.registerTimer(forget_at - 1)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        if self.seen.exists():  # a re-delivery within the horizon (Spark does not need the rows read)
            return
        # The first delivery in arrival order (a batch's rows come in no particular order).
        first = min(rows, key=lambda row: (row.topic, row.partition, row.offset))
        self._remember(first.event_time_ms)
        yield Row(event_id=first.event_id, user=first.user, key=first.key, event_time=first.event_time_ms,
                  last_input_ts=first.last_input_ts)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        self.seen.clear()
        return iter([])


def build_transform_with_state(spark: Any, source: Any) -> Any:
    # The operator drops the rows at or behind the watermark by its column (event_time, a timestamp), as
    # dropDuplicatesWithinWatermark does; the processor reads the milliseconds.
    events = source.events().withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
    return first_deliveries(events)


def first_deliveries(events: Any, initial_state: Any = None) -> Any:
    """:class:`FirstDelivery` per ``event_id`` of watermarked ``events``.

    ``initial_state``: ids already seen (``event_id, seen_at``, grouped by ``event_id``: a cutover's seed,
    :mod:`modern.seed`).
    """
    from pyspark.sql import functions as F  # noqa: N812

    return events.select(
        "event_id", "user", "key", "event_time", "event_time_ms", "topic", "partition", "offset",
        F.unix_millis("kafka_ts").alias("last_input_ts"),
    ).groupBy("event_id").transformWithState(
        FirstDelivery(WATERMARK_DELAY_MS), _OUTPUT, outputMode="Append", timeMode="EventTime",
        initialState=initial_state,
    )
# --8<-- [end:dedup.transform_with_state]
