"""Process checks shared by the broker tests: alive (a zombie is not), gone within a deadline, and no child
left behind by a SIGKILLed parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited already; it only waits for its parent to reap it.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def assert_child_dies_with_its_parent(script: str, pid_file: Path, what: str, *, start_timeout_s: float = 60,
                                      gone_timeout_s: float = 10) -> int:
    """Run ``script`` as a parent process; once it wrote its child's pid to ``pid_file``, SIGKILL the parent and
    assert the child is gone within ``gone_timeout_s`` (only the kernel's parent-death signal can stop it: no
    atexit, no ``__exit__``). Returns the child's pid."""
    parent = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + start_timeout_s
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            assert parent.poll() is None, f"the parent died before starting its {what}"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_gone(child, timeout_s=gone_timeout_s), f"{what} {child} outlived its SIGKILLed parent"
        return child
    finally:
        if parent.poll() is None:
            parent.kill()
