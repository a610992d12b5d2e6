"""``get_or_create``: ``StreamingContext.getOrCreate`` that refuses a checkpoint written by other job code.

Spark restores a streaming job from its checkpoint by unpickling the DStream graph and the Python functions
stored there; the job's code on disk is not consulted. After a code change a restart therefore fails to
unpickle or, worse, silently keeps running the old functions (the pitfall the migration notes call out:
"delete the checkpoint-* files"). ``get_or_create`` stores a fingerprint of the job's code next to the
checkpoint when it creates the context, and compares it before restoring: a mismatch raises
:class:`~legacy.errors.CheckpointCodeChanged` with the remedies, before Spark touches the checkpoint.

It also connects restored direct Kafka streams to the new context before it starts (batch listener and
input-info reports), which plain ``StreamingContext.getOrCreate`` leaves to the first batch after start.

Example::

    def create():
        ssc = StreamingContext(sc, 2)
        KafkaUtils.createDirectStream(ssc, ["events"], params).foreachRDD(save)
        return ssc
    ssc = get_or_create("/data/checkpoints/job", create)
    ssc.start()
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.errors import ConfigError
from kit.spark import has_scheme
from legacy._direct import take_restored
from legacy.errors import CheckpointCodeChanged

__all__ = ["FINGERPRINT_FILE", "checkpoint_files", "code_fingerprint", "get_or_create"]

#: Name of the fingerprint file written next to Spark's checkpoint files.
FINGERPRINT_FILE = "dmk-legacy-fingerprint.json"

# Spark's Checkpoint.REGEX: checkpoint-<time>[.bk]
_CHECKPOINT_FILE = re.compile(r"checkpoint-\d+(\.bk)?")


class _Directory:
    """A checkpoint directory: a plain path (Python's I/O), or a URI (Hadoop's ``FileSystem``).

    A URI (``file:/``, ``hdfs://``, ``s3a://``...) is read through the active SparkContext's Hadoop
    ``FileSystem``, as Spark itself writes the checkpoint there.
    """

    def __init__(self, checkpoint_dir: str | os.PathLike[str]) -> None:
        self.text = os.fspath(checkpoint_dir)
        self.local: Path | None = None if has_scheme(self.text) else Path(self.text)
        self._fs: Any = None

    def _hadoop(self) -> tuple[Any, Any, Any]:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            msg = (
                f"reading the checkpoint directory {self.text!r} goes through Spark's file system: create the "
                "SparkContext first"
            )
            raise ConfigError(msg, field="checkpoint_dir", expected="an active SparkContext", actual=None)
        new_path = sc._jvm.org.apache.hadoop.fs.Path  # type: ignore[union-attr]  # py4j: set on a live context
        path = new_path(self.text)
        if self._fs is None:
            self._fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
        return self._fs, path, new_path

    def names(self) -> list[str]:
        if self.local is not None:
            return [p.name for p in self.local.iterdir()] if self.local.is_dir() else []
        fs, path, _ = self._hadoop()
        if not fs.exists(path):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]

    def read(self, name: str) -> str | None:
        if self.local is not None:
            try:
                return (self.local / name).read_text()
            except FileNotFoundError:
                return None
        fs, path, new_path = self._hadoop()
        target = new_path(path, name)
        if not fs.exists(target):
            return None
        stream = fs.open(target)
        try:
            return bytes(stream.readAllBytes()).decode()
        finally:
            stream.close()

    def write(self, name: str, text: str) -> None:
        """Write ``name`` atomically (temporary file, then rename over it)."""
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)
            final = self.local / name
            temp = final.with_name(f".{name}.{os.getpid()}.tmp")
            temp.write_text(text)
            os.replace(temp, final)
            return
        fs, path, new_path = self._hadoop()
        fs.mkdirs(path)
        final = new_path(path, name)
        temp = new_path(path, f".{name}.{os.getpid()}.tmp")
        stream = fs.create(temp, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        fs.delete(final, False)
        fs.rename(temp, final)


def checkpoint_files(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
    """Names of Spark's checkpoint metadata files (``checkpoint-<time>[.bk]``) in the directory, sorted.

    A URI other than ``file:`` is listed through the active SparkContext's Hadoop file system.
    """
    return sorted(name for name in _Directory(checkpoint_dir).names() if _CHECKPOINT_FILE.fullmatch(name))


def code_fingerprint(create: Callable[[], Any]) -> tuple[str, str]:
    """``(sha256 hex, source)`` of the source file that defines ``create``.

    Raises:
        ConfigError: ``create`` has no source file (defined interactively); pass ``fingerprint=`` instead.
    """
    try:
        source = inspect.getsourcefile(create)
    except TypeError:
        source = None
    if source is None or not os.path.isfile(source):
        msg = (
            f"cannot find the source file of {create!r} to fingerprint the job's code; pass fingerprint= "
            "(e.g. the job's release version or git commit)"
        )
        raise ConfigError(
            msg,
            field="fingerprint", expected="str", actual=None,
        )
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return digest, source


def _stored_fingerprint(directory: _Directory) -> str | None:
    try:
        return str(json.loads(directory.read(FINGERPRINT_FILE) or "null")["fingerprint"])
    except (ValueError, KeyError, TypeError):
        return None


def _write_fingerprint(directory: _Directory, fingerprint: str, source: str) -> None:
    payload = {"fingerprint": fingerprint, "source": source, "written_ms": int(time.time() * 1000)}
    directory.write(FINGERPRINT_FILE, json.dumps(payload))


def get_or_create(
    checkpoint_dir: str | os.PathLike[str],
    create: Callable[[], Any],
    *,
    fingerprint: str | None = None,
) -> Any:
    """Restore the StreamingContext from ``checkpoint_dir`` if the job's code is unchanged, else create it.

    Args:
        checkpoint_dir: the checkpoint directory: a local path, or a URI Spark's file system reaches (``hdfs://``,
            ``s3a://``...; read and written through the active SparkContext).
        create: builds and returns a new StreamingContext with its DStreams (as for ``getOrCreate``).
        fingerprint: identifies the job's code; default: sha256 of the source file defining ``create``. Pass
            one explicitly when the job spans several files (a release version, a git commit).

    Returns:
        The restored or newly created (not started) StreamingContext. A new one has its checkpoint
        directory set, and the fingerprint is stored next to the checkpoint.

    Raises:
        CheckpointCodeChanged: the directory holds checkpoint files whose stored fingerprint differs from the
            job's, or that have none.
        ConfigError: a ``create`` without a source file and no fingerprint; a URI with no active SparkContext.
    """
    from pyspark.streaming import StreamingContext

    directory = _Directory(checkpoint_dir)
    if fingerprint is None:
        current, source = code_fingerprint(create)
    else:
        current, source = str(fingerprint), "given"
    existing = checkpoint_files(checkpoint_dir)
    if existing:
        stored = _stored_fingerprint(directory)
        if stored != current:
            raise CheckpointCodeChanged(
                directory.text, expected=stored, actual=current, checkpoint_files=existing, source=source
            )
    take_restored()  # forget states unpickled earlier in this process
    ssc = StreamingContext.getOrCreate(os.fspath(checkpoint_dir), create)
    for state in take_restored():
        state.attach(ssc)
    if not existing:
        _write_fingerprint(directory, current, source)
    return ssc
