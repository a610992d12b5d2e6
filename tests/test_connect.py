"""The modern side over Spark Connect: every modern workload on a local Connect server equals the oracle.

The server is the session's ``connect_server`` (PySpark's own, started once, by the first test that needs it);
DStreams cannot run over Connect (no SparkContext), so only the modern side is run here. The default tier runs
``running_counts`` on a short messy stream end to end (rows, dead letters, progress log); ``-m slow`` runs every
variant of every workload on the messy profile, as tests/test_workloads.py does on the classic session, and
``dmk compare --connect`` end to end against the session's server.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pandas as pd
import pytest

from compare.diff import assert_outputs_equal
from compare.harness import EngineOutputs, dataset_spec, run_engine
from kit import workloads
from kit.broker import free_port
from kit.dataset import generate
from kit.errors import ConfigError, ConnectError
from tests._procs import assert_child_dies_with_its_parent

SHORT_STREAM = {"records": 3_000, "events_per_second": 100, "lateness_margin_ms": 4_900}
"""30 s of event time at 100 events/s: a short messy stream for the default tier's run."""


def _assert_dead_letters(run: EngineOutputs, rejects: pd.DataFrame) -> int:
    log = run.replay.log[["seq", "topic"]]
    expected = rejects.merge(log, on="seq")[["topic", "seq", "reason"]]
    dead = run.dead_letters()
    got = pd.DataFrame({"topic": dead["topic"].to_numpy(), "seq": run.seqs_of(dead), "reason": dead["reason"].to_numpy()})
    columns = ["topic", "seq", "reason"]
    pd.testing.assert_frame_equal(
        got.sort_values(columns).reset_index(drop=True), expected.sort_values(columns).reset_index(drop=True),
        check_dtype=False,
    )
    return len(got)


def test_a_url_that_is_not_spark_connect_is_refused() -> None:
    from kit.connect import connect_session

    with pytest.raises(ConfigError, match=r"sc://HOST:PORT") as caught:
        connect_session("http://127.0.0.1:15002")
    assert caught.value.field == "connect"


def test_an_unreachable_server_is_named_with_the_fix() -> None:
    from kit.connect import connect_session

    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError, match=r"no Spark Connect server answered at sc://127\.0\.0\.1:\d+ .*Start one") \
            as caught:
        connect_session(url, timeout_s=2)
    assert caught.value.url == url


def test_the_server_check_names_what_its_workers_cannot_import(connect_spark, connect_server) -> None:
    from kit.connect import check_server

    report = check_server(connect_spark, connect_server.url)
    assert report["missing"] == {}
    with pytest.raises(ConnectError, match=r"cannot run the kit: .*dmk_no_such_module.*pip install") as caught:
        check_server(connect_spark, connect_server.url, modules=("kit", "dmk_no_such_module"))
    assert caught.value.missing == ("dmk_no_such_module",) and caught.value.url == connect_server.url


def test_running_counts_over_connect_equals_the_oracle(bootstrap_servers, connect_spark, tmp_path) -> None:
    """The default tier's Connect run: rows, dead letters and progress of running_counts on a short messy stream."""
    from modern.runner import read_progress

    name = "running_counts"
    spec = dataset_spec("messy", **SHORT_STREAM)
    frame = generate(spec)
    expected = workloads.get(name).oracle(frame, spec)
    run = run_engine("modern", ((name, "default"),), spec, frame, bootstrap_servers=bootstrap_servers,
                     spark=connect_spark, workdir=tmp_path, timeout_s=300)

    got = workloads.final_result(workloads.get(name), run.rows(name))
    assert_outputs_equal(expected.rows, got, keys=workloads.get(name).key_columns,
                      values=workloads.get(name).value_columns)
    assert _assert_dead_letters(run, expected.dead_letters) > 0
    progress = read_progress(run.out_dir, name)  # polled over Connect (modern.runner._ProgressPoller)
    assert sum(p["numInputRows"] for p in progress) == len(run.replay.log)
    assert len({p["batchId"] for p in progress}) == len(progress)


_RUNS: dict[str, EngineOutputs] = {}
_DATA: dict[str, tuple] = {}


def _messy() -> tuple:
    if not _DATA:
        spec = dataset_spec("messy")
        frame = generate(spec)
        _DATA["messy"] = (spec, frame, {name: workloads.get(name).oracle(frame, spec) for name in workloads.NAMES})
    return _DATA["messy"]


@pytest.fixture
def connect_run(bootstrap_servers, connect_spark, tmp_path_factory):
    """Run (once per test session) every modern variant of a workload over Connect on the messy profile."""

    def get(name: str) -> EngineOutputs:
        if name not in _RUNS:
            spec, frame, _ = _messy()
            jobs = tuple((name, v.name) for v in workloads.get(name).variants("modern"))
            _RUNS[name] = run_engine("modern", jobs, spec, frame, bootstrap_servers=bootstrap_servers,
                                     spark=connect_spark, workdir=tmp_path_factory.mktemp(f"connect-{name}"))
        return _RUNS[name]

    return get


def _cases() -> list:
    return [
        pytest.param(name, variant.name, id=f"{name}-{variant.name}")
        for name in workloads.NAMES
        for variant in workloads.get(name).variants("modern")
        if variant.equivalent
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), _cases())
def test_every_modern_workload_over_connect_equals_the_oracle(connect_run, name, variant) -> None:
    from modern.runner import late_dropped

    spec = workloads.get(name)
    run = connect_run(name)
    _, _, oracles = _messy()
    got = workloads.final_result(spec, run.rows(name, variant))
    assert len(got) > 0
    assert_outputs_equal(oracles[name].rows, got, keys=spec.key_columns, values=spec.value_columns)
    assert _assert_dead_letters(run, oracles["running_counts"].dead_letters) > 0
    if name in ("dedup", "join"):  # Spark counts input records there (tests/test_workloads.py)
        assert late_dropped(run.out_dir, workloads.job_id(name, variant)) == len(oracles[name].late_dropped)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:15002", "'http://127.0.0.1:15002' is not a Spark Connect URL; write sc://HOST:PORT"),
        ("sc://127.0.0.1:{port}", "no Spark Connect server answered at sc://127.0.0.1:{port}"),
    ],
)
def test_compare_connect_errors_are_one_line_and_exit_2(tmp_path, capsys, url: str, message: str) -> None:
    from compare.cli import main

    port = free_port()
    code = main(["compare", "running_counts", "--connect", url.format(port=port), "--out", str(tmp_path / "run")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert err.startswith("dmk compare: error:") and message.format(port=port) in err
    assert not (tmp_path / "run").exists(), "nothing ran"


@pytest.mark.slow  # two driver processes, the legacy one with its own JVM: 200 s here on a busy machine
def test_compare_connect_runs_the_modern_driver_on_the_server(bootstrap_servers, connect_server, tmp_path) -> None:
    """``dmk compare --connect``: the legacy driver local, the modern one over Connect; both equal the oracle."""
    import json

    from compare.cli import main

    out = tmp_path / "run"
    code = main(["compare", "running_counts", "--records", "3000", "--events-per-second", "100",
                 "--connect", connect_server.url, "--out", str(out), "--bootstrap-servers", bootstrap_servers])
    metrics = json.loads((out / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], (out / "report.md").read_text()
    config = json.loads((out / "modern" / "driver-config.json").read_text())
    legacy = json.loads((out / "legacy" / "driver-config.json").read_text())
    assert config["options"]["connect"] == connect_server.url and legacy["engine"] == "legacy"
    assert metrics["settings"]["connect"] == connect_server.url
    assert metrics["engines"]["modern"]["input_records"] == metrics["records"] == 3000


@pytest.mark.slow  # a Connect server of its own: its JVM starts in 20-60 s
def test_no_connect_server_left_after_its_parent_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        "import os, time\nfrom kit.connect import LocalConnectServer\n"
        f"s = LocalConnectServer(log_path={str(tmp_path / 'connect.log')!r}).start()\n"
        f"open({str(pid_file)!r}, 'w').write(str(s._process.pid))\ntime.sleep(600)\n"
    )
    try:
        assert_child_dies_with_its_parent(script, pid_file, "Connect server", start_timeout_s=240, gone_timeout_s=60)
    finally:
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
