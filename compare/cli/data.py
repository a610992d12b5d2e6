"""The data commands: ``dmk gen``, ``capture``, ``replay``, ``offsets`` and ``broker start``."""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import TYPE_CHECKING

from rich.table import Table

from compare.cli.common import (
    _GEN_KNOBS,
    _add_bootstrap,
    _kafka,
    _progress_task,
    _spec_from_args,
    console,
    err_console,
)
from kit import layout
from kit.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from compare.cli.common import Commands
    from kit.replay import ReplayResult, ReplaySettings

__all__ = ["add_broker", "add_capture", "add_gen", "add_offsets", "add_replay"]


def cmd_gen(args: argparse.Namespace) -> int:
    from kit.dataset import generate_to_file

    if args.nexmark:
        return _gen_nexmark(args)
    given = [f"--{name.replace('_', '-')}" for name in _NEXMARK_KNOBS if getattr(args, name) is not None]
    if given:
        msg = f"{', '.join(given)}: Nexmark options; add --nexmark for a Nexmark dataset, or drop them"
        raise ConfigError(msg)
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
    console.print(f"sha256 {manifest['sha256']}  manifest {args.out}{layout.MANIFEST_SUFFIX}")
    from kit.workloads import span_warnings

    for warning in span_warnings(spec):
        err_console.print(f"warning: {warning}", markup=False)
    return 0


# Nexmark options of dmk gen (name: type, help); defaults live in kit.nexmark.NexmarkSpec.
_NEXMARK_KNOBS: dict[str, tuple[type, str]] = {
    "nexmark_layout": (str, "one: one topic, a 'type' field in each value (default); three: persons, auctions, bids"),
    "first_event_rate": (int, "events/s of event time at the start (Nexmark firstEventRate; default 10000)"),
    "next_event_rate": (int, "the rate shape's second rate (nextEventRate; default: the first, a constant rate)"),
    "rate_shape": (str, "sine (default) or square: how the rate moves between the two rates"),
    "out_of_order_group_size": (int, "events per out-of-order group, shuffled as the reference does (default 1: "
                                     "in order)"),
}
# dmk gen options that mean the same for a Nexmark dataset.
_SHARED_KNOBS = ("partitions", "late_fraction", "too_late_fraction", "allowed_lateness_ms", "lateness_margin_ms",
                 "malformed_fraction")


def _gen_nexmark(args: argparse.Namespace) -> int:
    from kit.nexmark import NexmarkSpec, nexmark_to_file

    others = [f"--{name.replace('_', '-')}" for name in _GEN_KNOBS
              if name not in _SHARED_KNOBS and getattr(args, name, None) is not None]
    if others:
        msg = (f"{', '.join(others)}: not options of dmk gen --nexmark (its options: --nexmark-layout, "
               "--first-event-rate, --next-event-rate, --rate-shape, --out-of-order-group-size and "
               f"{', '.join('--' + k.replace('_', '-') for k in _SHARED_KNOBS)})")
        raise ConfigError(msg)
    overrides = {name: getattr(args, name) for name in (*_SHARED_KNOBS, *_NEXMARK_KNOBS)
                 if getattr(args, name, None) is not None}
    if "nexmark_layout" in overrides:
        overrides["layout"] = overrides.pop("nexmark_layout")
    spec = NexmarkSpec.from_profile(args.profile, records=args.records, seed=args.seed, **overrides)
    started = time.monotonic()
    with err_console.status(f"generating {spec.records:,} Nexmark records..."):
        manifest = nexmark_to_file(spec, args.out)
    seconds = time.monotonic() - started
    title = f"{args.out} (Nexmark, {spec.layout} topic{'s' if spec.layout == 'three' else ''}, " \
            f"{manifest['records']:,} records, {seconds:.1f} s)"
    types = Table(title=title, show_header=True)
    types.add_column("type")
    types.add_column("valid records", justify="right")
    if spec.layout == "three":
        types.add_column("topic")
    for i, (kind, count) in enumerate(manifest["types"].items()):
        types.add_row(kind, f"{count:,}", *([("persons", "auctions", "bids")[i]] if spec.layout == "three" else []))
    console.print(types)
    kinds = Table(show_header=True)
    kinds.add_column("kind")
    kinds.add_column("records", justify="right")
    for kind, count in manifest["counts"].items():
        if count or kind in ("clean", "late", "too_late"):
            kinds.add_row(kind, f"{count:,}")
    console.print(kinds)
    console.print(f"sha256 {manifest['sha256']}  manifest {args.out}{layout.MANIFEST_SUFFIX}")
    return 0


def _do_replay(
    path: str, bootstrap_servers: str, settings: ReplaySettings, *, describe: str = "replay",
    frame: pd.DataFrame | None = None,
) -> tuple[ReplayResult, pd.DataFrame]:
    from kit.dataset import read_dataset
    from kit.replay import replay

    frame = read_dataset(path) if frame is None else frame
    with _progress_task(f"{describe} → {settings.topic}", len(frame)) as update:
        return replay(frame, bootstrap_servers, settings, on_progress=update), frame


def _print_replay(result: ReplayResult) -> None:
    several = sorted(result.topic_end_offsets) if len(result.topic_end_offsets) > 1 else None
    table = Table(title=f"replayed into {', '.join(repr(t) for t in several) if several else repr(result.topic)}")
    table.add_column("records", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("rate (rec/s)", justify="right")
    table.add_column("end offset per partition")
    offsets = [(f"{t}: ", result.topic_end_offsets[t]) for t in several] if several else [("", result.end_offsets)]
    ends = "; ".join(name + ", ".join(f"{p}:{o}" for p, o in sorted(e.items())) for name, e in offsets)
    table.add_row(f"{result.records:,}", f"{result.seconds:.2f}", f"{result.rate_rps:,.0f}", ends)
    console.print(table)


def cmd_capture(args: argparse.Namespace) -> int:
    from compare.cli.validate import partition_list
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
    from kit.dataset import TOPIC, read_dataset

    frame = read_dataset(args.file)  # a file that is no dataset is refused before a broker starts
    if TOPIC in frame:  # a dataset of several inputs (dmk gen --nexmark --nexmark-layout three): --topic prefixes them
        frame = frame.assign(**{TOPIC: args.topic + "-" + frame[TOPIC].astype(object)})
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

    def _stop(signum: int, frame: object) -> None:
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



# -- parsers ------------------------------------------------------------------------------------------------


def add_broker(commands: Commands) -> None:
    """Add ``dmk broker``'s parser to ``commands``."""
    broker = commands.add_parser("broker", help="the embedded Kafka broker")
    broker_commands = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = broker_commands.add_parser("start", help="run an embedded broker in the foreground until Ctrl-C")
    start.add_argument("--port", type=int, default=9092, help="port on 127.0.0.1 (default 9092)")
    start.add_argument("--log", help="broker log file (default: a temp file)")
    start.set_defaults(func=cmd_broker_start)


def add_gen(commands: Commands) -> None:
    """Add ``dmk gen``'s parser to ``commands``."""
    gen = commands.add_parser("gen", help="write a deterministic dataset (Parquet or JSON Lines) + manifest")
    gen.add_argument("--records", type=int, required=True, help="number of records")
    gen.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    gen.add_argument("--profile", choices=["clean", "messy"], default="clean", help="clean (default) or messy")
    gen.add_argument("--out", required=True, help="output file: .parquet or .jsonl")
    for name, (kind, text) in _GEN_KNOBS.items():
        gen.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, help=text + " (default: profile's)")
    gen.add_argument("--nexmark", action="store_true",
                     help="a Nexmark dataset (persons, auctions, bids as the reference generator makes them; "
                          "docs/nexmark.md) instead of the kit's events")
    for name, (kind, text) in _NEXMARK_KNOBS.items():
        choices = {"nexmark_layout": ["one", "three"], "rate_shape": ["sine", "square"]}.get(name)
        gen.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, choices=choices,
                         help=text + " (with --nexmark)")
    gen.set_defaults(func=cmd_gen)


def add_capture(commands: Commands) -> None:
    """Add ``dmk capture``'s parser to ``commands``."""
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


def add_replay(commands: Commands) -> None:
    """Add ``dmk replay``'s parser to ``commands``."""
    rep = commands.add_parser("replay", help="produce a dataset file or a capture into a Kafka topic")
    rep.add_argument("file", help="dataset file written by `dmk gen`, or a capture written by `dmk capture`")
    rep.add_argument("--topic", required=True,
                     help="target topic (created if absent); a dataset of three topics (dmk gen --nexmark "
                          "--nexmark-layout three) goes to TOPIC-persons, TOPIC-auctions and TOPIC-bids")
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


def add_offsets(commands: Commands) -> None:
    """Add ``dmk offsets``'s parser to ``commands``."""
    off = commands.add_parser("offsets", help="exact beginning and end offsets of a topic")
    off.add_argument("topic")
    off.add_argument("--json", action="store_true", help="print JSON (Spark's startingOffsets shape)")
    _add_bootstrap(off)
    off.set_defaults(func=cmd_offsets)
