"""``dmk compare-jobs``: a team's own job scripts, unmodified, on a captured topic (examples/orders).

The jobs run as their own processes with their own Spark, as ``dmk compare-jobs`` runs them; the bad-input
tests use tiny scripts that start no Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import main
from compare.diff import OutputsDiffer
from compare.jobs import _read_dir, _shape
from examples.orders import expected_revenue, orders
from kit.capture import capture, read_capture
from kit.errors import ConfigError
from kit.kafka import Kafka

REPO = Path(__file__).resolve().parents[1]
LEGACY = "python examples/orders/legacy_job.py {bootstrap} {topic} {output_topic} {checkpoint}"
MODERN = "python examples/orders/modern_job.py {bootstrap} {topic} {output_topic} {checkpoint}"
WRONG = "python examples/orders/modern_wrong.py {bootstrap} {topic} {output_topic} {checkpoint}"


@pytest.fixture(scope="module")
def captured(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,500 orders (malformed ones among them) produced into a 3-partition topic, then captured."""
    topic = f"orders-{tmp_path_factory.getbasetemp().name}"
    with Kafka(kafka_broker) as kafka:
        kafka.create_topic(topic, 3)
        sender = kafka.sender(acks="all")
        try:
            for i, (key, value) in enumerate(orders(1_500)):
                sender.send(topic, key=key, value=value, partition=i % 3)
            assert sender.flush(30.0) == 0
        finally:
            sender.close()
    return capture(kafka_broker, topic, tmp_path_factory.mktemp("capture") / "orders.jsonl").path


def _run(
    out: Path, captured: Path, bootstrap: str, modern: str, *extra: str, legacy: str = LEGACY,
) -> tuple[int, dict]:
    code = main(["compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(out), "--legacy", legacy,
                 "--modern", modern, "--bootstrap-servers", bootstrap, "--timeout", "300", *extra])
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    return code, metrics


@pytest.mark.kafka
def test_the_example_pair_is_equivalent_on_a_captured_topic(
    kafka_broker: str, captured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _run(tmp_path / "run", captured, kafka_broker, MODERN, "--oracle", "examples.orders:expected_revenue")
    expected = expected_revenue(read_capture(captured))
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    assert metrics["records"] == 1_500
    assert metrics["modern_vs_legacy"] == {"rows_missing": 0, "rows_unexpected": 0, "rows_mismatched": 0,
                                           "rows_matched": len(expected)}
    assert metrics["oracle"]["legacy_vs_oracle"]["rows_matched"] == len(expected) == metrics["oracle"]["rows"]
    for side in ("legacy", "modern"):
        assert metrics["jobs"][side]["rows_compared"] == len(expected)
        log = (tmp_path / "run" / side / "job.log").read_text()
        assert "dmk: " in log  # the stand-in said what it stood in for
    # The DStream job re-emits every key each batch; the query only the changed ones: both end on the totals.
    assert metrics["jobs"]["legacy"]["output_rows"] > metrics["jobs"]["modern"]["output_rows"] >= len(expected)
    assert "EQUIVALENT" in (tmp_path / "run" / "report.md").read_text()
    assert '<p class="verdict">EQUIVALENT</p>' in (tmp_path / "run" / "report.html").read_text()
    for side in ("legacy", "modern"):
        # Both read the 1,500 records and wrote their last totals after the last one was produced.
        assert metrics["jobs"][side]["throughput_rps"] > 0 and metrics["jobs"][side]["result_latency_ms"] > 0


@pytest.mark.slow
@pytest.mark.kafka
def test_a_wrong_rewrite_is_reported_by_key(assert_jobs_equivalent, captured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(OutputsDiffer) as caught:
        assert_jobs_equivalent(LEGACY, WRONG, captured, key="customer")
    frame = read_capture(captured)
    expected = expected_revenue(frame)
    # Exactly the customers with a multi-item order differ (the rewrite counts each order's first item only).
    multi = set()
    for value in frame["value"]:
        try:
            order = json.loads(value)
        except (ValueError, TypeError):
            continue
        if (isinstance(order, dict) and isinstance(order.get("customer"), dict)
                and isinstance(order.get("items"), list) and len(order["items"]) > 1):
            multi.add(order["customer"]["id"])
    diff = caught.value.diff
    assert sorted(diff.mismatched["customer"]) == sorted(multi & set(expected["customer"])) != []
    assert diff.missing.empty and diff.unexpected.empty
    assert "DIFFERENT" in str(caught.value) and sorted(multi)[0] in str(caught.value)


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(body)
    return f"python {path} {{bootstrap}} {{topic}} {{output_topic}} {{checkpoint}}"


@pytest.mark.kafka
def test_a_job_that_crashes_or_never_reads_is_a_one_line_error(
    kafka_broker: str, captured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crash = _script(tmp_path, "raise SystemExit('the job could not parse its arguments')\n")
    code = main(["compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(tmp_path / "a"),
                 "--legacy", crash, "--modern", MODERN, "--bootstrap-servers", kafka_broker, "--timeout", "60"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "the legacy job exited with code 1 before it was done" in err
    assert "the job could not parse its arguments" in err  # the tail of its log
    idle = _script(tmp_path, "import time\ntime.sleep(600)\n")
    code = main(["compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(tmp_path / "b"),
                 "--legacy", idle, "--modern", MODERN, "--bootstrap-servers", kafka_broker, "--timeout", "3"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "the legacy job reported no batch within 3 s" in err


@pytest.mark.parametrize(("legacy", "message"), [
    ("python job.py {bootstrap} {topic} {checkpoint}", "never names {output_topic}"),
    ("python job.py {bootstrap} {topic} {output_topic} {brokers}", "names {brokers}; the placeholders are"),
    ("spark-submit job.py {bootstrap} {topic} {output_topic}", "must run a Python script or module with python"),
])
def test_bad_commands_are_refused_before_anything_runs(
    tmp_path: Path, legacy: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare-jobs", "--input", str(tmp_path / "x.jsonl"), "--key", "k", "--legacy", legacy,
                 "--modern", MODERN, "--out", str(tmp_path / "run")])
    assert code == 2 and message in " ".join(capsys.readouterr().err.split())


def test_a_capture_that_does_not_parse_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.jsonl").write_text("not json\n")
    (tmp_path / "x.jsonl.manifest.json").write_text(json.dumps({"format": "dmk-capture/1", "sha256": "0"}))
    code = main(["compare-jobs", "--input", str(tmp_path / "x.jsonl"), "--key", "k", "--legacy", LEGACY,
                 "--modern", MODERN, "--out", str(tmp_path / "run")])
    assert code == 2 and "changed since it was captured" in " ".join(capsys.readouterr().err.split())


def test_outputs_that_are_not_json_or_lack_the_key_are_named(tmp_path: Path) -> None:
    out = tmp_path / "output"
    (out / "batch-1").mkdir(parents=True)
    (out / "batch-1" / "part-00000").write_text('{"customer": "c1", "revenue": 5}\n{"customer": "c2", "revenue": 7}\n')
    (out / "batch-2").mkdir()
    (out / "batch-2" / "part-00000").write_text('{"customer": "c1", "revenue": 9}\n')
    (out / "batch-2" / "_SUCCESS").write_text("")
    rows = _read_dir(out, "legacy")
    assert _shape(rows, ("customer",), "final", "legacy").to_dict("records") == [
        {"customer": "c1", "revenue": 9}, {"customer": "c2", "revenue": 7}]
    assert len(_shape(rows, ("customer",), "all", "legacy")) == 3
    with pytest.raises(ConfigError, match="has no 'client' field; it has \\['customer', 'revenue'\\]"):
        _shape(rows, ("client",), "final", "legacy")
    (out / "batch-3").mkdir()
    (out / "batch-3" / "part-00000").write_text("c3,11\n")
    with pytest.raises(ConfigError, match="batch-3/part-00000:1 is not a JSON object: 'c3,11'"):
        _read_dir(out, "legacy")


def test_sql_outputs_are_read_from_each_jobs_own_table(tmp_path: Path) -> None:
    import sqlite3

    from compare.jobs import ScriptEngine, read_output
    from kit.engine import DriverConfig

    db = tmp_path / "out.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE totals_legacy (customer TEXT, revenue INTEGER)")
        connection.executemany("INSERT INTO totals_legacy VALUES (?, ?)", [("c1", 5), ("c2", 7), ("c1", 9)])
    engine = ScriptEngine("legacy", "python job.py {bootstrap} {topic} {output_dsn} {output_table}",
                          output=f"sql:sqlite://{db}#totals")
    config = DriverConfig(engine="legacy", bootstrap_servers="127.0.0.1:9092", topics={"input": "t"},
                          out_dir=str(tmp_path / "legacy"), checkpoint_dir=str(tmp_path / "ckpt"))
    assert engine.placeholders(config)["output_table"] == "totals_legacy"
    rows = read_output("sql", engine, config)
    assert _shape(rows, ("customer",), "final", "legacy").to_dict("records") == [
        {"customer": "c1", "revenue": 9}, {"customer": "c2", "revenue": 7}]
    modern = ScriptEngine("modern", "python job.py", output=f"sql:{db}#totals")
    with pytest.raises(ConfigError, match="output table totals_modern cannot be read"):
        read_output("sql", modern, config)


@pytest.mark.parametrize("output", ["sql:#t", "sql:/tmp/x.db", "sql:/tmp/x.db#drop table", "kafka"])
def test_a_bad_output_is_refused(tmp_path: Path, output: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare-jobs", "--input", "x.jsonl", "--key", "k", "--output", output, "--legacy",
                 "python a.py {bootstrap} {topic} {output_table}", "--modern", "python b.py {bootstrap} {topic} "
                 "{output_table}", "--out", str(tmp_path / "run")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "--output must be 'topic', 'dir' or 'sql:DSN#TABLE'" in err


def test_sql_outputs_in_postgresql(tmp_path: Path, postgres_dsn_factory) -> None:
    import psycopg

    from compare.jobs import ScriptEngine, read_output
    from kit.engine import DriverConfig

    dsn = postgres_dsn_factory()
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE totals_modern (customer TEXT PRIMARY KEY, revenue BIGINT)")
        connection.execute("INSERT INTO totals_modern VALUES ('c1', 9), ('c2', 7)")
    engine = ScriptEngine("modern", "python job.py", output=f"sql:{dsn}#totals")
    config = DriverConfig(engine="modern", bootstrap_servers="127.0.0.1:9092", topics={"input": "t"},
                          out_dir=str(tmp_path / "modern"), checkpoint_dir=str(tmp_path / "ckpt"))
    rows = read_output("sql", engine, config)
    assert _shape(rows, ("customer",), "final", "modern").to_dict("records") == [
        {"customer": "c1", "revenue": 9}, {"customer": "c2", "revenue": 7}]


@pytest.mark.kafka
def test_a_modern_script_reads_and_writes_format_kafka_in_batch_too(
    kafka_broker: str, topic_factory, tmp_path: Path
) -> None:
    """The stand-in serves Spark's own batch API as well: write.format("kafka") (append, Spark's only mode
    for Kafka) and read.format("kafka"), in a script run as compare-jobs runs it."""
    import subprocess
    import sys

    topic = topic_factory(2)
    script = tmp_path / "batch_job.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "bootstrap, topic = sys.argv[1:3]\n"
        "spark = SparkSession.builder.master('local[1]').getOrCreate()\n"
        "rows = spark.createDataFrame([('a', '1'), ('b', '2'), ('c', '3')], 'key string, value string')\n"
        "rows.write.format('kafka').option('kafka.bootstrap.servers', bootstrap).option('topic', topic).save()\n"
        "back = (spark.read.format('kafka').option('kafka.bootstrap.servers', bootstrap).option('subscribe', topic)"
        ".load())\n"
        "print('read back', sorted(r.value.decode() for r in back.select('value').collect()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "compare.jobrun", "--engine", "modern", "--progress", str(tmp_path / "p.jsonl"),
         str(script), kafka_broker, topic], capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read back ['1', '2', '3']" in done.stdout
    assert "format('kafka') is served by the kit's kafka-py source and sink" in done.stderr
    with Kafka(kafka_broker) as kafka:
        assert sum(kafka.end_offsets(topic).values()) == 3


# -- bad input of the inputs other than Kafka, printed output and --mode batches: jobs without Spark ---------

_FAKE = '''"""A job without Spark: reads the harness's socket and reports its batches as the stand-ins would."""
import json, os, socket, sys, time
from pathlib import Path

side, behaviour, checkpoint = sys.argv[1:4]
out = Path(checkpoint).parent / side  # the run directory's side: where the stand-ins write


def write(name, row):
    with open(out / name, "a") as f:
        f.write(json.dumps(row) + "\\n")


write("inputs.jsonl", {"kind": "files" if behaviour == "reads-files" else "socket", "at": "fake.py:13"})
connection = None
if behaviour != "reads-files":
    host, port = os.environ["DMK_SOCKET"].rsplit(":", 1)
    connection = socket.create_connection((host, int(port)))
    connection.settimeout(0.3)
lines, first, pending = 0, True, b""
while True:
    batch_ms = int(time.time() * 1000)
    data = b""
    try:
        data = connection.recv(1 << 20) if connection is not None else time.sleep(0.3) or b""
    except socket.timeout:
        pass
    pending += data
    complete, newline, pending = pending.rpartition(b"\\n")
    got = complete.decode().split("\\n") if newline else []
    before, lines = lines, lines + len(got)
    if behaviour == "prints" and (got or first):  # each line numbered: the same rows however they were cut
        write("printed.jsonl", {"stream": "fake.py:30", "kind": "line", "batch_ms": batch_ms, "line": "-" * 43})
        for number, line in enumerate(got, start=before + 1):
            write("printed.jsonl", {"stream": "fake.py:30", "kind": "row", "batch_ms": batch_ms,
                                    "values": [number, line], "names": None})
    if side == "legacy" or got or first:  # a DStream job's batches come by the clock; a query's with data
        write("progress.jsonl", {"batch_ms": batch_ms, "completed_ms": int(time.time() * 1000),
                                 "records": lines - before, "ranges": [["lines", 0, before, lines]]})
    first = False
'''


def _fake_pair(tmp_path: Path, legacy: str, modern: str) -> list[str]:
    fake = tmp_path / "fake.py"
    fake.write_text(_FAKE)
    return ["--legacy", f"python {fake} legacy {legacy} {{checkpoint}} {{socket_host}} {{socket_port}}",
            "--modern", f"python {fake} modern {modern} {{checkpoint}} {{socket_host}} {{socket_port}}"]


def _lines_capture(path: Path, lines: list[str]) -> Path:
    from kit.capture import CAPTURE_FORMAT, _write
    from kit.dataset import _manifest_path, _sha256

    n = len(lines)
    _write(path, "jsonl", {"partition": [0] * n, "offset": list(range(n)), "timestamp_ms": [1_700_000_000_000] * n,
                           "timestamp_type": ["CreateTime"] * n, "key": [None] * n,
                           "value": [line.encode() for line in lines], "headers": [[] for _ in lines]})
    _manifest_path(path).write_text(json.dumps({"format": CAPTURE_FORMAT, "sha256": _sha256(path)}))
    return path


def _fake_run(tmp_path: Path, kafka_broker: str, capture: Path, legacy: str, modern: str, *extra: str) -> int:
    return main(["compare-jobs", "--input", str(capture), "--key", "_1", "--output", "printed", "--out",
                 str(tmp_path / "run"), "--bootstrap-servers", kafka_broker, "--timeout", "60",
                 *_fake_pair(tmp_path, legacy, modern), *extra])


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The CLI's error: its one line on stderr besides the progress bars."""
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("feed ", "replay "))]
    assert len(lines) == 1, lines
    return lines[0]


def _both_logs(run: Path) -> bool:
    return all((run / side / "job.log").read_text().startswith("--- ") for side in ("legacy", "modern"))


@pytest.mark.kafka
def test_the_fake_jobs_compare_equal_so_their_errors_below_are_the_inputs(
    kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = _lines_capture(tmp_path / "w.jsonl", ["a b a", "c", "b b"])
    assert _fake_run(tmp_path, kafka_broker, capture, "prints", "prints", "--mode", "all") == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["jobs"]["legacy"]["rows_compared"] == 3 and metrics["jobs"]["legacy"]["input_kind"] == "socket"


@pytest.mark.kafka
@pytest.mark.parametrize("silent", ["legacy", "modern"])
def test_a_printed_output_where_a_job_printed_nothing_is_a_one_line_error(
    kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], silent: str
) -> None:
    capture = _lines_capture(tmp_path / "w.jsonl", ["a b a", "c"])
    behaviours = {"legacy": "prints", "modern": "prints", silent: "silent"}
    assert _fake_run(tmp_path, kafka_broker, capture, behaviours["legacy"], behaviours["modern"]) == 2
    err = _error(capsys)
    assert f"the {silent} job printed nothing" in err
    assert "choose another --output (topic, dir, sql:...)" in err and str(tmp_path / "run" / silent / "job.log") in err
    assert _both_logs(tmp_path / "run")  # raised once both had run


@pytest.mark.kafka
def test_a_job_that_reads_another_input_kind_is_refused_once_both_ran(
    kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = _lines_capture(tmp_path / "w.jsonl", ["a b a", "c"])
    assert _fake_run(tmp_path, kafka_broker, capture, "reads-files", "prints") == 2
    err = _error(capsys)
    assert "the legacy job reads no socket input, which is what it was given; it opened files at fake.py:13" in err
    assert "pass --input-kind files" in err
    assert _both_logs(tmp_path / "run")
    # The modern job was run to its end all the same: its log and its printed rows are there to read.
    assert (tmp_path / "run" / "modern" / "printed.jsonl").exists()


@pytest.mark.kafka
def test_mode_batches_where_no_batch_consumed_input_is_a_one_line_error(
    kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = _lines_capture(tmp_path / "empty.jsonl", [])
    assert _fake_run(tmp_path, kafka_broker, capture, "prints", "prints", "--mode", "batches") == 2
    err = _error(capsys)
    assert "--mode batches: the legacy job reported no batch that consumed input" in err
    assert "use --mode final or all" in err and _both_logs(tmp_path / "run")


@pytest.mark.parametrize(("extra", "message"), [
    (["--mode", "batches", "--output", "dir"], "--mode batches needs outputs whose batch is known"),
    (["--input-kind", "queue"], "--input-kind queue cannot feed the modern job: PySpark has no MemoryStream"),
    (["--input-kind", "socket,pipe"], "--input-kind must be one of kafka, socket, files, queue"),
])
def test_bad_input_kinds_and_modes_are_refused_before_anything_runs(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare-jobs", "--input", "x.jsonl", "--key", "_1", "--out", str(tmp_path / "run"),
                 "--legacy", "python a.py {input_dir} {output_dir}", "--modern", "python b.py {input_dir} {output_dir}",
                 *extra])
    assert code == 2 and message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "run").exists()


def test_a_createstream_job_names_its_quorum_with_the_zookeeper_placeholder() -> None:
    from compare.jobs import JobsSettings

    settings = JobsSettings(input_file="x.jsonl", key=("_1",), out_dir=Path("run"), output="printed",
                            legacy="python kafka_wordcount.py {zookeeper} {topic}",
                            modern="python new.py {bootstrap} {topic}")
    assert settings.input_kinds == {"legacy": "kafka", "modern": "kafka"}
    with pytest.raises(ConfigError, match=r"--legacy never names \{bootstrap\}"):
        JobsSettings(input_file="x.jsonl", key=("_1",), out_dir=Path("run"), output="printed",
                     legacy="python job.py localhost:2181 {topic}", modern="python new.py {bootstrap} {topic}")


# -- a cutover of the team's own job (--cutover-at; dmk cutover --state-from) -------------------------------

CUTOVER_MODERN = MODERN + " {starting_offsets} {initial_state}"
CUT_AT = 700
STATE_EACH_BATCH = "python tests/cutover_jobs/orders_state_each_batch.py {bootstrap} {topic} {output_topic} {checkpoint}"
"""The orders job with its state stream checkpointed every batch: its checkpoint holds the state at any batch."""


def _halves(captured: Path) -> tuple[object, object]:
    """The capture's first :data:`CUT_AT` records in arrival order (what the legacy job reads) and the rest."""
    from kit.capture import arrival_order

    ordered = arrival_order(read_capture(captured)).reset_index(drop=True)
    return ordered.iloc[:CUT_AT], ordered.iloc[CUT_AT:]


def _customers(frame: object) -> set[str]:
    totals = expected_revenue(frame)
    return set(totals["customer"]) if len(totals) else set()


@pytest.mark.kafka
def test_a_cutover_mid_stream_continues_the_legacy_output_exactly(
    kafka_broker: str, captured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state is read from the stopped job's checkpoint (its updateStateByKey RDD at its last completed batch);
    # dmk cutover then reads the same state from its output, and from the checkpoint, below.
    monkeypatch.chdir(REPO)
    run = tmp_path / "run"
    code, metrics = _run(run, captured, kafka_broker, CUTOVER_MODERN, "--cutover-at", str(CUT_AT),
                         "--oracle", "examples.orders:expected_revenue", "--cutover-state", "checkpoint",
                         "--state-columns", "revenue,orders", legacy=STATE_EACH_BATCH)
    assert code == 0 and metrics["equivalent"], (run / "report.md").read_text()
    before, after = _halves(captured)
    expected = expected_revenue(read_capture(captured))
    assert metrics["modern_vs_legacy"]["rows_matched"] == len(expected) == metrics["oracle"]["rows"]
    assert metrics["oracle"]["modern_vs_oracle"]["rows_matched"] == len(expected)
    cut = metrics["cutover"]
    # The position dmk cutover read from the stopped job's checkpoint: exactly the first 700 records' ends.
    ((topic, position),) = cut["position"].items()
    assert {int(p): o for p, o in position.items()} == before.groupby("partition").size().to_dict()
    assert sum(position.values()) == CUT_AT
    # The seed: the legacy job's state per customer, i.e. the oracle over the records before the position.
    seed = pd.read_parquet(cut["seed_file"]).sort_values("customer").reset_index(drop=True)
    oracle_before = expected_revenue(before).sort_values("customer").reset_index(drop=True)
    pd.testing.assert_frame_equal(seed[["customer", "revenue", "orders"]], oracle_before, check_dtype=False)
    assert cut["keys_seeded"] == len(oracle_before) and cut["legacy_before"]["input_records"] == CUT_AT
    assert metrics["jobs"]["modern"]["input_records"] == 1_500 - CUT_AT
    # The modern job wrote a row for every customer with an order after the position, and only for those.
    modern_rows = _read_topic_values(kafka_broker, f"{topic}.modern.out")
    assert set(modern_rows["customer"]) == _customers(after)
    assert cut["modern_rows_after"] == len(modern_rows) and cut["state_from"] == "checkpoint"
    assert "Cutover after 700 records" in (run / "report.md").read_text()
    assert cut["seed_bytes"] == Path(cut["seed_file"]).stat().st_size
    # dmk cutover --state-from, on the same stopped job: the same seed from its checkpoint and from its output.
    checkpoint = str(run / "cutover" / "legacy-checkpoint")
    for n, state_from in enumerate(([checkpoint, "--state-columns", "revenue,orders"], [f"kafka:{topic}.legacy.out"])):
        out = tmp_path / f"seed-{n}.parquet"
        assert main(["cutover", "checkpoint", checkpoint, "--state-from", *state_from, "--key", "customer",
                     "--seed-state", str(out), "--bootstrap-servers", kafka_broker]) == 0, state_from
        pd.testing.assert_frame_equal(pd.read_parquet(out).sort_values("customer").reset_index(drop=True), seed)


def _read_topic_values(bootstrap: str, topic: str) -> pd.DataFrame:
    from compare.jobs import _read_topic

    return _read_topic(bootstrap, topic, "modern")


@pytest.mark.slow
@pytest.mark.kafka
def test_a_cutover_without_the_legacy_state_is_caught_at_the_keys_it_loses(
    kafka_broker: str, captured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The modern job starts at the position but not from the legacy totals: every customer with orders on both
    # sides of the cutover ends on its post-cutover totals alone.
    monkeypatch.chdir(REPO)
    code, metrics = _run(tmp_path / "run", captured, kafka_broker, MODERN + " {starting_offsets}",
                         "--cutover-at", str(CUT_AT))
    before, after = _halves(captured)
    both = _customers(before) & _customers(after)
    assert code == 1 and not metrics["equivalent"] and both
    assert metrics["modern_vs_legacy"]["rows_mismatched"] == len(both)
    assert metrics["modern_vs_legacy"]["rows_missing"] == metrics["modern_vs_legacy"]["rows_unexpected"] == 0


@pytest.mark.parametrize(("modern", "extra", "message"), [
    (MODERN, [], "--cutover-at needs the modern command to name {starting_offsets}"),
    (CUTOVER_MODERN, ["--mode", "batches"], "--cutover-at cannot be combined with --mode batches"),
    (CUTOVER_MODERN, ["--output", "printed"], "--cutover-at needs an output the kit reads as one table"),
    (CUTOVER_MODERN.replace("{topic}", "{input_dir}"), [], "--cutover-at needs both jobs to read Kafka"),
    (CUTOVER_MODERN, ["--state-columns", "revenue,orders"], "--cutover-at with --state-columns needs --cutover-state checkpoint"),
])
def test_a_cutover_the_run_cannot_do_is_refused_before_anything_runs(
    tmp_path: Path, modern: str, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare-jobs", "--input", "x.jsonl", "--key", "customer", "--out", str(tmp_path / "run"),
                 "--legacy", LEGACY, "--modern", modern, "--cutover-at", "10", *extra])
    assert code == 2 and message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "run").exists()


def test_state_from_an_output_is_its_last_row_per_key_and_refused_where_rows_may_be_beyond_the_position(
    tmp_path: Path,
) -> None:
    from compare.cutover import CutoverAmbiguous, CutoverPlan, LegacyPosition, PositionSource, own_seed, read_state_from

    (tmp_path / "out").mkdir()
    rows = [{"customer": "a", "revenue": 1}, {"customer": "b", "revenue": 5}, {"customer": "a", "revenue": 3}]
    (tmp_path / "out" / "part-00000").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    output = read_state_from(str(tmp_path / "out"))
    checkpoint = PositionSource("checkpoint", "ckpt")
    exact = CutoverPlan(LegacyPosition(checkpoint, {("orders", 0): 3}, exact=True))
    seed = own_seed(exact, output, ("customer",))
    assert seed.sort_values("customer").to_dict("records") == [{"customer": "a", "revenue": 3},
                                                               {"customer": "b", "revenue": 5}]
    pending = CutoverPlan(LegacyPosition(checkpoint, {("orders", 0): 3}, exact=False, pending=(2000,)))
    with pytest.raises(CutoverAmbiguous, match="batches 2000 were accepted pending"):
        own_seed(pending, output, ("customer",))
    group = PositionSource("kafka", "job", topics=("orders",), bootstrap_servers="b:9092")
    with pytest.raises(CutoverAmbiguous, match="a kafka store is written after the outputs"):
        own_seed(CutoverPlan(LegacyPosition(group, {("orders", 0): 3}, exact=False)), output, ("customer",))
    with pytest.raises(ConfigError, match="the legacy job's output has no 'user' field"):
        own_seed(exact, output, ("user",))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "checkpoint-1000").write_bytes(b"")
    with pytest.raises(ConfigError, match="is a DStream checkpoint"):
        read_state_from(str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError, match="reads a topic: give --bootstrap-servers"):
        read_state_from("kafka:orders.out")


@pytest.mark.parametrize(("extra", "message"), [
    (["--state-from", "out", "--seed-state", "s.parquet"], "needs --key"),
    (["--state-from", "out", "--key", "k"], "needs --seed-state"),
    (["--state-from", "out", "--key", "k", "--seed-state", "s.parquet", "--workload", "running_counts"],
     "--state-from is for your own job and --workload for the kit's workloads"),
    (["--state-from", "out", "--key", "k", "--seed-state", "s.parquet", "--state-columns", "n"],
     "--state-columns names the fields of a state read from a checkpoint; out is an output"),
])
def test_state_from_without_its_arguments_is_refused(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cutover", "checkpoint", str(tmp_path), *extra]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_a_checkpoint_state_becomes_rows_named_by_the_key_and_the_state_columns() -> None:
    from compare.cutover import state_rows

    totals = [("c1", (120, 2)), ("c2", (5, 1))]
    assert state_rows(totals, ("customer",), ("revenue", "orders")).to_dict("records") == [
        {"customer": "c1", "revenue": 120, "orders": 2}, {"customer": "c2", "revenue": 5, "orders": 1}]
    assert state_rows([(("u", "click"), 3)], ("user", "event_type")).to_dict("records") == [
        {"user": "u", "event_type": "click", "state": 3}]
    assert state_rows([("u", {"n": 1, "last": 9})], ("user",)).to_dict("records") == [{"user": "u", "n": 1, "last": 9}]
    assert list(state_rows([], ("customer",)).columns) == ["customer"]
    with pytest.raises(ConfigError, match="name its 2 fields with --state-columns"):
        state_rows(totals, ("customer",))
    with pytest.raises(ConfigError, match=r"the state's key 'c1' does not fit --key customer,country \(2 columns\)"):
        state_rows(totals, ("customer", "country"), ("revenue", "orders"))


def test_the_state_is_read_only_at_the_last_completed_batch() -> None:
    from legacy.inspect import DStreamNode, LegacyCheckpoint, last_completed_batch_ms, state_at_last_batch

    def checkpoint(time_ms: int, pending: tuple[int, ...], files: dict[int, str]) -> LegacyCheckpoint:
        state = DStreamNode(id=2, kind="PythonStateDStream", slide_ms=1000, remember_ms=None, checkpoint_ms=1000,
                            state_files=files)
        out = DStreamNode(id=1, kind="ForEachDStream", slide_ms=1000, remember_ms=None, parents=(state,))
        return LegacyCheckpoint(directory="file:/ckpt", files=(), used_file="checkpoint-9000", checkpoint_time_ms=time_ms,
                                batch_duration_ms=1000, checkpoint_interval_ms=None, master="local[2]", app_name="job",
                                written_dir="/ckpt", pending_batch_ms=pending, graph=(out,), direct_streams=())

    files = {7000: "file:/ckpt/rdd-7", 8000: "file:/ckpt/rdd-8"}
    # Written when batch 8000 completed; written when batch 9000 was generated (pending): 8000 is the last either way.
    assert last_completed_batch_ms(checkpoint(8000, (), files)) == 8000
    assert state_at_last_batch(checkpoint(9000, (9000,), files)) == (8000, "file:/ckpt/rdd-8")
    with pytest.raises(ConfigError, match="holds the job's state at batch 7000, not at its last completed batch 8000"):
        state_at_last_batch(checkpoint(8000, (), {7000: "file:/ckpt/rdd-7"}))
    with pytest.raises(ConfigError, match="holds the job's state at no batch yet"):
        state_at_last_batch(checkpoint(8000, (), {}))


@pytest.mark.kafka
def test_cutover_options_without_a_cutover_or_past_the_capture_are_refused(
    captured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(tmp_path / "a"),
                 "--legacy", LEGACY, "--modern", CUTOVER_MODERN, "--cutover-state", "checkpoint"])
    assert code == 2 and "add --cutover-at N" in " ".join(capsys.readouterr().err.split())
    code = main(["compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(tmp_path / "b"),
                 "--legacy", LEGACY, "--modern", CUTOVER_MODERN, "--cutover-at", "1500"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "--cutover-at 1500 leaves the modern job nothing: the capture holds 1,500 records" in err
