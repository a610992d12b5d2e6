"""``dmk``'s checks of a command line, run before any broker, Spark session or driver starts.

:func:`check_args` refuses what the command would otherwise fail on later, or with a traceback: bootstrap servers
that are not ``host:port`` (from ``--bootstrap-servers`` or ``$DMK_BOOTSTRAP_SERVERS``), numbers out of range, an
input file that is not there, an output path that cannot be written, a job command that is not a command line,
a SQLite offset store that is not a database. Each refusal is a :class:`~kit.errors.ConfigError` naming the option
and the fix; the CLI prints it on one line and exits 2.

Example:
    >>> args = argparse.Namespace(command="capture", partitions="0,x", bootstrap_servers=None)
    >>> check_args(args, ["capture", "t", "--partitions", "0,x"])
    Traceback (most recent call last):
    ...
    kit.errors.ConfigError: --partitions: 'x' is not a partition number; give comma-separated partitions, e.g. 0,1,2
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from kit.errors import ConfigError

__all__ = ["BOUNDS", "check_args", "partition_list"]

_Rule = tuple[str, Callable[[float], bool]]
_POSITIVE: _Rule = ("> 0", lambda v: v > 0)
_AT_LEAST_1: _Rule = (">= 1", lambda v: v >= 1)
_NOT_NEGATIVE: _Rule = (">= 0", lambda v: v >= 0)
_PORT: _Rule = ("in 1..65535", lambda v: 0 < v < 65536)

BOUNDS: dict[str, dict[str, _Rule]] = {
    "demo": {"records": _POSITIVE, "partitions": _AT_LEAST_1},
    "broker": {"port": _PORT},
    "gen": {"records": _POSITIVE},
    "capture": {"max_records": _POSITIVE},
    "replay": {"partitions": _AT_LEAST_1, "rate": _POSITIVE, "speed": _POSITIVE},
    "compare": {"records": _POSITIVE, "partitions": _AT_LEAST_1, "timeout": _POSITIVE, "broker_port": _PORT,
                "pause_broker": _NOT_NEGATIVE},
    "compare-jobs": {"partitions": _AT_LEAST_1, "rate": _POSITIVE, "speed": _POSITIVE, "timeout": _POSITIVE,
                     "settle_batches": _NOT_NEGATIVE},
    "migrate": {"batch_records": _POSITIVE, "timeout": _POSITIVE, "settle_batches": _NOT_NEGATIVE},
    "bench": {"records": _POSITIVE, "timeout": _POSITIVE},
    "cluster": {"workers": _AT_LEAST_1, "cores": _AT_LEAST_1},
}
"""Per command, the numeric options (argparse ``dest``) and the range each must be in, when given."""

_SPARK_MEMORY = re.compile(r"\d+[kmgtp]?b?", re.IGNORECASE)


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _given(argv: Sequence[str], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in argv)


def partition_list(text: str, *, where: str = "--partitions") -> list[int]:
    """Comma-separated partition numbers (``0,2,5``).

    Raises:
        ConfigError: an entry that is not a whole number >= 0, or none at all.
    """
    partitions = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        if not entry.isdigit():
            msg = f"{where}: {entry!r} is not a partition number; give comma-separated partitions, e.g. 0,1,2"
            raise ConfigError(msg, field=where, expected="partition numbers >= 0", actual=text)
        partitions.append(int(entry))
    if not partitions:
        msg = f"{where}: {text!r} names no partition; give comma-separated partitions, e.g. 0,1,2"
        raise ConfigError(msg, field=where, expected="partition numbers >= 0", actual=text)
    return partitions


def _input_file(path: str, option: str, what: str) -> None:
    if not Path(path).is_file():
        state = "is a directory" if Path(path).is_dir() else "does not exist"
        msg = f"{option} {path} {state}; give {what}"
        raise ConfigError(msg, field=option, expected=what, actual=path)


def _output_file(path: str, option: str) -> None:
    """A file ``path`` can be written: not a directory, its parent a directory or one that can be made."""
    target = Path(path)
    if target.is_dir():
        msg = f"{option} {path} is a directory; give a file path"
        raise ConfigError(msg, field=option, expected="a file path", actual=path)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        msg = f"{option} {path}: cannot create its directory {parent} ({err.strerror}); give a writable path"
        raise ConfigError(msg, field=option, expected="a writable path", actual=path) from None
    if not os.access(parent, os.W_OK):
        msg = f"{option} {path}: the directory {parent} is not writable; give a writable path"
        raise ConfigError(msg, field=option, expected="a writable path", actual=path)


def _output_dir(path: str, option: str) -> None:
    """``path`` is, or can become, a directory (an existing regular file cannot)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        msg = f"{option} {path} is a file, not a directory; give a new or empty directory"
        raise ConfigError(msg, field=option, expected="a directory", actual=path)
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        msg = f"{option} {path}: {existing} is a file, so no directory can be made under it; give another path"
        raise ConfigError(msg, field=option, expected="a directory", actual=path)


def _command_line(text: str, option: str) -> None:
    try:
        argv = shlex.split(text)
    except ValueError as err:
        msg = (f"{option} {text!r} is not a command line ({err}); quote it as a shell would, e.g. "
               "\"python job.py {topic}\"")
        raise ConfigError(msg, field=option, expected="a shell command line", actual=text) from None
    if not argv:
        msg = f"{option} is empty; give the job's command, e.g. \"python job.py {{bootstrap}} {{topic}}\""
        raise ConfigError(msg, field=option, expected="a shell command line", actual=text)


def _sqlite_database(path: str) -> None:
    if not Path(path).is_file():
        msg = f"SQLite file {path} does not exist; give the file the legacy job kept its offsets in"
        raise ConfigError(msg, field="where", expected="a SQLite database file", actual=path)
    try:
        connection = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as err:
        msg = f"{path} is not a SQLite database ({err}); give the file the legacy job kept its offsets in"
        raise ConfigError(msg, field="where", expected="a SQLite database file", actual=path) from None


_MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn|(spark|mesos|k8s)://\S+"
)
"""The master URL forms Spark's SparkContext accepts (``SparkMasterRegex`` and the cluster managers)."""


def _spark_master(master: str, where: str) -> None:
    if not _MASTER.fullmatch(master.strip()):
        msg = (f"{where} {master!r} is not a Spark master URL; give local[N], local[*], spark://HOST:PORT (dmk cluster "
               "start prints one), yarn or k8s://...")
        raise ConfigError(msg, field="master", expected="a Spark master URL", actual=master)


def check_args(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Refuse a command line that cannot work, before anything starts (see the module docstring).

    Raises:
        ConfigError: the first problem found, naming the option and the fix.
    """
    from compare.cli.common import BOOTSTRAP_ENV
    from kit.broker import parse_bootstrap_servers
    from kit.kafka import resolve_client
    from kit.spark import MASTER_ENV

    if hasattr(args, "kafka_option"):  # a command with Kafka clients
        resolve_client()  # $DMK_KAFKA_CLIENT
    servers = getattr(args, "bootstrap_servers", None)
    if servers is not None:
        where = "--bootstrap-servers" if _given(argv, "--bootstrap-servers") else f"${BOOTSTRAP_ENV}"
        parse_bootstrap_servers(servers, where=where)
    for dest, (text, ok) in BOUNDS.get(args.command, {}).items():
        value = getattr(args, dest, None)
        if value is not None and not ok(value):
            msg = f"{_option(dest)} must be {text}, got {value:g}"
            raise ConfigError(msg, field=dest, expected=text, actual=value)
    master = getattr(args, "master", None)
    if master is not None or os.environ.get(MASTER_ENV):
        _spark_master(master or os.environ[MASTER_ENV], "--master" if master is not None else f"${MASTER_ENV}")
    check = _COMMANDS.get(args.command)
    if check is not None:
        check(args)


def _gen(args: argparse.Namespace) -> None:
    _output_file(args.out, "--out")


def _capture(args: argparse.Namespace) -> None:
    from kit.capture import _format

    if args.partitions is not None:
        partition_list(args.partitions)
    _format(Path(args.out))
    _output_file(args.out, "--out")


def _replay(args: argparse.Namespace) -> None:
    _input_file(args.file, "FILE", "a dataset (dmk gen) or a capture (dmk capture)")
    if args.log:
        _output_file(args.log, "--log")


def _demo(args: argparse.Namespace) -> None:
    if args.out:
        _output_dir(args.out, "--out")


def _broker(args: argparse.Namespace) -> None:
    if args.log:
        _output_file(args.log, "--log")


def _compare(args: argparse.Namespace) -> None:
    if args.out:
        _output_dir(args.out, "--out")
    if args.dataset:
        _input_file(args.dataset, "--dataset", "a dataset file written by dmk gen")


def _compare_jobs(args: argparse.Namespace) -> None:
    for option in ("legacy", "modern"):
        _command_line(getattr(args, option), "--" + option)
    if args.out:
        _output_dir(args.out, "--out")


def _bench(args: argparse.Namespace) -> None:
    if args.out:
        _output_dir(args.out, "--out")


def _cutover(args: argparse.Namespace) -> None:
    if args.source == "sqlite":
        _sqlite_database(args.where)
    if args.source == "checkpoint" and "://" not in args.where and not Path(args.where).is_dir():
        msg = (f"checkpoint directory {args.where} is not a directory; give the directory the legacy job passed to "
               "ssc.checkpoint() (or a URI Spark reads, hdfs://...)")
        raise ConfigError(msg, field="where", expected="a checkpoint directory", actual=args.where)


def _cluster(args: argparse.Namespace) -> None:
    from kit.cluster import CLUSTER_DIR_ENV, default_dir

    _output_dir(args.dir or str(default_dir()), "--dir" if args.dir else f"${CLUSTER_DIR_ENV}")
    memory = getattr(args, "memory", None)
    if memory is not None and not _SPARK_MEMORY.fullmatch(memory.strip()):
        msg = f"--memory {memory!r} is not a Spark memory size; give e.g. 512m or 1g"
        raise ConfigError(msg, field="memory", expected="a size like 1g", actual=memory)


_COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "demo": _demo, "broker": _broker, "gen": _gen, "capture": _capture, "replay": _replay, "compare": _compare,
    "compare-jobs": _compare_jobs, "bench": _bench, "cutover": _cutover, "cluster": _cluster,
}
