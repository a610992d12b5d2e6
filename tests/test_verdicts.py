"""Verdicts that cannot pass by accident (issue 38).

- nothing compared is not a pass: an empty oracle is NOTHING COMPARED, exit 1; every workload's defaults give
  a non-empty oracle; ``dmk gen`` warns about a dataset too short in event time;
- an independent oracle: its own parser (``kit.workloads._contract``), its own numbers, no import of what the
  engines parse, window or sessionize with; both engines' parsers held to the contract's literal bounds; the
  generator's label check names the parser that drifted, also for ``--dataset FILE``;
- right words: a mismatched row is mismatched, never duplicated; a query reading its topic twice per batch is
  not re-processing;
- the whole result in the verdict: rows, dead letters (record and reason), late drops (record), input.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from compare.diff import (
    Check,
    NothingCompared,
    OutputsDiffer,
    assert_three_way,
    diff_outputs,
    records_differ,
    three_way,
    verdict,
)
from compare.engines import get_engine
from compare.settings import CompareSettings, default_events_per_second
from kit import semantics, workloads
from kit.dataset import DatasetSpec, check_labels, generate, generate_to_file, read_dataset
from kit.engine import DriverConfig
from kit.errors import DatasetError
from kit.events import EVENT_TIME_MAX_MS, EVENT_TIME_MIN_MS, REJECT_REASONS, parse_event
from kit.workloads import _contract
from kit.workloads._contract import BOUNDARY_TIMES, read_record

ROOT = Path(__file__).resolve().parents[1]

_EVENT = (
    b'{"event_id":"e1","user":"u1","key":"k1","ad_id":"a","ad_type":"banner","event_type":"view",'
    b'"event_time":1767225600123}'
)


def _at(ms: int | bytes) -> bytes:
    return _EVENT.replace(b"1767225600123", str(ms).encode() if isinstance(ms, int) else ms)


# -- nothing compared is not a pass ----------------------------------------------------------------------------


def test_an_empty_oracle_is_nothing_compared_and_a_difference_wins() -> None:
    ok = [Check("rows", "legacy", True, "equal (0 rows)"), Check("input", "modern", None, "not promised")]
    word, warnings = verdict(ok, 0)
    assert word == "NOTHING COMPARED" and len(warnings) == 1 and "the run tested nothing" in warnings[0]
    assert verdict([*ok, Check("dead letters", "modern", False, "1 not dead-lettered")], 0)[0] == "DIFFERENT"
    assert verdict(ok, 9) == ("EQUIVALENT", [verdict(ok, 9)[1][0]])
    assert "fewer than --min-rows 10" in verdict(ok, 9)[1][0]
    assert verdict(ok, 10) == ("EQUIVALENT", [])
    assert verdict(ok, 3, min_rows=0) == ("EQUIVALENT", [])


def test_the_plugin_fails_on_an_empty_oracle_with_its_own_message() -> None:
    empty = pd.DataFrame({"key": pd.Series(dtype=object), "count": pd.Series(dtype="int64")})
    with pytest.raises(NothingCompared, match="sessions: NOTHING COMPARED: the oracle has no rows"):
        assert_three_way(three_way(empty, empty, empty, ["key"], ["count"]), "sessions")
    oracle = pd.DataFrame({"key": ["a"], "count": [1]})
    with pytest.raises(OutputsDiffer, match="modern vs oracle: .*'rows_missing': 1") as raised:
        assert_three_way(three_way(oracle, empty, oracle, ["key"], ["count"]), "running_counts")
    assert not isinstance(raised.value, NothingCompared)
    assert_three_way(three_way(oracle, oracle, oracle, ["key"], ["count"]), "running_counts")  # equal, not empty


# The datasets dmk compare, dmk demo and the plugin make by default (compare: --records 20000 and the smallest
# case of the issue, 3000; demo: 12000 at records / 40 events/s; the plugin: compare.inputs.TEST_DATASET).
_DEFAULTS = [
    pytest.param(profile, records, default_events_per_second(records), id=f"{profile}-{records}")
    for profile in ("clean", "messy") for records in (3_000, 20_000)
] + [pytest.param(profile, 12_000, 300.0, id=f"demo-{profile}") for profile in ("clean", "messy")]


@pytest.mark.parametrize(("profile", "records", "events_per_second"), _DEFAULTS)
def test_every_workload_has_rows_to_compare_at_the_defaults(profile: str, records: int,
                                                             events_per_second: float) -> None:
    dataset = DatasetSpec.from_profile(profile, records=records, seed=11, events_per_second=events_per_second,
                                       users=300, lateness_margin_ms=4_000)
    frame = generate(dataset)
    empty = [name for name in workloads.NAMES if workloads.get(name).oracle(frame, dataset).rows.empty]
    assert empty == []
    assert workloads.span_warnings(dataset) == []


def test_a_dataset_too_short_for_a_workload_is_warned_about() -> None:
    short = DatasetSpec(records=3_000, events_per_second=500)  # 6 s of event time
    warned = {w.split(":")[0]: w for w in workloads.span_warnings(short)}
    assert sorted(warned) == ["sessions", "windowed_counts", "ysb"]
    assert "spans about 6 s of event time, less than the 35 s (the 30 s session gap" in warned["sessions"]
    assert default_events_per_second(3_000) == 75.0 and default_events_per_second(100_000) == 500.0
    frame = generate(short)
    for name in warned:  # the warning is right: that oracle is empty
        assert workloads.get(name).oracle(frame, short).rows.empty


def test_dmk_gen_warns_and_compare_refuses_a_negative_min_rows(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from compare.cli import main

    assert main(["gen", "--records", "3000", "--events-per-second", "500", "--out", str(tmp_path / "d.parquet")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: sessions: the dataset spans about 6 s of event time" in err
    assert main(["compare", "running_counts", "--min-rows", "-1", "--out", str(tmp_path / "run")]) == 2
    assert "--min-rows must be a whole number >= 0, got -1" in capsys.readouterr().err
    with pytest.raises(Exception, match="min-rows"):
        CompareSettings("running_counts", out_dir=tmp_path / "x", min_rows=-1)


def test_a_report_of_nothing_compared_says_so_and_exits_1(tmp_path: Path) -> None:
    from compare.cli import main
    from compare.metrics import OracleCounts, Percentiles
    from compare.report import render
    from tests._metrics import compare_metrics, engine

    nothing = Percentiles(p50=None, p95=None, p99=None, max=None)
    empty = engine(rows_matched=0, dead_letters=0, output_rows=0, latency_ms=nothing, latency_after_startup_ms=nothing)
    checks = tuple(Check("rows", e, True, "equal (0 rows)") for e in ("legacy", "modern"))
    word, warnings = verdict(checks, 0)
    compare_metrics(empty, empty, workload="sessions", records=3000, verdict=word, equivalent=word == "EQUIVALENT",
                    checks=checks, warnings=tuple(warnings),
                    oracle=OracleCounts(rows=0, dead_letters=0, late_dropped=0)).write(tmp_path)
    md, page = render(tmp_path)
    text = md.read_text()
    assert "**NOTHING COMPARED: the oracle has no rows" in text
    assert "- rows, legacy: ok: equal (0 rows)" in text and "- warning: 0 rows compared" in text
    assert "NOTHING COMPARED" in page.read_text()
    assert main(["report", str(tmp_path)]) == 1


# -- an independent oracle -------------------------------------------------------------------------------------

_ENGINE_SIDE = ("kit.events", "kit.semantics", "legacy", "modern", "pyspark")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / "kit" / "workloads").glob("*.py")))
def test_no_oracle_module_imports_what_the_engines_parse_window_or_sessionize_with(module: str) -> None:
    imported = _imports(ROOT / "kit" / "workloads" / module)
    shared = sorted(name for name in imported if name.split(".")[0] in ("legacy", "modern", "pyspark")
                    or any(name == side or name.startswith(side + ".") for side in _ENGINE_SIDE))
    assert shared == [], f"kit/workloads/{module} imports {shared}"
    assert not {n for n in imported if n.endswith((".parse_event", ".merge_session"))}


def test_the_engines_take_their_numbers_from_kit_semantics_and_they_agree_with_the_oracles() -> None:
    from kit.workloads import dedup, join, sessions, windowed_counts, ysb

    for path in sorted((ROOT / "legacy" / "workloads").glob("*.py")) + sorted((ROOT / "modern" / "workloads").glob(
            "*.py")):
        oracle_side = {n for n in _imports(path) if n.startswith("kit.workloads.") and n.count(".") >= 3}
        assert oracle_side == set(), f"{path.relative_to(ROOT)} imports oracle-side names {sorted(oracle_side)}"
    # The same numbers, held twice (a slip on one side is then a difference, and this test names it).
    assert semantics.WINDOWS == windowed_counts.WINDOWS
    assert semantics.YSB_WINDOW_MS == ysb.WINDOW_MS and semantics.JOIN_WITHIN_MS == join.WITHIN_MS
    for module in (windowed_counts, sessions, dedup, ysb, join):
        assert semantics.WATERMARK_DELAY_MS == module.WATERMARK_DELAY_MS == module.SPEC.watermark_delay_ms
    assert semantics.late_detail("sliding", 5_000) == windowed_counts.late_detail("sliding", 5_000)


def test_the_contract_literals_are_the_documented_bounds_and_kit_events_agrees() -> None:
    assert _contract.FIRST_VALID_MS == EVENT_TIME_MIN_MS == 946_684_800_000  # 2000-01-01T00:00:00Z
    assert _contract.LAST_VALID_MS == EVENT_TIME_MAX_MS - 1 == 4_102_444_799_999  # 2099-12-31T23:59:59.999Z
    assert _contract.REASONS == REJECT_REASONS
    assert "(outside years 2000–2099)" in (ROOT / "docs" / "kit.md").read_text(encoding="utf-8")


CORNER_CASES = [
    _EVENT, None, b"", b"null", b"[]", b"{}", _EVENT[:40], b"[" + _EVENT + b"]", b" " + _EVENT + b"\n",
    _at(b"1.5e12"), _at(b"true"), _at(b'"1767225600123"'), _at(b"NaN"), _at(b"-1"), _at(b"0"),
    _at(b"99999999999999999999"), _at(b"1767225600123.0"),
    _EVENT.replace(b'"u1"', b'"u\xff"'), _EVENT.replace(b'"u1"', b'"u\xed\xa0\x80"'),
    _EVENT.replace(b'"u1"', b"1"), _EVENT.replace(b'"u1"', b"null"), _EVENT.replace(b',"ad_id":"a"', b""),
    _EVENT.replace(b'{"event_id":"e1",', b'{"event_id":"e1","event_id":2,'),  # duplicate key: the last wins
    _EVENT.replace(b'{"event_id":"e1",', b'{"event_id":2,"event_id":"e1",'),
    _EVENT.replace(b"}", b',"extra":[1,2]}'),
    *(_at(ms) for ms in BOUNDARY_TIMES),
]


@pytest.mark.parametrize("value", CORNER_CASES, ids=range(len(CORNER_CASES)))
def test_the_engines_parser_decides_as_the_contract(value: bytes | None) -> None:
    """``kit.events.parse_event`` (legacy's parser, modern's Python path) against the oracle's own."""
    event, reason = parse_event(value)
    expected, expected_reason = read_record(value)
    assert reason == expected_reason
    if expected is not None:
        assert event is not None and {k: event[k] for k in expected} == expected


def test_the_boundary_verdicts_are_the_contracts() -> None:
    assert {ms: read_record(_at(ms))[1] for ms in BOUNDARY_TIMES} == BOUNDARY_TIMES
    assert {ms: parse_event(_at(ms))[1] for ms in BOUNDARY_TIMES} == BOUNDARY_TIMES


def test_the_label_check_names_the_engines_parser_when_it_drifts(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    dataset = DatasetSpec.from_profile("messy", records=3_000, seed=3, events_per_second=75)
    path = tmp_path / "d.parquet"
    generate_to_file(dataset, path)
    import kit.dataset
    import kit.events

    def inclusive_upper_bound(value):  # both bounds a millisecond loose
        event, reason = kit.events.parse_event(value)
        if reason == "bad_timestamp":
            loose = json.loads(value)
            if 946_684_799_999 <= loose["event_time"] <= 4_102_444_800_000:
                return loose, None
        return event, reason

    monkeypatch.setattr(kit.dataset, "parse_event", inclusive_upper_bound)
    with pytest.raises(DatasetError, match=r"kit\.events\.parse_event \(the engines' parser\) disagrees on "
                       r"\d+ records \(seq \d+ bad_timestamp read as valid"):
        generate(dataset)
    # A dataset file: checked as dmk compare --dataset reads it.
    from compare.run import _dataset

    with pytest.raises(DatasetError, match=str(path)):
        _dataset(CompareSettings("running_counts", out_dir=tmp_path / "run", dataset_file=str(path)), tmp_path)


def test_the_label_check_names_the_oracles_parser_and_passes_a_good_file(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    generate_to_file(DatasetSpec.from_profile("messy", records=3_000, seed=3, events_per_second=75), path)
    frame = read_dataset(path)
    check_labels(frame["kind"], frame["value"], str(path))  # as generated: both parsers agree with the labels
    monkeypatch.setattr(_contract, "FIRST_VALID_MS", 1_767_225_600_000 + 10**9)  # every valid record: too early
    with pytest.raises(DatasetError, match=r"read_record \(the oracle's parser\) disagrees on [\d,]+ records .* "
                       r"read as bad_timestamp"):
        check_labels(frame["kind"], frame["value"], str(path))


# -- right words -----------------------------------------------------------------------------------------------


def test_a_mismatched_row_is_mismatched_not_duplicated() -> None:
    keys, values = ["user", "session_start"], ["session_end", "events"]
    oracle = pd.DataFrame({"user": ["u1", "u2"], "session_start": [0, 0], "session_end": [30_000, 40_000],
                           "events": [3, 4]})
    longer = oracle.assign(session_end=[31_000, 40_000])  # a session 1 s too long
    diff = diff_outputs(oracle, longer, keys, values)
    assert diff.counts()["rows_mismatched"] == 1 and diff.lost_and_duplicated() == (0, 0)
    twice = pd.concat([oracle, oracle.iloc[:1], pd.DataFrame({"user": ["u9"], "session_start": [0],
                                                               "session_end": [1], "events": [1]})])
    diff = diff_outputs(oracle, twice, keys, values)
    # u1's session emitted twice is duplicated; u9's, which the oracle lacks, is unexpected but no duplicate.
    assert diff.counts()["rows_unexpected"] == 2 and diff.lost_and_duplicated() == (0, 1)
    diff = diff_outputs(oracle, oracle.iloc[1:], keys, values)
    assert diff.lost_and_duplicated() == (1, 0)


def test_a_query_reading_its_topic_twice_in_a_batch_repeats_no_record(tmp_path: Path) -> None:
    from compare.measure import input_coverage
    from kit.ranges import OffsetRange
    from modern.engine import MODERN

    scan = {"startOffset": {"t": {"0": 0}}, "endOffset": {"t": {"0": 100}}}
    later = {"startOffset": {"t": {"0": 100}}, "endOffset": {"t": {"0": 150}}}
    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "windowed_counts.jsonl").write_text(
        json.dumps({"batchId": 0, "sources": [scan, scan]}) + "\n" + json.dumps({"batchId": 1, "sources": [later,
                                                                                                      later]}) + "\n")
    ranges = MODERN.record(tmp_path).processed_ranges("windowed_counts")
    assert ranges == [OffsetRange("t", 0, 0, 100), OffsetRange("t", 0, 100, 150)]
    assert input_coverage(ranges, {"t": {0: 150}}) == (0, 0)


# -- the whole result in the verdict ---------------------------------------------------------------------------


def test_records_compare_as_multisets_of_text() -> None:
    expected = pd.DataFrame({"seq": [3, 7], "window": ["sliding:5000", "tumbling:0"]})
    assert records_differ(expected, expected.iloc[::-1], ["seq", "window"]) == (0, 0)
    assert records_differ(expected, pd.DataFrame({"seq": ["3", "8"], "window": ["sliding:5000", "x"]}),
                          ["seq", "window"]) == (1, 1)


def _outcome(tmp_path: Path, dead: pd.DataFrame, late: pd.DataFrame | None) -> SimpleNamespace:
    from kit.sink import write_batch

    out = tmp_path / "legacy"
    write_batch(out / "dead_letters.events", 0, dead)
    if late is not None:
        write_batch(out / "windowed_counts.late", 0, late)
    log = pd.DataFrame({"seq": range(10), "topic": ["t"] * 10, "partition": [0] * 10, "offset": range(10)})
    return SimpleNamespace(out_dir=out, replay=SimpleNamespace(log=log), exactly_once=True)


def test_each_part_of_the_result_is_its_own_line_of_the_verdict(tmp_path: Path) -> None:
    from compare.run import _checks

    def parts(outcome: SimpleNamespace) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        record = get_engine("legacy").record(outcome.out_dir)
        return record.dead_letters(), record.late_records("windowed_counts")

    oracle = workloads.OracleResult(
        pd.DataFrame({"key": ["a"], "count": [1]}),
        pd.DataFrame({"seq": [2, 5], "reason": ["bad_json", "bad_utf8"]}),
        pd.DataFrame({"seq": [7], "window": ["tumbling:0"]}),
    )
    rows = diff_outputs(oracle.rows, oracle.rows, ["key"])
    settings = CompareSettings("windowed_counts", out_dir=tmp_path / "run")
    # As many dead letters as the oracle's, but one for the wrong record: a count would pass, the records do not.
    dead = pd.DataFrame({"topic": ["t", "t"], "partition": [0, 0], "offset": [2, 6],
                         "reason": ["bad_json", "bad_utf8"]})
    late = pd.DataFrame({"event_id": ["e7"], "topic": ["t"], "partition": [0], "offset": [7], "detail": ["tumbling:0"]})
    outcome = _outcome(tmp_path / "a", dead, late)
    checks = _checks(settings, "legacy", rows, oracle, *parts(outcome), outcome, 0, 0)
    lines = [c.line() for c in checks]
    assert lines == [
        "rows, legacy: ok: equal (1 rows)",
        "dead letters, legacy: DIFFERS: 1 not dead-lettered, 1 dead-lettered wrongly (record and reason) of 2",
        "late drops, legacy: ok: equal (1 records)",
        "input, legacy: ok: every record processed once",
    ]
    assert verdict(checks, len(oracle.rows), min_rows=1) == ("DIFFERENT", [])
    # Modern reports no per-record late drops; a repeated input record breaks exactly-once.
    good = dead.assign(offset=[2, 5])
    outcome = _outcome(tmp_path / "b", good, None)
    checks = _checks(settings, "modern", rows, oracle, *parts(outcome), outcome, 0, 4)
    assert [c.ok for c in checks] == [True, True, None, False]
    assert checks[3].detail == "0 records never processed, 4 processed again"
    # A receiver mode promises no exactly-once: its input is reported, not judged.
    receiver = CompareSettings("windowed_counts", out_dir=tmp_path / "run", legacy_mode="receiver")
    stream = get_engine("legacy").modes[receiver.legacy_mode]["stream"]
    outcome.exactly_once = get_engine("legacy").exactly_once(DriverConfig("legacy", "b:9092", {}, "o", "c",
                                                                                   options={"stream": stream}))
    checks = _checks(receiver, "legacy", rows, oracle, *parts(outcome), outcome, 3, 0)
    assert checks[3].ok is None and "promises at most once (3 never processed" in checks[3].detail


# -- checked benchmarks ----------------------------------------------------------------------------------------


def _bench_results() -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text(encoding="utf-8"))


def test_a_bench_run_whose_output_differs_publishes_nothing(tmp_path: Path) -> None:
    from compare.bench import BenchDiffers, publish, unchecked_runs, update_readme
    from kit.errors import ConfigError

    results = _bench_results()
    for by_workload in results["engines"].values():  # as a run of this dmk writes them: every run checked
        for r in by_workload.values():
            for lat in r["latency_by_trigger"].values():
                lat["matches_oracle"] = True
    assert unchecked_runs(results) == []
    assert publish(tmp_path / "ok", results).exists() and (tmp_path / "ok" / "latest.json").exists()
    results["engines"]["modern"]["running_counts"]["matches_oracle"] = False
    first = next(iter(results["engines"]["legacy"]["running_counts"]["latency_by_trigger"]))
    results["engines"]["legacy"]["running_counts"]["latency_by_trigger"][first]["matches_oracle"] = False
    assert unchecked_runs(results) == ["legacy running_counts: latency at " + first,
                                       "modern running_counts: max throughput"]
    with pytest.raises(BenchDiffers, match="modern running_counts: max throughput differs from the oracle, so "
                       "this run publishes nothing"):
        publish(tmp_path / "bad", results)
    assert not (tmp_path / "bad" / "latest.json").exists() and list((tmp_path / "bad").glob("rejected-*.json"))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- dmk-bench:start -->\nold\n<!-- dmk-bench:end -->\n")
    with pytest.raises(ConfigError, match="not published"):
        update_readme(readme, results)
    assert "old" in readme.read_text()


def test_a_percentile_is_shown_only_with_enough_rows_beyond_it() -> None:
    from compare.bench.report import _pct
    from compare.bench.results import backed_percentiles

    few = backed_percentiles(list(range(40)))
    assert few == {"p50": 19.5, "p95": None, "p99": None, "max": 39.0}
    assert _pct({**few, "rows_measured": 40}, "p99") == "max of 40 rows: 39" and _pct(few, "p50") == "20"
    many = backed_percentiles(list(range(1000)))
    assert many["p99"] == pytest.approx(989.01) and many["p95"] is not None
    assert backed_percentiles([]) == {"p50": None, "p95": None, "p99": None, "max": None}


# -- --mode all: every update, in order per key ----------------------------------------------------------------


def test_every_emitted_update_is_held_to_the_values_its_key_passes_through() -> None:
    from compare.diff import updates_out_of_order

    dataset = DatasetSpec.from_profile("messy", records=3_000, seed=5, events_per_second=75)
    frame = generate(dataset)
    spec = workloads.get("running_counts")
    path = spec.trajectory(frame, dataset)
    # What an engine emits with batches of 250 records: each batch's last value of every key it changed.
    emitted = path.assign(batch=path["seq"] // 250).drop_duplicates(["batch", "key"], keep="last")
    assert updates_out_of_order(path, emitted, ["key"], ["count"]) == (0, 0)
    # The final values are the oracle's.
    final = workloads.final_result(spec, emitted.assign(last_input_ts=0))
    assert final.equals(spec.oracle(frame, dataset).rows)
    # A batch counted twice: its keys' counts jump past what they ever were, or run ahead and come back.
    doubled = emitted.copy()
    in_batch = doubled["batch"] == 3
    doubled.loc[in_batch, "count"] += doubled.loc[in_batch, "count"]
    unknown, backwards = updates_out_of_order(path, doubled, ["key"], ["count"])
    assert unknown + backwards >= int(in_batch.sum()) > 0
    # An update emitted again after later ones: out of order.
    again = pd.concat([emitted, emitted[emitted["batch"] == 2]])
    assert updates_out_of_order(path, again, ["key"], ["count"])[1] == int((emitted["batch"] == 2).sum())


def test_mode_all_needs_a_trajectory_for_an_update_mode_workload(tmp_path: Path) -> None:
    from dataclasses import replace

    from compare.run import validate
    from kit.errors import ConfigError

    with pytest.raises(ConfigError, match="--mode must be final or all, got 'every'"):
        CompareSettings("running_counts", out_dir=tmp_path / "a", mode="every")
    spec, _ = validate(CompareSettings("running_counts", out_dir=tmp_path / "b", mode="all"))
    assert spec.trajectory is not None
    bare = replace(workloads.get("running_counts"), trajectory=None)
    import tests.test_verdicts as me

    me.BARE_SPEC = bare  # reachable as tests.test_verdicts:BARE_SPEC
    with pytest.raises(ConfigError, match="has no trajectory in its spec"):
        validate(CompareSettings("tests.test_verdicts:BARE_SPEC", out_dir=tmp_path / "c", mode="all"))


def test_compare_jobs_with_two_empty_outputs_is_nothing_compared(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """Without an oracle, two jobs that both wrote nothing agree, and have tested nothing."""
    import contextlib

    import compare.jobs as jobs

    @contextlib.contextmanager
    def no_kafka(*args: object, **kwargs: object):  # a stand-in for kafka_or_embedded
        yield SimpleNamespace(bootstrap_servers="unused:9092")

    figures = {"command": "python job.py", "output_rows": 0, "input_records": 1, "input_kind": "kafka", "batches": 3,
               "seconds": 1.0, "throughput_rps": 0.0, "result_latency_ms": None}
    monkeypatch.setattr(jobs, "read_capture", lambda path: pd.DataFrame({"partition": [0], "value": [b"{}"]}))
    monkeypatch.setattr(jobs, "kafka_or_embedded", no_kafka)
    outputs = {"legacy": pd.DataFrame({"customer": pd.Series(dtype=object)})}

    def side(engine, *args):  # _run_side's signature
        return outputs.get(engine.name, pd.DataFrame({"customer": pd.Series(dtype=object)})), dict(figures)

    monkeypatch.setattr(jobs, "_run_side", side)
    command = "python job.py {bootstrap} {topic} {output_topic} {checkpoint}"
    settings = jobs.JobsSettings(input_file="c.jsonl", key=("customer",), legacy=command, modern=command,
                                 out_dir=tmp_path / "empty")
    result = jobs.compare_jobs(settings)
    assert (result.metrics.verdict, result.equivalent) == ("NOTHING COMPARED", False)
    assert (tmp_path / "empty" / "report.md").read_text().startswith("# dmk compare-jobs: NOTHING COMPARED")
    outputs["legacy"] = outputs["modern"] = pd.DataFrame({"customer": ["c1"], "revenue": [3]})
    result = jobs.compare_jobs(jobs.JobsSettings(input_file="c.jsonl", key=("customer",), legacy=command,
                                                 modern=command, out_dir=tmp_path / "one"))
    assert result.metrics.verdict == "EQUIVALENT" and result.equivalent
    assert "fewer than --min-rows 10" in result.metrics.warnings[0]


def test_the_latency_bound_counts_the_wait_for_a_window_or_session_at_the_replay_s_pace() -> None:
    from compare.run import _latency_bound, _pace

    dataset = DatasetSpec.from_profile("messy", records=2_000, seed=11)
    settings = CompareSettings(workload="sessions", out_dir=Path("unused"), dataset=dataset, rate_rps=750.0,
                               batch_seconds=1.0)
    # 40 s of event time replayed in 28 s: 0.7 wall seconds a second of it.
    frame = pd.DataFrame({"timestamp_ms": [1_000, 21_000, 41_000]})
    assert _pace(frame, 28.0) == 0.7
    assert _pace(frame.iloc[:1], 28.0) == 0.0  # no event time spanned: no pace
    sessions, windows = workloads.get("sessions"), workloads.get("windowed_counts")
    gap = dataset.session_gap_ms + sessions.watermark_delay_ms
    # A session's row: the batch that moves the watermark past its gap and the next (3 intervals) + gap and delay.
    bound = round(3_000 + gap * 0.7)
    assert _latency_bound(settings, sessions, pd.Series([bound - 1] * 10), 0.7) == {
        "latency_bound_ms": bound, "p99_within_bound": True}
    assert _latency_bound(settings, sessions, pd.Series([bound + 1] * 10), 0.7)["p99_within_bound"] is False
    assert _latency_bound(settings, windows, pd.Series([1]), 0.7)["latency_bound_ms"] == round(3_000 + 15_000 * 0.7)
    # A row released at once (no horizon): 2 intervals + the watermark delay, whatever the pace; no rows: over.
    assert _latency_bound(settings, workloads.get("dedup"), pd.Series([1]), 0.7)["latency_bound_ms"] == 7_000
    assert _latency_bound(settings, workloads.get("running_counts"), pd.Series(dtype="int64"), 0.7) == {
        "latency_bound_ms": 2_000, "p99_within_bound": False}
