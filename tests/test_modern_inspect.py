"""modern.inspect: reading a Structured Streaming checkpoint location.

Hand-written checkpoint trees (no JVM) pin the file formats, the damage errors and the rendering; one
Spark test runs a real stateful query over the embedded broker and inspects its checkpoint, row counts
included.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from modern.errors import CheckpointDamaged, CheckpointNotFound, NotAModernCheckpoint
from modern.inspect import ModernCheckpoint, inspect_modern_checkpoint, list_query_checkpoints

QUERY_ID = "0f6e5c1a-3b7d-4c2e-9a51-2f8d6b4e7c90"
CONF_OLD = {"spark.sql.shuffle.partitions": "8"}
CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}


class NoSpark:
    """Stands in for a SparkSession where none must be used: any use fails the test."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"Spark was used (.{name}) where the files alone answer")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def offsets_file(timestamp_ms: int, watermark_ms: int, *sources: str, conf: dict | None = None) -> str:
    metadata = {"batchWatermarkMs": watermark_ms, "batchTimestampMs": timestamp_ms, "conf": conf or CONF}
    return "\n".join(["v1", json.dumps(metadata, separators=(",", ":")), *sources])


def commit_file(next_watermark_ms: int) -> str:
    return f'v1\n{{"nextBatchWatermarkMs":{next_watermark_ms}}}'


def three_batches(root: Path) -> Path:
    """Batches 0..2 of a query with two sources (the second without offsets until batch 1); 0 and 1 committed."""
    return write_tree(root, {
        "metadata": json.dumps({"id": QUERY_ID}),
        ".metadata.crc": "\x00crc",
        "offsets/0": offsets_file(1_700_000_000_000, 0, '{"events":{"0":10,"1":12}}', "-", conf=CONF_OLD),
        "offsets/1": offsets_file(1_700_000_005_000, 0, '{"events":{"0":20,"1":25}}', "7", conf=CONF_OLD),
        "offsets/2": offsets_file(1_700_000_010_000, 5_000, '{"events":{"0":30,"1":31}}', "9"),
        "offsets/.2.crc": "\x00crc",
        "offsets/.3.5b1c.tmp": "v1\n{",      # a batch Spark was writing: a temp file, not a batch
        "commits/0": commit_file(0),
        "commits/1": commit_file(5_000),
        "commits/.1.crc": "\x00crc",
    })


# -- batches, commits, offsets -------------------------------------------------------------------------------


def test_batches_commits_offsets_and_the_uncommitted_batch(tmp_path: Path) -> None:
    checkpoint = inspect_modern_checkpoint(three_batches(tmp_path / "q"), NoSpark())

    assert checkpoint.query_id == QUERY_ID
    assert [b.batch_id for b in checkpoint.batches] == [0, 1, 2]
    assert [b.timestamp_ms for b in checkpoint.batches] == [1_700_000_000_000, 1_700_000_005_000, 1_700_000_010_000]
    assert [b.watermark_ms for b in checkpoint.batches] == [0, 0, 5_000]
    assert [b.offsets for b in checkpoint.batches] == [
        {"0": {"events": {"0": 10, "1": 12}}, "1": None},
        {"0": {"events": {"0": 20, "1": 25}}, "1": 7},
        {"0": {"events": {"0": 30, "1": 31}}, "1": 9},
    ]
    assert [b.committed for b in checkpoint.batches] == [True, True, False]
    assert [b.next_watermark_ms for b in checkpoint.batches] == [0, 5_000, None]
    assert checkpoint.committed_batch_ids == (0, 1)
    assert checkpoint.last_committed_batch_id == 1
    assert checkpoint.uncommitted_batch_id == 2
    assert checkpoint.conf == CONF  # the newest offsets file's, not batch 0's
    assert checkpoint.sources == () and checkpoint.state == () and checkpoint.row_counts == ()


def test_a_fully_committed_checkpoint_has_no_uncommitted_batch(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"commits/2": commit_file(5_000)})

    checkpoint = inspect_modern_checkpoint(root, row_counts=False)

    assert checkpoint.last_committed_batch_id == 2
    assert checkpoint.uncommitted_batch_id is None
    assert checkpoint.row_counts is None


def test_a_started_query_without_batches(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "q", {"metadata": json.dumps({"id": QUERY_ID})})
    (root / "offsets").mkdir()

    checkpoint = inspect_modern_checkpoint(root, NoSpark())

    assert (checkpoint.batches, checkpoint.committed_batch_ids, checkpoint.conf) == ((), (), {})
    assert checkpoint.last_committed_batch_id is None and checkpoint.uncommitted_batch_id is None
    assert "last committed batch  none" in checkpoint.describe()


def test_offsets_log_v2_names_its_sources(tmp_path: Path) -> None:
    metadata = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000, "conf": CONF})
    root = write_tree(tmp_path / "q", {
        "metadata": json.dumps({"id": QUERY_ID}),
        "offsets/0": f'v2\n{metadata}\nclicks:{{"clicks":{{"0":4}}}}\nviews:-',
        "commits/0": "v2\n" + json.dumps({"nextBatchWatermarkMs": 0, "stateUniqueIds": {}}),
    })

    batch = inspect_modern_checkpoint(root, row_counts=False).batches[0]

    assert batch.log_version == 2
    assert batch.offsets == {"clicks": {"clicks": {"0": 4}}, "views": None}
    assert batch.committed


def test_a_commit_without_a_json_line_means_watermark_0_as_in_spark(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"commits/2": "v1"})

    assert inspect_modern_checkpoint(root, row_counts=False).batches[2].next_watermark_ms == 0


# -- sources/ and state/ -------------------------------------------------------------------------------------


def test_sources_and_state_layout(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {
        "sources/0/0": "v1\n{}",
        "sources/0/10": "v1\n{}",
        "sources/0/2": "v1\n{}",
        "sources/0/.2.crc": "x",
        # An HDFS-backed aggregation: 2 partitions, versions 1..3, a snapshot at 2.
        "state/0/_metadata/metadata": "v1\n{}",
        "state/0/0/_metadata/schema": "x",
        "state/0/0/1.delta": "x", "state/0/0/2.delta": "x", "state/0/0/2.snapshot": "x", "state/0/0/3.delta": "x",
        "state/0/0/.3.delta.crc": "x",
        "state/0/1/1.delta": "x", "state/0/1/2.delta": "x", "state/0/1/3.delta": "x",
        # A RocksDB join: stores in sub-directories, checkpoint format v2 names, shared SSTs.
        "state/1/0/left-keyToNumValues/4_6c1d.zip": "x",
        "state/1/0/left-keyToNumValues/5_9e2f.changelog": "x",
        "state/1/0/right-keyToNumValues/5.changelog": "x",
        "state/1/0/SSTs/000012-aa.sst": "x",
    })

    checkpoint = inspect_modern_checkpoint(root, row_counts=False)

    assert [(s.source_id, s.files) for s in checkpoint.sources] == [("0", ("0", "2", "10"))]
    aggregation, join = checkpoint.state
    assert (aggregation.operator_id, aggregation.partitions, aggregation.stores) == (0, (0, 1), ("default",))
    assert (aggregation.min_version, aggregation.max_version) == (1, 3)
    assert (aggregation.delta_files, aggregation.snapshot_files, aggregation.zip_files) == (6, 1, 0)
    assert aggregation.has_metadata
    assert (join.operator_id, join.partitions) == (1, (0,))
    assert join.stores == ("left-keyToNumValues", "right-keyToNumValues")
    assert (join.min_version, join.max_version, join.zip_files, join.changelog_files) == (4, 5, 1, 2)
    assert not join.has_metadata


def test_state_without_a_committed_batch_is_not_counted_and_needs_no_spark(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "q", {
        "metadata": json.dumps({"id": QUERY_ID}),
        "offsets/0": offsets_file(1_700_000_000_000, 0, '{"t":{"0":3}}'),
        "state/0/0/1.delta": "x",
    })

    checkpoint = inspect_modern_checkpoint(root, NoSpark())

    (count,) = checkpoint.row_counts
    assert (count.operator_id, count.store_name, count.rows, count.batch_id) == (0, "default", None, None)
    assert "no committed batch" in count.error
    assert checkpoint.uncommitted_batch_id == 0


# -- rendering -----------------------------------------------------------------------------------------------


def test_describe_and_to_json(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    checkpoint = inspect_modern_checkpoint(root, row_counts=False)

    text = checkpoint.describe()

    assert text.splitlines()[0] == f"Structured Streaming checkpoint {root}"
    assert "  query id              " + QUERY_ID in text
    assert "uncommitted batch     batch 2 (planned, not committed: a restart runs it again)" in text
    assert "2023-11-14 22:13:30.000" in text  # batch 2's timestamp, UTC
    assert '0: {"events": {"0": 30, "1": 31}}; 1: 9' in text
    assert re.search(r"^  shuffle\.partitions +4$", text, re.M)
    assert "state: none (a stateless query)" in text

    data = checkpoint.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["uncommitted_batch_id"] == 2 and data["last_committed_batch_id"] == 1
    assert data["batches"][2] == {
        "batch_id": 2, "timestamp_ms": 1_700_000_010_000, "watermark_ms": 5_000,
        "offsets": {"0": {"events": {"0": 30, "1": 31}}, "1": 9}, "committed": False, "next_watermark_ms": None,
        "log_version": 1,
    }


def test_describe_fits_a_screen_with_many_batches(tmp_path: Path) -> None:
    files = {"metadata": json.dumps({"id": QUERY_ID})}
    for batch in range(30):
        files[f"offsets/{batch}"] = offsets_file(1_700_000_000_000 + batch, 0, json.dumps({"t": {"0": batch}}))
        files[f"commits/{batch}"] = commit_file(0)
    checkpoint = inspect_modern_checkpoint(write_tree(tmp_path / "q", files), row_counts=False)

    text = checkpoint.describe()

    assert "batches (the newest 8; 22 older omitted)" in text
    assert len(text.splitlines()) <= 40
    assert len(checkpoint.to_json()["batches"]) == 30


# -- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("", 1, id="empty"),
        pytest.param('{"batchWatermarkMs":0}', 1, id="no-version"),
        pytest.param("v0\n{}", 1, id="version-0"),
        pytest.param('v1\n{"batchWatermarkMs":0,"batchTim', 2, id="truncated-metadata"),
        pytest.param('v1\n[1, 2]', 2, id="metadata-not-an-object"),
        pytest.param(
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"events":{"0":2', 3, id="truncated-offset"
        ),
        pytest.param('v2\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"events":{"0":2}}', 3, id="v2-no-id"),
    ],
)
def test_a_damaged_offsets_file_is_named_with_its_line(tmp_path: Path, text: str, line: int) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"offsets/1": text})

    with pytest.raises(CheckpointDamaged) as caught:
        inspect_modern_checkpoint(root, row_counts=False)

    err = caught.value
    assert (err.path, err.line) == (str(root / "offsets" / "1"), line)
    assert f"{root / 'offsets' / '1'}, line {line}: expected " in str(err)
    assert "Restore it from a copy of the checkpoint" in str(err)


def test_an_offsets_file_from_a_newer_spark(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"offsets/2": "v3\n{}"})

    with pytest.raises(CheckpointDamaged, match="newer than 4.3") as caught:
        inspect_modern_checkpoint(root, row_counts=False)
    assert (caught.value.line, caught.value.actual) == (1, "v3")


def test_a_damaged_commit_file(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"commits/1": 'v1\n{"nextBatchWatermarkMs":'})

    with pytest.raises(CheckpointDamaged) as caught:
        inspect_modern_checkpoint(root, row_counts=False)
    assert (caught.value.path, caught.value.line) == (str(root / "commits" / "1"), 2)
    assert "run that batch again" in str(caught.value)


def test_missing_and_garbled_metadata(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    (root / "metadata").unlink()
    with pytest.raises(CheckpointDamaged) as caught:
        inspect_modern_checkpoint(root, row_counts=False)
    assert (caught.value.path, caught.value.line, caught.value.actual) == (str(root / "metadata"), None, "no file")

    write_tree(root, {"metadata": '{"id": "0f6e5c1a-'})
    with pytest.raises(CheckpointDamaged) as caught:
        inspect_modern_checkpoint(root, row_counts=False)
    assert (caught.value.path, caught.value.line) == (str(root / "metadata"), 1)


def test_a_root_of_query_checkpoints_is_not_one_and_says_where_they_are(tmp_path: Path) -> None:
    three_batches(tmp_path / "root" / "running_counts")
    write_tree(tmp_path / "root" / "dead_letters.events", {"metadata": json.dumps({"id": QUERY_ID})})
    write_tree(tmp_path / "root", {"notes/readme.txt": "x"})

    with pytest.raises(NotAModernCheckpoint) as caught:
        inspect_modern_checkpoint(tmp_path / "root", NoSpark())

    err = caught.value
    assert err.queries == ("dead_letters.events", "running_counts")
    assert err.entries == ("dead_letters.events", "notes", "running_counts")
    assert "neither offsets/ nor metadata" in str(err)
    assert "query checkpoints one level down: dead_letters.events, running_counts" in str(err)
    assert list_query_checkpoints(tmp_path / "root") == [
        tmp_path / "root" / "dead_letters.events", tmp_path / "root" / "running_counts"
    ]


def test_a_directory_inside_a_checkpoint_points_at_it(tmp_path: Path) -> None:
    root = three_batches(tmp_path / "q")
    write_tree(root, {"state/0/0/1.delta": "x"})

    with pytest.raises(NotAModernCheckpoint) as caught:
        inspect_modern_checkpoint(root / "state", row_counts=False)
    assert caught.value.queries == () and caught.value.inside == str(root.resolve())


def test_an_empty_directory_and_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotAModernCheckpoint, match=r"neither offsets/ nor metadata \(it is empty\)") as caught:
        inspect_modern_checkpoint(tmp_path / "empty", row_counts=False)
    assert caught.value.queries == ()

    with pytest.raises(CheckpointNotFound, match="does not exist") as missing:
        inspect_modern_checkpoint(tmp_path / "nope", row_counts=False)
    assert isinstance(missing.value, FileNotFoundError) and missing.value.path == str(tmp_path / "nope")
    with pytest.raises(CheckpointNotFound):
        list_query_checkpoints(tmp_path / "nope")
    write_tree(tmp_path, {"file": "x"})
    with pytest.raises(CheckpointNotFound, match="is a file") as a_file:
        inspect_modern_checkpoint(tmp_path / "file", row_counts=False)
    assert a_file.value.is_file


# -- a real query ----------------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.kafka
def test_a_real_stateful_query(spark, bootstrap_servers: str, topic_factory, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from modern.kafka import source_format

    topic = topic_factory(partitions=2)
    keys = [f"k{i}" for i in range(7)]
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for partition in (0, 1):
        for i in range(15):
            producer.send(topic, key=keys[(i + partition) % len(keys)].encode(), value=b"v", partition=partition)
    producer.flush()
    producer.close()
    counts = (
        spark.readStream.format(source_format(spark))
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .selectExpr("CAST(key AS STRING) AS key")
        .groupBy("key")
        .count()
    )
    location = tmp_path / "checkpoints" / "key_counts"
    query = (
        counts.writeStream.queryName("key_counts").outputMode("update").format("noop")
        .option("checkpointLocation", str(location)).trigger(availableNow=True).start()
    )
    finished = query.awaitTermination(180)
    if query.exception() is not None:
        raise query.exception()
    assert finished, f"query still running after 180 s; last progress: {query.lastProgress}"

    checkpoint = inspect_modern_checkpoint(location, spark)

    assert list_query_checkpoints(location.parent) == [location]
    assert checkpoint.query_id == query.id
    # 30 records, 10 per batch, split over two partitions of equal lag.
    assert checkpoint.committed_batch_ids == (0, 1, 2)
    assert [b.batch_id for b in checkpoint.batches] == [0, 1, 2] and checkpoint.uncommitted_batch_id is None
    assert checkpoint.batches[-1].offsets == {"0": {topic: {"0": 15, "1": 15}}}
    shuffle_partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert checkpoint.conf["spark.sql.shuffle.partitions"] == str(shuffle_partitions)
    (operator,) = checkpoint.state
    assert (operator.partitions, operator.min_version, operator.max_version) == (tuple(range(shuffle_partitions)), 1, 3)
    (store,) = checkpoint.row_counts
    assert checkpoint.state_metadata_error is None and store.error is None
    assert (store.operator_name, store.store_name, store.num_partitions, store.batch_id) == (
        "stateStoreSave", "default", shuffle_partitions, 2
    )
    assert store.rows == len(keys) == sum(store.rows_per_partition.values())
    assert list(store.rows_per_partition) == list(range(shuffle_partitions))
    assert f"  0         stateStoreSave  default  {len(keys)}" in checkpoint.describe()

    # A checkpoint whose operator metadata is garbled: both readers fail, and say so instead of raising.
    damaged = tmp_path / "damaged"
    shutil.copytree(location, damaged)
    for name in ("metadata", ".metadata.crc"):
        (damaged / "state" / "0" / "_metadata" / name).unlink(missing_ok=True)
    (damaged / "state" / "0" / "_metadata" / "metadata").write_text('v1\n{"operatorInfo":', encoding="utf-8")

    degraded = inspect_modern_checkpoint(damaged, spark)

    assert isinstance(degraded, ModernCheckpoint) and degraded.batches == checkpoint.batches
    assert degraded.state_metadata_error
    (failed,) = degraded.row_counts
    assert (failed.operator_id, failed.store_name, failed.rows) == (0, "default", None) and failed.error
    assert "state-metadata reader FAILED" in degraded.describe()


def test_batch_spans_take_a_committed_batch_the_progress_missed_from_the_checkpoint(tmp_path: Path) -> None:
    """A killed driver can commit a micro-batch and die before its progress event is written: the span comes
    from the offsets and commits logs, with the batch's records (so the backlog is not overstated)."""
    import os

    from modern.engine import MODERN

    checkpoint = tmp_path / "checkpoint"
    three_batches(checkpoint / "running_counts")
    for name, seconds in (("offsets/0", 100), ("commits/0", 101), ("offsets/1", 200), ("commits/1", 203)):
        path = checkpoint / "running_counts" / name
        os.utime(path, (seconds, seconds))
    out = tmp_path / "out"
    progress = {"name": "running_counts", "batchId": 0, "numInputRows": 22, "batchDuration": 900,
                "timestamp": "1970-01-01T00:01:40.000Z"}
    (out / "progress").mkdir(parents=True)
    (out / "progress" / "running_counts.jsonl").write_text(json.dumps(progress) + "\n", encoding="utf-8")

    reported_only = MODERN.record(out).batch_spans("running_counts")
    assert reported_only[["started_ms", "ended_ms", "records"]].values.tolist() == [[100_000, 100_900, 22]]
    with_checkpoint = MODERN.record(out, checkpoint).batch_spans("running_counts")
    # Batch 1 read events-0 10 -> 20 and events-1 12 -> 25: 23 records; batch 2 is not committed.
    assert with_checkpoint[["started_ms", "ended_ms", "records"]].values.tolist() == [
        [100_000, 100_900, 22], [200_000, 203_000, 23]]


def test_idle_triggers_are_spans_without_records(spark, bootstrap_servers: str, topic_factory, tmp_path: Path) -> None:
    """A query with nothing new to read runs no micro-batch; Spark records the idle trigger's progress without
    posting it, and the kit's listener fetches it: a span without records, its own duration, no batch repeated."""
    import time

    from kit.dataset import DatasetSpec, generate
    from kit.replay import ReplaySettings, replay
    from modern.engine import MODERN
    from modern.runner import ModernRun, ModernRunConfig, read_progress

    spec = DatasetSpec.from_profile("clean", records=300, seed=5)
    topic = topic_factory(2)
    replayed = replay(generate(spec), bootstrap_servers, ReplaySettings(topic=topic, partitions=2))
    out = tmp_path / "out"
    config = ModernRunConfig(bootstrap_servers=bootstrap_servers, topics={"events": topic}, out_dir=str(out),
                             checkpoint_dir=str(tmp_path / "checkpoint"), dataset=spec,
                             jobs=(("running_counts", "default"),))
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")
    run = ModernRun(spark, config).start()
    try:
        run.await_offsets(replayed.topic_end_offsets, timeout_s=120)
        deadline = time.monotonic() + 60
        while len(idle := read_progress(out, "running_counts", idle=True)) < 3:
            assert time.monotonic() < deadline, f"{len(idle)} idle triggers reported in 60 s"
            time.sleep(0.1)
    finally:
        run.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")

    batches = read_progress(out, "running_counts")
    assert all(p["numInputRows"] == 0 and "addBatch" not in p["durationMs"] and "latestOffset" in p["durationMs"]
               for p in idle)
    # Spark gives an idle trigger the id of the micro-batch it did not run.
    assert {p["batchId"] for p in idle} == {max(p["batchId"] for p in batches) + 1}
    spans = MODERN.record(out).batch_spans("running_counts")
    assert len(spans) == len(batches) + len(idle)
    assert spans["records"].sum() == 300 == sum(p["numInputRows"] for p in batches)
    idle_spans = spans[spans["records"] == 0]
    assert len(idle_spans) >= len(idle)
    assert sorted(idle_spans["processing_ms"].tolist()) == sorted(
        [p["batchDuration"] for p in idle] + [p["batchDuration"] for p in batches if p["numInputRows"] == 0])
    ranges = MODERN.record(out).processed_ranges("running_counts")
    assert sum(until - first for _, _, first, until in ranges) == 300


def test_polled_progress_keeps_idle_triggers_apart_from_the_batch_they_did_not_run(tmp_path: Path) -> None:
    """Over Connect the runner polls ``recentProgress``, which holds idle triggers too: one carries the id of the
    next micro-batch, so it must not stand in for that batch when it runs."""
    from types import SimpleNamespace

    from modern.runner import _ProgressLog, _ProgressPoller, read_progress

    def progress(batch: int, rows: int, timestamp: str, idle: bool = False) -> SimpleNamespace:
        durations = {"latestOffset": 3, "triggerExecution": 4} if idle else {"addBatch": 90, "triggerExecution": 120}
        return SimpleNamespace(json=json.dumps({
            "name": "q", "runId": "r", "batchId": batch, "timestamp": timestamp, "durationMs": durations,
            "sources": [{"numInputRows": rows}]}))

    query = SimpleNamespace(recentProgress=[progress(0, 5, "t0"), progress(1, 0, "t1", idle=True)])
    poller = _ProgressPoller(_ProgressLog(tmp_path, {"q"}))
    poller.queries = {"q": query}
    poller.poll()
    query.recentProgress = [*query.recentProgress, progress(1, 0, "t2", idle=True), progress(1, 7, "t3")]
    poller.poll()
    poller.poll()

    assert [(p["batchId"], p["numInputRows"]) for p in read_progress(tmp_path, "q")] == [(0, 5), (1, 7)]
    assert [p["timestamp"] for p in read_progress(tmp_path, "q", idle=True)] == ["t1", "t2"]


def test_checkpoint_inspect_asks_the_engines_which_owns_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dmk checkpoint inspect`` reads a checkpoint with the engine that owns it (the registry's, in order)."""
    from compare.cli import main
    from compare.engines import get_engine

    legacy, modern = get_engine("legacy"), get_engine("modern")
    root = tmp_path / "queries"
    three_batches(root / "running_counts")
    dstream = tmp_path / "dstream"
    dstream.mkdir()
    (dstream / "checkpoint-1000").write_bytes(b"")
    empty = tmp_path / "empty"
    empty.mkdir()
    owners = {str(d): [e.name for e in (legacy, modern) if e.owns_checkpoint(str(d))]
              for d in (root, root / "running_counts", dstream, empty)}
    assert owners == {str(root): ["modern"], str(root / "running_counts"): ["modern"], str(dstream): ["legacy"],
                      str(empty): []}
    assert legacy.owns_checkpoint("hdfs://nn:8020/ckpt") and not modern.owns_checkpoint("hdfs://nn:8020/ckpt")
    # A directory of query checkpoints: one report each, read from files only.
    assert main(["checkpoint", "inspect", str(root), "--json", "--no-row-counts"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [b["batch_id"] for b in shown["batches"]] == [0, 1, 2]
