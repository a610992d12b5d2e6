"""``nexmark_q11`` (Nexmark user sessions) in Structured Streaming: bids per bidder per session, 10 s gap.

``withWatermark`` (5 s, on the bids), ``groupBy(bidder, session_window(event_time, 10 s))``, ``count``, append
mode: Spark merges overlapping sessions ``[bid, bid + gap)``, drops a bid when the session it would open already
ends at or behind the watermark (``dateTime + gap <= watermark``), and emits each session once, when the watermark
reaches its end (see ``kit.workloads.nexmark_q11``).

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    rows = build(spark, source)   # bidder, session_start, session_end, bid_count, last_input_ts
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q11_GAP_MS as GAP_MS
from kit.semantics import WATERMARK_DELAY_MS

__all__ = ["build"]


# --8<-- [start:nexmark_q11]
def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    sessions = (
        source.nexmark("bids")
        .withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
        .groupBy("bidder", F.session_window("event_time", f"{GAP_MS} milliseconds").alias("session"))
        .agg(F.count("*").alias("bid_count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts"))
    )
    return sessions.select(
        "bidder", F.unix_millis("session.start").alias("session_start"),
        F.unix_millis("session.end").alias("session_end"), "bid_count", "last_input_ts",
    )
# --8<-- [end:nexmark_q11]
