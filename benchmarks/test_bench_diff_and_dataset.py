"""The harness's own costs at the benchmark issue's scale: the three-way diff of 1M rows, and generating a
1M-record dataset.

Run: ``pytest benchmarks/test_bench_diff_and_dataset.py --benchmark-only``. Targets: the diff of 1M rows in
5 s or less (issue #7); dataset generation is reported (``dmk compare`` and ``dmk bench`` pay it once per run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from compare.diff import three_way
from kit.dataset import DatasetSpec, generate

ROWS = 1_000_000


def _frames() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    oracle = pd.DataFrame({"key": [f"k{i:07d}" for i in range(ROWS)], "count": rng.integers(1, 1000, ROWS)})
    legacy = oracle.sample(frac=1.0, random_state=1).reset_index(drop=True)  # same rows, another order
    modern = oracle.copy()
    modern.loc[::100_000, "count"] += 1  # 10 mismatches
    modern = modern.drop(index=[5, 6])   # 2 missing
    return legacy, modern, oracle


def test_three_way_diff_of_1m_rows(benchmark) -> None:
    legacy, modern, oracle = _frames()
    diff = benchmark.pedantic(three_way, args=(legacy, modern, oracle, ["key"], ["count"]), rounds=3, iterations=1)
    assert diff.legacy.equal
    assert len(diff.modern.mismatched) == 10 and len(diff.modern.missing) == 2


def test_generate_1m_records(benchmark) -> None:
    spec = DatasetSpec.from_profile("messy", records=ROWS, seed=3)
    frame = benchmark.pedantic(generate, args=(spec,), rounds=2, iterations=1)
    assert len(frame) == ROWS
