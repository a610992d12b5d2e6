"""Read a legacy (DStream) checkpoint directory with Spark's own classes and describe what it holds.

A DStream checkpoint is Spark's ``checkpoint-<time>`` files: Java-serialized ``Checkpoint`` objects holding the
batch interval, the master, the app name, the batches still pending when the file was written, and the DStream
graph with its Python functions and, for :mod:`legacy.kafka` direct streams, their offsets (pickled
``DirectStreamState``). :func:`inspect_legacy_checkpoint` reads the files as Spark's ``CheckpointReader`` does
(newest first, the first readable one is used) and records what every file held or why it could not be read;
:func:`last_completed_position` says, per direct stream, up to which offsets processing is known complete,
which is where a migrated job (or a job restarted without its checkpoint) may start.

Reading a checkpoint unpickles the job's Python functions, so the job's modules must be importable. It uses
the process-wide registry of restored direct-stream states (``legacy._direct.take_restored``): do not inspect
while the same process restores a context (``get_or_create``) on another thread.

Example::

    cp = inspect_legacy_checkpoint("/data/checkpoints/job")
    print(cp.describe())
    json.dumps(cp.to_json())
    for position in last_completed_position(cp):
        if position.ambiguous:
            raise SystemExit(f"batches {position.pending_with_records} may be partly written")
        print(position.offsets)                                         # {"events": {0: 1200, 1: 1180}}
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kit.spark import has_scheme
from legacy._direct import DirectStreamState, take_restored
from legacy.errors import CheckpointCodeNotImportable, CheckpointUnreadable, NotALegacyCheckpoint, checkpoint_not_found

__all__ = [
    "CheckpointFile",
    "CompletedPosition",
    "DStreamNode",
    "DirectStreamCheckpoint",
    "LegacyCheckpoint",
    "OffsetRangeTuple",
    "inspect_legacy_checkpoint",
    "last_completed_batch_ms",
    "last_completed_position",
    "state_at_last_batch",
    "state_streams",
]

#: ``(topic, partition, from_offset, until_offset)``, ``until_offset`` exclusive (Spark's ``OffsetRange.toTuple``).
OffsetRangeTuple = tuple[str, int, int, int]

_PYTHON_FAILURE = "An exception was raised by Python:"
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
# Spark's Utils.tryOrIOException logs every exception raised while a checkpoint is deserialized, a Python
# traceback and two Java stack traces per unpicklable function; the error raised here carries the facts.
_NOISY_LOGGER = "org.apache.spark.util.Utils"
_MAX_PENDING_SHOWN = 12
_MAX_FOUND = 20


# -- the description ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointFile:
    """One ``checkpoint-*`` file of the directory.

    Attributes:
        name: the file name; Spark names a file after the *latest* batch time it has written, so the checkpoint
            inside may be older (``checkpoint-<time>.bk`` is the write before it).
        size_bytes: the file's length.
        checkpoint_time_ms: the batch time of the checkpoint it holds, None if unreadable.
        error: why it could not be read (one line), None if it was read.
    """

    name: str
    size_bytes: int | None
    checkpoint_time_ms: int | None
    error: str | None = None


@dataclass(frozen=True)
class DStreamNode:
    """One DStream of the checkpointed graph, with the streams it reads from.

    Attributes:
        id: number of this DStream within the checkpoint (a DStream that feeds several others is one node,
            found again under each of them).
        kind: the JVM class's simple name (``ForEachDStream``, ``PythonTransformedDStream``, ``WindowedDStream``...).
        slide_ms: its slide duration (the batch interval, except downstream of windows).
        remember_ms: how long it keeps generated RDDs (None if Spark had not set it).
        window_ms: the window length of a windowed stream, else None.
        checkpoint_ms: its RDD checkpoint interval (stateful streams), else None.
        input_id: Spark's input stream id, for input streams only.
        label: what it is for the kit, e.g. ``"direct Kafka stream [events] 1a2b3c4d"``, else None.
        parents: the DStreams it depends on.
        state_files: a stateful stream's (``updateStateByKey``: ``PythonStateDStream``) checkpointed state RDDs
            the checkpoint records, batch time (ms) → RDD checkpoint directory (Spark's ``DStreamCheckpointData``);
            empty for other streams. Spark checkpoints a state RDD every ``checkpoint_ms`` (10 s by default).
    """

    id: int
    kind: str
    slide_ms: int | None
    remember_ms: int | None
    window_ms: int | None = None
    checkpoint_ms: int | None = None
    input_id: int | None = None
    label: str | None = None
    parents: tuple[DStreamNode, ...] = ()
    state_files: dict[int, str] = field(default_factory=dict)

    def kinds(self) -> list[str]:
        """The kinds of this node and its ancestors, depth first (``["ForEachDStream", "MappedDStream", ...]``)."""
        found = [self.kind]
        for parent in self.parents:
            found.extend(parent.kinds())
        return found

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict: the fields, parents nested."""
        return {
            "id": self.id,
            "kind": self.kind,
            "slide_ms": self.slide_ms,
            "remember_ms": self.remember_ms,
            "window_ms": self.window_ms,
            "checkpoint_ms": self.checkpoint_ms,
            "input_id": self.input_id,
            "label": self.label,
            "parents": [parent.to_json() for parent in self.parents],
            "state_files": {str(ms): path for ms, path in self.state_files.items()},
        }


@dataclass(frozen=True)
class DirectStreamCheckpoint:
    """What a checkpoint holds of one :mod:`legacy.kafka` direct stream.

    Attributes:
        uid: the stream's id.
        topics: its topics.
        next_offsets: ``{topic: {partition: offset}}``, the next offset to read (the latest generated batch's
            until-offsets).
        batches: ``{batch time ms: ranges}`` for the generated batches the stream still remembers (every pending
            batch among them), ranges as ``(topic, partition, from_offset, until_offset)``.
    """

    uid: str
    topics: tuple[str, ...]
    next_offsets: dict[str, dict[int, int]]
    batches: dict[int, tuple[OffsetRangeTuple, ...]]

    def records(self, batch_ms: int) -> int | None:
        """Number of records of batch ``batch_ms``, None if the stream does not remember the batch."""
        ranges = self.batches.get(batch_ms)
        return None if ranges is None else sum(until - start for _, _, start, until in ranges)

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict; partitions and batch times become string keys."""
        return {
            "uid": self.uid,
            "topics": list(self.topics),
            "next_offsets": _offsets_json(self.next_offsets),
            "batches": {str(ms): [list(r) for r in ranges] for ms, ranges in sorted(self.batches.items())},
        }


@dataclass(frozen=True)
class LegacyCheckpoint:
    """A legacy checkpoint directory as Spark would restore it, and what each of its files held.

    Attributes:
        directory: the directory, fully qualified (``file:/...``, ``hdfs://...``).
        files: every ``checkpoint-*`` file, newest first (Spark's reading order).
        used_file: the file the rest describes: the newest readable one, as Spark's ``CheckpointReader`` picks.
        checkpoint_time_ms: the batch time the checkpoint was taken at.
        batch_duration_ms: the batch interval.
        checkpoint_interval_ms: the job's checkpoint interval (None if not recorded).
        master: the master the job ran on.
        app_name: the job's application name.
        written_dir: the checkpoint directory the job wrote to (differs from ``directory`` after a copy).
        pending_batch_ms: batches generated but not completed when the checkpoint was written, sorted; a
            restored job runs them again.
        graph: the graph's output streams, each with the streams it reads from.
        direct_streams: the direct Kafka streams' offsets and remembered batches.
        streaming_conf: the job's ``spark.streaming.*`` settings.
    """

    directory: str
    files: tuple[CheckpointFile, ...]
    used_file: str
    checkpoint_time_ms: int
    batch_duration_ms: int
    checkpoint_interval_ms: int | None
    master: str
    app_name: str
    written_dir: str
    pending_batch_ms: tuple[int, ...]
    graph: tuple[DStreamNode, ...]
    direct_streams: tuple[DirectStreamCheckpoint, ...]
    streaming_conf: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict of everything (``json.dumps`` works on it); dict keys are strings."""
        return {
            "directory": self.directory,
            "files": [
                {
                    "name": f.name,
                    "size_bytes": f.size_bytes,
                    "checkpoint_time_ms": f.checkpoint_time_ms,
                    "error": f.error,
                    "used": f.name == self.used_file,
                }
                for f in self.files
            ],
            "used_file": self.used_file,
            "checkpoint_time_ms": self.checkpoint_time_ms,
            "batch_duration_ms": self.batch_duration_ms,
            "checkpoint_interval_ms": self.checkpoint_interval_ms,
            "master": self.master,
            "app_name": self.app_name,
            "written_dir": self.written_dir,
            "pending_batch_ms": list(self.pending_batch_ms),
            "graph": [node.to_json() for node in self.graph],
            "direct_streams": [stream.to_json() for stream in self.direct_streams],
            "completed_positions": [position.to_json() for position in last_completed_position(self)],
            "streaming_conf": dict(sorted(self.streaming_conf.items())),
        }

    def describe(self) -> str:
        """A human description, one screen: the checkpoint, its files, the graph, the streams, pending batches."""
        return "\n".join(_describe(self)) + "\n"


@dataclass(frozen=True)
class CompletedPosition:
    """Where processing of one direct stream is known complete, per :func:`last_completed_position`.

    Attributes:
        uid: the stream's id.
        offsets: ``{topic: {partition: offset}}``: every record before these offsets was processed.
        pending_with_records: pending batches (ms) that hold records; their output may be partly written.
        pending_unknown: pending batches (ms) whose ranges the stream does not remember (should not happen).
    """

    uid: str
    offsets: dict[str, dict[int, int]]
    pending_with_records: tuple[int, ...] = ()
    pending_unknown: tuple[int, ...] = ()

    @property
    def ambiguous(self) -> bool:
        """True when records past ``offsets`` may have been output already (a pending batch holds records)."""
        return bool(self.pending_with_records or self.pending_unknown)

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict; partitions become string keys."""
        return {
            "uid": self.uid,
            "offsets": _offsets_json(self.offsets),
            "pending_with_records": list(self.pending_with_records),
            "pending_unknown": list(self.pending_unknown),
            "ambiguous": self.ambiguous,
        }


def last_completed_batch_ms(cp: LegacyCheckpoint) -> int:
    """The time of the checkpoint's last completed batch: the batch before the earliest pending one, else its own.

    Spark writes a checkpoint when it generates a batch (the batch pending) and when the batch completes; one
    batch runs at a time (``spark.streaming.concurrentJobs`` = 1), so every batch before the earliest pending one
    is complete.
    """
    earliest = min(cp.pending_batch_ms, default=None)
    if earliest is None or earliest > cp.checkpoint_time_ms:
        return cp.checkpoint_time_ms
    return earliest - cp.batch_duration_ms


def state_at_last_batch(cp: LegacyCheckpoint) -> tuple[int, str]:
    """``(batch time, file)`` of the checkpoint's one state stream's RDD at its last completed batch.

    Raises:
        ConfigError: no state stream, several, or none of its files at that batch (Spark checkpoints a state
            RDD every ``checkpoint_ms``, 10 s by default, and recomputes the batches since on restart).
    """
    from kit.errors import ConfigError

    streams = state_streams(cp)
    if len(streams) != 1:
        msg = (f"the checkpoint {cp.directory} holds {len(streams) or 'no'} updateStateByKey stream"
               f"{'s' if len(streams) != 1 else ''}; --state-from a checkpoint reads exactly one: name the job's "
               "output that re-emits its state instead")
        raise ConfigError(msg, field="state_from", expected="one state stream", actual=len(streams))
    (stream,) = streams
    last = last_completed_batch_ms(cp)
    if last not in stream.state_files:
        held = f"at batch {max(stream.state_files)}" if stream.state_files else "at no batch yet"
        msg = (f"the checkpoint {cp.directory} holds the job's state {held}, not at its last completed batch {last} "
               f"(Spark checkpoints state every {_ms(stream.checkpoint_ms)} and recomputes the batches since): "
               "checkpoint the state stream every batch (state.checkpoint(batch interval)) and stop the job again, "
               "or name the job's output that re-emits its state")
        raise ConfigError(msg, field="state_from", expected=f"state checkpointed at {last}", actual=held)
    return last, stream.state_files[last]


def state_streams(cp: LegacyCheckpoint) -> list[DStreamNode]:
    """The graph's stateful streams (``*StateDStream``), each once, in the order the graph reaches them."""
    found: dict[int, DStreamNode] = {}

    def visit(node: DStreamNode) -> None:
        if node.kind.endswith("StateDStream"):
            found.setdefault(node.id, node)
        for parent in node.parents:
            visit(parent)

    for output in cp.graph:
        visit(output)
    return list(found.values())


def last_completed_position(cp: LegacyCheckpoint) -> tuple[CompletedPosition, ...]:
    """Per direct stream (in ``cp.direct_streams`` order), the offsets up to which processing is known complete.

    Spark runs one batch's jobs at a time, in batch-time order (``spark.streaming.concurrentJobs`` = 1, the
    default), and a direct stream's batches are contiguous, so everything before the earliest pending batch
    that holds records is processed, and nothing of it or after it is known to be. With no pending batch
    holding records the position is the stream's next offsets. A pending batch that holds records may have
    been partly output before the checkpoint's driver stopped: :attr:`CompletedPosition.ambiguous` says so,
    and a cutover should refuse it (or the new job must tolerate those records twice).

    Args:
        cp: a described checkpoint.

    Returns:
        One :class:`CompletedPosition` per direct stream.
    """
    positions = []
    for stream in cp.direct_streams:
        with_records = tuple(t for t in cp.pending_batch_ms if (stream.records(t) or 0) > 0)
        unknown = tuple(t for t in cp.pending_batch_ms if t not in stream.batches)
        offsets = {topic: dict(parts) for topic, parts in stream.next_offsets.items()}
        if with_records:
            for topic, partition, start, _until in stream.batches[with_records[0]]:
                offsets.setdefault(topic, {})[partition] = start
        positions.append(
            CompletedPosition(
                uid=stream.uid,
                offsets={topic: dict(sorted(parts.items())) for topic, parts in sorted(offsets.items())},
                pending_with_records=with_records,
                pending_unknown=unknown,
            )
        )
    return tuple(positions)


# -- reading ---------------------------------------------------------------------------------------------------


def inspect_legacy_checkpoint(directory: str | os.PathLike[str], sc: Any = None) -> LegacyCheckpoint:
    """Read the checkpoint in ``directory`` as Spark would restore it, and describe it.

    Every ``checkpoint-*`` file is read, newest first; the newest readable one is described (as Spark's
    ``CheckpointReader`` would restore it), and each file's checkpoint time or error is recorded. Nothing is
    written and no StreamingContext is created.

    Args:
        directory: the job's checkpoint directory: a local path, or a URI Hadoop can open (``file:/...``,
            ``hdfs://...``).
        sc: the SparkContext to read with; default: the active one, else a new one from
            :func:`kit.spark.spark_context` (app name "dmk-checkpoint-inspect", left running). Its
            ``spark.io.compression.codec`` must be the one the job wrote with (Spark's default unless changed).

    Returns:
        The :class:`LegacyCheckpoint`.

    Raises:
        CheckpointNotFound: the directory does not exist or its file system cannot be reached.
        NotALegacyCheckpoint: the path holds no ``checkpoint-*`` files (or is a file).
        CheckpointCodeNotImportable: no file is readable, and unpickling the job's Python functions failed
            (the job's module is not importable here); names the missing module.
        CheckpointUnreadable: no file is readable (truncated, corrupt...); lists each file's error.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.streaming import StreamingContext

    given = os.fspath(directory)
    sc = _spark_context(sc)
    StreamingContext._ensure_initialized()  # the serializer that unpickles the graph's Python functions
    jvm = sc._jvm
    text = given if has_scheme(given) else os.path.abspath(given)
    try:
        jpath = jvm.org.apache.hadoop.fs.Path(text)
        fs = jpath.getFileSystem(sc._jsc.hadoopConfiguration())
        exists = fs.exists(jpath)
    except Py4JJavaError as exc:
        raise checkpoint_not_found(given, _java_summary(exc)) from None
    if not exists:
        raise checkpoint_not_found(given)
    qualified = str(fs.makeQualified(jpath).toString())
    status = fs.getFileStatus(jpath)
    if not status.isDirectory():
        raise NotALegacyCheckpoint(
            qualified, found=[jpath.getName()], looks_like="a file; pass the directory that holds it"
        )
    jfiles = jvm.org.apache.spark.streaming.Checkpoint.getCheckpointFiles(text, jvm.scala.Some(fs))
    paths = [jfiles.apply(i) for i in reversed(range(jfiles.size()))]  # newest first
    if not paths:
        found = sorted(
            s.getPath().getName() + ("/" if s.isDirectory() else "") for s in fs.listStatus(jpath)
        )
        raise NotALegacyCheckpoint(qualified, found=found[:_MAX_FOUND], looks_like=_looks_like(found))

    conf = sc._jsc.sc().conf()
    files: list[CheckpointFile] = []
    used: tuple[str, Any, list[DirectStreamState]] | None = None
    python_errors: list[str] = []
    missing: set[str] = set()
    with _quiet_jvm_logger(jvm, _NOISY_LOGGER):
        for path in paths:
            name = str(path.getName())
            size = _size(fs, path)
            take_restored()  # only what this file unpickles below
            try:
                stream = fs.open(path)
                try:
                    checkpoint = jvm.org.apache.spark.streaming.Checkpoint.deserialize(stream, conf)
                finally:
                    stream.close()
            except Py4JJavaError as exc:
                take_restored()
                summary, python_error = _failure(exc)
                if python_error is not None:
                    python_errors.append(python_error)
                    missing.update(_MISSING_MODULE.findall(python_error))
                files.append(CheckpointFile(name, size, None, summary))
                continue
            states = take_restored()
            files.append(CheckpointFile(name, size, int(checkpoint.checkpointTime().milliseconds())))
            if used is None:
                used = (name, checkpoint, states)
    if used is None:
        errors = {f.name: str(f.error) for f in files}
        if python_errors:
            raise CheckpointCodeNotImportable(
                qualified, errors, missing_modules=sorted(missing), python_error=python_errors[0]
            )
        raise CheckpointUnreadable(qualified, errors)
    name, checkpoint, states = used
    return _describe_checkpoint(qualified, tuple(files), name, checkpoint, states)


def _spark_context(sc: Any) -> Any:
    if sc is not None:
        return sc
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return active
    from kit.spark import spark_context

    return spark_context(app_name="dmk-checkpoint-inspect")


def _size(fs: Any, path: Any) -> int | None:
    from py4j.protocol import Py4JJavaError

    try:
        return int(fs.getFileStatus(path).getLen())
    except Py4JJavaError:  # deleted meanwhile: a running job keeps only its newest 10 files
        return None


def _looks_like(found: Sequence[str]) -> str | None:
    names = set(found)
    if {"offsets/", "commits/"} <= names or ("metadata" in names and "offsets/" in names):
        return "a Structured Streaming checkpoint (offsets/, commits/, metadata); read it with Spark SQL's tools"
    if not names:
        return "an empty directory (a job writes its first checkpoint file when its first batch is generated)"
    if names & {"receivedBlockMetadata/", "receivedData/"}:
        return "what a DStream job leaves besides its checkpoint-* files (receiver write-ahead logs), without them"
    return None


@contextmanager
def _quiet_jvm_logger(jvm: Any, name: str) -> Iterator[None]:
    """Turn one log4j2 logger off for the duration (no-op when Spark logs through something else)."""
    from py4j.protocol import Py4JError

    try:
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        previous = jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()
        configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
    except Py4JError:
        yield
        return
    try:
        yield
    finally:
        configurator.setLevel(name, previous)


def _java_summary(exc: Any) -> str:
    """The first line of the Java exception's ``toString`` (class and message), at most 300 characters."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def _failure(exc: Any) -> tuple[str, str | None]:
    """``(one-line summary, last line of the Python traceback or None)`` of a failed deserialization."""
    cause = getattr(exc, "java_exception", None)
    while cause is not None:
        message = cause.getMessage()
        if message is not None and _PYTHON_FAILURE in str(message):
            lines = [line.strip() for line in str(message).split(_PYTHON_FAILURE, 1)[1].splitlines() if line.strip()]
            python_error = lines[-1] if lines else "unknown Python error"
            return f"Python functions of the graph cannot be unpickled: {python_error}", python_error
        cause = cause.getCause()
    return _java_summary(exc), None


def _describe_checkpoint(
    directory: str, files: tuple[CheckpointFile, ...], name: str, checkpoint: Any, states: list[DirectStreamState]
) -> LegacyCheckpoint:
    graph = checkpoint.graph()
    batch_ms = int(graph.batchDuration().milliseconds())
    streams: dict[str, DirectStreamCheckpoint] = {}
    ticks: dict[int, DirectStreamCheckpoint] = {}
    for state in states:
        if state.spec.uid in streams:
            continue
        snapshot = state.snapshot()
        next_offsets: dict[str, dict[int, int]] = {}
        for tp, offset in sorted(snapshot.current.items(), key=lambda item: (item[0].topic, item[0].partition)):
            next_offsets.setdefault(tp.topic, {})[tp.partition] = offset
        stream = DirectStreamCheckpoint(
            uid=state.spec.uid,
            topics=tuple(state.spec.topics),
            next_offsets=next_offsets,
            batches={
                ms: tuple((r.topic, r.partition, r.fromOffset, r.untilOffset) for r in ranges)
                for ms, ranges in sorted(snapshot.batches.items())
            },
        )
        streams[stream.uid] = stream
        ticks[state.spec.tick_id] = stream
    interval = checkpoint.checkpointDuration()
    conf = {}
    for pair in checkpoint.sparkConfPairs():
        key = str(pair._1())
        if key.startswith("spark.streaming."):
            conf[key] = str(pair._2())
    return LegacyCheckpoint(
        directory=directory,
        files=files,
        used_file=name,
        checkpoint_time_ms=int(checkpoint.checkpointTime().milliseconds()),
        batch_duration_ms=batch_ms,
        checkpoint_interval_ms=None if interval is None else int(interval.milliseconds()),
        master=str(checkpoint.master()),
        app_name=str(checkpoint.framework()),
        written_dir=str(checkpoint.checkpointDir()),
        pending_batch_ms=tuple(sorted(int(t.milliseconds()) for t in checkpoint.pendingTimes())),
        graph=_GraphReader(batch_ms, ticks).read(graph.getOutputStreams()),
        direct_streams=tuple(streams.values()),
        streaming_conf=dict(sorted(conf.items())),
    )


class _GraphReader:
    """Turns a deserialized JVM DStreamGraph into :class:`DStreamNode` trees.

    A deserialized graph has no StreamingContext, and an input stream's ``slideDuration`` needs one (it is the
    batch interval), so slides are worked out bottom-up: the batch interval for inputs, the stream's own for
    the streams that declare one (windows), else the parent's, as ``DStream.slideDuration`` delegates.
    """

    def __init__(self, batch_ms: int, ticks: Mapping[int, DirectStreamCheckpoint]) -> None:
        self._batch_ms = batch_ms
        self._ticks = ticks
        self._seen: dict[int, list[tuple[Any, DStreamNode]]] = {}
        self._next_id = 0

    def read(self, outputs: Any) -> tuple[DStreamNode, ...]:
        return tuple(self._node(outputs[i]) for i in range(len(outputs)))

    def _node(self, jds: Any) -> DStreamNode:
        key = int(jds.hashCode())  # DStream does not override hashCode: identity
        for other, node in self._seen.get(key, []):
            if other.equals(jds):
                return node
        deps = jds.dependencies()
        parents = tuple(self._node(deps.apply(i)) for i in range(deps.size()))
        kind = str(jds.getClass().getSimpleName())
        input_id = _optional_int(jds, "id") if not parents else None
        node = DStreamNode(
            id=self._take_id(),
            kind=kind,
            slide_ms=self._slide(jds, parents),
            remember_ms=_millis(jds.rememberDuration()),
            window_ms=_optional_millis(jds, "windowDuration") if "Window" in kind else None,
            checkpoint_ms=_millis(jds.checkpointDuration()),
            input_id=input_id,
            label=self._label(kind, parents, input_id),
            parents=parents,
            state_files=_state_files(jds) if kind.endswith("StateDStream") else {},
        )
        self._seen.setdefault(key, []).append((jds, node))
        return node

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _slide(self, jds: Any, parents: tuple[DStreamNode, ...]) -> int | None:
        from py4j.protocol import Py4JJavaError

        if not parents:
            return self._batch_ms
        try:
            return _millis(jds.slideDuration())
        except Py4JJavaError:  # "ssc is null", from the input stream it delegates to
            return parents[0].slide_ms

    def _label(self, kind: str, parents: tuple[DStreamNode, ...], input_id: int | None) -> str | None:
        if input_id is not None and input_id in self._ticks:
            return f"tick of direct Kafka stream {self._ticks[input_id].uid[:8]}"
        if kind == "PythonTransformedDStream" and len(parents) == 1 and len(parents[0].parents) == 1:
            tick = parents[0].parents[0].input_id
            stream = self._ticks.get(tick) if tick is not None else None
            if stream is not None:
                return f"direct Kafka stream [{', '.join(stream.topics)}] {stream.uid[:8]}"
        return None


def _state_files(jds: Any) -> dict[int, str]:
    """A stateful DStream's checkpointed RDDs: batch time (ms) → file, from its deserialized checkpoint data."""
    files = jds.checkpointData().currentCheckpointFiles()
    found = {}
    entries = files.iterator()
    while entries.hasNext():
        entry = entries.next()
        found[int(entry._1().milliseconds())] = str(entry._2())
    return dict(sorted(found.items()))


def _optional_int(jobj: Any, method: str) -> int | None:
    from py4j.protocol import Py4JError

    try:
        return int(getattr(jobj, method)())
    except Py4JError:
        return None


def _millis(duration: Any) -> int | None:
    return None if duration is None else int(duration.milliseconds())


def _optional_millis(jobj: Any, method: str) -> int | None:
    from py4j.protocol import Py4JError

    try:
        return _millis(getattr(jobj, method)())
    except Py4JError:
        return None


def _offsets_json(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in sorted(offsets.items())}


# -- rendering -------------------------------------------------------------------------------------------------


def _clock(ms: int, *, date: bool = False) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S") + f".{ms % 1000:03d}"
    return text + (" UTC" if date else "")


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"


def _bytes(size: int | None) -> str:
    if size is None:
        return "?"
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"


def _offsets_text(offsets: Mapping[str, Mapping[int, int]]) -> str:
    return "  ".join(
        f"{topic} " + " ".join(f"{p}:{o}" for p, o in sorted(parts.items())) for topic, parts in sorted(offsets.items())
    ) or "(no partitions)"


def _ranges_text(ranges: Sequence[OffsetRangeTuple]) -> str:
    shown = [f"{t}-{p} [{start}, {until})" for t, p, start, until in ranges if until > start]
    return "  ".join(shown) if shown else "no records"


def _describe(cp: LegacyCheckpoint) -> list[str]:
    newest = cp.files[0].name if cp.files else None
    used_note = "the newest file" if cp.used_file == newest else "newer files are unreadable"
    fields = [
        ("read from", f"{cp.used_file} ({used_note}; Spark would restore this one)"),
        ("checkpoint time", f"{cp.checkpoint_time_ms}  {_clock(cp.checkpoint_time_ms, date=True)}"),
        ("batch interval", _ms(cp.batch_duration_ms)),
        ("checkpoint every", _ms(cp.checkpoint_interval_ms)),
        ("master", cp.master),
        ("app name", cp.app_name),
    ]
    later = [f for f in cp.files if f.checkpoint_time_ms is not None and f.checkpoint_time_ms > cp.checkpoint_time_ms]
    if later:
        latest = max(later, key=lambda f: f.checkpoint_time_ms or 0)
        fields.append((
            "note",
            f"{latest.name} holds a later checkpoint ({latest.checkpoint_time_ms}); Spark restores the one above "
            "(files are named after the latest time written, and this one was written last)",
        ))
    if cp.written_dir.rstrip("/") != cp.directory.rstrip("/"):
        fields.append(("written to", cp.written_dir))
    if cp.streaming_conf:
        settings = (f"{key.removeprefix('spark.streaming.')}={value}" for key, value in cp.streaming_conf.items())
        fields.append(("settings", "  ".join(settings)))
    width = max(len(key) for key, _ in fields)
    lines = [f"Legacy (DStream) checkpoint {cp.directory}"]
    lines += [f"  {key.ljust(width)}  {value}" for key, value in fields]

    lines.append(f"Files, newest first ({len(cp.files)}; Spark keeps the newest 10)")
    name_width = max(len(f.name) for f in cp.files)
    size_width = max(len(_bytes(f.size_bytes)) for f in cp.files)
    for f in cp.files:
        if f.error is not None:
            what = f"UNREADABLE: {f.error}"
        else:
            what = f"checkpoint time {f.checkpoint_time_ms}" + ("  <- used" if f.name == cp.used_file else "")
        lines.append(f"  {f.name.ljust(name_width)}  {_bytes(f.size_bytes).rjust(size_width)}  {what}")

    lines.append(f"DStream graph ({len(cp.graph)} output stream{'s' if len(cp.graph) != 1 else ''})")
    rows: list[tuple[str, str]] = []
    shown: set[int] = set()
    for output in cp.graph:
        _tree_rows(output, "", "", shown, rows)
    tree_width = max((len(left) for left, _ in rows), default=0)
    lines += [f"  {left.ljust(tree_width)}  {right}".rstrip() for left, right in rows]

    positions = {p.uid: p for p in last_completed_position(cp)}
    if cp.direct_streams:
        lines.append(f"Direct Kafka streams ({len(cp.direct_streams)})")
    for stream in cp.direct_streams:
        position = positions[stream.uid]
        remembered = sorted(stream.batches)
        if remembered:
            total = sum(stream.records(t) or 0 for t in remembered)
            span = f"{len(remembered)} batches {remembered[0]}..{remembered[-1]}, {total} records"
        else:
            span = "none"
        if position.pending_with_records:
            n = len(position.pending_with_records)
            status = (
                f"AMBIGUOUS: {n} pending batch{'es' if n > 1 else ''} from {position.pending_with_records[0]} "
                f"hold{'' if n > 1 else 's'} records, maybe partly output"
            )
        elif position.pending_unknown:
            status = f"AMBIGUOUS: pending batch {position.pending_unknown[0]} is unknown to the stream"
        else:
            status = "no pending batch holds records"
        stream_fields = [
            ("next offsets", _offsets_text(stream.next_offsets)),
            ("remembered", span),
            ("completed up to", f"{_offsets_text(position.offsets)}  ({status})"),
        ]
        key_width = max(len(key) for key, _ in stream_fields)
        lines.append(f"  {stream.uid}  topics {', '.join(stream.topics)}")
        lines += [f"    {key.ljust(key_width)}  {value}" for key, value in stream_fields]

    lines.append(f"Pending batches ({len(cp.pending_batch_ms)}), run again by a restored job")
    if not cp.pending_batch_ms:
        lines.append("  none")
    for t in cp.pending_batch_ms[:_MAX_PENDING_SHOWN]:
        if not cp.direct_streams:
            lines.append(f"  {t}  {_clock(t)}")
        for stream in cp.direct_streams:
            prefix = f"{stream.uid[:8]}  " if len(cp.direct_streams) > 1 else ""
            ranges = stream.batches.get(t)
            text = "ranges unknown to the stream" if ranges is None else _ranges_text(ranges)
            records = stream.records(t)
            count = "" if not records else f"  ({records} records)"
            lines.append(f"  {t}  {_clock(t)}  {prefix}{text}{count}")
    hidden = len(cp.pending_batch_ms) - _MAX_PENDING_SHOWN
    if hidden > 0:
        lines.append(f"  ... and {hidden} more, up to {cp.pending_batch_ms[-1]} (to_json() has them all)")
    return lines


def _tree_rows(node: DStreamNode, lead: str, child_lead: str, shown: set[int], rows: list[tuple[str, str]]) -> None:
    name = f"{lead}{node.kind} #{node.id}"
    if node.id in shown:
        rows.append((name, "(shown above)"))
        return
    shown.add(node.id)
    facts = [f"slide {_ms(node.slide_ms)}", f"remember {_ms(node.remember_ms)}"]
    if node.window_ms is not None:
        facts.append(f"window {_ms(node.window_ms)}")
    if node.checkpoint_ms is not None:
        facts.append(f"checkpoint {_ms(node.checkpoint_ms)}")
    if node.state_files:
        facts.append(f"state checkpointed at {_clock(max(node.state_files))}")
    if node.label:
        facts.append(node.label)
    rows.append((name, "  ".join(facts)))
    for i, parent in enumerate(node.parents):
        last = i == len(node.parents) - 1
        branch, rest = ("└─ ", "   ") if last else ("├─ ", "│  ")
        _tree_rows(parent, child_lead + branch, child_lead + rest, shown, rows)
