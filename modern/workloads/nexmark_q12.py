"""``nexmark_q12`` (Nexmark processing-time windows) in Structured Streaming: bids per bidder per 10 s of batches.

``current_timestamp()`` is a micro-batch's batch timestamp (one value for every row of the batch, kept in the
offset log, so a batch run again after a restart gets it again): ``groupBy(bidder, window(p_time, 10 s))``,
``count``, with a 0 s watermark on ``p_time`` (no bid is ever behind it; a window's state is dropped once a later
batch passes its end), in update mode: every micro-batch emits the count so far of each window it changed.
Windows start on multiples of 10 s from the epoch. See ``kit.workloads.nexmark_q12`` for what is compared and
why append mode would not do.

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    rows = build(spark, source)   # bidder, window_start, bid_count, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q12_WINDOW_MS as WINDOW_MS

__all__ = ["build"]


# --8<-- [start:nexmark_q12]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return (
        source.nexmark("bids")
        .withColumn("p_time", F.current_timestamp())
        .withWatermark("p_time", "0 seconds")
        .groupBy("bidder", F.window("p_time", f"{WINDOW_MS} milliseconds"))
        .agg(F.count("*").alias("bid_count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts"))
        .select("bidder", F.unix_millis("window.start").alias("window_start"), "bid_count", "last_input_ts")
    )
# --8<-- [end:nexmark_q12]
