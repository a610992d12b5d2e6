"""The output filter of a rewound cutover: the modern query's rows the legacy job already emitted, dropped.

``dmk cutover --rewind`` starts the modern query before the legacy job's position, so that it rebuilds the
state the legacy job had (open windows, ids seen), and writes this filter's file (``--suppress FILE``)::

    {"workload": "windowed_counts", "row_time": "window_start + 10000", "cutoff_ms": 1767225655000,
     "key_columns": ["window_kind", "window_start", "key"], "keys": [["tumbling", 1767225640000, "k1"], ...]}

:func:`suppress_emitted` wraps the job's output with it (``ModernRunConfig.suppress``): a row is dropped when its
row time (the window's end, the event's time) is at or before ``cutoff_ms`` — the legacy job's output is
complete there — or when its key is one of ``keys``, rows past the cutoff the legacy job emitted (a broadcast
stream-static anti-join), both kept above the aggregation by a nondeterministic column (see the code: else
Spark pushes them below a ``session_window`` aggregation, onto events). Both only match rows at or before the
cutover point: every key's row time is at most
the largest event time the legacy job had read, so once the query is past it the filter drops nothing more. It
keeps no state (a filter and a join with a static table after the stateful operator), so the checkpoint does not
depend on it.

A join (``join``: :attr:`kit.workloads.StateCarry.row_inputs`) is filtered by its pairs' input records instead: its
file holds the legacy position and the re-read records the legacy job dropped as too late, and a row goes when both
its records lie below the position (the legacy job emitted the pair, or dropped one of its records) or one of them
is such a late record. Keys cannot tell those apart: a re-delivered record pairs again under the same ids.

Example::

    frame = suppress_emitted(spark, frame, "runs/suppress.json", kit.workloads.get("dedup"))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit import workloads
from kit.errors import ConfigError

__all__ = ["dead_letters_from", "suppress_emitted"]


def _read(path: str | Path, spec: workloads.WorkloadSpec) -> dict[str, Any]:
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        msg = f"the cutover filter {path} cannot be read ({err}); write it with dmk cutover --rewind --suppress FILE"
        raise ConfigError(msg, field="suppress", expected="a dmk cutover --suppress file", actual=str(path)) from None
    if not isinstance(plan, dict) or plan.get("workload") != spec.name:
        found = plan.get("workload") if isinstance(plan, dict) else type(plan).__name__
        msg = f"the cutover filter {path} is for {found!r}, not {spec.name!r}: pass the file written for this job"
        raise ConfigError(msg, field="suppress", expected=spec.name, actual=found)
    if plan.get("key_columns") != list(spec.key_columns) or plan.get("row_time") != spec.carry.row_time:
        msg = (
            f"the cutover filter {path} names keys {plan.get('key_columns')} and row time {plan.get('row_time')!r}; "
            f"{spec.name} has {list(spec.key_columns)} and {spec.carry.row_time!r}: write it again with this version"
        )
        raise ConfigError(msg, field="suppress", expected=list(spec.key_columns), actual=plan.get("key_columns"))
    return plan


def dead_letters_from(path: str | Path) -> dict[str, dict[int, int]]:
    """The filter file's ``dead_letters_from``: topic → partition → the legacy job's position.

    The legacy job dead-lettered the malformed records before it; the rewound modern query reads them again and
    dead-letters only those from it on (``modern.workloads.Source``'s ``dead_letters_from``), so each malformed
    record is in the joined dead-letter output once. A file without it (none before this field): ``{}``.

    Raises:
        ConfigError: the file cannot be read.
    """
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        msg = f"the cutover filter {path} cannot be read ({err}); write it with dmk cutover --rewind --suppress FILE"
        raise ConfigError(msg, field="suppress", expected="a dmk cutover --suppress file", actual=str(path)) from None
    return _offsets(plan if isinstance(plan, dict) else {}, "dead_letters_from", path)


def _offsets(plan: dict[str, Any], name: str, path: str | Path) -> dict[str, dict[int, int]]:
    """The filter file's field ``name``, topic → partition → offset (``{}`` if absent).

    Raises:
        ConfigError: the field is not of that shape.
    """
    raw = plan.get(name, {})
    try:
        return {str(topic): {int(p): int(o) for p, o in offsets.items()} for topic, offsets in raw.items()}
    except (AttributeError, TypeError, ValueError):
        shown = str(raw)[:80]
        msg = (f"the cutover filter {path} has a malformed {name} ({shown}): write it again with "
               "dmk cutover --rewind --suppress FILE")
        raise ConfigError(msg, field="suppress", expected="topic -> partition -> offset", actual=shown) from None


def suppress_emitted(spark: Any, frame: Any, path: str | Path, spec: workloads.WorkloadSpec) -> Any:
    """``frame`` (the job's output) without the rows the legacy job emitted, per the filter file at ``path``.

    Raises:
        ConfigError: the file cannot be read, or was written for another workload.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    plan = _read(path, spec)
    if spec.carry.row_inputs:
        return _drop_pairs_read_before(spark, frame, plan, spec.carry.row_inputs, path)
    # A barrier: Spark's optimizer pushes a filter or a semi/anti join on grouping columns below the aggregation
    # (PushPredicateThroughNonJoin, PushDownLeftSemiAntiJoin), where a session_window column is still each
    # event's own [t, t + gap), not the merged session: it then dropped events, not sessions. Neither rule
    # passes a projection with a nondeterministic column, which the filter uses (rand() >= 0 always holds).
    barrier = frame.withColumn("__after_aggregation", F.rand())
    kept = barrier.where(
        (F.expr(plan["row_time"]) > F.lit(int(plan["cutoff_ms"]))) & (F.col("__after_aggregation") >= 0)
    ).select(*frame.columns)
    if plan["keys"]:
        schema = frame.select(*spec.key_columns).schema
        emitted = spark.createDataFrame([tuple(row) for row in plan["keys"]], schema)
        kept = kept.join(F.broadcast(emitted), list(spec.key_columns), "left_anti")
    return kept.select(*frame.columns)


def _drop_pairs_read_before(spark: Any, frame: Any, plan: dict[str, Any], sides: tuple[str, ...],
                            path: str | Path) -> Any:
    """A join's filter: drop the rows whose input records all lie below the position, or one of ``plan["dropped"]``.

    A re-delivered record pairs again under the same ids, so only the records' offsets tell the legacy job's pairs
    from later ones (:func:`kit.workloads.rewind.rewind_pairs`).
    """
    from functools import reduce
    from operator import and_, or_

    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    missing = [f"{side}_{c}" for side in sides for c in ("topic", "partition", "offset")
               if f"{side}_{c}" not in frame.columns]
    if missing:
        msg = (f"the cutover filter of {plan['workload']} reads each row's input records, and this job's frame has no "
               f"{', '.join(missing)}: select them from the source's topic, partition and offset before the "
               "projection, as modern/workloads/join.py does (StateCarry.row_inputs)")
        raise ConfigError(msg, field="suppress", expected=missing, actual=list(frame.columns))
    position = [(t, p, o) for t, offsets in _offsets(plan, "position", path).items() for p, o in offsets.items()]
    try:
        dropped: list[tuple[str, int, int]] | None = [(str(t), int(p), int(o)) for t, p, o in plan["dropped"]]
    except (KeyError, TypeError, ValueError):
        dropped = None
    if "position" not in plan or dropped is None:  # without the position every pair is kept, the legacy job's too
        msg = (f"the cutover filter {path} of a join has no readable position or dropped records: write it again "
               "with dmk cutover --rewind --suppress FILE")
        raise ConfigError(msg, field="suppress", expected="position and dropped", actual=sorted(plan))

    def below(side: str) -> Any:
        return reduce(or_, [(F.col(f"{side}_topic") == t) & (F.col(f"{side}_partition") == p)
                            & (F.col(f"{side}_offset") < o) for t, p, o in position], F.lit(False))

    kept = frame.where(~reduce(and_, [below(side) for side in sides]))
    if dropped:
        late = spark.createDataFrame(dropped, "topic string, partition int, offset long")
        for side in sides:
            named = [f"{side}_{column}" for column in ("topic", "partition", "offset")]
            kept = kept.join(F.broadcast(late.toDF(*named)), named, "left_anti")
    return kept.select(*frame.columns)
