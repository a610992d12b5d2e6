"""Idempotent batch files: one Parquet file per batch, replaced (never duplicated) when a batch is replayed.

Both engines re-run a batch after a driver restart (a DStream regenerates the batch times pending in its
checkpoint, a Structured Streaming query re-runs the last batch whose commit was not logged). Writing each
batch to a file named after its id, atomically (temporary file, then rename over the old one), makes that
replay harmless: the end result is exactly-once (seed 002: replayable source + idempotent sink).

Every row gets ``emitted_at`` (milliseconds since the epoch, taken as the file is written): the moment the
row became visible, which is what latency is measured against.

Rows that are not tied to a batch (the modern side's dead letters, written by the tasks that parse them)
are *keyed* files instead (:func:`write_keyed`): named after their content, so a task that runs again writes
the same file, and read back without duplicates, so rows written by overlapping runs count once.

Example:
    >>> import tempfile, pandas as pd
    >>> with tempfile.TemporaryDirectory() as out:
    ...     _ = write_batch(out, 7, pd.DataFrame({"key": ["a"], "count": [1]}))
    ...     _ = write_batch(out, 7, pd.DataFrame({"key": ["a"], "count": [2]}))   # a replay replaces
    ...     read_batches(out)[["batch", "key", "count"]].values.tolist()
    [[7, 'a', 2]]
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kit.layout import BATCH_FILES, KEYED_FILES, batch_file, keyed_file

__all__ = [
    "KEYED_BATCH", "batch_path", "encode_batch", "encode_table", "read_batches", "write_batch", "write_encoded",
    "write_keyed",
]

KEYED_BATCH = -1
"""The ``batch`` of rows written by :func:`write_keyed`."""


def encode_batch(batch: int, rows: pd.DataFrame, emitted_at: int | None = None) -> bytes:
    """The bytes of batch file ``batch`` holding ``rows``: Parquet with ``batch`` and ``emitted_at`` in front.

    For sinks that keep a batch elsewhere before it becomes a file (a database row committed with the
    batch's offsets); :func:`write_encoded` writes it. ``emitted_at`` defaults to now (epoch ms). The frame's
    index is not kept (as ``to_parquet(index=False)``).
    """
    return encode_table(batch, pa.Table.from_pandas(rows, preserve_index=False), emitted_at)


def encode_table(batch: int, rows: pa.Table, emitted_at: int | None = None) -> bytes:
    """:func:`encode_batch` for an Arrow table: the same file, without pandas.

    For the rows Python workers write (dead letters), which come as Arrow: through a pandas frame, a task's write
    took three to four times as long (benchmarks/results/changes.md §33).

    Raises:
        ValueError: ``rows`` already has a ``batch`` or ``emitted_at`` column.
    """
    taken = {"batch", "emitted_at"} & set(rows.column_names)
    if taken:
        msg = f"cannot insert {sorted(taken)}: the rows already have such columns"
        raise ValueError(msg)
    when = time.time_ns() // 1_000_000 if emitted_at is None else int(emitted_at)
    n = rows.num_rows
    table = rows.add_column(0, "emitted_at", pa.array(np.full(n, when, dtype="int64")))
    table = table.add_column(0, "batch", pa.array(np.full(n, batch, dtype="int64")))
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    return bytes(buffer.getvalue())


def batch_path(directory: str | os.PathLike[str], batch: int) -> Path:
    """Where batch ``batch`` of ``directory`` is (or will be) written (:func:`kit.layout.batch_file`)."""
    return batch_file(directory, batch)


def write_encoded(directory: str | os.PathLike[str], batch: int, payload: bytes) -> Path:
    """Write :func:`encode_batch`'s ``payload`` as batch ``batch`` of ``directory``, atomically, replacing."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    final = batch_path(target, batch)
    temp = target / f".{final.name}.{uuid.uuid4().hex}.tmp"
    temp.write_bytes(payload)
    os.replace(temp, final)
    return final


def write_batch(directory: str | os.PathLike[str], batch: int, rows: pd.DataFrame) -> Path:
    """Write ``rows`` as batch ``batch`` of ``directory`` (created if absent), replacing an earlier copy.

    The file gets two columns in front, ``batch`` and ``emitted_at``; ``rows`` is not modified. An empty
    batch is written too, so a reader can tell "ran, produced nothing" from "never ran".

    Returns:
        The path of the batch file.
    """
    return write_encoded(directory, batch, encode_batch(batch, rows))


def write_keyed(directory: str | os.PathLike[str], rows: pd.DataFrame | pa.Table) -> Path | None:
    """Write ``rows`` (not tied to a batch) to ``directory`` as a file named after their content.

    The same rows always make the same file, whether they come as a pandas frame or an Arrow table, so a
    retried task writes nothing new; :func:`read_batches` drops rows that several keyed files hold. The file
    gets ``batch`` (:data:`KEYED_BATCH`) and ``emitted_at`` in front, as batch files do. Nothing is written for
    no rows.

    Returns:
        The path of the file, or None for no rows.
    """
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pandas(rows, preserve_index=False)
    if table.num_rows == 0:
        return None
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    final = keyed_file(target, _content_digest(table))
    if final.exists():
        return final
    temp = target / f".{final.name}.{uuid.uuid4().hex}.tmp"
    temp.write_bytes(encode_table(KEYED_BATCH, table))
    os.replace(temp, final)
    return final


def _content_digest(table: pa.Table) -> str:
    """A name for ``table``'s rows: the same columns and values, the same name (32 hex digits of SHA-256)."""
    content = repr(([(field.name, str(field.type)) for field in table.schema], table.to_pydict()))
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def read_batches(directory: str | os.PathLike[str]) -> pd.DataFrame:
    """Every row :func:`write_batch` and :func:`write_keyed` wrote to ``directory``, each once.

    Batch files come first, in batch order, then keyed rows; an empty frame if there are none.
    """
    directory = Path(directory)
    files = sorted(directory.glob(BATCH_FILES))
    frames = [pd.read_parquet(f) for f in files]
    keyed = [pd.read_parquet(f) for f in sorted(directory.glob(KEYED_FILES))]
    if keyed:
        rows = pd.concat(keyed, ignore_index=True).sort_values("emitted_at", kind="stable")
        frames.append(rows.drop_duplicates([c for c in rows.columns if c not in ("batch", "emitted_at")]))
    frames = [f for f in frames if len(f)] or frames[:1]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)
