"""Every mapped 0.8/0.10 ``kafkaParams`` key, through every Kafka client the kit builds, on both client libraries.

A 0.8-era direct stream with ``fetch.message.max.bytes`` in its ``kafkaParams`` crashed at start: the key maps to
kafka-python's ``max_partition_fetch_bytes``, which the offsets consumer also set, and ``KafkaConsumer()`` got the
keyword twice. Each key here goes through the direct stream's own parsing (:class:`legacy.KafkaParams`) into the
handle it reads with, which then lists topics (admin), creates one, sends, asks beginnings and ends (the offsets
consumer and the high-watermark probe), looks up by time and reads a range (the range reader).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kit.kafka import Kafka, TopicPartition
from legacy._params import MAPPED

# A value each key takes in a real job (the Java client's defaults or a typical override).
VALUES = {
    "socket.receive.buffer.bytes": "65536",
    "fetch.message.max.bytes": "2097152",
    "refresh.leader.backoff.ms": "200",
    "receive.buffer.bytes": "65536",
    "send.buffer.bytes": "131072",
    "max.partition.fetch.bytes": "2097152",
    "retry.backoff.ms": "100",
    "reconnect.backoff.ms": "50",
    "reconnect.backoff.max.ms": "1000",
    "request.timeout.ms": "40000",
    "metadata.max.age.ms": "300000",
    "connections.max.idle.ms": "540000",
    "check.crcs": "true",
}


def test_every_mapped_key_has_a_value_here() -> None:
    assert set(VALUES) == set(MAPPED)


@pytest.fixture(scope="module")
def loaded_topic(bootstrap_servers: str) -> Iterator[tuple[str, int]]:
    """A two-partition topic holding 30 records (timestamps 1000 + i), shared by the module's tests."""
    import uuid

    topic = f"pytest_kafka_params_{uuid.uuid4().hex[:8]}"
    with Kafka(bootstrap_servers, client="kafka-python") as kafka:
        kafka.create_topic(topic, 2)
        producer = kafka.producer(linger_ms=20)
        for i in range(30):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                          timestamp_ms=1_000 + i)
        producer.flush()
        producer.close()
        yield topic, 15
        kafka.delete_topic(topic)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("key", sorted(VALUES))
def test_a_mapped_kafka_param_works_in_every_client_the_kit_builds(
    bootstrap_servers: str, loaded_topic: tuple[str, int], key: str, client: str
) -> None:
    from legacy._direct import KafkaParams

    topic, per_partition = loaded_topic
    params = KafkaParams.parse({"metadata.broker.list": bootstrap_servers, key: VALUES[key]})
    name, convert = MAPPED[key]
    assert params.client_settings()[name] == convert(VALUES[key])
    with Kafka(params.bootstrap_servers, settings=params.client_settings(), timeout_s=20, client=client) as kafka:
        assert kafka.client == client
        assert topic in kafka.topics()  # the admin client
        scratch = f"{topic}_{key.replace('.', '_')}_{client}"
        assert kafka.create_topic(scratch, 1)
        sender = kafka.sender()
        acked: list[tuple[int, int, object]] = []
        sender.send(scratch, key=b"k", value=b"v", partition=0, on_done=lambda p, o, e: acked.append((p, o, e)))
        assert sender.flush(20) == 0
        sender.close()
        assert acked == [(0, 0, None)]
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        assert kafka.beginning_offsets(topic) == dict.fromkeys(tps, 0)
        assert kafka.end_offsets(topic) == dict.fromkeys(tps, per_partition)  # the offsets consumer + probe
        assert kafka.end_offsets(topic, holding=dict.fromkeys(tps, 3)) == dict.fromkeys(tps, per_partition)
        assert kafka.offsets_for_time(topic, 1_010) == {tps[0]: 5, tps[1]: 5}
        got = [(r.offset, r.value) for r in kafka.read_range(topic, 1, 2, 5)]
        assert got == [(2, b"v5"), (3, b"v7"), (4, b"v9")]
        kafka.delete_topic(scratch)
