"""The playbook's data-processing constructs: legacy = modern = oracle, row for row, on one small dataset.

The dataset (:func:`examples.playbook.oracles.sample`) is 8 seconds of events. The DStream side reads it with
``ssc.queueStream(rdds, oneAtATime=True)`` on a 1 s batch interval, batch ``i`` holding exactly the events of
second ``i`` of event time, as Spark's own DStream tests feed their windows; then arrival time is event time,
and only then do arrival-time windows equal event-time ones (docs/playbook.md, "Processing time is not event
time"). One StreamingContext runs the default tier's DStream constructs over those batches and another runs
all the others, each shared by the tests that read it: at one batch per second, 13 batches take at least 13 s,
so a context per construct would cost that many times over. The modern side reads the same
events from JSON files, one file per second, with the file source's ``maxFilesPerTrigger=1`` (micro-batch ``i``
is second ``i``), until ``availableNow`` has read them all, one query per construct.

Windows are compared by their end in seconds from ``BASE_MS``; per-batch results by the second, which is the
DStream batch index, the micro-batch id, or the start of the 1 s event-time window that stands in for a batch.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from examples.playbook import oracles as oracle
from examples.playbook.oracles import BASE_MS, SLIDE_S, WINDOW_S

pytestmark = pytest.mark.filterwarnings("ignore:DStream is deprecated:FutureWarning")

EVENTS = oracle.sample()
FRAME = pd.DataFrame(EVENTS)
BATCHES = oracle.by_second(EVENTS)
# Batches after the data: a window ending up to WINDOW_S s after the last second still holds some of it.
TOTAL_BATCHES = len(BATCHES) + WINDOW_S
WATERMARK_S = (max(e["event_time"] for e in EVENTS) - BASE_MS) / 1000 - oracle.WATERMARK_DELAY_S
TIMEOUT_S = 120.0


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    return value


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda row: tuple((v is None, v) for v in row))


# -- the DStream side ------------------------------------------------------------------------------------------


# The constructs the default tier checks run in a context of their own: fewer output operations per batch.
DEFAULT_TIER = ("map_partitions", "count_by_window")


def _run_legacy(names: list[str], checkpoint: Path) -> dict[str, list[tuple[int, list]]]:
    """The legacy constructs ``names`` over the dataset's batches: ``{name: [(batch, rows), ...]}``, batch 1 first.

    Batch ``k`` (1-based) is the one that read second ``k - 1``; a window emitted with batch ``k`` ends at second
    ``k`` of event time.
    """
    from examples.playbook import legacy_constructs as legacy
    from kit.spark import streaming_context

    ssc = streaming_context(1.0)
    ssc.checkpoint(str(checkpoint))
    sc = ssc.sparkContext
    rdds = [sc.parallelize(batch, 2) for batch in BATCHES] + [sc.parallelize([], 2) for _ in range(WINDOW_S)]
    events = ssc.queueStream(rdds, oneAtATime=True)
    seen: list[int] = []  # batch times (ms) of the input, in order
    events.foreachRDD(lambda t, rdd: seen.append(round(t.timestamp() * 1000)))
    raw: dict[str, list[tuple[int, list]]] = {}
    for name in names:
        raw[name] = []
        getattr(legacy, name)(events).foreachRDD(
            lambda t, rdd, out=raw[name]: out.append((round(t.timestamp() * 1000), rdd.collect()))
        )
    done: list[int] = []  # the last output operation: every other one of its batch has run before it
    events.foreachRDD(lambda t, rdd: done.append(round(t.timestamp() * 1000)))
    ssc.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(done) < TOTAL_BATCHES:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(done)} of {TOTAL_BATCHES} batches done after {TIMEOUT_S:g} s")
            if ssc.awaitTerminationOrTimeout(0.1):
                raise AssertionError(f"the streaming context stopped after {len(done)} batches")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    first, last = seen[0], done[TOTAL_BATCHES - 1]
    return {
        name: [((t - first) // 1000 + 1, [_plain(r) for r in rows]) for t, rows in out if t <= last]
        for name, out in raw.items()
    }


@pytest.fixture(scope="module")
def legacy_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``legacy_run(name)``: ``[(batch, rows), ...]`` of a legacy construct, from one run of its tier's group."""
    from examples.playbook import legacy_constructs as legacy

    runs: dict[bool, dict[str, list[tuple[int, list]]]] = {}

    def get(name: str) -> list[tuple[int, list]]:
        default = name in DEFAULT_TIER
        if default not in runs:
            names = [n for n in legacy.__all__ if (n in DEFAULT_TIER) == default]
            runs[default] = _run_legacy(names, tmp_path_factory.mktemp("constructs-checkpoint"))
        return runs[default][name]

    return get


def _per_batch(batches: list[tuple[int, list]]) -> list[tuple]:
    """Per-batch rows with the batch's second (batch k read second k - 1) in front."""
    return _sorted([(k - 1, *row) for k, rows in batches for row in rows])


def _per_window(batches: list[tuple[int, list]]) -> list[tuple]:
    """Windowed rows with the window's end (the batch that emitted it) in front."""
    return _sorted([(k, *(row if isinstance(row, tuple) else (row,))) for k, rows in batches for row in rows])


# -- the Structured Streaming side -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def event_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dataset as JSON files, one per second, ordered by modification time as the file source reads them."""
    directory = tmp_path_factory.mktemp("constructs-events")
    for second, batch in enumerate(BATCHES):
        path = directory / f"second-{second:03d}.json"
        path.write_text("".join(json.dumps(e) + "\n" for e in batch), encoding="utf-8")
        os.utime(path, (1_000_000 + second, 1_000_000 + second))
    return directory


def _events(spark: Any, directory: Path) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    frame = spark.readStream.schema("side string, key string, value long, event_time long")
    frame = frame.option("maxFilesPerTrigger", 1).json(str(directory))
    return frame.withColumn("event_time", F.timestamp_millis("event_time"))


def _run_modern(
    spark: Any, directory: Path, checkpoint: Path, build: Any, *, mode: str = "append", per_batch: Any = None
) -> list[tuple[int, list[tuple]]]:
    """Run ``build(events)`` until every file is read; ``[(batch_id, rows), ...]`` as ``foreachBatch`` saw them.

    With ``per_batch``, the query writes ``per_batch(batch)`` of each micro-batch instead of the batch itself.
    """
    out: list[tuple[int, list[tuple]]] = []

    def collect(batch: Any, batch_id: int) -> None:
        rows = (per_batch(batch) if per_batch else batch).collect()
        out.append((batch_id, [_plain(tuple(r)) for r in rows]))

    query = (
        build(_events(spark, directory)).writeStream.outputMode(mode).foreachBatch(collect)
        .trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start()
    )
    finished = query.awaitTermination(TIMEOUT_S)
    if not finished:
        query.stop()
    assert query.exception() is None, query.exception()
    assert finished, f"the query did not read every file in {TIMEOUT_S:g} s; last progress: {query.lastProgress}"
    return out


def _rows(batches: list[tuple[int, list[tuple]]]) -> list[tuple]:
    return _sorted([row for _, rows in batches for row in rows])


def _seconds(rows: list[tuple], *, at: int = 0) -> list[tuple]:
    """``rows`` with the epoch-ms time at position ``at`` turned into whole seconds from ``BASE_MS``."""
    return _sorted([(*row[:at], (row[at] - BASE_MS) // 1000, *row[at + 1 :]) for row in rows])


# -- the tests -------------------------------------------------------------------------------------------------


def test_the_dataset_has_what_the_constructs_need() -> None:
    assert len(BATCHES) == oracle.SECONDS and all(BATCHES)  # a file and a micro-batch per second
    assert {e["key"] for e in BATCHES[0]} >= {"e"} and all(e["key"] != "e" for b in BATCHES[1:] for e in b)
    assert [(e["side"], e["key"]) for e in BATCHES[-1]] == [("left", "a"), ("right", "a")]
    assert len({e["event_time"] for e in EVENTS}) == len(EVENTS)


@pytest.mark.spark
def test_map_partitions_equals_map_in_pandas(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.map_partitions(FRAME)
    assert _per_batch(legacy_run("map_partitions")) == _sorted([((t - BASE_MS) // 1000, t, *rest) for t, *rest in expected])
    got = _run_modern(spark, event_files, tmp_path, modern.map_partitions)
    assert _rows(got) == expected
    assert [batch_id for batch_id, _ in got] == list(range(len(BATCHES)))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", ["reduce_by_key", "count_by_value"])
def test_per_batch_reduce_equals_the_same_reduce_in_foreach_batch(legacy_run, spark, event_files, tmp_path, name) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.ORACLES[name](FRAME)
    assert _per_batch(legacy_run(name)) == expected
    got = _run_modern(spark, event_files, tmp_path, lambda events: events, per_batch=getattr(modern, name))
    assert _sorted([(batch_id, *row) for batch_id, rows in got for row in rows]) == expected


@pytest.mark.spark
@pytest.mark.slow
def test_running_totals_in_state_equal_update_state_by_key(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.running_totals(FRAME)
    last_batch = max(k for k, _ in legacy_run("running_totals"))
    assert _sorted(dict(legacy_run("running_totals"))[last_batch]) == expected  # the whole state, every batch
    got = _run_modern(spark, event_files, tmp_path, modern.running_totals, mode="update")
    final = {key: total for _, rows in got for key, total in rows}  # update mode: the changed keys of each batch
    assert _sorted(list(final.items())) == expected
    assert sum(len(rows) for _, rows in got) < len(expected) * len(got)  # not every key every batch


@pytest.mark.spark
def test_count_by_window_equals_group_by_window_count(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.count_by_window(FRAME)
    legacy = _per_window(legacy_run("count_by_window"))
    # countByWindow is a reduce with an inverse (5 slides) and no filter: after the data, its windows count 0,
    # where window() has no row at all.
    assert [row for row in legacy if row[1] != 0] == expected
    assert [row for row in legacy if row[1] == 0] == [(k, 0) for k in range(expected[-1][0] + SLIDE_S, TOTAL_BATCHES + 1, SLIDE_S)]
    got = _seconds(_rows(_run_modern(spark, event_files, tmp_path, modern.count_by_window)))
    assert got == oracle.closed(expected, WATERMARK_S)
    assert len(got) < len(expected)  # the windows still open when the input ended are never emitted


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["count_by_value_and_window", "reduce_by_key_and_window", "reduce_by_key_and_window_without_inverse"]
)
def test_windowed_reduce_by_key_equals_group_by_window_and_key(legacy_run, spark, event_files, tmp_path, name) -> None:
    from examples.playbook import modern_constructs as modern

    oracle_name = name.removesuffix("_without_inverse")
    expected = oracle.ORACLES[oracle_name](FRAME)
    assert _per_window(legacy_run(name)) == expected
    got = _seconds(_rows(_run_modern(spark, event_files, tmp_path, getattr(modern, oracle_name))))
    assert got == oracle.closed(expected, WATERMARK_S)


@pytest.mark.spark
@pytest.mark.slow
def test_reduce_by_window_equals_group_by_window_sum(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.reduce_by_window(FRAME)
    legacy = _per_window(legacy_run("reduce_by_window"))
    assert [row for row in legacy if row[1] != 0] == expected
    assert [row for row in legacy if row[1] == 0] == [(TOTAL_BATCHES, 0)]  # as countByWindow: a 0 after the data
    got = _seconds(_rows(_run_modern(spark, event_files, tmp_path, modern.reduce_by_window)))
    assert got == oracle.closed(expected, WATERMARK_S)


@pytest.mark.spark
@pytest.mark.slow
def test_group_by_key_and_window_equals_collect_list_per_window(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.group_by_key_and_window(FRAME)
    legacy = _per_window(legacy_run("group_by_key_and_window"))
    # groupByKeyAndWindow is reduceByKeyAndWindow with list concatenation and, as inverse, dropping the list's
    # first len(leaving) values, with no filter: a key that left the window stays, with no values.
    assert [row for row in legacy if row[2]] == expected
    assert [(k, key) for k, key, values in legacy if not values and key == "e"] == [
        (k, "e") for k in range(WINDOW_S + 1, TOTAL_BATCHES + 1, SLIDE_S)
    ]
    got = _seconds(_rows(_run_modern(spark, event_files, tmp_path, modern.group_by_key_and_window)))
    assert got == oracle.closed(expected, WATERMARK_S)


@pytest.mark.spark
@pytest.mark.slow
def test_the_inverse_function_leaves_keys_at_zero_unless_filtered(legacy_run) -> None:
    expected = oracle.reduce_by_key_and_window(FRAME)
    unfiltered = _per_window(legacy_run("reduce_by_key_and_window_unfiltered"))
    zeros = [row for row in unfiltered if row[2] == 0]
    assert [row for row in unfiltered if row[2] != 0] == expected
    # Key "e" is in second 0 only, so in the windows ending at 1 to WINDOW_S; every later window keeps it, at 0,
    # for good (and so does the state). Keys that leave and come back are at 0 in between.
    assert [(k, key) for k, key, _ in zeros if key == "e"] == [(k, "e") for k in range(WINDOW_S + 1, TOTAL_BATCHES + 1, SLIDE_S)]
    # With filterFunc, reduce_by_key_and_window equals the oracle exactly: test_windowed_reduce_by_key_... (slow).


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", ["left_outer_join", "full_outer_join", "cogroup"])
def test_outer_joins_and_cogroup_equal_event_time_joins_on_one_second_windows(
    legacy_run, spark, event_files, tmp_path, name
) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.ORACLES[name](FRAME)
    legacy = _sorted([(k - 1, key, *values) for k, rows in legacy_run(name) for key, values in rows])
    assert legacy == expected
    got = _seconds(_rows(_run_modern(spark, event_files, tmp_path, getattr(modern, name))))
    if name == "cogroup":  # an aggregation: the last second's window is still open when the input ends
        assert got == [row for row in expected if row[0] + 1 <= WATERMARK_S]
    else:  # every row of the last second is a match, emitted at once
        assert got == expected
    if name != "cogroup":
        assert any(row[3] is None for row in expected)
    if name == "full_outer_join":
        assert any(row[2] is None for row in expected)


@pytest.mark.spark
@pytest.mark.slow
def test_cogroup_in_pandas_runs_per_micro_batch_on_a_stream(spark, event_files, tmp_path) -> None:
    """PySpark 4.3 runs ``groupBy().cogroup().applyInPandas()`` on a stream: each micro-batch's groups, no state."""
    from examples.playbook import modern_constructs as modern

    expected = oracle.cogroup(FRAME)
    got = _run_modern(spark, event_files, tmp_path, modern.cogroup_in_pandas)
    assert _sorted([(batch_id, *row) for batch_id, rows in got for row in rows]) == expected  # the last second too


@pytest.mark.spark
@pytest.mark.slow
def test_transform_with_rdd_code_equals_dataframe_code_in_foreach_batch(legacy_run, spark, event_files, tmp_path) -> None:
    from examples.playbook import modern_constructs as modern

    expected = oracle.top_per_batch(FRAME)
    assert _per_batch(legacy_run("top_per_batch")) == expected
    got = _run_modern(spark, event_files, tmp_path, lambda events: events, per_batch=modern.top_per_batch)
    assert _sorted([(batch_id, *row) for batch_id, rows in got for row in rows]) == expected
