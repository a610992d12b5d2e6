"""``nexmark_q3`` (Nexmark local item suggestion) in Structured Streaming: a stream-stream join without watermarks.

Persons of OR, ID or CA joined with the auctions of category 10 on ``seller = id``, as q3.sql's regular join (see
``kit.workloads.nexmark_q3``). Without watermarks Structured Streaming keeps every row of both sides in the join
state for ever (it cannot evict what a later row might still match), and emits each pair once, in append mode, in
the micro-batch where its second row arrives. Both tables come from one Kafka source
(:meth:`modern.workloads.Source.nexmark_together`).

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    rows = build(spark, source)   # auction, name, city, state, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q3_CATEGORY as CATEGORY
from kit.semantics import NEXMARK_Q3_STATES as STATES

__all__ = ["build"]


# --8<-- [start:nexmark_q3]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    persons, auctions = source.nexmark_together("persons", "auctions")
    local = persons.where(F.col("state").isin(*STATES)).select(
        F.col("id").alias("person_id"), "name", "city", "state", F.col("kafka_ts").alias("person_ts")
    )
    chosen = auctions.where(F.col("category") == CATEGORY).select(
        F.col("id").alias("auction"), "seller", F.col("kafka_ts").alias("auction_ts")
    )
    return chosen.join(local, F.col("seller") == F.col("person_id")).select(
        "auction", "name", "city", "state",
        F.unix_millis(F.greatest("person_ts", "auction_ts")).alias("last_input_ts"),
    )
# --8<-- [end:nexmark_q3]
