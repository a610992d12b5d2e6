"""The Structured Streaming Kafka source and sink on a real broker and a real Spark session.

Cases follow Spark's KafkaMicroBatchSourceSuite where they apply to this connector. Records are produced through the
kit's sender, so that the tests marked ``librdkafka_only`` use librdkafka alone on ``DMK_KAFKA_CLIENT=confluent``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kit.kafka import TopicPartition
from _streaming import send_records
from modern.errors import KafkaOptionError, KafkaOptionWarning, KafkaSinkError
from modern.kafka import (
    GroupOffsetCommitter,
    SOURCE_NAME,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    source_format,
    split_ranges,
    KafkaInputGroup,
    KafkaInputPartition,
    group_ranges,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
# Also run on librdkafka's mock cluster (DMK_TEST_BROKER=mock, where DMK_KAFKA_CLIENT=confluent puts the source's
# driver-side look-ups, the executors' reads and the sink on librdkafka alone): a few, for .ci/run's time. Left out:
# test_group_offset_committer (the mock answers a group's every offset with none), and the longer runs.
ON_BOTH_BROKERS = pytest.mark.librdkafka_only


def _send(bootstrap_servers: str, records: list[dict], *, linger_ms: int = 20) -> None:
    send_records(bootstrap_servers, records, linger_ms=linger_ms)


def _produce(bootstrap_servers: str, topic: str, per_partition: dict[int, int], *, tag: str = "v") -> None:
    _send(bootstrap_servers, [
        {"topic": topic, "key": f"k{i}".encode(), "value": f"{tag}-{partition}-{i}".encode(), "partition": partition,
         "headers": [("seq", str(i).encode())]}
        for partition, n in per_partition.items() for i in range(n)
    ])


def _reader(spark, bootstrap_servers: str, **options):
    reader = spark.readStream.format(source_format(spark)).option("kafka.bootstrap.servers", bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _run_available_now(frame, checkpoint: Path, *, timeout_s: float = 120, on_batch=None) -> list[list[tuple]]:
    """Run to completion under Trigger.AvailableNow; one sorted list of (topic, partition, offset, value) per batch."""
    batches: dict[int, list[tuple]] = {}

    def collect(df, batch_id: int) -> None:
        rows = df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").collect()
        batches[batch_id] = sorted(tuple(r) for r in rows)
        if on_batch is not None:
            on_batch(batch_id)

    query = frame.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True
    ).start()
    finished = query.awaitTermination(timeout_s)
    assert finished, f"query still running after {timeout_s} s; batches so far: {sorted(batches)}"
    if query.exception() is not None:
        raise query.exception()
    return [batches[i] for i in sorted(batches)]


def _all(batches: list[list[tuple]]) -> list[tuple]:
    return sorted(row for batch in batches for row in batch)


# -- pure logic ---------------------------------------------------------------------------------------------


def test_rate_limit_matches_spark() -> None:
    a, b, c = (TopicPartition("t", i) for i in range(3))
    # The example: lags [9990, 9, 1], limit 100 -> [99, 1, 1] (a share below 1 rounds up).
    assert rate_limit(100, {a: 0, b: 0, c: 0}, {a: 9990, b: 9, c: 1}, {}) == {a: 99, b: 1, c: 1}
    # Shares are floored; partitions without lag keep their end; new partitions start from earliest.
    assert rate_limit(10, {a: 5, b: 7}, {a: 25, b: 7, c: 30}, {c: 10}) == {a: 10, b: 7, c: 15}
    assert rate_limit(1000, {a: 0}, {a: 10}, {}) == {a: 10}  # never past the end
    assert rate_limit(5, {a: 3}, {a: 3}, {}) == {a: 3}  # nothing to read


def test_split_ranges_like_spark() -> None:
    ranges = [KafkaInputPartition("t", 0, 0, 100), KafkaInputPartition("t", 1, 0, 10), KafkaInputPartition("t", 2, 5, 5)]
    assert [(r.partition, r.from_offset, r.until_offset) for r in split_ranges(ranges, None, None)] == [(0, 0, 100), (1, 0, 10)]
    split = split_ranges(ranges, 4, None)
    assert [(r.partition, r.from_offset, r.until_offset) for r in split] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 0, 10),
    ]
    by_max = split_ranges(ranges, None, 40)
    assert [(r.partition, r.from_offset, r.until_offset) for r in by_max] == [(0, 0, 33), (0, 33, 66), (0, 66, 100), (1, 0, 10)]


def test_group_ranges_makes_at_most_max_partitions_tasks_of_whole_ranges() -> None:
    ranges = [KafkaInputPartition("t", p, 0, size) for p, size in enumerate([50, 10, 40, 5, 30, 20, 1, 8])]
    groups = group_ranges(ranges, 2)
    assert len(groups) == 2 and all(isinstance(g, KafkaInputGroup) for g in groups)
    # Every range exactly once, whole; each group in partition order; sizes balanced largest-first.
    assert sorted(r.value for g in groups for r in g.ranges) == sorted(r.value for r in ranges)
    assert all([r.partition for r in g.ranges] == sorted(r.partition for r in g.ranges) for g in groups)
    assert sorted(sum(r.until_offset - r.from_offset for r in g.ranges) for g in groups) == [81, 83]
    assert group_ranges(ranges, 8) == ranges and group_ranges(ranges, None) == ranges
    assert group_ranges(ranges, 2) == groups  # deterministic


def test_max_partitions_reads_every_record_in_fewer_tasks(spark, bootstrap_servers, topic_factory) -> None:
    topic = topic_factory(partitions=4)
    _produce(bootstrap_servers, topic, {0: 30, 1: 20, 2: 7, 3: 1})
    fmt = source_format(spark)
    frame = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("maxPartitions", "2")
        .load()
    )
    assert frame.rdd.getNumPartitions() == 2
    got = sorted((r.partition, r.offset) for r in frame.select("partition", "offset").collect())
    assert got == [(p, o) for p, n in enumerate([30, 20, 7, 1]) for o in range(n)]
    with pytest.raises(Exception, match=r"minPartitions \(3\) is greater than maxPartitions \(2\)"):
        spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic).option(
            "maxPartitions", "2").option("minPartitions", "3").load()


def test_offsets_json_round_trip() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 3, TopicPartition("b", 0): 5}
    assert offsets_to_json(offsets) == {"a": {"0": 3}, "b": {"0": 5, "1": 7}}
    assert offsets_from_json(json.dumps(offsets_to_json(offsets))) == offsets


# -- reading ------------------------------------------------------------------------------------------------


@ON_BOTH_BROKERS
def test_schema_and_batch_read_with_ending_offsets(spark, bootstrap_servers, topic_factory) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 30, 1: 20})
    fmt = source_format(spark)
    assert fmt == SOURCE_NAME  # no JVM connector on the classpath here
    frame = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 5, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 12, "1": -1}}))
        .option("includeHeaders", "true")
        .load()
    )
    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = frame.selectExpr("partition", "offset", "CAST(value AS STRING)", "CAST(key AS STRING)", "headers[0].key",
                            "CAST(headers[0].value AS STRING)", "timestampType").collect()
    got = sorted((r[0], r[1]) for r in rows)
    assert got == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(20)]
    first = next(r for r in rows if r[0] == 0 and r[1] == 5)
    assert tuple(first)[2:] == ("v-0-5", "k5", "seq", "5", 0)


def test_starting_offsets_earliest_latest_and_specific(spark, bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 10, 1: 10})

    earliest = _run_available_now(_reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest"), tmp_path / "e")
    assert len(_all(earliest)) == 20

    latest = _run_available_now(_reader(spark, bootstrap_servers, subscribe=topic), tmp_path / "l")
    assert _all(latest) == []  # default for streams: latest

    specific = _run_available_now(
        _reader(spark, bootstrap_servers, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 7, "1": -2}})),
        tmp_path / "s",
    )
    assert [(r[1], r[2]) for r in _all(specific)] == [(0, 7), (0, 8), (0, 9)] + [(1, o) for o in range(10)]


@ON_BOTH_BROKERS
def test_max_offsets_per_trigger_gives_exact_batches(spark, bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=3)
    _produce(bootstrap_servers, topic, {0: 990, 1: 9, 2: 1})
    batches = _run_available_now(
        _reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=100),
        tmp_path / "ckpt",
    )
    per_partition = [{p: sum(1 for r in b if r[1] == p) for p in range(3)} for b in batches]
    # Batch 1 by Spark's rateLimit: 100 * 990/1000 -> 99, 100 * 9/1000 = 0.9 -> 1, 0.1 -> 1.
    assert per_partition[0] == {0: 99, 1: 1, 2: 1}
    # Then partition 1 has lag 8: 100 * 891/899 = 99.1 -> 99 and 0.89 -> 1, and so on until drained.
    assert per_partition[1] == {0: 99, 1: 1, 2: 0}
    assert sum(len(b) for b in batches) == 1000 and len(_all(batches)) == len(set(_all(batches)))
    assert all(len(b) <= 101 for b in batches)


@ON_BOTH_BROKERS
def test_available_now_stops_at_the_offsets_of_its_start(spark, bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=1)
    _produce(bootstrap_servers, topic, {0: 50})

    def produce_more(batch_id: int) -> None:
        if batch_id == 0:
            _produce(bootstrap_servers, topic, {0: 25}, tag="late")

    batches = _run_available_now(
        _reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=20),
        tmp_path / "ckpt",
        on_batch=produce_more,
    )
    assert [len(b) for b in batches] == [20, 20, 10]
    assert [r[2] for r in _all(batches)] == list(range(50))  # records produced after the start are not read


def test_subscribe_pattern_picks_up_new_topics_and_assign_is_exact(spark, bootstrap_servers, kafka, topic_factory, tmp_path) -> None:
    first = topic_factory(partitions=2)
    prefix = first.rsplit("_", 1)[0]
    _produce(bootstrap_servers, first, {0: 3, 1: 3})
    pattern = f"{prefix}_.*"
    ckpt = tmp_path / "pattern"
    batches = _run_available_now(_reader(spark, bootstrap_servers, subscribePattern=pattern, startingOffsets="earliest"), ckpt)
    assert len(_all(batches)) == 6
    second = f"{prefix}_second"
    kafka.create_topic(second, 2)
    try:
        _produce(bootstrap_servers, second, {0: 2, 1: 1})
        _produce(bootstrap_servers, first, {0: 1})
        again = _run_available_now(_reader(spark, bootstrap_servers, subscribePattern=pattern, startingOffsets="earliest"), ckpt)
        # The restarted query resumes after its checkpoint and reads the new topic from its earliest offset.
        assert sorted((r[0], r[1], r[2]) for r in _all(again)) == [
            (first, 0, 3), (second, 0, 0), (second, 0, 1), (second, 1, 0),
        ]
    finally:
        kafka.delete_topic(second)

    assigned = _run_available_now(
        _reader(spark, bootstrap_servers, assign=json.dumps({first: [1]}), startingOffsets="earliest"), tmp_path / "assign"
    )
    assert [(r[1], r[2]) for r in _all(assigned)] == [(1, 0), (1, 1), (1, 2)]


@ON_BOTH_BROKERS
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss(spark, bootstrap_servers, kafka, topic_factory, tmp_path, fail_on_data_loss) -> None:
    topic = topic_factory(partitions=1)
    _produce(bootstrap_servers, topic, {0: 30})
    ckpt = tmp_path / "ckpt"
    options = dict(subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower())
    assert len(_all(_run_available_now(_reader(spark, bootstrap_servers, **options), ckpt))) == 30
    # The topic is deleted and re-created with less data: offsets 10..29 are gone for good.
    kafka.delete_topic(topic)
    kafka.create_topic(topic, 1)
    _produce(bootstrap_servers, topic, {0: 10}, tag="new")
    _produce(bootstrap_servers, topic, {0: 0})
    if fail_on_data_loss:
        with pytest.raises(Exception, match="offset was changed from 30 to 10") as info:
            _run_available_now(_reader(spark, bootstrap_servers, **options), ckpt)
        assert "failOnDataLoss" in str(info.value)
    else:
        # As Spark: the loss is logged, the partition's position moves to its new end, the query goes on.
        assert _all(_run_available_now(_reader(spark, bootstrap_servers, **options), ckpt)) == []
        _produce(bootstrap_servers, topic, {0: 2}, tag="after")
        assert [r[3] for r in _all(_run_available_now(_reader(spark, bootstrap_servers, **options), ckpt))] == [
            "after-0-0", "after-0-1",
        ]


def test_restart_resumes_after_the_last_committed_batch(spark, bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 40, 1: 40})
    ckpt = tmp_path / "ckpt"
    first = _run_available_now(_reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest"), ckpt)
    _produce(bootstrap_servers, topic, {0: 5, 1: 5}, tag="more")
    second = _run_available_now(_reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest"), ckpt)
    assert len(_all(first)) == 80
    assert sorted((r[1], r[2]) for r in _all(second)) == [(p, o) for p in (0, 1) for o in range(40, 45)]
    offsets = json.loads((ckpt / "offsets" / "1").read_text().splitlines()[-1])
    assert offsets == {topic: {"0": 45, "1": 45}}  # Spark's Kafka offset JSON in the offset log


# -- options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
        ({"assign": "a"}, "No topicpartitions to assign as specified value for option 'assign' is 'a'"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
        ({"subscribe": "a", "kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "t.jks"},
         "kafka.ssl.truststore.type: JKS truststores cannot be read by the Python Kafka clients"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
         "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)."),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        ({"subscribe": "a", "endingOffsets": "latest"}, None),  # valid for batch; rejected by readStream below
    ],
)
def test_invalid_options_fail_at_load(spark, bootstrap_servers, options, message) -> None:
    fmt = source_format(spark)
    reader = spark.readStream.format(fmt)
    if "kafka.bootstrap.servers" not in options:
        reader = reader.option("kafka.bootstrap.servers", bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    if message is None:
        frame = reader.load()
        with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
            frame.writeStream.format("noop").trigger(availableNow=True).start().awaitTermination(60)
        return
    with pytest.raises(Exception, match=_escape(message)):
        reader.load()


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_options_spark_accepts_run_with_a_warning_where_they_have_no_effect() -> None:
    """Spark runs a query with a misspelt option (it ignores it), a Java-client tuning setting (the client logs
    it) and kafka.group.id (it logs a warning): so does the kit, warning once for each."""
    from modern._options import SourceSettings

    base = {"subscribe": "a", "kafka.bootstrap.servers": "x"}
    with pytest.warns(KafkaOptionWarning) as caught:
        settings = SourceSettings.from_options({**base, "startingOfsets": "earliest", "kafka.max.poll.records": "5",
                                                "kafka.group.id": "g", "groupIdPrefix": "p",
                                                "kafka.max.partition.fetch.bytes": "2097152"}, streaming=True)
    messages = [str(w.message) for w in caught]
    assert "Unknown option 'startingofsets' for the Kafka source is ignored, as Spark ignores it: did you mean " \
           "'startingOffsets'?" in messages
    assert any("['kafka.max.poll.records'] have no effect on this source" in m for m in messages)
    assert any(m.startswith("Kafka option 'kafka.group.id' has been set on this query") for m in messages)
    assert "Option groupIdPrefix will be ignored as option kafka.group.id has been set." in messages
    assert len(messages) == 4
    # The misspelt option is ignored (Spark's default, latest, applies); a mapped setting reaches the clients.
    assert settings.starting.kind == "latest" and settings.client == {"max_partition_fetch_bytes": 2097152}


def test_option_errors_carry_the_option() -> None:
    from modern._options import SourceSettings

    with pytest.raises(KafkaOptionError) as info:
        SourceSettings.from_options({"subscribe": "a"}, streaming=True)
    assert info.value.option == "kafka.bootstrap.servers"
    assert str(info.value) == "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
    with pytest.raises(KafkaOptionError, match="starting offset can't be latest for batch queries on Kafka"):
        SourceSettings.from_options({"subscribe": "a", "kafka.bootstrap.servers": "x", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(KafkaOptionError, match="ending offset can't be earliest for batch queries on Kafka"):
        SourceSettings.from_options({"subscribe": "a", "kafka.bootstrap.servers": "x", "endingOffsets": "earliest"}, streaming=False)


# -- sink ---------------------------------------------------------------------------------------------------


@ON_BOTH_BROKERS
def test_sink_round_trip_batch_and_stream(spark, bootstrap_servers, kafka, topic_factory, tmp_path) -> None:
    fmt = source_format(spark)
    target = topic_factory(partitions=2)
    rows = [("a", "1", 0), ("b", "2", 1), ("c", "3", 1)]
    spark.createDataFrame(rows, "key string, value string, partition int").write.format(fmt).option(
        "kafka.bootstrap.servers", bootstrap_servers
    ).option("topic", target).mode("append").save()
    ends = kafka.end_offsets(target)
    assert ends == {TopicPartition(target, 0): 1, TopicPartition(target, 1): 2}
    # Two Spark tasks write concurrently, so only the set of records per partition is defined.
    assert sorted((r.key, r.value) for r in kafka.read_range(target, 1, 0, 2)) == [(b"b", b"2"), (b"c", b"3")]

    source = topic_factory(partitions=2)
    _produce(bootstrap_servers, source, {0: 7, 1: 5})
    copy = topic_factory(partitions=1)
    query = (
        _reader(spark, bootstrap_servers, subscribe=source, startingOffsets="earliest")
        .selectExpr("key", "UPPER(CAST(value AS STRING)) AS value", f"'{copy}' AS topic")
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("checkpointLocation", str(tmp_path / "sink"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    values = sorted(r.value for r in kafka.read_range(copy, 0, 0, kafka.end_offsets(copy)[TopicPartition(copy, 0)]))
    assert values == sorted([f"V-0-{i}".encode() for i in range(7)] + [f"V-1-{i}".encode() for i in range(5)])


def test_sink_rejects_bad_input(spark, bootstrap_servers) -> None:
    fmt = source_format(spark)
    frame = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        frame.write.format(fmt).option("kafka.bootstrap.servers", bootstrap_servers).option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        spark.createDataFrame([("x",)], "value string").write.format(fmt).option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).mode("append").save()
    # Headers must be Spark's array<struct<key: string, value: binary>>, checked before anything is sent.
    for bad in ("array<string>", "array<struct<key: string, value: string>>", "string"):
        with pytest.raises(Exception, match="headers attribute type must be an array<struct<key:string,value:binary>>"):
            spark.createDataFrame([], f"value string, headers {bad}").write.format(fmt).option(
                "kafka.bootstrap.servers", bootstrap_servers).option("topic", "t").mode("append").save()
    assert issubclass(KafkaSinkError, Exception)


# -- consumer-group commits for lag monitoring ----------------------------------------------------------------


def test_group_offset_committer(spark, bootstrap_servers, kafka, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=2)
    _produce(bootstrap_servers, topic, {0: 12, 1: 8})
    group = f"dmk-lag-{topic}"
    listener = GroupOffsetCommitter(spark, group, bootstrap_servers, query_name="lagged")
    try:
        query = (
            _reader(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=10)
            .writeStream.queryName("lagged").format("noop")
            .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
        )
        assert query.awaitTermination(120) and query.exception() is None
        # Progress events reach the listener asynchronously, and it commits to Kafka before it records what it
        # committed and how far behind the source was, so the three are awaited together: every offset committed
        # to the group and recorded, and nothing behind latest after the last batch drained the topic (as Spark's
        # source metrics would say).
        deadline = time.monotonic() + 30
        expected = {TopicPartition(topic, 0): 12, TopicPartition(topic, 1): 8}
        drained = {"minOffsetsBehindLatest": 0.0, "maxOffsetsBehindLatest": 0.0, "avgOffsetsBehindLatest": 0.0}
        while (kafka.group_offsets(group), listener.committed, list(listener.behind_latest.values())) != (
            expected, expected, [drained]
        ):
            assert time.monotonic() < deadline, (
                f"group offsets {kafka.group_offsets(group)}, recorded {listener.committed}, {listener.behind_latest}"
            )
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)


def test_offsets_behind_latest_from_progress() -> None:
    from types import SimpleNamespace

    from modern.kafka import offsets_behind_latest

    source = SimpleNamespace(latestOffset='{"t": {"0": 100, "1": 50}}', endOffset='{"t": {"0": 40, "1": 50}}')
    assert offsets_behind_latest(source) == {
        "minOffsetsBehindLatest": 0.0, "maxOffsetsBehindLatest": 60.0, "avgOffsetsBehindLatest": 30.0,
    }
    assert offsets_behind_latest(SimpleNamespace(latestOffset=None, endOffset='{"t": {"0": 1}}')) is None


# -- exactly-once across a driver crash ------------------------------------------------------------------------


def test_sigkill_of_the_driver_then_restart_gives_no_gap_and_no_duplicate(bootstrap_servers, topic_factory, tmp_path) -> None:
    from modern.sinks import read_batches
    from tests.drivers import driver_command, kill_mid_stream, run_to_completion

    topic = topic_factory(partitions=3)
    _produce(bootstrap_servers, topic, {0: 400, 1: 300, 2: 300})
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    command = driver_command("modern_copy", bootstrap_servers, topic, ckpt, out)

    def batches_written() -> int:
        return len(list(out.glob("batch=*.parquet")))

    kill_mid_stream(command + ["run"], lambda: batches_written() >= 4, batches_written)  # after a few batches
    assert 0 < len(read_batches(out)) < 1000
    run_to_completion(command + ["drain"])
    rows = read_batches(out)
    got = sorted(zip(rows["partition"], rows["offset"]))
    expected = sorted([(0, o) for o in range(400)] + [(1, o) for o in range(300)] + [(2, o) for o in range(300)])
    assert len(got) == len(set(got)), "duplicates after the restart"
    assert got == expected, f"missing {len(set(expected) - set(got))} records"
    assert set(rows["value"]) == {f"v-{p}-{i}" for p, o in expected for i in [o]}


@ON_BOTH_BROKERS
def test_starting_and_ending_timestamps(spark, bootstrap_servers, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=2)
    _send(bootstrap_servers, [
        {"topic": topic, "key": None, "value": f"{p}-{i}".encode(), "partition": p,
         "timestamp_ms": 1_700_000_000_000 + 1000 * i + p * 500}
        for i in range(10) for p in (0, 1)
    ])
    fmt = source_format(spark)

    def base():  # a new reader each time: DataFrameReader.option mutates the reader it is called on
        return spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)

    rows = base().option("startingTimestamp", "1700000003000").option("endingTimestamp", "1700000006000").load().collect()
    # partition 0: timestamps ...3000 (offset 3) up to before ...6000 (offset 6); partition 1 (+500): offsets 3..5.
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 3), (0, 4), (0, 5), (1, 3), (1, 4), (1, 5)]
    by_partition = json.dumps({topic: {"0": 1_700_000_008_000, "1": 1_700_000_000_000}})
    stream = _run_available_now(
        _reader(spark, bootstrap_servers, subscribe=topic, startingOffsetsByTimestamp=by_partition), tmp_path / "ts"
    )
    assert sorted((r[1], r[2]) for r in _all(stream)) == [(0, 8), (0, 9)] + [(1, o) for o in range(10)]
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        base().option("startingTimestamp", "1800000000000").load().collect()
    latest = base().option("startingTimestamp", "1800000000000").option("startingOffsetsByTimestampStrategy", "latest").load()
    assert latest.count() == 0


@ON_BOTH_BROKERS
def test_min_offsets_per_trigger_waits_for_enough_records_or_the_delay(bootstrap_servers, topic_factory) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from modern._options import SourceSettings
    from modern.kafka import KafkaStreamReader

    topic = topic_factory(partitions=2)
    settings = SourceSettings.from_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": topic, "startingOffsets": "earliest",
         "minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "1000", "maxTriggerDelay": "1h"},
        streaming=True,
    )
    reader = KafkaStreamReader(settings)
    try:
        assert reader.getDefaultReadLimit() == ReadMaxRows(1000)
        start = reader.initialOffset()
        assert start == {topic: {"0": 0, "1": 0}}
        _produce(bootstrap_servers, topic, {0: 20, 1: 10})
        # As Spark's delayBatch: the first trigger is "overdue" (no trigger yet), so it runs.
        first = reader.latestOffset(start, ReadMaxRows(1000))
        assert first == {topic: {"0": 20, "1": 10}}
        _produce(bootstrap_servers, topic, {0: 30, 1: 30})
        assert reader.latestOffset(first, ReadMaxRows(1000)) == first  # 60 new < 100: wait
        # The engine's ReadAllAvailable overrides the source's own limits.
        assert reader.latestOffset(first, ReadAllAvailable()) == {topic: {"0": 50, "1": 40}}
        _produce(bootstrap_servers, topic, {0: 40})
        assert reader.latestOffset(first, ReadMaxRows(1000)) == {topic: {"0": 90, "1": 40}}  # 100 new: go
        _produce(bootstrap_servers, topic, {1: 5})
        third = {topic: {"0": 90, "1": 40}}
        assert reader.latestOffset(third, ReadMaxRows(1000)) == third
        reader._last_trigger_ms -= 3_600_000  # an hour passes: maxTriggerDelay forces the batch
        assert reader.latestOffset(third, ReadMaxRows(1000)) == {topic: {"0": 90, "1": 45}}
    finally:
        reader.stop()


def test_a_topic_created_while_a_pattern_query_runs_is_read_from_earliest(
    spark, bootstrap_servers, kafka, topic_factory, tmp_path
) -> None:
    """Spark's subscribePattern picks up a matching topic created while the query runs, from its earliest offset
    (it used to crash the query: a KeyError from the end offsets of a topic the client had no metadata for)."""
    first = topic_factory(partitions=2)
    prefix = first.rsplit("_", 1)[0]
    _produce(bootstrap_servers, first, {0: 2, 1: 1})
    rows: list[tuple] = []

    def collect(df, batch_id: int) -> None:
        rows.extend(tuple(r) for r in df.selectExpr("topic", "partition", "offset").collect())

    frame = _reader(spark, bootstrap_servers, subscribePattern=f"{prefix}_.*", startingOffsets="earliest",
                    failOnDataLoss="false")
    query = frame.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt")).trigger(
        processingTime="100 milliseconds").start()
    second = f"{prefix}_created"

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(rows) < count and time.monotonic() < deadline and query.isActive:
            time.sleep(0.1)
        assert query.exception() is None and query.isActive, query.exception()

    try:
        wait_for(3)
        _produce(bootstrap_servers, second, {0: 2, 1: 1, 2: 0, 3: 1})  # a missing topic is created: 4 partitions
        wait_for(7)
        # A topic deleted while the query runs: with failOnDataLoss=false the query goes on, as Spark's does.
        kafka.delete_topic(second)
        _produce(bootstrap_servers, first, {1: 1})
        wait_for(8)
    finally:
        query.stop()
        kafka.delete_topic(second)
    assert sorted(rows) == sorted([(first, 0, 0), (first, 0, 1), (first, 1, 0), (second, 0, 0), (second, 0, 1),
                                   (second, 1, 0), (second, 3, 0), (first, 1, 1)])


@pytest.mark.parametrize("mode", ["update", "complete", "append"])
def test_the_kafka_sink_in_every_output_mode(spark, bootstrap_servers, kafka, topic_factory, tmp_path, mode) -> None:
    """Running totals published to Kafka, the usual update-mode job: exact records per batch, in each mode."""
    from pyspark.sql import functions as F

    from modern.kafka import kafka_batch_sink

    source, out = topic_factory(partitions=1), topic_factory(partitions=1)
    frame = _reader(spark, bootstrap_servers, subscribe=source, startingOffsets="earliest")
    keys = frame.select(F.col("key").cast("string").alias("k"))
    if mode == "append":  # an aggregation cannot append without a watermark: publish the records themselves
        query_frame = keys.select(F.col("k").alias("key"), F.lit("1").alias("value"))
    else:
        query_frame = keys.groupBy("k").count().select(F.col("k").alias("key"),
                                                       F.col("count").cast("string").alias("value"))
    sink = kafka_batch_sink(**{"kafka.bootstrap.servers": bootstrap_servers, "topic": out})
    query = query_frame.writeStream.outputMode(mode).foreachBatch(sink).option(
        "checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)

    def publish(sends: dict[str, int]) -> list[tuple[str, str]]:
        _send(bootstrap_servers, [{"topic": source, "key": key.encode(), "value": b"x", "partition": 0}
                                  for key, n in sends.items() for _ in range(n)], linger_ms=0)
        before = kafka.end_offsets(out).get(TopicPartition(out, 0), 0) if out in kafka.topics() else 0
        query.start().awaitTermination(120)
        end = kafka.end_offsets(out)[TopicPartition(out, 0)]
        return sorted((r.key.decode(), r.value.decode()) for r in kafka.read_range(out, 0, before, end))

    first = publish({"a": 2, "b": 1})
    second = publish({"a": 1, "c": 1})
    if mode == "update":  # the changed totals only
        assert (first, second) == ([("a", "2"), ("b", "1")], [("a", "3"), ("c", "1")])
    elif mode == "complete":  # every total, each batch
        assert (first, second) == ([("a", "2"), ("b", "1")], [("a", "3"), ("b", "1"), ("c", "1")])
    else:
        assert (first, second) == ([("a", "1"), ("a", "1"), ("b", "1")], [("a", "1"), ("c", "1")])
    with pytest.raises(KafkaOptionError, match="Option 'kafka.bootstrap.servers' must be specified"):
        kafka_batch_sink(topic=out)


def test_a_pattern_topic_deleted_between_listing_and_describing_has_no_partitions() -> None:
    """The broker's topic list can still name a topic a describe no longer finds (deleted, or not ready yet): the
    pattern selects nothing of it, as Spark's consumer does, instead of failing the query's latestOffset."""
    from kit.errors import UnknownTopic
    from kit.kafka import TopicPartition
    from modern.kafka import SourceSettings, _Offsets

    class Cluster:
        def topics(self) -> list[str]:
            return ["app_a", "app_gone", "other"]

        def topic_partitions(self, topic: str) -> list[TopicPartition]:
            if topic == "app_gone":
                raise UnknownTopic(topic, "b:9092")
            return [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    offsets = _Offsets(SourceSettings.from_options({"kafka.bootstrap.servers": "b:9092", "subscribePattern": "app_.*"},
                                                   streaming=True))
    offsets._kafka = Cluster()  # type: ignore[assignment]
    assert offsets.partitions() == [TopicPartition("app_a", 0), TopicPartition("app_a", 1)]
