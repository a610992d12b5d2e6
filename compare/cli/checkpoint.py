"""``dmk checkpoint inspect`` and ``dmk cutover``: what a checkpoint holds, and where a legacy job left off."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compare.cli.common import BOOTSTRAP_ENV, _add_kafka_security, _columns, err_console

if TYPE_CHECKING:
    from compare.cli.common import Commands

__all__ = ["add_checkpoint", "add_cutover"]


def _seed_check(args: argparse.Namespace, state_in_checkpoint: bool) -> str:
    """What becomes of a seed in the modern job, for the cutover's report."""
    from kit import workloads

    if args.state_from:
        what = ("its updateStateByKey state at its last completed batch, per" if state_in_checkpoint
                else "its last output row per")
        return (f"the legacy job's {what} {', '.join(_columns(args.key))} (from {args.state_from}): your modern "
                "job continues from it (docs/cutover.md#your-own-job)")
    carry = workloads.get(args.workload).carry
    if carry.seeded:
        dropped = (", behind the legacy job's watermark (too-late records dropped as the legacy job would)"
                   if carry.seeds_ids or carry.seed_from_input is not None else "")
        return (f"the modern job seeds its state store with it{dropped} and checks it key for key after its first "
                "batch (<out>/<job>.seed_check.json)")
    return "the modern job adds it to its output rows (totals that are not event counts: no state store to check)"


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
        checkpoint_seed,
        is_dstream_checkpoint,
        own_seed,
        plan_cutover,
        plan_rewind,
        read_position,
        read_state_from,
        rewound_spec,
        seed_state,
        state_seed,
        write_options,
        write_seed,
        write_suppress,
    )
    from kit.errors import ConfigError

    output = None
    state_in_checkpoint = False
    if args.state_from or args.key or args.state_columns:
        _check_state_from_args(args)
        state_in_checkpoint = is_dstream_checkpoint(args.state_from)
        if args.state_columns and not state_in_checkpoint:
            msg = (f"--state-columns names the fields of a state read from a checkpoint; {args.state_from} is an "
                   "output, whose rows have their own columns: leave it out")
            raise ConfigError(msg, field="state_columns", expected="--state-from CHECKPOINT", actual=args.state_from)
        if not state_in_checkpoint:  # read (or refused) before Spark starts
            output = read_state_from(args.state_from, args.bootstrap_servers)
    elif args.seed_state and not args.workload:
        msg = "--seed-state needs --workload: the legacy job whose state seeds the modern query"
        raise ConfigError(msg, field="workload", expected="a workload name or package.module:SPEC", actual=None)
    if args.seed_state and not args.state_from:
        carried_spec(args.workload)  # refuse before --discard-beyond deletes anything
    if args.rewind or args.suppress:
        _check_rewind_args(args)
        rewound_spec(args.workload)
    source = PositionSource(args.source, args.where, consumer=args.consumer, topics=tuple(args.topic or ()),
                            bootstrap_servers=args.bootstrap_servers)
    if args.source == "checkpoint" and args.master:
        from kit.spark import spark_context

        spark_context("dmk-cutover", args.master)  # the checkpoint is read with Spark's classes
    position = read_position(source, allow_pending=args.allow_pending)
    # Everything is computed (and refused) before anything is written or discarded.
    rewound = seed = None
    if args.state_from:  # a team's own job's state, read and checked before anything is written
        planned = plan_cutover(position, dry_run=True)
        key = _columns(args.key)
        seed = (checkpoint_seed(planned, args.state_from, key, _columns(args.state_columns))
                if state_in_checkpoint else own_seed(planned, output, key))
    elif args.rewind or args.seed_state:
        planned = plan_cutover(position, legacy_output=args.legacy_output, discard_beyond=args.discard_beyond,
                               dry_run=True)
        if args.rewind:
            rewound = plan_rewind(planned, args.workload, args.bootstrap_servers)
        else:  # a sessions seed reads Kafka and checks the legacy output: refused before anything is discarded
            seed = state_seed(planned, args.workload, args.bootstrap_servers)
    plan = plan_cutover(position, legacy_output=args.legacy_output, discard_beyond=args.discard_beyond)
    seeded: int | None = None
    if args.state_from and seed is not None:
        write_seed(seed, args.seed_state)
        seeded = len(seed)
    elif args.seed_state:
        seeded = seed_state(plan, args.workload, args.seed_state, rows=seed)
    if rewound is not None:
        write_suppress(rewound, args.suppress)
    if args.write_options:
        write_options(rewound or plan, args.write_options)
    if args.json:
        payload = plan.to_json()
        if seeded is not None:
            payload["seed_state"] = {"path": args.seed_state, "keys": seeded,
                                     "bytes": Path(args.seed_state).stat().st_size,
                                     "check": _seed_check(args, state_in_checkpoint)}
        if rewound is not None:
            payload["position_startingOffsets"] = payload["startingOffsets"]
            payload["startingOffsets"] = rewound.starting_offsets()
            payload["rewind"] = {**rewound.to_json(), "suppress_file": args.suppress}
        print(json.dumps(payload, indent=2))
        return 0
    print((rewound or plan).starting_offsets_json())
    err_console.print(f"position read from the {source.describe()}", highlight=False)
    if plan.last_batch_ms is not None:
        err_console.print(f"last legacy batch within it: {plan.last_batch_ms}", highlight=False)
    if plan.discarded:
        err_console.print(f"discarded {len(plan.discarded)} legacy output file(s) of batches beyond it: "
                          f"{', '.join(map(str, plan.beyond))}", highlight=False)
    if seeded is not None:
        err_console.print(f"initial state ({seeded} keys, {Path(args.seed_state).stat().st_size:,} bytes) written to "
                          f"{args.seed_state}; {_seed_check(args, state_in_checkpoint)}", highlight=False)
    if rewound is not None:
        _print_rewind(rewound.to_json(), args.suppress)
    if args.write_options:
        err_console.print(f"startingOffsets written into {args.write_options}", highlight=False)
    for note in plan.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    return 0


def _check_state_from_args(args: argparse.Namespace) -> None:
    """``--state-from CHECKPOINT|OUTPUT --key COL --seed-state FILE``, for a job that is not a kit workload."""
    from kit.errors import ConfigError

    needs = {"--state-from": args.state_from, "--key": _columns(args.key), "--seed-state": args.seed_state}
    missing = [flag for flag, given in needs.items() if not given]
    if missing:
        msg = (f"a cutover carrying your own job's state needs {', '.join(missing)}: --state-from CHECKPOINT|"
               "kafka:TOPIC|sql:DSN#TABLE|DIR (its checkpoint, or where it writes its state) --key COL[,COL] "
               "--seed-state FILE")
        raise ConfigError(msg, field="state_from", expected=list(needs), actual=missing)
    clashing = [flag for flag, given in (("--workload", args.workload), ("--rewind", args.rewind)) if given]
    if clashing:
        msg = (f"--state-from is for your own job and {clashing[0]} for the kit's workloads: give one "
               "(a workload's state is read its own way)")
        raise ConfigError(msg, field="state_from", expected="one of them", actual=clashing)


def _check_rewind_args(args: argparse.Namespace) -> None:
    from kit.errors import ConfigError

    needs = {
        "--rewind": args.rewind, "--workload": args.workload, "--legacy-output": args.legacy_output,
        "--suppress": args.suppress, "--bootstrap-servers": args.bootstrap_servers,
    }
    missing = [flag for flag, given in needs.items() if not given]
    if missing:
        msg = (
            f"a rewound cutover needs {', '.join(missing)}: --rewind --workload W --legacy-output DIR --suppress FILE "
            "--bootstrap-servers HOST:PORT (it reads what the legacy job emitted and the records it processed, and "
            "writes the modern query's output filter)"
        )
        raise ConfigError(msg, field="rewind", expected=list(needs), actual=missing)
    if args.seed_state:
        msg = "--rewind and --seed-state carry state two ways: choose one (dedup's ids can take either)"
        raise ConfigError(msg, field="rewind", expected="one of them", actual="both")


def _print_rewind(report: dict[str, Any], suppress: str) -> None:
    for part in report["partitions"]:
        err_console.print(f"{part['topic']}-{part['partition']}: starts at {part['start']}, {part['reread']} records "
                          f"before the position {part['position']} read again", highlight=False)
    err_console.print(
        f"rewound for {report['rewound_for']}; legacy watermark {report['legacy_watermark_ms']} (next "
        f"{report['legacy_next_watermark_ms']}); the filter in {suppress} drops {report['filter']}", highlight=False)


def add_checkpoint(commands: Commands) -> None:
    """Add ``dmk checkpoint``'s parser to ``commands``."""
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


def add_cutover(commands: Commands) -> None:
    """Add ``dmk cutover``'s parser to ``commands``."""
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
    cut.add_argument("--seed-state", metavar="FILE", help="write the legacy job's state (Parquet) for the "
                     "modern query to continue (totals, dedup's ids seen, open sessions with --bootstrap-servers: "
                     "its state store is seeded with it and checked at its first batch)")
    cut.add_argument("--state-from", metavar="CHECKPOINT|OUTPUT", help="your own job (not one of the kit's "
                     "workloads): its updateStateByKey state from its checkpoint (the position's, when it holds the "
                     "state of the last completed batch), or from the output that re-emits it, its last row per --key "
                     "(kafka:TOPIC, sql:DSN#TABLE or the directory of its JSON-lines/CSV/Parquet files), into "
                     "--seed-state")
    cut.add_argument("--key", metavar="COL[,COL]", help="--state-from: the output's (or the state's) key columns")
    cut.add_argument("--state-columns", metavar="COL[,COL]", help="--state-from CHECKPOINT: names of the state's "
                     "fields (a tuple state needs them; default: 'state' for one value, a dict's keys)")
    cut.add_argument("--workload", help="the workload of --seed-state or --rewind (name or package.module:SPEC)")
    cut.add_argument("--rewind", action="store_true", help="workloads whose state is rewound (windows, sessions, "
                     "seen ids, join rows): start the modern query early enough to rebuild its state, and write the "
                     "filter dropping what the legacy job already emitted (--suppress)")
    cut.add_argument("--suppress", metavar="FILE", help="--rewind: where to write the modern query's output filter "
                     "(JSON; ModernOptions.suppress)")
    cut.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    cut.add_argument("--master",
                     help="checkpoint: Spark master to read it with (default $DMK_SPARK_MASTER or local[2])")
    cut.add_argument("--bootstrap-servers", default=os.environ.get(BOOTSTRAP_ENV), metavar="HOST:PORT",
                     help=f"Kafka holding the topics (env {BOOTSTRAP_ENV}); needed for every source but checkpoint")
    _add_kafka_security(cut)
    cut.set_defaults(func=cmd_cutover)
