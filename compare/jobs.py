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
    result.metrics["equivalent"]
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import shlex
import signal
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from compare.diff import EQUIVALENT, Check, OutputDiff, diff_outputs
from compare.diff import verdict as judge
from compare.errors import EngineFailed
from compare.supervise import log_tail
from kit import workloads
from kit.broker import kafka_or_embedded
from kit.capture import read_capture, replay_capture
from kit.engine import BATCH_SPAN_COLUMNS, DriverConfig, ProcessedRange, written_lines
from kit.errors import ConfigError, RunTimeout
from kit.kafka import Kafka, java_client_settings, using_process_settings
from kit.security import KAFKA_SECURITY_ENV

__all__ = [
    "MODES", "PLACEHOLDERS", "QUIET_S", "JobsResult", "JobsSettings", "ScriptEngine", "compare_jobs", "read_output",
]

PLACEHOLDERS = ("bootstrap", "topic", "output_topic", "output_dir", "output_dsn", "output_table", "checkpoint")
"""What a job command may name: the Kafka, the replayed input topic, a fresh output topic, a fresh output
directory, the output database and the job's own table in it (``--output sql:DSN#TABLE``: ``TABLE_legacy``,
``TABLE_modern``), and a fresh checkpoint directory."""
MODES = ("final", "all")
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

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            msg = f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}"
            raise ConfigError(msg, field="mode", expected=MODES, actual=self.mode)
        if self.output not in ("topic", "dir"):
            _sql_output(self.output)
        if not self.key:
            msg = "--key needs at least one column of the jobs' output (e.g. --key customer)"
            raise ConfigError(msg, field="key", expected="column names", actual=self.key)
        if self.rate_rps is not None and self.speed is not None:
            msg = "give --rate or --speed, not both"
            raise ConfigError(msg, field="rate", expected="one of them", actual=(self.rate_rps, self.speed))
        for side, command in (("legacy", self.legacy), ("modern", self.modern)):
            _check_command(side, command, self.output)


def _check_command(side: str, command: str, output: str) -> None:
    names = {name for _, name, _, _ in string.Formatter().parse(command) if name}
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        msg = f"--{side} names {{{unknown[0]}}}; the placeholders are {known}"
        raise ConfigError(msg, field=side, expected=PLACEHOLDERS, actual=unknown)
    needed = ["bootstrap", "topic", {"topic": "output_topic", "dir": "output_dir"}.get(output, "output_table")]
    missing = [p for p in needed if p not in names]
    if missing:
        msg = (f"--{side} never names {{{missing[0]}}}: the job could not find its "
               f"{'Kafka' if missing[0] == 'bootstrap' else 'input' if missing[0] == 'topic' else 'output'}; "
               f"pass it as an argument, e.g. \"python job.py {{bootstrap}} {{topic}} {{{needed[2]}}} {{checkpoint}}\"")
        raise ConfigError(msg, field=side, expected=needed, actual=sorted(names))
    argv = shlex.split(command)
    if len(argv) < 2 or Path(argv[0]).name not in ("python", "python3", Path(sys.executable).name):
        msg = (f"--{side} must run a Python script or module with python (\"python job.py ...\" or \"python -m "
               f"pkg.job ...\"), got {command!r}: the kit's stand-ins are installed in that interpreter")
        raise ConfigError(msg, field=side, expected="python SCRIPT ...", actual=command)


# -- the script engine -------------------------------------------------------------------------------------


class ScriptRun:
    """A job script's process: wait until it consumed the input, then stop it."""

    def __init__(self, engine: ScriptEngine, process: subprocess.Popen, out: Path) -> None:
        self.engine, self.process, self.out = engine, process, out

    def check(self) -> None:
        """Raise :class:`EngineFailed` (with the log's tail) if the job's process has exited."""
        if self.process.poll() is not None:
            log = self.out / "job.log"
            msg = (f"the {self.engine.name} job exited with code {self.process.returncode} before it was done; last "
                   f"lines of {log}:\n{log_tail(log)}")
            raise EngineFailed(msg, engine=self.engine.name, log=str(log))

    def await_started(self, timeout_s: float) -> None:
        """Wait until the job reports its first batch (it is reading)."""
        deadline = time.monotonic() + timeout_s
        while not written_lines(self.engine.progress_path(self.out)):
            self.check()
            if time.monotonic() > deadline:
                msg = (f"the {self.engine.name} job reported no batch within {timeout_s:.0f} s of its start; see "
                       f"{self.out / 'job.log'}. Does it start a StreamingContext or a query on the given topic?")
                raise RunTimeout(msg, reached=None, expected="a first batch")
            time.sleep(0.2)

    def await_offsets(
        self, end_offsets: Mapping[str, Mapping[int, int]], *, timeout_s: float, extra_batches: int = 2
    ) -> None:
        """Wait until the job's completed batches cover ``end_offsets``, then until it settles.

        A DStream job settles after ``extra_batches`` batches more (its batches come every interval, idle or
        not). A query reports progress only for batches that run, so it has settled once no batch has been
        reported for :data:`QUIET_S` (a no-data batch applying a watermark comes right after the last one).
        """
        deadline = time.monotonic() + timeout_s
        wanted = {(t, p): e for t, parts in end_offsets.items() for p, e in parts.items()}
        reached: dict[tuple[str, int], int] = {}
        seen, changed = -1, time.monotonic()
        while True:
            self.check()
            batches = self.engine.batch_ranges(self.out)
            if len(batches) != seen:
                seen, changed = len(batches), time.monotonic()
            reached = {}
            done_at = None
            for i, ranges in enumerate(batches):
                for topic, partition, _, until in ranges:
                    reached[(topic, partition)] = max(reached.get((topic, partition), 0), until)
                if done_at is None and all(reached.get(tp, 0) >= end for tp, end in wanted.items()):
                    done_at = i
            if done_at is not None and (
                len(batches) - 1 - done_at >= extra_batches if self.engine.batches_by_clock
                else time.monotonic() - changed >= QUIET_S
            ):
                return
            if time.monotonic() > deadline:
                msg = (f"the {self.engine.name} job did not consume its input within {timeout_s:.0f} s: it reached "
                       f"{reached}, the input ends at {wanted}. Does it read the topic from the beginning "
                       "(auto.offset.reset smallest / startingOffsets earliest)? See its log.")
                raise RunTimeout(msg, reached=reached, expected=wanted)
            time.sleep(0.2)

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
        kind: which stand-ins the process gets (:data:`compare.jobrun.STANDINS`). Default: ``name``.
        output: where the job writes (:attr:`JobsSettings.output`). Default ``"topic"``.
    """

    name: str
    command: str
    kind: str = ""
    output: str = "topic"
    batches_by_clock: bool = field(init=False)

    def __post_init__(self) -> None:
        from compare.engines import get_engine

        self.kind = self.kind or self.name
        self.batches_by_clock = get_engine(self.kind).batches_by_clock  # as the kit's engine of that kind

    def resolve(self, workload: Any, variant: Any = "default") -> Any:
        """A script is its own code: there is nothing to resolve."""
        msg = f"the {self.name} job is a script ({self.command!r}); it runs no kit workload"
        raise ConfigError(msg, field="workload", expected="a kit engine", actual=self.command)

    def session(self, config: DriverConfig) -> Any:
        """A script starts its own Spark: no session is made for it."""
        return None

    def progress_path(self, out_dir: str | Path) -> Path:
        """Where the job's stand-ins report its progress."""
        return Path(out_dir) / "progress.jsonl"

    def placeholders(self, config: DriverConfig) -> dict[str, str]:
        """The values of the command's placeholders for ``config`` (its single input topic)."""
        (topic,) = config.topics.values()
        dsn, table = _sql_output(self.output) if self.output.startswith("sql:") else ("", "dmk_output")
        return {"bootstrap": config.bootstrap_servers, "topic": topic, "output_topic": f"{topic}.{self.name}.out",
                "output_dir": str(Path(config.out_dir) / "output"), "output_dsn": dsn,
                "output_table": f"{table}_{self.name}", "checkpoint": config.checkpoint_dir}

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> ScriptRun:
        """Start the job's process (in a session of its own, so a stop takes its JVM too)."""
        out = Path(config.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        argv = shlex.split(self.command.format(**self.placeholders(config)))
        runner = [sys.executable, "-m", "compare.jobrun", "--engine", self.kind,
                  "--progress", str(self.progress_path(out)), *argv[1:]]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
        if config.kafka_security:
            env[KAFKA_SECURITY_ENV] = json.dumps(dict(config.kafka_security))
        with open(out / "job.log", "ab") as log:
            log.write(f"--- {' '.join(argv)}\n".encode())
            log.flush()
            process = subprocess.Popen(runner, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        return ScriptRun(self, process, out)

    def paced(self, config: DriverConfig, interval: str) -> DriverConfig:
        """A script sets its own batch interval or trigger."""
        msg = f"the {self.name} job sets its own batch interval or trigger; it cannot be paced from outside"
        raise ConfigError(msg, field="interval", expected="a kit engine", actual=interval)

    def interval_s(self, config: DriverConfig) -> float:
        """Not known: a script sets its own batch interval or trigger (0: judged by its batches' lengths)."""
        return 0.0

    def batch_ranges(self, out_dir: str | Path) -> list[list[ProcessedRange]]:
        """The offset ranges of each completed batch, in completion order (both stand-ins report them alike)."""
        return [[(t, int(p), int(f), int(u)) for t, p, f, u in row["ranges"]]
                for row in written_lines(self.progress_path(out_dir))]

    def batch_spans(
        self, out_dir: str | Path, job: str | None = None, checkpoint_dir: Path | None = None
    ) -> pd.DataFrame:
        """One row per completed batch, from the stand-ins' reports (no scheduling delay is known)."""
        rows = [(r["batch_ms"], r["batch_ms"], r["completed_ms"], r["records"], r["completed_ms"] - r["batch_ms"], 0)
                for r in written_lines(self.progress_path(out_dir))]
        return pd.DataFrame(rows, columns=list(BATCH_SPAN_COLUMNS))

    def batch_phases(self, out_dir: str | Path, job: str | None = None) -> pd.DataFrame:
        """A script's batches as one phase: the stand-ins see a batch's whole time only."""
        spans = self.batch_spans(out_dir)
        return pd.DataFrame({"batch": spans["batch_ms"].astype(str), "records": spans["records"],
                             "processing": spans["processing_ms"]})

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """A script's Spark jobs are not seen: its process has its own Spark."""
        return None

    def processed_records(self, out_dir: str | Path) -> int:
        """Records of the batches reported so far."""
        return int(self.batch_spans(out_dir)["records"].sum())

    def processed_ranges(self, out_dir: str | Path, job: str, checkpoint_dir: Path | None) -> list[ProcessedRange]:
        """Every completed batch's ranges."""
        return [r for ranges in self.batch_ranges(out_dir) for r in ranges]

    def late_dropped(self, out_dir: str | Path, job: str) -> int:
        """Not known for a script (its own code decides what is late)."""
        return 0


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
    return _read_sql(values["output_dsn"], values["output_table"], engine.name)


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
               f"sql:postgresql://u:p@host/db#totals), got {output!r}")
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
               "the output's key fields")
        raise ConfigError(msg, field="key", expected=list(rows.columns), actual=absent)
    if mode == "final":
        rows = rows.drop_duplicates(list(key), keep="last")
    return rows.sort_values(list(rows.columns), key=lambda c: c.astype(str), kind="stable").reset_index(drop=True)


# -- the run -----------------------------------------------------------------------------------------------


@dataclass
class JobsResult:
    """A finished compare-jobs run: its metrics (as in ``metrics.json``) and the diff (legacy as expected)."""

    out_dir: Path
    metrics: dict
    diff: OutputDiff

    @property
    def equivalent(self) -> bool:
        """The two jobs' outputs agree (and equal the oracle, when one was given)."""
        return bool(self.metrics["equivalent"])


def _run_side(
    engine: ScriptEngine, settings: JobsSettings, frame: pd.DataFrame, bootstrap: str, run_id: str,
    progress: Callable[[str, int, int], None],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    out = settings.out_dir / engine.name
    topic = f"dmk-jobs-{run_id}-{engine.name}"
    partitions = settings.partitions or (int(frame["partition"].max()) + 1 if len(frame) else 1)
    config = DriverConfig(engine=engine.name, bootstrap_servers=bootstrap, topics={"input": topic}, out_dir=str(out),
                          checkpoint_dir=str(settings.out_dir / f"{engine.name}-checkpoint"),
                          timeout_s=settings.timeout_s, kafka_security=dict(settings.kafka_security))
    with Kafka(bootstrap) as kafka:
        kafka.create_topic(topic, partitions)
        kafka.create_topic(engine.placeholders(config)["output_topic"], partitions)
    run = engine.start(None, config)
    started = time.monotonic()
    try:
        run.await_started(settings.timeout_s)
        speed = None if settings.rate_rps is not None else settings.speed or 1e9
        replayed = replay_capture(frame, bootstrap, topic, speed=speed, rate_rps=settings.rate_rps,
                                  partitions=partitions,
                                  on_progress=lambda sent, acked: progress(f"replay {engine.name}", acked, len(frame)))
        run.await_offsets(replayed.topic_end_offsets, timeout_s=settings.timeout_s,
                          extra_batches=settings.settle_batches)
        seconds = time.monotonic() - started
    finally:
        run.stop()
    rows = read_output(settings.output if settings.output in ("topic", "dir") else "sql", engine, config)
    rows.to_json(out / "output.jsonl", orient="records", lines=True)
    spans = engine.batch_spans(out)
    busy = spans[spans["records"] > 0]
    first_ms, last_ms = int(replayed.log["produced_ms"].min()), int(replayed.log["produced_ms"].max())
    span_s = (int(busy["ended_ms"].max()) - first_ms) / 1000 if len(busy) else 0.0
    last_output = rows.attrs.get("last_timestamp_ms")
    figures = {
        "output_rows": len(rows), "input_records": len(frame), "seconds": round(seconds, 2),
        "batches": len(spans), "command": engine.command,
        # From the first record produced to the end of the last batch with records.
        "throughput_rps": round(len(frame) / span_s, 1) if span_s > 0 else None,
        # From the last record produced to the last output record (an output topic's Kafka timestamps).
        "result_latency_ms": int(last_output - last_ms) if last_output is not None else None,
    }
    return rows, figures


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
    oracle_fn = workloads.load_ref(settings.oracle, "oracle") if settings.oracle else None
    out.mkdir(parents=True, exist_ok=True)
    commands = zip(SIDES, (settings.legacy, settings.modern), strict=True)
    engines = {name: ScriptEngine(name, command, output=settings.output) for name, command in commands}
    run_id = uuid.uuid4().hex[:8]
    outputs: dict[str, pd.DataFrame] = {}
    figures: dict[str, dict[str, Any]] = {}
    with using_process_settings(java_client_settings(settings.kafka_security, where="kafka_security")), \
            kafka_or_embedded(settings.bootstrap_servers, log_path=out / "broker.log",
                              on_start=on_broker_start) as kafka:
        for name, engine in engines.items():
            outputs[name], figures[name] = _run_side(engine, settings, frame, kafka.bootstrap_servers, run_id, report)
    shaped = {name: _shape(rows, settings.key, settings.mode, name) for name, rows in outputs.items()}
    values = sorted({c for f in shaped.values() for c in f.columns} - set(settings.key))
    for rows in shaped.values():
        for column in values:
            if column not in rows.columns:
                rows[column] = None
    diff = diff_outputs(shaped["legacy"], shaped["modern"], settings.key, values)
    metrics: dict[str, Any] = {
        "input": settings.input_file, "records": len(frame), "key": list(settings.key), "mode": settings.mode,
        "output": settings.output, "equivalent": bool(diff.equal), "jobs_agree": bool(diff.equal),
        "modern_vs_legacy": diff.counts(), "summary": diff.summary() if not diff.equal else "",
        "jobs": {name: {**figures[name], "rows_compared": len(shaped[name])} for name in engines},
    }
    if oracle_fn is not None:
        expected = _shape(oracle_fn(frame), settings.key, settings.mode, "oracle")  # type: ignore[operator]
        against = {name: diff_outputs(expected, rows, settings.key, [c for c in values if c in expected.columns])
                   for name, rows in shaped.items()}
        metrics["oracle"] = {"rows": len(expected), **{f"{n}_vs_oracle": d.counts() for n, d in against.items()}}
        metrics["equivalent"] = bool(diff.equal) and all(d.equal for d in against.values())
    # An empty oracle (or, without one, two empty outputs) compared nothing: NOTHING COMPARED, not a pass.
    compared = metrics["oracle"]["rows"] if "oracle" in metrics else max(len(f) for f in shaped.values())
    metrics["verdict"], metrics["warnings"] = judge(
        [Check("rows", "both", metrics["equivalent"], metrics["summary"] or "equal")], compared)
    metrics["equivalent"] = metrics["verdict"] == EQUIVALENT
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(_report(metrics, diff, settings), encoding="utf-8")
    (out / "report.html").write_text(_report_html(metrics, diff, settings), encoding="utf-8")
    return JobsResult(out, metrics, diff)


def _report(metrics: dict, diff: OutputDiff, settings: JobsSettings, limit: int = 20) -> str:
    verdict = metrics["verdict"]
    lines = [f"# dmk compare-jobs: {verdict}", *(f"\nwarning: {w}" for w in metrics["warnings"]), "",
             f"Input: `{metrics['input']}` ({metrics['records']:,} records), replayed into each job's own topic. "
             f"Compared by `{', '.join(settings.key)}`, mode `{settings.mode}`, outputs from the "
             f"{settings.output}.", "",
             "| | legacy | modern |", "|---|---|---|"]
    for label, field_ in (("command", "command"), ("output rows", "output_rows"), ("rows compared", "rows_compared"),
                          ("batches", "batches"), ("seconds", "seconds"), ("throughput (records/s)", "throughput_rps"),
                          ("last input → last output (ms)", "result_latency_ms")):
        lines.append(f"| {label} | {metrics['jobs']['legacy'][field_]} | {metrics['jobs']['modern'][field_]} |")
    lines += ["", f"Modern against legacy: {metrics['modern_vs_legacy']}."]
    if "oracle" in metrics:
        lines.append(f"Against the oracle ({metrics['oracle']['rows']} rows): legacy "
                     f"{metrics['oracle']['legacy_vs_oracle']}, modern {metrics['oracle']['modern_vs_oracle']}.")
    if not diff.equal:
        lines += ["", f"{metrics['summary']}", "", "## First differing keys (legacy | modern)", ""]
        for title, frame in _differences(diff):
            if len(frame):
                lines += [f"### {title} ({len(frame)})", "", "```", frame.head(limit).to_string(index=False), "```", ""]
                if len(frame) > limit:
                    lines.append(f"... {len(frame) - limit} more rows omitted")
    return "\n".join(lines).rstrip() + "\n"


def _differences(diff: OutputDiff) -> list[tuple[str, pd.DataFrame]]:
    """The diff's parts under the jobs' names: legacy is the expected side, modern the actual one."""
    renamed = diff.mismatched.rename(columns=lambda c: c.removesuffix("_expected") + "_legacy" if c.endswith(
        "_expected") else c.removesuffix("_actual") + "_modern" if c.endswith("_actual") else c)
    return [("only in legacy", diff.missing), ("only in modern", diff.unexpected), ("values differ", renamed)]


def _report_html(metrics: dict, diff: OutputDiff, settings: JobsSettings, limit: int = 20) -> str:
    """The report as one self-contained HTML page (the same figures and differing keys as ``report.md``)."""
    verdict = metrics["verdict"]
    jobs = metrics["jobs"]
    rows = "".join(
        f"<tr><th>{html.escape(label)}</th><td>{html.escape(str(jobs['legacy'][key]))}</td>"
        f"<td>{html.escape(str(jobs['modern'][key]))}</td></tr>"
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
.verdict{{font-weight:bold;color:{'#1a7f37' if metrics['equivalent'] else '#cf222e'}}}</style>
</head><body><h1>dmk compare-jobs</h1><p class="verdict">{verdict}</p>
<p>Input <code>{html.escape(metrics['input'])}</code> ({metrics['records']:,} records), compared by
<code>{html.escape(', '.join(settings.key))}</code>, mode <code>{settings.mode}</code>, outputs from the
{html.escape(settings.output)}. {html.escape(metrics['summary'])}</p>
<table><tr><th></th><th>legacy</th><th>modern</th></tr>{rows}</table>
<p>Modern against legacy: {html.escape(str(metrics['modern_vs_legacy']))}</p>
{('<h2>First differing keys</h2>' + differences) if differences else ''}
</body></html>
"""
