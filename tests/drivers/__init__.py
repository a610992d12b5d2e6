"""Driver programs the tests run as separate processes (so that they can be SIGKILLed), and how to run them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def driver_command(module: str, *args: object) -> list[str]:
    """``python -m tests.drivers.<module> args...`` as an argv list."""
    return [sys.executable, "-m", f"tests.drivers.{module}", *map(str, args)]


def kill_mid_stream(command: list[str], ready: Callable[[], bool], what: Callable[[], object], timeout_s: float = 180) -> None:
    """Start a driver, SIGKILL it as soon as ``ready()`` holds; fail if it dies or times out first.

    ``what()`` describes the progress seen, for the failure message.
    """
    driver = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert driver.poll() is None, driver.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, f"not ready after {timeout_s:g} s; last observed: {what()!r}"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()


def run_to_completion(command: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a driver to its end; fail with its stderr's tail unless it exits 0."""
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stderr[-3000:]
    return done
