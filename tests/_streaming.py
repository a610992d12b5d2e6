"""Waiting on a running StreamingContext without blind sleeps, and sending test records."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def await_condition(ssc: Any, condition: Callable[[], bool], what: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Wait until ``condition()``; fail with the last observed ``what()``, or at once if the context stops."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s; last observed: {what()!r}")
        if ssc.awaitTerminationOrTimeout(0.05):
            raise AssertionError(f"the streaming context stopped; last observed: {what()!r}")


def produce(kafka: Any, topic: str, counts: dict[int, int]) -> None:
    """Produce ``counts[p]`` records to partition ``p`` of ``topic`` (values ``"<partition>-<i>"``), flushed."""
    producer = kafka.producer(linger_ms=5)
    for partition, n in counts.items():
        for i in range(n):
            producer.send(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def send_records(bootstrap_servers: str, records: list[dict], *, linger_ms: int, batch_size: int | None = None) -> None:
    """Send ``records`` (``Sender.send`` keyword arguments) through the kit's sender, flushed; fails if any failed.

    The sender is the test client's (librdkafka unless ``DMK_KAFKA_CLIENT=kafka-python``), so that the tests
    marked ``librdkafka_only`` also run on the mock.
    """
    from kit.kafka import Kafka

    options = {"linger_ms": linger_ms} | ({"batch_size": batch_size} if batch_size else {})
    sender = Kafka(bootstrap_servers).sender(**options)
    try:
        for record in records:
            sender.send(**record)
        assert sender.flush(30.0) == 0
    finally:
        sender.close()
