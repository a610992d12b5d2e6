"""State carried in Spark's state store (:mod:`modern.seed`): a seed becomes a stateful processor's initial state
(``transformWithStateInPandas``; dedup's ``transformWithState``), the query counts on from it (totals) or drops what
the legacy job saw (dedup's ids), and the check reads the state store at batch 0 key for key.

The seed here is the oracle's counts of the stream's first half (what a legacy job that processed it would have
emitted last per key), the query starts at the half's end offsets: its final rows must be the oracle's over the
whole stream. ``tests/test_cutover.py`` does the same with a real legacy job and ``dmk cutover --seed-state``.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kit import workloads
from kit.dataset import DatasetSpec, generate
from kit.errors import ConfigError
from kit.replay import ReplaySettings, replay
from kit.semantics import WATERMARK_DELAY_MS
from kit.sink import read_batches
from modern.runner import ModernRun, ModernRunConfig, read_progress

PARTITIONS = 2


def _seeded_run(spark, tmp: Path, bootstrap: str, topic: str, spec: DatasetSpec, job: str, seed: Path,
                starting: dict, **options: str) -> ModernRun:
    config = ModernRunConfig(
        bootstrap_servers=bootstrap, topics={"events": topic}, out_dir=str(tmp / "out"),
        checkpoint_dir=str(tmp / "ckpt"), dataset=spec, jobs=((job, "default"),),
        source_options={"startingOffsets": json.dumps({topic: {str(p): o for p, o in starting.items()}}), **options},
        initial_state={workloads.get(job).name: str(seed)},
    )
    return ModernRun(spark, config)


def _seeded_at_half(spark, tmp: Path, bootstrap: str, topic: str, spec: DatasetSpec, job: str,
                    seed_of: Callable[[pd.DataFrame, dict], pd.DataFrame], **options: str) -> tuple[pd.DataFrame, dict]:
    """Replay the first half, seed from it (``seed_of(first half, its end offsets)``), replay the rest and run the
    seeded query from the half's end offsets to the end. Returns the seed rows and the half's end offsets."""
    frame = generate(spec)
    half = len(frame) // 2
    settings = ReplaySettings(topic=topic, partitions=PARTITIONS, partition_by="seq")
    first = replay(frame.iloc[:half], bootstrap, settings)
    seed_rows = seed_of(frame.iloc[:half], first.end_offsets)
    seed_rows.to_parquet(tmp / "seed.parquet")
    rest = replay(frame.iloc[half:], bootstrap, settings)
    run = _seeded_run(spark, tmp, bootstrap, topic, spec, job, tmp / "seed.parquet", first.end_offsets,
                      **options).start()
    try:
        run.await_offsets({topic: rest.end_offsets}, timeout_s=300)
    finally:
        run.stop()
    return seed_rows, first.end_offsets


def _by_keys(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame[[*keys, "count"]].sort_values(keys).reset_index(drop=True)


@pytest.mark.parametrize("job", ["running_counts", "examples.event_types:SPEC"])
def test_a_seeded_query_counts_on_from_the_seed_and_its_state_store_proves_it(
    spark, bootstrap_servers: str, topic_factory, tmp_path: Path, job: str
) -> None:
    from modern.seed import STATE_VARIABLE, check_seeded_state, first_batch_ranges

    spec = dataclasses.replace(DatasetSpec.from_profile("messy", records=1500, seed=8), too_late_fraction=0.0)
    frame = generate(spec)
    counts = workloads.get(job)
    name, keys = counts.name, list(counts.key_columns)
    topic = topic_factory(PARTITIONS)
    # The legacy job's last row per key over the first half: the oracle's counts there (a last_input_ts older than
    # every record's: the check takes the newer of the seed's and the first batch's).
    seeded, position = _seeded_at_half(
        spark, tmp_path, bootstrap_servers, topic, spec, job,
        lambda part, _ends: counts.oracle(part, spec).rows.assign(last_input_ts=0).astype({"count": "int64"})[
            [*keys, "count", "last_input_ts"]])

    # The query's rows continue the seed: its last row per key is the oracle's count over the whole stream, and a
    # key it never saw keeps the seed's.
    final = workloads.final_result(counts, read_batches(tmp_path / "out" / name))
    expected = _by_keys(counts.oracle(frame, spec).rows, keys)
    kept = seeded.merge(final[keys], on=keys, how="left", indicator=True).query("_merge == 'left_only'")
    pd.testing.assert_frame_equal(_by_keys(pd.concat([final, kept]), keys), expected, check_dtype=False)

    # The runner's check: every seed key is in the state store at batch 0, with its first-batch events added.
    report = json.loads((tmp_path / "out" / f"{name}.seed_check.json").read_text())
    assert report["ok"] and report["different"] == 0 and report["job"] == name
    assert report["keys_seeded"] == len(seeded) and report["first_batch_events"] > 0
    assert report["keys_in_state"] >= len(seeded)
    # The store's last version holds the whole stream's count of every key, those the modern query never saw too.
    state = spark.read.format("statestore").option("stateVarName", STATE_VARIABLE).load(
        str((tmp_path / "ckpt" / name).resolve())).selectExpr(*(f"key.{k} AS {k}" for k in keys), "value.count AS count")
    pd.testing.assert_frame_equal(_by_keys(state.toPandas(), keys), expected, check_dtype=False)

    # A seed that is not what the store holds (one key's count off by one, one key gone) is caught, key for key.
    query_progress = [p for p in read_progress(tmp_path / "out", name) if p["batchId"] == 0][0]
    ranges = first_batch_ranges(query_progress, {topic: position}, {})
    assert sum(u - f for f, u in ranges.values()) > 0
    assert {p: f for (_, p), (f, _) in ranges.items()} == position  # batch 0 starts at the position
    wrong = seeded.copy()
    wrong.loc[0, "count"] += 1
    wrong = wrong.drop(index=1)
    tampered = tmp_path / "tampered.parquet"
    wrong[[*keys, "count", "last_input_ts"]].to_parquet(tampered)
    check = check_seeded_state(spark, tmp_path / "ckpt" / name, tampered, counts, ranges, bootstrap_servers)
    assert not check.ok and check.different == 2
    assert {tuple(d[k] for k in keys) for d in check.differences} == {
        tuple(seeded.loc[i, k] for k in keys) for i in (0, 1)}
    gone = next(d for d in check.differences if all(d[k] == seeded.loc[1, k] for k in keys))
    assert gone["state"] is not None  # in the store, not in the (tampered) seed


def test_a_seed_for_totals_that_are_not_event_counts_is_refused(spark) -> None:
    from modern.seed import seeded_totals

    spec = workloads.get("windowed_counts")
    with pytest.raises(ConfigError, match="not a count of its events"):
        seeded_totals(spark.createDataFrame(pd.DataFrame({"key": ["a"], "count": [1], "last_input_ts": [1]})),
                      None, spec)


def test_a_seeded_query_must_start_at_known_offsets() -> None:
    from modern.seed import starting_offsets

    assert starting_offsets(None) == starting_offsets("earliest") == {}
    assert starting_offsets('{"t": {"0": 5, "1": -2}}') == {"t": {0: 5, 1: -2}}
    for unknown in ("latest", '{"t": {"0": -1}}'):
        with pytest.raises(ConfigError, match="must start at known offsets"):
            starting_offsets(unknown)


def test_a_job_cannot_be_both_seeded_and_rewound(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="both an initial state and a rewound cutover's filter"):
        ModernRunConfig(bootstrap_servers="b:9092", topics={"events": "t"}, out_dir="o", checkpoint_dir="c",
                        dataset=DatasetSpec(), jobs=(("running_counts", "default"),),
                        initial_state={"running_counts": "s.parquet"}, suppress={"running_counts": "f.json"})


# -- ids seen (dedup): the legacy job's emitted ids past its next watermark ---------------------------------------


def _dedup_model(events: pd.DataFrame, seed: pd.DataFrame, floor: int | None, delay_ms: int,
                 batch: int = 100) -> pd.DataFrame:
    """The seeded query in pandas, over ``events`` (parsed, in replay order, from the position on).

    Its micro-batches hold ``batch`` events; a micro-batch's watermark is the largest event time of the ones before
    minus the delay (the first has none), and a record is late at or before the larger of that and the seed's
    watermark ``floor``. The first delivery of an id the seed does not hold is emitted.
    """
    times = events["event_time"].to_numpy(dtype="int64")
    batches = np.arange(len(times)) // batch
    newest = pd.Series(times).groupby(batches).max().cummax().shift(fill_value=-(2**62)).to_numpy()
    watermark = newest[batches] - delay_ms
    if floor is not None:
        watermark = np.maximum(watermark, floor)
    kept = events[times > watermark]
    kept = kept[~kept["event_id"].isin(seed["event_id"])]
    return kept.drop_duplicates("event_id", keep="first")


def test_an_ids_seed_continues_the_legacy_output_at_many_kill_points() -> None:
    from compare.cutover import ids_seed
    from kit.workloads import parse_dataset, sorted_rows
    from modern.seed import seed_watermark

    spec = workloads.get("dedup")
    dataset = DatasetSpec.from_profile("messy", records=4000, seed=9, events_per_second=100)
    frame = generate(dataset)
    events, _ = parse_dataset(frame)
    expected = spec.oracle(frame, dataset).rows
    remembered = 0
    for k in sorted(random.Random(5).sample(range(1, len(frame)), 12)):
        legacy = spec.oracle(frame.iloc[:k], dataset).rows  # what a legacy job killed after k records emitted
        seed = ids_seed(spec, legacy)
        floor = seed_watermark(int(seed["seen_at"].max()) if len(seed) else None, spec)
        after = events[events["seq"] >= k]
        modern = _dedup_model(after, seed, floor, WATERMARK_DELAY_MS)
        union = pd.concat([legacy, sorted_rows(spec, modern)])
        pd.testing.assert_frame_equal(sorted_rows(spec, union), expected, check_dtype=False)
        remembered += int(after["event_id"].isin(seed["event_id"]).sum())
        # The seed is the ids the legacy job can still be sent again, not every id it emitted.
        assert len(seed) < len(legacy) or k < 600
    assert remembered > 0  # re-deliveries after the position that only the seed drops


def test_without_the_seed_or_its_watermark_the_union_is_wrong() -> None:
    from compare.cutover import ids_seed
    from kit.workloads import parse_dataset, sorted_rows
    from modern.seed import seed_watermark

    spec = workloads.get("dedup")
    dataset = DatasetSpec.from_profile("messy", records=4000, seed=9, events_per_second=100)
    frame = generate(dataset)
    events, _ = parse_dataset(frame)
    expected = spec.oracle(frame, dataset).rows
    wrong = {"no seed": 0, "no watermark": 0}
    for k in range(200, len(frame), 200):
        legacy = spec.oracle(frame.iloc[:k], dataset).rows
        seed = ids_seed(spec, legacy)
        floor = seed_watermark(int(seed["seen_at"].max()), spec)
        after = events[events["seq"] >= k]
        for case, model in (("no seed", _dedup_model(after, seed.iloc[:0], floor, WATERMARK_DELAY_MS)),
                            ("no watermark", _dedup_model(after, seed, None, WATERMARK_DELAY_MS))):
            union = sorted_rows(spec, pd.concat([legacy, sorted_rows(spec, model)]))
            wrong[case] += not union.equals(expected.astype(union.dtypes.to_dict()))
    assert wrong["no seed"] > 0 and wrong["no watermark"] > 0, wrong


def test_a_seeded_dedup_drops_what_the_legacy_job_saw_and_its_state_store_proves_it(
    spark, bootstrap_servers: str, topic_factory, tmp_path: Path
) -> None:
    from compare.cutover import ids_seed
    from modern.seed import IDS_VARIABLE, check_seeded_state, first_batch_ranges

    # Seed 18: 4 re-deliveries of seed ids after the half (only the seed drops them) and 4 too-late records in the
    # first micro-batch (only the seed's watermark drops them: the batch has none of its own).
    spec = DatasetSpec.from_profile("messy", records=3000, seed=18, events_per_second=100)
    frame = generate(spec)
    dedup = workloads.get("dedup")
    half = len(frame) // 2
    topic = topic_factory(PARTITIONS)
    legacy = dedup.oracle(frame.iloc[:half], spec).rows  # the legacy job's rows over the first half
    seed_rows, position = _seeded_at_half(spark, tmp_path, bootstrap_servers, topic, spec, "dedup",
                                          lambda _part, _ends: ids_seed(dedup, legacy), maxOffsetsPerTrigger="300")

    # Legacy before + modern after is the oracle over the whole stream: no id twice, none lost, no too-late record.
    modern = workloads.final_result(dedup, read_batches(tmp_path / "out" / "dedup"))
    union = workloads.final_result(dedup, pd.concat([legacy, modern]))
    pd.testing.assert_frame_equal(union, dedup.oracle(frame, spec).rows, check_dtype=False)

    report = json.loads((tmp_path / "out" / "dedup.seed_check.json").read_text())
    assert report["ok"] and report["keys_seeded"] == len(seed_rows) > 0
    assert report["first_batch_events"] > 0 and report["keys_in_state"] > len(seed_rows)
    assert report["first_batch_late"] == (frame.iloc[half:half + 300]["kind"] == "too_late").sum() > 0
    # Every seed id is in the store at batch 0, forgotten at its event time plus the delay.
    state = spark.read.format("statestore").option("stateVarName", IDS_VARIABLE).option("batchId", 0).load(
        str((tmp_path / "ckpt" / "dedup").resolve())).selectExpr("key.event_id AS event_id",
                                                                  f"value.{IDS_VARIABLE} AS forget_at").toPandas()
    held = seed_rows.merge(state, on="event_id")
    assert len(held) == len(seed_rows)
    assert (held["forget_at"] == held["seen_at"] + WATERMARK_DELAY_MS).all()

    # A tampered seed (one id seen at another time, one id the legacy job never emitted) is caught, key for key.
    query_progress = [p for p in read_progress(tmp_path / "out", "dedup") if p["batchId"] == 0][0]
    ranges = first_batch_ranges(query_progress, {topic: position}, {})
    changed = seed_rows[seed_rows["seen_at"] < seed_rows["seen_at"].max()].index[0]
    wrong = seed_rows.copy()
    wrong.loc[changed, "seen_at"] += 1
    wrong = pd.concat([wrong, pd.DataFrame({"event_id": ["never-emitted"], "seen_at": [wrong["seen_at"].min()]})])
    tampered = tmp_path / "tampered.parquet"
    wrong.to_parquet(tampered)
    check = check_seeded_state(spark, tmp_path / "ckpt" / "dedup", tampered, dedup, ranges, bootstrap_servers)
    assert not check.ok and check.different == 2
    assert {d["event_id"] for d in check.differences} == {seed_rows.loc[changed, "event_id"], "never-emitted"}


@pytest.mark.parametrize(("job", "seed", "column"), [
    ("dedup", pd.DataFrame({"event_id": ["e1"], "seen_at": ["yesterday"]}), "'seen_at' is string"),
    ("running_counts", pd.DataFrame({"key": [7], "count": [1], "last_input_ts": [5]}), "'key' is bigint"),
    ("running_counts", pd.DataFrame({"key": ["a"], "count": [1.5], "last_input_ts": [5]}), "'count' is double"),
])
def test_a_seed_the_state_cannot_hold_is_refused_before_the_query_starts(
    spark, bootstrap_servers: str, topic_factory, tmp_path: Path, job: str, seed: pd.DataFrame, column: str
) -> None:
    spec = DatasetSpec.from_profile("clean", records=100, seed=1)
    path = tmp_path / "seed.parquet"
    seed.to_parquet(path)
    run = _seeded_run(spark, tmp_path, bootstrap_servers, topic_factory(PARTITIONS), spec, job, path, {0: 0, 1: 0})
    with pytest.raises(ConfigError, match=f"initial state's column {column}, but the query's state holds"):
        run.start()
    assert not run.queries and not (tmp_path / "ckpt").exists()  # nothing written to the modern checkpoint


def test_a_seeded_sessions_query_continues_the_legacy_sessions_and_its_state_store_proves_it(
    spark, bootstrap_servers: str, topic_factory, tmp_path: Path
) -> None:
    from kit.workloads import parse_dataset
    from kit.workloads.rewind import RewindInput
    from modern.seed import check_seeded_state, first_batch_ranges

    spec = DatasetSpec.from_profile("messy", records=3000, seed=18, events_per_second=50)
    frame = generate(spec)
    sessions = workloads.get("sessions")
    half = len(frame) // 2
    topic = topic_factory(PARTITIONS)
    legacy = sessions.oracle(frame.iloc[:half], spec)
    closed: list[pd.DataFrame] = []

    def open_at_half(part: pd.DataFrame, ends: dict) -> pd.DataFrame:
        # What a legacy job that processed the first half left: its records (placed as the replay placed them),
        # the sessions its watermark closed, none dropped as late (no record is 35 s behind here).
        events, _ = parse_dataset(part)
        events = events.assign(topic=topic, partition=events["seq"] % PARTITIONS, offset=events["seq"] // PARTITIONS,
                               kafka_ts=part["timestamp_ms"].to_numpy()[events["seq"].to_numpy()])
        closed.append(legacy.rows[legacy.rows["session_end"] <= events["event_time"].max() - WATERMARK_DELAY_MS])
        position = {(topic, p): o for p, o in ends.items()}
        late = pd.DataFrame(columns=["topic", "partition", "offset"])
        return sessions.carry.seed_from_input(RewindInput(events, closed[0], position, position, spec, late))

    seed_rows, position = _seeded_at_half(spark, tmp_path, bootstrap_servers, topic, spec, "sessions", open_at_half,
                                          maxOffsetsPerTrigger="300")
    emitted = closed[0]
    modern = workloads.final_result(sessions, read_batches(tmp_path / "out" / "sessions"))
    union = workloads.final_result(sessions, pd.concat([emitted, modern]))
    expected = sessions.oracle(frame, spec).rows
    assert len(expected) > len(emitted) > 0  # sessions closed on both sides of the cutover
    pd.testing.assert_frame_equal(union, expected, check_dtype=False)
    report = json.loads((tmp_path / "out" / "sessions.seed_check.json").read_text())
    assert report["ok"] and report["keys_seeded"] == seed_rows["user"].nunique() > 0

    # A tampered seed (one session with an event more) is caught: that user's sessions differ.
    query_progress = [p for p in read_progress(tmp_path / "out", "sessions") if p["batchId"] == 0][0]
    ranges = first_batch_ranges(query_progress, {topic: position}, {})
    wrong = seed_rows.copy()
    wrong.loc[0, "events"] += 1
    tampered = tmp_path / "tampered.parquet"
    wrong.to_parquet(tampered)
    check = check_seeded_state(spark, tmp_path / "ckpt" / "sessions", tampered, sessions, ranges, bootstrap_servers,
                               gap_ms=spec.session_gap_ms)
    assert not check.ok and check.different == 1 and check.differences[0]["user"] == seed_rows.loc[0, "user"]


@pytest.mark.parametrize("job", ["running_counts", "dedup", "sessions"])
def test_an_empty_seed_starts_the_query_empty(spark, bootstrap_servers: str, topic_factory, tmp_path: Path,
                                              job: str) -> None:
    """The legacy job completed no batch with records: the cutover writes an empty seed (with whatever column
    types), and the seeded query is the unseeded one from the start, checked."""
    from compare.cutover import ids_seed
    from kit.workloads.rewind import SESSION_STATE

    spec = workloads.get(job)
    empty = {"running_counts": pd.DataFrame({c: pd.Series(dtype="int64") for c in ("key", "count", "last_input_ts")}),
             "dedup": ids_seed(spec, pd.DataFrame()),
             "sessions": pd.DataFrame({c: pd.Series(dtype="int64") for c in ("user", *SESSION_STATE)})}[job]
    dataset = dataclasses.replace(DatasetSpec.from_profile("messy", records=1500, seed=4, events_per_second=50),
                                  too_late_fraction=0.0)
    topic = topic_factory(PARTITIONS)
    _seeded_at_half(spark, tmp_path, bootstrap_servers, topic, dataset, job, lambda _part, _ends: empty,
                    maxOffsetsPerTrigger="300")
    frame = generate(dataset)
    modern = workloads.final_result(spec, read_batches(tmp_path / "out" / spec.name))
    expected = spec.oracle(frame.iloc[len(frame) // 2:], dataset).rows
    pd.testing.assert_frame_equal(modern, expected.astype(modern.dtypes.to_dict()), check_dtype=False)
    report = json.loads((tmp_path / "out" / f"{spec.name}.seed_check.json").read_text())
    assert report["ok"] and report["keys_seeded"] == 0 and report["keys_in_state"] > 0
