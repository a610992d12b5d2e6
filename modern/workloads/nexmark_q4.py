"""``nexmark_q4`` (Nexmark average price for a category) in Structured Streaming: winning bids, then a windowed mean.

Auctions and bids from one Kafka source (:meth:`modern.workloads.Source.nexmark_together`) in one shape, unioned,
with one 5 s watermark on ``dateTime``. Spark 4's ``transformWithStateInPandas`` keeps, per auction
(:class:`WinningBids`), the auction with its best price so far and the bids that arrived before it; an event-time
timer at ``expires`` closes the auction and emits its winning price with ``close_time`` as the output's event time
(``eventTimeColumnName``), so the chained ``groupBy(window(close_time, 10 s, 5 s), category)`` (append mode) emits
each window's count, sum and mean once, when the watermark passes its end (see ``kit.workloads.nexmark_q4``). It
needs the RocksDB state store provider (the kit's :mod:`kit.spark` default).

Example (``source`` a :class:`modern.workloads.Source` over a Nexmark stream)::

    rows = build(spark, source)   # category, window_start, auctions, total_price, average_price, last_input_ts
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from kit.semantics import NEXMARK_Q4_WINDOW, WATERMARK_DELAY_MS

__all__ = ["WinningBids", "build"]

SIZE_MS, SLIDE_MS = NEXMARK_Q4_WINDOW


# --8<-- [start:nexmark_q4]
class WinningBids(StatefulProcessor):
    """One auction (the grouping key): its best price, closed by an event-time timer when the watermark reaches it.

    The bids that arrive before their auction wait for it in a ``ListState`` until the watermark passes them. Each
    state call is a round trip to the JVM's state server, so a call reads and writes only what it needs: the
    auction, once; the waiting bids only when the auction arrives (bids on an open auction never wait). A timer is
    registered when its deadline appears and never deleted: one that finds nothing to do when it fires (a waiting
    bid's, after the auction came) does nothing.
    """

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.auction = handle.getValueState(
            "auction", "date_time long, expires long, reserve long, category long, best long, kafka_ts long")
        self.waiting = handle.getListState("waiting", "date_time long, price long, kafka_ts long")

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        stored = self.auction.get()
        auction = list(stored) if stored is not None else None
        arrived, bids = None, []
        for batch in rows:
            # int(): a column that is null on the other kind's rows (expires on a bid's) arrives as floats.
            for row in batch.itertuples(index=False):
                if row.is_auction:
                    arrived = [int(row.date_time), int(row.expires), int(row.reserve), int(row.category), -1,
                               int(row.kafka_ts)]
                else:
                    bids.append((int(row.date_time), int(row.price), int(row.kafka_ts)))
        if arrived is not None:
            auction = arrived
            waited = [tuple(bid) for bid in self.waiting.get()]
            if waited:
                self.waiting.clear()
            bids = waited + bids
            # Spark fires an event-time timer when it is *before* the watermark: an auction closes when the
            # watermark reaches expires, hence the millisecond less.
            self.handle.registerTimer(auction[1] - 1)
        elif auction is None:
            if bids:  # no auction yet: the bids wait, until the watermark passes the first of them at the latest
                self.waiting.appendList(bids)
                self.handle.registerTimer(min(bid[0] for bid in bids))
            return iter([])
        offered = auction
        for bid in bids:
            offered = _offer(offered, *bid)
        if arrived is not None or offered != auction:
            self.auction.update(tuple(offered))
        return iter([])

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        # A timer fires once the watermark is past it; the watermark given may be the older one (see Sessionizer).
        watermark = max(timerValues.getCurrentWatermarkInMs(), expiredTimerInfo.getExpiryTimeInMs() + 1)
        auction = self.auction.get()
        if auction is not None:
            date_time, expires, reserve, category, best, kafka_ts = auction
            if expires > watermark:  # still open: the timer of a bid that waited for it
                return iter([])
            self.auction.clear()
            if best < 0:  # closed without a winner
                return iter([])
            close_time = pd.Timestamp(expires, unit="ms", tz="UTC")
            return iter([pd.DataFrame({"category": [category], "close_time": [close_time], "price": [best],
                                       "kafka_ts": [kafka_ts]})])
        # A waiting bid behind the watermark can wait no longer: an auction it could win would now be too late.
        waiting = [tuple(bid) for bid in self.waiting.get()]
        kept = [bid for bid in waiting if bid[0] >= watermark]
        if len(kept) < len(waiting):
            if kept:
                self.waiting.put(kept)
                self.handle.registerTimer(min(bid[0] for bid in kept))
            else:
                self.waiting.clear()
        return iter([])


def _offer(auction: list, date_time: int, price: int, kafka_ts: int) -> list:
    """A bid on ``auction``: the best price if it is in the auction's time and at least the reserve."""
    start, expires, reserve, category, best, last_ts = auction
    if start <= date_time < expires and price >= reserve:
        return [start, expires, reserve, category, max(best, price), max(last_ts, kafka_ts)]
    return auction


def build(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    auctions, bids = source.nexmark_together("auctions", "bids")
    none = F.lit(None).cast("long")
    events = auctions.select(
        F.col("id").alias("auction"), F.lit(True).alias("is_auction"), F.col("dateTime").alias("date_time"),
        "expires", "reserve", "category", none.alias("price"), F.unix_millis("kafka_ts").alias("kafka_ts"),
        "event_time",
    ).unionByName(bids.select(
        "auction", F.lit(False).alias("is_auction"), F.col("dateTime").alias("date_time"), none.alias("expires"),
        none.alias("reserve"), none.alias("category"), "price", F.unix_millis("kafka_ts").alias("kafka_ts"),
        "event_time",
    ))
    winners = events.withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds").groupBy(
        "auction").transformWithStateInPandas(
        WinningBids(), "category long, close_time timestamp, price long, kafka_ts long", outputMode="Append",
        timeMode="EventTime", eventTimeColumnName="close_time",
    )
    windows = winners.groupBy(
        F.window("close_time", f"{SIZE_MS} milliseconds", f"{SLIDE_MS} milliseconds"), "category"
    ).agg(F.count("*").alias("auctions"), F.sum("price").alias("total_price"), F.max("kafka_ts").alias("last_ts"))
    return windows.select(
        "category", F.unix_millis("window.start").alias("window_start"), "auctions", "total_price",
        (F.col("total_price") / F.col("auctions")).alias("average_price"), F.col("last_ts").alias("last_input_ts"),
    )
# --8<-- [end:nexmark_q4]
