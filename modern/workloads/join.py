"""``join`` in Structured Streaming: a stream-stream inner join with watermarks and a time-range condition.

Views from the impressions topic and clicks from the clicks topic, each with a 5 s watermark, joined on
``ad_id`` and ``user`` (the narrowing :mod:`kit.workloads.join` explains) with the click's event time
``BETWEEN`` the impression's and 60 s later. From that condition Spark derives how long each side's rows must
stay in the join state (impressions for 60 s behind the watermark, clicks until the watermark passes them),
so the state is bounded by event time, not by how fast the records arrive. The query's watermark is the
smaller of the two inputs' (Spark's default policy), and a row at or behind it is dropped as late. Output
is append mode: each pair is emitted once, in the micro-batch where its second row arrives.

Both topics are read by one Kafka source (:meth:`modern.workloads.Source.events_together`), so a rate limit
cannot let one input run ahead of the other in event time. The price: both sides of the join scan that source, so every
record is fetched and parsed twice, and the query's ``numInputRows`` counts it twice.

Example::

    pairs = modern.workloads.join.build(spark, source)  # source has inputs "impressions" and "clicks"
"""

from __future__ import annotations

from typing import Any

from kit.semantics import JOIN_WITHIN_MS as WITHIN_MS
from kit.semantics import WATERMARK_DELAY_MS

__all__ = ["build"]


# --8<-- [start:join]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    events = source.events_together("impressions", "clicks")  # one source: the inputs advance together
    delay = f"{WATERMARK_DELAY_MS} milliseconds"
    # Filtered before the watermark: the impressions side's event-time clock is its views' (Spark pushes
    # such a filter below withWatermark anyway, since it does not read the event-time column).
    impressions = (
        events.where((F.col("topic") == source.topics["impressions"]) & (F.col("event_type") == "view"))
        .select(
            F.col("event_id").alias("impression_id"),
            "ad_id",
            "user",
            F.col("event_time").alias("impression_at"),
            F.col("kafka_ts").alias("impression_kafka_ts"),
            *_input_columns("impression"),
        )
        .withWatermark("impression_at", delay)
    )
    clicks = (
        events.where((F.col("topic") == source.topics["clicks"]) & (F.col("event_type") == "click"))
        .select(
            F.col("event_id").alias("click_id"),
            F.col("ad_id").alias("click_ad_id"),
            F.col("user").alias("click_user"),
            F.col("event_time").alias("click_at"),
            F.col("kafka_ts").alias("click_kafka_ts"),
            *_input_columns("click"),
        )
        .withWatermark("click_at", delay)
    )
    pairs = impressions.join(
        clicks,
        F.expr(
            f"""ad_id = click_ad_id AND user = click_user
                AND click_at BETWEEN impression_at AND impression_at + INTERVAL {WITHIN_MS} MILLISECONDS"""
        ),
    )
    return pairs.select(
        "impression_id",
        "click_id",
        "ad_id",
        "user",
        F.unix_millis("impression_at").alias("impression_time"),
        F.unix_millis("click_at").alias("click_time"),
        F.unix_millis(F.greatest("impression_kafka_ts", "click_kafka_ts")).alias("last_input_ts"),
        *(f"{side}_{column}" for side in ("impression", "click") for column in ("topic", "partition", "offset")),
    )


def _input_columns(side: str) -> list[Any]:
    # Each pair's two input records, for a rewound cutover's filter (StateCarry.row_inputs); the runner keeps only
    # the spec's columns after it, and Spark prunes these from the join (and its state) when nothing reads them.
    from pyspark.sql import functions as F  # noqa: N812

    return [F.col(column).alias(f"{side}_{column}") for column in ("topic", "partition", "offset")]
# --8<-- [end:join]
