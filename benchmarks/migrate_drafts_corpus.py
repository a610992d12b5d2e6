"""Issue 36's target, measured: does each job's draft run unmodified AND is it proven equal to its original?

    python benchmarks/migrate_drafts_corpus.py --jobs /work/corpus --under public [--only NAME,NAME] [--parallel 3]
    python benchmarks/migrate_drafts_corpus.py --jobs /work/corpus --under heldout

For each job (``MANIFEST.json``'s entries that are not helper modules, else every ``*.py``), this writes its
draft (``migrate.draft.make_draft``) and runs ``dmk migrate JOB --verify`` (:func:`compare.verify.verify`): the
original and the draft, both unmodified, each through ``dmk compare-jobs`` on a capture generated for the
job's input kind (lines of words for a socket, files or a topic; JSON objects where the job parses JSON),
fed to the job's own socket, directory or topic by the stand-ins (a ``createStream`` job's own quorum,
``localhost:2181``, is served by a ZooKeeper holding the broker's registration when that port is free: its
draft looks the brokers up there, as the original did on Spark 2.4). A job split over two modules is laid out
as it imports them (the original's helper module beside it, the helper's draft beside the draft). One line
per job, then the table and the rate:

    job | input kind | draft runs? | verdict | why not

``draft runs?`` is ``yes`` when the draft ran on the capture and printed or wrote output (compare-jobs read
it); ``no`` with why (it refuses to start naming what it cannot carry, or crashed); ``not run`` when nothing
was run (the analysis refused the file, or the job's output is an external system this run has not).
``verdict`` is compare-jobs' (``proven equal``, ``differs``, ``cannot verify``). A job counts toward the
target only when both hold. Everything a job needs from outside its text (which JSON shape it parses, its
key, its arguments, that its sink is external) is in :data:`HINTS`, keyed by the manifest's ``local`` name,
apart from the jobs themselves; the jobs are never committed (docs/migrate.md, "measured on real jobs").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compare.verify import CANNOT, DIFFERS, EQUAL, VerifySettings, verify  # noqa: E402
from kit.capture import capture_of_values  # noqa: E402
from migrate import analyse  # noqa: E402
from migrate.draft import make_draft  # noqa: E402
from migrate.errors import MigrateError  # noqa: E402

WORDS = ["spark", "stream", "batch", "word", "count", "kafka", "socket", "window", "state", "query"]


@dataclass(frozen=True)
class Hint:
    """What a job needs from outside its text, to be verified (never a change to the job).

    Attributes:
        capture: ``words`` (lines of words) or ``json`` (one JSON object per record, the shape the job parses).
        key: the compared output's key (``_1``: a printed tuple's first field, or a printed line itself).
        args: the job's arguments, with compare-jobs' placeholders (default: from the names it gives argv).
        output: compare-jobs' ``--output`` (default ``printed``); ``printed:LINE`` picks one of several printed
            streams by the original's line (verify finds the same line in the draft).
        external: the external system the job's output goes to: not verified (said so), nothing is run.
        mode: compare-jobs' ``--mode`` (default: ``final`` for output that re-emits state or windows, else
            ``batches``).
        more: further ``(output, mode)`` to verify (a job printing several streams): all must be proven equal.
        fresh: absolute local directories the job checkpoints in, removed before its run (as on a machine where
            it never ran: a draft resumes from a query checkpoint it finds there).
        settle: compare-jobs' ``--settle-batches`` (default 2): batches run after the input is consumed, enough for
            a window sliding every N batches to write its last windows.
        note: what the hint is based on.
    """

    capture: str = "words"
    key: tuple[str, ...] = ("_1",)
    args: str | None = None
    output: str | None = None
    external: str | None = None
    mode: str | None = None
    more: tuple[tuple[str, str | None], ...] = ()
    fresh: tuple[str, ...] = ()
    settle: int = 2
    note: str = ""


HINTS: dict[str, Hint] = {
    # Kept apart from the jobs' text: what a team would tell `dmk migrate --verify` about its own job.
    "public/bones-brigade__kafka-spark-openshift-python__app.py": Hint(
        capture="json", key=("id",), args="--in {topic} --out {output_topic} --servers {bootstrap}", output="topic",
        note="argparse --in/--out/--servers; echoes each value to the output topic with kafka-python (the compared "
             "output must be JSON objects: the echoed values are, when the input is)"),
    "public/qburst__PySparkCLI__examples__streaming_project__src__app.py": Hint(
        capture="json", external="MongoDB (mongoengine Tweet.save) and PostgreSQL (sqlalchemy create_all at start)",
        note="saves each tweet's user and location to MongoDB; its output files are saveToMongoDB's booleans"),
    "public/ksh24865__pyspark-from-kafka-to-elasticsearch__run.py": Hint(
        capture="json", external="Elasticsearch (saveAsNewAPIHadoopFile with EsOutputFormat); its conf module "
        "(brokers, topic, es_write_conf) is not in the repository",
        note="json.loads of each value, then ES"),
    "public/saeedfalowo__bigdata2020__#7_Spark_Twitter_Json_Data__spark_kafka_twitter_data_json.py": Hint(
        capture="json", args="{bootstrap} {topic}", note="broker, topic = sys.argv[1:]; sqlContext.read.json"),
    "public/zdraganov__spark-proof-of-concept__spark__spark-consumer.py": Hint(capture="json", note="json.loads(v)"),
    "public/whitexozu__PySpark-Example__kafka__kafka_sample.py": Hint(
        key=("_2",), output="printed:13", mode="all", more=(("printed:14", "all"),),
        note="createStream (line 13's pprint) and createDirectStream (line 14's) of one topic print the raw (None, "
             "line) pairs: every pair, keyed by the line (the receiver's and the direct stream's batches do not "
             "split the input alike, so they are not aligned batch by batch)"),
    "public/sathishmtech01__pyspark_learning__scripts__spark__complete_project__data_streaming_kafka__direct_approach"
    ".py": Hint(note="its own brokers and topic (redirected); saveAsTextFiles('hdfs://localhost:9000/test') each batch "
                "beside a pprint of the same lines: verify infers --output files:hdfs://localhost:9000/test from its "
                "text (a local directory of the run; no HDFS runs). Its PYSPARK_SUBMIT_ARGS (--packages "
                "spark-streaming-kafka-0-8_2.11:2.3.1) is not fetched (kit.submit_args, said in its log)"),
    "public/HRandy__spark_streaming_and_sql_practice__spark_streamming_101__windowed_wordcount__windowed_network_"
    "wordcount_tofile.py": Hint(note="socket localhost:9999 (redirected); window(20, 10) word counts saved by "
                                "saveAsTextFiles under file:///home/cloudera/Desktop/out/ (its author's machine): "
                                "verify infers --output files: from its text; the last window per key (final), "
                                "after 25 batches (1 s each) more: its last windows are written every 10 s, and a "
                                "word last seen in the input is in the windows up to 20 s after it",
                                settle=25),
    "public/jojimpv__sparkdemo__p07.py": Hint(
        output="printed:17", mode="batches", more=(("printed:18", "final"),), fresh=("/tmp/ssc2",),
        note="two pprints: per-line counts (line 17), per batch; countByWindow(10, 2) (line 18), its last window"),
}


def _jobs(root: Path, under: str | None) -> list[tuple[str, Path, list[Path]]]:
    manifest = root / "MANIFEST.json"
    if not manifest.exists():
        return [(p.name, p, []) for p in sorted(root.rglob("*.py"))]
    entries = json.loads(manifest.read_text())
    helpers: dict[str, list[Path]] = {}
    for e in entries:
        if e.get("role") == "helper module":
            helpers.setdefault(e["job"], []).append(root / e["local"])
    return [(e["local"], root / e["local"], helpers.get(e["local"], [])) for e in entries
            if e.get("role") != "helper module" and (under is None or e["local"].startswith(under + "/"))]


def input_kind(constructs: set[str]) -> str:
    """The job's input kind, from its plan's constructs."""
    kinds = [kind for construct, kind in (("StreamingContext.socketTextStream", "socket"),
                                          ("StreamingContext.textFileStream", "files"),
                                          ("StreamingContext.queueStream", "queue"),
                                          ("KafkaUtils.createDirectStream", "kafka"),
                                          ("KafkaUtils.createStream", "kafka receiver")) if construct in constructs]
    return "+".join(kinds) or "none"


def capture_values(shape: str, n: int = 40, seed: int = 36) -> list[str]:
    """``n`` record values: lines of words, or JSON objects (a tweet-like record: id, user, text)."""
    rng = random.Random(seed)
    if shape == "json":
        return [json.dumps({"id": i, "user": {"name": f"user{i % 7}", "location": rng.choice(["Oslo", "Lima"])},
                            "text": " ".join(rng.choice(WORDS) for _ in range(4))}) for i in range(n)]
    return [" ".join(rng.choice(WORDS) for _ in range(1 + i % 5)) for i in range(n)]


_ROLES = ((("host", "hostname"), "{socket_host}"), (("port",), "{socket_port}"),
          (("zk", "quorum", "zookeeper"), "{zookeeper}"), (("broker", "bootstrap", "servers"), "{bootstrap}"),
          (("topic",), "{topic}"),
          (("checkpoint",), "{checkpoint}"), (("dir", "input", "path", "directory"), "{input_dir}"),
          (("output", "out", "file"), "{output_dir}"))


def default_args(plan: Any) -> str:
    """compare-jobs' placeholders for the names the job unpacks its argv into, in order."""
    args = []
    for name in plan.argv_names:
        role = next((p for words, p in _ROLES if any(w in name.lower() for w in words)), "{input_dir}")
        args.append(role)
    return " ".join(args)


def _module_path(job: Path, helper: Path) -> Path:
    """Where a helper module goes beside its job, under the name the job imports it by."""
    parts = job.name[:-3].split("__")
    prefix = "__".join(parts[:2]) + "__" if len(parts) > 2 else ""
    relative = helper.name[len(prefix):-3] if prefix and helper.name.startswith(prefix) else helper.name[:-3]
    job_dir = parts[2:-1]
    tail = relative.split("__")
    while job_dir and tail and tail[0] == job_dir[0]:
        job_dir, tail = job_dir[1:], tail[1:]
    return Path(*tail[:-1], tail[-1] + ".py")


@dataclass
class Row:
    """One job's line of the table."""

    job: str
    kind: str
    runs: str
    verdict: str
    why: str

    @property
    def counts(self) -> bool:
        """Whether the job meets the target: its draft runs unmodified and is proven equal."""
        return self.runs == "yes" and self.verdict == EQUAL


def measure(local: str, job: Path, helpers: list[Path], out: Path, broker: str | None, timeout_s: float) -> Row:
    """Run ``dmk migrate --verify`` on one job; its row."""
    try:
        plan = analyse(job)
    except MigrateError as exc:
        return Row(local, "?", "not run", CANNOT, f"refused by the analysis: {exc}")
    kind = input_kind({f.construct for f in plan.findings})
    python2 = sorted({f.construct for f in plan.findings if f.construct.startswith("Python 2")})
    draft = make_draft(plan)
    if not draft.runs:
        return Row(local, kind, "no", CANNOT, "the draft refuses to start: " + "; ".join(draft.unresolved))
    hint = HINTS.get(local, Hint())
    if hint.external:
        return Row(local, kind, "not run", CANNOT, f"external sink: {hint.external}")
    run = out / job.name[:-3]
    shutil.rmtree(run, ignore_errors=True)
    original, drafted = run / "original", run / "draft"
    for where in (original, drafted):
        where.mkdir(parents=True)
    shutil.copyfile(job, original / "job.py")
    for helper in helpers:  # each side's helper module where its job imports it from
        path = _module_path(job, helper)
        for base, text in ((original, helper.read_text()), (drafted, _draft_text(helper))):
            (base / path).parent.mkdir(parents=True, exist_ok=True)
            (base / path).write_text(text)
    capture = capture_of_values(run / "capture.jsonl", capture_values(hint.capture))
    args = hint.args if hint.args is not None else default_args(plan)
    kinds = {"socket": "socket", "files": "files", "queue": "queue"}
    input_kind_option = kinds.get(kind, "kafka") if "{" + "topic}" not in args and "socket_port" not in args \
        and "input_dir" not in args else None
    here = os.getcwd()
    for number, (output, mode) in enumerate(((hint.output, hint.mode or _mode(plan, hint)), *hint.more)):
        for directory in hint.fresh:
            shutil.rmtree(directory, ignore_errors=True)
        settings = VerifySettings(
            job=str(original / "job.py"), input_file=str(capture), key=hint.key, out_dir=run / f"verify{number}",
            args=args, draft_path=drafted / "draft.py", input_kind=input_kind_option, batch_records=20,
            bootstrap_servers=broker, timeout_s=timeout_s, output=output, mode=mode, settle_batches=hint.settle)
        work = run / f"cwd{number}"  # relative checkpoint directories ("checkpoint") land here, apart from others'
        work.mkdir()
        os.chdir(work)
        try:
            verdict = verify(settings, write_draft=lambda _job: draft.text)
        finally:
            os.chdir(here)
        if verdict.status != EQUAL:
            break
    runs, why = _draft_ran(run / f"verify{number}", verdict.status, verdict.detail)
    if verdict.status != EQUAL and output:
        why = f"{output}: {why}"
    if python2 and verdict.status != EQUAL:
        why = f"Python 2-era code ({', '.join(python2)}); {why}"
    elif verdict.status == EQUAL:  # nothing stopped it; say what the original ran with, if anything
        why = f"the original ran with --legacy-python2 ({', '.join(python2)})" if "--legacy-python2" in \
            verdict.detail else ""
    return Row(local, kind, runs, verdict.status, why)


_RE_EMITTING = ("DStream.updateStateByKey", "DStream.window", "DStream.countByWindow", "DStream.reduceByWindow",
                "DStream.countByValueAndWindow", "DStream.groupByKeyAndWindow", "DStream.reduceByKeyAndWindow")


def _mode(plan: Any, hint: Hint) -> str | None:
    """``final`` when the compared output re-emits state or windows on quiet batches, else verify's default.

    How many quiet batches run between two fed chunks is the machine's timing, not the job's logic (a DStream
    job that lags runs more of them): per batch, their re-emitted rows cannot be compared; the last row per
    key (the state, the last window) can.
    """
    if hint.output and hint.output.startswith("printed:"):
        line = int(hint.output.partition(":")[2])
        streams = {f.construct for f in plan.findings if f.line <= line}  # the compared stream's constructs
    else:
        streams = {f.construct for f in plan.findings}
    return "final" if any(c.startswith(_RE_EMITTING) for c in streams) else None


def _draft_text(helper: Path) -> str:
    try:
        return make_draft(analyse(helper, role="helper module")).text
    except MigrateError:
        return helper.read_text()  # a module without DStreams: carried as it is


def _draft_ran(run: Path, status: str, detail: str) -> tuple[str, str]:
    """Whether the draft (compare-jobs' modern side) ran and gave output, and what stopped it otherwise."""
    if status in (EQUAL, DIFFERS):
        return "yes", detail.split(" Report:")[0]
    modern = run / "compare" / "modern"
    if "the modern job" in detail:
        return "no", detail
    if not (modern / "job.log").exists():
        return "not reached", detail  # the original failed first: the draft was not started
    wrote = (modern / "printed.jsonl").exists() or (modern / "files").is_dir()  # printed, or wrote its own files
    return "yes" if wrote else "no", detail


def _own_quorum(broker: str) -> Any:
    """A ZooKeeper on the quorum createStream jobs name (localhost:2181) when that port is free, the broker registered.

    A job naming its own quorum and topic is fed through the stand-ins' redirect (its topic becomes the replayed
    one), but its draft first reads the brokers from that quorum, as the original did in Spark 2.4. None when
    the port is taken (such a draft then says that its quorum did not answer).
    """
    from kit.zookeeper import ZooKeeperError, ZooKeeperServer, register_brokers

    server = ZooKeeperServer(2181)
    try:
        server.start()
        register_brokers(server.hosts, broker)
    except ZooKeeperError as exc:
        server.stop()
        print(f"no ZooKeeper on localhost:2181 ({exc}): drafts of jobs naming that quorum cannot start",
              file=sys.stderr)
        return None
    return server


def main() -> int:
    """Measure every job; one line each as it is done, then the table and the rate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", required=True, type=Path, help="a corpus directory (with MANIFEST.json)")
    parser.add_argument("--under", default=None, help="only the manifest's jobs under this folder (public, heldout)")
    parser.add_argument("--only", default=None, help="only jobs whose name holds one of these (comma-separated)")
    parser.add_argument("--timeout", type=float, default=600.0, help="compare-jobs' bound on each wait, in seconds")
    parser.add_argument("--out", type=Path, default=Path("runs/drafts-corpus"), help="run directory")
    parser.add_argument("--parallel", type=int, default=1, help="jobs measured at once (each runs two JVMs in turn)")
    parser.add_argument("--kafka", default="embedded", help="bootstrap servers, or 'embedded' (one for all jobs)")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    broker_handle = None
    broker = args.kafka
    if broker == "embedded":
        from kit.broker import EmbeddedBroker

        try:  # on the port many jobs name (localhost:9092) when it is free: jobs that produce to it reach it
            broker_handle = EmbeddedBroker(port=9092)
            broker_handle.start()
        except Exception:  # noqa: BLE001 - taken: any port (the stand-ins redirect the jobs' own direct streams)
            broker_handle = EmbeddedBroker()
            broker_handle.start()
        broker = broker_handle.bootstrap_servers
    started = time.monotonic()
    only = [name for name in (args.only or "").split(",") if name]
    jobs = [j for j in _jobs(args.jobs, args.under) if not only or any(name in j[0] for name in only)]
    receivers = any("createStream" in job.read_text(encoding="utf-8", errors="replace") for _, job, _ in jobs)
    quorum = None
    try:  # each job in a process of its own: it runs in its own working directory (relative checkpoints)
        quorum = _own_quorum(broker) if receivers else None
        with ProcessPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(measure, local, job, helpers, out, broker, args.timeout)
                       for local, job, helpers in jobs]
            for future in as_completed(futures):
                row = future.result()
                print(f"{row.verdict:13} {row.runs:11} {row.job}: {' '.join(row.why.split())}", flush=True)
            rows = [f.result() for f in futures]
    finally:
        if quorum is not None:
            quorum.stop()
        if broker_handle is not None:
            broker_handle.stop()
    print("\n| job | input kind | draft runs? | verdict | why not |\n|---|---|---|---|---|")
    for row in rows:
        name = row.job.split("/")[-1][:-3]
        why = " ".join(row.why.replace("|", "/").split())
        print(f"| {name} | {row.kind} | {row.runs} | {row.verdict} | {why[:400]} |")
    met = sum(row.counts for row in rows)
    print(f"\n{met} of {len(rows)} jobs' drafts ran unmodified and were proven equal to their originals "
          f"({100 * met / max(1, len(rows)):.0f} %; {time.monotonic() - started:.0f} s)", flush=True)
    (out / "results.json").write_text(json.dumps([row.__dict__ for row in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
