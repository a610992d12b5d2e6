"""``dmk cutover --rewind``: the rewind rules held to the oracles at many kill points (pandas, no Spark), the CLI's
refusals, and (slow tier) the whole cutover of a killed legacy job, end to end.

The rule of a workload (``spec.carry.rewind``) gives the offsets the modern query starts at (``R``) and what its
output filter drops (``F``: rows at or before a cutoff, and the legacy rows it would produce again). Held to
the definition: the legacy output ``O_L`` plus ``F(modern output)`` equals the oracle over the whole input.

Without Spark, each engine is played by the oracle itself:

- the legacy job killed at a kill point ``k`` (the first ``k`` records processed, partitioned ``seq % 4`` as the
  replay does) emitted the oracle's rows over those ``k`` records, up to its watermark (emit on close): the
  largest event time before ``k``, or before its last batch's start (a batch of up to 1 s of event time, less than
  the datasets' lateness margin, as every engine the kit runs), minus the delay;
- the modern query is the oracle over the records it reads (from ``R`` on, in replay order), and, as its first
  micro-batch has no watermark at all, over the same records with the re-read ones in event-time order (no
  record among them is then late: the oracle's watermark never passes one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from compare.cutover import union_of_outputs
from compare.inputs import input_shares
from kit import workloads
from kit.dataset import DatasetSpec, ad_campaigns, generate
from kit.errors import ConfigError
from kit.events import parse_event
from kit.workloads import OracleResult
from kit.workloads.rewind import Rewind, RewindInput, TopicPartition

PARTITIONS = 4
REWOUND = ("windowed_counts", "dedup", "ysb", "sessions", "join")


def _dataset(seed: int, name: str = "") -> DatasetSpec:
    # 26 s of event time (sessions: 80 s, as a session needs its 30 s gap and the delay to close): windows and the
    # watermark move several times; messy: late, too late, re-deliveries.
    rate = 50 if name == "sessions" else 150
    return DatasetSpec.from_profile("messy", records=4000, seed=seed, events_per_second=rate)


def _placed(frame: pd.DataFrame, spec: workloads.WorkloadSpec | None = None) -> pd.DataFrame:
    """Where the replay puts each record: ``seq`` → ``topic`` (``"t"``, or the input a join routes it to),
    ``partition`` (``seq % 4``) and ``offset`` (its rank in that partition, in ``seq`` order)."""
    topics = spec.route(frame).to_numpy() if spec is not None and spec.router is not None else "t"
    placed = pd.DataFrame({"seq": frame["seq"].to_numpy(), "topic": topics,
                           "partition": frame["seq"].to_numpy() % PARTITIONS})
    placed["offset"] = placed.groupby(["topic", "partition"]).cumcount()
    return placed.set_index("seq")


def _events(frame: pd.DataFrame, spec: workloads.WorkloadSpec | None = None) -> pd.DataFrame:
    """The valid records of ``frame`` as the cutover reads them: parsed, with topic, partition and offset (and seq)."""
    placed = _placed(frame, spec)
    rows = []
    for seq, value, kafka_ts in zip(frame["seq"].tolist(), frame["value"].tolist(), frame["timestamp_ms"].tolist(),
                                    strict=True):
        event, _ = parse_event(value)
        if event is not None:
            where = placed.loc[seq]
            rows.append({**event, "topic": where["topic"], "partition": int(where["partition"]),
                         "offset": int(where["offset"]), "kafka_ts": kafka_ts, "seq": seq})
    columns = ["event_id", "user", "key", "ad_id", "ad_type", "event_type", "event_time", "topic", "partition",
               "offset", "kafka_ts", "seq"]
    return pd.DataFrame(rows, columns=columns)


def _watermark_events(name: str, events: pd.DataFrame, dataset: DatasetSpec) -> pd.DataFrame:
    """The events that move the legacy job's watermark (YSB: the views with a campaign; the others: all)."""
    if name != "ysb":
        return events
    return events[(events["event_type"] == "view") & events["ad_id"].isin(set(ad_campaigns(dataset)))]


def _offsets_below(k: int, placed: pd.DataFrame | None = None) -> dict[TopicPartition, int]:
    """The per-partition position after the first ``k`` records (``seq % 4`` partitioning; topics as ``placed``)."""
    if placed is None:
        return {("t", p): len(range(p, k, PARTITIONS)) for p in range(PARTITIONS)}
    counts = placed[placed.index < k].groupby(["topic", "partition"]).size()
    return {(str(t), p): int(counts.get((t, p), 0)) for t in sorted(set(placed["topic"])) for p in range(PARTITIONS)}


_PARSED: dict[tuple[int, str], pd.DataFrame] = {}


def _parsed(frame: pd.DataFrame, spec: workloads.WorkloadSpec | None = None) -> pd.DataFrame:
    # Parsed once per dataset (the frames are the same object for all of a seed's kill points).
    key = (id(frame), spec.name if spec is not None and spec.router is not None else "")
    if key not in _PARSED:
        if all(seen != id(frame) for seen, _ in _PARSED):
            _PARSED.clear()
        _PARSED[key] = _events(frame, spec)
    return _PARSED[key]


def _time(value: bytes) -> int:
    event, _ = parse_event(value)
    return int(event["event_time"]) if event is not None else -(2**62)


def _last_batch_start(frame: pd.DataFrame, k: int, lag_s: float) -> int:
    """Where the legacy job's last batch before ``k`` began: its newest event time before was ``lag_s`` behind."""
    if not lag_s:
        return k  # the last batch held no records: its watermark came from all of them
    parsed = _parsed(frame)
    times = np.full(k, -(2**62), dtype=np.int64)
    seqs = parsed["seq"].to_numpy()
    times[seqs[seqs < k]] = parsed["event_time"].to_numpy()[seqs < k]
    running = np.maximum.accumulate(times)
    return int(np.argmax(running >= running[-1] - lag_s * 1000)) + 1


def _drop_suppressed(spec: workloads.WorkloadSpec, rows: pd.DataFrame, rewind: Rewind) -> pd.DataFrame:
    """The output filter (``modern.cutover.suppress_emitted``), in pandas."""
    if spec.carry.row_inputs:
        raise AssertionError("a join's filter reads its pairs' records: _drop_pairs_read_before")
    kept = rows[rows.eval(spec.carry.row_time) > rewind.cutoff_ms]
    keys = list(spec.key_columns)
    marked = kept.merge(rewind.suppress.assign(__emitted=True), on=keys, how="left")
    return marked[marked["__emitted"].isna()].drop(columns="__emitted")


def _drop_pairs_read_before(frame: pd.DataFrame, placed: pd.DataFrame, position: dict[TopicPartition, int],
                            rewind: Rewind) -> pd.DataFrame:
    """A join's output filter, in pandas: the modern pairs (the oracle's over ``frame``) without those whose two
    records lie below the position or include a record of ``rewind.dropped``."""
    spec = workloads.get("join")
    pairs = workloads.join.pairs_with_inputs(frame)
    dropped = set(map(tuple, rewind.dropped[["topic", "partition", "offset"]].itertuples(index=False)))
    below, late = [], []
    for side in ("impression", "click"):
        at = placed.loc[pairs[f"{side}_seq"].to_numpy()]
        where = list(zip(at["topic"], at["partition"], at["offset"], strict=True))
        below.append(np.array([o < position[(t, p)] for t, p, o in where], dtype=bool))
        late.append(np.array([w in dropped for w in where], dtype=bool))
    kept = pairs[~(below[0] & below[1]) & ~late[0] & ~late[1]]
    return workloads.sorted_rows(spec, kept)


def _cut_over(name: str, frame: pd.DataFrame, dataset: DatasetSpec, k: int, lag_s: float,
              expected: pd.DataFrame) -> dict[str, object]:
    spec = workloads.get(name)
    assert spec.carry.rewind is not None
    placed = _placed(frame, spec)
    parsed = _parsed(frame, spec)
    events = parsed[parsed["seq"] < k]
    position = _offsets_below(k, placed)
    j = _last_batch_start(frame, k, lag_s)
    result = spec.oracle(frame.iloc[:k], dataset)
    prefix = result.rows
    late = placed.loc[result.late_dropped["seq"].to_numpy()].reset_index(drop=True)
    if name not in ("dedup", "join"):  # windows and sessions, emitted once the legacy watermark passes their end
        marks = _watermark_events(name, events, dataset)
        legacy_watermark = int(marks.loc[marks["offset"] * PARTITIONS + marks["partition"] < j,
                                         "event_time"].max()) - spec.watermark_delay_ms
        emitted = prefix[prefix.eval(spec.carry.row_time) <= legacy_watermark]
    else:
        emitted = prefix
    rewind = spec.carry.rewind(RewindInput(events, emitted, position, _offsets_below(j, placed), dataset, late))
    at = placed.loc[frame["seq"].to_numpy()]
    starts = [rewind.starts[(t, p)] for t, p in zip(at["topic"], at["partition"], strict=True)]
    read = frame[at["offset"].to_numpy() >= np.array(starts)]
    assert all(rewind.starts[tp] <= at for tp, at in position.items())
    for first_batch_unwatermarked in (False, True):
        modern_input = read
        if first_batch_unwatermarked:
            reread = read[read["seq"] < k]
            t = [(parse_event(v)[0] or {"event_time": 0})["event_time"] for v in reread["value"]]
            modern_input = pd.concat([reread.assign(_t=t).sort_values("_t", kind="stable").drop(columns="_t"),
                                      read[read["seq"] >= k]])
        if spec.carry.row_inputs:
            modern = _drop_pairs_read_before(modern_input, placed, position, rewind)
        else:
            modern = _drop_suppressed(spec, spec.oracle(modern_input, dataset).rows, rewind)
        union = union_of_outputs(spec, emitted.assign(batch=0), modern.assign(batch=1))
        pd.testing.assert_frame_equal(union.astype(expected.dtypes.to_dict()), expected, check_dtype=False)
    return {"k": k, "reread": int(sum(position[tp] - r for tp, r in rewind.starts.items())),
            "suppressed": len(rewind.suppress) + len(rewind.dropped), "emitted": len(emitted)}


@pytest.mark.parametrize("name", REWOUND)
def test_rewound_cutover_equals_the_oracle_at_many_kill_points(name: str) -> None:
    seen = []
    for seed in (3, 11):
        dataset = _dataset(seed, name)
        frame = generate(dataset)
        expected = workloads.get(name).oracle(frame, dataset).rows
        chooser = random.Random(seed)
        points = sorted(chooser.sample(range(200, len(frame) - 200), 5))
        print(f"{name}: seed {seed}, kill points {points}")
        for k in points:
            for lag_s in (0.0, 1.0):
                seen.append(_cut_over(name, frame, dataset, k, lag_s, expected))
    # The cases exercised something: records re-read, and (for the windows) emitted rows suppressed.
    assert all(case["reread"] > 0 for case in seen)
    assert sum(int(case["suppressed"]) for case in seen) > 0  # type: ignore[call-overload]


def _seeded_sessions(events: pd.DataFrame, seed: pd.DataFrame, gap_ms: int, delay_ms: int) -> pd.DataFrame:
    """The seeded ``sessions`` query in pandas, over ``events`` (parsed, replay order, from the position on).

    A record is late when its session would end at or before the larger of the seed's watermark (its newest
    ``last`` minus the delay) and its own (the largest event time before it minus the delay); the rest join the
    seed's sessions (:func:`kit.semantics.merge_session`), and the sessions the final watermark closed are emitted.
    """
    from kit.semantics import merge_session

    floor = int(seed["last"].max()) - delay_ms if len(seed) else -(2**62)
    sessions: dict[str, list[list[int]]] = {}
    for user, *state in seed[["user", "start", "last", "events", "kafka_ts"]].itertuples(index=False):
        sessions.setdefault(user, []).append([int(v) for v in state])
    newest = -(2**62)
    for user, t, kafka_ts in events[["user", "event_time", "kafka_ts"]].itertuples(index=False):
        if t + gap_ms > max(floor, newest - delay_ms):
            sessions[user] = merge_session(sessions.get(user, []), int(t), int(kafka_ts), gap_ms)
        newest = max(newest, int(t))
    final = max(floor + delay_ms, newest) - delay_ms
    rows = [(user, s[0], s[1] + gap_ms, s[2]) for user, open_ in sessions.items() for s in open_
            if s[1] + gap_ms <= final]
    return pd.DataFrame(rows, columns=["user", "session_start", "session_end", "events"])


def test_a_sessions_seed_continues_the_legacy_output_at_many_kill_points() -> None:
    """``dmk cutover --seed-state`` for ``sessions``: the legacy job's open sessions, rebuilt from the records it
    processed and checked against what it emitted, let the modern query continue from the position itself."""
    spec = workloads.get("sessions")
    assert spec.carry.seed_from_input is not None
    seeded = 0
    for seed in (3, 11):
        dataset = _dataset(seed, "sessions")
        frame = generate(dataset)
        expected = spec.oracle(frame, dataset).rows
        parsed = _parsed(frame)
        points = sorted(random.Random(seed).sample(range(200, len(frame) - 200), 5))
        print(f"sessions: seed {seed}, kill points {points}")
        for k in points:
            for lag_s in (0.0, 1.0):
                placed = _placed(frame)
                events = parsed[parsed["seq"] < k]
                j = _last_batch_start(frame, k, lag_s)
                result = spec.oracle(frame.iloc[:k], dataset)
                watermark = int(events.loc[events["seq"] < j, "event_time"].max()) - spec.watermark_delay_ms
                emitted = result.rows[result.rows["session_end"] <= watermark]
                late = placed.loc[result.late_dropped["seq"].to_numpy()].reset_index(drop=True)
                inp = RewindInput(events, emitted, _offsets_below(k), _offsets_below(j), dataset, late)
                sessions = spec.carry.seed_from_input(inp)
                seeded += len(sessions)
                modern = _seeded_sessions(parsed[parsed["seq"] >= k], sessions, dataset.session_gap_ms,
                                          spec.watermark_delay_ms)
                union = union_of_outputs(spec, emitted.assign(batch=0), modern.assign(batch=1))
                pd.testing.assert_frame_equal(union.astype(expected.dtypes.to_dict()), expected, check_dtype=False)
                # Without the seed, the modern query splits the sessions open at the position: the union differs.
                unseeded = _seeded_sessions(parsed[parsed["seq"] >= k], sessions.iloc[:0], dataset.session_gap_ms,
                                            spec.watermark_delay_ms)
                union = union_of_outputs(spec, emitted.assign(batch=0), unseeded.assign(batch=1))
                assert not union.astype(expected.dtypes.to_dict()).equals(expected)
                # A legacy output that is not the sessions of these records is refused: the seed would be wrong.
                if len(emitted):
                    with pytest.raises(ConfigError, match="not those of the records it processed"):
                        spec.carry.seed_from_input(dataclasses.replace(inp, emitted=emitted.iloc[1:]))
    assert seeded > 0


def test_without_the_rewind_or_the_filter_the_union_is_wrong() -> None:
    """The rule is not vacuous: starting at the position, or keeping every modern row, breaks the equality."""
    dataset = _dataset(5)
    frame = generate(dataset)
    k = 2001
    for name in ("windowed_counts", "dedup"):  # ysb: the dataset's 26 s hold too few windows to show it at one point
        spec = workloads.get(name)
        assert spec.carry.rewind is not None
        events = _events(frame.iloc[:k])
        prefix = spec.oracle(frame.iloc[:k], dataset).rows
        newest = int(_watermark_events(name, events, dataset)["event_time"].max())
        emitted = prefix[prefix.eval(spec.carry.row_time) <= newest - 5000]
        position = _offsets_below(k)
        rewind = spec.carry.rewind(RewindInput(events, emitted, position, position, dataset))
        expected = spec.oracle(frame, dataset).rows
        seqs = frame["seq"].to_numpy()
        starts = np.array([rewind.starts[("t", p)] for p in range(PARTITIONS)])
        rewound = spec.oracle(frame[seqs // PARTITIONS >= starts[seqs % PARTITIONS]], dataset).rows
        unfiltered = union_of_outputs(spec, emitted.assign(batch=0), rewound.assign(batch=1))
        assert len(unfiltered) > len(expected)  # rows repeated
        from_position = _drop_suppressed(spec, spec.oracle(frame.iloc[k:], dataset).rows, rewind)
        not_rewound = union_of_outputs(spec, emitted.assign(batch=0), from_position.assign(batch=1))
        assert not not_rewound.equals(expected.astype(not_rewound.dtypes.to_dict()))


def _event(seq: int, event_id: str, user: str, ad_id: str, event_type: str, seconds: int) -> dict[str, Any]:
    value = {"event_id": event_id, "user": user, "key": "k1", "ad_id": ad_id, "ad_type": "banner",
             "event_type": event_type, "event_time": 1_767_225_600_000 + seconds * 1000}
    return {"seq": seq, "key": user.encode(), "value": json.dumps(value).encode(), "timestamp_ms": value["event_time"]}


def _join_by_hand() -> tuple[pd.DataFrame, int]:
    """Seven records, the legacy job's position after the first five (see the test below)."""
    return pd.DataFrame([
        _event(0, "v-a", "u1", "ad1", "view", 0),
        _event(1, "c-x", "u9", "ad9", "click", 20),
        _event(2, "v-b", "u9", "ad9", "view", 20),   # both inputs at 20 s: the watermark is 15 s
        _event(3, "v-late", "u1", "ad1", "view", 10),  # at or behind it: dropped as too late
        _event(4, "c-1", "u1", "ad1", "click", 25),  # pairs with v-a: the last record the legacy job read
        _event(5, "c-2", "u1", "ad1", "click", 30),
        _event(6, "c-1", "u1", "ad1", "click", 25),  # c-1 re-delivered: pairs with v-a again
    ]), 5


def _join_rewind(frame: pd.DataFrame, k: int) -> tuple[pd.DataFrame, dict[TopicPartition, int], OracleResult, Rewind]:
    """Where each record lies, the position after ``k``, the legacy job's output (the oracle's), and the rewind."""
    spec = workloads.get("join")
    placed = _placed(frame, spec)
    legacy = spec.oracle(frame.iloc[:k], None)  # type: ignore[arg-type]
    late = placed.loc[legacy.late_dropped["seq"].to_numpy()].reset_index(drop=True)
    position = _offsets_below(k, placed)
    events = _events(frame.iloc[:k], spec)
    rewind = spec.carry.rewind(RewindInput(events, legacy.rows, position, position, None, late))  # type: ignore[misc]
    return placed, position, legacy, rewind


def test_a_join_cutover_tells_pairs_apart_by_their_records_not_their_keys() -> None:
    """By hand: a click read before the position is re-delivered after it and pairs again under the same ids, and a
    view the legacy job dropped as too late is read again. Filtering by key loses the re-delivery's pair; without
    the late records, a first micro-batch without a watermark adds their pairs; by records, the union is exact."""
    spec = workloads.get("join")
    frame, k = _join_by_hand()
    expected = spec.oracle(frame, None).rows  # type: ignore[arg-type]
    assert expected[["impression_id", "click_id"]].values.tolist() == [
        ["v-a", "c-1"], ["v-a", "c-1"], ["v-a", "c-2"], ["v-b", "c-x"]]
    placed, position, legacy, rewind = _join_rewind(frame, k)
    assert rewind.next_watermark_ms == 1_767_225_615_000
    assert rewind.dropped.values.tolist() == [["impressions", 3, 0]]  # v-late: seq 3, the first of partition 3
    assert rewind.starts == {tp: 0 for tp in position}  # every view is within 60 s of a click yet to come

    # The modern query's first micro-batch holds all of it, without a watermark: v-late is admitted.
    unwatermarked = pd.concat([frame.iloc[:k].sort_values("timestamp_ms", kind="stable"), frame.iloc[k:]])

    def union(modern: pd.DataFrame) -> pd.DataFrame:
        both = union_of_outputs(spec, legacy.rows.assign(batch=0), modern.assign(batch=1))
        return both.astype(expected.dtypes.to_dict())

    by_records = _drop_pairs_read_before(unwatermarked, placed, position, rewind)
    pd.testing.assert_frame_equal(union(by_records), expected, check_dtype=False)
    without_late = Rewind(rewind.starts, rewind.suppress, rewind.cutoff_ms, 0, 0)
    extra = union(_drop_pairs_read_before(unwatermarked, placed, position, without_late))
    assert len(extra) == len(expected) + 2  # v-late with c-2 and with c-1's re-delivery
    modern = workloads.join.pairs_with_inputs(frame)
    emitted = set(map(tuple, legacy.rows[["impression_id", "click_id"]].values.tolist()))
    by_key = modern[[key not in emitted for key in zip(modern["impression_id"], modern["click_id"], strict=True)]]
    lost = union(workloads.sorted_rows(spec, by_key))
    assert lost[["impression_id", "click_id"]].values.tolist() == [["v-a", "c-1"], ["v-a", "c-2"], ["v-b", "c-x"]]


@pytest.mark.spark
def test_the_modern_join_filter_reads_the_file_the_command_writes(spark: Any, tmp_path: Path) -> None:
    """``modern.cutover.suppress_emitted`` on a join's rows with their input records (as the modern job's frame has
    them before the runner's projection), from the file ``RewindPlan`` writes: the rows the pandas filter keeps."""
    from compare.cutover import RewindPlan, write_suppress
    from modern.cutover import suppress_emitted

    spec = workloads.get("join")
    frame, k = _join_by_hand()
    placed, position, _, rewind = _join_rewind(frame, k)
    unwatermarked = pd.concat([frame.iloc[:k].sort_values("timestamp_ms", kind="stable"), frame.iloc[k:]])
    pairs = workloads.join.pairs_with_inputs(unwatermarked)
    for side in ("impression", "click"):
        at = placed.loc[pairs[f"{side}_seq"].to_numpy()]
        columns = ("topic", "partition", "offset")
        pairs = pairs.assign(**{f"{side}_{column}": at[column].to_numpy() for column in columns})
    inputs = [f"{side}_{c}" for side in ("impression", "click") for c in ("topic", "partition", "offset")]
    rows = pairs[[*spec.key_columns, *spec.value_columns, *inputs]].assign(last_input_ts=0)
    path = write_suppress(RewindPlan(spec, position, rewind, {}), tmp_path / "suppress.json")
    assert json.loads(path.read_text())["dropped"] == [["impressions", 3, 0]]
    kept = suppress_emitted(spark, spark.createDataFrame(rows), path, spec).toPandas()
    expected = _drop_pairs_read_before(unwatermarked, placed, position, rewind)
    pd.testing.assert_frame_equal(workloads.sorted_rows(spec, kept), expected, check_dtype=False)
    # Of the seven pairs, three have both records below the position and two more have v-late: c-2 and c-1's
    # re-delivery with v-a are kept.
    assert len(kept) == 2
    # A join built without its input records (a job of your own) is refused in one line, naming the columns.
    from kit.errors import ConfigError

    with pytest.raises(ConfigError, match="has no click_topic, click_partition, click_offset: select them"):
        suppress_emitted(spark, spark.createDataFrame(rows.drop(columns=inputs[3:])), path, spec)
    # A filter without its position (or its dropped records) would keep the legacy job's pairs: refused.
    for field in ("position", "dropped"):
        broken = tmp_path / f"without-{field}.json"
        broken.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != field}))
        with pytest.raises(ConfigError, match="has no readable position or dropped records"):
            suppress_emitted(spark, spark.createDataFrame(rows), broken, spec)


# -- the command, on a real topic (no Spark) -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["windowed_counts", "dedup"])
def test_the_command_writes_offsets_and_a_filter_that_continue_the_legacy_output(
        name: str, tmp_path: Path, bootstrap_servers: str, topic_factory) -> None:
    """``dmk cutover kafka ... --rewind`` on a replayed topic and legacy outputs in the kit's layout (two batches,
    the second 1 s of event time long): the options and the filter it writes, applied to the oracle as the modern
    query, continue the legacy output exactly."""
    from compare.cli import main as dmk
    from kit.kafka import Kafka, TopicPartition
    from kit.replay import ReplaySettings, replay
    from kit.sink import write_batch

    dataset = _dataset(7)
    frame = generate(dataset)
    topic = topic_factory(PARTITIONS)
    replay(frame, bootstrap_servers, ReplaySettings(topic=topic, partitions=PARTITIONS, partition_by="seq"))
    spec = workloads.get(name)
    k = 2803
    j = _last_batch_start(frame, k, 1.0)
    position, last_from = _offsets_below(k), _offsets_below(j)
    legacy = tmp_path / "legacy"
    for batch, ranges in ((1000, {tp: (0, at) for tp, at in last_from.items()}),
                          (2000, {tp: (last_from[tp], at) for tp, at in position.items()})):
        write_batch(legacy / "progress.events", batch, pd.DataFrame(
            [(topic, p, f, u) for (_, p), (f, u) in sorted(ranges.items())],
            columns=["topic", "partition", "from_offset", "until_offset"]))
    prefix = spec.oracle(frame.iloc[:k], dataset).rows
    if name == "windowed_counts":
        parsed = _parsed(frame)
        watermark = int(parsed.loc[parsed["offset"] * PARTITIONS + parsed["partition"] < j, "event_time"].max()) - 5000
        prefix = prefix[prefix.eval(spec.carry.row_time) <= watermark]
    write_batch(legacy / name, 2000, prefix.assign(last_input_ts=0))
    group = f"legacy-{name}"
    with Kafka(bootstrap_servers) as kafka:
        assert not kafka.commit_group_offsets(group, {TopicPartition(topic, p): at for (_, p), at in position.items()})
    options, suppress = tmp_path / "options.json", tmp_path / "suppress.json"
    assert dmk(["cutover", "kafka", group, "--topic", topic, "--bootstrap-servers", bootstrap_servers,
                "--legacy-output", str(legacy), "--write-options", str(options), "--rewind", "--workload", name,
                "--suppress", str(suppress)]) == 0

    starts = json.loads(json.loads(options.read_text())["startingOffsets"])[topic]
    assert all(int(starts[str(p)]) < at for (_, p), at in position.items())
    written = json.loads(suppress.read_text())
    assert written["workload"] == name and written["key_columns"] == list(spec.key_columns)
    assert written["dead_letters_from"] == {topic: {str(p): at for (_, p), at in sorted(position.items())}}
    rewind = Rewind({("t", int(p)): int(o) for p, o in starts.items()},
                    pd.DataFrame(written["keys"], columns=written["key_columns"]), written["cutoff_ms"], 0, 0)
    seqs = frame["seq"].to_numpy()
    first = np.array([rewind.starts[("t", p)] for p in range(PARTITIONS)])
    modern = _drop_suppressed(spec, spec.oracle(frame[seqs // PARTITIONS >= first[seqs % PARTITIONS]], dataset).rows,
                              rewind)
    union = union_of_outputs(spec, prefix.assign(batch=0), modern.assign(batch=1))
    expected = spec.oracle(frame, dataset).rows
    pd.testing.assert_frame_equal(union.astype(expected.dtypes.to_dict()), expected, check_dtype=False)


# -- the CLI's refusals ----------------------------------------------------------------------------------------


def _legacy_outputs(out: Path) -> None:
    from kit.sink import write_batch

    write_batch(out / "progress.events", 1000, pd.DataFrame(
        [("t", 0, 0, 5)], columns=["topic", "partition", "from_offset", "until_offset"]))


def test_rewind_refusals_are_one_line_and_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from compare.cli import main as dmk

    def error() -> str:
        return " ".join(capsys.readouterr().err.split())

    _legacy_outputs(tmp_path / "legacy")
    (tmp_path / "ckpt").mkdir()
    common = ["cutover", "checkpoint", str(tmp_path / "ckpt"), "--write-options", str(tmp_path / "o.json"),
              "--suppress", str(tmp_path / "s.json"), "--bootstrap-servers", "127.0.0.1:1"]
    assert dmk([*common, "--rewind", "--workload", "running_counts", "--legacy-output", str(tmp_path / "legacy")]) == 2
    assert "running_counts's state is totals; its totals are carried instead: --seed-state FILE" in error()
    assert dmk([*common, "--rewind", "--workload", "examples.purchases:SPEC",
                "--legacy-output", str(tmp_path / "legacy")]) == 2
    assert "state is stateless" in error()
    assert dmk([*common, "--rewind", "--workload", "nexmark_q5", "--legacy-output", str(tmp_path / "legacy")]) == 2
    assert "nexmark_q5's state is not carried" in error()
    assert dmk([*common, "--rewind", "--workload", "dedup"]) == 2
    assert "a rewound cutover needs --legacy-output" in error()
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "s.json").exists()


def test_a_rewind_beyond_retention_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The topic no longer holds the first records the legacy job processed, and the rule needs the oldest it holds."""
    import compare.cutover as cutover
    from compare.cutover import CutoverAmbiguous, CutoverPlan, LegacyPosition, PositionSource, plan_rewind
    from kit.sink import write_batch

    dataset = _dataset(3)
    frame = generate(dataset).iloc[:2000]
    out = tmp_path / "legacy"
    write_batch(out / "progress.events", 1000, pd.DataFrame(
        [("t", p, 0, 500) for p in range(PARTITIONS)], columns=["topic", "partition", "from_offset", "until_offset"]))
    write_batch(out / "dedup", 1000, workloads.get("dedup").oracle(frame, dataset).rows.assign(last_input_ts=0))
    events = _events(frame)
    def read(servers: str, ranges: dict) -> pd.DataFrame:
        within = [ranges[("t", p)][0] <= o < ranges[("t", p)][1]
                  for p, o in zip(events["partition"], events["offset"], strict=True)]
        return events[within].reset_index(drop=True)

    monkeypatch.setattr(cutover, "_read_events", read)
    position = LegacyPosition(PositionSource("checkpoint", "x"), {("t", p): 500 for p in range(PARTITIONS)}, True)
    plan = CutoverPlan(position, last_batch_ms=1000, legacy_output=str(out))
    monkeypatch.setattr(cutover, "_beginnings", lambda servers, tps: {tp: 0 for tp in tps})
    kept = plan_rewind(plan, "dedup", "b:1")
    assert 0 < kept.to_json()["records_reread"] < 2000
    deleted = {("t", p): min(kept.rewind.starts[("t", p)], 499) for p in range(PARTITIONS)}  # from the first needed on
    monkeypatch.setattr(cutover, "_beginnings", lambda servers, tps: {tp: deleted[tp] for tp in tps})
    with pytest.raises(CutoverAmbiguous, match="rewind beyond retention"):
        plan_rewind(plan, "dedup", "b:1")


# -- end to end (slow): a killed legacy job, the rewound (or seeded) cutover, the modern query -----------------------

REPO = str(Path(__file__).resolve().parents[1])
# Every rewound workload at 5 kill points from its checkpoint; windowed_counts also from each other offset store;
# the carried ones (--seed-state: running_counts' totals, dedup's ids seen, sessions' open sessions, in the modern
# query's state store) at 5 kill points, and from SQLite (tests/test_cutover.py carries running_counts from every store).
E2E = [(name, seed, "checkpoint", "rewind") for name in REWOUND for seed in (101, 202, 303, 404, 505)] + [
    ("windowed_counts", 606, store, "rewind") for store in ("kafka", "zookeeper", "sqlite", "postgresql")] + [
    (name, seed, "checkpoint", "seed") for name in ("running_counts", "dedup", "sessions")
    for seed in (111, 222, 333, 444, 555)
] + [(name, 666, "sqlite", "seed") for name in ("dedup", "sessions")]


def _e2e_dataset(name: str) -> tuple[DatasetSpec, tuple[int, int]]:
    """The dataset, and the range of batches with records after which the legacy job is killed.

    40 s of event time at 100 events/s; batches of 100 records (25/partition/s, 1 s batches) span 1 s of event
    time, within the 2 s lateness margin, the condition under which every engine agrees with the oracle. Sessions:
    70 s (the 30 s gap). Each is killed late enough that the legacy job has emitted rows (windows: 15 s; sessions:
    the gap and the delay, 35 s). (With a 20 s gap, the least the generator allows, the modern query alone already
    split a session the oracle keeps whole, cut over or not: that dataset does not hold the engines to the oracle.)
    """
    if name == "sessions":
        spec = DatasetSpec.from_profile("messy", records=7000, seed=9, events_per_second=100)
        return spec, (36, 41)
    spec = DatasetSpec.from_profile("messy", records=4000, seed=9, events_per_second=100)
    # Windows: killed once the first have closed (a 10 s window and the 5 s delay), so that the filter's keys and
    # cutoff both matter; dedup emits at once, so any point does.
    # A join emits a pair at once, as dedup an id; its inputs are read at their raised shares (compare.inputs), about
    # 200 records a batch, so its first part (3/5 of the records) takes 13 batches.
    return spec, {"running_counts": (2, 20), "dedup": (6, 20), "join": (6, 11)}.get(name, (16, 22))


def _driver_config(engine: str, tmp: Path, bootstrap: str, topics: dict[str, str], spec: DatasetSpec, name: str,
                   **options: object) -> Path:
    from kit.engine import DriverConfig

    out = tmp / engine
    config = DriverConfig(
        engine=engine, app_name="dmk-cutover-rewind", bootstrap_servers=bootstrap, topics=topics,
        out_dir=str(out), checkpoint_dir=str(tmp / f"{engine}-checkpoint"), dataset=spec, jobs=((name, "default"),),
        partitions=PARTITIONS, timeout_s=300, sys_path=(REPO,), options=options,
    )
    config.write(out / "driver-config.json")
    return out / "driver-config.json"


def _batches_with_records(out: Path) -> int:
    from kit import layout
    from kit.sink import read_batches

    frames = [read_batches(d) for d in layout.input_progress_dirs(out)]  # one per input: the join reads two
    progress = pd.concat([f for f in frames if not f.empty]) if any(not f.empty for f in frames) else pd.DataFrame()
    if progress.empty:
        return 0
    sizes = (progress["until_offset"] - progress["from_offset"]).groupby(progress["batch"]).sum()
    return int((sizes > 0).sum())


def _start(engine: str, config: Path, store_address: str | None = None) -> Any:
    from compare.driver import OFFSET_STORE_ENV
    from compare.supervise import DriverProcess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    if store_address:
        env[OFFSET_STORE_ENV] = store_address
    return DriverProcess(engine, config, config.parent, 300, env)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "seed", "store", "carry"), E2E,
                         ids=["-".join([n, str(s), *([st] if st != "checkpoint" else []),
                                        *(["seeded"] if c == "seed" else [])]) for n, s, st, c in E2E])
def test_cutover_of_a_killed_job(name: str, seed: int, store: str, carry: str, tmp_path: Path, bootstrap_servers: str,
                                 topic_factory, request: pytest.FixtureRequest) -> None:
    from compare.cli import main as dmk
    from compare.driver import CONTROL, DONE, DRAIN, READY, write_json
    from kit.replay import ReplaySettings, replay
    from kit.sink import read_batches

    spec, kill_range = _e2e_dataset(name)
    job = workloads.get(name)
    topics = {source: topic_factory(PARTITIONS) for source in job.inputs}  # the join: impressions and clicks
    frame = generate(spec)
    routed = frame.assign(topic=job.route(frame).map(topics))
    settings = ReplaySettings(topic=topics[job.inputs[0]], partitions=PARTITIONS, partition_by="seq")
    first_part = len(frame) * 3 // 5
    kill_after = random.Random(seed).randint(*kill_range)  # completed batches with records; ~100 records each
    print(f"{name}: seed {seed}, legacy killed after {kill_after} batches with records")
    first = replay(routed.iloc[:first_part], bootstrap_servers, settings)

    # Each input's stream reads its share of 100 records a batch (the harness's rule): the join's inputs advance
    # together in event time.
    shares = input_shares(frame.assign(topic=job.route(frame)), len(frame), 100, PARTITIONS)
    address = {"zookeeper": lambda: request.getfixturevalue("zookeeper_hosts"),
               "postgresql": lambda: request.getfixturevalue("postgres_dsn_factory")()}.get(store, lambda: None)()
    stored = {} if store == "checkpoint" else {"offsets": store, "job_name": f"rewind-{uuid.uuid4().hex[:8]}"}
    config = _driver_config("legacy", tmp_path, bootstrap_servers, topics, spec, name, max_rate_per_partition=25,
                            max_rate_by_input={source: max(1, round(25 * share)) for source, share in shares.items()},
                            fingerprint="cutover-rewind-test", **stored)
    legacy = _start("legacy", config, address)
    legacy_out = config.parent
    try:
        legacy.start()
        legacy.wait_for(READY, 300)
        write_json(legacy_out / CONTROL / DRAIN, {"end_offsets": first.topic_end_offsets})
        deadline = time.monotonic() + 300
        while _batches_with_records(legacy_out) < kill_after:
            legacy.check()
            assert time.monotonic() < deadline, f"the legacy job completed {kill_after} batches in 300 s"
            time.sleep(0.05)
        legacy.kill()
    finally:
        legacy.stop()

    options, suppress = tmp_path / "modern-options.json", tmp_path / "suppress.json"
    options.write_text(json.dumps({"maxOffsetsPerTrigger": "100"}))
    report = tmp_path / "report.json"
    # The runbook's command for the store the legacy job kept its offsets in (docs/cutover.md).
    if store == "checkpoint":
        args = ["cutover", "checkpoint", str(tmp_path / "legacy-checkpoint"), "--allow-pending"]
    else:
        where = {"kafka": stored["job_name"], "sqlite": str(legacy_out / "offsets.sqlite")}.get(store, address)
        args = ["cutover", store, str(where), "--consumer", str(stored["job_name"]),
                *(arg for topic in topics.values() for arg in ("--topic", topic))]
    args += ["--legacy-output", str(legacy_out), "--discard-beyond", "--write-options", str(options),
             "--workload", name, "--bootstrap-servers", bootstrap_servers, "--json"]
    seed_file = tmp_path / "seed.parquet"
    args += ["--seed-state", str(seed_file)] if carry == "seed" else ["--rewind", "--suppress", str(suppress)]
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert dmk(args) == 0
    report.write_text(printed.getvalue())
    plan = json.loads(printed.getvalue())
    print(json.dumps(plan.get("rewind") or plan["seed_state"], indent=1))
    position = {(t, int(p)): o
                for t, offsets in plan.get("position_startingOffsets", plan["startingOffsets"]).items()
                for p, o in offsets.items()}
    assert 0 < sum(position.values()) < first_part

    rest = replay(routed.iloc[first_part:], bootstrap_servers, settings)
    carried = {"initial_state": {name: str(seed_file)}} if carry == "seed" else {"suppress": {name: str(suppress)}}
    config = _driver_config("modern", tmp_path, bootstrap_servers, topics, spec, name,
                            source_options=json.loads(options.read_text()), **carried)
    modern = _start("modern", config)
    modern_out = config.parent
    try:
        modern.start()
        modern.wait_for(READY, 300)
        write_json(modern_out / CONTROL / DRAIN, {"end_offsets": rest.topic_end_offsets})
        modern.wait_for(DONE, 600)
        modern.finish()
    finally:
        modern.stop()

    if carry == "seed":  # the runner's check: the state store at batch 0 is the seed plus the batch's new ids
        check = json.loads((modern_out / f"{name}.seed_check.json").read_text())
        print(json.dumps(check, indent=1))
        assert check["ok"] and check["keys_seeded"] == plan["seed_state"]["keys"] > 0
    expected = job.oracle(frame, spec).rows
    union = union_of_outputs(job, read_batches(legacy_out / name), read_batches(modern_out / name))
    pd.testing.assert_frame_equal(union.astype(expected.dtypes.to_dict()), expected, check_dtype=False)
    # Dead letters: the modern query re-reads records the legacy job dead-lettered, and writes only those from the
    # position on (the filter file's dead_letters_from); together the two outputs hold each malformed record once.
    from kit import layout

    legacy_letters, modern_letters = (
        pd.concat([read_batches(layout.dead_letters(out, source)) for source in job.inputs])
        for out in (legacy_out, modern_out))
    floors = [position[(t, int(p))]
              for t, p in zip(modern_letters["topic"], modern_letters["partition"], strict=True)]
    assert (modern_letters["offset"].to_numpy() >= np.array(floors, dtype=np.int64)).all()
    letters = pd.concat([legacy_letters, modern_letters])[["topic", "partition", "offset"]]
    assert not letters.duplicated().any()
    assert len(letters) == len(job.oracle(frame, spec).dead_letters)


def test_a_dry_run_plan_lists_what_it_would_discard_and_keeps_it(tmp_path: Path) -> None:
    """``dmk cutover --rewind`` plans with ``dry_run`` first: a refused rewind leaves the legacy outputs as they are."""
    from compare.cutover import LegacyPosition, PositionSource, plan_cutover
    from kit.sink import write_batch

    for batch, (start, until) in ((1000, (0, 5)), (2000, (5, 9))):
        write_batch(tmp_path / "progress.events", batch, pd.DataFrame(
            [("t", 0, start, until)], columns=["topic", "partition", "from_offset", "until_offset"]))
        write_batch(tmp_path / "dedup", batch, pd.DataFrame({"event_id": [f"e{batch}"]}))
    position = LegacyPosition(PositionSource("checkpoint", "x"), {("t", 0): 5}, True)
    planned = plan_cutover(position, legacy_output=tmp_path, discard_beyond=True, dry_run=True)
    assert planned.beyond == (2000,) and len(planned.discarded) == 2
    assert len(list(tmp_path.glob("*/batch=*"))) == 4
    done = plan_cutover(position, legacy_output=tmp_path, discard_beyond=True)
    assert done.discarded == planned.discarded and len(list(tmp_path.glob("*/batch=*"))) == 2


def test_the_filter_file_s_dead_letters_from_is_read_or_refused_in_one_line(tmp_path: Path) -> None:
    from kit.errors import ConfigError
    from modern.cutover import dead_letters_from

    path = tmp_path / "suppress.json"
    path.write_text(json.dumps({"workload": "dedup", "dead_letters_from": {"t": {"0": 12, "3": 7}}}))
    assert dead_letters_from(path) == {"t": {0: 12, 3: 7}}
    path.write_text(json.dumps({"workload": "dedup"}))
    assert dead_letters_from(path) == {}
    path.write_text(json.dumps({"workload": "dedup", "dead_letters_from": {"t": [12]}}))
    with pytest.raises(ConfigError, match="malformed dead_letters_from .*: write it again with dmk cutover --rewind"):
        dead_letters_from(path)
