"""``nexmark_q2`` (Nexmark selection) in Structured Streaming: auction and price of the bids on every 123rd auction.

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    bids = build(spark, source)   # auction, price, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_AUCTION_SKIP

__all__ = ["build"]


# --8<-- [start:nexmark_q2]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return source.nexmark("bids").where(F.col("auction") % NEXMARK_AUCTION_SKIP == 0).select(
        "auction", "price", F.unix_millis("kafka_ts").alias("last_input_ts")
    )
# --8<-- [end:nexmark_q2]
