"""``sessions``: per-user sessions in event time, closed after ``DatasetSpec.session_gap_ms`` of inactivity.

A session is a user's run of events with no silence longer than the gap; it spans ``[first event, last
event + gap)``, as Spark's ``session_window`` does (an event at most a gap after the previous one, inclusive,
extends the session). Legacy: :func:`legacy.workloads.event_time_operator` with per-user open sessions that
merge when out-of-order events bridge them. Modern: ``session_window`` aggregation in append mode, and two
variants by hand: ``applyInPandasWithState`` with event-time timeouts, and Spark 4's
``transformWithStateInPandas`` with a ListState and event-time timers. Each session is output once, when the
watermark (largest event time seen minus the 5 s allowed lateness) passes its end: keys ``user,
session_start``, values ``session_end, events`` (all times in ms; ``events`` counts duplicates too, since
they are records like any other).

A record is too late for a session iff ``event_time + gap <= watermark`` (Spark's rule for session
windows: a record is late when the session it would open is already closed). The datasets keep every
``too_late`` record within that reach, so they are merged into their sessions, not dropped.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> dataset = DatasetSpec.from_profile("messy", records=20_000, seed=7)
    >>> expected = SPEC.oracle(generate(dataset), dataset)
    >>> list(expected.rows.columns), len(expected.late_dropped)
    (['user', 'session_start', 'session_end', 'events'], 0)
"""

from __future__ import annotations

import pandas as pd

from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.workloads import OracleResult, StateCarry, Variant, WorkloadSpec, parse_dataset, sorted_rows
from kit.workloads.rewind import Rewind, RewindInput, open_sessions, rewind_sessions

__all__ = ["SPEC", "WATERMARK_DELAY_MS", "oracle", "rewind", "seed"]

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness: ``SPEC.watermark_delay_ms`` as an int (the field is None for workloads without event time)."""


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Sessionize the valid, not-too-late events per user; keep the sessions the final watermark closed."""
    events, rejects = parse_dataset(frame)
    gap, delay = dataset.session_gap_ms, SPEC.watermark_delay_ms
    late = events["event_time"] + gap <= events["prior_max_ms"] - delay
    kept = events[~late].sort_values(["user", "event_time"], kind="stable")
    # Spark merges an event into the session before it iff it starts no later than that session's end.
    silence = kept.groupby("user")["event_time"].diff()
    kept = kept.assign(session=(silence.isna() | (silence > gap)).cumsum())
    sessions = kept.groupby("session").agg(
        user=("user", "first"),
        session_start=("event_time", "min"),
        session_end=("event_time", "max"),
        events=("seq", "size"),
    )
    sessions["session_end"] += gap
    # Sessions still open when the input ends are emitted by neither engine.
    closed = sessions[sessions["session_end"] <= events["event_time"].max() - delay]
    return OracleResult(sorted_rows(SPEC, closed), rejects, events.loc[late, ["seq"]].reset_index(drop=True))


def rewind(inp: RewindInput) -> Rewind:
    """``dmk cutover --rewind``: start at the oldest record of a session still open at the legacy watermark.

    :func:`kit.workloads.rewind.rewind_sessions` with the dataset's session gap.

    Raises:
        ConfigError: no dataset spec (the session gap is the dataset's).
    """
    if inp.dataset is None:
        msg = ("sessions' rewind needs the session gap, a setting of the replayed dataset: the legacy output's "
               "driver-config.json names the dataset")
        raise ConfigError(msg, field="dataset", expected="the replayed dataset's spec", actual=None)
    return rewind_sessions(inp.events, inp, gap_ms=inp.dataset.session_gap_ms, delay_ms=WATERMARK_DELAY_MS,
                           key_columns=SPEC.key_columns)


def seed(inp: RewindInput) -> pd.DataFrame:
    """``dmk cutover --seed-state``: the sessions the legacy job held open (:func:`kit.workloads.rewind.open_sessions`).

    Raises:
        ConfigError: no dataset spec (the session gap is the dataset's), or what ``open_sessions`` refuses.
    """
    if inp.dataset is None:
        msg = ("sessions' seed needs the session gap, a setting of the replayed dataset: the legacy output's "
               "driver-config.json names the dataset")
        raise ConfigError(msg, field="dataset", expected="the replayed dataset's spec", actual=None)
    return open_sessions(inp.events, inp, gap_ms=inp.dataset.session_gap_ms, delay_ms=WATERMARK_DELAY_MS)


SPEC = WorkloadSpec(
    name="sessions",
    summary="per-user event-time sessions, 30 s gap (event_time_operator vs session_window)",
    inputs=("events",),
    key_columns=("user", "session_start"),
    value_columns=("session_end", "events"),
    output_mode="append",
    granularity="per session (user, start), emitted once when the watermark passes its end",
    watermark_delay_ms=WATERMARK_DELAY_MS,
    oracle=oracle,
    horizon=lambda dataset: (
        dataset.session_gap_ms + WATERMARK_DELAY_MS,
        f"the {dataset.session_gap_ms / 1000:g} s session gap and the 5 s watermark delay",
    ),
    carry=StateCarry(
        "rewound", row_time="session_end", rewind=rewind, seed_from_input=seed,
        note="open sessions are in no output row: dmk cutover --seed-state rebuilds them from the records the legacy "
        "job processed (checked against the sessions it emitted) into the modern query's state store; --rewind "
        "instead starts the modern query at the oldest record of a session the legacy watermark had not closed and "
        "drops the sessions the legacy job emitted",
    ),
    modern=(
        Variant("default", "build", note="groupBy(user, session_window(event_time, gap)).count(), append mode"),
        Variant(
            "state",
            "build_with_state",
            note="applyInPandasWithState with event-time timeouts: sessions kept and closed by hand",
        ),
        Variant(
            "transform_with_state",
            "build_transform_with_state",
            note="transformWithStateInPandas (Spark 4): open sessions in a ListState, closed by event-time timers",
        ),
    ),
)
