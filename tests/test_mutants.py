"""Mutants the suite must kill: each mutation is applied in memory, the affected workload runs, and the verdict
must come out DIFFERENT (issue 38, item 5; the list and the kill rate are in docs/compare.md).

A mutation rewrites one function's source (or sets one constant) of the code the engines run, for this test
only (``monkeypatch``: the source is changed as text, compiled, and put in the module's place).

Default tier: the legacy jobs' own event-time logic (the ``event_time_operator`` step of each workload, the
``updateStateByKey`` function of ``running_counts``) run in this process by :func:`_run_legacy`, which cuts the
dataset into batches in replay order and hands each step the watermark of the batches before it, as
``legacy.workloads.event_time_operator`` does; its records parsed by the legacy parser
(``legacy.workloads.parse_event``). Unmutated, it equals the oracle on every part
(:func:`test_the_unmutated_legacy_logic_equals_the_oracle`), so what a mutant changes is the mutation's doing.

Boundary mutants (issue 38, item 4): a watermark delay or a session gap off by 1 s, a late rule or a session
merge with ``<`` for ``<=``. Each survives the plain dataset (every record a margin away from each boundary: the
test asserts EQUIVALENT there) and is killed on the same dataset with a boundary block
(:attr:`kit.dataset.DatasetSpec.boundary_records`: records at and 1 ms either side of each boundary).

Slow tier: the modern jobs, whose parameters are read when the query is built, run on Spark through
:func:`compare.harness.run_engine` with the mutation in place, on the boundary dataset.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from collections.abc import Callable
from types import ModuleType
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

import kit.events
import kit.semantics
import legacy.workloads
import legacy.workloads.dedup
import legacy.workloads.running_counts
import legacy.workloads.sessions
import legacy.workloads.windowed_counts
import legacy.workloads.ysb
from compare.diff import Check, diff_outputs, records_differ, updates_out_of_order, verdict
from compare.harness import dataset_spec
from kit import workloads
from kit.dataset import DatasetSpec, ad_campaigns, generate
from kit.workloads._contract import BOUNDARY_TIMES, read_record

NO_WATERMARK = -(2**62)
BATCH_RECORDS = 250
"""Records per emulated batch: 0.5 s of event time at 500 events/s, well inside the datasets' margins."""

_DATASET = dataset_spec("messy")  # 20,000 records, 40 s of event time: every oracle has rows
_BOUNDARY = dataset_spec("messy", records=20_000 + _DATASET.boundary_minimum,
                         boundary_records=_DATASET.boundary_minimum)
"""The same 20,000 records followed by the boundary block (6,024 records)."""


@functools.cache
def _frame(boundary: bool = False) -> pd.DataFrame:
    return generate(_BOUNDARY if boundary else _DATASET)


def _mutate(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, old: str, new: str) -> None:
    """Replace ``old`` (once) by ``new`` in the source of ``module.name``, for this test only."""
    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    assert source.count(old) == 1, f"{module.__name__}.{name}: {old!r} is not in it exactly once"
    namespace = dict(vars(module))
    exec(compile(source.replace(old, new), f"<mutant of {module.__name__}.{name}>", "exec"), namespace)
    monkeypatch.setattr(module, name, namespace[name])


def _events(frame: pd.DataFrame) -> tuple[list[dict], list[tuple[int, str]]]:
    """The dataset's records as the legacy side parses them: event dicts with Kafka fields, and the rejects."""
    events, rejects = [], []
    for seq, value in zip(frame["seq"].tolist(), frame["value"].tolist(), strict=True):
        event, reason = legacy.workloads.parse_event(value)
        if event is None:
            rejects.append((seq, reason))
        else:
            events.append({**event, "seq": seq, "kafka_ts": seq, "topic": "t", "partition": 0, "offset": seq})
    return events, rejects


def _operator(step: Callable, events: list[dict], delay_ms: int, *, batch_records: int = BATCH_RECORDS,
              lag: int = 1) -> tuple[list, list]:
    """``event_time_operator`` in one process: batches in replay order, each with the watermark of those before.

    ``lag``: the watermark of batch N is computed from batches ``0..N-lag`` (1: the legacy operator's rule; 2: Spark's
    rule for late rows, the previous batch's watermark).
    """
    state, rows, late, maxima = None, [], [], []
    seen = NO_WATERMARK
    batches = [events[i:i + batch_records] for i in range(0, len(events), batch_records)] + [[]] * (lag + 1)
    for new in batches:
        reference = maxima[-lag] if len(maxima) >= lag else NO_WATERMARK
        watermark = NO_WATERMARK if reference == NO_WATERMARK else reference - delay_ms
        state, out, dropped = step(state, list(new), watermark)
        rows += out
        late += dropped
        seen = max([seen, *(e["event_time"] for e in new)])
        maxima.append(seen)
    return rows, late


def _running_counts(events: list[dict], *, repeat_batch: int | None = None) -> list[tuple]:
    """``updateStateByKey(_add)`` with the changed-keys filter, batch by batch (``repeat_batch``: run one twice)."""
    module = legacy.workloads.running_counts
    state: dict[str, Any] = {}
    rows = []
    batches = [events[i:i + BATCH_RECORDS] for i in range(0, len(events), BATCH_RECORDS)]
    if repeat_batch is not None:
        batches.insert(repeat_batch, batches[repeat_batch])
    for batch in batches:
        combined: dict[str, tuple[int, int]] = {}
        for e in batch:
            pair = (1, e["kafka_ts"])
            combined[e["key"]] = module._combine(combined[e["key"]], pair) if e["key"] in combined else pair
        for key in set(state) | set(combined):
            state[key] = module._add([combined[key]] if key in combined else [], state.get(key))
            if state[key][2]:
                rows.append((key, state[key][0], state[key][1]))
    return rows


def _run_legacy(name: str, *, mode: str = "final", repeat_batch: int | None = None,
                boundary: bool = False, batch_records: int = BATCH_RECORDS, lag: int = 1) -> list[Check]:
    """The legacy job of ``name`` over the module's dataset, judged against the oracle as dmk compare judges.

    ``batch_records`` and ``lag``: how the event-time workloads are batched (:func:`_operator`).
    """
    operator = functools.partial(_operator, batch_records=batch_records, lag=lag)
    spec = workloads.get(name)
    dataset, frame = (_BOUNDARY if boundary else _DATASET), _frame(boundary)
    events, rejects = _events(frame)
    late: list = []
    if name == "running_counts":
        rows = _running_counts(events, repeat_batch=repeat_batch)
    elif name == "windowed_counts":
        module = legacy.workloads.windowed_counts
        rows, late = operator(module._count_windows, events, module.WATERMARK_DELAY_MS)
    elif name == "sessions":
        module = legacy.workloads.sessions
        step = functools.partial(module._step, gap_ms=dataset.session_gap_ms)
        rows, late = operator(step, events, module.WATERMARK_DELAY_MS)
    elif name == "dedup":
        module = legacy.workloads.dedup
        rows, late = operator(functools.partial(module._step, delay_ms=module.WATERMARK_DELAY_MS), events,
                               module.WATERMARK_DELAY_MS)
    elif name == "ysb":
        module = legacy.workloads.ysb
        campaign = ad_campaigns(dataset)
        views = [{**e, "campaign_id": campaign[e["ad_id"]]} for e in events
                 if e["event_type"] == "view" and e["ad_id"] in campaign]
        rows, late = operator(module._count_windows, views, module.WATERMARK_DELAY_MS)
    else:
        raise AssertionError(name)
    emitted = pd.DataFrame(rows, columns=list(spec.columns)).assign(batch=range(len(rows)))
    oracle = spec.oracle(frame, dataset)
    against = diff_outputs(oracle.rows, workloads.final_result(spec, emitted), spec.key_columns, spec.value_columns)
    checks = [Check("rows", "legacy", against.equal, str(against.counts()))]
    missing, extra = records_differ(oracle.dead_letters, pd.DataFrame(rejects, columns=["seq", "reason"]),
                                    ["seq", "reason"])
    checks.append(Check("dead letters", "legacy", not (missing or extra), f"{missing} missing, {extra} wrong"))
    got = pd.DataFrame({"seq": [event["seq"] for event, _ in late]})
    for column in oracle.late_dropped.columns.drop("seq"):
        got[column] = [detail for _, detail in late]
    missing, extra = records_differ(oracle.late_dropped, got, list(oracle.late_dropped.columns))
    checks.append(Check("late drops", "legacy", not (missing or extra), f"{missing} missing, {extra} wrong"))
    if mode == "all" and spec.trajectory is not None:
        unknown, backwards = updates_out_of_order(spec.trajectory(frame, dataset), emitted, spec.key_columns,
                                                  spec.value_columns)
        checks.append(Check("every update", "legacy", not (unknown or backwards), f"{unknown}, {backwards}"))
    return checks


def _verdict(checks: list[Check]) -> str:
    return verdict(checks, 1)[0]


@pytest.mark.parametrize("boundary", [False, True], ids=["plain", "boundary"])
@pytest.mark.parametrize("name", ["running_counts", "windowed_counts", "sessions", "dedup",
                                  pytest.param("ysb", marks=pytest.mark.slow)])
def test_the_unmutated_legacy_logic_equals_the_oracle(name: str, boundary: bool) -> None:
    checks = _run_legacy(name, mode="all", boundary=boundary)
    assert _verdict(checks) == "EQUIVALENT", [c.line() for c in checks]
    assert workloads.get(name).oracle(_frame(boundary), _BOUNDARY if boundary else _DATASET).rows.shape[0] > 0


@pytest.mark.parametrize("name", ["windowed_counts", "sessions", "dedup"])
def test_the_boundary_probes_hold_with_batches_at_the_caps_and_sparks_late_watermark(name: str) -> None:
    """The lead-ins' sizing: batches of the caps' 1,000 records (2 s of event time) judged by the watermark of two
    batches back, as Spark filters late rows, still decide every probe as the oracle does."""
    checks = _run_legacy(name, boundary=True, batch_records=1_000, lag=2)
    assert _verdict(checks) == "EQUIVALENT", [c.line() for c in checks]


# Each mutant: (id, workload, how it is applied, the verdict parts that must catch it).
def _windowed_delay(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(legacy.workloads.windowed_counts, "WATERMARK_DELAY_MS", 10_000)


def _windowed_slide(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(legacy.workloads.windowed_counts, "WINDOWS", (("tumbling", 10_000, 10_000), ("sliding", 10_000, 4_000)))


def _windowed_late_named_by_end(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, legacy.workloads.windowed_counts, "_count_windows", "late_detail(kind, start)",
            "late_detail(kind, start + size)")


def _session_gap(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, legacy.workloads.sessions, "_step", "    open_sessions: dict[str, list[list]] = state or {}",
            "    gap_ms -= 1_000\n    open_sessions: dict[str, list[list]] = state or {}")


def _session_end_short(mp: pytest.MonkeyPatch) -> None:
    """Mutate the session close (``kit.semantics.close_sessions``, as the legacy sessions job imported it)."""
    _mutate(mp, kit.semantics, "close_sessions", "rows.append((key, start, last + gap_ms,",
            "rows.append((key, start, last + gap_ms - 1_000,")
    mp.setattr(legacy.workloads.sessions, "close_sessions", kit.semantics.close_sessions)


def _dedup_key(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, legacy.workloads.dedup, "_step", 'event_id, t = event["event_id"]', 'event_id, t = event["user"]')


def _dedup_delay(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(legacy.workloads.dedup, "WATERMARK_DELAY_MS", 20_000)


def _ysb_window(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(legacy.workloads.ysb, "WINDOW_MS", 5_000)


def _every_key_every_batch(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, legacy.workloads.running_counts, "_add", "return count, last_ts, bool(new)",
            "return count, last_ts, True")


def _parse_upper_bound_inclusive(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, kit.events, "parse_event", "<= event[\"event_time\"] < EVENT_TIME_MAX_MS",
            "<= event[\"event_time\"] <= EVENT_TIME_MAX_MS")
    mp.setattr(legacy.workloads, "parse_event", kit.events.parse_event)


def _parse_lower_bound_early(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, kit.events, "parse_event", "if not EVENT_TIME_MIN_MS <=", "if not EVENT_TIME_MIN_MS - 1 <=")
    mp.setattr(legacy.workloads, "parse_event", kit.events.parse_event)


def _bad_utf8_as_bad_json(mp: pytest.MonkeyPatch) -> None:
    _mutate(mp, kit.events, "parse_event", 'return None, "bad_utf8"', 'return None, "bad_json"')
    mp.setattr(legacy.workloads, "parse_event", kit.events.parse_event)


# The default tier runs the first seven; the rest run in the slow tier (pytest -m slow tests/test_mutants.py).
FAST = 7
MUTANTS: list[tuple[str, str, Callable[[pytest.MonkeyPatch], None], dict[str, Any], set[str]]] = [
    ("watermark delay 5 s -> 10 s", "windowed_counts", _windowed_delay, {}, {"rows", "late drops"}),
    ("session gap 30 s -> 29 s", "sessions", _session_gap, {}, {"rows"}),
    ("dedup key event_id -> user", "dedup", _dedup_key, {}, {"rows"}),
    ("update mode -> every key every batch", "running_counts", _every_key_every_batch, {"mode": "all"},
     {"every update"}),
    ("parse: event_time upper bound inclusive", "running_counts", _parse_upper_bound_inclusive, {},
     {"rows", "dead letters"}),
    ("parse: bad_utf8 dead-lettered as bad_json", "running_counts", _bad_utf8_as_bad_json, {}, {"dead letters"}),
    ("parse: event_time lower bound 1 ms early", "running_counts", _parse_lower_bound_early, {},
     {"rows", "dead letters"}),
    ("sliding window slide 5 s -> 4 s", "windowed_counts", _windowed_slide, {}, {"rows", "late drops"}),
    ("late drop named by window end", "windowed_counts", _windowed_late_named_by_end, {}, {"late drops"}),
    ("session end 1 s short", "sessions", _session_end_short, {}, {"rows"}),
    ("dedup watermark delay 5 s -> 20 s", "dedup", _dedup_delay, {}, {"rows", "late drops"}),
    ("ysb window 10 s -> 5 s", "ysb", _ysb_window, {}, {"rows", "late drops"}),
    ("a batch processed twice", "running_counts", lambda mp: None, {"repeat_batch": 3}, {"rows"}),
]


@pytest.mark.parametrize(("workload", "mutate", "options", "caught_by"),
                         [pytest.param(*m[1:], id=m[0], marks=() if i < FAST else pytest.mark.slow)
                          for i, m in enumerate(MUTANTS)])
def test_a_mutant_of_the_legacy_logic_is_reported_different(monkeypatch: pytest.MonkeyPatch, workload: str,
                                                           mutate: Callable, options: dict, caught_by: set[str]) -> None:
    mutate(monkeypatch)
    checks = _run_legacy(workload, **options)
    assert _verdict(checks) == "DIFFERENT"
    assert {c.part for c in checks if c.ok is False} == caught_by, [c.line() for c in checks]


def _merge(mp: pytest.MonkeyPatch, condition: str) -> None:
    """Mutate the session merge (``kit.semantics.merge_session``, as the legacy sessions job imported it)."""
    _mutate(mp, kit.semantics, "merge_session", "if s[0] <= t + gap_ms and t <= s[1] + gap_ms:", condition)
    mp.setattr(legacy.workloads.sessions, "merge_session", kit.semantics.merge_session)


_WC = legacy.workloads.windowed_counts


def _set(module: ModuleType, name: str, value: Any) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda mp: mp.setattr(module, name, value)


# Each: (id, workload, mutation, the verdict parts that catch it on the boundary dataset). The first FAST_BOUNDARY run
# in the default tier.
FAST_BOUNDARY = 3
BOUNDARY_MUTANTS: list[tuple[str, str, Callable[[pytest.MonkeyPatch], None], set[str]]] = [
    ("watermark delay 5 s -> 4 s", "windowed_counts", _set(_WC, "WATERMARK_DELAY_MS", 4_000),
     {"rows", "late drops"}),
    ("session merge 1 s shorter than the gap", "sessions",
     lambda mp: _merge(mp, "if s[0] <= t + gap_ms - 1_000 and t <= s[1] + gap_ms - 1_000:"), {"rows"}),
    ("dedup late rule <= -> <", "dedup",
     lambda mp: _mutate(mp, legacy.workloads.dedup, "_step", "if t <= watermark:", "if t < watermark:"),
     {"rows", "late drops"}),
    ("watermark delay 5 s -> 6 s", "windowed_counts", _set(_WC, "WATERMARK_DELAY_MS", 6_000),
     {"rows", "late drops"}),
    ("watermark delay 5 s -> 8 s", "windowed_counts", _set(_WC, "WATERMARK_DELAY_MS", 8_000),
     {"rows", "late drops"}),
    ("window late rule <= -> <", "windowed_counts",
     lambda mp: _mutate(mp, legacy.workloads.windowed_counts, "_count_windows", "if start + size <= watermark:",
                        "if start + size < watermark:"), {"rows", "late drops"}),
    ("session merge 1 s longer than the gap", "sessions",
     lambda mp: _merge(mp, "if s[0] <= t + gap_ms + 1_000 and t <= s[1] + gap_ms + 1_000:"), {"rows"}),
    ("session merge <= -> <", "sessions", lambda mp: _merge(mp, "if s[0] < t + gap_ms and t < s[1] + gap_ms:"),
     {"rows"}),
    ("session late rule <= -> <", "sessions",
     lambda mp: _mutate(mp, legacy.workloads.sessions, "_step", 'if event["event_time"] + gap_ms <= watermark:',
                        'if event["event_time"] + gap_ms < watermark:'), {"rows", "late drops"}),
    ("dedup watermark delay 5 s -> 4 s", "dedup", _set(legacy.workloads.dedup, "WATERMARK_DELAY_MS", 4_000),
     {"rows", "late drops"}),
    ("dedup watermark delay 5 s -> 6 s", "dedup", _set(legacy.workloads.dedup, "WATERMARK_DELAY_MS", 6_000),
     {"rows", "late drops"}),
    ("ysb watermark delay 5 s -> 4 s", "ysb", _set(legacy.workloads.ysb, "WATERMARK_DELAY_MS", 4_000),
     {"rows", "late drops"}),
    ("ysb watermark delay 5 s -> 6 s", "ysb", _set(legacy.workloads.ysb, "WATERMARK_DELAY_MS", 6_000),
     {"rows", "late drops"}),
]


@pytest.mark.parametrize(("workload", "mutate", "caught_by"),
                         [pytest.param(*m[1:], id=m[0], marks=() if i < FAST_BOUNDARY else pytest.mark.slow)
                          for i, m in enumerate(BOUNDARY_MUTANTS)])
def test_a_boundary_mutant_survives_the_plain_dataset_and_dies_on_the_boundary_records(
        monkeypatch: pytest.MonkeyPatch, workload: str, mutate: Callable, caught_by: set[str]) -> None:
    mutate(monkeypatch)
    plain = _run_legacy(workload)
    assert _verdict(plain) == "EQUIVALENT", [c.line() for c in plain]  # every record a margin from the boundary
    checks = _run_legacy(workload, boundary=True)
    assert _verdict(checks) == "DIFFERENT"
    assert {c.part for c in checks if c.ok is False} == caught_by, [c.line() for c in checks]


def test_a_parse_bound_off_by_one_is_caught_at_the_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain dataset holds no event at 2000-01-01, so it cannot see this one: the boundary block and the contract's
    boundary records do."""
    _mutate(monkeypatch, kit.events, "parse_event", "if not EVENT_TIME_MIN_MS <=", "if not EVENT_TIME_MIN_MS + 1 <=")
    monkeypatch.setattr(legacy.workloads, "parse_event", kit.events.parse_event)
    assert _verdict(_run_legacy("running_counts")) == "EQUIVALENT"  # the plain dataset cannot tell
    checks = _run_legacy("running_counts", boundary=True)
    assert {c.part for c in checks if c.ok is False} == {"rows", "dead letters"}, [c.line() for c in checks]
    differing = {ms for ms in BOUNDARY_TIMES if kit.events.parse_event(b'{"event_id":"e","user":"u","key":"k",'
                 b'"ad_id":"a","ad_type":"banner","event_type":"view","event_time":' + str(ms).encode() + b"}")[1]
                 != read_record(b'{"event_id":"e","user":"u","key":"k","ad_id":"a","ad_type":"banner",'
                                b'"event_type":"view","event_time":' + str(ms).encode() + b"}")[1]}
    assert differing == {946_684_800_000}


# -- slow tier: the modern jobs on Spark ----------------------------------------------------------------------


_SHORT = DatasetSpec.from_profile("clean", records=500, seed=11, events_per_second=100, lateness_margin_ms=4_000,
                                  users=20)
_MODERN = replace(_SHORT, records=_SHORT.records + _SHORT.boundary_minimum, boundary_records=_SHORT.boundary_minimum)
"""The modern mutants' dataset: 5 s of clean records, then the boundary block (1,224 records, ~11 micro-batches at the
batch caps): the block is what the boundary mutants need, and each Spark run is a minute, not ten."""
_MODERN_JOBS = ("running_counts", "windowed_counts", "sessions", "dedup")


@functools.cache
def _modern_frame() -> pd.DataFrame:
    return generate(_MODERN)


def _modern_checks(name: str, emitted: pd.DataFrame, dataset: DatasetSpec, frame: pd.DataFrame) -> list[Check]:
    spec = workloads.get(name)
    oracle = spec.oracle(frame, dataset)
    assert len(oracle.rows) > 0
    against = diff_outputs(oracle.rows, workloads.final_result(spec, emitted), spec.key_columns, spec.value_columns)
    checks = [Check("rows", "modern", against.equal, str(against.counts()))]
    if spec.trajectory is not None:
        unknown, backwards = updates_out_of_order(spec.trajectory(frame, dataset), emitted, spec.key_columns,
                                                  spec.value_columns)
        checks.append(Check("every update", "modern", not (unknown or backwards), f"{unknown}, {backwards}"))
    return checks


def _modern_run(name: str, build: Callable, tmp_path: Any, bootstrap_servers: str, spark: Any,
                output_mode: str | None = None) -> list[Check]:
    """The modern job ``build`` of ``name`` on Spark, judged on rows and every update (join: on the plain dataset,
    whose clicks come up to a minute after their views; the others: on :data:`_MODERN`)."""
    from compare.harness import run_engine

    dataset, frame = (_DATASET, _frame()) if name == "join" else (_MODERN, _modern_frame())
    spec = workloads.get(name)
    runs_as = replace(spec, output_mode=output_mode) if output_mode else spec
    run = run_engine("modern", ((runs_as, build),), dataset, frame, bootstrap_servers=bootstrap_servers,
                     spark=spark, workdir=tmp_path)
    return _modern_checks(name, run.rows(name), dataset, frame)


@pytest.mark.slow
@pytest.mark.parametrize("name", _MODERN_JOBS)
def test_the_unmutated_modern_job_equals_the_oracle_on_the_modern_mutants_dataset(
        tmp_path: Any, bootstrap_servers: str, spark: Any, name: str) -> None:
    """The guard of the modern mutants: unmutated, each job equals the oracle on their dataset, boundary block and
    all, so what a mutant changes is the mutation's doing (and Spark decides the probes as the oracle does). One
    query per run: four Python sources starting at once failed to connect back on a loaded machine."""
    from compare.harness import run_engine

    run = run_engine("modern", ((name, "default"),), _MODERN, _modern_frame(), bootstrap_servers=bootstrap_servers,
                     spark=spark, workdir=tmp_path)
    checks = _modern_checks(name, run.rows(name), _MODERN, _modern_frame())
    assert _verdict(checks) == "EQUIVALENT", [c.line() for c in checks]


def _modern_mutants() -> list[Any]:
    import modern.workloads.dedup as dedup
    import modern.workloads.join as join
    import modern.workloads.running_counts as running_counts
    import modern.workloads.windowed_counts as windowed

    def dedup_by_user(mp: pytest.MonkeyPatch) -> None:
        _mutate(mp, dedup, "build", 'dropDuplicatesWithinWatermark(["event_id"])',
                'dropDuplicatesWithinWatermark(["user"])')

    tumbling_and_4_s_slide = (("tumbling", 10_000, 10_000), ("sliding", 10_000, 4_000))
    return [
        pytest.param("windowed_counts", windowed, _set(windowed, "WATERMARK_DELAY_MS", 4_000), None,
                     id="modern watermark delay 5 s -> 4 s"),
        pytest.param("windowed_counts", windowed, _set(windowed, "WATERMARK_DELAY_MS", 6_000), None,
                     id="modern watermark delay 5 s -> 6 s"),
        pytest.param("windowed_counts", windowed, _set(windowed, "WATERMARK_DELAY_MS", 10_000), None,
                     id="modern watermark delay 5 s -> 10 s"),
        pytest.param("windowed_counts", windowed, _set(windowed, "WINDOWS", tumbling_and_4_s_slide), None,
                     id="modern sliding window slide 5 s -> 4 s"),
        pytest.param("dedup", dedup, dedup_by_user, None, id="modern dedup key event_id -> user"),
        pytest.param("dedup", dedup, _set(dedup, "WATERMARK_DELAY_MS", 20_000), None,
                     id="modern dedup watermark delay 5 s -> 20 s"),
        pytest.param("running_counts", running_counts, lambda mp: None, "complete",
                     id="modern output mode update -> complete"),
        pytest.param("join", join, _set(join, "WITHIN_MS", 30_000), None, id="modern join bound 60 s -> 30 s"),
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "module", "mutate", "output_mode"), _modern_mutants())
def test_a_mutant_of_a_modern_job_is_reported_different(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                       bootstrap_servers: str, spark: Any, name: str,
                                                       module: ModuleType, mutate: Callable,
                                                       output_mode: str | None) -> None:
    mutate(monkeypatch)  # read when the query is built, in this process
    checks = _modern_run(name, module.build, tmp_path, bootstrap_servers, spark, output_mode)
    assert _verdict(checks) == "DIFFERENT", [c.line() for c in checks]
