"""Workload specifications: what each paired job computes, and the exact pandas oracle it is held to.

A workload is one computation written three times with the same name: ``legacy/workloads/<name>.py``
(DStreams), ``modern/workloads/<name>.py`` (Structured Streaming) and the oracle in
``kit/workloads/<name>.py`` (plain pandas over the dataset file, no Spark). The :class:`WorkloadSpec` in
that last module is the contract the three share: input topics, output columns, output mode, the
watermark delay, and which implementation variants exist and whether each must match the oracle.

The contract every implementation follows:

- Input: the Kafka topic(s) that :func:`kit.replay.replay` produced from a :mod:`kit.dataset` file (for a
  workload with two inputs, :meth:`WorkloadSpec.route` names each record's input). Records that
  :func:`kit.events.parse_event` rejects go to a dead-letter output (topic, partition, offset, reason). The
  Nexmark queries (:data:`NEXMARK_NAMES`, ``parse="nexmark"``) read a :mod:`kit.nexmark` stream instead, and
  :func:`kit.nexmark.parse_nexmark` decides, with the same reasons.
- Output rows carry the key and value columns, then ``last_input_ts``: the largest Kafka timestamp of the
  input records behind the row's current value. The sink (:mod:`kit.sink`) adds ``batch`` and
  ``emitted_at``; latency is ``emitted_at - last_input_ts``.
- The final result (:func:`final_result`) is derived the same way for every engine: the last value per key
  in update mode, all rows in append mode. Windows or sessions still open when the input ends are emitted
  by neither engine (nothing advances the watermark past them), and the oracle leaves them out too.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> spec = get("running_counts")
    >>> frame = generate(DatasetSpec.from_profile("messy", records=20_000, seed=7))
    >>> expected = spec.oracle(frame, DatasetSpec.from_profile("messy", records=20_000, seed=7))
    >>> int(expected.rows["count"].sum()) + len(expected.dead_letters) == len(frame)
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.nexmark import ONE_TOPIC_INPUT
from kit.workloads._contract import FIELDS, read_record

if TYPE_CHECKING:
    from kit.workloads.rewind import Rewind, RewindInput

__all__ = [
    "NAMES",
    "NEXMARK_NAMES",
    "NOT_CARRIED",
    "OracleResult",
    "StateCarry",
    "Variant",
    "WorkloadSpec",
    "final_result",
    "Job",
    "get",
    "job_id",
    "load_ref",
    "resolve",
    "parse_dataset",
    "span_warnings",
    "window_starts",
]

NAMES: tuple[str, ...] = ("running_counts", "windowed_counts", "sessions", "dedup", "ysb", "join")
"""Every built-in workload over the kit's events (:mod:`kit.dataset`), in the order the playbook presents them."""

NEXMARK_NAMES: tuple[str, ...] = (
    "nexmark_q0", "nexmark_q1", "nexmark_q2", "nexmark_q3", "nexmark_q4", "nexmark_q5", "nexmark_q7", "nexmark_q8",
    "nexmark_q11", "nexmark_q12",
)
"""The built-in Nexmark queries (docs/nexmark.md): workloads over a :mod:`kit.nexmark` stream (``parse="nexmark"``)."""

LAST_INPUT_TS = "last_input_ts"
"""Output column: largest Kafka timestamp (ms) of the input records behind a row's current value."""


@dataclass(frozen=True)
class Variant:
    """One implementation of a workload on one engine.

    Attributes:
        name: the variant's name in reports (``"default"`` for the main one).
        function: the builder's name in the engine's workload module (``build`` for the main one).
        equivalent: whether it must match the oracle exactly. False marks an implementation kept to show a
            migration trap (e.g. processing-time windows); its divergence is asserted, not hidden.
        note: one line on what it is.
        settle_ms: processing time after its last input is processed within which its last rows may still come
            (a DStream window emitting at its end, ``nexmark_q12``'s 10 s): a run of it is waited for that long
            before its output is read. 0: its rows come within the batch that read the input.
    """

    name: str
    function: str
    equivalent: bool = True
    note: str = ""
    settle_ms: int = 0


_DEFAULT = (Variant("default", "build"),)


@dataclass(frozen=True)
class OracleResult:
    """What a correct implementation outputs for a dataset.

    Attributes:
        rows: the final result (:func:`final_result`'s shape): key and value columns, no timestamps.
        dead_letters: ``seq, reason`` of every record the engines must dead-letter.
        late_dropped: ``seq`` of every record (per window for windowed workloads: ``seq, window_start``) the
            engines must drop as too late.
    """

    rows: pd.DataFrame
    dead_letters: pd.DataFrame
    late_dropped: pd.DataFrame


@dataclass(frozen=True)
class StateCarry:
    """How a cutover (``dmk cutover``) carries a job's state from the legacy job into the modern query.

    Attributes:
        how: ``"stateless"`` (nothing to carry: the starting offsets are the whole cutover), ``"totals"``
            (the modern query continues the legacy job's totals: :attr:`sum_columns` of the legacy job's last
            row per key are added to the modern query's, ``last_input_ts`` is their maximum), ``"rewound"``
            (``dmk cutover --rewind``: the modern query starts earlier, at the offsets :attr:`rewind` computes,
            and a filter drops its rows the legacy job already emitted: :mod:`kit.workloads.rewind`), or
            ``"not carried"`` (see :attr:`note`).
        sum_columns: the value columns that are totals (``"totals"`` only).
        note: for the docs and the cutover's refusal: what happens to the state, what to do instead.
        row_time: ``"rewound"`` only: an output row's event time, as an expression over the output columns that
            both Spark SQL and :meth:`pandas.DataFrame.eval` read (``"window_start + 10000"``: a window's end).
        rewind: ``"rewound"`` only: ``rewind(RewindInput) -> Rewind``, the workload's rule.
        row_inputs: ``"rewound"`` only, for a workload whose output row is made from named input records (a join's
            pair: ``("impression", "click")``): the modern job's frame carries ``<name>_topic``,
            ``<name>_partition`` and ``<name>_offset`` for each, before the runner keeps the spec's columns, and
            the cutover's filter drops the rows whose inputs all lie below the position (the legacy job's), not
            rows by time and key (:func:`kit.workloads.rewind.rewind_pairs`).
        counts_events: ``"totals"`` only: the totals are each key's count of valid events (``count``) and their
            newest Kafka timestamp, so the modern query can hold them in Spark's state store, seeded and checked
            (:mod:`modern.seed`); other totals are added to the modern query's output instead.
        seeds_ids: ``"rewound"`` workloads whose state is the ids of their output rows
            (:attr:`WorkloadSpec.key_columns`), each remembered until the watermark passes its :attr:`row_time`
            plus the delay (``dedup``): every id the state holds was emitted, so ``dmk cutover --seed-state`` can
            carry them from the legacy job's outputs instead of rewinding, into the modern query's state store,
            seeded and checked (:mod:`modern.seed`).
        seed_from_input: ``"rewound"`` workloads whose state is each user's open event-time sessions (``sessions``):
            ``seed_from_input(RewindInput)`` gives them (:data:`kit.workloads.rewind.SESSION_STATE` per session), so
            ``dmk cutover --seed-state`` can carry them instead of rewinding: the records the legacy job processed
            (read again from Kafka, without those it dropped as late) sessionized, the sessions its watermark had
            closed checked against its output (:func:`kit.workloads.rewind.open_sessions`).
    """

    how: Literal["stateless", "totals", "rewound", "not carried"]
    sum_columns: tuple[str, ...] = ()
    note: str = ""
    row_time: str = ""
    rewind: Callable[[RewindInput], Rewind] | None = field(default=None, repr=False)
    row_inputs: tuple[str, ...] = ()
    counts_events: bool = False
    seeds_ids: bool = False
    seed_from_input: Callable[[RewindInput], pd.DataFrame] | None = field(default=None, repr=False)

    @property
    def seeded(self) -> bool:
        """Whether the modern query's state store can be seeded with the legacy job's state (:mod:`modern.seed`)."""
        return self.counts_events or self.seeds_ids or self.seed_from_input is not None


NOT_CARRIED = StateCarry(
    "not carried",
    note="its state (open windows, sessions, seen ids) is not in its output rows, so the modern query would "
    "start it empty; cut over at a quiet point, or start the modern query from the oldest record that state "
    "depends on (startingOffsetsByTimestamp) and discard its output before the cutover",
)


@dataclass(frozen=True)
class WorkloadSpec:
    """The contract a workload's legacy, modern and oracle implementations share.

    Attributes:
        name: module name in ``kit/workloads``, ``legacy/workloads`` and ``modern/workloads``.
        summary: one line for reports and ``dmk compare --help``.
        inputs: logical input names; the runners map each to a topic.
        key_columns: columns identifying an output row (a key in update mode, a row id in append mode).
        value_columns: the other output columns (before ``last_input_ts``).
        output_mode: ``"update"`` (the final result is the last value per key) or ``"append"`` (each row is
            emitted once, when final).
        granularity: what is compared, in words ("final count per key", "per event-time window").
        watermark_delay_ms: the allowed lateness of the event-time workloads, None for the others.
        oracle: ``oracle(frame, dataset_spec) -> OracleResult`` over a :func:`kit.dataset.generate` frame.
        legacy: the legacy variants (the first is the main one).
        modern: the modern variants.
        router: for several inputs, maps the parsed dataset (:func:`parse_dataset`'s events, plus rejects) to
            each record's input; None sends everything to ``inputs[0]``.
        carry: how ``dmk cutover`` carries the job's state from the legacy job to the modern query
            (:class:`StateCarry`). Default: not carried.
        horizon: ``horizon(dataset_spec) -> (ms, what)``: the event time a stream must span before the
            watermark lets a first result out (a window plus the delay, a session gap plus the delay), and
            what makes it up, in words; None when rows come out at once (:func:`span_warnings`).
        trajectory: update mode: ``trajectory(frame, dataset_spec)``, every value each key passes through, in
            replay order: the key and value columns and ``seq`` (the record that gave the key that value).
            ``dmk compare --mode all`` holds every emitted row to it. None: not available.
        parse: which parse the inputs use: ``"event"`` (the kit's events, :func:`kit.events.parse_event`; a
            :class:`~kit.dataset.DatasetSpec` dataset; the default) or ``"nexmark"`` (Nexmark persons, auctions and
            bids, :func:`kit.nexmark.parse_nexmark`; a :class:`~kit.nexmark.NexmarkSpec` dataset). A Nexmark
            workload's ``inputs`` are the tables it reads (``"bids"``...): each its own topic in the three-topic
            layout, or all of them one topic, the input :data:`kit.nexmark.ONE_TOPIC_INPUT`, in the one-topic layout.
        summed_over: output columns that identify a row with the keys but depend on *when* the engine ran, not on
            the input (``nexmark_q12``'s processing-time window): written between the key and the value columns,
            and left out of the comparison. :func:`final_result` sums the value columns over them, so what is
            compared is each key's total over its rows (the oracle's ``rows`` have the keys and values only).
    """

    name: str
    summary: str
    inputs: tuple[str, ...]
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    output_mode: Literal["update", "append"]
    granularity: str
    watermark_delay_ms: int | None
    # The dataset spec is a DatasetSpec, or a NexmarkSpec for parse="nexmark".
    oracle: Callable[[pd.DataFrame, Any], OracleResult] = field(repr=False)
    legacy: tuple[Variant, ...] = _DEFAULT
    modern: tuple[Variant, ...] = _DEFAULT
    router: Callable[[pd.DataFrame], pd.Series] | None = field(default=None, repr=False)
    carry: StateCarry = field(default_factory=lambda: NOT_CARRIED)
    horizon: Callable[[DatasetSpec], tuple[int, str]] | None = field(default=None, repr=False)
    trajectory: Callable[[pd.DataFrame, Any], pd.DataFrame] | None = field(default=None, repr=False)
    parse: Literal["event", "nexmark"] = "event"
    summed_over: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """Output columns in order: keys, :attr:`summed_over`, values, ``last_input_ts``."""
        return (*self.key_columns, *self.summed_over, *self.value_columns, LAST_INPUT_TS)

    def variants(self, engine: Literal["legacy", "modern"]) -> tuple[Variant, ...]:
        """The variants of ``engine``."""
        return self.legacy if engine == "legacy" else self.modern

    def variant(self, engine: Literal["legacy", "modern"], name: str) -> Variant:
        """The variant ``name`` of ``engine``.

        Raises:
            ConfigError: no such variant (the message lists the engine's variants).
        """
        chosen = {v.name: v for v in self.variants(engine)}
        if name not in chosen:
            msg = f"workload {self.name!r} has no {engine} variant {name!r}; it has {', '.join(chosen)}."
            raise ConfigError(msg, field="variant", expected=tuple(chosen), actual=name)
        return chosen[name]

    def check_inputs(self, topics: Mapping[str, str]) -> None:
        """Raise :class:`~kit.errors.ConfigError` unless ``topics`` (input name → topic) covers every input.

        A Nexmark workload's inputs are all covered by the one-topic layout's input (``"nexmark"``).
        """
        if self.parse == "nexmark" and ONE_TOPIC_INPUT in topics:
            return
        missing = [name for name in self.inputs if name not in topics]
        if missing:
            msg = f"workload {self.name!r} reads inputs {list(self.inputs)}; no topic given for {missing}."
            raise ConfigError(msg, field="topics", expected=self.inputs, actual=tuple(topics))

    def route(self, frame: pd.DataFrame) -> pd.Series:
        """Input name of each row of a dataset frame (all ``inputs[0]`` for a single-input workload)."""
        if self.router is None:
            return pd.Series(self.inputs[0], index=frame.index)
        return self.router(frame)


def job_id(workload: str, variant: str = "default") -> str:
    """Output (and query) name of a job: the workload, or ``<workload>.<variant>``."""
    return workload if variant == "default" else f"{workload}.{variant}"


def load_ref(ref: str, what: str = "object") -> object:
    """Import ``"package.module:attribute"`` (the form ``dmk compare --legacy/--modern/--oracle`` take).

    Raises:
        ConfigError: not of that form, the module cannot be imported, or it has no such attribute.
    """
    module_name, colon, attribute = ref.partition(":")
    if not colon or not module_name or not attribute:
        msg = f"{what} {ref!r} is not a reference of the form package.module:name."
        raise ConfigError(msg, field=what, expected="package.module:name", actual=ref)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        msg = (
            f"{what} {ref!r}: cannot import {module_name!r} ({err}). Run from the directory that holds it, or "
            "install it, so that this Python and Spark's Python workers can import it."
        )
        raise ConfigError(msg, field=what, expected="an importable module", actual=module_name) from None
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            msg = f"{what} {ref!r}: module {module_name!r} has no {attribute!r}."
            raise ConfigError(
                msg,
                field=what, expected=attribute, actual=sorted(n for n in dir(module) if not n.startswith("_")),
            )
        target = getattr(target, part)
    return target


def get(name: str) -> WorkloadSpec:
    """The spec of a built-in workload, or of your own: ``"package.module:SPEC"`` (a :class:`WorkloadSpec`).

    Raises:
        ConfigError: ``name`` is not one of :data:`NAMES` (the message lists them), or is a reference that
            does not lead to a WorkloadSpec.
    """
    if ":" in name:
        spec = load_ref(name, "workload")
        if not isinstance(spec, WorkloadSpec):
            msg = f"workload {name!r} is a {type(spec).__name__}, not a kit.workloads.WorkloadSpec."
            raise ConfigError(msg, field="workload", expected="WorkloadSpec", actual=type(spec).__name__)
        return spec
    if name not in NAMES + NEXMARK_NAMES:
        msg = (
            f"unknown workload {name!r}; the workloads are: {', '.join(NAMES + NEXMARK_NAMES)} (or your own spec, "
            "given as package.module:SPEC)."
        )
        raise ConfigError(msg, field="workload", expected=NAMES + NEXMARK_NAMES, actual=name)
    return cast(WorkloadSpec, importlib.import_module(f"kit.workloads.{name}").SPEC)


@dataclass(frozen=True)
class Job:
    """A job resolved for one engine: its spec, its output name, the function that builds it, its variant's flags."""

    spec: WorkloadSpec
    name: str
    build: Callable[..., Any]
    equivalent: bool
    settle_ms: int = 0


def resolve(
    engine: Literal["legacy", "modern"],
    workload: str | WorkloadSpec,
    variant: str | Callable[..., Any] = "default",
    *,
    builders: Callable[[str], object],
) -> Job:
    """The job that runs ``variant`` of ``workload`` on ``engine``.

    Each engine calls this with its own ``builders`` (``legacy.workloads.resolve``,
    ``modern.workloads.resolve``): the kit never imports an engine's modules.

    ``variant`` is a variant name of the spec, or your own builder: a ``"package.module:function"``
    reference or the function itself, with the signature of the engine's builders (``fn(ssc, source)``
    returning a DStream of output tuples; ``fn(spark, source)`` returning a DataFrame). Your own builder's
    output is named like the workload's default variant, so both engines' outputs line up.

    A spec variant's ``function`` is a name in ``builders(spec.name)`` (the engine's module of that workload,
    ``<engine>.workloads.<spec name>``), or a ``package.module:function`` reference (how a spec of your own
    names its builders).

    Raises:
        ConfigError: unknown workload or variant, or a reference that cannot be imported or is not callable.
    """
    spec = get(workload) if isinstance(workload, str) else workload
    if callable(variant) or ":" in variant:
        build = load_ref(variant, f"{engine} job") if isinstance(variant, str) else variant
        if not callable(build):
            msg = f"{engine} job {variant!r} is not a function."
            raise ConfigError(msg, field=f"{engine} job", actual=variant)
        return Job(spec, spec.name, build, True)
    chosen = spec.variant(engine, variant)
    if ":" in chosen.function:
        # A spec's variant names its builder function; load_ref is typed for any object.
        build = cast(Callable[..., Any], load_ref(chosen.function, f"{engine} job"))
    else:
        build = getattr(builders(spec.name), chosen.function)
    return Job(spec, job_id(spec.name, variant), build, chosen.equivalent, chosen.settle_ms)


def span_warnings(dataset: DatasetSpec) -> list[str]:
    """A warning per built-in workload whose result needs more event time than ``dataset`` spans.

    The span is the stream's length, ``records / events_per_second``. Such a dataset gives that workload an
    empty result, and a compare on it says NOTHING COMPARED.

    Example:
        >>> from kit.dataset import DatasetSpec
        >>> [w.split(":")[0] for w in span_warnings(DatasetSpec(records=3_000, events_per_second=500))]
        ['windowed_counts', 'sessions', 'ysb']
    """
    span_ms = dataset.records / dataset.events_per_second * 1000
    warnings = []
    for name in NAMES:
        spec = get(name)
        if spec.horizon is None:
            continue
        needed, what = spec.horizon(dataset)
        if span_ms < needed:
            warnings.append(
                f"{name}: the dataset spans about {span_ms / 1000:g} s of event time, less than the {needed / 1000:g} "
                f"s ({what}) before a first result; its result would be empty. Raise --records or lower "
                "--events-per-second."
            )
    return warnings


# --------------------------------------------------------------------------------------------------------
# Helpers the oracles share


def parse_dataset(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse every record of a dataset frame by the event contract, with the oracle's own parser.

    The parser is :func:`kit.workloads._contract.read_record`, written from the contract in docs/kit.md and
    sharing no code with the engines' parsers, so a slip in those shows as a difference.

    Returns:
        ``(events, rejects)``. ``events`` has ``seq``, the contract's fields (:data:`kit.workloads._contract.FIELDS`)
        (``event_time`` in ms) and ``prior_max_ms``: the largest event time of the valid records before it in
        replay order (``-2**62`` for the first), i.e. what an ideal engine's watermark is computed from when
        the record arrives. ``rejects`` has ``seq`` and ``reason``.
    """
    good: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    for seq, value in zip(frame["seq"].tolist(), frame["value"].tolist(), strict=True):
        event, reason = read_record(value)
        if event is None:
            bad.append((seq, cast(str, reason)))  # read_record gives a reason whenever it gives no event
        else:
            good.append({"seq": seq, **event})
    events = pd.DataFrame(good, columns=["seq", *(name for name, _ in FIELDS)])
    times = events["event_time"].to_numpy(dtype=np.int64)
    prior = np.maximum.accumulate(times) if len(times) else times
    events["prior_max_ms"] = np.concatenate([[-(2**62)], prior[:-1]]) if len(times) else prior
    rejects = pd.DataFrame(bad, columns=["seq", "reason"])
    return events, rejects


def window_starts(event_time_ms: pd.Series, size_ms: int, slide_ms: int) -> pd.DataFrame:
    """Every ``(row, window_start)`` of the event-time windows containing each time, as Spark's ``window()``.

    Windows are ``[start, start + size)`` with starts on multiples of ``slide_ms`` from the epoch.

    Returns:
        A frame indexed like ``event_time_ms`` (one row per window a time falls in) with ``window_start``.
    """
    times = event_time_ms.to_numpy(dtype=np.int64)
    last = times - times % slide_ms
    parts = []
    for k in range(size_ms // slide_ms):
        start = last - k * slide_ms
        parts.append(pd.DataFrame({"window_start": start}, index=event_time_ms.index)[start + size_ms > times])
    return pd.concat(parts).sort_index(kind="stable")


def final_result(spec: WorkloadSpec, rows: pd.DataFrame) -> pd.DataFrame:
    """The final result of an engine's output rows (as :func:`kit.sink.read_batches` returns them).

    Update mode: the last value per key (the keys and :attr:`~WorkloadSpec.summed_over`), in batch order. Append
    mode: every row. A spec with ``summed_over`` then has its value columns summed per key over those columns.
    Either way only the key and value columns are kept, sorted by key, with a fresh index: the shape of
    :attr:`OracleResult.rows`.
    """
    columns = [*spec.key_columns, *spec.value_columns]
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    if spec.output_mode == "update":
        rows = rows.sort_values("batch", kind="stable").drop_duplicates(
            [*spec.key_columns, *spec.summed_over], keep="last")
    if spec.summed_over:
        rows = rows.groupby(list(spec.key_columns), as_index=False)[list(spec.value_columns)].sum()
    return rows[columns].sort_values(columns).reset_index(drop=True)


def sorted_rows(spec: WorkloadSpec, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` restricted to the spec's key and value columns, sorted, with a fresh index (for oracles)."""
    columns = [*spec.key_columns, *spec.value_columns]
    return rows[columns].sort_values(columns).reset_index(drop=True)
