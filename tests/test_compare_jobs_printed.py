"""``dmk compare-jobs`` on print-only jobs fed by a socket, a directory, a queue and Kafka (slow: two JVMs each).

The jobs (tests/print_jobs/) are ours, written with the constructs of Spark 2.4's streaming examples
(``socketTextStream``, ``textFileStream``, ``queueStream``, ``createDirectStream``, ``createStream``, ``pprint``);
their rewrites
print each micro-batch's counts from ``foreachBatch``, and a wrong one prints running totals to the console
sink. The captures are written here, not captured from a broker, except the Kafka one's replay.
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pytest

from compare.cli import main
from kit.capture import capture_of_values

REPO = Path(__file__).resolve().parents[1]
JOBS = "python tests/print_jobs"
WORDS = ["spark", "stream", "batch", "word", "count", "kafka", "socket", "queue"]


def write_capture(path: Path, values: list[str]) -> Path:
    """A capture of one partition holding ``values``, 1 ms apart (as ``dmk capture`` writes it)."""
    return capture_of_values(path, values, spacing_ms=1)


@pytest.fixture(scope="module")
def words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(300)]
    return write_capture(tmp_path_factory.mktemp("capture") / "words.jsonl", lines)


def _compare(out: Path, capture: Path, legacy: str, modern: str, *extra: str) -> tuple[int, dict]:
    code = main(["compare-jobs", "--input", str(capture), "--key", "_1", "--output", "printed", "--mode", "batches",
                 "--batch-records", "100", "--out", str(out), "--legacy", legacy, "--modern", modern,
                 "--timeout", "300", *extra])
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    return code, metrics


def _per_batch_counts(lines: list[str], size: int) -> list[dict[str, int]]:
    batches = []
    for start in range(0, len(lines), size):
        counts: dict[str, int] = {}
        for word in " ".join(lines[start:start + size]).split():
            counts[word] = counts.get(word, 0) + 1
        batches.append(counts)
    return batches


@pytest.mark.slow
def test_a_socket_job_that_only_pprints_equals_its_rewrite_batch_by_batch(
    words: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _compare(tmp_path / "run", words, f"{JOBS}/legacy_words.py socket {{socket_host}} {{socket_port}}",
                             f"{JOBS}/modern_words.py socket {{socket_host}} {{socket_port}}")
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    from kit.capture import read_capture

    lines = [v.decode() for v in read_capture(words)["value"]]
    expected = _per_batch_counts(lines, 100)
    assert metrics["batches"]["compared"] == 3
    assert metrics["jobs"]["legacy"]["rows_compared"] == sum(len(b) for b in expected)
    printed = [json.loads(line) for line in (tmp_path / "run" / "legacy" / "printed.jsonl").read_text().splitlines()]
    recorded: dict[int, dict[str, int]] = {}
    for entry in printed:
        if "values" in entry:
            recorded.setdefault(entry["batch_ms"], {})[entry["values"][0]] = entry["values"][1]
    assert [b for b in recorded.values() if b] == expected  # every element, not only the ten pprint shows


@pytest.mark.slow
def test_a_running_total_rewrite_is_caught_in_the_batch_it_first_differs(
    words: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    with socket.create_server(("127.0.0.1", 0)) as taken:  # the DStream job names a port in use on the machine
        port = taken.getsockname()[1]
        code, metrics = _compare(tmp_path / "run", words, f"{JOBS}/legacy_words.py socket 127.0.0.1 {port}",
                                 f"{JOBS}/modern_running.py socket {{socket_host}} {{socket_port}}",
                                 "--input-kind", "socket")
    # Fed all the same: its socketTextStream was pointed at the harness's own server.
    assert metrics["jobs"]["legacy"]["input_kind"] == "socket"
    assert code == 1 and not metrics["equivalent"]
    first = metrics["batches"]["first_differing"]
    # Batch 1's counts are its running totals too; batch 2 is the first where they differ, in every word.
    assert first["batch"] == 2 and first["input"] == [100, 200]
    assert first["keys"] == sorted(WORDS)
    assert "first differing batch: 2 of 3" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_a_directory_job_equals_its_rewrite(words: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _compare(tmp_path / "run", words, f"{JOBS}/legacy_words.py files {{input_dir}}",
                             f"{JOBS}/modern_words.py files {{input_dir}}")
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    assert metrics["batches"]["compared"] == 3 and metrics["jobs"]["modern"]["input_kind"] == "files"


@pytest.mark.slow
def test_a_queue_job_fed_from_the_capture_equals_a_rewrite_reading_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    numbers = write_capture(tmp_path / "numbers.jsonl", [str(n) for _ in range(3) for n in range(1, 201)])
    code = main(["compare-jobs", "--input", str(numbers), "--key", "_1", "--output", "printed", "--mode", "batches",
                 "--batch-records", "200", "--input-kind", "queue,files", "--out", str(tmp_path / "run"),
                 "--legacy", f"{JOBS}/legacy_queue.py", "--modern", f"{JOBS}/modern_words.py numbers {{input_dir}}",
                 "--timeout", "300"])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    # Three batches of 1..200: each remainder 20 times per batch, on both sides.
    assert metrics["batches"]["compared"] == 3 and metrics["jobs"]["legacy"]["rows_compared"] == 30


@pytest.mark.slow
@pytest.mark.kafka
def test_a_kafka_job_that_only_pprints_equals_its_rewrite(
    kafka_broker: str, words: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _compare(tmp_path / "run", words, f"{JOBS}/legacy_words.py kafka {{bootstrap}} {{topic}}",
                             f"{JOBS}/modern_words.py kafka {{bootstrap}} {{topic}}", "--bootstrap-servers",
                             kafka_broker)
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    assert metrics["batches"]["compared"] == 3


@pytest.mark.slow
@pytest.mark.kafka
def test_a_createstream_job_named_by_its_quorum_equals_its_rewrite_batch_by_batch(
    kafka_broker: str, words: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _compare(tmp_path / "run", words, f"{JOBS}/legacy_receiver.py {{zookeeper}} {{topic}}",
                             f"{JOBS}/modern_words.py kafka {{bootstrap}} {{topic}}", "--bootstrap-servers",
                             kafka_broker)
    assert code == 0 and metrics["equivalent"], (tmp_path / "run" / "report.md").read_text()
    from kit.capture import read_capture

    expected = _per_batch_counts([v.decode() for v in read_capture(words)["value"]], 100)
    # Three batches of 100 records, aligned by the receiver's record count and the query's offsets.
    assert metrics["batches"]["compared"] == 3
    assert metrics["jobs"]["legacy"]["rows_compared"] == sum(len(b) for b in expected)
    log = (tmp_path / "run" / "legacy" / "job.log").read_text()
    assert "createStream reads its new input topic from the start" in log
    progress = [json.loads(line) for line in (tmp_path / "run" / "legacy" / "progress.jsonl").read_text().splitlines()]
    # Each record counted once: the receiver's own socket is not an input of the job's.
    assert max(r["ranges"][0][3] for r in progress) == 300
    assert all(len(r["ranges"]) == 1 and r["ranges"][0][0] == "lines" for r in progress)
