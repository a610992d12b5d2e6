"""A Kafka source and sink for Structured Streaming, option-compatible with Spark's ``spark-sql-kafka-0-10``.

Spark's JVM Kafka connector is a separate Maven artifact; this one is built on PySpark's Python Data Source
API and kafka-python, so it runs wherever PySpark does. It is registered as ``kafka-py`` (the name ``kafka``
belongs to the JVM connector); :func:`source_format` returns ``"kafka"`` when the JVM connector is on the
classpath and ``"kafka-py"`` otherwise, so pipelines run unchanged on either.

Same schema as Spark's (``key, value, topic, partition, offset, timestamp, timestampType`` and ``headers``
with ``includeHeaders``), same options and semantics: ``subscribe`` / ``subscribePattern`` / ``assign``,
``startingOffsets`` / ``endingOffsets``, ``maxOffsetsPerTrigger`` (split across partitions by lag, as Spark's
``rateLimit``), ``minOffsetsPerTrigger`` with ``maxTriggerDelay``, ``failOnDataLoss``, ``minPartitions``,
``maxRecordsPerPartition``, ``Trigger.AvailableNow`` honouring the limits. Offsets are Spark's JSON
(``{"topic": {"0": 42}}``) in the checkpoint's offset log. Differences are listed in ``docs/modern.md``.

Example::

    fmt = source_format(spark)
    events = (spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 10000)
        .load())
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kit.errors import OffsetOutOfRange, UnknownTopic
from kit.kafka import Kafka, TopicPartition, librdkafka_only
from modern._options import EARLIEST, LATEST, OffsetSpec, SinkSettings, SourceSettings
from modern.errors import KafkaDataLoss, KafkaOptionError, KafkaSinkError

__all__ = [
    "KAFKA_SCHEMA",
    "GroupOffsetCommitter",
    "KafkaDataSource",
    "KafkaInputGroup",
    "SOURCE_NAME",
    "offsets_behind_latest",
    "offsets_from_json",
    "offsets_to_json",
    "register",
    "group_ranges",
    "kafka_batch_sink",
    "source_format",
]

SOURCE_NAME = "kafka-py"
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
)
_HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"
_ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
_ARROW_HEADERS = pa.field(
    "headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
_ARROW_BATCH_ROWS = 20_000

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: ``{"topic": {"0": 42, "1": 7}}`` (partitions sorted)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(offsets: dict | str) -> Offsets:
    """Inverse of :func:`offsets_to_json`; accepts the dict or its JSON text."""
    parsed = json.loads(offsets) if isinstance(offsets, str) else offsets
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in parsed.items() for p, o in parts.items()}


# -- offsets resolution (driver side) -----------------------------------------------------------------


class _Offsets:
    """Driver-side offset lookups for one settings object, on a lazily opened Kafka handle."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self._kafka: Kafka | None = None

    @property
    def kafka(self) -> Kafka:
        if self._kafka is None:
            # kafka-python, not librdkafka: this handle lives as long as the query and looks up every topic the
            # pattern selects. librdkafka 2.16 kills the process (SIGSEGV in its own threads) when a topic it
            # is fetching from is deleted, which a subscribePattern query must survive (failOnDataLoss); the
            # Python source runner dying ended such a query with an EOFException in latestOffset. The reads,
            # one short-lived consumer per range, keep the fast client. The confluent client asked for by name
            # (kit.kafka.librdkafka_only) keeps this handle on librdkafka too: its admin client never fetches and its
            # high-watermark look-ups open a consumer each, so no librdkafka consumer outlives a look-up either.
            client = None if librdkafka_only() else "kafka-python"
            self._kafka = Kafka(self.settings.bootstrap_servers, settings=self.settings.client, client=client)
        return self._kafka

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None

    def partitions(self) -> list[TopicPartition]:
        """The partitions the strategy selects now (topics that do not exist yet have none)."""
        s = self.settings
        if s.strategy == "assign":
            return [TopicPartition(t, p) for t, p in s.assigned]
        existing = self.kafka.topics()
        if s.strategy == "subscribe":
            topics = [t for t in s.topics if t in existing]
        else:
            pattern = re.compile(s.pattern or "")
            topics = sorted(t for t in existing if pattern.fullmatch(t) and not t.startswith("__"))
        found = []
        for topic in topics:
            try:
                found += self.kafka.topic_partitions(topic)
            except UnknownTopic:  # deleted (or not created yet) since the listing: it has no partitions now
                continue
        return found

    def latest(self, tps: Sequence[TopicPartition], start: Offsets | None = None) -> Offsets:
        """The end offsets of ``tps``.

        ``start``: where the query is; the records just before it are fetched directly, in one round trip
        (see :meth:`kit.kafka.Kafka.end_offsets`).
        """
        if not tps:
            return {}
        holding = {tp: offset - 1 for tp, offset in (start or {}).items() if offset > 0}
        return self.kafka.end_offsets(tps, holding=holding)

    def earliest(self, tps: Sequence[TopicPartition]) -> Offsets:
        return self.kafka.beginning_offsets(tps) if tps else {}

    def resolve(self, spec: OffsetSpec, *, role: str) -> Offsets:
        """Turn a starting/ending spec into concrete offsets for the current partitions."""
        tps = self.partitions()
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            wanted = {TopicPartition(t, p): o for (t, p), o in spec.offsets.items()}
            if self.settings.strategy != "assign" and set(wanted) != set(tps):
                msg = (
                    f"If {role}Offsets contains specific offsets, you must specify all TopicPartitions.\n"
                    f"Use -1 for latest, -2 for earliest.\nSpecified: {sorted(map(tuple, wanted))} "
                    f"Assigned: {sorted(map(tuple, tps))}"
                )
                raise KafkaOptionError(
                    msg,
                    option=f"{role}Offsets",
                )
            earliest = self.earliest(list(wanted))
            latest = self.latest(list(wanted))
            resolved = {}
            for tp, offset in wanted.items():
                if offset == EARLIEST:
                    resolved[tp] = earliest[tp]
                elif offset == LATEST:
                    resolved[tp] = latest[tp]
                else:
                    if offset < earliest[tp]:
                        _data_loss(
                            self.settings,
                            f"startingOffsets for {tp.topic}-{tp.partition} is {offset}, but the earliest offset "
                            f"is {earliest[tp]}",
                            tp, offset, earliest[tp],
                        )
                    resolved[tp] = offset
            return resolved
        return self._resolve_timestamps(spec, tps, role=role)

    def _resolve_timestamps(self, spec: OffsetSpec, tps: list[TopicPartition], *, role: str) -> Offsets:
        """Spark's timestamp-based offsets: the first offset at or after the time, else by strategy."""
        if spec.kind == "timestamp":
            wanted = {tp: cast(int, spec.timestamp) for tp in tps}  # set whenever kind is "timestamp"
        else:
            wanted = {TopicPartition(t, p): ts for (t, p), ts in spec.offsets.items()}
            if self.settings.strategy != "assign" and set(wanted) != set(tps):
                msg = (
                    f"If {role}OffsetsByTimestamp contains specific timestamps, you must specify all "
                    f"TopicPartitions.\nSpecified: {sorted(map(tuple, wanted))} Assigned: {sorted(map(tuple, tps))}"
                )
                raise KafkaOptionError(
                    msg,
                    option=f"{role}OffsetsByTimestamp",
                )
        resolved: Offsets = {}
        latest = self.latest(list(wanted))
        for timestamp in sorted(set(wanted.values())):
            same = [tp for tp, ts in wanted.items() if ts == timestamp]
            for tp, offset in self.kafka.offsets_for_time(same, timestamp).items():
                if offset is not None:
                    resolved[tp] = offset
                elif role == "ending" or spec.by_timestamp_strategy == "latest":
                    resolved[tp] = latest[tp]
                else:
                    msg = (
                        f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and "
                        f"timestamp {timestamp}. Set startingOffsetsByTimestampStrategy to 'latest' to start from the "
                        "latest offset in that case."
                    )
                    raise KafkaOptionError(
                        msg,
                        option=f"{role}Timestamp",
                    )
        return resolved


def _data_loss(settings: SourceSettings, message: str, tp: TopicPartition, expected: int, available: int) -> None:
    """Spark's ``reportDataLoss``: raise with failOnDataLoss=true, else log and go on."""
    if settings.fail_on_data_loss:
        raise KafkaDataLoss(
            message, topic=tp.topic, partition=tp.partition, expected_from=expected, available_from=available
        )
    log.warning(
        "%s. Some data may have been lost because they are not available in Kafka any more; either the data was "
        "aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. If "
        'you want your streaming query to fail on such cases, set the source option "failOnDataLoss" to "true".',
        message,
    )


def rate_limit(limit: int, start: Offsets, until: Offsets, new_start: Offsets) -> Offsets:
    """Spark's ``KafkaMicroBatchStream.rateLimit``: split ``limit`` over partitions in proportion to lag.

    Each share is rounded down, except a share below 1, which rounds up (no partition starves), so the
    total may exceed ``limit`` slightly: lags [9990, 9, 1] with limit 100 give [99, 1, 1].
    """
    sizes, begins = {}, {}
    for tp, end in until.items():
        begin = start.get(tp, new_start.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
            begins[tp] = begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    limited = {}
    for tp, end in until.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = int(prorate) if prorate >= 1 else (1 if prorate > 0 else 0)
        limited[tp] = min(end, begins[tp] + share)
    return limited


# -- partitions and reading (executor side) -----------------------------------------------------------


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: records ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "from_offset", from_offset)
        object.__setattr__(self, "until_offset", until_offset)
        object.__setattr__(self, "value", (topic, partition, from_offset, until_offset))


def split_ranges(
    ranges: list[KafkaInputPartition], min_partitions: int | None, max_records: int | None
) -> list[KafkaInputPartition]:
    """Spark's ``KafkaOffsetRangeCalculator``: ranges split by ``maxRecordsPerPartition``, then ``minPartitions``.

    First into pieces of at most ``max_records`` records; then, if there are fewer than ``min_partitions``
    ranges, each range into parts in proportion to its size (at least one). Empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.until_offset > r.from_offset]

    def divide(r: KafkaInputPartition, parts: int) -> list[KafkaInputPartition]:
        size = r.until_offset - r.from_offset
        bounds = [r.from_offset + size * i // parts for i in range(parts + 1)]
        return [KafkaInputPartition(r.topic, r.partition, a, b) for a, b in pairwise(bounds) if b > a]

    if max_records:
        ranges = [piece for r in ranges for piece in divide(r, -(-(r.until_offset - r.from_offset) // max_records))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r.until_offset - r.from_offset for r in ranges)
        ranges = [
            piece
            for r in ranges
            for piece in divide(r, max(round((r.until_offset - r.from_offset) / total * min_partitions), 1))
        ]
    return ranges


@dataclass(frozen=True)
class KafkaInputGroup(InputPartition):
    """One Spark task reading several ranges one after the other (``maxPartitions``)."""

    ranges: tuple[KafkaInputPartition, ...]

    def __init__(self, ranges: Sequence[KafkaInputPartition]) -> None:
        object.__setattr__(self, "ranges", tuple(ranges))
        object.__setattr__(self, "value", tuple(r.value for r in ranges))


def group_ranges(ranges: list[KafkaInputPartition], max_partitions: int | None) -> list[InputPartition]:
    """At most ``max_partitions`` tasks: ranges grouped whole (never split), largest first into the smallest group.

    Each group reads its ranges in topic-partition order. Deterministic for the same ranges.

    Each task of a Python source costs a round trip to a Python worker whatever it reads, so a batch on
    8 Kafka partitions and 2 cores runs faster as 2 tasks than as 8.
    """
    if not max_partitions or len(ranges) <= max_partitions:
        return list(ranges)
    groups: list[list[KafkaInputPartition]] = [[] for _ in range(max_partitions)]
    sizes = [0] * max_partitions
    for r in sorted(ranges, key=lambda r: (-(r.until_offset - r.from_offset), r.topic, r.partition, r.from_offset)):
        smallest = min(range(max_partitions), key=lambda i: (sizes[i], i))
        groups[smallest].append(r)
        sizes[smallest] += r.until_offset - r.from_offset
    return [
        KafkaInputGroup(sorted(g, key=lambda r: (r.topic, r.partition, r.from_offset)))
        for g in groups
        if g
    ]


def _plan(settings: SourceSettings, start: Offsets, end: Offsets, earliest_of) -> list[InputPartition]:
    new = [tp for tp in end if tp not in start]
    new_start = earliest_of(new) if new else {}
    ranges = []
    for tp in sorted(end):
        begin = start.get(tp, new_start.get(tp, 0))
        until = end[tp]
        if until < begin:
            _data_loss(
                settings,
                f"Partition {tp.topic}-{tp.partition}'s offset was changed from {begin} to {until}, some data may "
                "have been missed",
                tp, begin, until,
            )
            continue
        ranges.append(KafkaInputPartition(tp.topic, tp.partition, begin, until))
    return group_ranges(
        split_ranges(ranges, settings.min_partitions, settings.max_records_per_partition), settings.max_partitions
    )


# One Kafka handle per Python worker process and client configuration, as Spark caches its Kafka consumers
# per executor: a worker runs one task at a time, and a fresh kafka-python consumer per task costs the
# bootstrap and metadata round trips on every partition of every micro-batch. (With librdkafka the handle
# keeps no consumer: each read opens its own, which is quicker there; see kit._rdkafka.)
_WORKER_HANDLES: dict[tuple[Any, ...], Kafka] = {}


def _handle_key(settings: SourceSettings) -> tuple[Any, ...]:
    # By value (a Secret compares by its value; its repr is *** for every password).
    return (settings.bootstrap_servers, tuple(sorted(settings.client.items(), key=lambda item: item[0])))


def _read(settings: SourceSettings, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Read one range in an executor, as Arrow record batches of Spark's Kafka schema."""
    key = _handle_key(settings)
    kafka = _WORKER_HANDLES.get(key)
    if kafka is None:
        kafka = _WORKER_HANDLES[key] = Kafka(settings.bootstrap_servers, settings=settings.client)
    try:
        yield from _read_with(kafka, settings, part)
    except BaseException:
        # A handle that failed, or whose read was abandoned half-way, is not reused.
        _WORKER_HANDLES.pop(key, None)
        kafka.close()
        raise


def _read_with(kafka: Kafka, settings: SourceSettings, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    fields = _ARROW_FIELDS + ([_ARROW_HEADERS] if settings.include_headers else [])
    schema = pa.schema(fields)
    start, until = part.from_offset, part.until_offset
    try:
        records = kafka.read_range(
            part.topic, part.partition, start, until, idle_timeout_s=settings.poll_timeout_ms / 1000
        )
        yield from _batches(records, schema, settings.include_headers)
    except OffsetOutOfRange as exc:
        beginning, end = exc.available
        tp = TopicPartition(part.topic, part.partition)
        if start < beginning:
            _data_loss(settings, f"Cannot fetch offset {start} of {tp.topic}-{tp.partition}", tp, start, beginning)
        else:
            missing = f"Offsets up to {until} of {tp.topic}-{tp.partition} are not in Kafka (end {end})"
            _data_loss(settings, missing, tp, until, end)
        # failOnDataLoss=false: read what is still there, as Spark's consumer does.
        lo, hi = max(start, beginning), min(until, end)
        if lo < hi:
            yield from _batches(kafka.read_range(part.topic, part.partition, lo, hi), schema, settings.include_headers)


def _record_batch(columns: list[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _batches(records: Iterator[Any], schema: pa.Schema, include_headers: bool) -> Iterator[pa.RecordBatch]:
    columns: list[list[Any]] = [[] for _ in schema]
    key, value, topic, partition, offset, timestamp, ts_type = columns[:7]
    headers = columns[7] if include_headers else None
    for record in records:
        key.append(record.key)
        value.append(record.value)
        topic.append(record.topic)
        partition.append(record.partition)
        offset.append(record.offset)
        timestamp.append(record.timestamp * 1000)
        ts_type.append(record.timestamp_type)
        if headers is not None:
            headers.append([{"key": k, "value": v} for k, v in (record.headers or [])])
        if len(offset) >= _ARROW_BATCH_ROWS:
            yield _record_batch(columns, schema)
            for column in columns:
                column.clear()
    if offset:
        yield _record_batch(columns, schema)


# -- readers --------------------------------------------------------------------------------------------


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets in the checkpoint, ranges read in executors."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self._offsets = _Offsets(settings)
        self._available_now = False
        self._available_now_target: Offsets | None = None
        self._latest: Offsets = {}
        self._last_trigger_ms = 0.0

    def __getstate__(self) -> dict:  # the Kafka handle stays in the driver-side process
        return {"settings": self.settings}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["settings"])

    def initialOffset(self) -> dict:  # noqa: N802 - PySpark's name
        return offsets_to_json(self._offsets.resolve(self.settings.starting, role="starting"))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - PySpark's name
        s = self.settings
        if s.max_offsets_per_trigger is not None:
            return ReadMaxRows(s.max_offsets_per_trigger)
        if s.min_offsets_per_trigger is not None:
            return ReadMinRows(s.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - PySpark's name
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # noqa: N802 - PySpark's name
        start_offsets = offsets_from_json(start)
        if self._available_now:
            if self._available_now_target is None:
                self._available_now_target = self._fetch_latest(start_offsets)
            latest = dict(self._available_now_target)
        else:
            latest = self._fetch_latest(start_offsets)
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        s = self.settings
        if (
            s.min_offsets_per_trigger is not None
            and not self._available_now
            and self._delay_batch(start_offsets, latest)
        ):
            return offsets_to_json(start_offsets)
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in start_offsets]
            new_start = self._offsets.earliest(new) if new else {}
            return offsets_to_json(rate_limit(limit.max_rows, start_offsets, latest, new_start))
        return offsets_to_json(latest)

    def _fetch_latest(self, start: Offsets) -> Offsets:
        tps = self._offsets.partitions()
        gone = [tp for tp in start if tp not in set(tps)]
        for tp in gone:
            _data_loss(
                self.settings, f"{tp.topic}-{tp.partition} is gone. Some data may have been missed", tp, start[tp], 0
            )
        return self._offsets.latest(tps, start)

    def _delay_batch(self, start: Offsets, latest: Offsets) -> bool:
        """Spark's ``delayBatch``: wait for minOffsetsPerTrigger records, at most maxTriggerDelay."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.settings.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        new_records = sum(end - start.get(tp, 0) for tp, end in latest.items())
        if new_records < (self.settings.min_offsets_per_trigger or 0):
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:  # noqa: N802 - PySpark's name
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return _plan(self.settings, offsets_from_json(start), offsets_from_json(end), self._offsets.earliest)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, KafkaInputGroup):
            return (batch for part in partition.ranges for batch in _read(self.settings, part))
        return _read(self.settings, partition)  # type: ignore[arg-type]

    def commit(self, end: dict) -> None:
        """Spark's Kafka source commits nothing to Kafka; see GroupOffsetCommitter for lag monitoring."""

    def stop(self) -> None:
        self._offsets.close()


class KafkaBatchReader(DataSourceReader):
    """Batch reader: ``startingOffsets`` (default earliest) to ``endingOffsets`` (default latest)."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        offsets = _Offsets(settings)
        try:
            start = offsets.resolve(settings.starting, role="starting")
            end = offsets.resolve(settings.ending, role="ending")
            self._ranges = _plan(settings, start, end, offsets.earliest)
        finally:
            offsets.close()

    def partitions(self) -> Sequence[InputPartition]:
        return self._ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, KafkaInputGroup):
            return (batch for part in partition.ranges for batch in _read(self.settings, part))
        if not isinstance(partition, KafkaInputPartition):
            # With no ranges to read, PySpark still runs one task with a placeholder partition of its own.
            return iter(())
        return _read(self.settings, partition)


# -- writers --------------------------------------------------------------------------------------------


def _check_write_schema(schema: StructType, settings: SinkSettings) -> None:
    """Spark's ``KafkaWriter.validateQuery``, with its messages."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "topic" not in fields and settings.topic is None:
        msg = "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
        raise KafkaSinkError(msg)
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        msg = f"Topic type must be a string, got {fields['topic'].simpleString()}"
        raise KafkaSinkError(msg)
    if "value" not in fields:
        msg = "Required attribute 'value' not found"
        raise KafkaSinkError(msg)
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            msg = f"{name} attribute type must be a string or binary, got {fields[name].simpleString()}"
            raise KafkaSinkError(msg)
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        msg = f"partition attribute type must be an int, got {fields['partition'].simpleString()}"
        raise KafkaSinkError(msg)
    if "headers" in fields and not _is_headers_type(fields["headers"]):
        msg = f"headers attribute type must be an array<struct<key:string,value:binary>>, got " \
              f"{fields['headers'].simpleString()}"
        raise KafkaSinkError(msg)


def _is_headers_type(data_type: Any) -> bool:
    """Spark's ``KafkaRecordToRowConverter.headersType``: ``array<struct<key: string, value: binary>>``."""
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    parts = [(f.name, type(f.dataType)) for f in data_type.elementType.fields]
    return parts == [("key", StringType), ("value", BinaryType)]


class _WriteCommit(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


def _write_rows(settings: SinkSettings, rows: Iterator[Any]) -> _WriteCommit:
    """Produce every row and wait for every acknowledgement; any failure fails the task (and the batch)."""
    failed: list[BaseException] = []
    sent = 0

    def done(_partition: int, _offset: int, error: BaseException | None) -> None:
        if error is not None:
            failed.append(error)

    with Kafka(settings.bootstrap_servers, settings=settings.client) as kafka:
        sender = kafka.sender(**{"linger_ms": 5, **settings.producer})
    try:
        for row in rows:
            data = row.asDict()
            # As in Spark, the topic option overrides the topic column.
            topic = settings.topic or data.get("topic")
            if topic is None:
                msg = "null topic present in the data. Use the topic option for setting a topic."
                raise KafkaSinkError(msg)
            key, value = data.get("key"), data.get("value")
            sender.send(
                topic,
                key=key.encode() if isinstance(key, str) else (bytes(key) if key is not None else None),
                value=value.encode() if isinstance(value, str) else (bytes(value) if value is not None else None),
                partition=data.get("partition"),
                headers=[
                    (h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in data.get("headers") or []
                ],
                on_done=done,
            )
            sent += 1
        outstanding = sender.flush(120.0)
        if failed or outstanding:
            msg = (
                f"{len(failed) + outstanding} of {sent} records were not acknowledged by Kafka (first error: "
                f"{failed[0] if failed else 'no answer'}); the batch fails and is retried from its offsets."
            )
            raise KafkaSinkError(msg)
    finally:
        sender.close(timeout_s=10)
    return _WriteCommit(sent)


class KafkaStreamWriter(DataSourceStreamWriter):
    """Streaming sink: at-least-once (a retried batch produces its records again)."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_rows(self.settings, iterator)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """Every record was acknowledged in ``write``; nothing is left to do."""

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """Records already sent stay in Kafka: the sink is at-least-once."""


class KafkaBatchWriter(DataSourceWriter):
    """Batch sink: ``df.write.format(source_format(spark)).option("topic", ...).save()``."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_rows(self.settings, iterator)


# -- the data source ----------------------------------------------------------------------------------


class KafkaDataSource(DataSource):
    """``spark.readStream/read/writeStream/write.format("kafka-py")``; options as Spark's Kafka connector."""

    @classmethod
    def name(cls) -> str:
        """The format name the source is registered under (``kafka-py``)."""
        return SOURCE_NAME

    def schema(self) -> str:
        """Spark's Kafka source schema (with ``headers`` when ``includeHeaders`` is set), options validated."""
        # Options are validated here because errors raised in schema() surface at load(); raised later they
        # surface asynchronously. Whether the query is a stream is not known yet, so validate as one unless
        # batch-only options are present; the reader validates again for its own kind.
        batch_only = ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp")
        streaming = not any(k.lower() in batch_only for k in self.options)
        settings = SourceSettings.from_options(self.options, streaming=streaming)
        return KAFKA_SCHEMA + (_HEADERS_DDL if settings.include_headers else "")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - PySpark's name
        """The reader of a streaming query (``spark.readStream``)."""
        return KafkaStreamReader(SourceSettings.from_options(self.options, streaming=True))

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader of a batch query (``spark.read``), bounded by the starting and ending offsets."""
        return KafkaBatchReader(SourceSettings.from_options(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 - PySpark's name
        """The sink of ``writeStream``, after checking ``schema`` has the columns the Kafka sink needs."""
        settings = SinkSettings.from_options(self.options)
        _check_write_schema(schema, settings)
        return KafkaStreamWriter(settings)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The sink of ``write``, after checking ``schema`` has the columns the Kafka sink needs."""
        settings = SinkSettings.from_options(self.options)
        _check_write_schema(schema, settings)
        return KafkaBatchWriter(settings)


def register(spark: Any) -> str:
    """Register the ``kafka-py`` data source on ``spark`` (idempotent); returns its name."""
    spark.dataSource.register(KafkaDataSource)
    return SOURCE_NAME


def _jvm_connector_present(spark: Any) -> bool:
    from kit.spark import is_connect

    if is_connect(spark):
        return _connector_on_server(spark)
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider", False,
            spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader(),
        )
        return True
    except Exception:  # noqa: BLE001 - py4j raises a Py4JJavaError wrapping ClassNotFoundException
        return False


def _connector_on_server(spark: Any) -> bool:
    """Whether a Spark Connect server has Spark's JVM Kafka connector: analyse a read of ``format("kafka")``.

    A client has no JVM to ask. Without the connector the analysis fails with KAFKA_DATA_SOURCE_NOT_ENABLED
    (PySpark 4.3; DATA_SOURCE_NOT_FOUND for other names); with it, with the connector's own complaint about the
    missing options. (The server logs the failed analysis as an error.)
    """
    from pyspark.errors import PySparkException

    try:
        spark.read.format("kafka").load().schema  # noqa: B018 - the analysis is the point
    except PySparkException as err:
        return not any(condition in str(err) for condition in _NOT_FOUND)
    return True


_NOT_FOUND = ("KAFKA_DATA_SOURCE_NOT_ENABLED", "DATA_SOURCE_NOT_FOUND")


def source_format(spark: Any) -> str:
    """``"kafka"`` when Spark's JVM connector is on the classpath, else ``"kafka-py"`` (registered now)."""
    if _jvm_connector_present(spark):
        return "kafka"
    return register(spark)


def kafka_batch_sink(**options: str) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to Kafka: the Kafka sink in every output mode.

    Spark's JVM sink takes append, update and complete output modes; a Python streaming sink can declare
    append only (PySpark 4.3 refuses the others: "kafka-py does not support Update mode"). Through
    ``foreachBatch`` any mode works, with the same options and input schema as
    ``writeStream.format(source_format(spark))`` and the same at-least-once contract as Spark's sink: every
    record of a batch is acknowledged before the batch commits, and a batch replayed after a failure is
    written again.

    Example::

        counts.writeStream.outputMode("update").foreachBatch(
            kafka_batch_sink(**{"kafka.bootstrap.servers": "host:9092", "topic": "totals"})
        ).option("checkpointLocation", "/ckpt/totals").start()

    Raises:
        KafkaOptionError: invalid options, at once (not at the first batch).
    """
    SinkSettings.from_options(options)

    def write(batch: Any, batch_id: int) -> None:
        writer = batch.write.format(source_format(batch.sparkSession)).mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save()

    return write


# -- consumer-group offsets for lag monitoring ------------------------------------------------------------


def offsets_behind_latest(source_progress: Any) -> dict[str, float] | None:
    """``min/max/avgOffsetsBehindLatest`` of one source in a StreamingQueryProgress, as Spark's Kafka source has.

    PySpark 4.3's Python data sources cannot publish source metrics themselves, so they are computed here
    from the progress's ``latestOffset`` and ``endOffset`` (None when either is missing or empty).
    """
    if not source_progress.latestOffset or not source_progress.endOffset:
        return None
    latest = offsets_from_json(source_progress.latestOffset)
    consumed = offsets_from_json(source_progress.endOffset)
    behind = [latest[tp] - consumed.get(tp, 0) for tp in latest]
    if not behind:
        return None
    return {
        "minOffsetsBehindLatest": float(min(behind)),
        "maxOffsetsBehindLatest": float(max(behind)),
        "avgOffsetsBehindLatest": sum(behind) / len(behind),
    }


def _kafka_offsets(text: str | None) -> Offsets | None:
    try:
        return offsets_from_json(text) if text else None
    except (ValueError, AttributeError, TypeError):
        return None  # another kind of source


def GroupOffsetCommitter(  # noqa: N802
    spark: Any, group_id: str, bootstrap_servers: str, *, query_name: str | None = None,
    kafka_options: Mapping[str, str] | None = None,
):
    """Attach a listener that commits each completed batch's Kafka end offsets to consumer group ``group_id``.

    Spark's Kafka source never commits offsets (SPARK-27549 was closed unmerged), so consumer-lag tools see
    nothing after a migration. This opt-in listener keeps them working. The commit follows the batch's
    completion, so the group's lag is exact at batch boundaries. The query still resumes from its
    checkpoint, never from the group. Returns the listener (``spark.streams.removeListener`` detaches it);
    ``listener.behind_latest`` holds the latest offsets-behind-latest figures per query id.

    Args:
        spark: the session whose queries are watched.
        group_id: the consumer group to commit as.
        bootstrap_servers: the Kafka cluster holding the group.
        query_name: only commit for the query with this name (default: every query with Kafka sources).
        kafka_options: the Kafka client settings of the query's source, Java names with or without the
            ``kafka.`` prefix (TLS/SASL: ``kafka.security.protocol``, ``kafka.sasl.jaas.config``...; default none).
    """
    from pyspark.sql.streaming import StreamingQueryListener

    from kit.kafka import java_client_settings

    java = {k.removeprefix("kafka."): v for k, v in (kafka_options or {}).items()}
    settings = java_client_settings(java, where="GroupOffsetCommitter(kafka_options=...)")

    class _Committer(StreamingQueryListener):
        def __init__(self) -> None:
            self.behind_latest: dict[str, dict[str, float]] = {}
            self.committed: dict[TopicPartition, int] = {}
            # One handle for the listener's life: progress events arrive on Spark's single listener thread.
            self._kafka = Kafka(bootstrap_servers, settings=settings)

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            progress = event.progress
            if query_name is not None and progress.name != query_name:
                return
            for source in progress.sources:
                offsets = _kafka_offsets(source.endOffset)
                if not offsets:
                    continue
                refused = self._kafka.commit_group_offsets(group_id, offsets)
                if refused:
                    log.error("committing offsets of group %r failed for %s", group_id, refused)
                self.committed.update({tp: o for tp, o in offsets.items() if tp not in refused})
                figures = offsets_behind_latest(source)
                if figures is not None:
                    self.behind_latest[str(progress.id)] = figures

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            pass

    listener = _Committer()
    spark.streams.addListener(listener)
    return listener
