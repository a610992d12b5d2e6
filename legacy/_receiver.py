"""The receiver-based Kafka stream of Spark 2.4 (``KafkaUtils.createStream``), on PySpark 4.3.

Spark 2.4's receiver ran Kafka 0.8's high-level consumer (group offsets in ZooKeeper, auto-committed) inside
a Spark *receiver*, so Spark's receiver machinery applied to it: ``spark.streaming.receiver.maxRate`` (a
Guava token bucket in ``BlockGenerator``), receiver backpressure, ``spark.streaming.blockInterval`` and the
receiver write-ahead log. PySpark 4.3 cannot load that consumer, so the stream is rebuilt from two pieces:

* a **consumer-group bridge** in the driver (:class:`ReceiverBridge`): a kafka-python ``KafkaConsumer`` with
  ``group_id`` and ``enable_auto_commit=True``, subscribed to the topics, whose records are served one per
  line on a TCP server (two daemon threads: one polls Kafka, one serves the socket);
* Spark's own socket receiver, ``ssc.socketTextStream(host, port, storageLevel)``, reading those lines. Every
  receiver setting of Spark applies to it unchanged, because it *is* a Spark receiver.

Lines are binary-safe: ``topic partition offset key value timestamp`` separated by single spaces, key and
value in standard base64, ``-`` for a null key or value (see :func:`encode_line`). A ``map`` on the
driver-built DStream decodes each line and applies the key and value decoders, giving ``(key, value)`` tuples
as in 2.4, or passes a ``KafkaMessageAndMetadata`` to a ``message_handler``.

Lifecycle: the bridge starts (joins the group, starts filling its bounded buffer) when the stream is created,
and is closed when the StreamingContext is stopped (``ssc.stop`` is wrapped; a watchdog also notices a stop
made on the JVM side). It re-accepts when Spark restarts the receiver, and keeps the records it has taken from
Kafka until a receiver has them: when its buffer is full it pauses the consumer instead of dropping anything.
If the consumer fails, the error is logged and raised by every following batch
(:class:`ReceiverBridgeError`, seen in ``ssc.awaitTermination``).

Delivery is at most once for what sits in Spark's buffers on a driver crash, and a re-start may read records
again; ``docs/legacy-receiver.md`` says exactly when.

Example (what ``KafkaUtils.createStream(ssc, zk, "my-group", {"events": 1})`` did)::

    stream = create_receiver_stream(ssc, "127.0.0.1:9092", "my-group", {"events": 1})
    stream.map(lambda kv: kv[1]).count().pprint()
    ssc.start()
    ssc.stop(stopSparkContext=False)   # also closes the bridge
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import logging
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaConfigurationError, KafkaTimeoutError
from pyspark import StorageLevel
from pyspark.streaming import DStream

from kit.errors import BrokerUnavailable, ConfigError
from kit.kafka import Kafka, client_settings, process_settings, python_client_config
from legacy._callbacks import install as _install_callbacks
from legacy._types import KafkaMessageAndMetadata
from legacy.errors import LegacyError

__all__ = [
    "BridgeStats",
    "ReceiverBridge",
    "ReceiverBridgeError",
    "ReceiverKafkaDStream",
    "create_receiver_stream",
    "decode_line",
    "decode_message",
    "encode_line",
]

log = logging.getLogger(__name__)

#: Spark 2.4's ``auto.offset.reset`` words and kafka-python's, to kafka-python's.
_OFFSET_RESET = {"smallest": "earliest", "earliest": "earliest", "largest": "latest", "latest": "latest"}
_NULL = "-"  # not in the base64 alphabet, so a null can never be confused with a value
_SEND_CHUNK_BYTES = 64 * 1024
# Bytes the kernel may hold on the bridge's side of the connection. Records handed to the kernel are gone
# if the receiver restarts, records still in the bridge are re-sent; a small buffer keeps most of a backlog
# in the bridge.
_SOCKET_SEND_BUFFER_BYTES = 16 * 1024
_WATCHDOG_PERIOD_S = 1.0
_SERVER_STOP_TIMEOUT_S = 30.0


# -- errors ----------------------------------------------------------------------------------------------------


class ReceiverBridgeError(LegacyError):
    """The bridge behind a receiver stream cannot deliver records any more.

    Attributes:
        group_id: the consumer group.
        topics: the subscribed topics, sorted.
        address: ``"host:port"`` the bridge served on.
        reason: what happened.
        cause: the underlying exception, when there is one (also ``__cause__``).
    """

    def __init__(
        self,
        *,
        group_id: str,
        topics: Sequence[str],
        address: str,
        reason: str,
        fix: str,
        cause: BaseException | None = None,
    ) -> None:
        self.group_id = group_id
        self.topics = sorted(topics)
        self.address = address
        self.reason = reason
        self.cause = cause
        detail = ""
        if cause is not None:
            # kafka-python's errors already start with their class name.
            named = str(cause).startswith(type(cause).__name__)
            detail = f": {cause}" if named else f": {type(cause).__name__}: {cause}"
        super().__init__(
            f"receiver Kafka stream (group {group_id!r}, topics {self.topics}, bridge {address}): {reason}{detail}. "
            f"Fix: {fix}."
        )
        if cause is not None:
            self.__cause__ = cause


# -- wire format -----------------------------------------------------------------------------------------------


def _b64(data: bytes | None) -> str:
    return _NULL if data is None else base64.b64encode(data).decode("ascii")


def _unb64(field: str) -> bytes | None:
    return None if field == _NULL else base64.b64decode(field, validate=True)


def encode_line(
    topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int = -1
) -> bytes:
    r"""One record as one ASCII line, newline included: ``topic partition offset key value timestamp``.

    Key and value are standard base64 (``""`` for empty bytes), ``-`` for None, so any bytes survive Spark's
    UTF-8 line reader. Topic names never contain spaces (Kafka allows ``[a-zA-Z0-9._-]``). ``timestamp`` is
    the record's Kafka timestamp in ms (-1: unknown).

    Example:
        >>> encode_line("events", 1, 42, None, b"\xff\n", 1700000000000)
        b'events 1 42 - /wo= 1700000000000\n'
    """
    return f"{topic} {partition} {offset} {_b64(key)} {_b64(value)} {int(timestamp)}\n".encode("ascii")


def _fields(line: str) -> tuple[str, int, int, bytes | None, bytes | None, int]:
    fields = line.rstrip("\n").split(" ")
    try:
        if len(fields) == 5:  # written before lines carried the timestamp
            fields.append("-1")
        if len(fields) != 6:
            msg = f"expected 6 space-separated fields, got {len(fields)}"
            raise ValueError(msg)
        topic, partition, offset, key, value, timestamp = fields
        return topic, int(partition), int(offset), _unb64(key), _unb64(value), int(timestamp)
    except (ValueError, binascii.Error) as exc:
        shown = line if len(line) <= 120 else line[:117] + "..."
        msg = (
            f"not a receiver-bridge record line ({exc}): {shown!r}. The socket stream must be fed by "
            "legacy._receiver's bridge only; a truncated line means a connection was cut mid-record."
        )
        raise ValueError(msg) from None


def decode_line(line: str) -> tuple[str, int, int, bytes | None, bytes | None]:
    r"""The ``(topic, partition, offset, key, value)`` of a line made by :func:`encode_line` (newline optional).

    Raises:
        ValueError: the line is not a bridge line (wrong field count, bad number or bad base64).

    Example:
        >>> decode_line("events 1 42 - /wo= 1700000000000")
        ('events', 1, 42, None, b'\xff\n')
    """
    return _fields(line)[:5]


def decode_message(line: str) -> KafkaMessageAndMetadata:
    """The record of a bridge line as the :class:`~legacy.KafkaMessageAndMetadata` a ``messageHandler`` gets.

    It has the raw key and value, and the Kafka timestamp (-1 when unknown).

    Raises:
        ValueError: as :func:`decode_line`.

    Example:
        >>> m = decode_message("events 1 42 - aGk= 1700000000000")
        >>> (m.topic, m.partition, m.offset, m.key, m.message, m.timestamp)
        ('events', 1, 42, None, 'hi', 1700000000000)
    """
    topic, partition, offset, key, value, timestamp = _fields(line)
    return KafkaMessageAndMetadata(topic, partition, offset, key, value, timestamp)


def _timestamp(record: Any) -> int:
    # kafka-python gives None for messages without one (format v0, before Kafka 0.10).
    return -1 if record.timestamp is None else record.timestamp


def _utf8_decoder(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


class _DecodeRecord:
    """``line -> (key_decoder(key), value_decoder(value))``; a class so checkpoints can pickle it."""

    def __init__(
        self, key_decoder: Callable[[bytes | None], Any], value_decoder: Callable[[bytes | None], Any]
    ) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder

    def __call__(self, line: str) -> tuple[Any, Any]:
        _, _, _, key, value = decode_line(line)
        return self.key_decoder(key), self.value_decoder(value)


class _HandleMessage:
    """``line -> message_handler(KafkaMessageAndMetadata)`` with the stream's decoders; picklable."""

    def __init__(
        self,
        key_decoder: Callable[[bytes | None], Any],
        value_decoder: Callable[[bytes | None], Any],
        handler: Callable[[KafkaMessageAndMetadata], Any],
    ) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.handler = handler

    def __call__(self, line: str) -> Any:
        message = decode_message(line)
        message._set_key_decoder(self.key_decoder)
        message._set_value_decoder(self.value_decoder)
        return self.handler(message)


# -- the bridge ------------------------------------------------------------------------------------------------

#: Live bridges of this driver by id; the batch guard (pickled into checkpoints) finds its bridge here.
_BRIDGES: dict[str, ReceiverBridge] = {}
_BRIDGES_LOCK = threading.Lock()


@dataclass(frozen=True)
class BridgeStats:
    """Counters of one bridge (a snapshot).

    Attributes:
        polled: records taken from Kafka.
        sent: records written completely to a receiver connection.
        held: records taken but not yet written (its buffer plus the record being written).
        connections: receiver connections accepted so far (more than 1: Spark restarted the receiver).
        connected: whether a receiver is connected now.
        paused: whether the consumer is paused because the buffer is full.
    """

    polled: int
    sent: int
    held: int
    connections: int
    connected: bool
    paused: bool


class ReceiverBridge:
    """A consumer-group reader serving its records, one line each, to Spark's socket receiver.

    Created and started by :func:`create_receiver_stream`; use it directly only to inspect a stream
    (``stream.bridge``). Two daemon threads: ``dmk-receiver-consumer-<group>`` polls Kafka into a buffer of
    at most ``buffer_records`` records (plus one poll), pausing the partitions while it is full;
    ``dmk-receiver-server-<group>`` accepts the receiver's connection (a newer connection replaces an
    older one, as after a receiver restart) and writes the buffered records to it.

    A record counts as handed over (``sent``) once all its bytes are written to the connection; a record cut
    by a lost connection is sent again, whole, to the next one. Bytes written but not yet read by the
    receiver (socket buffers, a few hundred KB) are lost with a connection: that is the socket receiver's
    contract (no acknowledgements). On :meth:`close` the consumer is rewound to the first record not handed
    over and closed, which commits that position: a clean stop loses nothing the bridge still holds.

    Args:
        consumer: a subscribed kafka-python consumer (group, auto-commit); the bridge owns and closes it.
        group_id, topics: for messages.
        host, port: where to listen (port 0: any free port).
        buffer_records: the buffer's bound (default 2000).
        is_stopped: polled about once a second; True closes the bridge (the StreamingContext stopped).
    """

    def __init__(
        self,
        consumer: KafkaConsumer,
        *,
        group_id: str,
        topics: Sequence[str],
        host: str,
        port: int = 0,
        buffer_records: int = 2000,
        is_stopped: Callable[[], bool] | None = None,
    ) -> None:
        if buffer_records < 1:
            msg = f"buffer_records must be >= 1, got {buffer_records}"
            raise ConfigError(msg, field="buffer_records", expected=">= 1", actual=buffer_records)
        self.id = uuid.uuid4().hex
        self.group_id = group_id
        self.topics = sorted(topics)
        self.buffer_records = buffer_records
        self._consumer = consumer
        self._is_stopped = is_stopped
        self._listener = socket.create_server((host, port), backlog=4)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

        self._lock = threading.Condition()
        self._buffer: deque[tuple[TopicPartition, int, bytes]] = deque()  # guarded by _lock
        self._paused = False  # guarded by _lock
        self._polled = 0  # guarded by _lock
        # Owned by the server thread (read by others only after it ended, or as plain ints for stats).
        self._outgoing: deque[tuple[TopicPartition, int, bytes]] = deque()
        self._written = 0  # bytes of _outgoing[0] already written to the current connection
        self._conn: socket.socket | None = None
        self._sent = 0
        self._connections = 0

        self._stopping = threading.Event()
        self._closed = False
        self._error: ReceiverBridgeError | None = None
        self._consumer_thread = threading.Thread(
            target=self._consume, name=f"dmk-receiver-consumer-{group_id}", daemon=True
        )
        self._server_thread = threading.Thread(target=self._serve, name=f"dmk-receiver-server-{group_id}", daemon=True)

    # -- public ------------------------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` the bridge listens on (what the socket receiver connects to)."""
        return f"{self.host}:{self.port}"

    @property
    def error(self) -> ReceiverBridgeError | None:
        """Why the bridge failed, or None while it is healthy."""
        return self._error

    @property
    def threads(self) -> tuple[threading.Thread, threading.Thread]:
        """The consumer and server threads."""
        return self._consumer_thread, self._server_thread

    def is_alive(self) -> bool:
        """Whether either thread still runs."""
        return any(t.is_alive() for t in self.threads)

    def stats(self) -> BridgeStats:
        """A snapshot of the bridge's counters."""
        with self._lock:
            return BridgeStats(
                polled=self._polled,
                sent=self._sent,
                held=len(self._buffer) + len(self._outgoing),
                connections=self._connections,
                connected=self._conn is not None,
                paused=self._paused,
            )

    def start(self) -> ReceiverBridge:
        """Start both threads and register the bridge for the stream's batch guard."""
        with _BRIDGES_LOCK:
            _BRIDGES[self.id] = self
        self._server_thread.start()
        self._consumer_thread.start()
        log.info("receiver bridge for group %r, topics %s listening on %s", self.group_id, self.topics, self.address)
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop serving, rewind the consumer to the first record not handed over, commit it, close everything.

        Idempotent. Waits up to ``timeout_s`` (default 30 s) for the threads, then logs an error if one is
        still running (a consumer close blocked on an unreachable broker).
        """
        self._stopping.set()
        self._wake()
        with self._lock:
            self._lock.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            if thread.ident is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        if self._consumer_thread.ident is None:  # never started: nobody else closes these
            self._close_consumer(rewind=False)
            self._close_sockets()
        with _BRIDGES_LOCK:
            _BRIDGES.pop(self.id, None)
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive and not self._closed:
            log.error("receiver bridge %s: threads %s still running %g s after close", self.address, alive, timeout_s)
        self._closed = True

    def check(self) -> None:
        """Raise the bridge's error, if it failed or was closed while its stream still runs.

        Raises:
            ReceiverBridgeError: the consumer failed, or the bridge was closed.
        """
        if self._error is not None:
            raise self._error
        if self._stopping.is_set():
            raise self._new_error(
                reason="the bridge was closed while its stream still runs",
                fix="stop the StreamingContext before closing its bridge",
            )

    # -- internals ---------------------------------------------------------------------------------------------

    def _new_error(self, reason: str, fix: str, cause: BaseException | None = None) -> ReceiverBridgeError:
        return ReceiverBridgeError(
            group_id=self.group_id, topics=self.topics, address=self.address, reason=reason, fix=fix, cause=cause
        )

    def _wake(self) -> None:
        # OSError: full (a wake-up is pending anyway) or closed (the server ended).
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _consume(self) -> None:
        consumer = self._consumer
        try:
            while not self._stopping.is_set():
                with self._lock:
                    full = len(self._buffer) >= self.buffer_records
                    was_paused, self._paused = self._paused, full
                if full:
                    if not was_paused:
                        log.debug("receiver bridge %s: buffer full, pausing the consumer", self.address)
                    # Paused every time: partitions a rebalance assigns come unpaused. Polling on keeps the
                    # group membership and the auto-commits going while nothing is fetched.
                    consumer.pause(*consumer.assignment())
                    self._take(consumer.poll(timeout_ms=0))
                    with self._lock:
                        if len(self._buffer) >= self.buffer_records and not self._stopping.is_set():
                            self._lock.wait(0.5)
                    continue
                if was_paused:
                    consumer.resume(*consumer.paused())
                self._take(consumer.poll(timeout_ms=200))
        except Exception as exc:  # any failure of the consumer ends the stream, loudly
            self._error = self._new_error(
                "its Kafka consumer failed; records it had taken are still served, nothing more is read",
                "check the broker and the consumer settings, then stop the StreamingContext and start it again "
                "(the group re-reads from its last committed offsets)",
                exc,
            )
            log.error("%s", self._error, exc_info=exc)
            self._close_consumer(rewind=False)
            return
        # The server leaves its loop within half a watchdog period of the stop; past the deadline it is stuck (a
        # blocked write), may still hand records over, and rewinding would commit a position it then passes.
        self._server_thread.join(_SERVER_STOP_TIMEOUT_S)
        if self._server_thread.is_alive():
            log.error("receiver bridge %s: its server did not stop within %g s; closing the consumer without "
                      "committing (the group re-reads from its last commit)", self.address, _SERVER_STOP_TIMEOUT_S)
        self._close_consumer(rewind=not self._server_thread.is_alive())
        with _BRIDGES_LOCK:
            _BRIDGES.pop(self.id, None)

    def _take(self, batches: Mapping[TopicPartition, Iterable[Any]]) -> None:
        lines = [
            (
                tp,
                record.offset,
                encode_line(tp.topic, tp.partition, record.offset, record.key, record.value, _timestamp(record)),
            )
            for tp, records in batches.items()
            for record in records
        ]
        if lines:
            with self._lock:
                self._buffer.extend(lines)
                self._polled += len(lines)
            self._wake()

    def _close_consumer(self, *, rewind: bool) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            if rewind:
                first_held: dict[TopicPartition, int] = {}
                with self._lock:
                    for tp, offset, _ in (*self._outgoing, *self._buffer):
                        first_held.setdefault(tp, offset)
                assigned = consumer.assignment()
                for tp, offset in first_held.items():
                    if tp in assigned:
                        consumer.seek(tp, offset)
                if first_held:
                    log.info("receiver bridge %s: %d records not handed over; committing their offsets as the "
                             "group's position: %s", self.address, len(self._outgoing) + len(self._buffer), first_held)
            consumer.close(autocommit=rewind)
        except Exception:  # closing must not mask the stop; the group re-reads from its last commit
            log.exception(
                "receiver bridge %s: closing the Kafka consumer of group %r failed", self.address, self.group_id
            )

    def _serve(self) -> None:
        next_watch = time.monotonic() + _WATCHDOG_PERIOD_S
        try:
            while not self._stopping.is_set():
                if self._is_stopped is not None and time.monotonic() >= next_watch:
                    next_watch = time.monotonic() + _WATCHDOG_PERIOD_S
                    if self._watch_says_stopped():
                        log.info("receiver bridge %s: its StreamingContext stopped; closing", self.address)
                        self._stopping.set()
                        with self._lock:
                            self._lock.notify_all()
                        break
                conn = self._conn
                readable = [self._listener, self._wake_r] + ([conn] if conn is not None else [])
                writable = [conn] if conn is not None and self._has_output() else []
                ready_r, ready_w, _ = select.select(readable, writable, [], _WATCHDOG_PERIOD_S / 2)
                if self._wake_r in ready_r:
                    self._drain_wake()
                if self._listener in ready_r:
                    self._accept()
                if conn is not None and conn is self._conn and conn in ready_r:
                    self._read_or_drop(conn)
                if conn is not None and conn is self._conn and conn in ready_w:
                    self._write(conn)
        except Exception as exc:  # the server failing ends the stream like the consumer failing
            self._error = self._error or self._new_error(
                "its socket server failed", "stop the StreamingContext and start it again", exc
            )
            log.error("%s", self._error, exc_info=exc)
            self._stopping.set()
            with self._lock:
                self._lock.notify_all()
        finally:
            self._close_sockets()

    def _watch_says_stopped(self) -> bool:
        try:
            return bool(self._is_stopped())  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - the JVM is gone: so is the StreamingContext
            return True

    def _close_sockets(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _accept(self) -> None:
        try:
            conn, peer = self._listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_SEND_BUFFER_BYTES)
        if self._conn is not None:
            log.warning("receiver bridge %s: a new receiver connected from %s; dropping the previous connection "
                        "(Spark restarted the receiver)", self.address, peer)
            self._drop()
        with self._lock:
            self._conn = conn
            self._connections += 1
        log.info("receiver bridge %s: receiver connected from %s", self.address, peer)

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        # The record being written goes again, whole, to the next connection.
        self._written = 0

    def _read_or_drop(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError as exc:
            log.info("receiver bridge %s: receiver connection lost (%s)", self.address, exc)
            self._drop()
            return
        if not data:
            log.info("receiver bridge %s: receiver disconnected", self.address)
            self._drop()

    def _has_output(self) -> bool:
        if self._outgoing:
            return True
        with self._lock:
            return bool(self._buffer)

    def _write(self, conn: socket.socket) -> None:
        size = sum(len(line) for _, _, line in self._outgoing) - self._written
        if size < _SEND_CHUNK_BYTES:
            with self._lock:
                while self._buffer and size < _SEND_CHUNK_BYTES:
                    item = self._buffer.popleft()
                    self._outgoing.append(item)
                    size += len(item[2])
                if len(self._buffer) < self.buffer_records:
                    self._lock.notify_all()
        if not self._outgoing:
            return
        chunk = b"".join([self._outgoing[0][2][self._written:], *(line for _, _, line in list(self._outgoing)[1:])])
        try:
            sent = conn.send(chunk)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.info("receiver bridge %s: receiver connection lost while writing (%s)", self.address, exc)
            self._drop()
            return
        done = 0
        while sent > 0:
            remaining = len(self._outgoing[0][2]) - self._written
            if sent >= remaining:
                sent -= remaining
                self._outgoing.popleft()
                self._written = 0
                done += 1
            else:
                self._written += sent
                sent = 0
        if done:
            with self._lock:
                self._sent += done


# -- the stream ------------------------------------------------------------------------------------------------


class _BatchGuard:
    """Runs on the driver as each batch is generated: fails the batch when the stream's bridge failed.

    Holds only the bridge's id, so a checkpoint can pickle it; a driver restored from a checkpoint has no
    bridge with that id and fails its batches with a message saying so.
    """

    def __init__(self, bridge_id: str, group_id: str, topics: Sequence[str], address: str) -> None:
        self.bridge_id = bridge_id
        self.group_id = group_id
        self.topics = list(topics)
        self.address = address

    def __call__(self, rdd: Any) -> Any:
        with _BRIDGES_LOCK:
            bridge = _BRIDGES.get(self.bridge_id)
        if bridge is None:
            raise ReceiverBridgeError(
                group_id=self.group_id,
                topics=self.topics,
                address=self.address,
                reason="no bridge for this stream runs in this driver (a StreamingContext restored from a "
                "checkpoint re-creates Spark's socket receiver, not the bridge it reads from)",
                fix="receiver streams cannot be restored from a checkpoint; create the StreamingContext anew "
                "(the group resumes from its committed offsets), or use the direct stream with checkpointing",
            )
        bridge.check()
        return rdd


def _guarded(guard: _BatchGuard) -> Callable[[Any], Any]:
    # DStream.transform inspects ``__code__`` for the argument count, which a callable object lacks.
    def check(rdd: Any) -> Any:
        return guard(rdd)

    return check


class ReceiverKafkaDStream(DStream):
    """The receiver-based Kafka stream: a DStream of ``(key, value)`` with its :class:`ReceiverBridge`."""

    def __init__(self, jdstream: Any, ssc: Any, jrdd_deserializer: Any, bridge: ReceiverBridge) -> None:
        super().__init__(jdstream, ssc, jrdd_deserializer)
        self.bridge = bridge


def _normalise_topics(topics: Mapping[str, int] | Sequence[str]) -> list[str]:
    if isinstance(topics, str) or not isinstance(topics, (Mapping, Sequence)):
        msg = f"topics must be a dict {{topic: numThreads}} (Spark 2.4) or a list of topic names, got {topics!r}"
        raise ConfigError(
            msg,
            field="topics", expected="dict[str, int] or list[str]", actual=topics,
        )
    if isinstance(topics, Mapping):
        for topic, threads in topics.items():
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                msg = f"topics[{topic!r}] (numThreads) must be an integer >= 1, got {threads!r}"
                raise ConfigError(
                    msg,
                    field="topics", expected="int >= 1", actual=threads,
                )
    names = list(topics)
    if not names or any(not isinstance(t, str) or not t or " " in t for t in names):
        msg = f"topics must name at least one topic, each a non-empty string without spaces, got {names!r}"
        raise ConfigError(
            msg,
            field="topics", expected="non-empty topic names", actual=names,
        )
    return sorted(set(names))


def _default_host(ssc: Any) -> str:
    sc = ssc.sparkContext
    if sc.master.startswith("local"):
        return "127.0.0.1"
    host = sc.getConf().get("spark.driver.host")
    if not host:
        msg = (
            f"cannot tell which address executors reach this driver on (master {sc.master!r}, no spark.driver.host); "
            "pass bridge_host=<an address of this machine the executors can connect to>"
        )
        raise ConfigError(
            msg,
            field="bridge_host", expected="a host name or IP address", actual=None,
        )
    return host


def _register_cleanup(ssc: Any, bridge: ReceiverBridge) -> None:
    """Close ``bridge`` when ``ssc.stop`` returns (after Spark stopped the receiver that reads from it)."""
    bridges: list[ReceiverBridge] | None = ssc.__dict__.get("_dmk_receiver_bridges")
    if bridges is None:
        registered: list[ReceiverBridge] = []
        bridges = ssc.__dict__["_dmk_receiver_bridges"] = registered
        original_stop = ssc.stop

        @functools.wraps(original_stop)
        def stop(stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:  # noqa: N803 - PySpark's names
            try:
                original_stop(stopSparkContext, stopGraceFully)
            finally:
                for each in registered:
                    each.close()

        ssc.stop = stop
    bridges.append(bridge)


def _jvm_context_stopped(ssc: Any) -> Callable[[], bool]:
    jssc = ssc._jssc

    def stopped() -> bool:
        return str(jssc.getState()) == "STOPPED"

    return stopped


def create_receiver_stream(
    ssc: Any,
    bootstrap_servers: str,
    group_id: str,
    topics: Mapping[str, int] | Sequence[str],
    *,
    storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK_2,
    key_decoder: Callable[[bytes | None], Any] = _utf8_decoder,
    value_decoder: Callable[[bytes | None], Any] = _utf8_decoder,
    auto_offset_reset: str = "largest",
    kafka_settings: Mapping[str, Any] | None = None,
    bridge_host: str | None = None,
    bridge_port: int = 0,
    buffer_records: int = 2000,
    message_handler: Callable[[KafkaMessageAndMetadata], Any] | None = None,
) -> ReceiverKafkaDStream:
    """A receiver-based input stream of ``(key, value)`` from a Kafka consumer group, as 2.4's ``createStream``.

    Starts the bridge (consumer joins ``group_id``, server listens) at once; Spark's socket receiver connects
    when ``ssc`` starts. ``ssc.stop(...)`` closes the bridge after Spark stopped the receiver.

    Args:
        ssc: the StreamingContext.
        bootstrap_servers: Kafka ``host:port[,...]`` (2.4 took a ZooKeeper quorum; group offsets now live in
            Kafka).
        group_id: the consumer group; its committed offsets say where reading starts.
        topics: ``{topic: numThreads}`` as in 2.4 (numThreads must be >= 1; one consumer reads every
            partition, so it only validates), or a list of topic names. Every topic must exist.
        storage_level: how Spark stores received blocks; default ``MEMORY_AND_DISK_2`` as in 2.4 (with the
            write-ahead log on, use a non-replicated level: the log is the second copy).
        key_decoder: bytes (None for a record without key) -> key; default UTF-8 decoding, None stays None.
        value_decoder: bytes (None for a tombstone) -> value; default UTF-8 decoding.
        auto_offset_reset: where a group without committed offsets starts: ``"largest"`` (default, as 2.4's
            high-level consumer) / ``"latest"``, or ``"smallest"`` / ``"earliest"``.
        kafka_settings: extra kafka-python consumer settings (security, ``client_id``,
            ``auto_commit_interval_ms``...), validated by :func:`kit.kafka.client_settings`.
        bridge_host: the address the bridge listens on and the receiver connects to. Default: ``127.0.0.1``
            for local masters, else ``spark.driver.host``; with a cluster master it must be an address of
            the driver that the executor running the receiver can reach.
        bridge_port: the port to listen on; default 0, any free port.
        buffer_records: records the bridge may hold beyond one poll (default 2000) before pausing the
            consumer.
        message_handler: as ``createDirectStream``'s (2.4's ``createStream`` had none): called with each
            record's :class:`~legacy.KafkaMessageAndMetadata` (key and message decoded by the decoders on
            access, ``timestamp`` the Kafka timestamp); its result is the stream's element instead of
            ``(key, value)``.

    Returns:
        A :class:`ReceiverKafkaDStream` (``stream.bridge`` is its :class:`ReceiverBridge`).

    Raises:
        ConfigError: a bad argument or an unknown Kafka setting.
        UnknownTopic: a topic does not exist.
        BrokerUnavailable: no broker answers at ``bootstrap_servers``.
    """
    # Every Python DStream operation of every batch is a callback from the JVM: make each skip a Java exception.
    _install_callbacks()
    names = _normalise_topics(topics)
    if not isinstance(group_id, str) or not group_id:
        msg = f"group_id must be a non-empty string, got {group_id!r}"
        raise ConfigError(msg, field="group_id", expected="str", actual=group_id)
    reset = _OFFSET_RESET.get(auto_offset_reset)
    if reset is None:
        msg = f"auto_offset_reset must be one of {sorted(_OFFSET_RESET)}, got {auto_offset_reset!r}"
        raise ConfigError(
            msg,
            field="auto_offset_reset", expected=sorted(_OFFSET_RESET), actual=auto_offset_reset,
        )
    checked: dict[str, object] = {"key_decoder": key_decoder, "value_decoder": value_decoder}
    if message_handler is not None:
        checked["message_handler"] = message_handler
    for name, decoder in checked.items():
        if not callable(decoder):
            msg = f"{name} must be callable, got {decoder!r}"
            raise ConfigError(msg, field=name, expected="callable", actual=decoder)
    settings = client_settings(kafka_settings)
    with Kafka(bootstrap_servers, settings=settings, timeout_s=30) as kafka:
        for topic in names:
            kafka.partitions(topic)  # UnknownTopic, instead of a stream that silently waits
    config = {
        "allow_auto_create_topics": False,
        **{k: v for k, v in python_client_config({**process_settings(), **settings}).items()
           if k in KafkaConsumer.DEFAULT_CONFIG},
    }
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            enable_auto_commit=True,
            auto_offset_reset=reset,
            **config,
        )
    except (KafkaTimeoutError, OSError) as exc:
        raise BrokerUnavailable(bootstrap_servers, str(exc)) from exc
    except KafkaConfigurationError as exc:
        msg = f"invalid Kafka consumer settings: {exc}"
        raise ConfigError(msg, field="kafka_settings", actual=settings) from exc
    try:
        consumer.subscribe(names)
        bridge = ReceiverBridge(
            consumer,
            group_id=group_id,
            topics=names,
            host=bridge_host or _default_host(ssc),
            port=bridge_port,
            buffer_records=buffer_records,
            is_stopped=_jvm_context_stopped(ssc),
        )
    except BaseException:
        consumer.close(autocommit=False)
        raise
    try:
        lines = ssc.socketTextStream(bridge.host, bridge.port, storage_level)
        guard = _guarded(_BatchGuard(bridge.id, group_id, names, bridge.address))
        decode = (
            _DecodeRecord(key_decoder, value_decoder)
            if message_handler is None
            else _HandleMessage(key_decoder, value_decoder, message_handler)
        )
        decoded = lines.transform(guard).map(decode)
        stream = ReceiverKafkaDStream(decoded._jdstream, ssc, decoded._jrdd_deserializer, bridge)
    except BaseException:
        bridge.close()
        raise
    _register_cleanup(ssc, bridge)
    bridge.start()
    return stream
