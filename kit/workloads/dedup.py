"""``dedup``: drop records whose ``event_id`` was already seen within the lateness horizon.

Legacy: :func:`legacy.workloads.event_time_operator` keyed by ``event_id``, remembering each id until the
watermark passes its event time plus the allowed lateness. Modern: ``dropDuplicatesWithinWatermark``, and
Spark 4's ``transformWithStateInPandas`` with a ValueState per id and an event-time timer forgetting it. All
output the first occurrence of each id at once (append mode): key ``event_id``, values ``user, key,
event_time`` (ms).

A record is too late iff ``event_time <= watermark`` (Spark's rule for ``dropDuplicatesWithinWatermark``):
the dataset's ``too_late`` records are dropped, its ``late`` ones are kept. An id is remembered until
``event_time + delay <= watermark``; a re-delivery of the same record carries the same event time, so once
its id is forgotten the re-delivery is itself too late. That is why the oracle needs no expiry of its own:
every re-delivery that is not too late finds its original remembered, and is dropped.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> dataset = DatasetSpec.from_profile("messy", records=20_000, seed=7)
    >>> frame = generate(dataset)
    >>> expected = SPEC.oracle(frame, dataset)
    >>> counts = dataset.kind_counts()
    >>> len(expected.rows) == counts["clean"] + counts["late"], len(expected.late_dropped) == counts["too_late"]
    (True, True)
"""

from __future__ import annotations

import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import OracleResult, StateCarry, Variant, WorkloadSpec, parse_dataset, sorted_rows
from kit.workloads.rewind import Rewind, RewindInput, rewind_seen_ids

__all__ = ["SPEC", "WATERMARK_DELAY_MS", "oracle", "rewind"]

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness: ``SPEC.watermark_delay_ms`` as an int (the field is None for workloads without event time)."""


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Keep the first not-too-late record of each ``event_id``, in replay order."""
    events, rejects = parse_dataset(frame)
    late = events["event_time"] <= events["prior_max_ms"] - SPEC.watermark_delay_ms
    first = events[~late].drop_duplicates("event_id", keep="first")
    return OracleResult(sorted_rows(SPEC, first), rejects, events.loc[late, ["seq"]].reset_index(drop=True))


def rewind(inp: RewindInput) -> Rewind:
    """``dmk cutover --rewind``: start at the oldest event past the legacy job's next watermark.

    :func:`kit.workloads.rewind.rewind_seen_ids`: older ones can only recur too late.
    """
    return rewind_seen_ids(inp.events, inp, delay_ms=WATERMARK_DELAY_MS, id_column="event_id")


SPEC = WorkloadSpec(
    name="dedup",
    summary="drop duplicate event_ids within the watermark (keyed state with expiry vs dropDuplicatesWithinWatermark)",
    inputs=("events",),
    key_columns=("event_id",),
    value_columns=("user", "key", "event_time"),
    output_mode="append",
    granularity="one row per distinct event_id",
    watermark_delay_ms=WATERMARK_DELAY_MS,
    oracle=oracle,
    carry=StateCarry(
        "rewound", row_time="event_time", rewind=rewind, seeds_ids=True,
        note="every id the state holds was emitted once: dmk cutover --seed-state carries the ids the legacy job can "
        "still be sent again (event time past its next watermark) into the modern query's state store; --rewind "
        "instead starts the modern query at the oldest event past the legacy watermark, so that it sees those ids "
        "again, and drops the rows the legacy job emitted",
    ),
    modern=(
        Variant("default", "build", note="withWatermark + dropDuplicatesWithinWatermark(['event_id'])"),
        Variant(
            "transform_with_state",
            "build_transform_with_state",
            note="transformWithState (PySpark 4.1+, over Rows): a ValueState per event_id, forgotten by an event-time "
            "timer",
        ),
    ),
)
