"""The kit's one offset-range type: the records ``from_offset <= offset < until_offset`` of one topic-partition.

Every engine reports what its batches read as :class:`OffsetRange` values (``Engine.processed_ranges``), the
legacy offset stores commit them, and legacy's Spark 2.4 ``OffsetRange`` (``pyspark.streaming.kafka``'s API,
camelCase) is built on it. A source that is not Kafka (a socket, files) reports the rows it delivered as the
range of the pseudo-topic :data:`LINES`, partition 0.

Example:
    >>> r = OffsetRange("events", 0, 10, 25)
    >>> r.count(), r.fromOffset, r.untilOffset, tuple(r)
    (15, 10, 25, ('events', 0, 10, 25))
    >>> OffsetRange("events", 0, 5, 3)
    Traceback (most recent call last):
    ...
    kit.errors.InvalidOffsetRange: invalid offset range ('events', 0, 5, 3): until_offset 3 < from_offset 5. An offset range is a (topic, partition, from_offset, until_offset) tuple or an object with .topic, .partition and .fromOffset/.untilOffset (or .from_offset/.until_offset), with 0 <= from_offset <= until_offset.
"""  # noqa: E501 - a doctest's exception line

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import SupportsIndex, cast

from kafka import TopicPartition

from kit.errors import InvalidOffsetRange

__all__ = ["LINES", "TOPIC_NAME", "OffsetRange", "integer"]

LINES = "lines"
"""The pseudo-topic of a source that is not Kafka: its range counts the rows it delivered."""

TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
"""Kafka's own rule for topic names; it also keeps a name safe as one ZooKeeper path segment."""


@dataclass(frozen=True, order=True)
class OffsetRange:
    """The records ``from_offset <= offset < until_offset`` of one topic-partition.

    Also readable under Spark's names (``fromOffset``, ``untilOffset``), and unpacked as the tuple
    ``(topic, partition, from_offset, until_offset)``.

    Raises:
        InvalidOffsetRange: a topic name Kafka would refuse, a negative partition or offset, or
            ``until_offset < from_offset``.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __post_init__(self) -> None:
        as_given = (self.topic, self.partition, self.from_offset, self.until_offset)
        if not isinstance(self.topic, str) or not TOPIC_NAME.fullmatch(self.topic):
            raise InvalidOffsetRange(as_given, f"topic {self.topic!r} is not a Kafka topic name ([A-Za-z0-9._-]+)")
        try:
            numbers = [integer(v) for v in as_given[1:]]
        except TypeError as exc:
            raise InvalidOffsetRange(as_given, str(exc)) from None
        partition, from_offset, until_offset = numbers
        if partition < 0 or from_offset < 0:
            raise InvalidOffsetRange(as_given, "partition and offsets must be >= 0")
        if until_offset < from_offset:
            raise InvalidOffsetRange(as_given, f"until_offset {until_offset} < from_offset {from_offset}")
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "from_offset", from_offset)
        object.__setattr__(self, "until_offset", until_offset)

    def __iter__(self) -> Iterator[str | int]:
        """``topic, partition, from_offset, until_offset``: the range as the tuple it is often written as."""
        return iter((self.topic, self.partition, self.from_offset, self.until_offset))

    @property
    def fromOffset(self) -> int:  # noqa: N802 - Spark's name
        """``from_offset``, under Spark's name."""
        return self.from_offset

    @property
    def untilOffset(self) -> int:  # noqa: N802 - Spark's name
        """``until_offset``, under Spark's name."""
        return self.until_offset

    @property
    def topic_partition(self) -> TopicPartition:
        """``TopicPartition(topic, partition)``."""
        return TopicPartition(self.topic, self.partition)

    def count(self) -> int:
        """Number of offsets in the range (Spark's ``OffsetRange.count()``)."""
        return self.until_offset - self.from_offset


def integer(value: object) -> int:
    """``value`` as an int if it is one (int, numpy integer, py4j long); TypeError for a bool, float or string."""
    if isinstance(value, bool):
        msg = f"{value!r} is a bool, not an integer"
        raise TypeError(msg)
    try:
        # int, numpy integers, py4j longs; never floats or strings (operator.index raises TypeError for those)
        return operator.index(cast(SupportsIndex, value))
    except TypeError:
        msg = f"{value!r} ({type(value).__name__}) is not an integer"
        raise TypeError(msg) from None
