"""What a compare run feeds its engines: the default dataset, its rows routed to the inputs, the batch caps.

``dmk compare`` (:mod:`compare.run`, :mod:`compare.supervise`), the tests' in-process runs (:mod:`compare.harness`)
and ``dmk bench`` take these from here, so a production run and a test run are fed alike.

Example:
    >>> batch_records(dataset_spec("messy"))  # records per batch: half the lateness margin of event time
    1000.0
    >>> common_cap(dataset_spec("messy"))  # what every engine can be given (modern's 80 % share)
    800
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from compare.engines import ENGINES, get_engine
from kit import workloads
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig, KitEngine
from kit.nexmark import NexmarkSpec

__all__ = ["TEST_DATASET", "batch_records", "capped", "common_cap", "dataset_spec", "input_shares", "route_inputs"]

# 20k records over 40 s of event time: dmk compare's default dataset and the equivalence tests'.
TEST_DATASET = {"records": 20_000, "events_per_second": 500, "lateness_margin_ms": 4_000, "users": 300}


def batch_records(dataset: DatasetSpec | NexmarkSpec) -> float:
    """Records per batch keeping every batch within half the dataset's lateness margin of event time.

    Spark judges a batch's late rows by the watermark of two batches back. A batch longer in event time than
    the margin around the allowed lateness can therefore admit a too-late record (or drop an on-time one),
    and an engine working off a backlog takes one huge batch unless it is capped. Half the margin leaves room
    for the batch before it. Each engine takes its :attr:`~kit.engine.KitEngine.cap_share` of it
    (:func:`capped`), since a cap split over partitions by lag lets a batch reach further on some partitions.

    Example:
        >>> batch_records(dataset_spec("messy"))  # TEST_DATASET: 2 s of event time at 500 events/s
        1000.0
    """
    return dataset.events_per_second * dataset.lateness_margin_ms / 2_000


def capped(
    engine: KitEngine, config: DriverConfig, dataset: DatasetSpec | NexmarkSpec,
    shares: Mapping[str, float] | None = None,
) -> DriverConfig:
    """``config`` with ``engine``'s batch cap keeping its batches short in event time (:func:`batch_records`).

    For :data:`TEST_DATASET` on 4 partitions: legacy 250 records/s per partition (1000 records per 1 s batch,
    2 s of event time), modern 800 records per trigger. With ``shares`` (:func:`input_shares`), each input is
    capped at its share of that: the join's impressions at two thirds, Nexmark's persons at a fiftieth. Set the
    batch interval first.
    """
    return engine.capped(config, batch_records(dataset) * engine.cap_share, shares)


def input_shares(
    routed: pd.DataFrame, records: int, window: float, partitions: int = 1, *, by_clock: bool = True,
) -> dict[str, float]:
    """Input name → its share of a batch's records, from a :func:`route_inputs` frame of ``records`` dataset rows.

    Each input's share is its fraction of the dataset, every fraction raised by one factor: the largest ratio,
    over the inputs and their ``partitions`` (``seq % partitions``, as the runs replay), of an input's densest
    stretch of ``window`` consecutive dataset records (a batch's worth, :func:`batch_records`) on a partition to
    its average there (an engine caps each partition alike).

    Raised, an input whose records bunch up is read as fast as they arrive. At its bare fraction, a stream
    replayed at the batch's rate falls behind in every dense stretch (the boundary block's lead-ins fill whole
    partitions with one input), and the legacy join then dropped 2,104 on-time records. Raised alike, the inputs
    still advance through event time together in a backlog, where an input read at the whole batch, carrying a
    fiftieth of the stream, would read fifty times further. A backlog's batch then spans ``factor`` batches'
    worth of event time: for the join on the test dataset, 1.3 on 4 partitions, 1.5 with the boundary block,
    2.9 with it on 8 partitions; for Nexmark q8 2.2 on 4 (its persons are sparse), where a backlog's modern
    batch admitted a too-late auction. So only an engine whose batches come by the clock (``by_clock``, a DStream
    batch interval: it cannot take a second batch sooner to catch up) gets the raised shares; an engine that
    starts its next batch when the last ends (Structured Streaming's default trigger) catches up by running more
    batches, and gets the bare fractions (``by_clock=False``). ``records`` counts the dataset's rows, also those
    no input reads (the bids a persons-and-auctions query leaves out).

    Example:
        >>> clicks = {2, 6, 7, 11}  # a third of 12 records, but 2 of the 4 from seq 6 on: 1.5 times their third
        >>> routed = pd.DataFrame({"seq": range(12), "topic": [("views", "clicks")[s in clicks] for s in range(12)]})
        >>> input_shares(routed, 12, window=4)
        {'clicks': 0.5, 'views': 1.0}
    """
    fractions, factor = {}, 1.0
    for name, seqs in sorted(routed.groupby("topic")["seq"]):
        fractions[str(name)] = len(seqs) / max(records, 1)
        if not by_clock:
            continue
        average = fractions[str(name)] * window / partitions  # its records per partition in a window
        for _, on_partition in seqs.groupby(seqs % partitions):
            at = np.sort(on_partition.to_numpy())
            densest = int((np.searchsorted(at, at + window) - np.arange(len(at))).max())
            factor = max(factor, densest / average)
    return {name: fraction * factor for name, fraction in fractions.items()}


def common_cap(dataset: DatasetSpec | NexmarkSpec) -> int:
    """Records per batch that keep every engine's batches short in event time (the smallest engine share)."""
    return max(1, int(batch_records(dataset) * min(get_engine(name).cap_share for name in ENGINES)))


def dataset_spec(profile: str, **overrides: object) -> DatasetSpec:
    """The dataset the equivalence tests use for ``profile`` (:data:`TEST_DATASET`, seed 11), with overrides."""
    return DatasetSpec.from_profile(profile, **{**TEST_DATASET, "seed": 11, **overrides})


def route_inputs(specs: list[workloads.WorkloadSpec], frame: pd.DataFrame) -> pd.DataFrame:
    """The replay frame for jobs of ``specs``: each dataset row once per distinct input it feeds, in ``seq`` order.

    A row goes to ``events`` for the single-input workloads and to ``impressions`` or ``clicks`` for the join
    (a Nexmark query's: its tables', in the three-topic layout; rows of the tables it does not read go nowhere);
    with both kinds of job in one run, it is produced to both topics (adjacent, so the topics advance
    together). A row two jobs route to the same input (the bids of a bids-only query and of an auctions-and-bids
    one) is produced once. The ``topic`` column holds the input name.

    Example:
        >>> class Reads:  # a stand-in spec: routes the rows of its tables
        ...     def __init__(self, *tables): self.tables = tables
        ...     def route(self, frame): return frame["topic"].where(frame["topic"].isin(self.tables))
        >>> frame = pd.DataFrame({"seq": [0, 1, 2], "topic": ["auctions", "bids", "persons"]})
        >>> route_inputs([Reads("bids"), Reads("auctions", "bids")], frame)[["seq", "topic"]].values.tolist()
        [[0, 'auctions'], [1, 'bids']]
    """
    copies = []
    for spec in specs:
        routes = spec.route(frame)
        read = routes.notna().to_numpy()  # None: no input of the job reads the row (a Nexmark table it skips)
        copies.append(frame.assign(topic=routes.to_numpy())[read])
    routed = pd.concat(copies, ignore_index=True).drop_duplicates(["seq", "topic"])
    return routed.sort_values("seq", kind="stable").reset_index(drop=True)
