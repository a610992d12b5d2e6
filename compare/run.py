"""``dmk compare``: replay one dataset through a legacy and a modern driver process, diff, measure, report.

One compare run:

1. the dataset (generated from a :class:`~kit.dataset.DatasetSpec`, or a file from ``dmk gen``);
2. per engine (one after the other by default, so timings are fair; ``concurrent=True`` runs both at once):
   fresh topics, a driver process (``python -m compare.driver``, see :mod:`compare.driver`) started and
   waited for, a paced live replay (or a burst before start), optional faults (SIGKILL and restart of the
   driver, SIGSTOP/SIGCONT of the embedded broker), then a drain: the driver processes everything up to the
   replay's end offsets, writes ``done.json`` and exits;
3. the oracle, a three-way diff (legacy / modern / oracle), latency per output row (``emitted_at`` minus the
   Kafka timestamp of the newest input behind the row, i.e. its produce time) and throughput;
4. the run directory: ``metrics.json``, ``report.md``, ``report.html`` (:mod:`compare.report`), the diff as
   CSV and Parquet, each engine's outputs and driver logs.

Example::

    settings = CompareSettings("running_counts", out_dir=Path("runs/rc"), dataset=DatasetSpec.from_profile("messy"))
    result = run_compare(settings)
    result.metrics["equivalent"]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from compare.diff import OutputDiff, ThreeWayDiff, three_way
from compare.driver import CONTROL, DONE, DRAIN, FAILED, OFFSET_STORE_ENV, READY, dataset_spec, write_json
from compare.harness import batch_caps, route_inputs
from kit import workloads
from kit.dataset import DatasetSpec, generate, read_dataset, read_manifest, write_dataset
from kit.errors import ConfigError, KitError, RunTimeout
from kit.kafka import Kafka
from kit.replay import ReplayResult, ReplaySettings, replay
from kit.sink import read_batches
from kit.spark import check_location, has_scheme, on_this_host
from legacy.offsets import redacted_dsn

__all__ = ["ENGINES", "LEGACY_MODES", "CompareResult", "CompareSettings", "EngineFailed", "run_compare"]

ENGINES = ("legacy", "modern")
LEGACY_MODES: dict[str, tuple[str, str, bool]] = {
    "direct": ("direct", "checkpoint", False),
    "direct-kafka-commit": ("direct", "kafka", False),
    "direct-zookeeper": ("direct", "zookeeper", False),
    "direct-sqlite": ("direct", "sqlite", False),
    "direct-postgres": ("direct", "postgresql", False),
    "receiver": ("receiver", "kafka", False),
    "receiver-wal": ("receiver", "kafka", True),
}
"""``--legacy-mode`` → (stream, where offsets live, receiver write-ahead log): see :mod:`legacy.runner`.
``direct`` keeps offsets only in the checkpoint; the other direct modes also commit them to a Kafka group,
ZooKeeper, or (one transaction with the outputs) SQLite / PostgreSQL; the receiver modes read through a
consumer group that auto-commits, with or without the receiver write-ahead log."""
NEEDS_STORE = {"direct-zookeeper": "the ZooKeeper hosts (host:port)", "direct-postgres": "a PostgreSQL DSN"}

TRANSIENT_ERRORS = ("Python worker failed to connect back",)
"""Driver failures that say nothing about the job: Spark waits a fixed 10 s for a new Python process to
connect back, which an overloaded machine can miss. A driver failing with one of them is restarted from its
checkpoint (at most :data:`MAX_RECOVERIES` times; counted in ``restarts``)."""
MAX_RECOVERIES = 2

Progress = Callable[[str, int, int], None]
"""Called with (task, done, total): ``"replay legacy"``, ``"legacy"`` (records processed) ..."""


class EngineFailed(KitError):
    """An engine's driver process failed: its error, and where its log is."""


@dataclass(frozen=True)
class CompareSettings:
    """What one compare run does.

    Attributes:
        workload: a built-in workload or ``package.module:SPEC`` (your own :class:`~kit.workloads.WorkloadSpec`).
        out_dir: the run directory (created; must be empty or absent).
        dataset: the dataset to generate (ignored when ``dataset_file`` is given). Default: the messy profile,
            20k records, as :data:`compare.harness.TEST_DATASET`.
        dataset_file: a dataset file written by ``dmk gen`` (its manifest gives the spec).
        bootstrap_servers: Kafka to use; None starts the embedded broker for the run.
        rate_rps: replay rate in dataset records/s while the engine runs. Default: three quarters of what the
            batch caps let through (:func:`default_rate`, 750 for the default dataset).
        burst: produce everything before the driver starts instead (latency then measures the backlog).
        partitions: partitions of each input topic.
        legacy: your legacy builder (``package.module:function``) instead of the spec's default variant.
        modern: your modern builder, likewise.
        oracle: your oracle (``package.module:function``, ``fn(frame, dataset_spec) -> OracleResult``).
        legacy_mode: how the legacy job reads and keeps its offsets (:data:`LEGACY_MODES`).
        offset_store: where that mode's store is: ZooKeeper hosts (``direct-zookeeper``, required), a
            PostgreSQL DSN (``direct-postgres``, required), the SQLite file (``direct-sqlite``; default
            ``<out>/legacy/offsets.sqlite``), or the consumer group (``direct-kafka-commit`` and receivers;
            default ``dmk-compare-<run id>``).
        batch_seconds: the legacy batch interval.
        trigger: the modern processing-time trigger (``"0 seconds"``: as fast as possible).
        concurrent: run both engines at once instead of one after the other.
        kill_driver: SIGKILL each engine's driver this many times at seeded random points of the replay, and
            restart it from its checkpoint.
        pause_broker_s: freeze the embedded broker (SIGSTOP) this long in the middle of each replay.
        seed: seeds the fault points (default: the dataset's seed).
        timeout_s: bound on each wait (driver start, drain); a clear :class:`RunTimeout` past it.
        master: Spark master for the drivers (default ``$DMK_SPARK_MASTER`` or local[2]).
        broker_port: port of the embedded broker (default: a free one).
        checkpoint_dir: a root for both engines' checkpoints (``<root>/<run id>/legacy-checkpoint`` and
            ``.../modern-checkpoint``); default the run directory. With a master whose executors run on
            other hosts it must be a URI every node reaches (``hdfs://``, ``s3a://``; docs/deploy.md).
    """

    workload: str
    out_dir: Path
    dataset: DatasetSpec | None = None
    dataset_file: str | None = None
    bootstrap_servers: str | None = None
    rate_rps: float | None = None
    burst: bool = False
    partitions: int = 4
    legacy: str | None = None
    modern: str | None = None
    oracle: str | None = None
    legacy_mode: str = "direct"
    offset_store: str | None = None
    batch_seconds: float = 1.0
    trigger: str = "0 seconds"
    concurrent: bool = False
    kill_driver: int = 0
    pause_broker_s: float = 0.0
    seed: int | None = None
    timeout_s: float = 600.0
    master: str | None = None
    broker_port: int | None = None
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        if self.legacy_mode not in LEGACY_MODES:
            raise ConfigError(
                f"legacy mode {self.legacy_mode!r} is not supported by dmk compare; use one of {', '.join(LEGACY_MODES)}.",
                field="legacy_mode", expected=tuple(LEGACY_MODES), actual=self.legacy_mode,
            )
        if self.legacy_mode in NEEDS_STORE and not self.offset_store:
            raise ConfigError(
                f"--legacy-mode {self.legacy_mode} needs --offset-store: {NEEDS_STORE[self.legacy_mode]}",
                field="offset_store", expected=NEEDS_STORE[self.legacy_mode], actual=None,
            )
        if self.legacy_mode == "direct" and self.offset_store:
            raise ConfigError(
                "--legacy-mode direct keeps offsets in the checkpoint only; --offset-store goes with a store mode "
                f"({', '.join(m for m in LEGACY_MODES if m != 'direct')})",
                field="offset_store", expected=None, actual=self.offset_store,
            )
        if self.rate_rps is not None and not self.rate_rps > 0:
            raise ConfigError(f"--rate must be > 0 records/s, got {self.rate_rps}")
        if self.partitions < 1:
            raise ConfigError(f"--partitions must be >= 1, got {self.partitions}")
        if self.kill_driver < 0:
            raise ConfigError(f"--kill-driver must be >= 0, got {self.kill_driver}")
        if (self.kill_driver or self.pause_broker_s) and self.burst:
            raise ConfigError(
                "fault injection happens during the replay: give a --rate (records/s) so the replay lasts, "
                "instead of a burst before start"
            )
        if self.pause_broker_s and self.bootstrap_servers:
            raise ConfigError(
                "--pause-broker freezes the embedded broker; it cannot pause a Kafka given with --bootstrap-servers"
            )
        if self.broker_port and self.bootstrap_servers:
            raise ConfigError("--broker-port is for the embedded broker; leave it out with --bootstrap-servers")
        if not self.batch_seconds > 0:
            raise ConfigError(f"--batch-seconds must be > 0, got {self.batch_seconds}")
        check_location(self.checkpoint_root, self.master, what="checkpoint root (--checkpoint-dir)")
        if not on_this_host(self.master) and (
            not self.bootstrap_servers or any(h.split(":")[0] in ("127.0.0.1", "localhost") for h in self.bootstrap_servers.split(","))
        ):
            raise ConfigError(
                f"the Spark master {self.master or '$DMK_SPARK_MASTER'} runs executors on other hosts, and they read Kafka "
                "themselves: the embedded broker (or a Kafka on localhost) is out of their reach. Pass "
                "--bootstrap-servers of a Kafka every node reaches.",
                field="bootstrap_servers", expected="a Kafka reachable from every node", actual=self.bootstrap_servers,
            )

    @property
    def checkpoint_root(self) -> str:
        """Where the engines' checkpoints go: :attr:`checkpoint_dir`, else the run directory."""
        return self.checkpoint_dir or str(self.out_dir)


@dataclass
class EngineOutcome:
    """What one engine did in a compare run."""

    engine: str
    out_dir: Path
    replay: ReplayResult
    restarts: int = 0
    kills: list[float] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)
    started_ms: int = 0
    done_ms: int = 0
    checkpoint_dir: Path | None = None
    """The engine's checkpoint root when it is a local directory (None for a URI)."""


@dataclass
class CompareResult:
    """A finished compare run: its metrics (as in ``metrics.json``) and the diff."""

    out_dir: Path
    metrics: dict
    diff: ThreeWayDiff

    @property
    def equivalent(self) -> bool:
        return bool(self.metrics["equivalent"])


# -- the dataset -------------------------------------------------------------------------------------------


def _dataset(settings: CompareSettings, out: Path) -> tuple[DatasetSpec, pd.DataFrame, str]:
    if settings.dataset_file:
        path = Path(settings.dataset_file)
        frame = read_dataset(path)
        spec = dataset_spec(read_manifest(path)["spec"])
        return spec, frame, str(path)
    from compare.harness import dataset_spec as default_spec

    spec = settings.dataset or default_spec("messy")
    frame = generate(spec)
    path = out / "dataset.parquet"
    write_dataset(frame, path, spec)
    return spec, frame, str(path)


# -- one engine --------------------------------------------------------------------------------------------


class _Driver:
    """A driver process of one engine: start, wait until ready, kill, restart, wait until done."""

    def __init__(self, engine: str, config_path: Path, out: Path, timeout_s: float, env: dict[str, str]) -> None:
        self.engine = engine
        self.config_path = config_path
        self.out = out
        self.timeout_s = timeout_s
        self.env = env
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.recoveries = 0

    @property
    def log_path(self) -> Path:
        return self.out / "driver.log"

    def start(self) -> None:
        (self.out / CONTROL / READY).unlink(missing_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        log.write(f"--- driver start {self.starts + 1} at {time.strftime('%H:%M:%S')} ---\n".encode())
        log.flush()
        # Its own session: a kill takes the Python driver and its JVM together, as a crashed host would.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "compare.driver", str(self.config_path)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env,
        )
        log.close()
        self.starts += 1

    def _check(self) -> None:
        failed = self.out / CONTROL / FAILED
        if failed.exists():
            error = json.loads(failed.read_text(encoding="utf-8"))
            if any(text in error["message"] for text in TRANSIENT_ERRORS) and self.recoveries < MAX_RECOVERIES:
                # Infrastructure, not the job: restart from the checkpoint, as a supervised driver would.
                self.recoveries += 1
                self.finish()
                failed.unlink()
                self.start()
                return
            raise EngineFailed(
                f"the {self.engine} driver failed: {error['error']}: {error['message'].splitlines()[0] if error['message'] else ''} "
                f"(full log: {self.log_path})"
            )
        if self.process is not None and self.process.poll() is not None:
            raise EngineFailed(
                f"the {self.engine} driver exited with code {self.process.returncode} before it was done; "
                f"last lines of {self.log_path}:\n{_tail(self.log_path)}"
            )

    def wait_for(self, name: str, timeout_s: float, on_poll: Callable[[], None] | None = None) -> dict:
        deadline = time.monotonic() + timeout_s
        path = self.out / CONTROL / name
        while not path.exists():
            if name != DONE or not (self.out / CONTROL / DONE).exists():
                self._check()
            if on_poll is not None:
                on_poll()
            if time.monotonic() > deadline:
                raise RunTimeout(
                    f"the {self.engine} driver did not write {name} within {timeout_s:.0f} s; see {self.log_path}. "
                    "Raise --timeout for larger datasets.",
                    reached=None, expected=name,
                )
            time.sleep(0.1)
        return json.loads(path.read_text(encoding="utf-8"))

    def kill(self) -> None:
        """SIGKILL the driver and its JVM (its whole process group), and reap it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        # Spark's Python workers are in the same group; anything that escaped it is the JVM's to clean up.

    def finish(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _written_lines(path: Path) -> list[dict]:
    """The complete JSON lines of a log another process is appending to (a last line without its newline
    is still being written)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]  # whatever follows the last newline is incomplete
    return [json.loads(line) for line in lines if line.strip()]


def _processed(engine: str, out: Path) -> int:
    """Input records an engine's jobs have processed so far (for the progress bar)."""
    if engine == "legacy":
        return sum(row["records"] for row in _written_lines(out / "metrics" / "batches.jsonl"))
    totals = []
    for path in (out / "progress").glob("*.jsonl"):
        if path.name.startswith("dead_letters."):
            continue
        totals.append(sum(p.get("numInputRows", 0) for p in _written_lines(path)))
    return min(totals) if totals else 0


def _fault_plan(settings: CompareSettings, engine: str, expected_s: float) -> list[float]:
    seed = settings.seed if settings.seed is not None else (settings.dataset.seed if settings.dataset else 0)
    rng = random.Random(f"{seed}-{engine}")
    return sorted(rng.uniform(0.15, 0.85) * expected_s for _ in range(settings.kill_driver))


def _run_engine(
    engine: str,
    settings: CompareSettings,
    routed: pd.DataFrame,
    spec: DatasetSpec,
    jobs: list[list[str]],
    bootstrap: str,
    broker: Any,
    run_id: str,
    progress: Progress,
) -> EngineOutcome:
    out = settings.out_dir / engine
    out.mkdir(parents=True)
    topics = {name: f"dmk-{run_id}-{engine}-{name}" for name in sorted(set(routed["topic"]))}
    with Kafka(bootstrap) as kafka:
        for topic in topics.values():
            kafka.create_topic(topic, settings.partitions)
    frame = routed.assign(topic=routed["topic"].map(topics))
    legacy_cap, modern_cap = batch_caps(spec, settings.partitions, settings.batch_seconds)
    config = {
        "engine": engine,
        "workload_name": workloads.get(settings.workload).name,
        "bootstrap_servers": bootstrap,
        "topics": topics,
        "out_dir": str(out),
        # Under a shared root, each run gets its own directory: a later run must not resume this one's state.
        "checkpoint_dir": (f"{settings.checkpoint_dir.rstrip('/')}/{run_id}/{engine}-checkpoint" if settings.checkpoint_dir
                           else str(settings.out_dir / f"{engine}-checkpoint")),
        "dataset": asdict(spec),
        "jobs": jobs,
        "batch_seconds": settings.batch_seconds,
        "max_rate_per_partition": legacy_cap,
        "partitions": settings.partitions,
        **_legacy_mode_config(settings, run_id),
        "trigger": settings.trigger,
        "source_options": {"maxOffsetsPerTrigger": modern_cap},
        "master": settings.master,
        "timeout_s": settings.timeout_s,
        "sys_path": [os.getcwd()],
    }
    config["fingerprint"] = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    config_path = out / "driver-config.json"
    write_json(config_path, config)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if settings.offset_store:
        env[OFFSET_STORE_ENV] = settings.offset_store
    driver = _Driver(engine, config_path, out, settings.timeout_s, env)
    outcome = EngineOutcome(engine, out, replay=None)  # type: ignore[arg-type]
    if not has_scheme(config["checkpoint_dir"]):
        outcome.checkpoint_dir = Path(config["checkpoint_dir"])
    copies = len(routed) / max(routed["seq"].nunique(), 1)
    replay_settings = ReplaySettings(
        topic=topics[sorted(topics)[0]], partitions=settings.partitions,
        rate_rps=settings.rate_rps * copies if settings.rate_rps else None, partition_by="seq",
    )
    total = len(routed)

    def replay_with_progress() -> ReplayResult:
        return replay(frame, bootstrap, replay_settings, on_progress=lambda sent, acked: progress(f"replay {engine}", acked, total))

    try:
        if settings.rate_rps is None:
            outcome.replay = replay_with_progress()
        driver.start()
        outcome.started_ms = driver.wait_for(READY, settings.timeout_s)["started_ms"]
        if settings.rate_rps is not None:
            outcome.replay = _replay_with_faults(
                engine, settings, driver, broker, replay_with_progress, total / settings.rate_rps / copies, outcome
            )
        write_json(out / CONTROL / DRAIN, {"end_offsets": outcome.replay.topic_end_offsets})
        done = driver.wait_for(DONE, settings.timeout_s, on_poll=lambda: progress(engine, _processed(engine, out), total))
        outcome.done_ms = done["done_ms"]
        progress(engine, total, total)
        driver.finish()
    finally:
        driver.stop()
    outcome.restarts = driver.starts - 1
    outcome.replay.log.to_parquet(out / "replay-log.parquet", index=False)
    return outcome


def _legacy_mode_config(settings: CompareSettings, run_id: str) -> dict:
    stream, offsets, wal = LEGACY_MODES[settings.legacy_mode]
    return {
        "stream": stream, "offsets": offsets, "write_ahead_log": wal,
        "offset_store": redacted_dsn(settings.offset_store) if settings.offset_store else None,
        "job_name": f"dmk-compare-{run_id}",
    }


def _replay_with_faults(
    engine: str,
    settings: CompareSettings,
    driver: _Driver,
    broker: Any,
    replay_fn: Callable[[], ReplayResult],
    expected_s: float,
    outcome: EngineOutcome,
) -> ReplayResult:
    """Run the replay while killing/restarting the driver and pausing the broker as planned."""
    kills = _fault_plan(settings, engine, expected_s)
    pause_at = expected_s / 2 if settings.pause_broker_s else None
    errors: list[BaseException] = []
    finished = threading.Event()
    started = time.monotonic()

    def faults() -> None:
        try:
            pending = list(kills)
            paused = pause_at is None
            while not finished.is_set() and (pending or not paused):
                now = time.monotonic() - started
                if pending and now >= pending[0]:
                    pending.pop(0)
                    outcome.kills.append(round(now, 2))
                    driver.kill()
                    driver.start()
                    driver.wait_for(READY, settings.timeout_s)
                elif not paused and now >= pause_at:
                    paused = True
                    outcome.pauses.append(round(now, 2))
                    broker.pause()
                    try:
                        time.sleep(settings.pause_broker_s)
                    finally:
                        broker.resume()
                time.sleep(0.05)
        except BaseException as err:  # surfaced after the replay
            errors.append(err)

    thread = threading.Thread(target=faults, name=f"dmk-faults-{engine}", daemon=True)
    thread.start()
    try:
        result = replay_fn()
    finally:
        finished.set()
        thread.join()
    if errors:
        raise errors[0]
    return result


# -- measuring ---------------------------------------------------------------------------------------------


def _seqs(outcome: EngineOutcome, located: pd.DataFrame) -> np.ndarray:
    log = outcome.replay.log.set_index(["topic", "partition", "offset"])["seq"]
    keys = list(zip(located["topic"], located["partition"].astype(int), located["offset"].astype(int)))
    return log.loc[keys].to_numpy() if keys else np.array([], dtype="int64")


def _dead_letters(outcome: EngineOutcome) -> pd.DataFrame:
    frames = [read_batches(d) for d in sorted(outcome.out_dir.glob("dead_letters.*")) if d.is_dir()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["topic", "partition", "offset", "reason"])


def _late_dropped(outcome: EngineOutcome, job: str) -> int:
    if outcome.engine == "legacy":
        return len(read_batches(outcome.out_dir / f"{job}.late"))
    from modern.runner import late_dropped

    return late_dropped(outcome.out_dir, job)


def _latency(rows: pd.DataFrame) -> pd.Series:
    if rows.empty:
        return pd.Series(dtype="int64")
    return (rows["emitted_at"] - rows[workloads.LAST_INPUT_TS]).astype("int64")


def _percentiles(latency: pd.Series) -> dict[str, float | None]:
    if latency.empty:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    values = latency.to_numpy()
    return {
        "p50": float(np.percentile(values, 50)),
        "p95": float(np.percentile(values, 95)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
    }


def batch_spans(engine: str, out_dir: Path, job: str) -> pd.DataFrame:
    """One row per completed batch of ``job``: ``batch_ms, started_ms, ended_ms, records, processing_ms,
    scheduling_ms`` (``batch_ms``: the batch time, legacy; the trigger's start, modern).

    Legacy: the StreamingListener's log (``metrics/batches.jsonl``; processing starts when the batch's
    scheduling delay, its wait behind earlier batches, ends). Modern: the query's progress (``timestamp`` is
    the trigger's start; a micro-batch never waits behind another, so ``scheduling_ms`` is 0).
    """
    columns = ["batch_ms", "started_ms", "ended_ms", "records", "processing_ms", "scheduling_ms"]
    if engine == "legacy":
        rows = []
        for b in _written_lines(out_dir / "metrics" / "batches.jsonl"):
            processing = int(b["processing_delay_ms"] or 0)
            rows.append((b["batch_time_ms"], b["completed_ms"] - processing, b["completed_ms"], b["records"], processing,
                         int(b["scheduling_delay_ms"] or 0)))
        return pd.DataFrame(rows, columns=columns)
    from modern.runner import read_progress

    rows = []
    for p in read_progress(out_dir, job):
        started = pd.Timestamp(p["timestamp"]).value // 1_000_000
        duration = int(p.get("batchDuration", 0))
        rows.append((started, started, started + duration, int(p.get("numInputRows", 0)), duration, 0))
    return pd.DataFrame(rows, columns=columns)


def timeline(outcome: EngineOutcome) -> pd.DataFrame:
    """One row per batch of an engine's main job: ``completed_ms, records, duration_ms`` (for the plots)."""
    job = ""  # legacy: one log for the whole context; modern: the first job's query
    if outcome.engine == "modern":
        names = sorted(p.stem for p in (outcome.out_dir / "progress").glob("*.jsonl") if not p.name.startswith("dead_letters."))
        job = names[0] if names else ""
    spans = batch_spans(outcome.engine, outcome.out_dir, job)
    return pd.DataFrame({
        "completed_ms": spans["ended_ms"].astype("int64"),
        "records": spans["records"].astype("int64"),
        "duration_ms": spans["processing_ms"].astype("int64"),
        "scheduling_delay_ms": spans["scheduling_ms"].astype("int64"),
    })


def _processed_ranges(outcome: EngineOutcome, job: str) -> list[tuple[str, int, int, int]]:
    """``(topic, partition, from, until)`` of every batch the engine completed: legacy progress files (one
    per batch time, a regenerated batch replaces its file; a receiver's dead context's batches count too),
    modern progress of the job's query (the last report of each batch id, a re-run batch counts once)."""
    if outcome.engine == "legacy":
        from legacy.runner import read_progress as legacy_progress

        frame = legacy_progress(outcome.out_dir)
        if frame.empty:
            return []
        return list(zip(frame["topic"], frame["partition"].astype(int), frame["from_offset"].astype(int), frame["until_offset"].astype(int)))
    from modern.runner import read_progress

    # Progress events reach the listener after the batch commits, so a kill can lose the last one; the
    # checkpoint's offsets and commits logs have it (but keep only the newest batches): use both.
    batches = {
        p["batchId"]: [(s.get("startOffset") or {}, s.get("endOffset") or {}) for s in p.get("sources", [])]
        for p in read_progress(outcome.out_dir, job)
    }
    if outcome.checkpoint_dir is not None:  # a local one (a URI's files are for Spark to read)
        batches.update(_checkpointed_batches(outcome.checkpoint_dir / job))
    ranges = []
    for sources in batches.values():
        for start, end in sources:
            for topic, parts in end.items():
                for partition, until in parts.items():
                    ranges.append((topic, int(partition), int(start.get(topic, {}).get(partition, 0)), int(until)))
    return ranges


def _checkpointed_batches(checkpoint: Path) -> dict[int, list[tuple[dict, dict]]]:
    """Batch id → ``[(start, end)]`` per source, of the batches a query's checkpoint holds as committed."""
    from modern.inspect import inspect_modern_checkpoint

    if not (checkpoint / "offsets").is_dir():
        return {}
    logged = {
        b.batch_id: (b.committed, [offset or {} for offset in b.offsets.values()])  # in the log's source order
        for b in inspect_modern_checkpoint(checkpoint, row_counts=False).batches
    }
    batches = {}
    for batch, (committed, end) in logged.items():
        start = logged.get(batch - 1)
        if not committed or (start is None and batch > 0):
            continue  # purged from the log: the progress events have it
        batches[batch] = [(start[1][i] if start else {}, e) for i, e in enumerate(end)]
    return batches


def input_coverage(ranges: list[tuple[str, int, int, int]], end_offsets: dict[str, dict[int, int]]) -> tuple[int, int]:
    """``(never processed, processed more than once)`` input records, from the ranges batches processed.

    Example:
        >>> input_coverage([("t", 0, 0, 5), ("t", 0, 3, 8), ("t", 1, 2, 4)], {"t": {0: 10, 1: 4}})
        (4, 2)
    """
    lost = repeated = 0
    for topic, parts in end_offsets.items():
        for partition, end in parts.items():
            marks = np.zeros(end + 1, dtype="int64")
            for t, p, first, until in ranges:
                if t == topic and p == partition and until > first:
                    marks[min(first, end)] += 1
                    marks[min(until, end)] -= 1
            times = np.cumsum(marks)[:end]
            lost += int((times == 0).sum())
            repeated += int(np.clip(times - 1, 0, None).sum())
    return lost, repeated


def _lost_and_duplicated(diff: OutputDiff) -> tuple[int, int]:
    """Output rows lost and duplicated against the oracle: missing rows are lost, unexpected rows are
    duplicates; a mismatched row is lost if its first differing numeric value is below the oracle's (input
    records were lost), duplicated if above (input counted twice)."""
    lost, duplicated = len(diff.missing), len(diff.unexpected)
    for row in diff.mismatched.to_dict("records"):
        for column in diff.values:
            expected, actual = row[f"{column}_expected"], row[f"{column}_actual"]
            if isinstance(expected, (int, float, np.number)) and isinstance(actual, (int, float, np.number)) and expected != actual:
                lost += actual < expected
                duplicated += actual > expected
                break
    return lost, duplicated


def _oracle(settings: CompareSettings, spec: workloads.WorkloadSpec, frame: pd.DataFrame, dataset: DatasetSpec) -> workloads.OracleResult:
    if not settings.oracle:
        return spec.oracle(frame, dataset)
    fn = workloads.load_ref(settings.oracle, "oracle")
    result = fn(frame, dataset)  # type: ignore[operator]
    if isinstance(result, pd.DataFrame):  # rows only: dead letters and late drops as the spec's oracle says
        base = spec.oracle(frame, dataset)
        return workloads.OracleResult(workloads.sorted_rows(spec, result), base.dead_letters, base.late_dropped)
    return result


def _ref(function: Callable) -> str:
    return f"{function.__module__}:{function.__qualname__}"


def _measure(
    settings: CompareSettings,
    spec: workloads.WorkloadSpec,
    outcomes: dict[str, EngineOutcome],
    oracle: workloads.OracleResult,
    job_names: dict[str, str],
    job_refs: dict[str, str],
    dataset_path: str,
    records: int,
) -> tuple[dict, ThreeWayDiff, dict[str, pd.DataFrame]]:
    rows = {engine: read_batches(o.out_dir / job_names[engine]) for engine, o in outcomes.items()}
    finals = {engine: workloads.final_result(spec, r) for engine, r in rows.items()}
    diff = three_way(finals["legacy"], finals["modern"], oracle.rows, spec.key_columns, spec.value_columns)
    latencies = {engine: _latency(r) for engine, r in rows.items()}
    engines = {}
    for engine, outcome in outcomes.items():
        against = diff.legacy if engine == "legacy" else diff.modern
        dead = _dead_letters(outcome)
        lost, duplicated = _lost_and_duplicated(against)
        first_produced = int(outcome.replay.log["produced_ms"].min())
        span_s = max((outcome.done_ms - first_produced) / 1000, 1e-3)
        engines[engine] = {
            **{k: v for k, v in against.counts().items()},
            "dead_letters": len(dead),
            "late_dropped": _late_dropped(outcome, job_names[engine]),
            "throughput_rps": round(len(outcome.replay.log) / span_s, 1),
            "latency_ms": _percentiles(latencies[engine]),
            "output_rows": len(rows[engine]),
            "restarts": outcome.restarts,
            "kills_at_s": outcome.kills,
            "broker_paused_at_s": outcome.pauses,
            "lost_rows": lost,
            "duplicated_rows": duplicated,
            **dict(zip(("input_records_lost", "input_records_repeated"), input_coverage(
                _processed_ranges(outcome, job_names[engine]), outcome.replay.topic_end_offsets))),
            "replay_seconds": round(outcome.replay.seconds, 2),
            "input_records": len(outcome.replay.log),
        }
    metrics = {
        "workload": spec.name,
        "summary": spec.summary,
        "records": records,
        "dataset": dataset_path,
        # Rows equal the oracle on both engines, and so do the dead letters.
        "equivalent": bool(diff.equivalent) and all(e["dead_letters"] == len(oracle.dead_letters) for e in engines.values()),
        "engines_agree": bool(diff.between.equal),
        "oracle": {
            "rows": len(oracle.rows),
            "dead_letters": len(oracle.dead_letters),
            "late_dropped": len(oracle.late_dropped),
        },
        "engines": engines,
        "settings": {
            "rate_rps": settings.rate_rps,
            "partitions": settings.partitions,
            "legacy_mode": settings.legacy_mode,
            "offset_store": redacted_dsn(settings.offset_store) if settings.offset_store else None,
            "batch_seconds": settings.batch_seconds,
            "trigger": settings.trigger,
            "concurrent": settings.concurrent,
            "kill_driver": settings.kill_driver,
            "pause_broker_s": settings.pause_broker_s,
            "legacy_job": job_refs["legacy"],
            "modern_job": job_refs["modern"],
            "oracle": settings.oracle or _ref(spec.oracle),
        },
    }
    series = {
        f"latency_{engine}": pd.DataFrame({"latency_ms": latencies[engine].to_numpy()}) for engine in outcomes
    } | {f"timeline_{engine}": timeline(outcome) for engine, outcome in outcomes.items()}
    return metrics, diff, series


def _write_diff(out: Path, diff: ThreeWayDiff) -> None:
    target = out / "diff"
    target.mkdir(exist_ok=True)
    for side, one in (("legacy_vs_oracle", diff.legacy), ("modern_vs_oracle", diff.modern), ("modern_vs_legacy", diff.between)):
        for kind in ("missing", "unexpected", "mismatched"):
            frame: pd.DataFrame = getattr(one, kind)
            frame.to_csv(target / f"{side}.{kind}.csv", index=False)
            frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(
                target / f"{side}.{kind}.parquet", index=False
            )
    for name, frame in (("legacy", diff.legacy_rows), ("modern", diff.modern_rows), ("oracle", diff.oracle_rows)):
        frame.to_csv(target / f"final.{name}.csv", index=False)


# -- the run -----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _kafka(settings: CompareSettings, out: Path) -> Iterator[tuple[str, Any]]:
    from kit.broker import EmbeddedBroker
    from kit.kafka import wait_for_broker

    if settings.bootstrap_servers:
        wait_for_broker(settings.bootstrap_servers, timeout_s=15)
        yield settings.bootstrap_servers, None
        return
    with EmbeddedBroker(settings.broker_port, log_path=out / "broker.log") as broker:
        yield broker.bootstrap_servers, broker


def _jobs(settings: CompareSettings, engine: str) -> list[list[str]]:
    chosen = settings.legacy if engine == "legacy" else settings.modern
    return [[settings.workload, chosen or "default"]]


DEFAULT_RATE_SHARE = 0.75
"""The default replay rate's share of what the batch caps let through (:func:`default_rate`)."""


def default_rate(dataset: DatasetSpec, batch_seconds: float = 1.0) -> float:
    """The default replay rate (records/s): :data:`DEFAULT_RATE_SHARE` of what the batch caps
    (:func:`compare.harness.batch_caps`) let through, half the lateness margin of event time per batch.
    750 records/s for the default dataset.

    At the caps' own rate an engine has no headroom: a backlog (the first batch's start-up, a pause, a
    restart) is never worked off, since no batch may take more than the rate brings in, and latency stays at
    the backlog's length for the rest of the run. A quarter of headroom lets it catch up.
    """
    return DEFAULT_RATE_SHARE * dataset.events_per_second * dataset.lateness_margin_ms / 2_000 / batch_seconds


def validate(settings: CompareSettings) -> tuple[workloads.WorkloadSpec, dict[str, workloads.Job]]:
    """Check what can be checked before anything starts: the run directory, the workload, the job and oracle
    references, the dataset file. Returns the spec and each engine's resolved job.

    Raises:
        ConfigError, DatasetError: as :func:`run_compare`.
    """
    out = settings.out_dir
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"run directory {out} is not empty; give a new --out, or remove it")
    spec = workloads.get(settings.workload)
    resolved = {engine: workloads.resolve(engine, settings.workload, _jobs(settings, engine)[0][1]) for engine in ENGINES}
    if settings.oracle:
        workloads.load_ref(settings.oracle, "oracle")
    if settings.dataset_file:
        read_dataset(settings.dataset_file)
        read_manifest(settings.dataset_file)
    return spec, resolved


def run_compare(settings: CompareSettings, progress: Progress | None = None) -> CompareResult:
    """Run a compare as ``settings`` says and write its run directory (see the module docstring).

    Raises:
        ConfigError: bad settings, unknown workload, a job or oracle reference that cannot be imported, or a
            run directory that is not empty.
        DatasetError: an unreadable dataset file.
        BrokerUnavailable: no Kafka at ``bootstrap_servers``.
        EngineFailed: a driver failed (its error and log).
        RunTimeout: a driver did not start or drain in time.
    """
    progress = progress or (lambda task, done, total: None)
    out = settings.out_dir
    spec, resolved = validate(settings)
    out.mkdir(parents=True, exist_ok=True)
    dataset, frame, dataset_path = _dataset(settings, out)
    rate = None if settings.burst else settings.rate_rps or default_rate(dataset, settings.batch_seconds)
    settings = replace(settings, dataset=dataset, rate_rps=rate)
    routed = route_inputs([spec], frame)
    run_id = uuid.uuid4().hex[:8]
    outcomes: dict[str, EngineOutcome] = {}
    with _kafka(settings, out) as (bootstrap, broker):
        def one(engine: str) -> None:
            outcomes[engine] = _run_engine(
                engine, settings, routed, dataset, _jobs(settings, engine), bootstrap, broker, run_id, progress
            )

        if settings.concurrent:
            errors: list[BaseException] = []

            def guarded(engine: str) -> None:
                try:
                    one(engine)
                except BaseException as err:
                    errors.append(err)

            threads = [threading.Thread(target=guarded, args=(e,), name=f"dmk-{e}") for e in ENGINES]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
        else:
            for engine in ENGINES:
                one(engine)
    oracle = _oracle(settings, spec, frame, dataset)
    job_names = {engine: job.name for engine, job in resolved.items()}
    job_refs = {engine: _ref(job.build) for engine, job in resolved.items()}
    metrics, diff, series = _measure(settings, spec, outcomes, oracle, job_names, job_refs, dataset_path, len(frame))
    _write_diff(out, diff)
    data = out / "data"
    data.mkdir(exist_ok=True)
    for name, table in series.items():
        table.to_parquet(data / f"{name}.parquet", index=False)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    from compare.report import render

    render(out)
    return CompareResult(out, metrics, diff)
