"""Diff engine outputs against each other and against the oracle, by key, and say how they differ.

Rows are matched by their key columns. A key may legitimately appear several times (an append-mode output
that emitted a window twice is exactly the bug to catch), so the n-th row of a key on one side is matched
with the n-th row of that key on the other. What is left over is *missing* (expected, not produced) or
*unexpected* (produced, not expected); matched rows whose values differ are *mismatched*. Floats compare
within ``precision`` when given; nulls (None, NaN, NaT) equal each other.

:func:`diff_outputs` returns an :class:`OutputDiff` and never raises on a difference;
:func:`assert_outputs_equal` raises :class:`OutputsDiffer` with a readable report (chispa's pair
``are_dfs_equal`` / ``assert_df_equality``). :func:`three_way` compares legacy, modern and oracle at once and
:func:`render_three_way` prints them side by side.

Example:
    >>> import pandas as pd
    >>> oracle = pd.DataFrame({"key": ["a", "b", "c"], "count": [3, 1, 2]})
    >>> legacy = pd.DataFrame({"key": ["a", "b", "d"], "count": [3, 2, 1]})
    >>> diff = diff_outputs(oracle, legacy, keys=["key"])
    >>> diff.summary()
    'unexpected elements [(d, 1)], missing elements [(c, 2)], mismatched elements [b: count 1 != 2]'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from kit.errors import ConfigError, KitError

__all__ = [
    "DIFFERENT", "EQUIVALENT", "MIN_ROWS", "NOTHING_COMPARED", "Check", "NothingCompared", "OutputDiff",
    "OutputsDiffer", "ThreeWayDiff", "assert_outputs_equal", "assert_three_way", "diff_outputs", "records_differ",
    "render_three_way", "three_way", "updates_out_of_order", "verdict",
]

_OCCURRENCE = "__occurrence"


class OutputsDiffer(KitError, AssertionError):
    """Two outputs differ; ``diff`` is the :class:`OutputDiff` and the message its report."""

    def __init__(self, message: str, diff: OutputDiff) -> None:
        super().__init__(message)
        self.diff = diff


class NothingCompared(OutputsDiffer):
    """The expected result was empty: two empty results are equal, and that equality tests nothing."""


@dataclass(frozen=True)
class OutputDiff:
    """How ``actual`` differs from ``expected``.

    Attributes:
        keys: the key columns.
        values: the value columns compared.
        missing: rows of ``expected`` with no counterpart in ``actual``.
        unexpected: rows of ``actual`` with no counterpart in ``expected``.
        mismatched: matched rows whose values differ: the keys, then ``<col>_expected`` and
            ``<col>_actual`` for every value column.
        matched: rows matched with equal values.
        repeated: rows of ``unexpected`` that repeat a key: ``actual`` holds that key more often than
            ``expected`` does, and ``expected`` holds it too (a row emitted twice). The other unexpected rows
            have keys ``expected`` lacks. A mismatched row is neither lost nor repeated: it is mismatched.
    """

    keys: tuple[str, ...]
    values: tuple[str, ...]
    missing: pd.DataFrame
    unexpected: pd.DataFrame
    mismatched: pd.DataFrame
    matched: int
    repeated: int = 0

    @property
    def equal(self) -> bool:
        """True when nothing is missing, unexpected or mismatched."""
        return bool(self.missing.empty and self.unexpected.empty and self.mismatched.empty)

    def counts(self) -> dict[str, int]:
        """``{"rows_missing", "rows_unexpected", "rows_mismatched", "rows_matched"}``."""
        return {
            "rows_missing": len(self.missing),
            "rows_unexpected": len(self.unexpected),
            "rows_mismatched": len(self.mismatched),
            "rows_matched": self.matched,
        }

    def lost_and_duplicated(self) -> tuple[int, int]:
        """``(lost, duplicated)`` output rows: the missing rows, and the :attr:`repeated` ones.

        Only rows that really are lost (a key, or an n-th row of a key, never produced) or duplicated (a key
        produced more often than expected) count; a row with the right key and a wrong value is mismatched,
        whichever way its values are off.
        """
        return len(self.missing), self.repeated

    def summary(self, limit: int = 5) -> str:
        """One line in Beam's words: unexpected, missing and mismatched elements (first ``limit`` of each)."""
        columns = [*self.keys, *self.values]

        def elements(frame: pd.DataFrame) -> str:
            shown = ", ".join(
                "(" + ", ".join(_fmt(v) for v in row) + ")"
                for row in frame[columns].head(limit).itertuples(index=False)
            )
            more = f", ... {len(frame) - limit} more" if len(frame) > limit else ""
            return f"[{shown}{more}]"

        def mismatches() -> str:
            parts = []
            for row in self.mismatched.head(limit).to_dict("records"):
                key = ", ".join(_fmt(row[k]) for k in self.keys)
                changes = [
                    f"{v} {_fmt(row[f'{v}_expected'])} != {_fmt(row[f'{v}_actual'])}"
                    for v in self.values
                    if not _same(row[f"{v}_expected"], row[f"{v}_actual"], None)
                ]
                parts.append(f"{key}: {', '.join(changes)}")
            more = f", ... {len(self.mismatched) - limit} more" if len(self.mismatched) > limit else ""
            return f"[{'; '.join(parts)}{more}]"

        if self.equal:
            return f"equal ({self.matched} rows)"
        return (
            f"unexpected elements {elements(self.unexpected)}, missing elements {elements(self.missing)}, "
            f"mismatched elements {mismatches()}"
        )


def _fmt(value: Any) -> str:
    if _is_null(value):
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _is_null(value: Any) -> bool:
    if value is None or value is pd.NaT:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _same(a: Any, b: Any, precision: float | None) -> bool:
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    if precision is not None and (isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating))):
        try:
            return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=precision or 0.0)
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def _differs(left: np.ndarray, right: np.ndarray, precision: float | None) -> np.ndarray:
    """:func:`_same`, negated, over two object arrays at once (a Python call per row costs seconds at 1M rows)."""
    null_left, null_right = pd.isna(left), pd.isna(right)
    differs = null_left != null_right
    both = ~(null_left | null_right)
    a, b = left[both], right[both]
    unequal = ~np.asarray(a == b, dtype=bool)  # elementwise: the values' own ==, as _same
    if precision is not None and len(a):
        floats = np.fromiter(
            (isinstance(x, (float, np.floating)) or isinstance(y, (float, np.floating))
             for x, y in zip(a, b, strict=True)),
            dtype=bool, count=len(a),
        )
        if floats.any():
            unequal[floats] = [not _same(x, y, precision) for x, y in zip(a[floats], b[floats], strict=True)]
    differs[both] = unequal
    return cast(np.ndarray, differs)


def _with_occurrence(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    out = frame.reset_index(drop=True).copy()
    # Null keys group together (dropna=False), so a null key matches a null key.
    out[_OCCURRENCE] = out.groupby(keys, dropna=False, sort=False).cumcount()
    return out


def diff_outputs(
    expected: pd.DataFrame,
    actual: pd.DataFrame,
    keys: Sequence[str],
    values: Sequence[str] | None = None,
    *,
    precision: float | None = None,
) -> OutputDiff:
    """Compare ``actual`` with ``expected`` by ``keys``; inputs are not modified.

    Args:
        expected: the reference rows (usually the oracle's).
        actual: the rows to check.
        keys: key columns (present in both).
        values: value columns to compare; default: every other column of ``expected``.
        precision: absolute tolerance for float values; default None (exact).

    Raises:
        KitError: a key or value column is missing from either side (names the column and the side).
    """
    keys = list(keys)
    values = [c for c in expected.columns if c not in keys] if values is None else list(values)
    for side, frame in (("expected", expected), ("actual", actual)):
        absent = [c for c in [*keys, *values] if c not in frame.columns]
        if absent:
            msg = f"diff: the {side} rows lack column(s) {absent}; they have {list(frame.columns)}"
            raise KitError(msg)
    # Values as objects: an outer merge would otherwise turn int columns into floats (NaN for "no row").
    left = _with_occurrence(expected[[*keys, *values]].astype({v: object for v in values}), keys)
    right = _with_occurrence(actual[[*keys, *values]].astype({v: object for v in values}), keys)
    on = [*keys, _OCCURRENCE]
    merged = left.merge(right, on=on, how="outer", suffixes=("_expected", "_actual"), indicator=True)
    only_left = merged[merged["_merge"] == "left_only"]
    only_right = merged[merged["_merge"] == "right_only"]
    both = merged[merged["_merge"] == "both"]
    missing = only_left[keys + [f"{v}_expected" for v in values]].set_axis([*keys, *values], axis=1)
    unexpected = only_right[keys + [f"{v}_actual" for v in values]].set_axis([*keys, *values], axis=1)
    differs = np.zeros(len(both), dtype=bool)
    for v in values:
        differs |= _differs(
            both[f"{v}_expected"].to_numpy(dtype=object), both[f"{v}_actual"].to_numpy(dtype=object), precision
        )
    pairs = [c for v in values for c in (f"{v}_expected", f"{v}_actual")]
    mismatched = both.loc[differs, [*keys, *pairs]]
    expected_keys = left.drop_duplicates(keys)[keys].assign(_seen=True)
    again = only_right[only_right[_OCCURRENCE] > 0][keys].merge(expected_keys, on=keys, how="left")
    return OutputDiff(
        keys=tuple(keys),
        values=tuple(values),
        missing=missing.reset_index(drop=True),
        unexpected=unexpected.reset_index(drop=True),
        mismatched=mismatched.reset_index(drop=True),
        matched=int((~differs).sum()),
        repeated=int(again["_seen"].eq(True).sum()) if len(again) else 0,
    )


def assert_outputs_equal(
    expected: pd.DataFrame,
    actual: pd.DataFrame,
    keys: Sequence[str],
    values: Sequence[str] | None = None,
    *,
    precision: float | None = None,
    limit: int = 20,
) -> OutputDiff:
    """:func:`diff_outputs`, raising :class:`OutputsDiffer` when the outputs differ.

    The error's report shows at most ``limit`` rows per kind. Returns the (equal) diff otherwise.
    """
    diff = diff_outputs(expected, actual, keys, values, precision=precision)
    if not diff.equal:
        raise OutputsDiffer(_report(diff, limit), diff)
    return diff


def _report(diff: OutputDiff, limit: int) -> str:
    lines = [diff.summary(), ""]
    for title, frame in (("missing", diff.missing), ("unexpected", diff.unexpected), ("mismatched", diff.mismatched)):
        if frame.empty:
            continue
        lines.append(f"{title} ({len(frame)} rows):")
        lines.append(frame.head(limit).to_string(index=False))
        if len(frame) > limit:
            lines.append(f"... {len(frame) - limit} more rows omitted")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class ThreeWayDiff:
    """Legacy and modern, each against the oracle and against each other."""

    legacy: OutputDiff
    modern: OutputDiff
    between: OutputDiff
    legacy_rows: pd.DataFrame
    modern_rows: pd.DataFrame
    oracle_rows: pd.DataFrame

    @property
    def equivalent(self) -> bool:
        """True when both engines equal the oracle."""
        return self.legacy.equal and self.modern.equal

    def against_oracle(self, engine: str) -> OutputDiff:
        """The diff of ``engine``'s (``"legacy"`` or ``"modern"``) final result against the oracle.

        Raises:
            ConfigError: another engine name.
        """
        from compare.engines import ENGINES  # the fields holding each engine's diff are named after it

        if engine not in ENGINES:
            msg = f"a three-way diff holds the engines legacy and modern, not {engine!r}"
            raise ConfigError(msg, field="engine", expected=ENGINES, actual=engine)
        diff: OutputDiff = getattr(self, engine)
        return diff


def three_way(
    legacy: pd.DataFrame,
    modern: pd.DataFrame,
    oracle: pd.DataFrame,
    keys: Sequence[str],
    values: Sequence[str] | None = None,
    *,
    precision: float | None = None,
) -> ThreeWayDiff:
    """Diff both engines against the oracle (``legacy``/``modern``) and modern against legacy (``between``)."""
    return ThreeWayDiff(
        legacy=diff_outputs(oracle, legacy, keys, values, precision=precision),
        modern=diff_outputs(oracle, modern, keys, values, precision=precision),
        between=diff_outputs(legacy, modern, keys, values, precision=precision),
        legacy_rows=legacy,
        modern_rows=modern,
        oracle_rows=oracle,
    )


def render_three_way(diff: ThreeWayDiff, limit: int = 20) -> str:
    """A side-by-side table of the keys where any side differs, headed ``key | legacy | modern | oracle``.

    Each cell shows the row's values (``-`` when that side has no row for the key); at most ``limit`` keys,
    then how many were omitted.
    """
    keys, values = list(diff.legacy.keys), list(diff.legacy.values)

    def cells(frame: pd.DataFrame) -> dict[tuple[Any, ...], list[str]]:
        out: dict[tuple[Any, ...], list[str]] = {}
        for row in frame[[*keys, *values]].itertuples(index=False):
            out.setdefault(tuple(_fmt(v) for v in row[: len(keys)]), []).append(
                ", ".join(_fmt(v) for v in row[len(keys) :])
            )
        return out

    sides = [cells(diff.legacy_rows), cells(diff.modern_rows), cells(diff.oracle_rows)]
    differing = sorted({k for k in set().union(*sides) if len({tuple(s.get(k, [])) for s in sides}) > 1})
    header = [" / ".join(keys), "legacy", "modern", "oracle"]
    rows = [[" / ".join(k), *("; ".join(s.get(k, ["-"])) for s in sides)] for k in differing[:limit]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), "-|-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if len(differing) > limit:
        lines.append(f"... {len(differing) - limit} more differing keys omitted")
    if not differing:
        lines.append("(no differences)")
    return "\n".join(line.rstrip() for line in lines) + "\n"


# --------------------------------------------------------------------------------------------------------
# Verdicts

EQUIVALENT, DIFFERENT, NOTHING_COMPARED = "EQUIVALENT", "DIFFERENT", "NOTHING COMPARED"
"""The three verdicts. Only EQUIVALENT passes: an oracle with no rows tests nothing, so it fails too."""

MIN_ROWS = 10
"""Default ``--min-rows``: a run comparing fewer rows than this is warned about (it tests little)."""


@dataclass(frozen=True)
class Check:
    """One part of a verdict: ``part`` (rows, dead letters, late drops, input) of ``engine``.

    ``ok`` is None when the part is not checked for that engine (``detail`` says why).
    """

    part: str
    engine: str
    ok: bool | None
    detail: str

    def line(self) -> str:
        """``rows, legacy: equal (1,000 rows)``-style text, prefixed by its mark."""
        mark = {True: "ok", False: "DIFFERS", None: "not checked"}[self.ok]
        return f"{self.part}, {self.engine}: {mark}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-ready values (``metrics.json``'s ``checks``)."""
        return {"part": self.part, "engine": self.engine, "ok": self.ok, "detail": self.detail}


def verdict(checks: Sequence[Check], compared_rows: int, *, min_rows: int = MIN_ROWS) -> tuple[str, list[str]]:
    """``(verdict, warnings)`` of a run.

    DIFFERENT when any check failed; else NOTHING COMPARED when ``compared_rows`` (the oracle's rows, or without
    an oracle both sides' rows) is 0; else EQUIVALENT. A warning when fewer than ``min_rows`` rows were compared.

    Example:
        >>> verdict([Check("rows", "legacy", True, "equal")], 0)[0]
        'NOTHING COMPARED'
        >>> verdict([Check("rows", "legacy", False, "2 rows missing")], 0)[0]
        'DIFFERENT'
    """
    warnings = []
    if compared_rows < min_rows:
        warnings.append(
            f"{compared_rows:,} rows compared: "
            + ("the result is empty, so the run tested nothing." if not compared_rows
               else f"fewer than --min-rows {min_rows}, so the run tested little.")
            + " Give the dataset more event time than the workload's windows, gap and watermark delay (more records,"
            " or a lower --events-per-second)."
        )
    if any(c.ok is False for c in checks):
        return DIFFERENT, warnings
    return (NOTHING_COMPARED if compared_rows == 0 else EQUIVALENT), warnings


def records_differ(expected: pd.DataFrame, actual: pd.DataFrame, columns: Sequence[str]) -> tuple[int, int]:
    """``(only expected, only actual)``: records (e.g. dead letters as ``seq, reason``) compared as multisets.

    Values are compared as text, so a window written ``"1767225600000"`` by one side and as an int by the other
    match.
    """
    columns = list(columns)

    def text(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[columns].astype(str).reset_index(drop=True)

    diff = diff_outputs(text(expected), text(actual), columns, [])
    return len(diff.missing), len(diff.unexpected)


def assert_three_way(diff: ThreeWayDiff, name: str) -> None:
    """Raise unless both engines equal a non-empty oracle: the pytest plugin's ``assert_equivalent`` verdict.

    Raises:
        OutputsDiffer: an engine differs from the oracle (the counts per side and the differing keys).
        NothingCompared: all three are equal, and empty.
    """
    if not diff.equivalent:
        msg = (
            f"{name}: the engines do not both equal the oracle\n"
            f"legacy vs oracle: {diff.legacy.counts()}\nmodern vs oracle: {diff.modern.counts()}\n"
            f"modern vs legacy: {diff.between.counts()}\n\n{render_three_way(diff)}"
        )
        raise OutputsDiffer(msg, diff.legacy if not diff.legacy.equal else diff.modern)
    if diff.oracle_rows.empty:
        msg = (
            f"{name}: NOTHING COMPARED: the oracle has no rows for this dataset, so both engines matched it "
            "without being tested. Give the dataset more event time than the workload's windows, session gap and "
            "watermark delay (more records, or a lower events_per_second)."
        )
        raise NothingCompared(msg, diff.legacy)


def updates_out_of_order(
    trajectory: pd.DataFrame, rows: pd.DataFrame, keys: Sequence[str], values: Sequence[str],
) -> tuple[int, int]:
    """``(never a value of the key, out of order)``: an update-mode engine's every emitted row against the oracle.

    ``trajectory`` holds every value each key passes through in replay order (a ``seq`` per value); ``rows``
    every row the engine emitted, in emission order. Each row must be a value its key passes through, and a
    key's rows must follow the trajectory: each later than the one before (a batch boundary may skip values,
    never go back or repeat one).

    Example:
        >>> path = pd.DataFrame({"key": ["a", "a", "a"], "count": [1, 2, 3], "seq": [0, 4, 9]})
        >>> updates_out_of_order(path, pd.DataFrame({"key": ["a", "a"], "count": [2, 3]}), ["key"], ["count"])
        (0, 0)
        >>> updates_out_of_order(path, pd.DataFrame({"key": ["a", "a", "a"], "count": [3, 2, 4]}), ["key"], ["count"])
        (1, 1)
    """
    columns = [*keys, *values]
    first = trajectory.groupby(columns, sort=False)["seq"].min().reset_index()
    placed = rows[columns].reset_index(drop=True).merge(first, on=columns, how="left", sort=False)
    unknown = int(placed["seq"].isna().sum())
    known = placed.dropna(subset=["seq"])
    previous = known.groupby(list(keys), sort=False)["seq"].cummax().groupby(
        [known[k] for k in keys], sort=False).shift()
    backwards = int((known["seq"] <= previous).sum())
    return unknown, backwards
