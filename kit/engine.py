"""The engine interface: how ``compare`` starts an engine's jobs, waits for them and reads what they did.

Two roles: :meth:`Engine.start` returns a :class:`RunHandle` (wait for the jobs, stop them);
:meth:`Engine.record` gives a :class:`RunRecord`, which reads back what a run produced from its output directory
(its batches, the offset ranges they processed, its output rows, dead letters and the records dropped as too late).

An engine is one way of running streaming jobs: the DStream driver (:mod:`legacy.engine`), the Structured
Streaming driver (:mod:`modern.engine`), and later a team's own job scripts. Each implements
:class:`Engine`; ``compare`` takes one from its registry by name (:mod:`compare.engines`) and never asks
which it holds. A run of an engine is described by a :class:`DriverConfig`: typed and frozen, the same object
in-process (tests, ``dmk bench``) and across the driver process boundary (``dmk compare`` writes it as JSON,
:mod:`compare.driver` reads it back). It holds what every engine shares; the engine's own options (batch interval,
trigger, offset store...) are a frozen type of the engine's, which it parses from a mapping
(:meth:`KitEngine.options`).

Example::

    engine = compare.engines.get_engine("modern")
    config = DriverConfig(engine="modern", bootstrap_servers="127.0.0.1:9092", topics={"events": "t"},
                          out_dir="out/modern", checkpoint_dir="ckpt/modern", dataset=spec,
                          jobs=(("running_counts", "default"),), options={"trigger": "1 second"})
    run = engine.start(spark, config)
    try:
        run.await_offsets({"t": {0: 2500, 1: 2500}}, timeout_s=120)
    finally:
        run.stop()
    engine.record(config.out_dir).batch_spans("running_counts")
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from kit import layout
from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.nexmark import NexmarkSpec, spec_from_dict
from kit.ranges import OffsetRange
from kit.sink import read_batches

__all__ = [
    "BATCH_PHASE_COLUMNS", "BATCH_SPAN_COLUMNS", "DEAD_LETTER_COLUMNS", "LATE_COLUMNS", "BatchFileOutputs",
    "BenchProfile", "CheckpointReport", "DriverConfig", "Engine", "Handover", "KitEngine", "OffsetRange",
    "RunHandle", "RunRecord", "option_items", "parse_options",
    "redacted_dsn", "redacted_options", "seconds", "written_lines",
]

BATCH_SPAN_COLUMNS = ("batch_ms", "started_ms", "ended_ms", "records", "processing_ms", "scheduling_ms")
"""The columns of :meth:`RunRecord.batch_spans`."""
BATCH_PHASE_COLUMNS = ("batch", "records")
"""The first columns of :meth:`RunRecord.batch_phases`; the phases (ms) follow."""
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "reason")
"""The columns of :meth:`RunRecord.dead_letters`: where each malformed record was, and why it was refused."""
LATE_COLUMNS = ("event_id", "topic", "partition", "offset", "detail")
"""The columns of :meth:`RunRecord.late_records`: the record dropped as too late, and the watermark it missed."""

Jobs = tuple[tuple[Any, Any], ...]
"""``(workload, variant)`` pairs as :func:`kit.workloads.resolve` takes them: names (or
``package.module:name`` references) across a process boundary; in-process also a
:class:`~kit.workloads.WorkloadSpec` and a builder function."""


@dataclass(frozen=True)
class DriverConfig:
    """One run of one engine: which jobs, over which topics, writing where, paced how.

    The engine's own settings are its ``options`` (batch interval or trigger, offset store, source options...):
    each engine owns their type, parses them from a mapping (:meth:`KitEngine.options`) and refuses unknown or
    invalid ones; this type carries what every engine shares.

    Attributes:
        engine: the engine's registry name (``"legacy"``, ``"modern"``).
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        out_dir: the run's output root (layout: :mod:`legacy.runner`, :mod:`modern.runner`).
        checkpoint_dir: the run's checkpoint directory (a local path or a URI every node reaches).
        dataset: the spec of the replayed dataset (its event-time rules: lateness, watermark delay); the kit's
            engines need it, a team's job script (:mod:`compare.jobs`) has none. Default: none.
        jobs: ``(workload, variant)`` pairs of the kit's engines. Default: none.
        app_name: the Spark application name of a driver process. Default ``"dmk"``.
        master: the Spark master of a driver process (default ``$DMK_SPARK_MASTER`` or ``local[2]``).
        timeout_s: bound on every wait of the run (start, drain, the last batches). Default 600.
        drain_timeout_s: how long a driver process waits for the harness to say where the input ends (the
            replay's length plus ``timeout_s``). Default: ``timeout_s``.
        partitions: partitions of each input topic (legacy: a receiver's rate cap covers all of them).
        options: the engine's own options: a mapping of them by name (from a file or a caller), or the engine's
            options object (:class:`legacy.engine.LegacyOptions`, :class:`modern.engine.ModernOptions`). Default:
            the engine's defaults. A password in them (an offset store's DSN) is redacted in the config file and
            the repr; the driver process gets the real one from its environment.
        sys_path: directories a driver process puts first on ``sys.path`` (where the jobs' modules are).
        spark_conf: Spark settings of a driver process's session, applied when it starts (e.g. Spark's event
            log, from which ``dmk compare`` counts the tasks of each batch). Default: none.
        kafka_security: Kafka client settings in the Java client's names (``security.protocol``,
            ``sasl.jaas.config``, ``ssl.*``...; :func:`kit.kafka.java_client_settings`) for every client of the
            run: the legacy ``kafkaParams``, the modern ``kafka.*`` options, the driver's own clients. In a config
            file its secrets are redacted (:func:`kit.security.redact_settings`); the driver process gets the real
            ones from its environment (``compare.driver.KAFKA_SECURITY_ENV``). Default: none.
    """

    engine: str
    bootstrap_servers: str
    topics: Mapping[str, str]
    out_dir: str
    checkpoint_dir: str
    dataset: DatasetSpec | NexmarkSpec | None = None
    jobs: Jobs = ()
    app_name: str = "dmk"
    master: str | None = None
    timeout_s: float = 600.0
    drain_timeout_s: float | None = None
    partitions: int = 4
    options: Any = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()
    spark_conf: Mapping[str, Any] = field(default_factory=dict)
    kafka_security: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        from kit.security import redact_settings

        shown = dataclasses.replace(self, kafka_security=redact_settings(self.kafka_security),
                                    options=redacted_options(self.options))
        fields = ", ".join(f"{f.name}={getattr(shown, f.name)!r}" for f in dataclasses.fields(self))
        return f"DriverConfig({fields})"

    def require_dataset(self) -> DatasetSpec | NexmarkSpec:
        """The dataset spec, which the kit's engines need.

        Raises:
            ConfigError: the config has none.
        """
        if self.dataset is None:
            msg = f"a {self.engine} run of the kit's workloads needs the replayed dataset's spec (dataset=DatasetSpec)"
            raise ConfigError(msg, field="dataset", expected="a DatasetSpec", actual=None)
        return self.dataset

    def to_json(self) -> str:
        """The config as a JSON object (``jobs`` must be names or references, not objects), secrets redacted.

        Raises:
            ConfigError: a job given as a spec or function object, which a JSON file cannot carry.
        """
        for workload, variant in self.jobs:
            if not isinstance(workload, str) or not isinstance(variant, str):
                msg = (
                    f"job ({workload!r}, {variant!r}) of a {self.engine} run cannot cross a process boundary: give "
                    "the workload and variant as names or package.module:name references"
                )
                raise ConfigError(msg, field="jobs", expected="(str, str) pairs", actual=(workload, variant))
        from kit.security import redact_settings

        raw = dataclasses.asdict(dataclasses.replace(self, options={}))
        raw["options"] = redacted_options(self.options)
        raw["jobs"] = [list(job) for job in self.jobs]
        raw["kafka_security"] = redact_settings(self.kafka_security)
        if isinstance(self.dataset, NexmarkSpec):  # its generator named, so that from_json reads it back as one
            raw["dataset"] = self.dataset.manifest_spec()
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DriverConfig:
        """The config :meth:`to_json` wrote.

        Raises:
            ConfigError: not a JSON object, an unknown key (kafka-python's words: "Unrecognized configs"), or
                a required key missing.
        """
        try:
            raw = json.loads(text)
        except ValueError as err:
            msg = f"a driver config must be a JSON object: {err}"
            raise ConfigError(msg, field="config", expected="JSON", actual=text[:80]) from None
        if not isinstance(raw, dict):
            msg = f"a driver config must be a JSON object, got {type(raw).__name__}"
            raise ConfigError(msg, field="config", expected="object", actual=type(raw).__name__)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            msg = f"Unrecognized configs: {unknown} (a driver config has {sorted(names)})"
            raise ConfigError(msg, field="config", expected=sorted(names), actual=unknown)
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
        missing = sorted(required - set(raw))
        if missing:
            msg = f"the driver config lacks {missing}"
            raise ConfigError(msg, field="config", expected=sorted(required), actual=sorted(raw))
        raw["dataset"] = spec_from_dict(raw["dataset"]) if raw.get("dataset") is not None else None
        raw["jobs"] = tuple(tuple(job) for job in raw.get("jobs", ()))
        raw["sys_path"] = tuple(raw.get("sys_path", ()))
        if not isinstance(raw.get("options", {}), dict):
            msg = f"a driver config's options must be a JSON object, got {raw['options']!r}"
            raise ConfigError(msg, field="options", expected="object", actual=raw["options"])
        return cls(**raw)

    def write(self, path: Path) -> None:
        """Write the config to ``path`` atomically (a reader never sees half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(self.to_json(), encoding="utf-8")
        temp.replace(path)

    @classmethod
    def read(cls, path: Path) -> DriverConfig:
        """The config written to ``path``.

        Raises:
            ConfigError: the file cannot be read, or holds no valid config.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            msg = f"cannot read the driver config {path}: {err}"
            raise ConfigError(msg, field="config", expected="a readable file", actual=str(path)) from None
        return cls.from_json(text)


class RunHandle(Protocol):
    """An engine's jobs, started (what :meth:`Engine.start` returns): wait for them, then stop them.

    What the run produced is read back by a :class:`RunRecord`, also after the handle is gone (another process).
    """

    def await_offsets(
        self, end_offsets: Mapping[str, Mapping[int, int]], *, timeout_s: float, extra_batches: int = 2
    ) -> None:
        """Wait until every job has processed every topic up to ``end_offsets`` and applied the last watermark.

        The watermark is applied by the batches after that: legacy runs ``extra_batches`` more batches, modern
        the query's no-data batch.

        Raises:
            RunTimeout: not reached within ``timeout_s``; says where each job was.
            Exception: a job failed (the engine's own error).
        """

    def stop(self) -> None:
        """Stop the jobs (not the Spark session they run in)."""


@runtime_checkable
class Engine(Protocol):
    """One way of running streaming jobs, as ``compare`` drives and measures it.

    The kit's engines are :class:`KitEngine`; a team's job scripts are one too (:class:`compare.jobs.ScriptEngine`).

    Attributes:
        name: the registry name, also the name of the run's outputs in reports.
        batches_by_clock: batches are cut by the clock whatever the processing (a DStream batch interval), so
            they can queue behind each other; False when the next batch starts when the last one ends.
    """

    name: str
    batches_by_clock: bool

    def session(self, config: DriverConfig) -> Any:
        """The Spark session (or context) a driver process runs ``config`` in; the caller stops it."""

    def start(self, spark: Any, config: DriverConfig, *, recover: bool = False) -> RunHandle:
        """Start ``config``'s jobs in ``spark``; ``recover``: continue from the checkpoint (a restarted driver).

        Raises:
            ConfigError: a job the engine cannot run with ``config``.
        """

    def exactly_once(self, config: DriverConfig) -> bool:
        """Whether ``config``'s jobs promise to process every input record exactly once.

        A verdict then holds them to it: nothing lost, nothing repeated.
        """

    def interval_s(self, config: DriverConfig) -> float:
        """``config``'s batch interval or trigger in seconds (0: each batch starts when the last one ends)."""

    def record(self, out_dir: str | Path, checkpoint_dir: Path | None = None) -> RunRecord:
        """What the run writing to ``out_dir`` produced, read back (:class:`RunRecord`).

        ``checkpoint_dir``: the run's checkpoint directory when it is local (a URI's files are for Spark to read);
        an engine may read there what its reports missed.
        """


@runtime_checkable
class RunRecord(Protocol):
    """What a run of an engine produced, read back from its output directory (:meth:`Engine.record`).

    It reads files only, so it works while the run goes on (progress bars), after it ended, and in another
    process than the one that ran it (``dmk compare``'s harness reads its driver processes' runs).
    """

    def batch_spans(self, job: str | None = None) -> pd.DataFrame:
        """One row per completed batch of ``job`` (default: the run's first job), columns :data:`BATCH_SPAN_COLUMNS`.

        ``scheduling_ms`` is the wait behind earlier batches. With the run's checkpoint directory an engine can
        add the batches its reports missed, such as the last one of a killed driver.
        """

    def batch_phases(self, job: str | None = None) -> pd.DataFrame:
        """Where each completed batch's time went, as the engine's Spark reports it.

        Columns :data:`BATCH_PHASE_COLUMNS` (``batch``: the key :meth:`batch_of` gives the batch's Spark jobs),
        then one column per phase in ms, in the order they happen (the engine's own names).
        """

    def batch_of(self, properties: Mapping[str, str]) -> str | None:
        """The :meth:`batch_phases` key of the batch a Spark job ran for, from the job's local properties.

        None: the job ran for no batch (or the engine cannot tell).
        """

    def processed_records(self) -> int:
        """Input records the run's jobs have processed so far (read while the run goes on)."""

    def processed_ranges(self, job: str) -> list[OffsetRange]:
        """The ranges of every completed batch of ``job`` (a batch re-run after a restart counts once)."""

    def late_dropped(self, job: str) -> int:
        """Records ``job`` dropped as later than its watermark allows."""

    def outputs(self, job: str) -> pd.DataFrame:
        """The rows ``job`` wrote, every batch's, as :func:`kit.sink.read_batches` frames them (empty if none yet)."""

    def dead_letters(self) -> pd.DataFrame:
        """The malformed records of every input (columns :data:`DEAD_LETTER_COLUMNS`; empty if none)."""

    def late_records(self, job: str) -> pd.DataFrame | None:
        """The records ``job`` dropped as too late (columns :data:`LATE_COLUMNS`).

        None: the job names no late records (it has no watermark, or its engine only counts them:
        :meth:`late_dropped`).
        """


class BatchFileOutputs:
    """The output part of a :class:`RunRecord` for a run that writes the kit's run directory (:mod:`kit.layout`).

    Every job's rows are batch files under ``<out>/<job>``, every input's dead letters keyed files under
    :func:`kit.layout.dead_letters`, and a job that names its late records writes them under
    :func:`kit.layout.late`.

    Example:
        >>> import tempfile
        >>> from kit.sink import write_batch
        >>> out = Path(tempfile.mkdtemp())
        >>> _ = write_batch(out / "counts", 1, pd.DataFrame({"key": ["a"], "count": [2]}))
        >>> record = BatchFileOutputs(out)
        >>> record.outputs("counts")[["key", "count"]].values.tolist(), len(record.dead_letters())
        ([['a', 2]], 0)
        >>> record.late_records("counts") is None
        True
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)

    def outputs(self, job: str) -> pd.DataFrame:
        """The batch files of ``job``."""
        return read_batches(self.out_dir / job)

    def dead_letters(self) -> pd.DataFrame:
        """Every input's dead-letter files, concatenated."""
        frames = [frame for d in layout.dead_letter_dirs(self.out_dir) if not (frame := read_batches(d)).empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(DEAD_LETTER_COLUMNS))

    def late_records(self, job: str) -> pd.DataFrame | None:
        """The files of ``<job>.late``; None when the job writes none."""
        directory = layout.late(self.out_dir, job)
        if not directory.is_dir():
            return None
        rows = read_batches(directory)
        return rows if not rows.empty else pd.DataFrame(columns=list(LATE_COLUMNS))


@dataclass(frozen=True)
class BenchProfile:
    """How ``dmk bench`` runs and judges one engine (:attr:`KitEngine.bench`): its settings, goals and limits.

    The limits are what was measured to limit the engine (benchmarks/results/profile.md), shown beside its
    figures when they miss a goal.

    Attributes:
        latency_intervals: the batch intervals or triggers of the latency runs (:meth:`KitEngine.paced`); the
            first is the engine's default, the only one of ``--quick``.
        latency_setting: that default in words (``"1 s batches"``).
        latency_goal_ms: the p99 goal (ms) at the default setting.
        state_interval: the interval or trigger of the state-growth runs.
        idle_what: what the engine runs without input (``"idle batch"``).
        idle_goal_ms: the goal (ms) for its median on running_counts at the default setting.
        idle_limit: what an idle batch or trigger does.
        throughput_limit: what limits the engine's throughput.
        latency_limit: what limits its latency: a template of the latency run's figures (``{setting}``,
            ``{batch_ms_median}``, ``{rate_rps}``...).
        state_growth_limit: why its state growth ratio is what it is.
        throughput_interval: the interval of the throughput runs. Default: none, the engine's default.
        state_growth_targeted: the state growth goal applies to it. Default False.
    """

    latency_intervals: tuple[str, ...]
    latency_setting: str
    latency_goal_ms: float
    state_interval: str
    idle_what: str
    idle_goal_ms: float
    idle_limit: str
    throughput_limit: str
    latency_limit: str
    state_growth_limit: str
    throughput_interval: str | None = None
    state_growth_targeted: bool = False


class CheckpointReport(Protocol):
    """What an engine's checkpoint holds, as :meth:`KitEngine.inspect_checkpoint` read it."""

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-able data (``dmk checkpoint inspect --json``)."""

    def describe(self) -> str:
        """The report as text for people."""


class Handover(Protocol):
    """Where a stopped job of the engine a migration leaves off left off (``dmk cutover``), and what it wrote.

    Attributes:
        sources: where such a job can have kept its position (``"checkpoint"``, stores by name).
        transactional: the stores that commit a batch's offsets in one transaction with its outputs.
    """

    sources: tuple[str, ...]
    transactional: tuple[str, ...]

    def checkpoint_position(self, checkpoint: str) -> tuple[dict[tuple[str, int], int], tuple[int, ...]]:
        """``(offsets, pending)`` of the checkpoint's last completed batch.

        ``offsets``: (topic, partition) → the next offset after it; ``pending``: the times of the started, not
        completed batches that hold (or may hold) records.

        Raises:
            ConfigError: the checkpoint holds no offsets.
        """

    def checkpoint_state(self, checkpoint: str) -> tuple[int, list[tuple[Any, Any]]]:
        """``(batch time, (key, state) pairs)``: the job's keyed state at the checkpoint's last completed batch.

        Raises:
            ConfigError: the checkpoint does not hold it there (saying what to do instead).
        """

    def stored_offsets(
        self, kind: str, where: str, consumer: str, topics: Sequence[str], bootstrap_servers: str | None,
    ) -> dict[tuple[str, int], int]:
        """(topic, partition) → offset that the store ``kind`` at ``where`` holds for ``consumer``."""

    def export_committed(self, kind: str, where: str, consumer: str, out: Path) -> None:
        """Write the outputs a transactional store committed for ``consumer`` as batch files under ``out``."""

    def completed_batches(self, out: Path) -> pd.DataFrame:
        """Per batch of the outputs under ``out``, the ranges it read (empty: ``out`` holds none).

        Columns ``batch, topic, partition, from_offset, until_offset`` (and maybe more).
        """


@runtime_checkable
class KitEngine(Engine, Protocol):
    """An engine that runs the kit's workloads (legacy, modern): it resolves them, and sets their batch pace and cap.

    It also reads its own checkpoints, and names the ways a compare run can set it up.

    Attributes:
        cap_share: the share of a batch's records to give :meth:`capped` so that no partition of an evenly
            partitioned stream reads past its even share of the batch: 1.0 when the cap holds each partition
            (legacy), less when one cap for the whole batch is split over partitions by lag (modern: 0.8).
        modes: named ways of running it (``dmk compare --legacy-mode``): mode → the :class:`DriverConfig`
            fields it sets. Empty: the engine has one way.
        handover: where a stopped job of it left off (``dmk cutover``); None when a migration does not leave it.
        bench: how ``dmk bench`` runs and judges it.
        python2_layer: what the engine's Python 2 compatibility layer gives a team's job script
            (``--legacy-python2``), in words; None: it has none.
        refused_script_inputs: input kind → why a team's job script on this engine cannot be fed it, and what to
            do instead (``dmk compare-jobs --input-kind``).
    """

    cap_share: float
    bench: BenchProfile
    python2_layer: str | None
    refused_script_inputs: Mapping[str, str]
    modes: Mapping[str, Mapping[str, Any]]
    handover: Handover | None

    def owns_checkpoint(self, location: str) -> bool:
        """Whether ``location`` (a local directory, or a URI the engine reads with Spark) is a checkpoint of it."""

    def inspect_checkpoint(
        self, location: str, master: str | None = None, *, row_counts: bool = False
    ) -> list[CheckpointReport]:
        """What the checkpoint at ``location`` holds (one report per query checkpoint under it).

        ``master``: a Spark master to read it with (default: none unless the engine needs Spark for it);
        ``row_counts``: count state rows (needs Spark).

        Raises:
            ConfigError and the engine's checkpoint errors: ``location`` is no checkpoint of the engine.
        """

    def resolve(self, workload: Any, variant: Any = "default") -> Any:
        """The :class:`~kit.workloads.Job` running ``variant`` of ``workload`` on this engine.

        Raises:
            ConfigError: unknown workload or variant, or a reference that cannot be imported.
        """

    def paced(self, config: DriverConfig, interval: str) -> DriverConfig:
        """``config`` with its batch interval (or trigger) set to ``interval`` (``"0.5 s"``, ``"1 second"``)."""

    def options(self, config: DriverConfig) -> Any:
        """``config``'s options as the engine's frozen options object, parsed from a mapping if need be.

        Raises:
            ConfigError: an unknown option, or an invalid value: the message names it and the fix.
        """

    def plain(self, config: DriverConfig) -> DriverConfig:
        """``config`` without what outlives a run (offset stores, receivers' groups, checkpoint fingerprints).

        How a driver's warm-up runs the job's code before the measured run (:mod:`compare.driver`).
        """

    def capped(
        self, config: DriverConfig, records_per_batch: float, shares: Mapping[str, float] | None = None
    ) -> DriverConfig:
        """``config`` with each batch reading at most ``records_per_batch`` records (at least 1), in the engine's cap.

        ``shares``: input name → the fraction of the stream's records that input carries. Each input then reads at
        most its share of ``records_per_batch``, so every input of a batch spans the same event time, and a job of
        the stream's small inputs (Nexmark's persons and auctions) as little as one of the whole stream. None:
        the cap holds each input as if it were the whole stream.

        Set the batch interval (:meth:`paced`) first: a cap per second (legacy) depends on it.
        """


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|minutes?)\s*$")


def seconds(interval: str) -> float:
    """Seconds of a batch interval or trigger: ``"0.5 s"``, ``"500 milliseconds"``, ``"1 second"``.

    Example:
        >>> seconds("500 milliseconds"), seconds("0.5 s"), seconds("2 minutes")
        (0.5, 0.5, 120.0)

    Raises:
        ConfigError: not ``<number> <unit>`` with a unit of milliseconds, seconds or minutes.
    """
    match = _DURATION.match(interval)
    if match is None:
        msg = f"interval {interval!r} is not '<number> <unit>' with unit ms, s, seconds or minutes"
        raise ConfigError(msg, field="interval", expected="e.g. '1 second'", actual=interval)
    value, unit = match.groups()
    scale = (
        0.001 if unit.startswith("m") and not unit.startswith("minute")
        else 60.0 if unit.startswith("minute")
        else 1.0
    )
    return float(value) * scale


def written_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a log another process may be appending to; ``[]`` when there is no log yet.

    A last line without its newline is still being written, and is left out.
    """
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]  # whatever follows the last newline is incomplete
    return [json.loads(line) for line in lines if line.strip()]


def option_items(options: Any) -> dict[str, Any]:
    """An engine's options as a plain dict by name: a mapping as given, an options object's fields.

    Example:
        >>> option_items({"trigger": "1 second"})
        {'trigger': '1 second'}
    """
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return dict(options)


def redacted_options(options: Any) -> dict[str, Any]:
    """An engine's options as a JSON-able dict, every password in a text value (a DSN's) replaced by ``***``.

    Example:
        >>> redacted_options({"offset_store": "postgresql://dmk:secret@db/offsets", "stream": "direct"})
        {'offset_store': 'postgresql://dmk:***@db/offsets', 'stream': 'direct'}
    """
    return {name: redacted_dsn(value) if isinstance(value, str) else dict(value) if isinstance(value, Mapping)
            else value for name, value in option_items(options).items()}


def parse_options(cls: type, engine: str, options: Any) -> Any:
    """``options`` (a mapping by name, or already a ``cls``) as the frozen dataclass ``cls`` of ``engine``.

    Raises:
        ConfigError: an option ``cls`` does not have (kafka-python's words: "Unrecognized options"), or one its
            own validation refuses.
    """
    if isinstance(options, cls):
        return options
    given = option_items(options)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        msg = (f"Unrecognized options of the {engine} engine: {unknown}; remove them, or use its options "
               f"{names}")
        raise ConfigError(msg, field="options", expected=names, actual=unknown)
    return cls(**given)


def redacted_dsn(dsn: str) -> str:
    """``dsn`` as written, with its password replaced by ``***`` (key=value and URL forms).

    This is how a config file or a report shows an offset store's address.

    Example:
        >>> redacted_dsn("postgresql://dmk:secret@db:5432/offsets"), redacted_dsn("host=db password='s e'")
        ('postgresql://dmk:***@db:5432/offsets', 'host=db password=***')
    """
    dsn = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", r"\1***", dsn)
    return re.sub(r"(://[^:/@?]*):[^@/?]*@", r"\1:***@", dsn)
