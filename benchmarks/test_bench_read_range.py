"""kit.kafka.read_range against a bare kafka-python consumer loop over the same partition.

Run: ``pytest benchmarks/test_bench_read_range.py --benchmark-only``. The target: read_range is not slower
than the bare loop (both read every record of a 200k-record partition of ~130-byte values). The newest 100
records are read on each client through one reused handle: the fixed cost of a live micro-batch's read.
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


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.benchmark(group="read 100 records, one handle")
def test_kit_read_small_range(benchmark, bootstrap_servers: str, loaded_topic: str, client: str) -> None:
    # A live micro-batch's range: the newest 100 records of the partition, what one read costs beyond its
    # records. The handle is reused, as an executor's is (with librdkafka each read opens its own consumer).
    with Kafka(bootstrap_servers, client=client) as kafka:
        read = lambda: sum(1 for _ in kafka.read_range(loaded_topic, 0, RECORDS - 100, RECORDS))  # noqa: E731
        assert benchmark.pedantic(read, rounds=20, warmup_rounds=2) == 100
