"""``dmk migrate``: every finding of every DStream job in the repository, the outputs, the draft, the review.

Fast tier: no JVM, no broker. The jobs under ``tests/migrate_jobs/`` are written the way Spark 2.x tutorials
wrote them; their names do not match ``test_*.py``, and the directory is no package, so pytest never imports
them (nor does the analyser: ``test_the_job_is_never_imported_or_run``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.rules import CONF_RULES, RULES
from compare.cli import main
from migrate import FINDING_KEYS, JobSourceError, analyse, analyse_source, draft, review

REPO = Path(__file__).resolve().parents[1]
JOBS = "tests/migrate_jobs"

# Every finding, as (line, construct), of every DStream job in the repository: the six legacy workloads, the
# DStream examples, and the tutorial-style jobs. Read by eye against each file; any change to the analyser
# that moves, adds or drops a finding fails here.
EXPECTED: dict[str, list[tuple[int, str]]] = {
    "legacy/workloads/dedup.py": [
        (46, "event_time_operator"), (47, "Source.events"), (49, "Source.drop_late"),
    ],
    "legacy/workloads/join.py": [
        (130, "Source.events"), (130, "DStream.filter"), (131, "Source.events"), (131, "DStream.filter"),
        (134, "DStream.union"), (134, "DStream.cache"), (135, "DStream.map"), (135, "DStream.updateStateByKey"),
        (138, "DStream.transformWith"), (138, "DStream.cache"), (139, "Source.drop_late"), (139, "DStream.filter"),
        (139, "DStream.map"), (140, "DStream.transform"), (140, "DStream.window"), (140, "DStream._slideDuration"),
        (141, "DStream.transform"),
    ],
    "legacy/workloads/nexmark_q0.py": [(21, "Source.nexmark"), (21, "DStream.map")],
    "legacy/workloads/nexmark_q1.py": [(24, "Source.nexmark"), (24, "DStream.map")],
    "legacy/workloads/nexmark_q2.py": [(23, "Source.nexmark"), (23, "DStream.filter"), (23, "DStream.map")],
    "legacy/workloads/nexmark_q3.py": [
        (61, "Source.nexmark"), (61, "DStream.filter"), (62, "Source.nexmark"), (62, "DStream.filter"),
        (63, "event_time_operator"), (64, "DStream.union"),
    ],
    "legacy/workloads/nexmark_q4.py": [
        (99, "Source.nexmark"), (99, "DStream.union"), (99, "Source.nexmark"), (100, "event_time_operator"),
        (103, "Source.drop_late"),
    ],
    "legacy/workloads/nexmark_q5.py": [(51, "event_time_operator"), (52, "Source.nexmark"), (54, "Source.drop_late")],
    "legacy/workloads/nexmark_q7.py": [(52, "event_time_operator"), (53, "Source.nexmark"), (55, "Source.drop_late")],
    "legacy/workloads/nexmark_q8.py": [
        (62, "Source.nexmark"), (62, "DStream.union"), (62, "Source.nexmark"), (63, "event_time_operator"),
        (66, "Source.drop_late"),
    ],
    "legacy/workloads/nexmark_q11.py": [(45, "event_time_operator"), (46, "Source.nexmark"), (48, "Source.drop_late")],
    "legacy/workloads/nexmark_q12.py": [
        (35, "Source.nexmark"), (35, "DStream.map"), (36, "DStream.reduceByKeyAndWindow (without inverse function)"),
        (37, "DStream.transform"),
    ],
    "legacy/workloads/running_counts.py": [
        (28, "Source.events"), (28, "DStream.map"), (28, "DStream.reduceByKey"), (29, "DStream.updateStateByKey"),
        (30, "DStream.filter"), (30, "DStream.map"),
    ],
    "legacy/workloads/sessions.py": [
        (42, "event_time_operator"), (43, "Source.events"), (45, "Source.drop_late"),
    ],
    "legacy/workloads/windowed_counts.py": [
        (54, "event_time_operator"), (55, "Source.events"), (57, "Source.drop_late"), (83, "Source.events"),
        (83, "DStream.map"), (85, "DStream.reduceByKeyAndWindow (with inverse function)"), (87, "DStream.transform"),
        (92, "DStream.union"), (92, "DStream.window"),
    ],
    "legacy/workloads/ysb.py": [
        (63, "Source.events"), (64, "DStream.filter"), (65, "DStream.map"), (66, "DStream.transform"),
        (67, "DStream.map"), (69, "event_time_operator"), (72, "Source.drop_late"),
    ],
    "examples/event_types.py": [
        (40, "Source.events"), (40, "DStream.map"), (41, "DStream.updateStateByKey"), (42, "DStream.filter"),
        (42, "DStream.map"),
    ],
    "examples/purchases.py": [
        (25, "Source.events"), (25, "DStream.filter"), (26, "DStream.map"),
    ],
    "examples/orders/legacy_job.py": [
        (49, "StreamingContext(sc, batchDuration)"), (50, "StreamingContext.checkpoint"),
        (51, "KafkaUtils.createDirectStream"), (53, "DStream.flatMap"), (53, "DStream.reduceByKey"),
        (53, "DStream.updateStateByKey"), (54, "DStream.foreachRDD"), (60, "StreamingContext.getOrCreate"),
        (61, "StreamingContext.start"), (62, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/aliases_and_chains.py": [
        (12, "DStream.map"), (12, "DStream.filter"), (16, "DStream.pprint"), (21, "KafkaUtils.createDirectStream"),
        (21, "KafkaUtils.createDirectStream"), (22, "DStream.union"), (22, "DStream.map"), (22, "DStream.filter"),
        (23, "KafkaUtils.createStream"), (26, "DStream.count"), (27, "DStream.countByValue"),
        (31, "StreamingContext(sc, batchDuration)"), (33, "DStream.pprint"), (34, "StreamingContext.start"),
        (35, "StreamingContext.awaitTermination"), (36, "StreamingContext.stop"),
    ],
    f"{JOBS}/kafka_direct_word_counts.py": [
        (20, "spark.streaming.backpressure.enabled"), (21, "spark.streaming.kafka.maxRatePerPartition"),
        (23, "StreamingContext(sc, batchDuration)"), (24, "KafkaUtils.createDirectStream"), (25, "DStream.map"),
        (26, "DStream.flatMap"), (27, "DStream.map"), (27, "DStream.reduceByKey"), (28, "DStream.pprint"),
        (29, "StreamingContext.start"), (30, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/checkpointed_word_counts.py": [
        (36, "StreamingContext(sc, batchDuration)"), (37, "StreamingContext.checkpoint"),
        (38, "StreamingContext.socketTextStream"), (39, "DStream.flatMap"), (40, "DStream.map"),
        (40, "DStream.reduceByKey"), (60, "DStream.foreachRDD"), (68, "StreamingContext.getOrCreate"),
        (70, "StreamingContext.start"), (71, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/every_construct.py": [
        (10, "spark.streaming.receiver.maxRate"), (11, "spark.streaming.receiver.writeAheadLog.enable"),
        (16, "StreamingListener"), (22, "StreamingContext(sc, batchDuration)"), (23, "StreamingContext.checkpoint"),
        (24, "StreamingContext.remember"), (25, "StreamingContext.addStreamingListener"),
        (26, "KafkaUtils.createStream"), (27, "StreamingContext.textFileStream"),
        (28, "StreamingContext.queueStream"), (29, "StreamingContext.union"), (30, "DStream.mapValues"),
        (30, "DStream.flatMapValues"), (30, "DStream.mapPartitions"), (31, "DStream.groupByKey"),
        (31, "DStream.glom"), (31, "DStream.pprint"), (32, "DStream.combineByKey"), (32, "DStream.pprint"),
        (33, "DStream.countByValue"), (33, "DStream.count"), (33, "DStream.pprint"),
        (34, "DStream.countByValueAndWindow"), (34, "DStream.pprint"), (35, "DStream.reduceByWindow"),
        (35, "DStream.pprint"), (36, "DStream.window"), (36, "DStream.leftOuterJoin"), (36, "DStream.rightOuterJoin"),
        (36, "DStream.fullOuterJoin"), (36, "DStream.cogroup"), (36, "DStream.pprint"), (37, "DStream.join"),
        (37, "DStream.transformWith"), (37, "DStream.pprint"), (38, "DStream.repartition"), (38, "DStream.cache"),
        (38, "DStream.persist"), (38, "DStream.checkpoint"), (38, "DStream.saveAsTextFiles"), (39, "DStream.slice"),
        (43, "StreamingContext.getOrCreate"), (44, "OffsetRange"), (45, "KafkaUtils.createRDD"),
        (45, "TopicAndPartition"), (46, "StreamingContext.start"), (47, "StreamingContext.awaitTerminationOrTimeout"),
        (48, "StreamingContext.stop"),
    ],
    f"{JOBS}/kafka_offsets_to_db.py": [
        (23, "TopicAndPartition"), (31, "offsetRanges"), (48, "spark.streaming.stopGracefullyOnShutdown"),
        (50, "StreamingContext(sc, batchDuration)"), (53, "KafkaUtils.createDirectStream"), (55, "DStream.transform"),
        (56, "DStream.map"), (57, "DStream.filter"), (58, "DStream.map"), (59, "DStream.foreachRDD"),
        (61, "StreamingContext.start"), (63, "StreamingContext.awaitTermination"),
        (65, "StreamingContext.stop(stopGraceFully=True)"),
    ],
    f"{JOBS}/socket_word_counts.py": [
        (19, "StreamingContext(sc, batchDuration)"), (20, "StreamingContext.socketTextStream"),
        (21, "DStream.flatMap"), (22, "DStream.map"), (23, "DStream.reduceByKey"), (24, "DStream.pprint"),
        (25, "StreamingContext.start"), (26, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/stateful_word_totals.py": [
        (23, "StreamingContext(sc, batchDuration)"), (24, "StreamingContext.checkpoint"),
        (26, "StreamingContext.socketTextStream"), (27, "DStream.flatMap"), (28, "DStream.map"),
        (28, "DStream.updateStateByKey"), (29, "DStream.pprint"), (30, "StreamingContext.start"),
        (31, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/unknown_constructs.py": [
        (8, "spark.streaming.kafka.consumer.cache.enabled"), (9, "StreamingContext(sc, batchDuration)"),
        (10, "StreamingContext.socketTextStream"), (11, "DStream.foreach"), (12, "DStream._jdstream"),
        (13, "StreamingContext.awaitTerminationOrTimeoutSeconds"), (14, "DStream.map"),
        (14, "DStream.saveAsHadoopFiles"),
    ],
    f"{JOBS}/class_based_job.py": [
        (14, "KafkaUtils.createDirectStream"), (20, "StreamingContext(sc, batchDuration)"),
        (21, "StreamingContext.checkpoint"), (25, "DStream.map"), (28, "DStream.updateStateByKey"),
        (30, "DStream.pprint"), (34, "StreamingContext.start"), (35, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/untraced_streams.py": [
        (13, "DStream.foreachRDD"), (14, "DStream.window"), (15, "DStream.pprint"), (17, "DStream.updateStateByKey"),
        (17, "DStream.saveAsTextFiles"), (19, "StreamingContext.start"), (20, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/python2_era.py": [
        (11, "Python 2: reload(sys)"), (12, "Python 2: sys.setdefaultencoding"),
        (18, "Python 2: KafkaProducer.send(str)"), (23, "Python 2: unicode"), (23, "Python 2: dict.iteritems"),
        (27, "StreamingContext(sc, batchDuration)"), (28, "StreamingContext.socketTextStream"), (28, "DStream.flatMap"),
        (29, "DStream.map"), (29, "DStream.reduceByKey"), (30, "DStream.foreachRDD"), (31, "Python 2: xrange"),
        (33, "StreamingContext.start"), (34, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/python2_records_to_kafka.py": [
        (18, "Python 2: reload(sys)"), (19, "Python 2: sys.setdefaultencoding"), (23, "Python 2: unicode"),
        (24, "Python 2: basestring"), (25, "Python 2: long"), (32, "Python 2: KafkaProducer.send(str)"),
        (42, "StreamingContext(sc, batchDuration)"), (43, "KafkaUtils.createDirectStream"), (44, "DStream.map"),
        (45, "DStream.foreachRDD"), (46, "StreamingContext.start"), (47, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/windowed_wordcount.py": [
        (16, "StreamingContext(sc, batchDuration)"), (17, "StreamingContext.checkpoint"),
        (19, "StreamingContext.socketTextStream"), (20, "DStream.flatMap"), (20, "DStream.map"),
        (23, "DStream.reduceByKeyAndWindow (with inverse function)"), (24, "DStream.pprint"),
        (27, "DStream.reduceByKeyAndWindow (without inverse function)"), (28, "DStream.pprint"),
        (30, "DStream.countByWindow"), (30, "DStream.pprint"), (32, "StreamingContext.start"),
        (33, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/hashtag_counts.py": [
        (17, "StreamingContext(sc, batchDuration)"), (18, "StreamingContext.socketTextStream"), (19, "DStream.flatMap"),
        (19, "DStream.filter"), (20, "DStream.map"), (20, "DStream.reduceByKey"), (21, "DStream.pprint"),
        (22, "StreamingContext.start"), (23, "StreamingContext.awaitTermination"),
    ],
    f"{JOBS}/running_word_totals.py": [
        (18, "StreamingContext(sc, batchDuration)"), (19, "StreamingContext.checkpoint"),
        (20, "StreamingContext.textFileStream"), (20, "DStream.flatMap"), (20, "DStream.filter"), (21, "DStream.map"),
        (21, "DStream.updateStateByKey"), (22, "DStream.pprint"), (23, "StreamingContext.start"),
        (24, "StreamingContext.awaitTermination"),
    ],
}


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    """Every heading anchor of a Markdown file, outside fenced code, with GitHub's -1, -2 for repeats."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6} (.+)$", line)
        if match and not fenced:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            anchors.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return anchors


PLAYBOOK_ANCHORS = _anchors(REPO / "docs" / "playbook.md")


def test_slug_rules_on_the_playbooks_own_headings() -> None:
    # GitHub's rules on headings of the kind the playbook has: punctuation dropped, underscores kept.
    assert _slug("Loss after a restart: receivers") == "loss-after-a-restart-receivers"
    assert _slug("Semantic traps, with the evidence") == "semantic-traps-with-the-evidence"
    assert _slug("running_counts") == "running_counts"
    assert _slug("Your own jobs, unmodified: `dmk compare-jobs`") == "your-own-jobs-unmodified-dmk-compare-jobs"
    assert {"the-map", "running_counts", "output-mode-timing", "two-inputs-one-watermark"} <= PLAYBOOK_ANCHORS
    assert "one-users-open-sessions-as-a-json-list-of-start-last-event-events-last-kafka_ts" not in PLAYBOOK_ANCHORS


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_every_finding_of_every_job(path: str) -> None:
    plan = analyse(REPO / path)
    assert [(f.line, f.construct) for f in plan.findings] == EXPECTED[path]


def test_every_dstream_job_in_the_repository_is_covered() -> None:
    workloads = {f"legacy/workloads/{p.name}" for p in (REPO / "legacy" / "workloads").glob("[a-z]*.py")}
    jobs = {f"{JOBS}/{p.name}" for p in (REPO / JOBS).glob("*.py")}
    # An example is a DStream job when the analyser finds anything in it (modern_job.py, __init__.py: nothing).
    # examples/playbook/ holds the playbook's fragments (one construct per function), not jobs.
    examples = {str(p.relative_to(REPO)) for p in (REPO / "examples").rglob("*.py")
                if "playbook" not in p.parts and analyse(p).findings}
    assert examples == {"examples/event_types.py", "examples/purchases.py", "examples/orders/legacy_job.py"}
    assert workloads | jobs | examples <= set(EXPECTED)


def test_every_anchor_resolves_to_a_playbook_heading() -> None:
    for rule in [*RULES.values(), *CONF_RULES.values()]:
        anchor = rule.playbook.split("#", 1)[1]
        assert rule.playbook.startswith("docs/playbook.md#") and anchor in PLAYBOOK_ANCHORS, (rule.construct, anchor)
    emitted = {f.playbook for path in EXPECTED for f in analyse(REPO / path).findings}
    assert {p.split("#", 1)[1] for p in emitted} <= PLAYBOOK_ANCHORS


def test_lifecycle_constructs_point_at_their_lifecycle_subsection() -> None:
    # Each subsection of "Lifecycle, one by one" shows both sides' code (examples/playbook/).
    expected = {
        "DStream.foreachRDD": "output-and-offsets-exactly-once", "offsetRanges": "output-and-offsets-exactly-once",
        "StreamingListener": "batch-metrics-listeners",
        "StreamingContext.addStreamingListener": "batch-metrics-listeners",
        "StreamingContext.stop(stopGraceFully=True)": "graceful-stop",
        "StreamingContext.awaitTermination": "waiting-for-termination",
        "StreamingContext.awaitTerminationOrTimeout": "waiting-for-termination",
        "StreamingContext.remember": "remembered-batches-and-slice", "DStream.slice": "remembered-batches-and-slice",
        "StreamingContext.textFileStream": "file-socket-and-queue-streams",
        "StreamingContext.queueStream": "file-socket-and-queue-streams",
        "StreamingContext(sc, batchDuration)": "triggers",
    }
    assert {c: RULES[c].anchor for c in expected} == expected
    assert {c: CONF_RULES[c].anchor for c in ("spark.streaming.stopGracefullyOnShutdown",
                                               "spark.streaming.gracefulStopTimeout")} == dict.fromkeys(
        ("spark.streaming.stopGracefullyOnShutdown", "spark.streaming.gracefulStopTimeout"), "graceful-stop")
    assert set(expected.values()) <= PLAYBOOK_ANCHORS
    # Where the trap is the receivers' loss, the finding stays with its evidence.
    assert RULES["StreamingContext.socketTextStream"].anchor == "loss-after-a-restart-receivers"


def test_the_issue_s_list_of_constructs_is_in_the_table() -> None:
    wanted = [
        "StreamingContext(sc, batchDuration)", "StreamingContext.getOrCreate", "StreamingContext.checkpoint",
        "StreamingContext.start", "StreamingContext.awaitTermination", "StreamingContext.awaitTerminationOrTimeout",
        "StreamingContext.stop", "StreamingContext.stop(stopGraceFully=True)", "StreamingContext.remember",
        "StreamingContext.socketTextStream", "StreamingContext.textFileStream", "StreamingContext.queueStream",
        "StreamingContext.union", "KafkaUtils.createDirectStream", "KafkaUtils.createStream", "KafkaUtils.createRDD",
        "OffsetRange", "TopicAndPartition", "offsetRanges", "StreamingContext.addStreamingListener",
        *(f"DStream.{m}" for m in (
            "map", "flatMap", "filter", "mapPartitions", "mapValues", "flatMapValues", "reduceByKey", "groupByKey",
            "combineByKey", "countByValue", "count", "countByWindow", "countByValueAndWindow", "reduceByWindow",
            "reduceByKeyAndWindow (with inverse function)", "reduceByKeyAndWindow (without inverse function)",
            "window", "updateStateByKey", "transform", "transformWith", "join", "leftOuterJoin", "rightOuterJoin",
            "fullOuterJoin", "cogroup", "foreachRDD", "pprint", "saveAsTextFiles", "repartition", "cache", "persist",
            "checkpoint", "glom", "slice",
        )),
    ]
    assert [c for c in wanted if c not in RULES] == []
    conf = ["spark.streaming.backpressure.enabled", "spark.streaming.kafka.maxRatePerPartition",
            "spark.streaming.receiver.maxRate", "spark.streaming.stopGracefullyOnShutdown",
            "spark.streaming.receiver.writeAheadLog.enable"]
    assert [c for c in conf if c not in CONF_RULES] == []


def _by_construct(path: str) -> dict[str, object]:
    return {f.construct: f for f in analyse(REPO / path).findings}


def test_the_traps_each_construct_names() -> None:
    windowed = _by_construct(f"{JOBS}/windowed_wordcount.py")
    with_inverse = windowed["DStream.reduceByKeyAndWindow (with inverse function)"]
    without = windowed["DStream.reduceByKeyAndWindow (without inverse function)"]
    assert with_inverse.note != without.note  # type: ignore[attr-defined]
    assert "inverse function made the arrival-time window incremental" in with_inverse.note  # type: ignore[attr-defined]
    assert "Processing vs event time" in without.note  # type: ignore[attr-defined]
    assert "5 slides or more" in with_inverse.note  # type: ignore[attr-defined]
    assert with_inverse.playbook == (  # type: ignore[attr-defined]
        "docs/playbook.md#reducebykeyandwindow-with-and-without-inverse")
    assert without.playbook == "docs/playbook.md#processing-time-is-not-event-time"  # type: ignore[attr-defined]
    stateful = _by_construct(f"{JOBS}/stateful_word_totals.py")
    update = stateful["DStream.updateStateByKey"]
    assert update.note.startswith("State re-emission vs update mode")  # type: ignore[attr-defined]
    assert update.playbook == "docs/playbook.md#running_counts" and update.automatic is False  # type: ignore[attr-defined]
    catalogue = _by_construct(f"{JOBS}/every_construct.py")
    assert catalogue["KafkaUtils.createStream"].note.startswith("Receiver loss")  # type: ignore[attr-defined]
    assert catalogue["KafkaUtils.createStream"].playbook == (  # type: ignore[attr-defined]
        "docs/playbook.md#loss-after-a-restart-receivers")
    assert catalogue["StreamingContext.getOrCreate"].note.startswith(  # type: ignore[attr-defined]
        "Checkpoint incompatibility")
    rates = _by_construct(f"{JOBS}/kafka_direct_word_counts.py")
    assert rates["spark.streaming.kafka.maxRatePerPartition"].note.startswith("Rate limits")  # type: ignore[attr-defined]
    assert "maxOffsetsPerTrigger" in rates["spark.streaming.kafka.maxRatePerPartition"].counterpart  # type: ignore[attr-defined]
    assert rates["StreamingContext(sc, batchDuration)"].counterpart.startswith("SparkSession; the batch interval "
                                                                               "becomes trigger")  # type: ignore[attr-defined]


def test_per_record_functions_are_automatic_exactly_when_the_draft_translates_them() -> None:
    findings = analyse(REPO / f"{JOBS}/kafka_offsets_to_db.py").findings
    # json.loads has no column expression (from_json needs a schema): that map, and what follows it, are manual.
    assert [(f.line, f.automatic) for f in findings if f.construct in ("DStream.map", "DStream.filter")] == [
        (56, False), (57, False), (58, False)]
    findings = analyse(REPO / f"{JOBS}/socket_word_counts.py").findings
    assert [(f.construct, f.automatic) for f in findings if f.line in (21, 22, 23)] == [
        ("DStream.flatMap", True), ("DStream.map", True), ("DStream.reduceByKey", False)]


def test_aliases_tuple_unpacking_parameters_and_chains() -> None:
    findings = analyse(REPO / f"{JOBS}/aliases_and_chains.py").findings
    # `events = clicks.union(views).map(...).filter(...)`: one finding per call, in call order, on one line.
    assert [f.construct for f in findings if f.line == 22] == ["DStream.union", "DStream.map", "DStream.filter"]
    # KU (alias), both sides of `clicks, views = ..., ...`, and pyspark.streaming.kafka.KafkaUtils by its full name.
    assert [(f.line, f.construct) for f in findings if f.construct.startswith("KafkaUtils")] == [
        (21, "KafkaUtils.createDirectStream"), (21, "KafkaUtils.createDirectStream"), (23, "KafkaUtils.createStream")]
    # Parameters: `clicks_stream` (by name), `counts: DStream` (by annotation), `ssc` (by name); `each` from a
    # for loop over a list of DStreams; `built` from the return value of the job's own function.
    assert (12, "DStream.map") in [(f.line, f.construct) for f in findings]
    assert (16, "DStream.pprint") in [(f.line, f.construct) for f in findings]
    assert (26, "DStream.count") in [(f.line, f.construct) for f in findings]
    assert (33, "DStream.pprint") in [(f.line, f.construct) for f in findings]
    # `ps.StreamingContext(..., batchDuration=2)` through `import pyspark.streaming as ps`.
    assert findings[11].construct == "StreamingContext(sc, batchDuration)" and findings[11].line == 31


def test_lambda_parameters_and_untracked_names_are_not_dstreams() -> None:
    source = (
        "from pyspark.streaming import StreamingContext\n"
        "ssc = StreamingContext(sc, 1)\n"
        "lines = ssc.socketTextStream('h', 1)\n"
        "lines.foreachRDD(lambda rdd: rdd.map(len).foreachPartition(print))\n"
        "other = something.map(len)\n"
        "lines = None\n"
        "lines.map(len)\n"
    )
    plan = analyse_source(source, "job.py")
    assert [(f.line, f.construct) for f in plan.findings] == [
        (2, "StreamingContext(sc, batchDuration)"), (3, "StreamingContext.socketTextStream"), (4, "DStream.foreachRDD")]


def test_unknown_constructs_are_reported_not_skipped() -> None:
    findings = analyse(REPO / f"{JOBS}/unknown_constructs.py").findings
    unknown = [(f.line, f.construct) for f in findings if f.unknown]
    assert unknown == [
        (8, "spark.streaming.kafka.consumer.cache.enabled"), (11, "DStream.foreach"), (12, "DStream._jdstream"),
        (13, "StreamingContext.awaitTerminationOrTimeoutSeconds"), (14, "DStream.saveAsHadoopFiles"),
    ]
    for f in findings:
        if f.unknown:
            assert f.counterpart == "unknown: not in dmk migrate's table"
            assert f.note.startswith("unknown construct: ") and f.automatic is False
            assert f.playbook == "docs/playbook.md#the-map"
    foreach = next(f for f in findings if f.construct == "DStream.foreach")
    assert "DStream.foreach() is used on a tracked DStream" in foreach.note


def test_json_output_has_exactly_the_issue_s_shape(capsys: pytest.CaptureFixture[str]) -> None:
    job = f"{JOBS}/socket_word_counts.py"
    assert main(["migrate", str(REPO / job), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document) == ["job", "draft_runs", "verified", "summary", "findings"]
    assert document["job"] == str(REPO / job)
    # draft_runs is the draft writer's verdict (null with a writer that cannot tell); --verify did not run.
    make_draft = getattr(importlib.import_module("migrate.draft"), "make_draft", None)
    assert document["draft_runs"] == (None if make_draft is None else make_draft(analyse(REPO / job)).runs)
    assert document["verified"] is None
    assert document["summary"] == {"automatic": 7, "manual": 1, "unresolved": 0}
    assert [list(f) for f in document["findings"]] == [list(FINDING_KEYS)] * len(EXPECTED[job])
    assert list(FINDING_KEYS) == ["line", "construct", "counterpart", "playbook", "automatic", "note", "status"]
    assert [f["status"] for f in document["findings"]] == [
        "manual" if f["construct"] == "DStream.reduceByKey" else "automatic" for f in document["findings"]]
    assert [(f["line"], f["construct"]) for f in document["findings"]] == EXPECTED[job]
    socket = document["findings"][1]
    assert socket == {
        "line": 20,
        "construct": "StreamingContext.socketTextStream",
        "counterpart": 'spark.readStream.format("socket").option("host", h).option("port", p).load() (one column, '
                       "value)",
        "playbook": "docs/playbook.md#loss-after-a-restart-receivers",
        "automatic": True,
        "note": "Receiver loss: neither side is fault tolerant (the socket source cannot replay); for tests only.",
        "status": "automatic",
    }


def test_markdown_plan(capsys: pytest.CaptureFixture[str]) -> None:
    job = str(REPO / f"{JOBS}/stateful_word_totals.py")
    assert main(["migrate", job]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"# Migration plan: {job}"
    assert lines[2] == ("9 findings: 8 automatic, 1 manual, 0 unresolved. Read from the source with `ast`; the job "
                        "was not run.")
    assert lines[4] == "| line | construct | Structured Streaming | status | playbook | check |"
    rows = [line for line in lines if re.match(r"^\| \d+ \|", line)]
    assert [int(row.split("|")[1]) for row in rows] == [line for line, _ in EXPECTED[f"{JOBS}/stateful_word_totals.py"]]
    assert rows[5].startswith("| 28 | `DStream.updateStateByKey` | groupBy(key).agg(...) in update mode; arbitrary "
                              "state: applyInPandasWithState or transformWithStateInPandas (RocksDB state store) | "
                              "manual | [running_counts](docs/playbook.md#running_counts) | State re-emission vs update mode")


def test_modern_review_of_a_legacy_workload_against_its_rewrite(capsys: pytest.CaptureFixture[str]) -> None:
    plan = analyse(REPO / "legacy/workloads/windowed_counts.py")
    result = review(plan, REPO / "modern/workloads/windowed_counts.py")
    assert [(i.finding.line, i.finding.construct, i.addressed, i.evidence) for i in result.items] == [
        (54, "event_time_operator", True, "withWatermark (line 28), window (line 30)"),
        (55, "Source.events", True, "events (line 28)"),
        (57, "Source.drop_late", True, "withWatermark (line 28)"),
        (83, "Source.events", True, "events (line 28)"),
        (83, "DStream.map", True, "select (line 32)"),
        (85, "DStream.reduceByKeyAndWindow (with inverse function)", True, "withWatermark (line 28), window (line 30)"),
        (87, "DStream.transform", True, "select (line 32)"),
        (92, "DStream.union", True, "unionByName (line 41)"),
        (92, "DStream.window", True, "withWatermark (line 28), window (line 30)"),
    ]
    result = review(analyse(REPO / "legacy/workloads/running_counts.py"), REPO / "modern/workloads/running_counts.py")
    assert [(i.finding.construct, i.addressed) for i in result.items] == [
        ("Source.events", True), ("DStream.map", True), ("DStream.reduceByKey", True),
        ("DStream.updateStateByKey", True),
        ("DStream.filter", False),  # keeping the changed keys is update mode's job: no where() to point at
        ("DStream.map", True),
    ]
    assert result.items[4].evidence == "none of: where or filter"
    assert "`dmk compare running_counts`" in result.command_note


def test_modern_review_of_the_example_pair_prints_the_compare_jobs_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    legacy, modern = REPO / "examples/orders/legacy_job.py", REPO / "examples/orders/modern_job.py"
    assert main(["migrate", str(legacy), "--modern", str(modern), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document) == ["job", "draft_runs", "verified", "summary", "findings", "modern"]
    results = document["modern"]["results"]
    # The rewrite keeps the default trigger (as fast as possible): the batch interval has no counterpart there.
    assert [(r["line"], r["construct"], r["addressed"]) for r in results] == [
        (line, construct, line != 49) for line, construct in EXPECTED["examples/orders/legacy_job.py"]]
    assert results[0]["evidence"] == "none of: trigger"
    assert results[2]["evidence"] == "format:kafka (line 55), readStream (line 55)"
    assert results[5]["evidence"] == "agg (line 57), groupBy (line 57)"
    assert document["modern"]["command"] == (
        f"dmk compare-jobs --input CAPTURE.jsonl --key KEY "
        f"--legacy 'python {legacy} {{bootstrap}} {{topic}} {{output_topic}} {{checkpoint}}' "
        f"--modern 'python {modern} {{bootstrap}} {{topic}} {{output_topic}} {{checkpoint}}'"
    )
    assert document["modern"]["command_note"].startswith("Fill in CAPTURE.jsonl")
    assert main(["migrate", str(legacy), "--modern", str(modern)]) == 0
    out = capsys.readouterr().out
    assert f"## The rewrite: {modern}\n\n9 of 10 findings addressed." in out
    assert "| 49 | `StreamingContext(sc, batchDuration)` | NO | none of: trigger |" in out
    assert "| 51 | `KafkaUtils.createDirectStream` | yes | format:kafka (line 55), readStream (line 55) |" in out
    assert f"## Prove it\n\n```bash\n{document['modern']['command']}\n```" in out


def test_a_syntax_error_is_one_error_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "py2_job.py"
    job.write_text('from pyspark.streaming import StreamingContext\n\nprint "starting"\n')
    assert main(["migrate", str(job)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    err = " ".join(captured.err.split())  # rich wraps at the terminal width
    assert f"dmk migrate: error: {job}, line 3: Missing parentheses in call to 'print'" in err
    assert "This is Python 2 code (line 3), and PySpark 4 runs Python 3 only: port the job to Python 3 first" in err
    with pytest.raises(JobSourceError) as info:
        analyse(job)
    assert (info.value.path, info.value.line) == (str(job), 3)
    assert "\n" not in str(info.value)  # one line (rich wraps it on the terminal)


def test_a_missing_job_is_one_error_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", str(tmp_path / "nope.py")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"dmk migrate: error: cannot read the DStream job '{tmp_path / 'nope.py'}'" in err
    assert "Give the path of the DStream job's .py file." in err
    job = str(REPO / f"{JOBS}/socket_word_counts.py")
    assert main(["migrate", job, "--modern", str(tmp_path / "new.py")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"cannot read the Structured Streaming job (--modern) '{tmp_path / 'new.py'}'" in err


def test_the_job_is_never_imported_or_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran.marker"
    job = tmp_path / "side_effects.py"
    job.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('the job ran')\n"
        "import module_that_does_not_exist\n"
        "from pyspark.streaming import StreamingContext\n"
        "ssc = StreamingContext(sc, 1)\n"
        "raise SystemExit('the job ran')\n"
    )
    modules_before = set(sys.modules)
    assert main(["migrate", str(job), "--json", "--modern", str(job), "--out", str(tmp_path / "draft.py")]) == 0
    assert not marker.exists()
    assert "side_effects" not in set(sys.modules) - modules_before
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["line"], f["construct"]) for f in findings] == [(5, "StreamingContext(sc, batchDuration)")]


def test_the_dmk_console_script(tmp_path: Path) -> None:
    dmk = Path(sys.executable).parent / "dmk"  # the console script pip installed beside this Python
    out = tmp_path / "draft.py"
    run = subprocess.run([str(dmk), "migrate", f"{JOBS}/checkpointed_word_counts.py", "--json", "--out", str(out)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert [(f["line"], f["construct"]) for f in document["findings"]] == EXPECTED[f"{JOBS}/checkpointed_word_counts.py"]
    ast.parse(out.read_text())


_DOC_BLOCK = re.compile(
    r"<!-- (?P<kind>migrate-[\w-]+): (?P<args>[^>]+?) -->\n(?P<fence>`{3,})\w*\n(?P<body>.*?)(?P=fence)\n", re.S)


def test_docs_show_real_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every example output in docs/migrate.md is what the command prints today (run from the repository root)."""
    monkeypatch.chdir(REPO)
    blocks = list(_DOC_BLOCK.finditer((REPO / "docs" / "migrate.md").read_text(encoding="utf-8")))
    assert sorted(b["kind"] for b in blocks) == [
        "migrate-draft", "migrate-draft", "migrate-json-finding", "migrate-output", "migrate-output-tail"]
    fix = "Fix: paste the output of the command into docs/migrate.md."
    for block in blocks:
        args = block["args"].split()
        if block["kind"] == "migrate-draft":  # the draft, its carried runtime (migrate/microbatch.py) elided
            text = draft(analyse(args[0]))
            if "# ---- begin runtime ----\n" not in text:  # a lifted draft (migrate/lift.py): shown whole
                assert block["body"] == text, fix
                continue
            start, end = text.index("# ---- begin runtime ----\n"), text.index("# ---- end of the runtime")
            elided = f"# ---- begin runtime ---- ({text[start:end].count(chr(10)) - 1} lines: migrate/microbatch.py)\n"
            assert block["body"] == text[:start] + elided + text[end:], fix
            continue
        assert main(["migrate", *args, *(["--json"] if block["kind"] == "migrate-json-finding" else [])]) == 0
        out = capsys.readouterr().out
        if block["kind"] == "migrate-json-finding":
            assert json.loads(block["body"]) in json.loads(out)["findings"], fix
        elif block["kind"] == "migrate-output-tail":
            assert out.endswith(block["body"]), fix
        else:
            assert block["body"] == out, fix


def test_the_docs_link_the_page() -> None:
    assert "(docs/migrate.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "(migrate.md)" in (REPO / "docs" / "playbook.md").read_text(encoding="utf-8")


def test_the_kit_s_drop_in_module_and_other_spellings() -> None:
    source = (
        "import pyspark.streaming.kafka as psk\n"
        "import pyspark.streaming as ps\n"
        "from legacy.kafka import KafkaUtils, get_or_create\n"
        "def create():\n"
        "    ssc = ps.StreamingContext(sc, 1)\n"
        "    direct = KafkaUtils.createDirectStream(ssc, ['t'], {'metadata.broker.list': 'k:9092'})\n"
        "    other = psk.KafkaUtils.createDirectStream(ssc, ['u'], {})\n"
        "    match direct:\n"
        "        case _:\n"
        "            direct.union(other).pprint()\n"
        "    print(ssc.sparkContext)\n"
        "    ps.StreamingContextFactory()\n"
        "    return ssc\n"
        "maker = create  # a function and a name of pyspark.streaming outside the table, bound to names\n"
        "make, name = maker, ps.unknown_name\n"
        "ssc = get_or_create('/ckpt', make)\n"
        "ssc.start()\n"
    )
    plan = analyse_source(source, "job.py")
    assert [(f.line, f.construct) for f in plan.findings] == [
        (5, "StreamingContext(sc, batchDuration)"), (6, "KafkaUtils.createDirectStream"),
        (7, "KafkaUtils.createDirectStream"), (10, "DStream.union"), (10, "DStream.pprint"),
        (11, "StreamingContext.sparkContext"), (12, "pyspark.streaming.StreamingContextFactory"),
        (16, "get_or_create"), (17, "StreamingContext.start"),
    ]
    assert plan.findings[6].unknown and plan.findings[7].playbook == "docs/playbook.md#the-map"


# -- #36: no silent misses, a grade per job, bad input ----------------------------------------------------------


def test_a_class_based_job_is_followed_through_self_and_call_sites() -> None:
    plan = analyse(REPO / f"{JOBS}/class_based_job.py")
    by_line = {(f.line, f.construct): f for f in plan.findings}
    # open_input(context, topic) is passed self.context: its createDirectStream is the job's source.
    assert by_line[(14, "KafkaUtils.createDirectStream")].status == "automatic"
    # self.pairs() returns self.clicks.map(...); the state and the output hang off self.totals.
    assert by_line[(28, "DStream.updateStateByKey")].status == "manual"
    assert by_line[(30, "DStream.pprint")].status == "automatic"
    assert all(f.status != "unresolved" for f in plan.findings)
    assert plan.counts() == {"automatic": 6, "manual": 2, "unresolved": 0}


def test_dstream_only_calls_on_untraced_objects_are_unresolved_never_dropped(
        capsys: pytest.CaptureFixture[str]) -> None:
    job = str(REPO / f"{JOBS}/untraced_streams.py")
    plan = analyse(job)
    statuses = [(f.line, f.construct, f.status) for f in plan.findings]
    assert statuses == [
        (13, "DStream.foreachRDD", "unresolved"), (14, "DStream.window", "unresolved"),
        (15, "DStream.pprint", "unresolved"), (17, "DStream.updateStateByKey", "unresolved"),
        (17, "DStream.saveAsTextFiles", "unresolved"),
        # ssc = make_context(): another module's value, named as Spark's guide names a StreamingContext.
        (19, "StreamingContext.start", "automatic"), (19 + 1, "StreamingContext.awaitTermination", "automatic"),
    ]
    first, derived = plan.findings[0], plan.findings[2]
    assert first.note.startswith("unresolved: foreachRDD() is a DStream-only method, but dmk migrate could not "
                                 "trace `events` to a DStream")
    assert first.counterpart == "writeStream.foreachBatch(lambda df, batch_id: ...)" and not first.automatic
    assert derived.note.startswith("unresolved: `windowed` is taken for a DStream only because it comes from an "
                                   "unresolved call")
    # F.window (pyspark.sql.functions) and pprint.pprint hang off imports: not DStreams, not reported.
    assert all(f.line != 18 for f in plan.findings)
    assert main(["migrate", job]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == ("7 findings: 2 automatic, 0 manual, 5 unresolved. Read from the source with `ast`; the job "
                        "was not run.")
    assert lines[4] == ("Unresolved, to check by hand before trusting this plan: line 13 `DStream.foreachRDD`, line 14 "
                        "`DStream.window`, line 15 `DStream.pprint`, line 17 `DStream.updateStateByKey`, line 17 "
                        "`DStream.saveAsTextFiles`.")
    assert main(["migrate", job, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == {"automatic": 2, "manual": 0, "unresolved": 5}
    assert [f["status"] for f in document["findings"]].count("unresolved") == 5


def test_unknown_constructs_count_as_unresolved() -> None:
    plan = analyse(REPO / f"{JOBS}/unknown_constructs.py")
    assert [f.status for f in plan.findings if f.unknown] == ["unresolved"] * 5
    assert plan.counts()["unresolved"] == 5


def test_python_2_era_code_is_a_finding_with_its_fix() -> None:
    plan = analyse(REPO / f"{JOBS}/python2_era.py")
    python2 = {f.construct: f for f in plan.findings if f.python2}
    assert sorted(python2) == [
        "Python 2: KafkaProducer.send(str)", "Python 2: dict.iteritems", "Python 2: reload(sys)",
        "Python 2: sys.setdefaultencoding", "Python 2: unicode", "Python 2: xrange"]
    assert python2["Python 2: unicode"].counterpart == "str"
    assert python2["Python 2: xrange"].counterpart == "range"
    assert python2["Python 2: KafkaProducer.send(str)"].counterpart.startswith('send bytes: value.encode("utf-8")')
    assert "reload is not a builtin in Python 3: NameError at start." in python2["Python 2: reload(sys)"].note
    # Each has a mechanical fix here, which the draft applies (tests/test_migrate_python2.py).
    assert all(f.status == "automatic" and f.playbook == "docs/playbook.md#the-map" for f in python2.values())
    assert python2["Python 2: unicode"].note.endswith("The draft fixes it: unicode → str.")
    assert plan.streaming  # the Spark Streaming constructs are there too


def test_python_3_code_that_looks_alike_is_not_python_2() -> None:
    source = (
        "from importlib import reload\nfrom kafka import KafkaProducer\nimport sys\n"
        "def unicode(x):\n    return str(x)\n"
        "reload(sys)\nunicode('a')\n"
        "producer = KafkaProducer(value_serializer=str.encode)\nproducer.send('t', 'text')\n"
        "raw = KafkaProducer()\nraw.send('t', b'bytes')\n"
    )
    assert analyse_source(source).findings == ()


def test_create_stream_is_automatic_as_the_draft_carries_it_and_window_links_the_window_section() -> None:
    findings = {f.construct: f for f in analyse(REPO / f"{JOBS}/every_construct.py").findings}
    # The draft reads the brokers the quorum registers (tests/test_migrate_receiver.py); the group's offsets in
    # ZooKeeper are what it does not carry, and the note says how to continue from them.
    assert findings["KafkaUtils.createStream"].status == "automatic"
    assert "ZooKeeper quorum registers (/brokers/ids)" in findings["KafkaUtils.createStream"].note
    assert "`dmk cutover zookeeper QUORUM --consumer GROUP`" in findings["KafkaUtils.createStream"].note
    assert findings["DStream.window"].playbook == "docs/playbook.md#windowed_counts"
    assert "windowed_counts" in PLAYBOOK_ANCHORS


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("binary.py", b"\x7fELF\x02\x01\x01\x00\x00\x00", "is not Python source: it holds NUL bytes (a binary file?)"),
    ("latin1.py", "print('caf\xe9')\n".encode("latin-1"), "is not Python source: it is not UTF-8 text"),
    ("notes.py", b"Meeting notes: move the jobs to Spark 4 (soon)\n", "is this the job's .py file? Fix the syntax"),
    # Python 3 with a syntax error; backticks and 0777 inside a string are not Python 2 syntax.
    ("broken.py", b'print("run `dmk` with mode 0777")\nsetup(\n',
     "line 2: '(' was never closed ('setup('). dmk migrate reads the job as Python 3 source"),
    ("py2.py", b"from pyspark.streaming import StreamingContext\nexcept_ = 1\ntry:\n    pass\nexcept Exception, e:\n"
     b"    pass\n", "This is Python 2 code (line 5), and PySpark 4 runs Python 3 only: port the job to Python 3"),
    ("empty.py", b"", "is empty (0 bytes): there is no job to migrate"),
    ("no_dstream.py", b"from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n"
     b"spark.readStream.format('rate').load().writeStream.format('console').start().awaitTermination()\n",
     "uses no StreamingContext, DStream or KafkaUtils (read without running it): nothing to migrate"),
])
def test_bad_input_is_one_error_naming_the_fix_with_exit_code_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, expected: str) -> None:
    job = tmp_path / name
    job.write_bytes(content)
    for extra in ([], ["--json"], ["--out", str(tmp_path / "draft.py")]):
        assert main(["migrate", str(job), *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "Traceback" not in captured.err
        err = " ".join(captured.err.split())  # rich wraps at the terminal width
        assert err.startswith("dmk migrate: error: ") and expected in err, err
        assert not (tmp_path / "draft.py").exists()


def test_the_corpus_citations_are_complete() -> None:
    data = json.loads((REPO / "tests" / "data" / "migrate_corpus.json").read_text(encoding="utf-8"))
    jobs = data["jobs"]
    assert len(jobs) == 30 and sum(j["job"].startswith("spark-2.4/") for j in jobs) == 9
    assert sum(bool(j.get("heldout")) for j in jobs) == 6
    names = set(RULES) | set(CONF_RULES)
    expected = 0
    for job in jobs:
        assert job["files"][0]["local"] == job["job"] and job["files"][0]["role"] == "job"
        for cited in job["files"]:
            assert re.fullmatch(r"[0-9a-f]{40}", cited["commit"]) and re.fullmatch(r"[0-9a-f]{64}", cited["sha256"])
            assert cited["repository"].count("/") == 1 and cited["path"].endswith(".py")
            for item in cited["expected"]:
                # A third-party DStream method (pyspark_cassandra's saveToCassandra) is expected as an unknown one.
                assert item["construct"] in names or item["construct"] == "DStream.saveToCassandra"
                assert item["line"] > 0
            expected += len(cited["expected"])
    assert expected == 249


def test_the_corpus_benchmark_tells_silent_misses_from_reported_ones(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import migrate_corpus
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    path = REPO / f"{JOBS}/untraced_streams.py"
    cited = {"local": "untraced_streams.py", "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "expected": [
        {"line": 13, "construct": "DStream.foreachRDD"},     # found (unresolved)
        {"line": 14, "construct": "DStream.window"},         # found (unresolved)
        {"line": 12, "construct": "KafkaUtils.createDirectStream"},  # inside make_stream: missed, silently
        {"line": 17, "construct": "DStream.reduceByKey"},    # missed, but line 17 is reported unresolved
    ]}
    score = migrate_corpus.score_file(path, cited, verbose=True)
    assert (score.expected, score.found, score.reported, score.silent) == (4, 2, 1, 1)
    # Not in this made-up list: line 15's pprint, lines 19 and 20; line 17's findings report its miss instead.
    assert score.false == 3
    assert score.statuses == {"automatic": 2, "unresolved": 5}


def test_dstreams_put_into_lists_and_dicts_are_followed() -> None:
    source = (
        "from pyspark.streaming import StreamingContext\n"
        "from pyspark.streaming.kafka import KafkaUtils\n"
        "ssc = StreamingContext(sc, 1)\n"
        "streams = {}\n"
        "for topic in ['a', 'b']:\n"
        "    streams[topic] = KafkaUtils.createDirectStream(ssc, [topic], {})\n"
        "for name, each in streams.items():\n"
        "    each.pprint()\n"
        "merged = []\n"
        "merged.append(streams.get('a').map(len))\n"
        "merged[0].saveAsTextFiles('/out')\n"
        "for each in streams.values():\n"
        "    each.count().pprint()\n"
        "class Job:\n"
        "    def __init__(self):\n"
        "        self.inputs = []\n"
        "        self.inputs.append(KafkaUtils.createDirectStream(ssc, ['c'], {}))\n"
        "    def run(self):\n"
        "        for each in self.inputs:\n"
        "            each.foreachRDD(print)\n"
    )
    assert [(f.line, f.construct, f.status) for f in analyse_source(source).findings] == [
        (3, "StreamingContext(sc, batchDuration)", "automatic"), (6, "KafkaUtils.createDirectStream", "automatic"),
        (8, "DStream.pprint", "automatic"), (10, "DStream.map", "manual"), (11, "DStream.saveAsTextFiles", "automatic"),
        (13, "DStream.count", "manual"), (13, "DStream.pprint", "automatic"),
        (17, "KafkaUtils.createDirectStream", "automatic"), (20, "DStream.foreachRDD", "manual"),
    ]


def test_the_review_looks_for_the_counterpart_of_an_unresolved_call(tmp_path: Path) -> None:
    modern = tmp_path / "modern.py"
    modern.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "df = spark.readStream.format('socket').option('host', 'h').option('port', 1).load()\n"
        "q = df.writeStream.foreachBatch(lambda d, i: None).start()\n"
        "q.awaitTermination()\n"
    )
    result = review(analyse(REPO / f"{JOBS}/untraced_streams.py"), modern)
    items = {(i.finding.line, i.finding.construct): i for i in result.items}
    assert items[(13, "DStream.foreachRDD")].addressed and items[(13, "DStream.foreachRDD")].evidence == (
        "foreachBatch (line 4)")
    assert not items[(17, "DStream.updateStateByKey")].addressed
    assert items[(17, "DStream.updateStateByKey")].evidence.startswith("none of: agg + groupBy")


def test_a_direct_stream_on_the_job_s_own_kafka_is_redirected_to_the_fed_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare-jobs --input-kind kafka without {bootstrap} {topic}: the legacy stand-in reads the replayed topic."""
    from legacy.standin import _kafka_fed

    ssc = object()
    params = {"metadata.broker.list": "localhost:9092", "group.id": "g"}
    assert _kafka_fed((ssc, ["own"], params), {}) == ((ssc, ["own"], params), {})  # nothing to redirect to
    monkeypatch.setenv("DMK_KAFKA_BOOTSTRAP", "127.0.0.1:39092")
    monkeypatch.setenv("DMK_KAFKA_TOPIC", "dmk-jobs-1-legacy")
    assert _kafka_fed((ssc, ["own", "other"], params), {}) == (
        (ssc, ["dmk-jobs-1-legacy"], {"group.id": "g", "metadata.broker.list": "127.0.0.1:39092"}), {})
    # fromOffsets name the job's own topics: dropped, positionally or by name; the decoders stay.
    decode = str.upper
    assert _kafka_fed((ssc, ["own"], {"bootstrap.servers": "b:1"}, {"own": 5}, decode), {"valueDecoder": decode}) == (
        (ssc, ["dmk-jobs-1-legacy"], {"metadata.broker.list": "127.0.0.1:39092"}, None, decode),
        {"valueDecoder": decode})
    assert _kafka_fed((ssc,), {"topics": ["own"], "kafkaParams": params, "fromOffsets": {}})[0][1] == [
        "dmk-jobs-1-legacy"]


def test_compare_jobs_takes_a_kafka_job_that_names_its_own_topic_with_input_kind_kafka(tmp_path: Path) -> None:
    from compare.jobs import JobsSettings
    from kit.errors import ConfigError

    job = f"python {REPO}/tests/print_jobs/legacy_own_kafka.py"
    settings = JobsSettings(input_file="c.jsonl", key=("_1",), legacy=job, modern="python draft.py", out_dir=tmp_path,
                            output="printed", mode="batches", input_kind="kafka")
    assert settings.input_kinds == {"legacy": "kafka", "modern": "kafka"}
    # Naming one of {bootstrap} {topic} and not the other is still the mistake it was.
    with pytest.raises(ConfigError, match=r"never names \{topic\}"):
        JobsSettings(input_file="c.jsonl", key=("_1",), legacy=f"{job} {{bootstrap}}", modern="python d.py",
                     out_dir=tmp_path, output="printed", input_kind="kafka")
    with pytest.raises(ConfigError, match="names no input"):  # without --input-kind: which input is not guessed
        JobsSettings(input_file="c.jsonl", key=("_1",), legacy=job, modern="python d.py", out_dir=tmp_path,
                     output="printed")


def test_verify_picks_the_draft_s_stream_printed_at_the_job_s_line(tmp_path: Path) -> None:
    from compare.verify import _draft_line

    job = REPO / "tests" / "migrate_jobs" / "windowed_wordcount.py"
    text = draft(analyse(job))
    path = tmp_path / "draft.py"
    path.write_text(text)
    lines = job.read_text().splitlines()
    printed = [n for n, line in enumerate(lines, 1) if ".pprint()" in line]
    assert len(printed) >= 2
    for line in printed:  # the same statement, after the carried runtime
        assert text.splitlines()[_draft_line(str(job), str(path), line) - 1] == lines[line - 1]
        assert _draft_line(str(job), str(path), line) > line


def test_a_printed_batch_time_banner_is_a_header_not_a_row() -> None:
    """A foreachRDD function printing ``"----- %s -----" % time`` (each run's clock), then a show() table."""
    from compare.jobs import printed_rows

    lines = ["----------- 2026-11-27 13:05:20 -----------", "+----+----------+", "|word|word_count|",
             "+----+----------+", "|  to|         2|", "+----+----------+", "2026-11-27 13:05:20 spark"]
    entries = [{"stream": "job.py:9", "batch_ms": 1000, "kind": "line", "line": line} for line in lines]
    assert printed_rows(entries) == [("1000", ["to", 2], ["word", "word_count"]),
                                     ("1000", ["<time> spark"], None)]  # not only a time: data, its time masked


def test_a_draft_names_each_output_by_the_job_s_own_line() -> None:
    """The runtime keeps where the job declared each output; the modern stand-in names a pprint's rows by it."""
    import inspect

    from migrate import microbatch
    from modern.standin import _declared_output

    class Context:
        _interval_ms, _streams, _outputs = 1000, [], []  # type: ignore[var-annotated]

    stream = microbatch.MicroBatchStream(Context(), lambda t: None)
    here = inspect.currentframe()
    assert here is not None
    stream.pprint()
    stream.foreachRDD(lambda rdd: None)
    stream.saveAsTextFiles("out")
    line = here.f_lineno
    assert [declared for _, _, declared in Context._outputs] == [
        f"test_migrate.py:{line - 3}", f"test_migrate.py:{line - 2}", f"test_migrate.py:{line - 1}"]

    def run_batch() -> str | None:
        declared_at = "draft.py:42"  # what the runtime's loop over the outputs holds  # noqa: F841
        return take_and_print()

    def take_and_print() -> str | None:
        return _declared_output(inspect.currentframe())

    assert run_batch() == "draft.py:42" and take_and_print() is None


def test_migrate_verify_passes_settle_batches_to_compare_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A window sliding every N batches needs N settle batches: ``dmk migrate --verify`` takes compare-jobs' option."""
    import compare.verify
    from compare.cli import main

    seen = []

    def verify(settings: compare.verify.VerifySettings, **_: object) -> None:
        seen.append(settings)
        raise compare.verify.ConfigError("stopped here by the test")

    monkeypatch.setattr(compare.verify, "verify", verify)
    job = REPO / "tests" / "migrate_jobs" / "windowed_wordcount.py"
    for extra, settle in (([], 2), (["--settle-batches", "10"], 10)):
        assert main(["migrate", str(job), "--verify", "--input", str(tmp_path / "c.jsonl"), "--key", "_1",
                     "--verify-out", str(tmp_path / "v"), *extra]) == 2
        assert seen.pop().settle_batches == settle
    assert "stopped here by the test" in capsys.readouterr().err
