"""The stand-ins' progress row: what a team's job, run by ``dmk compare-jobs``, reports per completed batch.

``legacy.standin`` writes one for each DStream batch, ``modern.standin`` one for each query progress, one JSON
line each in the progress file (:data:`kit.layout.STANDIN_PROGRESS`); ``compare.jobs`` reads them to know what
the job consumed and when. Both sides write and read this one type.

Example:
    >>> row = ProgressRow(batch_ms=1000, completed_ms=1400, records=5, ranges=(OffsetRange("events", 0, 0, 5),))
    >>> row.to_json()
    {'batch_ms': 1000, 'completed_ms': 1400, 'records': 5, 'ranges': [['events', 0, 0, 5]]}
    >>> ProgressRow.from_json(row.to_json()) == row, row.key
    (True, '1000')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.engine import written_lines
from kit.errors import ConfigError
from kit.ranges import OffsetRange

__all__ = ["ProgressRow", "read_progress_rows"]


@dataclass(frozen=True)
class ProgressRow:
    """One completed batch of a job run by the stand-ins.

    Attributes:
        batch_ms: the batch's time (a DStream's batch time; a query progress's start), epoch ms.
        completed_ms: when the batch completed, epoch ms.
        records: the input records it processed.
        ranges: what it read: an offset range per Kafka partition, or the rows a socket or file source delivered
            (topic :data:`kit.ranges.LINES`).
        query: a query's name (Structured Streaming jobs only; None for a DStream batch).
        query_id: the query's id (idem).
        batch_id: the micro-batch's id (idem).
        clock: the query runs a micro-batch every interval (a ``dmk migrate`` draft's tick source): it settles by
            its extra batches, not by quiet.
    """

    batch_ms: int
    completed_ms: int
    records: int
    ranges: tuple[OffsetRange, ...]
    query: str | None = None
    query_id: str | None = None
    batch_id: int | None = None
    clock: bool = False

    @property
    def key(self) -> str:
        """The batch's name: its ``batch_ms`` (a DStream's), ``query_id/batch_id`` (a query's)."""
        return f"{self.query_id}/{self.batch_id}" if self.query_id is not None else str(self.batch_ms)

    @property
    def of_query(self) -> bool:
        """Reported by a Structured Streaming query (it carries the query's fields)."""
        return self.query_id is not None or self.query is not None or self.clock

    def to_json(self) -> dict[str, Any]:
        """The row as its JSON line holds it: a DStream batch's four fields, a query's eight."""
        row: dict[str, Any] = {"batch_ms": self.batch_ms, "completed_ms": self.completed_ms, "records": self.records,
                               "ranges": [list(r) for r in self.ranges]}
        if self.of_query:
            row |= {"query": self.query, "query_id": self.query_id, "batch_id": self.batch_id, "clock": self.clock}
        return row

    @classmethod
    def from_json(cls, row: Mapping[str, Any], where: str = "progress") -> ProgressRow:
        """The row a JSON line holds.

        Raises:
            ConfigError: a field missing or unknown, or a range that is not one.
        """
        unknown = sorted(set(row) - _FIELDS)
        missing = sorted(_REQUIRED - set(row))
        if unknown or missing:
            problem = f"unknown field {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
            msg = f"{where}: a progress row with {problem}: {dict(row)!r}; it is written by dmk's stand-ins only"
            raise ConfigError(msg, field="progress", expected=sorted(_FIELDS), actual=sorted(row))
        return cls(batch_ms=int(row["batch_ms"]), completed_ms=int(row["completed_ms"]), records=int(row["records"]),
                   ranges=tuple(OffsetRange(*r) for r in row["ranges"]), query=row.get("query"),
                   query_id=row.get("query_id"), batch_id=row.get("batch_id"), clock=bool(row.get("clock", False)))


_REQUIRED = {"batch_ms", "completed_ms", "records", "ranges"}
_FIELDS = _REQUIRED | {"query", "query_id", "batch_id", "clock"}


def read_progress_rows(path: str | Path) -> list[ProgressRow]:
    """Every row written to the progress file ``path`` so far, in order (none if it does not exist yet).

    Raises:
        ConfigError: a line that is not a progress row.
    """
    return [ProgressRow.from_json(row, str(path)) for row in written_lines(Path(path))]
