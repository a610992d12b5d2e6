"""``nexmark_q1`` (Nexmark currency conversion) in Structured Streaming: every bid, its price × 0.908 in doubles.

The rate is a double literal and the price cast to double before the product: Spark's ``0.908`` in SQL text would
be a decimal, and the kit compares the IEEE double product on every side (see ``kit.workloads.nexmark_q1``).

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    bids = build(spark, source)   # auction, bidder, dateTime, price, extra, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_DOLLARS_TO_EUROS

__all__ = ["build"]


# --8<-- [start:nexmark_q1]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    euros = F.col("price").cast("double") * F.lit(NEXMARK_DOLLARS_TO_EUROS)
    return source.nexmark("bids").select(
        "auction", "bidder", "dateTime", euros.alias("price"), "extra",
        F.unix_millis("kafka_ts").alias("last_input_ts"),
    )
# --8<-- [end:nexmark_q1]
