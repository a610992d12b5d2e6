"""The second embedded broker kind (librdkafka's mock cluster), and the kit's Tansu workarounds on both kinds.

The tests marked ``librdkafka_only`` use the session broker through librdkafka alone, so they run on Tansu (the
default) and on the mock (``DMK_TEST_BROKER=mock pytest -m librdkafka_only``). They run the kit's own
``Kafka.beginning_offsets``, ``end_offsets`` and ``read_range`` on a handle that asked for the confluent client by
name, so that its ListOffsets requests too go through librdkafka (kafka-python cannot connect to the mock), on a
broker whose ListOffsets is exact: the same offsets and records on both kinds, after multi-record batches, after two
concurrent producers, and (the mock only) above a log start moved by DeleteRecords or by retention.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kit.broker import EmbeddedBroker, KafkaEndpoint, kafka_or_embedded
from kit.errors import (
    BrokerError,
    BrokerUnavailable,
    ConfigError,
    OffsetOutOfRange,
    TopicConfigurationMismatch,
    UnknownTopic,
)
from kit.kafka import Kafka, TopicPartition, register_topic_admin, wait_for_broker
from tests._procs import _alive, _wait_gone

REPO = Path(__file__).resolve().parents[1]


# -- the mock broker kind itself (each test starts its own) ----------------------------------------------------


def test_mock_broker_answers_and_stops(tmp_path: Path) -> None:
    log = tmp_path / "mock.log"
    with kafka_or_embedded(kind="mock", log_path=log) as endpoint:
        broker = endpoint.broker
        assert broker is not None and broker.kind == "mock"
        assert "librdkafka clients only" in endpoint.description
        pid = broker.pid
        assert pid is not None and _alive(pid)
        broker.create_topic("two", 2)
        admin = AdminClient({"bootstrap.servers": endpoint.bootstrap_servers})
        assert sorted(admin.list_topics("two", timeout=10).topics["two"].partitions) == [0, 1]
        with pytest.raises(BrokerError, match="already exists"):
            broker.create_topic("two", 3)
        broker.delete_topic("two")
        assert "two" not in admin.list_topics(timeout=10).topics
    assert _wait_gone(pid)
    assert not broker.running
    assert log.exists()
    broker.stop()  # a second stop is harmless


def test_mock_broker_refuses_what_it_cannot_do() -> None:
    with pytest.raises(BrokerError, match="picks a free one itself"):
        EmbeddedBroker(9092, kind="mock")
    with pytest.raises(BrokerError, match="unknown embedded broker kind 'kraft'"):
        EmbeddedBroker(kind="kraft")
    with pytest.raises(BrokerError, match="use the Kafka protocol"):
        EmbeddedBroker().create_topic("t", 1)  # Tansu is administered through Kafka's own requests


def test_a_mock_that_fails_to_start_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'no librdkafka here' >&2\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))  # the interpreter that would hold the cluster
    broker = EmbeddedBroker(kind="mock", log_path=tmp_path / "mock.log")
    with pytest.raises(BrokerError, match="gave no answer") as caught:
        broker.start()
    assert "no librdkafka here" in caught.value.log_tail
    assert not broker.running


@pytest.fixture
def no_kafka_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any kafka-python client the kit opens fails the test at once (instead of timing out on the mock)."""
    import kit.kafka

    def refused(*_args: object, **_kwargs: object) -> None:
        pytest.fail("the kit opened a kafka-python client on its librdkafka path")

    for name in ("KafkaConsumer", "KafkaAdminClient", "KafkaProducer"):
        monkeypatch.setattr(kit.kafka, name, refused)


def test_a_confluent_handle_administers_the_mock_and_looks_up_offsets_without_kafka_python(
    no_kafka_python: None,
) -> None:
    # client="confluent" by name: topics, partitions, creation (through the mock's C API: its protocol has none),
    # ListOffsets earliest/latest/by time, group offsets and deletion all through librdkafka.
    with EmbeddedBroker(kind="mock") as broker, Kafka(broker.bootstrap_servers, client="confluent", timeout_s=10) as kafka:
        assert kafka.librdkafka_only
        wait_for_broker(broker.bootstrap_servers, timeout_s=5, client="confluent")
        assert kafka.create_topic("orders", 3) is True
        assert kafka.create_topic("orders", 3) is False
        with pytest.raises(TopicConfigurationMismatch):
            kafka.create_topic("orders", 2)
        assert kafka.partitions("orders") == [0, 1, 2] and "orders" in kafka.topics()
        with pytest.raises(UnknownTopic):
            kafka.partitions("missing")
        assert "missing" not in kafka.topics()  # asking about a topic does not create it (the mock would)
        acked = _send(broker.bootstrap_servers, "orders", [b"%d" % i for i in range(30)], linger_ms=20,
                      timestamps=[1_000 + i for i in range(30)])
        assert acked == list(range(30))
        tps = [TopicPartition("orders", p) for p in range(3)]
        assert kafka.beginning_offsets("orders") == dict.fromkeys(tps, 0)
        assert kafka.end_offsets("orders") == {tps[0]: 30, tps[1]: 0, tps[2]: 0}
        # The mock answers ListOffsets by timestamp with -1: the kit scans and finds the exact record.
        assert kafka.offsets_for_time("orders", 1_012) == {tps[0]: 12, tps[1]: None, tps[2]: None}
        assert kafka.commit_group_offsets("g", {tps[0]: 7}) == {}
        assert [r.offset for r in kafka.read_range("orders", 0, 28, 30)] == [28, 29]
        kafka.delete_topic("orders")
        kafka.delete_topic("orders")  # a missing topic is fine
        assert "orders" not in kafka.topics()
    # Without the broker that started it (another process), a handle cannot create a topic on the mock.
    with EmbeddedBroker(kind="mock") as broker:
        register_topic_admin(broker.bootstrap_servers, None)
        with Kafka(broker.bootstrap_servers, client="confluent", timeout_s=5) as kafka, \
                pytest.raises(ConfigError, match="names no controller"):
            kafka.create_topic("orders", 1)


def test_kafka_python_cannot_connect_to_the_mock() -> None:
    # The limitation the kafka_python marker states: on the mock, the kit's kafka-python half gets nowhere.
    with EmbeddedBroker(kind="mock") as broker, pytest.raises(BrokerUnavailable):
        wait_for_broker(broker.bootstrap_servers, timeout_s=3, client="kafka-python")


# -- the session broker, whichever kind (librdkafka clients only) ----------------------------------------------


@pytest.fixture
def rd_topic(kafka_endpoint: KafkaEndpoint) -> Iterator[Callable[[int], str]]:
    """``rd_topic(partitions)``: a new topic on the session broker, made by a librdkafka handle of the kit (on the
    mock through its C API, which the EmbeddedBroker registered)."""
    created: list[str] = []
    kafka = Kafka(kafka_endpoint.bootstrap_servers, client="confluent", timeout_s=20)

    def make(partitions: int = 1) -> str:
        name = f"kinds_{uuid.uuid4().hex[:10]}"
        kafka.create_topic(name, partitions)
        created.append(name)
        return name

    yield make
    for name in created:
        kafka.delete_topic(name)
    kafka.close()


def _send(bootstrap: str, topic: str, values: list[bytes], linger_ms: int,
          timestamps: list[int] | None = None) -> list[int]:
    """Send ``values`` to partition 0 through the kit's librdkafka sender; the acknowledged offsets."""
    acked: list[int] = []
    errors: list[BaseException] = []
    sender = Kafka(bootstrap, client="confluent").sender(linger_ms=linger_ms)
    for i, value in enumerate(values):
        sender.send(topic, key=None, value=value, partition=0, timestamp_ms=timestamps[i] if timestamps else None,
                    on_done=lambda _p, offset, error: errors.append(error) if error else acked.append(offset))
    assert sender.flush(30) == 0
    sender.close()
    assert not errors
    return acked


def _listed(bootstrap: str, topic: str) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = RdTopicPartition(topic, 0)
    return tuple(admin.list_offsets({tp: spec})[tp].result(10).offset  # type: ignore[return-value]
                 for spec in (OffsetSpec.earliest(), OffsetSpec.latest()))


@pytest.fixture
def kit_kafka(kafka_endpoint: KafkaEndpoint, no_kafka_python: None) -> Iterator[Kafka]:
    """The kit's handle on the session broker, the confluent client asked for by name: librdkafka alone."""
    with Kafka(kafka_endpoint.bootstrap_servers, client="confluent", timeout_s=20) as kafka:
        yield kafka


def _on_mock(endpoint: KafkaEndpoint) -> bool:
    return endpoint.broker is not None and endpoint.broker.kind == "mock"


@pytest.mark.kafka
@pytest.mark.librdkafka_only
def test_offsets_and_reads_are_exact_after_multi_record_batches(
    kafka_endpoint: KafkaEndpoint, rd_topic: Callable[[int], str], kit_kafka: Kafka
) -> None:
    bootstrap = kafka_endpoint.bootstrap_servers
    topic = rd_topic(1)
    acked: list[int] = []
    for batch in range(3):  # three sends of 300 records each, lingering into multi-record batches
        acked += _send(bootstrap, topic, [b"%d-%d" % (batch, i) for i in range(300)], linger_ms=50)
    assert sorted(acked) == list(range(900))
    if _on_mock(kafka_endpoint):
        assert _listed(bootstrap, topic) == (0, 900)  # the broker that behaves lists the exact end itself
    tp = TopicPartition(topic, 0)
    # Kafka.end_offsets fetches at listed latest - 1 and takes the response's high watermark: exact on both.
    assert kit_kafka.end_offsets([tp]) == {tp: 900}
    assert kit_kafka.beginning_offsets([tp]) == {tp: 0}
    assert [r.offset for r in kit_kafka.read_range(topic, 0, 0, 900)] == list(range(900))


@pytest.mark.kafka
@pytest.mark.librdkafka_only
def test_offsets_and_reads_are_exact_after_two_concurrent_producers(
    kafka_endpoint: KafkaEndpoint, rd_topic: Callable[[int], str], kit_kafka: Kafka
) -> None:
    bootstrap = kafka_endpoint.bootstrap_servers
    topic = rd_topic(1)
    results: dict[str, list[int]] = {}

    def produce(name: str) -> None:
        results[name] = _send(bootstrap, topic, [b"%s-%d" % (name.encode(), i) for i in range(500)], linger_ms=1)

    threads = [threading.Thread(target=produce, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results["a"] + results["b"]) == list(range(1000))
    if _on_mock(kafka_endpoint):
        assert _listed(bootstrap, topic) == (0, 1000)
    tp = TopicPartition(topic, 0)
    # Tansu's high watermark can lag seconds after concurrent writes (docs/kit.md): wait for it as a stream would.
    deadline = time.monotonic() + 10
    while (end := kit_kafka.end_offsets([tp])[tp]) < 1000 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert end == 1000
    assert kit_kafka.beginning_offsets([tp]) == {tp: 0}
    records = list(kit_kafka.read_range(topic, 0, 0, 1000))
    assert [r.offset for r in records] == list(range(1000))
    assert sorted(r.value for r in records) == sorted(
        [b"a-%d" % i for i in range(500)] + [b"b-%d" % i for i in range(500)])


def _needs_a_log_start(endpoint: KafkaEndpoint) -> EmbeddedBroker:
    if endpoint.broker is None or endpoint.broker.kind != "mock":
        pytest.skip("Tansu cannot put a log start above 0: it rejects DeleteRecords and keeps every record")
    return endpoint.broker


@pytest.mark.kafka
@pytest.mark.librdkafka_only
def test_a_log_start_above_0_stands_and_below_it_is_out_of_range(
    kafka_endpoint: KafkaEndpoint, rd_topic: Callable[[int], str], kit_kafka: Kafka
) -> None:
    # Kafka.beginning_offsets reads from offset 0 when a partition is listed above 0 (Tansu's out-of-order
    # batches), trusting that below a real log start that read is out of range and the listed offset stands.
    broker = _needs_a_log_start(kafka_endpoint)
    bootstrap = kafka_endpoint.bootstrap_servers
    topic = rd_topic(1)
    _send(bootstrap, topic, [b"%d" % i for i in range(10)], linger_ms=0)
    broker.delete_records(topic, 0, 4)
    tp = TopicPartition(topic, 0)
    assert kit_kafka.beginning_offsets([tp]) == {tp: 4}
    assert kit_kafka.end_offsets([tp]) == {tp: 10}
    with pytest.raises(OffsetOutOfRange) as caught:
        list(kit_kafka.read_range(topic, 0, 0, 10))
    assert caught.value.available == (4, 10)
    assert [r.value for r in kit_kafka.read_range(topic, 0, 4, 10)] == [b"%d" % i for i in range(4, 10)]


@pytest.mark.kafka
@pytest.mark.librdkafka_only
def test_records_dropped_by_retention_are_out_of_range(
    kafka_endpoint: KafkaEndpoint, rd_topic: Callable[[int], str], kit_kafka: Kafka
) -> None:
    # The mock keeps at most 5 MB a partition and drops the oldest batches past it: a log start moved by the
    # broker itself, through the protocol.
    _needs_a_log_start(kafka_endpoint)
    bootstrap = kafka_endpoint.bootstrap_servers
    topic = rd_topic(1)
    _send(bootstrap, topic, [b"%06d" % i + b"x" * 1018 for i in range(8192)], linger_ms=20)
    earliest, latest = _listed(bootstrap, topic)
    assert 0 < earliest < latest == 8192
    tp = TopicPartition(topic, 0)
    assert kit_kafka.beginning_offsets([tp]) == {tp: earliest}
    assert kit_kafka.end_offsets([tp]) == {tp: 8192}
    with pytest.raises(OffsetOutOfRange):
        list(kit_kafka.read_range(topic, 0, 0, 8192))
    first = next(iter(kit_kafka.read_range(topic, 0, earliest, 8192)))
    assert first.value[:6] == b"%06d" % earliest
