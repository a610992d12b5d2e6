"""What an idle legacy batch costs: the processing time of a DStream batch without records, and its tasks.

Usage::

    python benchmarks/legacy_idle_batch.py [--workloads running_counts,ysb] [--partitions 8] [--seconds 30]

Runs each workload's legacy job on an empty topic of ``--partitions`` partitions with 2 s batches for
``--seconds`` on the embedded broker and ``local[2]``, and prints the median processing time of the batches
after the first three (start-up), with the Spark stages and tasks they ran (Spark's REST API). This is the
fixed cost every batch pays, records or not: with 1 s batches, a job whose idle batch takes longer than 1 s
falls behind without any input (``dmk bench`` shows it as a growing scheduling delay).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.engines import get_engine
from kit.broker import EmbeddedBroker
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig
from kit.kafka import Kafka
from kit.spark import spark_session


def _get(url: str) -> list[dict]:
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def idle_batches(spark: object, bootstrap: str, workload: str, partitions: int, seconds: float) -> dict:
    """Run ``workload``'s legacy job on an empty topic; the idle batches' processing times and tasks."""
    sc = spark.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    topic = f"idle-{workload}-{time.time_ns()}"
    with Kafka(bootstrap) as kafka:
        kafka.create_topic(topic, partitions)
    before = {s["stageId"] for s in _get(f"{api}/stages")}
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "out"
        legacy = get_engine("legacy")
        config = DriverConfig(engine="legacy", bootstrap_servers=bootstrap, topics={"events": topic}, out_dir=str(out),
                              checkpoint_dir=f"{work}/checkpoint", dataset=DatasetSpec.from_profile("clean", records=1000),
                              jobs=((workload, "default"),), options={"batch_seconds": 2.0})
        run = legacy.start(spark, config)
        time.sleep(seconds)
        run.stop()
        batches = legacy.record(out).batch_spans(workload)
    stages = [s for s in _get(f"{api}/stages") if s["stageId"] not in before and s["status"] == "COMPLETE"]
    steady = batches["processing_ms"].iloc[3:].tolist()
    return {
        "workload": workload,
        "batches": len(batches),
        "idle_batch_ms_median": statistics.median(steady) if steady else None,
        "stages_per_batch": round(len(stages) / max(len(batches), 1), 1),
        "tasks_per_batch": round(sum(s["numTasks"] for s in stages) / max(len(batches), 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="running_counts,ysb")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        spark = spark_session("dmk-idle-batch", ui=True)
        try:
            for workload in args.workloads.split(","):
                print(json.dumps(idle_batches(spark, broker.bootstrap_servers, workload, args.partitions, args.seconds)))
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
