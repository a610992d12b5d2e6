"""``nexmark_q8`` (Nexmark monitor new users) in Structured Streaming: a stream-stream join on person and window.

Persons and auctions from one Kafka source (:meth:`modern.workloads.Source.nexmark_together`), each with a 5 s
watermark, each replaced by its 10 s tumbling ``window(event_time)`` (the window carries the watermark: it is the
only event-time column left on each side), joined on ``id = seller`` and equal windows. The window equality is a
join key with a watermark, so Spark evicts a window's state once the query's watermark (the smaller of the two
inputs', Spark's default policy) passes its end, and drops an input row whose window has already ended by it.
Append mode: each pair once, in the micro-batch where its second row arrives (see ``kit.workloads.nexmark_q8``).

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    rows = build(spark, source)   # person_id, auction, name, reserve, window_start, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q8_WINDOW_MS as WINDOW_MS
from kit.semantics import WATERMARK_DELAY_MS

__all__ = ["build"]


# --8<-- [start:nexmark_q8]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    persons, auctions = source.nexmark_together("persons", "auctions")
    delay, size = f"{WATERMARK_DELAY_MS} milliseconds", f"{WINDOW_MS} milliseconds"
    people = persons.withWatermark("event_time", delay).select(
        F.col("id").alias("person_id"), "name", F.window("event_time", size).alias("person_window"),
        F.col("kafka_ts").alias("person_ts"),
    )
    sales = auctions.withWatermark("event_time", delay).select(
        F.col("id").alias("auction"), "seller", "reserve", F.window("event_time", size).alias("auction_window"),
        F.col("kafka_ts").alias("auction_ts"),
    )
    pairs = people.join(
        sales, (F.col("person_id") == F.col("seller")) & (F.col("person_window") == F.col("auction_window"))
    )
    return pairs.select(
        "person_id", "auction", "name", "reserve", F.unix_millis("person_window.start").alias("window_start"),
        F.unix_millis(F.greatest("person_ts", "auction_ts")).alias("last_input_ts"),
    )
# --8<-- [end:nexmark_q8]
