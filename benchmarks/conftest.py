"""Benchmarks share one embedded broker (or ``DMK_BENCH_BOOTSTRAP_SERVERS``) per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kit.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def bootstrap_servers() -> Iterator[str]:
    external = os.environ.get("DMK_BENCH_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


#: Records in the benchmarks' one-partition topic, and the value each carries (~100 bytes of event JSON).
RECORDS = 200_000
VALUE = b'{"event_id":"e42-0000000000","user":"u0042","key":"k0007","ad_id":"ad-0013","event_time":1767225600123}'


@pytest.fixture(scope="session")
def loaded_topic(bootstrap_servers: str) -> str:
    """A one-partition topic holding RECORDS records, produced once per benchmark session."""
    import uuid

    from kafka import KafkaProducer

    from kit.kafka import Kafka

    topic = f"bench_{uuid.uuid4().hex[:8]}"
    with Kafka(bootstrap_servers) as kafka:
        kafka.create_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20, batch_size=1 << 20)
    for i in range(RECORDS):
        producer.send(topic, key=b"u%04d" % (i % 100), value=VALUE, partition=0)
    producer.flush()
    producer.close()
    return topic
