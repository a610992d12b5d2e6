"""The DStream engine: :class:`kit.engine.Engine` over :mod:`legacy.runner`.

A run is one StreamingContext hosting every job of a :class:`~kit.engine.DriverConfig`, with a
StreamingListener writing each completed batch to ``<out>/metrics/batches.jsonl`` (batch time, records,
scheduling and processing delay, and each output operation's time), which :meth:`LegacyRecord.batch_spans`
and :meth:`LegacyRecord.batch_phases` read.

Example::

    run = LEGACY.start(spark, config)          # config: a kit.engine.DriverConfig
    run.await_offsets(ends, timeout_s=120)
    run.stop()
    LEGACY.record(config.out_dir).batch_spans()
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from kit.engine import (
    BATCH_PHASE_COLUMNS,
    BATCH_SPAN_COLUMNS,
    BatchFileOutputs,
    BenchProfile,
    CheckpointReport,
    DriverConfig,
    Handover,
    parse_options,
    redacted_dsn,
    seconds,
    written_lines,
)
from kit.errors import ConfigError
from kit.layout import BATCHES_LOG
from kit.ranges import OffsetRange
from kit.workloads import Job
from legacy import workloads
from legacy._py2compat import PROVIDES as PYTHON2_PROVIDES
from legacy.handover import LEGACY_HANDOVER
from legacy.rate import MAX_RATE_PER_PARTITION
from legacy.runner import (
    LegacyRunConfig,
    attach_offset_store,
    await_progress,
    check_stream_and_offsets,
    create_context,
    export_outputs,
    max_rate,
    open_offset_store,
    read_progress,
    take_output_op_labels,
)

__all__ = ["LEGACY", "MODES", "LegacyEngine", "LegacyOptions", "LegacyRecord", "LegacyRun", "batch_listener"]

MODES: dict[str, dict[str, Any]] = {
    "direct": {"stream": "direct", "offsets": "checkpoint", "write_ahead_log": False},
    "direct-kafka-commit": {"stream": "direct", "offsets": "kafka", "write_ahead_log": False},
    "direct-zookeeper": {"stream": "direct", "offsets": "zookeeper", "write_ahead_log": False},
    "direct-sqlite": {"stream": "direct", "offsets": "sqlite", "write_ahead_log": False},
    "direct-postgres": {"stream": "direct", "offsets": "postgresql", "write_ahead_log": False},
    "receiver": {"stream": "receiver", "offsets": "kafka", "write_ahead_log": False},
    "receiver-wal": {"stream": "receiver", "offsets": "kafka", "write_ahead_log": True},
}
"""``dmk compare --legacy-mode`` → the stream, where offsets live, and the receiver write-ahead log (see
:mod:`legacy.runner`). ``direct`` keeps offsets only in the checkpoint; the other direct modes also commit them to a
Kafka group, ZooKeeper, or (one transaction with the outputs) SQLite / PostgreSQL; the receiver modes read through
a consumer group that auto-commits, with or without the receiver write-ahead log."""

@dataclasses.dataclass(frozen=True)
class LegacyOptions:
    """The DStream engine's own options of a run (:attr:`kit.engine.DriverConfig.options`), validated.

    Attributes:
        batch_seconds: the batch interval. Default 1.0.
        max_rate_per_partition: ``spark.streaming.kafka.maxRatePerPartition`` (records/s; None: uncapped).
        max_rate_by_input: input name → that input's own ``maxRatePerPartition`` (records/s), as a
            ``PerPartitionConfig`` gives spark-streaming-kafka-0-10 (:meth:`LegacyEngine.capped` with shares).
            Default: none (every input takes ``max_rate_per_partition``).
        stream: ``"direct"`` (default) or ``"receiver"`` (:data:`legacy.runner.STREAMS`).
        offsets: where offsets live (:data:`legacy.runner.OFFSET_STORES`). Default ``"checkpoint"``.
        write_ahead_log: the receiver write-ahead log. Default off.
        offset_store: where that store is. Redacted in a config file (a DSN may hold a password); the driver
            process gets the real one from its environment.
        job_name: the job's name in its offset store. Default: from the checkpoint directory.
        kafka_params: extra ``kafkaParams`` of ``createDirectStream``.
        fingerprint: the job code's fingerprint: a driver process restores its checkpoint only if it matches
            (:func:`legacy.kafka.get_or_create`). Default: none (fingerprint the factory).

    Raises:
        ConfigError: a value out of range, naming the option and what it takes.
    """

    batch_seconds: float = 1.0
    max_rate_per_partition: int | None = None
    max_rate_by_input: Mapping[str, int] = dataclasses.field(default_factory=dict)
    stream: str = "direct"
    offsets: str = "checkpoint"
    write_ahead_log: bool = False
    offset_store: str | None = None
    job_name: str | None = None
    kafka_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.batch_seconds, bool) or not isinstance(self.batch_seconds, int | float) \
                or not self.batch_seconds > 0:
            msg = f"the legacy option batch_seconds must be a number of seconds > 0, got {self.batch_seconds!r}"
            raise ConfigError(msg, field="batch_seconds", expected="> 0", actual=self.batch_seconds)
        cap = self.max_rate_per_partition
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            msg = (f"the legacy option max_rate_per_partition must be a whole number of records/s >= 1, or None "
                   f"(uncapped), got {cap!r}")
            raise ConfigError(msg, field="max_rate_per_partition", expected=">= 1 or None", actual=cap)
        rates = self.max_rate_by_input
        if not isinstance(rates, Mapping) or any(
            not isinstance(r, int) or isinstance(r, bool) or r < 1 for r in rates.values()
        ):
            msg = (f"the legacy option max_rate_by_input must map input names to whole numbers of records/s >= 1, "
                   f"got {rates!r}")
            raise ConfigError(msg, field="max_rate_by_input", expected="{input: >= 1}", actual=rates)
        check_stream_and_offsets(self.stream, self.offsets, named="the legacy option ")
        if not isinstance(self.write_ahead_log, bool):
            msg = f"the legacy option write_ahead_log must be true or false, got {self.write_ahead_log!r}"
            raise ConfigError(msg, field="write_ahead_log", expected="a bool", actual=self.write_ahead_log)
        if not isinstance(self.kafka_params, Mapping):
            msg = f"the legacy option kafka_params must be a mapping of kafkaParams, got {self.kafka_params!r}"
            raise ConfigError(msg, field="kafka_params", expected="a mapping", actual=self.kafka_params)

    def __repr__(self) -> str:
        shown = dataclasses.replace(self, offset_store=redacted_dsn(self.offset_store) if self.offset_store else None)
        fields = ", ".join(f"{f.name}={getattr(shown, f.name)!r}" for f in dataclasses.fields(self))
        return f"LegacyOptions({fields})"


_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
BATCH_TIME_PROPERTY = "spark.streaming.internal.batchTime"
"""The local property Spark Streaming's JobScheduler sets on every job of a batch: the batch time (ms)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch_listener(out: Path) -> Any:
    """A StreamingListener appending one JSON line per completed batch to ``out/metrics/batches.jsonl``."""
    from pyspark.streaming.listener import StreamingListener

    target = out / BATCHES_LOG
    target.parent.mkdir(parents=True, exist_ok=True)

    def option(value: int) -> int | None:  # Spark's Java API gives -1 for "not known"
        return int(value) if value >= 0 else None

    class Batches(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - Spark's names
            info = batchCompleted.batchInfo()
            row = {
                "batch_time_ms": int(info.batchTime().milliseconds()),
                "records": int(info.numRecords()),
                "scheduling_delay_ms": option(info.schedulingDelay()),
                "processing_delay_ms": option(info.processingDelay()),
                "total_delay_ms": option(info.totalDelay()),
                "completed_ms": _now_ms(),
                "output_ops": _output_ops(info, take_output_op_labels(int(info.batchTime().milliseconds()))),
            }
            with open(target, "a", encoding="utf-8") as log:
                log.write(json.dumps(row) + "\n")

    return Batches()


def _output_ops(info: Any, labels: list[str]) -> list[dict[str, Any]]:
    """A completed batch's output operations (one Spark job or more each): id, name, time taken (ms).

    The name is the kit's ``labels`` (what each did, in the order they ran) when there is one per operation,
    else Spark's own.
    """
    ops = info.outputOperationInfos()  # a java.util.Map of id -> JavaOutputOperationInfo
    ids = sorted(ops.keySet())
    names = labels if len(labels) == len(ids) else None
    rows = []
    for i, op_id in enumerate(ids):
        op = ops.get(op_id)
        started, ended = int(op.startTime()), int(op.endTime())
        rows.append({"id": int(op_id), "name": names[i] if names else f"output op {op_id} ({op.name()})",
                     "duration_ms": ended - started if started >= 0 and ended >= started else None})
    return rows


def _run_config(config: DriverConfig, options: LegacyOptions, checkpoint: str) -> LegacyRunConfig:
    return LegacyRunConfig(
        config.bootstrap_servers, config.topics, config.out_dir, checkpoint, config.require_dataset(), config.jobs,
        batch_seconds=options.batch_seconds, kafka_params={**config.kafka_security, **options.kafka_params},
        offsets=options.offsets,
        offset_store=options.offset_store, stream=options.stream, job_name=options.job_name,
        max_rate_by_input=options.max_rate_by_input,
    )


def _capped_context(sc: Any, run_config: LegacyRunConfig, store: Any, max_rate_per_partition: int | None) -> Any:
    """:func:`legacy.runner.create_context` with its direct streams capped at ``max_rate_per_partition``.

    The cap is in records/s per partition; None leaves the streams uncapped (an input of
    ``run_config.max_rate_by_input`` has its own). It is set only while the streams are created
    (:func:`legacy.runner.max_rate`).
    """
    with max_rate(sc, max_rate_per_partition or 0):
        return create_context(sc, run_config, store)


def settle_batches(run_config: LegacyRunConfig) -> int:
    """Batches after its last input a run waits for its jobs' last rows (0 if they come in that batch).

    The largest ``settle_ms`` of the run's jobs' legacy variants (a job of your own builder: 0) in batches, plus
    one: a window of 10 s over 1 s batches closed by the 10th batch after the last input's at the latest.

    Example:
        >>> config = LegacyRunConfig("b", {"nexmark": "t"}, "out", "ckpt", None, (("nexmark_q12", "default"),))
        >>> settle_batches(config), settle_batches(dataclasses.replace(config, jobs=(("nexmark_q1", "default"),)))
        (11, 0)
    """
    settle_ms = max((workloads.resolve(name, variant).settle_ms for name, variant in run_config.jobs), default=0)
    return -(-settle_ms // round(run_config.batch_seconds * 1000)) + 1 if settle_ms else 0


class LegacyRun:
    """A started StreamingContext of one run, its offset store and its batch log."""

    def __init__(self, ssc: Any, run_config: LegacyRunConfig, store: Any) -> None:
        self.ssc, self.run_config, self.store = ssc, run_config, store

    def await_offsets(
        self, end_offsets: Mapping[str, Mapping[int, int]], *, timeout_s: float, extra_batches: int = 2
    ) -> None:
        """Wait for the progress files to reach ``end_offsets``, then ``extra_batches`` batches more.

        A failed output operation fails the run at once (Spark itself would go on with the next batch). A job
        whose last rows come later than the next batch (a window emitting at its end: its variant's ``settle_ms``)
        is waited for: the extra batches then span that much batch time, and one more.
        """
        if extra_batches:
            extra_batches = max(extra_batches, settle_batches(self.run_config))
        await_progress(self.run_config.out_dir, end_offsets, timeout_s=timeout_s, extra_batches=extra_batches,
                       check=lambda: self.ssc.awaitTerminationOrTimeout(0.001),
                       after_completion=self.run_config.offsets == "kafka")

    def stop(self) -> None:
        """Stop the context (not the SparkContext) and write out, then close, the offset store."""
        try:
            self.ssc.stop(stopSparkContext=False, stopGraceFully=False)
        finally:
            if self.store is not None:
                try:
                    export_outputs(self.run_config, self.store)  # what was committed, also when the run failed
                finally:
                    self.store.close()


class LegacyEngine:
    """DStreams over the kit's Kafka streams (:mod:`legacy.kafka`), one StreamingContext per run."""

    name = "legacy"
    batches_by_clock = True
    cap_share = 1.0
    modes: Mapping[str, Mapping[str, Any]] = MODES
    python2_layer: str | None = PYTHON2_PROVIDES
    refused_script_inputs: Mapping[str, str] = {}
    bench = BenchProfile(
        latency_intervals=("1 s", "0.5 s"), latency_setting="1 s batches", latency_goal_ms=1_200.0,
        # Updating 1M keys outlasts a 1 s interval: 5 s batches do not queue (processing time, which is what is
        # measured, does not depend on the interval).
        state_interval="5 s",
        idle_what="idle batch", idle_goal_ms=200.0,
        idle_limit="an empty batch still runs updateStateByKey's tasks over the whole state and the output operations "
                   "(profile §2)",
        throughput_limit=(
            "a warm run spends about 15.1 CPU seconds on 1M records (the Python workers 8.5, the JVM 3.4, the "
            "broker 1.9, the driver's Python 1.4), the consumer that parses 4.4 on one core (its process 4.1, the "
            "broker 0.3), so on two cores the engine would need half its CPU per record to keep pace with it "
            "(changes.md §36). Every record passes through Python in a worker, as in that consumer, and through the "
            "JVM and a shuffle besides: per record, reading it from librdkafka 1.6 µs, the messageHandler 0.5 µs, "
            "the parse 5.4 µs (json.loads of the value 3.7 µs), the map-side combine 0.5 µs, in one process "
            "(profile §7)"),
        latency_limit=(
            "legacy p99 at {setting} batches: a batch with records took {batch_ms_median} ms and an idle one "
            "{idle_batch_ms_median} ms against a {setting} interval at {rate_rps} records/s, so batches queued "
            "(scheduling delay up to {scheduling_delay_ms_max} ms): the maximum throughput was measured with "
            "{cap}-record batches, where the fixed cost per batch is amortized."),
        state_growth_limit="updateStateByKey calls its function for every key in every batch, by design",
        # At 1 s batches capped to a tenth of the topic, legacy could not read faster than a tenth of the topic a
        # second; at 0.25 s batches queue, as micro-batches do (compare.bench.THROUGHPUT_INTERVALS).
        throughput_interval="0.25 s",
    )
    handover: Handover | None = LEGACY_HANDOVER

    def owns_checkpoint(self, location: str) -> bool:
        """Whether ``location`` is a directory with ``checkpoint-<time>`` files, or a URI.

        Spark's file system reads a URI, and only DStream checkpoints are read that way.
        """
        from legacy._checkpoint import checkpoint_files

        return _URI.match(location) is not None or bool(checkpoint_files(location))

    def inspect_checkpoint(
        self, location: str, master: str | None = None, *, row_counts: bool = False
    ) -> list[CheckpointReport]:
        """The checkpoint read with Spark's own reader (:func:`legacy.inspect.inspect_legacy_checkpoint`).

        A URI is read through a SparkContext on ``master``; a local directory needs one only with ``master``.
        """
        from kit.spark import spark_context
        from legacy.inspect import inspect_legacy_checkpoint

        sc = spark_context("dmk-checkpoint-inspect", master) if master or _URI.match(location) else None
        return [inspect_legacy_checkpoint(location, sc)]

    def resolve(self, workload: Any, variant: Any = "default") -> Job:
        """The job running ``variant`` of ``workload`` as a DStream job (:func:`legacy.workloads.resolve`)."""
        return workloads.resolve(workload, variant)

    def exactly_once(self, config: DriverConfig) -> bool:
        """The direct stream (offsets with the batch, in any store) is exactly-once; a receiver is at most once."""
        return self.options(config).stream == "direct"

    def options(self, config: DriverConfig) -> LegacyOptions:
        """``config.options`` as :class:`LegacyOptions` (parsed from a mapping, validated)."""
        return parse_options(LegacyOptions, self.name, config.options)

    def _with(self, config: DriverConfig, **changes: Any) -> DriverConfig:
        return dataclasses.replace(config, options=dataclasses.replace(self.options(config), **changes))

    def plain(self, config: DriverConfig) -> DriverConfig:
        """The direct stream with offsets in its checkpoint: no offset store, write-ahead log, name or fingerprint."""
        return self._with(config, stream="direct", offsets="checkpoint", write_ahead_log=False, offset_store=None,
                          job_name=None, fingerprint=None)

    def session(self, config: DriverConfig) -> Any:
        """A SparkContext with the run's rate caps and write-ahead log setting (read when receivers start)."""
        from kit.spark import spark_context

        options = self.options(config)
        cap = options.max_rate_per_partition
        conf: dict[str, object] = {MAX_RATE_PER_PARTITION: cap} if cap else {}
        if options.stream == "receiver" and cap:
            # One receiver reads every partition of every topic: the caps of all of them, in records/s.
            conf["spark.streaming.receiver.maxRate"] = config.partitions * sum(
                options.max_rate_by_input.get(name, cap) for name in config.topics)
        if options.write_ahead_log:
            conf["spark.streaming.receiver.writeAheadLog.enable"] = "true"
        return spark_context(config.app_name, config.master, {**config.spark_conf, **conf})

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> LegacyRun:
        """Create (or, with ``recover``, restore from the checkpoint) the run's StreamingContext and start it.

        A receiver stream cannot be restored (the bridge it read from lived in the dead driver): with
        ``recover`` it starts a new context in a fresh checkpoint directory, where its consumer group's
        committed offsets say.
        """
        from legacy.kafka import get_or_create

        sc = getattr(spark, "sparkContext", spark)
        options = self.options(config)
        checkpoint = config.checkpoint_dir
        if recover and options.stream == "receiver":
            checkpoint = str(Path(checkpoint) / f"start-{time.time_ns()}")
        run_config = _run_config(config, options, checkpoint)
        store = open_offset_store(run_config)
        try:
            attach_offset_store(run_config, store)

            def create() -> Any:
                return _capped_context(sc, run_config, store, options.max_rate_per_partition)

            if recover and options.stream != "receiver":
                ssc = get_or_create(checkpoint, create, fingerprint=options.fingerprint)
            else:
                ssc = create()
            ssc.addStreamingListener(batch_listener(Path(config.out_dir)))
            ssc.start()
        except BaseException:
            if store is not None:
                store.close()
            raise
        return LegacyRun(ssc, run_config, store)

    def paced(self, config: DriverConfig, interval: str) -> DriverConfig:
        """``config`` with batch interval ``interval`` (``"0.5 s"``)."""
        return self._with(config, batch_seconds=seconds(interval))

    def capped(
        self, config: DriverConfig, records_per_batch: float, shares: Mapping[str, float] | None = None
    ) -> DriverConfig:
        """``config`` with ``maxRatePerPartition`` letting at most ``records_per_batch`` through per batch.

        The rate (records/s per partition) is the batch's share of each partition over the batch interval, rounded
        down (a batch never reads more), at least 1. With ``shares``, each input's direct stream gets the rate of
        its share of the batch (``max_rate_by_input``), rounded to the nearest: a small input's rate is a few
        records/s, which rounding down could cut by a fifth, leaving its stream no headroom.
        """
        per_partition_s = config.partitions * self.options(config).batch_seconds
        by_input = {name: max(1, round(records_per_batch * share / per_partition_s))
                    for name, share in (shares or {}).items() if name in config.topics}
        return self._with(config, max_rate_per_partition=max(1, int(records_per_batch / per_partition_s)),
                          max_rate_by_input=by_input)

    def interval_s(self, config: DriverConfig) -> float:
        """The batch interval."""
        return self.options(config).batch_seconds

    def record(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> LegacyRecord:
        """The run's batch log, progress files and outputs under ``out_dir`` (:class:`LegacyRecord`)."""
        return LegacyRecord(out_dir, checkpoint_dir)


class LegacyRecord(BatchFileOutputs):
    """What a DStream run produced: its StreamingListener's batch log, progress files, outputs and late outputs.

    The checkpoint adds nothing: the progress files hold every batch, a dead receiver context's too.
    """

    def __init__(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> None:
        super().__init__(out_dir)

    def batch_spans(self, job: str | None = None) -> pd.DataFrame:
        """The batches of the run's context (every job shares them), from its StreamingListener's log.

        Processing starts when the batch's scheduling delay, its wait behind earlier batches, ends.
        """
        rows = []
        for b in written_lines(self.out_dir / BATCHES_LOG):
            processing = int(b["processing_delay_ms"] or 0)
            rows.append((b["batch_time_ms"], b["completed_ms"] - processing, b["completed_ms"], b["records"],
                         processing, int(b["scheduling_delay_ms"] or 0)))
        return pd.DataFrame(rows, columns=list(BATCH_SPAN_COLUMNS))

    def batch_phases(self, job: str | None = None) -> pd.DataFrame:
        """Per batch (every job shares them): the wait behind earlier batches, then each output operation.

        The phases are ``scheduling delay`` and the output operations by what they do (``write <output>``,
        ``offsets of <input>``, ``commit``); the read of Kafka and the transformations run inside the first
        output operation that needs them (a DStream is computed by its outputs; later ones reuse the cache).
        """
        rows = []
        for b in written_lines(self.out_dir / BATCHES_LOG):
            row: dict[str, Any] = {"batch": str(b["batch_time_ms"]), "records": b["records"],
                                   "scheduling delay": b["scheduling_delay_ms"]}
            for op in b.get("output_ops", []):
                row[op["name"]] = op["duration_ms"]
            rows.append(row)
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(BATCH_PHASE_COLUMNS))

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """The batch time Spark Streaming put on the job."""
        return properties.get(BATCH_TIME_PROPERTY)

    def processed_records(self) -> int:
        """Records of the batches the listener has logged."""
        return sum(row["records"] for row in written_lines(self.out_dir / BATCHES_LOG))

    def processed_ranges(self, job: str) -> list[OffsetRange]:
        """The ranges of the progress files: one per batch time.

        A regenerated batch replaces its file; a dead receiver context's batches count too.
        """
        frame = read_progress(self.out_dir)
        if frame.empty:
            return []
        return [OffsetRange(*r) for r in zip(frame["topic"], frame["partition"].astype(int),
                                              frame["from_offset"].astype(int), frame["until_offset"].astype(int),
                                              strict=True)]

    def late_dropped(self, job: str) -> int:
        """Rows of the job's ``<job>.late`` output."""
        rows = self.late_records(job)
        return 0 if rows is None else len(rows)


LEGACY = LegacyEngine()
"""The DStream engine."""
