"""The direct Kafka stream behind :mod:`legacy.kafka`: batch generation, checkpointed offsets, executor reads.

PySpark 4.3 has no JVM Kafka connector for DStreams, so the stream is built from pieces PySpark does have:

* a *tick*: a JVM ``FileInputDStream`` watching a path that can never exist (``/dev/null/...``). It yields an
  empty RDD every batch and, unlike a ``ConstantInputDStream``, a fresh one after a checkpoint restore (a
  restored constant RDD has no SparkContext and breaks the first ``clearMetadata``);
* a Python ``transform`` on the tick whose function, :meth:`DirectStreamState.compute`, runs on the driver
  once per batch while Spark *generates* the batch (``JobGenerator.generateJobs``). It decides the batch's
  offset ranges and returns a :class:`KafkaRDD` with one Spark partition per range, read in the executors
  with :meth:`kit.kafka.Kafka.read_range`;
* :class:`DirectStreamState`, the object that function is bound to. PySpark pickles transform functions,
  with the objects they hold, into every checkpoint, so the state is the equivalent of Spark's
  ``DirectKafkaInputDStreamCheckpointData``: the current offsets and batch time -> offset ranges for the
  generated batches not yet cleared. ``JobGenerator`` posts ``DoCheckpoint(t)`` only after
  ``generateJobs(t)``, so a checkpoint for time ``t`` always holds ``t``'s ranges and those of every batch
  still pending; after a driver crash Spark re-generates the pending times and the state answers them with
  the same ranges, then continues from its current offsets (no gap, no overlap).

Rate control (``legacy.rate``) uses Spark's own JVM ``PIDRateEstimator``, fed by a Python
``StreamingListener`` with the record counts this stream reports to Spark's ``InputInfoTracker`` (so batch
infos, the UI and the estimator see the same numbers as with Spark's Kafka stream).

Example (what ``KafkaUtils.createDirectStream`` does)::

    stream = create_direct_stream(ssc, ["events"], {"bootstrap.servers": "127.0.0.1:9092"})
    stream.foreachRDD(lambda rdd: print(rdd.offsetRanges()))
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pyspark import RDD, SparkContext
from pyspark.core.rdd import PipelinedRDD
from pyspark.serializers import UTF8Deserializer
from pyspark.streaming import DStream
from pyspark.streaming.dstream import TransformedDStream
from pyspark.streaming.listener import StreamingListener

from kit.errors import ConfigError, OffsetOutOfRange
from kit.kafka import Kafka, TopicPartition
from kit.security import restore_secrets, withhold_secrets
from legacy._callbacks import install as _install_callbacks
from legacy._callbacks import java_map_values
from legacy._params import kafka_params_settings, warn_ignored
from legacy._types import Broker, KafkaMessageAndMetadata, OffsetRange, TopicAndPartition, utf8_decoder
from legacy.errors import BatchNotGenerated, StateFormatMismatch
from legacy.rate import JvmPIDRateEstimator, RateSettings, _java_double_to_long, until_offsets

__all__ = [
    "DirectStreamSnapshot",
    "DirectStreamState",
    "KafkaDStream",
    "KafkaParams",
    "KafkaRDD",
    "RateUpdate",
    "create_direct_stream",
    "create_rdd",
    "take_restored",
]

log = logging.getLogger(__name__)

#: A path no file system can hold as a directory (``/dev/null`` is a file): the tick stream finds no files.
TICK_DIRECTORY = "file:/dev/null/dmk-legacy-direct-kafka-tick"

#: Bumped whenever the pickled form of :class:`DirectStreamState` changes.
STATE_FORMAT = 1

CONSUMER_CACHE_ENABLED = "spark.streaming.kafka.consumer.cache.enabled"

# -- kafkaParams ---------------------------------------------------------------------------------------------

_HANDLED_PARAMS = {
    "metadata.broker.list": "the brokers, host:port[,host:port...] (0.8 name)",
    "bootstrap.servers": "the brokers, host:port[,host:port...]",
    "auto.offset.reset": "smallest|largest (0.8 names) or earliest|latest; default largest",
    "group.id": "the consumer group of commitAsync (nothing is committed otherwise, as in 2.4)",
    "client.id": "client id of the Kafka clients",
    "socket.timeout.ms": "bound on each Kafka request and on a read's idle time; default 30000",
}
_RESETS = {"smallest": "earliest", "earliest": "earliest", "largest": "latest", "latest": "latest"}


@dataclass(frozen=True)
class KafkaParams:
    """Spark 2.4 ``kafkaParams``, validated.

    Attributes:
        bootstrap_servers: from ``metadata.broker.list`` or ``bootstrap.servers``.
        auto_offset_reset: ``"earliest"`` (``smallest``) or ``"latest"`` (``largest``, the default).
        group_id: ``group.id`` if given (unused, as by 2.4's direct stream).
        client_id: ``client.id`` if given.
        timeout_s: ``socket.timeout.ms`` / 1000 (default 30 s).
        settings: the other keys with a Kafka client equivalent, as kafka-python settings
            (:data:`legacy._params.MAPPED`), sorted.
    """

    bootstrap_servers: str
    auto_offset_reset: str = "latest"
    group_id: str | None = None
    client_id: str | None = None
    timeout_s: float = 30.0
    settings: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, kafka_params: Mapping[str, Any]) -> KafkaParams:
        """Validate a 2.4 ``kafkaParams`` dict.

        Every key a 0.8 or 0.10 consumer accepted is accepted: mapped when it has an equivalent here, else
        ignored with one :class:`~legacy._params.IgnoredKafkaParams` warning (:mod:`legacy._params`).

        Raises:
            UnsupportedKafkaParams: TLS/SASL keys with no equivalent here (JKS stores, Kerberos...), whose loss would
                change the connection silently (all listed, each with the fix; :mod:`kit.security` translates the
                others).
            ConfigError: a missing broker list, two different broker lists, or a bad value.
        """
        if not isinstance(kafka_params, Mapping):
            msg = f"kafkaParams should be a dict, got {type(kafka_params).__name__}"
            raise ConfigError(
                msg,
                field="kafkaParams", expected="dict", actual=type(kafka_params).__name__,
            )
        params = {str(k): v for k, v in kafka_params.items()}
        settings, ignored = kafka_params_settings(params, handled=_HANDLED_PARAMS)
        warn_ignored(ignored, "the direct stream")
        brokers = {params[k] for k in ("metadata.broker.list", "bootstrap.servers") if k in params}
        if not brokers:
            msg = "kafkaParams needs the brokers: set metadata.broker.list (or bootstrap.servers) to host:port[,...]"
            raise ConfigError(
                msg,
                field="metadata.broker.list", expected="host:port[,host:port...]", actual=None,
            )
        if len(brokers) > 1:
            msg = f"metadata.broker.list and bootstrap.servers disagree: {sorted(map(str, brokers))}; set one of them"
            raise ConfigError(
                msg,
                field="bootstrap.servers", expected=str(params.get("metadata.broker.list")),
                actual=str(params.get("bootstrap.servers")),
            )
        servers = str(brokers.pop())
        if not servers.strip():
            msg = "the broker list is empty"
            raise ConfigError(msg, field="metadata.broker.list", expected="host:port", actual=servers)
        reset_raw = str(params.get("auto.offset.reset", "largest"))
        reset = _RESETS.get(reset_raw.lower())
        if reset is None:
            msg = f"auto.offset.reset must be smallest, largest, earliest or latest, got {reset_raw!r}"
            raise ConfigError(
                msg,
                field="auto.offset.reset", expected=sorted(_RESETS), actual=reset_raw,
            )
        timeout_raw = params.get("socket.timeout.ms", 30000)
        try:
            timeout_ms = int(str(timeout_raw))
        except ValueError:
            timeout_ms = -1
        if timeout_ms <= 0:
            msg = f"socket.timeout.ms must be a whole number of ms > 0, got {timeout_raw!r}"
            raise ConfigError(
                msg,
                field="socket.timeout.ms", expected="int > 0", actual=timeout_raw,
            )
        group = params.get("group.id")
        client = params.get("client.id")
        return cls(
            bootstrap_servers=servers,
            auto_offset_reset=reset,
            group_id=None if group is None else str(group),
            client_id=None if client is None else str(client),
            timeout_s=timeout_ms / 1000,
            settings=tuple(sorted(settings.items())),
        )

    def client_settings(self) -> dict[str, Any]:
        """Extra kafka-python settings for :class:`kit.kafka.Kafka`."""
        return {**dict(self.settings), **({"client_id": self.client_id} if self.client_id else {})}

    def kafka(self) -> Kafka:
        """A new :class:`kit.kafka.Kafka` handle for these params (the caller closes it)."""
        return Kafka(self.bootstrap_servers, settings=self.client_settings(), timeout_s=self.timeout_s)


# -- reading in executors ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ReadSpec:
    """Everything an executor task needs to read and decode its range (pickled into every task)."""

    params: KafkaParams
    key_decoder: Callable[[bytes | None], Any]
    value_decoder: Callable[[bytes | None], Any]
    message_handler: Callable[[KafkaMessageAndMetadata], Any] | None
    reuse_consumers: bool = True


# One handle per Python worker process and cluster, like Spark's cached Kafka consumers: a worker runs one task
# at a time, and reusing the connection saves the bootstrap round trips of every task of every batch.
_WORKER_HANDLES: dict[KafkaParams, Kafka] = {}


def _worker_handle(params: KafkaParams) -> Kafka:
    handle = _WORKER_HANDLES.get(params)
    if handle is None:
        handle = _WORKER_HANDLES[params] = params.kafka()
    return handle


def _drop_worker_handle(params: KafkaParams) -> None:
    handle = _WORKER_HANDLES.pop(params, None)
    if handle is not None:
        handle.close()


def _read_ranges(spec: _ReadSpec, _split: int, ranges: Iterable[tuple[str, int, int, int]]) -> Iterator[Any]:
    """The partition function of a KafkaRDD: read and decode the partition's offset ranges, in order.

    That is one range in a KafkaRDD, several consecutive ones after :meth:`_ReadingKafkaRDD.read_in_tasks`.
    """
    for topic, partition, start, until in ranges:
        if start == until:
            continue
        kafka = _worker_handle(spec.params) if spec.reuse_consumers else spec.params.kafka()
        try:
            records = kafka.read_range(topic, partition, start, until, idle_timeout_s=spec.params.timeout_s)
            handler = spec.message_handler
            key_decoder, value_decoder = spec.key_decoder, spec.value_decoder
            if handler is None:
                for record in records:
                    yield (key_decoder(record.key), value_decoder(record.value))
            else:
                for record in records:
                    message = KafkaMessageAndMetadata(
                        topic, partition, record.offset, record.key, record.value, record.timestamp
                    )
                    message._set_key_decoder(key_decoder)
                    message._set_value_decoder(value_decoder)
                    yield handler(message)
        except Exception:
            if spec.reuse_consumers:
                _drop_worker_handle(spec.params)
            raise
        finally:
            if not spec.reuse_consumers:
                kafka.close()


class KafkaRDD(RDD):
    """An RDD of Kafka records with one partition per offset range; ``offsetRanges()`` gives the ranges.

    Produced by ``KafkaUtils.createRDD`` and handed to ``transform`` / ``foreachRDD`` functions of a direct
    stream, as in Spark 2.4. Transformations of it (``map``...) are plain RDDs, also as in 2.4.
    """

    _offset_ranges: tuple[OffsetRange, ...] = ()

    def offsetRanges(self) -> list[OffsetRange]:  # noqa: N802 - Spark 2.4's name
        """The offset ranges of this RDD, one per partition, in partition order."""
        return list(self._offset_ranges)

    @classmethod
    def _wrap(cls, rdd: RDD, ranges: Iterable[OffsetRange]) -> KafkaRDD:
        wrapped = cls(rdd._jrdd, rdd.ctx, rdd._jrdd_deserializer)
        wrapped._offset_ranges = tuple(ranges)
        return wrapped


class _ReadingKafkaRDD(KafkaRDD, PipelinedRDD):
    """A KafkaRDD that reads its ranges itself: maps applied to it run in the same Python pass as the read."""

    _spec: _ReadSpec

    def read_in_tasks(self, tasks: int) -> RDD:
        """The same reads in at most ``tasks`` partitions: consecutive ranges share one, read one after the other.

        That is what ``coalesce(tasks)`` gives, without a pass through the JVM between the read and what is
        applied to it. A plain RDD: its partitions are no longer one range each.
        """
        return PipelinedRDD(*_reading(self.ctx, self._spec, self._offset_ranges, min(tasks, len(self._offset_ranges))))


def _reading(sc: SparkContext, spec: _ReadSpec, ranges: tuple[OffsetRange, ...], tasks: int) -> tuple[RDD, Callable]:
    """The RDD of ``ranges`` sliced into ``tasks`` partitions, and the partition function reading them."""
    rows = [(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in ranges]
    base = sc.parallelize(rows, tasks) if rows else sc.emptyRDD()
    return base, functools.partial(_read_ranges, spec)


def new_kafka_rdd(sc: SparkContext, spec: _ReadSpec, ranges: Iterable[OffsetRange]) -> KafkaRDD:
    """A KafkaRDD reading ``ranges`` (one partition each, empty ranges give empty partitions)."""
    ranges = tuple(ranges)
    rdd = _ReadingKafkaRDD(*_reading(sc, spec, ranges, len(ranges)))
    rdd._offset_ranges, rdd._spec = ranges, spec
    return rdd


# -- the stream's state ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _StreamSpec:
    """What a direct stream is, fixed at creation (pickled with the state)."""

    uid: str
    topics: tuple[str, ...]
    read: _ReadSpec
    batch_ms: int
    rate: RateSettings
    input_id: int
    tick_id: int


@dataclass(frozen=True)
class RateUpdate:
    """One completed batch fed to the rate estimator, and its answer (None: no new rate)."""

    batch_ms: int
    processing_end_ms: int
    records: int
    processing_delay_ms: int
    scheduling_delay_ms: int
    rate: float | None


@dataclass(frozen=True)
class DirectStreamSnapshot:
    """A consistent copy of a direct stream's state (diagnostics and tests).

    Attributes:
        uid: the stream's id.
        current: each partition's next offset (the latest generated batch's until offsets).
        batches: batch time (ms) -> offset ranges, for the generated batches the stream still remembers.
        latest_rate: the rate limit in force (records/s for the whole stream), -1 while there is none.
        rate_updates: the last completed batches fed to the rate estimator, oldest first.
    """

    uid: str
    current: dict[TopicAndPartition, int]
    batches: dict[int, tuple[OffsetRange, ...]]
    latest_rate: int
    rate_updates: tuple[RateUpdate, ...] = field(default=())


# Driver-side registries. Live states by stream id (the transform/foreachRDD wrappers find their stream's
# RDDs here, because each function is pickled separately into a checkpoint and cannot share the object).
_LIVE: weakref.WeakValueDictionary[str, DirectStreamState] = weakref.WeakValueDictionary()
_RESTORED: list[DirectStreamState] = []
_RESTORED_LOCK = threading.Lock()


def take_restored() -> list[DirectStreamState]:
    """States unpickled (from a checkpoint) since the last call, oldest first; the list is then cleared."""
    with _RESTORED_LOCK:
        restored = list(_RESTORED)
        _RESTORED.clear()
    return restored


def _with_settings(spec: _StreamSpec, change: Callable[[Mapping[str, Any]], dict[str, Any]]) -> _StreamSpec:
    params = spec.read.params
    settings = tuple(change(dict(params.settings)).items())
    return dataclasses.replace(spec, read=dataclasses.replace(spec.read, params=dataclasses.replace(
        params, settings=settings)))


def _close_in_background(kafka: Kafka) -> None:
    # Garbage collection may run this on any thread, a Kafka client's IO thread included, where closing the
    # client would block on itself.
    threading.Thread(target=kafka.close, name="legacy-kafka-close", daemon=True).start()


def _millis(time: datetime) -> int:
    # PySpark hands transform functions datetime.fromtimestamp(ms / 1000.0): exact to the microsecond.
    return round(time.timestamp() * 1000)


class DirectStreamState:
    """Offsets and generated batches of one direct stream: the function Spark calls to generate a batch.

    Pickled into every checkpoint (``__getstate__``): format, spec, current offsets, batch time -> ranges for
    the remembered batches, and the latest generated time. Everything else (Kafka handle, rate estimator,
    listener, RDDs, rate limit) belongs to one driver process and is rebuilt after a restore; the rate limit
    restarts at -1, as Spark's ``RateController.rateLimit`` does.
    """

    def __init__(self, spec: _StreamSpec, start: Mapping[TopicPartition, int]) -> None:
        self.spec = spec
        self._current: dict[TopicPartition, int] = dict(sorted(start.items()))
        self._batches: dict[int, tuple[OffsetRange, ...]] = {}
        self._latest_ms: int | None = None
        self._init_transient()
        _LIVE[spec.uid] = self

    def _init_transient(self) -> None:
        self._lock = threading.RLock()
        self._kafka: Kafka | None = None
        self._estimator: JvmPIDRateEstimator | None = None
        self._jssc: Any = None
        self._attached = False
        self._rdds: dict[int, KafkaRDD] = {}
        self._unfinished: set[int] = set()  # batches generated by this driver and not yet completed
        self._latest_rate = -1
        self._retention_ms: int | None = None
        self._rate_updates: deque[RateUpdate] = deque(maxlen=100)
        self._committer: Any = None  # legacy.offsets.KafkaGroupOffsetStore, once commitAsync is used

    # -- pickling (the checkpoint) ---------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {
                "format": STATE_FORMAT,
                # The checkpoint goes to disk: Kafka secrets stay in this process (kit.security.withhold_secrets).
                "spec": _with_settings(self.spec, withhold_secrets),
                "current": dict(self._current),
                "batches": dict(self._batches),
                "latest_ms": self._latest_ms,
            }

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise StateFormatMismatch(expected=STATE_FORMAT, actual=state.get("format"))
        self.spec = _with_settings(state["spec"], restore_secrets)
        self._current = state["current"]
        self._batches = state["batches"]
        self._latest_ms = state["latest_ms"]
        self._init_transient()
        # A stream restored from a checkpoint is created again by Spark, without create_direct_stream.
        _install_callbacks()
        with _RESTORED_LOCK:
            _RESTORED.append(self)

    # -- batch generation (driver, JobGenerator thread) ------------------------------------------------------

    def compute(self, time: datetime, tick: RDD | None) -> KafkaRDD:
        """The batch for ``time``: the remembered ranges if it was generated before, else the next ranges."""
        # Lock discipline: never call the JVM while holding self._lock. Spark calls this function holding the
        # DStreamGraph's monitor, and pickles the state (taking self._lock) holding it too, so a thread that
        # held self._lock while waiting for the JVM could deadlock the generator.
        time_ms = _millis(time)
        # Spark generates batches only while the context runs, so there is an active one.
        sc = tick.ctx if tick is not None else cast(SparkContext, SparkContext._active_spark_context)
        if not self._attached:
            self._attach_to_running_context()
        self._flush_commits()
        with self._lock:
            _LIVE[self.spec.uid] = self
            rdd = self._rdds.get(time_ms)
            if rdd is not None:
                return rdd
            ranges = self._batches.get(time_ms)
            if ranges is None:
                if self._latest_ms is not None and time_ms <= self._latest_ms:
                    # Only a completed batch is forgotten, so Spark asks again for output it already has.
                    log.warning(
                        "direct Kafka stream %s: batch %d ms was completed and forgotten; it is regenerated empty",
                        self.spec.uid, time_ms,
                    )
                    ranges = tuple(OffsetRange(tp.topic, tp.partition, o, o) for tp, o in self._current.items())
                else:
                    ranges = self._next_ranges()
                    self._batches[time_ms] = ranges
                    self._latest_ms = time_ms
                    self._current = {TopicPartition(r.topic, r.partition): r.untilOffset for r in ranges}
            self._unfinished.add(time_ms)
            jssc = self._jssc
        new = new_kafka_rdd(sc, self.spec.read, ranges)
        with self._lock:
            rdd = self._rdds.setdefault(time_ms, new)
        if jssc is not None and rdd is new:
            self._report(sc, jssc, time_ms, ranges)  # once per batch and driver, as Spark's tracker requires
        return rdd

    # -- commitAsync (Spark 0-10's CanCommitOffsets) ----------------------------------------------------------

    def commit_async(self, offset_ranges: Any, callback: Callable[..., Any] | None = None) -> None:
        """Queue the ranges' until-offsets; they are committed when the next batch is generated."""
        from legacy.offsets import KafkaGroupOffsetStore

        params = self.spec.read.params
        if not params.group_id:
            msg = "commitAsync commits to the consumer group in kafkaParams['group.id'], which is not set"
            raise ConfigError(
                msg,
                field="group.id", expected="a consumer group name", actual=None,
            )
        with self._lock:
            if self._committer is None:
                # The stream's own client settings (TLS/SASL from kafkaParams), as its reads have.
                self._committer = KafkaGroupOffsetStore(params.bootstrap_servers, params.group_id,
                                                        settings=params.client_settings())
            committer = self._committer
        committer.commit_async(offset_ranges, callback)

    def _flush_commits(self) -> None:
        from legacy.offsets import OffsetCommitFailed

        committer = self._committer
        if committer is None:
            return
        try:
            committer.flush_pending()
        except OffsetCommitFailed as exc:
            # As Spark's commitAsync without a callback: logged, and (here) retried with the next flush.
            log.error("direct Kafka stream %s: %s", self.spec.uid, exc)

    def _next_ranges(self) -> tuple[OffsetRange, ...]:
        kafka = self._driver_kafka()
        # The record before each position was read by the last batch: the look-up fetches there, one round trip
        # whose cost does not grow with the log (kit.kafka.Kafka.end_offsets; changes.md §33).
        latest = kafka.end_offsets(
            list(self._current), holding={tp: offset - 1 for tp, offset in self._current.items() if offset > 0}
        )
        for tp, offset in latest.items():
            if offset < self._current[tp]:
                beginning = kafka.beginning_offsets([tp])[tp]
                raise OffsetOutOfRange(
                    tp.topic,
                    tp.partition,
                    requested=(self._current[tp], self._current[tp]),
                    available=(beginning, offset),
                )
        until = until_offsets(
            self._current, latest, batch_ms=self.spec.batch_ms, settings=self.spec.rate, latest_rate=self._latest_rate
        )
        return tuple(OffsetRange(tp.topic, tp.partition, self._current[tp], until[tp]) for tp in self._current)

    def _driver_kafka(self) -> Kafka:
        if self._kafka is None:
            self._kafka = self.spec.read.params.kafka()
            # Closed when the state goes (its context stopped and released by the JVM): no lingering clients.
            weakref.finalize(self, _close_in_background, self._kafka).atexit = False
        return self._kafka

    def _report(self, sc: SparkContext, jssc: Any, time_ms: int, ranges: tuple[OffsetRange, ...]) -> None:
        """Tell Spark's InputInfoTracker the batch's record count, as DirectKafkaInputDStream does."""
        jvm: Any = sc._jvm  # py4j's JVM view, untyped; None only before a SparkContext starts
        shown = sorted((r for r in ranges if r.count()), key=lambda r: -r.count())
        description = "\n".join(
            f"topic: {r.topic}\tpartition: {r.partition}\toffsets: {r.fromOffset} to {r.untilOffset}"
            f"\tcount: {r.count()}"
            for r in shown
        )
        metadata = jvm.java.util.HashMap()
        metadata.put("Description", description)
        info = jvm.org.apache.spark.streaming.scheduler.StreamInputInfo(
            self.spec.input_id,
            sum(r.count() for r in ranges),
            jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(metadata),
        )
        jssc.scheduler().inputInfoTracker().reportInfo(jvm.org.apache.spark.streaming.Time(time_ms), info)

    def rdd_for(self, time: datetime) -> KafkaRDD:
        """The KafkaRDD this driver generated for ``time``.

        Raises:
            BatchNotGenerated: the batch was not generated in this driver (a bug: Spark computes a stream's
                batch before anything downstream of it).
        """
        time_ms = _millis(time)
        with self._lock:
            rdd = self._rdds.get(time_ms)
        if rdd is None:
            raise BatchNotGenerated(self.spec.uid, time_ms)
        return rdd

    # -- the running context: input infos, batch listener ----------------------------------------------------

    def attach(self, ssc: Any) -> None:
        """Report to and listen on the (Python) StreamingContext ``ssc``; once per driver process."""
        jssc = ssc._jssc.ssc()
        with self._lock:
            if self._attached:
                return
            self._attached = True
            self._jssc = jssc
        ssc.addStreamingListener(_BatchListener(self))

    def _attach_to_running_context(self) -> None:
        # After a restore through plain StreamingContext.getOrCreate nobody attached us. Only the Python-side
        # active context is safe to use here: during a restart, Spark generates the pending batches inside
        # StreamingContext.start() while holding the lock that StreamingContext.getActive() takes.
        from pyspark.streaming import StreamingContext

        active = StreamingContext._activeContext
        if active is not None:
            self.attach(active)

    def on_batch_completed(
        self,
        batch_ms: int,
        *,
        processing_end_ms: int,
        processing_delay_ms: int,
        scheduling_delay_ms: int,
        records: int | None,
        succeeded: bool = True,
    ) -> None:
        """Forget old batches and, with backpressure, feed the rate estimator (Spark's ``RateController``).

        Times are Spark's (ms); -1 means "not known", as in ``JavaBatchInfo``; ``records`` is this stream's
        reported record count for the batch, None if it reported none (batches regenerated during a restart).
        A batch whose output failed (``succeeded`` False) stays pending in Spark, and in the checkpoints, until
        a restart runs it again, so its ranges are never forgotten.
        """
        retention = self._retention()
        with self._lock:
            if succeeded:
                self._unfinished.discard(batch_ms)
            # Like DStream.clearMetadata: drop batches older than the remember duration, but never one still
            # unfinished (a checkpoint lists every pending batch; it must find that batch's ranges here).
            # Batches restored from a checkpoint and not generated again were finished before the restart
            # (Spark regenerates every pending batch inside start(), before any batch of this driver completes).
            cutoff = batch_ms - retention
            for t in [t for t in {*self._batches, *self._rdds} if t <= cutoff and t not in self._unfinished]:
                self._batches.pop(t, None)
                self._rdds.pop(t, None)
        if not self.spec.rate.backpressure_enabled:
            return
        if records is None or processing_end_ms < 0 or processing_delay_ms < 0 or scheduling_delay_ms < 0:
            return
        if self._estimator is None:
            # Only the listener thread gets here: no race on creating it.
            sc = SparkContext._active_spark_context
            self._estimator = JvmPIDRateEstimator.from_settings(sc, self.spec.batch_ms, self.spec.rate)
        rate = self._estimator.compute(processing_end_ms, records, processing_delay_ms, scheduling_delay_ms)
        with self._lock:
            if rate is not None:
                self._latest_rate = _java_double_to_long(rate)
            self._rate_updates.append(
                RateUpdate(batch_ms, processing_end_ms, records, processing_delay_ms, scheduling_delay_ms, rate)
            )

    def _retention(self) -> int:
        """How long completed batches are remembered: the stream's remember duration, at least one batch."""
        if self._retention_ms is None:
            remembered = _remember_ms(self._jssc, self.spec.tick_id)
            if remembered is None:
                return self.spec.batch_ms
            self._retention_ms = max(remembered, self.spec.batch_ms)
        return self._retention_ms

    # -- diagnostics -----------------------------------------------------------------------------------------

    def snapshot(self) -> DirectStreamSnapshot:
        """A consistent copy of the state."""
        with self._lock:
            return DirectStreamSnapshot(
                uid=self.spec.uid,
                current={TopicAndPartition(tp.topic, tp.partition): o for tp, o in self._current.items()},
                batches=dict(sorted(self._batches.items())),
                latest_rate=self._latest_rate,
                rate_updates=tuple(self._rate_updates),
            )


def _remember_ms(jssc: Any, tick_id: int) -> int | None:
    """This stream's remember duration in the JVM graph (known once the context has started), or None.

    The stream is the PythonTransformedDStream over the map over the tick input stream ``tick_id``; its
    remember duration grows with what consumes it (windows), as Spark computes it.
    """
    if jssc is None:
        return None
    seen: set[int] = set()
    todo = list(jssc.graph().getOutputStreams())
    while todo:
        dstream = todo.pop()
        key = dstream.hashCode()
        if key in seen:
            continue
        seen.add(key)
        parents = []
        iterator = dstream.dependencies().iterator()
        while iterator.hasNext():
            parents.append(iterator.next())
        if _is_stream_over_tick(dstream, parents, tick_id):
            duration = dstream.rememberDuration()
            return None if duration is None else int(duration.milliseconds())
        todo.extend(parents)
    return None


def _is_stream_over_tick(dstream: Any, parents: list[Any], tick_id: int) -> bool:
    if len(parents) != 1 or not dstream.getClass().getName().endswith("PythonTransformedDStream"):
        return False
    grandparents = parents[0].dependencies()
    if grandparents.size() != 1:
        return False
    tick = grandparents.head()
    return tick.getClass().getName().endswith("FileInputDStream") and tick.id() == tick_id


class _BatchListener(StreamingListener):
    """Passes completed batches of the running context to one stream's state (Spark's RateController)."""

    def __init__(self, state: DirectStreamState) -> None:
        super().__init__()
        self._state = state

    def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - PySpark's names
        info = batchCompleted.batchInfo()
        reported = info.streamIdToInputInfo().get(self._state.spec.input_id)
        self._state.on_batch_completed(
            info.batchTime().milliseconds(),
            processing_end_ms=info.processingEndTime(),
            processing_delay_ms=info.processingDelay(),
            scheduling_delay_ms=info.schedulingDelay(),
            records=None if reported is None else reported.numRecords(),
            succeeded=all(op.failureReason() is None for op in java_map_values(info.outputOperationInfos())),
        )


# -- the DStream -----------------------------------------------------------------------------------------------


def _with_time(func: Callable[..., Any]) -> Callable[[datetime, Any], Any]:
    """``func(rdd)`` or ``func(time, rdd)`` as a two-argument function (as PySpark's transform accepts)."""
    code = getattr(func, "__code__", None)
    if code is not None and not inspect.ismethod(func):
        count = code.co_argcount
    else:
        count = len(inspect.signature(func).parameters)
    if count == 1:
        return lambda _time, rdd: func(rdd)
    if count == 2:
        return func
    msg = f"func should take one or two arguments (rdd, or time and rdd), got {count}"
    raise ConfigError(
        msg,
        field="func", expected="1 or 2 arguments", actual=count,
    )


def _on_kafka_rdds(
    uid: str, func: Callable[[datetime, Any], Any], use_incoming: bool
) -> Callable[[datetime, Any], Any]:
    """Wrap a transform/foreachRDD function of direct stream ``uid`` so that it receives the batch's KafkaRDD."""

    def call(time: datetime, rdd: Any) -> Any:
        # Delegate to a module-level function: cloudpickle copies the globals a nested function uses, and the
        # restored function must see this module's live registry, not a copy of it.
        return _call_on_kafka_rdd(uid, func, use_incoming, time, rdd)

    return call


def _call_on_kafka_rdd(
    uid: str, func: Callable[[datetime, Any], Any], use_incoming: bool, time: datetime, rdd: Any
) -> Any:
    state = _LIVE.get(uid)
    if state is None:
        raise BatchNotGenerated(uid, _millis(time))
    kafka_rdd = state.rdd_for(time)
    if use_incoming and rdd is not None:
        # Cached or checkpointed stream: use Spark's RDD (its cache), not a fresh read.
        kafka_rdd = KafkaRDD._wrap(rdd, kafka_rdd._offset_ranges)
    return func(time, kafka_rdd)


class KafkaDStream(DStream):
    """The direct stream: a DStream whose RDDs, in ``transform`` and ``foreachRDD``, are :class:`KafkaRDD`.

    Every DStream operation works. ``transform``/``foreachRDD`` functions (and ``map``, ``filter``... which
    go through ``transform``) get a KafkaRDD that reads Kafka in the same Python pass as what they apply to
    it. Call ``cache()``/``persist()``/``checkpoint()`` on it *before* deriving streams from it (as PySpark's
    own pipelining requires) for those streams to use the cached RDDs.
    """

    def __init__(self, jdstream: Any, ssc: Any, jrdd_deserializer: Any, uid: str) -> None:
        super().__init__(jdstream, ssc, jrdd_deserializer)
        self._uid = uid

    def _uses_spark_rdds(self) -> bool:
        return bool(self.is_cached or self.is_checkpointed)

    def transform(self, func: Callable[..., Any]) -> TransformedDStream[Any]:
        """A DStream of ``func(rdd)`` or ``func(time, rdd)`` for each batch, ``rdd`` being a KafkaRDD."""
        return TransformedDStream(self, _on_kafka_rdds(self._uid, _with_time(func), self._uses_spark_rdds()))

    def foreachRDD(self, func: Callable[..., Any]) -> None:  # noqa: N802 - PySpark's name
        """Apply ``func(rdd)`` or ``func(time, rdd)`` to each batch's KafkaRDD (an output operation)."""
        DStream.foreachRDD(self, _on_kafka_rdds(self._uid, _with_time(func), self._uses_spark_rdds()))

    def commitAsync(self, offsetRanges: Any, callback: Callable[..., Any] | None = None) -> None:  # noqa: N802, N803
        """Queue ``offsetRanges``' until-offsets for commit to ``kafkaParams['group.id']`` (Spark 0-10's API).

        As in Spark's ``CanCommitOffsets.commitAsync``, nothing is sent now: the queue is committed when the
        stream generates its next batch, so offsets follow the output that used them (at-least-once). Each
        ``callback(offsets, exception_or_None)`` is called once, by the commit that handles its offsets; a
        failed commit is logged and retried with the next batch. Resume with
        ``fromOffsets=legacy.offsets.KafkaGroupOffsetStore(brokers, group).load(topics)``.

        Raises:
            ConfigError: ``kafkaParams`` has no ``group.id``.
        """
        _StreamHandle(self._uid).commitAsync(offsetRanges, callback)

    def __reduce__(self) -> tuple[Any, ...]:
        # foreachRDD functions are pickled into checkpoints; one that captured the stream (to call commitAsync)
        # must not drag the JVM-backed DStream along, only the name of its state.
        return (_StreamHandle, (self._uid,))

    def state_snapshot(self) -> DirectStreamSnapshot:
        """The stream's offsets, remembered batches and rate limit in this driver (no 2.4 equivalent).

        Raises:
            BatchNotGenerated: the stream has no state in this driver (it was created by another one).
        """
        state = _LIVE.get(self._uid)
        if state is None:
            raise BatchNotGenerated(self._uid, -1)
        return state.snapshot()


class _StreamHandle:
    """What a pickled :class:`KafkaDStream` becomes: enough to call ``commitAsync`` on the live stream state."""

    def __init__(self, uid: str) -> None:
        self._uid = uid

    def commitAsync(self, offsetRanges: Any, callback: Callable[..., Any] | None = None) -> None:  # noqa: N802, N803
        state = _LIVE.get(self._uid)
        if state is None:
            raise BatchNotGenerated(self._uid, -1)
        state.commit_async(offsetRanges, callback)


# -- creation --------------------------------------------------------------------------------------------------


def _check_callable(name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        msg = f"{name} must be callable, got {value!r}"
        raise ConfigError(msg, field=name, expected="callable", actual=value)


def _read_spec(sc: SparkContext, params: KafkaParams, key_decoder: Any, value_decoder: Any, handler: Any) -> _ReadSpec:
    _check_callable("keyDecoder", key_decoder)
    _check_callable("valueDecoder", value_decoder)
    _check_callable("messageHandler", handler, optional=True)
    reuse = str(sc.getConf().get(CONSUMER_CACHE_ENABLED, "true")).lower()
    if reuse not in ("true", "false"):
        msg = f"{CONSUMER_CACHE_ENABLED} must be true or false, got {reuse!r}"
        raise ConfigError(
            msg,
            field=CONSUMER_CACHE_ENABLED, expected="true|false", actual=reuse,
        )
    return _ReadSpec(params, key_decoder, value_decoder, handler, reuse_consumers=reuse == "true")


def _partitions_of(kafka: Kafka, topic: str) -> list[int]:
    return kafka.partitions(topic)


def _starting_offsets(
    kafka: Kafka, topics: list[str], params: KafkaParams, from_offsets: Mapping[Any, Any] | None
) -> dict[TopicPartition, int]:
    if from_offsets:
        if not isinstance(from_offsets, Mapping):
            msg = f"fromOffsets should be a dict of TopicAndPartition -> offset, got {type(from_offsets).__name__}"
            raise ConfigError(
                msg,
                field="fromOffsets", expected="dict", actual=type(from_offsets).__name__,
            )
        for key, offset in from_offsets.items():
            if not isinstance(key, TopicAndPartition):
                msg = f"fromOffsets keys must be TopicAndPartition, got {key!r}"
                raise ConfigError(
                    msg,
                    field="fromOffsets", expected="TopicAndPartition", actual=key,
                )
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                msg = f"fromOffsets[{key}] must be an offset >= 0, got {offset!r}"
                raise ConfigError(
                    msg,
                    field="fromOffsets", expected="int >= 0", actual=offset,
                )
        offset_topics = {key.topic for key in from_offsets}
        if offset_topics != set(topics):
            msg = (
                f"The specified topics: {' '.join(sorted(topics))} do not equal to the topic from offsets: "
                f"{' '.join(sorted(offset_topics))}"
            )
            raise ConfigError(
                msg,
                field="fromOffsets", expected=sorted(topics), actual=sorted(offset_topics),
            )
        start = {TopicPartition(k.topic, k.partition): int(v) for k, v in from_offsets.items()}
        for topic in offset_topics:
            existing = set(_partitions_of(kafka, topic))
            missing = sorted(tp.partition for tp in start if tp.topic == topic and tp.partition not in existing)
            if missing:
                msg = f"fromOffsets names partitions {missing} of {topic!r}, which has partitions {sorted(existing)}"
                raise ConfigError(
                    msg,
                    field="fromOffsets", expected=sorted(existing), actual=missing,
                )
        beginnings = kafka.beginning_offsets(list(start))
        ends = kafka.end_offsets(list(start))
        for tp, offset in start.items():
            if not beginnings[tp] <= offset <= ends[tp]:
                raise OffsetOutOfRange(
                    tp.topic,
                    tp.partition,
                    requested=(offset, max(offset, ends[tp])),
                    available=(beginnings[tp], ends[tp]),
                )
        return dict(sorted(start.items()))
    tps = [TopicPartition(topic, p) for topic in topics for p in _partitions_of(kafka, topic)]
    if params.auto_offset_reset == "earliest":
        return dict(sorted(kafka.beginning_offsets(tps).items()))
    return dict(sorted(kafka.end_offsets(tps).items()))


def _check_topics(topics: Any) -> list[str]:
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t for t in topics):
        msg = f"topics should be a non-empty list of topic names, got {topics!r}"
        raise ConfigError(
            msg,
            field="topics", expected="list of str", actual=topics,
        )
    return list(dict.fromkeys(topics))


def create_direct_stream(
    ssc: Any,
    topics: list[str],
    kafka_params: Mapping[str, Any],
    from_offsets: Mapping[TopicAndPartition, int] | None = None,
    key_decoder: Callable[[bytes | None], Any] | None = None,
    value_decoder: Callable[[bytes | None], Any] | None = None,
    message_handler: Callable[[KafkaMessageAndMetadata], Any] | None = None,
) -> KafkaDStream:
    """Create a direct stream on ``ssc`` (see ``KafkaUtils.createDirectStream`` for the arguments).

    The starting offsets are fixed now, on the driver: ``from_offsets`` (which also fixes the partitions),
    else every partition of ``topics`` at ``auto.offset.reset``.
    """
    # Every Python DStream operation of every batch is a callback from the JVM: make each skip a Java exception.
    _install_callbacks()
    topics = _check_topics(topics)
    params = KafkaParams.parse(kafka_params)
    sc = ssc.sparkContext
    read = _read_spec(
        sc, params, key_decoder or utf8_decoder, value_decoder or utf8_decoder, message_handler
    )
    with params.kafka() as kafka:
        start = _starting_offsets(kafka, topics, params, from_offsets)
    rate = RateSettings.from_spark_conf(sc.getConf())
    jssc = ssc._jssc.ssc()
    jtick = ssc._jssc.textFileStream(TICK_DIRECTORY)
    spec = _StreamSpec(
        uid=uuid.uuid4().hex,
        topics=tuple(topics),
        read=read,
        batch_ms=int(jssc.graph().batchDuration().milliseconds()),
        rate=rate,
        input_id=int(jssc.getNewInputStreamId()),
        tick_id=int(jtick.dstream().dependencies().head().id()),
    )
    state = DirectStreamState(spec, start)
    tick: DStream[str] = DStream(jtick, ssc, UTF8Deserializer())
    generated = TransformedDStream(tick, state.compute)
    stream = KafkaDStream(generated._jdstream, ssc, sc.serializer, spec.uid)
    state.attach(ssc)
    return stream


def create_rdd(
    sc: SparkContext,
    kafka_params: Mapping[str, Any],
    offset_ranges: list[OffsetRange],
    leaders: Mapping[TopicAndPartition, Broker] | None = None,
    key_decoder: Callable[[bytes | None], Any] | None = None,
    value_decoder: Callable[[bytes | None], Any] | None = None,
    message_handler: Callable[[KafkaMessageAndMetadata], Any] | None = None,
) -> KafkaRDD:
    """A KafkaRDD of ``offset_ranges`` (see ``KafkaUtils.createRDD`` for the arguments).

    The ranges are checked on the driver against the partitions' beginning and end offsets.
    """
    if not isinstance(offset_ranges, list) or not all(isinstance(r, OffsetRange) for r in offset_ranges):
        msg = f"offsetRanges should be a list of OffsetRange, got {offset_ranges!r}"
        raise ConfigError(
            msg,
            field="offsetRanges", expected="list of OffsetRange", actual=offset_ranges,
        )
    if leaders is not None and (
        not isinstance(leaders, Mapping)
        or not all(isinstance(k, TopicAndPartition) and isinstance(v, Broker) for k, v in leaders.items())
    ):
        msg = f"leaders should be a dict of TopicAndPartition -> Broker, got {leaders!r}"
        raise ConfigError(
            msg,
            field="leaders", expected="dict of TopicAndPartition -> Broker", actual=leaders,
        )
    params = KafkaParams.parse(kafka_params)
    read = _read_spec(sc, params, key_decoder or utf8_decoder, value_decoder or utf8_decoder, message_handler)
    if offset_ranges:
        with params.kafka() as kafka:
            _check_available(kafka, offset_ranges)
    return new_kafka_rdd(sc, read, offset_ranges)


def _check_available(kafka: Kafka, ranges: list[OffsetRange]) -> None:
    topics = sorted({r.topic for r in ranges})
    tps: list[TopicPartition] = []
    for topic in topics:
        existing = set(_partitions_of(kafka, topic))
        for r in ranges:
            if r.topic == topic and r.partition not in existing:
                msg = (
                    f"offset range {r} names partition {r.partition} of {topic!r}, "
                    f"which has partitions {sorted(existing)}"
                )
                raise ConfigError(
                    msg,
                    field="offsetRanges", expected=sorted(existing), actual=r.partition,
                )
        tps.extend(TopicPartition(topic, p) for p in sorted({r.partition for r in ranges if r.topic == topic}))
    beginnings = kafka.beginning_offsets(tps)
    ends = kafka.end_offsets(tps)
    for r in ranges:
        tp = TopicPartition(r.topic, r.partition)
        if r.fromOffset < beginnings[tp] or r.untilOffset > ends[tp]:
            raise OffsetOutOfRange(
                r.topic, r.partition, requested=(r.fromOffset, r.untilOffset), available=(beginnings[tp], ends[tp])
            )
