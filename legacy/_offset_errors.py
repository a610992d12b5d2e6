"""Errors raised by the offset stores of :mod:`legacy.offsets`.

They all derive from :class:`kit.errors.KitError`, carry the facts as attributes and say how to fix the
problem. :mod:`legacy.offsets` re-exports them; import them from there.

Example:
    >>> try:
    ...     raise NonContiguousOffsets("job", "events", 0, expected=120, actual=100)
    ... except OffsetStoreError as err:
    ...     print(err.kind, err.expected, err.actual)
    overlap 120 100
"""

from __future__ import annotations

from collections.abc import Mapping

from kit.errors import KitError

__all__ = [
    "CorruptStoredOffset",
    "InvalidOffsetRange",
    "NonContiguousOffsets",
    "OffsetCommitFailed",
    "OffsetStoreError",
    "OffsetStoreUnavailable",
    "OffsetsNotSaved",
]


class OffsetStoreError(KitError):
    """Base class of the errors an offset store raises."""


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


class OffsetStoreUnavailable(OffsetStoreError):
    """The store's server or file cannot be reached or opened.

    Attributes:
        backend: ``"kafka"``, ``"zookeeper"``, ``"sqlite"`` or ``"postgresql"``.
        address: where the store was looked for (hosts, path or a DSN without its password).
        detail: what the client library said.
        fix: what to do about it.
    """

    def __init__(self, backend: str, address: str, detail: str, fix: str) -> None:
        self.backend = backend
        self.address = address
        self.detail = detail
        self.fix = fix
        super().__init__(f"{backend} offset store at {address!r} is unavailable: {detail}. Fix: {fix}.")


class CorruptStoredOffset(OffsetStoreError):
    """A stored offset cannot be read back as a non-negative integer.

    Attributes:
        backend: which store.
        location: where the bad value lives (a ZooKeeper path, a table row).
        raw: the stored value as found.
    """

    def __init__(self, backend: str, location: str, raw: object) -> None:
        self.backend = backend
        self.location = location
        self.raw = raw
        super().__init__(
            f"{backend} offset store: the offset at {location} is {raw!r}, expected a non-negative integer "
            "(the next offset to read). Fix: repair or delete that entry; a deleted entry makes the job start "
            "that partition from wherever the caller decides (e.g. the earliest offset)."
        )


class NonContiguousOffsets(OffsetStoreError):
    """A batch's offset range does not start where the stored offset ends.

    Attributes:
        consumer: the consumer (job) name the offsets belong to.
        topic, partition: where.
        expected: the stored offset, where the batch had to start.
        actual: where the batch's range starts.
        kind: ``"gap"`` (records between the two would never be processed) or ``"overlap"`` (records would
            be processed twice: typically a batch replayed after it was already committed).
    """

    def __init__(self, consumer: str, topic: str, partition: int, *, expected: int, actual: int) -> None:
        self.consumer = consumer
        self.topic = topic
        self.partition = partition
        self.expected = expected
        self.actual = actual
        self.kind = "gap" if actual > expected else "overlap"
        if self.kind == "gap":
            why = f"offsets {expected}..{actual - 1} would never be processed"
            fix = f"start the stream at the stored offsets (load()), or the range at {expected}"
        else:
            why = f"offsets {actual}..{expected - 1} were already committed by an earlier batch"
            fix = "skip batches whose tx.already_done is True, or start the stream at the stored offsets (load())"
        super().__init__(
            f"offset range of {topic}-{partition} for consumer {consumer!r} starts at {actual}, expected "
            f"{expected} (the stored offset): {self.kind}, {why}. Nothing was committed. Fix: {fix}."
        )


class OffsetCommitFailed(OffsetStoreError):
    """Kafka refused or did not answer an offset commit for a consumer group.

    Attributes:
        group_id: the consumer group.
        offsets: ``{TopicPartition: offset}`` that were being committed.
        errors: ``{TopicPartition: error name}`` for the partitions the broker refused (empty when the whole
            request failed; see ``__cause__``).
    """

    def __init__(self, group_id: str, offsets: Mapping[object, int], errors: Mapping[object, str], detail: str) -> None:
        self.group_id = group_id
        self.offsets = dict(offsets)
        self.errors = dict(errors)
        super().__init__(
            f"committing offsets {self.offsets} for consumer group {group_id!r} failed: {detail}. Fix: check that "
            "the broker is reachable and that no running consumer is an active member of the group (the group "
            "must be empty for commits from outside it). Offsets queued by commit_async stay queued for the next "
            "flush."
        )


class OffsetsNotSaved(OffsetStoreError):
    """A transaction wrote results but no offsets, which would break exactly-once on the next restart.

    Attributes:
        batch_time_ms: the batch whose transaction was rolled back.
    """

    def __init__(self, batch_time_ms: int) -> None:
        self.batch_time_ms = batch_time_ms
        super().__init__(
            f"the transaction of batch {batch_time_ms} executed statements but never called "
            "tx.save_offsets(...): it was rolled back, since results committed without their offsets are "
            "written again after a restart. Fix: call tx.save_offsets(ranges) inside the same `with` block."
        )
