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

from kit.errors import ConfigError, KitError

__all__ = [
    "BatchNotGenerated",
    "CheckpointCodeChanged",
    "LegacyError",
    "StateFormatMismatch",
    "UnsupportedApi",
    "UnsupportedKafkaParams",
]


class LegacyError(KitError):
    """Base class of the errors only the DStream side raises."""


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


class UnsupportedApi(LegacyError):
    """A Spark 2.4 ``pyspark.streaming.kafka`` call that has no equivalent here.

    Attributes:
        api: the call, e.g. ``"KafkaUtils.createStream"``.
        alternative: what to use instead.
    """

    def __init__(self, api: str, reason: str, alternative: str) -> None:
        self.api = api
        self.alternative = alternative
        super().__init__(f"{api} is not supported: {reason}. Use {alternative} instead.")


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
