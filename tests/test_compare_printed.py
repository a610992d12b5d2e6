"""``dmk compare-jobs`` on printed output, per-batch alignment and a job's own crash: on fakes, no JVM.

The stand-ins' recorders run here on stand-in objects shaped like PySpark's (a time, an RDD with
``collect``); the harness's readers run on the files they write.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

from compare.jobs import (
    BATCH,
    align_batches,
    batch_cuts,
    input_units,
    job_error,
    name_printed,
    printed_rows,
    read_printed,
)
from kit.errors import ConfigError
from kit.progress import ProgressRow


class _RDD:
    def __init__(self, elements: list) -> None:
        self.elements = elements

    def collect(self) -> list:
        return list(self.elements)

    def count(self) -> int:
        return len(self.elements)


def test_a_pprinted_stream_records_every_element_and_prints_as_spark_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import legacy.standin as standin

    monkeypatch.setattr(standin, "_PROGRESS", [tmp_path / "progress.jsonl"])
    take_and_print = standin._take_and_print("job.py:7", 3)
    elements = [("w%02d" % i, i) for i in range(12)]
    take_and_print(datetime(2026, 1, 1, 10, 0, 1), _RDD(elements))
    printed = capsys.readouterr().out.splitlines()
    # The console shows what Spark's pprint shows: the frame, the first num elements, "...".
    assert printed[:3] == ["-" * 43, "Time: 2026-01-01 10:00:01", "-" * 43]
    assert printed[3:] == ["('w00', 0)", "('w01', 1)", "('w02', 2)", "...", ""]
    rows = printed_rows([json.loads(line) for line in (tmp_path / "printed.jsonl").read_text().splitlines()])
    # All twelve are recorded, not only the three printed.
    assert [values for _, values, _ in rows] == [[w, n] for w, n in elements]
    assert {batch for batch, _, _ in rows} == {str(round(datetime(2026, 1, 1, 10, 0, 1).timestamp() * 1000))}


def test_lines_printed_in_a_foreachrdd_function_are_recorded_with_their_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import legacy.standin as standin

    monkeypatch.setattr(standin, "_PROGRESS", [tmp_path / "progress.jsonl"])

    def show(rdd):
        for record in rdd.collect():
            print(record)
        print("total", rdd.count())

    recorded = standin._recording_prints(show, "job.py:12")
    recorded(datetime(2026, 1, 1, 10, 0, 2), _RDD([("a", 2), ("b", 1)]))
    assert capsys.readouterr().out == "('a', 2)\n('b', 1)\ntotal 2\n"  # the console still shows them
    entries = [json.loads(line) for line in (tmp_path / "printed.jsonl").read_text().splitlines()]
    assert [e["line"] for e in entries] == ["('a', 2)", "('b', 1)", "total 2"]
    assert {e["stream"] for e in entries} == {"job.py:12"}
    assert [v for _, v, _ in printed_rows(entries)] == [["a", 2], ["b", 1], ["total 2"]]


def test_printed_lines_become_rows_and_frames_are_skipped() -> None:
    lines = ["-" * 43, "Batch: 3", "-" * 43, "+----+-----+", "|word|count|", "+----+-----+", "|   a|    2|",
             "|   b| null|", "+----+-----+", "", "('x', 1)", "Time: 2026-01-01 10:00:01", "...", "7", "plain text"]
    entries = [{"writer": "w1", "query_id": "q1"}] + [
        {"stream": "job.py:5", "kind": "line", "writer": "w1", "batch_id": 3, "line": line} for line in lines]
    rows = printed_rows(entries)
    assert rows == [("q1/3", ["a", 2], ["word", "count"]), ("q1/3", ["b", None], ["word", "count"]),
                    ("q1/3", ["x", 1], None), ("q1/3", [7], None), ("q1/3", ["plain text"], None)]


def test_a_printed_batch_time_is_a_header_alone_and_masked_in_a_line() -> None:
    """Two runs happen at different times: the batch time a job prints (sql_network_wordcount's header,
    recoverable_network_wordcount's "Counts at time ...") must not make their lines differ."""
    lines = ["========= 2026-01-01 10:00:01 =========", "Counts at time 2026-01-01 10:00:02.500000 [('a', 1)]",
             "2026-01-01 10:00:03 and more", "2026-01-01"]
    entries = [{"stream": "job.py:5", "kind": "line", "batch_ms": 1, "line": line} for line in lines]
    assert [v for _, v, _ in printed_rows(entries)] == [
        ["Counts at time <time> [('a', 1)]"], ["<time> and more"], ["2026-01-01"]]


def _printed(path: Path, entries: list[dict]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "printed.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_printed_streams_are_chosen_by_name_and_named_by_the_side_that_has_names(tmp_path: Path) -> None:
    _printed(tmp_path / "legacy", [
        {"stream": "job.py:20", "kind": "row", "batch_ms": 1000, "values": ["a", 2], "names": None},
        {"stream": "job.py:31", "kind": "row", "batch_ms": 1000, "values": [5], "names": None}])
    _printed(tmp_path / "modern", [
        {"stream": "new.py:9", "kind": "row", "writer": "w", "batch_id": 0, "values": ["a", 2],
         "names": ["word", "count"]},
        {"writer": "w", "query_id": "q"}])
    with pytest.raises(ConfigError, match=r"printed 2 streams, job.py:20, job.py:31: name one with --output printed"):
        read_printed(tmp_path / "legacy", "legacy")
    legacy = read_printed(tmp_path / "legacy", "legacy", "20")
    modern = read_printed(tmp_path / "modern", "modern", "20")  # one stream: NAME chooses among several only
    named = name_printed({"legacy": legacy, "modern": modern})
    assert list(name_printed({"legacy": legacy, "modern": modern}, ("_1",))["modern"].columns) == [BATCH, "_1", "_2"]
    assert named["legacy"].to_dict("records") == [{BATCH: "1000", "word": "a", "count": 2}]
    assert named["modern"].to_dict("records") == [{BATCH: "q/0", "word": "a", "count": 2}]
    _printed(tmp_path / "silent", [])
    with pytest.raises(ConfigError, match="the legacy job printed nothing"):
        read_printed(tmp_path / "silent", "legacy")


def _progress(*cuts: tuple[str, list[list]]) -> list[ProgressRow]:
    return [ProgressRow.from_json({"batch_ms": int(key), "completed_ms": int(key), "records": 0, "ranges": ranges})
            for key, ranges in cuts]


def test_batches_are_aligned_by_the_input_they_consumed() -> None:
    legacy = batch_cuts(_progress(
        ("1000", [["t-l", 0, 0, 0], ["t-l", 1, 0, 0]]),      # before the input: joins the first batch
        ("2000", [["t-l", 0, 0, 50], ["t-l", 1, 0, 50]]),
        ("3000", [["t-l", 0, 50, 80], ["t-l", 1, 50, 60]]),   # the other job cut here too...
        ("4000", [["t-l", 0, 80, 100], ["t-l", 1, 60, 100]]),
        ("5000", [["t-l", 0, 100, 100], ["t-l", 1, 100, 100]])))  # idle: with the batch that reached 200
    modern = [(f"q/{i}", cut) for i, (_, cut) in enumerate(batch_cuts(_progress(
        ("0", [["t-m", 0, 0, 50], ["t-m", 1, 0, 50]]),
        ("1", [["t-m", 0, 50, 70], ["t-m", 1, 50, 60]]),      # ...but not here: batches 3 and 4 compare as one
        ("2", [["t-m", 0, 70, 100], ["t-m", 1, 60, 100]]))))]
    numbered, ranges = align_batches({"legacy": legacy, "modern": modern})
    assert numbered["legacy"] == {"1000": 1, "2000": 1, "3000": 2, "4000": 2, "5000": 2}
    assert numbered["modern"] == {"q/0": 1, "q/1": 2, "q/2": 2}
    assert ranges == [(0, 100), (100, 200)]
    lines = batch_cuts(_progress(("1", [["lines", 0, 0, 10]]), ("2", [["lines", 0, 10, 20]]), ("3", [["lines", 0, 20, 30]])))
    numbered, ranges = align_batches({"legacy": lines, "modern": lines})
    assert numbered["legacy"] == {"1": 1, "2": 2, "3": 3} and ranges == [(0, 10), (10, 20), (20, 30)]


def test_a_per_batch_count_and_a_running_total_differ_in_the_batch_named(tmp_path: Path) -> None:
    """The harness's alignment and diff on outputs as two jobs would have printed them (no JVM)."""
    from compare.diff import diff_outputs
    from compare.jobs import _first_batch, _numbered_batches, _shape

    for side in ("legacy", "modern"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "progress.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in _progress(
            ("1", [["lines", 0, 0, 2]]), ("2", [["lines", 0, 2, 4]]))))
    import pandas as pd

    legacy = pd.DataFrame({BATCH: ["1", "1", "2", "2"], "word": ["a", "b", "a", "c"], "count": [1, 1, 1, 1]})
    modern = pd.DataFrame({BATCH: ["1", "1", "2", "2"], "word": ["a", "b", "a", "c"], "count": [1, 1, 2, 1]})
    numbered, ranges = _numbered_batches({"legacy": legacy, "modern": modern},
                                         {s: tmp_path / s / "progress.jsonl" for s in ("legacy", "modern")})
    key = ("batch", "word")
    shaped = {s: _shape(f.drop(columns=[BATCH]), key, "all", s) for s, f in numbered.items()}
    diff = diff_outputs(shaped["legacy"], shaped["modern"], key, ["count"])
    assert not diff.equal
    assert _first_batch(diff, ranges, ("word",)) == {"batch": 2, "input": [2, 4], "keys": ["a"]}
    same = diff_outputs(shaped["legacy"], shaped["legacy"], key, ["count"])
    assert same.equal and _first_batch(same, ranges, ("word",)) is None


def test_the_inputs_are_fed_as_lines_or_elements() -> None:
    import pandas as pd

    frame = pd.DataFrame({"value": [b"a b\nc", None, b"7", b'{"n": 1}']})
    assert input_units("socket", frame) == ["a b", "c", "", "7", '{"n": 1}']
    assert input_units("files", frame) == input_units("socket", frame)
    assert input_units("queue", frame) == ["a b\nc", "", 7, {"n": 1}]
    assert input_units("kafka", frame) == [0, 1, 2, 3]


def test_a_jobs_own_crash_is_found_under_the_jvms_noise(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "26/01/01 10:00:00 ERROR JobScheduler: Error running job streaming job 1000 ms.0\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/pyspark/streaming/util.py", line 71, in call\n'
        "    r = self.func(t, *rdds)\n"
        '  File "/jobs/orders.py", line 23, in send\n'
        "    producer.send(topic, value=line)\n"
        '  File "/venv/lib/python3.11/site-packages/kafka/producer/kafka.py", line 576, in send\n'
        "    assert type(value_bytes) in (bytes, bytearray, memoryview, type(None))\n"
        "AssertionError\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/py4j/clientserver.py", line 516, in send_command\n'
        "py4j.protocol.Py4JNetworkError: Answer from Java side is empty\n")
    assert job_error(log) == "AssertionError (at orders.py:23)"
    log.write_text("Traceback (most recent call last):\n"
                   '  File "/venv/lib/python3.11/site-packages/py4j/java_gateway.py", line 1038, in send_command\n'
                   "ConnectionRefusedError: [Errno 111] Connection refused\n")
    assert job_error(log) is None
    log.write_text('Traceback (most recent call last):\n  File "/jobs/job.py", line 4, in <module>\n'
                   "    x = int(sys.argv[9])\nIndexError: list index out of range\n")
    assert job_error(log) == "IndexError: list index out of range (at job.py:4)"


def test_migrate_verify_needs_a_capture_and_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    from compare.cli import main

    code = main(["migrate", str(Path(__file__).parent / "print_jobs" / "legacy_queue.py"), "--verify"])
    assert code == 2 and "--verify needs --input CAPTURE" in capsys.readouterr().err


def test_a_verification_that_cannot_run_says_why_and_what_to_change(tmp_path: Path) -> None:
    from compare.verify import CANNOT, VerifySettings, verify

    job = str(Path(__file__).parent / "print_jobs" / "legacy_words.py")
    verdict = verify(VerifySettings(job=job, input_file="words.jsonl", key=("_1",), out_dir=tmp_path, args="socket"),
                     write_draft=lambda path: "print('draft')\n")
    # A placeholder in the arguments is compare-jobs' to fill; a bad one is refused before anything runs.
    bad = verify(VerifySettings(job=job, input_file="words.jsonl", key=("_1",), out_dir=tmp_path / "b",
                                args="files {input_dir} {brokers}"), write_draft=lambda path: "")
    assert bad.status == CANNOT and "names {brokers}; the placeholders are" in bad.detail
    assert verdict.status == CANNOT and verdict.exit_code == 2
    assert "--legacy names no input" in verdict.detail and 'give the job\'s arguments with --args' in verdict.detail
    assert (tmp_path / "draft.py").read_text() == "print('draft')\n"  # the draft was written all the same


_FOREACH_BATCH = '''
import json, sys
from pyspark import RDD
from pyspark.sql.streaming import DataStreamWriter

# No JVM here: foreachBatch only keeps the function, so the stand-in's wrapper can be called as Spark would.
DataStreamWriter.foreachBatch = lambda self, func: setattr(self, "batch_function", func) or self
import modern.standin
modern.standin.install(sys.argv[1])


class Batch(RDD):
    def __init__(self, elements):
        self.elements = elements

    def collect(self):
        return list(self.elements)


def job_function(frame, batch_id):  # what a draft's foreachBatch does: pprint per micro-batch, and a print
    def take_and_print(time, rdd):
        taken = rdd.take(3 + 1)
        print("-------------------------------------------")
        print("Time: %s" % time)
        print("-------------------------------------------")
        for record in taken[:3]:
            print(record)
        if len(taken) > 3:
            print("...")
        print("")

    take_and_print("2026-01-01 10:00:00", Batch([("w%d" % i, i) for i in range(5)]))
    print("done", batch_id)


writer = object.__new__(DataStreamWriter)
writer.foreachBatch(job_function)
writer.batch_function(None, 4)
'''


def test_a_pprint_reproduced_in_foreachbatch_records_every_element(tmp_path: Path) -> None:
    """The modern stand-in's foreachBatch wrapper, in a process of its own (install() patches PySpark's classes)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _FOREACH_BATCH, str(tmp_path / "progress.jsonl")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    # The console shows what the job printed: three elements and "...".
    assert done.stdout.splitlines()[3:] == ["('w0', 0)", "('w1', 1)", "('w2', 2)", "...", "", "done 4"]
    entries = [json.loads(line) for line in (tmp_path / "printed.jsonl").read_text().splitlines()]
    rows = printed_rows(entries)
    # All five elements are rows, pprint's printed lines are not rows again; the job's own print is one.
    assert [v for _, v, _ in rows] == [[f"w{i}", i] for i in range(5)] + [["done 4"]]
    assert {b.rpartition("/")[2] for b, _, _ in rows} == {"4"}  # batch 4 (of no query: none was started here)


def test_a_drafts_tick_source_is_not_counted_as_input() -> None:
    """A dmk migrate draft unions a rate-micro-batch source (one row a micro-batch) with its input: not input."""
    from modern.standin import _batch_row

    def progress(batch: int, lines: int) -> dict[str, object]:
        return {
            "id": "q-tick", "name": "dstream_job", "batchId": batch, "timestamp": "2026-11-27T11:00:00.000Z",
            "batchDuration": 120, "numInputRows": lines + 1,
            "sources": [
                {"description": "TextSocketV2[host: 127.0.0.1, port: 9999]", "numInputRows": lines,
                 "startOffset": None, "endOffset": None},
                # as Spark 4.3 reports it (measured): description and offsets of RatePerMicroBatchStream
                {"description": "RatePerMicroBatchStream[rowsPerBatch=1, numPartitions=1, startTimestamp=0, "
                                "advanceMsPerBatch=1000]", "numInputRows": 1,
                 "startOffset": {"offset": batch, "timestamp": batch * 1000},
                 "endOffset": {"offset": batch + 1, "timestamp": (batch + 1) * 1000}},
            ],
        }

    assert _batch_row(progress(0, 5)).to_json()["ranges"] == [["lines", 0, 0, 5]]
    assert _batch_row(progress(1, 3)).to_json()["ranges"] == [["lines", 0, 5, 8]]
    assert _batch_row(progress(1, 3)).to_json()["clock"]  # a micro-batch every interval: settled by count (compare.jobs)


@pytest.mark.parametrize("name", ["_note_ranges", "_count_elements"])
def test_the_legacy_standins_own_foreachrdd_functions_pickle_into_a_checkpoint(name: str) -> None:
    """A checkpointed job pickles every foreachRDD function, the stand-in's included (seen: the orders example)."""
    from pyspark import cloudpickle

    import legacy.standin as standin
    from legacy._direct import _on_kafka_rdds, _with_time

    own = getattr(standin, name)
    # As a direct stream registers it: wrapped for its KafkaRDDs, then by the patched DStream.foreachRDD.
    registered = standin._recording_prints(_on_kafka_rdds("uid", _with_time(own), False), "job.py:1")
    restored = cloudpickle.loads(cloudpickle.dumps(registered))
    assert callable(restored) and getattr(standin, name) is own and own._dmk_own


def test_a_receivers_record_count_aligns_with_a_queries_offsets_per_partition() -> None:
    """createStream's batches count records ("lines"); its rewrite's Kafka source reports offsets per partition."""
    receiver = batch_cuts(_progress(("1", [["lines", 0, 0, 0]]), ("2", [["lines", 0, 0, 100]]),
                                    ("3", [["lines", 0, 100, 150]]), ("4", [["lines", 0, 150, 200]])))
    query = [(f"q/{i}", cut) for i, (_, cut) in enumerate(batch_cuts(_progress(
        ("0", [["t", 0, 0, 60], ["t", 1, 0, 40]]), ("1", [["t", 0, 60, 120], ["t", 1, 40, 80]]))))]
    numbered, ranges = align_batches({"legacy": receiver, "modern": query})
    assert ranges == [(0, 100), (100, 200)]
    assert numbered["legacy"] == {"1": 1, "2": 1, "3": 2, "4": 2} and numbered["modern"] == {"q/0": 1, "q/1": 2}


def test_a_createstream_job_reads_the_runs_kafka_from_its_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from legacy.standin import _fed_receiver_params

    monkeypatch.setenv("DMK_BOOTSTRAP", "127.0.0.1:9999")
    # kafka_wordcount.py passes no kafkaParams: 2.4 found the brokers through the quorum.
    assert _fed_receiver_params({}, {}) == {"metadata.broker.list": "127.0.0.1:9999", "auto.offset.reset": "smallest"}
    assert "auto.offset.reset smallest, not 'largest'" in capsys.readouterr().err
    own = {"bootstrap.servers": "b:1", "auto.offset.reset": "smallest", "security.protocol": "SSL"}
    assert _fed_receiver_params(own, {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}) == {
        **own, "sasl.mechanism": "PLAIN"}  # the job's own keys win over the run's security settings
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("DMK_BOOTSTRAP")
    assert _fed_receiver_params({"group.id": "g"}, {}) == {"group.id": "g"}  # not under compare-jobs: as written


def test_a_query_that_runs_a_batch_every_interval_settles_after_its_extra_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dmk migrate draft's query runs a micro-batch every interval (as DStreams did): never quiet for QUIET_S."""
    import subprocess
    import sys

    import compare.jobs as jobs
    from kit.errors import RunTimeout

    monkeypatch.setattr(jobs, "QUIET_S", 1000.0)
    engine = jobs.ScriptEngine("modern", "python job.py", output="printed")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = jobs.ScriptRun(engine, process, tmp_path)
        progress = engine.progress_path(tmp_path)
        lines = [["lines", 0, 0, 300]], [["lines", 0, 300, 300]]

        def row(ranges: list[list]) -> str:
            return json.dumps({"batch_ms": 1000, "completed_ms": 1100, "records": 0, "ranges": ranges}) + "\n"

        progress.write_text(row(lines[0]) + row(lines[1]))
        with pytest.raises(RunTimeout):  # one batch after the input's end: not settled (and not quiet)
            run.await_offsets({}, lines=300, timeout_s=1, extra_batches=2)
        with progress.open("a") as out:
            out.write(row(lines[1]))
        run.await_offsets({}, lines=300, timeout_s=5, extra_batches=2)  # two batches after: settled
    finally:
        process.kill()
        process.wait()
