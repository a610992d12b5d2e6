"""One Nexmark query's throughput runs as ``dmk bench --suite nexmark`` makes them, batch by batch.

Usage::

    python benchmarks/nexmark_spans.py nexmark_q12 [--engines legacy,modern] [--records 100000] [--runs 2]
        [--batches 10]

Produces the suite's clean one-topic stream (``--records`` events over the suite's event seconds, 8 partitions)
on the embedded broker, then runs the query on each engine ``--runs`` times in one JVM, capped to ``--batches``
batches (the suite's 10 by default) at the suite's throughput intervals (``compare.bench.nexmark.run_nexmark``'s
settings). Prints, per run, the throughput :func:`compare.bench.run.throughput` reports, the output rows,
every batch span that processed records or took 100 ms or more, and when the output rows were written (their
``emitted_at``): where a job's work happens, e.g. legacy q12's in the one batch that closes its 10 s window of
processing time, after its last batch with records.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from compare.bench import nexmark as suite
from compare.bench.raw import new_topic, produce, round_robin_ends
from compare.bench.run import THROUGHPUT_BATCHES, THROUGHPUT_INTERVALS, BenchSettings, engine_run, throughput
from kit.broker import kafka_or_embedded
from kit.nexmark import ONE_TOPIC_INPUT, generate_nexmark
from kit.spark import spark_session

PARTITIONS = 8


def main() -> None:
    """Run the query's throughput runs and print their batches."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("query")
    parser.add_argument("--engines", default="legacy,modern")
    parser.add_argument("--records", type=int, default=suite.QUICK_RECORDS)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=THROUGHPUT_BATCHES)
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    with ExitStack() as stack:
        bootstrap = stack.enter_context(kafka_or_embedded(None)).bootstrap_servers
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nexmark-spans-")))
        spark = spark_session("nexmark-spans", "local[2]")
        stack.callback(spark.stop)
        dataset = suite.suite_stream(args.records, max(1, args.records // suite.EVENT_SECONDS), PARTITIONS)
        frame = generate_nexmark(dataset)
        topic = new_topic(bootstrap, f"nexmark-spans-{uuid.uuid4().hex[:6]}", PARTITIONS)
        produce(bootstrap, topic, frame["value"].tolist(), PARTITIONS, lambda *_: None)
        ends = round_robin_ends(topic, len(frame), PARTITIONS)
        cap = -(-len(frame) // args.batches)
        for run_number in range(1, args.runs + 1):
            for engine in args.engines.split(","):
                with engine_run(BenchSettings(quick=True), spark, bootstrap, workdir, engine, args.query,
                                {ONE_TOPIC_INPUT: topic}, dataset, cap=cap,
                                interval=THROUGHPUT_INTERVALS.get(engine)) as run:
                    run.wait(ends, 900)
                spans, rows = run.spans(), run.rows()
                rps, batches = throughput(spans, rows.get("emitted_at"))
                print(f"\n{engine}, run {run_number}: {rps:,.0f} records/s over {batches} measured batches, "
                      f"{len(rows):,} output rows")
                shown = spans[(spans["records"] > 0) | (spans["processing_ms"] >= 100)]
                print(shown.to_string())
                if not rows.empty:
                    written = rows.groupby("emitted_at").size().rename("rows").reset_index()
                    print(written.to_string(index=False))


if __name__ == "__main__":
    main()
