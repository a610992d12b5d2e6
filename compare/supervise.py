"""One engine of a compare run, supervised: fresh topics, a driver process, the replay, faults, the drain.

:func:`run_engine_process` writes the engine's :class:`~kit.engine.DriverConfig`, starts
``python -m compare.driver`` (:mod:`compare.driver`) and waits for it to be ready, replays the dataset
(paced, or as a burst before the start), injects the planned faults (SIGKILL and restart of the driver,
SIGSTOP/SIGCONT of the embedded broker), then tells the driver where the input ends and waits until it is
done. A driver failing for a known infrastructure reason (:data:`TRANSIENT_ERRORS`) is restarted from its
checkpoint, as a supervised production driver would be.

Example::

    outcome = run_engine_process(get_engine("legacy"), settings, routed, dataset, jobs, kafka, "a1b2c3d4",
                                 progress)
    outcome.restarts, outcome.replay.topic_end_offsets
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pandas as pd

from compare.driver import (
    CONTROL,
    DONE,
    DRAIN,
    FAILED,
    KAFKA_SECURITY_ENV,
    OFFSET_STORE_ENV,
    READY,
    WARMED,
    WARMUP,
    write_json,
)
from compare.errors import EngineFailed
from compare.inputs import batch_records, capped, common_cap, input_shares
from compare.settings import CompareSettings
from kit import layout, workloads
from kit.broker import KafkaEndpoint
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig, KitEngine, option_items, redacted_dsn
from kit.errors import RunTimeout
from kit.kafka import Kafka
from kit.layout import EVENT_LOG
from kit.nexmark import NexmarkSpec
from kit.replay import ReplayResult, ReplaySettings, replay
from kit.spark import SHORT_RUN_CONF, has_scheme

__all__ = [
    "MAX_RECOVERIES", "TRANSIENT_ERRORS", "DriverProcess", "EngineOutcome", "Progress", "event_log_conf", "log_tail",
    "run_engine_process", "stop_all_drivers",
]

TRANSIENT_ERRORS = ("Python worker failed to connect back",)
"""Driver failures that say nothing about the job: Spark waits a fixed 10 s for a new Python process to
connect back, which an overloaded machine can miss. A driver failing with one of them is restarted from its
checkpoint (at most :data:`MAX_RECOVERIES` times; counted in ``restarts``)."""
MAX_RECOVERIES = 2
WARMUP_BATCHES = 3
"""Batches' worth of the dataset's first records (:func:`compare.inputs.common_cap` each) a driver runs its jobs
over before a paced replay starts (:mod:`compare.driver`): a cold driver's first batches are many times slower than
the later ones, and a replay that started with them piled up a backlog the engine then worked off for most of the
run."""

PROGRESS_POLL_S = 1.0
"""How often the harness reads the driver's batch log for the progress line while it waits for the drain. Every
100 ms (the wait's poll), it parsed the whole log each time: a modern run's progress log is a few kB a
micro-batch, so near the end of a run the harness parsed megabytes a second on the cores the engine runs on."""

Progress = Callable[[str, int, int], None]
"""Called with (task, done, total): ``"replay legacy"``, ``"legacy"`` (records processed) ..."""


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
    faults_after_replay: int = 0
    """Planned faults injected after the replay ended (their time came after it), before the drain."""
    interval_s: float = 0.0
    """The engine's batch interval or trigger (0: back to back)."""
    warmup_s: float | None = None
    """How long the driver's warm-up took before the replay (None: no warm-up, the replay was not paced)."""
    exactly_once: bool = True
    """Whether the engine promises, for this run's settings, to process every input record once (its verdict)."""


_RUNNING: set[DriverProcess] = set()
_RUNNING_LOCK = threading.Lock()


def stop_all_drivers() -> None:
    """Stop every driver this process started that still runs.

    The CLI's cleanup on a signal: a concurrent run's other engine runs in a thread the signal does not unwind.
    """
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for driver in running:
        driver.stop()


class DriverProcess:
    """A driver process of one engine: start, wait until ready, kill, restart, wait until done."""

    def __init__(self, engine: str, config_path: Path, out: Path, timeout_s: float, env: dict[str, str]) -> None:
        self.engine = engine
        self.config_path = config_path
        self.out = out
        self.timeout_s = timeout_s
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.recoveries = 0

    @property
    def log_path(self) -> Path:
        """The driver's log (every start appends to it)."""
        return self.out / layout.DRIVER_LOG

    def start(self) -> None:
        """Start the driver in a session of its own (a kill takes its JVM and Python workers with it)."""
        (self.out / CONTROL / READY).unlink(missing_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        log.write(f"--- driver start {self.starts + 1} at {time.strftime('%H:%M:%S')} ---\n".encode())
        log.flush()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "compare.driver", str(self.config_path)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env,
        )
        log.close()
        self.starts += 1
        with _RUNNING_LOCK:
            _RUNNING.add(self)

    def check(self) -> None:
        """Raise if the driver failed or exited early; restart it after a transient failure.

        Raises:
            EngineFailed: the driver wrote a failure, or exited before it was done.
        """
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
            first = error["message"].splitlines()[0] if error["message"] else ""
            msg = f"the {self.engine} driver failed: {error['error']}: {first} (full log: {self.log_path})"
            raise EngineFailed(msg, engine=self.engine, log=str(self.log_path))
        if self.process is not None and self.process.poll() is not None:
            msg = (f"the {self.engine} driver exited with code {self.process.returncode} before it was done; "
                   f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
            raise EngineFailed(msg, engine=self.engine, log=str(self.log_path))

    def wait_for(self, name: str, timeout_s: float, on_poll: Callable[[], None] | None = None) -> dict[str, Any]:
        """The JSON of control file ``name`` once the driver writes it.

        Raises:
            EngineFailed: the driver failed meanwhile.
            RunTimeout: not written within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        path = self.out / CONTROL / name
        while not path.exists():
            if name != DONE or not (self.out / CONTROL / DONE).exists():
                self.check()
            if on_poll is not None:
                on_poll()
            if time.monotonic() > deadline:
                msg = (f"the {self.engine} driver did not write {name} within {timeout_s:.0f} s; see {self.log_path}. "
                       "Raise --timeout for larger datasets.")
                raise RunTimeout(msg, reached=None, expected=name)
            time.sleep(0.1)
        return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))

    def kill(self) -> None:
        """SIGKILL the driver and its JVM (its whole process group), and reap it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        # Spark's Python workers are in the same group; anything that escaped it is the JVM's to clean up.

    def finish(self) -> None:
        """Wait for the driver to exit (60 s), then kill it."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def stop(self) -> None:
        """SIGTERM the driver's process group if the driver runs (SIGKILL after 20 s)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log, for an error message; ``(no log)`` when it cannot be read."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _fault_plan(settings: CompareSettings, engine: str, expected_s: float) -> list[float]:
    seed = settings.seed if settings.seed is not None else (settings.dataset.seed if settings.dataset else 0)
    rng = random.Random(f"{seed}-{engine}")
    return sorted(rng.uniform(0.15, 0.85) * expected_s for _ in range(settings.kill_driver))


def event_log_conf(out_dir: Path) -> dict[str, str]:
    """Spark settings that write a driver's event log (every job, stage and task) to ``out_dir/eventlog``.

    Uncompressed, one file per driver process (a restarted driver adds one); Spark's History Server reads it too.
    """
    target = Path(out_dir) / EVENT_LOG
    target.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": target.resolve().as_uri(),
            "spark.eventLog.compress": "false"}


def driver_config(
    engine: KitEngine, settings: CompareSettings, topics: dict[str, str], dataset: DatasetSpec | NexmarkSpec,
    jobs: list[list[str]], bootstrap_servers: str, run_id: str, replay_s: float,
    shares: Mapping[str, float] | None = None,
) -> DriverConfig:
    """The config of ``engine``'s driver in a compare run.

    ``replay_s``: how long the replay lasts once the driver is ready (the driver waits that long, plus the
    timeout, for the drain). ``shares``: each input's fraction of the dataset (:func:`compare.inputs.input_shares`),
    which caps it at that share of a batch.
    """
    # Under a shared root, each run gets its own directory: a later run must not resume this one's state.
    checkpoint = (f"{settings.checkpoint_dir.rstrip('/')}/{run_id}/{engine.name}-checkpoint" if settings.checkpoint_dir
                  else str(settings.out_dir / f"{engine.name}-checkpoint"))
    config = DriverConfig(
        engine=engine.name, bootstrap_servers=bootstrap_servers, topics=topics,
        out_dir=str(settings.out_dir / engine.name), checkpoint_dir=checkpoint, dataset=dataset,
        jobs=tuple((workload, variant) for workload, variant in jobs),
        app_name=f"dmk-compare-{engine.name}-{workloads.get(settings.workload).name}", master=settings.master,
        timeout_s=settings.timeout_s, drain_timeout_s=settings.timeout_s + replay_s, partitions=settings.partitions,
        sys_path=(os.getcwd(),), spark_conf={**SHORT_RUN_CONF, **event_log_conf(settings.out_dir / engine.name)},
        kafka_security=dict(settings.kafka_security),
    )
    # What the run's settings offer, each engine takes the options it has (the legacy batch interval and offset
    # store, the modern trigger and Connect server), then its own mode (--legacy-mode), if it has modes.
    offered = {
        "batch_seconds": settings.batch_seconds, "trigger": settings.trigger, "connect": settings.connect,
        "offset_store": redacted_dsn(settings.offset_store) if settings.offset_store else None,
        "job_name": f"dmk-compare-{run_id}", **engine.modes.get(settings.legacy_mode, {}),
    }
    own = option_items(engine.options(config))
    config = capped(engine, replace(config, options={**own, **{k: v for k, v in offered.items() if k in own}}),
                    dataset, shares)
    # The job code's fingerprint for checkpoint recovery: the whole config, so a changed run never resumes.
    if "fingerprint" not in own:
        return config
    fingerprint = hashlib.sha256(config.to_json().encode()).hexdigest()[:16]
    return replace(config, options={**option_items(config.options), "fingerprint": fingerprint})


def run_engine_process(
    engine: KitEngine,
    settings: CompareSettings,
    routed: pd.DataFrame,
    dataset: DatasetSpec | NexmarkSpec,
    jobs: list[list[str]],
    kafka: KafkaEndpoint,
    run_id: str,
    progress: Progress,
    dataset_records: int | None = None,
) -> EngineOutcome:
    """Run ``engine`` in its own driver process over a replay of ``routed`` (see the module docstring).

    ``dataset_records``: the dataset's rows, also those no input of the job reads (default: the rows ``routed``
    holds); the replay is paced, and each input capped, in dataset records.

    Raises:
        EngineFailed: the driver failed.
        RunTimeout: the driver did not start or drain in time.
    """
    out = settings.out_dir / engine.name
    out.mkdir(parents=True)
    topics = {name: f"dmk-{run_id}-{engine.name}-{name}" for name in sorted(set(routed["topic"]))}
    with Kafka(kafka.bootstrap_servers) as client:
        for topic in topics.values():
            client.create_topic(topic, settings.partitions)
    frame = routed.assign(topic=routed["topic"].map(topics))
    # Paced in dataset records (as the harness does): a query of a few tables (Nexmark q8 reads persons and
    # auctions, one record in 16) replays them at the event-time speed of the whole stream, not 16 times faster.
    records = dataset_records or routed["seq"].nunique()
    copies = len(routed) / max(records, 1)
    total = len(routed)
    replay_s = total / settings.rate_rps / copies if settings.rate_rps else 0.0
    config = driver_config(engine, settings, topics, dataset, jobs, kafka.bootstrap_servers, run_id, replay_s,
                           input_shares(routed, records, batch_records(dataset), settings.partitions,
                                        by_clock=engine.batches_by_clock))
    config_path = out / layout.DRIVER_CONFIG
    config.write(config_path)
    python_path = os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": python_path}
    if settings.offset_store and "offset_store" in option_items(config.options):
        env[OFFSET_STORE_ENV] = settings.offset_store
    if settings.kafka_security:
        env[KAFKA_SECURITY_ENV] = json.dumps(dict(settings.kafka_security))
    driver = DriverProcess(engine.name, config_path, out, settings.timeout_s, env)
    outcome = EngineOutcome(engine.name, out, replay=None,  # type: ignore[arg-type]  # set by the replay below
                            interval_s=engine.interval_s(config), exactly_once=engine.exactly_once(config))
    if not has_scheme(config.checkpoint_dir):
        outcome.checkpoint_dir = Path(config.checkpoint_dir)
    replay_settings = ReplaySettings(
        topic=topics[sorted(topics)[0]], partitions=settings.partitions,
        rate_rps=settings.rate_rps * copies if settings.rate_rps else None, partition_by="seq",
    )

    def replay_with_progress() -> ReplayResult:
        return replay(frame, kafka.bootstrap_servers, replay_settings,
                      on_progress=lambda sent, acked: progress(f"replay {engine.name}", acked, total))

    try:
        if settings.rate_rps is None:
            outcome.replay = replay_with_progress()
        else:
            _fill_warmup(routed, settings, config, engine.name, run_id, kafka.bootstrap_servers, out, copies)
            progress(f"warm-up {engine.name}", 0, 1)
        driver.start()
        outcome.started_ms = driver.wait_for(READY, settings.timeout_s)["started_ms"]
        if (out / CONTROL / WARMED).exists():
            outcome.warmup_s = json.loads((out / CONTROL / WARMED).read_text(encoding="utf-8"))["seconds"]
            progress(f"warm-up {engine.name}", 1, 1)
        if settings.rate_rps is not None:
            outcome.replay = _replay_with_faults(engine.name, settings, driver, kafka, replay_with_progress,
                                                 replay_s, outcome)
        write_json(out / CONTROL / DRAIN, {"end_offsets": outcome.replay.topic_end_offsets})
        record = engine.record(out)
        processed = _every(PROGRESS_POLL_S, lambda: progress(engine.name, record.processed_records(), total))
        done = driver.wait_for(DONE, settings.timeout_s, on_poll=processed)
        outcome.done_ms = done["done_ms"]
        progress(engine.name, total, total)
        driver.finish()
    finally:
        driver.stop()
    outcome.restarts = driver.starts - 1
    outcome.replay.log.to_parquet(out / layout.REPLAY_LOG, index=False)
    return outcome


def _every(period_s: float, action: Callable[[], None]) -> Callable[[], None]:
    """``action``, called at most once per ``period_s`` however often the returned function is."""
    last = [float("-inf")]

    def throttled() -> None:
        now = time.monotonic()
        if now - last[0] >= period_s:
            last[0] = now
            action()

    return throttled


def _fill_warmup(
    routed: pd.DataFrame, settings: CompareSettings, config: DriverConfig, engine: str, run_id: str,
    bootstrap_servers: str, out: Path, copies: float = 1.0,
) -> None:
    """Produce the first :data:`WARMUP_BATCHES` batches' worth of ``routed`` into warm-up topics of their own.

    ``routed`` holds input names in its ``topic`` column; ``copies``: its rows per dataset record (a batch of a
    query of a few tables holds that share of a batch's dataset records). The topics and their end offsets go to
    ``control/warmup.json`` for the driver (:mod:`compare.driver`).
    """
    per_batch = max(1, round(common_cap(config.require_dataset()) * copies))
    head = routed.head(min(len(routed), WARMUP_BATCHES * per_batch))
    topics = {name: f"dmk-{run_id}-{engine}-warmup-{name}" for name in config.topics}
    with Kafka(bootstrap_servers) as client:
        for topic in topics.values():
            client.create_topic(topic, settings.partitions)
    result = replay(head.assign(topic=head["topic"].map(topics)), bootstrap_servers, ReplaySettings(
        topic=topics[sorted(topics)[0]], partitions=settings.partitions, partition_by="seq"))
    write_json(out / CONTROL / WARMUP, {"topics": topics, "end_offsets": result.topic_end_offsets})


def _replay_with_faults(
    engine: str,
    settings: CompareSettings,
    driver: DriverProcess,
    kafka: KafkaEndpoint,
    replay_fn: Callable[[], ReplayResult],
    expected_s: float,
    outcome: EngineOutcome,
) -> ReplayResult:
    """Run the replay while killing/restarting the driver and pausing the broker as planned.

    Every planned fault is injected: one whose time the replay outlived (a restart that took longer than the
    rest of the replay, a replay faster than planned) is injected right after the replay, before the drain,
    and counted in :attr:`EngineOutcome.faults_after_replay`. A fault is done one at a time: a kill waits for
    the restarted driver to be ready before the next.
    """
    plan = sorted([(t, "kill") for t in _fault_plan(settings, engine, expected_s)]
                  + ([(expected_s / 2, "pause")] if settings.pause_broker_s else []))
    errors: list[BaseException] = []
    finished = threading.Event()
    started = time.monotonic()

    def inject(kind: str) -> None:
        at = round(time.monotonic() - started, 2)
        if kind == "kill":
            outcome.kills.append(at)
            driver.kill()
            driver.start()
            driver.wait_for(READY, settings.timeout_s)
        elif kafka.broker is not None:  # settings refuse a pause without the embedded broker
            outcome.pauses.append(at)
            kafka.broker.pause()
            try:
                time.sleep(settings.pause_broker_s)
            finally:
                kafka.broker.resume()

    def faults() -> None:
        try:
            while plan and not finished.is_set():
                if time.monotonic() - started >= plan[0][0]:
                    inject(plan.pop(0)[1])
                time.sleep(0.05)
        except BaseException as err:  # noqa: BLE001 - any failure is surfaced after the replay, in the caller
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
    while plan:  # the replay ended first: the rest now, so the run does what was asked
        outcome.faults_after_replay += 1
        inject(plan.pop(0)[1])
    return result
