"""Errors raised by ``compare`` (the harness, the driver supervision, cutover and diffs).

Example:
    >>> err = EngineFailed("the legacy driver failed: ...", engine="legacy", log="runs/x/legacy/driver.log")
    >>> isinstance(err, CompareError), err.engine
    (True, 'legacy')
"""

from __future__ import annotations

from kit.errors import KitError

__all__ = ["CompareError", "CutoverAmbiguous", "EngineFailed"]


class CompareError(KitError):
    """Base class of the errors only ``compare`` raises."""


class EngineFailed(CompareError):
    """An engine's driver process failed.

    Attributes:
        engine: the engine's name.
        log: the driver's log file.
    """

    def __init__(self, message: str, *, engine: str, log: str) -> None:
        super().__init__(message)
        self.engine = engine
        self.log = log


class CutoverAmbiguous(CompareError):
    """The legacy job's position does not say exactly which records its outputs hold.

    Attributes:
        reason: what is ambiguous.
        batches: the batch times (ms) in question.
    """

    def __init__(self, message: str, *, reason: str, batches: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.reason = reason
        self.batches = batches
