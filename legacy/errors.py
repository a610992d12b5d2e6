"""Errors raised by the DStream side of the kit (``legacy``).

Every error derives from :class:`kit.errors.KitError`; configuration errors also derive from
:class:`kit.errors.ConfigError` (so from ``ValueError``). Each carries the facts as attributes and a message
that says what is wrong, where, what was expected, what was found, and how to fix it.

Example:
    >>> try:
    ...     raise UnsupportedKafkaParams({"zookeeper.connect": "no ZooKeeper"}, supported=["bootstrap.servers"])
    ... except ConfigError as err:
    ...     print(err.field, sorted(err.unsupported))
    kafkaParams ['zookeeper.connect']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kit.errors import CheckpointNotFound, ConfigError, InvalidOffsetRange, KitError

__all__ = [
    "ArgumentTypeError",
    "BatchNotGenerated",
    "CheckpointCodeChanged",
    "CheckpointCodeNotImportable",
    "CheckpointNotFound",
    "CheckpointUnreadable",
    "CorruptStoredOffset",
    "InvalidOffsetRange",
    "LegacyError",
    "NonContiguousOffsets",
    "NotALegacyCheckpoint",
    "OffsetCommitFailed",
    "OffsetStoreError",
    "OffsetStoreUnavailable",
    "OffsetsNotSaved",
    "StateFormatMismatch",
    "UnsupportedKafkaParams",
    "checkpoint_not_found",
]


class LegacyError(KitError):
    """Base class of the errors only the DStream side raises."""


class ArgumentTypeError(ConfigError, TypeError):
    """An argument of a type Spark 2.4's ``KafkaUtils`` refused with ``TypeError``.

    It is still a ``TypeError`` here, so code that caught it goes on working, with the kit's message: what was
    given, and what to pass.
    """


class UnsupportedKafkaParams(ConfigError):
    """``kafkaParams`` holds keys the legacy Kafka API does not understand or does not support.

    Attributes:
        unsupported: ``{key: why}`` for every offending key (unknown keys say "unknown").
        supported: the keys that are accepted.
        field, expected, actual: as for :class:`~kit.errors.ConfigError` (``"kafkaParams"``, the supported keys,
            the offending keys).
    """

    def __init__(self, unsupported: Mapping[str, str], *, supported: Iterable[str]) -> None:
        self.unsupported = dict(unsupported)
        self.supported = sorted(supported)
        details = "; ".join(f"{key!r}: {why}" for key, why in sorted(self.unsupported.items()))
        keys = "{" + ", ".join(repr(key) for key in sorted(self.unsupported)) + "}"
        super().__init__(
            f"Unrecognized configs: {keys} in kafkaParams ({details}). "
            f"Supported keys: {', '.join(self.supported)}. Remove the others from kafkaParams.",
            field="kafkaParams",
            expected=self.supported,
            actual=sorted(self.unsupported),
        )


class CheckpointCodeChanged(LegacyError):
    """A checkpoint was written by different job code than the job now restarting from it.

    Spark restores the DStream graph and the functions pickled into the checkpoint, not the code on disk: a
    restart after a code change either fails to unpickle or silently runs the old functions.

    Attributes:
        checkpoint_dir: the checkpoint directory.
        expected: the fingerprint stored next to the checkpoint (None when there is none).
        actual: the fingerprint of the job's code now.
        checkpoint_files: the ``checkpoint-*`` metadata files found (names, sorted).
        source: what the current fingerprint was computed from (a file path, or "given").
    """

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        expected: str | None,
        actual: str,
        checkpoint_files: Sequence[str],
        source: str,
    ) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.expected = expected
        self.actual = actual
        self.checkpoint_files = list(checkpoint_files)
        self.source = source
        if expected is None:
            what = (
                f"the checkpoint in {checkpoint_dir} has no code fingerprint (it was not written through "
                "legacy.kafka.get_or_create), so it cannot be checked against the job's code"
            )
        else:
            what = (
                f"the checkpoint in {checkpoint_dir} was written by different job code: "
                f"stored fingerprint {expected[:16]}, current {actual[:16]} (from {source})"
            )
        super().__init__(
            f"{what}. Spark would restore the functions pickled in the checkpoint, so the restarted job "
            "would run the old code or fail to unpickle it. Fix, either: (1) keep your place in Kafka: delete "
            f"only the {len(self.checkpoint_files)} metadata files {checkpoint_dir}/checkpoint-* and restart "
            "with fromOffsets read from the offsets the job stored after each batch (an offset store written "
            "in foreachRDD); or (2) start fresh: delete the whole directory; the stream then starts at "
            "auto.offset.reset (default largest)."
        )


class StateFormatMismatch(LegacyError):
    """A checkpoint holds direct-stream state in a format this version of ``legacy`` cannot read.

    Attributes:
        expected: the state format this code reads.
        actual: the format found in the checkpoint.
    """

    def __init__(self, *, expected: int, actual: object) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"the checkpoint's direct Kafka stream state has format {actual!r}, this version of legacy reads "
            f"format {expected}. It was written by another version of the kit: delete the checkpoint-* files "
            "and restart from stored offsets, or start with a fresh checkpoint directory."
        )


class BatchNotGenerated(LegacyError):
    """The offset ranges of a batch were asked for before the direct stream generated that batch.

    Attributes:
        stream: the stream's id.
        batch_ms: the batch time in ms.
    """

    def __init__(self, stream: str, batch_ms: int) -> None:
        self.stream = stream
        self.batch_ms = batch_ms
        super().__init__(
            f"direct Kafka stream {stream} has no batch for time {batch_ms} ms in this driver. The RDD passed "
            "to transform/foreachRDD is built when Spark generates the batch; this is a bug in legacy, "
            "please report it with the driver log."
        )


# -- reading a checkpoint (legacy.inspect) ------------------------------------------------------------------

_CHECKPOINT_HOLDS = (
    "a legacy (DStream) checkpoint directory holds Spark's metadata files checkpoint-<batch time in ms> "
    "(and checkpoint-<time>.bk), written by a StreamingContext after ssc.checkpoint(dir) or "
    "StreamingContext.getOrCreate(dir, create)"
)


def checkpoint_not_found(directory: str, detail: str | None = None) -> CheckpointNotFound:
    """The :class:`~kit.errors.CheckpointNotFound` for a DStream checkpoint directory, with the fix.

    Args:
        directory: the directory as given (a path or a URI).
        detail: what the file system said when it could not be reached (None: it answered, the path is absent).
    """
    if detail is None:
        fix = "pass the directory the job gave to ssc.checkpoint(...) or getOrCreate(...) (a local path, file:/..., hdfs://...)"
    else:
        fix = ("check the URI's scheme and authority, and that this Spark has the file system's client and "
               "configuration (for hdfs://, HADOOP_CONF_DIR)")
    return CheckpointNotFound(directory, fix=fix, detail=detail)


class NotALegacyCheckpoint(LegacyError):
    """A directory exists but holds no DStream checkpoint files.

    Attributes:
        directory: the directory.
        found: names of what it does hold (sorted, at most 20).
        looks_like: a guess at what it is instead (e.g. ``"a Structured Streaming checkpoint"``), or None.
    """

    def __init__(self, directory: str, *, found: Sequence[str], looks_like: str | None = None) -> None:
        self.directory = directory
        self.found = list(found)
        self.looks_like = looks_like
        got = ", ".join(self.found) if self.found else "nothing"
        guess = f"; it looks like {looks_like}" if looks_like else ""
        super().__init__(
            f"{directory} is not a legacy (DStream) checkpoint: no checkpoint-* files in it, found {got}{guess}. "
            f"Expected: {_CHECKPOINT_HOLDS}. Fix: pass the job's checkpoint directory itself (not a parent, "
            "and not one of its files)."
        )


class CheckpointUnreadable(LegacyError):
    """No checkpoint file of a directory can be read back.

    Attributes:
        directory: the checkpoint directory.
        errors: ``{file name: error}`` for every checkpoint file, newest first.
    """

    def __init__(
        self, directory: str, errors: Mapping[str, str], *, what: str | None = None, fix: str | None = None
    ) -> None:
        self.directory = directory
        self.errors = dict(errors)
        by_error: dict[str, list[str]] = {}
        for name, error in self.errors.items():
            by_error.setdefault(error, []).append(name)
        listing = "; ".join(f"{', '.join(names)}: {error}" for error, names in by_error.items())
        what = what or f"none of the {len(self.errors)} checkpoint files in {directory} can be read"
        fix = fix or (
            "restore the directory from a backup; or delete its checkpoint-* files and restart the job from the "
            "offsets it stored after each batch (its offset store, passed as fromOffsets), accepting that the "
            "checkpointed state (updateStateByKey, windows) starts empty. If the files were written with another "
            "spark.io.compression.codec, read them with that codec set"
        )
        super().__init__(f"{what} ({listing}). Fix: {fix}.")


class CheckpointCodeNotImportable(CheckpointUnreadable):
    """A checkpoint's pickled Python functions cannot be loaded: the job's code is not importable here.

    Spark stores the DStream graph's Python functions by reference to their modules; reading the checkpoint
    imports those modules.

    Attributes:
        directory, errors: as for :class:`CheckpointUnreadable`.
        missing_modules: the modules Python could not import (sorted; empty when the error names none).
        python_error: the last line of the Python traceback, e.g. ``"ModuleNotFoundError: No module named 'job'"``.
    """

    def __init__(
        self, directory: str, errors: Mapping[str, str], *, missing_modules: Sequence[str], python_error: str
    ) -> None:
        self.missing_modules = sorted(missing_modules)
        self.python_error = python_error
        if self.missing_modules:
            names = ", ".join(repr(m) for m in self.missing_modules)
            what = (
                f"the checkpoint in {directory} cannot be read here: its DStream graph holds Python functions of "
                f"module {names}, which is not importable ({python_error})"
            )
            fix = (
                f"run with the job's code importable (add the directory holding {names} to PYTHONPATH, or install "
                "the job's package), in the version that wrote the checkpoint"
            )
        else:
            what = (
                f"the checkpoint in {directory} cannot be read here: unpickling the Python functions of its DStream "
                f"graph failed ({python_error})"
            )
            fix = (
                "run with the job's code importable, in the version that wrote the checkpoint (a function that "
                "was renamed or moved since cannot be found)"
            )
        super().__init__(directory, errors, what=what, fix=fix)


# -- offset stores (legacy.offsets re-exports these) ----------------------------------------------------------


class OffsetStoreError(LegacyError):
    """Base class of the errors an offset store raises."""


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
