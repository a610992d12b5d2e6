"""Errors raised by the Structured Streaming side.

Example:
    >>> err = KafkaOptionError("minPartitions must be positive", option="minPartitions")
    >>> err.option
    'minPartitions'
"""

from __future__ import annotations

from kit.errors import ConfigError, KitError

__all__ = ["KafkaDataLoss", "KafkaOptionError", "KafkaSinkError"]


class KafkaOptionError(ConfigError):
    """A Kafka source or sink option is missing, unknown, forbidden or invalid.

    Attributes:
        option: the option at fault, in Spark's spelling.
    """

    def __init__(self, message: str, *, option: str) -> None:
        self.option = option
        super().__init__(message, field=option)


class KafkaDataLoss(KitError):
    """Offsets the query needs are gone (retention, or a deleted and re-created topic), failOnDataLoss=true.

    Attributes:
        topic, partition: where.
        expected_from: the offset the query needed to read from.
        available_from: the first offset the partition holds now.
    """

    def __init__(self, message: str, *, topic: str, partition: int, expected_from: int, available_from: int) -> None:
        self.topic = topic
        self.partition = partition
        self.expected_from = expected_from
        self.available_from = available_from
        super().__init__(
            message + ". Some data may have been lost because they are not available in Kafka any more; either the "
            "data was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
            "processed. If you don't want your streaming query to fail on such cases, set the source option "
            '"failOnDataLoss" to "false".'
        )


class KafkaSinkError(KitError):
    """The Kafka sink's input is not writable, or the broker did not acknowledge every record."""
