"""Errors raised by ``dmk migrate``: one base, :class:`MigrateError`, under the kit's :class:`~kit.errors.KitError`."""

from __future__ import annotations

from kit.errors import KitError

__all__ = ["JobSourceError", "MigrateError"]


class MigrateError(KitError):
    """Base class of the errors only ``migrate`` raises."""


class JobSourceError(MigrateError):
    """A job's source cannot be read or parsed (``dmk migrate``).

    Attributes:
        path: the job file.
        line: the line of the syntax error (None when the file cannot be read).
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
