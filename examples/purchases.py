"""A stateless job of your own: every valid ``purchase`` event, as it arrives (parse, filter, project).

Stateless jobs are the easy half of a migration and of a cutover: each output row depends on one input
record, so the modern query only has to start exactly where the legacy job stopped (``dmk cutover``'s
``startingOffsets``) — nothing else carries over. ``docs/cutover.md`` runs this job and ``running_counts``
through a cutover.

Run it through both engines (from the repository root, so that ``examples`` is importable)::

    dmk compare examples.purchases:SPEC --records 20000
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import OracleResult, StateCarry, Variant, WorkloadSpec, parse_dataset, sorted_rows


# --8<-- [start:legacy]
def legacy_purchases(ssc: Any, source: Any) -> Any:
    purchases = source.events().filter(lambda e: e["event_type"] == "purchase")
    return purchases.map(lambda e: (e["event_id"], e["user"], e["ad_id"], e["kafka_ts"]))
# --8<-- [end:legacy]


# --8<-- [start:modern]
def modern_purchases(spark: Any, source: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    purchases = source.events().where(F.col("event_type") == "purchase")
    return purchases.select("event_id", "user", "ad_id", F.unix_millis("kafka_ts").alias("last_input_ts"))
# --8<-- [end:modern]


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """One row per valid purchase record (a duplicated record gives two rows); malformed records are dead letters."""
    events, rejects = parse_dataset(frame)
    rows = events[events["event_type"] == "purchase"]
    return OracleResult(sorted_rows(SPEC, rows), rejects, pd.DataFrame({"seq": pd.Series(dtype="int64")}))


SPEC = WorkloadSpec(
    name="purchases",
    summary="every valid purchase event (a stateless job of your own: examples/purchases.py)",
    inputs=("events",),
    key_columns=("event_id",),
    value_columns=("user", "ad_id"),
    output_mode="append",
    granularity="one row per purchase record",
    watermark_delay_ms=None,
    oracle=oracle,
    legacy=(Variant("default", "examples.purchases:legacy_purchases"),),
    modern=(Variant("default", "examples.purchases:modern_purchases"),),
    carry=StateCarry("stateless", note="nothing to carry: each row depends on one record"),
)
