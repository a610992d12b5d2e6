"""The lifecycle constructs, both sides on the same data: ``legacy.lifecycle`` against ``modern.lifecycle``.

Each test runs the DStream construct and its Structured Streaming counterpart as ``docs/playbook.md``
("Lifecycle, one by one") shows them, on one Kafka topic (or one set of input lines), and checks exact rows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _streaming import produce
from kit.kafka import Kafka
from kit.lifecycle import BatchMetrics
from legacy import lifecycle as legacy
from modern import lifecycle as modern
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
    ssc, store = new_context(1.0), SqlOffsetStore.postgres(dsn, "lifecycle")
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
    ssc, store = new_context(1.0), SqlOffsetStore.postgres(dsn, "lifecycle")
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
        frame = kafka_frame(spark, bootstrap_servers, topic, maxOffsetsPerTrigger=20)
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
    assert attempts == [0, 1, 1, 2, 3]  # batch 1 ran twice, and its rows are there once
