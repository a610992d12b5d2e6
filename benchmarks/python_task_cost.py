"""The fixed cost of a Spark task: trivial jobs of 8 and 64 tasks, in Python workers and in the JVM.

Usage::

    python benchmarks/python_task_cost.py [--master local[2]] [--rounds 3]

Prints the wall time of each job after a warm-up round. Every Python task is a round trip to a Python
worker, so a job's time grows with its task count whatever the data: this is why the legacy side reads a
batch in at most one task per core (docs/playbook.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kit.spark import spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session("dmk-task-cost", args.master)
    sc = spark.sparkContext
    jobs = {
        "python, 8 tasks": lambda: sc.parallelize(range(8), 8).map(lambda x: x).collect(),
        "python, 64 tasks": lambda: sc.parallelize(range(64), 64).map(lambda x: x).collect(),
        "jvm, 8 tasks": lambda: spark.range(0, 8, 1, 8).selectExpr("id + 1").collect(),
        "jvm, 64 tasks": lambda: spark.range(0, 64, 1, 64).selectExpr("id + 1").collect(),
    }
    try:
        for name, job in jobs.items():
            job()  # warm-up: starts the Python workers, compiles the plan
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                job()
                times.append(time.perf_counter() - started)
            print(f"{name}: {', '.join(f'{t:.3f}' for t in times)} s on {sc.master}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
