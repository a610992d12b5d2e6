"""kit.kafka.read_range against a bare kafka-python consumer loop over the same partition.

Run: ``pytest benchmarks/test_bench_read_range.py --benchmark-only``. The target: read_range is not slower
than the bare loop (both read every record of a 200k-record partition of ~130-byte values).
"""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kit.kafka import Kafka

RECORDS = 200_000


@pytest.fixture(scope="module")
def loaded_topic(bootstrap_servers: str) -> str:
    topic = f"bench_read_{uuid.uuid4().hex[:8]}"
    with Kafka(bootstrap_servers) as kafka:
        kafka.create_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20, batch_size=1 << 20)
    value = b'{"event_id":"e42-0000000000","user":"u0042","key":"k0007","ad_id":"ad-0013","event_time":1767225600123}'
    for i in range(RECORDS):
        producer.send(topic, key=b"u%04d" % (i % 100), value=value, partition=0)
    producer.flush()
    producer.close()
    return topic


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
