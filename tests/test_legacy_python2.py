"""``dmk compare-jobs --legacy-python2``: a Python 2-era original runs under Python 3 (legacy/_py2compat.py).

Default tier: no JVM. Each check runs in a process of its own (the layer changes builtins and kafka-python's
producer for the whole process, as it does for the job's), and a "worker" is a new interpreter started with
the job's environment, as Spark starts its Python workers. The slow test proves our Python 2-era job
(tests/migrate_jobs/python2_records_to_kafka.py) equal to its draft with ``dmk migrate --verify``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compare.errors import EngineFailed
from compare.jobs import ScriptEngine
from kit.engine import DriverConfig
from kit.kafka import Kafka

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "migrate_jobs" / "python2_records_to_kafka.py"
LAYER_LINE = "dmk: --legacy-python2: this job runs under Python"


def _python(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "DMK_LEGACY_PYTHON2"}
    environment.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120,
                          check=False)


def test_the_stand_ins_install_the_layer_in_the_job_and_its_workers_and_say_so(tmp_path: Path) -> None:
    code = f"""
import subprocess, sys
from legacy.standin import install
install({str(tmp_path / "progress.jsonl")!r})
assert reload(sys) is sys
assert sys.setdefaultencoding("utf-8") is None and sys.setdefaultencoding("UTF8") is None
try:
    sys.setdefaultencoding("latin-1")
except NotImplementedError as exc:
    print("refused:", exc)
print(unicode is str, list(xrange(3)), isinstance(b"x", basestring), isinstance("x", basestring), long is int,
      unichr(233))
worker = subprocess.run([sys.executable, "-c", "import sys; print(unicode(7), list(xrange(2)), "
                         "hasattr(sys, 'setdefaultencoding'))"], capture_output=True, text=True)
print("worker:", worker.stdout.strip(), "| stderr:", repr(worker.stderr))
"""
    run = _python(code, env={"DMK_LEGACY_PYTHON2": "1"})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("refused: sys.setdefaultencoding('latin-1'): dmk's Python 2 compatibility layer "
                               "(--legacy-python2) emulates it for UTF-8 (and ASCII) only")
    assert lines[1:] == ["True [0, 1, 2] True True True é", "worker: 7 [0, 1] True | stderr: ''"]  # workers: quietly
    # The job's log (its stderr) says what stood in, once.
    said = [line for line in run.stderr.splitlines() if line.startswith(LAYER_LINE)]
    assert len(said) == 1 and "kafka-python producers built without serializers send a str as its UTF-8" in said[0]
    assert (tmp_path / "python2-site" / "sitecustomize.py").exists()


def test_without_the_flag_a_python2_job_fails_as_on_python3(tmp_path: Path) -> None:
    code = f"""
import sys
from legacy.standin import install
install({str(tmp_path / "progress.jsonl")!r})
reload(sys)
"""
    run = _python(code)
    assert run.returncode == 1 and "NameError: name 'reload' is not defined" in run.stderr
    assert LAYER_LINE not in run.stderr


def test_a_producer_under_the_layer_sends_str_as_utf8_and_keeps_given_serializers(
    bootstrap_servers: str, topic_factory: object, kafka: Kafka, tmp_path: Path
) -> None:
    topic = topic_factory()  # type: ignore[operator]
    code = f"""
from pathlib import Path
from legacy._py2compat import install
install(Path({str(tmp_path)!r}))
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers={bootstrap_servers!r})
producer.send({topic!r}, "héllo", key="clé")
producer.send({topic!r}, b"\\xff raw")
producer.flush()
upper = KafkaProducer(bootstrap_servers={bootstrap_servers!r}, value_serializer=lambda v: v.upper().encode())
upper.send({topic!r}, "kept")
upper.flush()
"""
    run = _python(code)
    assert run.returncode == 0, run.stderr
    records = list(kafka.read_range(topic, 0, 0, 3))
    assert [(r.key, r.value) for r in records] == [("clé".encode(), "héllo".encode()), (None, b"\xff raw"),
                                                   (None, b"KEPT")]


def _config(tmp_path: Path) -> DriverConfig:
    return DriverConfig(engine="legacy", bootstrap_servers="127.0.0.1:9", topics={"input": "words"},
                        out_dir=str(tmp_path / "legacy"), checkpoint_dir=str(tmp_path / "checkpoint"))


def _finish(run: object, timeout_s: float = 120.0) -> None:
    process = run.process  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process.poll() is not None, "the job did not end"


def test_compare_jobs_runs_the_legacy_job_with_the_layer_only_when_asked(tmp_path: Path) -> None:
    script = tmp_path / "py2_job.py"
    script.write_text('import sys\nreload(sys)\nsys.setdefaultencoding("utf-8")\nprint(unicode("ran"), '
                      "list(xrange(2)))\n", encoding="utf-8")
    run = ScriptEngine("legacy", f"python {script}", python2=True).start(None, _config(tmp_path / "on"))
    _finish(run)
    log = (tmp_path / "on" / "legacy" / "job.log").read_text(encoding="utf-8")
    assert run.process.returncode == 0, log
    assert LAYER_LINE in log and "ran [0, 1]" in log
    # Without it the job fails as it would on Python 3, and the error says what to do.
    run = ScriptEngine("legacy", f"python {script}").start(None, _config(tmp_path / "off"))
    _finish(run)
    with pytest.raises(EngineFailed) as failed:
        run.check()
    message = str(failed.value)
    assert "NameError: name 'reload' is not defined" in message
    assert "it looks like Python 2-era code: run the original with --legacy-python2" in message


def test_verify_turns_the_layer_on_for_python2_era_originals_only() -> None:
    from compare.verify import _python2_era

    assert _python2_era(str(JOB)) == [
        "line 18 reload(sys)", "line 19 sys.setdefaultencoding", "line 23 unicode", "line 24 basestring",
        "line 25 long", "line 32 KafkaProducer.send(str)"]
    assert _python2_era(str(REPO / "tests" / "migrate_jobs" / "socket_word_counts.py")) == []
    assert _python2_era(str(REPO / "no_such_job.py")) == []  # unreadable: verify's own error names it later


@pytest.mark.slow
def test_our_python2_job_is_proven_equal_to_its_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compare.cli import main
    from tests.test_compare_jobs_printed import write_capture

    monkeypatch.chdir(REPO)
    rng = random.Random(36)
    words = ["spark", "stream", "batch", "héllo", "kafka", "naïve"]
    lines = [" ".join([str(n), *(rng.choice(words) for _ in range(n % 4))]) for n in range(60)]
    capture = write_capture(tmp_path / "lines.jsonl", lines)
    out = tmp_path / "run"
    code = main(["migrate", str(JOB), "--verify", "--input", str(capture), "--key", "n", "--args",
                 "{bootstrap} {topic} {output_topic}", "--batch-records", "20", "--verify-out", str(out),
                 "--timeout", "600"])
    report = out / "compare" / "report.md"
    assert code == 0, report.read_text(encoding="utf-8") if report.exists() else "no report"
    verdict = " ".join(capsys.readouterr().out.split())
    assert ("The original ran with dmk's Python 2 compatibility layer (--legacy-python2, on because the plan found "
            "Python 2-era code: line 18 reload(sys), line 19 sys.setdefaultencoding, line 23 unicode, line 24 "
            "basestring, line 25 long, line 32 KafkaProducer.send(str))") in verdict
    metrics = json.loads((out / "compare" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["legacy_python2"].startswith("the legacy job ran with dmk's Python 2 compatibility layer")
    # Every record once on each side, summarised alike (the words' count, the first word upper-cased).
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 60
    assert LAYER_LINE in (out / "compare" / "legacy" / "job.log").read_text(encoding="utf-8")
    assert LAYER_LINE not in (out / "compare" / "modern" / "job.log").read_text(encoding="utf-8")
    assert "Note: the legacy job ran with dmk's Python 2 compatibility layer" in report.read_text(encoding="utf-8")
