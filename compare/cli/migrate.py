"""``dmk migrate``: a DStream job's migration plan, its draft, and ``--verify``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compare.cli.common import _add_bootstrap, _columns, _compare_progress
from kit.errors import ConfigError

if TYPE_CHECKING:
    from compare.cli.common import Commands

__all__ = ["add_migrate"]


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
        job=args.job, input_file=args.input, key=_columns(args.key),
        out_dir=Path(args.verify_out or f"runs/verify-{time.strftime('%Y%m%dT%H%M%S')}"), args=args.args or "",
        mode=args.mode, modern=args.modern, draft_path=Path(args.out) if args.out else None,
        input_kind=args.input_kind, batch_records=args.batch_records, bootstrap_servers=args.bootstrap_servers,
        timeout_s=args.timeout, output=args.output, settle_batches=args.settle_batches,
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


def add_migrate(commands: Commands) -> None:
    """Add ``dmk migrate``'s parser to ``commands``."""
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
    mig.add_argument("--settle-batches", type=int, default=2,
                     help="with --verify: compare-jobs' --settle-batches, batches each job completes after its input "
                          "(default 2; a window sliding every N batches needs N)")
    mig.add_argument("--legacy-python2", choices=("auto", "on", "off"), default="auto",
                     help="with --verify: run the original with dmk's Python 2 compatibility layer (compare-jobs "
                          "--legacy-python2); auto (default): when the plan has Python 2-era findings")
    _add_bootstrap(mig)
    mig.set_defaults(func=cmd_migrate)
