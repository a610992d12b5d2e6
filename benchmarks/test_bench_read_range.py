"""kit.kafka.read_range against a bare kafka-python consumer loop over the same partition.

Run: ``pytest benchmarks/test_bench_read_range.py --benchmark-only``. The target: read_range is not slower
than the bare loop (both read every record of a 200k-record partition of ~130-byte values).
"""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition

from kit.kafka import Kafka

from conftest import RECORDS


def _bare_loop(bootstrap_servers: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    count = 0
    for record in consumer:
        count += 1
        if record.offset + 1 >= RECORDS:
            break
    consumer.close()
    return count


def _read_range(bootstrap_servers: str, topic: str) -> int:
    with Kafka(bootstrap_servers) as kafka:
        return sum(1 for _ in kafka.read_range(topic, 0, 0, RECORDS))


@pytest.mark.benchmark(group="read 200k records")
def test_bare_consumer_loop(benchmark, bootstrap_servers: str, loaded_topic: str) -> None:
    assert benchmark.pedantic(_bare_loop, args=(bootstrap_servers, loaded_topic), rounds=3) == RECORDS


@pytest.mark.benchmark(group="read 200k records")
def test_kit_read_range(benchmark, bootstrap_servers: str, loaded_topic: str) -> None:
    assert benchmark.pedantic(_read_range, args=(bootstrap_servers, loaded_topic), rounds=3) == RECORDS
