"""``nexmark_q5`` (Nexmark hot items) in Structured Streaming: the most-bid auctions per 10 s window sliding every 5 s.

Two chained event-time aggregations, append mode (Spark propagates the watermark from one stateful operator to
the next): bids counted per ``(window, auction)``; then those counts grouped per window, re-windowed on
``window_time(window)`` (the window's end minus 1 ms) into 5 s tumbling windows, one per sliding window, keeping
the highest count and every auction's count; the auctions at the highest count are the rows.

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    hot = build(spark, source)   # window_start, auction, count, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q5_WINDOW, WATERMARK_DELAY_MS

__all__ = ["build"]

SIZE_MS, SLIDE_MS = NEXMARK_Q5_WINDOW


# --8<-- [start:nexmark_q5]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    counts = (
        source.nexmark("bids")
        .withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
        .groupBy(F.window("event_time", f"{SIZE_MS} milliseconds", f"{SLIDE_MS} milliseconds"), "auction")
        .agg(F.count("*").alias("count"), F.max("kafka_ts").alias("kafka_ts"))
    )
    per_window = counts.groupBy(F.window(F.window_time("window"), f"{SLIDE_MS} milliseconds").alias("slot")).agg(
        F.max("count").alias("top"), F.collect_list(F.struct("auction", "count", "kafka_ts")).alias("auctions")
    )
    return (
        per_window.select("slot", "top", F.explode("auctions").alias("a"))
        .where(F.col("a.count") == F.col("top"))
        .select(
            (F.unix_millis("slot.end") - SIZE_MS).alias("window_start"),
            "a.auction", "a.count", F.unix_millis("a.kafka_ts").alias("last_input_ts"),
        )
    )
# --8<-- [end:nexmark_q5]
