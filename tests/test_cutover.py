"""``dmk cutover`` end to end: a legacy job runs on the first part of a replayed dataset and is stopped (after it
drained, or by SIGKILL mid-run); the cutover reads its position from where it kept it; the modern job runs on
the rest from there. The union of both jobs' outputs must equal the oracle exactly: no gap, no duplicate.

Both jobs are real driver processes (``python -m compare.driver``), the same ones ``dmk compare`` runs. Each
run cuts over two jobs at once: ``examples.purchases`` (stateless) and ``running_counts`` (its totals carried
into the modern query with ``--seed-state``). docs/cutover.md's runbook uses the commands of this test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import main as dmk
from compare.cutover import (
    EARLIEST,
    CutoverAmbiguous,
    LegacyPosition,
    PositionSource,
    plan_cutover,
    read_position,
    union_of_outputs,
)
from compare.driver import CONTROL, DONE, DRAIN, OFFSET_STORE_ENV, READY, write_json
from compare.supervise import DriverProcess
from kit import workloads
from kit.dataset import DatasetSpec, generate
from kit.engine import DriverConfig
from kit.replay import ReplaySettings, replay
from kit.sink import read_batches, write_batch, write_keyed

PARTITIONS = 4
JOBS = [["running_counts", "default"], ["examples.purchases:SPEC", "default"]]
REPO = str(Path(__file__).resolve().parents[1])


def _spec() -> DatasetSpec:
    # Messy (malformed records, duplicates), without the too-late records that need a long stream: neither job
    # looks at event time.
    return dataclasses.replace(DatasetSpec.from_profile("messy", records=3000, seed=5), too_late_fraction=0.0)


def _config(engine: str, tmp: Path, bootstrap: str, topic: str, spec: DatasetSpec, **options: object) -> Path:
    out = tmp / engine
    config = DriverConfig(
        engine=engine, app_name="dmk-cutover", bootstrap_servers=bootstrap, topics={"events": topic},
        out_dir=str(out), checkpoint_dir=str(tmp / f"{engine}-checkpoint"), dataset=spec,
        jobs=tuple(tuple(job) for job in JOBS), partitions=PARTITIONS, timeout_s=300,
        sys_path=(REPO,), options=options,
    )
    config.write(out / "driver-config.json")
    return out / "driver-config.json"


def _driver(engine: str, config: Path, store: str | None = None) -> DriverProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    if store:
        env[OFFSET_STORE_ENV] = store
    return DriverProcess(engine, config, config.parent, 300, env)


def _completed_batches_with_records(out: Path) -> int:
    progress = read_batches(out / "progress.events")
    if progress.empty:
        return 0
    sizes = (progress["until_offset"] - progress["from_offset"]).groupby(progress["batch"]).sum()
    return int((sizes > 0).sum())


def _run_legacy(tmp: Path, bootstrap: str, topic: str, spec: DatasetSpec, mode: str, store: str | None,
                ends: dict, kill: bool) -> Path:
    config = _config("legacy", tmp, bootstrap, topic, spec, offsets=mode, job_name=f"cut-{uuid.uuid4().hex[:8]}",
                     max_rate_per_partition=100, fingerprint="cutover-test")
    driver = _driver("legacy", config, store)
    out = config.parent
    try:
        driver.start()
        driver.wait_for(READY, 300)
        write_json(out / CONTROL / DRAIN, {"end_offsets": ends})
        if kill:
            # Mid-run: some batches with records done, more to come (1,500 records at 400 records/s).
            deadline = time.monotonic() + 300
            while _completed_batches_with_records(out) < 2:
                driver.check()
                assert time.monotonic() < deadline, "the legacy job completed no batch in 300 s"
                time.sleep(0.1)
            driver.kill()
        else:
            driver.wait_for(DONE, 300)
            driver.finish()
    finally:
        driver.stop()
    return out


def _run_modern(tmp: Path, bootstrap: str, topic: str, spec: DatasetSpec, options: dict, seed: Path, ends: dict) -> Path:
    config = _config("modern", tmp, bootstrap, topic, spec, source_options=options,
                     initial_state={"running_counts": str(seed)})
    driver = _driver("modern", config)
    try:
        driver.start()
        driver.wait_for(READY, 300)
        write_json(config.parent / CONTROL / DRAIN, {"end_offsets": ends})
        driver.wait_for(DONE, 300)
        driver.finish()
    finally:
        driver.stop()
    return config.parent


def _cutover_case(tmp: Path, bootstrap: str, topic_factory, mode: str, store: str | None, kill: bool) -> None:
    spec = _spec()
    frame = generate(spec)
    topic = topic_factory(PARTITIONS)
    half = len(frame) // 2
    settings = ReplaySettings(topic=topic, partitions=PARTITIONS, partition_by="seq")
    first = replay(frame.iloc[:half], bootstrap, settings)
    legacy_out = _run_legacy(tmp, bootstrap, topic, spec, mode, store, first.topic_end_offsets, kill)

    # The cutover, as the runbook (docs/cutover.md) runs it.
    job = json.loads((legacy_out / "driver-config.json").read_text())["options"]["job_name"]
    where = {"checkpoint": str(tmp / "legacy-checkpoint"), "kafka": job, "sqlite": str(legacy_out / "offsets.sqlite")}
    args = ["cutover", mode, where.get(mode, store)]
    if mode != "checkpoint":
        args += ["--topic", topic, "--consumer", job, "--bootstrap-servers", bootstrap]
    options = tmp / "modern-options.json"
    seed = tmp / "seed.parquet"
    args += ["--legacy-output", str(legacy_out), "--discard-beyond", "--write-options", str(options),
             "--seed-state", str(seed), "--workload", "running_counts"]
    if mode == "checkpoint":
        args.append("--allow-pending")
    assert dmk(args) == 0

    starting = json.loads(json.loads(options.read_text())["startingOffsets"])[topic]
    processed = sum(starting.values())
    if kill:  # killed mid-run: the position is inside the first part, not at its end
        assert 0 < processed < half
    else:
        assert {int(p): o for p, o in starting.items()} == first.topic_end_offsets[topic]

    rest = replay(frame.iloc[half:], bootstrap, settings)
    modern_out = _run_modern(tmp, bootstrap, topic, spec, json.loads(options.read_text()), seed, rest.topic_end_offsets)
    # running_counts' totals were carried in the modern query's state store, checked key for key at its first batch
    check = json.loads((modern_out / "running_counts.seed_check.json").read_text())
    assert check["ok"] and check["keys_seeded"] == len(pd.read_parquet(seed)) and check["first_batch_events"] > 0

    for name in ("running_counts", "examples.purchases:SPEC"):
        job_spec = workloads.get(name)
        expected = job_spec.oracle(frame, spec)
        union = union_of_outputs(job_spec, read_batches(legacy_out / job_spec.name), read_batches(modern_out / job_spec.name))
        pd.testing.assert_frame_equal(union.astype(expected.rows.dtypes.to_dict()), expected.rows, check_dtype=False)
    # Dead letters: each malformed record exactly once, across both jobs.
    letters = pd.concat([read_batches(legacy_out / "dead_letters.events"), read_batches(modern_out / "dead_letters.events")])
    positions = letters[["partition", "offset"]].astype("int64")
    assert not positions.duplicated().any()
    assert len(positions) == len(workloads.get("running_counts").oracle(frame, spec).dead_letters)


def test_cutover_from_a_killed_checkpointed_job(tmp_path: Path, bootstrap_servers: str, topic_factory) -> None:
    _cutover_case(tmp_path, bootstrap_servers, topic_factory, "checkpoint", None, kill=True)


# Every store, drained and killed; the killed checkpoint case is the default tier's test above.
CASES = [(mode, kill) for mode in ("checkpoint", "kafka", "zookeeper", "sqlite", "postgresql") for kill in (False, True)
         if (mode, kill) != ("checkpoint", True)]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "kill"), CASES, ids=[f"{m}-{'killed' if k else 'drained'}" for m, k in CASES])
def test_cutover_from_every_offset_store(mode: str, kill: bool, tmp_path: Path, bootstrap_servers: str, topic_factory,
                                         request: pytest.FixtureRequest) -> None:
    store = None
    if mode == "zookeeper":
        store = request.getfixturevalue("zookeeper_hosts")
    elif mode == "postgresql":
        store = request.getfixturevalue("postgres_dsn_factory")()
    _cutover_case(tmp_path, bootstrap_servers, topic_factory, mode, store, kill)


# -- the position rules, without Spark ---------------------------------------------------------------------------


def _progress(out: Path, batch_ms: int, ranges: list[tuple[int, int, int]]) -> None:
    write_batch(out / "progress.events", batch_ms, pd.DataFrame(
        [("t", p, f, u) for p, f, u in ranges], columns=["topic", "partition", "from_offset", "until_offset"]))


def _position(offsets: dict[int, int], exact: bool = True) -> LegacyPosition:
    return LegacyPosition(PositionSource("checkpoint", "x"), {("t", p): o for p, o in offsets.items()}, exact)


def test_outputs_beyond_the_position_are_refused_then_discarded(tmp_path: Path) -> None:
    _progress(tmp_path, 1000, [(0, 0, 5), (1, 0, 3)])
    _progress(tmp_path, 2000, [(0, 5, 9), (1, 3, 3)])
    write_batch(tmp_path / "running_counts", 1000, pd.DataFrame({"key": ["a"], "count": [5]}))
    write_batch(tmp_path / "running_counts", 2000, pd.DataFrame({"key": ["a"], "count": [9]}))
    write_batch(tmp_path / "running_counts", 3000, pd.DataFrame({"key": ["b"], "count": [1]}))  # partial, no progress
    with pytest.raises(CutoverAmbiguous, match="2 batch\\(es\\) beyond the position") as info:
        plan_cutover(_position({0: 5, 1: 3}), legacy_output=tmp_path)
    assert info.value.batches == (2000, 3000)
    plan = plan_cutover(_position({0: 5, 1: 3}), legacy_output=tmp_path, discard_beyond=True)
    assert plan.last_batch_ms == 1000 and plan.beyond == (2000, 3000)
    assert sorted(p.name for p in (tmp_path / "running_counts").iterdir()) == [f"batch={1000:015d}.parquet"]
    assert read_batches(tmp_path / "progress.events")["batch"].unique().tolist() == [1000]
    assert plan.starting_offsets_json() == '{"t":{"0":5,"1":3}}'


def test_dead_letters_the_parse_wrote_beyond_the_position_are_refused_then_discarded(tmp_path: Path) -> None:
    """The legacy parse writes dead letters as it reads (keyed files, not per batch): those beyond the position
    are found by their offsets; the ones within stay."""
    _progress(tmp_path, 1000, [(0, 0, 5), (1, 0, 3)])
    letters = tmp_path / "dead_letters.events"
    write_keyed(letters, pd.DataFrame({"topic": ["t", "t"], "partition": [0, 1], "offset": [2, 1],
                                       "reason": ["bad_json", "bad_utf8"]}))
    write_keyed(letters, pd.DataFrame({"topic": ["t", "t"], "partition": [0, 0], "offset": [4, 6],
                                       "reason": ["bad_json", "missing_field"]}))  # 6: a batch not committed
    with pytest.raises(CutoverAmbiguous, match="dead letters of records beyond the position in 1 file"):
        plan_cutover(_position({0: 5, 1: 3}), legacy_output=tmp_path)
    plan = plan_cutover(_position({0: 5, 1: 3}), legacy_output=tmp_path, discard_beyond=True)
    assert len(plan.discarded) == 1 and plan.discarded[0].startswith("dead_letters.events/keyed-")
    kept = read_batches(letters)[["partition", "offset", "reason"]].sort_values(["partition", "offset"])
    assert kept.values.tolist() == [[0, 2, "bad_json"], [0, 4, "bad_json"], [1, 1, "bad_utf8"]]


def test_a_position_inside_a_batch_is_refused(tmp_path: Path) -> None:
    _progress(tmp_path, 1000, [(0, 0, 5)])
    _progress(tmp_path, 2000, [(0, 5, 9)])
    with pytest.raises(CutoverAmbiguous, match="not where a completed batch") as info:
        plan_cutover(_position({0: 7}), legacy_output=tmp_path)
    assert info.value.reason == "position inside a batch"
    with pytest.raises(CutoverAmbiguous, match="not where a completed batch"):  # inside the first batch
        plan_cutover(_position({0: 3}), legacy_output=tmp_path)
    assert len(list((tmp_path / "progress.events").glob("batch=*"))) == 2  # refused: nothing deleted
    assert plan_cutover(_position({0: EARLIEST}), legacy_output=tmp_path).beyond == (1000, 2000)


def test_a_position_missing_a_partition_of_the_outputs_is_refused(tmp_path: Path) -> None:
    _progress(tmp_path, 1000, [(0, 0, 5), (1, 0, 3)])
    position = LegacyPosition(PositionSource("checkpoint", "x"), {("t", 0): 5}, True)  # --topic named too few
    with pytest.raises(CutoverAmbiguous, match="for which the position has no offset"):
        plan_cutover(position, legacy_output=tmp_path, discard_beyond=True)
    assert (tmp_path / "progress.events" / f"batch={1000:015d}.parquet").exists()


def test_written_options_replace_every_other_starting_point(tmp_path: Path) -> None:
    from compare.cutover import CutoverPlan, write_options

    target = tmp_path / "options.json"
    target.write_text(json.dumps({"maxOffsetsPerTrigger": "500", "startingTimestamp": "1000", "STARTINGOFFSETS": "x"}))
    written = write_options(CutoverPlan(_position({0: 5, 1: 3})), target)
    assert written == {"maxOffsetsPerTrigger": "500", "startingOffsets": '{"t":{"0":5,"1":3}}'}
    assert json.loads(target.read_text()) == written


def test_an_at_least_once_store_says_so(tmp_path: Path) -> None:
    plan = plan_cutover(_position({0: 5}, exact=False))
    assert "at-least-once" in plan.notes[0]


def test_union_puts_every_legacy_batch_before_the_modern_ones() -> None:
    spec = workloads.get("running_counts")
    legacy = pd.DataFrame({"batch": [1_795_000_000_000, 1_795_000_001_000], "key": ["a", "a"], "count": [1, 2],
                           "last_input_ts": [1, 2]})
    modern = pd.DataFrame({"batch": [0, 1], "key": ["a", "b"], "count": [5, 1], "last_input_ts": [3, 4]})
    assert union_of_outputs(spec, legacy, modern).values.tolist() == [["a", 5], ["b", 1]]


def test_store_sources_need_their_names() -> None:
    from kit.errors import ConfigError

    with pytest.raises(ConfigError, match="--topic"):
        PositionSource("sqlite", "f.sqlite", consumer="job")
    with pytest.raises(ConfigError, match="--consumer"):
        PositionSource("zookeeper", "127.0.0.1:2181", topics=("t",), bootstrap_servers="b:1")
    with pytest.raises(ConfigError, match="must be one of"):
        PositionSource("etcd", "x")


def test_an_empty_store_is_refused(tmp_path: Path, bootstrap_servers: str, topic_factory) -> None:
    topic = topic_factory(2)
    with pytest.raises(CutoverAmbiguous, match="holds no offsets"):
        read_position(PositionSource("sqlite", str(tmp_path / "o.sqlite"), consumer="job", topics=(topic,),
                                     bootstrap_servers=bootstrap_servers))


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def error() -> str:
        return " ".join(capsys.readouterr().err.split())

    (tmp_path / "notes.txt").write_text("x")
    assert dmk(["checkpoint", "inspect", str(tmp_path)]) == 2
    assert "neither a DStream checkpoint" in error()
    assert dmk(["checkpoint", "inspect", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in error()
    assert dmk(["cutover", "sqlite", str(tmp_path / "o.sqlite"), "--consumer", "job"]) == 2
    assert "o.sqlite does not exist" in error()  # the store is checked before anything else is asked of it
    sqlite3.connect(tmp_path / "o.sqlite").close()
    assert dmk(["cutover", "sqlite", str(tmp_path / "o.sqlite"), "--consumer", "job"]) == 2
    assert "--topic" in error()
    assert dmk(["cutover", "checkpoint", str(tmp_path), "--seed-state", "s.parquet"]) == 2
    assert "--seed-state needs --workload" in error()


def test_what_seed_state_carries(tmp_path: Path) -> None:
    from compare.cutover import CutoverPlan, seed_state
    from kit.errors import ConfigError
    from modern.runner import continue_totals

    with pytest.raises(ConfigError, match="windowed_counts: its state cannot be continued"):
        continue_totals(None, None, workloads.get("windowed_counts"))
    plan = CutoverPlan(_position({0: 5}), legacy_output=str(tmp_path))
    with pytest.raises(ConfigError, match="windowed_counts's state is rewound"):
        seed_state(plan, "windowed_counts", tmp_path / "seed.parquet")
    # Sessions are rebuilt from the records the legacy job processed: Kafka is needed, and nothing is written.
    with pytest.raises(ConfigError, match="--seed-state reads the records the legacy job processed from Kafka"):
        seed_state(plan, "sessions", tmp_path / "seed.parquet")
    assert not (tmp_path / "seed.parquet").exists()
    # dedup: the ids emitted past the legacy job's next watermark (its newest event time 20,000 minus 5 s), within
    # the position (batch 3000 is beyond it).
    ids = pd.DataFrame({"event_id": ["a", "b", "c", "d"], "user": "u", "key": "k",
                        "event_time": [9_000, 15_000, 15_001, 20_000], "last_input_ts": 0})
    write_batch(tmp_path / "dedup", 1000, ids.iloc[:2])
    write_batch(tmp_path / "dedup", 2000, ids.iloc[2:])
    write_batch(tmp_path / "dedup", 3000, ids.assign(event_id=["e", "f", "g", "h"], event_time=30_000))
    assert seed_state(dataclasses.replace(plan, last_batch_ms=2000), "dedup", tmp_path / "ids.parquet") == 2
    assert pd.read_parquet(tmp_path / "ids.parquet").values.tolist() == [["c", 15_001], ["d", 20_000]]
    write_batch(tmp_path / "running_counts", 1000, pd.DataFrame({"key": ["a", "b"], "count": [1, 2], "last_input_ts": [5, 6]}))
    write_batch(tmp_path / "running_counts", 2000, pd.DataFrame({"key": ["a"], "count": [3], "last_input_ts": [7]}))
    write_batch(tmp_path / "running_counts", 3000, pd.DataFrame({"key": ["a"], "count": [9], "last_input_ts": [8]}))
    assert seed_state(dataclasses.replace(plan, last_batch_ms=2000), "running_counts", tmp_path / "seed.parquet") == 2
    assert pd.read_parquet(tmp_path / "seed.parquet").values.tolist() == [["a", 3, 7], ["b", 2, 6]]
