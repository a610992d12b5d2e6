"""The lifecycle constructs, both sides on the same data: the playbook's ``legacy_lifecycle``
against ``modern_lifecycle`` (examples/playbook/).

Each test runs the DStream construct and its Structured Streaming counterpart as ``docs/playbook.md``
("Lifecycle, one by one") shows them, on one Kafka topic (or one set of input lines), and checks exact rows.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _streaming import produce

from examples.playbook import legacy_lifecycle as legacy
from examples.playbook import modern_lifecycle as modern
from examples.playbook.metrics import BatchMetrics
from kit.kafka import Kafka
from modern.errors import ContinuousTriggerUnsupported, GracefulStopTimeout
from modern.kafka import source_format

pytestmark = [pytest.mark.spark]

TIMEOUT_S = 90.0


@pytest.fixture
def new_context(spark: Any, topic_factory: Callable[..., str]) -> Iterator[Callable[[float], Any]]:
    """StreamingContexts for this test, each stopped (not the SparkContext) after it, before its topics go."""
    from kit.spark import streaming_context

    made: list[Any] = []

    def make(batch_seconds: float = 1.0) -> Any:
        made.append(streaming_context(batch_seconds))
        return made[-1]

    yield make
    for ssc in made:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)


def wait_for(condition: Callable[[], bool], what: Callable[[], object], timeout_s: float = TIMEOUT_S,
             check: Callable[[], None] | None = None) -> None:
    """Poll ``condition`` until true; fail with the last ``what()`` after ``timeout_s``; ``check`` may raise."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s; last observed: {what()!r}")
        time.sleep(0.05)


def kafka_frame(spark: Any, bootstrap_servers: str, topic: str, **options: Any) -> Any:
    """``(partition, offset, value)`` rows of ``topic`` from the earliest offsets."""
    reader = (spark.readStream.format(source_format(spark)).option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")


def produce_from(kafka: Kafka, topic: str, counts: dict[int, int], start: int) -> None:
    """As ``produce``, values ``"<partition>-<i>"`` for ``i`` from ``start``."""
    producer = kafka.producer(linger_ms=5)
    for partition, n in counts.items():
        for i in range(start, start + n):
            producer.send(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def records(counts: dict[int, int], start: int = 0) -> set[tuple[int, int, str]]:
    """The ``(partition, offset, value)`` that ``produce``/``produce_from`` wrote from offset ``start``."""
    return {(p, i, f"{p}-{i}") for p, n in counts.items() for i in range(start, start + n)}


def query_error(query: Any) -> Callable[[], None]:
    def check() -> None:
        error = query.exception()
        if error is not None:
            raise error

    return check


# -- foreachRDD + offsets in one transaction  vs  foreachBatch upsert by batch id ----------------------------


def _execute(dsn: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


def _rows(dsn: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        return [tuple(row) for row in connection.execute(sql).fetchall()]


@pytest.mark.slow  # two contexts and two queries over PostgreSQL: 20 s warm, 40 s as a session's first test
def test_after_a_crash_the_table_holds_each_record_once_on_both_sides(
    spark: Any, kafka: Kafka, bootstrap_servers: str, topic_factory: Callable[..., str],
    new_context: Callable[[float], Any], postgres_dsn_factory: Callable[[], str], tmp_path: Path,
) -> None:
    from py4j.protocol import Py4JJavaError

    from legacy.offsets import SqlOffsetStore

    topic = topic_factory(partitions=2)
    dsn = postgres_dsn_factory()
    _execute(dsn, 'CREATE TABLE legacy_results (batch_time BIGINT, "partition" INT, "offset" BIGINT, value TEXT)',
             'CREATE TABLE modern_results (batch_id BIGINT, "partition" INT, "offset" BIGINT, value TEXT)')
    legacy_rows = 'SELECT "partition", "offset", value FROM legacy_results'

    # Legacy, first run: a batch commits, then the database fails inside the next batch's transaction (after
    # its rows were inserted, as its offsets are written), so rows and offsets roll back together.
    produce(kafka, topic, {0: 20, 1: 20})
    ssc, store = new_context(0.5), SqlOffsetStore.postgres(dsn, "lifecycle")
    legacy.resume_from_store(ssc, store, topic, bootstrap_servers).foreachRDD(
        legacy.save_with_offsets(store, "legacy_results"))
    ssc.start()
    wait_for(lambda: len(_rows(dsn, legacy_rows)) == 40, lambda: len(_rows(dsn, legacy_rows)),
             check=lambda: legacy.run_until(ssc, 0))
    _execute(dsn, "CREATE FUNCTION crash() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'simulated crash "
                  "mid-transaction'; END $$ LANGUAGE plpgsql",
             "CREATE TRIGGER crash BEFORE INSERT OR UPDATE ON dmk_offsets EXECUTE FUNCTION crash()")
    produce_from(kafka, topic, {0: 20, 1: 20}, start=20)
    with pytest.raises(Py4JJavaError, match="simulated crash mid-transaction"):
        wait_for(lambda: legacy.run_until(ssc, 0.05), lambda: _rows(dsn, "SELECT * FROM dmk_offsets"))
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    store.close()
    assert len(_rows(dsn, legacy_rows)) == 40  # the failed batch left nothing
    _execute(dsn, "DROP TRIGGER crash ON dmk_offsets")

    # Legacy, restart from the stored offsets: the failed batch is read again, once.
    ssc, store = new_context(0.5), SqlOffsetStore.postgres(dsn, "lifecycle")
    legacy.resume_from_store(ssc, store, topic, bootstrap_servers).foreachRDD(
        legacy.save_with_offsets(store, "legacy_results"))
    ssc.start()
    wait_for(lambda: len(_rows(dsn, legacy_rows)) >= 80, lambda: len(_rows(dsn, legacy_rows)),
             check=lambda: legacy.run_until(ssc, 0))
    legacy.stop_gracefully(ssc)
    offsets = store.load(topic)
    store.close()

    # Modern: the query fails after micro-batch 1 was upserted and before Spark logged its commit; the restart
    # re-runs batch 1 (same id, same offsets), which replaces its rows.
    attempts: list[int] = []
    upsert = modern.upsert_batch(dsn, "modern_results")

    def crash_after_batch_1(frame: Any, batch_id: int) -> None:
        attempts.append(batch_id)
        upsert(frame, batch_id)
        if batch_id == 1:
            raise RuntimeError("simulated crash after the write")

    def run(sink: Callable[[Any, int], None]) -> Any:
        frame = kafka_frame(spark, bootstrap_servers, topic, maxOffsetsPerTrigger=40)
        return (frame.writeStream.foreachBatch(sink).trigger(availableNow=True)
                .option("checkpointLocation", str(tmp_path / "ckpt")).start())

    query = run(crash_after_batch_1)
    with pytest.raises(Exception, match="simulated crash after the write"):
        modern.run_until(query, TIMEOUT_S)

    def counted(frame: Any, batch_id: int) -> None:
        attempts.append(batch_id)
        upsert(frame, batch_id)

    query = run(counted)
    assert modern.run_until(query, TIMEOUT_S)

    expected = records({0: 40, 1: 40})
    legacy_got = _rows(dsn, legacy_rows)
    modern_got = _rows(dsn, 'SELECT "partition", "offset", value FROM modern_results')
    assert sorted(legacy_got) == sorted(expected)  # every record, none twice
    assert sorted(modern_got) == sorted(expected)
    assert {(tp.partition, o) for tp, o in offsets.items()} == {(0, 40), (1, 40)}
    assert attempts == [0, 1, 1]  # batch 1 ran twice, and its rows are there once


# -- StreamingListener  vs  StreamingQueryListener -----------------------------------------------------------


def test_both_listeners_report_every_batch_with_its_records_duration_and_rates(
    spark: Any, kafka: Kafka, bootstrap_servers: str, topic_factory: Callable[..., str],
    new_context: Callable[[float], Any], tmp_path: Path,
) -> None:
    from legacy.kafka import KafkaUtils

    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 15, 1: 15})

    legacy_seen: list[BatchMetrics] = []
    ssc = new_context(0.5)
    ssc.addStreamingListener(legacy.BatchMetricsListener(legacy_seen.append, batch_interval_s=0.5))
    stream = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": bootstrap_servers,
                                                          "auto.offset.reset": "smallest"})
    stream.foreachRDD(lambda rdd: None if rdd.count() else None)  # a job per batch; foreachRDD wants None back
    ssc.start()
    # Every record reported, then one more (empty) batch: no batch is left half-reported.
    wait_for(lambda: sum(m.records for m in legacy_seen) == 30 and legacy_seen[-1].records == 0,
             lambda: list(legacy_seen), check=lambda: legacy.run_until(ssc, 0))
    ssc.stop(stopSparkContext=False, stopGraceFully=False)

    modern_seen: list[BatchMetrics] = []
    listener = modern.batch_metrics_listener(modern_seen.append, query_name="listened")
    spark.streams.addListener(listener)
    try:
        query = (kafka_frame(spark, bootstrap_servers, topic, maxOffsetsPerTrigger=10).writeStream
                 .queryName("listened").foreachBatch(lambda frame, batch_id: frame.count())
                 .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ckpt")).start())
        assert modern.run_until(query, TIMEOUT_S)
        wait_for(lambda: len(modern_seen) >= 3, lambda: list(modern_seen))  # the listener bus is asynchronous
    finally:
        spark.streams.removeListener(listener)

    with_records = [m for m in legacy_seen if m.records]
    assert sum(m.records for m in with_records) == 30
    for m in legacy_seen:
        assert m.engine == "legacy" and m.duration_ms > 0
        assert m.scheduling_delay_ms is not None and m.scheduling_delay_ms >= 0
        assert m.input_rows_per_s == m.records / 0.5  # records over the batch interval, as Spark's UI
        assert m.processed_rows_per_s == m.records * 1000.0 / m.duration_ms

    assert [(m.batch, m.records) for m in modern_seen] == [(0, 10), (1, 10), (2, 10)]
    # Spark's input rate is over the time since the previous trigger: none before a query's first micro-batch.
    assert modern_seen[0].input_rows_per_s == 0.0 and all(m.input_rows_per_s > 0 for m in modern_seen[1:])
    for m in modern_seen:
        assert m.engine == "modern" and m.duration_ms > 0 and m.scheduling_delay_ms is None
        # Spark divides by the trigger's start-to-end time, which also covers reporting the progress: a few ms
        # more than durationMs.triggerExecution.
        # The progress JSON rounds rates to one decimal.
        exact = m.records * 1000.0 / m.duration_ms
        assert 0.8 * exact - 0.05 <= m.processed_rows_per_s <= exact + 0.05


# -- stopGraceFully  vs  stop_gracefully ------------------------------------------------------------------------


def test_a_graceful_stop_then_a_restart_loses_and_repeats_nothing(
    spark: Any, kafka: Kafka, bootstrap_servers: str, topic_factory: Callable[..., str], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 30, 1: 30})
    written: list[tuple[int, int, int]] = []  # (batch, partition, offset), appended: a repeated batch shows

    def append(frame: Any, batch_id: int) -> None:
        written.extend((batch_id, row.partition, row.offset) for row in frame.collect())

    def start(trigger: str) -> Any:
        frame = kafka_frame(spark, bootstrap_servers, topic, maxOffsetsPerTrigger=10)
        return modern.with_trigger(frame.writeStream.foreachBatch(append), trigger).option(
            "checkpointLocation", str(tmp_path / "ckpt")).start()

    query = start("1 second")
    wait_for(lambda: (query.lastProgress or {}).get("batchId", -1) >= 1, lambda: query.status,
             check=query_error(query))
    stopped = modern.stop_gracefully(query, timeout_s=TIMEOUT_S)
    assert stopped.clean and not query.isActive
    first_run = sorted({b for b, _, _ in written})
    assert stopped.last_committed_batch == first_run[-1] < 5  # stopped before the end of the topic

    query = start("availableNow")
    assert modern.run_until(query, TIMEOUT_S)
    assert sorted((p, o) for _, p, o in written) == sorted((p, o) for p, o, _ in records({0: 30, 1: 30}))
    assert sorted({b for b, _, _ in written}) == list(range(6))  # the restart went on with the next batch id


def test_a_graceful_stop_times_out_with_what_it_saw_and_leaves_the_query_running(
    spark: Any, tmp_path: Path,
) -> None:
    release = threading.Event()

    def busy(frame: Any, batch_id: int) -> None:
        release.wait(TIMEOUT_S)  # a micro-batch that outlasts the stop's deadline

    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load().writeStream.foreachBatch(busy)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        wait_for(lambda: query.status["isTriggerActive"] and query.status["isDataAvailable"], lambda: query.status)
        with pytest.raises(GracefulStopTimeout) as err:
            modern.stop_gracefully(query, timeout_s=0.5)
        assert err.value.timeout_s == 0.5 and err.value.last_batch is None and query.isActive
    finally:
        release.set()
        query.stop()


# -- awaitTerminationOrTimeout  vs  awaitTermination(timeout) -------------------------------------------------


def test_waiting_times_out_with_false_and_raises_the_jobs_error_on_both_sides(
    spark: Any, new_context: Callable[[float], Any], tmp_path: Path,
) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import StreamingQueryException

    def fail(*_: Any) -> None:
        raise ValueError("the job's own error")

    ssc = new_context(0.5)
    legacy.queue_stream(ssc, [["a"]]).foreachRDD(lambda t, rdd: fail() if rdd.count() else None)
    ssc.start()
    with pytest.raises(Py4JJavaError, match="the job's own error"):
        wait_for(lambda: legacy.run_until(ssc, 0.05), lambda: "running")

    idle = (modern.queue_stream(spark, [], tmp_path / "idle").writeStream.foreachBatch(lambda f, b: None)
            .option("checkpointLocation", str(tmp_path / "idle-ckpt")).start())
    try:
        assert modern.run_until(idle, 0.2) is False
    finally:
        idle.stop()
    spark.streams.resetTerminated()  # forget the idle query, or awaitAnyTermination returns at once
    failing = (modern.queue_stream(spark, [["a"]], tmp_path / "in").writeStream.foreachBatch(fail)
               .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(StreamingQueryException, match="the job's own error"):
        modern.run_any_until(spark, TIMEOUT_S)
    spark.streams.resetTerminated()
    assert not failing.isActive


# -- queueStream / textFileStream  vs  queue_stream / text_file_stream ------------------------------------------


BATCHES = [["b", "a"], ["c"], ["d", "e", "f"]]


def test_queue_streams_give_the_same_batches_in_the_same_order(
    spark: Any, new_context: Callable[[float], Any], tmp_path: Path,
) -> None:
    legacy_batches: list[list[str]] = []
    ssc = new_context(0.5)
    legacy.queue_stream(ssc, BATCHES).foreachRDD(lambda rdd: legacy_batches.append(sorted(rdd.collect())))
    ssc.start()
    wait_for(lambda: len(legacy_batches) > len(BATCHES), lambda: legacy_batches,
             check=lambda: legacy.run_until(ssc, 0))

    modern_batches: list[list[str]] = []
    query = (modern.queue_stream(spark, BATCHES, tmp_path / "queue").writeStream
             .foreachBatch(lambda frame, _: modern_batches.append(sorted(r.value for r in frame.collect())))
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    assert modern.run_until(query, TIMEOUT_S)

    expected = [sorted(lines) for lines in BATCHES]
    assert legacy_batches[: len(BATCHES)] == expected and set(map(tuple, legacy_batches[len(BATCHES):])) == {()}
    assert modern_batches == expected


def _move_in(directory: Path, name: str, lines: list[str]) -> None:
    temp = directory.parent / f"{name}.tmp"
    temp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    temp.replace(directory / name)


def test_a_file_stream_reads_files_already_there_only_on_the_modern_side(
    spark: Any, new_context: Callable[[float], Any], tmp_path: Path,
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _move_in(inbox, "before.txt", ["old 1", "old 2"])
    old = time.time() - 10  # clearly before the stream's creation, which is what textFileStream compares with
    os.utime(inbox / "before.txt", (old, old))

    legacy_lines: list[str] = []
    ssc = new_context(0.5)
    legacy.text_file_stream(ssc, str(inbox)).foreachRDD(lambda rdd: legacy_lines.extend(rdd.collect()))
    ssc.start()
    _move_in(inbox, "after.txt", ["new 1"])
    wait_for(lambda: "new 1" in legacy_lines, lambda: legacy_lines, check=lambda: legacy.run_until(ssc, 0))

    modern_lines: list[str] = []
    query = (modern.text_file_stream(spark, inbox).writeStream
             .foreachBatch(lambda frame, _: modern_lines.extend(r.value for r in frame.collect()))
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    assert modern.run_until(query, TIMEOUT_S)

    assert sorted(legacy_lines) == ["new 1"]  # textFileStream ignores the files there before its start
    assert sorted(modern_lines) == ["new 1", "old 1", "old 2"]


# -- remember / slice  vs  a batch read of the offset range -------------------------------------------------


def test_slice_of_remembered_batches_equals_the_batch_read_of_their_offsets(
    spark: Any, kafka: Kafka, bootstrap_servers: str, topic_factory: Callable[..., str],
    new_context: Callable[[float], Any],
) -> None:
    from legacy.kafka import KafkaUtils

    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 12, 1: 8})
    ssc = new_context(0.5)
    ssc.remember(60)
    stream = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": bootstrap_servers,
                                                          "auto.offset.reset": "smallest"},
                                           messageHandler=legacy.record_of)
    kept = stream.map(tuple)  # the job's own stream: slice the DStream a job derives, not the Kafka input
    kept.foreachRDD(lambda rdd: None)
    ranges: dict[Any, list[tuple[int, int, int]]] = {}
    stream.foreachRDD(lambda t, rdd: ranges.setdefault(t, [(o.partition, o.fromOffset, o.untilOffset)
                                                           for o in rdd.offsetRanges()]))
    ssc.start()
    wait_for(lambda: sum(u - f for batch in list(ranges.values()) for _, f, u in batch) == 20, lambda: ranges,
             check=lambda: legacy.run_until(ssc, 0))
    times = sorted(ranges)
    sliced = legacy.records_between(kept, times[0], times[-1])
    ssc.stop(stopSparkContext=False, stopGraceFully=False)

    read = modern.read_offset_range(spark, bootstrap_servers, {topic: {0: (0, 12), 1: (0, 8)}})
    batch_read = [(r.partition, r.offset, r.value.decode()) for r in read.collect()]
    assert sorted(sliced) == sorted(batch_read) == sorted(records({0: 12, 1: 8}))


# -- triggers ------------------------------------------------------------------------------------------------


def test_triggers_once_and_available_now_and_continuous_refused(
    spark: Any, kafka: Kafka, bootstrap_servers: str, topic_factory: Callable[..., str], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 10, 1: 10})

    def run(trigger: str, name: str) -> tuple[Any, list[int]]:
        sizes: list[int] = []
        frame = kafka_frame(spark, bootstrap_servers, topic, maxOffsetsPerTrigger=8)
        writer = modern.with_trigger(frame.writeStream.foreachBatch(lambda f, _: sizes.append(f.count())), trigger)
        return writer.option("checkpointLocation", str(tmp_path / name)).start(), sizes

    query, once = run("once", "once")
    assert modern.run_until(query, TIMEOUT_S)
    query, available_now = run("availableNow", "available-now")
    assert modern.run_until(query, TIMEOUT_S)
    assert once == [20]  # Once ignores maxOffsetsPerTrigger
    assert available_now == [8, 8, 4]  # AvailableNow honours it

    frame = kafka_frame(spark, bootstrap_servers, topic)
    with pytest.raises(ContinuousTriggerUnsupported) as err:
        modern.with_trigger(frame.writeStream.foreachBatch(lambda f, _: None), "continuous:1 second")
    assert err.value.trigger == "continuous:1 second" and err.value.field == "trigger"
    assert "processing-time trigger" in str(err.value)
    # What Spark itself says, at start, for the same query written directly:
    with pytest.raises(Exception, match="Data source kafka-py does not support continuous processing"):
        frame.writeStream.format("console").trigger(continuous="1 second").option(
            "checkpointLocation", str(tmp_path / "continuous")).start()


def test_the_modern_runner_refuses_a_continuous_trigger_before_any_query_starts(
    spark: Any, bootstrap_servers: str, topic_factory: Callable[..., str], tmp_path: Path,
) -> None:
    from kit.dataset import DatasetSpec
    from modern.runner import ModernRun, ModernRunConfig

    config = ModernRunConfig(bootstrap_servers=bootstrap_servers, topics={"events": topic_factory(partitions=1)},
                             out_dir=str(tmp_path / "out"), checkpoint_dir=str(tmp_path / "ckpt"),
                             dataset=DatasetSpec.from_profile("clean", records=10),
                             jobs=(("running_counts", "default"),), trigger="continuous")
    run = ModernRun(spark, config)
    with pytest.raises(ContinuousTriggerUnsupported, match="modern.triggers.with_trigger: trigger 'continuous'"):
        run.start()
    assert run.queries == {} and not spark.streams.active


class _LineServer:
    """A TCP server on 127.0.0.1 sending ``lines`` to every client that connects, then holding the connection."""

    def __init__(self, lines: list[str]) -> None:
        import socket

        self.lines = lines
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.clients: list[Any] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.clients.append(client)
            client.sendall("".join(f"{line}\n" for line in self.lines).encode())

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.sock.close()


def test_socket_streams_read_the_same_lines(
    spark: Any, new_context: Callable[[float], Any], tmp_path: Path,
) -> None:
    lines = ["one", "two", "three"]
    server = _LineServer(lines)
    try:
        legacy_lines: list[str] = []
        ssc = new_context(0.5)
        ssc.socketTextStream("127.0.0.1", server.port).foreachRDD(lambda rdd: legacy_lines.extend(rdd.collect()))
        ssc.start()
        wait_for(lambda: len(legacy_lines) >= 3, lambda: legacy_lines, check=lambda: legacy.run_until(ssc, 0))
        ssc.stop(stopSparkContext=False, stopGraceFully=False)

        modern_lines: list[str] = []
        query = (modern.socket_text_stream(spark, "127.0.0.1", server.port).writeStream
                 .foreachBatch(lambda frame, _: modern_lines.extend(r.value for r in frame.collect()))
                 .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        try:
            wait_for(lambda: len(modern_lines) >= 3, lambda: modern_lines, check=query_error(query))
        finally:
            query.stop()
    finally:
        server.close()
    assert legacy_lines == lines  # one receiver block per batch: in order
    assert sorted(modern_lines) == sorted(lines)  # the socket source deals a micro-batch's lines over the partitions
