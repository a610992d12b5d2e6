"""``get_or_create``: ``StreamingContext.getOrCreate`` that refuses a checkpoint written by other job code.

Spark restores a streaming job from its checkpoint by unpickling the DStream graph and the Python functions
stored there; the job's code on disk is not consulted. After a code change a restart therefore fails to
unpickle or, worse, silently keeps running the old functions (the pitfall the migration notes call out:
"delete the checkpoint-* files"). ``get_or_create`` stores a fingerprint of the job's code next to the
checkpoint when it creates the context, and compares it before restoring: a mismatch raises
:class:`~legacy.errors.CheckpointCodeChanged` with the remedies, before Spark touches the checkpoint.

It also connects restored direct Kafka streams to the new context before it starts (batch listener and
input-info reports), which plain ``StreamingContext.getOrCreate`` leaves to the first batch after start.

Example:
    >>> def create():                                                        # doctest: +SKIP
    ...     ssc = StreamingContext(sc, 2)
    ...     KafkaUtils.createDirectStream(ssc, ["events"], params).foreachRDD(save)
    ...     return ssc
    >>> ssc = get_or_create("/data/checkpoints/job", create)                 # doctest: +SKIP
    >>> ssc.start()                                                          # doctest: +SKIP
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
from legacy._direct import take_restored
from legacy.errors import CheckpointCodeChanged

__all__ = ["FINGERPRINT_FILE", "checkpoint_files", "code_fingerprint", "get_or_create"]

#: Name of the fingerprint file written next to Spark's checkpoint files.
FINGERPRINT_FILE = "dmk-legacy-fingerprint.json"

# Spark's Checkpoint.REGEX: checkpoint-<time>[.bk]
_CHECKPOINT_FILE = re.compile(r"checkpoint-\d+(\.bk)?")


def _local_dir(checkpoint_dir: str | os.PathLike[str]) -> Path:
    text = os.fspath(checkpoint_dir)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise ConfigError(
            f"get_or_create checks fingerprints of local checkpoint directories only, got {text!r}; "
            "use a local path (or file:/...), or StreamingContext.getOrCreate without the check",
            field="checkpoint_dir", expected="local path", actual=text,
        )
    return Path(text)


def checkpoint_files(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
    """Names of Spark's checkpoint metadata files (``checkpoint-<time>[.bk]``) in the directory, sorted."""
    directory = _local_dir(checkpoint_dir)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if _CHECKPOINT_FILE.fullmatch(p.name))


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
        raise ConfigError(
            f"cannot find the source file of {create!r} to fingerprint the job's code; pass fingerprint= "
            "(e.g. the job's release version or git commit)",
            field="fingerprint", expected="str", actual=None,
        )
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return digest, source


def _stored_fingerprint(directory: Path) -> str | None:
    path = directory / FINGERPRINT_FILE
    try:
        return str(json.loads(path.read_text())["fingerprint"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        return None


def _write_fingerprint(directory: Path, fingerprint: str, source: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FINGERPRINT_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "source": source, "written_ms": int(time.time() * 1000)}))
    os.replace(tmp, path)


def get_or_create(
    checkpoint_dir: str | os.PathLike[str],
    create: Callable[[], Any],
    *,
    fingerprint: str | None = None,
) -> Any:
    """Restore the StreamingContext from ``checkpoint_dir`` if the job's code is unchanged, else create it.

    Args:
        checkpoint_dir: the checkpoint directory (local; ``file:`` URIs accepted).
        create: builds and returns a new StreamingContext with its DStreams (as for ``getOrCreate``).
        fingerprint: identifies the job's code; default: sha256 of the source file defining ``create``. Pass
            one explicitly when the job spans several files (a release version, a git commit).

    Returns:
        The restored or newly created (not started) StreamingContext. A new one has its checkpoint
        directory set, and the fingerprint is stored next to the checkpoint.

    Raises:
        CheckpointCodeChanged: the directory holds checkpoint files whose stored fingerprint differs from the
            job's, or that have none.
        ConfigError: a remote checkpoint directory, or a ``create`` without a source file and no fingerprint.
    """
    from pyspark.streaming import StreamingContext

    directory = _local_dir(checkpoint_dir)
    if fingerprint is None:
        current, source = code_fingerprint(create)
    else:
        current, source = str(fingerprint), "given"
    existing = checkpoint_files(directory)
    if existing:
        stored = _stored_fingerprint(directory)
        if stored != current:
            raise CheckpointCodeChanged(
                str(directory), expected=stored, actual=current, checkpoint_files=existing, source=source
            )
    take_restored()  # forget states unpickled earlier in this process
    ssc = StreamingContext.getOrCreate(os.fspath(checkpoint_dir), create)
    for state in take_restored():
        state.attach(ssc)
    if not existing:
        _write_fingerprint(directory, current, source)
    return ssc
