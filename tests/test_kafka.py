"""kit.kafka on a real broker: topic admin, exact end offsets, exact range reads, on both Kafka clients.

The tests marked ``librdkafka_only`` produce through the kit's sender, so that with ``DMK_KAFKA_CLIENT=confluent``
nothing but librdkafka talks to the broker: they also run on librdkafka's mock cluster
(``DMK_TEST_BROKER=mock pytest -m librdkafka_only``), their kafka-python runs skipped there.
"""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition

from kit.errors import ConfigError, OffsetOutOfRange, TopicConfigurationMismatch, UnknownTopic
from kit.kafka import Kafka, client_settings, key_partition, resolve_client
from _streaming import send_records

pytestmark = pytest.mark.usefixtures("kafka_client")
ON_BOTH_BROKERS = pytest.mark.librdkafka_only


def _send(bootstrap_servers: str, records: list[dict], *, linger_ms: int = 50) -> None:
    """Send ``records`` batched (several records per produce request)."""
    send_records(bootstrap_servers, records, linger_ms=linger_ms, batch_size=1 << 20)


def _produce(bootstrap_servers: str, topic: str, per_partition: dict[int, int], *, linger_ms: int = 50) -> None:
    """Produce ``n`` records to each partition, batched (several records per produce request)."""
    _send(bootstrap_servers, [
        {"topic": topic, "key": f"k{i % 7}".encode(), "value": f"p{partition}-{i}".encode(), "partition": partition,
         "headers": [("h", str(i).encode())]}
        for partition, n in per_partition.items() for i in range(n)
    ], linger_ms=linger_ms)


@ON_BOTH_BROKERS
def test_plain_end_offsets_are_wrong_on_tansu_but_kit_end_offsets_are_exact(
    bootstrap_servers: str, kafka: Kafka, topic_factory
) -> None:
    topic = topic_factory(partitions=3)
    # Lingering longer than the sends take puts each partition's records in one batch, sent at the flush: a shorter
    # linger on a busy machine can close a partition's last batch after one record, and that answer is right.
    _produce(bootstrap_servers, topic, {0: 500, 1: 120, 2: 1}, linger_ms=30_000)
    tps = [TopicPartition(topic, p) for p in range(3)]

    if kafka.client == "confluent":
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as RdTopicPartition

        plain = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "plain"})
        listed = {tp: plain.get_watermark_offsets(RdTopicPartition(topic, tp.partition), timeout=10)[1] for tp in tps}
    else:
        plain = KafkaConsumer(bootstrap_servers=bootstrap_servers)
        listed = plain.end_offsets(tps)
    plain.close()
    exact = kafka.end_offsets(topic)

    assert exact == {tps[0]: 500, tps[1]: 120, tps[2]: 1}
    # Tansu answers ListOffsets(latest) with the last batch's base offset + 1: low for multi-record batches,
    # through either client. On Apache Kafka (--kafka-bootstrap) both agree.
    assert listed[tps[0]] < 500 or listed == exact
    assert listed[tps[1]] < 120 or listed == exact
    assert listed[tps[2]] == 1


@ON_BOTH_BROKERS
def test_read_range_gives_every_field_the_same_on_both_clients(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=1)
    _send(bootstrap_servers, [
        {"topic": topic, "key": b"k", "value": b"v", "partition": 0, "timestamp_ms": 1_700_000_000_123,
         "headers": [("h", b"1")]},
        {"topic": topic, "key": None, "value": b"", "partition": 0, "timestamp_ms": 1_700_000_000_124},
    ], linger_ms=20)
    records = list(kafka.read_range(topic, 0, 0, 2))
    got = [(r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers)) for r in records]
    assert got == [
        (topic, 0, 0, 1_700_000_000_123, 0, b"k", b"v", [("h", b"1")]),
        (topic, 0, 1, 1_700_000_000_124, 0, None, b"", []),
    ]


def test_the_client_is_chosen_by_argument_or_environment(kafka_client: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_client() == kafka_client
    assert Kafka("127.0.0.1:1").client == kafka_client
    assert Kafka("127.0.0.1:1", client="kafka-python").client == "kafka-python"
    # A setting librdkafka has no name for keeps auto on the reference client, and fails a forced confluent.
    monkeypatch.setenv("DMK_KAFKA_CLIENT", "auto")
    assert Kafka("127.0.0.1:1", settings={"sasl_kerberos_service_name": "kafka"}).client == "kafka-python"
    with pytest.raises(ConfigError, match="no librdkafka equivalent"):
        Kafka("127.0.0.1:1", settings={"sasl_kerberos_service_name": "kafka"}, client="confluent")
    with pytest.raises(ConfigError, match="unknown Kafka client 'rdkafka'"):
        resolve_client("rdkafka")


@ON_BOTH_BROKERS
def test_end_offsets_follow_further_produces(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=2)
    assert kafka.end_offsets(topic) == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}
    _produce(bootstrap_servers, topic, {0: 10})
    assert kafka.end_offsets(topic) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 0}
    _produce(bootstrap_servers, topic, {0: 5, 1: 3})
    assert kafka.end_offsets(topic) == {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 3}
    assert kafka.beginning_offsets(topic) == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}


@ON_BOTH_BROKERS
def test_offsets_are_exact_where_tansu_lists_them_out_of_offset_order(
    bootstrap_servers: str, kafka: Kafka, topic_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Producers writing one partition at the same moment: Tansu may store the batch at offset 0 after the one at
    # 3, and then answers ListOffsets with the base of the batch stored first (earliest 3) and of the one stored
    # last + 1 (latest 1). These are the answers of benchmarks/tansu_concurrent_produce.py's short rounds;
    # ListOffsets is replaced by them, the fetches are the broker's.
    topic = topic_factory(partitions=3)
    for _ in range(2):
        _produce(bootstrap_servers, topic, {0: 3, 1: 3, 2: 1})
    tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))
    earliest, latest = {tp0: 3, tp1: 3, tp2: 1}, {tp0: 1, tp1: 4, tp2: 1}
    if kafka.librdkafka_only:  # the ListOffsets requests go through librdkafka's admin client
        listed = {"earliest": earliest, "latest": latest}
        monkeypatch.setattr(kafka, "_rd_list", lambda tps, spec: {tp: listed[spec][tp] for tp in tps})
    else:
        consumer = kafka._offsets()
        monkeypatch.setattr(consumer, "beginning_offsets", lambda tps: {tp: earliest[tp] for tp in tps})
        monkeypatch.setattr(consumer, "end_offsets", lambda tps: {tp: latest[tp] for tp in tps})
    assert kafka.beginning_offsets(topic) == {tp0: 0, tp1: 0, tp2: 0}
    assert kafka.end_offsets(topic) == {tp0: 6, tp1: 6, tp2: 2}
    assert [r.offset for r in kafka.read_range(topic, 0, 0, 6)] == [0, 1, 2, 3, 4, 5]


@ON_BOTH_BROKERS
def test_end_offsets_fetched_where_records_are_held_are_exact(
    bootstrap_servers: str, kafka: Kafka, topic_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 500, 1: 120})  # multi-record batches: Tansu's ListOffsets is low
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    exact = {tp0: 500, tp1: 120}
    if not kafka.librdkafka_only:  # the holding offsets spare the ListOffsets requests, whichever client reads
        consumer = kafka._offsets()
        with monkeypatch.context() as patched:
            patched.setattr(consumer, "end_offsets", lambda tps: pytest.fail("ListOffsets asked"))
            patched.setattr(consumer, "beginning_offsets", lambda tps: pytest.fail("ListOffsets asked"))
            assert kafka.end_offsets(topic, holding={tp0: 0, tp1: 119}) == exact
            assert kafka.end_offsets(topic, holding={tp0: 250, tp1: 7}) == exact
    assert kafka.end_offsets(topic, holding={tp0: 499, tp1: 0}) == exact
    # A holding offset past the log (a topic deleted and re-created, say) or a partition without one: the ordinary way.
    assert kafka.end_offsets(topic, holding={tp0: 10_000, tp1: 5}) == exact
    assert kafka.end_offsets(topic, holding={tp0: 3}) == exact
    _produce(bootstrap_servers, topic, {0: 5})
    assert kafka.end_offsets(topic, holding={tp0: 499, tp1: 119}) == {tp0: 505, tp1: 120}


def test_end_offsets_fetched_where_records_are_held_skip_list_offsets_when_librdkafka_reads(
    bootstrap_servers: str, topic_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default handle reads with librdkafka and looks offsets up with kafka-python: a DStream's per-batch look-up
    at its held records asks no ListOffsets there either (on Tansu, under a producer, those grew with the log)."""
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 40, 1: 3})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Kafka(bootstrap_servers, timeout_s=20, client="auto") as handle:
        assert (handle.client, handle.librdkafka_only) == ("confluent", False)
        consumer = handle._offsets()
        with monkeypatch.context() as patched:
            patched.setattr(consumer, "end_offsets", lambda tps: pytest.fail("ListOffsets asked"))
            patched.setattr(consumer, "beginning_offsets", lambda tps: pytest.fail("ListOffsets asked"))
            assert handle.end_offsets(topic, holding={tp0: 39, tp1: 0}) == {tp0: 40, tp1: 3}
        assert handle.end_offsets(topic, holding={tp0: 41, tp1: 2}) == {tp0: 40, tp1: 3}  # past the log: ListOffsets


@ON_BOTH_BROKERS
def test_read_range_is_exact(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 1000, 1: 10})

    records = list(kafka.read_range(topic, 0, 137, 811))
    assert [r.offset for r in records] == list(range(137, 811))
    assert [r.value for r in records] == [f"p0-{i}".encode() for i in range(137, 811)]
    first = records[0]
    assert (first.topic, first.partition, first.key, first.headers) == (topic, 0, b"k4", [("h", b"137")])
    assert first.timestamp > 0 and first.timestamp_type == 0

    assert [r.offset for r in kafka.read_range(topic, 1, 0, 10)] == list(range(10))
    assert list(kafka.read_range(topic, 1, 4, 4)) == []
    # The same handle reads the same range twice identically (no state leaks between reads).
    assert [r.value for r in kafka.read_range(topic, 0, 990, 1000)] == [f"p0-{i}".encode() for i in range(990, 1000)]
    assert [r.value for r in kafka.read_range(topic, 0, 990, 1000)] == [f"p0-{i}".encode() for i in range(990, 1000)]


_RECREATE = """
import sys, time
from kafka import KafkaProducer
from kit.kafka import Kafka, TopicPartition

bootstrap, topic = sys.argv[1:3]
def produce(n, tag):
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    for i in range(n):
        producer.send(topic, value=f"{tag}-{i}".encode(), partition=0)
    producer.flush()
    producer.close()
with Kafka(bootstrap, client="kafka-python") as admin, Kafka(bootstrap) as kafka:
    produce(30, "old")
    assert len(list(kafka.read_range(topic, 0, 0, 30))) == 30
    admin.delete_topic(topic)
    admin.create_topic(topic, 1)
    time.sleep(1.5)  # librdkafka's threads meet the topic's new id here, if a consumer of the handle lives on
    produce(2, "new")
    tp = TopicPartition(topic, 0)
    print(kafka.end_offsets(topic)[tp], [r.value.decode() for r in kafka.read_range(topic, 0, 0, 2)])
"""


def test_a_handle_reads_a_topic_deleted_and_created_again(bootstrap_servers: str, kafka_client: str, topic_factory) -> None:
    # librdkafka 2.16 fetches by topic id and crashed the process (SIGSEGV in its own threads) once a topic
    # one of its consumers had read was deleted on Tansu; so a subprocess, and a clear failure if it dies.
    import subprocess
    import sys

    topic = topic_factory(partitions=1)
    done = subprocess.run([sys.executable, "-c", _RECREATE, bootstrap_servers, topic], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split("\n")[-2] == "2 ['new-0', 'new-1']"


def test_the_kits_admin_client_creates_no_topic_it_is_asked_about(bootstrap_servers: str, kafka: Kafka) -> None:
    # librdkafka's admin client is a producer-type handle: by default its metadata requests create the topics they
    # name (on Tansu with 4 partitions). In CI that raced the test above: its topic, deleted and created with 1
    # partition, came back with 4 in between.
    import uuid

    from kit._rdadmin import RdAdmin

    name = f"pytest_not_created_{uuid.uuid4().hex[:8]}"
    admin = RdAdmin(bootstrap_servers, {}, timeout_s=10)
    admin._admin.list_topics(topic=name, timeout=10)
    assert name not in kafka.topics()


@ON_BOTH_BROKERS
def test_read_range_past_the_end_is_out_of_range(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=1)
    _produce(bootstrap_servers, topic, {0: 20})

    with pytest.raises(OffsetOutOfRange) as info:
        list(kafka.read_range(topic, 0, 25, 30, idle_timeout_s=10))
    assert (info.value.topic, info.value.partition) == (topic, 0)
    assert info.value.requested == (25, 30) and info.value.available == (0, 20)
    assert "not yet available" in str(info.value)

    got = []
    with pytest.raises(OffsetOutOfRange):
        for record in kafka.read_range(topic, 0, 15, 21, idle_timeout_s=10):
            got.append(record.offset)
    assert got == [15, 16, 17, 18, 19]  # what exists is yielded in order before the error


def test_out_of_range_message_for_deleted_offsets() -> None:
    # Tansu cannot delete records (no DeleteRecords, no retention in memory storage), so the "no longer
    # available" wording is checked on the error itself; read_range raises it from Kafka's
    # OFFSET_OUT_OF_RANGE answer on brokers that do delete.
    err = OffsetOutOfRange("t", 3, requested=(5, 50), available=(40, 90))
    assert "offsets from 5 to 39 are no longer available" in str(err)
    assert "the partition holds [40, 90)" in str(err)


def test_read_range_rejects_bad_ranges(kafka: Kafka) -> None:
    with pytest.raises(ConfigError, match=r"\[5, 4\)"):
        kafka.read_range("t", 0, 5, 4)
    with pytest.raises(ConfigError):
        kafka.read_range("t", 0, -1, 4)


@ON_BOTH_BROKERS
def test_offset_look_ups_during_a_read_leave_the_read_exact(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    # A read looks up the end when a fetch comes back empty; a look-up must not move the read's position.
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 30_000, 1: 10})
    records = kafka.read_range(topic, 0, 100, 30_000)
    first = next(records)
    assert kafka.end_offsets(topic) == {TopicPartition(topic, 0): 30_000, TopicPartition(topic, 1): 10}
    assert [first.offset, *(r.offset for r in records)] == list(range(100, 30_000))


@ON_BOTH_BROKERS
def test_topic_admin(kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=3, create=False)
    assert kafka.create_topic(topic, 3) is True
    assert kafka.create_topic(topic, 3) is False  # idempotent
    assert kafka.partitions(topic) == [0, 1, 2]
    with pytest.raises(TopicConfigurationMismatch) as info:
        kafka.create_topic(topic, 5)
    assert (info.value.expected, info.value.actual) == (5, 3)
    with pytest.raises(UnknownTopic):
        kafka.partitions(topic + "-absent")


def test_client_settings_validation() -> None:
    assert client_settings({"client_id": "x", "security_protocol": "PLAINTEXT"}) == {
        "client_id": "x", "security_protocol": "PLAINTEXT",
    }
    with pytest.raises(ConfigError, match=r"Unrecognized configs: \{'bootstrap\.servers'\}"):
        client_settings({"bootstrap.servers": "x"})
    with pytest.raises(ConfigError, match="group_id"):
        client_settings({"group_id": "g"})


def test_key_partition_matches_kafkas_default_partitioner() -> None:
    # Test vectors of Kafka's Java Utils.murmur2 (UtilsTest.testMurmur2, signed ints); kafka-python returns
    # the same 32 bits unsigned.
    from kafka.partitioner.default import murmur2

    java = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536, b"abc": 479470107}
    for key, signed in java.items():
        assert murmur2(key) & 0xFFFFFFFF == signed & 0xFFFFFFFF
        assert key_partition(key, 1000) == (signed & 0x7FFFFFFF) % 1000
    assert {key_partition(f"u{i}".encode(), 4) for i in range(100)} == {0, 1, 2, 3}


@ON_BOTH_BROKERS
def test_offsets_for_time_is_exact_even_where_the_broker_is_not(bootstrap_servers: str, kafka: Kafka, topic_factory) -> None:
    topic = topic_factory(partitions=2)
    _send(bootstrap_servers, [
        *({"topic": topic, "key": None, "value": b"x", "partition": 0, "timestamp_ms": 1_000_000 + 1000 * i}
          for i in range(10)),
        {"topic": topic, "key": None, "value": b"y", "partition": 1, "timestamp_ms": 5_000_000},
    ], linger_ms=20)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    # Tansu answers ListOffsets-by-timestamp with offset 0 whatever the time, the mock -1; the result must not.
    assert kafka.offsets_for_time(topic, 1_004_500) == {tp0: 5, tp1: 0}
    assert kafka.offsets_for_time([tp0], 1_000_000) == {tp0: 0}
    assert kafka.offsets_for_time([tp0], 1_009_000) == {tp0: 9}
    assert kafka.offsets_for_time(topic, 6_000_000) == {tp0: None, tp1: None}


def test_an_unreachable_cluster_fails_within_the_handles_timeout() -> None:
    import time

    from kit.broker import free_port
    from kit.errors import BrokerUnavailable

    started = time.monotonic()
    with pytest.raises(BrokerUnavailable):
        Kafka(f"127.0.0.1:{free_port()}", timeout_s=1).topics()
    # Bounded by the handle's timeout (1 s), not kafka-python's 30 s default; generous slack for a busy CI.
    assert time.monotonic() - started < 15
