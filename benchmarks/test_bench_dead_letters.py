"""What a task pays to write its dead letters, on each engine, at ``dmk compare``'s batch size.

Run: ``pytest benchmarks/test_bench_dead_letters.py --benchmark-only``. A task of the messy profile reads about
400 records of which 1 % are malformed; each engine's parse writes those as one keyed file per topic
(:func:`kit.sink.write_keyed`) from the Python worker, so this cost is in every task of every batch. Measured:
the modern parse UDF's write (:func:`modern.workloads._write_dead_letters`, its arrays as Spark sends them) and
the legacy ``mapPartitions`` parse of a partition's records (:func:`legacy.workloads._parse_writing_dead_letters`:
the parse of every record and the write). Before and after the write went from pandas to Arrow:
benchmarks/results/changes.md §33.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from kit.sink import read_batches
from legacy.workloads import _parse_writing_dead_letters
from modern.workloads import _write_dead_letters

RECORDS = 400
MALFORMED_EVERY = 100


def _reason(offset: int) -> str | None:
    return "bad_json" if offset % MALFORMED_EVERY == 7 else None


def _tasks(write: Callable[[int], None]) -> Callable[[], None]:
    """``write`` for a new task's offsets on each call (a retried task would write nothing new)."""
    starts = itertools.count(0, RECORDS)
    return lambda: write(next(starts))


def test_modern_parse_writes_a_tasks_dead_letters(benchmark, tmp_path: Path) -> None:
    topic, partition = pa.array(["events"] * RECORDS), pa.array([1] * RECORDS, pa.int32())

    def write(start: int) -> None:
        offsets = range(start, start + RECORDS)
        reason = pa.array([_reason(o) for o in offsets], pa.string())
        _write_dead_letters({"events": str(tmp_path)}, topic, partition, pa.array(offsets, pa.int64()), reason)

    benchmark.pedantic(_tasks(write), rounds=200, iterations=1, warmup_rounds=10)
    written = read_batches(tmp_path)
    assert len(written) == (200 + 10) * RECORDS // MALFORMED_EVERY
    assert (written["offset"] % MALFORMED_EVERY == 7).all()


def test_legacy_parse_writes_a_partitions_dead_letters(benchmark, tmp_path: Path) -> None:
    def parse(offset: int) -> tuple[bool, Any]:
        reason = _reason(offset)
        return (False, ("events", 1, offset, reason)) if reason else (True, offset)

    def write(start: int) -> None:
        valid = list(_parse_writing_dead_letters(str(tmp_path), parse)(range(start, start + RECORDS)))
        assert len(valid) == RECORDS - RECORDS // MALFORMED_EVERY

    benchmark.pedantic(_tasks(write), rounds=200, iterations=1, warmup_rounds=10)
    written = read_batches(tmp_path)
    assert len(written) == (200 + 10) * RECORDS // MALFORMED_EVERY
    assert sorted(written["reason"].unique()) == ["bad_json"]
