"""The figures behind docs/playbook.md's "semantic traps": one live run of every job on both engines.

Usage::

    python benchmarks/workload_evidence.py [--profile messy] [--out benchmarks/results/workload-evidence.md]

Replays the equivalence tests' dataset (compare.inputs.TEST_DATASET) into an embedded broker while each
engine runs each workload's variants (one run per engine and workload, as tests/test_workloads.py does), then
prints, per job: whether it equals the oracle, its final rows, late-dropped
records (legacy: the records it reported; modern: Spark's numRowsDroppedByWatermark) and the latency of its
output rows (emitted_at − last_input_ts) at p50/p95/max. Writes the same table as Markdown to ``--out``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.harness import REPLAY_RATE_RPS, TEST_DATASET, dataset_spec, run_engine
from kit import workloads
from kit.broker import EmbeddedBroker
from kit.dataset import generate
from kit.spark import spark_session
from compare.engines import ENGINES, get_engine


def _jobs(engine: str, name: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, v.name) for v in workloads.get(name).variants(engine))


def _equal(got: pd.DataFrame, expected: pd.DataFrame) -> bool:
    try:
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    except AssertionError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="messy", choices=["clean", "messy"])
    parser.add_argument("--out", default="benchmarks/results/workload-evidence.md")
    args = parser.parse_args()

    spec = dataset_spec(args.profile)
    frame = generate(spec)
    oracles = {name: workloads.get(name).oracle(frame, spec) for name in workloads.NAMES}
    spark = spark_session("dmk-evidence")
    lines = [
        f"# Workload evidence ({args.profile} profile)",
        "",
        f"Command: `python benchmarks/workload_evidence.py --profile {args.profile}`; dataset {TEST_DATASET}, "
        f"replayed at {REPLAY_RATE_RPS} records/s into 4 partitions; legacy 1 s batches, modern micro-batches of "
        f"at most 800 records; {platform.node()}, {platform.processor() or platform.machine()}.",
        "",
        "| job | engine | equals oracle | final rows (oracle) | late dropped (oracle) | latency p50 / p95 / max ms | run s |",
        "|---|---|---|---|---|---|---|",
    ]
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        for engine, workload in ((e, w) for w in workloads.NAMES for e in ENGINES):
            started = time.monotonic()
            run = run_engine(
                engine, _jobs(engine, workload), spec, frame,
                bootstrap_servers=broker.bootstrap_servers, spark=spark, workdir=Path(tmp) / f"{engine}-{workload}",
            )
            seconds = time.monotonic() - started
            for name, variant in run.jobs:
                wspec, oracle = workloads.get(name), oracles[name]
                rows = run.rows(name, variant)
                final = workloads.final_result(wspec, rows)
                equal = _equal(final, oracle.rows)
                dropped = get_engine(engine).record(run.out_dir).late_dropped(workloads.job_id(name, variant))
                latency = (rows["emitted_at"] - rows["last_input_ts"]).to_numpy() if len(rows) else np.array([0])
                p50, p95 = np.percentile(latency, [50, 95])
                job = name if variant == "default" else f"{name}.{variant}"
                lines.append(
                    f"| {job} | {engine} | {'yes' if equal else 'NO'} | {len(final)} ({len(oracle.rows)}) | "
                    f"{dropped} ({len(oracle.late_dropped)}) | {p50:.0f} / {p95:.0f} / {latency.max():.0f} | {seconds:.0f} |"
                )
                print(lines[-1], flush=True)
    spark.stop()
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
