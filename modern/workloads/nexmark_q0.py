"""``nexmark_q0`` (Nexmark pass-through) in Structured Streaming: every bid, its five fields.

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    bids = build(spark, source)   # auction, bidder, price, dateTime, extra, last_input_ts
"""

from __future__ import annotations

from typing import Any

__all__ = ["build"]


# --8<-- [start:nexmark_q0]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return source.nexmark("bids").select(
        "auction", "bidder", "price", "dateTime", "extra", F.unix_millis("kafka_ts").alias("last_input_ts")
    )
# --8<-- [end:nexmark_q0]
