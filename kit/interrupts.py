"""A stop signal that a C extension swallowed is raised again.

Python runs a signal's handler between bytecodes. When that moment falls inside a C extension's call back into
Python, the extension can replace the handler's exception with its own: in one CI run a SIGHUP sent to
``dmk replay`` came out of librdkafka's ``Producer.produce`` as ``TypeError: expected header key to be unicode
string``; the replay counted it as one unacknowledged record and ran on for 29 s to the end of its input.

:func:`interrupt` (the handler ``dmk`` installs for SIGINT, SIGTERM and SIGHUP) records the signal before it
raises; :func:`raise_if_interrupted` raises it again where a call into such an extension is wrapped in a broad
``except``.

Example::

    signal.signal(signal.SIGTERM, interrupt)
    try:
        producer.produce(topic, value, headers=headers)
    except Exception:
        raise_if_interrupted()   # the SIGTERM, if it is what the extension turned into this error
        raise
"""

from __future__ import annotations

import signal

__all__ = ["Terminated", "clear", "interrupt", "raise_if_interrupted"]

_received: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C, so every ``finally`` stops what the command started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def interrupt(signum: int, frame: object = None) -> None:
    """A signal handler: records ``signum``, then raises KeyboardInterrupt (SIGINT) or :class:`Terminated`."""
    global _received
    _received = signum
    _raise(signum)


def raise_if_interrupted() -> None:
    """Raise again the stop signal :func:`interrupt` received, if any (a no-op otherwise)."""
    if _received is not None:
        _raise(_received)


def clear() -> None:
    """Forget the signal received (the command that received it has ended)."""
    global _received
    _received = None
