"""Child processes that never outlive the process that started them, however it ends.

A child in a session of its own (a compare driver, a ``compare-jobs`` job: started so, a kill takes its JVM with
it) gets no signal when its parent dies, by SIGKILL or otherwise; it keeps running, retrying a broker that died
with the parent. :func:`exit_with_parent`, called in the child, watches its parent and, once the parent is gone,
SIGKILLs the child's whole process group: the child, its JVM and (through the JVM's exit) Spark's Python workers.
Nothing is stopped gracefully, as nobody is left to read the results; a checkpoint survives a SIGKILL, which is
how ``--kill-driver`` restarts a driver. (A graceful SIGTERM was tried first: the driver exited, but its JVM,
stopping its streaming context against the dead broker, was still running a minute later.)

Linux's ``PR_SET_PDEATHSIG`` would do this in the kernel, but it fires when the *thread* that started the child
ends: a driver restarted by a fault-injection thread, or started by one engine's thread of a concurrent compare,
would be killed as soon as that thread finished. It is right for servers started from a main thread or a session
fixture (the embedded broker, the Spark Connect server), which run no Python of
ours to watch their parent: :func:`die_with_parent` is their ``preexec_fn``.

Example::

    exit_with_parent()   # first thing in python -m compare.driver
    subprocess.Popen(command, preexec_fn=die_with_parent)   # a server that must not outlive us
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["die_with_parent", "exit_with_parent"]

_PR_SET_PDEATHSIG = 1


def exit_with_parent(*, poll_s: float = 0.5) -> threading.Thread:
    """SIGKILL this process and its process group (when it leads one) once its parent process is gone.

    Args:
        poll_s: how often the parent is checked (default 0.5 s).

    Returns:
        the watching thread (a daemon: it never keeps the process alive).
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="dmk-exit-with-parent", daemon=True)
    thread.start()
    return thread


def die_with_parent() -> None:
    """A ``preexec_fn``: the kernel SIGTERMs the child when the thread that started it ends (Linux; a no-op elsewhere).

    It runs in the child between fork and exec, and survives the exec (and a launcher script's own ``exec``, such as
    ``spark-submit``'s), so the server itself gets the signal even when its parent dies by SIGKILL.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
