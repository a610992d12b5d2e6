"""legacy.inspect: reading a DStream checkpoint directory through Spark's classes, and describing it.

One small real job (module fixture ``finished_job``) writes the checkpoint the Spark tests read: a direct
stream over 2 partitions (7 and 10 records, 2 records per partition and batch), a ``foreachRDD`` recording
each batch's ranges and a windowed count. Its functions live in a module generated under the test's tmp
directory, so a test can make that module unimportable. The rest are pure tests on hand-made values.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _streaming import await_condition, produce

from kit.kafka import Kafka, TopicPartition
from legacy.errors import CheckpointCodeNotImportable, CheckpointNotFound, CheckpointUnreadable, NotALegacyCheckpoint
from legacy.inspect import (
    CheckpointFile,
    CompletedPosition,
    DirectStreamCheckpoint,
    DStreamNode,
    LegacyCheckpoint,
    inspect_legacy_checkpoint,
    last_completed_position,
)
from legacy.kafka import KafkaUtils

pytestmark = pytest.mark.filterwarnings(
    r"ignore:DStream is deprecated as of Spark 3\.4\.0\. Migrate to Structured Streaming\.:FutureWarning"
)

PRODUCED = {0: 7, 1: 10}
BATCH_MS = 500

JOB_SOURCE = '''
"""The job test_legacy_inspect checkpoints; its (driver-side) functions are pickled by reference."""
SEEN = {}
COUNTS = {}


def record(time, rdd):
    ms = round(time.timestamp() * 1000)
    COUNTS[ms] = rdd.count()
    SEEN[ms] = tuple((r.topic, r.partition, r.fromOffset, r.untilOffset) for r in rdd.offsetRanges())


def ignore(rdd):
    pass
'''


@dataclass(frozen=True)
class FinishedJob:
    checkpoint: Path
    topic: str
    module: ModuleType
    end_offsets: dict[int, int]
    master: str
    app_name: str


def _load_job(directory: Path) -> ModuleType:
    path = directory / "inspected_job.py"
    path.write_text(JOB_SOURCE)
    name = f"legacy_inspect_job_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # importable by name while the tests run, never from sys.path
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def finished_job(spark, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    """Run the job until every record is processed and 3 empty batches followed, then stop it."""
    from kit.spark import streaming_context

    sc = spark.sparkContext
    root = tmp_path_factory.mktemp("legacy_inspect")
    job = _load_job(root)
    checkpoint = root / "checkpoint"
    topic = f"pytest_legacy_inspect_{uuid.uuid4().hex[:8]}"
    with Kafka(bootstrap_servers, timeout_s=20) as kafka:
        kafka.create_topic(topic, len(PRODUCED))
        try:
            produce(kafka, topic, PRODUCED)
            end = {tp.partition: o for tp, o in kafka.end_offsets([TopicPartition(topic, p) for p in PRODUCED]).items()}
            assert end == PRODUCED

            jconf = sc._jsc.sc().conf()
            jconf.set("spark.streaming.kafka.maxRatePerPartition", "4")  # 2 records per partition and batch
            try:
                ssc = streaming_context(BATCH_MS / 1000)
                ssc.checkpoint(str(checkpoint))
                ssc.remember(30)  # the stream remembers every batch: the checkpoint shows all of them
                stream = KafkaUtils.createDirectStream(
                    ssc, [topic], {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest"}
                )
            finally:
                jconf.remove("spark.streaming.kafka.maxRatePerPartition")
            stream.foreachRDD(job.record)
            # Executors cannot import the job's module: what runs there comes from modules they can import.
            stream.map(itemgetter(1)).window(1.0, 0.5).foreachRDD(job.ignore)
            ssc.start()
            try:
                def done() -> bool:
                    seen = dict(job.SEEN)
                    counts = {p: sum(u - f for t in seen.values() for _, q, f, u in t if q == p) for p in PRODUCED}
                    if counts != PRODUCED:
                        return False
                    last_with_records = max(t for t, ranges in seen.items() if any(u > f for *_, f, u in ranges))
                    return sum(1 for t in seen if t > last_with_records) >= 3

                await_condition(ssc, done, lambda: dict(job.SEEN), timeout_s=60)
            finally:
                ssc.stop(stopSparkContext=False, stopGraceFully=False)
        finally:
            kafka.delete_topic(topic)
    yield FinishedJob(checkpoint, topic, job, end, sc.master, sc.appName)


@pytest.fixture(scope="module")
def inspected(finished_job: FinishedJob, spark) -> LegacyCheckpoint:
    return inspect_legacy_checkpoint(str(finished_job.checkpoint))


# -- a real checkpoint -------------------------------------------------------------------------------------------


@pytest.mark.kafka
@pytest.mark.spark
def test_inspect_describes_the_checkpoint_of_a_finished_job(
    finished_job: FinishedJob, inspected: LegacyCheckpoint
) -> None:
    cp = inspected
    topic = finished_job.topic
    names = sorted(
        (p.name for p in finished_job.checkpoint.glob("checkpoint-*")),
        key=lambda n: (int(n.split("-")[1].removesuffix(".bk")), not n.endswith(".bk")),
        reverse=True,
    )
    assert cp.directory == f"file:{finished_job.checkpoint}"
    assert [f.name for f in cp.files] == names
    assert cp.used_file == names[0]
    assert all(f.error is None and f.size_bytes and f.checkpoint_time_ms is not None for f in cp.files)
    # A file is named after the latest time written so far: it may hold an older checkpoint, never a newer one.
    assert all(f.checkpoint_time_ms <= int(f.name.split("-")[1].removesuffix(".bk")) for f in cp.files)
    assert cp.checkpoint_time_ms == cp.files[0].checkpoint_time_ms
    assert (cp.batch_duration_ms, cp.checkpoint_interval_ms) == (BATCH_MS, BATCH_MS)
    assert (cp.master, cp.app_name, cp.written_dir) == (finished_job.master, finished_job.app_name, cp.directory)
    assert cp.streaming_conf["spark.streaming.stopGracefullyOnShutdown"] == "false"  # the kit's, at checkpoint time

    (stream,) = cp.direct_streams
    assert stream.topics == (topic,)
    assert stream.next_offsets == {topic: finished_job.end_offsets}
    # Every batch the job generated, with the ranges its foreachRDD saw; per partition they are contiguous
    # from 0 to the end offset, 2 records at most per batch.
    # (the job may have run a batch or two after its last checkpoint was written)
    seen = {t: ranges for t, ranges in finished_job.module.SEEN.items() if t <= max(stream.batches)}
    assert set(seen) <= set(stream.batches)
    assert {t: stream.batches[t] for t in seen} == seen
    for partition, end in finished_job.end_offsets.items():
        spans = [
            (f, u) for t in sorted(stream.batches) for tp, p, f, u in stream.batches[t] if (tp, p) == (topic, partition)
        ]
        assert spans[0][0] == 0 and spans[-1][1] == end
        assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:]))
        assert max(u - f for f, u in spans) == 2
    assert sum(stream.records(t) for t in stream.batches) == sum(finished_job.module.COUNTS.values()) == 17
    with_records = [t for t in sorted(stream.batches) if stream.records(t)]
    assert [stream.records(t) for t in with_records] == [4, 4, 4, 3, 2]

    # Stopped 3 empty batches after the last records: nothing pending holds records, so processing is complete
    # at the end offsets.
    assert all(t in stream.batches and stream.records(t) == 0 for t in cp.pending_batch_ms)
    assert last_completed_position(cp) == (
        CompletedPosition(stream.uid, {topic: finished_job.end_offsets}, pending_with_records=(), pending_unknown=()),
    )

    direct = ["PythonTransformedDStream", "MappedDStream", "FileInputDStream"]
    assert sorted(node.kinds() for node in cp.graph) == sorted([
        ["ForEachDStream", *direct],
        ["ForEachDStream", "WindowedDStream", "PythonTransformedDStream", *direct],
    ])
    records_output = next(node for node in cp.graph if len(node.kinds()) == 4)
    kafka_node = records_output.parents[0]
    assert kafka_node.label == f"direct Kafka stream [{topic}] {stream.uid[:8]}"
    assert kafka_node.parents[0].parents[0].label == f"tick of direct Kafka stream {stream.uid[:8]}"
    windowed = next(node for node in cp.graph if len(node.kinds()) == 6).parents[0]
    assert (windowed.kind, windowed.window_ms, windowed.slide_ms) == ("WindowedDStream", 1000, BATCH_MS)
    assert windowed.parents[0].parents[0] is kafka_node  # one node, shared by both outputs
    assert kafka_node.remember_ms == 31_000  # ssc.remember(30) + the window downstream of it

    text = cp.describe()
    assert re.search(r"^  batch interval +500 ms$", text, re.M)
    used_line = rf"^  {re.escape(cp.used_file)} +[\d.]+ KiB  checkpoint time {cp.checkpoint_time_ms}  <- used$"
    assert re.search(used_line, text, re.M)
    offsets = " ".join(f"{p}:{o}" for p, o in finished_job.end_offsets.items())
    assert f"completed up to  {topic} {offsets}  (no pending batch holds records)" in text
    assert "(shown above)" in text
    assert len(text.splitlines()) <= 60

    as_json = cp.to_json()
    assert json.loads(json.dumps(as_json)) == as_json
    end_json = {topic: {str(p): o for p, o in finished_job.end_offsets.items()}}
    assert as_json["direct_streams"][0]["next_offsets"] == end_json
    assert as_json["completed_positions"][0]["ambiguous"] is False
    assert [f["used"] for f in as_json["files"]] == [True] + [False] * (len(names) - 1)


@pytest.mark.spark
def test_inspect_accepts_file_uris(finished_job: FinishedJob, inspected: LegacyCheckpoint) -> None:
    again = inspect_legacy_checkpoint(f"file://{finished_job.checkpoint}")
    assert (again.directory, again.used_file, again.checkpoint_time_ms) == (
        inspected.directory, inspected.used_file, inspected.checkpoint_time_ms,
    )
    assert again.direct_streams == inspected.direct_streams


@pytest.mark.spark
def test_a_corrupt_newest_file_falls_back_to_the_previous_one(
    finished_job: FinishedJob, inspected: LegacyCheckpoint, tmp_path: Path
) -> None:
    copy = tmp_path / "checkpoint"
    shutil.copytree(finished_job.checkpoint, copy)
    newest = copy / inspected.used_file
    corrupt = copy / f"checkpoint-{int(inspected.used_file.split('-')[1]) + BATCH_MS}"
    corrupt.write_bytes(newest.read_bytes()[:300])  # a write cut short

    cp = inspect_legacy_checkpoint(copy)
    assert cp.files[0].name == corrupt.name
    assert cp.files[0].checkpoint_time_ms is None and cp.files[0].size_bytes == 300
    assert cp.files[0].error.startswith("java.io.EOFException")
    assert cp.used_file == inspected.used_file and cp.checkpoint_time_ms == inspected.checkpoint_time_ms
    assert cp.direct_streams == inspected.direct_streams
    text = cp.describe()
    assert f"{cp.used_file} (newer files are unreadable; Spark would restore this one)" in text
    assert re.search(rf"^  {corrupt.name} +300 B  UNREADABLE: java\.io\.EOFException", text, re.M)


@pytest.mark.spark
def test_a_job_module_that_is_not_importable_is_named(
    finished_job: FinishedJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = finished_job.module.__name__
    monkeypatch.delitem(sys.modules, name)
    with pytest.raises(CheckpointCodeNotImportable) as err:
        inspect_legacy_checkpoint(finished_job.checkpoint)
    e = err.value
    assert e.missing_modules == [name]
    assert e.python_error == f"ModuleNotFoundError: No module named '{name}'"
    assert sorted(e.errors) == sorted(p.name for p in finished_job.checkpoint.glob("checkpoint-*"))
    assert f"Python functions of module '{name}', which is not importable" in str(e)
    assert "PYTHONPATH" in str(e)
    assert isinstance(e, CheckpointUnreadable)


@pytest.mark.spark
def test_files_that_are_all_garbage_are_each_named(spark, tmp_path: Path) -> None:
    rng = random.Random(7)
    (tmp_path / "checkpoint-1000").write_bytes(bytes(rng.randrange(256) for _ in range(500)))
    (tmp_path / "checkpoint-2000").write_bytes(b"not a checkpoint")
    (tmp_path / "checkpoint-2000.bk").write_bytes(b"")
    with pytest.raises(CheckpointUnreadable) as err:
        inspect_legacy_checkpoint(tmp_path)
    e = err.value
    assert type(e) is CheckpointUnreadable
    assert e.directory == f"file:{tmp_path}"
    assert list(e.errors) == ["checkpoint-2000", "checkpoint-2000.bk", "checkpoint-1000"]  # Spark's reading order
    assert e.errors["checkpoint-2000.bk"] == "java.io.EOFException"
    message = str(e)
    assert message.startswith(f"none of the 3 checkpoint files in file:{tmp_path} can be read (")
    assert all(name in message for name in e.errors)
    assert "restore the directory from a backup" in message and "offset store" in message


@pytest.mark.spark
def test_paths_that_are_no_checkpoint(spark, tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFound) as missing:
        inspect_legacy_checkpoint(tmp_path / "nope")
    assert missing.value.path == str(tmp_path / "nope") and missing.value.detail is None
    assert isinstance(missing.value, FileNotFoundError)
    assert "does not exist" in str(missing.value)

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotALegacyCheckpoint) as err:
        inspect_legacy_checkpoint(empty)
    assert (err.value.directory, err.value.found) == (f"file:{empty}", [])
    assert "an empty directory" in err.value.looks_like

    structured = tmp_path / "structured"
    for sub in ("offsets", "commits", "sources"):
        (structured / sub).mkdir(parents=True)
    (structured / "metadata").write_text("{}")
    with pytest.raises(NotALegacyCheckpoint) as err:
        inspect_legacy_checkpoint(f"file:{structured}")
    assert err.value.found == ["commits/", "metadata", "offsets/", "sources/"]
    assert "Structured Streaming checkpoint" in str(err.value)
    assert "checkpoint-<batch time in ms>" in str(err.value)

    (empty / "checkpoint-1000").write_bytes(b"")
    with pytest.raises(NotALegacyCheckpoint) as err:
        inspect_legacy_checkpoint(empty / "checkpoint-1000")
    assert err.value.found == ["checkpoint-1000"] and "pass the directory" in str(err.value)


# -- pure: positions and rendering ---------------------------------------------------------------------------------


KAFKA_LABEL = "direct Kafka stream [events] 01234567"


def _checkpoint(pending: tuple[int, ...], batches: dict[int, tuple[Any, ...]], **changes: Any) -> LegacyCheckpoint:
    stream = DirectStreamCheckpoint(
        uid="0123456789abcdef0123456789abcdef",
        topics=("events",),
        next_offsets={"events": {0: 12, 1: 9}},
        batches=batches,
    )
    fields: dict[str, Any] = dict(
        directory="file:/data/cp",
        files=(
            CheckpointFile("checkpoint-1700000004000", 0, None, "java.io.EOFException"),
            CheckpointFile("checkpoint-1700000004000.bk", 2048, 1700000003000),
            CheckpointFile("checkpoint-1700000003000", 512, 1700000002000),
        ),
        used_file="checkpoint-1700000004000.bk",
        checkpoint_time_ms=1700000003000,
        batch_duration_ms=1000,
        checkpoint_interval_ms=10000,
        master="local[2]",
        app_name="clicks",
        written_dir="hdfs://nn/cp",
        pending_batch_ms=pending,
        graph=(
            DStreamNode(
                3, "ForEachDStream", 1000, 1000,
                parents=(DStreamNode(2, "PythonTransformedDStream", 1000, 2000, label=KAFKA_LABEL),),
            ),
        ),
        direct_streams=(stream,),
        streaming_conf={"spark.streaming.kafka.maxRatePerPartition": "100"},
    )
    fields.update(changes)
    return LegacyCheckpoint(**fields)


BATCHES = {
    1700000001000: (("events", 0, 0, 5), ("events", 1, 0, 4)),
    1700000002000: (("events", 0, 5, 10), ("events", 1, 4, 4)),
    1700000003000: (("events", 0, 10, 12), ("events", 1, 4, 9)),
    1700000004000: (("events", 0, 12, 12), ("events", 1, 9, 9)),
}


def test_pending_batches_without_records_leave_the_position_at_the_next_offsets() -> None:
    (position,) = last_completed_position(_checkpoint((1700000004000,), BATCHES))
    assert position == CompletedPosition("0123456789abcdef0123456789abcdef", {"events": {0: 12, 1: 9}})
    assert not position.ambiguous
    (position,) = last_completed_position(_checkpoint((), BATCHES))
    assert position.offsets == {"events": {0: 12, 1: 9}} and not position.ambiguous


def test_a_pending_batch_with_records_is_where_completion_stops_and_is_flagged() -> None:
    cp = _checkpoint((1700000002000, 1700000003000, 1700000004000), BATCHES)
    (position,) = last_completed_position(cp)
    assert position.offsets == {"events": {0: 5, 1: 4}}  # the from-offsets of batch 2000
    assert position.pending_with_records == (1700000002000, 1700000003000)
    assert position.pending_unknown == ()
    assert position.ambiguous
    assert position.to_json() == {
        "uid": "0123456789abcdef0123456789abcdef",
        "offsets": {"events": {"0": 5, "1": 4}},
        "pending_with_records": [1700000002000, 1700000003000],
        "pending_unknown": [],
        "ambiguous": True,
    }


def test_a_pending_batch_the_stream_does_not_know_is_flagged() -> None:
    (position,) = last_completed_position(_checkpoint((1700000000000,), BATCHES))
    assert position.offsets == {"events": {0: 12, 1: 9}}
    assert (position.pending_with_records, position.pending_unknown, position.ambiguous) == ((), (1700000000000,), True)


def test_describe_renders_one_aligned_screen() -> None:
    cp = _checkpoint((1700000003000, 1700000004000), BATCHES)
    assert cp.describe() == """\
Legacy (DStream) checkpoint file:/data/cp
  read from         checkpoint-1700000004000.bk (newer files are unreadable; Spark would restore this one)
  checkpoint time   1700000003000  2023-11-14 22:13:23.000 UTC
  batch interval    1000 ms
  checkpoint every  10000 ms
  master            local[2]
  app name          clicks
  written to        hdfs://nn/cp
  settings          kafka.maxRatePerPartition=100
Files, newest first (3; Spark keeps the newest 10)
  checkpoint-1700000004000         0 B  UNREADABLE: java.io.EOFException
  checkpoint-1700000004000.bk  2.0 KiB  checkpoint time 1700000003000  <- used
  checkpoint-1700000003000       512 B  checkpoint time 1700000002000
DStream graph (1 output stream)
  ForEachDStream #3               slide 1000 ms  remember 1000 ms
  └─ PythonTransformedDStream #2  slide 1000 ms  remember 2000 ms  direct Kafka stream [events] 01234567
Direct Kafka streams (1)
  0123456789abcdef0123456789abcdef  topics events
    next offsets     events 0:12 1:9
    remembered       4 batches 1700000001000..1700000004000, 21 records
    completed up to  events 0:10 1:4  (AMBIGUOUS: 1 pending batch from 1700000003000 holds records, maybe partly output)
Pending batches (2), run again by a restored job
  1700000003000  22:13:23.000  events-0 [10, 12)  events-1 [4, 9)  (7 records)
  1700000004000  22:13:24.000  no records
"""
    as_json = cp.to_json()
    assert json.loads(json.dumps(as_json)) == as_json
    assert as_json["direct_streams"][0]["batches"]["1700000003000"] == [["events", 0, 10, 12], ["events", 1, 4, 9]]
    assert as_json["graph"][0]["parents"][0]["kind"] == "PythonTransformedDStream"


def test_describe_caps_the_pending_batches() -> None:
    many = {1700000000000 + i * 1000: (("events", 0, 12, 12), ("events", 1, 9, 9)) for i in range(30)}
    text = _checkpoint(tuple(many), many).describe()
    assert text.count("no records") == 12
    assert "  ... and 18 more, up to 1700000029000 (to_json() has them all)\n" in text
