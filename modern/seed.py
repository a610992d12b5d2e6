"""State carried in Spark's state store: a cutover's seed as a stateful processor's initial state, checked.

``dmk cutover --seed-state FILE`` writes the legacy job's state (from its outputs, or for sessions from the records
it processed), and the modern job's query
(:func:`seeded_query`) takes it as the ``initialState`` of a ``transformWithStateInPandas`` processor (``dedup``'s:
``transformWithState``, the same API over Rows). Spark hands
each seed row to ``handleInitialState`` in the query's first micro-batch and keeps it in the query's state store;
Spark does not use the seed's rows after that batch (a restart continues from the checkpoint; a seeded ids or sessions
query still reads the seed's newest event time when it starts, so keep the file while the job's config names it).
Three kinds of state are seeded:

- **totals** that count a workload's events (:attr:`kit.workloads.StateCarry.counts_events`: ``running_counts``,
  ``examples.event_types``): the seed is each key's last row (``key, count, last_input_ts``); the query is
  :func:`seeded_totals`, the events grouped by the key columns into :class:`SeededTotals`, which emits what
  ``groupBy(keys).agg(count, max(kafka_ts))`` in update mode emits, from the legacy totals on;
- **ids seen** by a deduplication (:attr:`~kit.workloads.StateCarry.seeds_ids`: ``dedup``): the seed is the ids
  the legacy job can still be sent again (``event_id, seen_at``, :func:`compare.cutover.ids_seed`); the query is
  :func:`seeded_first_deliveries`, ``dedup``'s :class:`~modern.workloads.dedup.FirstDelivery` remembering them,
  behind the legacy job's watermark (:func:`seed_watermark`: a first micro-batch has none of its own);
- **open sessions** (:attr:`~kit.workloads.StateCarry.seed_from_input`: ``sessions``): the seed is each user's
  open sessions (``user, start, last, events, kafka_ts``, :func:`kit.workloads.rewind.open_sessions`); the query is
  :func:`seeded_sessions`, ``sessions``' :class:`~modern.workloads.sessions.Sessionizer` holding them, behind the
  legacy job's watermark as for ids.

:func:`check_seeded_state` proves the carry after that first batch: it reads the state store at batch 0 with
Spark's state data source (``format("statestore")``, the kind's state variable) and compares it key for key with
the seed plus the batch's own events, which it reads again from Kafka (the batch's offset ranges, from the query's
progress) and parses with :func:`kit.events.parse_event`. The runner (:class:`modern.runner.ModernRun`) runs it as
soon as batch 0 commits, writes ``<job>.seed_check.json`` and stops the run with a
:class:`~kit.errors.ConfigError` if any key differs.

Example::

    frame = seeded_query(spark.read.parquet("runs/seed.parquet"), source, kit.workloads.get("running_counts"))
    check = check_seeded_state(spark, "ckpt/running_counts", "runs/seed.parquet", spec, batch_ranges, "b:9092")
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from kit import workloads
from kit.errors import ConfigError
from kit.events import parse_event

__all__ = ["IDS_VARIABLE", "STATE_VARIABLE", "SeedCheck", "SeededTotals", "check_seed_columns",
           "check_seeded_state", "first_batch_ranges", "seed_watermark", "seeded_first_deliveries", "seeded_query",
           "seeded_totals", "starting_offsets", "typed_seed"]

STATE_VARIABLE = "total"
"""The :class:`SeededTotals` value state: ``(count, last_input_ts)`` per key."""

IDS_VARIABLE = "forget_at"
"""The :class:`~modern.workloads.dedup.FirstDelivery` value state: when the id may be forgotten (event time, ms)."""

SESSIONS_VARIABLE = "open_sessions"
"""The :class:`~modern.workloads.sessions.Sessionizer` list state: a user's open sessions."""

_TOTALS = ("count", "last_input_ts")
_SEEN_AT = "seen_at"


class SeededTotals(StatefulProcessor):
    """Per key: how many events it had and the newest Kafka timestamp among them, from the legacy job's row on.

    Args:
        keys: the grouping key columns, in order (the output's first columns).
    """

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys

    def init(self, handle: Any) -> None:
        """Declare the per-key state."""
        self.total = handle.getValueState(STATE_VARIABLE, "count long, last_input_ts long")

    def handleInitialState(self, key: Any, initialState: pd.DataFrame, timerValues: Any) -> None:
        """Hold the key's seed row (first micro-batch only)."""
        row = initialState.iloc[0]  # one seed row per key (the cutover writes the last row of each)
        self.total.update((int(row["count"]), int(row["last_input_ts"])))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        """Count the key's new events on from its total; emit the new total (update mode)."""
        count, last = self.total.get() if self.total.exists() else (0, None)
        for chunk in rows:
            newest = int(chunk["last_input_ts"].max())
            count, last = count + len(chunk), newest if last is None else max(last, newest)
        self.total.update((count, last))
        yield pd.DataFrame({**{k: [v] for k, v in zip(self.keys, key, strict=True)},
                            "count": [count], "last_input_ts": [last]})


def check_seed_columns(columns: list[str], spec: workloads.WorkloadSpec) -> None:
    """Refuse a seed without the columns ``spec``'s carry needs.

    Those are its key columns and its total columns and ``last_input_ts`` (totals), its key columns and ``seen_at``
    (ids seen), or ``user`` and :data:`kit.workloads.rewind.SESSION_STATE` (sessions).

    Raises:
        ConfigError: naming the missing columns and what writes them.
    """
    needed = _seed_columns(spec)
    missing = [c for c in needed if c not in columns]
    if missing:
        msg = (f"{spec.name}: the initial state lacks the columns {missing}; it needs {needed} "
               "(dmk cutover --seed-state writes them)")
        raise ConfigError(msg, field="initial_state", expected=needed, actual=list(columns))


_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def _seed_keys(spec: workloads.WorkloadSpec) -> list[str]:
    """The grouping key of the seeded state: the spec's key columns, the user for sessions."""
    return ["user"] if spec.carry.seed_from_input is not None else list(spec.key_columns)


def _seed_columns(spec: workloads.WorkloadSpec) -> list[str]:
    """The columns a seed of ``spec``'s state has (:func:`compare.cutover.state_seed` writes them)."""
    if spec.carry.seed_from_input is not None:
        from kit.workloads.rewind import SESSION_STATE

        return ["user", *SESSION_STATE]
    values = [_SEEN_AT] if spec.carry.seeds_ids else [*spec.carry.sum_columns, "last_input_ts"]
    return [*spec.key_columns, *values]


def typed_seed(seed: Any, events: Any, spec: workloads.WorkloadSpec) -> Any:
    """``seed``'s columns as the query's state holds them: its keys of the events' own types, the rest longs.

    Refuses, before the query starts (nothing is written to its checkpoint), a seed the state cannot hold: a key
    column of another type than the events' own, or a total, ``seen_at`` or session field that is not an integer. An
    empty seed (the legacy job completed no batch with records) is only cast: its columns may have any type.

    Raises:
        ConfigError: naming the column, its type in the seed and the type the state holds.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    keys = _seed_keys(spec)
    values = [c for c in _seed_columns(spec) if c not in keys]
    types = {f.name: f.dataType.simpleString() for f in seed.schema.fields}
    wrong = [(k, types[k], events.schema[k].dataType.simpleString()) for k in keys
             if types[k] != events.schema[k].dataType.simpleString()]
    wrong += [(c, types[c], "bigint") for c in values if types[c] not in _INTEGRAL]
    if wrong and seed.take(1):
        column, actual, expected = wrong[0]
        msg = (f"{spec.name}: the initial state's column {column!r} is {actual}, but the query's state holds "
               f"{expected} there; write the seed again with dmk cutover --seed-state from the legacy job's outputs")
        raise ConfigError(msg, field="initial_state", expected=expected, actual=f"{column}: {actual}")
    return seed.select(*(F.col(k).cast(events.schema[k].dataType).alias(k) for k in keys),
                       *(F.col(c).cast("long").alias(c) for c in values))


def seeded_query(seed: Any, source: Any, spec: workloads.WorkloadSpec) -> Any:
    """``spec``'s modern query over ``source`` started from ``seed`` in its state store (its carry's kind).

    Raises:
        ConfigError: the workload's state cannot be seeded (:attr:`kit.workloads.StateCarry.seeded`), or ``seed``
            lacks a column.
    """
    if spec.carry.seeds_ids:
        return seeded_first_deliveries(seed, source, spec)
    if spec.carry.seed_from_input is not None:
        return seeded_sessions(seed, source, spec)
    return seeded_totals(seed, source, spec)


def seed_watermark(newest: int | None, spec: workloads.WorkloadSpec) -> int | None:
    """The legacy job's next watermark, from the newest event time in a seed (None: an empty seed).

    An ids seed holds the id of the newest event the legacy job processed (:func:`compare.cutover.ids_seed`), a
    sessions seed the open session that event is in: its ``seen_at``, or the session's ``last``, minus the delay is
    the watermark the legacy job's next batch would have used.
    """
    if newest is None:
        return None
    assert spec.watermark_delay_ms is not None, "a workload whose state is seeded by event time has a watermark"
    return int(newest) - spec.watermark_delay_ms


def _carried_watermark(spec: workloads.WorkloadSpec, gap_ms: int | None) -> tuple[str, int] | None:
    """How a seeded query holds records behind the legacy job's watermark; None for totals, which have none.

    Returns the seed column whose newest value gives it (:func:`seed_watermark`), and how far past its event time a
    record reaches (a session's gap: a record is too late when its session would end at or before the watermark).
    """
    if spec.carry.seed_from_input is not None:
        if gap_ms is None:
            msg = "a sessions seed needs the session gap (gap_ms)"
            raise ValueError(msg)
        return "last", gap_ms
    return (_SEEN_AT, 0) if spec.carry.seeds_ids else None


def _behind_legacy_watermark(events: Any, seed: Any, spec: workloads.WorkloadSpec, gap_ms: int | None) -> Any:
    """``events`` without the records the legacy job would have dropped as too late.

    A first micro-batch has no watermark of its own; once the query's watermark passes the legacy one, this drops
    nothing it keeps.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    carried = _carried_watermark(spec, gap_ms)
    assert carried is not None, "only ids and sessions seeds carry a watermark"
    column, reach_ms = carried
    floor = seed_watermark(seed.agg(F.max(column)).first()[0], spec)
    return events if floor is None else events.where(F.col("event_time_ms") + F.lit(reach_ms) > F.lit(floor))


def seeded_first_deliveries(seed: Any, source: Any, spec: workloads.WorkloadSpec) -> Any:
    """``dedup`` over ``source``'s events as :class:`~modern.workloads.dedup.FirstDelivery` remembering ``seed``.

    A query's first micro-batch has no watermark: a record the legacy job would have dropped as too late (at or
    before its next watermark, :func:`seed_watermark`) would pass. So the events are filtered on that watermark
    too (:func:`_behind_legacy_watermark`), for good: once the query's own watermark passes it, the filter drops
    nothing the watermark keeps.

    Raises:
        ConfigError: ``seed`` lacks a key column or ``seen_at``.
    """
    from modern.workloads.dedup import first_deliveries

    check_seed_columns(seed.columns, spec)
    keys = tuple(spec.key_columns)
    events = source.events(spec.inputs[0]).withWatermark("event_time", f"{spec.watermark_delay_ms} milliseconds")
    seed = typed_seed(seed, events, spec)
    events = _behind_legacy_watermark(events, seed, spec, None)
    return first_deliveries(events, seed.groupBy(*keys)).select(*spec.columns)


def seeded_totals(seed: Any, source: Any, spec: workloads.WorkloadSpec) -> Any:
    """``spec``'s totals over ``source``'s events as a :class:`SeededTotals` query started from ``seed``.

    Raises:
        ConfigError: the workload's totals do not count its events, or ``seed`` lacks a key or total column.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    if not spec.carry.counts_events:
        msg = (f"{spec.name}: its totals are not a count of its events, so Spark's state store cannot be seeded "
               f"with them ({spec.carry.how}: {spec.carry.note})")
        raise ConfigError(msg, field="initial_state", expected="a workload whose carry counts its events",
                          actual=spec.carry.how)
    keys = tuple(spec.key_columns)
    check_seed_columns(seed.columns, spec)
    events = source.events(spec.inputs[0]).select(*keys, F.unix_millis("kafka_ts").alias("last_input_ts"))
    initial = typed_seed(seed, events, spec).select(*keys, *_TOTALS).groupBy(*keys)
    schema = ", ".join(
        [f"{k} {events.schema[k].dataType.simpleString()}" for k in keys] + ["count long", "last_input_ts long"])
    return events.groupBy(*keys).transformWithStateInPandas(
        SeededTotals(keys), schema, outputMode="Update", timeMode="None", initialState=initial
    ).select(*spec.columns)


def seeded_sessions(seed: Any, source: Any, spec: workloads.WorkloadSpec) -> Any:
    """``sessions`` over ``source``'s events as :class:`~modern.workloads.sessions.Sessionizer` holding ``seed``.

    The seed holds the legacy job's newest event (its session is still open), so its newest ``last`` minus the delay
    is the watermark its next batch would have used; a record whose session would end at or before it is too late,
    and the events are filtered on it as :func:`seeded_first_deliveries` does.

    Raises:
        ConfigError: ``seed`` lacks a column or holds one of another type.
    """
    from modern.workloads.sessions import sessions_by_processor

    check_seed_columns(seed.columns, spec)
    events = source.events(spec.inputs[0])
    seed = typed_seed(seed, events, spec)
    gap = source.dataset.session_gap_ms
    events = _behind_legacy_watermark(events, seed, spec, gap)
    return sessions_by_processor(events, gap, seed.groupBy("user")).select(*spec.columns)


@dataclass(frozen=True)
class SeedCheck:
    """What :func:`check_seeded_state` found: the seed against the state store at the query's first batch.

    Attributes:
        job: the query's name.
        keys_seeded: keys in the seed (a user's open sessions are one key).
        seed_bytes: the seed file's size.
        first_batch_events: valid events of the first batch (read again from Kafka).
        keys_in_state: keys in the state store at batch 0.
        first_batch_late: ids seen only: events of the first batch at or before the legacy job's next watermark,
            which the query drops as too late, as the legacy job would have.
        differences: up to 10 keys whose state is not the seed plus the batch's events, with both values.
        different: how many keys differ (also keys missing from either side).
    """

    job: str
    keys_seeded: int
    seed_bytes: int
    first_batch_events: int
    keys_in_state: int
    differences: list[dict[str, Any]] = field(default_factory=list)
    different: int = 0
    first_batch_late: int = 0

    @property
    def ok(self) -> bool:
        """Every key's state is the seed plus its events of the first batch."""
        return self.different == 0

    def to_json(self) -> str:
        """The check as JSON (``<job>.seed_check.json``)."""
        return json.dumps({**asdict(self), "ok": self.ok}, indent=2, default=str)


def starting_offsets(option: Any) -> dict[str, dict[int, int]]:
    """A query's ``startingOffsets`` option as topic → partition → offset (``-2``: the beginning; {}: all of it).

    Raises:
        ConfigError: ``latest`` (or ``-1``): where the first batch began is then unknown, so its seed cannot be
            checked (and the records between the legacy job's position and the query's start would be lost).
    """
    if option in (None, "", "earliest"):
        return {}
    parsed = json.loads(option) if isinstance(option, str) and option.strip().startswith("{") else option
    if not isinstance(parsed, Mapping) or any(int(o) == -1 for parts in parsed.values() for o in parts.values()):
        msg = (f"a seeded query must start at known offsets, got startingOffsets {option!r}: start it at the "
               "offsets dmk cutover writes (--write-options), where the legacy job stopped")
        raise ConfigError(msg, field="startingOffsets", expected="a JSON object of offsets, or earliest",
                          actual=option)
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}


def first_batch_ranges(progress: Mapping[str, Any], starting: Mapping[str, Mapping[int, int]],
                       beginnings: Mapping[str, Mapping[int, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) → (from, until)`` read by the batch of ``progress`` (batch 0).

    A first batch's progress has no ``startOffset``: it started at the query's ``starting`` offsets (``-2``: the
    partition's beginning, from ``beginnings``).
    """
    from modern.kafka import offsets_from_json

    def offsets(value: Any) -> Any:  # a first batch's startOffset is null, or the text "null"
        return offsets_from_json(value) if value not in (None, "", "null") else {}

    ranges = {}
    for source in progress.get("sources") or []:
        end, start = offsets(source.get("endOffset")), offsets(source.get("startOffset"))
        for tp, until in end.items():
            begin = start.get(tp, starting.get(tp.topic, {}).get(tp.partition, -2))
            if begin < 0:  # -2: earliest (the cutover writes it for partitions the legacy job never read)
                begin = beginnings[tp.topic][tp.partition]
            ranges[(tp.topic, tp.partition)] = (begin, until)
    return ranges


def _state_at(spark: Any, checkpoint: str | Path, keys: tuple[str, ...], variable: str,
              values: tuple[str, ...]) -> pd.DataFrame:
    """The state variable ``variable`` at batch 0, one row per key (``format("statestore")``)."""
    from pyspark.sql import functions as F  # noqa: N812

    frame = (spark.read.format("statestore").option("stateVarName", variable).option("batchId", 0)
             .load(str(Path(checkpoint).resolve())))
    return frame.select(*(F.col(f"key.{k}").alias(k) for k in keys),
                        *(F.col(f"value.{c}").alias(c) for c in values)).toPandas()


def _events_in(ranges: Mapping[tuple[str, int], tuple[int, int]], keys: tuple[str, ...], bootstrap_servers: str,
               kafka_settings: Mapping[str, Any] | None) -> pd.DataFrame:
    """The valid events of ``ranges`` in arrival order: ``keys``, ``event_time`` (ms) and ``kafka_ts``."""
    from kit.kafka import Kafka

    rows = []
    with Kafka(bootstrap_servers, settings=dict(kafka_settings or {})) as kafka:
        for (topic, partition), (begin, until) in sorted(ranges.items()):
            for record in kafka.read_range(topic, partition, begin, until):
                event, _ = parse_event(record.value)
                if event is not None:  # a malformed record is a dead letter, counted by no key
                    rows.append((*(event[k] for k in keys), int(event["event_time"]), int(record.timestamp)))
    return pd.DataFrame(rows, columns=[*keys, "event_time", "kafka_ts"])


def _expected_totals(seed: pd.DataFrame, batch: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each key's count: the seed's plus the batch's events; ``last_input_ts`` the newer of the two."""
    counted = batch.groupby(keys, as_index=False).agg(count=("kafka_ts", "size"), last_input_ts=("kafka_ts", "max"))
    expected = seed.merge(counted, on=keys, how="outer", suffixes=("_seed", "_batch"))
    expected["count"] = expected["count_seed"].fillna(0) + expected["count_batch"].fillna(0)
    expected["last_input_ts"] = expected[["last_input_ts_seed", "last_input_ts_batch"]].max(axis=1)
    return expected[[*keys, *_TOTALS]]


def _expected_ids(seed: pd.DataFrame, batch: pd.DataFrame, keys: list[str], delay_ms: int) -> pd.DataFrame:
    """Each id's ``forget_at``: the seed's ids, and the batch's ids past the legacy watermark not in it.

    A batch's id is seen at its first delivery's event time (a re-delivery has the same).
    """
    newer = batch.drop_duplicates(keys, keep="first")
    newer = newer[~newer.set_index(keys).index.isin(seed.set_index(keys).index)]
    both = pd.concat([seed.rename(columns={_SEEN_AT: "event_time"})[[*keys, "event_time"]],
                      newer[[*keys, "event_time"]]], ignore_index=True)
    return both.assign(forget_at=both["event_time"] + delay_ms)[[*keys, IDS_VARIABLE]]


def _expected_sessions(seed: pd.DataFrame, batch: pd.DataFrame, gap_ms: int) -> pd.DataFrame:
    """Each user's open sessions: the seed's, with the batch's events merged in (none closes in a first batch)."""
    from kit.semantics import merge_session
    from kit.workloads.rewind import SESSION_STATE

    by_user: dict[str, list[list[int]]] = {}
    for row in seed[["user", *SESSION_STATE]].itertuples(index=False):
        by_user.setdefault(row[0], []).append([int(v) for v in row[1:]])
    for user, t, kafka_ts in batch[["user", "event_time", "kafka_ts"]].itertuples(index=False):
        by_user[user] = merge_session(by_user.get(user, []), int(t), int(kafka_ts), gap_ms)
    return pd.DataFrame({"user": list(by_user), "sessions": [_sessions_text(s) for s in by_user.values()]})


def _sessions_text(sessions: Any) -> str:
    """A user's sessions, in order, as one comparable value (``start-last:events@kafka_ts`` each)."""
    return " ".join(f"{s[0]}-{s[1]}:{s[2]}@{s[3]}" for s in sorted(tuple(int(v) for v in s) for s in sessions))


def _session_state_at(spark: Any, checkpoint: str | Path) -> pd.DataFrame:
    """The :class:`~modern.workloads.sessions.Sessionizer` list state at batch 0: ``user, sessions`` per user."""
    from kit.workloads.rewind import SESSION_STATE

    frame = (spark.read.format("statestore").option("stateVarName", SESSIONS_VARIABLE).option("batchId", 0)
             .load(str(Path(checkpoint).resolve())))
    element = next(f.name for f in frame.schema.fields if f.name not in ("key", "partition_id"))
    rows = frame.selectExpr("key.user AS user", *(f"{element}.{c} AS {c}" for c in SESSION_STATE)).toPandas()
    grouped = rows.groupby("user")[list(SESSION_STATE)]
    return pd.DataFrame([(user, _sessions_text(part.to_numpy().tolist())) for user, part in grouped],
                        columns=["user", "sessions"])


def _read_seed(path: str | Path, columns: list[str], empty_keys: Mapping[str, Any]) -> pd.DataFrame:
    """The seed file's ``columns``; an empty seed's keys typed as ``empty_keys`` (it may hold any types)."""
    seed = pd.read_parquet(path, columns=columns)
    return seed.astype(dict(empty_keys)) if seed.empty else seed


def _plain(value: Any) -> Any:
    """A state value for the report: an int, or text as it is (a user's sessions)."""
    return value if isinstance(value, str) else int(value)


def check_seeded_state(
    spark: Any, checkpoint: str | Path, seed_path: str | Path, spec: workloads.WorkloadSpec,
    ranges: Mapping[tuple[str, int], tuple[int, int]], bootstrap_servers: str, *, job: str = "",
    kafka_settings: Mapping[str, Any] | None = None, gap_ms: int | None = None,
) -> SeedCheck:
    """Whether the state store of the query at ``checkpoint`` holds, at batch 0, the seed plus the batch's events.

    ``ranges``: the batch's offset ranges (:func:`first_batch_ranges`). Totals: each key's expected state is the
    seed row's count plus the batch's events of the key, and the newer of the two ``last_input_ts``. Ids seen:
    every seed id at its ``seen_at`` plus the delay, and every id the batch brought past the legacy job's
    watermark (no timer fires in a first batch: it has no watermark). Sessions (``gap_ms`` the session gap): each
    user's seed sessions with the batch's events past the legacy job's watermark merged in.
    """
    keys = tuple(_seed_keys(spec))
    batch = _events_in(ranges, keys, bootstrap_servers, kafka_settings)
    late = 0
    empty_keys = {k: batch[k].dtype for k in keys}  # an empty seed's key columns can have any type: the batch's
    seed = _read_seed(seed_path, _seed_columns(spec), empty_keys)
    carried = _carried_watermark(spec, gap_ms)
    if carried is not None and not seed.empty:  # the query drops what the legacy job would have dropped as late
        column, reach_ms = carried
        floor = seed_watermark(int(seed[column].max()), spec)
        behind = batch["event_time"] + reach_ms <= floor
        late = int(behind.sum())
        batch = batch[~behind]
    values: tuple[str, ...]
    if spec.carry.seed_from_input is not None:
        assert gap_ms is not None, "_carried_watermark refused a sessions check without the gap"
        values = ("sessions",)
        expected = _expected_sessions(seed, batch, gap_ms)
        state = _session_state_at(spark, checkpoint)
    elif spec.carry.seeds_ids:
        assert spec.watermark_delay_ms is not None, "a workload that seeds ids has a watermark"
        values = (IDS_VARIABLE,)
        expected = _expected_ids(seed, batch, list(keys), spec.watermark_delay_ms)
        state = _state_at(spark, checkpoint, keys, IDS_VARIABLE, values)
    else:
        values = _TOTALS
        expected = _expected_totals(seed, batch, list(keys))
        state = _state_at(spark, checkpoint, keys, STATE_VARIABLE, values)
    both = expected.merge(state, on=list(keys), how="outer", suffixes=("_expected", "_state"), indicator=True)
    wrong = both[(both["_merge"] != "both")
                 | pd.concat([both[f"{c}_expected"] != both[f"{c}_state"] for c in values], axis=1).any(axis=1)]
    differences = [
        {**{k: row[k] for k in keys},
         "expected": None if row["_merge"] == "right_only" else {c: _plain(row[f"{c}_expected"]) for c in values},
         "state": None if row["_merge"] == "left_only" else {c: _plain(row[f"{c}_state"]) for c in values}}
        for _, row in wrong.head(10).iterrows()
    ]
    return SeedCheck(job or spec.name, len(seed.drop_duplicates(list(keys))), Path(seed_path).stat().st_size,
                     len(batch), len(state), differences, len(wrong), late)
