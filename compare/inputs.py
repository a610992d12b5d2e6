"""What a compare run feeds its engines: the default dataset, its rows routed to the inputs, the batch caps.

``dmk compare`` (:mod:`compare.run`, :mod:`compare.supervise`), the tests' in-process runs (:mod:`compare.harness`)
and ``dmk bench`` take these from here, so a production run and a test run are fed alike.

Example:
    >>> legacy_per_partition, modern_per_trigger = batch_caps(dataset_spec("messy"), partitions=4)
    >>> legacy_per_partition, modern_per_trigger
    (250, 800)
"""

from __future__ import annotations

import pandas as pd

from kit import workloads
from kit.dataset import DatasetSpec

__all__ = ["TEST_DATASET", "batch_caps", "dataset_spec", "route_inputs"]

# 20k records over 40 s of event time: dmk compare's default dataset and the equivalence tests'.
TEST_DATASET = {"records": 20_000, "events_per_second": 500, "lateness_margin_ms": 4_000, "users": 300}


def batch_caps(dataset: DatasetSpec, partitions: int, batch_seconds: float = 1.0) -> tuple[int, int]:
    """``(legacy maxRatePerPartition, modern maxOffsetsPerTrigger)`` keeping batches short in event time.

    Every batch stays within half the dataset's lateness margin of event time.

    Spark judges a batch's late rows by the watermark of two batches back. A batch longer in event time than
    the margin around the allowed lateness can therefore admit a too-late record (or drop an on-time one),
    and an engine working off a backlog takes one huge batch unless it is capped. Half the margin leaves room
    for the batch before it. Modern gets 80 % of that: ``maxOffsetsPerTrigger`` is split over partitions by
    lag, so a batch can reach further in event time on some partitions than on others.
    """
    per_batch = dataset.events_per_second * dataset.lateness_margin_ms / 2_000
    legacy = max(1, int(per_batch / partitions / batch_seconds))
    modern = max(1, int(per_batch * 0.8))
    return legacy, modern


def dataset_spec(profile: str, **overrides: object) -> DatasetSpec:
    """The dataset the equivalence tests use for ``profile`` (:data:`TEST_DATASET`, seed 11), with overrides."""
    return DatasetSpec.from_profile(profile, **{**TEST_DATASET, "seed": 11, **overrides})


def route_inputs(specs: list[workloads.WorkloadSpec], frame: pd.DataFrame) -> pd.DataFrame:
    """The replay frame for jobs of ``specs``: each dataset row once per distinct input it feeds, in ``seq`` order.

    A row goes to ``events`` for the single-input workloads and to ``impressions`` or ``clicks`` for the join;
    with both kinds of job in one run, it is produced to both topics (adjacent, so the topics advance
    together). The ``topic`` column holds the input name.
    """
    copies = []
    seen: set[tuple] = set()
    for spec in specs:
        routes = spec.route(frame)
        signature = tuple(sorted(set(routes)))
        if signature in seen:
            continue
        seen.add(signature)
        copies.append(frame.assign(topic=routes.to_numpy()))
    routed = pd.concat(copies, ignore_index=True)
    return routed.sort_values("seq", kind="stable").reset_index(drop=True)
