"""What a team's job prints, kept as output.

The stand-ins of both engines (``legacy/standin.py``, ``modern/standin.py``) put :class:`Tee` in ``sys.stdout``
while a job's own output function runs.
"""

from __future__ import annotations

import io
from typing import Any, cast

__all__ = ["Tee"]


class Tee(io.TextIOBase):
    """``sys.stdout`` while a job's foreachRDD or foreachBatch function runs.

    What the function prints goes on to the console and is kept in :attr:`text`.
    """

    def __init__(self, console: Any) -> None:
        self.console, self.text = console, list[str]()

    def write(self, text: str) -> int:
        """Keep ``text`` and pass it on to the console."""
        self.text.append(text)
        return cast(int, self.console.write(text))

    def flush(self) -> None:
        """Flush the console."""
        self.console.flush()
