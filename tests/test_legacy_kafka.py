"""legacy.kafka: Spark 2.4's pyspark.streaming.kafka API on PySpark 4.3.

The Kafka tests are ports of Spark 2.4's ``KafkaStreamTests`` (python/pyspark/streaming/tests.py) with exact
assertions: 2.4's ``sendMessages(topic, {"a": 1, "b": 2, "c": 3})`` sends "a" once, "b" twice, "c" three
times, without keys, to partition 0.
"""

from __future__ import annotations

import pickle
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from _streaming import await_condition as _await_condition

from kit.errors import ConfigError, OffsetOutOfRange, UnknownTopic
from kit.kafka import Kafka
from legacy._direct import KafkaParams
from legacy._params import IgnoredKafkaParams
from legacy.errors import UnsupportedKafkaParams
from legacy.kafka import (
    Broker,
    KafkaMessageAndMetadata,
    KafkaRDD,
    KafkaUtils,
    OffsetRange,
    TopicAndPartition,
    utf8_decoder,
)

pytestmark = pytest.mark.filterwarnings(
    r"ignore:DStream is deprecated as of Spark 3\.4\.0\. Migrate to Structured Streaming\.:FutureWarning"
)

# The createRDD and direct-stream tests read through kit.kafka alone: on DMK_KAFKA_CLIENT=confluent that is
# librdkafka alone, so they also run on librdkafka's mock cluster. The receiver (createStream) is kafka-python's
# group consumer, and commitAsync's checks ask for a group's every offset, which the mock answers with none.
ON_BOTH_BROKERS = pytest.mark.librdkafka_only

BATCH_S = 0.5
TIMEOUT_S = 30.0


# -- helpers ---------------------------------------------------------------------------------------------------


def _send(kafka: Kafka, records: list[tuple[str, bytes | None, bytes, int]]) -> None:
    """Send ``(topic, key, value, partition)`` records in order through the kit's sender (librdkafka unless
    ``DMK_KAFKA_CLIENT=kafka-python``, so that the tests marked ``librdkafka_only`` also run on the mock)."""
    sender = kafka.sender(linger_ms=5)
    try:
        for topic, key, value, partition in records:
            sender.send(topic, key=key, value=value, partition=partition)
        assert sender.flush(30.0) == 0
    finally:
        sender.close()


def send_messages(kafka: Kafka, topic: str, message_to_freq: dict[str, int], partition: int = 0) -> None:
    """Spark 2.4's KafkaTestUtils.sendMessages: each message ``freq`` times, no key."""
    _send(kafka, [(topic, None, message.encode(), partition)
                  for message, freq in message_to_freq.items() for _ in range(freq)])


def send_values(kafka: Kafka, topic: str, values_by_partition: dict[int, list[str]]) -> None:
    _send(kafka, [(topic, f"k{partition}".encode(), value.encode(), partition)
                  for partition, values in values_by_partition.items() for value in values])


def await_condition(ssc, condition: Callable[[], bool], what: Callable[[], object], timeout_s: float = TIMEOUT_S) -> None:
    _await_condition(ssc, condition, what, timeout_s)


@pytest.fixture
def ssc(spark, topic_factory) -> Iterator:
    # Depends on topic_factory so that the context stops before the test's topics are deleted.
    from kit.spark import streaming_context

    context = streaming_context(BATCH_S)
    yield context
    context.stop(stopSparkContext=False, stopGraceFully=False)


@pytest.fixture
def sc(spark):
    return spark.sparkContext


def params(bootstrap_servers: str, **extra: str) -> dict[str, str]:
    return {"metadata.broker.list": bootstrap_servers, **extra}


def collect_batches(stream) -> dict[int, list]:
    """Collect each batch's elements by batch time (ms) from a DStream."""
    batches: dict[int, list] = {}

    def keep(t, rdd):
        batches[round(t.timestamp() * 1000)] = rdd.collect()

    stream.foreachRDD(keep)
    return batches


def flat(batches: dict[int, list]) -> list:
    return [x for t in sorted(batches) for x in batches[t]]


# -- value types (no JVM) --------------------------------------------------------------------------------------


def test_offset_range_is_a_value_with_24s_text() -> None:
    a = OffsetRange("events", 0, 5, 10)
    assert a == OffsetRange("events", 0, 5, 10)
    assert a != OffsetRange("events", 0, 5, 11)
    assert a != ("events", 0, 5, 10)
    assert len({a, OffsetRange("events", 0, 5, 10), OffsetRange("events", 1, 5, 10)}) == 2
    assert (a.topic, a.partition, a.fromOffset, a.untilOffset, a.count()) == ("events", 0, 5, 10, 5)
    assert str(a) == "OffsetRange(topic: events, partition: 0, range: [5 -> 10]"
    assert repr(a) == "OffsetRange(topic='events', partition=0, fromOffset=5, untilOffset=10)"
    assert eval(repr(a)) == a
    assert pickle.loads(pickle.dumps(a)) == a


def test_offset_range_refuses_bad_ranges() -> None:
    with pytest.raises(ConfigError) as err:
        OffsetRange("events", 0, 10, 5)
    assert (err.value.field, err.value.expected, err.value.actual) == ("untilOffset", ">= 10", 5)
    with pytest.raises(ConfigError) as err:
        OffsetRange("events", -1, 0, 5)
    assert err.value.field == "partition"
    with pytest.raises(ConfigError):
        OffsetRange("", 0, 0, 0)


def test_topic_and_partition_equality() -> None:
    # Spark 2.4: test_topic_and_partition_equality
    topic_and_partition_a = TopicAndPartition("foo", 0)
    topic_and_partition_b = TopicAndPartition("foo", 0)
    topic_and_partition_c = TopicAndPartition("bar", 0)
    topic_and_partition_d = TopicAndPartition("foo", 1)

    assert topic_and_partition_a == topic_and_partition_b
    assert topic_and_partition_a != topic_and_partition_c
    assert topic_and_partition_a != topic_and_partition_d
    assert hash(topic_and_partition_a) == hash(topic_and_partition_b)
    assert {topic_and_partition_a: 1}[topic_and_partition_b] == 1
    assert (topic_and_partition_a._topic, topic_and_partition_a._partition) == ("foo", 0)


def test_broker_and_message_and_metadata() -> None:
    broker = Broker("kafka-1", 9092)
    assert (broker.host, broker.port, broker._host, broker._port) == ("kafka-1", 9092, "kafka-1", 9092)
    with pytest.raises(ConfigError):
        Broker("kafka-1", 0)

    m = KafkaMessageAndMetadata("events", 2, 41, None, b"\xc3\xa9t\xc3\xa9")
    assert (m.topic, m.partition, m.offset, m.key, m.message) == ("events", 2, 41, None, "été")
    m._set_value_decoder(lambda raw: raw.upper())
    assert m.message == b"\xc3\xa9T\xc3\xa9"
    assert m == KafkaMessageAndMetadata("events", 2, 41, None, b"\xc3\xa9t\xc3\xa9")
    assert hash(m) == hash(KafkaMessageAndMetadata("events", 2, 41, None, b"\xc3\xa9t\xc3\xa9"))
    assert m != KafkaMessageAndMetadata("events", 2, 42, None, b"\xc3\xa9t\xc3\xa9")
    restored = pickle.loads(pickle.dumps(m))
    assert restored == m and restored.message == "été"  # decoders are not pickled: utf8 again, as in 2.4
    assert str(m) == "KafkaMessageAndMetadata(topic: events, partition: 2, offset: 41, key and message...)"
    assert repr(m) == (
        "KafkaMessageAndMetadata(topic='events', partition=2, offset=41, key=None, message=b'\\xc3\\xa9t\\xc3\\xa9')"
    )
    assert utf8_decoder(None) is None and utf8_decoder(b"x") == "x"


# -- kafkaParams (no JVM) --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [({}, "latest"), ({"auto.offset.reset": "largest"}, "latest"), ({"auto.offset.reset": "smallest"}, "earliest"),
     ({"auto.offset.reset": "earliest"}, "earliest"), ({"auto.offset.reset": "latest"}, "latest"),
     ({"auto.offset.reset": "SMALLEST"}, "earliest")],
)
def test_auto_offset_reset_accepts_08_and_010_names_default_largest(given: dict, expected: str) -> None:
    assert KafkaParams.parse({"metadata.broker.list": "h:1", **given}).auto_offset_reset == expected


def test_kafka_params_values() -> None:
    parsed = KafkaParams.parse(
        {"bootstrap.servers": "h:1,h:2", "group.id": "g", "client.id": "c", "socket.timeout.ms": "1500"}
    )
    assert parsed == KafkaParams("h:1,h:2", "latest", "g", "c", 1.5)
    assert parsed.client_settings() == {"client_id": "c"}
    both = KafkaParams.parse({"bootstrap.servers": "h:1", "metadata.broker.list": "h:1"})
    assert both.bootstrap_servers == "h:1"


def test_kafka_params_of_real_jobs_are_mapped_or_ignored_with_one_warning() -> None:
    """2.4's 0.8 consumer config accepted any key, logging those it did not use: real jobs carry them."""
    params = {"metadata.broker.list": "h:1", "group.id": "g", "zookeeper.connect": "zk:2181",
              "fetch.message.max.bytes": "2097152", "socket.receive.buffer.bytes": "65536",
              "refresh.leader.backoff.ms": "200", "auto.commit.enable": "true", "key.deserializer": "x.Y",
              "fetch.mesage.max.bytes": "1"}
    with pytest.warns(IgnoredKafkaParams) as caught:
        parsed = KafkaParams.parse(params)
    assert len(caught) == 1
    message = str(caught[0].message)
    for key in ("zookeeper.connect", "auto.commit.enable", "key.deserializer"):
        assert repr(key) in message
    assert "'fetch.mesage.max.bytes': unknown (did you mean 'fetch.message.max.bytes'?)" in message
    # Keys with an equivalent reach the Kafka clients (kafka-python's names; librdkafka's through translate).
    assert parsed.client_settings() == {"max_partition_fetch_bytes": 2097152, "receive_buffer_bytes": 65536,
                                        "retry_backoff_ms": 200}
    # Nothing to warn about: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KafkaParams.parse({"metadata.broker.list": "h:1", "fetch.message.max.bytes": "1048576"})


def test_kafka_params_refuse_only_what_would_change_the_connection_silently() -> None:
    with pytest.raises(UnsupportedKafkaParams) as err:
        KafkaParams.parse({"metadata.broker.list": "h:1", "security.protocol": "SSL", "ssl.truststore.location": "t",
                           "fetch.message.max.bytes": "lots"})
    e = err.value
    assert isinstance(e, ConfigError)
    # TLS settings are translated (kit.security); a JKS truststore (Java's default type) has no equivalent.
    assert sorted(e.unsupported) == ["fetch.message.max.bytes", "ssl.truststore.type"]
    assert e.unsupported["ssl.truststore.type"].startswith(
        "JKS truststores cannot be read by the Python Kafka clients (JKS is Java's default type). Fix: export")
    assert e.unsupported["fetch.message.max.bytes"] == "must be a whole number, got 'lots'"
    assert str(e).startswith("Unrecognized configs: {'fetch.message.max.bytes', 'ssl.truststore.type'")


@pytest.mark.parametrize(
    ("given", "field"),
    [({}, "metadata.broker.list"),
     ({"metadata.broker.list": "h:1", "bootstrap.servers": "h:2"}, "bootstrap.servers"),
     ({"metadata.broker.list": "h:1", "auto.offset.reset": "none"}, "auto.offset.reset"),
     ({"metadata.broker.list": "h:1", "socket.timeout.ms": "soon"}, "socket.timeout.ms")],
)
def test_kafka_params_errors_name_the_setting(given: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        KafkaParams.parse(given)
    assert err.value.field == field


@pytest.mark.parametrize(("call", "message"), [
    (lambda: KafkaUtils.createDirectStream(None, "events", {"metadata.broker.list": "h:1"}),
     "topics should be list (KafkaUtils.createDirectStream, as in Spark 2.4), got str 'events'"),
    (lambda: KafkaUtils.createDirectStream(None, ("events",), {"metadata.broker.list": "h:1"}),
     "topics should be list (KafkaUtils.createDirectStream, as in Spark 2.4), got tuple"),
    (lambda: KafkaUtils.createDirectStream(None, ["events"], [("metadata.broker.list", "h:1")]),
     "kafkaParams should be dict (KafkaUtils.createDirectStream, as in Spark 2.4), got list"),
    (lambda: KafkaUtils.createRDD(None, {"metadata.broker.list": "h:1"}, (OffsetRange("t", 0, 0, 1),)),
     "offsetRanges should be list (KafkaUtils.createRDD, as in Spark 2.4), got tuple"),
    (lambda: KafkaUtils.createRDD(None, [("metadata.broker.list", "h:1")], [OffsetRange("t", 0, 0, 1)]),
     "kafkaParams should be dict (KafkaUtils.createRDD, as in Spark 2.4), got list"),
    (lambda: KafkaUtils.createStream(None, "zk:2181", "group", ["events"], {"metadata.broker.list": "h:1"}),
     "topics should be dict (KafkaUtils.createStream, as in Spark 2.4), got list ['events']: pass {topic: numThreads}"),
])
def test_arguments_of_the_wrong_type_raise_type_error_as_in_2_4(call, message: str) -> None:
    """Spark 2.4 raised TypeError for these (pyspark/streaming/kafka.py's isinstance checks); code that catches it
    keeps working. The error is also the kit's ConfigError, naming the argument."""
    with pytest.raises(TypeError, match=re.escape(message)) as err:
        call()
    assert isinstance(err.value, ConfigError) and err.value.field in ("topics", "kafkaParams", "offsetRanges")


def test_create_stream_needs_brokers_and_known_params() -> None:
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createStream(None, "zk:2181", "group", {"events": 1})
    assert err.value.field == "metadata.broker.list" and "zkQuorum='zk:2181'" in str(err.value)
    with pytest.raises(UnsupportedKafkaParams) as secured:
        KafkaUtils.createStream(None, "zk:2181", "group", {"events": 1}, {"metadata.broker.list": "h:1",
                                                                          "security.protocol": "SASL_SSL",
                                                                          "sasl.mechanism": "GSSAPI"})
    assert list(secured.value.unsupported) == ["sasl.mechanism"]
    assert secured.value.unsupported["sasl.mechanism"].startswith("mechanism GSSAPI is not supported here")
    with pytest.raises(ConfigError, match="the receiver's consumer always commits"):
        KafkaUtils.createStream(None, "zk:2181", "group", {"events": 1},
                                {"metadata.broker.list": "h:1", "auto.commit.enable": "false"})
    with pytest.raises(ConfigError, match="differs from groupId"):
        KafkaUtils.createStream(None, "zk:2181", "group", {"events": 1}, {"metadata.broker.list": "h:1", "group.id": "other"})


def test_create_stream_receives_through_the_group(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory(partitions=2)
    send_values(kafka, topic, {0: [f"a{i}" for i in range(30)], 1: [f"b{i}" for i in range(20)]})
    stream = KafkaUtils.createStream(
        ssc, "zk.unused:2181", f"receiver-{topic}", {topic: 1},
        # A short session timeout: Tansu answers a group join only after about half of it.
        {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest",
         "session.timeout.ms": "2000", "heartbeat.interval.ms": "500"},
    )
    batches = collect_batches(stream)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 50, lambda: len(flat(batches)))
    assert sorted(v for _, v in flat(batches)) == sorted([f"a{i}" for i in range(30)] + [f"b{i}" for i in range(20)])


# -- createRDD (Spark + Kafka) ---------------------------------------------------------------------------------


@ON_BOTH_BROKERS
def test_kafka_rdd(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2})
    rdd = KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 3)])
    assert isinstance(rdd, KafkaRDD)
    assert rdd.collect() == [(None, "a"), (None, "b"), (None, "b")]


@ON_BOTH_BROKERS
def test_kafka_rdd_with_leaders(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})
    host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
    leaders = {TopicAndPartition(topic, 0): Broker(host, int(port))}
    rdd = KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 6)], leaders)
    assert Counter(v for _, v in rdd.collect()) == {"a": 1, "b": 2, "c": 3}
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 6)], {topic: "broker"})
    assert err.value.field == "leaders"


@ON_BOTH_BROKERS
def test_kafka_rdd_get_offset_ranges(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 3, "b": 4, "c": 5})
    offset_ranges = [OffsetRange(topic, 0, 0, 12)]
    rdd = KafkaUtils.createRDD(sc, params(bootstrap_servers), offset_ranges)
    assert rdd.offsetRanges() == offset_ranges


@ON_BOTH_BROKERS
def test_kafka_rdd_message_handler(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 1, "c": 2})

    def get_key_and_double_message(m):
        return m and (m.key, m.message * 2)

    rdd = KafkaUtils.createRDD(
        sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 4)], messageHandler=get_key_and_double_message
    )
    assert rdd.collect() == [(None, "aa"), (None, "bb"), (None, "cc"), (None, "cc")]
    offsets = KafkaUtils.createRDD(
        sc, params(bootstrap_servers), [OffsetRange(topic, 0, 1, 4)],
        messageHandler=lambda m: (m.topic, m.partition, m.offset, m.message),
    ).collect()
    assert offsets == [(topic, 0, 1, "b"), (topic, 0, 2, "c"), (topic, 0, 3, "c")]


@ON_BOTH_BROKERS
def test_kafka_rdd_has_one_partition_per_range_and_empty_ranges_are_empty(
    sc, kafka: Kafka, topic_factory, bootstrap_servers: str
) -> None:
    topic = topic_factory(partitions=3)
    send_values(kafka, topic, {0: ["x0", "x1", "x2"], 2: ["z0", "z1"]})
    ranges = [OffsetRange(topic, 0, 1, 3), OffsetRange(topic, 1, 0, 0), OffsetRange(topic, 2, 0, 2)]
    rdd = KafkaUtils.createRDD(sc, params(bootstrap_servers), ranges, keyDecoder=lambda k: k, valueDecoder=bytes.decode)
    assert rdd.getNumPartitions() == 3
    assert rdd.glom().collect() == [[(b"k0", "x1"), (b"k0", "x2")], [], [(b"k2", "z0"), (b"k2", "z1")]]
    # Transformations pipeline with the read (one Python pass) and keep the partitioning.
    assert rdd.map(lambda kv: kv[1].upper()).glom().collect() == [["X1", "X2"], [], ["Z0", "Z1"]]


@ON_BOTH_BROKERS
def test_a_kafka_rdd_read_in_fewer_tasks_is_coalesce_in_one_python_pass(
    sc, kafka: Kafka, topic_factory, bootstrap_servers: str
) -> None:
    topic = topic_factory(partitions=4)
    send_values(kafka, topic, {0: ["a0", "a1"], 1: ["b0"], 2: ["c0", "c1", "c2"], 3: ["d0"]})
    ranges = [OffsetRange(topic, p, 0, n) for p, n in enumerate([2, 1, 3, 1])]
    rdd = KafkaUtils.createRDD(sc, params(bootstrap_servers), ranges, valueDecoder=bytes.decode)
    grouped = rdd.read_in_tasks(2).map(lambda kv: kv[1])
    assert grouped.glom().collect() == rdd.coalesce(2).map(lambda kv: kv[1]).glom().collect()
    assert grouped.glom().collect() == [["a0", "a1", "b0"], ["c0", "c1", "c2", "d0"]]
    assert rdd.read_in_tasks(8).getNumPartitions() == 4


@ON_BOTH_BROKERS
def test_kafka_rdd_checks_ranges_on_the_driver(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 2})
    with pytest.raises(OffsetOutOfRange) as err:
        KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 5)])
    assert (err.value.topic, err.value.partition, err.value.requested, err.value.available) == (topic, 0, (0, 5), (0, 2))
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 3, 0, 0)])
    assert (err.value.field, err.value.actual) == ("offsetRanges", 3)
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createRDD(sc, params(bootstrap_servers), (OffsetRange(topic, 0, 0, 1),))
    assert err.value.field == "offsetRanges"


@ON_BOTH_BROKERS
def test_consumer_cache_setting(sc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 2})
    jconf = sc._jsc.sc().conf()
    key = "spark.streaming.kafka.consumer.cache.enabled"
    try:
        jconf.set(key, "false")
        uncached = KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 2)])
        jconf.set(key, "maybe")
        with pytest.raises(ConfigError) as err:
            KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 2)])
        assert (err.value.field, err.value.actual) == (key, "maybe")
    finally:
        jconf.remove(key)
    assert uncached.func.args[0].reuse_consumers is False  # each task opens and closes its own consumer
    assert uncached.collect() == [(None, "a"), (None, "a")]
    cached = KafkaUtils.createRDD(sc, params(bootstrap_servers), [OffsetRange(topic, 0, 0, 2)])
    assert cached.func.args[0].reuse_consumers is True
    assert cached.collect() == cached.collect() == [(None, "a"), (None, "a")]


# -- direct stream (Spark + Kafka) -----------------------------------------------------------------------------


@ON_BOTH_BROKERS
def test_kafka_direct_stream(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    batches = collect_batches(stream)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 6, lambda: batches)
    assert flat(batches) == [(None, "a"), (None, "b"), (None, "b"), (None, "c"), (None, "c"), (None, "c")]


@ON_BOTH_BROKERS
def test_dstream_callbacks_end_without_a_java_exception(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str, monkeypatch) -> None:
    """Each Python DStream operation of each batch is a call from the JVM with a Java list of RDDs; PySpark walked
    it with py4j's iterator, whose end is a Java exception that PySpark's SQL handler converted (about 28 ms a
    call). legacy/_callbacks.py reads the list by index: the stream's results are the same, with no exception."""
    import pyspark.errors.exceptions.captured as captured

    converted: list = []
    convert = captured.convert_exception
    monkeypatch.setattr(captured, "convert_exception", lambda e: converted.append(str(e)) or convert(e))
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    values = stream.map(lambda kv: kv[1])
    both = values.transformWith(lambda a, b: a.union(b), values.map(str.upper))  # a call with two RDDs
    batches = collect_batches(both)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 6 and len(batches) >= 3, lambda: batches)
    assert sorted(flat(batches)) == ["A", "B", "B", "a", "b", "b"]
    assert converted == []


def _unpatched_transform_call(monkeypatch) -> type:
    """PySpark's ``TransformFunction`` with a ``call`` the kit has not patched (restored after the test)."""
    from pyspark.streaming.util import TransformFunction

    current = TransformFunction.call

    def call(self, milliseconds, jrdds):
        return current(self, milliseconds, jrdds)

    monkeypatch.setattr(TransformFunction, "call", call)
    return TransformFunction


def test_importing_legacy_leaves_pyspark_unpatched() -> None:
    """The callbacks of legacy/_callbacks.py are installed by creating a stream, never by an import."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, legacy\n"
        "for m in pkgutil.walk_packages(legacy.__path__, 'legacy.'): importlib.import_module(m.name)\n"
        "from pyspark.streaming.util import TransformFunction\n"
        "import sys; print(sum(m.startswith('legacy.') for m in sys.modules), "
        "getattr(TransformFunction.call, 'reads_by_index', False))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    imported, patched = out.split()
    assert int(imported) >= 20  # every module of legacy, legacy.kafka and legacy._direct among them
    assert patched == "False"


@ON_BOTH_BROKERS
def test_creating_a_direct_stream_installs_the_callbacks(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str, monkeypatch) -> None:
    transform = _unpatched_transform_call(monkeypatch)
    assert not getattr(transform.call, "reads_by_index", False)
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1})
    KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    assert transform.call.reads_by_index is True


@ON_BOTH_BROKERS
def test_kafka_direct_stream_from_offset(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})
    from_offsets = {TopicAndPartition(topic, 0): 2}
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers), from_offsets)
    values = stream.map(lambda kv: kv[1])
    batches = collect_batches(values)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 4, lambda: batches)
    assert flat(batches) == ["b", "c", "c", "c"]


@ON_BOTH_BROKERS
def test_from_offsets_must_name_the_topics_and_be_in_the_log(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 2})
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers), {TopicAndPartition("other", 0): 0})
    assert (err.value.field, err.value.expected, err.value.actual) == ("fromOffsets", [topic], ["other"])
    with pytest.raises(OffsetOutOfRange) as err:
        KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers), {TopicAndPartition(topic, 0): 3})
    assert (err.value.requested, err.value.available) == ((3, 3), (0, 2))
    with pytest.raises(UnknownTopic):
        KafkaUtils.createDirectStream(ssc, [topic + "_missing"], params(bootstrap_servers))
    with pytest.raises(ConfigError) as err:
        KafkaUtils.createDirectStream(ssc, topic, params(bootstrap_servers))
    assert err.value.field == "topics"


@ON_BOTH_BROKERS
def test_default_offset_reset_is_largest(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"old": 3})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers))
    batches = collect_batches(stream.map(lambda kv: kv[1]))
    ranges: list[OffsetRange] = []
    stream.foreachRDD(lambda rdd: ranges.extend(rdd.offsetRanges()))
    ssc.start()
    await_condition(ssc, lambda: len(ranges) >= 1, lambda: ranges)
    send_messages(kafka, topic, {"new": 2})
    await_condition(ssc, lambda: sum(r.count() for r in ranges) >= 2, lambda: ranges)
    assert flat(batches) == ["new", "new"]
    assert [r for r in ranges if r.count()] == [OffsetRange(topic, 0, 3, 5)]
    assert ranges[0].fromOffset == 3


@ON_BOTH_BROKERS
def test_kafka_direct_stream_foreach_get_offset_ranges(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    offset_ranges: list[list[OffsetRange]] = []

    def get_offset_ranges(_, rdd):
        offset_ranges.append(rdd.offsetRanges())

    stream.foreachRDD(get_offset_ranges)
    ssc.start()
    await_condition(ssc, lambda: len(offset_ranges) >= 2, lambda: offset_ranges)
    assert offset_ranges[0] == [OffsetRange(topic, 0, 0, 6)]
    assert all(later == [OffsetRange(topic, 0, 6, 6)] for later in offset_ranges[1:])


@ON_BOTH_BROKERS
def test_kafka_direct_stream_transform_get_offset_ranges(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    offset_ranges: list[list[OffsetRange]] = []

    def transform_with_offset_ranges(rdd):
        offset_ranges.append(rdd.offsetRanges())
        return rdd

    # Mixing the direct stream's transform with plain TransformedDStreams (which fold together), as in 2.4.
    counts = collect_batches(stream.transform(transform_with_offset_ranges).map(lambda kv: kv[1]).count())
    ssc.start()
    await_condition(ssc, lambda: len(counts) >= 2, lambda: counts)
    assert offset_ranges[0] == [OffsetRange(topic, 0, 0, 6)]
    assert [counts[t] for t in sorted(counts)][:2] == [[6], [0]]


@ON_BOTH_BROKERS
def test_kafka_direct_stream_message_handler(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 1, "b": 2, "c": 3})

    def get_key_and_double_message(m):
        return m and (m.key, m.message * 2)

    stream = KafkaUtils.createDirectStream(
        ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}),
        messageHandler=get_key_and_double_message,
    )
    batches = collect_batches(stream)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 6, lambda: batches)
    assert Counter(v for _, v in flat(batches)) == {"aa": 1, "bb": 2, "cc": 3}


@ON_BOTH_BROKERS
def test_direct_stream_reads_every_partition_once_one_spark_partition_each(
    ssc, kafka: Kafka, topic_factory, bootstrap_servers: str
) -> None:
    topic = topic_factory(partitions=3)
    send_values(kafka, topic, {0: [f"a{i}" for i in range(40)], 2: [f"c{i}" for i in range(7)]})
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "earliest"}),
        messageHandler=lambda m: (m.partition, m.offset, m.message),
    )
    shapes: dict[int, list[int]] = {}
    stream.foreachRDD(lambda t, rdd: shapes.__setitem__(round(t.timestamp() * 1000), rdd.glom().map(len).collect()))
    batches = collect_batches(stream)
    ssc.start()
    await_condition(ssc, lambda: len(flat(batches)) >= 47, lambda: batches)
    records = flat(batches)
    assert sorted(records) == sorted(
        [(0, i, f"a{i}") for i in range(40)] + [(2, i, f"c{i}") for i in range(7)]
    )
    first = min(t for t in shapes if sum(shapes[t]))
    assert shapes[first] == [40, 0, 7]
    assert all(len(shape) == 3 for shape in shapes.values())


@ON_BOTH_BROKERS
def test_kafka_direct_stream_cached_uses_sparks_rdds(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    send_messages(kafka, topic, {"a": 2})
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    stream.cache()
    seen: list[tuple[list[OffsetRange], list]] = []
    stream.foreachRDD(lambda rdd: seen.append((rdd.offsetRanges(), rdd.collect())))
    ssc.start()
    await_condition(ssc, lambda: len(seen) >= 1, lambda: seen)
    assert seen[0] == ([OffsetRange(topic, 0, 0, 2)], [(None, "a"), (None, "a")])


@ON_BOTH_BROKERS
def test_window_over_the_direct_stream(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    topic = topic_factory()
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"auto.offset.reset": "smallest"}))
    values = stream.map(lambda kv: kv[1])
    batches = collect_batches(values)
    windows = collect_batches(values.window(3 * BATCH_S, BATCH_S))
    ssc.start()
    await_condition(ssc, lambda: len(batches) >= 1, lambda: batches)
    send_messages(kafka, topic, {"w": 3})
    await_condition(ssc, lambda: sum(len(w) for w in windows.values()) >= 9, lambda: windows)
    step = int(BATCH_S * 1000)
    for t, window in list(windows.items()):
        covered = [x for b in (t - 2 * step, t - step, t) for x in batches.get(b, [])]
        assert sorted(window) == sorted(covered), t
    assert sum(len(w) for w in windows.values()) == 9  # each record in exactly the 3 windows over its batch


def test_commit_async_commits_when_the_next_batch_is_generated(ssc, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    from kit.kafka import TopicPartition

    topic = topic_factory(partitions=2)
    send_values(kafka, topic, {0: [f"a{i}" for i in range(12)], 1: [f"b{i}" for i in range(7)]})
    group = f"commits-{topic}"
    stream = KafkaUtils.createDirectStream(ssc, [topic], params(bootstrap_servers, **{"group.id": group, "auto.offset.reset": "smallest"}))
    acknowledged: list[dict] = []
    committed_at_output: list[dict] = []

    def output(rdd) -> None:  # captures the stream, as 0-10 jobs do
        committed_at_output.append(kafka.group_offsets(group))
        stream.commitAsync(rdd.offsetRanges(), lambda offsets, error: acknowledged.append((offsets, error)))

    stream.foreachRDD(output)
    ssc.start()
    end = {TopicPartition(topic, 0): 12, TopicPartition(topic, 1): 7}
    await_condition(ssc, lambda: kafka.group_offsets(group) == end, lambda: kafka.group_offsets(group))
    # The first batch read everything; its commit was only sent when the second batch was generated.
    assert committed_at_output[0] == {}
    assert acknowledged[0] == (end, None)
