"""``dmk compare-jobs --output files:LOC``: a job's writes under its own location, redirected to the run and read.

Default tier: the path mapping, the option, reading the files, the errors, the writers' redirect and the
``PYSPARK_SUBMIT_ARGS`` scrub in processes without a JVM (PySpark's writers stubbed), what ``dmk migrate
--verify`` infers, and the harness on jobs without Spark. Slow tier: our own job saving under an ``hdfs://``
prefix of its own (tests/print_jobs/legacy_saved.py) proven equal to its draft and to a rewrite writing to
another absolute directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import main
from compare.jobs import JobsSettings, read_files
from compare.verify import _output_of, written_locations
from kit.errors import ConfigError
from kit.own_output import ENV, OutputRedirect, normalized
from kit.submit_args import without_standin_packages

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "print_jobs"
HDFS = "hdfs://localhost:9000/dmk-tests/words"


def test_paths_under_the_location_go_to_the_runs_directory_under_its_last_part() -> None:
    # A saveAsTextFiles prefix ending in "/" (a real job's): its batches are directories "-<time>" inside it.
    desktop = OutputRedirect("file:///home/cloudera/Desktop/out/", "/run/legacy/files")
    assert desktop.target("file:///home/cloudera/Desktop/out/-1700000000000") == "/run/legacy/files/out/-1700000000000"
    assert desktop.target("/home/cloudera/Desktop/out/-1700000000000/part-00000") == (
        "/run/legacy/files/out/-1700000000000/part-00000")
    # An HDFS prefix: prefix-<time>[.suffix], the location itself, and what lies below it.
    hdfs = OutputRedirect("hdfs://localhost:9000/test", "/run/modern/files")
    assert hdfs.target("hdfs://localhost:9000/test-1700000000000") == "/run/modern/files/test-1700000000000"
    assert hdfs.target("hdfs://localhost:9000/test-1700000000000.txt") == "/run/modern/files/test-1700000000000.txt"
    assert hdfs.target("hdfs://localhost:9000/test") == "/run/modern/files/test"
    assert hdfs.target("hdfs://localhost:9000//test/./day=1/") == "/run/modern/files/test/day=1"
    for elsewhere in ("hdfs://localhost:9000/testing", "hdfs://localhost:9000/test-abc", "hdfs://other:9000/test-1",
                      "/test-1700000000000", "file:///test", "hdfs://localhost:9000/tes"):
        assert hdfs.target(elsewhere) is None, elsewhere
    assert normalized("file:/data/out/") == normalized("/data/out") == "/data/out"
    assert normalized("s3a://bucket//a/./b/") == "s3a://bucket/a/b"


def test_a_relative_location_is_the_current_directory_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the harness's and the job's: compare-jobs runs the job there
    redirect = OutputRedirect("data/output", "/run/legacy/files")
    assert redirect.target(str(tmp_path / "data" / "output-1700000000000")) == "/run/legacy/files/output-1700000000000"
    assert redirect.target("file://" + str(tmp_path / "data" / "output" / "x")) == "/run/legacy/files/output/x"


def test_the_redirect_crosses_the_process_boundary_as_json() -> None:
    redirect = OutputRedirect(HDFS, "/run/legacy/files")
    assert OutputRedirect.from_json(redirect.to_json()) == redirect
    with pytest.raises(ConfigError, match=f"\\${ENV} must be"):
        OutputRedirect.from_json('{"location": "/x"}')


def test_files_output_needs_no_output_placeholder_and_compares_per_batch() -> None:
    settings = JobsSettings(input_file="x.jsonl", key=("_1",), out_dir=Path("run"), output=f"files:{HDFS},/tmp/o",
                            mode="batches", legacy="python a.py {socket_host} {socket_port}",
                            modern="python b.py {socket_host} {socket_port}")
    assert settings.mode == "batches"


@pytest.mark.parametrize(("output", "message"), [
    ("files:", "--output files:LOC needs the directory or prefix the job writes to, got ''"),
    ("files:/", "--output files:LOC needs the directory or prefix the job writes to, got '/'"),
    ("files:hdfs://nn:9000/", "needs the directory or prefix the job writes to, got 'hdfs://nn:9000/'"),
    ("files:/a,/b,/c", "--output files: takes one location (both jobs write there) or two (LEGACY,MODERN), got 3"),
])
def test_a_bad_location_is_refused_before_anything_runs(
    tmp_path: Path, output: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare-jobs", "--input", "x.jsonl", "--key", "_1", "--output", output, "--out",
                 str(tmp_path / "run"), "--legacy", "python a.py {input_dir}", "--modern", "python b.py {input_dir}"])
    err = capsys.readouterr().err
    assert code == 2 and message in " ".join(err.split()) and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_saved_batches_are_read_in_batch_order_as_rows_by_position(tmp_path: Path) -> None:
    side = tmp_path / "legacy"
    _tree(side, {
        "outputs.jsonl": json.dumps({"path": f"{HDFS}-1700000001000", "to": "x", "how": "RDD.saveAsTextFile"}) + "\n",
        "progress.jsonl": json.dumps({"batch_ms": 1700000001000, "completed_ms": 1700000001400, "records": 3,
                                      "ranges": []}) + "\n",
        # Written out of order on purpose: the batch time in the name orders them, not the listing.
        "files/words-1700000002000/part-00000": "('b', 1)\n",
        "files/words-1700000001000/part-00000": "('a', 2)\n",
        "files/words-1700000001000/part-00001": "('b', 3)\n",
        "files/words-1700000001000/_SUCCESS": "",
        "files/words-1700000001000/.part-00000.crc": "\x00\x01",
        "files/words-1700000003000/part-00000": "",  # an empty batch: a directory all the same
    })
    rows = read_files(side, "legacy", HDFS)
    assert rows.to_dict("records") == [{"_1": "a", "_2": 2}, {"_1": "b", "_2": 3}, {"_1": "b", "_2": 1}]
    # A row was written when its DStream batch completed (progress.jsonl), else at its file's modification time.
    modified = (side / "files/words-1700000002000/part-00000").stat().st_mtime_ns // 1_000_000
    assert rows.attrs["timestamps"] == [1700000001400, 1700000001400, modified]


def test_a_queries_file_sink_is_read_without_its_metadata(tmp_path: Path) -> None:
    side = tmp_path / "modern"
    _tree(side, {
        "outputs.jsonl": json.dumps({"path": "/data/out", "to": "x", "how": "DataStreamWriter.start(path)"}) + "\n",
        "files/out/_spark_metadata/0": 'v1\n{"path":"file:///x/part-00000-1.txt"}\n',
        "files/out/part-00000-1-c000.txt": "spark stream\n('a', 1)\n{'word': 'b', 'n': 2}\n",
        "files/out/part-00000-2-c000.json": '{"word": "c", "n": 3}\n',
        "files/out/part-00000-3-c000.csv": "d,4\n",
    })
    for n, name in enumerate(("part-00000-1-c000.txt", "part-00000-2-c000.json", "part-00000-3-c000.csv")):
        os.utime(side / "files" / "out" / name, ns=(10**18 + n * 10**9,) * 2)  # the order they were written in
    rows = read_files(side, "modern", "/data/out")
    assert [{k: v for k, v in row.items() if not pd.isna(v)} for row in rows.to_dict("records")] == [
        {"_1": "spark stream"}, {"_1": "a", "_2": 1}, {"word": "b", "n": 2}, {"word": "c", "n": 3},
        {"_1": "d", "_2": 4}]
    assert rows.attrs["timestamps"] == [10**12] * 3 + [10**12 + 1000, 10**12 + 2000]


def test_a_job_that_wrote_elsewhere_is_told_the_location_to_pass(tmp_path: Path) -> None:
    side = tmp_path / "legacy"
    _tree(side, {"outputs.jsonl": "".join(json.dumps({"path": f"hdfs://nn:9000/counts-17000000{n}0000", "to": None})
                                          + "\n" for n in range(2))})
    with pytest.raises(ConfigError) as err:
        read_files(side, "legacy", HDFS)
    assert str(err.value) == (
        f"the legacy job wrote nothing under {HDFS} (--output files:); it wrote hdfs://nn:9000/counts-1700000000000, "
        "hdfs://nn:9000/counts-1700000010000: pass the location it writes, e.g. --output files:hdfs://nn:9000/counts "
        f"(LEGACY,MODERN for one each); both jobs' logs are under {tmp_path}")
    (side / "outputs.jsonl").unlink()
    with pytest.raises(ConfigError, match="it wrote no file through Spark's writers .* or choose another --output"):
        read_files(side, "legacy", HDFS)
    _tree(side, {"outputs.jsonl": json.dumps({"path": HDFS, "to": "x"}) + "\n", "files/words/p": ""})
    (side / "files/words/p").write_bytes(b"\x80\x81 pickled")
    with pytest.raises(ConfigError, match="is not text .*: compare-jobs reads text lines, JSON lines, CSV and Parquet"):
        read_files(side, "legacy", HDFS)


_WRITERS = '''
import json, sys
from pyspark import RDD
from pyspark.sql import DataFrameWriter
from pyspark.sql.streaming import DataStreamWriter

# No JVM here: the writers' JVM side is stubbed before the stand-ins wrap them, so what reaches it is seen.
reached = []
RDD.saveAsTextFile = lambda self, path, codec=None: reached.append(["RDD.saveAsTextFile", path])
DataFrameWriter.csv = lambda self, path, **kw: reached.append(["csv", path])
DataFrameWriter.option = lambda self, key, value: reached.append(["option", key, value]) or self
DataStreamWriter.option = lambda self, key, value: reached.append(["stream option", key, value]) or self
import modern.standin
modern.standin.install(sys.argv[1])

rdd = object.__new__(RDD)
rdd.saveAsTextFile("hdfs://localhost:9000/test-1700000000000")  # what DStream.saveAsTextFiles calls every batch
rdd.saveAsTextFile("/elsewhere/out")
writer = object.__new__(DataFrameWriter)
writer.csv(path="hdfs://localhost:9000/test/batch-7")
writer.option("path", "hdfs://localhost:9000/test/batch-8").option("header", "true")
object.__new__(DataStreamWriter).options(path="hdfs://localhost:9000/test/query", checkpointLocation="/c")
print(json.dumps(reached))
'''


def test_the_writers_of_a_jobs_process_are_redirected_and_every_write_noted(tmp_path: Path) -> None:
    """The RDD, DataFrame and writeStream writers, in a process of its own (install() patches PySpark's classes)."""
    to = str(tmp_path / "files")
    env = {**os.environ, ENV: OutputRedirect("hdfs://localhost:9000/test", to).to_json()}
    done = subprocess.run([sys.executable, "-c", _WRITERS, str(tmp_path / "progress.jsonl")], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [
        ["RDD.saveAsTextFile", f"file://{to}/test-1700000000000"], ["RDD.saveAsTextFile", "/elsewhere/out"],
        ["csv", f"file://{to}/test/batch-7"], ["option", "path", f"file://{to}/test/batch-8"],
        ["option", "header", "true"], ["stream option", "path", f"file://{to}/test/query"],
        ["stream option", "checkpointLocation", "/c"]]
    assert (f"dmk: output redirected: hdfs://localhost:9000/test → {to} (hdfs:// is a local directory here: no hdfs "
            "runs)") in done.stderr
    assert f"dmk: output redirected: hdfs://localhost:9000/test-1700000000000 → {to}/test-1700000000000" in done.stderr
    noted = [json.loads(line) for line in (tmp_path / "outputs.jsonl").read_text().splitlines()]
    assert [(n["path"], n["to"], n["how"]) for n in noted] == [
        ("hdfs://localhost:9000/test-1700000000000", f"{to}/test-1700000000000", "RDD.saveAsTextFile"),
        ("/elsewhere/out", None, "RDD.saveAsTextFile"),
        ("hdfs://localhost:9000/test/batch-7", f"{to}/test/batch-7", "DataFrameWriter.csv"),
        ("hdfs://localhost:9000/test/batch-8", f"{to}/test/batch-8", "DataFrameWriter.option('path')"),
        ("hdfs://localhost:9000/test/query", f"{to}/test/query", "DataStreamWriter.option('path')")]
    assert {n["at"] for n in noted} == {"<string>:" + str(line) for line in (17, 18, 20, 21, 22)}


def test_without_a_redirect_nothing_is_patched(tmp_path: Path) -> None:
    script = ("import sys; from pyspark import RDD; f = RDD.saveAsTextFile; import legacy.standin; "
              "legacy.standin.install(sys.argv[1]); print(RDD.saveAsTextFile is f)")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "progress.jsonl")], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
    assert "output redirected" not in done.stderr


@pytest.mark.parametrize(("given", "kept", "dropped"), [
    ("--packages org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1 pyspark-shell", "pyspark-shell",
     ["org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1"]),
    ("--master local[2] --packages=org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.0,com.example:lib:1.0 "
     "pyspark-shell", "--master 'local[2]' --packages com.example:lib:1.0 pyspark-shell",
     ["org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.0"]),
    ("--conf spark.jars.packages=org.apache.spark:spark-streaming-kafka-0-10_2.12:3.0.0 pyspark-shell",
     "pyspark-shell", ["org.apache.spark:spark-streaming-kafka-0-10_2.12:3.0.0"]),
    ("--packages com.example:lib:1.0 pyspark-shell", "--packages com.example:lib:1.0 pyspark-shell", []),
])
def test_the_kafka_packages_the_stand_ins_provide_are_not_fetched(given: str, kept: str, dropped: list[str]) -> None:
    assert without_standin_packages(given) == (kept, dropped)


_LAUNCH = '''
import os
from pyspark.core import context

context.launch_gateway = lambda conf=None, popen_kwargs=None: print("launched with", os.environ["PYSPARK_SUBMIT_ARGS"])
from kit import submit_args

submit_args.install()
os.environ["PYSPARK_SUBMIT_ARGS"] = "--packages org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1 pyspark-shell"
context.launch_gateway(None)  # as SparkContext does, after the job set the variable in its own text
'''


def test_submit_args_a_job_sets_itself_are_scrubbed_when_spark_starts() -> None:
    done = subprocess.run([sys.executable, "-c", _LAUNCH], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "launched with pyspark-shell"
    assert ("dmk: PYSPARK_SUBMIT_ARGS asks spark-submit to fetch org.apache.spark:spark-streaming-kafka-0-8_2.11:"
            "2.3.1: not fetched; the kit's stand-ins provide KafkaUtils") in done.stderr


_LAUNCH_CONF = '''
from pyspark import SparkConf
from pyspark.core import context

context.launch_gateway = lambda conf=None, popen_kwargs=None: print("launched with", conf.get("spark.jars.packages"))
from kit import submit_args

submit_args.install()
conf = SparkConf().set("spark.jars.packages", "org.apache.spark:spark-streaming-kafka-0-8_2.11:2.4.7,com.example:x:1")
context.launch_gateway(conf)  # as SparkContext(conf=conf) does
'''


def test_kafka_packages_a_jobs_sparkconf_names_are_not_fetched() -> None:
    done = subprocess.run([sys.executable, "-c", _LAUNCH_CONF], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "launched with com.example:x:1"
    assert ("dmk: the job's SparkConf asks spark-submit to fetch org.apache.spark:spark-streaming-kafka-0-8_2.11:"
            "2.4.7 (spark.jars.packages): not fetched") in done.stderr


def test_verify_infers_the_one_location_a_jobs_text_writes(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text('brokers = "localhost:9092"\n'
                   '# lines.saveAsTextFiles("data/output")  (a comment: not written)\n'
                   'spark.read.json("in.json")\n'
                   'lines.saveAsTextFiles("hdfs://localhost:9000/test")\n')
    assert written_locations(job.read_text()) == ["hdfs://localhost:9000/test"]
    assert _output_of("", str(job), str(job)) == "files:hdfs://localhost:9000/test"
    assert _output_of("{bootstrap} {topic} {output_topic}", str(job)) == "topic"  # the arguments say it first
    rewrite = tmp_path / "new.py"
    rewrite.write_text('q = words.writeStream.format("text").option("checkpointLocation", "/c")'
                       '.option("path", "/data/new").start()\n')
    assert _output_of("", str(job), str(rewrite)) == "files:hdfs://localhost:9000/test,/data/new"
    assert written_locations('df.write.mode("append").csv("/out/a")\ndf.writeStream.start(path="/out/b")\n'
                             'rdd.saveAsTextFile(target)\n') == ["/out/a", "/out/b"]
    two = tmp_path / "two.py"
    two.write_text('a.saveAsTextFiles("/x")\nb.saveAsTextFiles("/y")\n')
    assert _output_of("", str(two)) == "printed"  # not one location: what it prints, unless --output says
    assert _output_of("", str(JOBS / "legacy_words.py")) == "printed"


# -- the harness, on jobs without Spark that write as the stand-ins redirect them -------------------------

_FAKE = '''"""A job without Spark: reads the harness's socket, saves each batch's lines as saveAsTextFiles would."""
import json, os, socket, sys, time
from pathlib import Path

from kit.own_output import OutputRedirect

side, location, checkpoint = sys.argv[1:4]
out = Path(checkpoint).parent / side  # the run directory's side: where the stand-ins write
redirect = OutputRedirect.from_json(os.environ["DMK_OUTPUT_REDIRECT"])


def write(name, row):
    with open(out / name, "a") as f:
        f.write(json.dumps(row) + "\\n")


write("inputs.jsonl", {"kind": "socket", "at": "fake.py:16"})
host, port = os.environ["DMK_SOCKET"].rsplit(":", 1)
connection = socket.create_connection((host, int(port)))
connection.settimeout(0.3)
lines, pending, batch_ms = 0, b"", 0
while True:
    batch_ms = max(int(time.time() * 1000), batch_ms + 1)  # a batch time each, as a DStream's batches have
    try:
        pending += connection.recv(1 << 20)
    except socket.timeout:
        pass
    complete, newline, pending = pending.rpartition(b"\\n")
    got = complete.decode().split("\\n") if newline else []
    path = f"{location}-{batch_ms}"
    target = redirect.target(path)  # where the stand-in would have sent the job's write
    write("outputs.jsonl", {"path": path, "to": target, "how": "RDD.saveAsTextFile", "at": "fake.py:33"})
    if target is not None:
        os.makedirs(target)
        Path(target, "part-00000").write_text("".join(repr((line, len(line))) + "\\n" for line in got))
    write("progress.jsonl", {"batch_ms": batch_ms, "completed_ms": int(time.time() * 1000),
                             "records": len(got), "ranges": [["lines", 0, lines, lines + len(got)]]})
    lines += len(got)
'''


def _fake_run(tmp_path: Path, kafka_broker: str, legacy: str, modern: str, output: str) -> int:
    from kit.capture import capture_of_values as write_capture

    capture = write_capture(tmp_path / "w.jsonl", ["a b", "c", "dd e"])
    fake = tmp_path / "fake.py"
    fake.write_text(_FAKE)
    return main(["compare-jobs", "--input", str(capture), "--key", "_1", "--output", output, "--mode", "all",
                 "--out", str(tmp_path / "run"), "--bootstrap-servers", kafka_broker, "--timeout", "60",
                 "--input-kind", "socket", "--legacy", f"python {fake} legacy {legacy} {{checkpoint}}",
                 "--modern", f"python {fake} modern {modern} {{checkpoint}}"])


@pytest.mark.kafka
def test_jobs_saving_under_their_own_locations_are_compared_on_what_they_saved(
    kafka_broker: str, tmp_path: Path
) -> None:
    code = _fake_run(tmp_path, kafka_broker, HDFS, "/tmp/dmk-tests-own-output/fake", f"files:{HDFS},/tmp/"
                     "dmk-tests-own-output/fake")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], metrics["summary"]
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 3
    assert list((tmp_path / "run" / "modern" / "files").iterdir())[0].name.startswith("fake-")
    assert not Path("/tmp/dmk-tests-own-output/fake").exists()


@pytest.mark.kafka
def test_a_location_neither_job_writes_is_a_one_line_error_after_both_ran(
    kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _fake_run(tmp_path, kafka_broker, HDFS, HDFS, "files:hdfs://localhost:9000/elsewhere") == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("feed ", "replay "))]
    assert len(lines) == 1, lines
    assert lines[0].startswith("dmk compare-jobs: error: the legacy job wrote nothing under "
                               "hdfs://localhost:9000/elsewhere")
    assert f"pass the location it writes, e.g. --output files:{HDFS}" in lines[0]
    assert all((tmp_path / "run" / side / "job.log").read_text().startswith("--- ") for side in ("legacy", "modern"))


def test_the_modern_stand_in_feeds_the_socket_source_a_draft_reads() -> None:
    """A draft reads ``socketTextStream`` through its runtime's own source: the stand-in must redirect that name.

    The two spell it apart (a draft is plain text, it imports nothing of the stand-in's); when they drifted, a
    draft of a job naming its own host and port connected there and could not be verified (the slow test below).
    """
    from migrate.microbatch import _socket_source
    from modern.standin import _SOCKET_FORMATS

    assert _socket_source().name() in _SOCKET_FORMATS
    assert "socket" in _SOCKET_FORMATS  # Spark's own, which rewrites read


# -- slow: our own job, saving under an hdfs:// prefix of its own, with its draft and its rewrite ------------


def _words(tmp_path: Path) -> Path:
    import random

    from kit.capture import capture_of_values as write_capture

    rng = random.Random(36)
    words = ["spark", "stream", "batch", "word", "count", "socket"]
    return write_capture(tmp_path / "words.jsonl", [" ".join(rng.choice(words) for _ in range(4)) for _ in range(60)])


def _no_hdfs_was_written(run: Path) -> None:
    for side in ("legacy", "modern"):
        log = (run / side / "job.log").read_text()
        assert "dmk: output redirected: " in log and "not fetched" in log, log[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two jobs' starts alone take minutes on a loaded machine
def test_a_job_saving_under_its_own_hdfs_prefix_is_proven_equal_to_its_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from compare.verify import EQUAL, VerifySettings, verify
    from migrate import analyse
    from migrate.draft import make_draft

    monkeypatch.chdir(tmp_path)
    job = JOBS / "legacy_saved.py"
    draft = make_draft(analyse(job))
    assert draft.runs, draft.unresolved
    verdict = verify(VerifySettings(job=str(job), input_file=str(_words(tmp_path)), key=("_1",),
                                    out_dir=tmp_path / "run", input_kind="socket", batch_records=20, timeout_s=300),
                     write_draft=lambda path: draft.text)
    assert verdict.status == EQUAL, verdict.detail
    metrics = json.loads((tmp_path / "run" / "compare" / "metrics.json").read_text())
    assert metrics["output"] == f"files:{HDFS}" and metrics["mode"] == "batches"  # inferred from the job's text
    assert metrics["batches"]["compared"] == 3
    saved = sorted(p.name for p in (tmp_path / "run" / "compare" / "legacy" / "files").iterdir())
    assert saved and all(name.startswith("words-") for name in saved)  # saveAsTextFiles' prefix-<time>
    _no_hdfs_was_written(tmp_path / "run" / "compare")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_rewrite_writing_to_another_absolute_directory_is_compared_batch_by_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    own = "/tmp/dmk-tests-own-output/words"
    code = main(["compare-jobs", "--input", str(_words(tmp_path)), "--key", "_1", "--output", f"files:{HDFS},{own}",
                 "--mode", "batches", "--batch-records", "20", "--input-kind", "socket", "--out",
                 str(tmp_path / "run"), "--timeout", "300", "--legacy", f"python {JOBS / 'legacy_saved.py'}",
                 "--modern", f"python {JOBS / 'modern_saved.py'}"])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    assert metrics["batches"]["compared"] == 3
    assert not Path(own).exists()  # redirected: nothing written outside the run
    modern_log = (tmp_path / "run" / "modern" / "job.log").read_text()
    assert f"dmk: output redirected: {own} → {tmp_path / 'run' / 'modern' / 'files'}" in modern_log


def test_a_query_is_settled_after_twice_its_slowest_recent_batch_of_quiet_and_a_draft_never(tmp_path: Path) -> None:
    """A batch can take seconds on a loaded machine: 3 s without one is not a query's end, nor ever a draft's."""
    from compare.jobs import QUIET_S, ScriptEngine, ScriptRun

    engine = ScriptEngine("modern", "python job.py", output="printed")
    run = ScriptRun(engine, None, tmp_path)  # type: ignore[arg-type]  # no process: only its progress is read
    progress = engine.progress_path(tmp_path)
    assert run._quiet_s() == QUIET_S  # nothing reported yet
    rows = [(0, 40_000), (41_000, 46_500), (47_000, 48_000)]  # the first batch (the query's start) is left out
    progress.write_text("".join(json.dumps({"batch_ms": b, "completed_ms": c, "records": 0, "ranges": []}) + "\n" for b, c in rows))
    assert run._quiet_s() == 11.0
    with progress.open("a") as out:  # a dmk migrate draft's tick source: settled by its extra batches only
        out.write(json.dumps({"batch_ms": 49_000, "completed_ms": 49_100, "records": 0, "ranges": [], "clock": True}) + "\n")
    assert run._quiet_s() == float("inf")
