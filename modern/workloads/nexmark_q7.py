"""``nexmark_q7`` (Nexmark highest bid) in Structured Streaming: the highest bid per 10 s event-time window.

``withWatermark`` (5 s, on the bids: persons and auctions never reach it), ``groupBy(window(...))`` and
``max(struct(price, dateTime, auction, bidder, extra))``: one bid per window, the highest price, ties broken by
the other fields (see ``kit.workloads.nexmark_q7`` for the differences from the references). Append mode: each
window once, when the watermark passes its end.

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    top = build(spark, source)   # window_start, auction, bidder, price, dateTime, extra, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q7_WINDOW_MS as WINDOW_MS
from kit.semantics import WATERMARK_DELAY_MS

__all__ = ["build"]


# --8<-- [start:nexmark_q7]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    ranked = F.struct("price", "dateTime", "auction", "bidder", "extra")
    return (
        source.nexmark("bids")
        .withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
        .groupBy(F.window("event_time", f"{WINDOW_MS} milliseconds"))
        .agg(F.max(ranked).alias("top"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts"))
        .select(
            F.unix_millis("window.start").alias("window_start"),
            "top.auction", "top.bidder", "top.price", "top.dateTime", "top.extra", "last_input_ts",
        )
    )
# --8<-- [end:nexmark_q7]
