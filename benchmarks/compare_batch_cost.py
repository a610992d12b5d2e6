"""A batch's cost on each engine, with each part of the compare path switched on or off.

Usage::

    python benchmarks/compare_batch_cost.py --engine modern [--workload running_counts] [--profile messy]
        [--event-log] [--records 20000] [--partitions 4] [--per-batch 800] [--conf KEY=VALUE ...]

Pre-loads ``--records`` records of the dataset profile (``clean``: the bench's; ``messy``: ``dmk compare``'s,
1 % malformed records that the parse writes to the dead-letter output) into a topic per input on the embedded
broker (``join``: the views to ``impressions``, the clicks to ``clicks``), then runs ``--workload`` over it
through the engine's own entry point (``Engine.start``, as the driver of ``dmk compare`` and the bench both do)
with the batch cap of ``--per-batch`` records (``maxOffsetsPerTrigger``;
legacy: ``maxRatePerPartition`` for 1 s batches), optionally with the event log ``dmk compare`` writes
(``--event-log``, whose jobs, stages and tasks it then breaks down: ``stages_median``, :func:`stage_breakdown`).
Prints one JSON line: the median processing time of the batches with records after the first
three (start-up), their median records, (modern) the median of each ``durationMs`` phase, and the CPU time
the run's processes (this one, the JVM, its Python workers; not the broker) spent per steady batch: on a
machine other work is loading, a batch's wall time stretches with the load, its CPU time much less. The output
is checked against the oracle.

Run it alternately with a part on and off (A/B, several times) to see what the part costs a batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.bench import matches_oracle, produce, round_robin_ends
from compare.engines import get_engine
from compare.inputs import route_inputs
from compare.supervise import event_log_conf
from kit import workloads
from kit.broker import EmbeddedBroker
from kit.dataset import DatasetSpec, generate
from kit.engine import DriverConfig
from kit.kafka import Kafka
from kit.layout import EVENT_LOG
from kit.sink import read_batches

STARTUP_BATCHES = 3
_TICK = os.sysconf("SC_CLK_TCK")


def stage_breakdown(event_log: Path, skip_jobs: int) -> dict[str, dict[str, float]]:
    """Medians over the event log's jobs after the first ``skip_jobs``, per stage name and for the jobs themselves.

    Per stage (its place among the job's completed stages and its last RDD's name): ``stage_ms`` (submission to
    completion), ``tasks``, and per task ``run_ms`` (executor run time: the Python worker's work for a Python RDD),
    ``deserialize_ms`` and ``launch_to_run_ms`` (from the task's launch to its run: scheduling, serialization, the
    worker's hand-off).
    ``job``: ``job_ms`` (start to end) and ``before_first_stage_ms`` (job start to its first stage's submission:
    the DAG scheduler's planning of the job).
    """
    jobs: dict[int, dict[str, float]] = {}
    stage_job: dict[int, int] = {}
    stages: dict[int, dict[str, float | str]] = {}
    tasks: dict[int, list[dict[str, float]]] = {}
    # Spark 4's rolling event log: a directory per application, its events in events_<n>_<app> files (beside
    # them an appstatus file and Hadoop's .crc checksums).
    for file in sorted(f for f in event_log.rglob("events_*") if f.is_file()):
        for line in filter(None, file.read_text(encoding="utf-8").splitlines()):
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                jobs[event["Job ID"]] = {"start": event["Submission Time"]}
                for stage_id in event["Stage IDs"]:
                    stage_job[stage_id] = event["Job ID"]
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
                jobs[event["Job ID"]]["end"] = event["Completion Time"]
            elif kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                rdds = sorted(info.get("RDD Info", []), key=lambda rdd: rdd["RDD ID"])
                stages[info["Stage ID"]] = {
                    "name": rdds[-1]["Name"] if rdds else info["Stage Name"], "submitted": info["Submission Time"],
                    "completed": info["Completion Time"], "tasks": info["Number of Tasks"],
                }
            elif kind == "SparkListenerTaskEnd":
                info, metrics = event["Task Info"], event.get("Task Metrics") or {}
                tasks.setdefault(event["Stage ID"], []).append({
                    "run_ms": metrics.get("Executor Run Time", 0),
                    "deserialize_ms": metrics.get("Executor Deserialize Time", 0),
                    "launch_to_run_ms": max(0, info["Finish Time"] - info["Launch Time"]
                                            - metrics.get("Executor Run Time", 0)),
                })
    kept = sorted(jobs)[skip_jobs:]
    per_name: dict[str, dict[str, list[float]]] = {}
    first_stage: dict[int, float] = {}
    position: dict[int, int] = {}
    for stage_id in sorted(stages):  # a job's completed stages in order: "stage 0", "stage 1", ... of the job
        job = stage_job.get(stage_id)
        if job not in kept:
            continue
        stage = stages[stage_id]
        position[job] = position.get(job, -1) + 1
        first_stage[job] = min(first_stage.get(job, float("inf")), float(stage["submitted"]))
        figures = per_name.setdefault(f"stage {position[job]}: {stage['name']}", {})
        figures.setdefault("stage_ms", []).append(float(stage["completed"]) - float(stage["submitted"]))
        figures.setdefault("tasks", []).append(float(stage["tasks"]))
        for task in tasks.get(stage_id, []):
            for key, value in task.items():
                figures.setdefault(key, []).append(float(value))
    result = {name: {key: statistics.median(values) for key, values in figures.items()}
              for name, figures in per_name.items()}
    spans = [jobs[j]["end"] - jobs[j]["start"] for j in kept if "end" in jobs[j]]
    planning = [first_stage[j] - jobs[j]["start"] for j in kept if j in first_stage]
    result["job"] = {"jobs": float(len(spans)), "job_ms": statistics.median(spans) if spans else 0.0,
                     "before_first_stage_ms": statistics.median(planning) if planning else 0.0}
    return result


def _tree_cpu_s(root: int, skip: set[int]) -> float:
    """CPU seconds of ``root`` and its descendants (live ones, and the dead ones their parents reaped).

    A process in ``skip`` is left out with its descendants.
    """
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = sum(int(f) for f in fields[11:15]) / _TICK  # utime, stime, cutime, cstime
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        if pid in skip:
            continue
        total += times.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


class _CpuSampler:
    """The process tree's CPU seconds (less the sampler's own), sampled every ``period_s`` with the wall clock (ms)."""

    def __init__(self, skip: set[int], period_s: float = 1.0) -> None:
        self.skip, self.period_s = skip, period_s
        self.samples: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        # Less this thread's own CPU: reading /proc for every process of the machine is not the engine's work.
        while not self._stop.is_set():
            self.samples.append((time.time_ns() // 1_000_000,
                                 _tree_cpu_s(os.getpid(), self.skip) - time.thread_time()))
            self._stop.wait(self.period_s)

    def __enter__(self) -> _CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start_ms: int, end_ms: int) -> float:
        """CPU seconds spent between the samples nearest ``start_ms`` and ``end_ms``."""
        def at(when: int) -> float:
            return min(self.samples, key=lambda s: abs(s[0] - when))[1]
        return at(end_ms) - at(start_ms)


def main() -> None:
    """Run the engine over the pre-loaded topic and print the JSON line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("legacy", "modern"), required=True)
    parser.add_argument("--workload", choices=workloads.NAMES, default="running_counts")
    parser.add_argument("--profile", choices=("clean", "messy"), default="clean")
    parser.add_argument("--event-log", action="store_true")
    parser.add_argument("--keep-event-log", metavar="DIR", help="with --event-log: copy the event log to DIR")
    parser.add_argument("--skip-jobs", type=int, default=10,
                        help="with --event-log: Spark jobs left out of the stage breakdown at the start (warm-up)")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-batch", type=int, default=800)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    args = parser.parse_args()
    dataset = DatasetSpec.from_profile(args.profile, records=args.records, seed=11, events_per_second=500,
                                       lateness_margin_ms=4_000, users=300, partitions=args.partitions,
                                       too_late_fraction=0.0)
    frame = generate(dataset)
    spec = workloads.get(args.workload)
    routed = route_inputs([spec], frame)
    engine = get_engine(args.engine)
    job = workloads.job_id(args.workload)
    ends: dict[str, dict[int, int]] = {}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="dmk-compare-batch-cost-") as work:
        topics = {name: f"batch-cost-{name}" for name in spec.inputs}
        with Kafka(broker.bootstrap_servers) as kafka:
            for topic in topics.values():
                kafka.create_topic(topic, args.partitions)
        for name, topic in topics.items():
            values = routed.loc[routed["topic"] == name, "value"].tolist()
            produce(broker.bootstrap_servers, topic, values, args.partitions)
            ends.update(round_robin_ends(topic, len(values), args.partitions))
        out = Path(work) / "out"
        conf = dict(c.split("=", 1) for c in args.conf)
        if args.event_log:
            conf.update(event_log_conf(out))
        config = DriverConfig(
            engine=args.engine, bootstrap_servers=broker.bootstrap_servers, topics=topics,
            out_dir=str(out), checkpoint_dir=f"{work}/checkpoint", dataset=dataset,
            jobs=((args.workload, "default"),), timeout_s=1_800, partitions=args.partitions, spark_conf=conf,
        )
        config = engine.capped(config, args.per_batch)  # legacy: per_batch // partitions records/s, 1 s batches
        spark = engine.session(config)
        try:
            started = time.monotonic()
            with _CpuSampler(skip={broker.pid} if getattr(broker, "pid", None) else set()) as cpu:
                run = engine.start(spark, config, recover=True)
                try:
                    # A workload without a watermark closes nothing later, so no batch after the end offsets: a
                    # legacy run that fell behind would otherwise wait out its queue of empty batches.
                    run.await_offsets(ends, timeout_s=1_800,
                                      extra_batches=0 if spec.watermark_delay_ms is None else 2)
                finally:
                    run.stop()
            seconds = time.monotonic() - started
            spans = engine.record(out).batch_spans(job)
            busy = spans[spans["records"] > 0].iloc[STARTUP_BATCHES:]
            phases = engine.record(out).batch_phases(job)
            result = {
                "engine": args.engine, "workload": args.workload, "profile": args.profile,
                "event_log": args.event_log, "conf": args.conf,
                "batches": int(len(busy)), "records_median": float(busy["records"].median()),
                "batch_ms_median": float(busy["processing_ms"].median()), "run_s": round(seconds, 1),
                "cpu_ms_per_batch": round(1000 * cpu.between(int(busy["started_ms"].iloc[0]),
                                                             int(busy["ended_ms"].iloc[-1])) / max(len(busy), 1)),
                "load_average": os.getloadavg()[0],
                "matches_oracle": matches_oracle(spec, read_batches(out / job), frame,
                                                  dataset),
            }
            if not phases.empty:
                numeric = phases.select_dtypes("number").iloc[STARTUP_BATCHES:]
                result["phases_ms_median"] = {c: float(statistics.median(numeric[c].dropna()))
                                              for c in numeric.columns if numeric[c].notna().any()}
            if args.event_log:
                result["stages_median"] = stage_breakdown(out / EVENT_LOG, skip_jobs=args.skip_jobs)
                if args.keep_event_log:
                    shutil.copytree(out / EVENT_LOG, args.keep_event_log, dirs_exist_ok=True)
            print(json.dumps(result))
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
