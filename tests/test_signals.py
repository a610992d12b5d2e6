"""SIGTERM, SIGHUP and the death of ``dmk`` stop every process of the run: broker, drivers, JVMs, Python workers.

``kill -TERM`` of ``dmk compare`` (what CI cancellation and ``timeout`` send) once killed the CLI and the broker
but left the driver, its JVM and eight Python workers running under PID 1, retrying the dead broker. Each test
starts ``dmk`` in a process of its own, waits until the run's processes are up, records the whole process tree,
sends the signal, and checks that every process of the tree is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
DMK = str(Path(sys.executable).with_name("dmk"))


def _start(argv: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DMK_")}
    return subprocess.Popen([DMK, *argv], cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _tree(process: subprocess.Popen[str]) -> list[psutil.Process]:
    root = psutil.Process(process.pid)
    return [root, *root.children(recursive=True)]


def _wait_for_tree(process: subprocess.Popen[str], ready, timeout_s: float) -> list[psutil.Process]:
    """The process tree of ``process`` once ``ready(tree)`` holds (a monotonic deadline, the CLI's exit checked)."""
    deadline = time.monotonic() + timeout_s
    tree: list[psutil.Process] = []
    while time.monotonic() < deadline:
        assert process.poll() is None, f"dmk exited early ({process.returncode}): {process.communicate()[1]}"
        try:
            tree = _tree(process)
            if ready(tree):
                return tree
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.2)
    pytest.fail(f"the run's processes did not come up in {timeout_s:.0f} s; last tree: "
                f"{[p.info for p in psutil.process_iter(['pid', 'name'])if p in tree]}")


def _survivors(tree: list[psutil.Process], timeout_s: float) -> list[str]:
    """The processes of ``tree`` still alive after ``timeout_s`` (zombies count as gone)."""
    deadline = time.monotonic() + timeout_s
    alive = tree
    while True:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    described = []
    for p in alive:
        try:
            described.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    for p in alive:  # leave nothing behind for the next test
        try:
            p.kill()
        except psutil.Error:
            continue
    return described


def _names(tree: list[psutil.Process]) -> str:
    text = []
    for p in tree:
        try:
            text.append(" ".join(p.cmdline()))
        except psutil.Error:
            continue
    return "\n".join(text)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_a_command_and_its_embedded_broker(signum: int, code: int, tmp_path: Path) -> None:
    data = tmp_path / "d.parquet"
    subprocess.run([DMK, "gen", "--records", "3000", "--out", str(data)], check=True, capture_output=True)
    process = _start(["replay", str(data), "--topic", "t", "--rate", "100"], tmp_path)  # 30 s of replay
    tree = _wait_for_tree(process, lambda t: "tansu" in _names(t), timeout_s=60)
    time.sleep(1.0)  # the replay is under way
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert f"stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err
    assert _survivors(tree, 30) == []


def _compare_is_running(tree: list[psutil.Process]) -> bool:
    names = _names(tree)
    return "compare.driver" in names and "java" in names and "tansu" in names


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_to_dmk_compare_leaves_no_process_of_the_run(signum: int, tmp_path: Path) -> None:
    """SIGKILL: the parent's death, which no handler sees; the drivers notice it themselves."""
    process = _start(["compare", "running_counts", "--records", "3000", "--profile", "clean", "--rate", "100",
                      "--out", str(tmp_path / "run")], tmp_path)
    tree = _wait_for_tree(process, _compare_is_running, timeout_s=300)
    time.sleep(2.0)
    tree = _tree(process)  # the Python workers the driver forked meanwhile
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    if signum != signal.SIGKILL:
        assert process.returncode == 128 + signum, err
        assert "Traceback" not in err
    assert _survivors(tree, 60) == []


def test_a_child_that_watches_its_parent_dies_with_its_group_when_the_parent_is_killed(tmp_path: Path) -> None:
    """kit.lifeline: the parent SIGKILLed (no handler runs), the child and its own child are gone."""
    child = (
        "import subprocess, sys, time\n"
        "from kit.lifeline import exit_with_parent\n"
        "exit_with_parent(poll_s=0.1)\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        "print(grandchild.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    parent = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {child!r}], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", parent], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        tree = _wait_for_tree(process, lambda t: len(t) == 3, timeout_s=60)
    finally:
        process.kill()
    process.wait(timeout=10)
    assert len(tree) == 3
    assert _survivors(tree, 10) == []


class _SwallowingProducer:
    """librdkafka's ``Producer.produce`` as seen in CI: the stop signal's handler ran inside it, and the C
    extension replaced the handler's exception with its own (``expected header key to be unicode string``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def produce(self, topic: str, **kwargs: object) -> None:
        try:
            os.kill(os.getpid(), self.signum)
            time.sleep(5)  # the handler runs here, raising
        except KeyboardInterrupt:
            raise TypeError("expected header key to be unicode string") from None
        pytest.fail("the signal's handler did not run")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_a_c_extension_swallowed_is_raised_again(signum: int) -> None:
    from kit import interrupts
    from kit._rdkafka import RdSender

    sender = RdSender.__new__(RdSender)
    sender._producer = _SwallowingProducer(signum)  # type: ignore[assignment]
    sender._max_block_s = 1.0
    before = signal.signal(signum, interrupts.interrupt)
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            sender.send("t", key=None, value=b"v", headers=[("h", b"1")])
    finally:
        signal.signal(signum, before)
        interrupts.clear()
    if signum == signal.SIGINT:
        assert type(stopped.value) is KeyboardInterrupt
    else:
        assert isinstance(stopped.value, interrupts.Terminated) and stopped.value.signum == signum
    interrupts.raise_if_interrupted()  # cleared: the next command starts with no signal received
