"""Lifted drafts (migrate/lift.py) of our own jobs, proven equal to their originals by ``dmk migrate --verify``.

Slow: each runs the DStream job and its lifted draft through ``dmk compare-jobs`` (two JVMs, minutes on a
loaded 2-core machine). The default tier checks the drafts' text (tests/test_migrate_draft.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from compare.cli import main
from migrate import analyse
from migrate.draft import make_draft
from tests.test_compare_jobs_printed import write_capture

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "migrate_jobs"
WORDS = ["#spark", "stream", "#batch", "word", "#count", "kafka", "Socket", "QUEUE"]


@pytest.fixture(scope="module")
def posts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(7)
    lines = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(300)]
    return write_capture(tmp_path_factory.mktemp("capture") / "posts.jsonl", lines)


def _verify(job: str, capture: Path, out: Path, *extra: str) -> tuple[int, dict]:
    assert make_draft(analyse(JOBS / job)).lifted, "the job's draft is lifted"
    code = main(["migrate", str(JOBS / job), "--verify", "--input", str(capture), "--key", "_1",
                 "--batch-records", "100", "--verify-out", str(out), "--timeout", "300", *extra])
    metrics_path = out / "compare" / "metrics.json"
    return code, json.loads(metrics_path.read_text()) if metrics_path.exists() else {}


@pytest.mark.slow
def test_a_lifted_per_batch_count_is_proven_equal_batch_by_batch(
    posts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _verify("hashtag_counts.py", posts, tmp_path / "run", "--args", "{socket_host} {socket_port}")
    assert code == 0, (tmp_path / "run" / "compare" / "report.md").read_text()
    assert metrics["mode"] == "batches" and metrics["batches"]["compared"] == 3
    # Three hashtags, each counted in each of the 3 batches of 100 lines.
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 9


@pytest.mark.slow
def test_a_lifted_running_count_is_proven_equal_on_its_final_rows(
    posts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, metrics = _verify("running_word_totals.py", posts, tmp_path / "run", "--args", "{input_dir}",
                            "--mode", "final")
    assert code == 0, (tmp_path / "run" / "compare" / "report.md").read_text()
    # The lower-cased words: 8 keys, each with its count over the 300 lines.
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 8
