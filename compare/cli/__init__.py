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

One module per command group, each adding its commands' parsers (:data:`COMMANDS`): :mod:`compare.cli.data`
(gen, capture, replay, offsets, broker), :mod:`compare.cli.runs` (demo, compare, compare-jobs, report),
:mod:`compare.cli.migrate`, :mod:`compare.cli.checkpoint` (checkpoint inspect, cutover), :mod:`compare.cli.bench`,
:mod:`compare.cli.cluster`; :mod:`compare.cli.common` holds what they share (the consoles, the Kafka options,
progress bars) and :mod:`compare.cli.validate` the checks of a command line before anything starts.

Example:
    $ dmk gen --records 100000 --profile messy --out events.parquet
    $ dmk replay events.parquet --topic events --partitions 4 --bootstrap-servers 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

from compare.cli import bench, checkpoint, cluster, data, migrate, runs
from compare.cli.common import BOOTSTRAP_ENV, _kafka_security, _redacted_argv, err_console
from kit import interrupts
from kit.errors import KitError

__all__ = ["main"]

COMMANDS = (
    runs.add_demo, data.add_broker, data.add_gen, data.add_capture, data.add_replay, data.add_offsets,
    runs.add_compare, runs.add_compare_jobs, migrate.add_migrate, runs.add_report, checkpoint.add_checkpoint,
    checkpoint.add_cutover, bench.add_bench, cluster.add_cluster,
)
"""Each command group's function adding one command's parser, in ``dmk --help``'s order."""


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
    for add in COMMANDS:
        add(commands)
    return parser


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (CI cancelling, ``timeout``, a closed terminal) run the same cleanup as Ctrl-C.

    Without this, Python dies at once on SIGTERM: the embedded broker goes with it (it dies with its parent) but a
    driver in a session of its own keeps running, retrying the dead broker. The handlers before are restored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT too: started in the background by a shell, a process inherits SIGINT ignored, and Python then installs
    # no KeyboardInterrupt handler, but Ctrl-C or kill -INT must still stop a long command (a broker, a compare).
    # interrupts.interrupt records each signal, so one that a C extension swallows is raised again.
    before = {signum: signal.signal(signum, interrupts.interrupt)
              for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        interrupts.clear()


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
                from compare.cli.validate import check_args
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
    except interrupts.Terminated as exc:
        err_console.print(f"stopped by {signal.Signals(exc.signum).name}")
        return 128 + exc.signum
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
