"""What the command groups share: the consoles, the Kafka options and connection, progress bars, dataset knobs."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from kit.dataset import DatasetSpec
    Commands = argparse._SubParsersAction[Any]
    """``dmk``'s subparsers, to which each command group adds its commands."""

__all__ = ["BOOTSTRAP_ENV", "KAFKA_CONFIG_ENV", "console", "err_console"]


BOOTSTRAP_ENV = "DMK_BOOTSTRAP_SERVERS"
KAFKA_CONFIG_ENV = "DMK_KAFKA_CONFIG"

console = Console(stderr=False)
err_console = Console(stderr=True)


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


def _columns(text: str | None) -> tuple[str, ...]:
    """A ``COL[,COL]`` option's names (``--key``, ``--state-columns``), blanks dropped; none for an absent option."""
    return tuple(name.strip() for name in (text or "").split(",") if name.strip())


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
def _progress_task(description: str, total: int | None) -> Iterator[Callable[..., None]]:
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


def _spec_from_args(args: argparse.Namespace) -> DatasetSpec:
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
