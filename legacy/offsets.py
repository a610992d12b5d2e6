"""Offset stores for DStream jobs: where a Kafka direct stream's offsets live instead of a checkpoint.

A Spark checkpoint serialises the whole DStream graph, so it breaks on every code change. The usual
alternatives keep only the offsets, and the job starts its direct stream at them (``fromOffsets``):

* :class:`KafkaGroupOffsetStore` — Kafka's own consumer-group offsets (Spark 0-10 ``commitAsync``);
* :class:`ZooKeeperOffsetStore` — one ZooKeeper node per partition, ``/consumers/<topic>/<partition>``;
* :class:`SqlOffsetStore` — a table in SQLite or PostgreSQL, written in the **same transaction** as the
  batch's results, which makes the output exactly-once.

The first two are at-least-once: results are written, then the offsets are saved, so a crash between the
two replays the batch. Every store implements :class:`OffsetStore`: ``load()`` the offsets to resume from
(partitions never stored are absent; the caller decides where they start), ``save()`` a finished batch's
offset ranges, ``close()``, and use as a context manager.

An offset range is ``(topic, partition, from_offset, until_offset)``, ``until_offset`` exclusive, exactly
like Spark's ``OffsetRange``. Every store accepts, wherever it takes ranges: :class:`OffsetRange`, any
object with Spark 2.4's ``.topic, .partition, .fromOffset, .untilOffset`` (see :class:`SparkOffsetRange`)
or with ``.from_offset, .until_offset``, a 4-tuple (Spark's ``OffsetRange.toTuple()``), or an RDD-like
object whose ``offsetRanges()`` method returns such ranges (Spark's ``HasOffsetRanges``). What is stored per
partition is ``until_offset``: the next offset to read.

Example::

    with SqlOffsetStore.sqlite("job.db", consumer="clicks-per-user") as store:
        from_offsets = store.load(["clicks"])            # {TopicPartition: next offset}; {} at first
        # ... for each batch, with ranges = rdd.offsetRanges():
        with store.transaction(batch_time, ranges) as tx:
            if not tx.already_done:                      # a replayed batch commits nothing twice
                tx.executemany("INSERT INTO counts VALUES (?, ?)", rows)
                tx.save_offsets()
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from kafka.errors import KafkaError

from kit.engine import redacted_dsn
from kit.errors import ConfigError
from kit.kafka import Kafka, TopicPartition
from kit.ranges import TOPIC_NAME, OffsetRange, integer
from legacy.errors import (
    CorruptStoredOffset,
    InvalidOffsetRange,
    NonContiguousOffsets,
    OffsetCommitFailed,
    OffsetsNotSaved,
    OffsetStoreError,
    OffsetStoreUnavailable,
)

__all__ = [
    "CommitCallback",
    "CorruptStoredOffset",
    "InvalidOffsetRange",
    "KafkaGroupOffsetStore",
    "NonContiguousOffsets",
    "OFFSETS_TABLE",
    "OffsetCommitFailed",
    "OffsetRange",
    "OffsetStore",
    "OffsetStoreError",
    "OffsetStoreUnavailable",
    "OffsetTransaction",
    "OffsetsNotSaved",
    "SparkOffsetRange",
    "SqlOffsetStore",
    "TopicsOrPartitions",
    "ZooKeeperOffsetStore",
    "open_store",
    "redacted_dsn",
    "to_offset_ranges",
]

OFFSETS_TABLE = "dmk_offsets"
"""Name of the table :class:`SqlOffsetStore` keeps its offsets in."""

_TOPIC_NAME = TOPIC_NAME

TopicsOrPartitions: TypeAlias = str | TopicPartition | Iterable[str | TopicPartition]
"""What ``load()`` takes: a topic name, a ``TopicPartition``, or an iterable mixing both."""

CommitCallback = Callable[[dict[TopicPartition, int], Exception | None], object]
"""``callback(offsets, exception_or_None)`` of :meth:`KafkaGroupOffsetStore.commit_async`, like Kafka's
``OffsetCommitCallback.onComplete``."""


# -- offset ranges -------------------------------------------------------------------------------------


@runtime_checkable
class SparkOffsetRange(Protocol):
    """What the stores need from an engine's offset range: Spark 2.4's ``OffsetRange`` attribute names."""

    topic: str
    partition: int
    fromOffset: int  # noqa: N815 - Spark's name
    untilOffset: int  # noqa: N815 - Spark's name


def _one_range(value: object) -> OffsetRange:
    if isinstance(value, OffsetRange):
        return value
    if isinstance(value, (tuple, list)):
        if len(value) != 4:
            raise InvalidOffsetRange(value, f"a tuple range has 4 items, this one has {len(value)}")
        return OffsetRange(*value)
    for start, until in (("fromOffset", "untilOffset"), ("from_offset", "until_offset")):
        if hasattr(value, start) and hasattr(value, until):
            try:
                topic, partition = value.topic, value.partition  # type: ignore[attr-defined]
                return OffsetRange(topic, partition, getattr(value, start), getattr(value, until))
            except AttributeError as exc:
                raise InvalidOffsetRange(value, f"no attribute {exc.name!r}") from None
    raise InvalidOffsetRange(value, f"a {type(value).__name__} has neither .fromOffset/.untilOffset nor "
                             ".from_offset/.until_offset")


def to_offset_ranges(offset_ranges: object) -> tuple[OffsetRange, ...]:
    """Normalise what a caller passes as a batch's offset ranges into :class:`OffsetRange` values.

    Args:
        offset_ranges: an iterable of ranges in any accepted form (see the module docstring), or an object
            with an ``offsetRanges()`` method (Spark's ``HasOffsetRanges``, e.g. a Kafka RDD).

    Returns:
        The ranges, in the order given.

    Raises:
        InvalidOffsetRange: a range is malformed, or a topic-partition appears twice (a batch has at most
            one range per partition).
    """
    method = getattr(offset_ranges, "offsetRanges", None)
    if callable(method):
        offset_ranges = method()
    if isinstance(offset_ranges, (str, bytes)) or not isinstance(offset_ranges, Iterable):
        raise InvalidOffsetRange(offset_ranges, "expected an iterable of offset ranges")
    ranges = tuple(_one_range(value) for value in offset_ranges)
    seen: set[TopicPartition] = set()
    for r in ranges:
        if r.topic_partition in seen:
            raise InvalidOffsetRange(ranges, f"{r.topic}-{r.partition} appears twice in one batch")
        seen.add(r.topic_partition)
    return ranges


def _until_offsets(offset_ranges: object) -> dict[TopicPartition, int]:
    return {r.topic_partition: r.until_offset for r in to_offset_ranges(offset_ranges)}


def _selection(topics_or_partitions: object) -> tuple[set[str], set[TopicPartition]]:
    """Split ``load()``'s argument into whole topics and single partitions."""
    items: Iterable[object]
    if isinstance(topics_or_partitions, str) or _is_partition(topics_or_partitions):
        items = [topics_or_partitions]
    elif isinstance(topics_or_partitions, Iterable):
        items = topics_or_partitions
    else:
        msg = f"load() takes topic names and/or TopicPartitions, got {topics_or_partitions!r}"
        raise ConfigError(
            msg,
            field="topics_or_partitions", expected="str | TopicPartition | iterable of those",
            actual=topics_or_partitions,
        )
    topics: set[str] = set()
    partitions: set[TopicPartition] = set()
    for item in items:
        if isinstance(item, str) and _TOPIC_NAME.fullmatch(item):
            topics.add(item)
        elif _is_partition(item):
            partitions.add(TopicPartition(item[0], item[1]))  # type: ignore[index]
        else:
            msg = f"load() takes topic names and/or TopicPartitions, got {item!r}"
            raise ConfigError(
                msg,
                field="topics_or_partitions", expected="a Kafka topic name or a TopicPartition", actual=item,
            )
    return topics, partitions


def _is_partition(item: object) -> bool:
    return (
        isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and _TOPIC_NAME.fullmatch(item[0])
        is not None and isinstance(item[1], int) and not isinstance(item[1], bool) and item[1] >= 0
    )


def _selected(
    stored: Mapping[TopicPartition, int], topics: set[str], partitions: set[TopicPartition]
) -> dict[TopicPartition, int]:
    return {tp: stored[tp] for tp in sorted(stored) if tp.topic in topics or tp in partitions}


# -- the interface -------------------------------------------------------------------------------------


class OffsetStore(abc.ABC):
    """Where a DStream job keeps the offsets it resumes from.

    Offsets are "next offset to read" (a range's ``until_offset``), keyed by ``TopicPartition``. Stores
    are context managers that ``close()`` on exit. A store is safe to use from several threads (the engine
    may save from a callback thread), but give each process its own store.
    """

    @abc.abstractmethod
    def load(self, topics_or_partitions: TopicsOrPartitions) -> dict[TopicPartition, int]:
        """The stored offsets to resume from (the direct stream's ``fromOffsets``).

        Args:
            topics_or_partitions: a topic name (all its stored partitions), a ``TopicPartition``, or an
                iterable mixing both.

        Returns:
            ``{TopicPartition: next offset}`` in partition order; partitions never stored are absent, and
            the caller decides where they start (earliest, latest...).
        """

    @abc.abstractmethod
    def save(self, offset_ranges: object) -> dict[TopicPartition, int]:
        """Store each range's ``until_offset`` after the batch's output was written (at-least-once).

        Returns:
            ``{TopicPartition: offset}`` as stored.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store's connections. Safe to call twice."""

    def __enter__(self) -> OffsetStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- Kafka consumer-group offsets ------------------------------------------------------------------------


class KafkaGroupOffsetStore(OffsetStore):
    """Offsets committed to a Kafka consumer group, as Spark's 0-10 integration does with ``commitAsync``.

    Commits go through the admin API (OffsetCommit with no group generation, like
    ``kafka-consumer-groups --reset-offsets``), reads through OffsetFetch; both work on Apache Kafka and on
    the embedded Tansu broker. The group must have no active member: a consumer subscribed with the same
    ``group_id`` makes the broker refuse the commits (``UnknownMemberIdError``). Tansu stores no commit
    metadata and accepts commits for partitions a topic does not have; Apache Kafka refuses those.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        group_id: the consumer group the offsets belong to.
        settings: extra kafka-python client settings (security...), validated like :class:`kit.kafka.Kafka`'s.
        timeout_s: bound on connecting and on each request (default 30 s).

    Raises:
        kit.errors.BrokerUnavailable: no broker answered within ``timeout_s``.
        kit.errors.ConfigError: an empty ``group_id`` or unknown client settings.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        *,
        settings: Mapping[str, Any] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            msg = f"group_id must be a non-empty string, got {group_id!r}"
            raise ConfigError(msg, field="group_id", expected="non-empty str", actual=group_id)
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self._kafka = Kafka(bootstrap_servers, settings=settings, timeout_s=timeout_s)
        self._kafka.admin  # noqa: B018 - connect now, so a wrong address fails here and not mid-stream
        self._lock = threading.Lock()  # guards the queue below
        self._io_lock = threading.RLock()  # one request at a time: the Kafka handle is not thread-safe
        self._pending: dict[TopicPartition, int] = {}
        self._callbacks: list[CommitCallback] = []

    def load(self, topics_or_partitions: TopicsOrPartitions) -> dict[TopicPartition, int]:
        """The group's committed offsets (see :meth:`OffsetStore.load`).

        Raises:
            OffsetStoreUnavailable: the broker did not answer.
            CorruptStoredOffset: a committed offset is negative (other than Kafka's -1, "none").
        """
        topics, partitions = _selection(topics_or_partitions)
        try:
            with self._io_lock:
                committed = self._kafka.group_offsets(self.group_id)
        except KafkaError as exc:
            raise OffsetStoreUnavailable(
                backend="kafka",
                address=self.bootstrap_servers,
                detail=f"fetching the offsets of group {self.group_id!r} failed: {exc!r}",
                fix="check that the broker is running and reachable",
            ) from exc
        for tp, offset in committed.items():
            if offset < 0:
                raise CorruptStoredOffset(
                    backend="kafka", location=f"group {self.group_id!r} {tp.topic}-{tp.partition}", raw=offset
                )
        return _selected(committed, topics, partitions)

    def save(self, offset_ranges: object) -> dict[TopicPartition, int]:
        """Commit each range's ``until_offset`` to the group now (synchronously).

        Raises:
            OffsetCommitFailed: the broker refused a partition's commit or did not answer.
        """
        offsets = _until_offsets(offset_ranges)
        self._commit(offsets)
        return offsets

    def commit_async(self, offset_ranges: object, callback: CommitCallback | None = None) -> None:
        """Queue the ranges' ``until_offset`` for the next :meth:`flush_pending` (Spark's ``commitAsync``).

        As in Spark's ``DirectKafkaInputDStream``, nothing is sent now: the queue is committed when the next
        batch is generated, and queued offsets of a partition merge to the highest. Unlike Spark, which keeps
        only the last callback passed, every callback is called exactly once, by the flush that handles
        its offsets, with ``(offsets committed, None)`` or ``(offsets attempted, exception)``.

        Raises:
            InvalidOffsetRange: malformed ranges (at once, not at the flush).
        """
        offsets = _until_offsets(offset_ranges)
        with self._lock:
            for tp, offset in offsets.items():
                self._pending[tp] = max(offset, self._pending.get(tp, offset))
            if callback is not None:
                self._callbacks.append(callback)

    @property
    def pending_offsets(self) -> dict[TopicPartition, int]:
        """What the next :meth:`flush_pending` will commit (a copy)."""
        with self._lock:
            return dict(sorted(self._pending.items()))

    def flush_pending(self) -> dict[TopicPartition, int]:
        """Commit everything :meth:`commit_async` queued; the engine calls it when it generates a batch.

        On success the queue is emptied and each queued callback gets ``(offsets, None)``. On failure the
        offsets stay queued (merged with later ones) for the next flush, and each queued callback gets
        ``(offsets, OffsetCommitFailed)``; when no callback was queued, the error is raised instead, so a
        failed commit is never silent. A callback's own exception is raised after all callbacks ran.

        Returns:
            ``{TopicPartition: offset}`` committed (``{}`` when nothing was queued or the commit failed).

        Raises:
            OffsetCommitFailed: the commit failed and no callback was queued to receive the error.
        """
        with self._io_lock:
            with self._lock:
                offsets, self._pending = dict(sorted(self._pending.items())), {}
                callbacks, self._callbacks = self._callbacks, []
            error: OffsetCommitFailed | None = None
            if offsets:
                try:
                    self._commit(offsets)
                except OffsetCommitFailed as exc:
                    error = exc
                    with self._lock:
                        for tp, offset in offsets.items():
                            self._pending[tp] = max(offset, self._pending.get(tp, offset))
            callback_errors: list[BaseException] = []
            for callback in callbacks:
                try:
                    callback(dict(offsets), error)
                except Exception as exc:  # noqa: BLE001 - re-raised below, once every callback had its call
                    callback_errors.append(exc)
            if callback_errors:
                raise callback_errors[0]
            if error is not None:
                if not callbacks:
                    raise error
                return {}
            return offsets

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            with self._io_lock:
                errors = self._kafka.commit_group_offsets(self.group_id, offsets)
        except KafkaError as exc:
            raise OffsetCommitFailed(self.group_id, offsets, {}, repr(exc)) from exc
        if errors:
            raise OffsetCommitFailed(self.group_id, offsets, errors, f"the broker refused {errors}")

    def close(self) -> None:
        """Close the Kafka clients.

        Offsets still queued by :meth:`commit_async` are dropped, as Spark drops them when a stream stops,
        and their callbacks are not called: flush first to keep them.
        """
        with self._io_lock:
            self._kafka.close()


# -- ZooKeeper -------------------------------------------------------------------------------------------


class _Collected(logging.Handler):
    """Keeps the messages of the records it gets."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(TypeError, ValueError):
            self.into.append(record.getMessage())


@contextlib.contextmanager
def _kazoo_quiet() -> Iterator[list[str]]:
    """Collect what kazoo logs at WARNING and above inside the block instead of printing it."""
    logger = logging.getLogger("kazoo")
    messages: list[str] = []
    handler = _Collected(messages)
    handler.setLevel(logging.WARNING)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class ZooKeeperOffsetStore(OffsetStore):
    """Offsets in ZooKeeper, one node per partition: ``<root>/<topic>/<partition>`` holding the ASCII offset.

    This is the layout of the common kazoo recipe (``zk.ensure_path(path); zk.set(path, b"1200")``), so
    offsets written by such jobs load as they are. Nodes are created on first save. One save is a single
    ZooKeeper multi-op, so a batch's partitions change together. For Kafka's old consumer layout use
    ``root="/consumers/<group>/offsets"``.

    Args:
        hosts: ZooKeeper connection string, ``host:port[,host:port...][/chroot]``.
        root: absolute path of the parent of the topic nodes (default ``/consumers``).
        timeout_s: bound on connecting and on each request (default 10 s); also the session timeout.

    Raises:
        OffsetStoreUnavailable: no ZooKeeper server answered within ``timeout_s``.
        kit.errors.ConfigError: a relative ``root``.
    """

    def __init__(self, hosts: str, root: str = "/consumers", *, timeout_s: float = 10.0) -> None:
        from kazoo.client import KazooClient

        if not isinstance(root, str) or not root.startswith("/") or "//" in root:
            msg = f"root must be an absolute ZooKeeper path like '/consumers', got {root!r}"
            raise ConfigError(msg,
                              field="root", expected="absolute path", actual=root)
        self.hosts = hosts
        self.root = root.rstrip("/") or ""
        self.timeout_s = timeout_s
        try:
            self._zk = KazooClient(hosts=hosts, timeout=timeout_s)
        except ValueError as exc:
            msg = f"invalid ZooKeeper hosts {hosts!r}: {exc}"
            raise ConfigError(msg, field="hosts", expected="host:port[,host:port...][/chroot]", actual=hosts) from exc
        # kazoo logs each failed attempt (eight "Cannot resolve ..." lines for a wrong host name before the
        # timeout): kept out of the console, the first of them goes into the one-line error instead.
        with _kazoo_quiet() as attempts:
            try:
                self._zk.start(timeout=timeout_s)
            except self._zk.handler.timeout_exception as exc:
                self._zk.stop()
                self._zk.close()
                seen = f" (kazoo: {attempts[0]})" if attempts else ""
                raise OffsetStoreUnavailable(
                    backend="zookeeper", address=hosts, detail=f"no server answered within {timeout_s:g} s{seen}",
                    fix="start ZooKeeper or correct the hosts (host:port[,host:port...]), or raise timeout_s",
                ) from exc
        self._lock = threading.Lock()

    def _path(self, topic: str, partition: int | None = None) -> str:
        path = f"{self.root}/{topic}"
        return path if partition is None else f"{path}/{partition}"

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, KazooException, SessionExpiredError

        try:
            yield
        except (ConnectionLoss, ConnectionClosedError, SessionExpiredError, self._zk.handler.timeout_exception) as exc:
            raise OffsetStoreUnavailable(
                backend="zookeeper", address=self.hosts, detail=f"{doing} failed: {type(exc).__name__} {exc}",
                fix="check that the ZooKeeper ensemble is up and reachable; the offsets were not changed if saving",
            ) from exc
        except KazooException as exc:
            msg = f"zookeeper offset store at {self.hosts!r}: {doing} failed: {exc!r}"
            raise OffsetStoreError(msg) from exc

    def _wait(self, async_result: Any) -> Any:
        return async_result.get(timeout=self.timeout_s)

    def _read(self, topic: str, partition: int) -> int | None:
        from kazoo.exceptions import NoNodeError

        path = self._path(topic, partition)
        try:
            data, _stat = self._wait(self._zk.get_async(path))
        except NoNodeError:
            return None
        text = data.decode("ascii", "replace").strip() if data is not None else None
        if text is None or not text.isascii() or not text.isdigit():
            raise CorruptStoredOffset(backend="zookeeper", location=path, raw=data)
        return int(text)

    def load(self, topics_or_partitions: TopicsOrPartitions) -> dict[TopicPartition, int]:
        """Read ``<root>/<topic>/<partition>`` nodes (see :meth:`OffsetStore.load`).

        Raises:
            CorruptStoredOffset: a node's data is not an ASCII non-negative integer, or a child of a topic
                node is not a partition number.
            OffsetStoreUnavailable: the connection to ZooKeeper was lost.
        """
        from kazoo.exceptions import NoNodeError

        topics, partitions = _selection(topics_or_partitions)
        wanted: set[TopicPartition] = {tp for tp in partitions if tp.topic not in topics}
        stored: dict[TopicPartition, int] = {}
        with self._lock, self._errors("loading offsets"):
            for topic in sorted(topics):
                try:
                    children = self._wait(self._zk.get_children_async(self._path(topic)))
                except NoNodeError:
                    continue
                for child in children:
                    if not (child.isascii() and child.isdigit()):
                        raise CorruptStoredOffset(backend="zookeeper", location=self._path(topic) + "/" + child,
                                                  raw=f"a node named {child!r} where partition numbers belong")
                    wanted.add(TopicPartition(topic, int(child)))
            for tp in sorted(wanted):
                offset = self._read(tp.topic, tp.partition)
                if offset is not None:
                    stored[tp] = offset
        return _selected(stored, topics, partitions)

    def save(self, offset_ranges: object) -> dict[TopicPartition, int]:
        """Write each range's ``until_offset`` to its node, creating missing nodes, in one multi-op.

        Raises:
            OffsetStoreUnavailable: the connection to ZooKeeper was lost (nothing was changed).
            OffsetStoreError: ZooKeeper refused the update (e.g. ACLs), or nodes kept appearing and
                disappearing under a concurrent writer.
        """
        from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError

        offsets = _until_offsets(offset_ranges)
        if not offsets:
            return {}
        with self._lock, self._errors("saving offsets"):
            for _attempt in range(3):
                for topic in sorted({tp.topic for tp in offsets}):
                    self._wait(self._zk.ensure_path_async(self._path(topic)))
                transaction = self._zk.transaction()
                for tp, offset in sorted(offsets.items()):
                    path, data = self._path(tp.topic, tp.partition), str(offset).encode("ascii")
                    if self._wait(self._zk.exists_async(path)) is None:
                        transaction.create(path, data)
                    else:
                        transaction.set_data(path, data)
                results = self._wait(transaction.commit_async())
                failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
                if not failures:
                    return offsets
                if not all(isinstance(f, (NodeExistsError, NoNodeError)) for f in failures):
                    raise failures[0]
            msg = (
                f"zookeeper offset store at {self.hosts!r}: saving {offsets} failed 3 times because another "
                "client kept creating or deleting the same nodes. Fix: run one writer per consumer root."
            )
            raise OffsetStoreError(msg)

    def close(self) -> None:
        """Stop the ZooKeeper session."""
        self._zk.stop()
        self._zk.close()


# -- SQL (SQLite, PostgreSQL) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dialect:
    name: Literal["sqlite", "postgresql"]
    placeholder: str
    begin: str
    blob: str  # the binary column type
    errors: tuple[type[BaseException], ...]  # what the driver raises when the database is out of reach


def _sqlite_dialect() -> _Dialect:
    # IMMEDIATE takes the write lock at BEGIN, so the contiguity check and the update cannot interleave
    # with another writer's.
    return _Dialect("sqlite", "?", "BEGIN IMMEDIATE", "BLOB", (sqlite3.OperationalError,))


def _postgres_dialect() -> _Dialect:
    import psycopg

    return _Dialect("postgresql", "%s", "BEGIN", "BYTEA", (psycopg.OperationalError, psycopg.InterfaceError))


def _batch_time_ms(batch_time: object) -> int:
    if isinstance(batch_time, datetime.datetime):
        # PySpark's foreachRDD passes a naive local datetime made by datetime.fromtimestamp(ms / 1000).
        return round(batch_time.timestamp() * 1000)
    try:
        ms = integer(batch_time)
    except TypeError:
        ms = -1
    if ms < 0:
        msg = f"batch_time must be epoch milliseconds (int >= 0) or a datetime, got {batch_time!r}"
        raise ConfigError(
            msg,
            field="batch_time", expected="int >= 0 | datetime", actual=batch_time,
        )
    return ms


class SqlOffsetStore(OffsetStore):
    """Offsets in a SQL table, written in the same transaction as a batch's results (exactly-once).

    The table is ``dmk_offsets(consumer TEXT, topic TEXT, partition INT, until_offset BIGINT,
    batch_time BIGINT, PRIMARY KEY(consumer, topic, partition))``, created if absent; ``consumer`` names the
    job, so several jobs share one table. SQLite and PostgreSQL run the same SQL.

    Open one with :meth:`sqlite` or :meth:`postgres`, or pass your own DB-API connection in autocommit mode
    (the store issues BEGIN/COMMIT itself and closes the connection on :meth:`close`).

    Args:
        connection: an open ``sqlite3`` connection with ``isolation_level=None``, or a psycopg 3 connection
            with ``autocommit=True``.
        consumer: the job's name.
        dialect: ``"sqlite"`` or ``"postgresql"``.
        address: where the database is, for error messages.

    Raises:
        OffsetStoreUnavailable: the offsets table cannot be created (database read-only, gone...).
    """

    def __init__(
        self, connection: Any, consumer: str, *, dialect: Literal["sqlite", "postgresql"], address: str = ""
    ) -> None:
        if not isinstance(consumer, str) or not consumer:
            msg = f"consumer must be a non-empty string, got {consumer!r}"
            raise ConfigError(msg, field="consumer", expected="non-empty str", actual=consumer)
        if dialect == "sqlite":
            self._dialect = _sqlite_dialect()
        elif dialect == "postgresql":
            self._dialect = _postgres_dialect()
        else:
            msg = f"unknown SQL dialect {dialect!r}"
            raise ConfigError(msg, field="dialect", expected="'sqlite' | 'postgresql'", actual=dialect)
        self.consumer = consumer
        self.address = address
        self._connection = connection
        self._lock = threading.RLock()
        self._closed = False
        self.create_table(
            OFFSETS_TABLE,
            'consumer TEXT NOT NULL, topic TEXT NOT NULL, "partition" INT NOT NULL, until_offset BIGINT NOT NULL, '
            'batch_time BIGINT NOT NULL, PRIMARY KEY (consumer, topic, "partition")',
        )

    @classmethod
    def sqlite(cls, path: str | Any, consumer: str, *, timeout_s: float = 30.0) -> SqlOffsetStore:
        """A store in the SQLite file ``path`` (created if absent; ``":memory:"`` for tests).

        Args:
            path: the database file.
            consumer: the job's name.
            timeout_s: how long to wait for another writer's lock (default 30 s).

        Raises:
            OffsetStoreUnavailable: the file cannot be opened (missing directory, permissions).
        """
        address = str(path)
        try:
            connection = sqlite3.connect(address, timeout=timeout_s, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA journal_mode")  # opening is lazy: touch the file now
        except sqlite3.OperationalError as exc:
            raise OffsetStoreUnavailable(
                backend="sqlite",
                address=address,
                detail=str(exc),
                fix="create the parent directory or fix its permissions",
            ) from exc
        try:
            return cls(connection, consumer, dialect="sqlite", address=address)
        except BaseException:
            connection.close()
            raise

    @classmethod
    def postgres(cls, dsn: str, consumer: str, *, connect_timeout_s: int = 10) -> SqlOffsetStore:
        """A store in the PostgreSQL database ``dsn`` (libpq syntax: ``"host=... port=... dbname=..."`` or a URL).

        Args:
            dsn: connection string.
            consumer: the job's name.
            connect_timeout_s: bound on connecting (default 10 s).

        Raises:
            OffsetStoreUnavailable: the server is not reachable or refuses the login.
        """
        import psycopg

        address = redacted_dsn(dsn)
        try:
            connection = psycopg.connect(dsn, autocommit=True, connect_timeout=connect_timeout_s)
        except psycopg.Error as exc:
            detail = str(exc).strip().replace("\n", " ")
            raise OffsetStoreUnavailable(
                backend="postgresql", address=address, detail=detail,
                fix="start PostgreSQL or correct host/port/user/dbname in the DSN (and its password or pg_hba.conf)",
            ) from exc
        try:
            return cls(connection, consumer, dialect="postgresql", address=address)
        except BaseException:
            connection.close()
            raise

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._dialect.name

    @property
    def placeholder(self) -> str:
        """The driver's parameter mark, as :meth:`OffsetTransaction.execute` takes it: ``?`` or ``%s``."""
        return self._dialect.placeholder

    @contextlib.contextmanager
    def _unavailable(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._dialect.errors as exc:
            raise OffsetStoreUnavailable(
                self._dialect.name, self.address, f"{doing} failed: {exc}".replace("\n", " ").strip(),
                "check that the database is running and writable",
            ) from exc

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self._dialect.placeholder)

    def _stored(self, cursor: Any) -> dict[TopicPartition, int]:
        query = f'SELECT topic, "partition", until_offset FROM {OFFSETS_TABLE} WHERE consumer = ?'
        cursor.execute(self._sql(query), (self.consumer,))
        stored: dict[TopicPartition, int] = {}
        for topic, partition, until in cursor.fetchall():
            location = f"{OFFSETS_TABLE} row (consumer={self.consumer!r}, topic={topic!r}, partition={partition!r})"
            if not isinstance(until, int) or isinstance(until, bool) or until < 0:
                raise CorruptStoredOffset(self._dialect.name, location, until)
            if not isinstance(partition, int) or partition < 0 or not isinstance(topic, str):
                raise CorruptStoredOffset(self._dialect.name, location, partition)
            stored[TopicPartition(topic, partition)] = until
        return stored

    def load(self, topics_or_partitions: TopicsOrPartitions) -> dict[TopicPartition, int]:
        """This consumer's stored offsets (see :meth:`OffsetStore.load`).

        Raises:
            CorruptStoredOffset: a row's ``until_offset`` is negative or not an integer.
            OffsetStoreUnavailable: the database cannot be read.
        """
        topics, partitions = _selection(topics_or_partitions)
        with self._lock, self._unavailable("loading offsets"):
            cursor = self._connection.cursor()
            try:
                return _selected(self._stored(cursor), topics, partitions)
            finally:
                cursor.close()

    def save(self, offset_ranges: object, *, batch_time: object = None) -> dict[TopicPartition, int]:
        """Store the ranges' offsets alone, in their own transaction (at-least-once use).

        The same contiguity guard as :meth:`OffsetTransaction.save_offsets` applies.

        Args:
            offset_ranges: the batch's ranges.
            batch_time: the batch's time (epoch ms or datetime); by default now.
        """
        ranges = to_offset_ranges(offset_ranges)
        when = round(time.time() * 1000) if batch_time is None else batch_time
        with self.transaction(when, ranges) as tx:
            tx.save_offsets()
        return {r.topic_partition: r.until_offset for r in ranges}

    def create_table(self, name: str, columns: str) -> None:
        """``CREATE TABLE IF NOT EXISTS name (columns)``, at once (outside any batch's transaction).

        For the tables a job's batches write next to their offsets. ``{blob}`` in ``columns`` becomes the
        dialect's binary type (``BLOB`` / ``BYTEA``).

        Raises:
            OffsetStoreUnavailable: the table cannot be created (database read-only, gone...).
        """
        with self._lock, self._unavailable(f"creating table {name}"):
            self._connection.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns.format(blob=self._dialect.blob)})")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run a read-only ``sql`` (``?`` placeholders, in either dialect) and return its rows.

        For reading what batches committed next to their offsets (e.g. a results table).

        Raises:
            OffsetStoreUnavailable: the database cannot be read.
        """
        with self._lock, self._unavailable("querying"):
            cursor = self._connection.cursor()
            try:
                cursor.execute(self._sql(sql), tuple(params))
                return [tuple(row) for row in cursor.fetchall()]
            finally:
                cursor.close()

    @contextlib.contextmanager
    def transaction(self, batch_time: object, offset_ranges: object = None) -> Iterator[OffsetTransaction]:
        """One database transaction holding a batch's results and its offsets.

        Commits when the block ends normally, rolls back when it raises (then re-raises). A block that
        executed statements must also have saved offsets, else it is rolled back with
        :class:`OffsetsNotSaved`. A block that did nothing commits nothing.

        Args:
            batch_time: the batch's time, epoch milliseconds or a datetime (what ``foreachRDD`` gets).
            offset_ranges: the batch's ranges; needed up front for ``tx.already_done`` and to call
                ``tx.save_offsets()`` without arguments.

        Raises:
            NonContiguousOffsets: from ``tx.save_offsets`` (after rolling back).
            OffsetStoreUnavailable: the database failed to begin or commit.
        """
        ms = _batch_time_ms(batch_time)
        ranges = None if offset_ranges is None else to_offset_ranges(offset_ranges)
        with self._lock:
            if self._closed:
                msg = f"the {self._dialect.name} offset store at {self.address!r} is closed"
                raise OffsetStoreError(msg)
            cursor = self._connection.cursor()
            try:
                with self._unavailable(f"beginning the transaction of batch {ms}"):
                    cursor.execute(self._dialect.begin)
            except BaseException:
                cursor.close()
                raise
            tx = OffsetTransaction(self, cursor, ms, ranges)
            try:
                yield tx
                if tx._executed and not tx._saved:
                    raise OffsetsNotSaved(ms)
            except BaseException:
                # The block's error matters, not a failure to roll back on a connection that is gone.
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
                raise
            else:
                with self._unavailable(f"committing batch {ms}"):
                    cursor.execute("COMMIT")
            finally:
                tx._open = False
                with contextlib.suppress(Exception):
                    cursor.close()

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._connection.close()


class OffsetTransaction:
    """The open transaction of one batch, handed out by :meth:`SqlOffsetStore.transaction`.

    Attributes:
        batch_time_ms: the batch's time in epoch milliseconds.
        offset_ranges: the batch's ranges when given to ``transaction()``, else None.
    """

    def __init__(
        self, store: SqlOffsetStore, cursor: Any, batch_time_ms: int, ranges: tuple[OffsetRange, ...] | None
    ) -> None:
        self._store = store
        self._cursor = cursor
        self.batch_time_ms = batch_time_ms
        self.offset_ranges = ranges
        self._executed = False
        self._saved = False
        self._open = True

    def _check_open(self) -> None:
        if not self._open:
            msg = f"the transaction of batch {self.batch_time_ms} is over; use it inside its `with` block"
            raise OffsetStoreError(msg)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Any:
        """Run one statement of the batch's output in the transaction; returns the DB-API cursor.

        ``sql`` uses the driver's placeholders: ``?`` for SQLite, ``%s`` for psycopg.
        """
        self._check_open()
        self._executed = True
        if params is None:
            return self._cursor.execute(sql)
        return self._cursor.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> Any:
        """Run one statement for each row of ``rows`` in the transaction."""
        self._check_open()
        self._executed = True
        return self._cursor.executemany(sql, rows)

    def stored_offsets(self) -> dict[TopicPartition, int]:
        """The consumer's offsets as this transaction sees them."""
        self._check_open()
        return self._store._stored(self._cursor)

    def _ranges(self, offset_ranges: object) -> tuple[OffsetRange, ...]:
        if offset_ranges is not None:
            return to_offset_ranges(offset_ranges)
        if self.offset_ranges is None:
            msg = (
                "this transaction was opened without offset ranges: pass them to transaction(batch_time, "
                "ranges) or to this call"
            )
            raise ConfigError(msg, field="offset_ranges", expected="the batch's offset ranges", actual=None)
        return self.offset_ranges

    @property
    def already_done(self) -> bool:
        """True when this batch's offsets were committed before (a replayed batch): skip its output.

        That is, every non-empty range ends at or before its partition's stored offset. A batch with only
        empty ranges is never "done" (saving it changes nothing anyway).
        """
        self._check_open()
        ranges = [r for r in self._ranges(None) if r.count() > 0]
        stored = self.stored_offsets()
        return bool(ranges) and all(stored.get(r.topic_partition, -1) >= r.until_offset for r in ranges)

    def save_offsets(self, offset_ranges: object = None) -> dict[TopicPartition, int]:
        """Write the batch's offsets in this transaction, refusing ranges that do not start at the stored offset.

        A partition with no stored offset takes any start. Nothing is written unless every range fits.

        Args:
            offset_ranges: the batch's ranges; by default those given to ``transaction()``.

        Returns:
            ``{TopicPartition: until_offset}`` written.

        Raises:
            NonContiguousOffsets: a range leaves a gap after, or overlaps, its stored offset (the whole
                transaction then rolls back when the exception leaves the ``with`` block).
        """
        self._check_open()
        ranges = self._ranges(offset_ranges)
        store, cursor = self._store, self._cursor
        stored = self.stored_offsets()
        for r in ranges:
            expected = stored.get(r.topic_partition)
            if expected is not None and expected != r.from_offset:
                raise NonContiguousOffsets(
                    store.consumer, r.topic, r.partition, expected=expected, actual=r.from_offset
                )
        for r in ranges:
            # Compare-and-set: a concurrent writer (PostgreSQL, READ COMMITTED) makes these touch no row.
            if r.topic_partition in stored:
                cursor.execute(store._sql(
                    f"UPDATE {OFFSETS_TABLE} SET until_offset = ?, batch_time = ? "
                    'WHERE consumer = ? AND topic = ? AND "partition" = ? AND until_offset = ?'),
                    (r.until_offset, self.batch_time_ms, store.consumer, r.topic, r.partition, r.from_offset))
            else:
                cursor.execute(store._sql(
                    f'INSERT INTO {OFFSETS_TABLE} (consumer, topic, "partition", until_offset, batch_time) '
                    'VALUES (?, ?, ?, ?, ?) ON CONFLICT (consumer, topic, "partition") DO NOTHING'),
                    (store.consumer, r.topic, r.partition, r.until_offset, self.batch_time_ms))
            if cursor.rowcount != 1:
                now = store._stored(cursor).get(r.topic_partition, -1)
                raise NonContiguousOffsets(store.consumer, r.topic, r.partition, expected=now, actual=r.from_offset)
        self._saved = True
        return {r.topic_partition: r.until_offset for r in ranges}


STORE_KINDS = ("kafka", "zookeeper", "sqlite", "postgresql")


def open_store(kind: str, where: str, consumer: str, *, bootstrap_servers: str | None = None) -> OffsetStore:
    """The offset store of one job, opened, laid out as :mod:`legacy.runner` keeps it.

    Args:
        kind: ``"kafka"`` (the consumer group ``where``), ``"zookeeper"`` (hosts ``where``, nodes
            ``/consumers/<consumer>/offsets/<topic>/<partition>``), ``"sqlite"`` (the file ``where``) or
            ``"postgresql"`` (the DSN ``where``); SQL stores keep ``consumer``'s rows of ``dmk_offsets``.
        where: the store's address (see ``kind``).
        consumer: the job's name in its store (unused for ``kafka``: the group is ``where``).
        bootstrap_servers: Kafka, for ``kind="kafka"``.

    Raises:
        ConfigError: an unknown kind, or ``kafka`` without ``bootstrap_servers``.
        OffsetStoreUnavailable: the store cannot be reached.
    """
    if kind == "kafka":
        if not bootstrap_servers:
            msg = "a Kafka group offset store needs bootstrap_servers"
            raise ConfigError(msg, field="bootstrap_servers", expected="host:port", actual=bootstrap_servers)
        return KafkaGroupOffsetStore(bootstrap_servers, where)
    if kind == "zookeeper":
        return ZooKeeperOffsetStore(where, root=f"/consumers/{consumer}/offsets")
    if kind == "sqlite":
        return SqlOffsetStore.sqlite(where, consumer)
    if kind == "postgresql":
        return SqlOffsetStore.postgres(where, consumer)
    msg = f"offset store kind must be one of {', '.join(STORE_KINDS)}, got {kind!r}"
    raise ConfigError(msg, field="kind", expected=STORE_KINDS, actual=kind)
