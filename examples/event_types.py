"""A job of your own, migrated and held to an oracle: events per ``(user, event_type)``, over all time.

This module is everything ``dmk compare`` needs for a job that is not one of the kit's workloads:

- ``SPEC``: the contract (input, key and value columns, output mode) and where the three implementations are;
- ``legacy_counts(ssc, source)``: the DStream job, returning a DStream of ``(user, event_type, count,
  last_input_ts)`` tuples;
- ``modern_counts(spark, source)``: the Structured Streaming job, returning a DataFrame of those columns;
- ``oracle(frame, dataset_spec)``: the exact answer, in pandas.

Run it (from the repository root, so that ``examples`` is importable)::

    dmk compare examples.event_types:SPEC --records 20000

or test it in CI with the pytest plugin (``tests/test_compare.py`` does)::

    def test_event_types(assert_equivalent):
        assert_equivalent(legacy_counts, modern_counts, "messy", spec=SPEC)
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import OracleResult, StateCarry, Variant, WorkloadSpec, parse_dataset, sorted_rows


# --8<-- [start:legacy]
def _add(new: list[tuple[int, int]], state: tuple[int, int, bool] | None) -> tuple[int, int, bool]:
    count, last_ts = (state[0], state[1]) if state else (0, -1)
    for n, ts in new:
        count, last_ts = count + n, max(last_ts, ts)
    return count, last_ts, bool(new)  # changed in this batch: emit it (update mode)


def legacy_counts(ssc: Any, source: Any) -> Any:
    pairs = source.events().map(lambda e: ((e["user"], e["event_type"]), (1, e["kafka_ts"])))
    state = pairs.updateStateByKey(_add)
    return state.filter(lambda kv: kv[1][2]).map(lambda kv: (kv[0][0], kv[0][1], kv[1][0], kv[1][1]))
# --8<-- [end:legacy]


# --8<-- [start:modern]
def modern_counts(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return source.events().groupBy("user", "event_type").agg(
        F.count("*").alias("count"), F.unix_millis(F.max("kafka_ts")).alias("last_input_ts")
    )
# --8<-- [end:modern]


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Valid events per (user, event_type); malformed records are dead letters; nothing is late."""
    events, rejects = parse_dataset(frame)
    rows = events.groupby(["user", "event_type"]).size().rename("count").reset_index()
    return OracleResult(sorted_rows(SPEC, rows), rejects, pd.DataFrame({"seq": pd.Series(dtype="int64")}))


SPEC = WorkloadSpec(
    name="event_types",
    summary="events per (user, event_type) over all time (a job of your own: examples/event_types.py)",
    inputs=("events",),
    key_columns=("user", "event_type"),
    value_columns=("count",),
    output_mode="update",
    granularity="final count per user and event type",
    watermark_delay_ms=None,
    oracle=oracle,
    legacy=(Variant("default", "examples.event_types:legacy_counts"),),
    modern=(Variant("default", "examples.event_types:modern_counts"),),
    carry=StateCarry("totals", sum_columns=("count",), counts_events=True,
                     note="counts continue from the legacy job's last counts"),
)
