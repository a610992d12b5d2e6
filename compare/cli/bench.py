"""``dmk bench``'s command: its options, and the run of :mod:`compare.bench`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from compare.cli.common import _add_bootstrap, _announce_embedded_broker, _compare_progress, console

if TYPE_CHECKING:
    from compare.bench import BenchSettings
    from compare.cli.common import Commands

__all__ = ["add_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    import shlex

    from compare.bench import WORKLOADS, BenchSettings, readme_table, run_bench, update_readme
    from kit.errors import ConfigError

    if args.from_results:
        if not args.readme:
            msg = "--from-results regenerates a README table: give --readme FILE too"
            raise ConfigError(msg)
        path = Path(args.from_results)
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            msg = f"cannot read the results file {path}: {err}; give a file dmk bench wrote"
            raise ConfigError(msg) from err
        if isinstance(results, dict) and results.get("suite") == "nexmark":
            from compare.bench import nexmark

            nexmark.update_readme(Path(args.readme), results)
            console.print(f"{args.readme}: Nexmark table regenerated from {path}")
            return 0
        update_readme(Path(args.readme), results)
        console.print(f"{args.readme}: performance table regenerated from {path}")
        return 0
    if args.readme and not Path(args.readme).is_file():
        msg = f"--readme {args.readme} is not a file"
        raise ConfigError(msg)
    named = tuple(w for w in (args.workloads or "").split(",") if w)
    nexmark = args.suite == "nexmark"
    settings = BenchSettings(
        out_dir=Path(args.out), records=args.records, partitions=args.partitions, quick=args.quick,
        bootstrap_servers=args.bootstrap_servers, master=args.master, latency_seconds=args.latency_seconds,
        latency_rate=args.latency_rate, state_keys=args.state_keys,
        workloads=named if named and not nexmark else WORKLOADS,
        command=shlex.join(["dmk", *args.argv]), timeout_s=args.timeout,
        baseline=Path(args.baseline) if args.baseline else None, kafka_security=args.kafka_security,
    )
    if nexmark:
        return _bench_nexmark(settings, named, args.readme)
    progress, update = _compare_progress()
    with progress:
        results, path = run_bench(settings, update, on_broker_start=_announce_embedded_broker)
    console.print(readme_table(results), markup=False)
    for target in results["targets"]:
        state = {True: "met", False: f"MISSED (x{target['missed_by_factor']})", None: "not measured"}[target["met"]]
        console.print(f"target: {target['target']}: {target['value']} {target['unit']} (goal {target['goal']}): "
                      f"{state}", markup=False)
    console.print(f"results: {path} (and {path.parent / 'latest.json'}, latest.md)")
    if args.readme:
        update_readme(Path(args.readme), results)
        console.print(f"{args.readme}: performance table regenerated")
    return 0


def _bench_nexmark(settings: BenchSettings, queries: tuple[str, ...], readme: str | None) -> int:
    from compare.bench import nexmark

    bench = nexmark.NexmarkBench(settings, queries)
    progress, update = _compare_progress()
    with progress:
        results, path = nexmark.run_nexmark(bench, update)
    console.print(nexmark.readme_table(results), markup=False)
    console.print(f"results: {path} (and {path.parent / 'nexmark-latest.json'}, nexmark-latest.md)")
    withheld = [name for name, q in results["queries"].items() if not q["published"]]
    if readme and not withheld:
        nexmark.update_readme(Path(readme), results)
        console.print(f"{readme}: Nexmark table regenerated")
    if withheld:
        for name in withheld:
            console.print(f"{name} publishes no figure: {'; '.join(results['queries'][name]['withheld'])}",
                          markup=False)
        console.print(f"{'README untouched; ' if readme else ''}their figures: {path.parent}/nexmark-rejected-*.json")
        return 1
    return 0


def add_bench(commands: Commands) -> None:
    """Add ``dmk bench``'s parser to ``commands``."""
    ben = commands.add_parser(
        "bench",
        help="throughput, latency and state growth of both engines against the raw Kafka client (docs/bench.md)",
    )
    ben.add_argument("--records", type=int,
                     help="records of the pre-loaded topic (default 1,000,000; --quick 200,000)")
    ben.add_argument("--partitions", type=int, default=8, help="partitions of every benchmark topic (default 8)")
    ben.add_argument("--quick", action="store_true", help="the short run: 200k records, 10 s latency runs at each "
                     "engine's default batch interval or trigger")
    ben.add_argument("--latency-seconds", type=float,
                     help="length of each latency run's replay (default 30; --quick 10)")
    ben.add_argument("--latency-rate", type=float, default=5_000.0,
                     help="records/s of every latency run's replay, the same for both engines (default 5,000)")
    ben.add_argument("--state-keys", type=int, help="keys the running_counts state grows to (default --records)")
    ben.add_argument("--suite", choices=("kit", "nexmark"), default="kit",
                     help="kit: the phases below over the kit's workloads (default); nexmark: every Nexmark query's "
                          "throughput and latency on both engines (--records default 500,000, --quick 100,000)")
    ben.add_argument("--workloads",
                     help="comma-separated (default running_counts,ysb; with --suite nexmark: the queries, default "
                          "all of them)")
    ben.add_argument("--out", default=str(Path("benchmarks") / "results"),
                     help="results directory (default benchmarks/results)")
    ben.add_argument("--readme", metavar="FILE", help="regenerate FILE's performance table from the results")
    ben.add_argument("--from-results", metavar="JSON",
                     help="run nothing: regenerate --readme's table from this results file (the Nexmark "
                          "table for a nexmark-*.json)")
    ben.add_argument("--baseline", metavar="FILE",
                     help="a results file of an earlier run (bench-*.json): every figure beside it, with its ratio; "
                          "regressions marked (default: the previous run's latest.json in --out)")
    ben.add_argument("--timeout", type=float, default=1800, help="bound on each wait for an engine, s (default 1800)")
    ben.add_argument("--master", help="Spark master (default $DMK_SPARK_MASTER or local[2])")
    _add_bootstrap(ben)
    ben.set_defaults(func=cmd_bench)
