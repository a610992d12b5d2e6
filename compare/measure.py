"""What a run measured, from what its engines wrote.

The figures: latency and its percentiles, batch timelines, input coverage, rows lost and duplicated; whether
an engine kept up with its input and where each batch's time went (the engine's phases, and the Spark jobs
and tasks of each batch from Spark's event log). Engine-neutral: the engine's own reading of its logs comes
from :class:`kit.engine.RunRecord`.

Example:
    >>> import pandas as pd
    >>> percentiles(latency(pd.DataFrame({"emitted_at": [110, 250], "last_input_ts": [100, 200]})))["max"]
    50.0
    >>> input_coverage([OffsetRange("t", 0, 0, 5), OffsetRange("t", 0, 3, 8)], {"t": {0: 10}})
    (2, 2)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit import workloads
from kit.engine import RunRecord
from kit.layout import EVENT_LOG
from kit.ranges import OffsetRange

__all__ = [
    "EVENT_LOG",
    "KeptUp",
    "after_startup",
    "backlog",
    "batch_breakdown",
    "input_coverage",
    "keeping_up",
    "latency",
    "percentiles",
    "spark_jobs",
    "time_breakdown",
    "timeline",
]


def latency(rows: pd.DataFrame) -> pd.Series:
    """Per output row: ``emitted_at`` minus the Kafka timestamp of the newest input behind it (ms)."""
    if rows.empty:
        return pd.Series(dtype="int64")
    return (rows["emitted_at"] - rows[workloads.LAST_INPUT_TS]).astype("int64")


def after_startup(rows: pd.DataFrame, replay_started_ms: int, kept: KeptUp | None) -> pd.Series:
    """The latencies of the rows whose newest input came after the engine caught up (``KeptUp.caught_up_ms``).

    Every row's when the replay was not paced (``kept`` None: no start-up to leave out), none when the engine
    never caught up.
    """
    if kept is None:
        return latency(rows)
    if kept.caught_up_ms is None or rows.empty:
        return pd.Series(dtype="int64")
    return latency(rows[rows[workloads.LAST_INPUT_TS] >= replay_started_ms + kept.caught_up_ms])


def percentiles(values: pd.Series) -> dict[str, float | None]:
    """``p50``, ``p95``, ``p99`` and ``max`` of ``values`` (all None when there are none)."""
    if values.empty:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    array = values.to_numpy()
    return {
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def timeline(spans: pd.DataFrame) -> pd.DataFrame:
    """One row per batch of an engine's :meth:`~kit.engine.RunRecord.batch_spans`, for the report's plots.

    Columns: ``completed_ms, records, duration_ms, scheduling_delay_ms``.
    """
    return pd.DataFrame({
        "completed_ms": spans["ended_ms"].astype("int64"),
        "records": spans["records"].astype("int64"),
        "duration_ms": spans["processing_ms"].astype("int64"),
        "scheduling_delay_ms": spans["scheduling_ms"].astype("int64"),
    })


def input_coverage(ranges: list[OffsetRange], end_offsets: dict[str, dict[int, int]]) -> tuple[int, int]:
    """``(never processed, processed more than once)`` input records, from the ranges batches processed.

    Example:
        >>> input_coverage([OffsetRange("t", 0, 0, 5), OffsetRange("t", 0, 3, 8), OffsetRange("t", 1, 2, 4)],
        ...                {"t": {0: 10, 1: 4}})
        (4, 2)
    """
    lost = repeated = 0
    for topic, parts in end_offsets.items():
        for partition, end in parts.items():
            marks = np.zeros(end + 1, dtype="int64")
            for r in ranges:
                if r.topic == topic and r.partition == partition and r.until_offset > r.from_offset:
                    marks[min(r.from_offset, end)] += 1
                    marks[min(r.until_offset, end)] -= 1
            times = np.cumsum(marks)[:end]
            lost += int((times == 0).sum())
            repeated += int(np.clip(times - 1, 0, None).sum())
    return lost, repeated


# -- did the engine keep up ----------------------------------------------------------------------------------

KEPT_UP_BATCHES = 3
"""An engine kept up if, when the replay ended, at most this many batches' worth of input waited: the batch
being collected, the one in flight and one for scheduling jitter. A batch cut by the clock lasts its interval;
a micro-batch lasts its trigger interval or, when longer, its median processing time."""


@dataclass(frozen=True)
class KeptUp:
    """Whether an engine kept up with a paced replay, and the figures that say why.

    Attributes:
        kept_up: at most :data:`KEPT_UP_BATCHES` batches of input waited when the replay ended.
        reason: the verdict in one sentence, with its figures.
        input_rps: the replay's rate (records/s).
        capacity_rps: records of the batches with records over their processing time: what the engine
            processed per second of work.
        batch_ms: median processing time of a batch with records.
        interval_ms: the batch interval or trigger (0: the next batch starts when one ends).
        max_delay_ms: the longest scheduling delay (batches cut by the clock), else the most input waiting,
            in ms of input at the replay's rate.
        backlog_at_end: input records produced but not yet processed when the replay ended.
        backlog_at_end_ms: the same in time at the replay's rate.
        caught_up_ms: the start-up: ms from the replay's first record to the end of the first batch with
            records after which at most :data:`KEPT_UP_BATCHES` batches of input waited (a cold JVM, Python
            workers and query plans make the first batches slow, and input piles up meanwhile). None if that
            never happened.
    """

    kept_up: bool
    reason: str
    input_rps: float
    capacity_rps: float
    batch_ms: float
    interval_ms: float
    max_delay_ms: float
    backlog_at_end: int
    backlog_at_end_ms: float
    caught_up_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        """The figures for ``metrics.json``."""
        return asdict(self)


def backlog(spans: pd.DataFrame, produced_ms: np.ndarray) -> pd.DataFrame:
    """Input waiting over time: at each batch's end, records produced so far minus records processed so far.

    Columns ``at_ms, records``. A batch re-run after a driver restart counts again, so the backlog is never
    overstated (at worst understated after a restart).

    Example:
        >>> spans = pd.DataFrame({"ended_ms": [1000, 2000], "records": [5, 10]})
        >>> backlog(spans, np.arange(0, 2500, 100)).to_dict("list")
        {'at_ms': [1000, 2000], 'records': [6, 6]}
    """
    ordered = spans.sort_values("ended_ms")
    produced = np.searchsorted(np.sort(produced_ms), ordered["ended_ms"].to_numpy(), side="right")
    waiting = np.clip(produced - ordered["records"].cumsum().to_numpy(), 0, None)
    return pd.DataFrame({"at_ms": ordered["ended_ms"].to_numpy(), "records": waiting.astype("int64")})


def keeping_up(
    engine: str, spans: pd.DataFrame, produced_ms: np.ndarray, interval_s: float, *, by_clock: bool,
) -> KeptUp | None:
    """Did ``engine`` keep up with the replay whose records were produced at ``produced_ms``?

    ``spans``: its batches (:data:`kit.engine.BATCH_SPAN_COLUMNS`); ``interval_s``: its batch interval or
    trigger (0: back to back); ``by_clock``: batches are cut by the clock and queue (a DStream), so the
    scheduling delay says how far behind it is. None when the replay was not paced (all input was there before
    the engine started: nothing to keep up with) or no batch processed records.

    Example:
        >>> spans = pd.DataFrame({"ended_ms": [1000, 2000, 3000], "records": [900, 1000, 1000],
        ...                       "processing_ms": [300, 300, 300], "scheduling_ms": [0, 0, 0]})
        >>> keeping_up("legacy", spans, np.linspace(0, 2999, 3000), 1.0, by_clock=True).kept_up
        True
    """
    busy = spans[spans["records"] > 0]
    if len(produced_ms) < 2 or busy.empty:
        return None
    first, last = float(np.min(produced_ms)), float(np.max(produced_ms))
    input_rps = len(produced_ms) / max((last - first) / 1000, 1e-3)
    capacity = float(busy["records"].sum()) / max(float(busy["processing_ms"].sum()) / 1000, 1e-3)
    batch_ms = float(busy["processing_ms"].median())
    waiting = backlog(spans, produced_ms)
    at_end = max(len(produced_ms) - int(spans.loc[spans["ended_ms"] <= last, "records"].sum()), 0)
    at_end_ms = at_end / input_rps * 1000
    # Batches cut by the clock fall behind as soon as they take longer than the interval; back-to-back ones
    # (or a trigger shorter than a batch) last as long as they take.
    batch_length_ms = interval_s * 1000 if by_clock and interval_s else max(interval_s * 1000, batch_ms)
    allowance_ms = KEPT_UP_BATCHES * batch_length_ms
    kept = at_end_ms <= allowance_ms
    ended_busy = waiting[(spans.sort_values("ended_ms")["records"] > 0).to_numpy()]  # backlog()'s order
    settled = ended_busy[ended_busy["records"] <= allowance_ms / 1000 * input_rps]
    caught_up_ms = max(float(settled["at_ms"].iloc[0]) - first, 0.0) if not settled.empty else None
    batches = "batches" if by_clock else "micro-batches"
    against = f" against a {interval_s:g} s interval" if interval_s else ""
    took = f"{batches} took {batch_ms / 1000:.2f} s (median){against}"
    if by_clock:
        max_delay = float(spans["scheduling_ms"].max())
        delay = f"scheduling delay {'stayed within' if kept else 'grew to'} {max_delay / 1000:.1f} s"
    else:
        max_delay = float(waiting["records"].max()) / input_rps * 1000
        delay = f"input waiting {'stayed within' if kept else 'grew to'} {max_delay / 1000:.1f} s"
    rates = f"processed {capacity:,.0f} records/s of work against {input_rps:,.0f} records/s input"
    ending = f"{at_end:,} records ({at_end_ms / 1000:.1f} s of input) waited when the replay ended"
    verdict = "kept up" if kept else "fell behind"
    reason = f"{engine} {verdict}: {took}; {delay}; {rates}; {ending}."
    return KeptUp(kept, reason, round(input_rps, 1), round(capacity, 1), batch_ms, interval_s * 1000,
                  round(max_delay, 1), at_end, round(at_end_ms, 1),
                  None if caught_up_ms is None else round(caught_up_ms, 1))


# -- where the time goes -------------------------------------------------------------------------------------



def spark_jobs(event_log_dir: Path) -> pd.DataFrame:
    """Every Spark job in the event logs under ``event_log_dir``: its local properties, stages and tasks.

    Columns ``log, job, properties, stages, tasks, task_ms`` (``task_ms``: the executor run time of its tasks).
    A task counts for the job that first submitted its stage (a later job skips a stage it shares). A log cut
    short by a killed driver is read up to its last whole line. Each driver process writes one log: a file, or
    (Spark 4's rolling event log, the default) a directory of ``events_<n>_<app>`` files.
    """
    rows: list[dict[str, Any]] = []
    for app in sorted(Path(event_log_dir).iterdir()):
        jobs: dict[int, dict[str, Any]] = {}
        stage_job: dict[int, int] = {}
        for line in _event_lines(app):
            if '"SparkListenerJobStart"' not in line and '"SparkListenerTaskEnd"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the last line of a log cut short
            if event.get("Event") == "SparkListenerJobStart":
                job = int(event["Job ID"])
                jobs[job] = {"log": app.name, "job": job, "properties": event.get("Properties") or {},
                             "stages": len(event.get("Stage IDs", [])), "tasks": 0, "task_ms": 0}
                for stage in event.get("Stage IDs", []):
                    stage_job.setdefault(int(stage), job)
            elif event.get("Event") == "SparkListenerTaskEnd":
                owner = jobs.get(stage_job.get(int(event.get("Stage ID", -1)), -1))
                if owner is not None:
                    owner["tasks"] += 1
                    owner["task_ms"] += int((event.get("Task Metrics") or {}).get("Executor Run Time", 0))
        rows.extend(jobs.values())
    return pd.DataFrame(rows, columns=["log", "job", "properties", "stages", "tasks", "task_ms"])


def _event_lines(app: Path) -> Iterator[str]:
    """The lines of one application's event log, a file or a rolling log's directory (its files in order)."""
    if app.is_file():
        paths = [app]
    else:
        paths = sorted((p for p in app.glob("events_*") if p.is_file()),
                       key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as log:
            yield from log


def batch_breakdown(record: RunRecord, out_dir: Path, job: str | None = None) -> pd.DataFrame:
    """Per batch of ``job``: the engine's phases and, from Spark's event log, its Spark jobs and tasks.

    ``record`` is the run's (:meth:`kit.engine.Engine.record`), ``out_dir`` where its event log is. The phases are
    :meth:`kit.engine.RunRecord.batch_phases`; the counts are there when the run wrote an event log
    (:func:`compare.supervise.event_log_conf`).
    """
    phases = record.batch_phases(job)
    log_dir = Path(out_dir) / EVENT_LOG
    if phases.empty or not log_dir.is_dir():
        return phases
    jobs = spark_jobs(log_dir)
    jobs["batch"] = [record.batch_of(p) for p in jobs["properties"]]
    per_batch = jobs.dropna(subset=["batch"]).groupby("batch").agg(
        **{"Spark jobs": ("job", "size"), "tasks": ("tasks", "sum")})
    return phases.merge(per_batch, left_on="batch", right_index=True, how="left")


def time_breakdown(batches: pd.DataFrame) -> list[tuple[str, float]]:
    """``(phase, median)`` over the batches with records, in the phases' order: ms, then Spark jobs and tasks."""
    busy = batches[batches["records"] > 0]
    if busy.empty:
        return []
    return [(str(column), float(busy[column].median())) for column in busy.columns
            if column not in ("batch", "records") and busy[column].notna().any()]
