"""Run legacy workloads: build their DStreams over Kafka streams, write outputs, commit offsets, tell when done.

The runner owns everything a builder must not do: the StreamingContext and its checkpoint, the Kafka
streams, the idempotent sinks, the offset stores, start, stop and waiting. Output layout under ``out_dir``::

    <job>/                    the job's rows (kit.sink batch files; batch = batch time in ms)
    <job>.late/               events the job dropped as too late (event_id, topic, partition, offset, detail)
    dead_letters.<input>/     malformed records of an input: topic, partition, offset, reason (keyed files the
                              parse writes, or batch files in the transactional modes and on a cluster)
    progress.<input>/         per batch: topic, partition, from_offset, until_offset (written last)

``<job>`` is the workload name, or ``<workload>.<variant>`` for a non-default variant. Every output is keyed
by batch time, so batches a restarted driver regenerates from its checkpoint replace their earlier files.

Where offsets live (``LegacyRunConfig.offsets``; the stream is ``"direct"`` unless said):

* ``checkpoint`` — only in the StreamingContext checkpoint (restart with :func:`legacy.kafka.get_or_create`).
* ``kafka`` — also committed to the Kafka consumer group :attr:`LegacyRunConfig.consumer` with
  ``commitAsync`` after the batch's outputs (Spark 0-10's pattern; at-least-once).
* ``zookeeper`` — also saved to ZooKeeper (``/consumers/<consumer>/offsets/<topic>/<partition>``) after the
  outputs (at-least-once).
* ``sqlite`` / ``postgresql`` — the batch's outputs and its offsets are written in **one transaction**
  (table :data:`OUTPUTS_TABLE` next to ``dmk_offsets``), and a batch whose offsets are already stored is
  skipped: exactly-once whatever re-runs it. :func:`export_outputs` writes the committed outputs as batch
  files.
* ``stream="receiver"`` (offsets ``kafka`` only) — a receiver stream (:mod:`legacy._receiver`) reading as
  group ``consumer`` and auto-committing, as 2.4's high-level consumer did. Its context cannot be restored
  from a checkpoint (the bridge it reads from lived in the old driver), so a restart creates a new context:
  state starts empty, and records the dead driver had received but not processed are lost. The receiver
  write-ahead log (``spark.streaming.receiver.writeAheadLog.enable``) only replays blocks into a *restored*
  context, so it cannot help here.

A fresh context in the store modes starts each partition at its stored offset, or at the beginning when none
is stored. A context restored with ``get_or_create`` continues from its checkpoint, and the stores make the
batches it regenerates harmless (the transaction skips them; the other modes rewrite the same files).

Example::

    config = LegacyRunConfig(bootstrap_servers="127.0.0.1:9092", topics={"events": "events"},
                             out_dir="out", checkpoint_dir="ckpt", dataset=spec,
                             jobs=(("running_counts", "default"),), offsets="sqlite")
    store = open_offset_store(config)
    attach_offset_store(config, store)
    ssc = create_context(sc, config, store)
    ssc.start()
    await_progress(config.out_dir, {"events": {0: 2500, 1: 2500}}, timeout_s=120)
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    export_outputs(config, store)
    store.close()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from kit import layout
from kit.dataset import DatasetSpec
from kit.errors import ConfigError, RunTimeout
from kit.nexmark import NexmarkSpec
from kit.security import redacted_repr
from kit.sink import batch_path, encode_batch, write_batch, write_encoded
from kit.spark import on_this_host
from kit.workloads import job_id
from legacy.errors import LegacyError
from legacy.kafka import KafkaUtils, TopicAndPartition
from legacy.offsets import OFFSETS_TABLE
from legacy.rate import MAX_RATE_PER_PARTITION
from legacy.workloads import DEAD_LETTER_COLUMNS, Source, resolve

__all__ = [
    "OFFSET_STORES",
    "OUTPUTS_TABLE",
    "STREAMS",
    "LegacyRunConfig",
    "RunTimeout",
    "attach_offset_store",
    "await_progress",
    "check_stream_and_offsets",
    "create_context",
    "export_committed_outputs",
    "export_outputs",
    "max_rate",
    "take_output_op_labels",
    "job_id",
    "open_offset_store",
    "read_progress",
]

OFFSET_STORES = ("checkpoint", "kafka", "zookeeper", "sqlite", "postgresql")
"""Where a run keeps its offsets (see the module docstring)."""
TRANSACTIONAL = ("sqlite", "postgresql")
"""The offset stores written in one transaction with the batch's outputs."""
STREAMS = ("direct", "receiver")
OUTPUTS_TABLE = "dmk_outputs"
"""Where the transactional modes keep outputs: ``consumer, output, batch, payload`` (a batch file's bytes)."""



def check_stream_and_offsets(stream: str, offsets: str, named: str = "") -> None:
    """Refuse a ``stream`` not in :data:`STREAMS` or ``offsets`` not in :data:`OFFSET_STORES`.

    ``named``: how the message names the two settings' owner (``"the legacy option "``).

    Raises:
        ConfigError: naming the setting and what it takes.
    """
    if offsets not in OFFSET_STORES:
        msg = f"{named}offsets must be one of {', '.join(OFFSET_STORES)}, got {offsets!r}"
        raise ConfigError(msg, field="offsets", expected=OFFSET_STORES, actual=offsets)
    if stream not in STREAMS:
        msg = f"{named}stream must be one of {', '.join(STREAMS)}, got {stream!r}"
        raise ConfigError(msg, field="stream", expected=STREAMS, actual=stream)

@dataclass(frozen=True)
class LegacyRunConfig:
    """One legacy run: which jobs, over which topics, writing where, keeping offsets where.

    Attributes:
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        out_dir: output root (see the module docstring).
        checkpoint_dir: the StreamingContext's checkpoint directory.
        dataset: the spec of the replayed dataset.
        jobs: ``(workload, variant)`` pairs; all share one StreamingContext and one read of each topic.
        batch_seconds: batch interval. Default 1.0.
        kafka_params: extra ``kafkaParams`` for ``createDirectStream``. Default: none.
        offsets: where offsets live, one of :data:`OFFSET_STORES`. Default ``"checkpoint"``.
        offset_store: where that store is: ZooKeeper hosts, the SQLite file (default
            ``<out_dir>/offsets.sqlite``), the PostgreSQL DSN; for ``kafka``, the consumer group (default
            :attr:`consumer`).
        stream: ``"direct"`` (default) or ``"receiver"`` (needs ``offsets="kafka"``).
        job_name: the job's name in its store (consumer, group). Default ``dmk-<checkpoint dir name>``.
        max_rate_by_input: input name → ``spark.streaming.kafka.maxRatePerPartition`` of that input's direct
            stream (records/s), where it differs from the context's: what a ``PerPartitionConfig`` gives
            spark-streaming-kafka-0-10's streams. Default: none (every stream takes the context's).

    Raises:
        ConfigError: an unknown ``offsets`` or ``stream``, a receiver without ``offsets="kafka"``, or a
            ZooKeeper or PostgreSQL store without ``offset_store``.
    """

    __repr__ = redacted_repr  # kafkaParams / source options may hold TLS/SASL secrets

    bootstrap_servers: str
    topics: Mapping[str, str]
    out_dir: str
    checkpoint_dir: str
    dataset: DatasetSpec | NexmarkSpec
    jobs: tuple[tuple[str, str], ...]
    batch_seconds: float = 1.0
    kafka_params: Mapping[str, Any] = field(default_factory=dict)
    offsets: str = "checkpoint"
    offset_store: str | None = None
    stream: str = "direct"
    job_name: str | None = None
    max_rate_by_input: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_stream_and_offsets(self.stream, self.offsets)
        if self.stream == "receiver" and self.offsets != "kafka":
            msg = (
                "a receiver stream keeps its offsets in its Kafka consumer group: "
                f"use offsets='kafka', not {self.offsets!r}"
            )
            raise ConfigError(msg, field="offsets", expected="kafka", actual=self.offsets)
        if self.offsets in ("zookeeper", "postgresql") and not self.offset_store:
            where = "the ZooKeeper hosts (host:port)" if self.offsets == "zookeeper" else "a PostgreSQL DSN"
            msg = f"offsets={self.offsets!r} needs offset_store: {where}"
            raise ConfigError(msg, field="offset_store", expected=where, actual=None)

    @property
    def consumer(self) -> str:
        """The job's name in its offset store: the Kafka group, the ZooKeeper node, the SQL ``consumer``."""
        if self.offsets == "kafka" and self.offset_store:
            return self.offset_store
        return self.job_name or f"dmk-{Path(self.checkpoint_dir).name}"

    @property
    def run_key(self) -> str:
        """Names this run's registrations in the driver process (its output root)."""
        return str(Path(self.out_dir).resolve())


def _record(message: Any) -> tuple:
    return (message.topic, message.partition, message.offset, message.timestamp, message.message)


def _raw_bytes(value: bytes | None) -> bytes | None:
    return value


def _ms(time_: Any) -> int:
    return round(time_.timestamp() * 1000)


# -- offset stores -----------------------------------------------------------------------------------------


def open_offset_store(config: LegacyRunConfig) -> Any:
    """The offset store ``config`` names, opened; None for ``checkpoint`` and for receiver streams.

    A receiver stream's consumer group keeps its offsets. Close the store after the run.

    Raises:
        OffsetStoreUnavailable: the store cannot be reached.
    """
    from legacy.offsets import SqlOffsetStore, open_store

    if config.offsets == "checkpoint" or config.stream == "receiver":
        return None
    if config.offsets == "kafka":
        return open_store("kafka", config.consumer, config.consumer, bootstrap_servers=config.bootstrap_servers)
    if config.offsets == "sqlite" and not config.offset_store:
        Path(config.out_dir).mkdir(parents=True, exist_ok=True)
    where = config.offset_store or str(Path(config.out_dir) / "offsets.sqlite")
    store = open_store(config.offsets, where, config.consumer)
    if config.offsets not in TRANSACTIONAL:
        return store
    store = cast(SqlOffsetStore, store)  # what open_store opens for the SQL kinds, the TRANSACTIONAL ones
    try:
        store.create_table(OUTPUTS_TABLE, "consumer TEXT NOT NULL, output TEXT NOT NULL, batch BIGINT NOT NULL, "
                                          "payload {blob} NOT NULL, PRIMARY KEY (consumer, output, batch)")
    except BaseException:
        store.close()
        raise
    return store


# Functions given to foreachRDD are pickled into the checkpoint, and cloudpickle copies the module globals a
# nested function uses; these registries are therefore reached only through the top-level functions below.
_STORES: dict[str, Any] = {}
_PENDING: dict[tuple[str, int], dict[str, Any]] = {}
_PENDING_LOCK = threading.Lock()
_OUTPUT_OPS: dict[int, list[str]] = {}
_KEPT_OUTPUT_OPS = 1000


def _started_output_op(batch_ms: int, label: str) -> None:
    """Note that the batch's next output operation is ``label`` (they run one after another, in id order)."""
    with _PENDING_LOCK:
        _OUTPUT_OPS.setdefault(batch_ms, []).append(label)
        while len(_OUTPUT_OPS) > _KEPT_OUTPUT_OPS:  # no listener takes them: keep the newest batches only
            del _OUTPUT_OPS[min(_OUTPUT_OPS)]


def take_output_op_labels(batch_ms: int) -> list[str]:
    """What each output operation of batch ``batch_ms`` did, in the order they ran (once; then forgotten).

    ``write <output>``, ``offsets of <input>``, ``commit``: Spark names each of them after PySpark's
    ``callForeachRDD``, which does not tell them apart.
    """
    with _PENDING_LOCK:
        return _OUTPUT_OPS.pop(batch_ms, [])


def attach_offset_store(config: LegacyRunConfig, store: Any) -> None:
    """Make ``store`` the one the output functions of ``config``'s run use in this driver process.

    Call it before :func:`create_context` or ``get_or_create``: a context restored from a checkpoint finds its
    store this way.
    """
    if store is None:
        _STORES.pop(config.run_key, None)
    else:
        _STORES[config.run_key] = store


def _store_of(run: str) -> Any:
    store = _STORES.get(run)
    if store is None:
        msg = (
            f"no offset store is attached for the run writing to {run}: call legacy.runner.attach_offset_store("
            "config, open_offset_store(config)) before creating or restoring the StreamingContext"
        )
        raise LegacyError(msg)
    return store


def _new_batch() -> dict[str, Any]:
    # outputs: (name, frame) held for the commit (transactional modes); ranges: input → offset ranges;
    # written: the outputs that completed.
    return {"outputs": [], "ranges": {}, "written": set()}


def _pending(run: str, batch_ms: int) -> dict[str, Any]:
    """The batch's entry, filled by its output operations and taken by its commit."""
    with _PENDING_LOCK:
        return _PENDING.setdefault((run, batch_ms), _new_batch())


def _take_pending(run: str, batch_ms: int) -> dict[str, Any]:
    with _PENDING_LOCK:
        return _PENDING.pop((run, batch_ms), None) or _new_batch()


def export_outputs(config: LegacyRunConfig, store: Any) -> int:
    """Write the outputs a transactional run committed to its database as batch files under ``out_dir``.

    The files have the layout of the module docstring, so they read like any other run's.

    Returns:
        The batch files written; 0 in the other modes, whose outputs are files already.
    """
    if config.offsets not in TRANSACTIONAL:
        return 0
    return export_committed_outputs(store, config.out_dir)


def export_committed_outputs(store: Any, out_dir: str | Path) -> int:
    """Write every output batch ``store`` holds for its consumer as batch files under ``out_dir``.

    ``store`` is a SQL offset store. Older copies of the files are replaced; returns the number of files written.
    """
    rows = store.query(f"SELECT output, batch, payload FROM {OUTPUTS_TABLE} WHERE consumer = ?", (store.consumer,))
    for output, batch, payload in rows:
        write_encoded(Path(out_dir) / output, int(batch), bytes(payload))
    return len(rows)


def _from_offsets(config: LegacyRunConfig, store: Any) -> dict[str, dict | None]:
    """Per input, the ``fromOffsets`` a fresh context starts at: the stored offsets, the beginning elsewhere."""
    if store is None:
        return {name: None for name in config.topics}
    from kit.kafka import Kafka

    stored = store.load(list(config.topics.values()))
    starts: dict[str, dict | None] = {}
    with Kafka(config.bootstrap_servers) as kafka:
        for name, topic in config.topics.items():
            starts[name] = {
                TopicAndPartition(tp.topic, tp.partition): stored.get(tp, begin)
                for tp, begin in kafka.beginning_offsets(topic).items()
            }
    return starts


# -- output operations -------------------------------------------------------------------------------------


def _batch_writer(run: str, directory: Path, columns: tuple[str, ...], transactional: bool) -> Any:
    """A ``foreachRDD`` function writing a DStream's rows as one batch file per batch time.

    In the transactional modes it holds them for the batch's commit instead.

    A plain function, not a callable object: PySpark's ``foreachRDD`` inspects ``func.__code__``.
    """
    target, names = str(directory), list(columns)

    def write(time_: Any, rdd: Any) -> None:
        _started_output_op(_ms(time_), f"write {Path(target).name}")
        _write_rows(run, target, names, transactional, _ms(time_), rdd.collect())

    return write


def _write_rows(run: str, target: str, names: list[str], transactional: bool, batch_ms: int, rows: list) -> None:
    frame = pd.DataFrame(rows, columns=names)
    name, batch = Path(target).name, _pending(run, batch_ms)
    if transactional:
        batch["outputs"].append((name, frame))
    else:
        write_batch(target, batch_ms, frame)
    batch["written"].add(name)


def _late_row(item: Any) -> tuple:
    event, detail = item if isinstance(item, tuple) else (item, None)
    # A Nexmark event has no event_id (a bid has none at all): its coordinates say which record it was.
    return (event.get("event_id"), event["topic"], event["partition"], event["offset"], detail)


class _Received:
    """A run of consecutive offsets a receiver batch holds on one partition, shaped like Spark's ``OffsetRange``."""

    def __init__(self, topic: str, partition: int, first: int, until: int) -> None:
        self.topic, self.partition, self.fromOffset, self.untilOffset = topic, partition, first, until


def _position(record: tuple) -> tuple[str, int, int]:
    return record[0], record[1], record[2]


def _received_ranges(rdd: Any) -> list[_Received]:
    """The runs of consecutive offsets per partition in a receiver batch.

    Receivers have no offset ranges; a gap inside a batch shows as two runs.
    """
    runs: list[_Received] = []
    for topic, partition, offset in sorted(set(rdd.map(_position).collect())):  # a record twice counts once
        if runs and (runs[-1].topic, runs[-1].partition, runs[-1].untilOffset) == (topic, partition, offset):
            runs[-1].untilOffset += 1
        else:
            runs.append(_Received(topic, partition, offset, offset + 1))
    return runs


def _range_collector(run: str, name: str, receiver: bool) -> Any:
    """A ``foreachRDD`` function noting input ``name``'s offset ranges of the batch, for its commit."""

    def collect(time_: Any, rdd: Any) -> None:
        _started_output_op(_ms(time_), f"offsets of {name}")
        _note_ranges(run, name, _ms(time_), _received_ranges(rdd) if receiver else rdd.offsetRanges())

    return collect


def _note_ranges(run: str, name: str, batch_ms: int, ranges: list) -> None:
    _pending(run, batch_ms)["ranges"][name] = [(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in ranges]


def _slide_ms(stream: Any) -> int:
    return round(stream._slideDuration * 1000)  # PySpark's own (seconds, from the JVM DStream)


def _zero_time_ms() -> int:
    """The running streaming context's zero time.

    Spark generates a DStream's RDD at batch time ``t`` only if ``t - zero`` is a multiple of its slide
    (``DStream.isTimeValid``).
    """
    from pyspark import SparkContext

    active = SparkContext._jvm.org.apache.spark.streaming.StreamingContext.getActive()  # type: ignore[union-attr]
    return int(active.get().graph().zeroTime().milliseconds())


def _committer(
    run: str, offsets: str, streams: Mapping[str, Any], progress: Mapping[str, Path], outputs: Mapping[str, int]
) -> Any:
    """The batch's last output operation: check its outputs completed, commit its offsets, write progress.

    Every output of the batch must have completed. The offsets are committed where the run keeps them
    (receivers: their group commits by itself).

    ``outputs`` maps each output to its DStream's slide: a windowed output sliding slower than the batches
    has no output operation in the batches between its slides (Spark generates no job), so it is awaited
    only at its own batch times.
    """
    handles = dict(streams) if offsets == "kafka" else {}  # direct streams pickle as commitAsync handles
    targets = {name: str(path) for name, path in progress.items()}
    slides = dict(outputs)

    def commit(time_: Any, rdd: Any) -> None:
        batch_ms, zero = _ms(time_), _zero_time_ms()
        _started_output_op(batch_ms, "commit")
        due = [name for name, slide in slides.items() if (batch_ms - zero) % slide == 0]
        _commit_batch(run, offsets, handles, targets, due, batch_ms)

    return commit


def _commit_batch(
    run: str, offsets: str, handles: Mapping[str, Any], progress: Mapping[str, str], outputs: Iterable[str],
    batch_ms: int,
) -> None:
    batch = _take_pending(run, batch_ms)
    ranges: dict[str, list] = batch["ranges"]
    # Spark runs a batch's later output operations even when an earlier one failed: commit nothing then.
    missing = sorted(set(outputs) - batch["written"]) + sorted(set(progress) - set(ranges))
    if missing:
        msg = (
            f"batch {batch_ms}: {', '.join(missing)} did not complete, so its offsets are not committed and the "
            "batch is not marked done; the error of the failed output operation is in the driver log"
        )
        raise LegacyError(msg)
    every = [r for name in sorted(ranges) for r in ranges[name]]
    if offsets in TRANSACTIONAL:
        _commit_transaction(_store_of(run), batch_ms, every, batch["outputs"])
    elif offsets == "zookeeper":
        _store_of(run).save(every)
    elif offsets == "kafka":
        for name, stream in handles.items():
            stream.commitAsync(ranges[name])  # sent when the next batch is generated, as in Spark
    columns = ["topic", "partition", "from_offset", "until_offset"]
    for name, target in progress.items():
        write_batch(target, batch_ms, pd.DataFrame(ranges[name], columns=columns))


def _commit_transaction(store: Any, batch_ms: int, ranges: list, outputs: list) -> None:
    """Write a batch's outputs and offsets in one transaction, unless the batch was committed before.

    One case is neither done nor next: a context restored from a checkpoint written before its last batch
    was committed regenerates that batch time with a longer range (Spark recomputes batches missing from
    the checkpoint). Its state comes from the checkpoint, so the new outputs replace the batch's committed
    ones and its offsets are moved back to where the range starts, then saved, all in the same
    transaction. Any other gap or overlap raises ``NonContiguousOffsets``.
    """
    mark = store.placeholder
    emitted = time.time_ns() // 1_000_000
    with store.transaction(batch_ms, ranges) as tx:
        if tx.already_done:
            return
        stored = tx.stored_offsets()
        if any(stored.get((t, p), first) != first for t, p, first, _ in ranges):
            committed = tx.execute(
                f"SELECT COUNT(*) FROM {OUTPUTS_TABLE} WHERE consumer = {mark} AND batch = {mark}",
                (store.consumer, batch_ms),
            ).fetchone()[0]
            if committed:
                tx.executemany(
                    f"UPDATE {OFFSETS_TABLE} SET until_offset = {mark} "
                    f'WHERE consumer = {mark} AND topic = {mark} AND "partition" = {mark}',
                    [(first, store.consumer, t, p) for t, p, first, _ in ranges],
                )
        tx.executemany(
            f"INSERT INTO {OUTPUTS_TABLE} (consumer, output, batch, payload) VALUES ({mark}, {mark}, {mark}, {mark}) "
            "ON CONFLICT (consumer, output, batch) DO UPDATE SET payload = excluded.payload",
            [(store.consumer, name, batch_ms, encode_batch(batch_ms, frame, emitted)) for name, frame in outputs],
        )
        tx.save_offsets()


# -- the context -------------------------------------------------------------------------------------------


def _on_topic(topic: str) -> Any:
    def keep(record: tuple) -> bool:
        return record[0] == topic

    return keep


def _direct_inputs(ssc: Any, config: LegacyRunConfig, store: Any) -> dict[str, Any]:
    params = {"metadata.broker.list": config.bootstrap_servers, "auto.offset.reset": "smallest", **config.kafka_params}
    if config.offsets == "kafka":
        params["group.id"] = config.consumer
    starts = _from_offsets(config, store)
    streams = {}
    for name, topic in config.topics.items():
        with max_rate(ssc.sparkContext, config.max_rate_by_input.get(name)):
            streams[name] = KafkaUtils.createDirectStream(
                ssc, [topic], params, fromOffsets=starts[name], valueDecoder=_raw_bytes, messageHandler=_record
            )
    return streams


@contextmanager
def max_rate(sc: Any, records_per_s: int | None) -> Iterator[None]:
    """``spark.streaming.kafka.maxRatePerPartition`` at ``records_per_s`` (None: as it is) for the block.

    A direct stream reads its rate settings from the context's conf when it is created: this is the stream's own
    cap (spark-streaming-kafka-0-10's ``PerPartitionConfig``), and a shared SparkContext keeps its setting.
    """
    if records_per_s is None:
        yield
        return
    conf = sc._conf
    previous = conf.get(MAX_RATE_PER_PARTITION, "0")
    conf.set(MAX_RATE_PER_PARTITION, str(records_per_s))
    try:
        yield
    finally:
        conf.set(MAX_RATE_PER_PARTITION, previous)


def _receiver_inputs(ssc: Any, config: LegacyRunConfig) -> dict[str, Any]:
    """One receiver for every input topic (as a 2.4 job had), split per input by topic."""
    from pyspark import StorageLevel

    from legacy._receiver import create_receiver_stream

    wal = ssc.sparkContext.getConf().get("spark.streaming.receiver.writeAheadLog.enable", "false") == "true"
    stream = create_receiver_stream(
        ssc, config.bootstrap_servers, config.consumer, sorted(config.topics.values()),
        # With the write-ahead log, the log is the second copy (Spark's advice); without it, 2.4's default.
        storage_level=StorageLevel.MEMORY_AND_DISK if wal else StorageLevel.MEMORY_AND_DISK_2,
        key_decoder=_raw_bytes, value_decoder=_raw_bytes, message_handler=_record,
        auto_offset_reset="smallest",
        # A restarted driver's consumer gets the partitions once the dead one's session has expired.
        kafka_settings={"session_timeout_ms": 6000, "heartbeat_interval_ms": 1500, "auto_commit_interval_ms": 1000},
    )
    return {name: stream.filter(_on_topic(topic)) for name, topic in config.topics.items()}


def create_context(sc: Any, config: LegacyRunConfig, store: Any = None) -> Any:
    """A StreamingContext with every job of ``config`` attached (usable as ``get_or_create``'s factory).

    Args:
        sc: the SparkContext.
        config: the run.
        store: the run's open offset store (:func:`open_offset_store`, attached with
            :func:`attach_offset_store`); None for ``offsets="checkpoint"`` and receiver streams.

    Raises:
        ConfigError: unknown workload or variant, or a job needing an input ``config.topics`` lacks.
        LegacyError: a store mode whose store is not attached.
    """
    from pyspark.streaming import StreamingContext

    out, run = Path(config.out_dir), config.run_key
    transactional = config.offsets in TRANSACTIONAL
    if config.offsets in ("zookeeper", *TRANSACTIONAL):
        _store_of(run)
    store = store if store is not None else _STORES.get(run)
    # pyspark types batchDuration as int, but takes fractional seconds (it sends int(seconds * 1000) ms).
    ssc = StreamingContext(sc, config.batch_seconds)  # type: ignore[arg-type]
    ssc.checkpoint(str(config.checkpoint_dir))
    receiver = config.stream == "receiver"
    raw = _receiver_inputs(ssc, config) if receiver else _direct_inputs(ssc, config, store)
    # Executors on this host write the dead letters as their parse finds them (one pass over the records);
    # elsewhere they cannot write the driver's directory, and a transactional run writes every output in its
    # transaction: there the dead letters are a DStream, written by an output operation.
    in_parse = on_this_host(sc.master) and not transactional
    source = Source(raw, config.dataset, dead_letter_root=str(out) if in_parse else None)
    written: dict[str, int] = {}  # every output directory a batch writes → its slide (ms), checked at the commit
    for workload, variant in config.jobs:
        job = resolve(workload, variant)
        job.spec.check_inputs(config.topics)
        late_before = len(source.late)
        rows = job.build(ssc, source)
        name = job.name
        rows.foreachRDD(_batch_writer(run, out / name, job.spec.columns, transactional))
        written[name] = _slide_ms(rows)
        reported = source.late[late_before:]
        if reported:
            # One writer per job: its batch files are per batch time, so two writers would overwrite.
            late = ssc.union(*reported)
            late_columns = ("event_id", "topic", "partition", "offset", "detail")
            late_dir = layout.late(out, name)
            late.map(_late_row).foreachRDD(_batch_writer(run, late_dir, late_columns, transactional))
            written[late_dir.name] = _slide_ms(late)
    for name, dead in source.dead_letters.items():
        dead_dir = layout.dead_letters(out, name)
        dead.foreachRDD(_batch_writer(run, dead_dir, DEAD_LETTER_COLUMNS, transactional))
        written[dead_dir.name] = _slide_ms(dead)
    # Registered last: the output operations of a batch run in order, so the commit follows every output, and
    # a progress file means the batch's outputs are all written (or committed).
    for name, stream in raw.items():
        stream.foreachRDD(_range_collector(run, name, receiver))
    committing = {} if receiver else raw  # a receiver's group commits by itself
    progress = {name: layout.input_progress(out, name) for name in raw}
    raw[sorted(raw)[0]].foreachRDD(_committer(run, config.offsets, committing, progress, written))
    return ssc


def read_progress(out_dir: str | Path) -> pd.DataFrame:
    """The progress rows of a run: ``batch, emitted_at, topic, partition, from_offset, until_offset``."""
    return _ProgressPoll(out_dir).rows()


class _ProgressPoll:
    """:func:`read_progress` for a poll loop: each call reads only the progress files new or replaced since the last.

    A regenerated batch replaces its file; the run's other files are not read again. Rows come input by input,
    batch file by batch file, in name order.
    """

    def __init__(self, out_dir: str | Path) -> None:
        self._out = Path(out_dir)
        self._read: dict[Path, tuple[tuple[int, int, int], pd.DataFrame]] = {}

    def rows(self) -> pd.DataFrame:
        for path in (p for d in layout.input_progress_dirs(self._out) for p in d.glob(layout.BATCH_FILES)):
            try:
                stat = path.stat()
                version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
                if path not in self._read or self._read[path][0] != version:
                    self._read[path] = (version, pd.read_parquet(path))
            except FileNotFoundError:  # removed between the listing and the read
                continue
        frames = [self._read[path][1] for path in sorted(self._read)]
        frames = [frame for frame in frames if len(frame)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _progress_written_ms(out_dir: str | Path, batch_ms: int) -> int:
    """When batch ``batch_ms``'s progress files were written (its last output operation ran), in ms."""
    files = [batch_path(directory, batch_ms) for directory in layout.input_progress_dirs(out_dir)]
    return max((path.stat().st_mtime_ns // 1_000_000 for path in files if path.exists()), default=batch_ms)


def _progress_batches(out_dir: str | Path) -> list[int]:
    """Batch times with a progress file in every input (a batch without records has an empty file)."""
    dirs = layout.input_progress_dirs(out_dir)
    names = [{f.name for f in d.glob(layout.BATCH_FILES)} for d in dirs]
    common = set.intersection(*names) if names else set()
    return sorted(layout.batch_of_file(name) for name in common)


def await_progress(
    out_dir: str | Path,
    end_offsets: Mapping[str, Mapping[int, int]],
    *,
    timeout_s: float,
    extra_batches: int = 2,
    poll_s: float = 0.2,
    check: Any = None,
    after_completion: bool = False,
) -> int:
    """Wait until the run has processed every topic up to ``end_offsets``, plus ``extra_batches`` batches.

    The extra batches let the event-time jobs see the watermark the last records set (they close their last
    windows one batch later, exactly as a Structured Streaming no-data batch does).

    Args:
        out_dir: the run's output root.
        end_offsets: topic → partition → end offset (from the replay).
        timeout_s: how long to wait.
        extra_batches: completed batches required after the one reaching the end offsets.
        poll_s: polling interval.
        check: optional callable run every poll (e.g. to raise if the driver died).
        after_completion: count only batches generated after the one reaching the end offsets completed. A run
            whose offsets are committed to Kafka needs it: a direct stream sends a batch's ``commitAsync`` when it
            generates the next batch, as Spark does, so batches generated while that batch was still queued or
            running have not sent it. Other runs count any later batch: batches run in order, so a later one sees
            the watermark the last records set; under a backlog, waiting for batches generated after the
            completion meant running every batch queued meanwhile first (benchmarks/results/changes.md §22).

    Returns:
        The batch time (ms) of the last batch waited for.

    Raises:
        RunTimeout: the offsets (or the extra batches) were not reached in time; says where it was.
    """
    deadline = time.monotonic() + timeout_s
    reached: dict = {}
    poll = _ProgressPoll(out_dir)
    while True:
        if check is not None:
            check()
        progress = poll.rows()
        if not progress.empty:
            reached = {
                (t, int(p)): int(u)
                for (t, p), u in progress.groupby(["topic", "partition"])["until_offset"].max().items()
            }
            done = [
                progress.loc[
                    (progress["topic"] == t) & (progress["partition"] == p) & (progress["until_offset"] >= end), "batch"
                ].min()
                for t, parts in end_offsets.items()
                for p, end in parts.items()
            ]
            if done and not any(pd.isna(d) for d in done):
                at = max(int(d) for d in done)
                after = max(at, _progress_written_ms(out_dir, at)) if after_completion else at
                later = [b for b in _progress_batches(out_dir) if b > after]  # also batches that read nothing
                if len(later) >= extra_batches:
                    return int(later[extra_batches - 1]) if extra_batches else at
        if time.monotonic() > deadline:
            expected = {(t, p): e for t, parts in end_offsets.items() for p, e in parts.items()}
            msg = (
                f"legacy run did not finish within {timeout_s:.0f} s: reached offsets {reached}, expected "
                f"{expected} plus {extra_batches} more batch(es). Check the driver log; raise the timeout for "
                "larger datasets."
            )
            raise RunTimeout(msg, reached=reached, expected=expected)
        time.sleep(poll_s)
