"""What the modern dead-letter query costs: maximum throughput of ``running_counts`` with and without it.

Usage::

    python benchmarks/modern_dead_letter_cost.py [--records 200000] [--partitions 8]

The modern runner writes malformed records with a second query that has its own Kafka source, so every
record is read and parsed twice. This runs ``dmk bench``'s throughput phase (compare.bench) on one
pre-loaded topic twice: as the kit runs it, then with the dead-letter query left out (a measurement only:
the kit never runs a job without its dead letters).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import modern.workloads  # noqa: E402
from compare import bench  # noqa: E402
from kit.broker import EmbeddedBroker  # noqa: E402
from kit.spark import spark_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as work:
        spark = spark_session("dmk-dead-letter-cost")
        try:
            settings = bench.BenchSettings(records=args.records, partitions=args.partitions,
                                           bootstrap_servers=broker.bootstrap_servers)
            run = bench._Bench(settings, spark, broker.bootstrap_servers, Path(work), lambda *_: None)
            print(json.dumps(run.raw()))
            print(json.dumps({"dead_letter_query": True, **run.max_throughput("modern", "running_counts")}))
            # ModernRun starts a dead-letter query per input the Source reports as used: report none.
            modern.workloads.Source.used = property(lambda self: [], lambda self, value: None)
            print(json.dumps({"dead_letter_query": False, **run.max_throughput("modern", "running_counts")}))
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
