"""Waiting on a running StreamingContext without blind sleeps."""

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
