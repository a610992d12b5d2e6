"""``dmk compare``: replay one dataset through a legacy and a modern driver process, diff, measure, report.

One compare run:

1. the dataset (generated from a :class:`~kit.dataset.DatasetSpec`, or a file from ``dmk gen``);
2. per engine (one after the other by default, so timings are fair; ``concurrent=True`` runs both at once):
   fresh topics, a driver process (``python -m compare.driver``) started and waited for, a paced live replay
   (or a burst before start), optional faults (SIGKILL and restart of the driver, SIGSTOP/SIGCONT of the
   embedded broker), then a drain: the driver processes everything up to the replay's end offsets, writes
   ``done.json`` and exits (:mod:`compare.supervise`);
3. the oracle, a three-way diff (legacy / modern / oracle), latency per output row (``emitted_at`` minus the
   Kafka timestamp of the newest input behind the row, i.e. its produce time) and throughput
   (:mod:`compare.measure`);
4. the run directory: ``metrics.json``, ``report.md``, ``report.html`` (:mod:`compare.report`), the diff as
   CSV and Parquet, each engine's outputs and driver logs.

The settings are :class:`compare.settings.CompareSettings`; each engine is reached through
:class:`kit.engine.Engine` (:mod:`compare.engines`), so this module never asks which engine it runs.

Example::

    settings = CompareSettings("running_counts", out_dir=Path("runs/rc"), dataset=DatasetSpec.from_profile("messy"))
    result = run_compare(settings)
    result.metrics.equivalent
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import pandas as pd

from compare.diff import (
    Check,
    OutputDiff,
    ThreeWayDiff,
    records_differ,
    three_way,
    updates_out_of_order,
    verdict,
)
from compare.engines import ENGINES, get_engine
from compare.errors import EngineFailed
from compare.inputs import route_inputs
from compare.measure import (
    after_startup,
    backlog,
    batch_breakdown,
    input_coverage,
    keeping_up,
    latency,
    percentiles,
    time_breakdown,
    timeline,
)
from compare.metrics import (
    CompareMetrics,
    EngineMetrics,
    KeptUpFigures,
    OracleCounts,
    Percentiles,
    RunSettings,
)
from compare.settings import CompareSettings, default_rate
from compare.supervise import EngineOutcome, Progress, run_engine_process
from kit import layout, workloads
from kit.broker import kafka_or_embedded
from kit.dataset import (
    DatasetSpec,
    check_labels,
    generate,
    read_dataset,
    read_manifest,
    write_dataset,
)
from kit.engine import redacted_dsn
from kit.errors import ConfigError
from kit.kafka import java_client_settings, using_process_settings
from kit.nexmark import NexmarkSpec, nexmark_to_file, spec_from_dict
from kit.security import redact_settings
from kit.spark import SHORT_RUN_CONF

__all__ = ["ENGINES", "CompareResult", "CompareSettings", "EngineFailed", "run_compare", "validate"]


@dataclass
class CompareResult:
    """A finished compare run: its metrics (as in ``metrics.json``) and the diff."""

    out_dir: Path
    metrics: CompareMetrics
    diff: ThreeWayDiff

    @property
    def equivalent(self) -> bool:
        """The verdict is EQUIVALENT: every check of every engine passed, and the oracle has rows."""
        return self.metrics.equivalent

    @property
    def verdict(self) -> str:
        """``EQUIVALENT``, ``DIFFERENT`` or ``NOTHING COMPARED`` (:func:`compare.diff.verdict`)."""
        return self.metrics.verdict


def _dataset(settings: CompareSettings, out: Path) -> tuple[DatasetSpec | NexmarkSpec, pd.DataFrame, str]:
    workload = workloads.get(settings.workload)
    if settings.dataset_file:
        path = Path(settings.dataset_file)
        frame = read_dataset(path)
        if workload.parse == "nexmark":
            read = spec_from_dict(read_manifest(path)["spec"])
            if not isinstance(read, NexmarkSpec):
                msg = (f"workload {workload.name!r} reads a Nexmark stream, and {path} holds the kit's events; give a "
                       "file of dmk gen --nexmark")
                raise ConfigError(msg, field="dataset", expected="a Nexmark dataset", actual=str(path))
            return read, frame, str(path)
        events = DatasetSpec.from_dict(read_manifest(path)["spec"])  # refuses a Nexmark dataset, saying so
        check_labels(frame["kind"], frame["value"], str(path))  # both parsers still read it as it was labelled
        return events, frame, str(path)
    from compare.inputs import dataset_spec as default_spec

    spec = settings.dataset or default_spec("messy")
    path = out / layout.DATASET
    if workload.parse == "nexmark":  # a Nexmark stream of the options' size, rate and messiness
        nexmark = spec if isinstance(spec, NexmarkSpec) else NexmarkSpec.like(spec)
        nexmark_to_file(nexmark, path)
        return nexmark, read_dataset(path), str(path)
    if isinstance(spec, NexmarkSpec):
        msg = f"workload {workload.name!r} reads the kit's events, not a Nexmark stream: give it a DatasetSpec"
        raise ConfigError(msg, field="dataset", expected="a DatasetSpec", actual=type(spec).__name__)
    frame = generate(spec)
    write_dataset(frame, path, spec)
    return spec, frame, str(path)


def _oracle(
    settings: CompareSettings, spec: workloads.WorkloadSpec, frame: pd.DataFrame, dataset: DatasetSpec | NexmarkSpec,
) -> workloads.OracleResult:
    if not settings.oracle:
        return spec.oracle(frame, dataset)
    fn = workloads.load_ref(settings.oracle, "oracle")
    result = fn(frame, dataset)  # type: ignore[operator]
    if isinstance(result, pd.DataFrame):  # rows only: dead letters and late drops as the spec's oracle says
        base = spec.oracle(frame, dataset)
        return workloads.OracleResult(workloads.sorted_rows(spec, result), base.dead_letters, base.late_dropped)
    return cast(workloads.OracleResult, result)


def _ref(function: Callable[..., Any]) -> str:
    return f"{function.__module__}:{function.__qualname__}"


def _measure(
    settings: CompareSettings,
    spec: workloads.WorkloadSpec,
    outcomes: dict[str, EngineOutcome],
    oracle: workloads.OracleResult,
    jobs: dict[str, workloads.Job],
    dataset_path: str,
    frame: pd.DataFrame,
    trajectory: pd.DataFrame | None = None,
) -> tuple[CompareMetrics, ThreeWayDiff, dict[str, pd.DataFrame]]:
    run_records = {name: get_engine(name).record(o.out_dir, o.checkpoint_dir) for name, o in outcomes.items()}
    rows = {name: run_records[name].outputs(jobs[name].name) for name in outcomes}
    finals = {engine: workloads.final_result(spec, r) for engine, r in rows.items()}
    legacy, modern = (finals[name] for name in ENGINES)
    diff = three_way(legacy, modern, oracle.rows, spec.key_columns, spec.value_columns)
    latencies = {engine: latency(r) for engine, r in rows.items()}
    engines: dict[str, EngineMetrics] = {}
    checks: list[Check] = []
    series: dict[str, pd.DataFrame] = {}
    for name, outcome in outcomes.items():
        engine, job = get_engine(name), jobs[name].name
        against = diff.against_oracle(name)
        lost, duplicated = against.lost_and_duplicated()
        first_produced = int(outcome.replay.log["produced_ms"].min())
        span_s = max((outcome.done_ms - first_produced) / 1000, 1e-3)
        record = run_records[name]
        ranges = record.processed_ranges(job)
        never, repeated = input_coverage(ranges, outcome.replay.topic_end_offsets)
        spans = record.batch_spans(job)
        produced = outcome.replay.log["produced_ms"].to_numpy()
        kept = (keeping_up(name, spans, produced, outcome.interval_s, by_clock=engine.batches_by_clock)
                if settings.rate_rps else None)
        steady = after_startup(rows[name], first_produced, kept)
        batches = batch_breakdown(record, outcome.out_dir, job)
        series[f"backlog_{name}"] = backlog(spans, produced)
        series[f"batches_{name}"] = batches
        series[f"timeline_{name}"] = timeline(spans)
        dead = record.dead_letters()
        checks += _checks(settings, name, against, oracle, dead, record.late_records(job), outcome, never, repeated)
        if trajectory is not None:  # --mode all, update mode: every emitted row, in order per key
            emitted = rows[name].sort_values("batch", kind="stable") if len(rows[name]) else rows[name]
            unknown, backwards = (updates_out_of_order(trajectory, emitted, spec.key_columns, spec.value_columns)
                                  if len(emitted) else (0, 0))
            checks.append(Check(
                "every update", name, not (unknown or backwards),
                f"{unknown:,} rows with a value the key never had, {backwards:,} out of order, of {len(emitted):,}"
                if unknown or backwards else f"each of {len(emitted):,} emitted rows a value its key had, in order"))
        engines[name] = EngineMetrics(
            **against.counts(),
            dead_letters=len(dead),
            late_dropped=record.late_dropped(job),
            throughput_rps=round(len(outcome.replay.log) / span_s, 1),
            latency_ms=Percentiles(**percentiles(latencies[name])),
            latency_after_startup_ms=Percentiles(**percentiles(steady)),
            output_rows=len(rows[name]),
            restarts=outcome.restarts,
            kills_at_s=tuple(outcome.kills),
            broker_paused_at_s=tuple(outcome.pauses),
            faults_after_replay=outcome.faults_after_replay,
            lost_rows=lost,
            duplicated_rows=duplicated,
            input_records_lost=never,
            input_records_repeated=repeated,
            replay_seconds=round(outcome.replay.seconds, 2),
            warmup_seconds=outcome.warmup_s,
            replay_started_ms=first_produced,
            input_records=len(outcome.replay.log),
            kept_up=(KeptUpFigures(**kept.to_dict(),
                                   **_latency_bound(settings, spec, steady, _pace(frame, outcome.replay.seconds)))
                     if kept else None),
            time_breakdown_ms=dict(time_breakdown(batches)),
        )
    outcome_of, warnings = verdict(checks, len(oracle.rows), min_rows=settings.min_rows)
    job_refs: dict[str, Any] = {f"{engine}_job": _ref(job.build) for engine, job in jobs.items()}
    metrics = CompareMetrics(
        workload=spec.name,
        summary=spec.summary,
        records=len(frame),
        dataset=dataset_path,
        # Every part of the result equals the oracle's on both engines (the checks), and there was a result.
        verdict=outcome_of,
        equivalent=outcome_of == "EQUIVALENT",
        checks=tuple(checks),
        warnings=tuple(warnings),
        min_rows=settings.min_rows,
        engines_agree=bool(diff.between.equal),
        # Every requested fault was injected on every engine (else the run did not test what was asked).
        faults_injected=all(
            len(o.kills) == settings.kill_driver and len(o.pauses) == (1 if settings.pause_broker_s else 0)
            for o in outcomes.values()
        ),
        oracle=OracleCounts(
            rows=len(oracle.rows),
            dead_letters=len(oracle.dead_letters),
            late_dropped=len(oracle.late_dropped),
        ),
        engines=engines,
        settings=RunSettings(
            rate_rps=settings.rate_rps,
            partitions=settings.partitions,
            legacy_mode=settings.legacy_mode,
            connect=settings.connect,  # the modern driver's Spark Connect server, if any
            offset_store=redacted_dsn(settings.offset_store) if settings.offset_store else None,
            kafka_security=redact_settings(settings.kafka_security),
            batch_seconds=settings.batch_seconds,
            mode=settings.mode,
            trigger=settings.trigger,
            concurrent=settings.concurrent,
            kill_driver=settings.kill_driver,
            pause_broker_s=settings.pause_broker_s,
            driver_java_options=SHORT_RUN_CONF["spark.driver.extraJavaOptions"],
            oracle=settings.oracle or _ref(spec.oracle),
            **job_refs,
        ),
    )
    series |= {
        f"latency_{engine}": pd.DataFrame({"latency_ms": latencies[engine].to_numpy()}) for engine in outcomes
    }
    return metrics, diff, series


def _checks(
    settings: CompareSettings,
    engine: str,
    against: OutputDiff,
    oracle: workloads.OracleResult,
    dead: pd.DataFrame,
    late: pd.DataFrame | None,
    outcome: EngineOutcome,
    never: int,
    repeated: int,
) -> list[Check]:
    """The parts of one engine's verdict: rows, dead letters, late drops, input (each a line of the report).

    Dead letters are compared as ``(seq, reason)``; late drops record by record (with the window, for windowed
    workloads) where the engine names them (``late``: the legacy event-time jobs'), else (None) not checked, as
    Spark reports only a count of dropped state rows; input lost or repeated only where the mode promises
    exactly-once (not the legacy receiver modes).
    """
    counts = against.counts()
    problems = [f"{counts[k]:,} {k.removeprefix('rows_')}" for k in ("rows_missing", "rows_unexpected",
                                                                     "rows_mismatched") if counts[k]]
    rows = Check("rows", engine, not problems,
                 ", ".join(problems) + f" of {len(oracle.rows):,} rows" if problems
                 else f"equal ({counts['rows_matched']:,} rows)")
    log = outcome.replay.log.set_index(["topic", "partition", "offset"])["seq"]

    def seqs(located: pd.DataFrame) -> list[int]:
        keys = list(zip(located["topic"], located["partition"].astype(int), located["offset"].astype(int),
                        strict=True))
        return log.loc[keys].tolist() if keys else []

    got_dead = pd.DataFrame({"seq": seqs(dead), "reason": dead["reason"].tolist()})
    missing, extra = records_differ(oracle.dead_letters, got_dead, ["seq", "reason"])
    letters = Check("dead letters", engine, not (missing or extra),
                    f"{missing:,} not dead-lettered, {extra:,} dead-lettered wrongly (record and reason) of "
                    f"{len(oracle.dead_letters):,}" if missing or extra
                    else f"equal ({len(got_dead):,} records, each with its reason)")
    if late is not None:
        expected = oracle.late_dropped
        got = pd.DataFrame({"seq": seqs(late) if len(late) else []})
        for column in expected.columns.drop("seq"):
            got[column] = late["detail"].tolist() if len(late) else []
        missing, extra = records_differ(expected, got, list(expected.columns))
        drops = Check("late drops", engine, not (missing or extra),
                      f"{missing:,} not dropped, {extra:,} dropped wrongly of {len(expected):,}" if missing or extra
                      else f"equal ({len(got):,} records)")
    else:
        drops = Check("late drops", engine, None, "the engine reports a count only, not which records "
                      "(Spark's numRowsDroppedByWatermark)" if len(oracle.late_dropped) else "none expected")
    if outcome.exactly_once:
        inputs = Check("input", engine, not (never or repeated),
                       f"{never:,} records never processed, {repeated:,} processed again" if never or repeated
                       else "every record processed once")
    else:
        inputs = Check("input", engine, None, f"--legacy-mode {settings.legacy_mode} promises at most once "
                       f"({never:,} never processed, {repeated:,} processed again)")
    return [rows, letters, drops, inputs]


def _latency_bound(
    settings: CompareSettings, spec: workloads.WorkloadSpec, latencies: pd.Series, pace: float,
) -> dict[str, Any]:
    """The latency a run that keeps up should stay within: p99 <= the batches' wait + the semantics' wait.

    A row waits at most for its batch to be cut and processed: two batch intervals. An event-time result also
    waits for the watermark: by the watermark delay; and a window's or session's row (a workload with a
    :attr:`~kit.workloads.WorkloadSpec.horizon`) until the watermark passes its window's end or its session's gap,
    up to the window or gap plus the delay of event time after its newest input. The replay covers event time at
    ``pace`` wall seconds a second of it (:func:`_pace`), so that is ``horizon × pace`` of wall time, and one batch
    more: both engines apply a watermark from the batch after the one whose records moved it (Spark's rule; the
    DStream emulation keeps it), so the row comes out of that next batch. No engine can emit such a row sooner.
    The same bound for both engines: the run's batch interval. Judged on the latencies after the start-up
    (``after_startup``): the backlog of a cold start is reported on its own, as the time until the engine caught
    up. An engine that caught up only after the replay ended (or never) has no row after its start-up, and is over
    the bound.
    """
    batches, wait = 2, float(spec.watermark_delay_ms or 0)
    # Typed for the kit's events; a Nexmark workload's horizon takes its NexmarkSpec.
    horizon = cast(Callable[[Any], tuple[int, str]] | None, spec.horizon)
    if horizon is not None and isinstance(settings.dataset, DatasetSpec | NexmarkSpec):
        batches, wait = 3, horizon(settings.dataset)[0] * pace
    bound = round(batches * settings.batch_seconds * 1000 + wait)
    p99 = percentiles(latencies)["p99"]
    return {"latency_bound_ms": bound, "p99_within_bound": p99 is not None and bool(p99 <= bound)}


def _pace(frame: pd.DataFrame, replay_seconds: float) -> float:
    """Wall seconds the replay took per second of the dataset's event time (its records' timestamps)."""
    event_seconds = (frame["timestamp_ms"].max() - frame["timestamp_ms"].min()) / 1000 if len(frame) else 0
    return replay_seconds / event_seconds if event_seconds > 0 else 0.0


def _write_diff(out: Path, diff: ThreeWayDiff) -> None:
    target = out / "diff"
    target.mkdir(exist_ok=True)
    sides = (("legacy_vs_oracle", diff.legacy), ("modern_vs_oracle", diff.modern), ("modern_vs_legacy", diff.between))
    for side, one in sides:
        for kind in ("missing", "unexpected", "mismatched"):
            frame: pd.DataFrame = getattr(one, kind)
            frame.to_csv(target / f"{side}.{kind}.csv", index=False)
            frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(
                target / f"{side}.{kind}.parquet", index=False
            )
    for name, frame in (("legacy", diff.legacy_rows), ("modern", diff.modern_rows), ("oracle", diff.oracle_rows)):
        frame.to_csv(target / f"final.{name}.csv", index=False)


def validate(settings: CompareSettings) -> tuple[workloads.WorkloadSpec, dict[str, workloads.Job]]:
    """Check what can be checked before anything starts; returns the spec and each engine's resolved job.

    Checked: the run directory, the workload, the job and oracle references, the dataset file, and that a
    ``--connect`` server answers (whether it can run the kit, its modern driver checks as it starts).

    Raises:
        ConfigError, DatasetError: as :func:`run_compare`.
        ConnectError: nothing answers at the ``--connect`` URL, or this Python lacks the Connect client.
    """
    out = settings.out_dir
    if out.exists() and any(out.iterdir()):
        msg = f"run directory {out} is not empty; give a new --out, or remove it"
        raise ConfigError(msg)
    spec = workloads.get(settings.workload)
    if settings.mode == "all" and spec.output_mode == "update" and spec.trajectory is None:
        msg = (f"--mode all holds every emitted row to the values each key passes through; workload {spec.name!r} has "
               "no trajectory in its spec (WorkloadSpec.trajectory): add one, or use --mode final")
        raise ConfigError(msg, field="mode", expected="a spec with a trajectory", actual=spec.name)
    resolved = {name: get_engine(name).resolve(settings.workload, settings.variant(name)) for name in ENGINES}
    if settings.oracle:
        workloads.load_ref(settings.oracle, "oracle")
    if settings.dataset_file:
        read_dataset(settings.dataset_file)
        read_manifest(settings.dataset_file)
    if settings.connect:
        from kit.connect import check_reachable

        check_reachable(settings.connect)
    return spec, resolved


def run_compare(
    settings: CompareSettings, progress: Progress | None = None, *, on_broker_start: Callable[[], None] | None = None
) -> CompareResult:
    """Run a compare as ``settings`` says and write its run directory (see the module docstring).

    ``progress`` is called with (task, done, total) as the replays and engines go on; ``on_broker_start``
    just before an embedded broker starts (no ``bootstrap_servers`` given).

    Raises:
        ConfigError: bad settings, unknown workload, a job or oracle reference that cannot be imported, or a
            run directory that is not empty.
        DatasetError: an unreadable dataset file.
        BrokerUnavailable: no Kafka at ``bootstrap_servers``.
        EngineFailed: a driver failed (its error and log).
        RunTimeout: a driver did not start or drain in time.
    """
    report = progress or (lambda task, done, total: None)
    out = settings.out_dir
    spec, resolved = validate(settings)
    out.mkdir(parents=True, exist_ok=True)
    dataset, frame, dataset_path = _dataset(settings, out)
    rate = None if settings.burst else settings.rate_rps or default_rate(dataset, settings.batch_seconds)
    settings = replace(settings, dataset=dataset, rate_rps=rate)
    routed = route_inputs([spec], frame)
    run_id = uuid.uuid4().hex[:8]
    outcomes: dict[str, EngineOutcome] = {}
    log = out / layout.BROKER_LOG
    with using_process_settings(java_client_settings(settings.kafka_security, where="kafka_security")), \
            kafka_or_embedded(settings.bootstrap_servers, port=settings.broker_port, log_path=log,
                              on_start=on_broker_start) as kafka:
        def one(name: str) -> None:
            jobs = [[settings.workload, settings.variant(name)]]
            outcomes[name] = run_engine_process(
                get_engine(name), settings, routed, dataset, jobs, kafka, run_id, report, dataset_records=len(frame)
            )

        if settings.concurrent:
            errors: list[BaseException] = []

            def guarded(name: str) -> None:
                try:
                    one(name)
                except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread after the join
                    errors.append(err)

            threads = [threading.Thread(target=guarded, args=(e,), name=f"dmk-{e}") for e in ENGINES]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
        else:
            for name in ENGINES:
                one(name)
    oracle = _oracle(settings, spec, frame, dataset)
    trajectory = (spec.trajectory(frame, dataset) if settings.mode == "all" and spec.output_mode == "update"
                  and spec.trajectory is not None else None)
    metrics, diff, series = _measure(settings, spec, outcomes, oracle, resolved, dataset_path, frame, trajectory)
    _write_diff(out, diff)
    data = out / "data"
    data.mkdir(exist_ok=True)
    for name, table in series.items():
        table.to_parquet(data / f"{name}.parquet", index=False)
    metrics.write(out)
    from compare.report import render

    render(out)
    return CompareResult(out, metrics, diff)
