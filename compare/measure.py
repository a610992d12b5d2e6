"""What a run measured, from what its engines wrote.

The figures: latency and its percentiles, batch timelines, input coverage, rows lost and duplicated.
Engine-neutral: the engine's own reading of its logs comes from :class:`kit.engine.Engine`.

Example:
    >>> import pandas as pd
    >>> percentiles(latency(pd.DataFrame({"emitted_at": [110, 250], "last_input_ts": [100, 200]})))["max"]
    50.0
    >>> input_coverage([("t", 0, 0, 5), ("t", 0, 3, 8)], {"t": {0: 10}})
    (2, 2)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from compare.diff import OutputDiff
from kit import workloads
from kit.engine import Engine, ProcessedRange
from kit.sink import read_batches

__all__ = [
    "DEAD_LETTER_COLUMNS",
    "dead_letters",
    "input_coverage",
    "latency",
    "lost_and_duplicated",
    "percentiles",
    "timeline",
]

DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "reason")


def latency(rows: pd.DataFrame) -> pd.Series:
    """Per output row: ``emitted_at`` minus the Kafka timestamp of the newest input behind it (ms)."""
    if rows.empty:
        return pd.Series(dtype="int64")
    return (rows["emitted_at"] - rows[workloads.LAST_INPUT_TS]).astype("int64")


def percentiles(values: pd.Series) -> dict[str, float | None]:
    """``p50``, ``p95``, ``p99`` and ``max`` of ``values`` (all None when there are none)."""
    if values.empty:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    array = values.to_numpy()
    return {
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def dead_letters(out_dir: Path) -> pd.DataFrame:
    """Every dead-letter row a run wrote (``dead_letters.<input>`` outputs, the same for every engine)."""
    frames = [read_batches(d) for d in sorted(out_dir.glob("dead_letters.*")) if d.is_dir()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(DEAD_LETTER_COLUMNS))


def timeline(engine: Engine, out_dir: Path) -> pd.DataFrame:
    """One row per batch of a run's first job, for the report's plots.

    Columns: ``completed_ms, records, duration_ms, scheduling_delay_ms``.
    """
    spans = engine.batch_spans(out_dir)
    return pd.DataFrame({
        "completed_ms": spans["ended_ms"].astype("int64"),
        "records": spans["records"].astype("int64"),
        "duration_ms": spans["processing_ms"].astype("int64"),
        "scheduling_delay_ms": spans["scheduling_ms"].astype("int64"),
    })


def input_coverage(ranges: list[ProcessedRange], end_offsets: dict[str, dict[int, int]]) -> tuple[int, int]:
    """``(never processed, processed more than once)`` input records, from the ranges batches processed.

    Example:
        >>> input_coverage([("t", 0, 0, 5), ("t", 0, 3, 8), ("t", 1, 2, 4)], {"t": {0: 10, 1: 4}})
        (4, 2)
    """
    lost = repeated = 0
    for topic, parts in end_offsets.items():
        for partition, end in parts.items():
            marks = np.zeros(end + 1, dtype="int64")
            for t, p, first, until in ranges:
                if t == topic and p == partition and until > first:
                    marks[min(first, end)] += 1
                    marks[min(until, end)] -= 1
            times = np.cumsum(marks)[:end]
            lost += int((times == 0).sum())
            repeated += int(np.clip(times - 1, 0, None).sum())
    return lost, repeated


def lost_and_duplicated(diff: OutputDiff) -> tuple[int, int]:
    """Output rows lost and duplicated against the oracle.

    Missing rows are lost, unexpected rows are duplicates; a mismatched row is lost if its first differing
    numeric value is below the oracle's (input records were lost), duplicated if above (input counted twice).
    """
    lost, duplicated = len(diff.missing), len(diff.unexpected)
    for row in diff.mismatched.to_dict("records"):
        for column in diff.values:
            expected, actual = row[f"{column}_expected"], row[f"{column}_actual"]
            numeric = (int, float, np.number)
            if isinstance(expected, numeric) and isinstance(actual, numeric) and expected != actual:
                lost += int(actual < expected)
                duplicated += int(actual > expected)
                break
    return lost, duplicated
