"""The embedded broker: start, answer, stop, and never leave a process behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from kit.broker import EmbeddedBroker, free_port, kafka_or_embedded
from kit.errors import BrokerError, BrokerUnavailable
from kit.kafka import Kafka, wait_for_broker
from tests._procs import _wait_gone, assert_child_dies_with_its_parent

REPO = Path(__file__).resolve().parents[1]


def test_broker_answers_and_stops(tmp_path: Path) -> None:
    log = tmp_path / "tansu.log"
    with EmbeddedBroker(log_path=log) as broker:
        pid = broker.pid
        assert broker.bootstrap_servers.startswith("127.0.0.1:")
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        assert consumer.bootstrap_connected() or consumer.topics() is not None
        consumer.close()
        with Kafka(broker.bootstrap_servers) as kafka:
            kafka.create_topic("lifecycle", 2)
            assert kafka.partitions("lifecycle") == [0, 1]
    assert pid is not None and _wait_gone(pid)
    assert not broker.running
    assert log.exists()
    broker.stop()  # a second stop is harmless


def test_pause_and_resume(tmp_path: Path) -> None:
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:
        broker.pause()
        with pytest.raises(BrokerUnavailable):
            wait_for_broker(broker.bootstrap_servers, timeout_s=1.0)
        broker.resume()
        wait_for_broker(broker.bootstrap_servers, timeout_s=10.0)
        broker.pause()
        pid = broker.pid
    # stop() of a paused broker resumes it first so that SIGTERM is handled, and nothing is left.
    assert pid is not None and _wait_gone(pid)


def test_no_broker_left_after_a_failing_test(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    test_file = tmp_path / "test_fails.py"
    test_file.write_text(
        textwrap.dedent(
            f"""
            import pytest
            from kit.broker import EmbeddedBroker

            @pytest.fixture
            def broker():
                with EmbeddedBroker() as b:
                    yield b

            def test_fails(broker):
                open({str(pid_file)!r}, "w").write(str(broker.pid))
                assert False, "this test fails on purpose"
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "this test fails on purpose" in run.stdout
    pid = int(pid_file.read_text())
    assert _wait_gone(pid), f"broker {pid} outlived the failing test"


@pytest.mark.parametrize("kind", ["tansu", "mock"])
def test_no_broker_left_after_the_parent_is_killed(kind: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        "import time\nfrom kit.broker import EmbeddedBroker\n"
        f"b = EmbeddedBroker(kind={kind!r}).start()\nopen({str(pid_file)!r}, 'w').write(str(b.pid))\ntime.sleep(600)\n"
    )
    assert_child_dies_with_its_parent(script, pid_file, f"{kind} broker")


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALF_TANSU_BIN", str(tmp_path / "no-such-tansu"))
    with pytest.raises(BrokerError, match="CALF_TANSU_BIN") as info:
        EmbeddedBroker().start()
    assert "--bootstrap-servers" in str(info.value)


def test_binary_that_exits_reports_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'tansu: cannot open storage' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CALF_TANSU_BIN", str(fake))
    with pytest.raises(BrokerError) as info:
        EmbeddedBroker(log_path=tmp_path / "log", startup_timeout_s=10).start()
    assert "exited with code 3" in str(info.value)
    assert "cannot open storage" in info.value.log_tail


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} .* already in use"):
            EmbeddedBroker(port=port).start()


def test_unreachable_bootstrap_servers() -> None:
    port = free_port()
    with pytest.raises(BrokerUnavailable) as info:
        with kafka_or_embedded(f"127.0.0.1:{port}", timeout_s=1.0):
            pass
    assert info.value.bootstrap_servers == f"127.0.0.1:{port}"
    assert "leave out --bootstrap-servers" in str(info.value)


def test_kafka_or_embedded_uses_a_given_broker(bootstrap_servers: str) -> None:
    with kafka_or_embedded(bootstrap_servers) as kafka:
        assert (kafka.bootstrap_servers, kafka.broker) == (bootstrap_servers, None)
        assert kafka.description == f"given: {bootstrap_servers}"


def test_kafka_or_embedded_starts_a_broker_when_none_is_given(tmp_path: Path) -> None:
    started: list[bool] = []
    with kafka_or_embedded(log_path=tmp_path / "tansu.log", on_start=lambda: started.append(True)) as kafka:
        assert started == [True] and kafka.broker is not None and kafka.broker.running
        assert kafka.bootstrap_servers == kafka.broker.bootstrap_servers
        assert kafka.description.startswith("embedded Tansu")
    assert not kafka.broker.running
