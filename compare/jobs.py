"""``dmk compare-jobs``: a team's own DStream job and its Structured Streaming rewrite, unmodified, on its own data.

Each job is a command (``python jobs/legacy.py {bootstrap} {topic} {output_topic} {checkpoint}``) run as its
own process through :mod:`compare.jobrun`, which installs the kit's stand-ins (``pyspark.streaming.kafka``;
``format("kafka")`` without Spark's JVM connector) and reports the job's progress. Per job, one after the
other:

1. a fresh input topic (the capture's partitions), a fresh output topic, a fresh checkpoint and output dir;
2. the job is started and waited for until it reports its first batch (so a job reading from ``latest``
   misses nothing), then the capture (:mod:`kit.capture`) is replayed into its input topic;
3. the job is watched until its progress reaches the replay's end offsets, then for ``settle_batches`` more
   completed batches (a DStream job's windows and re-emitted state; a query's no-data batch), then stopped:
   SIGTERM, and SIGKILL after a deadline;
4. its output is read: the output topic's JSON values, or the files it wrote under ``{output_dir}``
   (JSON lines, CSV or Parquet, as Spark and ``saveAsTextFiles`` write them).

The outputs are compared by ``key`` columns: ``final`` (default) takes the last row per key (a DStream job
that re-emits its whole state and an update-mode query then compare equal), ``all`` the multiset of rows.
An optional oracle (``module:fn``, ``fn(capture_frame) -> DataFrame``) is held against both. The run
directory gets ``metrics.json``, ``report.md`` and ``report.html`` (the first differing keys side by side),
both jobs' logs and their outputs as JSON lines.

The script jobs are an engine like the others (:class:`ScriptEngine` implements :class:`kit.engine.Engine`).

Example::

    settings = JobsSettings(input_file="orders.jsonl", key=("customer",), out_dir=Path("runs/orders"),
                            legacy="python jobs/legacy.py {bootstrap} {topic} {output_topic} {checkpoint}",
                            modern="python jobs/modern.py {bootstrap} {topic} {output_topic} {checkpoint}")
    result = compare_jobs(settings)
    result.metrics.equivalent
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import html
import json
import os
import re
import shlex
import signal
import socket
import string
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from compare.diff import EQUIVALENT, Check, OutputDiff, diff_outputs
from compare.diff import verdict as judge
from compare.errors import EngineFailed
from compare.metrics import BatchesCompared, DiffCounts, JobFigures, JobsMetrics, JobsOracle
from compare.supervise import log_tail
from kit import layout, own_output, workloads
from kit.broker import kafka_or_embedded
from kit.capture import arrival_order, read_capture, replay_capture
from kit.engine import BATCH_SPAN_COLUMNS, DEAD_LETTER_COLUMNS, DriverConfig, written_lines
from kit.errors import ConfigError, RunTimeout
from kit.kafka import Kafka, java_client_settings, using_process_settings
from kit.progress import ProgressRow, read_progress_rows
from kit.ranges import LINES, OffsetRange
from kit.security import KAFKA_SECURITY_ENV

__all__ = [
    "MODES", "PLACEHOLDERS", "QUIET_S", "JobsResult", "JobsSettings", "ScriptEngine", "ScriptRecord", "compare_jobs",
    "read_output",
]

PLACEHOLDERS = ("bootstrap", "topic", "output_topic", "output_dir", "output_dsn", "output_table", "checkpoint",
                "socket_host", "socket_port", "input_dir", "zookeeper", "starting_offsets", "initial_state")
"""What a job command may name: the Kafka, the replayed input topic, a fresh output topic, a fresh output
directory, the output database and the job's own table in it (``--output sql:DSN#TABLE``: ``TABLE_legacy``,
``TABLE_modern``), a fresh checkpoint directory, and the inputs other than Kafka: the job's own socket server
(``socket_host``, ``socket_port``) and the directory its input files are written into (``input_dir``). And
``zookeeper``: the quorum a ``KafkaUtils.createStream`` job names: a real ZooKeeper, run for the compare run only
when a command names ``{zookeeper}`` (:func:`kit.zookeeper.kafka_quorum`), with the run's Kafka brokers registered
in it as Kafka registers them (``/brokers/ids``), so a ``dmk migrate`` draft finds the brokers there. The legacy
stand-in's receiver reads the run's Kafka whatever quorum it names. And, for a run with ``--cutover-at``
(:mod:`compare.jobs_cutover`), what the modern job continues from: ``starting_offsets``, the ``startingOffsets``
JSON of the legacy job's position (one argument; empty when not cutting over: read from ``earliest`` then), and
``initial_state``, the Parquet file of the legacy job's state: its last output row per key, or its checkpointed
``updateStateByKey`` state (empty when not cutting over, or when the legacy job had emitted nothing)."""
MODES = ("final", "all", "batches")
INPUT_KINDS = ("kafka", "socket", "files", "queue")
"""How a job reads the capture: a Kafka topic, lines from a socket, lines in files written into a directory, or
elements of ``queueStream``'s queue (filled by the stand-in)."""
QUIET_S = 3.0
"""How long a query job must report no batch, after its input is consumed, to count as settled."""
SIDES = ("legacy", "modern")


@dataclass(frozen=True)
class JobsSettings:
    """What one ``dmk compare-jobs`` run does.

    Attributes:
        input_file: a capture written by ``dmk capture`` (``.jsonl`` or ``.parquet``).
        key: the output's key columns (fields of the output's JSON values, or columns of its files).
        legacy: the DStream job's command, with placeholders (:data:`PLACEHOLDERS`).
        modern: the Structured Streaming job's command.
        out_dir: the run directory (created; must be empty or absent).
        mode: ``"final"`` (last row per key, default) or ``"all"`` (every row, as a multiset).
        output: where both jobs write: ``"topic"`` (default: ``{output_topic}``, JSON values), ``"dir"``
            (files under ``{output_dir}``) or ``"sql:DSN#TABLE"`` (a table per job, ``{output_table}``, in the
            SQLite file or PostgreSQL database ``DSN``, ``{output_dsn}``).
        partitions: partitions of the input topic (default: the capture's highest partition + 1).
        rate_rps: replay at this even rate instead of the capture's own timing.
        speed: replay the capture's timing this many times faster. Default: as fast as possible.
        oracle: ``module:function`` taking the capture frame and returning the expected rows.
        settle_batches: batches a job must complete after it reached the input's end. Default 2.
        bootstrap_servers: Kafka to use; None starts the embedded broker.
        timeout_s: bound on each wait (start, consumption, stop). Default 600.
        kafka_security: Kafka client settings in the Java client's names (``--kafka-config``/``--kafka-option``)
            for the kit's clients and, through the stand-ins, the jobs' own: added to their ``kafkaParams`` and
            ``kafka.*`` options unless the job sets the same key itself. Given to the jobs in their environment.
        legacy_python2: run the legacy job with the Python 2 compatibility layer (``--legacy-python2``,
            :mod:`legacy._py2compat`); the metrics, the report and the job's log say so.
        cutover_at: cut over after this many records (``--cutover-at``, :mod:`compare.jobs_cutover`): the modern
            job does not run on the whole capture; the legacy job runs on its first records, is stopped, and the
            modern job continues from its position and last rows; their joined output is compared with the
            uninterrupted legacy run.
        cutover_state: where the cutover reads the legacy job's state: ``"output"`` (its last output row per key,
            default) or ``"checkpoint"`` (its ``updateStateByKey`` state in its checkpoint, ``state_columns``
            naming a tuple state's fields).
        state_columns: the names of the state's fields (``--state-columns``), with ``cutover_state="checkpoint"``.
    """

    input_file: str
    key: tuple[str, ...]
    legacy: str
    modern: str
    out_dir: Path
    mode: str = "final"
    output: str = "topic"
    partitions: int | None = None
    rate_rps: float | None = None
    speed: float | None = None
    oracle: str | None = None
    settle_batches: int = 2
    bootstrap_servers: str | None = None
    timeout_s: float = 600.0
    kafka_security: Mapping[str, str] = field(default_factory=dict, repr=False)
    input_kind: str | None = None
    batch_records: int | None = None
    legacy_python2: bool = False
    cutover_at: int | None = None
    cutover_state: str = "output"
    state_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            msg = f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}"
            raise ConfigError(msg, field="mode", expected=MODES, actual=self.mode)
        if _is_files(self.output):
            files_locations(self.output)
        elif self.output not in ("topic", "dir") and not _is_printed(self.output):
            _sql_output(self.output)
        if self.mode == "batches" and self.output not in ("topic",) and not (
                _is_printed(self.output) or _is_files(self.output)):
            msg = (f"--mode batches needs outputs whose batch is known: --output printed, topic or files:LOC, got "
                   f"{self.output!r}; use --mode final or all for this output")
            raise ConfigError(msg, field="mode", expected=("printed", "topic", "files:LOC"), actual=self.output)
        if self.batch_records is not None and self.batch_records < 1:
            msg = f"--batch-records must be at least 1, got {self.batch_records}"
            raise ConfigError(msg, field="batch_records", expected=">= 1", actual=self.batch_records)
        if not self.key:
            msg = "--key needs at least one column of the jobs' output (e.g. --key customer)"
            raise ConfigError(msg, field="key", expected="column names", actual=self.key)
        if self.rate_rps is not None and self.speed is not None:
            msg = "give --rate or --speed, not both"
            raise ConfigError(msg, field="rate", expected="one of them", actual=(self.rate_rps, self.speed))
        from compare.engines import get_engine

        for side in SIDES:
            refused = get_engine(side).refused_script_inputs.get(self.input_kinds[side])
            if refused is not None:
                raise ConfigError(refused, field="input_kind", expected=f"files for the {side} job",
                                  actual=self.input_kind)
        for side, command in (("legacy", self.legacy), ("modern", self.modern)):
            _check_command(side, command, self.output, self.input_kinds[side])
        if self.cutover_at is not None:
            self._check_cutover()
        elif self.cutover_state != "output" or self.state_columns:
            msg = ("--cutover-state and --state-columns say how a cutover reads the legacy job's state: "
                   "add --cutover-at N")
            raise ConfigError(msg, field="cutover_at", expected="a record count", actual=None)

    def _check_cutover(self) -> None:
        """Refuse a ``--cutover-at`` the run cannot do: one line each, with the fix."""
        named = {name for _, name, _, _ in string.Formatter().parse(self.modern)}
        problems = {
            "cutover_at": self.cutover_at is not None and self.cutover_at < 1 and "must be at least 1 record",
            "input_kind": set(self.input_kinds.values()) != {"kafka"} and (
                "needs both jobs to read Kafka: a cutover's position is Kafka offsets"),
            "mode": self.mode == "batches" and "cannot be combined with --mode batches: use final or all",
            "output": _is_printed(self.output) and (
                "needs an output the kit reads as one table: topic, dir, sql or files"),
            "cutover_state": self.cutover_state not in ("output", "checkpoint") and (
                f"reads the state from the legacy job's output or checkpoint, not {self.cutover_state!r}"),
            "state_columns": bool(self.state_columns) and self.cutover_state != "checkpoint" and (
                "with --state-columns needs --cutover-state checkpoint (the names are a checkpoint state's fields; "
                "an output's rows have their own columns)"),
            "starting_offsets": "starting_offsets" not in named and (
                "needs the modern command to name {starting_offsets} (pass it to the Kafka source's startingOffsets "
                "option): it starts where the legacy job stopped"),
        }
        for where, problem in problems.items():
            if problem:
                msg = f"--cutover-at {problem}"
                raise ConfigError(msg, field=where, expected="a cutover the run can do", actual=self.cutover_at)

    @property
    def input_kinds(self) -> dict[str, str]:
        """Each job's input kind: ``--input-kind`` (``KIND`` or ``LEGACY,MODERN``), else its placeholders'."""
        given = [k.strip() for k in (self.input_kind or "").split(",") if k.strip()]
        bad = [k for k in given if k not in INPUT_KINDS]
        if bad or len(given) > 2:
            msg = (f"--input-kind must be one of {', '.join(INPUT_KINDS)}, or two of them (legacy,modern), got "
                   f"{self.input_kind!r}")
            raise ConfigError(msg, field="input_kind", expected=INPUT_KINDS, actual=self.input_kind)
        kinds = {}
        for n, (side, command) in enumerate((("legacy", self.legacy), ("modern", self.modern))):
            kinds[side] = given[min(n, len(given) - 1)] if given else _placeholder_kind(side, command)
        return kinds


def _is_printed(output: str) -> bool:
    return output == "printed" or output.startswith("printed:")


def _is_files(output: str) -> bool:
    return output.startswith("files:")


def _placeholder_kind(side: str, command: str) -> str:
    names = {name for _, name, _, _ in string.Formatter().parse(command) if name}
    if names & {"socket_host", "socket_port"}:
        return "socket"
    if "input_dir" in names:
        return "files"
    if "topic" in names:
        return "kafka"
    msg = (f"--{side} names no input: pass {{topic}} (Kafka; with {{bootstrap}}, or {{zookeeper}} for createStream), "
           "{socket_host} {socket_port} (socketTextStream, "
           "format('socket')) or {input_dir} (textFileStream, file sources) in its command, or --input-kind "
           "queue|socket|files for a queueStream, socket or directory the job opens itself (the stand-in feeds it)")
    raise ConfigError(msg, field=side, expected=("{topic}", "{socket_port}", "{input_dir}"), actual=sorted(names))


def _check_command(side: str, command: str, output: str, kind: str = "kafka") -> None:
    names = {name for _, name, _, _ in string.Formatter().parse(command) if name}
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        msg = f"--{side} names {{{unknown[0]}}}; the placeholders are {known}"
        raise ConfigError(msg, field=side, expected=PLACEHOLDERS, actual=unknown)
    # --input-kind kafka with no Kafka placeholder: the job names its own Kafka, redirected by the stand-ins.
    fed = names & {"bootstrap", "topic", "zookeeper"}
    needed = ["zookeeper" if "zookeeper" in names else "bootstrap", "topic"] if kind == "kafka" and fed else []
    if not _is_printed(output) and not _is_files(output):  # files:LOC: the job names its own location
        needed.append({"topic": "output_topic", "dir": "output_dir"}.get(output, "output_table"))
    if output == "topic" and "bootstrap" not in needed:
        needed.insert(0, "bootstrap")
    missing = [p for p in needed if p not in names]
    if missing:
        quorum = missing[0] == "bootstrap" and "zookeeper" not in names
        msg = (f"--{side} never names {{{missing[0]}}}: the job could not find its "
               f"{'Kafka' if missing[0] == 'bootstrap' else 'input' if missing[0] == 'topic' else 'output'}"
               f"{' ({zookeeper} instead for a createStream quorum)' if quorum else ''}; "
               f"pass it as an argument, e.g. \"python job.py {' '.join('{' + p + '}' for p in needed)} "
               "{checkpoint}\"")
        raise ConfigError(msg, field=side, expected=needed, actual=sorted(names))
    argv = shlex.split(command)
    if len(argv) < 2 or Path(argv[0]).name not in ("python", "python3", Path(sys.executable).name):
        msg = (f"--{side} must run a Python script or module with python (\"python job.py ...\" or \"python -m "
               f"pkg.job ...\"), got {command!r}: the kit's stand-ins are installed in that interpreter")
        raise ConfigError(msg, field=side, expected="python SCRIPT ...", actual=command)


# -- a job's own crash -------------------------------------------------------------------------------------

_NOISE = ("Py4JNetworkError", "Py4JError", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError",
          "KeyboardInterrupt", "Answer from Java side is empty", "SystemExit")
"""Exceptions of a driver being shut down (py4j losing its JVM), not of the job's own code."""
_NOT_THE_JOBS = (f"{os.sep}pyspark{os.sep}", f"{os.sep}py4j{os.sep}", f"{os.sep}runpy.py", f"{os.sep}threading.py",
                 f"{os.sep}socketserver.py", f"compare{os.sep}jobrun.py", f"legacy{os.sep}standin.py",
                 f"modern{os.sep}standin.py", f"{os.sep}site-packages{os.sep}",
                 f"{os.sep}dist-packages{os.sep}")


_PYTHON2_ERRORS = re.compile(r"name '(reload|unicode|basestring|long|unichr|xrange)' is not defined|"
                             r"has no attribute '(setdefaultencoding|iteritems|itervalues|iterkeys|has_key)'|"
                             r"Unsupported type for serialized (value|key): <class 'str'>")
"""A Python 2-era job's first error under Python 3 (:func:`job_error`'s text)."""


def job_error(log: Path) -> str | None:
    """The job's own crash in its log: the first Python traceback that is not py4j's or the JVM's shutdown noise.

    Returns ``"ExceptionType: message (at FILE:LINE)"``, the line being the job's innermost frame outside
    PySpark, py4j and installed libraries, or None when the log holds no such traceback. A Python worker's
    traceback quoted in a Java exception (``PythonException: Traceback ...``) counts: that is where a
    foreachRDD function's or a UDF's error is.
    """
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: list[tuple[str, str | None]] = []
    for i, line in enumerate(lines):
        if "Traceback (most recent call last):" not in line:
            continue
        frame = None
        for j in range(i + 1, min(len(lines), i + 400)):
            text = lines[j]
            if text.startswith((" ", "\t")):
                stripped = text.strip()
                if stripped.startswith('File "') and not any(part in stripped for part in _NOT_THE_JOBS):
                    where, _, rest = stripped[6:].partition('", line ')
                    frame = f"{os.path.basename(where)}:{rest.split(',')[0]}"
                continue
            if text.strip() and not text.startswith(("During handling", "The above exception")):
                if not any(noise in text for noise in _NOISE):
                    found.append((text.strip()[:300], frame))
                break
    for exc, frame in found:
        if frame is not None:
            return f"{exc} (at {frame})"
    return found[0][0] if found else None


# -- the script engine -------------------------------------------------------------------------------------


def _reached_by_every_source(per_source: dict[tuple[str, int, int], int],
                             ranges: list[Any]) -> dict[tuple[str, int], int]:
    """Add a batch's ranges to ``per_source``; the offset every source of each partition has reached.

    A job may read one topic through two Kafka sources (a draft's two sources of one query): a batch lists the
    same partition once per source, in the same order every batch, and the partition is consumed once the
    slower has reached the end. The line/element inputs' ``("lines", 0)`` is one running count they share.
    """
    seen: dict[tuple[str, int], int] = {}
    for topic, partition, _, until in ranges:
        nth = 0 if topic == LINES else seen.get((topic, partition), 0)
        seen[(topic, partition)] = nth + 1
        per_source[(topic, partition, nth)] = max(per_source.get((topic, partition, nth), 0), until)
    reached: dict[tuple[str, int], int] = {}
    for (topic, partition, _), until in per_source.items():
        reached[(topic, partition)] = min(reached.get((topic, partition), until), until)
    return reached


def _consumed(reached: Mapping[tuple[str, int], int], wanted: Mapping[tuple[str, int], int], *,
              counts_lines: bool) -> bool:
    """Whether a job's inputs reached ``wanted``: its offsets, and the records its receiver streams counted.

    A Kafka receiver stream (createStream) counts records (``("lines", 0)``), not offsets. A job reading the
    topic both ways (a receiver and a direct stream) has consumed it once each has: the direct stream's offsets
    alone would stop it before its receiver's group has joined.
    """
    if not counts_lines:
        return all(reached.get(tp, 0) >= end for tp, end in wanted.items())
    by_lines = reached.get((LINES, 0), -1) >= sum(wanted.values())
    direct = [tp for tp in wanted if tp in reached]
    if (LINES, 0) in reached and direct:
        return by_lines and all(reached[tp] >= wanted[tp] for tp in wanted)
    return by_lines or all(reached.get(tp, 0) >= end for tp, end in wanted.items())


class ScriptRun:
    """A job script's process: wait until it consumed the input, then stop it."""

    def __init__(self, engine: ScriptEngine, process: subprocess.Popen[bytes], out: Path) -> None:
        self.engine, self.process, self.out = engine, process, out

    def check(self, *, may_end: bool = False) -> bool:
        """Raise :class:`EngineFailed` if the job's process has exited (with code 0 too, unless ``may_end``).

        The error names the job's own crash when its log holds one (:func:`job_error`), else the log's tail.
        Returns whether the process has ended (with code 0; ``may_end`` only).
        """
        code = self.process.poll()
        if code is None or (code == 0 and may_end):
            return code is not None
        log = self.out / layout.JOB_LOG
        own = job_error(log)
        if own is not None:
            msg = f"the {self.engine.name} job failed in its own code: {own}; its log: {log}"
            if not self.engine.python2 and _PYTHON2_ERRORS.search(own):
                msg += ("; it looks like Python 2-era code: run the original with --legacy-python2 (dmk's Python 2 "
                        "compatibility layer), or port it (dmk migrate JOB.py names each line and its fix)")
        else:
            msg = (f"the {self.engine.name} job exited with code {code} before it was done; last lines of {log}:\n"
                   f"{log_tail(log)}")
        raise EngineFailed(msg, engine=self.engine.name, log=str(log))

    def await_started(self, timeout_s: float, *, opened: bool = False) -> None:
        """Wait until the job reports its first batch (it is reading), or, with ``opened``, opened its input.

        A query on a socket or a directory runs no batch before it has data: that it opened its input is enough
        (a socket's lines wait for its connection; a file source reads the files already there).
        """
        deadline = time.monotonic() + timeout_s
        while not read_progress_rows(self.engine.progress_path(self.out)) and not (
                opened and written_lines(self.out / layout.INPUTS)):
            if self.check(may_end=True):
                break  # it ended by itself: await_offsets says whether it had consumed its input
            if time.monotonic() > deadline:
                own = job_error(self.out / layout.JOB_LOG)
                msg = (f"the {self.engine.name} job reported no batch within {timeout_s:.0f} s of its start; " + (
                    f"it failed in its own code: {own}; " if own else "") + f"see {self.out / 'job.log'}. Does it "
                    "start a StreamingContext or a query on the given input?")
                raise RunTimeout(msg, reached=None, expected="a first batch")
            time.sleep(0.2)

    def check_input(self, kind: str) -> None:
        """Raise :class:`ConfigError` if the job opened inputs, none of them of ``kind`` (what is fed to it)."""
        opened = written_lines(self.out / layout.INPUTS)
        if opened and not any(row["kind"] == kind for row in opened):
            seen = ", ".join(f"{row['kind']} at {row['at']}" for row in opened)
            msg = (f"the {self.engine.name} job reads no {kind} input, which is what it was given; it opened {seen}: "
                   f"pass --input-kind {opened[0]['kind']} (or the placeholders of that input); both jobs' logs are "
                   f"under {self.out.parent}")
            raise ConfigError(msg, field="input_kind", expected=opened[0]["kind"], actual=kind)

    def await_offsets(
        self, end_offsets: Mapping[str, Mapping[int, int]], *, timeout_s: float, extra_batches: int = 2,
        lines: int | None = None,
    ) -> None:
        """Wait until the job's completed batches cover ``end_offsets`` (or ``lines`` elements), then until it settles.

        A DStream job settles after ``extra_batches`` batches more (its batches come every interval, idle or
        not). A query reports progress only for batches that run, so it has settled once no batch has been
        reported for :data:`QUIET_S` (a no-data batch applying a watermark comes right after the last one). A
        job may end by itself (exit code 0) once it has consumed its input. ``extra_batches=0``: return as soon
        as the input is covered (a chunk of ``--mode batches``).
        """
        deadline = time.monotonic() + timeout_s
        wanted = {(t, p): e for t, parts in end_offsets.items() for p, e in parts.items()}
        if lines is not None:
            wanted = {(LINES, 0): lines}
        reached: dict[tuple[str, int], int] = {}
        seen, changed = -1, time.monotonic()
        while True:
            ended = self.check(may_end=True)
            batches = self.engine.record(self.out).batch_ranges()
            if len(batches) != seen:
                seen, changed = len(batches), time.monotonic()
            reached = {}
            done_at = None
            per_source: dict[tuple[str, int, int], int] = {}
            for i, ranges in enumerate(batches):
                reached = _reached_by_every_source(per_source, ranges)
                if done_at is None and _consumed(reached, wanted, counts_lines=lines is None):
                    done_at = i
            # A query has settled once quiet, or once that many batches ran after (a dmk migrate draft's query
            # runs one every interval, as DStreams did, so it is never quiet).
            if done_at is not None and (ended or extra_batches == 0 or len(batches) - 1 - done_at >= extra_batches
                                        or (not self.engine.batches_by_clock
                                            and time.monotonic() - changed >= QUIET_S
                                            and time.monotonic() - changed >= self._quiet_s())):
                return
            if ended:
                msg = (f"the {self.engine.name} job ended (exit code 0) before it consumed its input: it reached "
                       f"{reached}, the input ends at {wanted}; see {self.out / 'job.log'}")
                raise EngineFailed(msg, engine=self.engine.name, log=str(self.out / layout.JOB_LOG))
            if time.monotonic() > deadline:
                own = job_error(self.out / layout.JOB_LOG)
                msg = (f"the {self.engine.name} job did not consume its input within {timeout_s:.0f} s: it reached "
                       f"{reached}, the input ends at {wanted}. " + (
                           f"It failed in its own code: {own}. " if own else
                           "Does it read the topic from the beginning (auto.offset.reset smallest / startingOffsets "
                           "earliest)? ") + f"See its log: {self.out / 'job.log'}")
                raise RunTimeout(msg, reached=reached, expected=wanted)
            time.sleep(0.2)

    def _quiet_s(self) -> float:
        """How long a query must report no batch to have settled: :data:`QUIET_S`, or twice its slowest recent batch.

        The first batch, which includes the query's start, is left out. A query that runs a micro-batch every
        interval (a ``dmk migrate`` draft's tick source, ``clock`` in its progress) is never settled by quiet,
        only by its extra batches, as a DStream job: on a loaded machine a window's micro-batch took seconds
        more than the ones before it, and the draft was stopped while it wrote the window.
        """
        reported = read_progress_rows(self.engine.progress_path(self.out))
        if any(r.clock for r in reported):
            return float("inf")
        recent = reported[1:][-5:]
        slowest_ms = max((r.completed_ms - r.batch_ms for r in recent), default=0)
        return max(QUIET_S, 2 * slowest_ms / 1000)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the job's process group; SIGKILL it after ``grace_s``."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@dataclass
class ScriptEngine:
    """A team's job script as an engine: it runs as its own process, the stand-ins of ``kind`` installed.

    Attributes:
        name: the side it is compared on (``legacy``, ``modern``).
        command: the job's command with placeholders.
        kind: which stand-ins the process gets (:func:`compare.jobrun.standin`). Default: ``name``.
        output: where the job writes (:attr:`JobsSettings.output`). Default ``"topic"``.
        python2: run it with the Python 2 compatibility layer (:attr:`JobsSettings.legacy_python2`).
        starting_offsets: the ``{starting_offsets}`` placeholder's value (a cutover's position, JSON).
        initial_state: the ``{initial_state}`` placeholder's value (a cutover's seed file).
        role: ``before``/``after`` for a cutover's runs (:mod:`compare.jobs_cutover`): added to ``{output_table}``
            (they write tables of their own) and to the progress bars' names.
    """

    name: str
    command: str
    kind: str = ""
    output: str = "topic"
    python2: bool = False
    starting_offsets: str = ""
    initial_state: str = ""
    role: str = ""
    batches_by_clock: bool = field(init=False)
    feed: Feed | None = field(default=None, repr=False)
    zookeeper: str | None = field(default=None, repr=False)  # the run's ZooKeeper quorum, when one runs

    def __post_init__(self) -> None:
        from compare.engines import get_engine

        self.kind = self.kind or self.name
        self.batches_by_clock = get_engine(self.kind).batches_by_clock  # as the kit's engine of that kind

    def session(self, config: DriverConfig) -> Any:
        """A script starts its own Spark: no session is made for it."""
        return None

    def exactly_once(self, config: DriverConfig) -> bool:
        """A team's job promises what its own code does: the kit cannot tell, so it holds it to nothing."""
        return False

    def progress_path(self, out_dir: str | Path) -> Path:
        """Where the job's stand-ins report its progress."""
        return Path(out_dir) / layout.STANDIN_PROGRESS

    def placeholders(self, config: DriverConfig) -> dict[str, str]:
        """The values of the command's placeholders for ``config`` (its single input topic)."""
        (topic,) = config.topics.values()
        dsn, table = _sql_output(self.output) if self.output.startswith("sql:") else ("", "dmk_output")
        return {"bootstrap": config.bootstrap_servers, "zookeeper": self.zookeeper or config.bootstrap_servers,
                "topic": topic,
                "output_topic": f"{topic}.{self.name}.out",
                "output_dir": str(Path(config.out_dir) / "output"), "output_dsn": dsn,
                "output_table": "_".join(filter(None, (table, self.name, self.role))),
                "checkpoint": config.checkpoint_dir,
                # one argument each, whatever the JSON or the path holds ('' when not cutting over)
                "starting_offsets": shlex.quote(self.starting_offsets),
                "initial_state": shlex.quote(self.initial_state),
                **(self.feed.placeholders() if self.feed is not None else
                   {"socket_host": "", "socket_port": "", "input_dir": str(Path(config.out_dir) / "input")})}

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> ScriptRun:
        """Start the job's process (in a session of its own, so a stop takes its JVM too)."""
        out = Path(config.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        argv = shlex.split(self.command.format(**self.placeholders(config)))
        runner = [sys.executable, "-m", "compare.jobrun", "--engine", self.kind,
                  "--progress", str(self.progress_path(out)), *argv[1:]]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "DMK_BOOTSTRAP": config.bootstrap_servers,
               "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
        if config.kafka_security:
            env[KAFKA_SECURITY_ENV] = json.dumps(dict(config.kafka_security))
        if self.feed is not None:
            env.update(self.feed.env())
        if self.python2:
            env["DMK_LEGACY_PYTHON2"] = "1"  # legacy/_py2compat.py, installed by the stand-ins
        if _is_files(self.output):  # the job's own output location, pointed at a directory of its run
            location = files_locations(self.output)[SIDES.index(self.name) if self.name in SIDES else 0]
            env[own_output.ENV] = own_output.OutputRedirect(location, str(out / FILES_DIR)).to_json()
        if (self.feed is None or self.feed.kind == "kafka") and "{topic}" not in self.command:
            # a Kafka job naming its own brokers and topics: the stand-ins redirect them to the replayed topic
            env.update(DMK_KAFKA_BOOTSTRAP=config.bootstrap_servers, DMK_KAFKA_TOPIC=self.placeholders(config)["topic"])
        with open(out / layout.JOB_LOG, "ab") as log:
            log.write(f"--- {' '.join(argv)}\n".encode())
            log.flush()
            process = subprocess.Popen(runner, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        return ScriptRun(self, process, out)

    def interval_s(self, config: DriverConfig) -> float:
        """Not known: a script sets its own batch interval or trigger (0: judged by its batches' lengths)."""
        return 0.0

    def record(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> ScriptRecord:
        """What the job's stand-ins reported under ``out_dir`` (:class:`ScriptRecord`); its checkpoint is its own."""
        return ScriptRecord(out_dir)


class ScriptRecord:
    """What a job script's run produced: its stand-ins' progress rows (one per completed batch) and its output.

    A script's output is wherever the job writes it (``--output``); ``dmk compare-jobs`` collects it into
    :data:`kit.layout.COLLECTED_OUTPUT` once the run has ended, and :meth:`outputs` reads that. Malformed and
    late records are the job's own code's business: a script names none.
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)
        self.progress = self.out_dir / layout.STANDIN_PROGRESS

    def batch_ranges(self) -> list[list[OffsetRange]]:
        """The offset ranges of each completed batch, in completion order (both stand-ins report them alike)."""
        return [list(row.ranges) for row in read_progress_rows(self.progress)]

    def batch_spans(self, job: str | None = None) -> pd.DataFrame:
        """One row per completed batch, from the stand-ins' reports (no scheduling delay is known)."""
        rows = [(r.batch_ms, r.batch_ms, r.completed_ms, r.records, r.completed_ms - r.batch_ms, 0)
                for r in read_progress_rows(self.progress)]
        return pd.DataFrame(rows, columns=list(BATCH_SPAN_COLUMNS))

    def batch_phases(self, job: str | None = None) -> pd.DataFrame:
        """A script's batches as one phase: the stand-ins see a batch's whole time only."""
        spans = self.batch_spans()
        return pd.DataFrame({"batch": spans["batch_ms"].astype(str), "records": spans["records"],
                             "processing": spans["processing_ms"]})

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """A script's Spark jobs are not seen: its process has its own Spark."""
        return None

    def processed_records(self) -> int:
        """Records of the batches reported so far."""
        return int(self.batch_spans()["records"].sum())

    def processed_ranges(self, job: str) -> list[OffsetRange]:
        """Every completed batch's ranges."""
        return [r for ranges in self.batch_ranges() for r in ranges]

    def late_dropped(self, job: str) -> int:
        """Not known for a script (its own code decides what is late)."""
        return 0

    def outputs(self, job: str) -> pd.DataFrame:
        """The output rows collected when the run ended, in the order the job wrote them (empty before)."""
        path = self.out_dir / layout.COLLECTED_OUTPUT
        if not path.is_file() or path.stat().st_size == 0:
            return pd.DataFrame()
        return pd.read_json(path, orient="records", lines=True, dtype=False, convert_dates=False)

    def dead_letters(self) -> pd.DataFrame:
        """None named: a script's own code decides what to do with a malformed record."""
        return pd.DataFrame(columns=list(DEAD_LETTER_COLUMNS))

    def late_records(self, job: str) -> pd.DataFrame | None:
        """None: a script's own code decides what is late."""
        return None


# -- inputs other than Kafka --------------------------------------------------------------------------------


def input_units(kind: str, ordered: pd.DataFrame) -> list[Any]:
    """What a job of input ``kind`` is fed, from the capture's records in arrival order.

    ``kafka``: the records themselves (row numbers). ``socket`` and ``files``: the values' lines (UTF-8; a
    null value is an empty line). ``queue``: one element per value, its JSON value where it parses (numbers,
    lists, objects), else its text.
    """
    if kind == "kafka":
        return list(range(len(ordered)))
    texts = [(v or b"").decode("utf-8", "replace") if isinstance(v, (bytes, type(None))) else str(v)
             for v in ordered["value"]]
    if kind == "queue":
        elements = []
        for text in texts:
            try:
                elements.append(json.loads(text))
            except ValueError:
                elements.append(text)
        return elements
    return [line for text in texts for line in text.split("\n")]


class Feed:
    """One job's input other than its Kafka topic: a socket server, a directory, or a queue's file.

    Lines go to the job's own socket server, or into new files of the directory; ``queueStream``'s stand-in
    fills the job's queue from the file (:mod:`legacy.standin`).

    Args:
        kind: ``socket``, ``files``, ``queue`` (or ``kafka``: nothing to feed here).
        out: the job's run directory.
        chunks: the units (:func:`input_units`) in the batches they are fed in.
    """

    def __init__(self, kind: str, out: Path, chunks: list[list[Any]]) -> None:
        self.kind, self.out, self.chunks = kind, out, chunks
        self.directory = out / "input"
        self.server: socket.socket | None = None
        self.connection: socket.socket | None = None
        self._connected = threading.Event()
        self.address = ("", "")
        if kind == "socket":
            self.server = socket.create_server(("127.0.0.1", 0))
            self.address = tuple(str(part) for part in self.server.getsockname()[:2])  # type: ignore[assignment]
            threading.Thread(target=self._accept, name="dmk-socket-feed", daemon=True).start()
        elif kind == "files":
            self.directory.mkdir(parents=True, exist_ok=True)
        elif kind == "queue":
            out.mkdir(parents=True, exist_ok=True)
            (out / "queue.json").write_text(json.dumps(chunks), encoding="utf-8")

    def _accept(self) -> None:
        assert self.server is not None
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connection = connection  # a receiver that restarts connects again: the latest one is fed
            self._connected.set()

    def placeholders(self) -> dict[str, str]:
        return {"socket_host": self.address[0], "socket_port": self.address[1], "input_dir": str(self.directory)}

    def env(self) -> dict[str, str]:
        """What the job's stand-ins redirect the job's own socket, directory or queue to."""
        if self.kind == "socket":
            host, port = self.placeholders()["socket_host"], self.placeholders()["socket_port"]
            return {"DMK_SOCKET": f"{host}:{port}"}
        if self.kind == "files":
            return {"DMK_INPUT_DIR": str(self.directory)}
        if self.kind == "queue":
            return {"DMK_QUEUE_FILE": str(self.out / "queue.json")}
        return {}

    def send(self, index: int, timeout_s: float) -> None:
        """Feed chunk ``index``: its lines to the socket's connection, or a new file into the directory.

        Raises:
            RunTimeout: no receiver connected to the socket within ``timeout_s``.
        """
        chunk = self.chunks[index]
        if self.kind == "socket":
            if not self._connected.wait(timeout_s):
                msg = (f"nothing connected to the job's socket {self.env()['DMK_SOCKET']} within {timeout_s:.0f} s: "
                       "does the job call socketTextStream (or format('socket'))?")
                raise RunTimeout(msg, reached=None, expected="a connection")
            assert self.connection is not None
            self.connection.sendall("".join(f"{line}\n" for line in chunk).encode())
        elif self.kind == "files":
            temp = self.directory / f".part-{index:05d}.tmp"  # hidden: neither Spark lists it until renamed
            temp.write_text("".join(f"{line}\n" for line in chunk), encoding="utf-8")
            os.replace(temp, self.directory / f"part-{index:05d}.txt")

    def close(self) -> None:
        for sock in (self.connection, self.server):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


# -- outputs -----------------------------------------------------------------------------------------------


def read_output(where: str, engine: ScriptEngine, config: DriverConfig) -> pd.DataFrame:
    """A job's output rows, in the order it wrote them.

    From the output topic: its JSON values, by Kafka timestamp, then partition and offset. From the output
    directory: its files by name, then line.

    Raises:
        ConfigError: a value or line that is not a JSON object (named by where it is), or no output at all.
    """
    values = engine.placeholders(config)
    if where == "topic":
        return _read_topic(config.bootstrap_servers, values["output_topic"], engine.name)
    if where == "dir":
        return _read_dir(Path(values["output_dir"]), engine.name)
    if _is_printed(where):
        return read_printed(Path(config.out_dir), engine.name, where.partition(":")[2])
    if _is_files(where):
        locations = files_locations(where)
        return read_files(Path(config.out_dir), engine.name, locations[SIDES.index(engine.name)
                                                                       if engine.name in SIDES else 0])
    return _read_sql(values["output_dsn"], values["output_table"], engine.name)


# -- the job's own output location (--output files:LOC) ----------------------------------------------------

FILES_DIR = "files"
"""Where a job's writes under its own location go: ``<run>/<side>/files`` (:mod:`kit.own_output`)."""
_STAMPED_NAME = re.compile(r"-(\d{10,})(?:\.[^/]*)?$")
"""A name ``saveAsTextFiles`` made: ``prefix-<batch time in ms>[.suffix]``."""


def files_locations(output: str) -> tuple[str, str]:
    """The legacy job's and the modern job's own output locations in ``files:LOC`` or ``files:LEGACY,MODERN``.

    Raises:
        ConfigError: an empty location, a file system's root, or more than two.
    """
    given = output.removeprefix("files:").split(",")
    if len(given) > 2:
        msg = (f"--output files: takes one location (both jobs write there) or two (LEGACY,MODERN), got "
               f"{len(given)} in {output!r}")
        raise ConfigError(msg, field="output", expected="files:LOC or files:LEGACY,MODERN", actual=output)
    checked = [own_output.checked_location(location) for location in given]
    return checked[0], checked[-1]


def _file_rows(path: Path, side: str) -> list[dict[str, Any]]:
    """One file's rows: Parquet by column, JSON lines by field, CSV cells and text lines by position."""
    if path.suffix == ".parquet":
        return cast(list[dict[str, Any]], pd.read_parquet(path).to_dict("records"))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        msg = (f"the {side} job's output file {path} is not text (a pickle, sequence or compressed file?): "
               "compare-jobs reads text lines, JSON lines, CSV and Parquet; have the job write text")
        raise ConfigError(msg, field="output", expected="text, JSON, CSV or Parquet", actual=str(path)) from None
    if path.suffix == ".json":
        return [_json_row(line, f"{path}:{n}", side) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if path.suffix == ".csv":
        import csv

        return [{f"_{i}": _literal(cell) for i, cell in enumerate(cells, 1)}
                for cells in csv.reader(text.splitlines())]
    rows = []
    for line in text.splitlines():  # str(element) per line, as saveAsTextFile writes it, or a text sink's value
        value = _literal(line)
        if isinstance(value, dict):
            rows.append({str(k): v for k, v in value.items()})
        elif isinstance(value, (tuple, list)):
            rows.append({f"_{i}": v for i, v in enumerate(value, 1)})
        else:
            rows.append({"_1": value if isinstance(value, (str, int, float, bool, type(None))) else line})
    return rows


def read_files(out_dir: Path, side: str, location: str) -> pd.DataFrame:
    """What a job wrote under its own ``location``, redirected to ``out_dir/files`` (``--output files:LOC``).

    Files are read in the order they were written: a ``saveAsTextFiles`` directory (``prefix-<time>``) by its
    batch time, anything else by its modification time, then by name; hidden and ``_`` files (``_SUCCESS``,
    ``.crc``, a file sink's ``_spark_metadata``) are skipped. A text line is a row by position (``('word',
    3)``: ``_1``, ``_2``, as ``saveAsTextFile`` writes ``str(element)``; a line that is no Python literal is
    ``_1``), or by name where it is a dict; ``.json`` lines by field, ``.csv`` by position, Parquet by column.
    ``attrs["timestamps"]`` says when each row was written (for ``--mode batches``): the completion of the
    DStream batch its directory is named after, else the file's modification time.

    Raises:
        ConfigError: the job wrote nothing under ``location`` (where it did write is named), or a file that
            is not text.
    """
    writes = written_lines(out_dir / layout.OUTPUTS)
    if not any(w.get("to") for w in writes):
        elsewhere = sorted({str(w["path"]) for w in writes})
        if elsewhere:
            first = elsewhere[0]
            prefix = first[:-len(m.group(0))] if (m := _STAMPED_NAME.search(first)) else first
            hint = (f"it wrote {', '.join(elsewhere[:3])}{' ...' if len(elsewhere) > 3 else ''}: pass the location "
                    f"it writes, e.g. --output files:{prefix} (LEGACY,MODERN for one each)")
        else:
            hint = ("it wrote no file through Spark's writers (saveAsTextFiles, saveAsTextFile, a DataFrame or "
                    "writeStream path): pass the location it writes, or choose another --output (printed, topic, "
                    "dir)")
        msg = (f"the {side} job wrote nothing under {location} (--output files:); {hint}; both jobs' logs are under "
               f"{out_dir.parent}")
        raise ConfigError(msg, field="output", expected=location, actual=elsewhere[:3])
    completed = {r.batch_ms: r.completed_ms for r in read_progress_rows(out_dir / layout.STANDIN_PROGRESS)}
    root = out_dir / FILES_DIR
    found = []
    for path in root.rglob("*") if root.is_dir() else ():
        parts = path.relative_to(root).parts
        if not path.is_file() or any(part.startswith((".", "_")) for part in parts):
            continue
        stamp = next((int(m.group(1)) for part in reversed(parts) if (m := _STAMPED_NAME.search(part))), None)
        modified = path.stat().st_mtime_ns // 1_000_000
        written = completed.get(stamp, modified) if stamp is not None else modified
        found.append((stamp if stamp is not None else modified, parts, path, written))
    rows: list[dict[str, Any]] = []
    stamps: list[int] = []
    for _, _, path, written in sorted(found):
        more = _file_rows(path, side)
        rows += more
        stamps += [written] * len(more)
    frame = pd.DataFrame(rows)
    frame.attrs["timestamps"] = stamps  # which batch wrote a row (--mode batches)
    frame.attrs["last_timestamp_ms"] = max(stamps) if stamps else None
    return frame


# -- printed output ----------------------------------------------------------------------------------------

BATCH = "__batch"
"""The column of a printed row's batch (``batch_ms`` of a DStream batch, ``query_id/batch_id`` of a query's)."""


_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?")
"""A date-time as ``str(datetime)`` prints it: a batch's time (``time`` of ``foreachRDD(f(time, rdd))``)."""


def _header(line: str) -> bool:
    """A line of pprint's or the console sink's frame, not of the data.

    Dashes, ``Time: ...``, ``Batch: N``, ``...``, or a batch's time between punctuation only
    (``========= 2026-11-27 10:00:01 =========``).
    """
    text = line.strip()
    return (not text or set(text) == {"-"} or text == "..." or text.startswith(("Time: ", "only showing top"))
            or (text.startswith("Batch: ") and text[7:].isdigit())
            or (_TIME.search(text) is not None and not any(c.isalnum() for c in _TIME.sub("", text))))


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def printed_rows(entries: list[dict[str, Any]]) -> list[tuple[str, list[Any], list[str] | None]]:
    """``(batch, values, names)`` of each printed row recorded by the stand-ins (``printed.jsonl``).

    A pprint'ed element or a console sink's row is one row. A printed line is one row too: its Python literal
    where it is one (``('word', 3)``: two values, as ``print(record)`` prints a pair), else its text; the
    frame lines of pprint and the console sink are skipped, and a table printed by ``DataFrame.show()`` gives
    its rows with its header's names.
    """
    rows: list[tuple[str, list[Any], list[str] | None]] = []
    writers = {e["writer"]: e["query_id"] for e in entries if "query_id" in e and "stream" not in e}
    table: dict[str, list[str] | None] = {}
    for entry in entries:
        if "stream" not in entry:
            continue
        if "batch_ms" in entry:
            batch = str(entry["batch_ms"])
        else:
            batch = f"{writers.get(entry.get('writer'), entry.get('writer'))}/{entry['batch_id']}"
        if entry["kind"] == "row":
            rows.append((batch, list(entry["values"]), entry.get("names")))
            continue
        line, stream = entry["line"], entry["stream"]
        text = line.strip()
        if text.startswith("+-") and text.endswith("+"):  # DataFrame.show(): a border
            table[stream] = table.get(stream) if table.get(stream) is not None else []
            continue
        if text.startswith("|") and text.endswith("|") and stream in table:
            cells = [c.strip() for c in text[1:-1].split("|")]
            if not table[stream]:
                table[stream] = cells
            else:
                rows.append((batch, [_literal(c) if c != "null" else None for c in cells], table[stream]))
            continue
        table.pop(stream, None)
        if _header(line):
            continue
        # Two runs happen at different times: a date-time in a printed line (a batch's time) compares as <time>.
        value = _literal(_TIME.sub("<time>", text))
        if isinstance(value, dict):
            rows.append((batch, list(value.values()), [str(k) for k in value]))
        elif isinstance(value, (tuple, list)):
            rows.append((batch, list(value), None))
        elif isinstance(value, (int, float, bool)) or value is None or isinstance(value, str):
            rows.append((batch, [value], None))
        else:
            rows.append((batch, [line], None))
    return rows


def read_printed(out_dir: Path, side: str, chosen: str = "") -> pd.DataFrame:
    """A job's printed rows (:func:`printed_rows`), of its one printed stream or the one ``chosen`` names.

    The frame's columns are ``_1``, ``_2``... (by position), plus :data:`BATCH`; ``attrs["names"]`` holds the
    rows' names where they have some (a console sink's, a Row's). :func:`name_printed` names the columns.

    Raises:
        ConfigError: the job printed nothing, or several streams and ``chosen`` names none of them.
    """
    entries = written_lines(out_dir / layout.PRINTED)
    streams = sorted({e["stream"] for e in entries if "stream" in e})
    names = [n for n in chosen.split(",") if n]
    wanted = names[min(SIDES.index(side), len(names) - 1)] if names else ""  # NAME,NAME: --legacy's, --modern's
    if not streams:
        msg = (f"the {side} job printed nothing (no pprint(), no print in a foreachRDD or foreachBatch function, no "
               f"console sink ran): choose another --output (topic, dir, sql:...); its log: {out_dir / 'job.log'}")
        raise ConfigError(msg, field="output", expected="printed output", actual=None)
    # NAME chooses among several (a job that prints one stream is compared on it); LEGACY,MODERN names each
    # side's stream, which must be there: a stream that printed nothing is not stood in for by another.
    if len(streams) > 1 or (len(names) == 2 and wanted):
        matching = [s for s in streams if wanted and (s == wanted or s.rpartition(":")[2] == wanted)]
        if len(matching) != 1:
            msg = (f"the {side} job printed {len(streams)} stream{'s' if len(streams) > 1 else ''}, "
                   f"{', '.join(streams)}: name one with --output "
                   "printed:NAME (FILE:LINE or LINE; LEGACY,MODERN for one of each)"
                   + (f"; {wanted!r} names none of them" if wanted else ""))
            raise ConfigError(msg, field="output", expected=streams, actual=wanted or None)
        streams = matching
    rows = printed_rows([e for e in entries if "stream" not in e or e["stream"] == streams[0]])
    width = max((len(v) for _, v, _ in rows), default=0)
    frame = pd.DataFrame([[b, *v, *[None] * (width - len(v))] for b, v, _ in rows],
                         columns=[BATCH, *[f"_{i}" for i in range(1, width + 1)]])
    named = [n for _, _, n in rows if n]
    frame.attrs["names"] = named[0] if named and all(n == named[0] for n in named) else None
    frame.attrs["stream"] = streams[0]
    return frame


def name_printed(frames: Mapping[str, pd.DataFrame], key: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """Both jobs' printed rows with the same column names.

    The columns are ``_1``, ``_2``... by position. Unless ``key`` is given that way, where a job's rows have
    names (a console sink's columns) they name the columns of both jobs by position (a DStream's tuples have
    none): ``('word', 3)`` and a row ``word=word, count=3`` compare as ``word``, ``count``.
    """
    if key and all(re.fullmatch(r"_\d+", k) for k in key):
        return dict(frames)
    names = next((f.attrs.get("names") for f in frames.values() if f.attrs.get("names")), None)
    named = {}
    for side, frame in frames.items():
        positional = [c for c in frame.columns if c != BATCH]
        if names and len(names) == len(positional):
            frame = frame.rename(columns=dict(zip(positional, names, strict=True)))
        named[side] = frame
    return named


# -- batches -----------------------------------------------------------------------------------------------


def batch_cuts(progress: list[ProgressRow]) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """``(batch, input consumed up to the batch's end)`` per reported batch, in the order reported.

    What was consumed is a position per Kafka partition (``p0``, ``p1``...: the topics differ between the jobs,
    the offsets do not) or per line/element input (``lines``).
    """
    reached: dict[str, int] = {}
    cuts = []
    for row in progress:
        for r in row.ranges:
            slot = LINES if r.topic == LINES else f"p{r.partition}"
            reached[slot] = max(reached.get(slot, 0), r.until_offset)
        cuts.append((row.key, tuple(sorted(reached.items()))))
    return cuts


def align_batches(
    cuts: Mapping[str, list[tuple[str, tuple[tuple[str, int], ...]]]],
) -> tuple[dict[str, dict[str, int]], list[tuple[int, int]]]:
    """Number both jobs' batches alike, by the input each consumed: ``(side → batch → number, input ranges)``.

    The batches are cut where both jobs had consumed exactly the same input (the same offset in every
    partition, or the same number of lines). Batch ``n`` is everything between the ``n-1``-th and the
    ``n``-th of those common cuts, so a job that split one batch of the other in two is compared on their
    union; ``input ranges[n-1]`` is batch ``n``'s ``(from, until)`` in records or lines. Batches that
    consumed nothing new belong with the batch that reached their position; batches after the last common
    cut get the number after the last.

    When the jobs count their input differently (a ``createStream`` job counts records, ``lines``; its
    rewrite's Kafka source reports offsets per partition), the cuts are compared by the records consumed in
    all: the input topic is new for each job, so its offsets are the records' numbers from 0.
    """
    slots = {frozenset(slot for _, cut in batches for slot, _ in cut) for batches in cuts.values()}
    if len({s for s in slots if s}) > 1:
        cuts = {side: [(key, (("records", sum(v for _, v in cut)),)) for key, cut in batches]
                for side, batches in cuts.items()}
    sets = [{cut for _, cut in batches if sum(v for _, v in cut) > 0} for batches in cuts.values()]
    common = set.intersection(*sets) if sets else set()
    positions = sorted({sum(v for _, v in cut) for cut in common})
    numbered = {side: {key: bisect.bisect_left(positions, sum(v for _, v in cut)) + 1 for key, cut in batches}
                for side, batches in cuts.items()}
    return numbered, [(positions[i - 1] if i else 0, p) for i, p in enumerate(positions)]


def _json_row(text: bytes | str | None, where: str, side: str) -> dict[str, Any]:
    try:
        row = json.loads(text) if text is not None else None
    except ValueError:
        row = None
    if not isinstance(row, dict):
        shown = text if isinstance(text, str) else (text or b"").decode("utf-8", "replace")
        msg = (f"the {side} job's output at {where} is not a JSON object: {shown[:80]!r}. The compared outputs "
               "must be JSON objects with the --key fields (to_json(struct(...)) in a query, json.dumps in a "
               "DStream job)")
        raise ConfigError(msg, field="output", expected="a JSON object", actual=shown[:80])
    return row


def _read_topic(bootstrap: str, topic: str, side: str) -> pd.DataFrame:
    rows: list[tuple[int, int, int, dict[str, Any]]] = []
    with Kafka(bootstrap) as kafka:
        if topic not in kafka.topics():
            return pd.DataFrame()
        ends = kafka.end_offsets(topic)
        for tp, end in sorted(ends.items()):
            for record in kafka.read_range(topic, tp.partition, 0, end):
                where = f"{topic}-{tp.partition} offset {record.offset}"
                rows.append((record.timestamp, tp.partition, record.offset, _json_row(record.value, where, side)))
    rows.sort(key=lambda r: r[:3])
    frame = pd.DataFrame([r[3] for r in rows])
    frame.attrs["last_timestamp_ms"] = rows[-1][0] if rows else None  # when the final result was complete
    frame.attrs["timestamps"] = [r[0] for r in rows]  # which batch wrote a row (--mode batches)
    return frame


def _read_dir(directory: Path, side: str) -> pd.DataFrame:
    frames = []
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    for path in files:
        if path.suffix == ".parquet":
            frames.append(pd.read_parquet(path))
        elif path.suffix == ".csv":
            frames.append(pd.read_csv(path))
        elif not path.suffix or path.suffix in (".json", ".jsonl", ".txt"):  # saveAsTextFiles: part-00000
            lines = path.read_text(encoding="utf-8").splitlines()
            frames.append(pd.DataFrame([_json_row(line, f"{path}:{n}", side)
                                        for n, line in enumerate(lines, start=1) if line.strip()]))
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _sql_output(output: str) -> tuple[str, str]:
    """``(dsn, table)`` of ``sql:DSN#TABLE``.

    Raises:
        ConfigError: not of that form, or a table name that is not a plain identifier.
    """
    dsn, hash_, table = output.removeprefix("sql:").rpartition("#")
    if not output.startswith("sql:") or not hash_ or not dsn or not table.isidentifier():
        msg = (f"--output must be 'topic', 'dir' or 'sql:DSN#TABLE' (sql:/tmp/out.db#totals, "
               f"sql:postgresql://u:p@host/db#totals), 'printed[:NAME]' or 'files:LOC', got {output!r}")
        raise ConfigError(msg, field="output", expected=("topic", "dir", "sql:DSN#TABLE"), actual=output)
    return dsn, table


def _read_sql(dsn: str, table: str, side: str) -> pd.DataFrame:
    """Every row of ``table`` in insertion order where the database keeps one (SQLite's rowid)."""
    if dsn.startswith(("postgresql://", "postgres://")) or "=" in dsn:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=10) as connection:
            cursor = connection.execute(f'SELECT * FROM "{table}"')
            return pd.DataFrame(cursor.fetchall(), columns=[c.name for c in cursor.description or []])
    import sqlite3

    path = dsn.removeprefix("sqlite://")  # sqlite:///abs/path.db, sqlite://rel.db, or a plain path
    if not Path(path).is_file():
        msg = f"the {side} job wrote no database at {path} (its table {table} was to be there)"
        raise ConfigError(msg, field="output", expected="an SQLite file", actual=path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        try:
            rows = connection.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
        except sqlite3.OperationalError as err:
            msg = f"the {side} job's output table {table} cannot be read from {path}: {err}"
            raise ConfigError(msg, field="output", expected=f"a table {table}", actual=str(err)) from None
        return pd.DataFrame(rows.fetchall(), columns=[c[0] for c in rows.description])


def _shape(rows: pd.DataFrame, key: tuple[str, ...], mode: str, side: str) -> pd.DataFrame:
    """The rows compared: the last per key (``final``) or all of them, sorted (``all``)."""
    if rows.empty:
        return pd.DataFrame(columns=list(key))
    absent = [k for k in key if k not in rows.columns]
    if absent:
        msg = (f"the {side} job's output has no {absent[0]!r} field; it has {sorted(rows.columns)}. Pass --key with "
               "the output's key fields (printed tuples: _1, _2... by position)")
        raise ConfigError(msg, field="key", expected=list(rows.columns), actual=absent)
    if mode == "final":
        rows = rows.drop_duplicates(list(key), keep="last")
    return rows.sort_values(list(rows.columns), key=lambda c: c.astype(str), kind="stable").reset_index(drop=True)


# -- the run -----------------------------------------------------------------------------------------------


@dataclass
class JobsResult:
    """A finished compare-jobs run: its metrics (as in ``metrics.json``) and the diff (legacy as expected)."""

    out_dir: Path
    metrics: JobsMetrics
    diff: OutputDiff

    @property
    def equivalent(self) -> bool:
        """The two jobs' outputs agree (and equal the oracle, when one was given)."""
        return self.metrics.equivalent


def _offset_progress(progress: Callable[[str, int, int], None], task: str, done: int,
                     total: int) -> Callable[[int, int], None]:
    return lambda sent, acked: progress(task, done + acked, total)


def _between_batches(progress_path: Path, *, into: float = 0.25) -> None:
    """Sleep until ``into`` of the way into the job's next batch interval, so a chunk fed now lands in one batch.

    Both engines cut batches on multiples of their interval since the epoch (a DStream's batch times, a
    processing-time trigger's), which the reported batch times give: the smallest gap between two of them,
    to 100 ms (1 s when fewer than two were reported). A chunk fed right after a cut has most of an interval
    to arrive before the next one.
    """
    times = sorted({row.batch_ms for row in read_progress_rows(progress_path)})
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b - a >= 100]
    interval = max(100, round(min(gaps) / 100) * 100) if gaps else 1000
    now = time.time() * 1000
    time.sleep(max(0.0, ((now // interval) + 1 + into) * interval - now) / 1000)


def _run_side(
    engine: ScriptEngine, settings: JobsSettings, frame: pd.DataFrame, bootstrap: str, run_id: str,
    progress: Callable[[str, int, int], None], *, root: Path | None = None, topic: str | None = None,
    records: slice = slice(None),
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run one job on the capture's ``records`` (in arrival order), under ``root`` (default the run's).

    Its input topic is ``topic`` (default a fresh one of its own; created unless it exists: a cutover's second
    job continues on the first one's topic).
    """
    root = root or settings.out_dir
    out = root / engine.name
    label = " ".join(filter(None, (engine.name, engine.role)))
    topic = topic or f"dmk-jobs-{run_id}-{engine.name}"
    kind = settings.input_kinds[engine.name]
    partitions = settings.partitions or (int(frame["partition"].max()) + 1 if len(frame) else 1)
    config = DriverConfig(engine=engine.name, bootstrap_servers=bootstrap, topics={"input": topic}, out_dir=str(out),
                          checkpoint_dir=str(root / f"{engine.name}-checkpoint"),
                          timeout_s=settings.timeout_s, kafka_security=dict(settings.kafka_security))
    ordered = arrival_order(frame).reset_index(drop=True).iloc[records]
    units = input_units(kind, ordered)
    size = settings.batch_records or max(1, -(-len(units) // 10))
    chunks = [units[i:i + size] for i in range(0, len(units), size)] or [[]]
    by_batch = settings.mode == "batches"
    engine.feed = Feed(kind, out, chunks)
    with Kafka(bootstrap) as kafka:
        if kind == "kafka" and topic not in kafka.topics():
            kafka.create_topic(topic, partitions)
        if settings.output == "topic":
            kafka.create_topic(engine.placeholders(config)["output_topic"], partitions)
    run = engine.start(None, config)
    started = time.monotonic()
    sent_ms: list[int] = []
    try:
        run.await_started(settings.timeout_s, opened=kind != "kafka" and not engine.batches_by_clock)
        try:
            run.check_input(kind)
        except ConfigError as exc:  # raised once the other job has run too, so both jobs' logs are there to read
            refused = pd.DataFrame()
            refused.attrs["error"] = exc
            return refused, {}
        speed = None if settings.rate_rps is not None else settings.speed or 1e9
        if kind == "kafka":
            parts = [ordered.iloc[c[0]:c[-1] + 1] for c in chunks if c] if by_batch else [ordered]
            done = 0
            for part in parts:
                if by_batch and part is not parts[0]:
                    _between_batches(engine.progress_path(out))
                replayed = replay_capture(
                    part, bootstrap, topic, speed=speed, rate_rps=settings.rate_rps, partitions=partitions,
                    on_progress=_offset_progress(progress, f"replay {label}", done, len(ordered)))
                done += len(part)
                sent_ms += [int(replayed.log["produced_ms"].min()), int(replayed.log["produced_ms"].max())]
                run.await_offsets(replayed.topic_end_offsets, timeout_s=settings.timeout_s,
                                  extra_batches=0 if by_batch and part is not parts[-1] else settings.settle_batches)
        else:
            fed = 0
            for index, chunk in enumerate(chunks):
                if by_batch and index:
                    _between_batches(engine.progress_path(out))
                sent_ms.append(time.time_ns() // 1_000_000)
                engine.feed.send(index, settings.timeout_s)
                fed += len(chunk)
                progress(f"feed {label}", fed, len(units))
                if by_batch and index < len(chunks) - 1:
                    run.await_offsets({}, lines=fed, timeout_s=settings.timeout_s, extra_batches=0)
                elif settings.rate_rps:
                    time.sleep(len(chunk) / settings.rate_rps)
            run.await_offsets({}, lines=len(units), timeout_s=settings.timeout_s, extra_batches=settings.settle_batches)
        seconds = time.monotonic() - started
    finally:
        run.stop()
        engine.feed.close()
    try:
        rows = read_output(settings.output, engine, config)
    except ConfigError as exc:  # raised once the other job has run too, so both jobs' logs are there to read
        rows = pd.DataFrame()
        rows.attrs["error"] = exc
    rows.to_json(out / layout.COLLECTED_OUTPUT, orient="records", lines=True)
    spans = engine.record(out).batch_spans()
    busy = spans[spans["records"] > 0]
    first_ms, last_ms = min(sent_ms), max(sent_ms)
    span_s = (int(busy["ended_ms"].max()) - first_ms) / 1000 if len(busy) else 0.0
    last_output = rows.attrs.get("last_timestamp_ms")
    figures = {
        "output_rows": len(rows), "input_records": len(ordered), "input_kind": kind, "seconds": round(seconds, 2),
        "batches": len(spans), "command": engine.command,
        # From the first record produced to the end of the last batch with records.
        "throughput_rps": round(len(ordered) / span_s, 1) if span_s > 0 else None,
        # From the last record produced to the last output record (an output topic's Kafka timestamps).
        "result_latency_ms": int(last_output - last_ms) if last_output is not None else None,
    }
    return rows, figures


@contextlib.contextmanager
def _quorum_if_named(settings: JobsSettings, bootstrap: str, out: Path) -> Any:
    """A ZooKeeper with the run's brokers registered, when a command names ``{zookeeper}``; its quorum, else None."""
    named = any("zookeeper" in {name for _, name, _, _ in string.Formatter().parse(command) if name}
                for command in (settings.legacy, settings.modern))
    if not named:
        yield None
        return
    from kit.zookeeper import ZooKeeperError, ZooKeeperServer, register_brokers

    server = ZooKeeperServer(log_path=out / layout.ZOOKEEPER_LOG)
    try:
        try:
            server.start()
            register_brokers(server.hosts, bootstrap)
        except ZooKeeperError as exc:
            msg = f"{{zookeeper}} needs a ZooKeeper for the run, which could not be started: {exc}"
            raise ConfigError(msg, field="zookeeper", expected="a ZooKeeper", actual=None) from None
        yield server.hosts
    finally:
        server.stop()


def compare_jobs(settings: JobsSettings, progress: Callable[[str, int, int], None] | None = None, *,
                 on_broker_start: Callable[[], None] | None = None) -> JobsResult:
    """Run both jobs on one replay each of the capture, compare their outputs, write the run directory.

    Raises:
        ConfigError: bad settings, a run directory that is not empty, an output that is not JSON, a key
            field the output lacks.
        DatasetError: a capture file that does not parse.
        EngineFailed: a job crashed (its log's tail).
        RunTimeout: a job never started reading, or never consumed the whole input.
    """
    report = progress or (lambda task, done, total: None)
    out = settings.out_dir
    if out.exists() and any(out.iterdir()):
        msg = f"run directory {out} is not empty; give a new --out, or remove it"
        raise ConfigError(msg, field="out", expected="an empty directory", actual=str(out))
    frame = read_capture(settings.input_file)
    if settings.cutover_at is not None and settings.cutover_at >= len(frame):
        msg = (f"--cutover-at {settings.cutover_at} leaves the modern job nothing: the capture holds {len(frame):,} "
               "records; cut over before the last one")
        raise ConfigError(msg, field="cutover_at", expected=f"below {len(frame)}", actual=settings.cutover_at)
    oracle_fn = workloads.load_ref(settings.oracle, "oracle") if settings.oracle else None
    out.mkdir(parents=True, exist_ok=True)
    # Each side's command, and whether its job runs with the Python 2 layer (the original only: the rewrite is
    # Python 3 code).
    sides = zip(SIDES, (settings.legacy, settings.modern), (settings.legacy_python2, False), strict=True)
    engines = {name: ScriptEngine(name, command, output=settings.output, python2=python2)
               for name, command, python2 in sides}
    run_id = uuid.uuid4().hex[:8]
    outputs: dict[str, pd.DataFrame] = {}
    figures: dict[str, dict[str, Any]] = {}
    cutover = None
    with using_process_settings(java_client_settings(settings.kafka_security, where="kafka_security")), \
            kafka_or_embedded(settings.bootstrap_servers, log_path=out / layout.BROKER_LOG,
                              on_start=on_broker_start) as kafka, \
            _quorum_if_named(settings, kafka.bootstrap_servers, out) as quorum:
        for name, engine in engines.items():
            engine.zookeeper = quorum
            if name == SIDES[-1] and settings.cutover_at is not None:  # the rewrite's run continues the legacy job
                from compare.jobs_cutover import cut_over

                outputs[name], figures[name], cutover = cut_over(settings, frame, kafka.bootstrap_servers, run_id,
                                                                 report, quorum)
                continue
            outputs[name], figures[name] = _run_side(engine, settings, frame, kafka.bootstrap_servers, run_id, report)
    for rows in outputs.values():
        if "error" in rows.attrs:
            raise rows.attrs["error"]
    if _is_printed(settings.output):
        outputs = name_printed(outputs, settings.key)
        for name, rows in outputs.items():
            figures[name]["printed_stream"] = rows.attrs.get("stream")
    key, mode, ranges = settings.key, settings.mode, list[tuple[int, int]]()
    if settings.mode == "batches":
        paths = {n: e.progress_path(settings.out_dir / n) for n, e in engines.items()}
        outputs, ranges = _numbered_batches(outputs, paths)
        key, mode = (BATCH_COLUMN, *settings.key), "all"
    outputs = {name: rows.drop(columns=[BATCH], errors="ignore") for name, rows in outputs.items()}
    shaped = {name: _shape(rows, key, mode, name) for name, rows in outputs.items()}
    values = sorted({c for f in shaped.values() for c in f.columns} - set(key))
    for rows in shaped.values():
        for column in values:
            if column not in rows.columns:
                rows[column] = None
    expected, actual = (shaped[name] for name in SIDES)  # legacy is the expected side
    diff = diff_outputs(expected, actual, key, values)
    summary = diff.summary() if not diff.equal else ""
    equal = bool(diff.equal)
    batches = oracle = None
    if settings.mode == "batches":
        first = _first_batch(diff, ranges, settings.key)
        batches = BatchesCompared(compared=len(ranges), first_differing=first)
        if first:
            summary = (f"first differing batch: {first['batch']} of {len(ranges)} (input {first['input'][0]}"
                       f"..{first['input'][1]}), keys {first['keys']}. {summary}")
    if oracle_fn is not None:
        expected = _shape(oracle_fn(frame), settings.key, settings.mode, "oracle")  # type: ignore[operator]
        against = {name: diff_outputs(expected, rows, settings.key, [c for c in values if c in expected.columns])
                   for name, rows in shaped.items()}
        oracle = JobsOracle(rows=len(expected), **{f"{n}_vs_oracle": DiffCounts(**d.counts())
                                                   for n, d in against.items()})
        equal = equal and all(d.equal for d in against.values())
    # An empty oracle (or, without one, two empty outputs) compared nothing: NOTHING COMPARED, not a pass.
    compared = oracle.rows if oracle is not None else max(len(f) for f in shaped.values())
    outcome, warnings = judge([Check("rows", "both", equal, summary or "equal")], compared)
    metrics = JobsMetrics(
        input=settings.input_file, records=len(frame), key=tuple(settings.key), mode=settings.mode,
        output=settings.output, equivalent=outcome == EQUIVALENT, jobs_agree=bool(diff.equal),
        modern_vs_legacy=DiffCounts(**diff.counts()), summary=summary,
        jobs={name: JobFigures(**figures[name], rows_compared=len(shaped[name])) for name in engines},
        legacy_python2=_python2_note() if settings.legacy_python2 else None,
        verdict=outcome, warnings=tuple(warnings), batches=batches, oracle=oracle, cutover=cutover,
    )
    metrics.write(out)
    (out / layout.REPORT_MD).write_text(_report(metrics, diff, settings), encoding="utf-8")
    (out / layout.REPORT_HTML).write_text(_report_html(metrics, diff, settings), encoding="utf-8")
    return JobsResult(out, metrics, diff)


BATCH_COLUMN = "batch"
"""The key column ``--mode batches`` adds: the batch's number, as :func:`align_batches` numbers it."""


def _numbered_batches(
    outputs: Mapping[str, pd.DataFrame], progress_paths: Mapping[str, Path],
) -> tuple[dict[str, pd.DataFrame], list[tuple[int, int]]]:
    """Each job's rows with their batch's number (:data:`BATCH_COLUMN`), and each batch's input range.

    A printed row carries its batch; a row of an output topic belongs to the first batch that completed at or
    after its Kafka timestamp (written by that batch's output operation).

    Raises:
        ConfigError: a job reported no batch that consumed input, or the jobs' batches never consumed the same
            input (nothing to align them on).
    """
    progress = {name: read_progress_rows(path) for name, path in progress_paths.items()}
    for name, rows in progress.items():
        if not any(r.count() for row in rows for r in row.ranges):
            msg = (f"--mode batches: the {name} job reported no batch that consumed input (see "
                   f"{progress_paths[name]}); use --mode final or all")
            raise ConfigError(msg, field="mode", expected="batches with input", actual=len(rows))
    numbered, ranges = align_batches({name: batch_cuts(rows) for name, rows in progress.items()})
    if not ranges:
        msg = ("--mode batches: the two jobs' batches never ended at the same input position, so no batch can be "
               "compared with another; use --mode all, or --batch-records to feed the input a batch at a time")
        raise ConfigError(msg, field="mode", expected="common batch boundaries", actual=None)
    after = len(ranges) + 1
    result = {}
    for name, rows in outputs.items():
        if BATCH in rows.columns:
            keys = list(rows[BATCH])
        else:
            done = sorted((r.completed_ms, r.key) for r in progress[name])
            stamps = rows.attrs.get("timestamps") or []
            keys = [done[min(bisect.bisect_left(done, (int(t), "")), len(done) - 1)][1] if done else "" for t in stamps]
        result[name] = rows.assign(**{BATCH_COLUMN: [numbered[name].get(k, after) for k in keys]})
    return result, ranges


def _first_batch(diff: OutputDiff, ranges: list[tuple[int, int]], key: tuple[str, ...]) -> dict[str, Any] | None:
    """The first batch whose rows differ: its number, input range and (up to 10) differing keys."""
    frames = [f for _, f in _differences(diff) if len(f)]
    if not frames:
        return None
    batch = min(int(f[BATCH_COLUMN].min()) for f in frames)
    keys = sorted({tuple(r) for f in frames for r in f[f[BATCH_COLUMN] == batch][list(key)].astype(str).values})
    span = ranges[batch - 1] if batch <= len(ranges) else (ranges[-1][1] if ranges else 0, None)
    return {"batch": batch, "input": list(span), "keys": [k[0] if len(k) == 1 else list(k) for k in keys[:10]]}


def _python2_note() -> str:
    """What ``--legacy-python2`` gave the legacy job, for the metrics, the report and the CLI."""
    from compare.engines import ENGINES, get_engine

    layer = next(e.python2_layer for e in map(get_engine, ENGINES) if e.python2_layer is not None)
    return f"the legacy job ran with dmk's Python 2 compatibility layer (--legacy-python2): {layer}"


def _report(metrics: JobsMetrics, diff: OutputDiff, settings: JobsSettings, limit: int = 20) -> str:
    verdict = metrics.verdict
    lines = [f"# dmk compare-jobs: {verdict}", *(f"\nwarning: {w}" for w in metrics.warnings),
             *([f"\nNote: {metrics.legacy_python2}."] if metrics.legacy_python2 else []), "",
             f"Input: `{metrics.input}` ({metrics.records:,} records), replayed into each job's own topic. "
             f"Compared by `{', '.join(settings.key)}`, mode `{settings.mode}`, outputs from the "
             f"{settings.output}.", "",
             "| | legacy | modern |", "|---|---|---|"]
    for label, field_ in (("command", "command"), ("output rows", "output_rows"), ("rows compared", "rows_compared"),
                          ("batches", "batches"), ("seconds", "seconds"), ("throughput (records/s)", "throughput_rps"),
                          ("last input → last output (ms)", "result_latency_ms")):
        lines.append(f"| {label} | {' | '.join(str(getattr(m, field_)) for m in metrics.jobs.values())} |")
    if metrics.cutover is not None:
        lines += ["", _cutover_sentence(metrics), "", "Legacy job before the cutover: "
                  f"{metrics.cutover.legacy_before.output_rows} output rows, {metrics.cutover.legacy_before.batches} "
                  f"batches, {metrics.cutover.legacy_before.seconds} s."]
    lines += ["", f"Modern against legacy: {metrics.modern_vs_legacy.counts()}."]
    if metrics.oracle is not None:
        lines.append(f"Against the oracle ({metrics.oracle.rows} rows): legacy "
                     f"{metrics.oracle.legacy_vs_oracle.counts()}, modern {metrics.oracle.modern_vs_oracle.counts()}.")
    if not diff.equal:
        lines += ["", f"{metrics.summary}", "", "## First differing keys (legacy | modern)", ""]
        for title, frame in _differences(diff):
            if len(frame):
                lines += [f"### {title} ({len(frame)})", "", "```", frame.head(limit).to_string(index=False), "```", ""]
                if len(frame) > limit:
                    lines.append(f"... {len(frame) - limit} more rows omitted")
    return "\n".join(lines).rstrip() + "\n"


def _cutover_sentence(metrics: JobsMetrics) -> str:
    """What ``--cutover-at`` did, in one sentence of the reports."""
    cut = metrics.cutover
    assert cut is not None
    state = "last output" if cut.state_from == "output" else "checkpointed state"
    return (f"Cutover after {cut.at_records:,} records: the legacy job was stopped, and the modern job continued from "
            f"its checkpoint's position {json.dumps(cut.position)} with {cut.keys_seeded} keys of its {state} "
            f"({cut.seed_bytes:,} bytes, {cut.seed_file}). \"modern\" is the legacy job's {cut.legacy_rows_before} "
            f"rows before it then the modern job's {cut.modern_rows_after} after it, against the legacy job's "
            "uninterrupted run.")


def _differences(diff: OutputDiff) -> list[tuple[str, pd.DataFrame]]:
    """The diff's parts under the jobs' names: legacy is the expected side, modern the actual one."""
    renamed = diff.mismatched.rename(columns=lambda c: c.removesuffix("_expected") + "_legacy" if c.endswith(
        "_expected") else c.removesuffix("_actual") + "_modern" if c.endswith("_actual") else c)
    return [("only in legacy", diff.missing), ("only in modern", diff.unexpected), ("values differ", renamed)]


def _report_html(metrics: JobsMetrics, diff: OutputDiff, settings: JobsSettings, limit: int = 20) -> str:
    """The report as one self-contained HTML page (the same figures and differing keys as ``report.md``)."""
    verdict = metrics.verdict
    jobs = metrics.jobs
    rows = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        + "".join(f"<td>{html.escape(str(getattr(m, key)))}</td>" for m in jobs.values())
        + "</tr>"
        for label, key in (("command", "command"), ("output rows", "output_rows"), ("rows compared", "rows_compared"),
                           ("batches", "batches"), ("seconds", "seconds"), ("throughput (records/s)", "throughput_rps"),
                           ("last input → last output (ms)", "result_latency_ms"))
    )
    differences = "".join(
        f"<h3>{html.escape(title)} ({len(frame)})</h3>{frame.head(limit).to_html(index=False, border=0)}"
        for title, frame in _differences(diff) if len(frame)
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dmk compare-jobs: {verdict}</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto}} td,th{{padding:.2em .6em;text-align:left}}
.verdict{{font-weight:bold;color:{'#1a7f37' if metrics.equivalent else '#cf222e'}}}</style>
</head><body><h1>dmk compare-jobs</h1><p class="verdict">{verdict}</p>
<p>Input <code>{html.escape(metrics.input)}</code> ({metrics.records:,} records), compared by
<code>{html.escape(', '.join(settings.key))}</code>, mode <code>{settings.mode}</code>, outputs from the
{html.escape(settings.output)}. {html.escape(metrics.summary)}</p>
<table><tr><th></th><th>legacy</th><th>modern</th></tr>{rows}</table>
{f'<p>{html.escape(_cutover_sentence(metrics))}</p>' if metrics.cutover is not None else ''}
<p>Modern against legacy: {html.escape(str(metrics.modern_vs_legacy.counts()))}</p>
{('<h2>First differing keys</h2>' + differences) if differences else ''}
</body></html>
"""
