"""The fast Kafka path of :mod:`kit.kafka`: ranged reads, high watermarks and sends through librdkafka.

``confluent-kafka`` (librdkafka in a manylinux wheel) reads and produces several times faster than
kafka-python (docs/kit.md, "Kafka clients", has the measured table), so :class:`kit.kafka.Kafka` uses it
for its hot paths when it is installed. Everything here is private to ``kit.kafka``: callers use
:meth:`kit.kafka.Kafka.read_range`, :meth:`kit.kafka.Kafka.end_offsets` and :meth:`kit.kafka.Kafka.sender`,
which pick the client.

Settings are given in kafka-python's names (the kit's one vocabulary for client settings) and translated
here; :func:`translate` says which have no librdkafka equivalent, and a handle with such a setting stays on
kafka-python.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from kit.interrupts import raise_if_interrupted
from kit.security import reveal
from kit.sender import Sender

__all__ = ["RdReader", "RdSender", "translate"]

# librdkafka logs through Python logging (not straight to stderr), so a broker going away at the end of a
# run is a log record like kafka-python's, not stray lines in the console.
_LOG = logging.getLogger("kit.kafka.librdkafka")

# kafka-python setting -> librdkafka property (same meaning). ``sasl_plain_*`` are kafka-python's names for
# the SASL credentials of every mechanism.
_NAMES = {
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    # the kit's inline PEM (kit.kafka), which librdkafka takes as text
    "ssl_cadata": "ssl.ca.pem",
    "ssl_certdata": "ssl.certificate.pem",
    "ssl_keydata": "ssl.key.pem",
    "ssl_ciphers": "ssl.cipher.suites",
    "request_timeout_ms": "request.timeout.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "receive_buffer_bytes": "socket.receive.buffer.bytes",
    "send_buffer_bytes": "socket.send.buffer.bytes",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
    "retry_backoff_ms": "retry.backoff.ms",
    "check_crcs": "check.crcs",
}
# Producer settings the kit's senders pass (kafka-python names).
_PRODUCER_NAMES = {
    "acks": "acks",
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "compression_type": "compression.type",
    "retries": "retries",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "enable_idempotence": "enable.idempotence",
    "max_request_size": "message.max.bytes",
    "delivery_timeout_ms": "delivery.timeout.ms",
}


def translate(settings: Mapping[str, Any], extra: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """kafka-python settings as librdkafka properties, and the names that have no equivalent.

    Secrets (:class:`kit.security.Secret`) are revealed: the result goes to librdkafka only, never to a log.
    """
    names = {**_NAMES, **(extra or {})}
    out: dict[str, Any] = {}
    untranslated = []
    for key, secret_or_value in settings.items():
        value = reveal(secret_or_value)
        if key == "ssl_check_hostname":
            out["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
            continue
        if key not in names:
            untranslated.append(key)
            continue
        out[names[key]] = value
    return out, sorted(untranslated)


FETCH_SETTINGS: dict[str, Any] = {
    # Tansu answers a Fetch with max wait 0 with no partitions at all, so wait a little.
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    # Once its prefetch queue holds queued.max.messages.kbytes (64 MB), librdkafka postpones the partition's
    # next fetch by this long (default 1000 ms); a reader that drains 64 MB in well under a second then waits
    # out the rest.
    "fetch.queue.backoff.ms": 10,
}
"""librdkafka fetch settings of every consumer that reads a range or a whole topic (the range reader, the bench's
raw consumer). ``fetch.queue.backoff.ms`` is short so that a range larger than the prefetch queue reads at full
speed (``benchmarks/kafka_clients.py``; benchmarks/results/changes.md §19); smaller ranges read the same either
way."""


class RdReader:
    """Exact offset-range reads and high watermarks through librdkafka, a short-lived consumer each.

    Records come back as kafka-python ``ConsumerRecord`` tuples, so callers see one record type whichever
    client read them.
    """

    def __init__(self, bootstrap_servers: str, properties: Mapping[str, Any], timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._config = {
            "bootstrap.servers": bootstrap_servers,
            # librdkafka wants a group even for assign(); nothing joins it or commits to it.
            "group.id": "dmk-range-reader",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            **FETCH_SETTINGS,
            "socket.timeout.ms": int(timeout_s * 1000),
            **properties,
        }

    @contextmanager
    def _consumer(self) -> Iterator[Consumer]:
        # A consumer per operation, never one kept between them. librdkafka 2.16 fetches by topic id and
        # crashes the process (SIGSEGV in its own threads) once a topic it has seen is deleted and re-created
        # on Tansu; a consumer that lives for one read never outlives its topic. A fresh consumer is also the
        # fast one: creating it is cheap and a small range reads at once, while a reassigned consumer first
        # waits out its last fetch to the end of the log (fetch.wait.max.ms).
        consumer = Consumer(self._config, logger=_LOG)
        try:
            yield consumer
        finally:
            consumer.close()

    def read(
        self,
        topic: str,
        partition: int,
        from_offset: int,
        until_offset: int,
        *,
        idle_timeout_s: float,
        end_offset: Callable[[], int],
        out_of_range: Callable[[], Exception],
        timed_out: Callable[[int, int], Exception],
    ) -> Iterator[ConsumerRecord]:
        """Yield the records with ``from_offset <= offset < until_offset`` (see ``Kafka.read_range``).

        ``end_offset`` gives the partition's exact end when nothing arrives (a broker may answer a fetch past
        the end with nothing rather than an error), ``out_of_range`` and ``timed_out(position, end)`` build the
        errors to raise.
        """
        with self._consumer() as consumer:
            consumer.assign([RdTopicPartition(topic, partition, from_offset)])
            position = from_offset
            last_progress = time.monotonic()
            while position < until_offset:
                # Ask for no more than the range holds: consume() returns once it has that many messages (or
                # at the timeout), so a small range does not wait out the timeout.
                messages = consumer.consume(min(until_offset - position, 10_000), timeout=0.2)
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                            raise out_of_range()
                        raise KafkaException(error)
                    offset = cast(int, message.offset())  # None only on error events, handled above
                    if offset >= until_offset:
                        return
                    position = offset + 1
                    kind, timestamp = message.timestamp()
                    yield ConsumerRecord(
                        topic, partition, -1, offset, timestamp, kind - 1 if kind > 0 else -1,
                        message.key(), message.value(), message.headers() or [], None, -1, -1, -1,
                    )
                if messages:
                    last_progress = time.monotonic()
                    continue
                end = end_offset()
                if end < until_offset:
                    raise out_of_range()
                if end <= position:
                    return  # the rest of the range is gone (compacted or transaction markers)
                if time.monotonic() - last_progress > idle_timeout_s:
                    raise timed_out(position, end)

    def high_watermarks(self, fetch_at: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The high watermark of a Fetch response for each ``(topic, partition)``, fetched at its offset.

        librdkafka keeps the high watermark of the last Fetch response per partition (``cached=True``);
        ListOffsets (``cached=False``) is what Tansu gets wrong, so it is not used for the answer.
        """
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + self.timeout_s
        with self._consumer() as consumer:
            consumer.assign([RdTopicPartition(t, p, o) for (t, p), o in fetch_at.items()])
            while len(found) < len(fetch_at):
                if time.monotonic() > deadline:
                    raise TimeoutError(sorted(set(fetch_at) - set(found)))
                for message in consumer.consume(10_000, timeout=0.005):
                    topic, partition = message.topic(), message.partition()
                    if topic is None or partition is None:  # a client-level event: no partition's
                        continue
                    key = (topic, partition)
                    if key in fetch_at and key not in found:
                        _, high = consumer.get_watermark_offsets(RdTopicPartition(*key), cached=True)
                        if high >= 0:
                            found[key] = high
        return found


class RdSender(Sender):
    """Sends records with a librdkafka producer; ``on_done(partition, offset, error)`` per record."""

    def __init__(self, bootstrap_servers: str, properties: Mapping[str, Any], max_block_s: float) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, **properties}, logger=_LOG)
        self._max_block_s = max_block_s

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        on_done: Callable[[int, int, BaseException | None], None] | None = None,
    ) -> None:
        def delivered(error: KafkaError | None, message: Any) -> None:
            if on_done is not None:
                on_done(message.partition(), message.offset(), KafkaException(error) if error is not None else None)

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        if headers:
            kwargs["headers"] = headers
        deadline = None
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room, as max_block_ms does.
                deadline = deadline or time.monotonic() + self._max_block_s
                if time.monotonic() > deadline:
                    msg = f"the producer's queue stayed full for {self._max_block_s:g} s"
                    raise TimeoutError(msg) from None
                self._producer.poll(0.05)
            except Exception:
                # A signal's handler that ran inside produce comes out as produce's own error (kit.interrupts).
                raise_if_interrupted()
                raise
        self._producer.poll(0)

    def flush(self, timeout_s: float) -> int:
        """Wait for every delivery report; returns how many records are still undelivered."""
        return self._producer.flush(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self._producer.flush(timeout_s)
        self._producer.close()
