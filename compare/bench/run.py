"""``dmk bench``: throughput, latency and state growth of both engines against the raw Kafka client limit.

One run, one broker, one Spark JVM, one machine:

1. **Raw limits.** A bare producer of the engines' Kafka client (:func:`kit.kafka.resolve_client`) writes the
   dataset (``--records``, clean profile) into one topic of ``--partitions`` partitions as fast as the broker
   acknowledges (``raw_producer_rps``); a bare single-process consumer then reads the whole topic back
   (``raw_consumer_rps``). Every other installed client does the same (``raw_clients``), so the engines are
   held to their own client's limit and the clients can be compared. Last, one consumer of the engines'
   client reads the topic again and decides every value with the oracle's rules (``raw_parsing_consumer_rps``,
   :func:`kit.events.parse_event`): the least a job does besides reading, for scale (``ratio_to_parsing``).
2. **Maximum throughput.** Each engine runs ``running_counts`` and ``ysb`` over that pre-loaded topic, capped
   to :data:`THROUGHPUT_BATCHES` equal batches (legacy ``spark.streaming.kafka.maxRatePerPartition`` with
   0.25 s batches, :data:`THROUGHPUT_INTERVALS`; modern ``maxOffsetsPerTrigger``). Throughput is the records
   of the batches from the second with records (the first is the warm-up, :data:`WARMUP_BATCHES`) to the last,
   over the time the engine spent processing them (:func:`throughput`): the rate it sustains while it always
   has work.
   Each measured run comes after an unmeasured one of the same job over the same topic (:data:`WARMUP_RUNS`,
   in :data:`WARMUP_RUN_BATCHES` batches), so the JVM's JIT has compiled Spark's code, as in a job running for
   hours.
   Every run's final output is diffed against the workload's pandas oracle (``matches_oracle``).
   The same runs then read a messy topic of as many records (:func:`messy_dataset`: late, too-late, duplicate
   and malformed records, the last of which take each engine's dead-letter path, in modern the Python parser
   behind the JSON fast path), in batches short enough in event time that every engine judges lateness as the
   oracle does (:func:`messy_cap`); its figures are ``messy``, checked against the oracle the same way
   (``--quick``: not run, so that the short run stays within 5 minutes).
3. **Latency at a fixed rate.** Per engine and workload, a fresh topic is replayed at ``--latency-rate``
   (default :data:`LATENCY_RATE` records/s, the same for both engines) for ``--latency-seconds`` while the
   engine runs (legacy with 1 s and 500 ms batches, modern with the default trigger and 500 ms; ``--quick``:
   the first of each). Event time advances with wall time, and a windowed workload replays its window +
   watermark delay longer. Latency of an output row is its ``emitted_at`` minus the Kafka timestamp of the
   newest input behind it; rows whose inputs came in the first :data:`WARMUP_FRACTION` of the replay are left
   out (JIT and first-batch warm-up).
4. **State growth.** ``running_counts`` with the key count grown from :data:`STATE_FROM_KEYS` to
   ``--state-keys`` (default: ``--records``). Batches of the same size (:data:`STATE_BATCH` updates of
   existing keys) are produced right after a batch boundary, so each lands in one batch; the ratio is the
   median processing time of such batches at the large state over the small one. Near 1: the state is
   incremental. (Legacy runs 5 s batches here, :data:`STATE_INTERVALS`, and may queue them.)
5. **A batch's fixed cost on the compare path.** ``dmk compare running_counts`` itself (:func:`compare.run.run_compare`:
   a driver process per engine, the messy profile's dead letters, the batch sinks, Spark's event log, the batch
   caps, the default replay rate) over :data:`FIXED_COST_RECORDS` records: per engine the median processing time
   of a batch with records (every one holds at most a thousand) and where it goes (the report's breakdown:
   Spark planning, the offset and commit logs, the state store's commit, the sinks; Spark jobs and tasks per
   batch), whether it kept up, and its latency after the start-up.

Results go to ``<out>/bench-<UTC time>.json`` and ``.md``, and to ``latest.json``/``latest.md`` (the schema is
in docs/bench.md), with the machine description and the exact command. :func:`compare.bench.report.readme_table`
renders README's performance table from a results file.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import re
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from compare.bench.raw import (
    Progress,
    _end_offsets,
    available_clients,
    consume_all,
    new_topic,
    produce,
    round_robin_ends,
)
from compare.bench.report import write_results
from compare.bench.results import (
    STATE_GROWTH_TARGETED,
    backed_percentiles,
    evaluate_targets,
    limits,
    load_baseline,
    machine,
    previous_results,
    unchecked_runs,
)
from compare.engines import ENGINES, get_engine
from compare.measure import latency
from kit import workloads
from kit.broker import kafka_or_embedded
from kit.dataset import DatasetSpec, generate
from kit.engine import DriverConfig, Engine, RunHandle, seconds
from kit.errors import ConfigError, KitError
from kit.events import REJECT_REASONS
from kit.kafka import resolve_client
from kit.nexmark import NexmarkSpec
from kit.replay import ReplaySettings, replay

__all__ = [
    "FIXED_COST_RECORDS",
    "LATENCY_RATE",
    "RESULTS_DIR",
    "THROUGHPUT_BATCHES",
    "WARMUP_BATCHES",
    "WARMUP_RUNS",
    "WARMUP_RUN_BATCHES",
    "WORKLOADS",
    "BenchDiffers",
    "BenchSettings",
    "closing_seconds",
    "matches_oracle",
    "messy_cap",
    "messy_dataset",
    "publish",
    "run_bench",
    "state_values",
    "throughput",
]

WORKLOADS = ("running_counts", "ysb")
RESULTS_DIR = Path("benchmarks") / "results"
FULL_RECORDS, QUICK_RECORDS = 1_000_000, 200_000
THROUGHPUT_BATCHES = 10
"""Batches each throughput run is capped to: large enough to amortize a batch's fixed cost, small enough that
an engine runs several (the first batch's warm-up is then a tenth of the run)."""
LATENCY_RATE = 5_000.0
"""Records/s of every latency run by default: one fixed input rate for both engines, so their latencies are
comparable (the issue's target load for running_counts on 8 partitions)."""
WARMUP_FRACTION = 0.2
IDLE_SECONDS = 3.0
"""How long each latency run stays idle after its last record is processed, for its idle batches or triggers."""
IDLE_REPORT_INTERVAL = "500ms"
"""``spark.sql.streaming.noDataProgressEventInterval`` during latency runs: how often Structured Streaming reports
an idle trigger (a trigger that found no new data and ran no micro-batch; 10 s by default)."""
THROUGHPUT_INTERVALS = {name: get_engine(name).bench.throughput_interval for name in ENGINES}
"""Batch intervals of the throughput runs (:attr:`kit.engine.BenchProfile.throughput_interval`; None: the engine's
default). A legacy batch reads at most ``maxRatePerPartition`` × interval records per partition, so with 1 s batches
of a tenth of the topic legacy could not read faster than a tenth of the topic a second (100,000 records/s at 1M
records), and once warm it reached that: its batches ended early and it waited for the next one (97,667-105,733
records/s measured). At 0.25 s the cap is four times that, more than the raw consumer reads: batches queue, and the
measured span covers their processing back to back, as a modern query's micro-batches follow each other with its
default trigger."""
LATENCY_INTERVALS = {name: get_engine(name).bench.latency_intervals for name in ENGINES}
"""Legacy batch intervals and modern triggers of the latency runs (:attr:`kit.engine.BenchProfile.latency_intervals`,
:meth:`kit.engine.KitEngine.paced`); the first is each engine's default."""
STATE_FROM_KEYS = 10_000
STATE_BATCH = 10_000
STATE_SAMPLES, QUICK_STATE_SAMPLES = 5, 3
"""Measured batches at each state size: a full run's and ``--quick``'s (legacy's are 5 s batches)."""
FIXED_COST_RECORDS = 6_000
"""Records of the fixed-cost phase's compare run: the messy profile of ``dmk compare``'s default dataset, without
its too-late records (a stream this short has no room for them: each needs 19 s of event time after it, and
running_counts counts them like any other). 8 s of replay at the default rate (750 records/s), after each
driver's warm-up; its batches hold at most 1,000 records."""
STATE_INTERVALS = {name: get_engine(name).bench.state_interval for name in ENGINES}
"""The state-growth runs' batch interval (legacy) and trigger (modern): :attr:`kit.engine.BenchProfile.state_interval`.
Legacy ``updateStateByKey`` visits every
key every batch, so a large state's batches outlast a 1 s interval and would queue behind each other
(processing time, which is what is measured, does not depend on the interval)."""



@dataclass(frozen=True)
class BenchSettings:
    """What one ``dmk bench`` run measures.

    Attributes:
        out_dir: where results go (default ``benchmarks/results``).
        records: records of the pre-loaded topic (default 1,000,000; ``quick``: 200,000).
        partitions: partitions of every benchmark topic (default 8).
        quick: the short run: 200k records, no messy-profile throughput runs, 10 s latency runs, 3 state-growth
            samples, only each engine's default batch interval or trigger.
        bootstrap_servers: Kafka to use; None starts the embedded broker.
        master: Spark master (default ``$DMK_SPARK_MASTER`` or ``local[2]``).
        latency_seconds: how long each latency run replays (default 30 s; quick 10 s), plus the window and
            watermark delay of a windowed workload (:func:`closing_seconds`).
        latency_rate: records/s of each latency run's replay (default :data:`LATENCY_RATE`).
        state_keys: distinct keys the state grows to (default ``records``).
        workloads: workloads of the throughput and latency runs.
        command: the command line, recorded in the results.
        timeout_s: bound on each wait for an engine.
        baseline: a results file to put every figure beside (default: ``out_dir``'s ``latest.json``, the
            previous run, when there is one).
        kafka_security: Kafka client settings in the Java client's names (``--kafka-config``/``--kafka-option``)
            for the engines' sources; the raw clients take them from :func:`kit.kafka.process_settings`.
        warmup_runs: unmeasured runs of each job before its throughput run (default :data:`WARMUP_RUNS`;
            ``quick``: none, so that the short run stays within 5 minutes: its throughput is a cold JVM's).
    """

    out_dir: Path = RESULTS_DIR
    records: int | None = None
    partitions: int = 8
    quick: bool = False
    bootstrap_servers: str | None = None
    master: str | None = None
    latency_seconds: float | None = None
    latency_rate: float = LATENCY_RATE
    state_keys: int | None = None
    workloads: tuple[str, ...] = WORKLOADS
    command: str = ""
    timeout_s: float = 1_800.0
    baseline: Path | None = None
    kafka_security: Mapping[str, str] = field(default_factory=dict, repr=False)
    warmup_runs: int | None = None

    def __post_init__(self) -> None:
        if self.records is not None and self.records < 10 * THROUGHPUT_BATCHES:
            msg = f"--records must be >= {10 * THROUGHPUT_BATCHES}, got {self.records}"
            raise ConfigError(msg)
        if self.partitions < 1:
            msg = f"--partitions must be >= 1, got {self.partitions}"
            raise ConfigError(msg)
        if self.latency_seconds is not None and not self.latency_seconds > 0:
            msg = f"--latency-seconds must be > 0, got {self.latency_seconds}"
            raise ConfigError(msg)
        if not self.latency_rate > 0:
            msg = f"--latency-rate must be > 0 records/s, got {self.latency_rate}"
            raise ConfigError(msg)
        if self.state_keys is not None and self.state_keys < 2 * STATE_FROM_KEYS:
            msg = (
                f"--state-keys must be >= {2 * STATE_FROM_KEYS} (the state grows from {STATE_FROM_KEYS} keys), "
                f"got {self.state_keys}"
            )
            raise ConfigError(msg)
        unknown = [w for w in self.workloads if w not in workloads.NAMES]
        if unknown:
            msg = f"unknown workload(s) {unknown}; dmk bench runs any of {list(workloads.NAMES)}"
            raise ConfigError(msg)

    @property
    def n_records(self) -> int:
        """Records of the pre-loaded topic: ``records``, or the full or quick run's default."""
        return self.records or (QUICK_RECORDS if self.quick else FULL_RECORDS)

    @property
    def n_latency_seconds(self) -> float:
        """Seconds each latency run replays: ``latency_seconds``, or 30 s (quick: 10 s)."""
        return self.latency_seconds or (10.0 if self.quick else 30.0)

    @property
    def n_state_samples(self) -> int:
        """Measured batches at each state size: :data:`STATE_SAMPLES`, or :data:`QUICK_STATE_SAMPLES` when quick."""
        return QUICK_STATE_SAMPLES if self.quick else STATE_SAMPLES

    @property
    def n_warmup_runs(self) -> int:
        """Unmeasured runs before each throughput run: ``warmup_runs``, else 0 when quick, else :data:`WARMUP_RUNS`."""
        if self.warmup_runs is not None:
            return self.warmup_runs
        return 0 if self.quick else WARMUP_RUNS

    @property
    def n_state_keys(self) -> int:
        """Keys the state grows to: ``state_keys``, or ``n_records``; at least twice :data:`STATE_FROM_KEYS`."""
        return max(self.state_keys or self.n_records, 2 * STATE_FROM_KEYS)


# -- measurements from batch logs ----------------------------------------------------------------------------


WARMUP_BATCHES = 1
"""Busy batches left out of the throughput at the start of a run: the first one pays the JVM's and the Python
workers' start-up (code generation, JIT, worker processes, the state store's first open). Measured on this
machine, modern running_counts' first 20k-record micro-batch took 8.2 s and the next ones 1.0-1.6 s."""


WARMUP_RUNS = 1
"""Unmeasured runs of the same job over the same topic before the measured one, in the same JVM and Python
workers, as JMH warms a benchmark up: a streaming job runs for hours, and its JVM has long compiled Spark's
planning and execution code by then. A cold JVM is still compiling in its first runs: modern ``running_counts``
over 1M records, four runs in one JVM, measured 80,530, 111,029, 112,066 and 115,800 records/s (docs/bench.md).
The runs before the measured one also start the Python workers and open the state store, which
:data:`WARMUP_BATCHES` alone left in the measurement's first seconds."""

WARMUP_RUN_BATCHES = 50
"""Batches each warm-up run is split into (the measured run has :data:`THROUGHPUT_BATCHES`). Structured Streaming
plans every micro-batch again, and the JIT goes on compiling that planning code for about a hundred
micro-batches: of ten 10-micro-batch runs of modern ``running_counts`` over 1M records in one JVM, the second to
the tenth spent 3.8, 2.7, 2.5, 2.1, 1.9, 1.3, 1.0, 1.1 and 0.9 s of the compiler threads' CPU (the first, 11.5 s)
and measured from 99,184 rising to 133,215 records/s (profile.md §9). A warm-up of 50 micro-batches reads the
same records as one of 10 in about 17 s more, and the measured run after it is like the later runs (two runs
each: 126,493 and 132,665 records/s after 50, 108,525 and 121,212 after 10)."""


def throughput(spans: pd.DataFrame, emitted_at: pd.Series | None = None,
               warmup_batches: int = WARMUP_BATCHES) -> tuple[float, int]:
    """Records/s of the batches with records after the first ``warmup_batches`` of them, and their number.

    The rate is over the time the engine spent processing them: the union of the batches' processing intervals
    (``started_ms`` to ``ended_ms``) from the start of the first measured batch to the end of the last one. Batches
    that queue behind each other make it the span from first to last; a batch that ended before the next one's
    interval began adds its processing, not the wait (a legacy job faster than its 0.25 s batches would otherwise
    measure its batch interval: 10,000-record batches every 0.25 s read at most 40,000 records/s).

    ``emitted_at``: when the run's output rows were written (epoch ms, the rows' column). A job whose output comes
    after its last batch with records (a window that closes after its input was read: a legacy window of
    processing time, e.g. ``nexmark_q12``'s, a modern watermark's last windows) does work in those later
    batches: every batch that started by the last row is in the measured time. When *all* output came after the
    last batch with records, the first batch's records were processed by the later batches too, so nothing is
    left out as a warm-up.

    With no more busy batches than ``warmup_batches``, all of them are measured.
    """
    ordered = spans.sort_values("started_ms")
    busy = ordered[ordered["records"] > 0]
    if busy.empty:
        return 0.0, 0
    end = last_busy_end = float(busy["ended_ms"].max())
    all_deferred = False
    if emitted_at is not None and not emitted_at.empty:
        end = max(end, float(emitted_at.max()))
        all_deferred = float(emitted_at.min()) > last_busy_end
    measured = busy.iloc[warmup_batches:] if len(busy) > warmup_batches and not all_deferred else busy
    inside = ordered[(ordered["started_ms"] >= measured["started_ms"].min()) & (ordered["started_ms"] <= end)]
    busy_ms, reach = 0.0, float("-inf")
    for started, ended in zip(inside["started_ms"], inside["ended_ms"], strict=True):
        busy_ms += max(0.0, ended - max(started, reach))
        reach = max(reach, ended)
    return float(measured["records"].sum() / max(busy_ms / 1000, 1e-3)), len(measured)


def _median(values: pd.Series) -> float | None:
    return None if values.empty else float(values.median())


# -- one engine run ------------------------------------------------------------------------------------------


@dataclass
class _Run:
    engine: Engine
    workload: str
    out_dir: Path
    handle: RunHandle | None = None

    @property
    def job(self) -> str:
        return workloads.job_id(self.workload)

    def spans(self) -> pd.DataFrame:
        return self.engine.record(self.out_dir).batch_spans(self.job)

    def rows(self) -> pd.DataFrame:
        return self.engine.record(self.out_dir).outputs(self.job)

    def wait(self, ends: dict[str, dict[int, int]], timeout_s: float, extra_batches: int = 2) -> None:
        assert self.handle is not None, "wait() inside the engine's block"
        self.handle.await_offsets(ends, timeout_s=timeout_s, extra_batches=extra_batches)


@contextmanager
def engine_run(settings: BenchSettings, spark: Any, bootstrap: str, workdir: Path, engine: str, workload: str,
               topics: Mapping[str, str], dataset: DatasetSpec | NexmarkSpec, *, cap: int | None = None,
               interval: str | None = None) -> Iterator[_Run]:
    """Run ``workload`` on ``engine`` over ``topics`` (input name → topic, each from its start) until the block ends.

    ``cap``: records per batch (:meth:`kit.engine.KitEngine.capped`), None reads whatever is there;
    ``interval``: the batch interval or trigger (default: the engine's).
    """
    tag = uuid.uuid4().hex[:6]
    chosen = get_engine(engine)
    run = _Run(chosen, workload, workdir / f"{engine}-{workload}-{tag}")
    config = DriverConfig(
        engine=engine, bootstrap_servers=bootstrap, topics=dict(topics), out_dir=str(run.out_dir),
        checkpoint_dir=str(workdir / f"{engine}-{workload}-{tag}-checkpoint"),
        dataset=dataset, jobs=((workload, "default"),), timeout_s=settings.timeout_s,
        partitions=settings.partitions, kafka_security=dict(settings.kafka_security),
    )
    if interval is not None:
        config = chosen.paced(config, interval)
    if cap is not None:
        config = chosen.capped(config, cap)
    run.handle = chosen.start(spark, config)
    try:
        yield run
    finally:
        run.handle.stop()


def latency_run(settings: BenchSettings, spark: Any, bootstrap: str, workdir: Path, engine: str, workload: str,
                input_topic: tuple[str, str], dataset: DatasetSpec | NexmarkSpec, frame: pd.DataFrame, rate: float,
                interval: str) -> dict[str, Any]:
    """One latency run: ``frame`` replayed at ``rate`` while ``engine`` runs ``workload``.

    The replay goes into the new topic ``input_topic[1]``, read as ``workload``'s input ``input_topic[0]``. Returns
    the latency of the rows whose inputs came after the warm-up, whether the rows equal the oracle, and the
    batches' costs.
    """
    input_name, topic = input_topic
    with _session_conf(spark, IDLE_CONF, IDLE_REPORT_INTERVAL), \
            engine_run(settings, spark, bootstrap, workdir, engine, workload, {input_name: topic}, dataset,
                       interval=interval) as run:
        # The replay runs in a process of its own, so its producer does not compete with the engine's
        # driver for this interpreter's GIL; its timestamps and the sink's are on the same clock.
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            replayed = pool.submit(replay, frame, bootstrap, ReplaySettings(
                topic=topic, partitions=settings.partitions, rate_rps=rate, partition_by="seq")).result()
        run.wait(replayed.topic_end_offsets, settings.timeout_s)
        time.sleep(IDLE_SECONDS)  # what the engine does without input is measured, not waited for
    rows = run.rows()
    produced = replayed.log["produced_ms"]
    cutoff = produced.min() + WARMUP_FRACTION * (produced.max() - produced.min())
    measured = latency(rows[rows[workloads.LAST_INPUT_TS] >= cutoff] if not rows.empty else rows)
    spans = run.spans()
    busy, idle = spans[spans["records"] > 0], spans[spans["records"] == 0]
    return {
        "rate_rps": round(rate, 1), "records": len(frame), "output_rows": len(rows),
        "rows_measured": int(len(measured)),
        **backed_percentiles(measured), "matches_oracle": matches_oracle(workloads.get(workload), rows, frame,
                                                                          dataset),
        # What limits the latency: how long a batch takes, with and without records (modern: an idle trigger,
        # which runs no micro-batch unless a watermark moved).
        "batch_ms_median": _median(busy["processing_ms"]), "idle_batch_ms_median": _median(idle["processing_ms"]),
        # A batch waits behind another only where batches are cut by the clock.
        "scheduling_delay_ms_max": (int(spans["scheduling_ms"].max())
                                    if get_engine(engine).batches_by_clock and not spans.empty else None),
    }


def _aligned(period_s: float, slack_s: float = 0.1) -> None:
    """Sleep until just after the next multiple of ``period_s`` since the epoch.

    A legacy batch (Spark's RecurringTimer starts at a multiple of the interval) and a modern processing-time
    trigger (the same) both fire then, so records produced right after land in one batch.
    """
    time.sleep(period_s - time.time() % period_s + slack_s)


def state_values(keys: int, template: bytes) -> list[bytes]:
    """``keys`` event values that differ only in their key (``s0000000``, ``s0000001``...)."""
    head, tail = re.split(rb'"key":"[^"]*"', template, maxsplit=1)
    return [b'%s"key":"s%07d"%s' % (head, i, tail) for i in range(keys)]


class _Bench:
    """The state of one bench run: the broker, the Spark session, the pre-loaded topic."""

    def __init__(self, settings: BenchSettings, spark: Any, bootstrap: str, workdir: Path, progress: Progress) -> None:
        self.settings, self.spark, self.bootstrap, self.workdir = settings, spark, bootstrap, workdir
        self.progress = progress
        self.tag = uuid.uuid4().hex[:6]
        self.dataset = _dataset(settings.n_records)
        self.frame = generate(self.dataset)
        self.topic = ""
        self.ends: dict[int, int] = {}
        self.messy_dataset = messy_dataset(settings.n_records)
        self.messy_frame: pd.DataFrame | None = None
        self.messy_topic = ""
        self.messy_ends: dict[int, int] = {}
        self.client = resolve_client()
        """The Kafka client of the engines' readers and of the replay (both follow ``$DMK_KAFKA_CLIENT``)."""

    def _topic(self, name: str) -> str:
        return new_topic(self.bootstrap, f"dmk-bench-{self.tag}-{name}", self.settings.partitions)

    @contextmanager
    def engine(self, engine: str, workload: str, topic: str, dataset: DatasetSpec | None = None, *,
               cap: int | None = None, interval: str | None = None) -> Iterator[_Run]:
        """Run ``workload`` on ``engine`` over ``topic`` (its input ``events``), as :func:`engine_run`."""
        with engine_run(self.settings, self.spark, self.bootstrap, self.workdir, engine, workload,
                        {"events": topic}, dataset or self.dataset, cap=cap, interval=interval) as run:
            yield run

    # -- the phases --

    def raw(self) -> dict[str, Any]:
        """Produce the dataset into the shared topic, then read it back with a bare consumer, for each client.

        The shared topic is written by the engines' client; each other client's producer writes the same
        records into a scratch topic. ``raw_producer_rps`` and ``raw_consumer_rps`` are the engines' client's.
        """
        n, values = len(self.frame), self.frame["value"].tolist()
        self.topic = self._topic("events")
        clients = [self.client, *(c for c in available_clients() if c != self.client)]
        rates: dict[str, dict[str, float]] = {}
        for client in clients:
            topic = self.topic if client == self.client else self._topic(f"raw-{client}")
            rates[client] = {"producer_rps": round(n / produce(self.bootstrap, topic, values, self.settings.partitions,
                                                                  self.progress, client=client), 1)}
            if client == self.client:
                self.ends = round_robin_ends(self.topic, n, self.settings.partitions)[self.topic]
                found = _end_offsets(self.bootstrap, self.topic)
                if found != self.ends:
                    msg = (
                        f"topic {self.topic} holds {found} records per partition after the raw producer, "
                        f"not {self.ends}"
                    )
                    raise KitError(msg)
        for client in clients:
            rates[client]["consumer_rps"] = round(n / consume_all(self.bootstrap, self.topic, self.ends, self.progress,
                                                                  client=client), 1)
        parsing = round(n / consume_all(self.bootstrap, self.topic, self.ends, self.progress, client=self.client,
                                        parse=True), 1)
        return {"kafka_client": self.client, "raw_clients": rates,
                "raw_producer_rps": rates[self.client]["producer_rps"],
                "raw_consumer_rps": rates[self.client]["consumer_rps"], "raw_parsing_consumer_rps": parsing}

    def max_throughput(self, engine: str, workload: str) -> dict[str, Any]:
        cap = math.ceil(len(self.frame) / THROUGHPUT_BATCHES)
        interval = THROUGHPUT_INTERVALS.get(engine)
        warmup_cap = math.ceil(len(self.frame) / WARMUP_RUN_BATCHES)
        for _ in range(self.settings.n_warmup_runs):
            with self.engine(engine, workload, self.topic, cap=warmup_cap, interval=interval) as warmup:
                warmup.wait({self.topic: self.ends}, self.settings.timeout_s)
        with self.engine(engine, workload, self.topic, cap=cap, interval=interval) as run:
            run.wait({self.topic: self.ends}, self.settings.timeout_s)
        spec, rows = workloads.get(workload), run.rows()
        rps, batches = throughput(run.spans(), rows.get("emitted_at"))
        result = {"throughput_rps": round(rps, 1), "batches": batches, "batch_cap": cap,
                  "matches_oracle": matches_oracle(spec, rows, self.frame, self.dataset)}
        # --quick leaves the messy profile to the full run: 40 s of its 5 minutes (docs/bench.md).
        return result if self.settings.quick else {**result, "messy": self.messy_throughput(engine, workload)}

    def messy_throughput(self, engine: str, workload: str) -> dict[str, Any]:
        """``max_throughput`` of the messy profile's topic (produced by the first call), checked against the oracle."""
        if self.messy_frame is None:
            self.messy_frame = generate(self.messy_dataset)
            self.messy_topic = self._topic("messy")
            produce(self.bootstrap, self.messy_topic, self.messy_frame["value"].tolist(), self.settings.partitions,
                    self.progress, client=self.client)
            self.messy_ends = round_robin_ends(self.messy_topic, len(self.messy_frame),
                                               self.settings.partitions)[self.messy_topic]
        cap = messy_cap(self.messy_dataset)
        with self.engine(engine, workload, self.messy_topic, self.messy_dataset, cap=cap,
                         interval=THROUGHPUT_INTERVALS.get(engine)) as run:
            run.wait({self.messy_topic: self.messy_ends}, self.settings.timeout_s)
        rows = run.rows()
        rps, batches = throughput(run.spans(), rows.get("emitted_at"))
        counts = self.messy_dataset.kind_counts()
        return {"throughput_rps": round(rps, 1), "batches": batches, "batch_cap": cap,
                "malformed_records": sum(counts[r] for r in REJECT_REASONS),
                "matches_oracle": matches_oracle(workloads.get(workload), rows, self.messy_frame,
                                                  self.messy_dataset)}

    def latency(self, engine: str, workload: str, rate: float, interval: str) -> dict[str, Any]:
        n = max(1, int(rate * (self.settings.n_latency_seconds + closing_seconds(workload))))
        # Event time advances with wall time (as YSB's generator does), so windows close after the watermark
        # delay whatever the rate.
        dataset = _dataset(n, events_per_second=rate)
        topic = self._topic(f"latency-{engine}-{workload}-{uuid.uuid4().hex[:6]}")
        return latency_run(self.settings, self.spark, self.bootstrap, self.workdir, engine, workload,
                           ("events", topic), dataset, generate(dataset), rate, interval)

    def fixed_cost(self) -> dict[str, Any]:
        """``dmk compare running_counts`` over :data:`FIXED_COST_RECORDS` messy records: each engine's batch cost.

        Per engine: the median processing time of a batch with records, the run's breakdown of it (medians per
        phase, Spark jobs and tasks), whether it kept up, its latency p99 after the start-up, and its warm-up.
        """
        from compare.inputs import dataset_spec
        from compare.run import run_compare
        from compare.settings import CompareSettings

        out = self.workdir / f"compare-fixed-cost-{uuid.uuid4().hex[:6]}"
        dataset = dataset_spec("messy", records=FIXED_COST_RECORDS, too_late_fraction=0.0)
        result = run_compare(CompareSettings(
            "running_counts", out_dir=out, dataset=dataset,
            bootstrap_servers=self.bootstrap, master=self.settings.master, timeout_s=self.settings.timeout_s,
            kafka_security=dict(self.settings.kafka_security),
        ))
        engines: dict[str, Any] = {}
        for engine, m in result.metrics.engines.items():
            kept = m.kept_up
            engines[engine] = {
                "records": m.input_records, "rate_rps": result.metrics.settings.rate_rps,
                "batch_ms_median": kept.batch_ms if kept else None, "kept_up": kept.kept_up if kept else None,
                "p99_after_startup_ms": m.latency_after_startup_ms.p99,
                "warmup_seconds": m.warmup_seconds, "breakdown_ms": m.time_breakdown_ms,
            }
        return {"workload": "running_counts", "records": FIXED_COST_RECORDS, "equivalent": result.equivalent,
                "engines": engines}

    def state_growth(self, engine: str) -> dict[str, Any]:
        """Processing time of equal batches (updates of existing keys) at 10k keys and at ``state_keys``.

        Each sample batch is produced just after a batch boundary, so it is one batch of exactly
        :data:`STATE_BATCH` records. Modern waits for each put to be processed (a trigger reads whatever has
        arrived, so a sample must not meet the rest of a load). Legacy never waits until the end: its batches
        are cut at the boundaries whatever their processing, and with a large state they outlast the interval
        and queue; waiting for each would make every wait longer than the one before.
        """
        keys, partitions = self.settings.n_state_keys, self.settings.partitions
        values = state_values(keys, self.frame["value"].iloc[0])
        topic = self._topic(f"state-{engine}")
        interval = STATE_INTERVALS[engine]
        period, by_clock = seconds(interval), get_engine(engine).batches_by_clock
        sent = 0
        with self.engine(engine, "running_counts", topic, interval=interval) as run:

            def put(batch: list[bytes], aligned: bool = False) -> None:
                nonlocal sent
                if aligned:
                    _aligned(period)
                produce(self.bootstrap, topic, batch, partitions, first_seq=sent)
                sent += len(batch)
                if not by_clock:  # a trigger reads whatever has arrived: a sample must not meet the next put
                    run.wait(round_robin_ends(topic, sent, partitions), self.settings.timeout_s)

            samples = self.settings.n_state_samples
            put(values[:STATE_FROM_KEYS])
            for _ in range(samples):
                put(values[:STATE_BATCH], aligned=True)
            put(values[STATE_FROM_KEYS:keys])
            for _ in range(samples):
                put(values[:STATE_BATCH], aligned=True)
            run.wait(round_robin_ends(topic, sent, partitions), self.settings.timeout_s, extra_batches=0)
        spans = run.spans().sort_values("batch_ms", kind="stable")
        # A sample is a batch of exactly STATE_BATCH records among the records sent in its phase.
        through = spans["records"].cumsum()
        exact = spans["records"] == STATE_BATCH
        phase_one = STATE_FROM_KEYS + samples * STATE_BATCH
        small = spans[exact & (through > STATE_FROM_KEYS) & (through <= phase_one)]["processing_ms"].tolist()
        large = spans[exact & (through > keys + samples * STATE_BATCH)]["processing_ms"].tolist()
        ratio = (
            statistics.median(large) / statistics.median(small)
            if small and large and statistics.median(small) else None
        )
        return {
            "keys_from": STATE_FROM_KEYS, "keys_to": keys, "batch_records": STATE_BATCH,
            "processing_ms_small": small, "processing_ms_large": large,
            "ratio": None if ratio is None else round(ratio, 2),
        }


IDLE_CONF = "spark.sql.streaming.noDataProgressEventInterval"


@contextmanager
def _session_conf(spark: Any, key: str, value: str) -> Iterator[None]:
    """``spark.conf`` ``key`` set to ``value`` for the block (queries read it when they start), then restored."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def closing_seconds(workload: str) -> float:
    """Event time an event-time workload needs before its first window is emitted: window + watermark delay.

    Its latency runs replay that much longer, so windows close within the run.
    """
    import importlib

    spec = workloads.get(workload)
    if spec.watermark_delay_ms is None:
        return 0.0
    module = importlib.import_module(f"kit.workloads.{spec.name}")
    window_ms = getattr(module, "WINDOW_MS", 0) or getattr(module, "GAP_MS", 0)  # a window, or a session's gap
    return (window_ms + spec.watermark_delay_ms) / 1000


def _dataset(records: int, **overrides: Any) -> DatasetSpec:
    return DatasetSpec.from_profile("clean", records=records, seed=7, **overrides)


def messy_dataset(records: int) -> DatasetSpec:
    """The messy profile's throughput dataset, with ``dmk compare``'s 4 s lateness margin.

    ``records`` span 40 s of event time whatever their number: room for too-late records (each late by the allowed
    lateness, the margin and a window), and :func:`messy_cap` then cuts the topic into 25 batches.
    """
    return DatasetSpec.from_profile("messy", records=records, seed=7, events_per_second=records / 40,
                                    lateness_margin_ms=4_000)


def messy_cap(dataset: DatasetSpec) -> int:
    """Records per batch of a messy throughput run: modern's batch cap for ``dataset``.

    That is :func:`compare.inputs.common_cap`: no batch spans more than half the lateness margin of event time, so
    every engine judges late records as the oracle does.
    """
    from compare.inputs import common_cap

    return common_cap(dataset)


def matches_oracle(
    spec: workloads.WorkloadSpec, rows: pd.DataFrame, frame: pd.DataFrame, dataset: DatasetSpec | NexmarkSpec,
) -> bool:
    """Whether ``rows``, a run's output of ``spec`` over ``frame``, equal the oracle's final result."""
    from compare.diff import diff_outputs

    expected = spec.oracle(frame, dataset).rows
    return bool(diff_outputs(expected, workloads.final_result(spec, rows), spec.key_columns, spec.value_columns).equal)


@contextmanager
def _phase(progress: Progress, name: str, seconds: dict[str, float] | None = None) -> Iterator[None]:
    """Report phase ``name`` started and done; with ``seconds``, record how long it took there."""
    started = time.monotonic()
    progress(name, 0, 1)
    yield
    progress(name, 1, 1)
    if seconds is not None:
        seconds[name] = round(time.monotonic() - started, 1)


# -- the run -------------------------------------------------------------------------------------------------


def run_bench(
    settings: BenchSettings, progress: Progress | None = None, spark: Any = None, *,
    on_broker_start: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], Path]:
    """Run every measurement of the module docstring; returns the results and the JSON file written.

    ``spark``: a running SparkSession to use (left running); default: one started (and stopped) for the run.
    ``on_broker_start``: called just before an embedded broker starts (no ``bootstrap_servers`` given).

    Raises:
        BrokerUnavailable: no Kafka at ``bootstrap_servers``.
        KitError: a phase failed (an engine's error, or records missing).
    """
    import tempfile

    from kit.spark import spark_session

    progress = progress or (lambda task, done, total: None)
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.monotonic()
    phase_seconds: dict[str, float] = {}
    baseline = load_baseline(settings.baseline) if settings.baseline else previous_results(settings.out_dir)
    with ExitStack() as stack:
        kafka = stack.enter_context(kafka_or_embedded(settings.bootstrap_servers, on_start=on_broker_start))
        bootstrap, broker = kafka.bootstrap_servers, kafka.description
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dmk-bench-")))
        if spark is None:
            spark = spark_session("dmk-bench", settings.master)
            stack.callback(spark.stop)
        master = spark.sparkContext.master
        bench = _Bench(settings, spark, bootstrap, workdir, progress)
        results: dict[str, Any] = {
            "created": created, "command": settings.command or "dmk bench", "quick": settings.quick,
            "records": settings.n_records, "partitions": settings.partitions, "broker": broker, "master": master,
            "machine": machine(), "latency_rate_rps": settings.latency_rate, "warmup_fraction": WARMUP_FRACTION,
            "warmup_runs": settings.n_warmup_runs, "warmup_run_batches": WARMUP_RUN_BATCHES,
        }
        results.update(bench.raw())
        raw = results["raw_consumer_rps"]
        engines: dict[str, dict[str, Any]] = {e: {} for e in ENGINES}
        for engine in ENGINES:
            for workload in settings.workloads:
                with _phase(progress, f"{engine} {workload}: max throughput", phase_seconds):
                    r = bench.max_throughput(engine, workload)
                r["ratio_to_raw"] = round(r["throughput_rps"] / raw, 3) if raw else None
                r["ratio_to_parsing"] = round(r["throughput_rps"] / results["raw_parsing_consumer_rps"], 3)
                r["latency_by_trigger"] = {}
                intervals = LATENCY_INTERVALS[engine]
                for interval in intervals[:1] if settings.quick else intervals:
                    with _phase(progress, f"{engine} {workload}: latency, {interval}", phase_seconds):
                        r["latency_by_trigger"][interval] = bench.latency(engine, workload, settings.latency_rate,
                                                                          interval)
                first = next(iter(r["latency_by_trigger"].values()))
                r["latency_ms"] = {q: first.get(q) for q in ("p50", "p95", "p99", "max", "rows_measured")}
                engines[engine][workload] = r
        results["engines"] = engines
        results["state_growth"] = {}
        for engine in ENGINES:
            with _phase(progress, f"{engine} running_counts: state growth", phase_seconds):
                results["state_growth"][engine] = bench.state_growth(engine)
        with _phase(progress, "compare path: a batch's fixed cost", phase_seconds):
            results["fixed_cost"] = bench.fixed_cost()
        # The engine a migration lands on: its state store is meant to be incremental (the legacy
        # updateStateByKey visits every key each batch by design; its ratio is in state_growth).
        results["state_growth_ratio"] = results["state_growth"][STATE_GROWTH_TARGETED[0]]["ratio"]
    # The whole run (broker, Spark start, raw clients and every phase): issue 39 holds --quick to 5 minutes.
    results["run_seconds"] = round(time.monotonic() - started, 1)
    results["phase_seconds"] = phase_seconds
    results["targets"] = evaluate_targets(results)
    results["limits"] = limits(results)
    if baseline:
        results["baseline"] = baseline
    return results, publish(settings.out_dir, results)


def publish(out_dir: Path, results: dict[str, Any]) -> Path:
    """Write the results (:func:`compare.bench.report.write_results`) if every run's output equals the oracle.

    Raises:
        BenchDiffers: a throughput or latency run's output differed from the oracle (or was not checked). Nothing
            is published: ``latest.json`` and the timestamped files are not written; the results go to
            ``rejected-<time>.json`` for the diagnosis.
    """
    failed = unchecked_runs(results)
    if failed:  # a figure of a job that computes something else is no figure
        out_dir.mkdir(parents=True, exist_ok=True)
        kept = out_dir / f"rejected-{results['created'].replace(':', '').replace('-', '')[:15]}.json"
        kept.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        msg = (f"dmk bench: the output of {', '.join(failed)} differs from the oracle, so this run publishes nothing "
               f"(latest.json and README untouched; the figures are in {kept} for the diagnosis)")
        raise BenchDiffers(msg)
    return write_results(out_dir, results)


class BenchDiffers(KitError):
    """A bench run's output differed from the oracle: its figures measure a wrong job and are not published."""
