"""Rewinding a cutover: where the modern query starts again, and which of its rows the legacy job already emitted.

A workload whose state cannot be seeded (open windows, seen ids: ``StateCarry("rewound", ...)``) is cut over
by re-reading. The legacy job processed every record below its position ``P`` and emitted its rows; the
modern query starts at ``R <= P`` per partition, rebuilds the state it needs from the records in ``[R, P)``,
and its output goes through a filter (``modern.cutover.suppress_emitted``) that drops

- every row whose *row time* (:attr:`kit.workloads.StateCarry.row_time`: a window's end, an event's time) is
  at or before :attr:`Rewind.cutoff_ms`, where the legacy job's outputs are complete; and
- every row whose key is in :attr:`Rewind.suppress`: rows past the cutoff the legacy job emitted already.

A workload's rule (:attr:`kit.workloads.StateCarry.rewind`) reads what the legacy job left
(:class:`RewindInput`) and returns the :class:`Rewind`; ``dmk cutover --rewind`` reads the records from Kafka,
writes the starting offsets and the filter's file. The rules here are the kinds of state:
:func:`rewind_windows` (open event-time windows), :func:`rewind_sessions`, :func:`rewind_seen_ids` (ids
remembered within the watermark) and :func:`rewind_pairs` (a stream-stream join's buffered rows, whose filter goes
by the input records' offsets instead: :attr:`kit.workloads.StateCarry.row_inputs`).
``tests/test_cutover_rewind.py`` holds them to the oracles at many kill points. The same reading of what the legacy
job left gives :func:`open_sessions`, the sessions it held open: the seed of a carried, not rewound, sessions
cutover (``dmk cutover --seed-state``, :mod:`modern.seed`).

Two watermarks matter, both the legacy job's own (:func:`legacy.workloads.event_time_operator`: a batch works
with the largest event time of the batches before it, minus the delay):

- :attr:`Rewind.watermark_ms`, the one its last batch within the position used: it emitted every window that
  watermark closed, and dropped as late only records for windows it had closed;
- :attr:`Rewind.next_watermark_ms`, the one its next batch would have used (largest event time below ``P``
  minus the delay): every record at or after ``P`` is judged against at least that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kit.errors import ConfigError

if TYPE_CHECKING:
    from kit.dataset import DatasetSpec

__all__ = ["NO_WATERMARK", "SESSION_STATE", "Rewind", "RewindInput", "earliest_offsets", "open_sessions",
           "rewind_pairs", "rewind_seen_ids", "rewind_sessions", "rewind_windows", "watermark_below"]

NO_WATERMARK = -(2**62)
"""The watermark before any event: earlier than every event time (the legacy engine's value)."""

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class RewindInput:
    """What the legacy job left, as a workload's rewind rule reads it.

    Attributes:
        events: the valid events the legacy job processed (offset below the position), parsed as the legacy job
            parses them (:func:`kit.events.parse_event`): the event fields (``event_time`` in ms) plus ``topic``,
            ``partition`` and ``offset``. Records the topic no longer holds are missing (see ``retained_from``).
        emitted: the legacy job's output rows within the position (the spec's columns; any order).
        position: ``(topic, partition)`` → the next offset the legacy job would have read.
        last_batch_from: ``(topic, partition)`` → where the legacy job's last batch within the position began (its
            watermark came from the records below); partitions absent: the position.
        dataset: the replayed dataset's spec (YSB's campaign table), if known.
        late: ``topic, partition, offset`` of the records the legacy job dropped as too late (its ``<job>.late``
            output up to its last batch; a rule keeps those below the position); None: not known.
    """

    events: pd.DataFrame
    emitted: pd.DataFrame
    position: dict[TopicPartition, int]
    last_batch_from: dict[TopicPartition, int] = field(default_factory=dict)
    dataset: DatasetSpec | None = None
    late: pd.DataFrame | None = None


@dataclass(frozen=True)
class Rewind:
    """Where the modern query starts and what its output filter drops.

    Attributes:
        starts: ``(topic, partition)`` → the offset the modern query starts at (``<=`` the position), for every
            partition of the position.
        suppress: the key columns of the legacy rows the modern query will produce again past the cutoff.
        cutoff_ms: modern rows whose row time is at or before it are dropped: the legacy job's output is complete
            there.
        watermark_ms: the legacy watermark of its last batch within the position.
        next_watermark_ms: the legacy watermark its next batch would have used.
        needed: what the re-read records are needed for, in words (for the report).
        dropped: ``topic, partition, offset`` of re-read records the legacy job dropped as too late: the filter
            drops every row made from one (a workload whose rows name their input records,
            :attr:`kit.workloads.StateCarry.row_inputs`; the others drop by time and key alone).
    """

    starts: dict[TopicPartition, int]
    suppress: pd.DataFrame
    cutoff_ms: int
    watermark_ms: int
    next_watermark_ms: int
    needed: str = ""
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["topic", "partition", "offset"]))


def _below(events: pd.DataFrame, bounds: dict[TopicPartition, int]) -> np.ndarray:
    """Which ``events`` lie below ``bounds`` (an offset per partition; a partition absent: all of it)."""
    ends = [bounds.get((t, int(p)), np.iinfo(np.int64).max)
            for t, p in zip(events["topic"], events["partition"], strict=True)]
    below: np.ndarray = events["offset"].to_numpy(dtype=np.int64) < np.array(ends, dtype=np.int64)
    return below


def watermark_below(events: pd.DataFrame, bounds: dict[TopicPartition, int], delay_ms: int) -> int:
    """The legacy watermark of a batch starting at ``bounds``: the largest event time below them, minus the delay.

    :data:`NO_WATERMARK` when no event lies below (the legacy engine's value before any event).
    """
    if events.empty:
        return NO_WATERMARK
    below = _below(events, bounds)
    if not below.any():
        return NO_WATERMARK
    return int(events["event_time"].to_numpy(dtype=np.int64)[below].max()) - delay_ms


def earliest_offsets(needed: pd.DataFrame, position: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Per partition of ``position``: the smallest offset of the ``needed`` events, else the position itself."""
    starts = dict(position)
    if not needed.empty:
        for (topic, partition), offset in needed.groupby(["topic", "partition"])["offset"].min().items():
            tp = (str(topic), int(partition))
            starts[tp] = min(starts.get(tp, int(offset)), int(offset))
    return starts


def _newest_window_end(times: np.ndarray, windows: tuple[tuple[str, int, int], ...]) -> np.ndarray:
    # The newest window [start, start + size) holding t starts at t - t % slide: the latest end of any window of t.
    ends: np.ndarray = np.max([times - times % slide + size for _, size, slide in windows], axis=0)
    return ends


def _closed_by(ends: np.ndarray, watermark: int, what: str, delay_ms: int) -> None:
    """Refuse legacy rows (``what``: window, session) ending after the watermark of the job's last batch.

    Raises:
        ConfigError: such a row: the outputs are not those of a job emitting on close with this delay, or not
            written at this position.
    """
    if len(ends) and int(ends.max()) > watermark:
        msg = (
            f"the legacy output holds a {what} ending at {int(ends.max())}, after the watermark of its last batch "
            f"({watermark}): it is not the output of a job emitting {what}s when its watermark passes their end "
            f"with a {delay_ms} ms delay, or the position is not the one these outputs were written at"
        )
        raise ConfigError(msg, field="legacy_output", expected=f"{what}s emitted on close", actual=int(ends.max()))


def _emitted_again(events: pd.DataFrame, inp: RewindInput, starts: dict[TopicPartition, int], ends: np.ndarray,
                   key_columns: tuple[str, ...]) -> pd.DataFrame:
    """The keys of the emitted rows (ending at ``ends``) the records read again from ``starts`` may fall in.

    The modern query produces them again, partially: the filter must drop them.
    """
    read_again = events[~_below(events, starts)]
    oldest = int(read_again["event_time"].min()) if len(read_again) else np.iinfo(np.int64).max
    again = inp.emitted[ends > oldest] if len(ends) else inp.emitted
    return again[list(key_columns)].drop_duplicates().reset_index(drop=True)


def rewind_windows(
    events: pd.DataFrame,
    inp: RewindInput,
    *,
    windows: tuple[tuple[str, int, int], ...],
    delay_ms: int,
    window_end: pd.Series,
    key_columns: tuple[str, ...],
) -> Rewind:
    """The rewind of an event-time window aggregation emitted on close (append mode).

    ``events`` are the events the aggregation (and its watermark) sees (for YSB: the views with a campaign);
    ``window_end`` is the end of each of ``inp.emitted``'s windows.

    The legacy job's last batch emitted every window its watermark ``W`` had closed, and a record was dropped from
    a window only when that window had closed by ``W`` at the latest. So the legacy output is complete for every
    window ending at or before ``W`` (the cutoff), and the modern query must count every record of every window
    ending after it: it starts at the oldest record falling in such a window. A record of ``[R, P)`` the legacy
    job dropped as late only counted for windows at or before the cutoff, which the filter drops, so the modern
    query, starting without a watermark, accepting it changes no row that is kept.

    Raises:
        ConfigError: a legacy row for a window its watermark had not closed (the outputs are not from a job that
            emits windows on close with this delay).
    """
    watermark = watermark_below(events, inp.last_batch_from or inp.position, delay_ms)
    next_watermark = watermark_below(events, inp.position, delay_ms)
    ends = window_end.to_numpy(dtype=np.int64)
    _closed_by(ends, watermark, "window", delay_ms)
    times = events["event_time"].to_numpy(dtype=np.int64)
    still_open = _newest_window_end(times, windows) > watermark if len(times) else np.zeros(0, bool)
    reread = events[still_open]
    starts = earliest_offsets(reread, inp.position)
    suppress = _emitted_again(events, inp, starts, ends, key_columns)
    return Rewind(starts, suppress, watermark, watermark, next_watermark,
                  needed="the records of the windows still open at the legacy watermark")


def rewind_seen_ids(events: pd.DataFrame, inp: RewindInput, *, delay_ms: int, id_column: str) -> Rewind:
    """The rewind of a deduplication within the watermark (append mode, each id's first delivery emitted at once).

    Every record at or after the position is judged against at least the legacy job's next watermark ``W'``; one
    with an event time at or before it is too late. So the filter drops every modern row with an event time at or
    before ``W'`` (the cutoff), and the ids that matter are those of events after ``W'``: the modern query starts
    at the oldest of them so that its own state holds them again (a re-delivery after ``P`` is dropped), and the
    ones the legacy job emitted are suppressed (the modern query emits them again from ``[R, P)``).
    """
    watermark = watermark_below(events, inp.last_batch_from or inp.position, delay_ms)
    next_watermark = watermark_below(events, inp.position, delay_ms)
    remembered = events[events["event_time"].to_numpy(dtype=np.int64) > next_watermark]
    starts = earliest_offsets(remembered, inp.position)
    emitted = inp.emitted
    again = emitted[emitted["event_time"].to_numpy(dtype=np.int64) > next_watermark] if len(emitted) else emitted
    suppress = again[[id_column]].drop_duplicates().reset_index(drop=True)
    return Rewind(starts, suppress, next_watermark, watermark, next_watermark,
                  needed="the ids seen after the legacy job's next watermark (re-deliveries are still possible)")


def rewind_sessions(events: pd.DataFrame, inp: RewindInput, *, gap_ms: int, delay_ms: int,
                    key_columns: tuple[str, ...]) -> Rewind:
    """The rewind of per-user event-time sessions emitted on close (append mode, ``session_end`` a row time).

    Rows are ``user, session_start, session_end, ...``, ``session_end`` the session's last event plus the gap.

    The legacy job emitted every session its last batch's watermark ``W`` had passed the end of, and a record is
    dropped only when ``t + gap <= W`` (it could only open a session already closed). The events before the
    position, sessionized per user (a new session after a silence longer than the gap), give the sessions still
    open at ``W``: the modern query starts at the oldest of their records, and drops every session ending at or
    before ``W`` (a closed session's records read again only form part of it, which ends where it ended).
    """
    watermark = watermark_below(events, inp.last_batch_from or inp.position, delay_ms)
    next_watermark = watermark_below(events, inp.position, delay_ms)
    ordered = events.sort_values(["user", "event_time"], kind="stable")
    silence = ordered.groupby("user")["event_time"].diff()
    session = (silence.isna() | (silence > gap_ms)).cumsum()
    ends = ordered.groupby(session)["event_time"].transform("max") + gap_ms
    reread = ordered[ends.to_numpy(dtype=np.int64) > watermark]
    starts = earliest_offsets(reread, inp.position)
    emitted_ends = inp.emitted["session_end"].to_numpy(dtype=np.int64) if len(inp.emitted) else np.zeros(0, np.int64)
    _closed_by(emitted_ends, watermark, "session", delay_ms)
    suppress = _emitted_again(events, inp, starts, emitted_ends, key_columns)
    return Rewind(starts, suppress, watermark, watermark, next_watermark,
                  needed="the records of the sessions still open at the legacy watermark")


SESSION_STATE = ("start", "last", "events", "kafka_ts")
"""An open session's state, as :func:`kit.semantics.merge_session` keeps it: its first and last event times, how
many events, their newest Kafka timestamp."""


def open_sessions(events: pd.DataFrame, inp: RewindInput, *, gap_ms: int, delay_ms: int) -> pd.DataFrame:
    """The sessions the legacy job held open at the position: ``user`` and :data:`SESSION_STATE` per session.

    ``events`` (with ``kafka_ts``) are the records it processed, without those it dropped as late
    (``inp.late``, required: a late record within a gap of an open session would otherwise join it). Sessionized
    per user (a new session after a silence longer than the gap, as ``session_window`` merges), those ending at or
    before the watermark ``W`` of its last batch are the ones it emitted, and those after ``W`` are its state.

    The sessions ending by ``W`` must be exactly the legacy output's rows (user, start, end, events): otherwise
    these records are not what the legacy job's state was built from, and the seed would be wrong.

    Raises:
        ConfigError: the legacy job's late records are unknown, or the sessions by ``W`` are not its output.
    """
    if inp.late is None:
        msg = ("seeding sessions needs the records the legacy job dropped as late (its <job>.late output in the "
               "kit's layout); without it, cut over with --rewind")
        raise ConfigError(msg, field="legacy_output", expected="a <job>.late output", actual=None)
    watermark = watermark_below(events, inp.last_batch_from or inp.position, delay_ms)
    dropped = events.merge(inp.late[["topic", "partition", "offset"]].drop_duplicates(), how="left", indicator=True,
                           on=["topic", "partition", "offset"])["_merge"].eq("both").to_numpy()
    kept = events[~dropped].sort_values(["user", "event_time"], kind="stable")
    silence = kept.groupby("user")["event_time"].diff()
    sessions = kept.assign(session=(silence.isna() | (silence > gap_ms)).cumsum()).groupby("session").agg(
        user=("user", "first"), start=("event_time", "min"), last=("event_time", "max"),
        events=("event_time", "size"), kafka_ts=("kafka_ts", "max"))
    ends = sessions["last"] + gap_ms
    closed = sessions[ends <= watermark].assign(session_end=ends[ends <= watermark])
    numbers = {"session_start": "int64", "session_end": "int64", "events": "int64"}
    mine = closed.rename(columns={"start": "session_start"})[["user", *numbers]].astype(numbers)
    theirs = inp.emitted[["user", *numbers]].astype(numbers)
    diff = mine.merge(theirs, how="outer", indicator=True)
    unmatched = diff[diff["_merge"] != "both"]
    if len(unmatched):
        first = unmatched.iloc[0]
        side = "the records give" if first["_merge"] == "left_only" else "the legacy output holds"
        msg = (
            f"the sessions the legacy job closed are not those of the records it processed: {len(unmatched)} differ, "
            f"e.g. {side} user {first['user']!r} from {int(first['session_start'])} to {int(first['session_end'])}; "
            "its state cannot be rebuilt from them (records gone from the topic, or another job's output): cut over "
            "with --rewind"
        )
        raise ConfigError(msg, field="legacy_output", expected="the sessions of the processed records",
                          actual=len(unmatched))
    still_open = sessions[ends > watermark]
    return still_open[["user", *SESSION_STATE]].astype({c: "int64" for c in SESSION_STATE}).sort_values(
        ["user", "start"]).reset_index(drop=True)


def rewind_pairs(events: pd.DataFrame, inp: RewindInput, *, sides: tuple[pd.Series, pd.Series], within_ms: int,
                 delay_ms: int) -> Rewind:
    """The rewind of a stream-stream inner join on a time range (append mode, each pair emitted once, at once).

    ``sides`` marks ``events``' rows of the earlier side (a view) and the later side (a click that follows it by
    ``0..within_ms``). The legacy job emitted every pair of its admitted records below the position, and its
    watermark (the smaller of the two sides' largest event times, minus the delay) only admits a record at or
    after ``P`` whose event time is after its next watermark ``W'``. Such a later-side record pairs with
    earlier-side records down to ``within_ms`` before it, an earlier-side one with later-side records after it: the
    modern query starts at the oldest earlier-side record after ``W' - within_ms`` and the oldest later-side one
    after ``W'``, so that its join state holds them again. After them its watermark is ``W'`` again (the newest
    record of either side below ``P`` is among them).

    A pair is identified by its two input records, not by its key: a re-delivered record has its original's
    event time and ids, and pairs again. So the filter drops the modern rows whose inputs are *both* below the
    position (the legacy job emitted them, or dropped one of their records as too late), and every row made from
    a re-read record the legacy job dropped as late (:attr:`Rewind.dropped`; the modern query, starting without
    a watermark, admits it): its time and key filters are off (no cutoff, no keys).

    Raises:
        ConfigError: the legacy job's late records are not known (``inp.late`` is None).
    """
    if inp.late is None:
        msg = ("a rewound join needs the records the legacy job dropped as too late (its <job>.late output in the "
               "kit's layout): pass the job's --legacy-output DIR as the kit's runner wrote it")
        raise ConfigError(msg, field="legacy_output", expected="a <job>.late output", actual=None)
    earlier, later = (side.to_numpy(dtype=bool) for side in sides)
    times = events["event_time"].to_numpy(dtype=np.int64)

    def mark(bounds: dict[TopicPartition, int]) -> int:
        # the smaller of the two sides' watermarks (NO_WATERMARK until both have events): the legacy rule
        return min(watermark_below(events[earlier], bounds, delay_ms), watermark_below(events[later], bounds, delay_ms))

    watermark, next_watermark = mark(inp.last_batch_from or inp.position), mark(inp.position)
    needed = (earlier & (times > next_watermark - within_ms)) | (later & (times > next_watermark))
    starts = earliest_offsets(events[needed], inp.position)
    late = inp.late[["topic", "partition", "offset"]]
    dropped = late[~_below(late, starts) & _below(late, inp.position)] if len(late) else late
    return Rewind(starts, inp.emitted.iloc[:0], NO_WATERMARK, watermark, next_watermark,
                  needed="the rows the join still buffers at the legacy job's next watermark (they pair with later "
                  "records)", dropped=dropped.astype({"partition": "int64", "offset": "int64"}).reset_index(drop=True))
