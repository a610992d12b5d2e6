"""The Nexmark queries (``nexmark_q0``, ``q1``, ``q2``, ``q7``): legacy, modern and the oracle agree exactly.

Unit tests (no JVM, no broker): the specs, the router of both layouts, both engines' Nexmark parse against
:func:`kit.nexmark.parse_nexmark`, the oracles against each other and against the dataset's labels, a driver
config carrying a Nexmark spec.

Engine runs: the default tier runs q0, q1 and q2 in one run per engine on a 2,000-record stream with malformed and
out-of-order records (:data:`FAST`), legacy on the one-topic layout and modern on the three-topic one; the slow tier
runs all four queries, q7 too, on 20,000 records (40 s of event time) of both profiles, messy in the three-topic
layout, clean in the one-topic one, on both engines. Each check: the final rows equal the oracle's, the
dead letters are exactly the malformed records the job read (record and reason), and the legacy q7's late drops are
the oracle's record by record.
"""

from __future__ import annotations

import json

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
REASONS = ("bad_utf8", "bad_json", "missing_field", "bad_timestamp")

SHORT = {"records": 6_000, "first_event_rate": 200, "lateness_margin_ms": 4_900, "too_late_fraction": 0.005,
         "seed": 11}
"""A short messy stream: 30 s of event time, malformed, late and too-late records, two q7 windows."""

FAST = {"records": 2_000, "first_event_rate": 1_000, "malformed_fraction": 0.02, "late_fraction": 0.05,
        "lateness_margin_ms": 4_900, "seed": 11}
"""The default tier's stream, for the queries without event time: 2 s, malformed and out-of-order records, a batch
or two per engine."""

FAST_NAMES = {"legacy": ("nexmark_q0", "nexmark_q1", "nexmark_q2"), "modern": ("nexmark_q1",)}
"""The default tier's queries per engine; the event-time ones (q5, q7: a dozen stateful batches at the least) and
modern's other two run in the slow tier. Legacy runs its three in one context; modern needs a run per query (see
``query_run``), so the default tier runs one there: q1, the parse and a projection with arithmetic."""

FULL = {"records": 20_000, "first_event_rate": 500, "lateness_margin_ms": 4_000, "seed": 11}
"""The slow tier's: ``dmk compare``'s default size and rate (40 s of event time)."""


def _spec(profile: str, layout: str, size: dict) -> NexmarkSpec:
    return NexmarkSpec.from_profile(profile, layout=layout, **size)


# -- specs, routing, parsing (no JVM) ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_nexmark_query_has_a_spec_and_both_builders(name: str) -> None:
    import importlib

    spec = workloads.get(name)
    assert spec.name == name and spec.parse == "nexmark" and spec.inputs == ("bids",)
    for engine in ("legacy", "modern"):
        module = importlib.import_module(f"{engine}.workloads.{name}")
        assert callable(module.build)
    assert name in workloads.NEXMARK_NAMES and name not in workloads.NAMES


def test_an_unknown_workload_lists_the_nexmark_queries_too() -> None:
    with pytest.raises(ConfigError, match="nexmark_q0, nexmark_q1, nexmark_q2, nexmark_q5, nexmark_q7"):
        workloads.get("nexmark_q99")


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


@pytest.mark.parametrize("layout", ["one", "three"])
def test_the_oracles_dead_letter_the_malformed_records_the_query_reads(layout: str) -> None:
    spec = _spec("messy", layout, SHORT)
    frame = generate_nexmark(spec)
    read = frame if layout == "one" else frame[frame["topic"] == "bids"]
    malformed = read[read["kind"].isin(REASONS)]
    assert len(malformed) > 0
    for name in NAMES:
        result = workloads.get(name).oracle(frame, spec)
        assert result.dead_letters["seq"].tolist() == malformed["seq"].tolist()
        assert result.dead_letters["reason"].tolist() == malformed["kind"].tolist()
        assert list(result.rows.columns) == [*workloads.get(name).key_columns, *workloads.get(name).value_columns]
        assert len(result.rows) > 0


def test_the_oracles_agree_with_each_other_and_with_the_layouts() -> None:
    one, three = _spec("messy", "one", FULL), _spec("messy", "three", FULL)
    frames = {"one": generate_nexmark(one), "three": generate_nexmark(three)}
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


def test_the_engines_numbers_are_the_oracles() -> None:
    from kit import semantics
    from kit.workloads import nexmark_q1, nexmark_q2, nexmark_q5, nexmark_q7

    assert semantics.NEXMARK_DOLLARS_TO_EUROS == nexmark_q1.DOLLARS_TO_EUROS == 0.908
    assert semantics.NEXMARK_AUCTION_SKIP == nexmark_q2.AUCTION_SKIP == 123
    assert semantics.NEXMARK_Q7_WINDOW_MS == nexmark_q7.WINDOW_MS == 10_000
    assert semantics.NEXMARK_Q5_WINDOW == (nexmark_q5.WINDOW_MS, nexmark_q5.SLIDE_MS) == (10_000, 5_000)
    assert semantics.WATERMARK_DELAY_MS == nexmark_q5.WATERMARK_DELAY_MS == nexmark_q5.SPEC.watermark_delay_ms
    assert semantics.WATERMARK_DELAY_MS == nexmark_q7.WATERMARK_DELAY_MS == nexmark_q7.SPEC.watermark_delay_ms


@pytest.mark.parametrize("name", ["nexmark_q5", "nexmark_q7"])
@pytest.mark.parametrize("batch", [1, 250, 1_000])
def test_the_legacy_event_time_steps_give_the_oracle_s_windows_and_late_drops(name: str, batch: int) -> None:
    """The legacy q5 and q7 steps driven as event_time_operator drives them (a batch's watermark from the batches
    before it), without Spark: the oracle's rows and late drops, for batches of one record and of many."""
    import importlib

    from legacy.workloads import NO_WATERMARK

    step = {"nexmark_q5": "_hot_items", "nexmark_q7": "_highest"}[name]
    step = getattr(importlib.import_module(f"legacy.workloads.{name}"), step)
    spec = _spec("messy", "one", FULL)
    frame = generate_nexmark(spec)
    bids, _ = read_bids(frame, spec)
    events = [{**row, "kafka_ts": 0} for row in bids.drop(columns="prior_max_ms").to_dict("records")]
    state, rows, late, seen = None, [], [], NO_WATERMARK
    for i in range(0, len(events) + batch, batch):  # the last round: no events, the final watermark
        chunk = events[i:i + batch]
        watermark = NO_WATERMARK if seen == NO_WATERMARK else seen - 5_000
        state, out, dropped = step(state, chunk, watermark)
        rows += out
        late += [(bid["seq"], start) for bid, start in dropped]
        seen = max([seen, *(e["dateTime"] for e in chunk)])
    query = workloads.get(name)
    expected = query.oracle(frame, spec)
    got = pd.DataFrame([r[:-1] for r in rows], columns=[*query.key_columns, *query.value_columns])
    assert_outputs_equal(expected.rows, workloads.sorted_rows(query, got), keys=query.key_columns,
                         values=query.value_columns)
    assert sorted(late) == sorted(zip(expected.late_dropped["seq"], expected.late_dropped["window_start"],
                                      strict=True))
    assert len(late) > 0


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

    def get(engine: str, profile: str, layout: str) -> tuple[NexmarkSpec, pd.DataFrame, dict[str, EngineOutputs]]:
        key = (engine, profile, layout)
        if key not in _RUNS:
            spec = NexmarkSpec(layout=layout, **FAST) if profile == "fast" else _spec(profile, layout, FULL)
            frame = generate_nexmark(spec)
            names = FAST_NAMES[engine] if profile == "fast" else NAMES
            groups = [names] if engine == "legacy" else [(name,) for name in names]
            runs: dict[str, EngineOutputs] = {}
            for group in groups:
                workdir = tmp_path_factory.mktemp(f"nexmark-{engine}-{profile}-{layout}")
                run = run_engine(engine, tuple((name, "default") for name in group), spec, frame,
                                 bootstrap_servers=bootstrap_servers, spark=spark, workdir=workdir)
                runs |= dict.fromkeys(group, run)
            _RUNS[key] = (spec, frame, runs)
        return _RUNS[key]

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
    spec, frame, runs = query_run(engine, profile, layout)
    run = runs[name]
    query = workloads.get(name)
    expected = query.oracle(frame, spec)
    got = workloads.final_result(query, run.rows(name))
    assert len(expected.rows) > 0
    assert_outputs_equal(expected.rows, got, keys=query.key_columns, values=query.value_columns)
    if engine == "legacy" and query.watermark_delay_ms is not None:
        late = run.late(name)
        got_late = pd.DataFrame({"seq": run.seqs_of(late), "window_start": late["detail"].astype("int64").to_numpy()})
        columns = ["seq", "window_start"]
        pd.testing.assert_frame_equal(
            got_late.sort_values(columns).reset_index(drop=True),
            expected.late_dropped.sort_values(columns).reset_index(drop=True), check_dtype=False,
        )
        assert (len(expected.late_dropped) > 0) == (profile != "clean")


@pytest.mark.parametrize(("engine", "profile", "layout"), RUNS)
def test_the_dead_letters_are_exactly_the_malformed_records_read(query_run, engine: str, profile: str,
                                                                 layout: str) -> None:
    spec, frame, runs = query_run(engine, profile, layout)
    expected = workloads.get("nexmark_q0").oracle(frame, spec).dead_letters
    assert (len(expected) > 0) == (profile != "clean")
    for run in {id(run): run for run in runs.values()}.values():
        dead = run.dead_letters()
        got = pd.DataFrame({"seq": run.seqs_of(dead), "reason": dead["reason"].to_numpy()})
        assert not got.duplicated(["seq"]).any(), "a malformed record was dead-lettered twice"
        pd.testing.assert_frame_equal(got.sort_values("seq").reset_index(drop=True),
                                      expected.sort_values("seq").reset_index(drop=True), check_dtype=False)
