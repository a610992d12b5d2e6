"""Errors raised by the Structured Streaming side.

Example:
    >>> err = KafkaOptionError("minPartitions must be positive", option="minPartitions")
    >>> err.option
    'minPartitions'
"""

from __future__ import annotations

from kit.errors import CheckpointNotFound, ConfigError, KitError

__all__ = [
    "CheckpointDamaged",
    "CheckpointNotFound",
    "KafkaDataLoss",
    "KafkaOptionError",
    "KafkaOptionWarning",
    "KafkaSinkError",
    "ModernError",
    "NotAModernCheckpoint",
    "checkpoint_not_found",
]


class ModernError(KitError):
    """Base class of the errors only the Structured Streaming side raises."""


class KafkaOptionError(ConfigError, ModernError):
    """A Kafka source or sink option is missing, unknown, forbidden or invalid.

    Attributes:
        option: the option at fault, in Spark's spelling.
    """

    def __init__(self, message: str, *, option: str) -> None:
        self.option = option
        super().__init__(message, field=option)


class KafkaOptionWarning(UserWarning):
    """An option Spark's connector accepts that has no effect here (or a misspelt one, which Spark ignores)."""


class KafkaDataLoss(ModernError):
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


class KafkaSinkError(ModernError):
    """The Kafka sink's input is not writable, or the broker did not acknowledge every record."""


_CHECKPOINT_HOLDS = (
    "a query's checkpointLocation holds metadata (the query id), offsets/ and commits/ (one file per batch), "
    "and state/ when the query is stateful"
)


def _names(names: tuple[str, ...], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


class NotAModernCheckpoint(ModernError):
    """A directory given as a Structured Streaming checkpoint location is not one (no offsets/, no metadata).

    Attributes:
        path: the directory.
        entries: the names it holds (sorted).
        queries: names of query checkpoints one level down, if it is a root of several (else empty).
        inside: the query checkpoint ``path`` lies inside, if any (else None).
    """

    def __init__(
        self, path: object, *, entries: tuple[str, ...] = (), queries: tuple[str, ...] = (), inside: object = None
    ) -> None:
        self.path = str(path)
        self.entries = tuple(entries)
        self.queries = tuple(queries)
        self.inside = None if inside is None else str(inside)
        found = f"it holds {_names(self.entries)}" if self.entries else "it is empty"
        if self.queries:
            fix = (
                f"It holds query checkpoints one level down: {_names(self.queries)}. "
                f"Inspect one of those, e.g. {self.path.rstrip('/')}/{self.queries[0]}."
            )
        elif self.inside is not None:
            fix = f"It lies inside the query checkpoint {self.inside}: inspect that directory."
        elif any(name.startswith("checkpoint-") for name in self.entries):
            fix = (
                "Its checkpoint-<time> files are a DStream (Spark Streaming) checkpoint; only Structured Streaming "
                "checkpoints can be inspected. Pass the directory given as a query's checkpointLocation option."
            )
        else:
            fix = "Pass the directory given as a query's checkpointLocation option."
        super().__init__(
            f"{self.path} is not a Structured Streaming checkpoint: it has neither offsets/ nor metadata ({found}); "
            f"{_CHECKPOINT_HOLDS}. {fix}"
        )


def checkpoint_not_found(path: object, *, is_file: bool = False) -> CheckpointNotFound:
    """The :class:`~kit.errors.CheckpointNotFound` for a query checkpoint location, with the fix."""
    fix = (f"{_CHECKPOINT_HOLDS}. Pass the directory given as the query's checkpointLocation option (the kit's "
           "runners use <checkpoint_dir>/<query name>).")
    return CheckpointNotFound(path, fix=fix, is_file=is_file)


class CheckpointDamaged(ModernError):
    """A file of a Structured Streaming checkpoint is missing or cannot be read as Spark writes it.

    Attributes:
        path: the file.
        line: the 1-based line at fault, or None (a missing file, a problem not tied to a line).
        expected: what Spark writes there.
        actual: what the file holds there (shortened to 200 characters).
    """

    def __init__(self, path: object, *, line: int | None, expected: str, actual: str, fix: str) -> None:
        self.path = str(path)
        self.line = line
        self.expected = expected
        self.actual = actual if len(actual) <= 200 else actual[:200] + "..."
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"checkpoint file {where}: expected {expected}, got {self.actual!r}. {fix}")
