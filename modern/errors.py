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
    "ContinuousTriggerUnsupported",
    "GracefulStopTimeout",
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


class ContinuousTriggerUnsupported(ConfigError, ModernError):
    """A query asked for ``trigger(continuous=...)``, which the kit's sources and sinks cannot run.

    Continuous processing needs a JVM source and sink that implement it (Spark's ``kafka`` connector, ``rate``);
    Spark refuses a Python data source (``kafka-py``) and ``foreachBatch`` under it only when the query starts.

    Attributes:
        trigger: the trigger as given.
        where: what asked for it (a function, a run config field).
    """

    def __init__(self, trigger: object, *, where: str) -> None:
        self.trigger = trigger
        self.where = where
        super().__init__(
            f"{where}: trigger {trigger!r} asks for continuous processing, which needs a JVM source and sink that "
            "support it (Spark's 'kafka' connector, 'rate'); the kit's 'kafka-py' source is a Python data source and "
            "foreachBatch runs micro-batches, so Spark would refuse the query at start. Expected 'once', "
            "'availableNow' or a processing-time interval such as '1 second'. Fix: use a processing-time trigger "
            "('0 seconds' starts each micro-batch as soon as the last one ends, the lowest latency a micro-batch "
            "query has), or Spark's JVM Kafka connector with a JVM sink if you need continuous processing.",
            field="trigger", expected="'once' | 'availableNow' | '<n> seconds'", actual=trigger,
        )


class GracefulStopTimeout(ModernError):
    """A graceful stop did not find the query between micro-batches before its deadline.

    The query is left running: stop it with ``query.stop()`` (the running micro-batch is then re-run after a
    restart) or try again with a longer timeout.

    Attributes:
        query: the query's name (or id).
        timeout_s: the deadline.
        last_status: the last ``query.status`` seen.
        last_batch: the last committed batch id seen (None: none yet).
    """

    def __init__(self, query: str, timeout_s: float, last_status: object, last_batch: int | None) -> None:
        self.query = query
        self.timeout_s = timeout_s
        self.last_status = last_status
        self.last_batch = last_batch
        super().__init__(
            f"query {query!r} was not between micro-batches within {timeout_s:g} s (last committed batch "
            f"{last_batch}, last status {last_status}); it is still running. Expected a gap between micro-batches: "
            "a processing-time trigger longer than a batch gives one. Fix: raise timeout_s, use a longer "
            "processing-time trigger, or call query.stop() and rely on an idempotent sink for the re-run batch."
        )
