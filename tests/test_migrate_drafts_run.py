"""Drafts run as written (slow tier): each repository job's draft, fed a small input through a local socket
server, text files, a queue or the session's Kafka broker, prints or writes the rows its DStream original gives.

Each input is sent in rounds, the next only once the job has printed the batch that holds the last, so every
round is one batch and the rows per batch can be compared exactly. The expected rows are the DStream
semantics of the job on that input (Spark 2.4's operators, as pyspark.streaming defines them); the last test
runs a DStream original beside its draft through ``dmk compare-jobs``. The DStream originals of the 1-second
socket jobs are not run here: on a loaded 2-core machine their batches queue up behind the interval and the
input's batch comes minutes later.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from migrate import analyse, analyse_source
from migrate.draft import make_draft

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a job's start alone takes minutes on a loaded machine

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "tests" / "migrate_jobs"
WAIT_S = 600.0  # per block: a loaded 2-core machine (load 20-35 here) takes minutes to start a job


class LineServer:
    """A TCP server on 127.0.0.1 that sends the lines it is given to the one client that connects."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.conn: socket.socket | None = None
        self.connected = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            self.conn, _ = self.sock.accept()
        except OSError:
            return
        self.connected.set()

    def send(self, lines: list[str]) -> None:
        assert self.connected.wait(WAIT_S), "the job never connected to the socket server"
        assert self.conn is not None
        self.conn.sendall("".join(line + "\n" for line in lines).encode())

    def close(self) -> None:
        for s in (self.conn, self.sock):
            if s is not None:
                s.close()


class Job:
    """A job script run as its own process; its stdout read line by line."""

    def __init__(self, args: list[str], cwd: Path, engine: str | None = None) -> None:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false pyspark-shell",
               "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, *args] if engine is None else [
            sys.executable, "-m", "compare.jobrun", "--engine", engine, "--progress", str(cwd / "progress.jsonl"),
            *args]
        self.log = (cwd / f"job-{time.monotonic_ns()}.log").open("w")
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def blocks(self, deadline_s: float = WAIT_S) -> Iterator[tuple[str, list[Any]]]:
        """pprint's blocks as they come: (the time line, the records printed), each within ``deadline_s``."""
        while True:
            block = self._block(time.monotonic() + deadline_s)
            if block is None:
                return
            yield block

    def _next(self, deadline: float) -> str | None:
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    pytest.fail(f"no output in time; log {self.log.name}; printed {self.seen[-20:]}")
                continue
            if line is None:
                pytest.fail(f"the job ended (code {self.process.wait()}); log {self.log.name}: "
                            f"{Path(self.log.name).read_text()[-3000:]}")
            self.seen.append(line)
            return line

    def _block(self, deadline: float) -> tuple[str, list[Any]] | None:
        while (line := self._next(deadline)) != "-------------------------------------------":
            pass
        stamp = self._next(deadline)
        assert stamp is not None and stamp.startswith("Time: "), stamp
        assert self._next(deadline) == "-------------------------------------------"
        records = []
        while (line := self._next(deadline)) != "":
            assert line is not None
            records.append(line if line == "..." else ast.literal_eval(line))
        return stamp, records

    def printed(self) -> list[str]:
        """Every line the job has printed so far."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return self.seen
            if line is not None:
                self.seen.append(line)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self.log.close()


def _draft(path: Path, tmp: Path, source: str | None = None) -> Path:
    plan = analyse_source(source, str(path)) if source is not None else analyse(path)
    result = make_draft(plan, lifting=False)  # these tests are the runtime's; lifted drafts: test_migrate_lifted_verify
    assert result.runs, result.unresolved
    out = tmp / "draft.py"
    out.write_text(result.text, encoding="utf-8")
    return out


def _rounds(job: Job, send: Callable[[list[str]], None], rounds: list[list[str]],
            changed: Callable[[list[Any], list[Any]], bool]) -> list[list[Any]]:
    """Send each round once the job has printed the batch of the last; the records of those batches."""
    blocks = job.blocks()
    _stamp, last = next(blocks)  # the job runs its batches: the first (empty) one has been printed
    outputs = []
    for lines in rounds:
        send(lines)
        for _stamp, records in blocks:
            if changed(last, records):
                outputs.append(records)
                last = records
                break
    return outputs


def _word_counts(lines: list[str]) -> Counter[tuple[str, int]]:
    return Counter(Counter(w for line in lines for w in line.split(" ")).items())


ROUNDS = [["to be or", "not to be"], ["be quick"], ["or else", "else"]]


def test_socket_word_counts_prints_the_per_batch_counts(tmp_path: Path) -> None:
    server = LineServer()
    job = Job([str(_draft(JOBS / "socket_word_counts.py", tmp_path)), "127.0.0.1", str(server.port)], tmp_path)
    try:
        printed = _rounds(job, server.send, ROUNDS, lambda last, records: bool(records))
    finally:
        job.stop()
        server.close()
    # Per batch, not a running total: each round's own counts.
    assert [Counter(records) for records in printed] == [_word_counts(r) for r in ROUNDS]


def test_stateful_word_totals_re_emits_every_key_from_its_initial_state(tmp_path: Path) -> None:
    server = LineServer()
    job = Job([str(_draft(JOBS / "stateful_word_totals.py", tmp_path)), "127.0.0.1", str(server.port)],
              tmp_path)
    try:
        blocks = job.blocks()
        _stamp, first = next(blocks)
        # The initial RDD is the state before any input, printed every batch.
        assert sorted(first) == [("hello", 1), ("world", 1)]
        printed = _rounds(job, server.send, ROUNDS, lambda last, records: sorted(records) != sorted(last))
        _stamp, quiet = next(blocks)  # a batch without input re-emits every key
    finally:
        job.stop()
        server.close()
    state: Counter[str] = Counter({"hello": 1, "world": 1})
    expected = []
    for lines in ROUNDS:
        state.update(w for line in lines for w in line.split(" "))
        expected.append(sorted(state.items()))
    assert [sorted(records) for records in printed] == expected
    assert sorted(quiet) == expected[-1]


def test_the_state_survives_a_restart_of_the_draft(tmp_path: Path) -> None:
    """stateful_word_totals checkpoints in ./checkpoint: a restarted draft goes on from the state.

    Each run is stopped once the micro-batch after the one that printed its round has printed too: Structured
    Streaming commits a micro-batch before it starts the next, so the round's batch is then complete. A batch killed
    before its commit is run again after the restart, from the state before it, with what the receiver gets then:
    the round's lines are gone, as a DStream receiver's are without a write-ahead log (stopped right after the
    round's output, the restart printed hello, world and the second round only).
    """
    script = _draft(JOBS / "stateful_word_totals.py", tmp_path)
    state: Counter[str] = Counter({"hello": 1, "world": 1})
    for lines in (["to be or"], ["not to be"]):
        server = LineServer()
        job = Job([str(script), "127.0.0.1", str(server.port)], tmp_path)
        try:
            printed = _rounds(job, server.send, [lines], lambda last, records: sorted(records) != sorted(last))
            _stamp, after = next(job.blocks())
            assert sorted(after) == sorted(printed[-1])  # no new input: the totals printed again
        finally:
            job.stop()
            server.close()
        state.update(w for line in lines for w in line.split(" "))
        assert [sorted(r) for r in printed] == [sorted(state.items())]
    assert (tmp_path / "checkpoint" / "query" / "offsets").is_dir()
    assert (tmp_path / "checkpoint" / "dstream-state" / "state-0").is_dir()


def test_windowed_wordcount_slides_its_windows_over_batches(tmp_path: Path) -> None:
    """10 s batches, windows of 30 s every 10 s: a round counts in exactly three windows, then leaves them."""
    # Its checkpoint is on HDFS, which this machine has not (the original fails there too): a local one instead.
    source = (JOBS / "windowed_wordcount.py").read_text().replace("hdfs:///checkpoints/windowed_wordcount",
                                                                  (tmp_path / "ckpt").as_uri())
    server = LineServer()
    script = _draft(JOBS / "windowed_wordcount.py", tmp_path, source)
    job = Job([str(script), "127.0.0.1", str(server.port)], tmp_path)
    try:
        blocks = job.blocks()
        next(blocks), next(blocks), next(blocks)  # the first batch's three outputs, before any input
        server.send(["x y x", "y"])
        batches = []
        while len(batches) < 5:
            batch = [next(blocks)[1] for _ in range(3)]  # windowed (inverse), recounted, countByWindow
            if batches or any(batch):
                batches.append(batch)
    finally:
        job.stop()
        server.close()
    window = [sorted(records) for records in (batches[0][0], batches[0][1])]
    assert window == [[("x", 2), ("y", 2)]] * 2
    # The round arrived within one batch; it is in the windows of that batch and of the next two, and no other.
    assert [[sorted(b[0]), sorted(b[1]), b[2]] for b in batches] == \
        [[[("x", 2), ("y", 2)], [("x", 2), ("y", 2)], [2]]] * 3 + [[[], [], []]] * 2


def test_checkpointed_word_counts_runs_its_foreach_rdd_function(tmp_path: Path) -> None:
    """Its report(batch_time, pairs): the broadcast skipped words, the accumulator and the output file, per batch."""
    server = LineServer()
    output = tmp_path / "counts.txt"
    job = Job([str(_draft(JOBS / "checkpointed_word_counts.py", tmp_path)), "127.0.0.1", str(server.port),
               str(tmp_path / "ckpt"), str(output)], tmp_path)
    rounds = [["a x y x"], ["b c z"]]
    try:
        for lines in rounds:
            before = output.read_text().count("\n") if output.exists() else 0
            server.send(lines)
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                written = output.read_text().splitlines() if output.exists() else []
                if any(not line.endswith(" []") for line in written[before:]):
                    break
                time.sleep(0.5)
        printed = list(job.printed())
    finally:
        job.stop()
        server.close()
    rows = [ast.literal_eval(re.sub(r"^Counts at time \S+ \S+ ", "", line)) for line in output.read_text().splitlines()]
    assert [sorted(r) for r in rows if r] == [[("x", 2), ("y", 1)], [("z", 1)]]
    dropped = [int(m.group(1)) for line in printed if (m := re.match(r"Dropped (\d+) word\(s\) totally", line))]
    assert dropped and dropped[-1] == 3 and dropped == sorted(dropped), printed[-30:]  # a, then b and c


QUEUE_JOB = '''
import sys
from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    sc = SparkContext(appName="queue")
    ssc = StreamingContext(sc, 1)
    queued = [sc.parallelize(range(1, 1 + 10 * n), 3) for n in range(1, 5)]
    ssc.queueStream(queued).map(lambda x: (x % 3, 1)).reduceByKey(lambda a, b: a + b).pprint()
    ssc.start()
    ssc.awaitTermination()
'''


def test_a_queue_stream_is_one_batch_per_queued_rdd(tmp_path: Path) -> None:
    job = Job([str(_draft(tmp_path / "queue_job.py", tmp_path, QUEUE_JOB))], tmp_path)
    try:
        blocks = job.blocks()
        printed = [records for _stamp, records in (next(blocks) for _ in range(8)) if records][:4]
    finally:
        job.stop()
    assert [sorted(p) for p in printed] == [
        sorted(Counter(x % 3 for x in range(1, 1 + 10 * n)).items()) for n in range(1, 5)]


FILE_JOB = '''
import sys
from pyspark import SparkContext
from pyspark.streaming import StreamingContext

if __name__ == "__main__":
    sc = SparkContext(appName="files")
    ssc = StreamingContext(sc, 1)
    ssc.textFileStream(sys.argv[1]).flatMap(lambda line: line.split(" ")).countByValue().pprint()
    ssc.start()
    ssc.awaitTermination()
'''


def test_a_text_file_stream_reads_the_new_files_only(tmp_path: Path) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "before.txt").write_text("old old\n")  # there before the start: DStreams skip it
    job = Job([str(_draft(tmp_path / "file_job.py", tmp_path, FILE_JOB)), str(incoming)], tmp_path)
    number = iter(range(100))

    def write(lines: list[str]) -> None:
        staged = tmp_path / "staged.txt"
        staged.write_text("".join(line + "\n" for line in lines))
        staged.rename(incoming / f"f{next(number)}.txt")  # appears whole

    try:
        printed = _rounds(job, write, ROUNDS, lambda last, records: bool(records))
    finally:
        job.stop()
    assert [Counter(records) for records in printed] == [_word_counts(r) for r in ROUNDS]


@pytest.mark.kafka
def test_kafka_direct_word_counts_reads_the_topic(tmp_path: Path, kafka_broker: str, kafka: Any,
                                                topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    job = Job([str(_draft(JOBS / "kafka_direct_word_counts.py", tmp_path)), kafka_broker, topic], tmp_path,
              engine="modern")

    def produce(lines: list[str]) -> None:
        sender = kafka.sender(acks="all")
        try:
            for line in lines:
                sender.send(topic, key=None, value=line.encode())
            assert sender.flush(30.0) == 0
        finally:
            sender.close()

    try:
        printed = _rounds(job, produce, ROUNDS, lambda last, records: bool(records))
    finally:
        job.stop()
    assert [Counter(records) for records in printed] == [_word_counts(r) for r in ROUNDS]


@pytest.mark.kafka
def test_the_orders_draft_is_proven_equal_by_compare_jobs(assert_jobs_equivalent: Any, tmp_path: Path,
                                                           kafka_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/orders/legacy_job.py (Kafka in, updateStateByKey, Kafka out) against its draft, unmodified."""
    from examples.orders import orders
    from kit.capture import capture
    from kit.kafka import Kafka

    monkeypatch.chdir(REPO)
    topic = f"orders-draft-{tmp_path.name}"
    with Kafka(kafka_broker) as kafka:
        kafka.create_topic(topic, 2)
        sender = kafka.sender(acks="all")
        try:
            for i, (key, value) in enumerate(orders(300)):
                sender.send(topic, key=key, value=value, partition=i % 2)
            assert sender.flush(30.0) == 0
        finally:
            sender.close()
    captured = capture(kafka_broker, topic, tmp_path / "orders.jsonl").path
    script = _draft(REPO / "examples" / "orders" / "legacy_job.py", tmp_path)
    result = assert_jobs_equivalent(
        "python examples/orders/legacy_job.py {bootstrap} {topic} {output_topic} {checkpoint}",
        f"python {script} {{bootstrap}} {{topic}} {{output_topic}} {{checkpoint}}", captured, key="customer")
    assert result.equivalent


@pytest.mark.kafka
def test_a_job_on_its_own_kafka_is_proven_equal_to_its_draft(tmp_path: Path, kafka_broker: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers and topic are the job's constants (no argv): --verify feeds both through the stand-ins' redirect."""
    from kit.capture import capture_of_values as write_capture
    from compare.verify import EQUAL, VerifySettings, verify

    monkeypatch.chdir(tmp_path)
    job = REPO / "tests" / "print_jobs" / "legacy_own_kafka.py"
    lines = [" ".join(["to", "be", "or", "not"][: 1 + i % 4]) for i in range(30)]
    capture = write_capture(tmp_path / "words.jsonl", lines)
    verdict = verify(VerifySettings(job=str(job), input_file=str(capture), key=("_1",), out_dir=tmp_path / "run",
                                    input_kind="kafka", batch_records=15, bootstrap_servers=kafka_broker,
                                    timeout_s=WAIT_S), write_draft=lambda path: draft_text(Path(path)))
    assert verdict.status == EQUAL, verdict.detail
    metrics = json.loads((tmp_path / "run" / "compare" / "metrics.json").read_text())
    # Two batches of 15 lines, each side's per-batch counts: 4 words in each batch.
    assert metrics["batches"]["compared"] == 2
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 8


def test_one_of_a_draft_s_two_printed_streams_is_proven_equal_by_its_line(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """printed:LINE picks the original's stream at LINE and the draft's stream of the same line."""
    from kit.capture import capture_of_values as write_capture
    from compare.verify import EQUAL, VerifySettings, verify

    monkeypatch.chdir(tmp_path)
    job = REPO / "tests" / "print_jobs" / "legacy_two_streams.py"
    line = next(n for n, text in enumerate(job.read_text().splitlines(), 1) if "reduceByKey(add).pprint()" in text)
    capture = write_capture(tmp_path / "words.jsonl", ["a b a", "b c", "a", "c c d"] * 5)
    verdict = verify(VerifySettings(job=str(job), input_file=str(capture), key=("_1",), out_dir=tmp_path / "run",
                                    args="{socket_host} {socket_port}", batch_records=10, output=f"printed:{line}",
                                    timeout_s=WAIT_S), write_draft=lambda path: draft_text(Path(path)))
    assert verdict.status == EQUAL, verdict.detail
    metrics = json.loads((tmp_path / "run" / "compare" / "metrics.json").read_text())
    assert metrics["jobs"]["legacy"]["printed_stream"] == f"legacy_two_streams.py:{line}"
    assert metrics["jobs"]["modern"]["printed_stream"].startswith("draft.py:")
    # Two batches of 10 lines, each holding a, b, c and d: their counts, not the lines' count.
    assert metrics["batches"]["compared"] == 2 and metrics["jobs"]["modern"]["rows_compared"] == 8


def draft_text(job: Path) -> str:
    """The draft of ``job``, which runs as written."""
    result = make_draft(analyse(job))
    assert result.runs, result.unresolved
    return result.text
