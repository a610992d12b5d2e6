"""``dedup`` in Structured Streaming: ``withWatermark`` + ``dropDuplicatesWithinWatermark("event_id")``.

Spark remembers each ``event_id`` until the watermark (largest event time seen minus 5 s) passes its event
time plus those 5 s, outputs the first record of an id at once (append mode) and drops the rest; a record
whose event time is at or behind the watermark is dropped as too late.

Example (``source`` a :class:`modern.workloads.Source`)::

    firsts = build(spark, source)   # event_id, user, key, event_time (ms), last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.workloads.dedup import SPEC

__all__ = ["build"]


# --8<-- [start:dedup]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    events = source.events().withWatermark("event_time", f"{SPEC.watermark_delay_ms} milliseconds")
    return events.dropDuplicatesWithinWatermark(["event_id"]).select(
        "event_id",
        "user",
        "key",
        F.col("event_time_ms").alias("event_time"),
        F.unix_millis("kafka_ts").alias("last_input_ts"),
    )
# --8<-- [end:dedup]
