"""What a small modern micro-batch costs: its phases (Spark's progress ``durationMs``) and its stages and tasks.

Usage::

    python benchmarks/modern_batch_cost.py [--workload running_counts] [--partitions 8] [--records 20000]
        [--per-trigger 1000] [--conf spark.sql.shuffle.partitions=2]

Pre-loads ``--records`` clean records into a topic of ``--partitions`` partitions on the embedded broker, then
runs the workload's modern job over it with ``maxOffsetsPerTrigger=--per-trigger`` on ``local[2]``: a stream of
small micro-batches, as ``dmk compare`` runs them (its messy profile caps a trigger at 800 records). Prints one
JSON line: the median of each ``durationMs`` phase over the micro-batches after the first three (start-up),
and each stage kind's median duration and tasks per micro-batch (Spark's REST API). This is the fixed cost a
micro-batch pays however few records it holds: at 800 records a trigger, a micro-batch of more than 0.8 s
cannot keep up with 1,000 records/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.bench import produce, round_robin_ends
from kit.broker import EmbeddedBroker
from kit.dataset import DatasetSpec, generate
from kit.kafka import Kafka
from kit.spark import spark_session
from modern.runner import ModernRun, ModernRunConfig, read_progress

STARTUP_BATCHES = 3


def _get(url: str) -> list[dict]:
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def _stage_kind(stage: dict) -> str:
    # Spark names a stage after the call site; keep its first words so equal stages of every batch group.
    return " ".join(stage["name"].split()[:2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="running_counts")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--per-trigger", type=int, default=1_000)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    args = parser.parse_args()
    dataset = DatasetSpec.from_profile("clean", records=args.records)
    values = generate(dataset)["value"].tolist()
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="dmk-batch-cost-") as work:
        topic = "batch-cost"
        with Kafka(broker.bootstrap_servers) as kafka:
            kafka.create_topic(topic, args.partitions)
        produce(broker.bootstrap_servers, topic, values, args.partitions)
        spark = spark_session("dmk-modern-batch-cost", conf=dict(c.split("=", 1) for c in args.conf), ui=True)
        sc = spark.sparkContext
        api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
        try:
            config = ModernRunConfig(broker.bootstrap_servers, {"events": topic}, f"{work}/out", f"{work}/checkpoint",
                                     dataset, ((args.workload, "default"),),
                                     source_options={"maxOffsetsPerTrigger": args.per_trigger})
            run = ModernRun(spark, config).start()
            try:
                run.await_offsets(round_robin_ends(topic, len(values), args.partitions), timeout_s=1_800)
            finally:
                run.stop()
            progress = [p for p in read_progress(f"{work}/out", args.workload) if p["numInputRows"] > 0]
            steady = progress[STARTUP_BATCHES:]
            phases = {k: statistics.median(p["durationMs"].get(k, 0) for p in steady)
                      for k in steady[0]["durationMs"]} if steady else {}
            stages = [s for s in _get(f"{api}/stages") if s["status"] == "COMPLETE"]
            by_kind: dict[str, list[dict]] = defaultdict(list)
            for stage in stages:
                by_kind[_stage_kind(stage)].append(stage)
            batches = len(progress)
            print(json.dumps({
                "workload": args.workload, "records_per_trigger": args.per_trigger, "conf": args.conf,
                "micro_batches": batches,
                "duration_ms_median": phases,
                "stages": {kind: {"per_batch": round(len(group) / batches, 2),
                                  "tasks_per_batch": round(sum(s["numTasks"] for s in group) / batches, 2),
                                  "median_ms": statistics.median(
                                      (_ms(s["completionTime"]) - _ms(s["submissionTime"])) for s in group)}
                           for kind, group in sorted(by_kind.items())},
            }, indent=1))
        finally:
            spark.stop()


def _ms(stamp: str) -> float:
    from datetime import datetime

    return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000


if __name__ == "__main__":
    main()
