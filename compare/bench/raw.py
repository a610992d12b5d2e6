"""Kafka without an engine: the raw clients' limits ``dmk bench`` holds the engines to.

A bare producer (:func:`produce`) and a bare single-process consumer (:func:`consume_all`) of each installed client
(:func:`available_clients`), optionally parsing every value as the engines do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress

from kit.errors import ConfigError, KitError
from kit.events import parse_event
from kit.kafka import CLIENTS, Kafka, resolve_client

__all__ = ["Progress", "available_clients", "consume_all", "new_topic", "produce", "round_robin_ends"]

Progress = Callable[[str, int, int], None]


def new_topic(bootstrap_servers: str, topic: str, partitions: int) -> str:
    """Create the bench topic ``topic`` with ``partitions`` partitions; return its name."""
    with Kafka(bootstrap_servers) as kafka:
        kafka.create_topic(topic, partitions)
    return topic


def produce(bootstrap_servers: str, topic: str, values: Sequence[bytes], partitions: int,
            progress: Progress | None = None, first_seq: int = 0, client: str | None = None) -> float:
    """Send ``values`` to ``topic`` with one producer; returns the seconds until the last acknowledgement.

    Record ``i`` goes to partition ``(first_seq + i) % partitions``. The producer is of ``client`` (default: the
    kit's, :func:`kit.kafka.resolve_client`).

    Raises:
        KitError: any record was not acknowledged (the count and the first error).
    """
    failed: list[BaseException] = []

    def done(_partition: int, _offset: int, error: BaseException | None) -> None:
        if error is not None:
            failed.append(error)

    with Kafka(bootstrap_servers, client=client) as kafka:
        sender = kafka.sender(acks="all", linger_ms=5, batch_size=1 << 20)
    try:
        started = time.perf_counter()
        for i, value in enumerate(values):
            sender.send(topic, key=None, value=value, partition=(first_seq + i) % partitions, on_done=done)
            if progress and i % 50_000 == 0:
                progress("raw producer", i, len(values))
        outstanding = sender.flush(120.0)
        seconds = time.perf_counter() - started
    finally:
        sender.close()
    if failed or outstanding:
        msg = (
            f"{len(failed) + outstanding} of {len(values)} records to {topic} were not acknowledged; "
            f"first: {failed[0] if failed else 'no answer'!r}"
        )
        raise KitError(msg)
    if progress:
        progress("raw producer", len(values), len(values))
    return seconds


def consume_all(bootstrap_servers: str, topic: str, ends: dict[int, int], progress: Progress | None = None,
                idle_timeout_s: float = 30.0, client: str = "kafka-python", parse: bool = False) -> float:
    """Read every record of ``topic`` up to ``ends`` with one bare consumer; returns the seconds.

    The consumer is of ``client``: ``"kafka-python"`` (the default) or ``"confluent"``. With ``parse`` it also
    decides every value with :func:`kit.events.parse_event` (the oracle's rules, as the engines' parse does),
    in the same process: the least an engine's job does with a record besides reading it.

    Raises:
        KitError: the topic holds fewer records than ``ends`` says (nothing more came for ``idle_timeout_s``).
    """
    total = sum(ends.values())
    poll = _confluent_poll if client == "confluent" else _kafka_python_poll
    name = f"raw {'parsing ' if parse else ''}consumer ({client})"
    with poll(bootstrap_servers, topic, ends, parse) as next_batch:
        started = time.perf_counter()
        seen, idle_since = 0, time.monotonic()
        while seen < total:
            got = next_batch()
            seen += got
            if got:
                idle_since = time.monotonic()
                if progress:
                    progress(name, seen, total)
            elif time.monotonic() - idle_since > idle_timeout_s:
                msg = (
                    f"the {name} read {seen} of {total} records of {topic} and then nothing "
                    f"for {idle_timeout_s:g} s"
                )
                raise KitError(msg)
        return time.perf_counter() - started


def _parsed(values: Iterable[bytes | None]) -> int:
    """Decide each value with :func:`parse_event` and count them: valid or dead letter, each was handled."""
    n = 0
    for value in values:
        parse_event(value)
        n += 1
    return n


@contextmanager
def _kafka_python_poll(bootstrap_servers: str, topic: str, ends: dict[int, int],
                       parse: bool) -> Iterator[Callable[[], int]]:
    from kafka import KafkaConsumer, TopicPartition

    from kit.kafka import process_settings, python_client_config

    # The command's --kafka-config/--kafka-option settings (TLS/SASL), as every other client of the run has them.
    security = {k: v for k, v in python_client_config(process_settings()).items() if k in KafkaConsumer.DEFAULT_CONFIG}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             **{"max_partition_fetch_bytes": 8 << 20, "fetch_max_bytes": 64 << 20, **security})
    try:
        tps = [TopicPartition(topic, p) for p in sorted(ends)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        if parse:
            yield lambda: _parsed(r.value for records in consumer.poll(timeout_ms=500, max_records=100_000).values()
                                  for r in records)
        else:
            yield lambda: sum(len(records) for records in consumer.poll(timeout_ms=500, max_records=100_000).values())
    finally:
        consumer.close()


@contextmanager
def _confluent_poll(bootstrap_servers: str, topic: str, ends: dict[int, int],
                    parse: bool) -> Iterator[Callable[[], int]]:
    from confluent_kafka import Consumer, TopicPartition

    from kit._rdkafka import FETCH_SETTINGS, translate
    from kit.kafka import process_settings

    security, _ = translate(process_settings())
    # The kit readers' fetch settings: with librdkafka's default fetch.queue.backoff.ms (1 s) this consumer, whose
    # prefetch queue fills, read 184-191k records/s; with theirs, 535-545k (profile.md §9).
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": "dmk-bench-raw", "enable.auto.commit": False,
        **FETCH_SETTINGS, **security,
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in sorted(ends)])
        # Each message's value is taken, as any real consumer would, so both clients do the same work.
        if parse:
            yield lambda: _parsed(m.value() for m in consumer.consume(100_000, timeout=0.5) if m.error() is None)
        else:
            yield lambda: sum(
                1 for m in consumer.consume(100_000, timeout=0.5) if m.error() is None and m.value() is not None
            )
    finally:
        consumer.close()


def available_clients() -> list[str]:
    """The Kafka clients installed here, in :data:`kit.kafka.CLIENTS` order."""
    found = []
    for client in CLIENTS:
        with suppress(ConfigError):
            found.append(resolve_client(client))
    return found


def _end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    with Kafka(bootstrap_servers) as kafka:
        return {tp.partition: offset for tp, offset in kafka.end_offsets(topic).items()}


def round_robin_ends(topic: str, sent: int, partitions: int) -> dict[str, dict[int, int]]:
    """End offsets after ``sent`` records went round-robin (record ``i`` to ``i % partitions``) to a new topic."""
    return {topic: {p: (sent - p + partitions - 1) // partitions for p in range(partitions)}}
