"""The kit on a real Spark standalone cluster: ``dmk cluster``, the kit shipped to executors, and both engines
processing a replayed topic exactly once on a 1-master/2-worker cluster — also when a worker dies mid-run.

The default tier starts and stops a cluster through the CLI and runs a job on it (executors import the kit from
the zip the driver shipped, not from this checkout). The slow tier runs ``dmk compare`` on the cluster: the
direct DStream and the modern source (one run, messy profile), the receiver stream, and a run with a worker
SIGKILLed while the legacy job runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _streaming import produce

from compare.cli import main
from kit.cluster import LocalCluster, _alive
from kit.errors import ConfigError
from kit.spark import check_location, on_this_host

REPO = str(Path(__file__).resolve().parents[1])
SMALL = ["--records", "12000", "--events-per-second", "300", "--users", "200", "--profile", "messy"]


def test_which_masters_run_on_this_host() -> None:
    assert on_this_host("local[2]") and on_this_host("spark://127.0.0.1:7077") and on_this_host("spark://localhost:1")
    assert not on_this_host("spark://10.1.2.3:7077") and not on_this_host("yarn")
    import socket

    assert not on_this_host(f"spark://{socket.gethostname()}:7077")  # its workers may be anywhere
    assert check_location("/tmp/ckpt", "spark://127.0.0.1:7077") == "/tmp/ckpt"
    assert check_location("hdfs://nn/ckpt", "yarn") == "hdfs://nn/ckpt"
    with pytest.raises(ConfigError, match="is a local path, but the Spark master spark://10.1.2.3:7077"):
        check_location("/tmp/ckpt", "spark://10.1.2.3:7077")
    with pytest.raises(ConfigError, match="is a local path"):
        check_location("file:/tmp/ckpt", "k8s://https://api:6443")


def test_compare_refuses_what_remote_executors_cannot_reach(tmp_path: Path) -> None:
    from compare.run import CompareSettings

    with pytest.raises(ConfigError, match="--checkpoint-dir"):
        CompareSettings("running_counts", tmp_path / "run", master="spark://10.1.2.3:7077", bootstrap_servers="k:9092")
    with pytest.raises(ConfigError, match="out of their reach"):
        CompareSettings("running_counts", tmp_path / "run", master="spark://10.1.2.3:7077",
                        checkpoint_dir="hdfs://nn/ckpt", bootstrap_servers="127.0.0.1:9092")
    settings = CompareSettings("running_counts", tmp_path / "run", master="spark://10.1.2.3:7077",
                               checkpoint_dir="hdfs://nn/ckpt", bootstrap_servers="kafka-1:9092")
    assert settings.checkpoint_root == "hdfs://nn/ckpt"


PROBE = textwrap.dedent("""
    import json, sys
    from kit.spark import check_executors, spark_context
    from kit.kafka import Kafka
    sc = spark_context("dmk-cluster-probe", sys.argv[1])
    seen = check_executors(sc)
    # A direct read of the replayed topic on the executors (kit.kafka inside Python tasks), exactly once.
    from legacy.kafka import KafkaUtils, OffsetRange
    ranges = [OffsetRange(sys.argv[3], int(p), 0, int(end)) for p, end in json.loads(sys.argv[4]).items()]
    rdd = KafkaUtils.createRDD(sc, {"metadata.broker.list": sys.argv[2]}, ranges)
    values = rdd.map(lambda kv: kv[1]).collect()
    print(json.dumps({"kit": sorted({s["kit"] for s in seen}), "values": values}))
    sc.stop()
""")


@pytest.mark.slow  # a standalone master and worker, then both engines on it (97 s)
def test_dmk_cluster_start_run_stop(tmp_path: Path, bootstrap_servers: str, topic_factory, capsys) -> None:
    from kit.kafka import Kafka

    directory = tmp_path / "cluster"
    assert main(["cluster", "start", "--dir", str(directory), "--workers", "2", "--cores", "1", "--memory", "1g"]) == 0
    state = LocalCluster(directory).state()
    assert state.master_url in " ".join(capsys.readouterr().out.split())
    try:
        assert main(["cluster", "status", "--dir", str(directory), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["running"] and status["master_url"] == state.master_url and len(status["workers"]) == 2
        assert all(w["state"] == "ALIVE" and w["cores"] == 1 and w["memory_mb"] == 1024 for w in status["workers"])
        assert main(["cluster", "start", "--dir", str(directory)]) == 2  # one cluster per directory

        topic = topic_factory(2)
        with Kafka(bootstrap_servers) as kafka:
            produce(kafka, topic, {0: 20, 1: 20})
        ends = {"0": 20, "1": 20}
        run = subprocess.run(
            [sys.executable, "-c", PROBE, state.master_url, bootstrap_servers, topic, json.dumps(ends)],
            capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": REPO},
        )
        assert run.returncode == 0, run.stderr[-3000:]
        seen = json.loads(run.stdout.strip().splitlines()[-1])
        # The executors imported the kit the driver shipped (a zip), not a copy of their own.
        assert len(seen["kit"]) == 1 and ".zip/kit/__init__.py" in seen["kit"][0]
        assert sorted(seen["values"]) == sorted(f"{p}-{i}" for p in (0, 1) for i in range(20))
    finally:
        assert main(["cluster", "stop", "--dir", str(directory)]) == 0
    assert not any(_alive(pid) for pid in (state.master_pid, *state.worker_pids))
    assert main(["cluster", "status", "--dir", str(directory)]) == 1


# -- dmk compare on the cluster (slow) --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"))
    state = local.start(workers=2, cores=1, memory="1g")
    try:
        yield local
    finally:
        local.stop()
    assert not any(_alive(pid) for pid in (state.master_pid, *state.worker_pids))


def _compare_on(cluster: LocalCluster, tmp_path: Path, bootstrap_servers: str, *args: str) -> dict:
    out = tmp_path / "run"
    state = cluster.state()
    code = main(["compare", "running_counts", *SMALL, *args, "--master", state.master_url, "--out", str(out),
                 "--bootstrap-servers", bootstrap_servers])
    metrics = json.loads((out / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], metrics
    return metrics


def _exactly_once(metrics: dict, engine: str) -> None:
    figures = metrics["engines"][engine]
    assert (figures["rows_missing"], figures["rows_unexpected"], figures["rows_mismatched"]) == (0, 0, 0)
    assert (figures["input_records_lost"], figures["input_records_repeated"]) == (0, 0)
    assert figures["input_records"] == 12_000


@pytest.mark.slow
def test_direct_stream_and_modern_source_on_the_cluster(cluster: LocalCluster, tmp_path: Path, bootstrap_servers: str) -> None:
    metrics = _compare_on(cluster, tmp_path, bootstrap_servers)
    _exactly_once(metrics, "legacy")
    _exactly_once(metrics, "modern")


@pytest.mark.slow
def test_receiver_stream_on_the_cluster(cluster: LocalCluster, tmp_path: Path, bootstrap_servers: str) -> None:
    metrics = _compare_on(cluster, tmp_path, bootstrap_servers, "--legacy-mode", "receiver")
    _exactly_once(metrics, "legacy")


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_survived(tmp_path: Path, bootstrap_servers: str) -> None:
    """Worker 0 and its executors die while the legacy job runs: Spark reschedules their tasks on worker 1,
    and both engines still process every record exactly once."""
    local = LocalCluster(tmp_path / "cluster")
    state = local.start(workers=2, cores=1, memory="1g")
    killed: list[float] = []

    def kill_when_running() -> None:
        progress = tmp_path / "run" / "legacy" / "progress.events"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if len(list(progress.glob("batch=*.parquet"))) >= 3:
                local.kill_worker(0)
                killed.append(time.monotonic())
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_when_running, daemon=True)
    killer.start()
    try:
        metrics = _compare_on(local, tmp_path, bootstrap_servers)
    finally:
        local.stop()
    assert killed, "the worker was never killed: the legacy job wrote no progress"
    assert not _alive(state.worker_pids[0])
    _exactly_once(metrics, "legacy")
    _exactly_once(metrics, "modern")
