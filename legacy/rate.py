"""Rate control for the direct Kafka stream, exactly as Spark 3.x/4.x computes it.

A port of ``DirectKafkaInputDStream.maxMessagesPerPartition`` and ``clamp`` (spark-streaming-kafka-0-10) and
of ``PIDRateEstimator`` (spark-streaming), as pure functions and a small stateful class, so the maths can be
tested by hand without a JVM. The running stream feeds Spark's own JVM ``PIDRateEstimator`` (see
:class:`JvmPIDRateEstimator`); ``tests/test_legacy_rate.py`` proves the Python port returns the same doubles.

How a batch's until offsets are chosen (``until_offsets``):

1. rate estimate: with backpressure on, the PID controller's latest rate truncated to a whole number
   (``rateLimit.set(s.toLong)``), or ``initialRate`` while there is none; without backpressure, none;
2. per-partition rate: with an estimate > 0, each partition's share of it by lag
   (``lag / totalLag * rate``), capped at ``maxRatePerPartition`` when that is > 0; otherwise
   ``maxRatePerPartition`` itself;
3. if those rates sum to > 0: messages = ``max(long(batchSeconds * rate), minRatePerPartition)``, else no limit;
4. until = ``min(current + messages, latest)``.

Example:
    >>> settings = RateSettings(max_rate_per_partition=100)
    >>> until_offsets({"p0": 0, "p1": 500}, {"p0": 1000, "p1": 520}, batch_ms=2000, settings=settings)
    {'p0': 200, 'p1': 520}
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kit.errors import ConfigError

__all__ = [
    "JvmPIDRateEstimator",
    "PIDRateEstimator",
    "RateSettings",
    "clamp",
    "max_messages_per_partition",
    "until_offsets",
]

K = TypeVar("K", bound=Hashable)

_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
_LONG = re.compile(r"[+-]?\d+")

#: Spark setting names (the same keys Spark 3.x/4.x reads).
MAX_RATE_PER_PARTITION = "spark.streaming.kafka.maxRatePerPartition"
MIN_RATE_PER_PARTITION = "spark.streaming.kafka.minRatePerPartition"
BACKPRESSURE_ENABLED = "spark.streaming.backpressure.enabled"
BACKPRESSURE_INITIAL_RATE = "spark.streaming.backpressure.initialRate"
RATE_ESTIMATOR = "spark.streaming.backpressure.rateEstimator"
PID_PROPORTIONAL = "spark.streaming.backpressure.pid.proportional"
PID_INTEGRAL = "spark.streaming.backpressure.pid.integral"
PID_DERIVED = "spark.streaming.backpressure.pid.derived"
PID_MIN_RATE = "spark.streaming.backpressure.pid.minRate"


def _java_double_to_long(value: float) -> int:
    """Scala's ``Double.toLong``: truncate toward zero, NaN -> 0, saturate at the Long bounds."""
    if math.isnan(value):
        return 0
    if value >= _LONG_MAX:
        return _LONG_MAX
    if value <= _LONG_MIN:
        return _LONG_MIN
    return int(value)


def _java_min(a: float, b: float) -> float:
    """``java.lang.Math.min`` on doubles: NaN if either is NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return min(a, b)


def _java_max(a: float, b: float) -> float:
    """``java.lang.Math.max`` on doubles: NaN if either is NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


@dataclass(frozen=True)
class RateSettings:
    """Rate-control settings of one direct stream (Spark's names in brackets, defaults as in Spark).

    Attributes:
        max_rate_per_partition: records/s cap per partition; 0 means no cap
            (``spark.streaming.kafka.maxRatePerPartition``, default 0).
        min_rate_per_partition: floor on the *messages* per partition and batch once any limit applies
            (``spark.streaming.kafka.minRatePerPartition``, default 1).
        backpressure_enabled: feed a PID estimator from completed batches
            (``spark.streaming.backpressure.enabled``, default False).
        initial_rate: records/s for the whole stream until the estimator has a rate
            (``spark.streaming.backpressure.initialRate``, default 0 = none).
        pid_proportional, pid_integral, pid_derived, pid_min_rate: the PID gains and the estimator's lowest
            rate (``spark.streaming.backpressure.pid.proportional`` 1.0, ``.integral`` 0.2, ``.derived`` 0.0,
            ``.minRate`` 100).

    Negative rates are refused (Spark would treat a negative cap as "no cap"; here that is 0).
    """

    max_rate_per_partition: int = 0
    min_rate_per_partition: int = 1
    backpressure_enabled: bool = False
    initial_rate: int = 0
    pid_proportional: float = 1.0
    pid_integral: float = 0.2
    pid_derived: float = 0.0
    pid_min_rate: float = 100.0

    def __post_init__(self) -> None:
        for name, key in (
            ("max_rate_per_partition", MAX_RATE_PER_PARTITION),
            ("min_rate_per_partition", MIN_RATE_PER_PARTITION),
            ("initial_rate", BACKPRESSURE_INITIAL_RATE),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"{name} ({key}) must be a whole number of records per second >= 0, got {value!r}"
                raise ConfigError(
                    msg,
                    field=key,
                    expected="integer >= 0",
                    actual=value,
                )
        if not isinstance(self.backpressure_enabled, bool):
            msg = (
                f"backpressure_enabled ({BACKPRESSURE_ENABLED}) must be True or False, "
                f"got {self.backpressure_enabled!r}"
            )
            raise ConfigError(
                msg,
                field=BACKPRESSURE_ENABLED,
                expected="bool",
                actual=self.backpressure_enabled,
            )
        for name, key in (
            ("pid_proportional", PID_PROPORTIONAL),
            ("pid_integral", PID_INTEGRAL),
            ("pid_derived", PID_DERIVED),
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or math.isinf(value):
                msg = f"{name} ({key}) must be a finite number >= 0, got {value!r}"
                raise ConfigError(
                    msg,
                    field=key,
                    expected="finite number >= 0",
                    actual=value,
                )
        value = self.pid_min_rate
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0 or math.isinf(value):
            msg = f"pid_min_rate ({PID_MIN_RATE}) must be a finite number > 0, got {value!r}"
            raise ConfigError(
                msg,
                field=PID_MIN_RATE,
                expected="finite number > 0",
                actual=value,
            )

    @classmethod
    def from_spark_conf(cls, conf: Any) -> RateSettings:
        """Read the settings from a ``SparkConf`` (or any mapping of Spark setting names to strings).

        Values are parsed as Spark parses them (``getLong``, ``getDouble``, ``getBoolean``).

        Raises:
            ConfigError: a value that does not parse or is out of range, or a rate estimator other than
                ``pid`` (the only one Spark has); ``field`` names the setting.
        """
        get = conf.get
        estimator = get(RATE_ESTIMATOR, "pid")
        if estimator != "pid":
            msg = f"Unknown rate estimator: {estimator} ({RATE_ESTIMATOR}); Spark has only 'pid'"
            raise ConfigError(
                msg,
                field=RATE_ESTIMATOR,
                expected="pid",
                actual=estimator,
            )
        return cls(
            max_rate_per_partition=_parse_long(get(MAX_RATE_PER_PARTITION, None), MAX_RATE_PER_PARTITION, 0),
            min_rate_per_partition=_parse_long(get(MIN_RATE_PER_PARTITION, None), MIN_RATE_PER_PARTITION, 1),
            backpressure_enabled=_parse_bool(get(BACKPRESSURE_ENABLED, None), BACKPRESSURE_ENABLED, False),
            initial_rate=_parse_long(get(BACKPRESSURE_INITIAL_RATE, None), BACKPRESSURE_INITIAL_RATE, 0),
            pid_proportional=_parse_double(get(PID_PROPORTIONAL, None), PID_PROPORTIONAL, 1.0),
            pid_integral=_parse_double(get(PID_INTEGRAL, None), PID_INTEGRAL, 0.2),
            pid_derived=_parse_double(get(PID_DERIVED, None), PID_DERIVED, 0.0),
            pid_min_rate=_parse_double(get(PID_MIN_RATE, None), PID_MIN_RATE, 100.0),
        )


def _parse_long(raw: Any, key: str, default: int) -> int:
    if raw is None:
        return default
    text = str(raw)
    if not _LONG.fullmatch(text) or not _LONG_MIN <= int(text) <= _LONG_MAX:
        msg = f"{key} must be a whole number, got {text!r}"
        raise ConfigError(msg, field=key, expected="long", actual=text)
    return int(text)


def _parse_double(raw: Any, key: str, default: float) -> float:
    if raw is None:
        return default
    try:
        return float(str(raw).strip())
    except ValueError:
        msg = f"{key} must be a number, got {raw!r}"
        raise ConfigError(msg, field=key, expected="double", actual=raw) from None


def _parse_bool(raw: Any, key: str, default: bool) -> bool:
    if raw is None:
        return default
    text = str(raw).lower()
    if text not in ("true", "false"):
        msg = f"{key} must be true or false, got {raw!r}"
        raise ConfigError(msg, field=key, expected="true|false", actual=raw)
    return text == "true"


def max_messages_per_partition(
    current: Mapping[K, int],
    latest: Mapping[K, int],
    *,
    batch_ms: int,
    settings: RateSettings,
    latest_rate: int = -1,
) -> dict[K, int] | None:
    """How many messages each partition may contribute to the next batch; None means "no limit".

    ``DirectKafkaInputDStream.maxMessagesPerPartition``, step for step and in Java's double arithmetic.

    Args:
        current: each partition's next offset to read (the previous batch's until offsets).
        latest: each partition's end offset now; its keys are the partitions of the batch.
        batch_ms: the batch interval in milliseconds.
        settings: the stream's rate settings.
        latest_rate: the rate controller's latest rate (``getLatestRate()``), -1 while it has none; ignored
            without backpressure.
    """
    estimated: int | None = None
    if settings.backpressure_enabled:
        estimated = latest_rate if latest_rate > 0 else settings.initial_rate
    max_rate = settings.max_rate_per_partition
    if estimated is not None and estimated > 0:
        lag = {tp: max(offset - current[tp], 0) for tp, offset in latest.items()}
        total_lag = float(sum(lag.values()))
        effective: dict[K, float] = {}
        for tp, partition_lag in lag.items():
            # lag / totalLag.toDouble * rate: 0/0 is NaN in Java, and NaN then fails the "> 0" test below.
            share = float(partition_lag) / total_lag if total_lag else math.nan
            backpressure_rate = share * float(estimated)
            effective[tp] = _java_min(backpressure_rate, float(max_rate)) if max_rate > 0 else backpressure_rate
    else:
        effective = {tp: float(max_rate) for tp in latest}

    # ``values.sum > 0``: NaN (no lag at all) fails it, as in Java.
    rate_sum = math.nan if any(math.isnan(v) for v in effective.values()) else sum(effective.values())
    if not rate_sum > 0:
        return None
    secs_per_batch = float(batch_ms) / 1000
    return {
        tp: max(_java_double_to_long(secs_per_batch * limit), settings.min_rate_per_partition)
        for tp, limit in effective.items()
    }


def clamp(current: Mapping[K, int], latest: Mapping[K, int], max_messages: Mapping[K, int] | None) -> dict[K, int]:
    """Until offsets: ``min(current + messages, latest)`` per partition, or ``latest`` without a limit."""
    if max_messages is None:
        return dict(latest)
    return {tp: min(current[tp] + messages, latest[tp]) for tp, messages in max_messages.items()}


def until_offsets(
    current: Mapping[K, int],
    latest: Mapping[K, int],
    *,
    batch_ms: int,
    settings: RateSettings,
    latest_rate: int = -1,
) -> dict[K, int]:
    """The next batch's until offsets: :func:`clamp` of :func:`max_messages_per_partition` (same arguments)."""
    limit = max_messages_per_partition(
        current, latest, batch_ms=batch_ms, settings=settings, latest_rate=latest_rate
    )
    return clamp(current, latest, limit)


class PIDRateEstimator:
    """Pure-Python port of Spark's ``org.apache.spark.streaming.scheduler.rate.PIDRateEstimator``.

    Feed it one completed batch at a time; it answers the new rate (records/s) or None (first batch, an empty
    batch, a zero processing delay or a time that does not move forward), exactly as the Scala class does.

    Args:
        batch_interval_ms: the batch duration (> 0).
        proportional, integral, derivative: the PID gains (>= 0); Spark's defaults are 1.0, 0.2, 0.0.
        min_rate: the lowest rate it will answer (> 0); Spark's default is 100.

    Example:
        >>> pid = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100.0)
        >>> pid.compute(1000, 5000, 1000, 0) is None            # the first batch only primes it
        True
        >>> pid.compute(2000, 5000, 2000, 500)                   # slower: 2500/s measured, 0.5 s queued
        2250.0
    """

    def __init__(
        self,
        batch_interval_ms: int,
        proportional: float = 1.0,
        integral: float = 0.2,
        derivative: float = 0.0,
        min_rate: float = 100.0,
    ) -> None:
        if not batch_interval_ms > 0:
            msg = f"Specified batch interval {batch_interval_ms} in PIDRateEstimator is invalid."
            raise ConfigError(
                msg,
                field="batch_interval_ms", expected="> 0", actual=batch_interval_ms,
            )
        for name, value in (("proportional", proportional), ("integral", integral), ("derivative", derivative)):
            if not value >= 0:
                msg = f"{name} term {value} in PIDRateEstimator should be >= 0."
                raise ConfigError(msg, field=name, expected=">= 0", actual=value)
        if not min_rate > 0:
            msg = "Minimum rate in PIDRateEstimator should be > 0"
            raise ConfigError(msg, field="min_rate", expected="> 0", actual=min_rate)
        self.batch_interval_ms = int(batch_interval_ms)
        self.proportional = float(proportional)
        self.integral = float(integral)
        self.derivative = float(derivative)
        self.min_rate = float(min_rate)
        self._first_run = True
        self._latest_time = -1
        self._latest_rate = -1.0
        self._latest_error = -1.0

    @classmethod
    def from_settings(cls, batch_interval_ms: int, settings: RateSettings) -> PIDRateEstimator:
        """An estimator with the PID settings of ``settings``."""
        return cls(
            batch_interval_ms, settings.pid_proportional, settings.pid_integral, settings.pid_derived,
            settings.pid_min_rate,
        )

    def compute(self, time: int, elements: int, processing_delay: int, scheduling_delay: int) -> float | None:
        """The new rate after a batch, or None; arguments as Spark's (ms and a record count)."""
        if not (time > self._latest_time and elements > 0 and processing_delay > 0):
            return None
        delay_since_update = float(time - self._latest_time) / 1000
        processing_rate = float(elements) / float(processing_delay) * 1000
        error = self._latest_rate - processing_rate
        historical_error = float(scheduling_delay) * processing_rate / float(self.batch_interval_ms)
        d_error = (error - self._latest_error) / delay_since_update
        new_rate = _java_max(
            self._latest_rate
            - self.proportional * error
            - self.integral * historical_error
            - self.derivative * d_error,
            self.min_rate,
        )
        self._latest_time = time
        if self._first_run:
            self._latest_rate = processing_rate
            self._latest_error = 0.0
            self._first_run = False
            return None
        self._latest_rate = new_rate
        self._latest_error = error
        return new_rate


class JvmPIDRateEstimator:
    """Spark's own JVM ``PIDRateEstimator``, called through py4j, with the same interface as the port.

    Args:
        sc: the SparkContext whose JVM to use.
        batch_interval_ms, proportional, integral, derivative, min_rate: as for :class:`PIDRateEstimator`.

    Raises:
        ConfigError: for arguments the Scala class's ``require`` checks would refuse (checked first, in Python).
    """

    def __init__(
        self,
        sc: Any,
        batch_interval_ms: int,
        proportional: float = 1.0,
        integral: float = 0.2,
        derivative: float = 0.0,
        min_rate: float = 100.0,
    ) -> None:
        PIDRateEstimator(batch_interval_ms, proportional, integral, derivative, min_rate)  # same validation
        self._jestimator = sc._jvm.org.apache.spark.streaming.scheduler.rate.PIDRateEstimator(
            int(batch_interval_ms), float(proportional), float(integral), float(derivative), float(min_rate)
        )

    @classmethod
    def from_settings(cls, sc: Any, batch_interval_ms: int, settings: RateSettings) -> JvmPIDRateEstimator:
        """A JVM estimator with the PID settings of ``settings``."""
        return cls(
            sc, batch_interval_ms, settings.pid_proportional, settings.pid_integral, settings.pid_derived,
            settings.pid_min_rate,
        )

    def compute(self, time: int, elements: int, processing_delay: int, scheduling_delay: int) -> float | None:
        """The new rate after a batch, or None (the Scala ``Option[Double]``)."""
        answer = self._jestimator.compute(int(time), int(elements), int(processing_delay), int(scheduling_delay))
        return float(answer.get()) if answer.isDefined() else None
