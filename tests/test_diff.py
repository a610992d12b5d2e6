"""compare.diff on hand-made frames: floats, nulls, duplicated keys, and the rendered report (golden file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compare.diff import OutputsDiffer, assert_outputs_equal, diff_outputs, render_three_way, three_way
from kit.errors import KitError

GOLDEN = Path(__file__).parent / "golden"


def test_equal_outputs_in_any_order() -> None:
    a = pd.DataFrame({"key": ["a", "b"], "count": [1, 2]})
    diff = diff_outputs(a, a.iloc[::-1], keys=["key"])
    assert diff.equal and diff.matched == 2 and diff.summary() == "equal (2 rows)"


def test_missing_unexpected_and_mismatched_rows_are_told_apart() -> None:
    oracle = pd.DataFrame({"key": ["a", "b", "c"], "count": [3, 1, 2]})
    legacy = pd.DataFrame({"key": ["a", "b", "d"], "count": [3, 2, 1]})
    diff = diff_outputs(oracle, legacy, keys=["key"])
    assert diff.missing.to_dict("list") == {"key": ["c"], "count": [2]}
    assert diff.unexpected.to_dict("list") == {"key": ["d"], "count": [1]}
    assert diff.mismatched.to_dict("list") == {"key": ["b"], "count_expected": [1], "count_actual": [2]}
    assert diff.counts() == {"rows_missing": 1, "rows_unexpected": 1, "rows_mismatched": 1, "rows_matched": 1}


def test_a_key_emitted_twice_is_an_unexpected_row() -> None:
    oracle = pd.DataFrame({"window": [0, 10], "count": [5, 6]})
    appended = pd.DataFrame({"window": [0, 10, 10], "count": [5, 6, 6]})
    diff = diff_outputs(oracle, appended, keys=["window"])
    assert diff.unexpected.to_dict("list") == {"window": [10], "count": [6]}
    assert diff.missing.empty and diff.mismatched.empty


def test_floats_compare_exactly_unless_a_precision_is_given() -> None:
    a = pd.DataFrame({"key": ["x"], "mean": [0.1 + 0.2]})
    b = pd.DataFrame({"key": ["x"], "mean": [0.3]})
    assert not diff_outputs(a, b, keys=["key"]).equal
    assert diff_outputs(a, b, keys=["key"], precision=1e-9).equal
    assert not diff_outputs(a, b.assign(mean=[0.31]), keys=["key"], precision=1e-9).equal


def test_nulls_equal_nulls_in_values_and_keys() -> None:
    a = pd.DataFrame({"key": ["x", None], "v": [np.nan, 1.0], "s": [None, "y"]})
    b = pd.DataFrame({"key": [None, "x"], "v": [1.0, None], "s": ["y", np.nan]})
    assert diff_outputs(a, b, keys=["key"]).equal
    diff = diff_outputs(a, b.assign(v=[1.0, 0.0]), keys=["key"])
    assert diff.mismatched["key"].tolist() == ["x"]


def test_inputs_are_not_modified() -> None:
    a = pd.DataFrame({"key": ["a"], "count": [1]})
    b = pd.DataFrame({"key": ["a"], "count": [2]})
    before = (a.copy(), b.copy())
    diff_outputs(a, b, keys=["key"])
    pd.testing.assert_frame_equal(a, before[0])
    pd.testing.assert_frame_equal(b, before[1])


def test_a_missing_column_is_a_clear_error() -> None:
    with pytest.raises(KitError, match=r"the actual rows lack column\(s\) \['count'\]"):
        diff_outputs(pd.DataFrame({"key": [], "count": []}), pd.DataFrame({"key": []}), keys=["key"])


def test_assert_outputs_equal_raises_a_readable_report() -> None:
    oracle = pd.DataFrame({"key": [f"k{i}" for i in range(30)], "count": range(30)})
    actual = oracle.assign(count=oracle["count"] + (oracle.index % 2))
    with pytest.raises(OutputsDiffer) as info:
        assert_outputs_equal(oracle, actual, keys=["key"], limit=3)
    assert info.value.diff.counts()["rows_mismatched"] == 15
    assert (GOLDEN / "assert_outputs_equal.txt").read_text() == str(info.value)


def test_three_way_table_shows_only_differing_keys() -> None:
    oracle = pd.DataFrame({"window": [0, 10, 20], "key": ["a", "a", "b"], "count": [2, 3, 1]})
    legacy = pd.DataFrame({"window": [0, 10, 10], "key": ["a", "a", "b"], "count": [2, 4, 1]})
    modern = oracle.copy()
    diff = three_way(legacy, modern, oracle, keys=["window", "key"])
    assert diff.modern.equal and not diff.legacy.equal and not diff.equivalent
    assert (GOLDEN / "three_way.txt").read_text() == render_three_way(diff)
