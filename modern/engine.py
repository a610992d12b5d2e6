"""The Structured Streaming engine: :class:`kit.engine.Engine` over :mod:`modern.runner`.

A run is one named streaming query per job; every progress a query reports is logged to
``<out>/progress/<query>.jsonl``, which :meth:`ModernEngine.batch_spans`, :meth:`ModernEngine.batch_phases` and
the measurements read.

Example::

    run = MODERN.start(spark, config)          # config: a kit.engine.DriverConfig
    run.await_offsets(ends, timeout_s=120)
    run.stop()
    MODERN.batch_spans(config.out_dir, "running_counts")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from kit import layout
from kit.engine import (
    BATCH_PHASE_COLUMNS,
    BATCH_SPAN_COLUMNS,
    DriverConfig,
    seconds,
    written_lines,
)
from kit.ranges import OffsetRange
from kit.workloads import Job
from modern import workloads
from modern.runner import ModernRun, ModernRunConfig, late_dropped, read_progress

__all__ = ["MODERN", "ModernEngine"]

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property StreamExecution sets on every job of a query: the query's id."""
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property MicroBatchExecution sets on every job of a micro-batch: the batch id."""
PHASES = (
    ("latestOffset", "latestOffset (Kafka end offsets)"),
    ("walCommit", "walCommit (offset log)"),
    ("getBatch", "getBatch"),
    ("queryPlanning", "queryPlanning"),
    ("addBatch", "addBatch (read, process, state, sink)"),
    ("commitOffsets", "commitOffsets (commit log)"),
)
"""The progress's ``durationMs`` parts of a micro-batch, in the order they run, and their names in reports."""


def _job_queries(out_dir: str | Path) -> list[str]:
    """The run's job queries with a progress log, by name (the dead-letter queries left out)."""
    return sorted(p.stem for p in layout.progress_logs(out_dir) if layout.dead_letters_input(p.stem) is None)


def _checkpointed_batches(checkpoint: Path) -> dict[int, list[tuple[dict, dict]]]:
    """Batch id → ``[(start, end)]`` per source, of the batches a query's checkpoint holds as committed."""
    from modern.inspect import inspect_modern_checkpoint

    if not (checkpoint / layout.OFFSETS).is_dir():
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


class ModernEngine:
    """Structured Streaming queries over the kit's Kafka source (:mod:`modern.kafka`), one per job."""

    name = "modern"
    batches_by_clock = False

    def resolve(self, workload: Any, variant: Any = "default") -> Job:
        """The job running ``variant`` of ``workload`` as a query (:func:`modern.workloads.resolve`)."""
        return workloads.resolve(workload, variant)

    def exactly_once(self, config: DriverConfig) -> bool:
        """A query's offsets and its idempotent sinks commit with the batch: always exactly-once."""
        return True

    def session(self, config: DriverConfig) -> Any:
        """A SparkSession with the kit's defaults, or with ``config.connect`` one on that Spark Connect server.

        A Connect session runs with the server's master and settings: ``master`` and ``spark_conf`` (the event
        log's, in a compare run) are not applied, since a client cannot set a running server's static settings.

        Raises:
            ConnectError: the Connect server is unreachable or cannot run the kit (:func:`kit.connect.connect_session`).
        """
        if config.connect:
            from kit.connect import connect_session

            return connect_session(config.connect)
        from kit.spark import spark_session

        return spark_session(config.app_name, config.master, config.spark_conf)

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> ModernRun:
        """Start every job's query; each continues from its ``checkpointLocation`` whatever ``recover`` says.

        A query always resumes its checkpoint.
        """
        run_config = ModernRunConfig(
            config.bootstrap_servers, config.topics, config.out_dir, config.checkpoint_dir, config.require_dataset(),
            config.jobs, trigger=config.trigger,
            source_options={**{f"kafka.{k}": v for k, v in config.kafka_security.items()}, **config.source_options},
            initial_state=config.initial_state,
        )
        return ModernRun(spark, run_config).start()

    def paced(self, config: DriverConfig, interval: str) -> DriverConfig:
        """``config`` with processing-time trigger ``interval`` (``"500 milliseconds"``)."""
        return dataclasses.replace(config, trigger=interval)

    def interval_s(self, config: DriverConfig) -> float:
        """The processing-time trigger's interval (0 for ``availableNow``, ``once`` and ``0 seconds``)."""
        return 0.0 if config.trigger in ("availableNow", "once") else seconds(config.trigger)

    def batch_spans(
        self, out_dir: str | Path, job: str | None = None, checkpoint_dir: Path | None = None
    ) -> pd.DataFrame:
        """The micro-batches of ``job``'s query (default: the first job's), from its progress.

        ``batch_ms`` and ``started_ms`` are the trigger's start (``timestamp``); a micro-batch never waits
        behind another, so ``scheduling_ms`` is 0. The idle triggers Spark reported (no new data, so no
        micro-batch; at most one per ``spark.sql.streaming.noDataProgressEventInterval``) are rows without
        records. Progress events reach the listener after the batch commits,
        so a killed driver can lose the last one: with ``checkpoint_dir``, a committed batch the progress lacks
        is taken from the query's offsets and commits logs (its records from the offsets, its start and end
        from the times the two files were written).
        """
        if job is None:
            queries = _job_queries(out_dir)
            job = queries[0] if queries else ""
        rows, reported = [], set()
        for p in read_progress(out_dir, job):
            started = pd.Timestamp(p["timestamp"]).value // 1_000_000
            duration = int(p.get("batchDuration", 0))
            rows.append((started, started, started + duration, int(p.get("numInputRows", 0)), duration, 0))
            reported.add(int(p["batchId"]))
        for p in read_progress(out_dir, job, idle=True):
            started = pd.Timestamp(p["timestamp"]).value // 1_000_000
            duration = int(p.get("batchDuration", 0))
            rows.append((started, started, started + duration, 0, duration, 0))
        if checkpoint_dir is not None:  # a local one (a URI's files are for Spark to read)
            checkpoint = checkpoint_dir / job
            for batch, sources in _checkpointed_batches(checkpoint).items():
                if batch in reported:
                    continue
                records = sum(int(until) - int(start.get(topic, {}).get(partition, 0))
                              for start, end in sources if isinstance(end, dict)  # Kafka: topic -> partitions
                              for topic, parts in end.items() for partition, until in parts.items())
                started = int((checkpoint / layout.OFFSETS / str(batch)).stat().st_mtime * 1000)
                ended = max(int((checkpoint / layout.COMMITS / str(batch)).stat().st_mtime * 1000), started)
                rows.append((started, started, ended, records, ended - started, 0))
        return pd.DataFrame(rows, columns=list(BATCH_SPAN_COLUMNS)).sort_values("started_ms", ignore_index=True)

    def batch_phases(self, out_dir: str | Path, job: str | None = None) -> pd.DataFrame:
        """Per micro-batch of ``job``'s query: its ``durationMs`` parts, then its state's update and commit time.

        The parts are :data:`PHASES`, in the order they run. The state times are summed over the state's
        tasks, which run in parallel: task time, not wall time.
        """
        if job is None:
            queries = _job_queries(out_dir)
            job = queries[0] if queries else ""
        rows = []
        for p in read_progress(out_dir, job):
            durations = p.get("durationMs", {})
            row: dict[str, Any] = {"batch": f"{p['id']}/{p['batchId']}", "records": int(p.get("numInputRows", 0))}
            row |= {label: durations.get(key) for key, label in PHASES}
            state = p.get("stateOperators") or []
            if state:
                row["state updates (task time)"] = sum(
                    s.get("allUpdatesTimeMs", 0) + s.get("allRemovalsTimeMs", 0) for s in state)
                row["state commit (task time)"] = sum(s.get("commitTimeMs", 0) for s in state)
            rows.append(row)
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(BATCH_PHASE_COLUMNS))

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """``<query id>/<batch id>`` from the properties Structured Streaming puts on a micro-batch's jobs."""
        query, batch = properties.get(QUERY_ID_PROPERTY), properties.get(BATCH_ID_PROPERTY)
        return f"{query}/{batch}" if query and batch is not None else None

    def processed_records(self, out_dir: str | Path) -> int:
        """Input rows of the job query that is furthest behind."""
        totals = [
            sum(p.get("numInputRows", 0) for p in written_lines(layout.progress_log(out_dir, name)))
            for name in _job_queries(out_dir)
        ]
        return min(totals) if totals else 0

    def processed_ranges(self, out_dir: str | Path, job: str, checkpoint_dir: Path | None) -> list[OffsetRange]:
        """The ranges of every batch id of ``job``'s query (the last report of a batch: a re-run counts once).

        Progress events reach the listener after the batch commits, so a killed driver can lose the last one;
        the checkpoint's offsets and commits logs have it (but keep only the newest batches): both are used.
        """
        batches = {
            p["batchId"]: [(s.get("startOffset") or {}, s.get("endOffset") or {}) for s in p.get("sources", [])]
            for p in read_progress(out_dir, job)
        }
        if checkpoint_dir is not None:  # a local one (a URI's files are for Spark to read)
            batches.update(_checkpointed_batches(checkpoint_dir / job))
        ranges = []
        for sources in batches.values():
            # A query that reads its topic twice (windowed_counts unions two aggregations, each with its own scan)
            # lists the same range once per scan: one batch reading a record twice is not a record re-processed.
            ranges += [OffsetRange(*r) for r in sorted({
                (topic, int(partition), int(start.get(topic, {}).get(partition, 0)), int(until))
                for start, end in sources for topic, parts in end.items() for partition, until in parts.items()
            })]
        return ranges

    def late_dropped(self, out_dir: str | Path, job: str) -> int:
        """Spark's ``numRowsDroppedByWatermark`` of the job's query (:func:`modern.runner.late_dropped`)."""
        return late_dropped(out_dir, job)


MODERN = ModernEngine()
"""The Structured Streaming engine."""
