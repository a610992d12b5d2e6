"""``running_counts`` in Structured Streaming: ``groupBy("key")`` aggregation in update mode.

Each micro-batch emits the keys it changed with their new count and the newest Kafka timestamp behind it.
"""

from __future__ import annotations

from typing import Any


# --8<-- [start:running_counts]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return source.events().groupBy("key").agg(
        F.count("*").alias("count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts")
    )
# --8<-- [end:running_counts]
