"""One engine's maximum throughput on one workload, with the kit's performance settings switched one at a time.

The measurement of ``dmk bench``'s throughput phase (a pre-loaded topic, batches capped to a tenth of it, the
output checked against the oracle), for before/after tables of single changes:

    python benchmarks/engine_throughput.py --engine modern --records 200000
    python benchmarks/engine_throughput.py --engine modern --kafka-client kafka-python   # the reference client
    python benchmarks/engine_throughput.py --engine modern --max-partitions 0          # a task per Kafka partition
    python benchmarks/engine_throughput.py --engine modern --state-store hdfs          # Spark's default store
    python benchmarks/engine_throughput.py --engine legacy --conf spark.python.unix.domain.socket.enabled=false
    python benchmarks/engine_throughput.py --engine modern --warmup-runs 0 --repeat 4  # JIT warm-up, run by run

To measure an older commit, run this file from that checkout's directory with it on the path
(``cd /path/to/checkout && PYTHONPATH=$PWD python /path/to/this/engine_throughput.py ...``): Spark's Python
workers import the kit from the JVM's working directory (the worker daemon runs as ``python -m``), so
``PYTHONPATH`` alone changes only the driver's code (profile.md §8). Switches that code does not know are
ignored there, and the output says which took effect. Prints one JSON line per measured run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("legacy", "modern"), default="modern")
    parser.add_argument("--workload", default="running_counts")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--kafka-client", choices=("auto", "confluent", "kafka-python"), default="auto")
    parser.add_argument("--max-partitions", type=int, help="modern: the Source's maxPartitions (0: none, a task per range)")
    parser.add_argument("--state-store", choices=("rocksdb", "hdfs"), help="modern: the state store provider")
    parser.add_argument("--warmup-runs", type=int, help="unmeasured runs before the first measured one (default: 1)")
    parser.add_argument("--repeat", type=int, default=1, help="measured runs in the same JVM (each printed)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    args = parser.parse_args()
    os.environ["DMK_KAFKA_CLIENT"] = args.kafka_client  # before anything opens a Kafka handle or a Python worker

    import compare.bench.run as bench
    from kit.broker import EmbeddedBroker
    from kit.spark import spark_session

    applied = {"kafka_client": args.kafka_client}
    conf = {}
    if args.state_store:
        conf["spark.sql.streaming.stateStore.providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state."
            + ("RocksDBStateStoreProvider" if args.state_store == "rocksdb" else "HDFSBackedStateStoreProvider")
        )
        applied["state_store"] = args.state_store
    for setting in args.conf:
        key, _, value = setting.partition("=")
        conf[key] = value
        applied[key] = value
    if args.max_partitions is not None:
        import modern.workloads as modern_workloads

        original = modern_workloads.Source.__init__

        def with_max_partitions(self, *a, **kw):  # a measurement switch
            original(self, *a, **kw)
            # Options given to the Source come after its own maxPartitions; a very large one groups nothing.
            self.options["maxPartitions"] = args.max_partitions or 1_000_000

        modern_workloads.Source.__init__ = with_max_partitions
        applied["max_partitions"] = args.max_partitions
    # Older code has no warmup_runs setting: it runs with its own default (before WARMUP_RUNS, the first run).
    extra = {}
    if "warmup_runs" in {f.name for f in dataclasses.fields(bench.BenchSettings)}:
        warmup_runs = args.warmup_runs if args.warmup_runs is not None else bench.WARMUP_RUNS
        extra["warmup_runs"] = applied["warmup_runs"] = warmup_runs
    settings = bench.BenchSettings(records=args.records, partitions=args.partitions, quick=True, **extra)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="dmk-throughput-") as workdir:
        spark = spark_session("dmk-engine-throughput", conf=conf)
        try:
            run = bench._Bench(settings, spark, broker.bootstrap_servers, Path(workdir), lambda *_: None)
            raw = run.raw()
            results = []
            for _ in range(args.repeat):
                results.append(run.max_throughput(args.engine, args.workload))
                if extra:  # each repeat is warmed by the runs before it
                    run.settings = dataclasses.replace(run.settings, warmup_runs=0)
        finally:
            spark.stop()
    for result in results:
        print(json.dumps({"engine": args.engine, "workload": args.workload, "records": args.records,
                          "partitions": args.partitions, "code": bench.__file__, "switches": applied,
                          "raw_consumer_rps": raw["raw_consumer_rps"], **result}))


if __name__ == "__main__":
    main()
