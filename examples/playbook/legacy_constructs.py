"""The playbook's data-processing constructs on DStreams, one small function each (Spark 2.4 semantics).

Each function takes a DStream of event dicts (``side``, ``key``, ``value``, ``event_time`` in epoch ms; see
:func:`examples.playbook.oracles.sample`) and returns the DStream the construct makes, as a Spark 2.x job
wrote it. Its counterpart of the same name is in ``modern_constructs.py`` beside it and its oracle in
``oracles.py``; ``tests/test_constructs.py`` holds the three to the same rows, and ``docs/playbook.md``
("Constructs, one by one") shows the code between the ``--8<--`` markers.

The windowed functions with an inverse function need ``ssc.checkpoint(dir)``. They take their durations from
:mod:`examples.playbook.oracles`: a window of ``WINDOW_S`` seconds sliding by ``SLIDE_S``, on a ``BATCH_S``
batch interval.

Example::

    from examples.playbook.oracles import by_second, sample
    rdds = [ssc.sparkContext.parallelize(batch) for batch in by_second(sample())]
    counts = count_by_window(ssc.queueStream(rdds, oneAtATime=True))
    counts.pprint()
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from typing import Any

from examples.playbook.oracles import SLIDE_S, TOP_N, WINDOW_S, load_regions

__all__ = [
    "cogroup",
    "count_by_value",
    "count_by_value_and_window",
    "count_by_window",
    "full_outer_join",
    "group_by_key_and_window",
    "left_outer_join",
    "map_partitions",
    "reduce_by_key",
    "reduce_by_key_and_window",
    "reduce_by_key_and_window_unfiltered",
    "reduce_by_key_and_window_without_inverse",
    "reduce_by_window",
    "running_totals",
    "top_per_batch",
]


# --8<-- [start:map_partitions]
def _enrich(events: Iterable[dict]) -> Iterator[tuple]:
    regions = load_regions()  # once per partition: a connection, a model, a lookup table
    for e in events:
        yield e["event_time"], e["key"], e["value"], regions[e["key"]]


def map_partitions(events: Any) -> Any:
    """``(event_time, key, value, region)`` per event, the lookup loaded once per partition."""
    return events.mapPartitions(_enrich)
# --8<-- [end:map_partitions]


# --8<-- [start:reduce_by_key]
def reduce_by_key(events: Any) -> Any:
    """``(key, total)`` per batch: the batch's values summed by key."""
    return events.map(lambda e: (e["key"], e["value"])).reduceByKey(operator.add)


def count_by_value(events: Any) -> Any:
    """``(key, count)`` per batch: how many of the batch's events have each key."""
    return events.map(lambda e: e["key"]).countByValue()
# --8<-- [end:reduce_by_key]


# --8<-- [start:running_totals]
def _total(new: list[int], total: int | None) -> int:
    return sum(new, total or 0)


def running_totals(events: Any) -> Any:
    """``(key, total)`` over the whole stream; every batch re-emits every key's total."""
    return reduce_by_key(events).updateStateByKey(_total)
# --8<-- [end:running_totals]


# --8<-- [start:count_by_window]
def count_by_window(events: Any) -> Any:
    """One element per window: how many events arrived in the last ``WINDOW_S`` seconds of batches."""
    return events.countByWindow(WINDOW_S, SLIDE_S)  # needs ssc.checkpoint: an inverse reduce inside


def count_by_value_and_window(events: Any) -> Any:
    """``(key, count)`` per window, for the keys with a count above 0."""
    return events.map(lambda e: e["key"]).countByValueAndWindow(WINDOW_S, SLIDE_S)  # needs ssc.checkpoint
# --8<-- [end:count_by_window]


# --8<-- [start:reduce_by_window]
def reduce_by_window(events: Any) -> Any:
    """One element per window: the sum of the values that arrived in it."""
    return events.map(lambda e: e["value"]).reduceByWindow(operator.add, operator.sub, WINDOW_S, SLIDE_S)


def group_by_key_and_window(events: Any) -> Any:
    """``(key, values)`` per window, the values sorted."""
    pairs = events.map(lambda e: (e["key"], e["value"]))
    return pairs.groupByKeyAndWindow(WINDOW_S, SLIDE_S).mapValues(sorted)
# --8<-- [end:reduce_by_window]


# --8<-- [start:reduce_by_key_and_window]
def reduce_by_key_and_window(events: Any) -> Any:
    """``(key, total)`` per window: the incremental form (add what enters, subtract what leaves)."""
    pairs = events.map(lambda e: (e["key"], e["value"]))
    return pairs.reduceByKeyAndWindow(
        operator.add, operator.sub, WINDOW_S, SLIDE_S, filterFunc=lambda kv: kv[1] != 0
    )


def reduce_by_key_and_window_without_inverse(events: Any) -> Any:
    """``(key, total)`` per window, re-reduced from the window's batches at every slide."""
    pairs = events.map(lambda e: (e["key"], e["value"]))
    return pairs.reduceByKeyAndWindow(operator.add, None, WINDOW_S, SLIDE_S)
# --8<-- [end:reduce_by_key_and_window]


# --8<-- [start:reduce_by_key_and_window.unfiltered]
def reduce_by_key_and_window_unfiltered(events: Any) -> Any:
    """As :func:`reduce_by_key_and_window` without ``filterFunc``: keys that left the window stay, at 0."""
    pairs = events.map(lambda e: (e["key"], e["value"]))
    return pairs.reduceByKeyAndWindow(operator.add, operator.sub, WINDOW_S, SLIDE_S)
# --8<-- [end:reduce_by_key_and_window.unfiltered]


# --8<-- [start:outer_joins]
def _sides(events: Any) -> tuple[Any, Any]:
    left = events.filter(lambda e: e["side"] == "left").map(lambda e: (e["key"], e["value"]))
    right = events.filter(lambda e: e["side"] == "right").map(lambda e: (e["key"], e["value"]))
    return left, right


def left_outer_join(events: Any) -> Any:
    """``(key, (left_value, right_value or None))``: the two sides of the same batch, joined by key."""
    left, right = _sides(events)
    return left.leftOuterJoin(right)


def full_outer_join(events: Any) -> Any:
    """``(key, (left_value or None, right_value or None))``: as :func:`left_outer_join`, both sides kept."""
    left, right = _sides(events)
    return left.fullOuterJoin(right)


def cogroup(events: Any) -> Any:
    """``(key, (left_values, right_values))``: both sides' values of the batch by key, as sorted lists."""
    left, right = _sides(events)
    return left.cogroup(right).mapValues(lambda lr: (sorted(lr[0]), sorted(lr[1])))
# --8<-- [end:outer_joins]


# --8<-- [start:transform]
def _top(rdd: Any) -> Any:
    # Any RDD code, run on the driver for every batch: here a global sort and zipWithIndex.
    ranked = rdd.sortBy(lambda e: (-e["value"], e["event_time"], e["key"])).zipWithIndex()
    return ranked.filter(lambda ei: ei[1] < TOP_N).map(lambda ei: (ei[1] + 1, ei[0]["key"], ei[0]["value"]))


def top_per_batch(events: Any) -> Any:
    """``(rank, key, value)``: the batch's ``TOP_N`` largest values, rank 1 first."""
    return events.transform(_top)
# --8<-- [end:transform]
