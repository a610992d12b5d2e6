"""A DStream job that resumes from an offset store after its driver is SIGKILLed mid-stream.

SQLite (results and offsets in one transaction): every record exactly once. Kafka consumer group and
ZooKeeper (output, then save): every record at least once, duplicates only from batches whose offsets the
crash kept from being saved.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from kafka import KafkaProducer

from tests.drivers import driver_command, kill_mid_stream, run_to_completion

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
PER_PARTITION = {0: 700, 1: 500}
TOTAL = sum(PER_PARTITION.values())


def _produce(bootstrap_servers: str, topic: str) -> set[str]:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20)
    values = set()
    for partition, n in PER_PARTITION.items():
        for i in range(n):
            value = f"v-{partition}-{i}"
            values.add(value)
            producer.send(topic, value=value.encode(), partition=partition)
    producer.flush()
    producer.close()
    return values


def _crash_and_resume(bootstrap_servers: str, topic: str, store: str, location: str, results: str, progress) -> None:
    command = driver_command("legacy_store_copy", bootstrap_servers, topic, store, location, results)
    # Killed after a few stored batches, with most of the input still ahead.
    kill_mid_stream(command + ["run", str(TOTAL)], lambda: progress() >= 300, progress)
    assert progress() < TOTAL, "the driver finished before it could be killed mid-stream"
    run_to_completion(command + ["drain", str(TOTAL)])


def test_sqlite_store_resumes_exactly_once(bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=2)
    expected = _produce(bootstrap_servers, topic)
    database = tmp_path / "copy.db"

    def stored() -> int:
        if not database.exists():
            return 0
        with sqlite3.connect(database) as connection:
            try:
                return connection.execute("SELECT COUNT(*) FROM copied").fetchone()[0]
            except sqlite3.OperationalError:  # table not created yet
                return 0

    _crash_and_resume(bootstrap_servers, topic, "sqlite", str(database), "-", stored)
    with sqlite3.connect(database) as connection:
        values = [row[0] for row in connection.execute("SELECT value FROM copied")]
        offsets = dict(connection.execute("SELECT \"partition\", until_offset FROM dmk_offsets WHERE topic = ?", (topic,)))
    assert Counter(values) == Counter(expected)  # each record exactly once
    assert offsets == PER_PARTITION


@pytest.mark.parametrize("store", ["kafka", "zookeeper"])
def test_group_and_zookeeper_stores_resume_at_least_once(store, bootstrap_servers, topic_factory, tmp_path, request) -> None:
    topic = topic_factory(partitions=2)
    expected = _produce(bootstrap_servers, topic)
    location = f"copy-{topic}" if store == "kafka" else request.getfixturevalue("zookeeper_hosts")
    results = tmp_path / "copied.jsonl"

    def stored() -> int:
        return sum(1 for _ in results.open()) if results.exists() else 0

    _crash_and_resume(bootstrap_servers, topic, store, location, str(results), stored)
    values = [json.loads(line) for line in results.open()]
    counts = Counter(values)
    assert set(counts) == expected  # no gap
    duplicated = sum(c - 1 for c in counts.values())
    # Only what the crash caught between output and commit is repeated: at most one batch per partition
    # (100 records each at maxRatePerPartition 200 and 0.5 s batches).
    assert duplicated <= 200
