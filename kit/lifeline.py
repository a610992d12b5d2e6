"""Child processes that never outlive the process that started them, however it ends.

A child in a session of its own (a compare driver, a ``compare-jobs`` job: started so, a kill takes its JVM with
it) gets no signal when its parent dies, by SIGKILL or otherwise; it keeps running, retrying a broker that died
with the parent. :func:`exit_with_parent`, called in the child, watches its parent and stops the child once the
parent is gone: SIGTERM to itself first (its own handler stops Spark), then, if it still runs after a grace
period, SIGKILL to its whole process group (its JVM and Python workers included).

Linux's ``PR_SET_PDEATHSIG`` (how :mod:`kit.broker` ties the embedded broker to its parent) would do this in the
kernel, but it fires when the *thread* that started the child ends: a driver restarted by a fault-injection thread,
or started by one engine's thread of a concurrent compare, would be killed as soon as that thread finished.

Example::

    exit_with_parent()   # first thing in python -m compare.driver
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

__all__ = ["exit_with_parent"]


def exit_with_parent(*, poll_s: float = 0.5, grace_s: float = 15.0) -> threading.Thread:
    """Stop this process once its parent process is gone (see the module docstring).

    Args:
        poll_s: how often the parent is checked (default 0.5 s).
        grace_s: how long SIGTERM has to stop the process before its process group is SIGKILLed (default 15 s).

    Returns:
        the watching thread (a daemon: it never keeps the process alive).
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        with contextlib.suppress(OSError):
            if os.getpgrp() == os.getpid():
                os.killpg(os.getpid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="dmk-exit-with-parent", daemon=True)
    thread.start()
    return thread
