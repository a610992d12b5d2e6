"""``running_counts``: how many valid events each ``key`` has had, over all time.

Legacy: ``updateStateByKey``. Modern: ``groupBy("key").count()`` in update mode. No event time is involved,
so late, too-late and duplicate records all count; only malformed records are left out (dead letters).
Compared as the final count per key.
"""

from __future__ import annotations

import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import OracleResult, StateCarry, WorkloadSpec, parse_dataset, sorted_rows


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Count the valid events per key; every malformed record is a dead letter, nothing is late."""
    events, rejects = parse_dataset(frame)
    rows = events.groupby("key").size().rename("count").reset_index()
    return OracleResult(sorted_rows(SPEC, rows), rejects, pd.DataFrame({"seq": pd.Series(dtype="int64")}))


def trajectory(frame: pd.DataFrame, dataset: DatasetSpec) -> pd.DataFrame:
    """Every count each key passes through, in replay order, with the ``seq`` of the record that made it."""
    events, _ = parse_dataset(frame)
    return pd.DataFrame({"key": events["key"], "count": events.groupby("key").cumcount() + 1, "seq": events["seq"]})


SPEC = WorkloadSpec(
    name="running_counts",
    summary="count per key over all time (updateStateByKey vs groupBy().count() in update mode)",
    inputs=("events",),
    key_columns=("key",),
    value_columns=("count",),
    output_mode="update",
    granularity="final count per key",
    watermark_delay_ms=None,
    oracle=oracle,
    trajectory=trajectory,
    carry=StateCarry(
        "totals", sum_columns=("count",), counts_events=True,
        note="the legacy job's last count per key seeds the modern query's state store, which counts on from it",
    ),
)
