"""Run modern workloads: one named streaming query per job, idempotent outputs, progress kept, wait for done.

Output layout under ``out_dir`` (the same as :mod:`legacy.runner`'s, batch = batch id)::

    <job>/                    the job's rows (kit.sink batch files)
    dead_letters.<input>/     malformed records of an input: topic, partition, offset, reason (kit.sink keyed
                              files, written by the job queries' parse: no query reads a topic twice)
    progress/<query>.jsonl    every StreamingQueryProgress of every query, as JSON lines
    progress/idle/<query>.jsonl  the idle triggers Spark reported (no new data, no micro-batch)

A job given an initial state (``ModernRunConfig.initial_state``, written by ``dmk cutover --seed-state``)
continues the legacy job's state: in Spark's state store, seeded and checked at its first batch, for totals that
count events and for a deduplication's ids seen (:mod:`modern.seed`), else totals added to its output
(:func:`continue_totals`). A job given a filter
(``ModernRunConfig.suppress``, written by ``dmk cutover --rewind``) drops the rows the legacy job already emitted:
:mod:`modern.cutover`.

Each job's query is named ``<job>`` and has its checkpoint in ``<checkpoint_dir>/<job>``, so a restarted
driver resumes every query where it was. A job query's parse writes the malformed records it meets to the
dead-letter output as it parses them (``modern.workloads.Source``), exactly once by content-named files,
so the topics are read once per job, not a second time for the dead letters. With executors on other hosts
(a master not on this machine, :func:`kit.spark.on_this_host`) they cannot write the driver's directory:
a query per input, ``dead_letters.<input>``, then writes them from the driver, at the cost of that read.

Example::

    config = ModernRunConfig(bootstrap_servers="127.0.0.1:9092", topics={"events": "events"},
                             out_dir="out", checkpoint_dir="ckpt", dataset=spec,
                             jobs=(("running_counts", "default"),))
    run = ModernRun(spark, config).start()
    run.await_offsets({"events": {0: 2500, 1: 2500}}, timeout_s=120)
    run.stop()
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import layout, workloads
from kit.dataset import DatasetSpec
from kit.errors import ConfigError, RunTimeout
from kit.nexmark import NexmarkSpec
from kit.security import redacted_repr
from kit.workloads import job_id
from modern.kafka import offsets_from_json
from modern.sinks import ParquetBatchSink
from modern.triggers import with_trigger
from modern.workloads import Source, resolve

__all__ = ["ModernRun", "ModernRunConfig", "RunTimeout", "continue_totals", "job_id", "late_dropped"]


@dataclass(frozen=True)
class ModernRunConfig:
    """One modern run: which jobs, over which topics, writing where.

    Attributes:
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        out_dir: output root (see the module docstring).
        checkpoint_dir: root of the queries' checkpoint locations.
        dataset: the spec of the replayed dataset.
        jobs: ``(workload, variant)`` pairs; each is its own query.
        trigger: processing-time trigger interval (``"0 seconds"``: as fast as possible, Spark's default),
            ``"availableNow"`` or ``"once"`` (:func:`modern.triggers.with_trigger`; a continuous trigger raises
            ``ContinuousTriggerUnsupported`` at :meth:`ModernRun.start`). Default ``"0 seconds"``.
        source_options: extra Kafka source options (``maxOffsetsPerTrigger``, ``startingOffsets``...). Default:
            none.
        max_offsets_by_input: input name → records per trigger of that input: a source's ``maxOffsetsPerTrigger``
            is the sum over the inputs it reads (:class:`modern.workloads.Source`). Default: none.
        initial_state: job name → a Parquet file of the legacy job's state (``dmk cutover --seed-state``), which
            the job's query continues (:mod:`modern.seed`, :func:`continue_totals`). Default: none.
        suppress: job name → the output filter of a rewound cutover (``dmk cutover --rewind --suppress FILE``),
            which drops the job's rows the legacy job already emitted (:func:`modern.cutover.suppress_emitted`).
            Default: none.
    """

    __repr__ = redacted_repr  # kafkaParams / source options may hold TLS/SASL secrets

    bootstrap_servers: str
    topics: Mapping[str, str]
    out_dir: str
    checkpoint_dir: str
    dataset: DatasetSpec | NexmarkSpec
    jobs: tuple[tuple[str, str], ...]
    trigger: str = "0 seconds"
    source_options: Mapping[str, Any] = field(default_factory=dict)
    max_offsets_by_input: Mapping[str, int] = field(default_factory=dict)
    initial_state: Mapping[str, str] = field(default_factory=dict)
    suppress: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        both = sorted(set(self.initial_state) & set(self.suppress))
        if both:  # dmk cutover refuses --seed-state with --rewind; a config written by hand could still say it
            msg = (f"{both} have both an initial state and a rewound cutover's filter: a job's state is either "
                   "carried (--seed-state) or rewound (--rewind); keep one")
            raise ConfigError(msg, field="initial_state", expected="jobs apart from suppress's", actual=both)


class _ProgressLog:
    """A StreamingQueryListener appending each progress of this run's queries to its log under ``out_dir``.

    Idle triggers (no new data, no micro-batch) go to the query's idle log, apart (:func:`kit.layout.progress_log`):
    their progress carries the id of the micro-batch they did not run.
    """

    def __init__(self, out_dir: Path, names: set[str], spark: Any = None) -> None:
        from modern._progress import progress_listener

        self.listener = progress_listener(self.write, self.write_idle, spark)
        self.out_dir = out_dir
        self.names = names
        self._lock = threading.Lock()

    def write(self, progress: dict[str, Any]) -> None:
        self._append(progress, idle=False)

    def write_idle(self, progress: dict[str, Any]) -> None:
        self._append(progress, idle=True)

    def _append(self, progress: dict[str, Any], *, idle: bool) -> None:
        if progress.get("name") not in self.names:
            return
        path = layout.progress_log(self.out_dir, progress["name"], idle=idle)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(progress) + "\n")


_SOURCE_TOTALS = ("numInputRows", "inputRowsPerSecond", "processedRowsPerSecond")


def _with_query_totals(progress: dict[str, Any]) -> dict[str, Any]:
    """``progress`` with the query's row totals, which the progress JSON a Connect server sends lacks.

    Spark defines each as the sum over the sources (``StreamingQueryProgress``), so that is what is filled in.
    """
    for key in _SOURCE_TOTALS:
        if key not in progress:
            progress[key] = sum(source.get(key) or 0 for source in progress.get("sources", []))
    return progress


class _ProgressPoller:
    """Over Spark Connect: each query's ``recentProgress``, polled into a :class:`_ProgressLog`.

    PySpark 4.3's Connect client delivers listener events on one long-running RPC, and its handler dies on the
    first response it does not know (``[UNKNOWN_RESPONSE] Unknown response: Plan observed(__python_accumulator__
    ...)``, seen once a query with Python state functions ran), removing every client-side listener. Polling
    asks the server for what it keeps (the last ``spark.sql.streaming.numRecentProgressUpdates``, default 100,
    per query): nothing is lost while a poll interval holds fewer micro-batches than that.
    """

    def __init__(self, log: _ProgressLog, interval_s: float = 0.5) -> None:
        self.log = log
        self.interval_s = interval_s
        self.queries: dict[str, Any] = {}
        self._seen: set[tuple[str, int, str]] = set()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="dmk-connect-progress", daemon=True)

    def start(self, queries: Mapping[str, Any]) -> None:
        self.queries = dict(queries)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """Log every progress of the queries not logged yet (by run id and batch id)."""
        with self._lock:
            for query in self.queries.values():
                try:
                    progresses = query.recentProgress
                except Exception:  # noqa: BLE001 - a stopped query or a closed session: nothing more to log
                    continue
                for progress in progresses:
                    parsed = _with_query_totals(json.loads(progress.json))
                    # An idle trigger's progress carries the id of the micro-batch it did not run.
                    idle = is_idle_trigger(parsed)
                    key = (str(parsed.get("runId")), int(parsed.get("batchId", -1)),
                           str(parsed.get("timestamp")) if idle else "")
                    if key not in self._seen:
                        self._seen.add(key)
                        (self.log.write_idle if idle else self.log.write)(parsed)

    def stop(self) -> None:
        """Poll a last time and stop polling."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        self.poll()


def is_idle_trigger(progress: Mapping[str, Any]) -> bool:
    """Whether ``progress`` is an idle trigger's (no new data, no micro-batch: no ``addBatch`` duration)."""
    return "addBatch" not in (progress.get("durationMs") or {})


def read_progress(out_dir: str | Path, name: str, *, idle: bool = False) -> list[dict]:
    """Every progress a run's query ``name`` reported, oldest first; ``idle``: its idle triggers' instead.

    Spark reports an idle trigger at most once per ``spark.sql.streaming.noDataProgressEventInterval``
    (10 s by default).
    """
    path = layout.progress_log(out_dir, name, idle=idle)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def late_dropped(out_dir: str | Path, name: str) -> int:
    """Rows query ``name``'s stateful operators dropped as later than the watermark.

    This is Spark's ``numRowsDroppedByWatermark``, summed over batches and operators.

    Spark counts the rows *entering* the operator: after partial aggregation for aggregations, so for a
    windowed count it can be fewer than the records dropped (several late records of one key and window in
    one batch count once).
    """
    return sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in read_progress(out_dir, name)
        for op in p.get("stateOperators", [])
    )


def continue_totals(frame: Any, seed: Any, spec: workloads.WorkloadSpec) -> Any:
    """``frame`` (a streaming aggregation's output) continued from ``seed`` (the legacy job's last rows).

    For a workload whose state is totals (``spec.carry.how == "totals"``) that do not count its events (those
    are carried in the state store instead, :mod:`modern.seed`): each output row gets the seed
    row of its key added to its :attr:`~kit.workloads.StateCarry.sum_columns`, and ``last_input_ts`` becomes
    the larger of the two. The seed is a static DataFrame joined to the stream (left outer, broadcast), so
    the query's own state store starts empty and its checkpoint stays an ordinary one; keys the modern query
    never sees keep their legacy rows as their final value.

    Raises:
        ConfigError: the workload's state is not totals, or ``seed`` lacks a key or total column.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    carry = spec.carry
    if carry.how != "totals":
        msg = f"{spec.name}: its state cannot be continued from the legacy job's rows ({carry.how}: {carry.note})"
        raise ConfigError(msg, field="initial_state", expected="a workload whose carry is 'totals'", actual=carry.how)
    from modern.seed import check_seed_columns

    check_seed_columns(seed.columns, spec)
    if not seed.take(1):
        return frame  # nothing to continue from (the legacy job completed no batch with records)
    prior = seed.select(
        *spec.key_columns,
        *(F.col(c).alias(f"__seed_{c}") for c in [*carry.sum_columns, "last_input_ts"]),
    )
    joined = frame.join(F.broadcast(prior), list(spec.key_columns), "left_outer")
    continued = {c: (F.col(c) + F.coalesce(F.col(f"__seed_{c}"), F.lit(0))).alias(c) for c in carry.sum_columns}
    continued["last_input_ts"] = F.greatest("last_input_ts", "__seed_last_input_ts").alias("last_input_ts")
    return joined.select(*(continued.get(c, F.col(c)) for c in frame.columns))


def _process_all_available(name: str, query: Any, timeout_s: float) -> None:
    """``query.processAllAvailable()`` within ``timeout_s``.

    Spark's own call has no timeout, so it runs in a thread that stopping the query ends (it then raises there,
    which is ignored).
    """
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            query.processAllAvailable()
        except BaseException as err:  # noqa: BLE001 - any failure is surfaced below unless the wait timed out
            errors.append(err)

    waiter = threading.Thread(target=wait, name=f"dmk-process-all-{name}", daemon=True)
    waiter.start()
    waiter.join(max(timeout_s, 0.0))
    if waiter.is_alive():
        msg = (f"modern query {name} reached the end offsets but did not finish its last batches (the no-data "
               f"batch applying the last watermark) within the run's timeout; check the driver log")
        raise RunTimeout(msg, reached=None, expected="processAllAvailable")
    if errors:
        raise errors[0]


_CONNECT_BACK = "Python worker failed to connect back"
_CONNECT_START_ATTEMPTS = 3


def _start_over_connect(writer: Any) -> Any:
    """``writer.start()`` on a Spark Connect server, tried again when its ``foreachBatch`` process was too slow.

    Over Connect the server starts a Python process of its own for each ``foreachBatch`` query as the query
    starts, and gives it Spark's fixed 10 s to connect back; on a busy machine the imports alone can take longer
    (``SparkException: Python worker failed to connect back``, raised by ``start()`` before the query exists).
    """
    for attempt in range(1, _CONNECT_START_ATTEMPTS + 1):
        try:
            return writer.start()
        except Exception as err:
            if _CONNECT_BACK not in str(err) or attempt == _CONNECT_START_ATTEMPTS:
                raise
    raise AssertionError  # unreachable: the last attempt returns or raises


INITIALIZE_TIMEOUT_S = 300.0
"""Bound on how long :meth:`ModernRun.start` waits for its queries to initialize their sources."""
_POLL_S = 0.2
"""How often that wait polls the queries' status (seconds)."""


def _initializing(query: Any) -> bool:
    """Whether ``query`` has yet to create its sources and ask them for offsets the first time.

    From its ``status`` message, which the stream thread sets as it goes (``StreamExecution.runStream``,
    ``MicroBatchExecution``): "Initializing StreamExecution", "Initializing sources", then "Getting offsets from
    <source>" while a trigger asks the sources, then what the trigger found ("Waiting for data to arrive",
    "Processing new data"...). A query that has reported progress, or stopped, is past it.
    """
    if not query.isActive or query.lastProgress is not None:
        return False
    message = str(query.status.get("message", ""))
    return message.startswith(("Initializing", "Getting offsets"))


def _await_initialized(queries: Mapping[str, Any], timeout_s: float) -> None:
    """Wait until every query's stream thread has created its sources and asked them for offsets once.

    ``DataStreamWriter.start`` returns once the stream thread runs, before it has analysed the plan and created the
    sources (for the kit's Python Kafka source: a Python process that resolves the starting offsets), and records
    produced meanwhile wait for it: in ``dmk compare`` that wait became the start-up backlog
    (benchmarks/results/changes.md §18). A started run is ready for input.

    Raises:
        StreamingQueryException: a query failed while initializing (Spark's exception).
        RunTimeout: still initializing after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    pending = dict(queries)
    while pending:
        for name, query in list(pending.items()):
            if not query.isActive:
                error = query.exception()
                if error is not None:
                    raise error
            if not _initializing(query):
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            msg = (
                f"modern queries {sorted(pending)} were still initializing their sources after {timeout_s:.0f} s "
                f"({ {n: q.status.get('message') for n, q in pending.items()} }); check the driver log and that Kafka "
                "answers"
            )
            raise RunTimeout(msg, reached={}, expected={})
        # Not faster: each poll is a few py4j calls into the driver, which is starting Python processes that
        # Spark gives a fixed 10 s to connect back (changes.md §16).
        time.sleep(_POLL_S)


def _committed(checkpoint: Path) -> bool:
    """Whether the query checkpointed at ``checkpoint`` has committed a batch."""
    commits = checkpoint / "commits"
    return commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())


class _SeedCheckThread(threading.Thread):
    """Once a seeded query commits batch 0: :func:`modern.seed.check_seeded_state`, its report, the refusal.

    The report is ``<out_dir>/<job>.seed_check.json``. If a key differs, the query is stopped and :attr:`error`
    set; :meth:`ModernRun.await_offsets` raises it.
    """

    def __init__(self, run: ModernRun, job: str, spec: workloads.WorkloadSpec,
                 starting: Mapping[str, Mapping[int, int]]) -> None:
        super().__init__(name=f"dmk-seed-check-{job}", daemon=True)
        self.run_, self.job, self.spec, self.starting = run, job, spec, starting
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from modern.seed import check_seeded_state, first_batch_ranges

        config = self.run_.config
        checkpoint = Path(config.checkpoint_dir) / self.job
        try:
            progress = None
            while progress is None and not self.stopped.is_set():
                query = self.run_.queries.get(self.job)
                if query is not None and (checkpoint / "commits" / "0").exists():
                    progress = next((p for p in query.recentProgress if p.get("batchId") == 0), None)
                if progress is None:
                    self.stopped.wait(_POLL_S)
            if progress is None:
                return
            ranges = first_batch_ranges(progress, self.starting, _Beginnings(config.bootstrap_servers))
            check = check_seeded_state(self.run_.spark, checkpoint, config.initial_state[self.job], self.spec, ranges,
                                       config.bootstrap_servers, job=self.job,
                                       gap_ms=getattr(config.dataset, "session_gap_ms", None))
            (Path(config.out_dir) / f"{self.job}.seed_check.json").write_text(check.to_json(), encoding="utf-8")
            if not check.ok:
                msg = (
                    f"{self.job}: the seeded state differs from the seed plus the first batch at {check.different} "
                    f"keys (e.g. {check.differences[0]}); the query is stopped. See {self.job}.seed_check.json; "
                    "discard the modern output and checkpoint, and cut over again from the legacy job's outputs"
                )
                self.error = ConfigError(msg, field="initial_state")
                self.run_.queries[self.job].stop()
        except Exception as err:  # noqa: BLE001 - the check could not run: as good as failed, raised by the run
            self.error = err


class _Beginnings(dict):
    """topic → partition → its first offset, asked of Kafka on first use (a ``-2`` starting offset)."""

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__()
        self.bootstrap_servers = bootstrap_servers

    def __missing__(self, topic: str) -> dict[int, int]:
        from kit.kafka import Kafka

        with Kafka(self.bootstrap_servers) as kafka:
            self[topic] = {tp.partition: o for tp, o in kafka.beginning_offsets(topic).items()}
        return self[topic]


class ModernRun:
    """The queries of one :class:`ModernRunConfig`; :meth:`start`, :meth:`await_offsets`, :meth:`stop`."""

    def __init__(self, spark: Any, config: ModernRunConfig) -> None:
        self.spark = spark
        self.config = config
        self.queries: dict[str, Any] = {}
        self._log: _ProgressLog | None = None
        self._poller: _ProgressPoller | None = None
        self._seed_checks: dict[str, _SeedCheckThread] = {}

    def _writer(self, frame: Any, name: str, mode: str) -> Any:
        writer = (
            frame.writeStream.queryName(name)
            .outputMode(mode)
            .foreachBatch(ParquetBatchSink(Path(self.config.out_dir) / name))
            .option("checkpointLocation", str(Path(self.config.checkpoint_dir) / name))
        )
        return with_trigger(writer, self.config.trigger)

    def start(self) -> ModernRun:
        """Build and start every job's query; return once each has created its sources (:func:`_await_initialized`).

        Raises:
            ConfigError: unknown workload or variant, a job needing an input the config lacks, or a continuous
                trigger (``ContinuousTriggerUnsupported``).
        """
        config = self.config
        from kit.spark import on_this_host, session_master

        # Executors write the dead letters of their parse; with executors on other hosts the output directory
        # is not theirs to write, so a dead-letter query per input (a second read) brings them to the driver.
        in_parse = on_this_host(session_master(self.spark))
        floors: dict[str, dict[int, int]] = {}
        if config.suppress:
            from modern.cutover import dead_letters_from

            for path in config.suppress.values():  # a rewound cutover: the legacy job has the earlier dead letters
                for topic, offsets in dead_letters_from(path).items():
                    floors.setdefault(topic, {}).update(offsets)
        source = Source(self.spark, config.bootstrap_servers, config.topics, config.dataset, config.source_options,
                        dead_letter_root=config.out_dir if in_parse else None,
                        max_offsets_by_input=config.max_offsets_by_input, dead_letters_from=floors)
        writers: dict[str, Any] = {}
        for workload, variant in config.jobs:
            job = resolve(workload, variant)
            job.spec.check_inputs(config.topics)
            seed = None
            if job.name in config.initial_state:
                seed = self.spark.read.parquet(str(config.initial_state[job.name]))
            if seed is not None and job.spec.carry.seeded:  # carried in the state store, checked (modern.seed)
                from modern.seed import seeded_query, starting_offsets

                frame = seeded_query(seed, source, job.spec)
                if not _committed(Path(config.checkpoint_dir) / job.name):  # a restart has no batch 0 to check
                    # refused here, before the query starts
                    starting = starting_offsets(config.source_options.get("startingOffsets"))
                    self._seed_checks[job.name] = _SeedCheckThread(self, job.name, job.spec, starting)
                writers[job.name] = self._writer(frame, job.name, job.spec.output_mode)
                continue
            frame = job.build(self.spark, source)
            if job.name in config.suppress:  # before the projection: a join's filter reads its pairs' input offsets
                from modern.cutover import suppress_emitted

                frame = suppress_emitted(self.spark, frame, config.suppress[job.name], job.spec)
            frame = frame.select(*job.spec.columns)
            if seed is not None:
                frame = continue_totals(frame, seed, job.spec)
            writers[job.name] = self._writer(frame, job.name, job.spec.output_mode)
        if not in_parse:
            for name in list(source.used):
                query = layout.dead_letters(config.out_dir, name).name
                writers[query] = self._writer(source.dead_letters(name), query, "append")
        for option in ("initial_state", "suppress"):
            unknown = sorted(set(getattr(config, option)) - set(writers))
            if unknown:
                msg = f"{option} names {unknown}, which are not jobs of this run; the jobs are {sorted(writers)}"
                raise ConfigError(msg, field=option, expected=sorted(writers), actual=unknown)
        from kit.spark import is_connect

        self._log = _ProgressLog(Path(config.out_dir), set(writers),
                                 None if is_connect(self.spark) else self.spark)
        if not is_connect(self.spark):
            self.spark.streams.addListener(self._log.listener)
        try:
            for name, writer in writers.items():
                self.queries[name] = _start_over_connect(writer) if is_connect(self.spark) else writer.start()
        except BaseException:
            # The queries that started, and the listener (over Connect, a client thread that keeps the process
            # alive), go with the failed start.
            self.stop()
            raise
        if is_connect(self.spark):
            self._poller = _ProgressPoller(self._log)
            self._poller.start(self.queries)
        try:
            _await_initialized(self.queries, INITIALIZE_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        for check in self._seed_checks.values():
            check.start()
        return self

    def _seed_check_failed(self) -> None:
        """Raise the first failed seed check's error (:mod:`modern.seed`)."""
        for check in self._seed_checks.values():
            if check.error is not None:
                raise check.error

    def _reached(self, query: Any) -> dict[str, dict[int, int]]:
        progress = query.lastProgress
        reached: dict[str, dict[int, int]] = {}
        for source in (progress or {}).get("sources", []):
            if source.get("endOffset"):
                for tp, offset in offsets_from_json(source["endOffset"]).items():
                    reached.setdefault(tp.topic, {})[tp.partition] = offset
        return reached

    def await_offsets(
        self, end_offsets: Mapping[str, Mapping[int, int]], *, timeout_s: float, extra_batches: int = 2
    ) -> None:
        """Wait until every query has processed its topics up to ``end_offsets``, then until it is idle.

        Idle is ``processAllAvailable``: the no-data batch that applies the last watermark has run too. That
        batch is what the legacy runner's ``extra_batches`` stand for, so the argument is accepted and not needed.

        Raises:
            StreamingQueryException: a query failed (Spark's exception, with its message).
            RunTimeout: not reached in time; says where each query was. Or a seeded query's check not done.
            ConfigError: a seeded query's state store does not hold its seed (:mod:`modern.seed`).
        """
        deadline = time.monotonic() + timeout_s
        pending = dict(self.queries)
        while pending:
            self._seed_check_failed()
            for name, query in list(pending.items()):
                error = query.exception()
                if error is not None:
                    raise error
                reached = self._reached(query)
                topics = {t for t in reached} or set()
                wanted = {t: e for t, e in end_offsets.items() if t in topics}
                if wanted and all(reached[t].get(p, -1) >= end for t, e in wanted.items() for p, end in e.items()):
                    _process_all_available(name, query, deadline - time.monotonic())
                    del pending[name]
            if pending and time.monotonic() > deadline:
                msg = (
                    f"modern queries {sorted(pending)} did not reach the end offsets {dict(end_offsets)} within "
                    f"{timeout_s:.0f} s; they reached {({n: self._reached(q) for n, q in pending.items()})}. "
                    "Check the driver log; raise the timeout for larger datasets."
                )
                raise RunTimeout(
                    msg,
                    reached={n: self._reached(q) for n, q in pending.items()},
                    expected={t: dict(e) for t, e in end_offsets.items()},
                )
            if pending:
                time.sleep(0.2)
        for name, check in self._seed_checks.items():  # a run is done when its seed is proven
            check.join(max(deadline - time.monotonic(), 1.0))
            if check.is_alive():
                msg = (f"{name}: the check of its seeded state did not finish within {timeout_s:.0f} s; raise the "
                       "timeout (it reads the first batch's records again)")
                raise RunTimeout(msg, reached={}, expected={})
        self._seed_check_failed()

    def stop(self) -> None:
        """Stop every query and remove the progress listener (over Connect: poll the progress a last time)."""
        for check in self._seed_checks.values():
            check.stopped.set()
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        for query in self.queries.values():
            query.stop()
        if self._log is not None:
            from kit.spark import is_connect

            if not is_connect(self.spark):
                self.spark.streams.removeListener(self._log.listener)
            self._log = None
