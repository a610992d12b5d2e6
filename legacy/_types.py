"""The value types of Spark 2.4's ``pyspark.streaming.kafka``, same names, arguments and defaults.

Re-exported by :mod:`legacy.kafka`; see there for the API. Differences from 2.4: the classes validate their
arguments (``ConfigError``), are immutable and hashable, and have a ``repr`` that round-trips.

Example:
    >>> OffsetRange("events", 0, 0, 10) == OffsetRange("events", 0, 0, 10)
    True
    >>> str(OffsetRange("events", 0, 0, 10))
    'OffsetRange(topic: events, partition: 0, range: [0 -> 10]'
    >>> OffsetRange("events", 0, 0, 10)
    OffsetRange(topic='events', partition=0, fromOffset=0, untilOffset=10)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kit import ranges
from kit.errors import ConfigError

__all__ = ["Broker", "KafkaMessageAndMetadata", "OffsetRange", "TopicAndPartition", "utf8_decoder"]


def utf8_decoder(s: bytes | None) -> str | None:
    """Decode bytes as UTF-8; None stays None (a record without a key). The default key and value decoder."""
    if s is None:
        return None
    return s.decode("utf-8")


def _check_int(name: str, value: object, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {value!r}"
        raise ConfigError(msg, field=name, expected=f"int >= {minimum}", actual=value)


def _check_topic(topic: object) -> None:
    if not isinstance(topic, str) or not topic:
        msg = f"topic must be a non-empty string, got {topic!r}"
        raise ConfigError(msg, field="topic", expected="str", actual=topic)


class OffsetRange(ranges.OffsetRange):
    """A range of offsets ``[fromOffset, untilOffset)`` of one Kafka topic-partition, as Spark 2.4 names it.

    Spark 2.4's API on the kit's :class:`kit.ranges.OffsetRange`, which it is: the kit's code takes it as it is.

    Attributes:
        topic: Kafka topic name.
        partition: Kafka partition id.
        fromOffset: inclusive starting offset.
        untilOffset: exclusive ending offset.

    Raises:
        ConfigError: negative values or ``fromOffset > untilOffset``.
        InvalidOffsetRange: a topic name Kafka would refuse.
    """

    def __init__(self, topic: str, partition: int, fromOffset: int, untilOffset: int) -> None:  # noqa: N803
        _check_topic(topic)
        _check_int("partition", partition)
        _check_int("fromOffset", fromOffset)
        _check_int("untilOffset", untilOffset)
        if untilOffset < fromOffset:
            msg = f"untilOffset {untilOffset} is before fromOffset {fromOffset} for {topic}-{partition}"
            raise ConfigError(msg, field="untilOffset", expected=f">= {fromOffset}", actual=untilOffset)
        super().__init__(topic, partition, fromOffset, untilOffset)

    def __repr__(self) -> str:
        return (f"OffsetRange(topic={self.topic!r}, partition={self.partition!r}, fromOffset={self.fromOffset!r}, "
                f"untilOffset={self.untilOffset!r})")

    def __str__(self) -> str:
        # Spark 2.4's text exactly, unbalanced parenthesis included: jobs log and sometimes parse it.
        return "OffsetRange(topic: %s, partition: %d, range: [%d -> %d]" % (  # noqa: UP031 - Spark 2.4's formatting
            self.topic, self.partition, self.fromOffset, self.untilOffset,
        )


@dataclass(frozen=True)
class TopicAndPartition:
    """A Kafka topic and partition (the key type of ``fromOffsets`` and ``leaders``).

    Attributes:
        topic: Kafka topic name.
        partition: Kafka partition id.
    """

    topic: str
    partition: int

    def __post_init__(self) -> None:
        _check_topic(self.topic)
        _check_int("partition", self.partition)

    # Spark 2.4 kept these private; code that reached into them keeps working.
    @property
    def _topic(self) -> str:
        return self.topic

    @property
    def _partition(self) -> int:
        return self.partition


@dataclass(frozen=True)
class Broker:
    """Host and port of a Kafka broker (the value type of ``createRDD``'s ``leaders``).

    Attributes:
        host: broker host name.
        port: broker port.
    """

    host: str
    port: int

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            msg = f"host must be a non-empty string, got {self.host!r}"
            raise ConfigError(msg, field="host", expected="str", actual=self.host)
        _check_int("port", self.port, 1)

    @property
    def _host(self) -> str:
        return self.host

    @property
    def _port(self) -> int:
        return self.port


class KafkaMessageAndMetadata:
    """One Kafka record as a ``messageHandler`` sees it: topic, partition, offset, key and message.

    ``key`` and ``message`` are decoded on access with the stream's ``keyDecoder`` / ``valueDecoder``
    (:func:`utf8_decoder` unless set); the raw bytes are compared, hashed and pickled.

    Args:
        topic: topic name.
        partition: partition id.
        offset: the record's offset.
        key: raw key bytes (None for a record without key).
        message: raw value bytes (None for a tombstone).
        timestamp: the record's Kafka timestamp in milliseconds, -1 when unknown. Not in 2.4's 0.8 class
            (0.8 messages had no timestamp); added as the 0-10 ``ConsumerRecord.timestamp()`` so that jobs can
            measure latency.
    """

    __slots__ = (
        "topic", "partition", "offset", "timestamp", "_rawKey", "_rawMessage", "_keyDecoder", "_valueDecoder",
    )

    def __init__(
        self, topic: str, partition: int, offset: int, key: bytes | None, message: bytes | None, timestamp: int = -1
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self._rawKey = key
        self._rawMessage = message
        self._keyDecoder: Callable[[bytes | None], Any] = utf8_decoder
        self._valueDecoder: Callable[[bytes | None], Any] = utf8_decoder

    def _set_key_decoder(self, decoder: Callable[[bytes | None], Any]) -> None:
        self._keyDecoder = decoder

    def _set_value_decoder(self, decoder: Callable[[bytes | None], Any]) -> None:
        self._valueDecoder = decoder

    @property
    def key(self) -> Any:
        """The key, decoded with the key decoder."""
        return self._keyDecoder(self._rawKey)

    @property
    def message(self) -> Any:
        """The value, decoded with the value decoder."""
        return self._valueDecoder(self._rawMessage)

    def _identity(self) -> tuple[Any, ...]:
        return (self.topic, self.partition, self.offset, self._rawKey, self._rawMessage)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaMessageAndMetadata):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __reduce__(self) -> tuple[Any, ...]:
        return (KafkaMessageAndMetadata, (*self._identity(), self.timestamp))

    def __str__(self) -> str:
        return "KafkaMessageAndMetadata(topic: %s, partition: %d, offset: %d, key and message...)" % (  # noqa: UP031
            self.topic, self.partition, self.offset,
        )

    def __repr__(self) -> str:
        return (
            f"KafkaMessageAndMetadata(topic={self.topic!r}, partition={self.partition!r}, offset={self.offset!r}, "
            f"key={self._rawKey!r}, message={self._rawMessage!r})"
        )
