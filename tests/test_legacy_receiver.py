"""The receiver-based Kafka stream (``legacy._receiver``): wire format, bridge guarantees, and real runs.

Tiers: wire-format and bridge tests with a scripted consumer (no JVM, no broker); stream tests on the session's
broker and Spark JVM (one StreamingContext each, stopped with ``stopSparkContext=False``); the rate test in a
subprocess driver, because ``spark.streaming.receiver.maxRate`` is read when a SparkContext starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaError

import legacy._receiver as receiver
from kit.errors import ConfigError, UnknownTopic
from legacy._receiver import (
    ReceiverBridge,
    ReceiverBridgeError,
    create_receiver_stream,
    decode_line,
    decode_message,
    encode_line,
)

ROOT = Path(__file__).resolve().parents[1]
# Tansu answers a consumer's JoinGroup only after about half the session timeout (23 s with kafka-python's
# default); a short session keeps each stream's start near 1 s.
FAST_JOIN = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 500}


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, observe: Callable[[], Any] = lambda: None) -> None:
    """Return once ``condition()`` is true; fail with the last observed value after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s:g} s; last observed: {observe()}")
        time.sleep(0.02)


def receiver_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("dmk-receiver-")]


def port_is_closed(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


# -- wire format (no JVM, no broker) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [(None, b"v"), (b"", b""), (b"k", None), (bytes(range(256)), b"\n\r\x00 \xff\xfe line\nbreak"), (None, None)],
)
def test_lines_round_trip_any_bytes(key: bytes | None, value: bytes | None) -> None:
    line = encode_line("events.v1_x-y", 3, 2**40, key, value, 1_700_000_000_123)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("ascii")  # Spark's receiver reads UTF-8 lines: plain ASCII is always safe
    assert decode_line(line.decode("ascii")) == ("events.v1_x-y", 3, 2**40, key, value)
    message = decode_message(line.decode("ascii"))
    message._set_key_decoder(lambda b: b)
    message._set_value_decoder(lambda b: b)
    assert (message.topic, message.partition, message.offset, message.key, message.message, message.timestamp) == (
        "events.v1_x-y", 3, 2**40, key, value, 1_700_000_000_123,
    )


def test_lines_without_a_timestamp_still_decode_with_minus_one() -> None:
    assert decode_message("events 0 7 - dg==").timestamp == -1
    assert decode_line("events 0 7 - dg==") == ("events", 0, 7, None, b"v")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("events 0 1 a2V5", "expected 6 space-separated fields, got 4"),
        ("events 0 1 - - x", "invalid literal for int()"),
        ("events x 1 - -", "invalid literal for int()"),
        ("events 0 1 !!!! -", "Only base64 data is allowed"),
        ("events 0 1 - a2V", "Incorrect padding"),  # a line cut mid-record
    ],
)
def test_malformed_lines_are_refused(line: str, problem: str) -> None:
    with pytest.raises(ValueError, match="not a receiver-bridge record line") as info:
        decode_line(line)
    assert problem in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"topics": {"t": 0}}, "topics"),
        ({"topics": "t"}, "topics"),
        ({"topics": []}, "topics"),
        ({"group_id": ""}, "group_id"),
        ({"auto_offset_reset": "none"}, "auto_offset_reset"),
        ({"key_decoder": "utf-8"}, "key_decoder"),
    ],
)
def test_bad_arguments_fail_before_anything_starts(kwargs: dict[str, Any], field: str) -> None:
    arguments = {"ssc": None, "bootstrap_servers": "127.0.0.1:1", "group_id": "g", "topics": {"t": 1}} | kwargs
    with pytest.raises(ConfigError) as info:
        create_receiver_stream(**arguments)
    assert info.value.field == field


def test_settings_the_bridge_owns_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"sets \['enable_auto_commit'\] itself"):
        create_receiver_stream(None, "127.0.0.1:1", "g", ["t"], kafka_settings={"enable_auto_commit": False})
    with pytest.raises(ConfigError, match="Unrecognized configs: {'zookeeper.connect'}"):
        create_receiver_stream(None, "127.0.0.1:1", "g", ["t"], kafka_settings={"zookeeper.connect": "zk:2181"})


# -- the bridge with a scripted consumer (no JVM, no broker) -------------------------------------------------


class _Record:  # the fields of kafka-python's ConsumerRecord the bridge reads
    def __init__(self, offset: int, value: bytes) -> None:
        self.offset, self.key, self.value, self.timestamp = offset, None, value, 1_700_000_000_000 + offset


class ScriptedConsumer:
    """Hands out the records fed to it, honouring pause/resume; records seeks and the close."""

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position = 0
        self.available = 0
        self.is_paused = False
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.closed_with: bool | None = None
        self._fed = threading.Condition()

    def feed(self, n: int) -> None:
        with self._fed:
            self.available += n
            self._fed.notify_all()

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[_Record]]:
        with self._fed:
            if self.is_paused or self.position >= self.available:
                self._fed.wait(timeout_ms / 1000)  # stands in for the broker's fetch wait
                return {}
            end = min(self.available, self.position + 100)
            records = [_Record(o, f"r{o}".encode()) for o in range(self.position, end)]
            self.position = end
            return {self.tp: records}

    def assignment(self) -> set[TopicPartition]:
        return {self.tp}

    def pause(self, *tps: TopicPartition) -> None:
        self.is_paused = self.is_paused or self.tp in tps

    def paused(self) -> set[TopicPartition]:
        return {self.tp} if self.is_paused else set()

    def resume(self, *tps: TopicPartition) -> None:
        self.is_paused = self.is_paused and self.tp not in tps

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    def close(self, autocommit: bool = True) -> None:
        self.closed_with = autocommit


def read_lines(conn: socket.socket, n: int, timeout_s: float = 10) -> list[str]:
    """Exactly ``n`` lines from ``conn`` (bytes past the n-th line stay unread in the socket)."""
    lines: list[str] = []
    conn.settimeout(timeout_s)
    with conn.makefile("rb", buffering=0) as stream:
        for _ in range(n):
            line = b""
            while not line.endswith(b"\n"):
                byte = stream.read(1)
                assert byte, f"connection closed after {len(lines)} of {n} lines"
                line += byte
            lines.append(line.decode("ascii"))
    return lines


def test_bridge_holds_records_while_no_receiver_is_connected_and_survives_a_reconnect() -> None:
    tp = TopicPartition("events", 0)
    consumer = ScriptedConsumer(tp)
    bridge = ReceiverBridge(consumer, group_id="g", topics=["events"], host="127.0.0.1", buffer_records=50).start()  # type: ignore[arg-type]
    try:
        consumer.feed(500)
        # Nobody reads: the buffer fills to its bound (plus one poll) and the consumer is paused, not dropped.
        wait_until(lambda: bridge.stats().paused, 10, "consumer paused", bridge.stats)
        assert consumer.is_paused
        assert 50 <= bridge.stats().held == bridge.stats().polled <= 50 + 100
        assert bridge.stats().sent == 0

        first = socket.create_connection((bridge.host, bridge.port))
        got = read_lines(first, 30)
        wait_until(lambda: bridge.stats().sent >= 30, 10, "30 records handed over", bridge.stats)
        first.close()  # as a restarted Spark receiver does
        wait_until(lambda: not bridge.stats().connected, 10, "disconnect noticed", bridge.stats)
        sent_on_first = bridge.stats().sent  # lines handed to the kernel but never read are lost with it

        second = socket.create_connection((bridge.host, bridge.port))
        got += read_lines(second, 500 - sent_on_first)
        second.close()
    finally:
        bridge.close()
    offsets = [decode_line(line)[2] for line in got]
    assert offsets == list(range(30)) + list(range(sent_on_first, 500))
    assert [decode_line(line)[4] for line in got[:2]] == [b"r0", b"r1"]
    assert bridge.stats().connections == 2
    assert not bridge.is_alive()
    assert consumer.seeks == [] and consumer.closed_with is True  # everything handed over: nothing to rewind


def test_close_rewinds_the_group_to_the_first_record_not_handed_over() -> None:
    tp = TopicPartition("events", 0)
    consumer = ScriptedConsumer(tp)
    bridge = ReceiverBridge(consumer, group_id="g", topics=["events"], host="127.0.0.1", buffer_records=20).start()  # type: ignore[arg-type]
    consumer.feed(40)
    wait_until(lambda: bridge.stats().paused, 10, "consumer paused", bridge.stats)
    bridge.close()
    # Nothing was handed over: the committed position (autocommit on close) is the first record held.
    assert consumer.seeks == [(tp, 0)]
    assert consumer.closed_with is True
    assert not bridge.is_alive()
    assert port_is_closed(bridge.host, bridge.port)


# -- real broker, real Spark -----------------------------------------------------------------------------------


def produce(kafka: Any, topic: str, records: list[tuple[bytes | None, bytes | None, int]]) -> list[Any]:
    """Produce ``(key, value, partition)`` records; returns their RecordMetadata (offset, timestamp...)."""
    producer = kafka.producer(acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for k, v, p in records]
        producer.flush(30)
        return [future.get(timeout=30) for future in futures]
    finally:
        producer.close()


def run_until(ssc: Any, condition: Callable[[], bool], timeout_s: float, what: str, observe: Callable[[], Any]) -> None:
    """Wait for ``condition`` while ``ssc`` runs; a failed stream raises from ``awaitTerminationOrTimeout``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s:g} s; last observed: {observe()}")
        ssc.awaitTerminationOrTimeout(0.05)


@pytest.mark.kafka
@pytest.mark.spark
def test_records_arrive_exactly_with_binary_keys_and_values(spark, kafka, bootstrap_servers, topic_factory) -> None:
    from kit.spark import streaming_context

    topic = topic_factory(partitions=2)
    records = [(b"\xff\x00" + bytes([i % 256]), b"\x80\n\r" + i.to_bytes(2, "big"), i % 2) for i in range(300)]
    records += [(None, b"no key", 0), (b"empty value", b"", 1), (b"\xc3\x28", b"\xc3\x28", 1)]
    produce(kafka, topic, records)
    expected = Counter((k, v) for k, v, _ in records)

    ssc = streaming_context(0.5)
    got: list[tuple[Any, Any]] = []
    stream = create_receiver_stream(
        ssc, bootstrap_servers, f"pytest-{uuid.uuid4().hex[:8]}", {topic: 2},
        key_decoder=lambda b: b, value_decoder=lambda b: b, auto_offset_reset="smallest", kafka_settings=FAST_JOIN,
    )
    stream.foreachRDD(lambda rdd: got.extend(rdd.collect()))
    ssc.start()
    try:
        run_until(ssc, lambda: len(got) >= len(records), 45, f"{len(records)} records", lambda: (len(got), stream.bridge.stats()))
    finally:
        ssc.stop(stopSparkContext=False)
    assert Counter(got) == expected
    assert stream.bridge.stats().sent == stream.bridge.stats().polled == len(records)


@pytest.mark.kafka
@pytest.mark.spark
def test_creating_a_receiver_stream_installs_the_callbacks(spark, bootstrap_servers, topic_factory, monkeypatch) -> None:
    from pyspark.streaming.util import TransformFunction

    from kit.spark import streaming_context

    current = TransformFunction.call
    monkeypatch.setattr(TransformFunction, "call", lambda self, milliseconds, jrdds: current(self, milliseconds, jrdds))
    ssc = streaming_context(0.5)
    try:
        assert not getattr(TransformFunction.call, "reads_by_index", False)
        create_receiver_stream(ssc, bootstrap_servers, f"pytest-{uuid.uuid4().hex[:8]}", [topic_factory()],
                               kafka_settings=FAST_JOIN)
        assert TransformFunction.call.reads_by_index is True
    finally:
        ssc.stop(stopSparkContext=False)


@pytest.mark.kafka
@pytest.mark.spark
def test_group_offsets_reach_the_end_offsets_and_a_message_handler_sees_every_record(spark, kafka, bootstrap_servers, topic_factory) -> None:
    from kit.spark import streaming_context

    topic = topic_factory(partitions=2)
    records = [(f"k{i}".encode(), f"v{i}".encode(), i % 2) for i in range(200)]
    sent = produce(kafka, topic, records)
    ends = kafka.end_offsets(topic)
    assert sum(ends.values()) == 200
    group = f"pytest-{uuid.uuid4().hex[:8]}"

    ssc = streaming_context(0.5)
    got: list[tuple] = []
    stream = create_receiver_stream(
        ssc, bootstrap_servers, group, [topic], auto_offset_reset="smallest", kafka_settings=FAST_JOIN | {"auto_commit_interval_ms": 200},
        message_handler=lambda m: (m.topic, m.partition, m.offset, m.key, m.message, m.timestamp),
    )
    stream.foreachRDD(lambda rdd: got.extend(rdd.collect()))
    ssc.start()
    try:
        run_until(ssc, lambda: len(got) >= 200, 45, "200 records", lambda: len(got))
        # Auto-commit (every 200 ms here) moves the group to the end while the stream runs.
        run_until(ssc, lambda: kafka.group_offsets(group) == ends, 15, f"group offsets {ends}", lambda: kafka.group_offsets(group))
    finally:
        ssc.stop(stopSparkContext=False)
    # Every record once, with its partition, offset and Kafka timestamp (the message_handler's view).
    assert sorted(got) == sorted(
        (topic, md.partition, md.offset, k.decode(), v.decode(), md.timestamp) for (k, v, _), md in zip(records, sent)
    )
    assert all(row[5] > 0 for row in got)
    assert kafka.group_offsets(group) == ends  # the close's commit did not move it


@pytest.mark.kafka
@pytest.mark.spark
def test_stop_leaves_no_bridge_thread_and_closes_its_port(spark, kafka, bootstrap_servers, topic_factory) -> None:
    from kit.spark import streaming_context

    topic = topic_factory(partitions=1)
    produce(kafka, topic, [(None, b"x", 0)])
    ssc = streaming_context(0.5)
    got: list[Any] = []
    stream = create_receiver_stream(
        ssc, bootstrap_servers, f"pytest-{uuid.uuid4().hex[:8]}", [topic], auto_offset_reset="smallest", kafka_settings=FAST_JOIN
    )
    stream.foreachRDD(lambda rdd: got.extend(rdd.collect()))
    bridge = stream.bridge
    assert bridge.host == "127.0.0.1"  # local master
    assert len(receiver_threads()) == 2
    ssc.start()
    try:
        run_until(ssc, lambda: got == [(None, "x")], 45, "the record", lambda: (got, bridge.stats()))
    finally:
        ssc.stop(stopSparkContext=False)
    assert not bridge.is_alive()
    assert receiver_threads() == []
    assert port_is_closed(bridge.host, bridge.port)
    assert bridge.id not in receiver._BRIDGES


@pytest.mark.kafka
@pytest.mark.spark
def test_a_restarted_spark_receiver_is_served_again(spark, kafka, bootstrap_servers, topic_factory) -> None:
    from kit.spark import streaming_context

    topic = topic_factory(partitions=1)
    produce(kafka, topic, [(None, b"before", 0)])
    ssc = streaming_context(0.5)
    got: list[Any] = []
    stream = create_receiver_stream(
        ssc, bootstrap_servers, f"pytest-{uuid.uuid4().hex[:8]}", [topic], auto_offset_reset="smallest", kafka_settings=FAST_JOIN
    )
    stream.foreachRDD(lambda rdd: got.extend(v for _, v in rdd.collect()))
    bridge = stream.bridge
    ssc.start()
    try:
        run_until(ssc, lambda: got == ["before"], 45, "the first record", lambda: (got, bridge.stats()))
        # Cut the connection as a network failure would: Spark's receiver reads end-of-stream and restarts
        # itself (after spark.streaming.receiverRestartDelay, 2 s), connecting again.
        bridge._conn.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
        run_until(ssc, lambda: bridge.stats().connections == 2 and bridge.stats().connected, 20, "a second connection", bridge.stats)
        produce(kafka, topic, [(None, f"after-{i}".encode(), 0) for i in range(20)])
        run_until(ssc, lambda: len(got) >= 21, 20, "the records produced after the restart", lambda: (got, bridge.stats()))
    finally:
        ssc.stop(stopSparkContext=False)
    assert got == ["before"] + [f"after-{i}" for i in range(20)]


@pytest.mark.kafka
@pytest.mark.spark
def test_a_failing_consumer_fails_the_stream(spark, kafka, bootstrap_servers, topic_factory, monkeypatch) -> None:
    from py4j.protocol import Py4JJavaError

    from kit.spark import streaming_context

    class FailingConsumer(receiver.KafkaConsumer):  # type: ignore[misc,name-defined]
        polls = 0

        def poll(self, *args: Any, **kwargs: Any) -> Any:
            FailingConsumer.polls += 1
            if FailingConsumer.polls >= 3:
                raise KafkaError("injected fetch failure")
            return super().poll(*args, **kwargs)

    monkeypatch.setattr(receiver, "KafkaConsumer", FailingConsumer)
    topic = topic_factory(partitions=1)
    group = f"pytest-{uuid.uuid4().hex[:8]}"
    ssc = streaming_context(0.5)
    stream = create_receiver_stream(ssc, bootstrap_servers, group, [topic], kafka_settings=FAST_JOIN)
    stream.foreachRDD(lambda rdd: rdd.count())
    ssc.start()
    try:
        with pytest.raises(Py4JJavaError) as info:
            ssc.awaitTerminationOrTimeout(30)  # returns False (and the test fails) if nothing surfaces
    finally:
        ssc.stop(stopSparkContext=False)
    error = stream.bridge.error
    assert isinstance(error, ReceiverBridgeError)
    assert (error.group_id, error.topics, error.address) == (group, [topic], stream.bridge.address)
    assert isinstance(error.cause, KafkaError) and str(error.cause) == "KafkaError: injected fetch failure"
    assert "ReceiverBridgeError" in str(info.value) and "its Kafka consumer failed" in str(info.value)
    assert receiver_threads() == []


def test_unknown_topics_are_refused(bootstrap_servers) -> None:
    topic = f"pytest-missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(UnknownTopic) as info:
        create_receiver_stream(None, bootstrap_servers, "g", [topic])
    assert info.value.topic == topic
    assert receiver_threads() == []


@pytest.mark.kafka
def test_spark_receiver_max_rate_caps_the_stream(kafka, bootstrap_servers, topic_factory, tmp_path) -> None:
    max_rate, batch_s, backlog = 400, 1.0, 3000
    topic = topic_factory(partitions=2)
    produce(kafka, topic, [(None, b"%05d" % i, i % 2) for i in range(backlog)])
    group = f"pytest-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [
        sys.executable, "-m", "tests.drivers.legacy_receiver_rate",
        bootstrap_servers, topic, group, str(max_rate), str(batch_s), str(backlog), str(tmp_path / "checkpoint"),
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"driver failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    batches = [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("BATCH ")]
    summary = next(json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("DONE "))
    assert summary["total"] == backlog == sum(b["count"] for b in batches)

    counts = [b["count"] for b in batches]
    first = next(i for i, c in enumerate(counts) if c)
    last = max(i for i, c in enumerate(counts) if c)
    # The first and last non-empty batches are partial (the stream started or ran dry inside them).
    full = counts[first + 1:last]
    assert len(full) >= 4, f"too few full batches to measure a rate: {counts}"
    observed = sum(full) / (len(full) * batch_s)
    assert abs(observed - max_rate) <= 0.15 * max_rate, f"observed {observed:.1f}/s vs maxRate {max_rate}: {counts}"
    # maxRate caps the receiver's ingestion per second. Blocks go to the batch being generated when they are
    # allocated, so a batch timer that fires late (a loaded machine) moves up to an interval's blocks into
    # that batch: [341, 460] and a 779-record batch were seen under load. Two consecutive batches therefore
    # hold at most three intervals' worth; an uncapped receiver would deliver the 3,000-record backlog at once.
    pairs = [a + b for a, b in zip(counts, counts[1:], strict=False)]
    assert max(pairs) <= 3 * max_rate * batch_s, f"two batches exceeded maxRate x 3 intervals: {counts}"
    # The write-ahead log was on: the receiver's blocks went through it.
    assert list((tmp_path / "checkpoint" / "receivedData").rglob("log-*")), "no receiver write-ahead log files"
    print(f"receiver rate: observed {observed:.1f} records/s over {len(full)} full batches, maxRate {max_rate}; batches {counts}")
