"""The Structured Streaming engine: :class:`kit.engine.Engine` over :mod:`modern.runner`.

A run is one named streaming query per job; every progress a query reports is logged to
``<out>/progress/<query>.jsonl``, which :meth:`ModernRecord.batch_spans`, :meth:`ModernRecord.batch_phases` and
the measurements read.

Example::

    run = MODERN.start(spark, config)          # config: a kit.engine.DriverConfig
    run.await_offsets(ends, timeout_s=120)
    run.stop()
    MODERN.record(config.out_dir).batch_spans("running_counts")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from kit import layout
from kit.engine import (
    BATCH_PHASE_COLUMNS,
    BATCH_SPAN_COLUMNS,
    BatchFileOutputs,
    BenchProfile,
    CheckpointReport,
    DriverConfig,
    Handover,
    parse_options,
    seconds,
    written_lines,
)
from kit.errors import ConfigError
from kit.ranges import OffsetRange
from kit.spark import has_scheme
from kit.workloads import Job
from modern import workloads
from modern.runner import ModernRun, ModernRunConfig, late_dropped, read_progress

__all__ = ["MODERN", "ModernEngine", "ModernOptions", "ModernRecord"]

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property StreamExecution sets on every job of a query: the query's id."""
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property MicroBatchExecution sets on every job of a micro-batch: the batch id."""
PHASES = (
    ("latestOffset", "latestOffset (Kafka end offsets)"),
    ("walCommit", "walCommit (offset log)"),
    ("getBatch", "getBatch"),
    ("queryPlanning", "queryPlanning"),
    ("addBatch", "addBatch (read, process, state, sink)"),
    ("commitOffsets", "commitOffsets (commit log)"),
)
"""The progress's ``durationMs`` parts of a micro-batch, in the order they run, and their names in reports."""


@dataclasses.dataclass(frozen=True)
class ModernOptions:
    """The Structured Streaming engine's own options of a run (:attr:`kit.engine.DriverConfig.options`), validated.

    Attributes:
        trigger: processing-time trigger (``"0 seconds"``: as fast as possible), ``"availableNow"`` or
            ``"once"``. Default ``"0 seconds"``.
        source_options: extra Kafka source options (``maxOffsetsPerTrigger``...).
        max_offsets_by_input: input name → records per trigger of that input; a source reading several inputs
            gets the sum as its ``maxOffsetsPerTrigger`` (:meth:`ModernEngine.capped` with shares). Default: none
            (``source_options``' ``maxOffsetsPerTrigger`` for every source).
        initial_state: job name → Parquet file of the legacy job's last rows (``dmk cutover``).
        suppress: job name → output filter of a rewound cutover (``dmk cutover --rewind --suppress FILE``).
        connect: a Spark Connect server's URL (``sc://host:port``): the queries run there (:mod:`kit.connect`),
            ``master`` and ``spark_conf`` are the server's own. Default: none, a local session.

    Raises:
        ConfigError: a value out of range, naming the option and what it takes.
    """

    trigger: str = "0 seconds"
    source_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    max_offsets_by_input: Mapping[str, int] = dataclasses.field(default_factory=dict)
    initial_state: Mapping[str, str] = dataclasses.field(default_factory=dict)
    suppress: Mapping[str, str] = dataclasses.field(default_factory=dict)
    connect: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.trigger, str):
            msg = f"the modern option trigger must be text such as '1 second' or 'availableNow', got {self.trigger!r}"
            raise ConfigError(msg, field="trigger", expected="e.g. '1 second'", actual=self.trigger)
        if self.trigger not in ("availableNow", "once"):
            seconds(self.trigger)  # raises, naming the form it takes
        for name in ("source_options", "max_offsets_by_input", "initial_state", "suppress"):
            if not isinstance(getattr(self, name), Mapping):
                msg = f"the modern option {name} must be a mapping, got {getattr(self, name)!r}"
                raise ConfigError(msg, field=name, expected="a mapping", actual=getattr(self, name))
        caps = self.max_offsets_by_input
        if any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in caps.values()):
            msg = f"the modern option max_offsets_by_input must map input names to whole numbers >= 1, got {caps!r}"
            raise ConfigError(msg, field="max_offsets_by_input", expected="{input: >= 1}", actual=caps)


def _job_queries(out_dir: str | Path) -> list[str]:
    """The run's job queries with a progress log, by name (the dead-letter queries left out)."""
    return sorted(p.stem for p in layout.progress_logs(out_dir) if layout.dead_letters_input(p.stem) is None)


def _checkpointed_batches(checkpoint: Path) -> dict[int, list[tuple[dict, dict]]]:
    """Batch id → ``[(start, end)]`` per source, of the batches a query's checkpoint holds as committed."""
    from modern.inspect import inspect_modern_checkpoint

    if not (checkpoint / layout.OFFSETS).is_dir():
        return {}
    logged = {
        b.batch_id: (b.committed, [offset or {} for offset in b.offsets.values()])  # in the log's source order
        for b in inspect_modern_checkpoint(checkpoint, row_counts=False).batches
    }
    batches = {}
    for batch, (committed, end) in logged.items():
        start = logged.get(batch - 1)
        if not committed or (start is None and batch > 0):
            continue  # purged from the log: the progress events have it
        batches[batch] = [(start[1][i] if start else {}, e) for i, e in enumerate(end)]
    return batches


class ModernEngine:
    """Structured Streaming queries over the kit's Kafka source (:mod:`modern.kafka`), one per job."""

    name = "modern"
    batches_by_clock = False
    modes: Mapping[str, Mapping[str, Any]] = {}
    """A query has one way of running: its offsets and state always live in its checkpoint."""
    handover: Handover | None = None
    python2_layer: str | None = None
    refused_script_inputs: Mapping[str, str] = {
        "queue": "--input-kind queue cannot feed the modern job: PySpark has no MemoryStream (nor any in-memory "
                 "streaming source) to fill; feed its rewrite files instead, --input-kind queue,files, read with "
                 "format(\"text\") from {input_dir}",
    }
    bench = BenchProfile(
        latency_intervals=("0 seconds", "500 milliseconds"), latency_setting="default trigger",
        latency_goal_ms=500.0, state_interval="1 second",
        idle_what="idle trigger", idle_goal_ms=250.0,
        idle_limit=("an idle trigger asks the source for its latest offsets; a query with a watermark also runs a "
                    "no-data micro-batch when the watermark moves (profile §6)"),
        throughput_limit=(
            "a warm run spends about 15.7 CPU seconds on 1M records (the JVM 8.9, the Python workers 5.0: the "
            "source's readers and the parse UDF; the broker 1.7, the driver's Python 0.2), the consumer that parses "
            "4.5 on one core (its process 4.2, the broker 0.3), so on two cores the engine would need half its CPU "
            "per record to keep pace with it. A 100,000-record micro-batch took 612-1,135 ms (changes.md §36); "
            "fewer, larger micro-batches go faster: in one warm JVM of an earlier build, 1M records in 2, 10 and 40 "
            "micro-batches ran at 191,939, 111,276 and 55,571 records/s (profile §8)"),
        latency_limit=(
            "modern p99 with the {setting} trigger: a micro-batch took {batch_ms_median} ms (median) at {rate_rps} "
            "records/s (without records a query with no watermark runs none): a row waits for the micro-batch "
            "running when it arrives and then its own. Of a 2,800-record micro-batch's 470 ms, the read stage's "
            "tasks wait about 120 ms on their two Python workers (the reader, and the parse UDF, whose round "
            "trip costs about 80 ms even when every record is parsed in the JVM), the stateful stage takes 65 ms "
            "and about 200 ms pass between jobs: offset and commit logs, planning, the foreachBatch callback "
            "(profile §6)."),
        state_growth_limit="the state is in RocksDB with changelog checkpointing (the kit's default); what the "
                           "remaining growth is spent on was not profiled",
        # The engine a migration lands on: its state store is meant to be incremental.
        state_growth_targeted=True,
    )
    """A migration lands on Structured Streaming; ``dmk cutover`` reads the engine it leaves."""
    cap_share = 0.8
    """``maxOffsetsPerTrigger`` is split over partitions by lag, so a batch can reach further on some partitions
    than on others: 80 % of a batch keeps each within its even share."""

    def resolve(self, workload: Any, variant: Any = "default") -> Job:
        """The job running ``variant`` of ``workload`` as a query (:func:`modern.workloads.resolve`)."""
        return workloads.resolve(workload, variant)

    def owns_checkpoint(self, location: str) -> bool:
        """A local query checkpoint (``offsets/`` or ``metadata``), or a directory of them (one per query)."""
        from modern.inspect import list_query_checkpoints

        if has_scheme(location) or not Path(location).is_dir():
            return False
        directory = Path(location)
        return layout.is_query_checkpoint(directory) or bool(list_query_checkpoints(directory))

    def inspect_checkpoint(
        self, location: str, master: str | None = None, *, row_counts: bool = False
    ) -> list[CheckpointReport]:
        """The query checkpoint at ``location``, or each one under it.

        Read by :func:`modern.inspect.inspect_modern_checkpoint`. State rows are counted with ``row_counts``, in a
        session on ``master`` if given (else the active one).
        """
        from kit.spark import spark_session
        from modern.inspect import inspect_modern_checkpoint, list_query_checkpoints

        directory = Path(location)
        queries = list_query_checkpoints(directory)
        targets = [directory] if layout.is_query_checkpoint(directory) or not queries else queries
        spark = spark_session("dmk-checkpoint-inspect", master) if master and row_counts else None
        return [inspect_modern_checkpoint(str(t), spark, row_counts=row_counts) for t in targets]

    def options(self, config: DriverConfig) -> ModernOptions:
        """``config.options`` as :class:`ModernOptions` (parsed from a mapping, validated)."""
        return parse_options(ModernOptions, self.name, config.options)

    def plain(self, config: DriverConfig) -> DriverConfig:
        """``config`` as it is: a query's offsets and state live in its checkpoint, which is the run's own."""
        return dataclasses.replace(config, options=self.options(config))

    def exactly_once(self, config: DriverConfig) -> bool:
        """A query's offsets and its idempotent sinks commit with the batch: always exactly-once."""
        return True

    def session(self, config: DriverConfig) -> Any:
        """A SparkSession with the kit's defaults, or with the ``connect`` option one on that Spark Connect server.

        A Connect session runs with the server's master and settings: ``master`` and ``spark_conf`` (the event
        log's, in a compare run) are not applied, since a client cannot set a running server's static settings.

        Raises:
            ConnectError: the Connect server is unreachable or cannot run the kit (:func:`kit.connect.connect_session`).
        """
        connect = self.options(config).connect
        if connect:
            from kit.connect import connect_session

            return connect_session(connect)
        from kit.spark import spark_session

        return spark_session(config.app_name, config.master, config.spark_conf)

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> ModernRun:
        """Start every job's query; each continues from its ``checkpointLocation`` whatever ``recover`` says.

        A query always resumes its checkpoint.
        """
        options = self.options(config)
        run_config = ModernRunConfig(
            config.bootstrap_servers, config.topics, config.out_dir, config.checkpoint_dir, config.require_dataset(),
            config.jobs, trigger=options.trigger,
            source_options={**{f"kafka.{k}": v for k, v in config.kafka_security.items()}, **options.source_options},
            max_offsets_by_input=options.max_offsets_by_input, initial_state=options.initial_state,
            suppress=options.suppress,
        )
        return ModernRun(spark, run_config).start()

    def paced(self, config: DriverConfig, interval: str) -> DriverConfig:
        """``config`` with processing-time trigger ``interval`` (``"500 milliseconds"``)."""
        return dataclasses.replace(config, options=dataclasses.replace(self.options(config), trigger=interval))

    def capped(
        self, config: DriverConfig, records_per_batch: float, shares: Mapping[str, float] | None = None
    ) -> DriverConfig:
        """``config`` with ``maxOffsetsPerTrigger`` at ``records_per_batch`` (rounded down, at least 1).

        With ``shares``, each input's share of it, rounded to the nearest (``max_offsets_by_input``): a source
        reading several inputs takes their sum, which Spark splits over its partitions by lag. The other source
        options stay.
        """
        options = self.options(config)
        capped = {**options.source_options, "maxOffsetsPerTrigger": max(1, int(records_per_batch))}
        by_input = {name: max(1, round(records_per_batch * share)) for name, share in (shares or {}).items()
                    if name in config.topics}
        return dataclasses.replace(config, options=dataclasses.replace(
            options, source_options=capped, max_offsets_by_input=by_input))

    def interval_s(self, config: DriverConfig) -> float:
        """The processing-time trigger's interval (0 for ``availableNow``, ``once`` and ``0 seconds``)."""
        trigger = self.options(config).trigger
        return 0.0 if trigger in ("availableNow", "once") else seconds(trigger)

    def record(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> ModernRecord:
        """The run's progress logs under ``out_dir`` and its local checkpoint, if any (:class:`ModernRecord`)."""
        return ModernRecord(out_dir, checkpoint_dir)


class ModernRecord(BatchFileOutputs):
    """What a Structured Streaming run produced: each query's progress log and outputs, and its checkpoint when local.

    Spark counts the records a query drops as too late (:meth:`late_dropped`) without naming them, so
    :meth:`late_records` is None.
    """

    def __init__(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> None:
        super().__init__(out_dir)
        self.checkpoint_dir = checkpoint_dir

    def batch_spans(self, job: str | None = None) -> pd.DataFrame:
        """The micro-batches of ``job``'s query (default: the first job's), from its progress.

        ``batch_ms`` and ``started_ms`` are the trigger's start (``timestamp``); a micro-batch never waits
        behind another, so ``scheduling_ms`` is 0. The idle triggers Spark reported (no new data, so no
        micro-batch; at most one per ``spark.sql.streaming.noDataProgressEventInterval``) are rows without
        records. Progress events reach the listener after the batch commits,
        so a killed driver can lose the last one: with the checkpoint directory, a committed batch the progress lacks
        is taken from the query's offsets and commits logs (its records from the offsets, its start and end
        from the times the two files were written).
        """
        if job is None:
            queries = _job_queries(self.out_dir)
            job = queries[0] if queries else ""
        rows, reported = [], set()
        for p in read_progress(self.out_dir, job):
            started = pd.Timestamp(p["timestamp"]).value // 1_000_000
            duration = int(p.get("batchDuration", 0))
            rows.append((started, started, started + duration, int(p.get("numInputRows", 0)), duration, 0))
            reported.add(int(p["batchId"]))
        for p in read_progress(self.out_dir, job, idle=True):
            started = pd.Timestamp(p["timestamp"]).value // 1_000_000
            duration = int(p.get("batchDuration", 0))
            rows.append((started, started, started + duration, 0, duration, 0))
        if self.checkpoint_dir is not None:  # a local one (a URI's files are for Spark to read)
            checkpoint = self.checkpoint_dir / job
            for batch, sources in _checkpointed_batches(checkpoint).items():
                if batch in reported:
                    continue
                records = sum(int(until) - int(start.get(topic, {}).get(partition, 0))
                              for start, end in sources if isinstance(end, dict)  # Kafka: topic -> partitions
                              for topic, parts in end.items() for partition, until in parts.items())
                started = int((checkpoint / layout.OFFSETS / str(batch)).stat().st_mtime * 1000)
                ended = max(int((checkpoint / layout.COMMITS / str(batch)).stat().st_mtime * 1000), started)
                rows.append((started, started, ended, records, ended - started, 0))
        return pd.DataFrame(rows, columns=list(BATCH_SPAN_COLUMNS)).sort_values("started_ms", ignore_index=True)

    def batch_phases(self, job: str | None = None) -> pd.DataFrame:
        """Per micro-batch of ``job``'s query: its ``durationMs`` parts, then its state's update and commit time.

        The parts are :data:`PHASES`, in the order they run. The state times are summed over the state's
        tasks, which run in parallel: task time, not wall time.
        """
        if job is None:
            queries = _job_queries(self.out_dir)
            job = queries[0] if queries else ""
        rows = []
        for p in read_progress(self.out_dir, job):
            durations = p.get("durationMs", {})
            row: dict[str, Any] = {"batch": f"{p['id']}/{p['batchId']}", "records": int(p.get("numInputRows", 0))}
            row |= {label: durations.get(key) for key, label in PHASES}
            state = p.get("stateOperators") or []
            if state:
                row["state updates (task time)"] = sum(
                    s.get("allUpdatesTimeMs", 0) + s.get("allRemovalsTimeMs", 0) for s in state)
                row["state commit (task time)"] = sum(s.get("commitTimeMs", 0) for s in state)
            rows.append(row)
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(BATCH_PHASE_COLUMNS))

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """``<query id>/<batch id>`` from the properties Structured Streaming puts on a micro-batch's jobs."""
        query, batch = properties.get(QUERY_ID_PROPERTY), properties.get(BATCH_ID_PROPERTY)
        return f"{query}/{batch}" if query and batch is not None else None

    def processed_records(self) -> int:
        """Input rows of the job query that is furthest behind."""
        totals = [
            sum(p.get("numInputRows", 0) for p in written_lines(layout.progress_log(self.out_dir, name)))
            for name in _job_queries(self.out_dir)
        ]
        return min(totals) if totals else 0

    def processed_ranges(self, job: str) -> list[OffsetRange]:
        """The ranges of every batch id of ``job``'s query (the last report of a batch: a re-run counts once).

        Progress events reach the listener after the batch commits, so a killed driver can lose the last one;
        the checkpoint's offsets and commits logs have it (but keep only the newest batches): both are used.
        """
        batches = {
            p["batchId"]: [(s.get("startOffset") or {}, s.get("endOffset") or {}) for s in p.get("sources", [])]
            for p in read_progress(self.out_dir, job)
        }
        if self.checkpoint_dir is not None:  # a local one (a URI's files are for Spark to read)
            batches.update(_checkpointed_batches(self.checkpoint_dir / job))
        ranges = []
        for sources in batches.values():
            # A query that reads its topic twice (windowed_counts unions two aggregations, each with its own scan)
            # lists the same range once per scan: one batch reading a record twice is not a record re-processed.
            ranges += [OffsetRange(*r) for r in sorted({
                (topic, int(partition), int(start.get(topic, {}).get(partition, 0)), int(until))
                for start, end in sources for topic, parts in end.items() for partition, until in parts.items()
            })]
        return ranges

    def late_dropped(self, job: str) -> int:
        """Spark's ``numRowsDroppedByWatermark`` of the job's query (:func:`modern.runner.late_dropped`)."""
        return late_dropped(self.out_dir, job)


MODERN = ModernEngine()
"""The Structured Streaming engine."""
