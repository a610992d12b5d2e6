"""Sending records to Kafka, whichever client is behind it: the :class:`Sender` interface and its kafka-python form.

:meth:`kit.kafka.Kafka.sender` returns a :class:`Sender`: a :class:`KafkaPythonSender` on kafka-python, or
``kit._rdkafka.RdSender`` on librdkafka. Both client modules import the interface from here, so neither imports
the other (``kit.kafka`` chooses the client; ``kit._rdkafka`` implements the librdkafka one).

Example::

    with Kafka(bootstrap_servers) as kafka:
        sender = kafka.sender(acks="all")
        sender.send("events", key=b"k", value=b"v", on_done=lambda partition, offset, error: ...)
        assert sender.flush(timeout_s=10) == 0
        sender.close()
"""

from __future__ import annotations

import contextlib
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

__all__ = ["KafkaPythonSender", "Sender"]


class Sender:
    """Sends records and reports each one's outcome; from :meth:`kit.kafka.Kafka.sender`, whichever client is behind it.

    ``send`` queues one record; ``on_done(partition, offset, error)`` is called once for it, from ``send``,
    ``flush`` or ``close`` (``error`` None when the broker acknowledged it). ``flush(timeout_s)`` waits for
    every outcome and returns how many are still outstanding.
    """

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        on_done: Any = None,
    ) -> None:
        """Queue one record for ``topic``; ``on_done(partition, offset, error)`` is called once for it.

        ``partition`` None lets the client's partitioner choose; ``timestamp_ms`` None lets the client stamp
        the record with the current time.
        """
        raise NotImplementedError

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every queued record's outcome; return how many are still outstanding."""
        raise NotImplementedError

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` (default 5 s) for what is still queued, then close the producer."""
        raise NotImplementedError


class KafkaPythonSender(Sender):
    """Sends records with a kafka-python producer; ``on_done(partition, offset, error)`` per record."""

    def __init__(self, producer: KafkaProducer) -> None:
        self._producer = producer
        self._futures: list[Any] = []

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        on_done: Any = None,
    ) -> None:
        """Queue one record, as :meth:`Sender.send` says (a kafka-python future, its callbacks calling ``on_done``)."""
        future = self._producer.send(
            topic, key=key, value=value, partition=partition, timestamp_ms=timestamp_ms, headers=headers or []
        )
        if on_done is not None:
            future.add_callback(lambda meta: on_done(meta.partition, meta.offset, None))
            future.add_errback(lambda exc: on_done(partition if partition is not None else -1, -1, exc))
        self._futures.append(future)

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every outcome; return how many records are still outstanding."""
        with contextlib.suppress(KafkaTimeoutError):
            self._producer.flush(timeout=timeout_s)
        self._futures = [f for f in self._futures if not f.is_done]
        return len(self._futures)

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the producer, waiting up to ``timeout_s`` (default 5 s) for what is still queued."""
        self._producer.close(timeout=timeout_s)
