"""Checkpoint recovery of the legacy direct Kafka stream: timing, restarts, a real driver crash, code changes.

Functions that go into a checkpoint are defined at module level here: cloudpickle stores them by reference,
so a context restored in this process calls these very functions and their module-level collectors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from kit.errors import ConfigError
from kit.kafka import Kafka, TopicPartition
from legacy import _direct
from legacy._checkpoint import FINGERPRINT_FILE, _Directory
from legacy._direct import KafkaParams
from legacy.errors import CheckpointCodeChanged, StateFormatMismatch
from legacy.rate import RateSettings
from legacy.kafka import KafkaUtils, OffsetRange, TopicAndPartition, get_or_create, utf8_decoder

pytestmark = pytest.mark.filterwarnings(
    r"ignore:DStream is deprecated as of Spark 3\.4\.0\. Migrate to Structured Streaming\.:FutureWarning"
)

REPO = Path(__file__).resolve().parents[1]


def produce(kafka: Kafka, topic: str, counts: dict[int, tuple[int, int]]) -> None:
    """Values ``p<partition>-<i>`` for i in [start, stop) per partition."""
    producer = kafka.producer(linger_ms=5)
    for partition, (start, stop) in counts.items():
        for i in range(start, stop):
            producer.send(topic, value=f"p{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def wait_for(condition, what, timeout_s: float, ssc=None, proc=None, log: Path | None = None) -> None:
    """Wait until ``condition()``; fail with the last observed ``what()`` (stream errors and dead drivers too)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            raise AssertionError(f"timed out after {timeout_s:g} s; last observed: {what()!r}\n{tail}")
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-5000:] if log is not None and log.exists() else ""
            raise AssertionError(f"driver exited with {proc.returncode}; last observed: {what()!r}\n{tail}")
        if ssc is not None:
            if ssc.awaitTerminationOrTimeout(0.05):
                raise AssertionError(f"the streaming context stopped; last observed: {what()!r}")
        else:
            threading.Event().wait(0.05)


def checkpoint_times(directory: Path) -> set[int]:
    return {int(p.name.split("-")[1]) for p in directory.glob("checkpoint-*") if p.name.split("-")[1].isdigit()}


# -- the state object alone: the DirectKafkaInputDStreamCheckpointData equivalent --------------------------------


def test_state_answers_generated_times_identically_across_pickling_and_continues_without_gap(
    spark, kafka: Kafka, topic_factory, bootstrap_servers: str
) -> None:
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: (0, 30), 1: (0, 10)})
    spec = _direct._StreamSpec(
        uid=uuid.uuid4().hex,
        topics=(topic,),
        read=_direct._ReadSpec(KafkaParams(bootstrap_servers), utf8_decoder, utf8_decoder, None),
        batch_ms=1000,
        rate=RateSettings(max_rate_per_partition=10),
        input_id=-1,
        tick_id=-1,
    )
    state = _direct.DirectStreamState(spec, {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0})

    def at(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000)

    def ranges(rdd) -> list[tuple[int, int, int]]:
        return [(r.partition, r.fromOffset, r.untilOffset) for r in rdd.offsetRanges()]

    first = state.compute(at(1000), None)
    assert ranges(first) == [(0, 0, 10), (1, 0, 10)]
    assert state.compute(at(1000), None) is first
    assert ranges(state.compute(at(2000), None)) == [(0, 10, 20), (1, 10, 10)]

    # What a checkpoint written now holds, restored in a new driver:
    restored = pickle.loads(pickle.dumps(state))
    assert _direct.take_restored() == [restored]
    assert ranges(restored.compute(at(2000), None)) == [(0, 10, 20), (1, 10, 10)]
    assert ranges(restored.compute(at(1000), None)) == [(0, 0, 10), (1, 0, 10)]
    third = restored.compute(at(3000), None)
    assert ranges(third) == [(0, 20, 30), (1, 10, 10)]
    assert third.collect() == [(None, f"p0-{i}") for i in range(20, 30)]

    # Completing 2000 forgets the completed batches a remember duration (here one batch) older.
    for done in (1000, 2000):
        restored.on_batch_completed(done, processing_end_ms=done + 900, processing_delay_ms=100,
                                    scheduling_delay_ms=0, records=10)
    assert sorted(restored.snapshot().batches) == [2000, 3000]
    # A forgotten batch was completed: asked again (a restart), it comes back empty at the current offsets.
    again = pickle.loads(pickle.dumps(restored))
    _direct.take_restored()
    assert ranges(again.compute(at(1000), None)) == [(0, 30, 30), (1, 10, 10)]
    assert again.snapshot().current == {TopicAndPartition(topic, 0): 30, TopicAndPartition(topic, 1): 10}
    # A restart regenerates pending batch 3000; its output fails, so Spark keeps it pending until the next
    # restart: it is never forgotten. 2000, restored but not regenerated, was finished before: forgotten.
    assert ranges(again.compute(at(3000), None)) == [(0, 20, 30), (1, 10, 10)]
    again.on_batch_completed(3000, processing_end_ms=3900, processing_delay_ms=100, scheduling_delay_ms=0,
                             records=10, succeeded=False)
    for done in (4000, 5000):
        assert ranges(again.compute(at(done), None)) == [(0, 30, 30), (1, 10, 10)]
        again.on_batch_completed(done, processing_end_ms=done + 900, processing_delay_ms=100,
                                 scheduling_delay_ms=0, records=0)
    assert sorted(again.snapshot().batches) == [3000, 5000]
    assert ranges(again.compute(at(3000), None)) == [(0, 20, 30), (1, 10, 10)]

    broken = restored.__getstate__()
    broken["format"] = 0
    with pytest.raises(StateFormatMismatch) as err:
        _direct.DirectStreamState.__new__(_direct.DirectStreamState).__setstate__(broken)
    assert (err.value.expected, err.value.actual) == (_direct.STATE_FORMAT, 0)


# -- JobGenerator timing: a checkpoint holds its batch's ranges ---------------------------------------------------

_GATE = threading.Event()
_STALLED: list[int] = []


def _stall_from_third_batch(time_, rdd) -> None:
    if any(r.fromOffset >= 10 and r.count() for r in rdd.offsetRanges()):
        _STALLED.append(round(time_.timestamp() * 1000))
        _GATE.wait(60)
    rdd.count()


def test_every_checkpoint_holds_the_ranges_of_its_batch_and_of_all_pending_batches(
    spark, kafka: Kafka, topic_factory, bootstrap_servers: str, tmp_path: Path
) -> None:
    """JobGenerator.generateJobs(t) computes the stream (our state records t's ranges) and only then posts
    DoCheckpoint(t); the Checkpoint lists the pending batches and pickles the graph with the state."""
    from pyspark.streaming import StreamingContext

    from kit.spark import streaming_context

    sc = spark.sparkContext
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: (0, 40), 1: (0, 40)})
    checkpoint = tmp_path / "cp"
    jconf = sc._jsc.sc().conf()
    jconf.set("spark.streaming.kafka.maxRatePerPartition", "10")
    try:
        ssc = streaming_context(0.5)
        ssc.checkpoint(str(checkpoint))
        stream = KafkaUtils.createDirectStream(
            ssc, [topic], {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest"}
        )
    finally:
        jconf.remove("spark.streaming.kafka.maxRatePerPartition")
    _GATE.clear()
    _STALLED.clear()
    stream.foreachRDD(_stall_from_third_batch)
    ssc.start()
    try:
        def generated_after_stall() -> list[int]:
            return [t for t in stream.state_snapshot().batches if _STALLED and t > _STALLED[0]]

        wait_for(
            lambda: len(generated_after_stall()) >= 3 and max(generated_after_stall()) in checkpoint_times(checkpoint),
            lambda: (_STALLED, stream.state_snapshot().batches.keys(), sorted(checkpoint_times(checkpoint))),
            timeout_s=30, ssc=ssc,
        )
        live = stream.state_snapshot().batches
        StreamingContext._ensure_initialized()
        jvm = sc._jvm
        read = 0
        most_pending = 0
        _direct.take_restored()
        for path in sorted(checkpoint.glob("checkpoint-*")):
            try:
                source = jvm.java.io.FileInputStream(str(path))
            except Exception:  # deleted by Spark's writer meanwhile (it keeps the last 10)
                continue
            try:
                saved = jvm.org.apache.spark.streaming.Checkpoint.deserialize(source, jconf)
            finally:
                source.close()
            (state,) = _direct.take_restored()
            snapshot = state.snapshot()
            checkpoint_ms = saved.checkpointTime().milliseconds()
            pending = sorted(t.milliseconds() for t in saved.pendingTimes())
            assert checkpoint_ms in snapshot.batches, (path.name, sorted(snapshot.batches))
            assert set(pending) <= set(snapshot.batches), (path.name, pending, sorted(snapshot.batches))
            latest = snapshot.batches[max(snapshot.batches)]
            assert snapshot.current == {TopicAndPartition(r.topic, r.partition): r.untilOffset for r in latest}
            for t, ranges in snapshot.batches.items():
                if t in live:
                    assert ranges == live[t]
            most_pending = max(most_pending, len(pending))
            read += 1
        assert read >= 3
        assert most_pending >= 3  # the stalled batch and those queued behind it
    finally:
        _GATE.set()
        ssc.stop(stopSparkContext=False, stopGraceFully=False)


# -- Spark 2.4: test_kafka_direct_stream_transform_with_checkpoint -----------------------------------------------

_RANGES_SEEN: dict[int, list[OffsetRange]] = {}
_COUNTS: dict[int, int] = {}
_SETUP_CALLS: list[int] = []


def _transform_with_offset_ranges(time_, rdd):
    _RANGES_SEEN[round(time_.timestamp() * 1000)] = rdd.offsetRanges()
    return rdd


def _keep_count(time_, rdd) -> None:
    _COUNTS[round(time_.timestamp() * 1000)] = rdd.collect()[0]


def test_kafka_direct_stream_transform_with_checkpoint(
    spark, kafka: Kafka, topic_factory, bootstrap_servers: str, tmp_path: Path
) -> None:
    from pyspark.streaming import StreamingContext

    from kit.spark import streaming_context

    topic = topic_factory()
    produce(kafka, topic, {0: (0, 6)})
    checkpoint = str(tmp_path / "checkpoint-test")
    params = {"metadata.broker.list": bootstrap_servers, "auto.offset.reset": "smallest"}
    _RANGES_SEEN.clear()
    _COUNTS.clear()
    _SETUP_CALLS.clear()

    def setup():
        _SETUP_CALLS.append(1)
        ssc = streaming_context(0.5)
        ssc.checkpoint(checkpoint)
        stream = KafkaUtils.createDirectStream(ssc, [topic], params)
        stream.transform(_transform_with_offset_ranges).count().foreachRDD(_keep_count)
        return ssc

    ssc1 = StreamingContext.getOrCreate(checkpoint, setup)
    ssc1.start()
    try:
        wait_for(lambda: len(_RANGES_SEEN) >= 1, lambda: _RANGES_SEEN, 30, ssc=ssc1)
        first = min(_RANGES_SEEN)
        assert _RANGES_SEEN[first] == [OffsetRange(topic, 0, 0, 6)]
        # A checkpoint written after the first batch completed (not only the one written when it was generated).
        wait_for(lambda: any(t > first for t in checkpoint_times(Path(checkpoint))), lambda: checkpoint_times(Path(checkpoint)), 30, ssc=ssc1)
    finally:
        ssc1.stop(stopSparkContext=False, stopGraceFully=True)

    produce(kafka, topic, {0: (6, 10)})
    ssc2 = StreamingContext.getOrCreate(checkpoint, setup)
    assert _SETUP_CALLS == [1]  # restored, not set up again
    ssc2.start()
    try:
        wait_for(lambda: any(r.untilOffset == 10 for rs in _RANGES_SEEN.values() for r in rs), lambda: _RANGES_SEEN, 30, ssc=ssc2)
        last = max(t for t, rs in _RANGES_SEEN.items() if rs[0].untilOffset == 10)
        wait_for(lambda: last in _COUNTS, lambda: _COUNTS, 30, ssc=ssc2)
    finally:
        ssc2.stop(stopSparkContext=False, stopGraceFully=True)

    # Per batch time, ranges and counts agree; together the batches cover [0, 10) once.
    nonempty = sorted((rs[0].fromOffset, rs[0].untilOffset) for rs in _RANGES_SEEN.values() if rs[0].count())
    assert nonempty == [(0, 6), (6, 10)]
    assert all(_COUNTS[t] == rs[0].count() for t, rs in _RANGES_SEEN.items() if t in _COUNTS)
    assert sum(_COUNTS.values()) == 10


# -- code changes: get_or_create refuses an old checkpoint ------------------------------------------------------

JOB_SOURCE = '''
"""A legacy job used by test_legacy_recovery (version {version})."""
from kit.spark import streaming_context
from legacy.kafka import KafkaUtils

CREATED = []


def count_batch(rdd):
    rdd.count()


def make_create(checkpoint, topic, bootstrap_servers):
    def create():
        CREATED.append(1)
        ssc = streaming_context(0.5)
        stream = KafkaUtils.createDirectStream(ssc, [topic], {{"metadata.broker.list": bootstrap_servers}})
        stream.foreachRDD(count_batch)
        return ssc
    return create
'''


def load_job(path: Path, version: int):
    path.write_text(JOB_SOURCE.format(version=version))
    name = f"legacy_job_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # functions pickled by reference resolve while the test runs
    spec.loader.exec_module(module)
    return module


def test_get_or_create_refuses_a_checkpoint_of_other_code(
    spark, topic_factory, bootstrap_servers: str, tmp_path: Path
) -> None:
    topic = topic_factory()
    checkpoint = tmp_path / "cp"
    job_file = tmp_path / "job.py"
    job = load_job(job_file, 1)
    create = job.make_create(str(checkpoint), topic, bootstrap_servers)

    ssc = get_or_create(str(checkpoint), create)
    assert job.CREATED == [1]
    stored = json.loads((checkpoint / FINGERPRINT_FILE).read_text())
    assert stored["fingerprint"] == hashlib.sha256(job_file.read_bytes()).hexdigest()
    assert stored["source"] == str(job_file)
    ssc.start()
    try:
        wait_for(lambda: len(checkpoint_times(checkpoint)) >= 1, lambda: sorted(checkpoint.iterdir()), 30, ssc=ssc)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)

    # Same code: restored, create() not called.
    restored = get_or_create(str(checkpoint), create)
    assert job.CREATED == [1]
    restored.stop(stopSparkContext=False)

    # Changed code (one comment more): refused before Spark reads the checkpoint.
    changed = load_job(job_file, 2)
    with pytest.raises(CheckpointCodeChanged) as err:
        get_or_create(str(checkpoint), changed.make_create(str(checkpoint), topic, bootstrap_servers))
    e = err.value
    assert (e.checkpoint_dir, e.expected, e.source) == (str(checkpoint), stored["fingerprint"], str(job_file))
    assert e.actual == hashlib.sha256(job_file.read_bytes()).hexdigest() != e.expected
    assert e.checkpoint_files == sorted(p.name for p in checkpoint.glob("checkpoint-*"))
    assert f"{checkpoint}/checkpoint-*" in str(e) and "fromOffsets" in str(e) and "delete the whole directory" in str(e)
    assert changed.CREATED == []

    # A checkpoint without fingerprint cannot be vouched for.
    (checkpoint / FINGERPRINT_FILE).unlink()
    with pytest.raises(CheckpointCodeChanged) as err:
        get_or_create(str(checkpoint), create)
    assert err.value.expected is None and "no code fingerprint" in str(err.value)

    # The remedy: delete the checkpoint-* metadata files; the job starts again (from fromOffsets or reset).
    for path in checkpoint.glob("checkpoint-*"):
        path.unlink()
    fresh = get_or_create(str(checkpoint), changed.make_create(str(checkpoint), topic, bootstrap_servers))
    assert changed.CREATED == [1]
    fresh.stop(stopSparkContext=False)


def test_get_or_create_with_an_explicit_fingerprint(spark, topic_factory, bootstrap_servers: str, tmp_path: Path) -> None:
    checkpoint = tmp_path / "cp"
    (checkpoint).mkdir()
    (checkpoint / "checkpoint-1000").write_bytes(b"")
    (checkpoint / FINGERPRINT_FILE).write_text(json.dumps({"fingerprint": "release-1.4.0"}))
    with pytest.raises(CheckpointCodeChanged) as err:
        get_or_create(str(checkpoint), lambda: None, fingerprint="release-1.5.0")
    assert (err.value.expected, err.value.actual, err.value.source) == ("release-1.4.0", "release-1.5.0", "given")
    assert err.value.checkpoint_files == ["checkpoint-1000"]
    # A URI goes through Spark's Hadoop file system (hdfs://, s3a://... on a cluster), file: URIs included.
    with pytest.raises(CheckpointCodeChanged) as err:
        get_or_create(f"file://{checkpoint}", lambda: None, fingerprint="release-1.5.0")
    assert err.value.expected == "release-1.4.0" and err.value.checkpoint_files == ["checkpoint-1000"]
    uri = _Directory(f"file://{tmp_path / 'cp2'}")
    uri.write(FINGERPRINT_FILE, json.dumps({"fingerprint": "f"}))
    assert json.loads((tmp_path / "cp2" / FINGERPRINT_FILE).read_text()) == {"fingerprint": "f"}
    assert uri.read(FINGERPRINT_FILE) == '{"fingerprint": "f"}' and uri.read("missing") is None


# -- a real driver crash -----------------------------------------------------------------------------------------

DRIVER = textwrap.dedent('''
    """Recovery-test driver: a Spark 2.4 style direct-stream job, one idempotent output file per batch."""
    import json
    import os
    import threading
    from pathlib import Path

    from kit.spark import spark_context, streaming_context
    from legacy.kafka import KafkaUtils, get_or_create

    BOOTSTRAP = os.environ["JOB_BOOTSTRAP"]
    TOPIC = os.environ["JOB_TOPIC"]
    CHECKPOINT = os.environ["JOB_CHECKPOINT"]
    OUT = Path(os.environ["JOB_OUT"])
    STOP = OUT / "stop"


    def write_atomically(path, payload):
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, path)


    def ranges_of(rdd):
        return [[r.partition, r.fromOffset, r.untilOffset] for r in rdd.offsetRanges()]


    def log_generated(time, rdd):
        # A transform runs when Spark generates the batch, on the driver.
        with open(OUT / "generated.jsonl", "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "time": round(time.timestamp() * 1000), "ranges": ranges_of(rdd)}) + "\\n")
        return rdd


    def save(time, rdd):
        ms = round(time.timestamp() * 1000)
        ranges = ranges_of(rdd)
        stall_from = os.environ.get("JOB_STALL_FROM")
        if stall_from is not None and any(start >= int(stall_from) and until > start for _, start, until in ranges):
            # Leave this batch and the ones queued behind it pending until the test kills the driver.
            (OUT / f"stalled-{ms}").write_text(str(os.getpid()))
            threading.Event().wait(120)
        write_atomically(OUT / f"batch-{ms}.json", {"time": ms, "ranges": ranges, "records": rdd.collect()})


    def create():
        ssc = streaming_context(1.0)
        stream = KafkaUtils.createDirectStream(
            ssc, [TOPIC], {"metadata.broker.list": BOOTSTRAP, "auto.offset.reset": "smallest"},
            messageHandler=lambda m: [m.partition, m.offset, m.message],
        )
        stream.foreachRDD(save)
        stream.transform(log_generated).foreachRDD(lambda rdd: None)
        return ssc


    spark_context("legacy-recovery-driver", conf={"spark.streaming.kafka.maxRatePerPartition": "50"})
    ssc = get_or_create(CHECKPOINT, create)
    ssc.start()
    while not STOP.exists():
        if ssc.awaitTerminationOrTimeout(0.2):
            break
    ssc.stop(stopSparkContext=True, stopGraceFully=False)
''')


def test_driver_crash_recovers_every_offset_exactly_once(
    spark, kafka: Kafka, topic_factory, bootstrap_servers: str, tmp_path: Path
) -> None:
    from pyspark.streaming import StreamingContext

    per_partition = 250
    topic = topic_factory(partitions=2)
    produce(kafka, topic, {0: (0, per_partition), 1: (0, per_partition)})
    out = tmp_path / "out"
    out.mkdir()
    checkpoint = tmp_path / "checkpoint"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        JOB_BOOTSTRAP=bootstrap_servers, JOB_TOPIC=topic, JOB_CHECKPOINT=str(checkpoint), JOB_OUT=str(out),
    )

    def generated() -> list[dict]:
        path = out / "generated.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]

    def start(log_name: str, **extra: str) -> subprocess.Popen:
        log = open(tmp_path / log_name, "w")
        return subprocess.Popen(
            [sys.executable, str(driver)], env={**env, **extra}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Python driver, JVM and Python workers die together
        )

    first = start("run1.log", JOB_STALL_FROM="100")
    try:
        def run1_state():
            stalled = sorted(int(p.name.split("-")[1]) for p in out.glob("stalled-*"))
            times = [g["time"] for g in generated() if g["pid"] == first.pid]
            return stalled, times, sorted(checkpoint_times(checkpoint))

        def ready_to_kill() -> bool:
            stalled, times, written = run1_state()
            after = [t for t in times if stalled and t > stalled[0]]
            return len(after) >= 2 and max(after) in written

        wait_for(ready_to_kill, run1_state, 90, proc=first, log=tmp_path / "run1.log")
        os.killpg(first.pid, signal.SIGKILL)  # the driver dies mid-batch: no shutdown hook, no last checkpoint
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
    stalled_ms = run1_state()[0][0]
    run1 = {g["time"]: g["ranges"] for g in generated() if g["pid"] == first.pid}
    assert not (out / f"batch-{stalled_ms}.json").exists()

    # What the latest checkpoint says was pending when the driver died.
    StreamingContext._ensure_initialized()
    jvm = spark.sparkContext._jvm
    saved = jvm.org.apache.spark.streaming.CheckpointReader.read(str(checkpoint)).get()
    pending = sorted(t.milliseconds() for t in saved.pendingTimes())
    _direct.take_restored()
    assert stalled_ms in pending

    second = start("run2.log")
    try:
        def covered() -> Counter:
            seen: Counter = Counter()
            for path in out.glob("batch-*.json"):
                for partition, start_offset, until in json.loads(path.read_text())["ranges"]:
                    seen[partition] += until - start_offset
            return seen

        wait_for(
            lambda: covered() == Counter({0: per_partition, 1: per_partition}), covered, 90,
            proc=second, log=tmp_path / "run2.log",
        )
        (out / "stop").write_text("")
        second.wait(timeout=60)
        assert second.returncode == 0, (tmp_path / "run2.log").read_text()[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=30)

    run2 = {g["time"]: g["ranges"] for g in generated() if g["pid"] == second.pid}
    # Pending batches were generated again after the restart, with the same ranges.
    assert set(pending) <= set(run2)
    assert {t: run2[t] for t in pending} == {t: run1[t] for t in pending}
    assert all(run2[t] == run1[t] for t in set(run1) & set(run2))
    # The union of the outputs is the input, every offset exactly once (no gap, no overlap).
    records = [tuple(r) for path in out.glob("batch-*.json") for r in json.loads(path.read_text())["records"]]
    expected = [(p, i, f"p{p}-{i}") for p in (0, 1) for i in range(per_partition)]
    assert sorted(records) == expected
    batch_ranges = sorted(
        (partition, start_offset, until)
        for path in out.glob("batch-*.json") for partition, start_offset, until in json.loads(path.read_text())["ranges"]
        if until > start_offset
    )
    for partition in (0, 1):
        spans = [(s, u) for p, s, u in batch_ranges if p == partition]
        assert spans[0][0] == 0 and spans[-1][1] == per_partition
        assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:]))
    stalled_output = json.loads((out / f"batch-{stalled_ms}.json").read_text())
    assert stalled_output["ranges"] == run1[stalled_ms]
