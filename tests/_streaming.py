"""Waiting on a running StreamingContext without blind sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def await_condition(ssc: Any, condition: Callable[[], bool], what: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Wait until ``condition()``; fail with the last observed ``what()``, or at once if the context stops."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s; last observed: {what()!r}")
        if ssc.awaitTerminationOrTimeout(0.05):
            raise AssertionError(f"the streaming context stopped; last observed: {what()!r}")
