"""Replay on a real broker: every record lands once, where and when it should.

Marked ``librdkafka_only``: on ``DMK_KAFKA_CLIENT=confluent`` the replay and the checks use librdkafka alone, so the
module also runs on librdkafka's mock cluster (``DMK_TEST_BROKER=mock``; the kafka-python runs are skipped there).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from kit.dataset import DatasetSpec, generate
from kit.errors import ConfigError, ReplayError, TopicConfigurationMismatch
from kit.kafka import Kafka, key_partition
from kit.replay import PRODUCED_AT_HEADER, ReplaySettings, TokenBucket, replay

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("kafka_client"), pytest.mark.librdkafka_only]


@pytest.fixture(scope="module")
def messy() -> pd.DataFrame:
    return generate(DatasetSpec.from_profile("messy", records=8_000, seed=3, events_per_second=200))


def _read_all(kafka: Kafka, topic: str) -> dict[int, list]:
    ends = kafka.end_offsets(topic)
    return {tp.partition: list(kafka.read_range(topic, tp.partition, 0, end)) for tp, end in ends.items()}


def test_replay_lands_every_record_once_in_key_partition_order(
    bootstrap_servers: str, kafka: Kafka, topic_factory, messy: pd.DataFrame
) -> None:
    topic = topic_factory(create=False)
    result = replay(messy, bootstrap_servers, ReplaySettings(topic=topic, partitions=4))

    assert result.records == len(messy) == 8_000
    assert kafka.partitions(topic) == [0, 1, 2, 3]
    read = _read_all(kafka, topic)
    for partition, records in read.items():
        expected = messy[[key_partition(k, 4) == partition for k in messy["key"]]]
        assert [r.value for r in records] == expected["value"].tolist()  # same bytes, same order
        assert [r.key for r in records] == expected["key"].tolist()
        assert result.end_offsets[partition] == len(expected)
    # The dataset's own partition field agrees with the key hash for the same partition count.
    assert (result.log["partition"].to_numpy() == messy["partition"].to_numpy()).all()
    # The log maps every seq to the offset it got.
    log = result.log.set_index(["partition", "offset"])
    for partition, records in read.items():
        seqs = log.loc[[(partition, r.offset) for r in records], "seq"].to_numpy()
        assert (messy["value"].to_numpy()[seqs] == np.array([r.value for r in records], dtype=object)).all()


def test_the_replay_s_producer_lingers_as_set(
    bootstrap_servers: str, kafka: Kafka, topic_factory, messy: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[object] = []
    sender = Kafka.sender

    def spied(self: Kafka, **config: object) -> object:
        asked.append(config.get("linger_ms"))
        return sender(self, **config)

    monkeypatch.setattr(Kafka, "sender", spied)
    topic = topic_factory(create=False)
    replay(messy.head(50), bootstrap_servers, ReplaySettings(topic=topic, partitions=1, linger_ms=40))
    replay(messy.head(50), bootstrap_servers, ReplaySettings(topic=topic, partitions=1))
    assert asked == [40, 25]  # 25 ms by default: Tansu's cost per request grows with a partition's batches
    assert [r.value for r in kafka.read_range(topic, 0, 0, 100)] == messy["value"].head(50).tolist() * 2


def test_produce_time_header_and_timestamps(bootstrap_servers: str, kafka: Kafka, topic_factory, messy) -> None:
    sample = messy.head(500)
    produce_topic, event_topic = topic_factory(create=False), topic_factory(create=False)
    produced = replay(sample, bootstrap_servers, ReplaySettings(topic=produce_topic, partitions=2))
    replay(sample, bootstrap_servers, ReplaySettings(topic=event_topic, partitions=2, timestamps="event"))

    by_offset = produced.log.set_index(["partition", "offset"])["produced_ms"]
    for partition, records in _read_all(kafka, produce_topic).items():
        for record in records:
            header = dict(record.headers)[PRODUCED_AT_HEADER]
            assert int(header) == record.timestamp == by_offset[(partition, record.offset)]
    event_ts = dict(zip(sample["value"], sample["timestamp_ms"]))
    for records in _read_all(kafka, event_topic).values():
        for record in records:
            assert record.timestamp == event_ts[record.value]
            assert int(dict(record.headers)[PRODUCED_AT_HEADER]) >= record.timestamp  # produce time, not event


def test_partition_by_field(bootstrap_servers: str, kafka: Kafka, topic_factory, messy) -> None:
    sample = messy.head(300).assign(partition=np.arange(300, dtype=np.int32) % 3)
    topic = topic_factory(create=False)
    result = replay(sample, bootstrap_servers, ReplaySettings(topic=topic, partitions=3, partition_by="field"))
    assert result.end_offsets == {0: 100, 1: 100, 2: 100}
    with pytest.raises(ConfigError, match="partition field holds 0..2"):
        replay(sample, bootstrap_servers, ReplaySettings(topic=topic_factory(create=False), partitions=2, partition_by="field"))


def test_existing_topic_keeps_its_partitions(bootstrap_servers: str, kafka: Kafka, topic_factory, messy) -> None:
    topic = topic_factory(partitions=2)
    result = replay(messy.head(100), bootstrap_servers, ReplaySettings(topic=topic))
    assert sorted(result.end_offsets) == [0, 1] and sum(result.end_offsets.values()) == 100
    with pytest.raises(TopicConfigurationMismatch):
        replay(messy.head(10), bootstrap_servers, ReplaySettings(topic=topic, partitions=4))


def test_rate_is_paced(bootstrap_servers: str, topic_factory, messy) -> None:
    rate = 2_000.0
    result = replay(messy.head(1_000), bootstrap_servers, ReplaySettings(topic=topic_factory(create=False), rate_rps=rate))
    # Pacing is a correctness property (not a speed target): the bucket starts with rate/10 tokens, so
    # the sends of 1,000 records span at least (1000 - 200) / rate seconds, by the recorded send times.
    span_ms = int(result.log["produced_ms"].max() - result.log["produced_ms"].min())
    assert span_ms >= (1_000 - 200) / rate * 1000 - 1


def test_unacknowledged_records_fail_the_replay(bootstrap_servers: str, topic_factory) -> None:
    too_big = pd.DataFrame(
        {"seq": [0, 1], "key": [b"a", b"b"], "value": [b"x", b"y" * (2 * 1024 * 1024)], "timestamp_ms": [1, 2]}
    )
    with pytest.raises(ReplayError) as info:
        replay(too_big, bootstrap_servers, ReplaySettings(topic=topic_factory(create=False), partitions=1))
    assert (info.value.sent, info.value.acknowledged, info.value.failed) == (2, 1, 1)
    # kafka-python refuses the record before sending it; librdkafka sends it and the broker refuses it.
    error = info.value.first_error
    assert "MessageSizeTooLarge" in type(error).__name__ or "larger" in str(error) or "MSG_SIZE_TOO_LARGE" in str(error)


def _fake_clock() -> tuple[list[float], list[float], Callable[[float], None]]:
    """A clock (``now[0]``), the waits asked of it, and the sleep that advances it."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    return now, slept, sleep


def test_token_bucket_with_a_fake_clock() -> None:
    now, slept, sleep = _fake_clock()
    bucket = TokenBucket(100.0, burst=5, clock=lambda: now[0], sleep=sleep)
    for _ in range(25):
        bucket.acquire()
    # 5 tokens of burst, then 20 more at 100/s: exactly 0.2 s of waiting in total.
    assert sum(slept) == pytest.approx(0.2)
    assert now[0] == pytest.approx(0.2)


def test_token_bucket_waits_at_least_its_minimum_and_keeps_the_rate() -> None:
    now, slept, sleep = _fake_clock()
    bucket = TokenBucket(100.0, burst=5, min_wait_s=0.05, clock=lambda: now[0], sleep=sleep)
    for _ in range(25):
        bucket.acquire()
    # The same 0.2 s for 20 tokens past the burst, in four waits of 5 tokens instead of twenty of one.
    assert slept == pytest.approx([0.05] * 4)
    assert now[0] == pytest.approx(0.2)


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="rate_rps"):
        ReplaySettings(topic="t", rate_rps=0)
    with pytest.raises(ConfigError, match="timestamps"):
        ReplaySettings(topic="t", timestamps="wall")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="partitions"):
        ReplaySettings(topic="t", partitions=0)
    with pytest.raises(ConfigError, match="linger_ms must be >= 0"):
        ReplaySettings(topic="t", linger_ms=-1)
