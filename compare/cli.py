"""The ``dmk`` command line.

Commands:
    dmk demo                 embedded broker → dataset → replay → exact read-back → a short compare
    dmk broker start         run the embedded Kafka broker in the foreground until Ctrl-C
    dmk gen                  write a deterministic dataset file and its manifest
    dmk replay FILE          produce a dataset file into a topic
    dmk offsets TOPIC        exact beginning/end offsets of a topic
    dmk compare WORKLOAD     replay a dataset through a legacy and a modern driver, 3-way diff, report
    dmk report RUN_DIR       re-render a compare run's report.md and report.html (--baseline OLD_RUN: beside it)
    dmk checkpoint inspect D what a legacy (DStream) or modern (Structured Streaming) checkpoint holds
    dmk cutover SOURCE WHERE the startingOffsets (and state) that continue a stopped legacy job
    dmk cluster start|stop|status  a Spark standalone cluster on this machine (loopback)
    dmk bench                throughput, latency and state growth of both engines against the raw client
    dmk migrate JOB.py       a DStream job's migration plan from its source (ast; never run); --out a draft

Every command that needs Kafka takes ``--bootstrap-servers`` (default: ``$DMK_BOOTSTRAP_SERVERS``, else an
embedded broker started for the command), and its client settings in the Java client's names:
``--kafka-config FILE`` (a ``.properties`` file, as Kafka's ``--command-config``; default ``$DMK_KAFKA_CONFIG``)
and repeatable ``--kafka-option key=value`` (later wins over the file), applied to every client the command
creates, both engines' drivers included (docs/security.md). Errors print one line and exit with code 2; no
secret is ever printed.

Example:
    $ dmk gen --records 100000 --profile messy --out events.parquet
    $ dmk replay events.parquet --topic events --partitions 4 --bootstrap-servers 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from kit.errors import ConfigError, KitError

__all__ = ["main"]

BOOTSTRAP_ENV = "DMK_BOOTSTRAP_SERVERS"
KAFKA_CONFIG_ENV = "DMK_KAFKA_CONFIG"

console = Console(stderr=False)
err_console = Console(stderr=True)


# -- helpers ---------------------------------------------------------------------------------------------


def _add_bootstrap(parser: argparse.ArgumentParser, *, bootstrap: bool = True) -> None:
    if bootstrap:
        parser.add_argument(
            "--bootstrap-servers",
            default=os.environ.get(BOOTSTRAP_ENV),
            metavar="HOST:PORT",
            help=f"Kafka to use (env {BOOTSTRAP_ENV}); default: start an embedded Tansu broker for this command",
        )
    _add_kafka_security(parser)


def _add_kafka_security(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kafka-config", metavar="FILE", default=os.environ.get(KAFKA_CONFIG_ENV),
        help=f"Kafka client settings in the Java client's names, a .properties file as Kafka's --command-config "
             f"(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location..., PEM only; env "
             f"{KAFKA_CONFIG_ENV}); applied to every client of the command, both engines' drivers included "
             "(docs/security.md)",
    )
    parser.add_argument(
        "--kafka-option", metavar="KEY=VALUE", action="append", default=[],
        help="one Kafka client setting in the Java client's names, e.g. security.protocol=SASL_SSL; repeatable, "
             "later ones win over --kafka-config (a secret here is visible in the process list: prefer the file)",
    )


def _kafka_security(args: argparse.Namespace) -> dict[str, str]:
    """The command's Kafka client settings (Java names): ``--kafka-config``, then each ``--kafka-option``."""
    from kit.security import parse_kafka_option, read_properties

    java = read_properties(args.kafka_config) if getattr(args, "kafka_config", None) else {}
    for option in getattr(args, "kafka_option", None) or ():
        key, value = parse_kafka_option(option)
        java[key] = value
    return java


def _redacted_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of each secret ``--kafka-option`` (``sasl.jaas.config``, passwords, keys) as ``***``."""
    from kit.security import REDACTED, SECRET_NAMES

    out: list[str] = []
    for i, arg in enumerate(argv):
        inline = arg.startswith("--kafka-option=")
        if inline or (i and argv[i - 1] == "--kafka-option"):
            key = (arg.partition("=")[2] if inline else arg).partition("=")[0]
            if key.strip() in SECRET_NAMES:
                arg = f"--kafka-option={key}={REDACTED}" if inline else f"{key}={REDACTED}"
        out.append(arg)
    return out


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    )


@contextmanager
def _progress_task(description: str, total: int | None):
    """Yield an ``update(done, acknowledged, total=)`` callback driving one progress bar (total: once known)."""
    with _progress() as progress:
        task = progress.add_task(description, total=total, rate="")
        started = time.monotonic()

        def update(done: int, acknowledged: int | None = None, *, total: int | None = None) -> None:
            shown = acknowledged if acknowledged is not None else done
            elapsed = max(time.monotonic() - started, 1e-9)
            if total is not None:
                progress.update(task, total=total)
            progress.update(task, completed=shown, rate=f"{shown / elapsed:,.0f} rec/s")

        yield update


def _announce_embedded_broker() -> None:
    err_console.print("[dim]no --bootstrap-servers given: starting the embedded Tansu broker[/dim]")


@contextmanager
def _kafka(args: argparse.Namespace) -> Iterator[str]:
    """The bootstrap servers of the command's Kafka (:func:`kit.broker.kafka_or_embedded`)."""
    from kit.broker import kafka_or_embedded

    with kafka_or_embedded(args.bootstrap_servers, on_start=_announce_embedded_broker) as kafka:
        yield kafka.bootstrap_servers


def _spec_from_args(args: argparse.Namespace):
    from kit.dataset import DatasetSpec

    overrides = {
        name: getattr(args, name)
        for name in _GEN_KNOBS
        if getattr(args, name, None) is not None
    }
    return DatasetSpec.from_profile(args.profile, records=args.records, seed=args.seed, **overrides)


# Dataset knobs exposed as options (name, type, help); defaults live in kit.dataset.DatasetSpec.
_GEN_KNOBS: dict[str, tuple[type, str]] = {
    "partitions": (int, "partition count the dataset's partition field is computed for"),
    "keys": (int, "distinct values of the 'key' field"),
    "key_skew": (str, "'uniform' or 'zipf'"),
    "zipf_exponent": (float, "zipf exponent when --key-skew zipf"),
    "users": (int, "distinct users"),
    "session_gap_ms": (int, "inactivity gap that closes a user session"),
    "events_per_second": (int, "event-time rate of the whole stream"),
    "ads": (int, "distinct ad_id values"),
    "campaigns": (int, "campaigns the ads belong to"),
    "late_fraction": (float, "share of records out of order but within the allowed lateness"),
    "too_late_fraction": (float, "share of records later than the allowed lateness"),
    "allowed_lateness_ms": (int, "the workloads' lateness tolerance"),
    "lateness_margin_ms": (int, "distance kept from the tolerance on both sides"),
    "duplicate_fraction": (float, "share of exact re-sends of earlier records"),
    "malformed_fraction": (float, "share of malformed records (bad UTF-8, bad JSON, missing field, bad time)"),
    "boundary_records": (int, "records of the boundary block at the end: probes at and 1 ms either side of the "
                              "watermark, session gap, window ends and validity bounds, after lead-ins that make them "
                              "exact (0: none; else at least the minimum the error names)"),
}


# -- commands --------------------------------------------------------------------------------------------


def cmd_gen(args: argparse.Namespace) -> int:
    from kit.dataset import generate_to_file

    spec = _spec_from_args(args)
    started = time.monotonic()
    with err_console.status(f"generating {spec.records:,} records..."):
        manifest = generate_to_file(spec, args.out)
    seconds = time.monotonic() - started
    table = Table(title=f"{args.out} ({manifest['records']:,} records, {seconds:.1f} s)", show_header=True)
    table.add_column("kind")
    table.add_column("records", justify="right")
    for kind, count in manifest["counts"].items():
        table.add_row(kind, f"{count:,}")
    console.print(table)
    console.print(f"sha256 {manifest['sha256']}  manifest {args.out}.manifest.json")
    from kit.workloads import span_warnings

    for warning in span_warnings(spec):
        err_console.print(f"warning: {warning}", markup=False)
    return 0


def _do_replay(
    path: str, bootstrap_servers: str, settings, *, describe: str = "replay", frame=None
):
    from kit.dataset import read_dataset
    from kit.replay import replay

    frame = read_dataset(path) if frame is None else frame
    with _progress_task(f"{describe} → {settings.topic}", len(frame)) as update:
        return replay(frame, bootstrap_servers, settings, on_progress=update), frame


def _print_replay(result) -> None:
    table = Table(title=f"replayed into {result.topic!r}")
    table.add_column("records", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("rate (rec/s)", justify="right")
    table.add_column("end offset per partition")
    ends = ", ".join(f"{p}:{o}" for p, o in sorted(result.end_offsets.items()))
    table.add_row(f"{result.records:,}", f"{result.seconds:.2f}", f"{result.rate_rps:,.0f}", ends)
    console.print(table)


def cmd_capture(args: argparse.Namespace) -> int:
    from compare._validate import partition_list
    from kit.capture import Position, capture

    start = Position.parse(args.from_) if args.from_ else None
    end = Position.parse(args.until) if args.until else None
    partitions = partition_list(args.partitions) if args.partitions else None
    with _kafka(args) as bootstrap_servers, _progress_task(f"capture {args.topic} → {args.out}", None) as update:
        result = capture(bootstrap_servers, args.topic, args.out, partitions=partitions, start=start, end=end,
                         max_records=args.max_records, on_progress=lambda done, most: update(done, total=most))
    table = Table(title=f"captured {args.topic!r} into {result.path}")
    for column in ("partition", "from offset", "until offset", "records"):
        table.add_column(column, justify="right")
    for partition, (first, until) in sorted(result.ranges.items()):
        table.add_row(str(partition), str(first), str(until), f"{result.counts[partition]:,}")
    table.add_row("all", "", "", f"{result.records:,}")
    console.print(table)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from kit.capture import is_capture

    if is_capture(args.file):
        return _replay_capture(args)
    from kit.replay import ReplaySettings

    if args.speed is not None:
        msg = f"--speed replays a capture's own timing; {args.file} is a dataset (dmk gen): use --rate"
        raise ConfigError(msg)

    settings = ReplaySettings(
        topic=args.topic,
        partitions=args.partitions,
        rate_rps=args.rate,
        timestamps=args.timestamps,
        partition_by=args.partition_by,
    )
    from kit.dataset import read_dataset

    frame = read_dataset(args.file)  # a file that is no dataset is refused before a broker starts
    with _kafka(args) as bootstrap_servers:
        result, _ = _do_replay(args.file, bootstrap_servers, settings, frame=frame)
        if not args.bootstrap_servers:
            err_console.print(
                "[yellow]note: the embedded broker stops with this command, and its data with it; "
                "run `dmk broker start` and pass --bootstrap-servers to keep a topic[/yellow]"
            )
    _print_replay(result)
    if args.log:
        result.log.to_parquet(args.log, index=False)
        console.print(f"per-record produce log: {args.log}")
    return 0


def _replay_capture(args: argparse.Namespace) -> int:
    from kit.capture import read_capture, replay_capture

    frame = read_capture(args.file)
    speed = None if args.rate is not None else (args.speed or 1.0)
    with _kafka(args) as bootstrap_servers:
        with _progress_task(f"replay capture → {args.topic}", len(frame)) as update:
            result = replay_capture(frame, bootstrap_servers, args.topic, speed=speed, rate_rps=args.rate,
                                    partitions=args.partitions, on_progress=update)
        if not args.bootstrap_servers:
            err_console.print(
                "[yellow]note: the embedded broker stops with this command, and its data with it; "
                "run `dmk broker start` and pass --bootstrap-servers to keep a topic[/yellow]"
            )
    _print_replay(result)
    return 0


def cmd_offsets(args: argparse.Namespace) -> int:
    from kit.kafka import Kafka

    with _kafka(args) as bootstrap_servers, Kafka(bootstrap_servers) as kafka:
        begins = kafka.beginning_offsets(args.topic)
        ends = kafka.end_offsets(args.topic)
    rows = {tp.partition: {"beginning": begins[tp], "end": ends[tp]} for tp in ends}
    if args.json:
        print(json.dumps({args.topic: {str(p): v for p, v in rows.items()}}, indent=2))
        return 0
    table = Table(title=f"offsets of {args.topic!r}")
    for col in ("partition", "beginning", "end", "records"):
        table.add_column(col, justify="right")
    for p, v in sorted(rows.items()):
        table.add_row(str(p), str(v["beginning"]), str(v["end"]), str(v["end"] - v["beginning"]))
    console.print(table)
    return 0


def cmd_broker_start(args: argparse.Namespace) -> int:
    from kit.broker import EmbeddedBroker

    broker = EmbeddedBroker(port=args.port, log_path=args.log)
    stop = False

    def _stop(signum, frame):  # noqa: ANN001
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    exited = False
    # Ctrl-C can come as soon as the broker answers, even before the first line is printed: from the start
    # on, any interrupt stops the broker and ends the command normally.
    try:
        broker.start()
        console.print(
            f"Tansu broker listening on [bold]{broker.bootstrap_servers}[/bold] (pid {broker.pid}, "
            f"log {broker.log_path}). Pass --bootstrap-servers {broker.bootstrap_servers}. Ctrl-C stops it."
        )
        while not stop and broker.running:
            time.sleep(0.5)
        exited = not stop
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    if exited:
        err_console.print(f"[red]the broker exited on its own[/red]\n{broker.log_tail()}")
        return 1
    console.print("broker stopped")
    return 0


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
            figures = compared.metrics["engines"]
            verdict = ("[green]legacy = modern = oracle[/green]" if compared.equivalent
                       else f"[red]{compared.verdict}[/red]")
            for warning in compared.metrics["warnings"]:
                console.print(f"   warning: {warning}", markup=False)
            console.print(
                f"   {verdict}: {compared.metrics['oracle']['rows']:,} rows, "
                f"{compared.metrics['oracle']['dead_letters']:,} dead letters; "
                f"{'; '.join(_pace(name, m) for name, m in figures.items())}; "
                f"report {compared.out_dir / 'report.html'}"
            )
            exact = exact and compared.equivalent
    return 0 if exact else 1


def _pace(engine: str, figures: dict) -> str:
    """``legacy kept up (start-up 4.2 s), latency p99 after it 1,300 ms``: one engine's pace in a demo line."""
    kept, steady = figures.get("kept_up"), figures.get("latency_after_startup_ms") or {}
    if not kept:
        return f"{engine} latency p99 {figures['latency_ms']['p99']:,.0f} ms"
    verdict = "kept up" if kept["kept_up"] else "fell behind"
    if kept["caught_up_ms"] is None:
        return f"{engine} {verdict}, never caught up"
    if steady.get("p99") is None:
        return f"{engine} {verdict}, caught up only after the replay ended"
    return (f"{engine} {verdict} (start-up {kept['caught_up_ms'] / 1000:.1f} s), latency p99 after it "
            f"{steady['p99']:,.0f} ms")


def _compare_progress() -> tuple[Progress, Callable[[str, int, int], None]]:
    progress = _progress()
    tasks: dict[str, TaskID] = {}
    started: dict[str, float] = {}

    def update(name: str, done: int, total: int) -> None:
        if name not in tasks:
            tasks[name] = progress.add_task(name, total=total, rate="")
            started[name] = time.monotonic()
        elapsed = max(time.monotonic() - started[name], 1e-9)
        # A bar of one step is a phase (dmk bench), not records: no rate.
        rate = f"{done / elapsed:,.0f} rec/s" if total > 1 else ""
        progress.update(tasks[name], completed=min(done, total), rate=rate)

    return progress, update


def _settings_from_args(args: argparse.Namespace):
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


def _print_summary(run_dir: Path, metrics: dict) -> None:
    from compare.report import summary_rows, verdict_lines

    word = metrics.get("verdict") or ("EQUIVALENT" if metrics["equivalent"] else "DIFFERENT")
    verdict = f"[green]{word}[/green]" if metrics["equivalent"] else f"[red]{word}[/red]"
    table = Table(title=f"{metrics['workload']}: {metrics['records']:,} records")
    for column in ("figure", "legacy", "modern", "oracle"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in summary_rows(metrics):
        table.add_row(*row)
    console.print(table)
    for line in verdict_lines(metrics):
        console.print(line, markup=False)
    console.print(f"{verdict}  report: {run_dir / 'report.md'}  {run_dir / 'report.html'}  "
                  f"metrics: {run_dir / 'metrics.json'}")


_PARTIAL_RUN_FILES = {"dataset.parquet", "dataset.parquet.manifest.json", "broker.log"}
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
    if not result.metrics["faults_injected"]:
        err_console.print("[red]INCOMPLETE: not every requested fault was injected; see report.md[/red]")
        return 1
    return 0 if result.equivalent else 1


def cmd_compare_jobs(args: argparse.Namespace) -> int:
    from compare.jobs import JobsSettings, compare_jobs

    settings = JobsSettings(
        input_file=args.input, key=tuple(k.strip() for k in args.key.split(",") if k.strip()), legacy=args.legacy,
        modern=args.modern, out_dir=Path(args.out or f"runs/jobs-{time.strftime('%Y%m%dT%H%M%S')}"), mode=args.mode,
        output=args.output, partitions=args.partitions, rate_rps=args.rate, speed=args.speed, oracle=args.oracle,
        settle_batches=args.settle_batches, bootstrap_servers=args.bootstrap_servers, timeout_s=args.timeout,
        kafka_security=args.kafka_security, input_kind=args.input_kind, batch_records=args.batch_records,
        legacy_python2=args.legacy_python2,
    )
    progress, update = _compare_progress()
    with progress:
        result = compare_jobs(settings, update, on_broker_start=_announce_embedded_broker)
    jobs = result.metrics["jobs"]
    metrics = result.metrics
    table = Table(title=f"{metrics['input']}: {metrics['records']:,} records, by {', '.join(settings.key)}")
    for column in ("figure", "legacy", "modern"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for label, key in (("output rows", "output_rows"), ("rows compared", "rows_compared"), ("seconds", "seconds")):
        table.add_row(label, *(f"{m[key]:,}" for m in jobs.values()))
    console.print(table)
    if result.metrics["summary"]:
        console.print(result.metrics["summary"], markup=False)
    for warning in result.metrics["warnings"]:
        console.print(f"warning: {warning}", markup=False)
    if result.metrics.get("legacy_python2"):
        console.print(f"note: {result.metrics['legacy_python2']}", markup=False)
    color = "green" if result.equivalent else "red"
    verdict = f"[{color}]{result.metrics['verdict']}[/{color}]"
    console.print(f"{verdict}  report: {result.out_dir / 'report.md'}  metrics: {result.out_dir / 'metrics.json'}")
    return 0 if result.equivalent else 1


def cmd_migrate(args: argparse.Namespace) -> int:
    from migrate import JobSourceError, analyse, make_draft, render_json, render_markdown, review

    plan = analyse(args.job)
    if not plan.source.strip():
        msg = (f"{args.job} is empty ({len(plan.source.encode())} bytes): there is no job to migrate. Give the "
               "DStream job's .py source file.")
        raise JobSourceError(msg, path=args.job)
    if not plan.streaming:
        msg = (f"{args.job} uses no StreamingContext, DStream or KafkaUtils (read without running it): nothing to "
               "migrate. Give the file that builds the job's DStreams (a job split over modules: run dmk migrate "
               "on each module that uses them); a Structured Streaming job needs no migration.")
        raise JobSourceError(msg, path=args.job)
    modern = review(plan, args.modern) if args.modern else None
    made = make_draft(plan)
    if args.out:
        try:
            Path(args.out).write_text(made.text, encoding="utf-8")
        except OSError as exc:
            msg = f"cannot write the draft to {args.out!r}: {exc}. Give --out a writable file path."
            raise ConfigError(msg, field="out", expected="a writable file", actual=args.out) from None
        state = ("it runs as written" if made.runs else
                 f"it refuses to start until {len(made.unresolved)} part(s) are ported: " + "; ".join(made.unresolved))
        if made.python2:
            state += f" (Python 2-era code fixed for Python 3: {len(made.python2)} fix(es), listed at its top)"
        sys.stderr.write(f"draft Structured Streaming job written to {args.out}: {state}\n")
    # draft_runs: whether the draft leaves no part unresolved; verified: null unless --verify ran.
    text = (render_json(plan, modern, draft_runs=made.runs, verified=None) if args.json
            else render_markdown(plan, modern))
    if args.verify:
        return _verify_migration(args, plan, text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _verify_migration(args: argparse.Namespace, plan: Any, text: str) -> int:
    """``dmk migrate --verify``: the draft (or --modern) against the job on a capture; one verdict (compare.verify)."""
    from compare.verify import VerifySettings, verify
    from migrate import draft

    if not args.input or not args.key:
        msg = ("--verify needs --input CAPTURE (dmk capture) and --key COL (the output's key: a printed tuple's _1, "
               "or a column name)")
        raise ConfigError(msg, field="verify", expected="--input and --key", actual=None)
    settings = VerifySettings(
        job=args.job, input_file=args.input, key=tuple(k.strip() for k in args.key.split(",") if k.strip()),
        out_dir=Path(args.verify_out or f"runs/verify-{time.strftime('%Y%m%dT%H%M%S')}"), args=args.args or "",
        mode=args.mode, modern=args.modern, draft_path=Path(args.out) if args.out else None,
        input_kind=args.input_kind, batch_records=args.batch_records, bootstrap_servers=args.bootstrap_servers,
        timeout_s=args.timeout, output=args.output,
        legacy_python2={"on": True, "off": False}.get(args.legacy_python2),
    )
    progress, update = _compare_progress()
    with progress:
        verdict = verify(settings, write_draft=lambda _job: draft(plan), progress=update)
    if args.json:
        document = json.loads(text)
        document["verified"], document["verification"] = verdict.verified, verdict.to_json()
        text = json.dumps(document, indent=2)
    sys.stdout.write((text if text.endswith("\n") else text + "\n") + ("" if args.json else f"\n{verdict.line()}\n"))
    if not args.json:
        return verdict.exit_code
    sys.stderr.write(verdict.line() + "\n")
    return verdict.exit_code


def cmd_report(args: argparse.Namespace) -> int:
    from compare.report import load_metrics, render

    run_dir = Path(args.run_dir)
    md, page = render(run_dir, baseline=Path(args.baseline) if args.baseline else None)
    _print_summary(run_dir, load_metrics(run_dir))
    return 0 if load_metrics(run_dir)["equivalent"] else 1


def cmd_checkpoint_inspect(args: argparse.Namespace) -> int:
    import re

    from compare.engines import ENGINES, get_engine
    from kit.errors import ConfigError

    directory = Path(args.directory)
    uri = re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", args.directory) is not None
    if not uri and not directory.is_dir():
        msg = (
            f"{directory} is not a directory; give a legacy checkpoint directory (checkpoint-<time> "
            "files) or a Structured Streaming checkpoint location"
        )
        raise ConfigError(msg, field="directory", expected="a directory", actual=str(directory))
    # A URI (hdfs://, s3a://...) is read with Spark's file system, by the engine that reads checkpoints that way.
    location = args.directory if uri else str(directory)
    owner = next((engine for engine in map(get_engine, ENGINES) if engine.owns_checkpoint(location)), None)
    if owner is None:
        entries = sorted(p.name for p in directory.iterdir())[:8]
        msg = (
            f"{directory} is neither a DStream checkpoint (checkpoint-<time> files) nor a Structured Streaming "
            f"checkpoint location (metadata, offsets/, commits/); it holds {entries or 'nothing'}. Pass the "
            "directory given to ssc.checkpoint() / getOrCreate, or a query's checkpointLocation."
        )
        raise ConfigError(msg, field="directory", expected="a checkpoint directory", actual=entries)
    found = owner.inspect_checkpoint(location, args.master, row_counts=args.row_counts)
    if args.json:
        payload = [c.to_json() for c in found]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    else:
        print("\n\n".join(c.describe() for c in found))
    return 0


def cmd_cutover(args: argparse.Namespace) -> int:
    from compare.cutover import (
        PositionSource,
        carried_spec,
        plan_cutover,
        read_position,
        seed_state,
        write_options,
    )
    from kit.errors import ConfigError

    if args.seed_state and not args.workload:
        msg = "--seed-state needs --workload: the legacy job whose totals seed the modern query"
        raise ConfigError(msg, field="workload", expected="a workload name or package.module:SPEC", actual=None)
    if args.seed_state:
        carried_spec(args.workload)  # refuse before --discard-beyond deletes anything
    source = PositionSource(args.source, args.where, consumer=args.consumer, topics=tuple(args.topic or ()),
                            bootstrap_servers=args.bootstrap_servers)
    if args.source == "checkpoint" and args.master:
        from kit.spark import spark_context

        spark_context("dmk-cutover", args.master)  # the checkpoint is read with Spark's classes
    position = read_position(source, allow_pending=args.allow_pending)
    plan = plan_cutover(position, legacy_output=args.legacy_output, discard_beyond=args.discard_beyond)
    seeded = seed_state(plan, args.workload, args.seed_state) if args.seed_state else None
    if args.write_options:
        write_options(plan, args.write_options)
    if args.json:
        payload = plan.to_json()
        if seeded is not None:
            payload["seed_state"] = {"path": args.seed_state, "keys": seeded}
        print(json.dumps(payload, indent=2))
        return 0
    print(plan.starting_offsets_json())
    err_console.print(f"position read from the {source.describe()}", highlight=False)
    if plan.last_batch_ms is not None:
        err_console.print(f"last legacy batch within it: {plan.last_batch_ms}", highlight=False)
    if plan.discarded:
        err_console.print(f"discarded {len(plan.discarded)} legacy output file(s) of batches beyond it: "
                          f"{', '.join(map(str, plan.beyond))}", highlight=False)
    if seeded is not None:
        err_console.print(f"initial state ({seeded} keys) written to {args.seed_state}", highlight=False)
    if args.write_options:
        err_console.print(f"startingOffsets written into {args.write_options}", highlight=False)
    for note in plan.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from kit.cluster import LocalCluster

    cluster = LocalCluster(args.dir)
    if args.cluster_command == "start":
        with console.status(f"starting a master and {args.workers} worker(s) ..."):
            state = cluster.start(workers=args.workers, cores=args.cores, memory=args.memory)
        console.print(f"master   {state.master_url}   (use: --master {state.master_url} or "
                      f"DMK_SPARK_MASTER={state.master_url})", highlight=False)
        console.print(f"web UI   {state.webui_url}", highlight=False)
        console.print(f"workers  {args.workers} x {args.cores} core(s), {args.memory}; logs in {cluster.directory}",
                      highlight=False)
        return 0
    if args.cluster_command == "stop":
        stopped = cluster.stop()
        console.print(
            f"stopped {len(stopped)} Spark daemon(s)" if stopped else f"no cluster runs from {cluster.directory}"
        )
        return 0
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    elif not status["running"]:
        console.print(f"no cluster runs from {status['directory']}", highlight=False)
    else:
        console.print(f"master {status['master_url']}  web UI {status['webui_url']}", highlight=False)
        for w in status["workers"]:
            console.print(f"  worker {w['id']}  {w['state']}  cores {w['cores_used']}/{w['cores']}  memory "
                          f"{w['memory_used_mb']}/{w['memory_mb']} MB", highlight=False)
        for a in status["apps"]:
            console.print(f"  app {a['id']}  {a['name']}  {a['cores']} core(s)  {a['state']}", highlight=False)
    return 0 if status["running"] else 1


# -- parser ----------------------------------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace) -> int:
    import shlex

    from compare.bench import BenchSettings, readme_table, run_bench, update_readme
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
        update_readme(Path(args.readme), results)
        console.print(f"{args.readme}: performance table regenerated from {path}")
        return 0
    if args.readme and not Path(args.readme).is_file():
        msg = f"--readme {args.readme} is not a file"
        raise ConfigError(msg)
    settings = BenchSettings(
        out_dir=Path(args.out), records=args.records, partitions=args.partitions, quick=args.quick,
        bootstrap_servers=args.bootstrap_servers, master=args.master, latency_seconds=args.latency_seconds,
        latency_rate=args.latency_rate,
        state_keys=args.state_keys, workloads=tuple(w for w in args.workloads.split(",") if w),
        command=shlex.join(["dmk", *args.argv]), timeout_s=args.timeout,
        baseline=Path(args.baseline) if args.baseline else None, kafka_security=args.kafka_security,
    )
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


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error of ``dmk`` (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (<prog> --help)`` on one line and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dmk",
        description="dstream-migration-kit: replay identical Kafka data through DStream and Structured "
        "Streaming jobs and diff the outputs.",
        epilog=f"Environment: {BOOTSTRAP_ENV} (default --bootstrap-servers), DMK_SPARK_MASTER (Spark master, "
        "default local[2]).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    broker = commands.add_parser("broker", help="the embedded Kafka broker")
    broker_commands = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = broker_commands.add_parser("start", help="run an embedded broker in the foreground until Ctrl-C")
    start.add_argument("--port", type=int, default=9092, help="port on 127.0.0.1 (default 9092)")
    start.add_argument("--log", help="broker log file (default: a temp file)")
    start.set_defaults(func=cmd_broker_start)

    gen = commands.add_parser("gen", help="write a deterministic dataset (Parquet or JSON Lines) + manifest")
    gen.add_argument("--records", type=int, required=True, help="number of records")
    gen.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    gen.add_argument("--profile", choices=["clean", "messy"], default="clean", help="clean (default) or messy")
    gen.add_argument("--out", required=True, help="output file: .parquet or .jsonl")
    for name, (kind, text) in _GEN_KNOBS.items():
        gen.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, help=text + " (default: profile's)")
    gen.set_defaults(func=cmd_gen)

    cap = commands.add_parser("capture", help="snapshot a Kafka topic into a file, exactly (for dmk replay)")
    cap.add_argument("topic", help="the topic to capture")
    cap.add_argument("--out", required=True, help="capture file: .jsonl or .parquet (a manifest is written next to it)")
    cap.add_argument("--partitions", help="comma-separated partitions (default: every one)")
    cap.add_argument("--from", dest="from_", metavar="POSITION",
                     help="start: an offset (1200), ts:<epoch ms> or an ISO time (2026-11-25T10:00:00Z); "
                          "default the beginning")
    cap.add_argument("--until", metavar="POSITION", help="end (exclusive), as --from; default the end at start-up")
    cap.add_argument("--max-records", type=int, help="at most this many records from each partition")
    _add_bootstrap(cap)
    cap.set_defaults(func=cmd_capture)

    rep = commands.add_parser("replay", help="produce a dataset file or a capture into a Kafka topic")
    rep.add_argument("file", help="dataset file written by `dmk gen`, or a capture written by `dmk capture`")
    rep.add_argument("--topic", required=True, help="target topic (created if absent)")
    rep.add_argument("--partitions", type=int,
                     help="partitions of a new topic (default: the dataset's, or the capture's highest + 1)")
    rep.add_argument("--rate", type=float, help="target records/s (default: as fast as possible; a capture: its own "
                                                "timing)")
    rep.add_argument("--speed", type=float,
                     help="a capture: replay its records' original inter-arrival times this many times faster "
                          "(default 1: as captured)")
    rep.add_argument(
        "--timestamps", choices=["produce", "event"], default="produce",
        help="record timestamp: produce time (default) or the event time",
    )
    rep.add_argument(
        "--partition-by", choices=["key", "field"], default="key",
        help="murmur2 of the key, as Kafka's default partitioner (default), or the dataset's partition field",
    )
    rep.add_argument("--log", help="write the per-record produce log (seq, partition, offset, produced_ms) here")
    _add_bootstrap(rep)
    rep.set_defaults(func=cmd_replay)

    off = commands.add_parser("offsets", help="exact beginning and end offsets of a topic")
    off.add_argument("topic")
    off.add_argument("--json", action="store_true", help="print JSON (Spark's startingOffsets shape)")
    _add_bootstrap(off)
    off.set_defaults(func=cmd_offsets)

    cmp = commands.add_parser(
        "compare", help="replay a dataset through the legacy and the modern job, diff against the oracle, report",
        description="Replay one dataset through a legacy (DStream) and a modern (Structured Streaming) driver "
        "process, diff both against the exact pandas oracle, measure latency and throughput, and write a run "
        "directory (report.md, report.html, metrics.json, diff/). Exit code 0 iff both engines equal the oracle.",
    )
    cmp.add_argument("workload", help="a built-in workload (running_counts, windowed_counts, sessions, dedup, ysb, "
                     "join) or package.module:SPEC")
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

    jobs = commands.add_parser(
        "compare-jobs", help="your own DStream job and its Structured Streaming rewrite, unmodified, on a capture",
        description="Run two job scripts, each in its own process with the kit's stand-ins (pyspark.streaming.kafka; "
                    "format('kafka') without Spark's connector), on one replay each of a capture (dmk capture), and "
                    "compare their outputs by key. Placeholders: {bootstrap}, {topic}, {socket_host}, {socket_port}, "
                    "{input_dir}, {output_topic}, {output_dir}, {checkpoint}, {zookeeper} (a ZooKeeper run for "
                    "createStream, the run's brokers registered). Exit 0 if equivalent, 1 if not, 2 on "
                    "bad input or a job that crashed "
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
    _add_bootstrap(jobs)
    jobs.set_defaults(func=cmd_compare_jobs)

    mig = commands.add_parser(
        "migrate", help="a DStream job's migration plan, read from its source (never run) (docs/migrate.md)",
        description="Read a DStream job's source with Python's ast (the job is never imported or run) and report "
        "every StreamingContext, DStream, KafkaUtils and spark.streaming.* construct at its line: the Structured "
        "Streaming counterpart, the playbook section, whether the rewrite is mechanical, and the semantic trap to "
        "check, and its status: automatic, manual or unresolved. Markdown by default. Exit code 2 if the job "
        "cannot be read, is not Python 3, or uses no DStream (docs/migrate.md).",
    )
    mig.add_argument("job", metavar="JOB.py", help="the DStream job's source file")
    mig.add_argument("--json", action="store_true",
                     help='print {"job", "draft_runs", "verified", "summary", "findings": [{"line", "construct", '
                          '"counterpart", "playbook", "automatic", "note", "status"}]} instead of Markdown')
    mig.add_argument("--out", metavar="DRAFT.py",
                     help="also write a draft Structured Streaming job: the job's own code run per micro-batch (it "
                          "runs as written, or refuses to start naming the parts to port by hand)")
    mig.add_argument("--modern", metavar="NEW.py",
                     help="the Structured Streaming rewrite: say which findings it addressed, and print the "
                          "dmk compare-jobs command that proves it")
    mig.add_argument("--verify", action="store_true",
                     help="run the job and its draft (or --modern) through dmk compare-jobs on --input and print one "
                          "verdict: proven equal (exit 0), differs (1) or cannot verify (2)")
    mig.add_argument("--input", metavar="CAPTURE", help="with --verify: the capture both jobs are fed")
    mig.add_argument("--key", metavar="COL[,COL]", help="with --verify: the output's key (_1 for a printed pair)")
    mig.add_argument("--mode", choices=("final", "all", "batches"),
                     help="with --verify: compare-jobs' mode (default: batches for printed output, else final)")
    mig.add_argument("--args", metavar='"ARGS"', help='with --verify: both jobs\' arguments, with compare-jobs\' '
                     'placeholders, e.g. "{bootstrap} {topic}", "{socket_host} {socket_port}", "{input_dir}"')
    mig.add_argument("--input-kind", metavar="KIND[,KIND]", help="with --verify: compare-jobs' --input-kind")
    mig.add_argument("--output", metavar="OUTPUT", help="with --verify: compare-jobs' --output (default: from --args); "
                     "printed:LINE compares the stream the job prints at LINE with the draft's of the same line")
    mig.add_argument("--batch-records", type=int, metavar="N", help="with --verify: compare-jobs' --batch-records")
    mig.add_argument("--verify-out", metavar="DIR", help="with --verify: run directory (default runs/verify-<time>)")
    mig.add_argument("--timeout", type=float, default=600.0, help="with --verify: bound on each wait, in seconds")
    mig.add_argument("--legacy-python2", choices=("auto", "on", "off"), default="auto",
                     help="with --verify: run the original with dmk's Python 2 compatibility layer (compare-jobs "
                          "--legacy-python2); auto (default): when the plan has Python 2-era findings")
    _add_bootstrap(mig)
    mig.set_defaults(func=cmd_migrate)

    rpt = commands.add_parser("report", help="re-render report.md and report.html of a compare run directory")
    rpt.add_argument("run_dir", metavar="RUN_DIR")
    rpt.add_argument("--baseline", metavar="RUN_DIR",
                     help="a previous compare run: put every figure beside it, with its ratio; regressions marked")
    rpt.set_defaults(func=cmd_report)

    ckpt = commands.add_parser("checkpoint", help="inspect a legacy or modern checkpoint")
    ckpt_commands = ckpt.add_subparsers(dest="checkpoint_command", required=True, metavar="SUBCOMMAND")
    insp = ckpt_commands.add_parser(
        "inspect", help="what a checkpoint holds: batches, offsets, state (docs/cutover.md)",
        description="Describe a DStream checkpoint directory (read with Spark's own Checkpoint reader: batch "
        "duration, pending batches, the DStream graph, the kit's direct streams' offset ranges per batch) or a "
        "Structured Streaming checkpoint location (offsets and commits logs, watermark, state operators and "
        "their row counts). A directory of several query checkpoints is described query by query.",
    )
    insp.add_argument("directory", metavar="DIR")
    insp.add_argument("--json", action="store_true", help="machine-readable output")
    insp.add_argument("--master", help="Spark master to read with (default $DMK_SPARK_MASTER or local[2])")
    insp.add_argument("--no-row-counts", dest="row_counts", action="store_false",
                      help="modern: skip the state row counts (they start a local Spark session)")
    insp.set_defaults(func=cmd_checkpoint_inspect)

    cut = commands.add_parser(
        "cutover", help="startingOffsets (and state) that continue a stopped legacy job in a modern query",
        description="Read where a stopped legacy (DStream) job left off and print the startingOffsets JSON that "
        "makes a Structured Streaming query start exactly there. Refuses, saying why and how to resolve it, when "
        "the position is ambiguous (pending batches holding records; outputs beyond the position). "
        "See docs/cutover.md.",
    )
    cut.add_argument("source", choices=["checkpoint", "kafka", "zookeeper", "sqlite", "postgresql"],
                     help="where the legacy job kept its offsets")
    cut.add_argument("where", metavar="WHERE", help="the checkpoint directory, consumer group, ZooKeeper hosts, "
                     "SQLite file or PostgreSQL DSN")
    cut.add_argument("--consumer", help="the job's name in a ZooKeeper or SQL store")
    cut.add_argument("--topic", action="append", help="a topic of the legacy job (stores; repeat for several)")
    cut.add_argument("--legacy-output", metavar="DIR", help="the legacy job's output root in the kit's layout: "
                     "checked against the position (and exported from a SQL store)")
    cut.add_argument("--discard-beyond", action="store_true",
                     help="delete legacy outputs of batches beyond the position (the modern query redoes them)")
    cut.add_argument("--allow-pending", action="store_true",
                     help="checkpoint: start at the earliest pending batch that holds records")
    cut.add_argument("--write-options", metavar="FILE", help="merge startingOffsets into this JSON file of "
                     "Kafka source options")
    cut.add_argument("--seed-state", metavar="FILE", help="write the legacy job's last totals (Parquet) for the "
                     "modern query to continue (workloads whose state is totals)")
    cut.add_argument("--workload", help="the workload of --seed-state (name or package.module:SPEC)")
    cut.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    cut.add_argument("--master",
                     help="checkpoint: Spark master to read it with (default $DMK_SPARK_MASTER or local[2])")
    cut.add_argument("--bootstrap-servers", default=os.environ.get(BOOTSTRAP_ENV), metavar="HOST:PORT",
                     help=f"Kafka holding the topics (env {BOOTSTRAP_ENV}); needed for every source but checkpoint")
    _add_kafka_security(cut)
    cut.set_defaults(func=cmd_cutover)

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
    ben.add_argument("--workloads", default=",".join(("running_counts", "ysb")),
                     help="comma-separated (default running_counts,ysb)")
    ben.add_argument("--out", default=str(Path("benchmarks") / "results"),
                     help="results directory (default benchmarks/results)")
    ben.add_argument("--readme", metavar="FILE", help="regenerate FILE's performance table from the results")
    ben.add_argument("--from-results", metavar="JSON",
                     help="run nothing: regenerate --readme's table from this results file")
    ben.add_argument("--baseline", metavar="FILE",
                     help="a results file of an earlier run (bench-*.json): every figure beside it, with its ratio; "
                          "regressions marked (default: the previous run's latest.json in --out)")
    ben.add_argument("--timeout", type=float, default=1800, help="bound on each wait for an engine, s (default 1800)")
    ben.add_argument("--master", help="Spark master (default $DMK_SPARK_MASTER or local[2])")
    _add_bootstrap(ben)
    ben.set_defaults(func=cmd_bench)

    clu = commands.add_parser("cluster", help="a Spark standalone cluster on this machine (docs/deploy.md)")
    clu_commands = clu.add_subparsers(dest="cluster_command", required=True, metavar="SUBCOMMAND")
    for name, text in (("start", "start a master and workers on loopback"), ("stop", "stop them, leaving no process"),
                       ("status", "what runs: workers, cores, applications (exit code 1 if nothing)")):
        sub = clu_commands.add_parser(name, help=text)
        sub.add_argument("--dir",
                         help="the cluster's directory: state, logs (default $DMK_CLUSTER_DIR or ~/.dmk/cluster)")
        if name == "start":
            sub.add_argument("--workers", type=int, default=2, help="workers (default 2)")
            sub.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
            sub.add_argument("--memory", default="1g", help="executor memory per worker (default 1g)")
        if name == "status":
            sub.add_argument("--json", action="store_true", help="machine-readable output")
        sub.set_defaults(func=cmd_cluster)
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C, so every ``finally`` stops what the command started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated(signum)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (CI cancelling, ``timeout``, a closed terminal) run the same cleanup as Ctrl-C.

    Without this, Python dies at once on SIGTERM: the embedded broker goes with it (it dies with its parent) but a
    driver in a session of its own keeps running, retrying the dead broker. The handlers before are restored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a shell, a process inherits SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler: Ctrl-C or kill -INT must still stop a long command (a broker, a compare).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    before = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _stop_children() -> None:
    """Stop every compare driver still running.

    A concurrent run's other engine runs in a thread the signal did not unwind.
    """
    if "compare.supervise" in sys.modules:
        sys.modules["compare.supervise"].stop_all_drivers()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dmk``; returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = _redacted_argv(argv)
    handler: Callable[[argparse.Namespace], int] = args.func
    secrets: list[str] = []
    try:
        with _stopped_by_signals():
            try:
                from compare._validate import check_args
                from kit.kafka import java_client_settings, using_process_settings
                from kit.security import secret_values

                check_args(args, argv)
                args.kafka_security = _kafka_security(args)
                secrets = secret_values(args.kafka_security)
                # Every client this process creates (admin, producers, consumers, look-ups) connects the same way;
                # the drivers of compare, compare-jobs and bench get the same settings through their environment.
                with using_process_settings(java_client_settings(args.kafka_security)):
                    return handler(args)
            except KeyboardInterrupt:
                _stop_children()
                raise
    except KitError as exc:
        from kit.security import redact_text

        shown = redact_text(str(exc), secrets)
        from rich.markup import escape

        # soft_wrap: one line whatever the terminal's width (rich would break it at 80 columns in a pipe)
        err_console.print(f"[bold red]dmk {args.command}: error:[/bold red] {escape(shown)}", highlight=False,
                          soft_wrap=True)
        return 2
    except _Terminated as exc:
        err_console.print(f"stopped by {signal.Signals(exc.signum).name}")
        return 128 + exc.signum
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
