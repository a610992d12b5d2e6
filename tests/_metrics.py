"""Hand-made ``metrics.json`` documents for the report and contract tests (built from :mod:`compare.metrics`).

A test changes what it needs with :func:`dataclasses.replace`; everything else is a plausible run.
"""

from __future__ import annotations

from compare.diff import Check
from compare.metrics import CompareMetrics, EngineMetrics, KeptUpFigures, OracleCounts, Percentiles, RunSettings


def kept_up(batch_ms: float = 400.0) -> KeptUpFigures:
    """An engine that kept up with a 1,000 records/s replay."""
    return KeptUpFigures(kept_up=True, reason="kept up", input_rps=1000.0, capacity_rps=3000.0, batch_ms=batch_ms,
                         interval_ms=1000.0, max_delay_ms=0.0, backlog_at_end=10, backlog_at_end_ms=10.0,
                         caught_up_ms=1400.0, latency_bound_ms=2000.0, p99_within_bound=True)


def engine(**changes: object) -> EngineMetrics:
    """One engine's figures: 2 rows matched, 3 dead letters, 950 records/s, p99 1,875 ms; ``changes`` replace."""
    latencies = Percentiles(p50=800.0, p95=1400.0, p99=1875.0, max=2100.0)
    figures = dict(rows_missing=0, rows_unexpected=0, rows_mismatched=0, rows_matched=2, dead_letters=3,
                   late_dropped=0, throughput_rps=950.0, latency_ms=latencies, latency_after_startup_ms=latencies,
                   output_rows=9, restarts=0, kills_at_s=(), broker_paused_at_s=(), faults_after_replay=0,
                   lost_rows=0, duplicated_rows=0, input_records_lost=0, input_records_repeated=0,
                   replay_seconds=10.0, warmup_seconds=None, replay_started_ms=1_000, input_records=10,
                   kept_up=None, time_breakdown_ms={})
    return EngineMetrics(**{**figures, **changes})  # type: ignore[arg-type]


def settings(**changes: object) -> RunSettings:
    """A burst replay on 4 partitions, no faults; ``changes`` replace."""
    values = dict(rate_rps=None, partitions=4, legacy_mode="direct", connect=None, offset_store=None,
                  kafka_security={}, batch_seconds=1.0, mode="final", trigger=None, concurrent=False, kill_driver=0,
                  pause_broker_s=0.0, driver_java_options="", legacy_job="legacy.workloads.running_counts:build",
                  modern_job="modern.workloads.running_counts:build", oracle="kit.workloads.running_counts:oracle")
    return RunSettings(**{**values, **changes})  # type: ignore[arg-type]


def compare_metrics(legacy: EngineMetrics | None = None, modern: EngineMetrics | None = None,
                    **changes: object) -> CompareMetrics:
    """A running_counts run of 10 records whose verdict follows its engines' rows; ``changes`` replace."""
    engines = {"legacy": legacy or engine(), "modern": modern or engine()}
    equal = all(not (e.rows_missing or e.rows_unexpected or e.rows_mismatched) for e in engines.values())
    checks = tuple(Check("rows", name, not (e.rows_missing or e.rows_unexpected or e.rows_mismatched),
                         "equal" if equal else "differs") for name, e in engines.items())
    values = dict(workload="running_counts", summary="", records=10, dataset="d.parquet",
                  verdict="EQUIVALENT" if equal else "DIFFERENT", equivalent=equal, checks=checks, warnings=(),
                  min_rows=1, engines_agree=equal, faults_injected=True,
                  oracle=OracleCounts(rows=2, dead_letters=3, late_dropped=0), engines=engines, settings=settings())
    return CompareMetrics(**{**values, **changes})  # type: ignore[arg-type]
