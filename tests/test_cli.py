"""The dmk command line, run in-process: outputs, files and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compare.cli import main
from kit.broker import free_port
from kit.dataset import read_dataset, read_manifest
from kit.kafka import Kafka

REPO = Path(__file__).resolve().parents[1]


def test_gen_writes_a_dataset_and_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "events.jsonl"
    code = main([
        "gen", "--records", "12000", "--seed", "5", "--profile", "messy", "--out", str(out), "--users", "50",
        "--events-per-second", "300",  # 40 s of event time: too-late records need 17 s and more before them
    ])
    assert code == 0
    manifest = read_manifest(out)
    assert manifest["records"] == 12_000 and manifest["spec"]["users"] == 50 and manifest["spec"]["seed"] == 5
    assert len(read_dataset(out)) == 12_000
    printed = capsys.readouterr().out
    assert manifest["sha256"] in printed
    assert f"{manifest['counts']['too_late']:,}" in printed


def test_replay_and_offsets(bootstrap_servers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "events.parquet"
    assert main(["gen", "--records", "10000", "--out", str(data)]) == 0
    topic = f"cli_replay_{free_port()}"
    log = tmp_path / "log.parquet"
    code = main(["replay", str(data), "--topic", topic, "--partitions", "3", "--bootstrap-servers", bootstrap_servers,
                 "--log", str(log)])
    assert code == 0
    with Kafka(bootstrap_servers) as kafka:
        assert sum(kafka.end_offsets(topic).values()) == 10_000
    assert len(__import__("pandas").read_parquet(log)) == 10_000
    capsys.readouterr()
    assert main(["offsets", topic, "--json", "--bootstrap-servers", bootstrap_servers]) == 0
    offsets = json.loads(capsys.readouterr().out)
    assert sum(offsets[topic][p]["end"] for p in ("0", "1", "2")) == 10_000


@pytest.mark.slow  # CI runs `dmk demo` itself; this checks its summary against metrics.json (286 s)
def test_demo_on_the_session_broker(bootstrap_servers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--records", "10000", "--workloads", "running_counts", "--bootstrap-servers", bootstrap_servers,
                 "--out", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines at the captured width
    assert code == 0, out
    assert "read back 10,000 records" in out and "exact" in out
    metrics = json.loads((tmp_path / "compare-running_counts" / "metrics.json").read_text())
    assert metrics["equivalent"] and metrics["records"] == 10_000
    assert f"legacy = modern = oracle: {metrics['oracle']['rows']:,} rows, {metrics['oracle']['dead_letters']:,} dead letters" in out
    for engine in ("legacy", "modern"):  # each engine's pace, as the report gives it
        kept, steady = metrics["engines"][engine]["kept_up"], metrics["engines"][engine]["latency_after_startup_ms"]
        pace = f"{engine} {'kept up' if kept['kept_up'] else 'fell behind'}"
        if kept["caught_up_ms"] is None:
            assert f"{pace}, never caught up" in out
        elif steady["p99"] is None:
            assert f"{pace}, caught up only after the replay ended" in out
        else:
            assert f"{pace} (start-up {kept['caught_up_ms'] / 1000:.1f} s), latency p99 after it {steady['p99']:,.0f} ms" in out
    assert (tmp_path / "events.parquet.manifest.json").exists()
    assert (tmp_path / "compare-running_counts" / "report.html").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["replay", "{data}", "--topic", "t", "--bootstrap-servers", "127.0.0.1:{port}"], "no Kafka broker answered"),
        (["replay", "{missing}", "--topic", "t", "--bootstrap-servers", "{bootstrap}"], "dataset"),
        (["gen", "--records", "1000", "--profile", "messy", "--out", "{tmp}/x.parquet"], "too_late"),
        (["gen", "--records", "100", "--out", "{tmp}/x.csv"], ".csv"),
        (["demo", "--workloads", "no_such_workload", "--bootstrap-servers", "{bootstrap}"], "unknown workload"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, bootstrap_servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.parquet"
    main(["gen", "--records", "2000", "--out", str(data)])
    capsys.readouterr()
    filled = [
        a.format(data=data, port=free_port(), missing=tmp_path / "nope.parquet", bootstrap=bootstrap_servers, tmp=tmp_path)
        for a in argv
    ]
    assert main(filled) == 2
    err = capsys.readouterr().err
    assert f"dmk {argv[0]}: error:" in err and message in err
    assert "Traceback" not in err


def test_unknown_option_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        main(["gen", "--records", "10", "--out", "x.parquet", "--colour", "red"])
    assert info.value.code == 2


def test_readme_quickstart_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(quickstart) == 2, "the Quickstart is exactly two commands"
    install_and_demo, test_command = quickstart
    ci = (REPO / ".ci" / "run").read_text()
    for step in install_and_demo.split(" && "):
        step = step.replace('pip install -e ".[dev]"', 'pip install --quiet -e ".[dev]"')
        assert re.search(r"^" + re.escape(step) + r"$", ci, re.M), f"{step!r} is not a line of .ci/run"
    assert ci.rstrip().splitlines()[-1] == test_command


def test_console_script_is_installed() -> None:
    dmk = Path(sys.executable).parent / "dmk"  # the console script pip installed beside this Python
    run = subprocess.run([str(dmk), "--help"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0 and "dmk" in run.stdout and "DMK_SPARK_MASTER" in run.stdout


def test_broker_start_runs_until_ctrl_c(tmp_path: Path) -> None:
    import queue
    import signal
    import threading
    import time

    from kit.kafka import wait_for_broker

    port = free_port()
    log = tmp_path / "tansu.log"
    # As a shell's background job would: SIGINT ignored from the start (the command must still stop on it).
    proc = subprocess.Popen(
        [sys.executable, "-m", "compare.cli", "broker", "start", "--port", str(port), "--log", str(log)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    try:
        # As a user would: wait for the line that says where the broker listens (the broker can answer a
        # moment before the command has seen it answer and printed that line), then use it and press Ctrl-C.
        printed = [lines.get(timeout=60)]
        assert f"listening on 127.0.0.1:{port}" in printed[0], printed
        wait_for_broker(f"127.0.0.1:{port}", timeout_s=10)
        with Kafka(f"127.0.0.1:{port}") as kafka:
            kafka.create_topic("from_cli", 2)
            assert kafka.partitions("from_cli") == [0, 1]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(printed) + "".join(lines.queue)
    assert proc.returncode == 0, out
    assert "broker stopped" in out, out
    deadline = time.monotonic() + 10
    while True:  # the port is free again: no broker left behind
        try:
            with __import__("socket").create_connection(("127.0.0.1", port), timeout=0.5):
                pass
        except OSError:
            break
        assert time.monotonic() < deadline, "something still listens on the broker's port"
        time.sleep(0.1)
