"""``ModernRun.start`` returns once its queries are ready for input (``modern.runner._await_initialized``).

A query's stream thread creates its sources after ``DataStreamWriter.start`` returns; records produced before
that wait for it. The wait follows the query's ``status`` message, which these stand-ins script (Spark's own
queries are exercised by every modern run of the suite).
"""

from __future__ import annotations

from typing import Any

import pytest

from kit.errors import RunTimeout
from modern import runner


class _Query:
    """A StreamingQuery stand-in whose status moves one message per poll."""

    def __init__(self, messages: list[str], *, error: Exception | None = None, progress_at: int | None = None) -> None:
        self.messages = messages
        self.error = error
        self.progress_at = progress_at
        self.polls = 0

    @property
    def status(self) -> dict[str, Any]:
        message = self.messages[min(self.polls, len(self.messages) - 1)]
        self.polls += 1
        return {"message": message, "isDataAvailable": False, "isTriggerActive": False}

    @property
    def isActive(self) -> bool:  # noqa: N802 - PySpark's name
        return self.error is None or self.polls < len(self.messages)

    @property
    def lastProgress(self) -> dict[str, Any] | None:  # noqa: N802 - PySpark's name
        return {} if self.progress_at is not None and self.polls >= self.progress_at else None

    def exception(self) -> Exception | None:
        return None if self.isActive else self.error


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_POLL_S", 0.001)


def test_waits_past_initializing_and_the_first_offsets_then_returns() -> None:
    messages = ["Initializing StreamExecution", "Initializing sources", "Initializing sources",
                "Getting offsets from KafkaPy[events]", "Waiting for data to arrive"]
    first, second = _Query(messages), _Query(["Initializing sources", "Processing new data"])
    runner._await_initialized({"a": first, "b": second}, timeout_s=30)
    assert first.polls == len(messages)
    assert second.polls == 2


def test_a_query_that_reported_progress_or_stopped_is_ready() -> None:
    reported = _Query(["Getting offsets from KafkaPy[events]"], progress_at=0)
    runner._await_initialized({"a": reported}, timeout_s=30)
    assert reported.polls == 0  # the progress alone said so


def test_a_query_that_fails_while_initializing_raises_its_error() -> None:
    failed = _Query(["Initializing sources", "Initializing sources"], error=RuntimeError("no broker at :1"))
    with pytest.raises(RuntimeError, match="no broker at :1"):
        runner._await_initialized({"a": failed}, timeout_s=30)


def test_a_query_stuck_initializing_times_out_naming_it_and_its_status() -> None:
    stuck = _Query(["Initializing sources"])
    with pytest.raises(RunTimeout, match=r"\['stuck'\] were still initializing .*Initializing sources"):
        runner._await_initialized({"stuck": stuck}, timeout_s=0.05)
