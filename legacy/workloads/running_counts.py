"""``running_counts`` on DStreams: ``updateStateByKey`` keeps the count of each key across batches.

Each batch emits only the keys it changed (Structured Streaming's update mode), not the whole state, with
the newest Kafka timestamp behind each count as ``last_input_ts``. The batch's records are first combined
per key with ``reduceByKey`` (a map-side combine, as idiomatic DStream code does), so the state update
shuffles one pair per key and partition instead of one per record; ``updateStateByKey`` then finds the
batch already partitioned its way and does not shuffle it again.
"""

from __future__ import annotations

from typing import Any


# --8<-- [start:running_counts]
def _combine(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], max(a[1], b[1])


def _add(new: list[tuple[int, int]], state: tuple[int, int, bool] | None) -> tuple[int, int, bool]:
    count, last_ts = (state[0], state[1]) if state else (0, -1)
    for n, ts in new:
        count, last_ts = count + n, max(last_ts, ts)
    return count, last_ts, bool(new)  # the flag: changed in this batch


def build(ssc: Any, source: Any) -> Any:
    batch = source.events().map(lambda e: (e["key"], (1, e["kafka_ts"]))).reduceByKey(_combine)
    counts = batch.updateStateByKey(_add)
    return counts.filter(lambda kv: kv[1][2]).map(lambda kv: (kv[0], kv[1][0], kv[1][1]))
# --8<-- [end:running_counts]
