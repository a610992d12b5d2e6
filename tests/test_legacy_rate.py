"""legacy.rate: Spark's direct-stream rate limit and PID estimator, by hand and against the JVM.

Hand-computed cases follow ``DirectKafkaInputDStream.maxMessagesPerPartition`` / ``clamp`` (Spark 3.x/4.x)
in double arithmetic; the PID port is checked against Spark's own ``PIDRateEstimator`` class, and the running
stream's limits against both.
"""

from __future__ import annotations

import doctest
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _streaming import await_condition as run_until
from _streaming import produce

from kit.errors import ConfigError
from kit.kafka import Kafka
from legacy.kafka import KafkaUtils, OffsetRange
from legacy.rate import (
    JvmPIDRateEstimator,
    PIDRateEstimator,
    RateSettings,
    clamp,
    max_messages_per_partition,
    until_offsets,
)

pytestmark = pytest.mark.filterwarnings(
    r"ignore:DStream is deprecated as of Spark 3\.4\.0\. Migrate to Structured Streaming\.:FutureWarning"
)

BACKPRESSURE = RateSettings(backpressure_enabled=True)


# -- maxMessagesPerPartition / clamp by hand -------------------------------------------------------------------


def test_no_limits_means_everything_up_to_the_end() -> None:
    current, latest = {"a": 10, "b": 0}, {"a": 5000, "b": 7}
    assert max_messages_per_partition(current, latest, batch_ms=1000, settings=RateSettings()) is None
    assert until_offsets(current, latest, batch_ms=1000, settings=RateSettings()) == latest


def test_max_rate_per_partition_times_batch_seconds() -> None:
    settings = RateSettings(max_rate_per_partition=100)
    current, latest = {"a": 0, "b": 500}, {"a": 1000, "b": 520}
    assert max_messages_per_partition(current, latest, batch_ms=2000, settings=settings) == {"a": 200, "b": 200}
    assert until_offsets(current, latest, batch_ms=2000, settings=settings) == {"a": 200, "b": 520}


def test_backpressure_rate_is_shared_by_lag_and_capped_by_max_rate() -> None:
    # lags 300 and 100 of 400: shares 750/s and 250/s of 1000/s; a is capped at 500/s; x 0.5 s.
    settings = RateSettings(max_rate_per_partition=500, backpressure_enabled=True)
    current, latest = {"a": 0, "b": 0}, {"a": 300, "b": 100}
    assert max_messages_per_partition(current, latest, batch_ms=500, settings=settings, latest_rate=1000) == {
        "a": 250, "b": 125,
    }
    assert until_offsets(current, latest, batch_ms=500, settings=settings, latest_rate=1000) == {"a": 250, "b": 100}


def test_messages_are_truncated_in_double_arithmetic() -> None:
    # rate 7/s, lags 1 and 2, 1.5 s batches: 1/3*7*1.5 = 3.4999999999999996 -> 3, and 2/3*7*1.5 is 7 on paper but
    # 6.999999999999999 in doubles -> 6, as Spark's (secsPerBatch * limit).toLong gives.
    current, latest = {"a": 0, "b": 0}, {"a": 1, "b": 2}
    assert max_messages_per_partition(current, latest, batch_ms=1500, settings=BACKPRESSURE, latest_rate=7) == {
        "a": 3, "b": 6,
    }


def test_min_rate_per_partition_guarantees_progress() -> None:
    # 1 record/s over two partitions in 100 ms batches rounds to 0 messages: minRatePerPartition (default 1) lifts
    # it to 1; with 0 the stream would not move.
    settings = RateSettings(backpressure_enabled=True, initial_rate=1)
    current, latest = {"a": 0, "b": 0}, {"a": 10, "b": 30}
    assert until_offsets(current, latest, batch_ms=100, settings=settings) == {"a": 1, "b": 1}
    stuck = RateSettings(backpressure_enabled=True, initial_rate=1, min_rate_per_partition=0)
    assert until_offsets(current, latest, batch_ms=100, settings=stuck) == {"a": 0, "b": 0}


def test_partition_without_lag_stays_put() -> None:
    current, latest = {"a": 40, "b": 0}, {"a": 40, "b": 100}
    assert max_messages_per_partition(current, latest, batch_ms=1000, settings=BACKPRESSURE, latest_rate=100) == {
        "a": 1, "b": 100,
    }
    assert until_offsets(current, latest, batch_ms=1000, settings=BACKPRESSURE, latest_rate=100) == {"a": 40, "b": 100}


def test_no_lag_at_all_with_backpressure_is_no_limit() -> None:
    # 0/0 is NaN in Java, the rates sum to NaN, "NaN > 0" is false: no limit (and nothing to read anyway).
    current = {"a": 7, "b": 9}
    assert max_messages_per_partition(current, dict(current), batch_ms=1000, settings=BACKPRESSURE, latest_rate=50) is None


@pytest.mark.parametrize(
    ("latest_rate", "initial_rate", "max_rate", "expected"),
    [
        (-1, 20, 0, {"a": 15, "b": 5}),    # no estimate yet: initialRate 20/s, shared 3:1
        (0, 20, 0, {"a": 15, "b": 5}),     # "if (lr > 0) lr else initialRate"
        (80, 20, 0, {"a": 60, "b": 20}),   # the estimator's rate
        (-1, 0, 10, {"a": 10, "b": 10}),   # no estimate, no initial rate: maxRatePerPartition for each
        (-1, 0, 0, None),                  # nothing at all: no limit
    ],
)
def test_which_rate_applies(latest_rate: int, initial_rate: int, max_rate: int, expected) -> None:
    settings = RateSettings(backpressure_enabled=True, initial_rate=initial_rate, max_rate_per_partition=max_rate)
    got = max_messages_per_partition(
        {"a": 0, "b": 0}, {"a": 300, "b": 100}, batch_ms=1000, settings=settings, latest_rate=latest_rate
    )
    assert got == expected


def test_rate_is_ignored_without_backpressure() -> None:
    settings = RateSettings(max_rate_per_partition=10)
    assert max_messages_per_partition({"a": 0}, {"a": 100}, batch_ms=1000, settings=settings, latest_rate=99) == {"a": 10}


def test_clamp_never_passes_the_end_and_negative_lag_counts_as_none() -> None:
    assert clamp({"a": 5, "b": 9}, {"a": 8, "b": 9}, {"a": 10, "b": 10}) == {"a": 8, "b": 9}
    assert clamp({"a": 5}, {"a": 8}, None) == {"a": 8}
    assert max_messages_per_partition({"a": 50, "b": 0}, {"a": 40, "b": 10}, batch_ms=1000, settings=BACKPRESSURE, latest_rate=10) == {
        "a": 1, "b": 10,
    }


def test_docs_rate_examples_run() -> None:
    """The worked examples in docs/legacy.md (its ``>>>`` blocks) are tests."""
    docs = Path(__file__).resolve().parents[1] / "docs" / "legacy.md"
    result = doctest.testfile(str(docs), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert (result.failed, result.attempted) == (0, 9)


# -- settings ---------------------------------------------------------------------------------------------------


def test_settings_from_spark_conf_use_sparks_names_and_defaults() -> None:
    assert RateSettings.from_spark_conf({}) == RateSettings()
    assert RateSettings() == RateSettings(0, 1, False, 0, 1.0, 0.2, 0.0, 100.0)
    conf = {
        "spark.streaming.kafka.maxRatePerPartition": "250",
        "spark.streaming.kafka.minRatePerPartition": "2",
        "spark.streaming.backpressure.enabled": "TRUE",
        "spark.streaming.backpressure.initialRate": "1000",
        "spark.streaming.backpressure.pid.proportional": "0.5",
        "spark.streaming.backpressure.pid.integral": "0.1",
        "spark.streaming.backpressure.pid.derived": "0.05",
        "spark.streaming.backpressure.pid.minRate": "10",
        "spark.streaming.backpressure.rateEstimator": "pid",
    }
    assert RateSettings.from_spark_conf(conf) == RateSettings(250, 2, True, 1000, 0.5, 0.1, 0.05, 10.0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.streaming.kafka.maxRatePerPartition", "1.5"),
        ("spark.streaming.kafka.maxRatePerPartition", "-1"),
        ("spark.streaming.kafka.minRatePerPartition", "many"),
        ("spark.streaming.backpressure.enabled", "yes"),
        ("spark.streaming.backpressure.initialRate", "-5"),
        ("spark.streaming.backpressure.pid.integral", "-0.2"),
        ("spark.streaming.backpressure.pid.minRate", "0"),
        ("spark.streaming.backpressure.pid.proportional", "fast"),
        ("spark.streaming.backpressure.rateEstimator", "linear"),
    ],
)
def test_bad_settings_name_the_setting(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        RateSettings.from_spark_conf({key: value})
    assert err.value.field == key


# -- the PID estimator -----------------------------------------------------------------------------------------


def test_pid_by_hand() -> None:
    pid = PIDRateEstimator(1000, proportional=1.0, integral=0.2, derivative=0.1, min_rate=100.0)
    # First batch: 5000 records in 1 s only primes it (latestRate = 5000/s, latestError = 0).
    assert pid.compute(1000, 5000, 1000, 0) is None
    # 5000 records in 2 s = 2500/s, 500 ms scheduling delay: error = 5000 - 2500 = 2500,
    # historical = 500 * 2500 / 1000 = 1250, dError = (2500 - 0) / 1 s = 2500,
    # rate = 5000 - 1.0 * 2500 - 0.2 * 1250 - 0.1 * 2500 = 2000.
    assert pid.compute(2000, 5000, 2000, 500) == 2000.0
    # 4000 in 1 s: error = 2000 - 4000 = -2000, dError = (-2000 - 2500) / 1 = -4500: 2000 + 2000 - 0 + 450.
    assert pid.compute(3000, 4000, 1000, 0) == 4450.0
    # Far too slow: the rate would go negative, minRate holds it at 100.
    assert pid.compute(4000, 10, 10_000, 60_000) == 100.0


def test_pid_skips_batches_it_cannot_learn_from() -> None:
    pid = PIDRateEstimator(1000)
    assert pid.compute(1000, 1000, 500, 0) is None  # primes
    assert pid.compute(2000, 0, 500, 0) is None  # no records
    assert pid.compute(2000, 1000, 0, 0) is None  # no processing time
    assert pid.compute(1000, 1000, 500, 0) is None  # time not after the latest
    assert pid.compute(2000, 1000, 500, 0) == 2000.0  # unchanged state: 2000 - (2000 - 2000) = 2000


def test_pid_refuses_what_spark_requires() -> None:
    for args, name in (((0,), "batch_interval_ms"), ((1000, -1.0), "proportional"), ((1000, 1.0, 0.2, 0.0, 0.0), "min_rate")):
        with pytest.raises(ConfigError) as err:
            PIDRateEstimator(*args)
        assert err.value.field == name


def test_python_pid_equals_sparks_jvm_class(spark) -> None:
    rng = random.Random(20240611)
    for settings in ((1000, 1.0, 0.2, 0.0, 100.0), (500, 0.7, 0.05, 0.3, 1.0), (2000, 2.0, 0.0, 0.0, 0.5)):
        python = PIDRateEstimator(*settings)
        jvm = JvmPIDRateEstimator(spark.sparkContext, *settings)
        now = 0
        answers = []
        for _ in range(300):
            # Mostly regular batches; sometimes late, early or repeated times, empty batches, zero delays.
            now += settings[0] if rng.random() < 0.7 else rng.randint(-500, 5000)
            elements = 0 if rng.random() < 0.1 else rng.randint(1, 2_000_000)
            processing = 0 if rng.random() < 0.1 else rng.randint(1, 20_000)
            step = (now, elements, processing, rng.randint(0, 30_000))
            expected = jvm.compute(*step)
            assert python.compute(*step) == expected, step
            answers.append(expected)
        assert sum(a is not None for a in answers) > 150  # the sequences exercise the maths, not only the skips


# -- the running stream ----------------------------------------------------------------------------------------


@contextmanager
def spark_settings(sc, settings: dict[str, str]) -> Iterator[None]:
    """Set Spark settings on the running context for the block (direct streams read them at creation)."""
    jconf = sc._jsc.sc().conf()
    before = {key: jconf.getOption(key) for key in settings}
    for key, value in settings.items():
        jconf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old.isDefined():
                jconf.set(key, old.get())
            else:
                jconf.remove(key)


@pytest.fixture
def stream_env(spark, kafka: Kafka, topic_factory, bootstrap_servers: str):
    from kit.spark import streaming_context

    contexts = []

    def make(batch_s: float):
        contexts.append(streaming_context(batch_s))
        return contexts[-1]

    yield spark.sparkContext, make
    for context in contexts:
        context.stop(stopSparkContext=False, stopGraceFully=False)


def test_max_rate_per_partition_splits_the_backlog_into_exact_batches(
    stream_env, kafka: Kafka, topic_factory, bootstrap_servers: str
) -> None:
    sc, make_context = stream_env
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 23, 1: 7})
    with spark_settings(sc, {"spark.streaming.kafka.maxRatePerPartition": "10"}):
        ssc = make_context(0.5)
        stream = KafkaUtils.createDirectStream(
            ssc, [topic], {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest"}
        )
    batches: dict[int, list[OffsetRange]] = {}
    stream.foreachRDD(lambda t, rdd: batches.__setitem__(round(t.timestamp() * 1000), rdd.offsetRanges()))
    ssc.start()
    run_until(ssc, lambda: sum(r.count() for b in batches.values() for r in b) >= 30, lambda: batches)
    ordered = [batches[t] for t in sorted(batches)]
    # 10 records/s x 0.5 s = 5 records per partition and batch.
    assert ordered[:5] == [
        [OffsetRange(topic, 0, 5 * i, min(5 * i + 5, 23)), OffsetRange(topic, 1, min(5 * i, 7), min(5 * i + 5, 7))]
        for i in range(5)
    ]


def test_backpressure_follows_sparks_estimator(stream_env, kafka: Kafka, topic_factory, bootstrap_servers: str) -> None:
    sc, make_context = stream_env
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: 300, 1: 100})
    settings = {"spark.streaming.backpressure.enabled": "true", "spark.streaming.backpressure.initialRate": "40"}
    with spark_settings(sc, settings):
        ssc = make_context(0.5)
        stream = KafkaUtils.createDirectStream(
            ssc, [topic], {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest"}
        )
    batches: dict[int, list[OffsetRange]] = {}
    stream.foreachRDD(lambda t, rdd: batches.__setitem__(round(t.timestamp() * 1000), rdd.offsetRanges()))
    ssc.start()
    run_until(
        ssc,
        lambda: sum(r.count() for b in batches.values() for r in b) >= 400 and len(stream.state_snapshot().rate_updates) >= 3,
        lambda: (batches, stream.state_snapshot()),
    )
    snapshot = stream.state_snapshot()
    ordered = [batches[t] for t in sorted(batches)]
    # No estimate during the first two batches (the first completed batch only primes the PID):
    # initialRate 40/s shared 300:100 (then 285:95), x 0.5 s.
    assert ordered[0] == [OffsetRange(topic, 0, 0, 15), OffsetRange(topic, 1, 0, 5)]
    assert ordered[1] == [OffsetRange(topic, 0, 15, 30), OffsetRange(topic, 1, 5, 10)]

    # The JVM estimator's answers are those of the port fed the same completed batches, and the record
    # counts it was fed are the batches' sizes (reported to Spark's InputInfoTracker).
    port = PIDRateEstimator.from_settings(500, RateSettings(backpressure_enabled=True, initial_rate=40))
    for update in snapshot.rate_updates:
        assert update.records == sum(r.count() for r in batches[update.batch_ms])
        assert port.compute(update.processing_end_ms, update.records, update.processing_delay_ms,
                            update.scheduling_delay_ms) == update.rate
    learning = [u for u in snapshot.rate_updates if u.records > 0]
    assert learning[0].rate is None and any(u.rate is not None for u in learning[1:])

    # Every batch's limit is the one Spark computes from a rate in force at some point (-1 before any).
    in_force = {-1} | {int(u.rate) for u in snapshot.rate_updates if u.rate is not None}
    ends = {"0": 300, "1": 100}
    current = {"0": 0, "1": 0}
    stream_settings = RateSettings(backpressure_enabled=True, initial_rate=40)
    for ranges in ordered:
        until = {str(r.partition): r.untilOffset for r in ranges}
        assert {str(r.partition): r.fromOffset for r in ranges} == current
        candidates = [until_offsets(current, ends, batch_ms=500, settings=stream_settings, latest_rate=rate) for rate in in_force]
        assert until in candidates, (current, until, in_force)
        current = until
    assert current == ends
    answered = [u.rate for u in snapshot.rate_updates if u.rate is not None]
    assert snapshot.latest_rate == int(answered[-1])
