"""The Nexmark queries (``nexmark_q0`` ... ``q11``): legacy, modern and the oracle agree exactly.

Unit tests (no JVM, no broker): the specs, the router of both layouts, both engines' Nexmark parse against
:func:`kit.nexmark.parse_nexmark`, the oracles against each other and against the dataset's labels, a driver
config carrying a Nexmark spec. In the session's Spark (no broker): the modern parse over a messy stream and odd bids.

Engine runs: the default tier runs q0, q1 and q2 in one run per engine on a 2,000-record stream with malformed and
out-of-order records (:data:`FAST`), legacy on the one-topic layout and modern on the three-topic one; the slow tier
runs every query on 20,000 records (40 s of event time) of both profiles, messy in the three-topic
layout, clean in the one-topic one, on both engines. Each check: the final rows equal the oracle's, the
dead letters are exactly the malformed records the job read (record and reason), and the legacy event-time queries'
late drops are the oracle's record by record.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from compare.diff import assert_outputs_equal
from compare.harness import EngineOutputs, route_inputs, run_engine
from kit import workloads
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig
from kit.errors import ConfigError
from kit.nexmark import TABLE_TYPES, NexmarkSpec, generate_nexmark, parse_nexmark, spec_from_dict
from kit.workloads._nexmark import read_bids

pytestmark = pytest.mark.filterwarnings("ignore:DStream is deprecated:FutureWarning")

NAMES = workloads.NEXMARK_NAMES
TABLES = {"nexmark_q3": ("persons", "auctions"), "nexmark_q4": ("auctions", "bids"),
          "nexmark_q8": ("persons", "auctions")}
"""The tables of the queries that read other tables than the bids."""
REASONS = ("bad_utf8", "bad_json", "missing_field", "bad_timestamp")

SHORT = {"records": 6_000, "first_event_rate": 200, "lateness_margin_ms": 4_900, "too_late_fraction": 0.005,
         "seed": 11}
"""A short messy stream: 30 s of event time, malformed, late and too-late records, two q7 windows."""

FAST = {"records": 2_000, "first_event_rate": 1_000, "malformed_fraction": 0.02, "late_fraction": 0.05,
        "lateness_margin_ms": 4_900, "seed": 11}
"""The default tier's stream, for the queries without event time: 2 s, malformed and out-of-order records, a batch
or two per engine."""

FAST_NAMES = {"legacy": ("nexmark_q0", "nexmark_q1", "nexmark_q2", "nexmark_q12"),
              "modern": ("nexmark_q1", "nexmark_q12")}
"""The default tier's queries per engine; the event-time ones (q5, q7: a dozen stateful batches at the least) and
modern's q0 and q2 run in the slow tier. Legacy runs its four in one context; modern needs a run per query (see
``query_run``), so the default tier runs two there: q1, the parse and a projection with arithmetic, and q12, the
processing-time windows (both engines: the only query whose windows are the engine's own clock, its rows compared
summed per bidder, and the legacy run waiting for its last window)."""

FULL = {"records": 20_000, "first_event_rate": 500, "lateness_margin_ms": 4_000, "seed": 11}
"""The slow tier's: ``dmk compare``'s default size and rate (40 s of event time)."""


def _spec(profile: str, layout: str, size: dict) -> NexmarkSpec:
    return NexmarkSpec.from_profile(profile, layout=layout, **size)


# -- specs, routing, parsing (no JVM) ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_nexmark_query_has_a_spec_and_both_builders(name: str) -> None:
    import importlib

    spec = workloads.get(name)
    assert spec.name == name and spec.parse == "nexmark" and spec.inputs == TABLES.get(name, ("bids",))
    for engine in ("legacy", "modern"):
        module = importlib.import_module(f"{engine}.workloads.{name}")
        assert callable(module.build)
    assert name in workloads.NEXMARK_NAMES and name not in workloads.NAMES


def test_an_unknown_workload_lists_the_nexmark_queries_too() -> None:
    listed = ("nexmark_q0, nexmark_q1, nexmark_q2, nexmark_q3, nexmark_q4, nexmark_q5, nexmark_q7, nexmark_q8, "
              "nexmark_q11, nexmark_q12")
    with pytest.raises(ConfigError, match=listed):
        workloads.get("nexmark_q99")


def test_dmk_compare_takes_a_built_in_name_with_hyphens() -> None:
    from compare.cli.runs import _workload_name

    assert _workload_name("nexmark-q4") == "nexmark_q4" and _workload_name("running-counts") == "running_counts"
    assert _workload_name("nexmark_q4") == "nexmark_q4"
    assert _workload_name("my-jobs.q:SPEC") == "my-jobs.q:SPEC" and _workload_name("nexmark-q99") == "nexmark-q99"


def test_a_nexmark_query_reads_its_table_or_the_one_topic_input() -> None:
    spec = workloads.get("nexmark_q1")
    spec.check_inputs({"nexmark": "t"})
    spec.check_inputs({"bids": "t"})
    with pytest.raises(ConfigError, match=r"no topic given for \['bids'\]"):
        spec.check_inputs({"persons": "t"})


def test_the_router_sends_a_query_only_the_tables_it_reads() -> None:
    spec = workloads.get("nexmark_q0")
    one = generate_nexmark(NexmarkSpec(records=500, seed=2))
    three = generate_nexmark(NexmarkSpec(records=500, seed=2, layout="three"))
    assert set(spec.route(one)) == {"nexmark"}
    routed = route_inputs([spec], three)
    assert set(routed["topic"]) == {"bids"}
    assert routed["seq"].tolist() == three.loc[three["topic"] == "bids", "seq"].tolist()
    assert len(route_inputs([spec], one)) == len(one)
    joins = route_inputs([spec, workloads.get("nexmark_q8"), workloads.get("nexmark_q3")], three)
    assert joins["seq"].tolist() == three["seq"].tolist() and joins["topic"].tolist() == three["topic"].tolist()
    assert set(workloads.get("nexmark_q3").route(three).dropna()) == {"persons", "auctions"}


@pytest.mark.parametrize("layout", ["one", "three"])
def test_both_engines_parse_as_parse_nexmark_decides(layout: str) -> None:
    """Every record of a messy stream: the legacy parse and the modern UDF's function give parse_nexmark's verdict,
    and a valid bid carries the fields the builders read."""
    import pyarrow as pa

    from legacy.workloads import parse_nexmark_record
    from modern.workloads import _parse_nexmark_udf

    spec = _spec("messy", layout, SHORT)
    frame = generate_nexmark(spec)
    types = [TABLE_TYPES[t] for t in frame["topic"]] if layout == "three" else [None] * len(frame)
    expected = [parse_nexmark(v, t) for v, t in zip(frame["value"], types, strict=True)]
    legacy = [parse_nexmark_record(t, ("x", 0, i, 7, v)) for i, (v, t) in enumerate(zip(frame["value"], types,
                                                                                        strict=True))]
    assert [None if ok else got[3] for ok, got in legacy] == [reason for _, reason in expected]
    bid = next(got for ok, got in legacy if ok and got["type"] == "bid")
    assert bid["event_time"] == bid["dateTime"] and (bid["kafka_ts"], bid["topic"]) == (7, "x")

    topics = frame["topic"].astype(object).tolist() if layout == "three" else ["nexmark"] * len(frame)
    topic_types = dict(TABLE_TYPES) if layout == "three" else None
    parsed = _parse_nexmark_udf("bid", topic_types, None)(
        pa.array(topics), pa.array(np.zeros(len(frame), np.int32)), pa.array(np.arange(len(frame))),
        pa.array(frame["value"].tolist(), pa.binary()),
    ).to_pylist()
    assert [p["reason"] for p in parsed] == [reason for _, reason in expected]
    bids = [p for p in parsed if p["type"] == "bid"]
    if layout == "three":
        valid_bids = [e for (e, _), t in zip(expected, types, strict=True) if e is not None and t == "bid"]
    else:
        valid_bids = [e for e, _ in expected if e is not None and e["type"] == "bid"]
    assert [(p["auction"], p["price"], p["dateTime"]) for p in bids] == [
        (e["auction"], e["price"], e["dateTime"]) for e in valid_bids]
    assert all(p["auction"] is None for p in parsed if p["type"] not in (None, "bid"))


_ODD_BIDS = [
    b'{"auction":1000,"bidder":1001,"price":57,"dateTime":5,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":123456789012345678901,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":9223372036854775807,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":-9223372036854775809,"price":57,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":57,"dateTime":123456789012345678901,"extra":"x"}',
    b'{"bidder":1001, "auction":1000,"price":57,"dateTime":1436918400000,"extra":"\\u00e9"}',
    b'{"auction":1000,"bidder":1001,"price":57,"price":58,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":5.7,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":true,"dateTime":1436918400000,"extra":"x"}',
    b'{"auction":1000,"bidder":1001,"price":57,"dateTime":1436918400000,"extra":"\xff"}',
    b'{"auction":1000,"bidder":1001,"price":57,"dateTime":1436918400000}',
]
"""Bids at the edges of the parse: integers beyond a long (a crash of the modern parse before the range check), a
far dateTime, escapes, duplicate keys, floats, booleans, invalid UTF-8, a missing field."""


@pytest.mark.parametrize("layout", ["one", "three"])
def test_the_modern_parse_decides_as_parse_nexmark_in_spark(spark, layout: str) -> None:
    """with_nexmark in Spark: every record of a messy stream and the odd bids get parse_nexmark's verdict and
    fields, for each table's type, and no record fails the query."""
    from modern.workloads import with_nexmark

    frame = generate_nexmark(_spec("messy", layout, SHORT))
    odd = [b'{"type":"bid",' + v[1:] for v in _ODD_BIDS] if layout == "one" else _ODD_BIDS
    values = [*frame["value"].tolist(), *odd]
    topics = ([str(t) for t in frame["topic"]] + ["bids"] * len(odd)) if layout == "three" else ["n"] * len(values)
    topic_types = dict(TABLE_TYPES) if layout == "three" else None
    types = [TABLE_TYPES[t] for t in topics] if layout == "three" else [None] * len(values)
    expected = [parse_nexmark(v, t) for v, t in zip(values, types, strict=True)]
    assert [reason for _, reason in expected[-len(odd):]] == [
        "bad_timestamp", "missing_field", None, "missing_field", "bad_timestamp", None, None, "missing_field",
        "missing_field", "bad_utf8", "missing_field"]
    rows = spark.createDataFrame(
        [(t, 0, i, bytearray(v)) for i, (t, v) in enumerate(zip(topics, values, strict=True))],
        "topic string, partition int, offset long, value binary",
    )
    for kind, fields in (("bid", ("auction", "bidder", "price", "dateTime", "extra")), ("person", ("id", "name"))):
        got = with_nexmark(rows, kind, topic_types).orderBy("offset").select("p").collect()
        assert [g.p.reason for g in got] == [reason for _, reason in expected]
        assert [g.p.type for g in got] == [
            None if e is None else (t or e["type"]) for (e, _), t in zip(expected, types, strict=True)]
        assert [tuple(getattr(g.p, f) for f in fields) for g in got] == [
            tuple(e[f] for f in fields) if e is not None and (t or e["type"]) == kind else (None,) * len(fields)
            for (e, _), t in zip(expected, types, strict=True)]


@pytest.mark.parametrize("layout", ["one", "three"])
def test_the_oracles_dead_letter_the_malformed_records_the_query_reads(layout: str) -> None:
    spec = _spec("messy", layout, SHORT)
    frame = generate_nexmark(spec)
    for name in NAMES:
        read = frame if layout == "one" else frame[frame["topic"].isin(TABLES.get(name, ("bids",)))]
        malformed = read[read["kind"].isin(REASONS)]
        assert len(malformed) > 0
        result = workloads.get(name).oracle(frame, spec)
        assert result.dead_letters["seq"].tolist() == malformed["seq"].tolist()
        assert result.dead_letters["reason"].tolist() == malformed["kind"].tolist()
        assert list(result.rows.columns) == [*workloads.get(name).key_columns, *workloads.get(name).value_columns]
        # q11: no bidder's session closes in these 30 s (the hot bidders bid on); its rows are checked on FULL.
        assert len(result.rows) > 0 or name == "nexmark_q11"


def test_the_oracles_agree_with_each_other_and_with_the_layouts() -> None:
    one, three = _spec("messy", "one", FULL), _spec("messy", "three", FULL)
    frames = {"one": _generated(one), "three": _generated(three)}
    rows = {name: workloads.get(name).oracle(frames["one"], one).rows for name in NAMES}
    for name in NAMES:  # the same events in either layout: the same rows
        pd.testing.assert_frame_equal(rows[name], workloads.get(name).oracle(frames["three"], three).rows)
    q0 = rows["nexmark_q0"]
    assert len(q0) == read_bids(frames["one"], one)[0].shape[0] == (frames["three"]["topic"] == "bids").sum() - len(
        workloads.get("nexmark_q0").oracle(frames["three"], three).dead_letters)
    # q1: q0 with the price converted, the product of doubles.
    q1 = rows["nexmark_q1"].sort_values(["auction", "bidder", "dateTime"]).reset_index(drop=True)
    base = q0.sort_values(["auction", "bidder", "dateTime"]).reset_index(drop=True)
    assert (q1["price"].to_numpy() == base["price"].to_numpy(dtype=float) * 0.908).all()
    # q2: exactly q0's bids on auctions 123 divides.
    chosen = q0[q0["auction"] % 123 == 0][["auction", "price"]].sort_values(["auction", "price"])
    pd.testing.assert_frame_equal(rows["nexmark_q2"], chosen.reset_index(drop=True))
    # q7: each window's bid has the highest price of the bids the watermark let into that window.
    q7 = workloads.get("nexmark_q7").oracle(frames["one"], one)
    assert len(q7.late_dropped) > 0
    dropped = set(q7.late_dropped["seq"])
    bids = read_bids(frames["one"], one)[0]
    bids = bids[~bids["seq"].isin(dropped)]
    highest = bids.groupby(bids["dateTime"] - bids["dateTime"] % 10_000)["price"].max()
    assert len(q7.rows) == 3
    assert q7.rows.set_index("window_start")["price"].to_dict() == highest.loc[q7.rows["window_start"]].to_dict()
    kinds = frames["one"].set_index("seq").loc[q7.late_dropped["seq"], "kind"]
    assert set(kinds) == {"too_late"}
    # q5: per window, the auctions whose count of the bids let into that window is the window's highest.
    q5 = workloads.get("nexmark_q5").oracle(frames["one"], one)
    all_bids = read_bids(frames["one"], one)[0]
    placed = workloads.window_starts(all_bids["dateTime"], 10_000, 5_000).join(all_bids[["seq", "auction"]])
    dropped = set(zip(q5.late_dropped["seq"], q5.late_dropped["window_start"], strict=True))
    placed = placed[[(s, w) not in dropped for s, w in zip(placed["seq"], placed["window_start"], strict=True)]]
    for start, window in q5.rows.groupby("window_start"):
        counts = placed[placed["window_start"] == start].groupby("auction").size()
        assert sorted(window["auction"]) == sorted(counts[counts == counts.max()].index)
        assert set(window["count"]) == {counts.max()}
    assert set(frames["one"].set_index("seq").loc[q5.late_dropped["seq"], "kind"]) == {"too_late"}
    # q12: q0's bids counted per bidder, whatever windows they fell in.
    per_bidder = q0.groupby("bidder").size()
    q12 = rows["nexmark_q12"].set_index("bidder")["bid_count"]
    assert q12.to_dict() == per_bidder.to_dict() and q12.sum() == len(q0)


def test_q12_s_rows_are_compared_summed_over_its_windows() -> None:
    """final_result of a query with ``summed_over``: the last row per key and window (update mode), summed per key
    over the windows; the windows are left out, so any split of a bidder's bids over windows compares the same."""
    spec = workloads.get("nexmark_q12")
    assert spec.columns == ("bidder", "window_start", "bid_count", "last_input_ts")
    rows = pd.DataFrame({
        "bidder": [7, 7, 7, 8, 7], "window_start": [0, 0, 10_000, 10_000, 10_000],
        "bid_count": [2, 5, 1, 4, 3], "last_input_ts": [1, 2, 3, 4, 5], "batch": [1, 2, 2, 3, 3],
    })
    got = workloads.final_result(spec, rows)
    assert got.to_dict("list") == {"bidder": [7, 8], "bid_count": [8, 4]}  # 7: 5 in [0, 10 s), 3 in [10 s, 20 s)
    elsewhere = rows.assign(window_start=[0, 0, 20_000, 30_000, 20_000])
    pd.testing.assert_frame_equal(workloads.final_result(spec, elsewhere), got)
    assert workloads.final_result(spec, rows.iloc[:0]).columns.tolist() == ["bidder", "bid_count"]


def test_the_engines_numbers_are_the_oracles() -> None:
    from kit import semantics
    from kit.workloads import (
        nexmark_q1, nexmark_q2, nexmark_q3, nexmark_q4, nexmark_q5, nexmark_q7, nexmark_q8, nexmark_q11, nexmark_q12,
    )

    assert semantics.NEXMARK_DOLLARS_TO_EUROS == nexmark_q1.DOLLARS_TO_EUROS == 0.908
    assert semantics.NEXMARK_AUCTION_SKIP == nexmark_q2.AUCTION_SKIP == 123
    assert semantics.NEXMARK_Q7_WINDOW_MS == nexmark_q7.WINDOW_MS == 10_000
    assert semantics.NEXMARK_Q5_WINDOW == (nexmark_q5.WINDOW_MS, nexmark_q5.SLIDE_MS) == (10_000, 5_000)
    assert semantics.NEXMARK_Q4_WINDOW == (nexmark_q4.WINDOW_MS, nexmark_q4.SLIDE_MS) == (10_000, 5_000)
    assert semantics.WATERMARK_DELAY_MS == nexmark_q5.WATERMARK_DELAY_MS == nexmark_q5.SPEC.watermark_delay_ms
    assert semantics.WATERMARK_DELAY_MS == nexmark_q7.WATERMARK_DELAY_MS == nexmark_q7.SPEC.watermark_delay_ms
    assert semantics.NEXMARK_Q3_STATES == nexmark_q3.STATES == ("OR", "ID", "CA")
    assert semantics.NEXMARK_Q3_CATEGORY == nexmark_q3.CATEGORY == 10
    assert semantics.NEXMARK_Q8_WINDOW_MS == nexmark_q8.WINDOW_MS == 10_000
    assert semantics.NEXMARK_Q11_GAP_MS == nexmark_q11.GAP_MS == 10_000
    assert semantics.NEXMARK_Q12_WINDOW_MS == nexmark_q12.WINDOW_MS == nexmark_q12.SPEC.legacy[0].settle_ms == 10_000
    for query in (nexmark_q4, nexmark_q8, nexmark_q11):
        assert semantics.WATERMARK_DELAY_MS == query.WATERMARK_DELAY_MS == query.SPEC.watermark_delay_ms
    assert nexmark_q3.SPEC.watermark_delay_ms is None


_STEPS = {"nexmark_q3": "_join", "nexmark_q4": "_winning_bids", "nexmark_q5": "_hot_items", "nexmark_q7": "_highest", "nexmark_q8": "_pairs",
          "nexmark_q11": "_sessions"}
"""Each stateful legacy query's event_time_operator step."""

_THEN = {"nexmark_q4": "_averages"}
"""The second stage of a chained legacy query (``event_time_operator``'s ``then``), run on the first's rows with the
same watermark."""


def _legacy_events(frame: pd.DataFrame, spec: NexmarkSpec, name: str) -> list[dict]:
    """The valid events a legacy query's step is given, in replay order, as the legacy parse makes them."""
    from kit.workloads._nexmark import read_tables

    tables, _ = read_tables(frame, spec, TABLES.get(name, ("bids",)))
    events = []
    for table, rows in tables.items():
        kind = TABLE_TYPES[table]
        events += [{**row, "type": kind, "event_time": row["dateTime"], "kafka_ts": 0}
                   for row in rows.drop(columns="prior_max_ms").to_dict("records")]
    return sorted(events, key=lambda e: e["seq"])


_STEP_BATCHES = {"nexmark_q3": (1, 250, 1_000), "nexmark_q4": (1, 250, 1_000), "nexmark_q5": (1, 250, 1_000), "nexmark_q7": (1, 250, 1_000),
                 "nexmark_q8": (1, 15, 60), "nexmark_q11": (250, 1_000)}
"""Events per driven batch. q8 reads persons and auctions only, 1 record in 16 of the stream: 60 of them are about
as much event time (2 s) as 1,000 bids, the engines' batches; a batch of 1,000 would span the whole stream, and its
first batch, without a watermark, would admit what the oracle drops. q11 skips batches of one bid (18,000 calls
over every open session: seconds of the default tier for nothing the others do not show)."""


@functools.cache
def _generated(spec: NexmarkSpec) -> pd.DataFrame:
    return generate_nexmark(spec)


@pytest.mark.parametrize(("name", "batch"), [(name, batch) for name in _STEPS for batch in _STEP_BATCHES[name]])
def test_the_legacy_event_time_steps_give_the_oracle_s_rows_and_late_drops(name: str, batch: int) -> None:
    """The legacy steps driven as event_time_operator drives them (a batch's watermark from the batches before it:
    the largest dateTime, or for the joins the smaller of both inputs' largest), without Spark: the oracle's rows
    and late drops (with their window start, None for q11's sessions), for batches of one record and of many."""
    import importlib

    from legacy.workloads import NO_WATERMARK

    module = importlib.import_module(f"legacy.workloads.{name}")
    step = getattr(module, _STEPS[name])
    spec = _spec("messy", "one", FULL)
    frame = _generated(spec)
    events = _legacy_events(frame, spec, name)
    if name == "nexmark_q3":  # the build's filters, before the step
        events = [e for e in events if (module._local if e["type"] == "person" else module._in_category)(e)]
    sides = 2 if name == "nexmark_q8" else 1
    then = getattr(module, _THEN[name]) if name in _THEN else None
    state, then_state, rows, late, seen = None, None, [], [], [NO_WATERMARK] * sides
    for i in range(0, len(events) + batch, batch):  # the last round: no events, the final watermark
        chunk = events[i:i + batch]
        watermark = NO_WATERMARK if min(seen) == NO_WATERMARK else min(seen) - 5_000
        state, out, dropped = step(state, chunk, watermark)
        if then is not None:
            then_state, out, more = then(then_state, out, watermark)
            dropped += more
        rows += out
        late += [(int(event["seq"]), None if detail is None else int(detail)) for event, detail in dropped]
        for event in chunk:
            side = 0 if sides == 1 or event["type"] == "person" else 1
            seen[side] = max(seen[side], event["dateTime"])
    query = workloads.get(name)
    expected = query.oracle(frame, spec)
    got = pd.DataFrame([r[:-1] for r in rows], columns=[*query.key_columns, *query.value_columns])
    assert_outputs_equal(expected.rows, workloads.sorted_rows(query, got), keys=query.key_columns,
                         values=query.value_columns)
    assert len(expected.rows) > 0
    seqs = expected.late_dropped["seq"].astype(int).tolist()
    starts = expected.late_dropped.get("window_start", pd.Series([None] * len(seqs))).tolist()
    expected_late = [(seq, None if start is None else int(start)) for seq, start in zip(seqs, starts, strict=True)]
    assert sorted(late, key=str) == sorted(expected_late, key=str)
    assert (len(late) > 0) == (query.watermark_delay_ms is not None)


def _parsed_records(frame: pd.DataFrame, tables: tuple[str, ...]) -> Iterator[tuple[int, str, dict]]:
    """``(seq, table, event)`` of each valid record of ``tables`` (three-topic layout) in replay order, read with
    parse_nexmark (the engines' parser, not the oracle's)."""
    for seq, topic, value in zip(frame["seq"], frame["topic"], frame["value"], strict=True):
        if topic in tables:
            event, _ = parse_nexmark(value, TABLE_TYPES[topic])
            if event is not None:
                yield seq, topic, event


def test_the_join_oracles_against_a_record_by_record_reading() -> None:
    """q3 and q8 recomputed from the records one by one with parse_nexmark (the engines' parser, not the oracle's):
    q3 every qualifying pair whatever the order; q8 the pairs of one window whose rows both arrived before the
    min-of-inputs watermark passed their window's end."""
    spec = _spec("messy", "three", FULL)
    frame = _generated(spec)
    persons: dict[int, dict] = {}
    auctions: list[dict] = []
    watermark_seen = {"person": -(2**62), "auction": -(2**62)}
    late_seqs = []
    for seq, topic, event in _parsed_records(frame, ("persons", "auctions")):
        kind = TABLE_TYPES[topic]
        seen = min(watermark_seen.values())
        start = event["dateTime"] - event["dateTime"] % 10_000
        event["late"] = seen != -(2**62) and start + 10_000 <= seen - 5_000
        late_seqs += [seq] if event["late"] else []
        watermark_seen[kind] = max(watermark_seen[kind], event["dateTime"])
        if kind == "person":
            persons[event["id"]] = event
        else:
            auctions.append(event)
    q3 = sorted((a["id"], persons[a["seller"]]["name"], persons[a["seller"]]["city"], persons[a["seller"]]["state"])
                for a in auctions if a["category"] == 10 and a["seller"] in persons
                and persons[a["seller"]]["state"] in ("OR", "ID", "CA"))
    assert [tuple(r) for r in workloads.get("nexmark_q3").oracle(frame, spec).rows.itertuples(index=False)] == q3
    assert len(q3) > 50

    def window(event: dict) -> int:
        return event["dateTime"] - event["dateTime"] % 10_000

    q8 = sorted((a["seller"], a["id"], persons[a["seller"]]["name"], a["reserve"], window(a)) for a in auctions
                if a["seller"] in persons and not a["late"] and not persons[a["seller"]]["late"]
                and window(a) == window(persons[a["seller"]]))
    expected = workloads.get("nexmark_q8").oracle(frame, spec)
    assert [tuple(int(v) if not isinstance(v, str) else v for v in r)
            for r in expected.rows.itertuples(index=False)] == q8
    assert sorted(expected.late_dropped["seq"]) == sorted(late_seqs) and len(late_seqs) > 0
    assert set(frame.set_index("seq").loc[late_seqs, "kind"]) == {"too_late"}
    assert len(q8) > 100


def test_the_q4_oracle_against_a_record_by_record_reading() -> None:
    """q4 recomputed from the records one by one with parse_nexmark: an auction's winner is its highest admitted bid
    in ``[dateTime, expires)`` at or above the reserve; the auctions closed by the final watermark with a winner,
    averaged per category over the 10 s windows of their closing times (every 5 s) that the watermark closed."""
    spec = _spec("messy", "three", FULL)
    frame = _generated(spec)
    auctions: dict[int, dict] = {}
    bids: list[dict] = []
    late_seqs, newest = [], -(2**62)
    for seq, topic, event in _parsed_records(frame, ("auctions", "bids")):
        if newest != -(2**62) and event["dateTime"] <= newest - 5_000:
            late_seqs.append(seq)
            continue
        newest = max(newest, event["dateTime"])
        if topic == "auctions":
            auctions[event["id"]] = event
        else:
            bids.append(event)
    final_watermark = newest - 5_000
    best: dict[int, int] = {}
    for bid in bids:
        auction = auctions.get(bid["auction"])
        if (auction is not None and auction["dateTime"] <= bid["dateTime"] < auction["expires"]
                and bid["price"] >= auction["reserve"]):
            best[bid["auction"]] = max(best.get(bid["auction"], 0), bid["price"])
    windows: dict[tuple[int, int], list[int]] = {}
    for auction_id, price in best.items():
        auction = auctions[auction_id]
        if auction["expires"] > final_watermark:
            continue
        for start in (auction["expires"] - auction["expires"] % 5_000 - k * 5_000 for k in (0, 1)):
            if start + 10_000 <= final_watermark:
                windows.setdefault((auction["category"], start), []).append(price)
    expected = sorted((category, start, len(prices), sum(prices), sum(prices) / len(prices))
                      for (category, start), prices in windows.items())
    result = workloads.get("nexmark_q4").oracle(frame, spec)
    assert [tuple(r) for r in result.rows.itertuples(index=False)] == expected
    assert len(expected) >= 20 and sum(row[2] for row in expected) > 500
    assert sorted(result.late_dropped["seq"]) == sorted(late_seqs) and len(late_seqs) > 0
    assert set(frame.set_index("seq").loc[late_seqs, "kind"]) == {"too_late"}


def test_the_session_oracle_counts_every_admitted_bid_of_a_closed_session_once() -> None:
    """q11: every bid the oracle admits is in exactly one of its sessions or in a session still open at the end; no
    two sessions of a bidder overlap within the gap; the late drops are the too-late records."""
    spec = _spec("messy", "one", FULL)
    frame = _generated(spec)
    result = workloads.get("nexmark_q11").oracle(frame, spec)
    bids = read_bids(frame, spec)[0]
    admitted = bids[~bids["seq"].isin(set(result.late_dropped["seq"]))]
    rows = result.rows
    inside = 0
    for row in rows.itertuples(index=False):
        mine = admitted[(admitted["bidder"] == row.bidder) & admitted["dateTime"].between(
            row.session_start, row.session_end - 10_000)]
        assert len(mine) == row.bid_count and mine["dateTime"].min() == row.session_start
        assert mine["dateTime"].max() + 10_000 == row.session_end
        inside += len(mine)
    for _, sessions in rows.groupby("bidder"):
        starts, ends = sessions["session_start"].to_numpy(), sessions["session_end"].to_numpy()
        assert (starts[1:] > ends[:-1]).all()
    assert inside == rows["bid_count"].sum() and inside > 1_000
    assert set(frame.set_index("seq").loc[result.late_dropped["seq"], "kind"]) == {"too_late"}
    assert int(rows["session_end"].max()) <= int(bids["dateTime"].max()) - 5_000


def test_a_driver_config_carries_a_nexmark_spec_across_the_process_boundary() -> None:
    spec = _spec("messy", "three", SHORT)
    config = DriverConfig("legacy", "b:9092", {"bids": "t"}, "out", "ckpt", dataset=spec, jobs=(("nexmark_q1",
                                                                                                  "default"),))
    back = DriverConfig.from_json(config.to_json())
    assert back.dataset == spec and isinstance(back.dataset, NexmarkSpec)
    assert json.loads(config.to_json())["dataset"]["generator"] == "nexmark"
    kit = DatasetSpec.from_profile("messy", records=20_000)
    assert spec_from_dict(json.loads(DriverConfig("legacy", "b", {}, "o", "c", dataset=kit).to_json())["dataset"]) == kit


def test_a_kit_dataset_spec_becomes_the_nexmark_stream_of_its_size_rate_and_messiness() -> None:
    kit = DatasetSpec.from_profile("messy", records=20_000, events_per_second=500, lateness_margin_ms=4_000, seed=3)
    spec = NexmarkSpec.like(kit)
    assert (spec.records, spec.seed, spec.first_event_rate, spec.events_per_second) == (20_000, 3, 500, 500)
    assert (spec.late_fraction, spec.too_late_fraction, spec.malformed_fraction) == (0.05, 0.01, 0.01)
    assert spec.lateness_margin_ms == 4_000
    with pytest.raises(ConfigError, match='"generator": "nexmark"; got generator None'):
        NexmarkSpec.from_dict({"records": 10})


def test_dmk_compare_s_dataset_for_a_nexmark_query(tmp_path) -> None:
    """Generated from the options (a Nexmark stream of their size), or a file of either generator, refused when it is
    the other one's."""
    from compare.run import _dataset
    from compare.settings import CompareSettings
    from kit.dataset import generate_to_file, read_manifest
    from kit.nexmark import nexmark_to_file

    kit = DatasetSpec.from_profile("messy", records=20_000, events_per_second=500, lateness_margin_ms=4_000, seed=3)
    spec, frame, path = _dataset(CompareSettings("nexmark_q1", out_dir=tmp_path / "a", dataset=kit), tmp_path)
    assert spec == NexmarkSpec.like(kit) and len(frame) == 20_000
    assert read_manifest(path)["spec"]["generator"] == "nexmark"

    nexmark_file, kit_file = tmp_path / "n.parquet", tmp_path / "k.parquet"
    nexmark_to_file(NexmarkSpec(records=1_000, layout="three"), nexmark_file)
    generate_to_file(DatasetSpec(records=1_000), kit_file)
    spec, frame, _ = _dataset(CompareSettings("nexmark_q0", out_dir=tmp_path / "b", dataset_file=str(nexmark_file)),
                              tmp_path)
    assert spec == NexmarkSpec(records=1_000, layout="three") and set(frame["topic"]) == {"persons", "auctions", "bids"}
    with pytest.raises(ConfigError, match="reads a Nexmark stream, and .* holds the kit's events"):
        _dataset(CompareSettings("nexmark_q0", out_dir=tmp_path / "c", dataset_file=str(kit_file)), tmp_path)
    with pytest.raises(ConfigError, match="written by the 'nexmark' generator"):
        _dataset(CompareSettings("running_counts", out_dir=tmp_path / "d", dataset_file=str(nexmark_file)), tmp_path)


# -- engine runs -------------------------------------------------------------------------------------------------

_RUNS: dict[tuple[str, str, str], tuple[NexmarkSpec, pd.DataFrame, dict[str, EngineOutputs]]] = {}


@pytest.fixture
def query_run(bootstrap_servers, spark, tmp_path_factory):
    """Run (once per session) the Nexmark queries on one engine, profile and layout; shared by the tests.

    Legacy: one run, a StreamingContext hosting every query. Modern: a run per query, as
    tests/test_mutants.py's modern runs do: several Python sources starting at once failed to connect back
    ("Python worker failed to connect back", Spark's fixed 10 s) at load 10-15 here, every time.
    Returns the spec, the frame and each query's run.
    """

    def get(engine: str, profile: str, layout: str, name: str | None = None,
            ) -> tuple[NexmarkSpec, pd.DataFrame, dict[str, EngineOutputs]]:
        """The runs of every query (``name`` None) or of the run holding ``name`` (modern: that query's alone)."""
        key = (engine, profile, layout)
        if key not in _RUNS:
            spec = NexmarkSpec(layout=layout, **FAST) if profile == "fast" else _spec(profile, layout, FULL)
            _RUNS[key] = (spec, generate_nexmark(spec), {})
        spec, frame, runs = _RUNS[key]
        names = FAST_NAMES[engine] if profile == "fast" else NAMES
        groups = [names] if engine == "legacy" else [(one,) for one in names]
        for group in groups:
            if (name is None or name in group) and group[0] not in runs:
                workdir = tmp_path_factory.mktemp(f"nexmark-{engine}-{profile}-{layout}")
                run = run_engine(engine, tuple((one, "default") for one in group), spec, frame,
                                 bootstrap_servers=bootstrap_servers, spark=spark, workdir=workdir)
                runs |= dict.fromkeys(group, run)
        return spec, frame, runs

    return get


RUNS = [
    pytest.param("legacy", "fast", "one", id="legacy-fast-one"),
    pytest.param("modern", "fast", "three", id="modern-fast-three"),
    pytest.param("legacy", "messy", "three", id="legacy-messy-three", marks=pytest.mark.slow),
    pytest.param("modern", "messy", "three", id="modern-messy-three", marks=pytest.mark.slow),
    pytest.param("legacy", "clean", "one", id="legacy-clean-one", marks=pytest.mark.slow),
    pytest.param("modern", "clean", "one", id="modern-clean-one", marks=pytest.mark.slow),
]


QUERY_CASES = [
    pytest.param(*run.values, name, id=f"{run.id}-{name}", marks=run.marks)
    for run in RUNS for name in (FAST_NAMES[run.values[0]] if run.values[1] == "fast" else NAMES)
]


@pytest.mark.parametrize(("engine", "profile", "layout", "name"), QUERY_CASES)
def test_the_query_equals_its_oracle(query_run, engine: str, profile: str, layout: str, name: str) -> None:
    spec, frame, runs = query_run(engine, profile, layout, name)
    run = runs[name]
    query = workloads.get(name)
    expected = query.oracle(frame, spec)
    got = workloads.final_result(query, run.rows(name))
    assert len(expected.rows) > 0
    assert_outputs_equal(expected.rows, got, keys=query.key_columns, values=query.value_columns)
    if engine == "legacy" and query.watermark_delay_ms is not None:
        late = run.late(name)
        columns = list(expected.late_dropped.columns)  # seq, and window_start for the windowed queries
        got_late = pd.DataFrame({"seq": run.seqs_of(late)})
        if "window_start" in columns:
            got_late["window_start"] = late["detail"].astype("int64").to_numpy()
        pd.testing.assert_frame_equal(
            got_late.sort_values(columns).reset_index(drop=True),
            expected.late_dropped.sort_values(columns).reset_index(drop=True), check_dtype=False,
        )
        assert (len(expected.late_dropped) > 0) == (profile != "clean")


@pytest.mark.parametrize(("engine", "profile", "layout"), RUNS)
def test_the_dead_letters_are_exactly_the_malformed_records_read(query_run, engine: str, profile: str,
                                                                 layout: str) -> None:
    spec, frame, runs = query_run(engine, profile, layout)
    for run in {id(run): run for run in runs.values()}.values():
        # The malformed records of every input the run's queries read (the bids' and the persons' and auctions'
        # topics in the three-topic layout), each once.
        names = [name for name, _ in run.jobs]
        expected = pd.concat([workloads.get(name).oracle(frame, spec).dead_letters for name in names])
        expected = expected.drop_duplicates("seq")
        assert (len(expected) > 0) == (profile != "clean")
        dead = run.dead_letters()
        got = pd.DataFrame({"seq": run.seqs_of(dead), "reason": dead["reason"].to_numpy()})
        assert not got.duplicated(["seq"]).any(), "a malformed record was dead-lettered twice"
        pd.testing.assert_frame_equal(got.sort_values("seq").reset_index(drop=True),
                                      expected.sort_values("seq").reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize(("engine", "profile", "layout"), RUNS)
def test_q12_s_windows_are_the_engine_s_processing_time(query_run, engine: str, profile: str, layout: str) -> None:
    """q12's rows as written: windows of the engine's clock, not of the bids' event time (2015, the generator's base
    time), aligned as each engine aligns them, and each emitted as the engine emits: legacy once, when its window
    ends (at the StreamingContext's own phase of 10 s); modern every micro-batch that changed it, the count only
    growing, its batch timestamp after every bid it holds was produced."""
    spec, frame, runs = query_run(engine, profile, layout, "nexmark_q12")
    rows = runs["nexmark_q12"].rows("nexmark_q12")
    assert len(rows) > 0
    starts, ends = rows["window_start"].to_numpy(), rows["window_start"].to_numpy() + 10_000
    assert starts.min() > read_bids(frame, spec)[0]["dateTime"].max() + 86_400_000 * 365
    produced = rows["last_input_ts"].to_numpy()
    assert (ends > produced.min()).all()  # no window ends before the run's first bid was produced
    if engine == "legacy":
        assert len(set(starts % 10_000)) == 1  # the context's phase, one for every window
        assert not rows.duplicated(["bidder", "window_start"]).any()
        assert (rows["emitted_at"].to_numpy() >= ends).all()  # emitted by the batch at the window's end, or later
    else:
        assert set(starts % 10_000) == {0}  # window() over current_timestamp(): epoch multiples
        counts = rows.sort_values("batch", kind="stable").groupby(["bidder", "window_start"])["bid_count"]
        assert (counts.diff().dropna() > 0).all()
        assert (produced < ends).all()  # Kafka timestamp <= offsets read <= batch timestamp < window end


@pytest.mark.slow
def test_q8_in_a_backlog_equals_its_oracle_on_both_engines(bootstrap_servers: str, tmp_path) -> None:
    """``dmk compare --burst``: every batch of both engines is a backlog. q8 reads persons and auctions, one record
    in 16: capped at the whole stream's batch, a batch held many seconds of them and admitted too-late auctions
    (legacy 13 and modern 15 rows the oracle drops, before each input was capped at its share)."""
    from compare.cli import main
    from kit.nexmark import nexmark_to_file

    data = tmp_path / "n3.parquet"
    nexmark_to_file(NexmarkSpec.from_profile("messy", layout="three", **FULL), data)
    out = tmp_path / "run"
    code = main(["compare", "nexmark_q8", "--dataset", str(data), "--burst", "--out", str(out),
                 "--bootstrap-servers", bootstrap_servers])
    metrics = json.loads((out / "metrics.json").read_text())
    assert code == 0 and metrics["equivalent"], (out / "report.md").read_text()
    late = metrics["oracle"]["late_dropped"]
    assert late > 0 and metrics["engines"]["legacy"]["late_dropped"] == metrics["engines"]["modern"]["late_dropped"] == late
    for engine in ("legacy", "modern"):
        assert metrics["engines"][engine]["rows_unexpected"] == 0 and metrics["engines"][engine]["rows_missing"] == 0
        assert {(c["part"], c["ok"]) for c in metrics["checks"] if c["engine"] == engine} >= {("rows", True)}
