"""``dmk migrate --out``: the draft carries the job's own code and a runtime, binds its streaming imports, and
names what it cannot carry (default tier: no JVM; tests/test_migrate_drafts_run.py runs the drafts)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import analyse, analyse_source, draft
from migrate.columns import column
from migrate.draft import make_draft

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "tests" / "migrate_jobs"
ALL_JOBS = sorted([*JOBS.glob("*.py"), *(REPO / "examples").rglob("*.py")])
RUNS = {"kafka_direct_word_counts.py", "socket_word_counts.py", "checkpointed_word_counts.py",
        "stateful_word_totals.py", "windowed_wordcount.py", "legacy_job.py", "aliases_and_chains.py"}


def _job_code(text: str) -> str:
    return text[text.index("# ---- end of the runtime: the job's own code ----"):]


@pytest.mark.parametrize("path", ALL_JOBS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_draft_parses_compiles_and_carries_the_job(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    plan = analyse(path)
    result = make_draft(plan, lifting=False)  # the runtime draft; lifted ones: test_lifted_*
    compile(result.text, str(path), "exec")
    compile(make_draft(plan).text, str(path), "exec")
    # The job's own lines are all there, in order, but for its pyspark.streaming imports (kept as "# was:" comments).
    streaming = set()
    for node in ast.walk(ast.parse(source)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
            a.name for a in node.names] if isinstance(node, ast.Import) else []
        if any(n.startswith(("pyspark.streaming", "legacy.kafka")) for n in names):
            streaming |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    # Lines fixed for Python 3 (migrate/python2.py) are checked by tests/test_migrate_python2.py.
    fixed = {n for fix in plan._facts.get("python2_fixes", []) for e in fix.edits for n in range(e.line, e.end_line + 1)}
    code = result.text.splitlines()
    position = 0
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() and number not in streaming | fixed:
            position = code.index(line, position) + 1
    assert "TODO" not in _job_code(result.text)


def test_which_repository_jobs_run_as_written() -> None:
    runs = {p.name for p in ALL_JOBS if p.name in RUNS | {"aliases_and_chains.py", "every_construct.py",
                                                              "kafka_offsets_to_db.py", "unknown_constructs.py"}
            and make_draft(analyse(p)).runs}
    assert runs == RUNS


def test_the_imports_are_bound_to_the_runtime_and_the_rest_kept() -> None:
    text = make_draft(analyse(JOBS / "kafka_direct_word_counts.py"), lifting=False).text
    assert ('so the plan has rate settings to report.\n"""\n\n'  # after the module's docstring
            "# Structured Streaming draft of " + str(JOBS / "kafka_direct_word_counts.py") + ",\n") in text
    assert ("# was: from pyspark.streaming import StreamingContext\nStreamingContext = MicroBatchContext\n"
            "# was: from pyspark.streaming.kafka import KafkaUtils\nKafkaUtils = MicroBatchKafka\n") in text
    assert ('    records = KafkaUtils.createDirectStream(streaming, [topic], {"metadata.broker.list": brokers})\n'
            in text)
    assert "DRAFT_UNRESOLVED = []\n" in text
    # The runtime is migrate/microbatch.py's, from its "begin runtime" line; nothing of the kit is imported.
    runtime = (REPO / "migrate" / "microbatch.py").read_text(encoding="utf-8")
    assert runtime[runtime.index("# ---- begin runtime ----"):].rstrip("\n") in text
    imported = {a.name.split(".")[0] for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"kit", "legacy", "modern", "compare", "migrate"}


def test_other_spellings_of_the_imports() -> None:
    source = (
        "import pyspark.streaming.kafka as psk\n"
        "import pyspark.streaming as ps\n"
        "import pyspark.streaming.kafka\n"
        "from legacy.kafka import KafkaUtils as KU, get_or_create\n"
        "def make():\n"
        "    from pyspark.streaming import StreamingContext as SC, DStream\n"
        "    ssc = SC(sc, 1)\n"
        "    return ssc\n"
    )
    result = make_draft(analyse_source(source, "job.py"))
    code = _job_code(result.text)
    assert "psk = _streaming_module().kafka\n" in code and "ps = _streaming_module()\n" in code
    assert "import pyspark\npyspark.streaming = _streaming_module()\n" in code
    assert "KU = MicroBatchKafka\nget_or_create = MicroBatchContext.getOrCreate\n" in code
    assert "    SC = MicroBatchContext\n    DStream = MicroBatchStream\n" in code
    assert result.runs
    star = _job_code(draft(analyse_source("from pyspark.streaming import *\nfrom pyspark.streaming.kafka import *\n",
                                          "job.py")))
    assert ("StreamingContext = MicroBatchContext\nDStream = MicroBatchStream\n"
            "# was: from pyspark.streaming.kafka import *\nKafkaUtils = MicroBatchKafka\n") in star


def test_what_cannot_be_carried_is_named_and_the_draft_refuses_to_start(tmp_path: Path) -> None:
    result = make_draft(analyse(JOBS / "unknown_constructs.py"))
    assert not result.runs
    assert result.unresolved == (
        "line 11: DStream.foreach: not a DStream API the draft carries (dmk migrate does not know it): port it by hand",
        "line 12: DStream._jdstream: not a DStream API the draft carries (dmk migrate does not know it): port it by "
        "hand",
        "line 13: StreamingContext.awaitTerminationOrTimeoutSeconds: not a DStream API the draft carries (dmk "
        "migrate does not know it): port it by hand",
        "line 14: DStream.saveAsHadoopFiles: not a DStream API the draft carries (dmk migrate does not know it): "
        "port it by hand",
    )
    assert [u.split(":")[1].strip() for u in make_draft(analyse(JOBS / "every_construct.py")).unresolved] == [
        "pyspark.streaming.StreamingListener", "StreamingListener", "StreamingContext.addStreamingListener",
        "DStream.slice", "KafkaUtils.createRDD"]
    assert [u.split(":")[1].strip() for u in make_draft(analyse(JOBS / "kafka_offsets_to_db.py")).unresolved] == [
        "offsetRanges"]
    # It stops before any of the job's code runs (no JVM: the runtime imports pyspark only when a context starts).
    path = tmp_path / "draft.py"
    path.write_text(result.text, encoding="utf-8")
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip() == ("this draft of " + str(JOBS / "unknown_constructs.py") + " cannot run as written; "
                                  "port by hand: " + "; ".join(result.unresolved))


def test_the_draft_of_a_job_without_streaming_imports_is_the_job() -> None:
    source = "x = 1\nprint(x)\n"
    text = draft(analyse_source(source, "job.py"))
    assert text.endswith("# ---- end of the runtime: the job's own code ----\n\nx = 1\nprint(x)\n")


def test_per_record_functions_with_a_column_expression() -> None:
    """The translator the analysis uses to mark map/filter/flatMap automatic (migrate.columns)."""
    source = (
        "from pyspark.streaming.kafka import KafkaUtils\n"
        "kvs = KafkaUtils.createDirectStream(ssc, ['a'], {'metadata.broker.list': 'k:9092'})\n"
        "big = kvs.filter(lambda kv: len(kv[1]) > 10 and kv[0] in ('x', 'y'))\n"
        "words = big.map(lambda kv: kv[1]).flatMap(lambda line: line.split('.'))\n"
        "pairs = words.map(lambda w: (w.lower(), 1))\n"
        "parsed = kvs.map(lambda kv: json.loads(kv[1]))\n"
        "tagged = pairs.filter(lambda p: p[0] + 'x' == 'ax')\n"
    )
    plan = analyse_source(source, "job.py")
    lambdas = sorted((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Lambda)),
                     key=lambda n: (n.lineno, n.col_offset))
    assert [column(f.body, f.args.args[0].arg, model) for f, model in zip(lambdas, (
            "kafka", "kafka", "value", "value", "kafka", ("tuple", 2)), strict=True)] == [
        '((F.length(F.col("value").cast("string")) > F.lit(10)) & F.col("key").cast("string").isin(["x", "y"]))',
        'F.col("value").cast("string")', 'F.split(F.col("value"), "\\\\.")', None, None, None]
    # json.loads has no column expression without a schema; str + str is a concatenation, not Spark's +.
    assert [(f.line, f.automatic) for f in plan.findings if f.construct in ("DStream.map", "DStream.filter",
                                                                            "DStream.flatMap")] == [
        (3, True), (4, True), (4, True), (5, True), (6, False), (7, False)]


def test_calls_on_untraced_streams_keep_the_draft_from_starting() -> None:
    """The plan counts them unresolved (streams built in another module), so the draft does not claim to run."""
    plan = analyse(JOBS / "untraced_streams.py")
    untraced = sorted({f.line for f in plan.findings if f.status == "unresolved"})
    made = make_draft(plan)
    assert not made.runs
    assert sorted({int(item.split(":")[0].removeprefix("line ")) for item in made.unresolved}) == untraced
    assert all("could not trace" in item for item in made.unresolved)


# -- lifted drafts (migrate/lift.py): a job made only of known idioms becomes DataFrame code -----------------


def _main_block(text: str) -> str:
    return text[text.index('if __name__ == "__main__":'):]


def test_a_per_batch_count_is_lifted_to_a_foreachbatch_aggregation() -> None:
    result = make_draft(analyse(JOBS / "hashtag_counts.py"))
    assert result.runs and result.lifted
    assert "MicroBatchContext" not in result.text and "begin runtime" not in result.text
    assert _main_block(result.text) == '''if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("Usage: hashtag_counts.py <host> <port>", file=sys.stderr)
        sys.exit(2)
    sc = SparkContext(appName="HashtagCounts")
    # was: ssc = StreamingContext(sc, 1)
    spark = SparkSession.builder.getOrCreate()
    # DStream's reduceByKey used the default parallelism: so do the aggregations here.
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    # was: posts = ssc.socketTextStream(sys.argv[1], int(sys.argv[2]))
    posts = spark.readStream.format("socket").option("host", sys.argv[1]).option("port", int(sys.argv[2])).load()
    # was: tags = posts.flatMap(lambda post: post.split(" ")).filter(lambda w: "#" in w)
    tags = posts.select(F.explode(F.split(F.col("value"), " ")).alias("value")).where(F.col("value").contains("#"))
    # was: counts = tags.map(lambda tag: (tag, 1)).reduceByKey(add)
    counts = tags.select(F.col("value").alias("_1"), F.lit(1).alias("_2"))
    # was: counts.pprint(5)
    def print_batch_1(batch_df, batch_id):
        """This micro-batch's result, per batch as the DStream's reduceByKey was, printed as pprint."""
        result = batch_df.groupBy("_1").count().withColumnRenamed("count", "_2")
        take_and_print(batch_time(), result.rdd.map(tuple), 5)

    writer_1 = (counts.writeStream.outputMode('append')
                .trigger(processingTime="1 seconds").foreachBatch(print_batch_1))
    # was: ssc.start()
    query_1 = writer_1.start()
    # was: ssc.awaitTermination()
    query_1.awaitTermination()
'''
    # The streaming imports are gone; the job's other imports, argv handling and SparkContext stay.
    assert "# was: from pyspark.streaming import StreamingContext (the draft uses no DStream)\n" in result.text
    assert "from operator import add\n" in result.text
    assert "'x' in w → contains" in " ".join(result.lifted)


def test_updatestatebykey_with_a_count_fold_is_a_complete_mode_aggregation() -> None:
    result = make_draft(analyse(JOBS / "running_word_totals.py"))
    assert result.lifted
    block = _main_block(result.text)
    assert ('    totals = words.select(F.lower(F.col("value")).alias("_1"), F.lit(1).alias("_2")).groupBy("_1")'
            '.agg(F.count("_2").alias("_2"))\n') in block
    assert "writer_1 = (totals.writeStream.outputMode('complete')\n" in block
    assert 'spark.readStream.format("text").load(sys.argv[1])' in block
    # It never restored from its checkpoint (no getOrCreate), so neither does the query: no checkpointLocation.
    assert not [line for line in block.splitlines() if "checkpointLocation" in line and not line.strip().startswith("#")]
    assert "# was: ssc.checkpoint(\"/tmp/running-word-totals\")\n" in block
    assert any("already in the directory" in idiom for idiom in result.lifted)


def test_an_initial_rdd_is_merged_by_the_same_fold() -> None:
    block = _main_block(make_draft(analyse(JOBS / "stateful_word_totals.py")).text)
    assert '''    def print_batch_1(batch_df, batch_id):
        """Every key's running result (complete mode: all keys each batch, as updateStateByKey emitted them)."""
        initial = spark.createDataFrame(seed).toDF("_1", "_2")
        merged = batch_df.alias("b").join(initial.alias("i"), "_1", "full_outer")
        result = merged.select("_1", (F.coalesce("b._2", F.lit(0)) + F.coalesce("i._2", F.lit(0))).alias("_2"))
        take_and_print(batch_time(), result.rdd.map(tuple), 10)
''' in block


def test_a_kafka_direct_stream_is_lifted_to_the_kafka_source() -> None:
    source = (JOBS / "kafka_direct_word_counts.py").read_text(encoding="utf-8")
    # Its spark.streaming.* settings (backpressure, maxRatePerPartition) have no setting of the query: not lifted.
    assert not make_draft(analyse_source(source, "job.py")).lifted
    conf = source[source.index("    settings = SparkConf()"):source.index("    spark_context = SparkContext(conf=settings)")]
    block = _main_block(make_draft(analyse_source(source.replace(conf, ""), "job.py")).text)
    assert ('    records = spark.readStream.format("kafka").option("kafka.bootstrap.servers", brokers)'
            '.option("subscribe", topic).option("startingOffsets", "latest").load()\n') in block
    assert '    values = records.select(F.col("value").cast("string").alias("value"))\n' in block
    assert '.trigger(processingTime="2 seconds")' in block


@pytest.mark.parametrize("source", [
    # foreachRDD, a window, an unrecognised fold, a second output: the runtime runs them as written.
    "lines = ssc.socketTextStream('h', 1)\nlines.foreachRDD(print)\n",
    "lines = ssc.socketTextStream('h', 1)\nlines.window(10, 2).pprint()\n",
    "lines = ssc.socketTextStream('h', 1)\nlines.map(lambda w: (w, 1)).updateStateByKey(lambda new, old: max(new))"
    ".pprint()\n",
    "lines = ssc.socketTextStream('h', 1)\nlines.pprint()\nlines.count().pprint()\n",
    "lines = ssc.socketTextStream('h', 1)\nparsed = lines.map(lambda l: json.loads(l))\nparsed.pprint()\n",
])
def test_what_is_not_a_known_idiom_keeps_the_runtime(source: str) -> None:
    job = ("from pyspark import SparkContext\nfrom pyspark.streaming import StreamingContext\nsc = SparkContext()\n"
           "ssc = StreamingContext(sc, 1)\n" + source + "ssc.start()\nssc.awaitTermination()\n")
    result = make_draft(analyse_source(job, "job.py"))
    assert not result.lifted and "# ---- begin runtime ----" in result.text


def test_a_lifted_draft_prints_dstream_s_pprint_text(capsys: pytest.CaptureFixture[str]) -> None:
    text = make_draft(analyse(JOBS / "hashtag_counts.py")).text
    namespace: dict = {}
    exec(compile(text[:text.index('if __name__ == "__main__":')], "draft", "exec"), namespace)  # helpers only

    class Taken:
        def take(self, n: int) -> list:
            return [("#a", 3), ("#b", 1), ("#c", 2)][:n]

    namespace["take_and_print"]("2026-11-27 10:00:01", Taken(), 2)
    namespace["take_and_print"]("2026-11-27 10:00:02", Taken())
    assert capsys.readouterr().out == (
        "-------------------------------------------\nTime: 2026-11-27 10:00:01\n"
        "-------------------------------------------\n('#a', 3)\n('#b', 1)\n...\n\n"
        "-------------------------------------------\nTime: 2026-11-27 10:00:02\n"
        "-------------------------------------------\n('#a', 3)\n('#b', 1)\n('#c', 2)\n\n")


def test_the_runtime_queues_elements_as_compare_jobs_feeds_a_queue() -> None:
    """queueStream's files: JSON where it reads back the same, else a pickle; a fed line reads as its JSON value."""
    from migrate.microbatch import _queue_element, _queue_line

    elements = [7, "x", 2.5, [1, 2], {"a": 1}, (1, "a"), None, "pickle:not one"]
    lines = [_queue_line(e) for e in elements]
    assert lines[:5] == ["7", '"x"', "2.5", "[1, 2]", '{"a": 1}']
    assert lines[5].startswith("pickle:") and lines[7] == "\"pickle:not one\""  # a tuple is not JSON's list
    assert [_queue_element(line) for line in lines] == elements
    assert [_queue_element(line) for line in ["7", "to be or not", '"7"']] == [7, "to be or not", "7"]


def test_the_runtime_s_socket_receiver_reads_lines_as_spark_s_and_reconnects() -> None:
    """socketTextStream's receiver (no JVM): lines ending at LF, CR or CRLF, malformed UTF-8 replaced as Java's
    reader does, a last line without its end kept; a server that closes is connected to again, and what each
    connection sent is drained once, in order."""
    import socket
    import time

    from migrate.microbatch import _SocketReceiver

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    receiver = _SocketReceiver("127.0.0.1", port)
    received: list[str] = []

    def until(count: int) -> None:
        deadline = time.monotonic() + 30
        while len(received) < count and time.monotonic() < deadline:
            received.extend(receiver.drain())
            time.sleep(0.02)

    try:
        for payload, count in ((b"to be\r\nor not\rto\nb\xffe\n", 4), (b"again\nlast, no end", 6)):
            connection, _ = server.accept()  # the receiver connects (again, 2 s after the first server closed)
            with connection:
                connection.sendall(payload)
            until(count)
        assert received == ["to be", "or not", "to", "b\ufffde", "again", "last, no end"]
        assert receiver.drain() == []
    finally:
        receiver.stop()
        server.close()
