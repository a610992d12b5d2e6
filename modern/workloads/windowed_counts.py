"""``windowed_counts`` in Structured Streaming: ``withWatermark`` and ``window()`` aggregations, append mode.

One aggregation per window kind (10 s tumbling; 10 s sliding every 5 s) over the same watermarked events,
unioned into one output. Spark allows neither two ``window()`` calls in one aggregation nor a
``groupBy`` on a computed window start in append mode (the grouping must carry the watermark), so a union
of two aggregations is the direct way; each keeps its own state, and both see the same watermark. Spark drops
a record from a window already behind the watermark and emits each window once, when the watermark passes
its end.

Example (``source`` a :class:`modern.workloads.Source`)::

    counts = build(spark, source)   # window_kind, window_start, key, count, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import WATERMARK_DELAY_MS, WINDOWS

__all__ = ["build"]


# --8<-- [start:windowed_counts]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    events = source.events().withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
    per_kind = [
        events.groupBy(F.window("event_time", f"{size} milliseconds", f"{slide} milliseconds"), "key")
        .agg(F.count("*").alias("count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts"))
        .select(
            F.lit(kind).alias("window_kind"),
            F.unix_millis("window.start").alias("window_start"),
            "key",
            "count",
            "last_input_ts",
        )
        for kind, size, slide in WINDOWS
    ]
    return per_kind[0].unionByName(per_kind[1])
# --8<-- [end:windowed_counts]
