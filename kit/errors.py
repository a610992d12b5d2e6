"""Errors raised by the engine-neutral kit.

Every error the kit raises derives from :class:`KitError`, carries the facts as attributes (so tests and
callers can branch on them) and has a message that says what failed, where, what was expected, what was
found, and what to do about it.

Example:
    >>> try:
    ...     raise OffsetOutOfRange("events", 0, requested=(0, 10), available=(0, 5))
    ... except KitError as err:
    ...     print(err.partition, err.available)
    0 (0, 5)
"""

from __future__ import annotations

__all__ = [
    "CheckpointNotFound",
    "ClusterError",
    "BrokerError",
    "BrokerUnavailable",
    "ConfigError",
    "ConnectError",
    "DatasetError",
    "InvalidOffsetRange",
    "KafkaConnectionRefused",
    "KafkaTimeout",
    "KitError",
    "OffsetOutOfRange",
    "ReplayError",
    "RunTimeout",
    "TopicConfigurationMismatch",
    "UnknownTopic",
]


class KitError(Exception):
    """Base class of every error the kit raises on purpose."""


class ConfigError(KitError, ValueError):
    """A setting is unknown, missing or out of range.

    Attributes:
        field: the setting's name, when one setting is at fault (else None).
        expected: what it must be.
        actual: what it was.
    """

    def __init__(
        self, message: str, *, field: str | None = None, expected: object = None, actual: object = None
    ) -> None:
        self.field = field
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class InvalidOffsetRange(KitError, ValueError):
    """Something passed as an offset range is not one.

    Attributes:
        value: what was passed.
        problem: what is wrong with it.
    """

    def __init__(self, value: object, problem: str) -> None:
        self.value = value
        self.problem = problem
        super().__init__(
            f"invalid offset range {value!r}: {problem}. An offset range is a (topic, partition, from_offset, "
            "until_offset) tuple or an object with .topic, .partition and .fromOffset/.untilOffset "
            "(or .from_offset/.until_offset), with 0 <= from_offset <= until_offset."
        )


class BrokerError(KitError):
    """The embedded broker could not be found, started or stopped.

    Attributes:
        log_tail: the last lines of the broker's log, when there is one.
    """

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        self.log_tail = log_tail
        if log_tail:
            message = f"{message}\n--- broker log (last lines) ---\n{log_tail}"
        super().__init__(message)


class BrokerUnavailable(KitError):
    """No Kafka broker answered at the given bootstrap servers."""

    def __init__(self, bootstrap_servers: str, detail: str = "") -> None:
        self.bootstrap_servers = bootstrap_servers
        super().__init__(
            f"no Kafka broker answered at {bootstrap_servers!r}{': ' + detail if detail else ''}. "
            "Check the address and that the broker is running, or leave out --bootstrap-servers "
            "to use the embedded broker."
        )


class KafkaConnectionRefused(BrokerUnavailable):
    """A broker answered but the connection was refused: SASL authentication or the TLS handshake failed.

    Attributes:
        bootstrap_servers: where.
        kind: ``"authentication"`` or ``"tls"``.
        reason: the client's words (never a secret).
        fix: what to check.
    """

    def __init__(self, bootstrap_servers: str, kind: str, reason: str, fix: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.kind, self.reason, self.fix = kind, reason, fix
        what = "refused the client's credentials" if kind == "authentication" else "failed the TLS handshake"
        KitError.__init__(self, f"Kafka at {bootstrap_servers!r} {what}: {reason}. Fix: {fix}")


class UnknownTopic(KitError):
    """A topic that must exist does not."""

    def __init__(self, topic: str, bootstrap_servers: str) -> None:
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        super().__init__(
            f"topic {topic!r} does not exist on {bootstrap_servers!r}. "
            "Create it first (e.g. `dmk replay FILE --topic ...` creates it)."
        )


class TopicConfigurationMismatch(KitError):
    """A topic exists with a different partition count than asked for."""

    def __init__(self, topic: str, *, expected: int, actual: int) -> None:
        self.topic = topic
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"topic {topic!r} has {actual} partitions, expected {expected}. "
            "Use another topic name, or delete the topic and let it be created again."
        )


class KafkaTimeout(KitError):
    """A bounded Kafka operation did not finish in time.

    Attributes:
        operation: what was being done.
        timeout_s: the bound that was exceeded.
        last_observed: the last state seen before giving up (positions, offsets, ...).
    """

    def __init__(self, operation: str, timeout_s: float, last_observed: object = None) -> None:
        self.operation = operation
        self.timeout_s = timeout_s
        self.last_observed = last_observed
        seen = f"; last observed: {last_observed}" if last_observed is not None else ""
        super().__init__(
            f"{operation} did not finish within {timeout_s:g} s{seen}. "
            "Check that the broker is reachable and not paused, or raise the timeout."
        )


class OffsetOutOfRange(KitError):
    """A requested offset range is not (or no longer) in the partition's log.

    Attributes:
        topic, partition: where.
        requested: ``(from_offset, until_offset)`` asked for.
        available: ``(beginning, end)`` the partition holds now; ``end`` is the high watermark.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        requested: tuple[int, int],
        available: tuple[int, int],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.requested = requested
        self.available = available
        start, until = requested
        beginning, end = available
        if start < beginning:
            why = (
                f"offsets from {start} to {beginning - 1} are no longer available "
                "(deleted by retention, compaction or a topic re-creation)"
            )
            fix = "start from the beginning offset, or accept the data loss explicitly"
        else:
            why = f"offsets up to {until - 1} are not yet available (the end offset is {end})"
            fix = "wait for the data to be produced, or ask for a range that ends at most at the end offset"
        super().__init__(
            f"offset range [{start}, {until}) of {topic}-{partition} cannot be read: {why}; "
            f"the partition holds [{beginning}, {end}). Fix: {fix}."
        )


class DatasetError(KitError):
    """A dataset file or manifest is missing, unreadable or inconsistent."""

    def __init__(self, path: object, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"dataset {self.path}: {problem}{'. ' + fix if fix else ''}")


class ReplayError(KitError):
    """A replay did not get every record acknowledged by the broker.

    Attributes:
        sent, acknowledged, failed: record counts.
        first_error: the first send error seen, if any.
    """

    def __init__(self, topic: str, *, sent: int, acknowledged: int, first_error: object) -> None:
        self.topic = topic
        self.sent = sent
        self.acknowledged = acknowledged
        self.failed = sent - acknowledged
        self.first_error = first_error
        super().__init__(
            f"replay into {topic!r}: {self.failed} of {sent} records were not acknowledged "
            f"(first error: {first_error}). The topic now holds a partial replay: "
            "delete it (or use a new topic name) and replay again once the broker is healthy."
        )


class RunTimeout(KitError):
    """An engine run did not reach the expected input offsets in time; carries what it had reached.

    Attributes:
        reached: what the run had processed when the wait gave up.
        expected: what it was waiting for.
    """

    def __init__(self, message: str, *, reached: object, expected: object) -> None:
        super().__init__(message)
        self.reached = reached
        self.expected = expected


class CheckpointNotFound(KitError, FileNotFoundError):
    """A checkpoint directory that does not exist, is a file, or whose file system cannot be reached.

    The directory is a DStream checkpoint or a query's ``checkpointLocation``: this is the one class for both
    engines' checkpoints.

    Attributes:
        path: the directory as given (a path or a URI).
        detail: what the file system said when it could not be reached (None: it answered).
        is_file: True when the path exists but is a file.
    """

    def __init__(self, path: object, *, fix: str, detail: str | None = None, is_file: bool = False) -> None:
        self.path = str(path)
        self.detail = detail
        self.is_file = is_file
        if detail is not None:
            what = f"cannot be opened: {detail}"
        else:
            what = "is a file, not a directory" if is_file else "does not exist"
        super().__init__(f"checkpoint directory {self.path} {what}. Fix: {fix}")


class ConnectError(KitError):
    """A Spark Connect server could not be reached, started, or cannot run the kit (:mod:`kit.connect`).

    Attributes:
        url: the server's ``sc://`` URL (None when the client side is at fault).
        missing: the modules that could not be imported, where that is the problem (else empty).
    """

    def __init__(self, message: str, *, url: str | None, missing: list[str] | tuple[str, ...] = ()) -> None:
        self.url = url
        self.missing = tuple(missing)
        super().__init__(message)


class ClusterError(KitError):
    """The local Spark cluster (:mod:`kit.cluster`) could not be started, reached or stopped."""
