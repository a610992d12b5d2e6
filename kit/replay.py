"""Replay a dataset into a Kafka topic: partitioned, timestamped, paced, every record acknowledged.

Each record carries a header ``dmk.produced_ms`` (ASCII decimal milliseconds since the epoch, taken just
before the send) so that end-to-end latency can later be measured from any copy of the record, in either
engine, as ``emitted_at − produced_ms``. The result also holds a per-record log (seq → partition, offset,
produced time) built from the broker's acknowledgements.

Partitioning (``partition_by``):
    ``"key"``   — Kafka's Java default: ``murmur2(key) & 0x7fffffff % partitions`` (records without a key
                  go to ``seq % partitions``, so a replay is reproducible), see :func:`kit.kafka.key_partition`;
    ``"field"`` — the dataset's own ``partition`` column;
    ``"seq"``   — ``seq % partitions``: every partition gets an even, time-uniform share of the stream. Keyed
                  partitions carry bursty per-key traffic, so a consumer working off a backlog with a
                  per-batch record limit moves them apart in event time (docs/playbook.md, "partition
                  skew"); ``"seq"`` takes that out of an equivalence test.

A frame with a ``topic`` column is split over several topics (a workload with two inputs, such as an
impressions/clicks join): each row goes to its own topic, every topic is created with ``partitions``, and
the result gives end offsets per topic. Rows are still sent in frame order, so the topics advance together.

Example::

    frame = read_dataset("events.parquet")
    result = replay(frame, "127.0.0.1:9092", ReplaySettings(topic="events", partitions=4))
    result.records, result.end_offsets
    # (100000, {0: 24873, 1: 25210, 2: 24950, 3: 24967})
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from kit.errors import ConfigError, ReplayError
from kit.kafka import Kafka, key_partition

__all__ = ["PRODUCED_AT_HEADER", "ReplayResult", "ReplaySettings", "TokenBucket", "replay"]

#: Header holding the produce time of every replayed record (ASCII decimal ms since the epoch).
PRODUCED_AT_HEADER = "dmk.produced_ms"

ProgressCallback = Callable[[int, int], None]
"""Called with (records sent, records acknowledged) a few times a second."""


@dataclass(frozen=True)
class ReplaySettings:
    """How to replay a dataset.

    Attributes:
        topic: target topic; created with ``partitions`` partitions if absent.
        partitions: partition count for a new topic (an existing topic keeps its own; a mismatch is an
            error). None: the dataset's ``partition`` column range, else 4.
        rate_rps: target records per second (token bucket); None sends as fast as the broker acknowledges.
        timestamps: record timestamp = ``"produce"`` time (default) or the dataset's ``"event"`` time.
        partition_by: ``"key"`` (default), ``"field"`` or ``"seq"`` (see the module docstring).
        headers: ``"produced_at"`` (default): each record gets the :data:`PRODUCED_AT_HEADER` header;
            ``"frame"``: the frame's ``headers`` column (a capture's own headers, :mod:`kit.capture`), as they are.
        speed: pace by the frame's own timing instead of a rate: a record is sent ``(arrival − first arrival) /
            speed`` after the start, its arrival being the frame's ``arrival_ms`` column (else ``timestamp_ms``).
            None (default): no such pacing. Not with ``rate_rps``.
        acks: producer acks, default ``"all"``.
        linger_ms: how long the producer gathers records into a batch before sending it (default 25 ms).
            Every record's latency includes this wait (it is stamped before it). Kafka's own default is 5 ms;
            on the embedded Tansu broker, at 5,000 records/s over 8 partitions, 5 ms makes batches of about three
            records, and Tansu's cost per request grows with the batches a partition holds: within a minute its
            CPU went from 0.28 to 0.89 cores and a batch's reads of its new records from 64 to 603 ms; with 25 ms
            it stayed at 0.09-0.14 cores and 38-62 ms (``benchmarks/tansu_end_offsets_under_load.py reads``,
            benchmarks/results/changes.md §34).
        flush_timeout_s: how long to wait for the last acknowledgements (default 120 s).
    """

    topic: str
    partitions: int | None = None
    rate_rps: float | None = None
    timestamps: Literal["produce", "event"] = "produce"
    partition_by: Literal["key", "field", "seq"] = "key"
    headers: Literal["produced_at", "frame"] = "produced_at"
    speed: float | None = None
    acks: str | int = "all"
    flush_timeout_s: float = 120.0
    linger_ms: int = 25

    def __post_init__(self) -> None:
        if not self.topic:
            msg = "replay needs a topic name"
            raise ConfigError(msg)
        if self.partitions is not None and self.partitions < 1:
            msg = f"partitions must be >= 1, got {self.partitions}"
            raise ConfigError(msg)
        if self.rate_rps is not None and not self.rate_rps > 0:
            msg = f"rate_rps must be > 0 records/s (or None for as fast as possible), got {self.rate_rps}"
            raise ConfigError(msg)
        if self.timestamps not in ("produce", "event"):
            msg = f"timestamps must be 'produce' or 'event', got {self.timestamps!r}"
            raise ConfigError(msg)
        if self.headers not in ("produced_at", "frame"):
            msg = f"headers must be 'produced_at' or 'frame', got {self.headers!r}"
            raise ConfigError(msg)
        if self.speed is not None and (not self.speed > 0 or self.rate_rps is not None):
            msg = f"speed must be > 0 and goes without rate_rps, got speed={self.speed}, rate_rps={self.rate_rps}"
            raise ConfigError(msg)
        if not self.linger_ms >= 0:
            msg = f"linger_ms must be >= 0 ms, got {self.linger_ms}"
            raise ConfigError(msg)
        if self.partition_by not in ("key", "field", "seq"):
            msg = f"partition_by must be 'key', 'field' or 'seq', got {self.partition_by!r}"
            raise ConfigError(msg)


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did.

    Attributes:
        topic: the topic written.
        records: records sent and acknowledged (always all of them: otherwise replay raises).
        seconds: wall time from the first send to the last acknowledgement.
        end_offsets: partition → end offset of ``topic`` after the replay (exact, see kit.kafka).
        log: one row per dataset record: ``seq, topic, partition, offset, produced_ms``.
        topic_end_offsets: topic → partition → end offset, for every topic written.
    """

    topic: str
    records: int
    seconds: float
    end_offsets: dict[int, int]
    log: pd.DataFrame = field(repr=False)
    topic_end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def rate_rps(self) -> float:
        """Achieved records per second."""
        return self.records / self.seconds if self.seconds > 0 else float("inf")


_PACING_WAIT_S = 0.002
"""The shortest wait of a paced replay: records leave in groups due within 2 ms, each stamped as it is sent. At
5,000 records/s its process used 0.21-0.25 cores with a sleep per record, 0.10-0.12 with this (changes.md §35)."""


class TokenBucket:
    """Paces events to ``rate`` per second, allowing bursts of up to ``burst`` (default rate/10, >= 1).

    When it is short of tokens it sleeps until they are due, but never less than ``min_wait_s``: the rate over
    any longer stretch is the same, and a replay at 5,000 records/s wakes 500 times a second instead of once
    per record (each wake-up costs the sender's process CPU that the engines under test then lack).

    Example:
        >>> bucket = TokenBucket(1000.0)
        >>> for _ in range(3):
        ...     bucket.acquire()
    """

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        min_wait_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not rate > 0:
            msg = f"a token bucket needs a rate > 0, got {rate}"
            raise ConfigError(msg)
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate / 10.0)
        self.min_wait_s = max(0.0, min_wait_s)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.capacity
        self._last = clock()

    def acquire(self, tokens: float = 1.0) -> None:
        """Take ``tokens``, sleeping until the bucket holds them."""
        while True:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            # Refill arithmetic in floats can land a hair under a whole token; without the tolerance the
            # bucket would ask for sleeps shorter than the clock's resolution, forever.
            if self._tokens >= tokens - 1e-9:
                self._tokens = max(0.0, self._tokens - tokens)
                return
            self._sleep(max((tokens - self._tokens) / self.rate, self.min_wait_s))


class _Acks:
    """Collects the broker's acknowledgements (called from the sender, on its I/O thread or in send/flush)."""

    def __init__(self, n: int) -> None:
        self.partition = np.full(n, -1, dtype=np.int32)
        self.offset = np.full(n, -1, dtype=np.int64)
        self.acknowledged = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def done(self, seq: int, partition: int, offset: int, error: BaseException | None) -> None:
        if error is not None:
            self.error(error)
            return
        self.partition[seq] = partition
        self.offset[seq] = offset
        self.acknowledged += 1

    def error(self, exc: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = exc


def _partitions_for(frame: pd.DataFrame, settings: ReplaySettings, partitions: int) -> np.ndarray:
    if settings.partition_by == "seq":
        seqs = frame["seq"].to_numpy(dtype=np.int64) if "seq" in frame else np.arange(len(frame))
        return seqs % partitions
    if settings.partition_by == "field":
        if "partition" not in frame or frame["partition"].isna().any():
            msg = "partition_by='field' needs a 'partition' value on every dataset record"
            raise ConfigError(msg)
        chosen = frame["partition"].to_numpy(dtype=np.int64)
        if len(chosen) and (chosen.min() < 0 or chosen.max() >= partitions):
            msg = (
                f"the dataset's partition field holds {int(chosen.min())}..{int(chosen.max())}, "
                f"but topic {settings.topic!r} has {partitions} partitions. "
                "Fix: replay into a topic with enough partitions, or use partition_by='key'."
            )
            raise ConfigError(msg)
        return cast(np.ndarray, chosen)
    cache: dict[bytes, int] = {}  # keys repeat a lot (users), murmur2 in Python is not free
    seqs = np.arange(len(frame))
    return np.fromiter(
        (
            (cache[k] if k in cache else cache.setdefault(k, key_partition(k, partitions)))
            if k is not None
            else int(s % partitions)
            for k, s in zip(frame["key"], seqs, strict=True)
        ),
        dtype=np.int64,
        count=len(frame),
    )


def _due_seconds(frame: pd.DataFrame, speed: float) -> np.ndarray:
    """Seconds after the start at which each row is due, from the frame's own timing scaled by ``speed``."""
    column = "arrival_ms" if "arrival_ms" in frame else "timestamp_ms"
    arrival = frame[column].to_numpy(dtype=np.int64)
    if not len(arrival):
        return np.zeros(0)
    return np.maximum.accumulate(arrival - arrival[0]) / 1000.0 / speed


def _default_partitions(frame: pd.DataFrame) -> int:
    if "partition" in frame and len(frame) and not frame["partition"].isna().all():
        return int(frame["partition"].max()) + 1
    return 4


def replay(
    frame: pd.DataFrame,
    bootstrap_servers: str,
    settings: ReplaySettings,
    *,
    on_progress: ProgressCallback | None = None,
    kafka_settings: dict[str, Any] | None = None,
) -> ReplayResult:
    """Produce every row of a dataset frame (columns ``key``, ``value``, ``timestamp_ms``) into a topic.

    Rows are sent in frame order. Returns once every record is acknowledged.

    Raises:
        ReplayError: when any record was not acknowledged (the count and the first error are attached).
        TopicConfigurationMismatch: when the topic exists with another partition count than asked for.
    """
    with Kafka(bootstrap_servers, settings=kafka_settings) as kafka:
        wanted = settings.partitions or _default_partitions(frame)
        row_topics = frame["topic"].tolist() if "topic" in frame else None
        names = sorted(set(row_topics)) if row_topics is not None else [settings.topic]
        existing = kafka.topics()
        for name in names:
            if name in existing and settings.partitions is None:
                partitions = len(kafka.partitions(name))
            else:
                kafka.create_topic(name, wanted)
                partitions = wanted
        # Several topics are created alike, so one partition count serves them all.
        targets = _partitions_for(frame, settings, partitions)
        n = len(frame)
        acks = _Acks(n)
        produced_ms = np.zeros(n, dtype=np.int64)
        keys = frame["key"].tolist()
        values = frame["value"].tolist()
        event_ts = frame["timestamp_ms"].to_numpy(dtype=np.int64) if settings.timestamps == "event" else None
        bucket = TokenBucket(settings.rate_rps, min_wait_s=_PACING_WAIT_S) if settings.rate_rps else None
        frame_headers = frame["headers"].tolist() if settings.headers == "frame" else None
        due_s = _due_seconds(frame, settings.speed) if settings.speed is not None else None
        sender = kafka.sender(
            acks=settings.acks, linger_ms=settings.linger_ms, batch_size=512 * 1024,
            max_block_s=settings.flush_timeout_s,
        )
        started = time.monotonic()
        next_report = started
        try:
            for seq in range(n):
                if bucket is not None:
                    bucket.acquire()
                elif due_s is not None and (wait := started + due_s[seq] - time.monotonic()) > 0:
                    time.sleep(wait)
                now_ms = time.time_ns() // 1_000_000
                produced_ms[seq] = now_ms
                try:
                    sender.send(
                        row_topics[seq] if row_topics is not None else settings.topic,
                        key=keys[seq],
                        value=values[seq],
                        partition=int(targets[seq]),
                        timestamp_ms=int(event_ts[seq]) if event_ts is not None else now_ms,
                        headers=(list(frame_headers[seq]) if frame_headers is not None
                                 else [(PRODUCED_AT_HEADER, str(now_ms).encode())]),
                        on_done=functools.partial(acks.done, seq),
                    )
                except Exception as exc:  # noqa: BLE001 - any send failure is counted and reported below
                    acks.error(exc)
                    continue
                if on_progress is not None and time.monotonic() >= next_report:
                    on_progress(seq + 1, acks.acknowledged)
                    next_report = time.monotonic() + 0.2
            sender.flush(settings.flush_timeout_s)
        except Exception as exc:  # noqa: BLE001 - a flush timeout leaves records unacknowledged: reported below
            acks.error(exc)
        finally:
            sender.close(timeout_s=5)
        seconds = time.monotonic() - started
        if on_progress is not None:
            on_progress(n, acks.acknowledged)
        if acks.acknowledged != n:
            raise ReplayError(
                settings.topic, sent=n, acknowledged=acks.acknowledged, first_error=acks.first_error
            )
        ends = {name: kafka.end_offsets(name) for name in names}
    log = pd.DataFrame(
        {
            "seq": frame["seq"].to_numpy() if "seq" in frame else np.arange(n),
            "topic": row_topics if row_topics is not None else [settings.topic] * n,
            "partition": acks.partition,
            "offset": acks.offset,
            "produced_ms": produced_ms,
        }
    )
    return ReplayResult(
        topic=settings.topic,
        records=n,
        seconds=seconds,
        end_offsets={tp.partition: end for tp, end in ends.get(settings.topic, {}).items()},
        log=log,
        topic_end_offsets={name: {tp.partition: end for tp, end in e.items()} for name, e in ends.items()},
    )
