"""Offset stores against real servers: the session's Kafka broker, a real ZooKeeper and a real PostgreSQL
(started once per session by ``tests/_servers.py``), and SQLite files.

The SQL tests run on both backends with the same code; crashes are simulated by an exception inside the
transaction and by SIGKILL of a subprocess stopped in the middle of one.
"""

from __future__ import annotations

import datetime
import os
import selectors
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kit.broker import free_port
from kit.errors import BrokerUnavailable, ConfigError
from kit.kafka import Kafka, TopicPartition
from legacy.offsets import (
    OFFSETS_TABLE,
    CorruptStoredOffset,
    InvalidOffsetRange,
    KafkaGroupOffsetStore,
    NonContiguousOffsets,
    OffsetCommitFailed,
    OffsetRange,
    OffsetsNotSaved,
    OffsetStoreUnavailable,
    SparkOffsetRange,
    SqlOffsetStore,
    ZooKeeperOffsetStore,
    to_offset_ranges,
)

REPO = Path(__file__).resolve().parents[1]
TP = TopicPartition


# -- offset ranges (no server) --------------------------------------------------------------------------


def test_ranges_are_accepted_in_spark_snake_case_tuple_and_rdd_forms() -> None:
    spark_style = SimpleNamespace(topic="events", partition=1, fromOffset=5, untilOffset=9)
    snake_style = SimpleNamespace(topic="events", partition=2, from_offset=0, until_offset=0)
    rdd = SimpleNamespace(offsetRanges=lambda: [("clicks", 0, 10, 20)])

    assert to_offset_ranges([OffsetRange("events", 0, 0, 3), spark_style, snake_style, ["other", 4, 1, 2]]) == (
        OffsetRange("events", 0, 0, 3),
        OffsetRange("events", 1, 5, 9),
        OffsetRange("events", 2, 0, 0),
        OffsetRange("other", 4, 1, 2),
    )
    assert to_offset_ranges(rdd) == (OffsetRange("clicks", 0, 10, 20),)
    only = OffsetRange("events", 3, 7, 11)
    assert (only.fromOffset, only.untilOffset, only.count(), only.topic_partition) == (7, 11, 4, TP("events", 3))
    assert isinstance(only, SparkOffsetRange)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (("events", 0, 9, 3), "until_offset 3 < from_offset 9"),
        (("events", -1, 0, 3), "partition and offsets must be >= 0"),
        (("events", 0, 1.5, 3), "1.5 (float) is not an integer"),
        (("events", True, 0, 3), "True is a bool, not an integer"),
        (("bad/topic", 0, 0, 3), "topic 'bad/topic' is not a Kafka topic name ([A-Za-z0-9._-]+)"),
        (("events", 0, 3), "a tuple range has 4 items, this one has 3"),
        (SimpleNamespace(topic="events", partition=0, start=0, end=1),
         "a SimpleNamespace has neither .fromOffset/.untilOffset nor .from_offset/.until_offset"),
    ],
)
def test_malformed_ranges_are_refused_with_the_problem(value: Any, problem: str) -> None:
    with pytest.raises(InvalidOffsetRange) as err:
        to_offset_ranges([value])
    assert err.value.problem == problem
    assert isinstance(err.value, ValueError)


def test_a_partition_twice_in_one_batch_is_refused() -> None:
    with pytest.raises(InvalidOffsetRange) as err:
        to_offset_ranges([("events", 0, 0, 5), ("events", 0, 5, 9)])
    assert err.value.problem == "events-0 appears twice in one batch"


# -- Kafka consumer group --------------------------------------------------------------------------------


@pytest.fixture
def kafka_store_factory(bootstrap_servers: str) -> Iterator[Callable[..., KafkaGroupOffsetStore]]:
    """Open group stores on the session broker (``kafka_store_factory(group_id)``); closed afterwards."""
    opened: list[KafkaGroupOffsetStore] = []

    def make(group_id: str) -> KafkaGroupOffsetStore:
        store = KafkaGroupOffsetStore(bootstrap_servers, group_id, timeout_s=20)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _group() -> str:
    return f"pytest-group-{uuid.uuid4().hex[:12]}"


@pytest.mark.kafka
def test_kafka_group_offsets_saved_by_one_store_load_in_a_fresh_one(
    kafka_store_factory: Callable[..., KafkaGroupOffsetStore], topic_factory: Callable[..., str], kafka: Kafka
) -> None:
    events, other = topic_factory(partitions=3), topic_factory(partitions=1)
    group = _group()
    writer = kafka_store_factory(group)
    assert writer.load(events) == {}

    saved = writer.save([
        OffsetRange(events, 0, 0, 120),
        (events, 2, 0, 7),
        SimpleNamespace(topic=other, partition=0, fromOffset=3, untilOffset=9),
    ])

    assert saved == {TP(events, 0): 120, TP(events, 2): 7, TP(other, 0): 9}
    # Committed to the consumer group itself, as any Kafka tool sees it.
    committed = kafka.admin.list_group_offsets(group)[group]
    assert {tp: meta.offset for tp, meta in committed.items()} == saved
    reader = kafka_store_factory(group)
    assert reader.load(events) == {TP(events, 0): 120, TP(events, 2): 7}  # partition 1: never stored, absent
    assert reader.load([TP(events, 1), TP(other, 0)]) == {TP(other, 0): 9}
    assert reader.load([events, other]) == saved
    writer.save([(events, 0, 120, 130)])
    assert reader.load(TP(events, 0)) == {TP(events, 0): 130}
    assert kafka_store_factory(_group()).load([events, other]) == {}


@pytest.mark.kafka
def test_kafka_commit_async_is_queued_until_flush_pending_then_calls_back(
    kafka_store_factory: Callable[..., KafkaGroupOffsetStore], topic_factory: Callable[..., str]
) -> None:
    events = topic_factory(partitions=2)
    group = _group()
    store, observer = kafka_store_factory(group), kafka_store_factory(group)
    calls: list[tuple[dict[TopicPartition, int], Exception | None]] = []

    store.commit_async(
        [(events, 0, 0, 10), (events, 1, 0, 4)], callback=lambda offsets, exc: calls.append((offsets, exc))
    )
    store.commit_async([(events, 0, 10, 25)])

    assert store.pending_offsets == {TP(events, 0): 25, TP(events, 1): 4}
    assert observer.load(events) == {}  # nothing is sent before the next batch is generated
    assert calls == []

    assert store.flush_pending() == {TP(events, 0): 25, TP(events, 1): 4}

    assert calls == [({TP(events, 0): 25, TP(events, 1): 4}, None)]
    assert store.pending_offsets == {}
    assert observer.load(events) == {TP(events, 0): 25, TP(events, 1): 4}
    assert store.flush_pending() == {}
    assert len(calls) == 1


@pytest.mark.kafka
def test_kafka_refused_commit_goes_to_the_callback_stays_queued_and_raises_without_one(
    kafka_store_factory: Callable[..., KafkaGroupOffsetStore], topic_factory: Callable[..., str]
) -> None:
    missing = topic_factory(create=False)  # the broker refuses commits for a topic it does not have
    group = _group()
    store = kafka_store_factory(group)
    calls: list[tuple[dict[TopicPartition, int], Exception | None]] = []

    store.commit_async([(missing, 0, 0, 5)], callback=lambda offsets, exc: calls.append((offsets, exc)))

    assert store.flush_pending() == {}
    [(offsets, error)] = calls
    assert offsets == {TP(missing, 0): 5}
    assert isinstance(error, OffsetCommitFailed)
    assert (error.group_id, error.offsets, error.errors) == (
        group, {TP(missing, 0): 5}, {TP(missing, 0): "UnknownTopicOrPartitionError"}
    )
    assert store.pending_offsets == {TP(missing, 0): 5}  # retried at the next flush
    with pytest.raises(OffsetCommitFailed) as err:
        store.flush_pending()  # no callback queued this time: the failure is raised
    assert err.value.errors == {TP(missing, 0): "UnknownTopicOrPartitionError"}
    with pytest.raises(OffsetCommitFailed):
        store.save([(missing, 0, 5, 6)])


def test_kafka_group_store_on_an_unreachable_broker_fails_at_construction() -> None:
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(BrokerUnavailable) as err:
        KafkaGroupOffsetStore(address, "g", timeout_s=1)
    assert err.value.bootstrap_servers == address


def test_kafka_group_store_refuses_an_empty_group_id() -> None:
    with pytest.raises(ConfigError) as err:
        KafkaGroupOffsetStore("127.0.0.1:9", "")
    assert (err.value.field, err.value.actual) == ("group_id", "")


# -- ZooKeeper -------------------------------------------------------------------------------------------


@pytest.fixture
def zk(zookeeper_hosts: str) -> Iterator[Any]:
    """A raw kazoo client on the session's ZooKeeper, to look at (and damage) the nodes directly."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper_hosts, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_store_factory(zookeeper_hosts: str) -> Iterator[Callable[..., ZooKeeperOffsetStore]]:
    """Open ZooKeeper stores (``zk_store_factory(root=...)``); closed afterwards."""
    opened: list[ZooKeeperOffsetStore] = []

    def make(**kwargs: Any) -> ZooKeeperOffsetStore:
        store = ZooKeeperOffsetStore(zookeeper_hosts, **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _topic() -> str:
    return f"pytest_{uuid.uuid4().hex[:12]}"


def test_zookeeper_nodes_are_consumers_topic_partition_holding_ascii_offsets(
    zk_store_factory: Callable[..., ZooKeeperOffsetStore], zk: Any
) -> None:
    topic = _topic()
    writer = zk_store_factory()
    assert writer.load(topic) == {}
    assert zk.exists(f"/consumers/{topic}") is None  # nothing is created by reading

    writer.save([(topic, 0, 0, 42), (topic, 3, 0, 7)])

    assert sorted(zk.get_children(f"/consumers/{topic}")) == ["0", "3"]
    assert zk.get(f"/consumers/{topic}/0")[0] == b"42"
    assert zk.get(f"/consumers/{topic}/3")[0] == b"7"
    writer.save([(topic, 0, 42, 1200), (topic, 5, 0, 1)])
    assert sorted(zk.get_children(f"/consumers/{topic}")) == ["0", "3", "5"]
    assert zk.get(f"/consumers/{topic}/0")[0] == b"1200"

    reader = zk_store_factory()
    assert reader.load(topic) == {TP(topic, 0): 1200, TP(topic, 3): 7, TP(topic, 5): 1}
    assert reader.load([TP(topic, 3), TP(topic, 4)]) == {TP(topic, 3): 7}  # partition 4: never stored


def test_zookeeper_store_loads_offsets_written_by_the_kazoo_recipe(
    zk_store_factory: Callable[..., ZooKeeperOffsetStore], zk: Any
) -> None:
    topic = _topic()
    for partition, offset in ((0, 1200), (1, 30)):  # the recipe: ensure_path, then set str(untilOffset)
        path = f"/consumers/{topic}/{partition}"
        zk.ensure_path(path)
        zk.set(path, str(offset).encode())

    assert zk_store_factory().load([topic]) == {TP(topic, 0): 1200, TP(topic, 1): 30}


def test_zookeeper_store_under_another_root(zk_store_factory: Callable[..., ZooKeeperOffsetStore], zk: Any) -> None:
    topic, root = _topic(), f"/pytest/{uuid.uuid4().hex[:8]}/offsets"

    zk_store_factory(root=root + "/").save([(topic, 2, 0, 9)])

    assert zk.get(f"{root}/{topic}/2")[0] == b"9"
    assert zk_store_factory(root=root).load(topic) == {TP(topic, 2): 9}
    assert zk_store_factory().load(topic) == {}


@pytest.mark.parametrize(
    ("child", "data", "raw"),
    [("1", b"12x", b"12x"), ("1", b"", b""), ("owners", b"7", "a node named 'owners' where partition numbers belong")],
)
def test_zookeeper_corrupt_offset_is_reported_with_its_path(
    zk_store_factory: Callable[..., ZooKeeperOffsetStore], zk: Any, child: str, data: bytes, raw: object
) -> None:
    topic = _topic()
    zk.create(f"/consumers/{topic}/0", b"5", makepath=True)
    zk.create(f"/consumers/{topic}/{child}", data)

    with pytest.raises(CorruptStoredOffset) as err:
        zk_store_factory().load(topic)

    assert (err.value.backend, err.value.location, err.value.raw) == ("zookeeper", f"/consumers/{topic}/{child}", raw)
    assert zk_store_factory().load(TP(topic, 0)) == {TP(topic, 0): 5}  # the sound node still loads alone


def test_zookeeper_store_on_an_unreachable_server_names_the_address() -> None:
    hosts = f"127.0.0.1:{free_port()}"
    started = time.monotonic()

    with pytest.raises(OffsetStoreUnavailable) as err:
        ZooKeeperOffsetStore(hosts, timeout_s=1)

    assert (err.value.backend, err.value.address) == ("zookeeper", hosts)
    assert "start ZooKeeper" in err.value.fix
    assert time.monotonic() - started < 10


# -- SQL: SQLite and PostgreSQL --------------------------------------------------------------------------


class _SqlTarget:
    """One empty database of one backend: opens stores on it and reads it directly."""

    def __init__(self, backend: str, location: str) -> None:
        self.backend = backend
        self.location = location
        self.placeholder = "?" if backend == "sqlite" else "%s"
        self._stores: list[SqlOffsetStore] = []

    def open(self, consumer: str = "job") -> SqlOffsetStore:
        if self.backend == "sqlite":
            store = SqlOffsetStore.sqlite(self.location, consumer)
        else:
            store = SqlOffsetStore.postgres(self.location, consumer)
        self._stores.append(store)
        return store

    def _connect(self) -> Any:
        if self.backend == "sqlite":
            return sqlite3.connect(self.location, isolation_level=None)
        import psycopg

        return psycopg.connect(self.location, autocommit=True)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        connection = self._connect()
        try:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
        finally:
            connection.close()

    def run(self, sql: str) -> None:
        connection = self._connect()
        try:
            connection.execute(sql)
        finally:
            connection.close()

    def close(self) -> None:
        for store in self._stores:
            store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def sql(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_SqlTarget]:
    """A fresh database per backend with an empty ``results`` table; every store opened on it is closed."""
    if request.param == "sqlite":
        location = str(tmp_path / "job.db")
    else:
        location = request.getfixturevalue("postgres_dsn_factory")()
    target = _SqlTarget(request.param, location)
    target.run("CREATE TABLE results (batch_time BIGINT, word TEXT, n INT)")
    yield target
    target.close()


def _write_batch(target: _SqlTarget, store: SqlOffsetStore, batch_time: object, ranges: list[tuple[str, int, int, int]],
                 rows: list[tuple[str, int]]) -> None:
    p = target.placeholder
    with store.transaction(batch_time, ranges) as tx:
        tx.executemany(f"INSERT INTO results VALUES ({p}, {p}, {p})", [(tx.batch_time_ms, w, n) for w, n in rows])
        tx.save_offsets()


def _offset_rows(target: _SqlTarget) -> list[tuple[Any, ...]]:
    return target.query(f'SELECT consumer, topic, "partition", until_offset, batch_time FROM {OFFSETS_TABLE} '
                        'ORDER BY consumer, topic, "partition"')


def _results(target: _SqlTarget) -> list[tuple[Any, ...]]:
    return target.query("SELECT batch_time, word, n FROM results ORDER BY batch_time, word")


def test_sql_results_and_offsets_commit_together(sql: _SqlTarget) -> None:
    store = sql.open()
    assert store.load("t") == {}

    _write_batch(sql, store, 1000, [("t", 0, 0, 3), ("t", 1, 0, 2)], [("a", 2), ("b", 3)])
    _write_batch(sql, store, datetime.datetime.fromtimestamp(2.5), [("t", 0, 3, 5), ("t", 1, 2, 2)], [("a", 1)])

    assert _offset_rows(sql) == [("job", "t", 0, 5, 2500), ("job", "t", 1, 2, 2500)]
    assert _results(sql) == [(1000, "a", 2), (1000, "b", 3), (2500, "a", 1)]
    assert sql.open().load("t") == {TP("t", 0): 5, TP("t", 1): 2}


def test_sql_exception_inside_the_transaction_leaves_the_last_committed_batch(sql: _SqlTarget) -> None:
    store = sql.open()
    _write_batch(sql, store, 1000, [("t", 0, 0, 10)], [("a", 10)])

    with pytest.raises(RuntimeError, match="crash after the writes"):
        with store.transaction(2000, [("t", 0, 10, 20)]) as tx:
            tx.execute(f"INSERT INTO results VALUES ({sql.placeholder}, 'b', 10)", (2000,))
            tx.save_offsets()
            raise RuntimeError("crash after the writes")

    assert _offset_rows(sql) == [("job", "t", 0, 10, 1000)]
    assert _results(sql) == [(1000, "a", 10)]
    resumed = sql.open()
    assert resumed.load("t") == {TP("t", 0): 10}
    _write_batch(sql, resumed, 2000, [("t", 0, 10, 20)], [("b", 10)])
    assert _results(sql) == [(1000, "a", 10), (2000, "b", 10)]


_CRASHING_JOB = textwrap.dedent("""
    import sys
    from legacy.offsets import SqlOffsetStore

    backend, location = sys.argv[1], sys.argv[2]
    p = "?" if backend == "sqlite" else "%s"
    store = SqlOffsetStore.sqlite(location, "job") if backend == "sqlite" else SqlOffsetStore.postgres(location, "job")
    with store.transaction(2000, [("t", 0, 10, 20)]) as tx:
        tx.execute(f"INSERT INTO results VALUES ({p}, {p}, {p})", (2000, "b", 10))
        tx.save_offsets()
        print("in-transaction", flush=True)
        sys.stdin.readline()  # SIGKILLed here
""")


def test_sql_sigkill_in_the_middle_of_a_transaction_leaves_the_last_committed_batch(sql: _SqlTarget) -> None:
    _write_batch(sql, sql.open(), 1000, [("t", 0, 0, 10)], [("a", 10)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _CRASHING_JOB, sql.backend, sql.location], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=30)
        line = child.stdout.readline() if ready else b""
        assert line == b"in-transaction\n", f"child never reached the transaction: {child.stderr.read1()!r}"
        if sql.backend == "sqlite":
            assert Path(sql.location + "-journal").exists()  # a write transaction is open on the file
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()
        child.stderr.close()

    resumed = sql.open()
    assert resumed.load("t") == {TP("t", 0): 10}
    assert _results(sql) == [(1000, "a", 10)]
    _write_batch(sql, resumed, 2000, [("t", 0, 10, 20)], [("b", 10)])
    assert _offset_rows(sql) == [("job", "t", 0, 20, 2000)]
    assert _results(sql) == [(1000, "a", 10), (2000, "b", 10)]


def test_sql_guard_refuses_gaps_and_overlaps_and_spots_replayed_batches(sql: _SqlTarget) -> None:
    store = sql.open()
    _write_batch(sql, store, 1000, [("t", 0, 0, 10)], [("a", 10)])

    with pytest.raises(NonContiguousOffsets) as gap:
        _write_batch(sql, store, 2000, [("t", 0, 12, 20)], [("b", 8)])
    assert (gap.value.consumer, gap.value.topic, gap.value.partition) == ("job", "t", 0)
    assert (gap.value.kind, gap.value.expected, gap.value.actual) == ("gap", 10, 12)

    with store.transaction(1000, [("t", 0, 0, 10)]) as tx:  # batch 1 again, as after a restore
        assert tx.already_done is True
        with pytest.raises(NonContiguousOffsets) as replay:
            tx.save_offsets()
    assert (replay.value.kind, replay.value.expected, replay.value.actual) == ("overlap", 10, 0)

    with pytest.raises(NonContiguousOffsets) as overlap:
        with store.transaction(2000, [("t", 0, 5, 15)]) as tx:
            assert tx.already_done is False
            tx.execute(f"INSERT INTO results VALUES ({sql.placeholder}, 'c', 1)", (2000,))
            tx.save_offsets()
    assert (overlap.value.kind, overlap.value.expected, overlap.value.actual) == ("overlap", 10, 5)

    assert _offset_rows(sql) == [("job", "t", 0, 10, 1000)]
    assert _results(sql) == [(1000, "a", 10)]
    # A partition with no stored offset may start anywhere.
    _write_batch(sql, store, 2000, [("t", 0, 10, 20), ("t", 1, 50, 60)], [("d", 20)])
    assert store.load("t") == {TP("t", 0): 20, TP("t", 1): 60}


def test_sql_statements_without_offsets_are_rolled_back(sql: _SqlTarget) -> None:
    store = sql.open()

    with pytest.raises(OffsetsNotSaved) as err:
        with store.transaction(3000, [("t", 0, 0, 5)]) as tx:
            tx.execute(f"INSERT INTO results VALUES ({sql.placeholder}, 'a', 1)", (3000,))

    assert err.value.batch_time_ms == 3000
    assert _results(sql) == []
    assert _offset_rows(sql) == []


def test_sql_consumers_sharing_a_table_see_only_their_own_offsets(sql: _SqlTarget) -> None:
    sql.open("clicks").save([("t", 0, 0, 4)], batch_time=10)
    sql.open("views").save([("t", 0, 0, 9)], batch_time=10)

    assert sql.open("clicks").load("t") == {TP("t", 0): 4}
    assert sql.open("views").load("t") == {TP("t", 0): 9}
    assert _offset_rows(sql) == [("clicks", "t", 0, 4, 10), ("views", "t", 0, 9, 10)]


def test_sql_corrupt_stored_offset_is_reported_with_its_row(sql: _SqlTarget) -> None:
    store = sql.open()
    store.save([("t", 0, 0, 4)], batch_time=10)
    bad = "'12x'" if sql.backend == "sqlite" else "-3"  # PostgreSQL's BIGINT cannot hold text
    sql.run(f"UPDATE {OFFSETS_TABLE} SET until_offset = {bad}")

    with pytest.raises(CorruptStoredOffset) as err:
        store.load("t")

    assert (err.value.backend, err.value.raw) == (sql.backend, "12x" if sql.backend == "sqlite" else -3)
    assert err.value.location == f"{OFFSETS_TABLE} row (consumer='job', topic='t', partition=0)"


def test_sqlite_store_in_a_missing_directory_is_unavailable(tmp_path: Path) -> None:
    path = str(tmp_path / "missing" / "job.db")

    with pytest.raises(OffsetStoreUnavailable) as err:
        SqlOffsetStore.sqlite(path, "job")

    assert (err.value.backend, err.value.address, err.value.detail) == ("sqlite", path, "unable to open database file")


def test_postgres_store_on_an_unreachable_server_names_the_address_without_the_password() -> None:
    port = free_port()

    with pytest.raises(OffsetStoreUnavailable) as err:
        SqlOffsetStore.postgres(f"host=127.0.0.1 port={port} user=job password=secret dbname=jobs", "job")

    assert err.value.backend == "postgresql"
    assert err.value.address == f"host=127.0.0.1 port={port} user=job password=*** dbname=jobs"
    assert "secret" not in str(err.value)
    assert "Connection refused" in err.value.detail
