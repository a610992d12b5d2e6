"""Describe a Structured Streaming checkpoint location: its batches, commits, sources, state and state rows.

Reads the files Spark writes under a query's ``checkpointLocation`` (``metadata``, ``offsets/<batch>``,
``commits/<batch>``, ``sources/``, ``state/<operator>/<partition>/``) without Spark. With ``row_counts=True``
(the default) it also counts the rows of every state store through Spark's state data sources
(``state-metadata`` and ``statestore``), at the last committed batch; a reader that fails is recorded in the
result and in :meth:`ModernCheckpoint.describe`, never raised.

Example::

    from modern.inspect import inspect_modern_checkpoint, list_query_checkpoints

    for directory in list_query_checkpoints("ckpt"):           # the runner's <checkpoint_dir>/<query name>
        checkpoint = inspect_modern_checkpoint(directory, spark)
        print(checkpoint.describe())
    checkpoint.last_committed_batch_id       # 3
    checkpoint.uncommitted_batch_id          # None: a restart plans batch 4
    checkpoint.batches[-1].offsets           # {"0": {"events": {"0": 750, "1": 750}}}
    json.dumps(checkpoint.to_json())
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kit.layout import COMMITS, METADATA, OFFSETS, SOURCES, STATE, is_query_checkpoint
from modern.errors import CheckpointDamaged, CheckpointNotFound, NotAModernCheckpoint, checkpoint_not_found

__all__ = [
    "CheckpointBatch",
    "CheckpointDamaged",
    "CheckpointNotFound",
    "ModernCheckpoint",
    "NotAModernCheckpoint",
    "SourceLog",
    "StateOperator",
    "StoreRowCount",
    "TIMERS",
    "inspect_modern_checkpoint",
    "list_query_checkpoints",
]

# Batch files are named by their batch id alone; Spark's temp files start with "." and checksums end in .crc.
_BATCH_FILE = re.compile(r"^\d+$")
# <version>.<kind>, or <version>_<unique id>.<kind> with state store checkpoint format v2.
_STATE_FILE = re.compile(r"^(?P<version>\d+)(?:_[^.]+)?\.(?P<kind>delta|snapshot|zip|changelog)$")
# Directories of a state partition that are not stores: schema files, RocksDB's shared SST files.
_NOT_A_STORE = {"_metadata", "SSTs"}
_SOURCE_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # Spark's rule for source names (OffsetSeqV2.validateSourceName)
_OFFSETS_VERSIONS = (1, 2)  # OffsetSeqLog: v1 one offset per line; v2 "sourceId:offset" lines
_COMMITS_VERSIONS = (1, 2)  # CommitLog: v2 adds stateUniqueIds (state store checkpoint format v2)
_DESCRIBE_BATCHES = 8
_DESCRIBE_OFFSETS_CHARS = 100

_REWRITTEN_OUTSIDE_SPARK = (
    "Spark writes each batch file whole and renames it into place, so a partial or garbled one was damaged outside "
    "Spark (an interrupted copy, an edit, a disk fault)."
)
_OFFSETS_FIX = (
    f"{_REWRITTEN_OUTSIDE_SPARK} Restore it from a copy of the checkpoint; if it is the newest offsets file and "
    "commits/ has no file of that batch, deleting it makes Spark plan that batch afresh on restart (possibly over "
    "a different offset range)."
)
_COMMITS_FIX = (
    f"{_REWRITTEN_OUTSIDE_SPARK} Restore it from a copy of the checkpoint; deleting the newest commit file makes "
    "Spark run that batch again on restart (its output is written again)."
)
_METADATA_FIX = (
    "Restore it from a copy of the checkpoint, or write {\"id\": \"<a new UUID>\"} into it: the query id then "
    "changes, offsets and state do not."
)


@dataclass(frozen=True)
class CheckpointBatch:
    """One batch of the offsets log, with its commit.

    Attributes:
        batch_id: the batch id (the file name under ``offsets/``).
        timestamp_ms: ``batchTimestampMs``, the batch's processing time (None if the file has no metadata line).
        watermark_ms: ``batchWatermarkMs``, the event-time watermark the batch ran with (0: none yet).
        offsets: source id → the source's end offset for this batch, as parsed JSON (None: no offset, ``-``).
            Source ids are the sources' positions ``"0"``, ``"1"``... in a v1 log, their names in a v2 log.
        committed: whether ``commits/<batch_id>`` exists.
        next_watermark_ms: the commit's ``nextBatchWatermarkMs`` (None when not committed).
        log_version: the offsets file's format version (1 or 2).
    """

    batch_id: int
    timestamp_ms: int | None
    watermark_ms: int | None
    offsets: dict[str, Any]
    committed: bool
    next_watermark_ms: int | None
    log_version: int = 1


@dataclass(frozen=True)
class SourceLog:
    """A source's own log under ``sources/<source_id>/`` (file sources list their files there).

    Attributes:
        source_id: the directory name.
        files: the file names in it, numerically sorted, checksums left out.
    """

    source_id: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class StateOperator:
    """The files of one stateful operator under ``state/<operator_id>/``.

    State store version ``v`` holds the state after batch ``v - 1``.

    Attributes:
        operator_id: the directory name.
        partitions: the partition ids that have a directory, sorted.
        stores: store names (``default``, or the sub-directories of a partition: ``left-keyToNumValues``...).
        min_version, max_version: the lowest and highest state store version with a file (None: no files).
        delta_files, snapshot_files: HDFS-backed store files (``.delta``, ``.snapshot``).
        zip_files, changelog_files: RocksDB store files (``.zip`` snapshots, ``.changelog``).
        has_metadata: whether ``state/<operator_id>/_metadata`` exists (older Spark versions did not write it;
            the ``state-metadata`` reader needs it).
    """

    operator_id: int
    partitions: tuple[int, ...]
    stores: tuple[str, ...]
    min_version: int | None
    max_version: int | None
    delta_files: int
    snapshot_files: int
    zip_files: int
    changelog_files: int
    has_metadata: bool


@dataclass(frozen=True)
class StoreRowCount:
    """The rows of one state store at one batch, counted with Spark's ``statestore`` reader.

    Attributes:
        operator_id, store_name: which store.
        operator_name: from the ``state-metadata`` reader (``stateStoreSave``...), None if it did not list it.
        num_partitions, min_batch_id, max_batch_id: from the ``state-metadata`` reader, None likewise.
        batch_id: the batch whose state was counted (the last committed one, the reader's default).
        rows: the row count, None when the reader failed.
        rows_per_partition: partition id → rows (partitions without rows count 0).
        error: the reader's error (first line), None when it succeeded.
        state_variable: for a ``transformWithState`` operator, whose store holds one column family per state
            variable: the variable counted (``forget_at``...), or :data:`TIMERS` for its registered timers.
            None for every other operator.
    """

    operator_id: int
    store_name: str
    operator_name: str | None
    num_partitions: int | None
    min_batch_id: int | None
    max_batch_id: int | None
    batch_id: int | None
    rows: int | None
    rows_per_partition: dict[int, int]
    error: str | None = None
    state_variable: str | None = None


TIMERS = "(timers)"
""":attr:`StoreRowCount.state_variable` of a ``transformWithState`` operator's registered timers."""


@dataclass(frozen=True)
class ModernCheckpoint:
    """What a Structured Streaming checkpoint location holds. Build it with :func:`inspect_modern_checkpoint`.

    Attributes:
        path: the checkpoint directory.
        query_id: the query id from ``metadata`` (stable across restarts).
        batches: every batch of the offsets log, oldest first.
        committed_batch_ids: every batch id of the commits log, oldest first.
        conf: the SQL conf Spark pinned in the newest offsets file (restarts keep these values).
        sources: ``sources/`` entries.
        state: stateful operators, by operator id.
        row_counts: state rows per store; None when not asked for (``row_counts=False``).
        state_metadata_error: the ``state-metadata`` reader's error, when it failed (stores were then taken from
            the file layout).
    """

    path: str
    query_id: str
    batches: tuple[CheckpointBatch, ...]
    committed_batch_ids: tuple[int, ...]
    conf: dict[str, str]
    sources: tuple[SourceLog, ...]
    state: tuple[StateOperator, ...]
    row_counts: tuple[StoreRowCount, ...] | None = None
    state_metadata_error: str | None = None

    @property
    def last_committed_batch_id(self) -> int | None:
        """The newest batch of the commits log; a restart resumes after it. None: nothing committed yet."""
        return self.committed_batch_ids[-1] if self.committed_batch_ids else None

    @property
    def uncommitted_batch_id(self) -> int | None:
        """The newest batch if it was planned (offsets written) but not committed; None when it is committed.

        A restart runs that batch again with the same offsets.
        """
        if not self.batches or self.batches[-1].committed:
            return None
        return self.batches[-1].batch_id

    def to_json(self) -> dict[str, Any]:
        """Everything, as a JSON-able dict (integer keys become strings)."""
        out = dataclasses.asdict(self)
        out["last_committed_batch_id"] = self.last_committed_batch_id
        out["uncommitted_batch_id"] = self.uncommitted_batch_id
        # A round trip through json turns rows_per_partition's int keys into strings, as json.dumps would.
        return json.loads(json.dumps(out))

    def describe(self) -> str:
        """One screen of aligned text: the newest batches, state operators and row counts, the pinned conf."""
        return _describe(self)


def list_query_checkpoints(directory: str | Path) -> list[Path]:
    """The immediate subdirectories of ``directory`` that are query checkpoints, sorted by name.

    A query checkpoint holds ``offsets/`` or ``metadata``. The kit's runners write one per query,
    ``<checkpoint_dir>/<query name>``.

    Raises:
        CheckpointNotFound: ``directory`` does not exist or is a file.
    """
    root = Path(directory)
    _require_directory(root)
    return sorted(child for child in root.iterdir() if child.is_dir() and is_query_checkpoint(child))


def inspect_modern_checkpoint(directory: str | Path, spark: Any = None, *, row_counts: bool = True) -> ModernCheckpoint:
    """Describe the Structured Streaming checkpoint location ``directory``.

    Args:
        directory: a query's ``checkpointLocation``.
        spark: the SparkSession for the state readers. Default None: the active session, else a new one from
            :func:`kit.spark.spark_session`; only started when there is state to count.
        row_counts: count state rows with Spark's ``state-metadata`` and ``statestore`` readers. Default True;
            False reads files only and needs no Spark.

    Raises:
        CheckpointNotFound: ``directory`` does not exist or is a file.
        NotAModernCheckpoint: it has neither ``offsets/`` nor ``metadata`` (the message lists query checkpoints
            one level down, if any).
        CheckpointDamaged: a missing or garbled ``metadata``, or an offsets or commits file Spark could not read.
    """
    root = Path(directory)
    _require_directory(root)
    if not is_query_checkpoint(root):
        raise NotAModernCheckpoint(
            root,
            entries=tuple(sorted(p.name for p in root.iterdir() if not p.name.endswith(".crc"))),
            queries=tuple(p.name for p in list_query_checkpoints(root)),
            inside=next((p for p in root.resolve().parents if is_query_checkpoint(p)), None),
        )
    query_id = _read_query_id(root / METADATA)
    commits = {batch_id: _read_commit(path) for batch_id, path in _batch_files(root / COMMITS)}
    batches = []
    conf: dict[str, str] = {}
    for batch_id, path in _batch_files(root / OFFSETS):
        version, metadata, offsets = _read_offsets(path)
        conf = {str(k): str(v) for k, v in (metadata or {}).get("conf", {}).items()}
        batches.append(
            CheckpointBatch(
                batch_id=batch_id,
                timestamp_ms=(metadata or {}).get("batchTimestampMs"),
                watermark_ms=(metadata or {}).get("batchWatermarkMs"),
                offsets=offsets,
                committed=batch_id in commits,
                next_watermark_ms=commits.get(batch_id),
                log_version=version,
            )
        )
    checkpoint = ModernCheckpoint(
        path=str(root),
        query_id=query_id,
        batches=tuple(batches),
        committed_batch_ids=tuple(sorted(commits)),
        conf=conf,
        sources=_read_sources(root / SOURCES),
        state=_read_state(root / STATE),
    )
    if not row_counts:
        return checkpoint
    counts, metadata_error = _count_state_rows(checkpoint, spark)
    return dataclasses.replace(checkpoint, row_counts=counts, state_metadata_error=metadata_error)


# -- files ---------------------------------------------------------------------------------------------------


def _require_directory(path: Path) -> None:
    if not path.exists():
        raise checkpoint_not_found(path)
    if not path.is_dir():
        raise checkpoint_not_found(path, is_file=True)


def _numeric_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def _batch_files(log: Path) -> list[tuple[int, Path]]:
    if not log.is_dir():
        return []
    return sorted((int(p.name), p) for p in log.iterdir() if _BATCH_FILE.match(p.name) and p.is_file())


def _lines(path: Path, fix: str) -> list[str]:
    """The file's lines as Spark's reader sees them (split on newlines, a final newline ends the last line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CheckpointDamaged(path, line=None, expected="UTF-8 text", actual=repr(err.object[:40]), fix=fix) from err
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return lines


def _version(path: Path, lines: list[str], supported: tuple[int, ...], fix: str) -> int:
    first = lines[0].strip() if lines else ""
    expected = " or ".join(f'"v{v}"' for v in supported) + " on the first line"
    if not re.fullmatch(r"v\d+", first):
        raise CheckpointDamaged(path, line=1, expected=expected, actual=first, fix=fix)
    version = int(first[1:])
    if version > supported[-1]:
        raise CheckpointDamaged(
            path, line=1, expected=expected, actual=first,
            fix=f"Format v{version} comes from a Spark newer than 4.3; inspect it with a kit built on that Spark.",
        )
    if version not in supported:
        raise CheckpointDamaged(path, line=1, expected=expected, actual=first, fix=fix)
    return version


def _json(path: Path, line_no: int, text: str, expected: str, fix: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise CheckpointDamaged(path, line=line_no, expected=expected, actual=text, fix=fix) from err


def _read_offsets(path: Path) -> tuple[int, dict[str, Any] | None, dict[str, Any]]:
    """``(format version, OffsetSeqMetadata or None, source id → offset)`` of one ``offsets/<batch>`` file."""
    lines = _lines(path, _OFFSETS_FIX)
    version = _version(path, lines, _OFFSETS_VERSIONS, _OFFSETS_FIX)
    expected_metadata = "a JSON object of batchWatermarkMs, batchTimestampMs and conf"
    metadata: dict[str, Any] | None = None
    if len(lines) > 1 and lines[1].strip():
        metadata = _json(path, 2, lines[1], expected_metadata, _OFFSETS_FIX)
        if not isinstance(metadata, dict) or not isinstance(metadata.get("conf", {}), dict):
            raise CheckpointDamaged(path, line=2, expected=expected_metadata, actual=lines[1], fix=_OFFSETS_FIX)
    elif version == 2:
        actual = lines[1] if len(lines) > 1 else "(no line)"
        raise CheckpointDamaged(path, line=2, expected=expected_metadata + " (v2 requires it)", actual=actual,
                                fix=_OFFSETS_FIX)
    offsets: dict[str, Any] = {}
    for index, line in enumerate(lines[2:]):
        line_no = index + 3
        if version == 1:
            source_id, value = str(index), line
        else:
            source_id, colon, value = line.partition(":")
            if not colon or not _SOURCE_ID.match(source_id):
                raise CheckpointDamaged(path, line=line_no, expected="sourceId:offset", actual=line, fix=_OFFSETS_FIX)
        expected = "a source offset as JSON, or - for none"
        offsets[source_id] = None if value == "-" else _json(path, line_no, value, expected, _OFFSETS_FIX)
    return version, metadata, offsets


def _read_commit(path: Path) -> int:
    """The ``nextBatchWatermarkMs`` of one ``commits/<batch>`` file (0 when the file has no JSON line, as Spark)."""
    lines = _lines(path, _COMMITS_FIX)
    _version(path, lines, _COMMITS_VERSIONS, _COMMITS_FIX)
    if len(lines) < 2:
        return 0
    expected = 'a JSON object such as {"nextBatchWatermarkMs":0}'
    commit = _json(path, 2, lines[1], expected, _COMMITS_FIX)
    if not isinstance(commit, dict) or not isinstance(commit.get("nextBatchWatermarkMs", 0), int):
        raise CheckpointDamaged(path, line=2, expected=expected, actual=lines[1], fix=_COMMITS_FIX)
    return commit.get("nextBatchWatermarkMs", 0)


def _read_query_id(path: Path) -> str:
    expected = '{"id": "<query id>"}'
    if not path.is_file():
        raise CheckpointDamaged(
            path, line=None, expected=expected, actual="no file",
            fix="A restarted query would get a new query id (offsets and state are unaffected). " + _METADATA_FIX,
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    garbled = "Spark cannot restart the query. " + _METADATA_FIX
    try:
        metadata = json.loads(text)
    except json.JSONDecodeError as err:
        actual = text.split("\n")[err.lineno - 1]
        raise CheckpointDamaged(path, line=err.lineno, expected=expected, actual=actual, fix=garbled) from err
    if not isinstance(metadata, dict) or not isinstance(metadata.get("id"), str):
        raise CheckpointDamaged(path, line=1, expected=expected, actual=text.strip(), fix=garbled)
    return metadata["id"]


def _read_sources(directory: Path) -> tuple[SourceLog, ...]:
    if not directory.is_dir():
        return ()
    return tuple(
        SourceLog(
            source_id=source.name,
            files=tuple(sorted((f.name for f in source.rglob("*") if f.is_file() and not f.name.endswith(".crc")),
                               key=_numeric_key)),
        )
        for source in sorted(directory.iterdir(), key=lambda p: _numeric_key(p.name))
        if source.is_dir()
    )


def _read_state(directory: Path) -> tuple[StateOperator, ...]:
    if not directory.is_dir():
        return ()
    operators = []
    op_dirs = sorted((p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    for op_dir in op_dirs:
        partitions = sorted(int(p.name) for p in op_dir.iterdir() if p.is_dir() and p.name.isdigit())
        stores: set[str] = set()
        versions: list[int] = []
        kinds = {"delta": 0, "snapshot": 0, "zip": 0, "changelog": 0}
        for partition in partitions:
            for entry in (op_dir / str(partition)).iterdir():
                if entry.is_dir():
                    if entry.name in _NOT_A_STORE or entry.name.startswith((".", "_")):
                        continue
                    store, files = entry.name, list(entry.iterdir())
                else:
                    store, files = "default", [entry]
                for file in files:
                    match = _STATE_FILE.match(file.name)
                    if match and file.is_file():
                        stores.add(store)
                        versions.append(int(match["version"]))
                        kinds[match["kind"]] += 1
        operators.append(
            StateOperator(
                operator_id=int(op_dir.name),
                partitions=tuple(partitions),
                stores=tuple(sorted(stores)),
                min_version=min(versions, default=None),
                max_version=max(versions, default=None),
                delta_files=kinds["delta"],
                snapshot_files=kinds["snapshot"],
                zip_files=kinds["zip"],
                changelog_files=kinds["changelog"],
                has_metadata=(op_dir / "_metadata").is_dir(),
            )
        )
    return tuple(operators)


# -- Spark's state readers -----------------------------------------------------------------------------------


def _reader_error(err: BaseException) -> str:
    """The first paragraph of a reader's error, without the JVM stack trace."""
    text = str(err).strip().split("\n\n")[0].split("\n\tat ")[0]
    return " ".join(text.split())[:500]


def _count_state_rows(checkpoint: ModernCheckpoint, spark: Any) -> tuple[tuple[StoreRowCount, ...], str | None]:
    """Row counts of every state store at the last committed batch, and the state-metadata reader's error."""
    if not checkpoint.state:
        return (), None
    batch_id = checkpoint.last_committed_batch_id
    if batch_id is None:
        return tuple(
            StoreRowCount(op.operator_id, store, None, None, None, None, None, None, {},
                          error="no committed batch yet: the statestore reader reads the last committed batch")
            for op in checkpoint.state for store in op.stores or ("default",)
        ), None

    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    failures = (PySparkException, Py4JError)
    if spark is None:
        from pyspark.sql import SparkSession

        from kit.spark import spark_session

        spark = SparkSession.getActiveSession() or spark_session("dmk-inspect")
    path = str(Path(checkpoint.path).resolve())

    described: dict[tuple[int, str], Any] = {}
    metadata_error = None
    try:
        for row in spark.read.format("state-metadata").load(path).collect():
            described[(int(row["operatorId"]), row["stateStoreName"])] = row
    except failures as err:
        metadata_error = _reader_error(err)
    # Stores the files show but state-metadata did not list (no _metadata, or the reader failed) are counted too.
    stores = set(described)
    for op in checkpoint.state:
        if not any(op_id == op.operator_id for op_id, _ in described):
            stores.update((op.operator_id, store) for store in op.stores or ("default",))

    counts = []
    for operator_id, store in sorted(stores):
        row = described.get((operator_id, store))
        # A transformWithState store keeps each state variable in a column family of its own; the reader reads
        # one at a time (STDS_REQUIRED_OPTION_UNSPECIFIED 'stateVarName' without one), and the timers apart.
        for variable in _state_variables(row) or (None,):
            rows: int | None = None
            per_partition: dict[int, int] = {}
            error = None
            try:
                reader = spark.read.format("statestore").option("operatorId", operator_id).option("storeName", store)
                if variable == TIMERS:
                    reader = reader.option("readRegisteredTimers", "true")
                elif variable is not None:
                    reader = reader.option("stateVarName", variable)
                by_partition = reader.load(path).groupBy("partition_id").count().collect()
                found = {int(r["partition_id"]): int(r["count"]) for r in by_partition}
                partitions = range(row["numPartitions"]) if row is not None else next(
                    op.partitions for op in checkpoint.state if op.operator_id == operator_id)
                per_partition = {p: found.get(p, 0) for p in sorted(set(partitions) | set(found))}
                rows = sum(per_partition.values())
            except failures as err:
                error = _reader_error(err)
            counts.append(
                StoreRowCount(
                    operator_id=operator_id,
                    store_name=store,
                    operator_name=None if row is None else row["operatorName"],
                    num_partitions=None if row is None else row["numPartitions"],
                    min_batch_id=None if row is None else row["minBatchId"],
                    max_batch_id=None if row is None else row["maxBatchId"],
                    batch_id=batch_id,
                    rows=rows,
                    rows_per_partition=per_partition,
                    error=error,
                    state_variable=variable,
                )
            )
    return tuple(counts), metadata_error


def _state_variables(row: Any) -> list[str]:
    """The state variables of a ``transformWithState`` operator (timers as :data:`TIMERS`), [] for others.

    The ``state-metadata`` reader lists them in ``operatorProperties`` (operator metadata version 2), e.g.
    ``{"stateVariables": [{"stateName": "forget_at", "stateVariableType": "ValueState"}, {"stateName":
    "$eventTimers_keyToTimestamp", "stateVariableType": "TimerState"}]}``; the timers' internal column families
    are read with ``readRegisteredTimers`` instead of their names.
    """
    if row is None or "operatorProperties" not in row.asDict() or not row["operatorProperties"]:
        return []
    try:
        variables = json.loads(row["operatorProperties"]).get("stateVariables") or []
    except (ValueError, AttributeError):
        return []
    names = [v["stateName"] for v in variables if v.get("stateVariableType") != "TimerState"]
    return names + ([TIMERS] if len(names) < len(variables) else [])


# -- rendering -----------------------------------------------------------------------------------------------


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms == 0:
        return "0"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _span(values: tuple[int, ...] | list[int]) -> str:
    if not values:
        return "none"
    low, high = min(values), max(values)
    contiguous = len(values) == high - low + 1
    return (f"{low}..{high}" if low != high else str(low)) + ("" if contiguous else f" ({len(values)}, with gaps)")


def _offsets_cell(offsets: dict[str, Any]) -> str:
    def one(value: Any) -> str:
        return "-" if value is None else json.dumps(value, separators=(", ", ": "))

    if list(offsets) == ["0"]:
        text = one(offsets["0"])
    else:
        text = "; ".join(f"{source}: {one(value)}" for source, value in offsets.items())
    return _cut(text, _DESCRIBE_OFFSETS_CHARS)


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(c: ModernCheckpoint) -> str:
    ids = [b.batch_id for b in c.batches]
    last = c.last_committed_batch_id
    if c.uncommitted_batch_id is not None:
        uncommitted = f"batch {c.uncommitted_batch_id} (planned, not committed: a restart runs it again)"
    elif c.batches:
        uncommitted = f"none (a restart plans batch {c.batches[-1].batch_id + 1})"
    else:
        uncommitted = "none"
    versions = sorted({b.log_version for b in c.batches})
    head = [
        ["query id", c.query_id],
        ["offsets log", f"batches {_span(ids)}" + (f", format v{'/v'.join(map(str, versions))}" if versions else "")],
        ["commits log", f"batches {_span(list(c.committed_batch_ids))}"],
        ["last committed batch", "none" if last is None else str(last)],
        ["uncommitted batch", uncommitted],
        ["sources/", ", ".join(f"{s.source_id} ({len(s.files)} files)" for s in c.sources) or "none"],
    ]
    out = [f"Structured Streaming checkpoint {c.path}", *_table(head)]

    if c.batches:
        shown = c.batches[-_DESCRIBE_BATCHES:]
        out.append("")
        omitted = len(c.batches) - len(shown)
        out.append("batches" + (f" (the newest {len(shown)}; {omitted} older omitted)" if omitted else ""))
        rows = [["batch", "timestamp (UTC)", "watermark", "committed", "next watermark", "offsets"]]
        for b in shown:
            rows.append([str(b.batch_id), _time(b.timestamp_ms), _time(b.watermark_ms), "yes" if b.committed else "NO",
                         _time(b.next_watermark_ms), _offsets_cell(b.offsets)])
        out += _table(rows)

    out.append("")
    if not c.state:
        out.append("state: none (a stateless query)")
    else:
        out.append("state operators")
        rows = [["operator", "partitions", "versions", "delta", "snapshot", "zip", "changelog", "stores", "_metadata"]]
        for op in c.state:
            versions_cell = "none" if op.min_version is None else f"{op.min_version}..{op.max_version}"
            rows.append([str(op.operator_id), f"{_span(op.partitions)} ({len(op.partitions)})", versions_cell,
                         str(op.delta_files), str(op.snapshot_files), str(op.zip_files), str(op.changelog_files),
                         ", ".join(op.stores) or "-", "yes" if op.has_metadata else "no"])
        out += _table(rows)

    if c.row_counts is None:
        if c.state:
            out.append("state rows: not counted (row_counts=False)")
    elif c.row_counts:
        out.append("")
        batch = c.row_counts[0].batch_id
        out.append("state rows" + (f" at batch {batch}" if batch is not None else "") + " (Spark's statestore reader)")
        rows = [["operator", "name", "store", "rows", "per partition"]]
        for r in c.row_counts:
            per = ", ".join(str(n) for n in r.rows_per_partition.values())
            store = r.store_name if r.state_variable is None else f"{r.store_name}/{r.state_variable}"
            rows.append([str(r.operator_id), r.operator_name or "-", store,
                         "FAILED" if r.rows is None else str(r.rows), per if r.error is None else _cut(r.error)])
        out += _table(rows)
        unlisted = sorted({r.operator_id for r in c.row_counts if r.operator_name is None})
        if unlisted and c.state_metadata_error is None and c.row_counts[0].batch_id is not None:
            out.append(f"  operators {', '.join(map(str, unlisted))}: not listed by the state-metadata reader "
                       "(no state/<operator>/_metadata: older Spark versions wrote none); stores from the files")
    if c.state_metadata_error is not None:
        out.append(f"  state-metadata reader FAILED: {_cut(c.state_metadata_error)}")
        out.append("  (stores above come from the file layout; to_json() has the full errors)")

    out.append("")
    newest = f"offsets/{c.batches[-1].batch_id}" if c.batches else "no offsets file"
    prefix = "spark.sql."
    short = all(key.startswith(prefix) for key in c.conf)
    left_out = f", {prefix} left out" if short and c.conf else ""
    out.append(f"conf pinned in {newest} ({len(c.conf)} entries{left_out})")
    rows = [[key.removeprefix(prefix) if short else key, value] for key, value in sorted(c.conf.items())]
    out += _table(rows) if rows else ["  none"]
    return "\n".join(out)
