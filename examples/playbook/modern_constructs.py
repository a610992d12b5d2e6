"""The playbook's data-processing constructs in Structured Streaming, one small function each (Spark 4.3).

Each function has the name of its DStream counterpart in ``examples/playbook/legacy_constructs.py`` and its oracle in
``examples/playbook/oracles.py``. Most take a streaming DataFrame of events (``side``, ``key``, ``value`` and
``event_time``, a timestamp) and return a streaming DataFrame. A DStream construct whose result is per batch
has two counterparts: a running result kept in state (``running_totals``), or the batch DataFrame inside
``foreachBatch``; :func:`reduce_by_key`, :func:`count_by_value` and :func:`top_per_batch` take and return a
micro-batch's DataFrame and are meant for ``foreachBatch``. ``tests/test_constructs.py`` holds each to the same
rows as the DStream side and the oracle, and ``docs/playbook.md`` ("Constructs, one by one") shows the code
between the ``--8<--`` markers.

Example::

    counts = count_by_window(events)
    query = counts.writeStream.outputMode("append").format("console").start()
    per_batch = events.writeStream.foreachBatch(
        lambda batch, batch_id: reduce_by_key(batch).show()).start()
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from examples.playbook.oracles import BATCH_S, SLIDE_S, TOP_N, WATERMARK_DELAY_S, WINDOW_S, load_regions

__all__ = [
    "cogroup",
    "cogroup_in_pandas",
    "count_by_value",
    "count_by_value_and_window",
    "count_by_window",
    "full_outer_join",
    "group_by_key_and_window",
    "left_outer_join",
    "map_partitions",
    "reduce_by_key",
    "reduce_by_key_and_window",
    "reduce_by_window",
    "running_totals",
    "top_per_batch",
]

_DELAY = f"{WATERMARK_DELAY_S} seconds"
_WINDOW = (f"{WINDOW_S} seconds", f"{SLIDE_S} seconds")


# --8<-- [start:map_partitions]
def _enrich(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    regions = load_regions()  # once per partition, as in mapPartitions
    for batch in batches:  # Arrow batches of the partition, as pandas DataFrames
        yield batch.assign(region=batch["key"].map(regions))


def map_partitions(events: Any) -> Any:
    """``(event_time, key, value, region)`` per event, the lookup loaded once per partition."""
    from pyspark.sql import functions as F  # noqa: N812

    rows = events.select(F.unix_millis("event_time").alias("event_time"), "key", "value")
    return rows.mapInPandas(_enrich, "event_time long, key string, value long, region string")
# --8<-- [end:map_partitions]


# --8<-- [start:reduce_by_key]
def reduce_by_key(batch: Any) -> Any:
    """``(key, total)`` of one micro-batch: call it inside ``foreachBatch``."""
    from pyspark.sql import functions as F  # noqa: N812

    return batch.groupBy("key").agg(F.sum("value").alias("total"))


def count_by_value(batch: Any) -> Any:
    """``(key, count)`` of one micro-batch: call it inside ``foreachBatch``."""
    return batch.groupBy("key").count()
# --8<-- [end:reduce_by_key]


# --8<-- [start:running_totals]
def running_totals(events: Any) -> Any:
    """``(key, total)`` over the whole stream, kept in state; update mode emits the keys a batch changed."""
    from pyspark.sql import functions as F  # noqa: N812

    return events.groupBy("key").agg(F.sum("value").alias("total"))
# --8<-- [end:running_totals]


# --8<-- [start:count_by_window]
def count_by_window(events: Any) -> Any:
    """``(window_end, count)``: events per event-time window, emitted once the watermark passes its end."""
    from pyspark.sql import functions as F  # noqa: N812

    windows = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", *_WINDOW)).count()
    return windows.select(F.unix_millis("window.end").alias("window_end"), "count")


def count_by_value_and_window(events: Any) -> Any:
    """``(window_end, key, count)``: events per key and event-time window."""
    from pyspark.sql import functions as F  # noqa: N812

    windows = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", *_WINDOW), "key").count()
    return windows.select(F.unix_millis("window.end").alias("window_end"), "key", "count")
# --8<-- [end:count_by_window]


# --8<-- [start:reduce_by_window]
def reduce_by_window(events: Any) -> Any:
    """``(window_end, total)``: the sum of the values per event-time window."""
    from pyspark.sql import functions as F  # noqa: N812

    windows = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", *_WINDOW))
    return windows.agg(F.sum("value").alias("total")).select(F.unix_millis("window.end").alias("window_end"), "total")


def group_by_key_and_window(events: Any) -> Any:
    """``(window_end, key, values)``: each key's values per event-time window, sorted."""
    from pyspark.sql import functions as F  # noqa: N812

    windows = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", *_WINDOW), "key")
    values = windows.agg(F.array_sort(F.collect_list("value")).alias("values"))
    return values.select(F.unix_millis("window.end").alias("window_end"), "key", "values")
# --8<-- [end:reduce_by_window]


# --8<-- [start:reduce_by_key_and_window]
def reduce_by_key_and_window(events: Any) -> Any:
    """``(window_end, key, total)``: values summed per key and event-time window; no inverse function."""
    from pyspark.sql import functions as F  # noqa: N812

    windows = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", *_WINDOW), "key")
    totals = windows.agg(F.sum("value").alias("total"))
    return totals.select(F.unix_millis("window.end").alias("window_end"), "key", "total")
# --8<-- [end:reduce_by_key_and_window]


# --8<-- [start:outer_joins]
def _side(events: Any, side: str) -> Any:
    # The window is the side's only event-time column: a stream-stream join takes one per input.
    from pyspark.sql import functions as F  # noqa: N812

    return events.where(F.col("side") == side).withWatermark("event_time", _DELAY).select(
        F.window("event_time", f"{BATCH_S} second").alias(f"{side}_window"),
        F.col("key").alias(f"{side}_key"),
        F.col("value").alias(f"{side}_value"),
    )


def _join(events: Any, how: str) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    left, right = _side(events, "left"), _side(events, "right")
    same = (F.col("left_key") == F.col("right_key")) & (F.col("left_window") == F.col("right_window"))
    return left.join(right, same, how).select(
        F.unix_millis(F.coalesce("left_window.start", "right_window.start")).alias("window_start"),
        F.coalesce("left_key", "right_key").alias("key"),
        "left_value",
        "right_value",
    )


def left_outer_join(events: Any) -> Any:
    """``(window_start, key, left_value, right_value)``; an unmatched left row once the watermark passes it."""
    return _join(events, "left_outer")


def full_outer_join(events: Any) -> Any:
    """As :func:`left_outer_join`, with the unmatched right rows too."""
    return _join(events, "full_outer")


def cogroup(events: Any) -> Any:
    """``(window_start, key, left_values, right_values)``: one aggregation over both sides, sorted arrays."""
    from pyspark.sql import functions as F  # noqa: N812

    def values(side: str) -> Any:
        return F.array_sort(F.collect_list(F.when(F.col("side") == side, F.col("value")))).alias(f"{side}_values")

    groups = events.withWatermark("event_time", _DELAY).groupBy(F.window("event_time", f"{BATCH_S} second"), "key")
    return groups.agg(values("left"), values("right")).select(
        F.unix_millis("window.start").alias("window_start"), "key", "left_values", "right_values"
    )
# --8<-- [end:outer_joins]


# --8<-- [start:cogroup_in_pandas]
def _values(key: tuple, left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "key": [key[0]],
        "left_values": [sorted(left["value"].tolist())],
        "right_values": [sorted(right["value"].tolist())],
    })


def cogroup_in_pandas(events: Any) -> Any:
    """``(key, left_values, right_values)`` of each micro-batch: no state, the batch's groups only."""
    from pyspark.sql import functions as F  # noqa: N812

    left = events.where(F.col("side") == "left").groupBy("key")
    right = events.where(F.col("side") == "right").groupBy("key")
    return left.cogroup(right).applyInPandas(
        _values, "key string, left_values array<long>, right_values array<long>"
    )
# --8<-- [end:cogroup_in_pandas]


# --8<-- [start:transform]
def top_per_batch(batch: Any) -> Any:
    """``(rank, key, value)``: one micro-batch's ``TOP_N`` largest values; call it inside ``foreachBatch``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    order = Window.orderBy(F.desc("value"), "event_time", "key")
    ranked = batch.withColumn("rank", F.row_number().over(order))
    return ranked.where(F.col("rank") <= TOP_N).select("rank", "key", "value")
# --8<-- [end:transform]
