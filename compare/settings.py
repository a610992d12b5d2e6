"""What a ``dmk compare`` run does: :class:`CompareSettings`, validated before anything starts, and the replay rate.

:func:`default_rate` is the replay rate when the settings give none.

Example:
    >>> settings = CompareSettings("running_counts", out_dir=Path("runs/rc"), legacy_mode="direct-sqlite")
    >>> settings.checkpoint_root, legacy_modes()[settings.legacy_mode]
    ('runs/rc', {'stream': 'direct', 'offsets': 'sqlite', 'write_ahead_log': False})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.nexmark import NexmarkSpec
from kit.spark import check_location, on_this_host

__all__ = [
    "DEFAULT_RATE_SHARE", "NEEDS_STORE", "CompareSettings", "default_events_per_second", "default_rate", "legacy_modes",
]


def legacy_modes() -> Mapping[str, Mapping[str, Any]]:
    """``--legacy-mode`` → the driver config fields it sets: the modes of the engine a migration leaves.

    They are the engine's own (:attr:`kit.engine.KitEngine.modes`, :data:`legacy.engine.MODES`): the stream,
    where offsets live, and the receiver write-ahead log.
    """
    from compare.engines import ENGINES, get_engine

    return get_engine(ENGINES[0]).modes


NEEDS_STORE = {"direct-zookeeper": "the ZooKeeper hosts (host:port)", "direct-postgres": "a PostgreSQL DSN"}


@dataclass(frozen=True)
class CompareSettings:
    """What one compare run does.

    Attributes:
        workload: a built-in workload or ``package.module:SPEC`` (your own :class:`~kit.workloads.WorkloadSpec`).
        out_dir: the run directory (created; must be empty or absent).
        dataset: the dataset to generate (ignored when ``dataset_file`` is given). Default: the messy profile,
            20k records, as :data:`compare.inputs.TEST_DATASET`.
        dataset_file: a dataset file written by ``dmk gen`` (its manifest gives the spec).
        bootstrap_servers: Kafka to use; None starts the embedded broker for the run.
        rate_rps: replay rate in dataset records/s while the engine runs. Default: three quarters of what the
            batch caps let through (:func:`default_rate`, 750 for the default dataset).
        burst: produce everything before the driver starts instead (latency then measures the backlog).
        partitions: partitions of each input topic.
        legacy: your legacy builder (``package.module:function``), or another variant of the spec by name,
            instead of the spec's default variant.
        modern: your modern builder or a modern variant's name (``transform_with_state``), likewise.
        oracle: your oracle (``package.module:function``, ``fn(frame, dataset_spec) -> OracleResult``).
        legacy_mode: how the legacy job reads and keeps its offsets (:func:`legacy_modes`).
        offset_store: where that mode's store is: ZooKeeper hosts (``direct-zookeeper``, required), a
            PostgreSQL DSN (``direct-postgres``, required), the SQLite file (``direct-sqlite``; default
            ``<out>/legacy/offsets.sqlite``), or the consumer group (``direct-kafka-commit`` and receivers;
            default ``dmk-compare-<run id>``).
        batch_seconds: the legacy batch interval.
        trigger: the modern processing-time trigger (``"0 seconds"``: as fast as possible).
        concurrent: run both engines at once instead of one after the other.
        kill_driver: SIGKILL each engine's driver this many times at seeded random points of the replay, and
            restart it from its checkpoint.
        pause_broker_s: freeze the embedded broker (SIGSTOP) this long in the middle of each replay.
        seed: seeds the fault points (default: the dataset's seed).
        timeout_s: bound on each wait (driver start, drain); a clear :class:`RunTimeout` past it.
        master: Spark master for the drivers (default ``$DMK_SPARK_MASTER`` or local[2]).
        broker_port: port of the embedded broker (default: a free one).
        checkpoint_dir: a root for both engines' checkpoints (``<root>/<run id>/legacy-checkpoint`` and
            ``.../modern-checkpoint``); default the run directory. With a master whose executors run on
            other hosts it must be a URI every node reaches (``hdfs://``, ``s3a://``; docs/deploy.md).
        connect: a Spark Connect server's URL, ``sc://host:port``: the modern driver runs its queries there (the
            legacy driver stays local: DStreams cannot run over Connect). The server's Python workers need the kit,
            and its disk must hold the run directory (this machine, or a shared file system at the same path).
            Default: none.
        mode: ``"final"`` (default: the final result, last value per key in update mode) or ``"all"``: in update
            mode also every emitted row, in order per key, against the values each key passes through
            (:attr:`kit.workloads.WorkloadSpec.trajectory`); in append mode every row is compared either way.
        min_rows: warn when the oracle has fewer rows than this (``--min-rows``, default 10); with none at all
            the verdict is NOTHING COMPARED, a failure.
        kafka_security: Kafka client settings in the Java client's names (``--kafka-config``/``--kafka-option``:
            TLS/SASL, ``client.id``...) for every client of the run, both drivers' included. Its secrets never
            reach the run directory: the drivers get them through their environment. Default: none.
    """

    workload: str
    out_dir: Path
    dataset: DatasetSpec | NexmarkSpec | None = None
    dataset_file: str | None = None
    bootstrap_servers: str | None = None
    rate_rps: float | None = None
    burst: bool = False
    partitions: int = 4
    legacy: str | None = None
    modern: str | None = None
    oracle: str | None = None
    legacy_mode: str = "direct"
    offset_store: str | None = None
    batch_seconds: float = 1.0
    trigger: str = "0 seconds"
    concurrent: bool = False
    kill_driver: int = 0
    pause_broker_s: float = 0.0
    seed: int | None = None
    timeout_s: float = 600.0
    master: str | None = None
    broker_port: int | None = None
    checkpoint_dir: str | None = None
    connect: str | None = None
    kafka_security: Mapping[str, str] = field(default_factory=dict)
    min_rows: int = 10
    mode: str = "final"

    def __repr__(self) -> str:
        from kit.security import redact_settings

        shown = replace(self, kafka_security=redact_settings(self.kafka_security))
        return "CompareSettings(" + ", ".join(f"{f.name}={getattr(shown, f.name)!r}" for f in fields(self)) + ")"

    def __post_init__(self) -> None:
        modes = legacy_modes()
        if self.legacy_mode not in modes:
            msg = (
                f"legacy mode {self.legacy_mode!r} is not supported by dmk compare; "
                f"use one of {', '.join(modes)}."
            )
            raise ConfigError(msg, field="legacy_mode", expected=tuple(modes), actual=self.legacy_mode)
        if self.legacy_mode in NEEDS_STORE and not self.offset_store:
            msg = f"--legacy-mode {self.legacy_mode} needs --offset-store: {NEEDS_STORE[self.legacy_mode]}"
            raise ConfigError(msg, field="offset_store", expected=NEEDS_STORE[self.legacy_mode], actual=None)
        if self.legacy_mode == "direct" and self.offset_store:
            msg = (
                "--legacy-mode direct keeps offsets in the checkpoint only; --offset-store goes with a store mode "
                f"({', '.join(m for m in modes if m != 'direct')})"
            )
            raise ConfigError(msg, field="offset_store", expected=None, actual=self.offset_store)
        if self.mode not in ("final", "all"):
            msg = f"--mode must be final or all, got {self.mode!r}"
            raise ConfigError(msg, field="mode", expected=("final", "all"), actual=self.mode)
        if type(self.min_rows) is not int or self.min_rows < 0:
            msg = f"--min-rows must be a whole number >= 0, got {self.min_rows!r}"
            raise ConfigError(msg, field="min_rows", expected="an int >= 0", actual=self.min_rows)
        if self.rate_rps is not None and not self.rate_rps > 0:
            msg = f"--rate must be > 0 records/s, got {self.rate_rps}"
            raise ConfigError(msg)
        if self.partitions < 1:
            msg = f"--partitions must be >= 1, got {self.partitions}"
            raise ConfigError(msg)
        if self.kill_driver < 0:
            msg = f"--kill-driver must be >= 0, got {self.kill_driver}"
            raise ConfigError(msg)
        if (self.kill_driver or self.pause_broker_s) and self.burst:
            msg = (
                "fault injection happens during the replay: give a --rate (records/s) so the replay lasts, "
                "instead of a burst before start"
            )
            raise ConfigError(msg)
        if self.pause_broker_s and self.bootstrap_servers:
            msg = "--pause-broker freezes the embedded broker; it cannot pause a Kafka given with --bootstrap-servers"
            raise ConfigError(msg)
        if self.broker_port and self.bootstrap_servers:
            msg = "--broker-port is for the embedded broker; leave it out with --bootstrap-servers"
            raise ConfigError(msg)
        if not self.batch_seconds > 0:
            msg = f"--batch-seconds must be > 0, got {self.batch_seconds}"
            raise ConfigError(msg)
        if self.connect:
            from kit.connect import parse_url

            parse_url(self.connect)
        check_location(self.checkpoint_root, self.master, what="checkpoint root (--checkpoint-dir)")
        if not on_this_host(self.master) and (
            not self.bootstrap_servers
            or any(h.split(":")[0] in ("127.0.0.1", "localhost") for h in self.bootstrap_servers.split(","))
        ):
            msg = (
                f"the Spark master {self.master or '$DMK_SPARK_MASTER'} runs executors on other hosts, and they read "
                "Kafka themselves: the embedded broker (or a Kafka on localhost) is out of their reach. Pass "
                "--bootstrap-servers of a Kafka every node reaches."
            )
            raise ConfigError(
                msg,
                field="bootstrap_servers", expected="a Kafka reachable from every node", actual=self.bootstrap_servers,
            )

    def variant(self, engine: str) -> str:
        """What ``engine`` runs: your builder, a variant of the spec, or ``"default"``, the spec's default variant.

        Your builder is ``legacy`` or ``modern``, a ``package.module:function`` reference; without a colon it is
        the name of one of the spec's variants (:meth:`kit.workloads.WorkloadSpec.variant`).
        """
        from compare.engines import ENGINES  # the fields holding each engine's builder are named after it

        return (getattr(self, engine) if engine in ENGINES else None) or "default"

    @property
    def checkpoint_root(self) -> str:
        """Where the engines' checkpoints go: :attr:`checkpoint_dir`, else the run directory."""
        return self.checkpoint_dir or str(self.out_dir)


DEFAULT_RATE_SHARE = 0.75
"""The default replay rate's share of what the batch caps let through (:func:`default_rate`)."""


def default_rate(dataset: DatasetSpec | NexmarkSpec, batch_seconds: float = 1.0) -> float:
    """The default replay rate (records/s): :data:`DEFAULT_RATE_SHARE` of what the batch caps let through.

    The caps (:func:`compare.inputs.capped`) let half the lateness margin of event time through per batch.
    The rate is 750 records/s for the default dataset.

    At the caps' own rate an engine has no headroom: a backlog (the first batch's start-up, a pause, a
    restart) is never worked off, since no batch may take more than the rate brings in, and latency stays at
    the backlog's length for the rest of the run. A quarter of headroom lets it catch up.
    """
    return DEFAULT_RATE_SHARE * dataset.events_per_second * dataset.lateness_margin_ms / 2_000 / batch_seconds


def default_events_per_second(records: int) -> float:
    """``dmk compare``'s default event-time rate: 500 events/s, or ``records / 40`` when that is lower.

    A dataset then spans at least 40 s of event time: more than a session gap (30 s) plus the watermark delay
    (5 s), so every workload's oracle has rows (a sessions run of 3,000 records at 500 events/s spans 6 s and
    closes no session: NOTHING COMPARED).

    Example:
        >>> default_events_per_second(20_000), default_events_per_second(3_000)
        (500.0, 75.0)
    """
    return min(500.0, records / 40)
