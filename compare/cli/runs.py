"""The commands that make or render a run directory: ``dmk demo``, ``compare``, ``compare-jobs``, ``report``."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from compare.cli.common import (
    _GEN_KNOBS,
    _add_bootstrap,
    _announce_embedded_broker,
    _columns,
    _compare_progress,
    _kafka,
    _progress_task,
    _spec_from_args,
    console,
    err_console,
)
from compare.cli.data import _do_replay
from kit import layout

if TYPE_CHECKING:
    from compare.cli.common import Commands
    from compare.metrics import CompareMetrics, EngineMetrics
    from compare.run import CompareSettings

__all__ = ["add_compare", "add_compare_jobs", "add_demo", "add_report"]


def cmd_demo(args: argparse.Namespace) -> int:
    from compare.run import CompareSettings, run_compare
    from kit import workloads
    from kit.dataset import DatasetSpec, generate_to_file
    from kit.events import parse_event
    from kit.kafka import Kafka
    from kit.replay import ReplaySettings

    # At least 40 s of event time, so that too-late records (late by 17 s and more) fit in any demo size; the
    # margin and user count of the equivalence tests' dataset.
    spec = DatasetSpec.from_profile(
        args.profile, records=args.records, seed=args.seed, partitions=args.partitions,
        events_per_second=min(1000.0, args.records / 40), lateness_margin_ms=4_000, users=300,
    )
    for workload in args.workloads:
        workloads.get(workload)  # an unknown name fails now, not after the replay
    workdir = Path(args.out or tempfile.mkdtemp(prefix="dmk-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "events.parquet"
    console.rule("[bold]dmk demo")
    with err_console.status(f"generating {spec.records:,} {args.profile} records..."):
        manifest = generate_to_file(spec, data)
    console.print(
        f"1. dataset: {data} — {manifest['records']:,} records "
        + ", ".join(f"{k} {v:,}" for k, v in manifest["counts"].items() if v)
    )
    topic = f"dmk-demo-{int(time.time())}"
    with _kafka(args) as bootstrap_servers:
        console.print(f"2. Kafka: {bootstrap_servers}")
        replay_settings = ReplaySettings(topic=topic, partitions=spec.partitions)
        result, frame = _do_replay(str(data), bootstrap_servers, replay_settings, describe="3. replay")
        console.print(
            f"   {result.records:,} records acknowledged in {result.seconds:.2f} s "
            f"({result.rate_rps:,.0f} rec/s); end offsets {dict(sorted(result.end_offsets.items()))}"
        )
        mismatches = 0
        reasons: dict[str, int] = {}
        with Kafka(bootstrap_servers) as kafka, _progress_task("4. read back", result.records) as update:
            done = 0
            for partition, end in sorted(result.end_offsets.items()):
                expected = frame.loc[result.log["partition"].to_numpy() == partition]
                got = list(kafka.read_range(topic, partition, 0, end))
                same = len(got) == len(expected) and all(
                    r.key == k and r.value == v
                    for r, k, v in zip(got, expected["key"], expected["value"], strict=True)
                )
                mismatches += 0 if same else 1
                for record in got:
                    reason = parse_event(record.value)[1] or "valid"
                    reasons[reason] = reasons.get(reason, 0) + 1
                done += len(got)
                update(done)
        verdict = "[green]exact[/green]" if mismatches == 0 else f"[red]{mismatches} partitions differ[/red]"
        console.print(f"   read back {done:,} records; per-partition order and bytes vs the dataset: {verdict}")
        console.print("   parsed: " + ", ".join(f"{k} {v:,}" for k, v in sorted(reasons.items())))
        exact = mismatches == 0
        for step, workload in enumerate(args.workloads, start=5):
            console.print(f"{step}. dmk compare {workload}: legacy and modern driver processes on a live replay")
            compare_settings = CompareSettings(
                workload, out_dir=workdir / f"compare-{workload}", dataset_file=str(data),
                bootstrap_servers=bootstrap_servers, master=args.master, kafka_security=args.kafka_security,
            )
            progress, update = _compare_progress()
            with progress:
                compared = run_compare(compare_settings, update)
            figures = compared.metrics.engines
            verdict = ("[green]legacy = modern = oracle[/green]" if compared.equivalent
                       else f"[red]{compared.verdict}[/red]")
            for warning in compared.metrics.warnings:
                console.print(f"   warning: {warning}", markup=False)
            console.print(
                f"   {verdict}: {compared.metrics.oracle.rows:,} rows, "
                f"{compared.metrics.oracle.dead_letters:,} dead letters; "
                f"{'; '.join(_pace(name, m) for name, m in figures.items())}; "
                f"report {compared.out_dir / 'report.html'}"
            )
            exact = exact and compared.equivalent
    return 0 if exact else 1


def _pace(engine: str, figures: EngineMetrics) -> str:
    """``legacy kept up (start-up 4.2 s), latency p99 after it 1,300 ms``: one engine's pace in a demo line."""
    kept, steady = figures.kept_up, figures.latency_after_startup_ms
    if not kept:
        return f"{engine} latency p99 {figures.latency_ms.p99:,.0f} ms"
    verdict = "kept up" if kept.kept_up else "fell behind"
    if kept.caught_up_ms is None:
        return f"{engine} {verdict}, never caught up"
    if steady.p99 is None:
        return f"{engine} {verdict}, caught up only after the replay ended"
    return (f"{engine} {verdict} (start-up {kept.caught_up_ms / 1000:.1f} s), latency p99 after it "
            f"{steady.p99:,.0f} ms")


def _settings_from_args(args: argparse.Namespace) -> CompareSettings:
    from compare.run import CompareSettings

    out = (
        Path(args.out) if args.out
        else Path("runs") / f"{args.workload.replace(':', '.')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if args.events_per_second is None:  # at least 40 s of event time: every workload's result is non-empty
        from compare.settings import default_events_per_second

        args.events_per_second = default_events_per_second(args.records)
    dataset = None if args.dataset else _spec_from_args(args)
    return CompareSettings(
        workload=args.workload, out_dir=out, dataset=dataset, dataset_file=args.dataset,
        bootstrap_servers=args.bootstrap_servers, rate_rps=args.rate, burst=args.burst,
        partitions=4 if args.partitions is None else args.partitions, legacy=args.legacy, modern=args.modern,
        oracle=args.oracle,
        legacy_mode=args.legacy_mode, offset_store=args.offset_store, batch_seconds=args.batch_seconds,
        trigger=args.trigger,
        concurrent=args.concurrent, kill_driver=args.kill_driver, pause_broker_s=args.pause_broker,
        seed=args.seed, timeout_s=args.timeout, master=args.master, broker_port=args.broker_port,
        checkpoint_dir=args.checkpoint_dir, connect=args.connect, kafka_security=args.kafka_security,
        min_rows=args.min_rows, mode=args.mode,
    )


def _print_summary(run_dir: Path, metrics: CompareMetrics) -> None:
    from compare.metrics import METRICS_FILE
    from compare.report import summary_rows, verdict_lines

    word = metrics.verdict
    verdict = f"[green]{word}[/green]" if metrics.equivalent else f"[red]{word}[/red]"
    table = Table(title=f"{metrics.workload}: {metrics.records:,} records")
    for column in ("figure", "legacy", "modern", "oracle"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in summary_rows(metrics):
        table.add_row(*row)
    console.print(table)
    for line in verdict_lines(metrics):
        console.print(line, markup=False)
    console.print(f"{verdict}  report: {run_dir / layout.REPORT_MD}  {run_dir / layout.REPORT_HTML}  "
                  f"metrics: {run_dir / METRICS_FILE}")


_PARTIAL_RUN_FILES = {layout.DATASET, f"{layout.DATASET}{layout.MANIFEST_SUFFIX}", layout.BROKER_LOG}
"""What a compare that failed before any driver started leaves in its run directory: none of it is evidence."""


def _drop_partial_run(out: Path, *, remove_dir: bool) -> None:
    """Remove a failed compare's run directory if it holds only :data:`_PARTIAL_RUN_FILES`.

    So the same command can run again once the cause is fixed. A directory with a driver's files is kept: the
    error points at its logs.
    """
    try:
        entries = list(out.iterdir())
    except OSError:
        return
    if all(p.is_file() and p.name in _PARTIAL_RUN_FILES for p in entries):
        for path in entries:
            path.unlink(missing_ok=True)
        if remove_dir:
            with contextlib.suppress(OSError):
                out.rmdir()


def cmd_compare(args: argparse.Namespace) -> int:
    from compare.run import run_compare, validate

    settings = _settings_from_args(args)
    validate(settings)
    progress, update = _compare_progress()
    existed = settings.out_dir.exists()
    try:
        with progress:
            result = run_compare(settings, update, on_broker_start=_announce_embedded_broker)
    except BaseException:
        _drop_partial_run(settings.out_dir, remove_dir=not existed)
        raise
    _print_summary(result.out_dir, result.metrics)
    if not result.metrics.faults_injected:
        err_console.print("[red]INCOMPLETE: not every requested fault was injected; see report.md[/red]")
        return 1
    return 0 if result.equivalent else 1


def cmd_compare_jobs(args: argparse.Namespace) -> int:
    from compare.jobs import JobsSettings, compare_jobs

    settings = JobsSettings(
        input_file=args.input, key=_columns(args.key), legacy=args.legacy,
        modern=args.modern, out_dir=Path(args.out or f"runs/jobs-{time.strftime('%Y%m%dT%H%M%S')}"), mode=args.mode,
        output=args.output, partitions=args.partitions, rate_rps=args.rate, speed=args.speed, oracle=args.oracle,
        settle_batches=args.settle_batches, bootstrap_servers=args.bootstrap_servers, timeout_s=args.timeout,
        kafka_security=args.kafka_security, input_kind=args.input_kind, batch_records=args.batch_records,
        legacy_python2=args.legacy_python2, cutover_at=args.cutover_at, cutover_state=args.cutover_state,
        state_columns=_columns(args.state_columns),
    )
    progress, update = _compare_progress()
    with progress:
        result = compare_jobs(settings, update, on_broker_start=_announce_embedded_broker)
    from compare.metrics import METRICS_FILE

    metrics = result.metrics
    jobs = metrics.jobs
    table = Table(title=f"{metrics.input}: {metrics.records:,} records, by {', '.join(settings.key)}")
    for column in ("figure", "legacy", "modern"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for label, key in (("output rows", "output_rows"), ("rows compared", "rows_compared"), ("seconds", "seconds")):
        table.add_row(label, *(f"{getattr(m, key):,}" for m in jobs.values()))
    console.print(table)
    if metrics.cutover is not None:
        from compare.jobs import _cutover_sentence

        console.print(_cutover_sentence(metrics), highlight=False)
    if metrics.summary:
        console.print(metrics.summary, markup=False)
    for warning in metrics.warnings:
        console.print(f"warning: {warning}", markup=False)
    if metrics.legacy_python2:
        console.print(f"note: {metrics.legacy_python2}", markup=False)
    color = "green" if result.equivalent else "red"
    verdict = f"[{color}]{metrics.verdict}[/{color}]"
    console.print(f"{verdict}  report: {result.out_dir / 'report.md'}  metrics: {result.out_dir / METRICS_FILE}")
    return 0 if result.equivalent else 1


def cmd_report(args: argparse.Namespace) -> int:
    from compare.report import load_metrics, render

    run_dir = Path(args.run_dir)
    md, page = render(run_dir, baseline=Path(args.baseline) if args.baseline else None)
    metrics = load_metrics(run_dir)
    _print_summary(run_dir, metrics)
    return 0 if metrics.equivalent else 1


# -- parsers ------------------------------------------------------------------------------------------------


def add_demo(commands: Commands) -> None:
    """Add ``dmk demo``'s parser to ``commands``."""
    demo = commands.add_parser("demo", help="short end-to-end run on the embedded broker")
    demo.add_argument("--records", type=int, default=12_000, help="dataset size (default 12000)")
    demo.add_argument("--seed", type=int, default=7, help="dataset seed (default 7)")
    demo.add_argument("--profile", choices=["clean", "messy"], default="messy", help="dataset profile (default messy)")
    demo.add_argument("--partitions", type=int, default=4, help="topic partitions (default 4)")
    demo.add_argument("--out", help="directory for the demo's files (default: a new temp directory)")
    demo.add_argument(
        "--workloads", type=lambda text: [w for w in text.split(",") if w], default=["running_counts"],
        help="workloads to compare, comma-separated (default running_counts; e.g. running_counts,windowed_counts)",
    )
    demo.add_argument("--master", help="Spark master for the compare drivers (default $DMK_SPARK_MASTER or local[2])")
    _add_bootstrap(demo)
    demo.set_defaults(func=cmd_demo)


def _workload_name(name: str) -> str:
    """A workload argument: a built-in's name also with hyphens (``nexmark-q4`` is ``nexmark_q4``)."""
    from kit import workloads

    underscored = name.replace("-", "_")
    return underscored if ":" not in name and underscored in workloads.NAMES + workloads.NEXMARK_NAMES else name


def add_compare(commands: Commands) -> None:
    """Add ``dmk compare``'s parser to ``commands``."""
    cmp = commands.add_parser(
        "compare", help="replay a dataset through the legacy and the modern job, diff against the oracle, report",
        description="Replay one dataset through a legacy (DStream) and a modern (Structured Streaming) driver "
        "process, diff both against the exact pandas oracle, measure latency and throughput, and write a run "
        "directory (report.md, report.html, metrics.json, diff/). Exit code 0 iff both engines equal the oracle.",
    )
    cmp.add_argument("workload", type=_workload_name,
                     help="a built-in workload (running_counts, windowed_counts, sessions, dedup, ysb, "
                     "join; Nexmark: nexmark_q0, nexmark_q1, nexmark_q2, nexmark_q3, nexmark_q4, nexmark_q5, "
                     "nexmark_q7, nexmark_q8, nexmark_q11, nexmark_q12, also spelled with hyphens: nexmark-q4) or "
                     "package.module:SPEC")
    cmp.add_argument("--dataset", metavar="FILE", help="a dataset file from `dmk gen` (default: generate one)")
    cmp.add_argument("--records", type=int, default=20_000, help="records to generate (default 20000)")
    cmp.add_argument("--seed", type=int, default=11, help="dataset seed, also seeds fault points (default 11)")
    cmp.add_argument("--profile", choices=["clean", "messy"], default="messy", help="dataset profile (default messy)")
    cmp.add_argument("--partitions", type=int, help="partitions of each input topic (default 4)")
    cmp.add_argument("--events-per-second", dest="events_per_second", type=float,
                     help=_GEN_KNOBS["events_per_second"][1] + " (default 500, or records / 40 when lower: at least "
                     "40 s of event time, so that every workload's windows and sessions close)")
    for name, default in (("users", 300), ("lateness_margin_ms", 4000)):
        cmp.add_argument("--" + name.replace("_", "-"), dest=name, type=_GEN_KNOBS[name][0], default=default,
                         help=_GEN_KNOBS[name][1] + f" (default {default})")
    cmp.add_argument("--boundary-records", dest="boundary_records", type=int, metavar="N",
                     help=_GEN_KNOBS["boundary_records"][1] + "; part of --records (default 0)")
    cmp.add_argument("--min-rows", type=int, default=10, metavar="N",
                     help="warn when the oracle has fewer rows than this (default 10); with none the verdict is "
                     "NOTHING COMPARED, exit 1")
    cmp.add_argument("--mode", choices=("final", "all"), default="final",
                     help="final: the final result per key (default); all: for update-mode workloads also every "
                     "emitted row, in order per key, against the values each key passes through")
    cmp.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/<workload>-<time>)")
    cmp.add_argument("--rate", type=float, help="replay rate, dataset records/s (default: 3/4 of what the batch caps "
                     "let through, 750 for the default dataset)")
    cmp.add_argument("--burst", action="store_true", help="produce the whole dataset before the driver starts")
    cmp.add_argument(
        "--legacy-mode", default="direct", metavar="MODE",
        help="how the legacy job reads and keeps offsets: direct (checkpoint; default), direct-kafka-commit, "
        "direct-zookeeper, direct-sqlite, direct-postgres, receiver, receiver-wal (docs/compare.md)",
    )
    cmp.add_argument(
        "--offset-store", metavar="WHERE",
        help="the legacy mode's store: ZooKeeper hosts (direct-zookeeper), PostgreSQL DSN (direct-postgres), "
        "SQLite file (direct-sqlite; default <out>/legacy/offsets.sqlite), consumer group (kafka-commit, receiver)",
    )
    cmp.add_argument("--batch-seconds", type=float, default=1.0, help="legacy batch interval (default 1.0)")
    cmp.add_argument("--trigger", default="0 seconds", help="modern processing-time trigger (default '0 seconds')")
    cmp.add_argument("--concurrent", action="store_true",
                     help="run both engines at once (default: one after the other)")
    cmp.add_argument("--kill-driver", type=int, default=0, metavar="N", help="SIGKILL and restart each driver N times")
    cmp.add_argument("--pause-broker", type=float, default=0.0, metavar="SECONDS",
                     help="SIGSTOP the embedded broker this long mid-replay")
    cmp.add_argument("--legacy", metavar="MOD:FN", help="your legacy job, fn(ssc, source) -> DStream, or a legacy "
                     "variant of the workload by name (e.g. windowed_counts: naive; docs/compare.md)")
    cmp.add_argument("--modern", metavar="MOD:FN", help="your modern job, fn(spark, source) -> DataFrame, or a modern "
                     "variant of the workload by name (sessions: state, transform_with_state; dedup: "
                     "transform_with_state)")
    cmp.add_argument("--oracle", metavar="MOD:FN",
                     help="your oracle, fn(frame, dataset_spec) -> OracleResult or DataFrame")
    cmp.add_argument("--timeout", type=float, default=600.0,
                     help="bound on each driver's start and drain, s (default 600)")
    cmp.add_argument("--master", help="Spark master for the drivers (default $DMK_SPARK_MASTER or local[2])")
    cmp.add_argument("--checkpoint-dir", metavar="URI", help="root of both engines' checkpoints (default: the run "
                     "directory); a URI every node reaches on a multi-host cluster (docs/deploy.md)")
    cmp.add_argument("--connect", metavar="sc://HOST:PORT",
                     help="run the modern driver's queries on this Spark Connect server; the legacy driver stays on "
                     "--master, as DStreams cannot run over Connect. The server's Python workers need this kit "
                     "installed, and the server must write the run directory (same machine or a shared file system; "
                     "docs/playbook.md, 'Spark Connect')")
    cmp.add_argument("--broker-port", type=int, help="port of the embedded broker (default: a free one)")
    _add_bootstrap(cmp)
    cmp.set_defaults(func=cmd_compare)


def add_compare_jobs(commands: Commands) -> None:
    """Add ``dmk compare-jobs``'s parser to ``commands``."""
    jobs = commands.add_parser(
        "compare-jobs", help="your own DStream job and its Structured Streaming rewrite, unmodified, on a capture",
        description="Run two job scripts, each in its own process with the kit's stand-ins (pyspark.streaming.kafka; "
                    "format('kafka') without Spark's connector), on one replay each of a capture (dmk capture), and "
                    "compare their outputs by key. Placeholders: {bootstrap}, {topic}, {socket_host}, {socket_port}, "
                    "{input_dir}, {output_topic}, {output_dir}, {checkpoint}, {zookeeper} (a ZooKeeper run for "
                    "createStream, the run's brokers registered), {starting_offsets} and {initial_state} (what a "
                    "modern job continues from with --cutover-at; empty otherwise). Exit 0 if equivalent, 1 if "
                    "not, 2 on bad input or a job that crashed "
                    "(docs/compare.md).")
    jobs.add_argument("--input", required=True, metavar="FILE", help="a capture written by dmk capture")
    jobs.add_argument("--key", required=True, metavar="COL[,COL]", help="the output's key fields")
    jobs.add_argument("--legacy", required=True, metavar="CMD", help='e.g. "python jobs/legacy.py {bootstrap} {topic} '
                      '{output_topic} {checkpoint}"')
    jobs.add_argument("--modern", required=True, metavar="CMD", help="the Structured Streaming job's command, likewise")
    jobs.add_argument("--mode", choices=("final", "all", "batches"), default="final",
                      help="final: the last row per key (default); all: every row, as a multiset; batches: the rows "
                           "of each batch, as a multiset, batches aligned by the input they consumed")
    jobs.add_argument("--output", default="topic", metavar="topic|dir|sql:DSN#TABLE|printed[:NAME]|files:LOC",
                      help="where the jobs write: {output_topic} (JSON values, default), files under {output_dir}, "
                           "a table per job ({output_table} = TABLE_legacy / TABLE_modern) in the SQLite file or "
                           "PostgreSQL database DSN ({output_dsn}), what they print (pprint, print in foreachRDD/"
                           "foreachBatch, the console sink; NAME = FILE:LINE of the call when a job prints several), "
                           "or the files they write under their own location LOC (saveAsTextFiles' prefix, a path, "
                           "hdfs://host:port/path; LEGACY,MODERN for one each), redirected to the run's directory")
    jobs.add_argument("--input-kind", metavar="KIND[,KIND]",
                      help="kafka, socket, files or queue (legacy,modern when they differ): how each job is fed the "
                           "capture; default from its placeholders ({topic}, {socket_port}, {input_dir})")
    jobs.add_argument("--batch-records", type=int, metavar="N",
                      help="feed the input N records (lines) at a time; with --mode batches each chunk waits for the "
                           "previous one's batch (default: a tenth of the input)")
    jobs.add_argument("--out", help="run directory (default runs/jobs-<time>)")
    jobs.add_argument("--partitions", type=int, help="input topic partitions (default: the capture's)")
    jobs.add_argument("--rate", type=float, help="replay at this many records/s (default: as fast as possible)")
    jobs.add_argument("--speed", type=float, help="replay the capture's own timing this many times faster")
    jobs.add_argument("--oracle", metavar="MOD:FN", help="fn(capture frame) -> the expected rows (pandas)")
    jobs.add_argument("--settle-batches", type=int, default=2,
                      help="batches a DStream job must complete after consuming its input (default 2)")
    jobs.add_argument("--timeout", type=float, default=600.0, help="bound on each wait, in seconds (default 600)")
    jobs.add_argument("--legacy-python2", action="store_true",
                      help="run the legacy job (a Python 2-era original) with dmk's Python 2 compatibility layer: "
                           "reload(sys), sys.setdefaultencoding (a no-op for UTF-8), kafka-python producers sending "
                           "str as UTF-8, unicode/basestring/long/unichr/xrange; the log, report and verdict say so "
                           "(docs/compare.md#python-2-era-originals)")
    jobs.add_argument("--cutover-at", type=int, metavar="N",
                      help="cut over mid-stream: the legacy job processes the capture's first N records and is "
                           "stopped; the modern job continues from its checkpoint's position ({starting_offsets}) and "
                           "its last output row per key ({initial_state}, Parquet); the legacy rows then the modern "
                           "ones are compared with the legacy job's uninterrupted run (docs/cutover.md#your-own-job)")
    jobs.add_argument("--cutover-state", choices=("output", "checkpoint"), default="output",
                      help="--cutover-at: read the legacy job's state from its output (last row per key, default) or "
                           "from its checkpoint (its updateStateByKey state at its last completed batch)")
    jobs.add_argument("--state-columns", metavar="COL[,COL]",
                      help="--cutover-state checkpoint: names of the state's fields (a tuple state needs them)")
    _add_bootstrap(jobs)
    jobs.set_defaults(func=cmd_compare_jobs)


def add_report(commands: Commands) -> None:
    """Add ``dmk report``'s parser to ``commands``."""
    rpt = commands.add_parser("report", help="re-render report.md and report.html of a compare run directory")
    rpt.add_argument("run_dir", metavar="RUN_DIR")
    rpt.add_argument("--baseline", metavar="RUN_DIR",
                     help="a previous compare run: put every figure beside it, with its ratio; regressions marked")
    rpt.set_defaults(func=cmd_report)
