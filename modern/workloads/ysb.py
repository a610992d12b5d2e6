"""``ysb`` (Yahoo Streaming Benchmark) in Structured Streaming: a stream-static join and a window count.

Views are joined to the static ``(ad_id, campaign_id)`` table (a small local DataFrame, broadcast to every task),
then counted per campaign in 10 s event-time windows with a 5 s watermark, in append mode. The watermark is
set after the filter and the join, so it comes from the joined views only, as on the legacy side.

Example (``source`` a :class:`modern.workloads.Source`)::

    counts = build(spark, source)   # campaign_id, window_start, count, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.dataset import ad_campaigns
from kit.semantics import WATERMARK_DELAY_MS
from kit.semantics import YSB_WINDOW_MS as WINDOW_MS

__all__ = ["build"]


# --8<-- [start:ysb]
def build(spark: Any, source: Any) -> Any:
    import pandas as pd
    from pyspark.sql import functions as F  # noqa: N812

    # From pandas (through Arrow) the table is a local relation, broadcast from the driver. From a list of
    # tuples it would be an RDD of Python rows that every micro-batch recomputes with a Python job.
    campaigns = spark.createDataFrame(
        pd.DataFrame(sorted(ad_campaigns(source.dataset).items()), columns=["ad_id", "campaign_id"])
    )
    views = source.events().where(F.col("event_type") == "view").join(F.broadcast(campaigns), "ad_id")
    return (
        views.withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
        .groupBy(F.window("event_time", f"{WINDOW_MS} milliseconds"), "campaign_id")
        .agg(F.count("*").alias("count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts"))
        .select("campaign_id", F.unix_millis("window.start").alias("window_start"), "count", "last_input_ts")
    )
# --8<-- [end:ysb]
