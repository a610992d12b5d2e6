"""The contract of a run directory's ``metrics.json``: versioned dataclasses, written and read by the same types.

``dmk compare`` writes :class:`CompareMetrics`, ``dmk compare-jobs`` :class:`JobsMetrics`; the reports, the CLI's
summaries, ``dmk verify`` and the bench read them back through :func:`read_metrics` (or the classes' ``read``).
Each file carries ``"version"`` (:data:`VERSION`) and ``"kind"``; a file of another version, of no version (a
dmk before this contract) or of the other kind is refused with one line saying which file, what it holds and
the fix, never read with guessed defaults. A field that is added, removed or changes meaning bumps
:data:`VERSION`.

Example:
    >>> metrics = JobsMetrics(input="c.jsonl", records=3, key=("customer",), mode="final", output="topic",
    ...     equivalent=True, jobs_agree=True, modern_vs_legacy=DiffCounts(0, 0, 0, 3), summary="", jobs={},
    ...     legacy_python2=None, verdict="EQUIVALENT", warnings=())
    >>> JobsMetrics.from_json(metrics.to_json(), "metrics.json") == metrics
    True
    >>> try:
    ...     JobsMetrics.from_json({**metrics.to_json(), "version": 0}, "runs/x/metrics.json")
    ... except MetricsVersionError as err:
    ...     print(err)
    runs/x/metrics.json has metrics version 0; this dmk reads version 1: re-run the compare with this dmk
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from compare.diff import Check
from compare.measure import KeptUp
from kit import layout
from kit.errors import ConfigError

__all__ = [
    "METRICS_FILE",
    "VERSION",
    "BatchesCompared",
    "CompareMetrics",
    "DiffCounts",
    "EngineMetrics",
    "JobFigures",
    "JobsCutover",
    "JobsMetrics",
    "JobsOracle",
    "KeptUpFigures",
    "MetricsError",
    "MetricsVersionError",
    "OracleCounts",
    "Percentiles",
    "RunSettings",
    "read_metrics",
]

METRICS_FILE = layout.METRICS
"""The file's name in a run directory."""

VERSION = 1
"""The version this dmk writes and reads (``metrics.json``'s ``version``)."""

COMPARE = "compare"
JOBS = "compare-jobs"

class MetricsError(ConfigError):
    """A ``metrics.json`` that is not one this dmk wrote: missing, damaged, or of another shape.

    Attributes:
        path: the file.
    """

    def __init__(self, message: str, *, path: str, expected: object = None, actual: object = None) -> None:
        super().__init__(message, field="metrics", expected=expected, actual=actual)
        self.path = path


class MetricsVersionError(MetricsError):
    """A ``metrics.json`` of another :data:`VERSION` (``actual``: its version, None when it has none)."""


# -- the parts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Percentiles:
    """``p50``, ``p95``, ``p99`` and ``max`` of a set of values, all None when there were none (ms)."""

    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True)
class KeptUpFigures(KeptUp):
    """:class:`compare.measure.KeptUp`'s figures and the latency bound a run that keeps up stays within."""

    latency_bound_ms: float
    p99_within_bound: bool


@dataclass(frozen=True)
class EngineMetrics:
    """One engine's figures in a compare run (``metrics.json``'s ``engines.<engine>``); docs/compare.md."""

    rows_missing: int
    rows_unexpected: int
    rows_mismatched: int
    rows_matched: int
    dead_letters: int
    late_dropped: int
    throughput_rps: float
    latency_ms: Percentiles
    latency_after_startup_ms: Percentiles
    output_rows: int
    restarts: int
    kills_at_s: tuple[float, ...]
    broker_paused_at_s: tuple[float, ...]
    faults_after_replay: int
    lost_rows: int
    duplicated_rows: int
    input_records_lost: int
    input_records_repeated: int
    replay_seconds: float
    warmup_seconds: float | None
    replay_started_ms: int
    input_records: int
    kept_up: KeptUpFigures | None
    time_breakdown_ms: dict[str, float]


@dataclass(frozen=True)
class OracleCounts:
    """What the oracle expects: rows, dead letters, late drops."""

    rows: int
    dead_letters: int
    late_dropped: int


@dataclass(frozen=True)
class RunSettings:
    """The settings a compare ran with, as the report shows them (secrets redacted)."""

    rate_rps: float | None
    partitions: int
    legacy_mode: str
    connect: str | None
    offset_store: str | None
    kafka_security: dict[str, Any]
    batch_seconds: float
    mode: str
    trigger: str | None
    concurrent: bool
    kill_driver: int
    pause_broker_s: float
    driver_java_options: str
    legacy_job: str
    modern_job: str
    oracle: str


@dataclass(frozen=True)
class DiffCounts:
    """Rows missing, unexpected, mismatched and matched of one side against another (``OutputDiff.counts()``)."""

    rows_missing: int
    rows_unexpected: int
    rows_mismatched: int
    rows_matched: int

    def counts(self) -> dict[str, int]:
        """The four counts by name, as ``OutputDiff.counts()`` gives them."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# -- the two files -----------------------------------------------------------------------------------------


class _Document:
    """Encoding, decoding and the version and kind checks shared by the two ``metrics.json`` documents."""

    KIND: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The document as JSON-ready values, ``version`` and ``kind`` first."""
        return {"version": VERSION, "kind": self.KIND, **_encode(self)}

    @classmethod
    def from_json(cls, data: object, where: str) -> Self:
        """The document in ``data`` (read from ``where``, named in errors).

        Raises:
            MetricsVersionError: another version, or none.
            MetricsError: the other kind of run, or a field missing, unknown or of the wrong shape.
        """
        kind = cls.KIND
        if not isinstance(data, dict):
            msg = f"{where} is not a dmk metrics file (a JSON object); re-run the compare with this dmk"
            raise MetricsError(msg, path=where, expected="a JSON object", actual=type(data).__name__)
        version = data.get("version")
        if version != VERSION:
            held = "no metrics version (written by a dmk before versioned metrics)" if version is None \
                else f"metrics version {version}"
            msg = f"{where} has {held}; this dmk reads version {VERSION}: re-run the compare with this dmk"
            raise MetricsVersionError(msg, path=where, expected=VERSION, actual=version)
        if data.get("kind") != kind:
            msg = (f"{where} is the metrics of a dmk {data.get('kind')} run, not of a dmk {kind} run; give the "
                   f"--out of a dmk {kind} run")
            raise MetricsError(msg, path=where, expected=kind, actual=data.get("kind"))
        body = {k: v for k, v in data.items() if k not in ("version", "kind")}
        return typing.cast(Self, _decode(cls, body, where, ""))

    def write(self, run_dir: Path) -> Path:
        """Write ``run_dir/metrics.json``; return its path."""
        path = Path(run_dir) / METRICS_FILE
        path.write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, run_dir: Path) -> Self:
        """The ``metrics.json`` of ``run_dir``.

        Raises:
            MetricsError: no such file, a damaged one, or one of another kind or shape.
            MetricsVersionError: one of another version.
        """
        data, where = _load(Path(run_dir), cls.KIND)
        return cls.from_json(data, where)


@dataclass(frozen=True)
class CompareMetrics(_Document):
    """A ``dmk compare`` run's ``metrics.json`` (docs/compare.md lists every figure)."""

    KIND: ClassVar[str] = COMPARE

    workload: str
    summary: str
    records: int
    dataset: str
    verdict: str
    equivalent: bool
    checks: tuple[Check, ...]
    warnings: tuple[str, ...]
    min_rows: int
    engines_agree: bool
    faults_injected: bool
    oracle: OracleCounts
    engines: dict[str, EngineMetrics]
    settings: RunSettings


@dataclass(frozen=True)
class JobFigures:
    """One job's figures in a compare-jobs run (``metrics.json``'s ``jobs.<side>``).

    ``printed_stream`` only when the outputs are printed (the stream the rows were named from).
    """

    output_rows: int
    input_records: int
    input_kind: str
    seconds: float
    batches: int
    command: str
    throughput_rps: float | None
    result_latency_ms: int | None
    rows_compared: int
    printed_stream: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class BatchesCompared:
    """``--mode batches``: how many batches were compared, and the first that differs (batch, input, keys)."""

    compared: int
    first_differing: dict[str, Any] | None


@dataclass(frozen=True)
class JobsOracle:
    """The oracle's rows and each job's counts against them."""

    rows: int
    legacy_vs_oracle: DiffCounts
    modern_vs_oracle: DiffCounts


@dataclass(frozen=True)
class JobsCutover:
    """``--cutover-at``: where the legacy job was stopped and what the modern job continued from.

    ``position`` is the ``startingOffsets`` ``dmk cutover`` read from the stopped job's checkpoint; the seed is
    its state, read from ``state_from``: its last output row per key (``output``) or its ``updateStateByKey``
    state in the checkpoint (``checkpoint``); ``keys_seeded`` rows, ``seed_bytes`` of Parquet at ``seed_file``. The rows
    compared as the modern side are ``legacy_rows_before`` then ``modern_rows_after``, joined.
    """

    at_records: int
    position: dict[str, dict[str, int]]
    state_from: str
    seed_file: str
    keys_seeded: int
    seed_bytes: int
    legacy_rows_before: int
    modern_rows_after: int
    legacy_before: JobFigures


@dataclass(frozen=True)
class JobsMetrics(_Document):
    """A ``dmk compare-jobs`` run's ``metrics.json``.

    ``batches`` only in ``--mode batches``, ``oracle`` only with ``--oracle``, ``cutover`` only with
    ``--cutover-at`` (absent from the file otherwise; ``modern_vs_legacy`` then holds the joined output against
    the uninterrupted legacy run, and ``jobs.modern`` the modern job's run after the cutover).
    """

    KIND: ClassVar[str] = JOBS

    input: str
    records: int
    key: tuple[str, ...]
    mode: str
    output: str
    equivalent: bool
    jobs_agree: bool
    modern_vs_legacy: DiffCounts
    summary: str
    jobs: dict[str, JobFigures]
    legacy_python2: str | None
    verdict: str
    warnings: tuple[str, ...]
    batches: BatchesCompared | None = field(default=None, metadata={"omit_none": True})
    oracle: JobsOracle | None = field(default=None, metadata={"omit_none": True})
    cutover: JobsCutover | None = field(default=None, metadata={"omit_none": True})


def read_metrics(run_dir: Path) -> CompareMetrics | JobsMetrics:
    """The ``metrics.json`` of a compare or a compare-jobs run directory, as its kind says.

    Raises:
        MetricsError, MetricsVersionError: as :meth:`CompareMetrics.read`.
    """
    data, where = _load(Path(run_dir), COMPARE)
    kind = data.get("kind") if isinstance(data, dict) else None
    document: type[CompareMetrics] | type[JobsMetrics] = JobsMetrics if kind == JOBS else CompareMetrics
    return document.from_json(data, where)


# -- encoding ----------------------------------------------------------------------------------------------


def _load(run_dir: Path, kind: str) -> tuple[object, str]:
    path = run_dir / METRICS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8")), str(path)
    except FileNotFoundError:
        msg = f"{run_dir} is not a dmk {kind} run directory (no {METRICS_FILE}); give the --out of a {kind} run"
        raise MetricsError(msg, path=str(path), expected=METRICS_FILE, actual=None) from None
    except (OSError, ValueError) as err:
        msg = f"{path} cannot be read ({err}); re-run the compare"
        raise MetricsError(msg, path=str(path)) from None


def _encode(value: object) -> Any:  # noqa: ANN401 - JSON values
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in fields(value)
                if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _decode(tp: Any, data: object, where: str, at: str) -> Any:  # noqa: ANN401, C901 - a type and JSON values
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in typing.get_args(tp):
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner, data, where, at)
    if isinstance(tp, type) and is_dataclass(tp):
        if not isinstance(data, dict):
            _shape(where, at, f"an object ({tp.__name__})", data)
        hints = typing.get_type_hints(tp)
        known = [f for f in fields(tp) if f.init]
        unknown = sorted(set(data) - {f.name for f in known})
        if unknown:
            name = f"{at}.{unknown[0]}" if at else unknown[0]
            msg = f"{where}: {name} is not a field of {tp.__name__}; re-run the compare with this dmk"
            raise MetricsError(msg, path=where, expected=[f.name for f in known], actual=unknown)
        values = {}
        for f in known:
            name = f"{at}.{f.name}" if at else f.name
            if f.name in data:
                values[f.name] = _decode(hints[f.name], data[f.name], where, name)
            elif f.default is MISSING:
                _shape(where, name, "a value", None)
        return tp(**values)
    if origin is dict:
        _, inner = typing.get_args(tp)
        if not isinstance(data, dict):
            _shape(where, at, "an object", data)
        return {k: _decode(inner, v, where, f"{at}.{k}") for k, v in data.items()}
    if origin in (tuple, list):
        inner = typing.get_args(tp)[0]
        if not isinstance(data, list):
            _shape(where, at, "a list", data)
        return origin(_decode(inner, v, where, f"{at}[{i}]") for i, v in enumerate(data))
    return data


def _shape(where: str, at: str, expected: str, actual: object) -> typing.NoReturn:
    got = "nothing" if actual is None else type(actual).__name__
    msg = f"{where}: {at} should be {expected}, got {got}; re-run the compare with this dmk"
    raise MetricsError(msg, path=where, expected=expected, actual=actual)
