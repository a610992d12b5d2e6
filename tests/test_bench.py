"""dmk bench: its measurements from batch logs, the raw Kafka phase, the results files and README's table.

The figures themselves are benchmarks (benchmarks/results/), never asserted here; these tests check that the
bench measures what it says. The whole run, on a small topic, is in the slow tier.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from compare import bench
from compare.bench import results as bench_results
from compare.engines import get_engine
from compare.cli import main
from kit.errors import ConfigError
from kit.events import parse_event
from kit.kafka import Kafka

ROOT = Path(__file__).resolve().parent.parent


def _results(**overrides: object) -> dict:
    """A results dict shaped as run_bench writes it (figures made up: these tests check the rendering)."""
    engine = {
        "throughput_rps": 5000.0, "ratio_to_raw": 0.25, "ratio_to_parsing": 0.5, "batches": 10, "batch_cap": 100, "matches_oracle": True,
        "latency_by_trigger": {"1 s": {"rate_rps": 1500.0, "records": 15000, "rows_measured": 900,
                                       "p50": 700.0, "p95": 1100.0, "p99": 1900.0, "batch_ms_median": 800.0,
                                       "idle_batch_ms_median": 300.0, "scheduling_delay_ms_max": 50}},
        "latency_ms": {"p50": 700.0, "p95": 1100.0, "p99": 1900.0},
    }
    results = {
        "created": "2026-11-24T10:00:00Z", "command": "dmk bench --quick", "quick": True, "records": 200_000,
        "partitions": 8, "broker": "embedded", "master": "local[2]",
        "machine": {"cpu": "x", "cores": 2, "memory_gb": 23.0, "os": "Linux", "python": "3.11", "java": "17",
                    "versions": {"pyspark": "4.3.0"}},
        "raw_producer_rps": 40000.0, "raw_consumer_rps": 20000.0, "raw_parsing_consumer_rps": 10000.0,
        "engines": {"legacy": {"running_counts": dict(engine)},
                    "modern": {"running_counts": dict(engine, ratio_to_raw=1.5, ratio_to_parsing=1.2)}},
        "state_growth": {
            "legacy": {"keys_from": 10_000, "keys_to": 200_000, "batch_records": 10_000,
                       "processing_ms_small": [100, 110, 120], "processing_ms_large": [900, 1000, 1100], "ratio": 9.09},
            "modern": {"keys_from": 10_000, "keys_to": 200_000, "batch_records": 10_000,
                       "processing_ms_small": [300], "processing_ms_large": [330], "ratio": 1.1},
        },
        "state_growth_ratio": 1.1,
    }
    results.update(overrides)
    results["targets"] = bench.evaluate_targets(results)
    return results


def test_throughput_spans_the_batches_with_records() -> None:
    spans = pd.DataFrame({
        "started_ms": [0, 1_000, 3_000, 9_000], "ended_ms": [500, 3_000, 5_000, 9_100],
        "records": [0, 4_000, 4_000, 0], "processing_ms": [500, 2_000, 2_000, 100],
    })
    rps, batches = bench.throughput(spans, warmup_batches=0)
    assert (rps, batches) == (2_000.0, 2)  # 8,000 records from 1,000 to 5,000 ms; the empty batches do not count
    assert bench.throughput(spans.assign(records=0)) == (0.0, 0)
    # The first busy batch is the warm-up by default: 4,000 records from 3,000 to 5,000 ms.
    assert bench.throughput(spans) == (2_000.0, 1)
    assert bench.throughput(spans.assign(records=[0, 4_000, 6_000, 0])) == (3_000.0, 1)
    assert bench.throughput(spans.iloc[:2]) == (2_000.0, 1)  # one busy batch: measured, warm-up or not


def test_throughput_counts_processing_not_the_wait_for_the_next_batch() -> None:
    # Three 100 ms batches at a 250 ms interval, the last two measured: 200 ms of processing, not 350 ms of span.
    spans = pd.DataFrame({"started_ms": [0, 250, 500], "ended_ms": [100, 350, 600], "records": [1_000] * 3,
                          "processing_ms": [100] * 3})
    assert bench.throughput(spans) == (10_000.0, 2)
    # Batches that overlap (queued, one starting as the last ends) are counted once: 0-400 ms.
    overlapping = spans.assign(started_ms=[0, 100, 200], ended_ms=[150, 300, 400])
    assert bench.throughput(overlapping, warmup_batches=0) == (7_500.0, 3)


def test_throughput_of_output_deferred_past_the_input_counts_the_batches_that_made_it() -> None:
    # A window of processing time: three reading batches of 10 ms, two empty ones, and the batch at the window's
    # end, 0.9 s, that parses and counts all 3,000 records (nexmark_q12 on legacy).
    spans = pd.DataFrame({
        "started_ms": [0, 250, 500, 750, 1_000, 1_250], "ended_ms": [10, 260, 510, 760, 1_010, 2_150],
        "records": [1_000, 1_000, 1_000, 0, 0, 0], "processing_ms": [10, 10, 10, 10, 10, 900],
    })
    window_rows = pd.Series([2_100, 2_100])
    # All output after the input: every record counts, over 3 × 10 + 2 × 10 + 900 ms of processing.
    assert bench.throughput(spans, window_rows) == (3_000 / 0.95, 3)
    # Without the rows it would measure only the reading: 2,000 records in 20 ms of processing.
    assert bench.throughput(spans) == (100_000.0, 2)
    # Output during the run too (a modern watermark's last windows in a batch without records): the warm-up batch
    # is still left out, and the later batch's processing is in.
    assert bench.throughput(spans, pd.Series([255, 2_100])) == (2_000 / 0.94, 2)


def test_legacy_batch_spans_start_when_processing_starts(tmp_path: Path) -> None:
    log = tmp_path / "metrics" / "batches.jsonl"
    log.parent.mkdir()
    log.write_text("\n".join(json.dumps(row) for row in (
        {"batch_time_ms": 1000, "records": 10, "scheduling_delay_ms": 5, "processing_delay_ms": 300, "total_delay_ms": 305, "completed_ms": 1305},
        {"batch_time_ms": 2000, "records": 0, "scheduling_delay_ms": None, "processing_delay_ms": None, "total_delay_ms": None, "completed_ms": 2010},
    )) + "\n")
    spans = get_engine("legacy").record(tmp_path).batch_spans("running_counts")
    assert spans.to_dict("list") == {
        "batch_ms": [1000, 2000], "started_ms": [1005, 2010], "ended_ms": [1305, 2010], "records": [10, 0], "processing_ms": [300, 0],
        "scheduling_ms": [5, 0],
    }


def test_throughput_runs_are_warmed_up_except_in_the_quick_run() -> None:
    assert bench.BenchSettings().n_warmup_runs == bench.WARMUP_RUNS == 1
    assert bench.BenchSettings(quick=True).n_warmup_runs == 0
    assert bench.BenchSettings(quick=True, warmup_runs=2).n_warmup_runs == 2
    assert "measured after 1 unmeasured run of it in the same JVM" in bench.render_markdown(_results(warmup_runs=1))
    assert "measured after 1 unmeasured run of it in 50 batches in the same JVM" in bench.render_markdown(
        _results(warmup_runs=1, warmup_run_batches=50))
    assert "first run in this JVM was measured (no warm-up run)" in bench.render_markdown(_results(warmup_runs=0))
    assert "unmeasured run" not in bench.render_markdown(_results())  # files from before the warm-up runs


def test_targets_say_whether_met_and_by_how_much() -> None:
    targets = {t["target"]: t for t in _results()["targets"]}
    legacy = targets["legacy running_counts throughput / consumer that parses"]
    assert (legacy["met"], legacy["missed_by_factor"]) == (False, 2.0)  # 0.5 against 1.0
    assert targets["modern running_counts throughput / consumer that parses"]["met"] is True  # 1.2
    legacy_p99 = targets["legacy running_counts p99 at 30 % load (1 s batches)"]
    assert (legacy_p99["goal"], legacy_p99["met"], legacy_p99["missed_by_factor"]) == (1_200.0, False, 1.58)
    modern_p99 = targets["modern running_counts p99 at 30 % load (default trigger)"]
    assert (modern_p99["goal"], modern_p99["met"], modern_p99["missed_by_factor"]) == (500.0, False, 3.8)
    assert "legacy state growth ratio" not in targets  # updateStateByKey visits every key by design: no goal
    assert targets["modern state growth ratio"]["met"] is True
    legacy_idle = targets["legacy running_counts idle batch, median (1 s batches)"]
    assert (legacy_idle["value"], legacy_idle["met"], legacy_idle["missed_by_factor"]) == (300.0, False, 1.5)
    assert targets["modern running_counts idle trigger, median (default trigger)"]["missed_by_factor"] == 1.2  # 300 / 250
    limits = bench.limits(_results())
    assert ("legacy state growth (reported, held to no goal): a batch of 10,000 updates took 110 ms at 10,000 keys "
            "and 1,000 ms at 200,000") in limits[-2]
    assert not any(limit.startswith("modern state growth") for limit in limits)  # met: nothing limits it
    assert any("modern p99 with the 1 s trigger: a micro-batch took 800 ms (median) at 1,500 records/s" in limit
               for limit in limits)
    assert any(limit.startswith("legacy running_counts idle batch: 300 ms (median): an empty batch still runs")
               for limit in limits)
    assert limits[0].startswith("legacy running_counts throughput is 0.50x the single consumer that also parses "
                                "every value with the oracle's rules (10,000 records/s; 0.25x the raw one) with "
                                "100-record batches: a warm run spends")
    assert not any(limit.startswith("modern running_counts throughput") for limit in limits)  # met


def test_throughput_targets_cover_ysb_and_the_messy_profile() -> None:
    ysb = {"throughput_rps": 12_000.0, "ratio_to_raw": 0.6, "ratio_to_parsing": 1.2, "batches": 10, "batch_cap": 100,
           "matches_oracle": True, "messy": {"throughput_rps": 8_000.0, "batches": 12, "matches_oracle": True}}
    results = _results()
    results["engines"]["modern"]["ysb"] = ysb
    targets = {t["target"]: t for t in bench.evaluate_targets(results)}
    assert targets["modern ysb throughput / consumer that parses"]["met"] is True
    messy = targets["modern ysb messy throughput / consumer that parses"]
    assert (messy["value"], messy["met"], messy["missed_by_factor"]) == (0.8, False, 1.25)  # 8,000 / 10,000
    assert "legacy ysb throughput / consumer that parses" not in targets  # not measured: no target row


def test_the_quick_run_is_held_to_five_minutes_and_says_where_its_time_went() -> None:
    phases = {"legacy running_counts: max throughput": 40.0, "compare path: a batch's fixed cost": 150.0,
              "modern running_counts: latency, 0 seconds": 30.0}
    results = _results(run_seconds=420.0, phase_seconds=phases)
    quick = next(t for t in results["targets"] if t["target"] == "dmk bench --quick run time")
    assert (quick["goal"], quick["met"], quick["missed_by_factor"]) == (300.0, False, 1.4)
    note = next(limit for limit in bench.limits(results) if limit.startswith("dmk bench --quick took"))
    assert note.startswith("dmk bench --quick took 420 s; its longest phases: compare path: a batch's fixed cost "
                           "150 s, legacy running_counts: max throughput 40 s, modern")
    full = _results(quick=False, run_seconds=1_800.0, phase_seconds=phases)
    assert "dmk bench --quick run time" not in {t["target"] for t in full["targets"]}  # the full run: no goal


def test_latency_targets_name_the_fixed_rate_of_newer_results() -> None:
    results = _results(latency_rate_rps=5000.0)
    names = [t["target"] for t in results["targets"]]
    assert "modern running_counts p99 at 5,000 records/s (default trigger)" in names
    assert "legacy running_counts p99 at 5,000 records/s (1 s batches)" in names
    assert "## Latency at 5,000 records/s (ms," in bench.render_markdown(results)
    assert "p50 / p99 ms at 5,000 records/s" in bench.readme_table(results)
    # Results files from before the fixed rate keep their own words.
    assert "## Latency at 30% of each engine's maximum (ms," in bench.render_markdown(_results(load_fraction=0.3))


def test_fixed_cost_on_the_compare_path_is_a_target_with_its_breakdown() -> None:
    cost = {"workload": "running_counts", "records": 4_000, "equivalent": True, "engines": {
        "legacy": {"records": 4_000, "rate_rps": 750.0, "batch_ms_median": 300.0, "kept_up": True,
                   "p99_after_startup_ms": 1_400.0, "warmup_seconds": 12.5,
                   "breakdown_ms": {"scheduling delay": 5.0, "write running_counts": 260.0, "commit": 20.0,
                                    "Spark jobs": 1.0, "tasks": 4.0}},
        "modern": {"records": 4_000, "rate_rps": 750.0, "batch_ms_median": 120.0, "kept_up": True,
                   "p99_after_startup_ms": 600.0, "warmup_seconds": 9.0,
                   "breakdown_ms": {"queryPlanning": 30.0, "addBatch (read, process, state, sink)": 80.0}}}}
    results = _results(fixed_cost=cost)
    targets = {t["target"]: t for t in results["targets"]}
    legacy = targets["legacy batch fixed cost on the compare path (median, ≤ 1,000 records)"]
    assert (legacy["value"], legacy["goal"], legacy["met"], legacy["missed_by_factor"]) == (300.0, 150.0, False, 2.0)
    assert targets["modern batch fixed cost on the compare path (median, ≤ 1,000 records)"]["met"] is True
    text = bench.render_markdown(results)
    assert "## A batch's fixed cost on the compare path (`dmk compare running_counts`)" in text
    assert "| legacy | 750 | 300 | yes | 1,400 | 12.5 | write running_counts 260.0; commit 20.0; Spark jobs 1.0; tasks 4.0 |" in text
    limits = bench.limits(results)
    assert ("legacy batch on the compare path: 300 ms (median); its largest parts: write running_counts 260 ms, "
            "commit 20 ms.") in limits
    assert not any(limit.startswith("modern batch on the compare path") for limit in limits)
    figures = bench_results.bench_figures(results)
    assert figures["modern compare path: batch with records, median (ms)"] == (120.0, -1)


def test_a_messy_throughput_run_is_checked_and_shown_beside_the_clean_one(tmp_path: Path) -> None:
    """Both profiles' throughput is published only when each run equals the oracle (issue 38, item 7)."""
    results = _results()
    for by_workload in results["engines"].values():
        for lat in by_workload["running_counts"]["latency_by_trigger"].values():
            lat["matches_oracle"] = True
    messy = {"throughput_rps": 3000.0, "batches": 24, "batch_cap": 1600, "malformed_records": 20,
             "matches_oracle": False}
    results["engines"]["modern"]["running_counts"]["messy"] = messy
    assert bench_results.unchecked_runs(results) == ["modern running_counts: max throughput, messy profile"]
    with pytest.raises(bench.BenchDiffers, match="messy profile"):
        bench.publish(tmp_path, results)
    assert not (tmp_path / "latest.json").exists()
    messy["matches_oracle"] = True
    assert bench_results.unchecked_runs(results) == []
    markdown = bench.render_markdown(results)
    assert "| 5,000 | 0.25 | 0.50 | 10 | yes | – | – |" in markdown  # legacy: measured before the messy profile was
    assert "| 3,000 (24) | yes |" in markdown
    assert bench_results.bench_figures(results)["modern running_counts throughput, messy profile (records/s)"][0] == 3000


@pytest.mark.parametrize("records", [3_000, 200_000, 1_000_000])
def test_messy_throughput_batches_stay_within_half_the_lateness_margin(records: int) -> None:
    from kit.dataset import generate

    dataset = bench.messy_dataset(records)
    cap = bench.messy_cap(dataset)
    assert 0 < cap * 1000 / dataset.events_per_second <= dataset.lateness_margin_ms / 2
    assert round(records / cap) == 25  # 40 s of event time, 1.6 s per batch, whatever the size
    counts = dataset.kind_counts()
    assert all(counts[kind] > 0 for kind in ("late", "too_late", "duplicate", "bad_utf8", "bad_json",
                                            "missing_field", "bad_timestamp"))
    if records == 3_000:  # the slow tier's bench size: a stream that long places its too-late records
        assert len(generate(dataset)) == records


def test_state_values_differ_only_in_their_key() -> None:
    template = b'{"event_id":"e1","user":"u1","key":"k0001","ad_id":"ad-1","ad_type":"banner","event_type":"view","event_time":1767225600000}'
    values = bench.state_values(3, template)
    events = [parse_event(v)[0] for v in values]
    assert [e["key"] for e in events] == ["s0000000", "s0000001", "s0000002"]
    assert all({k: v for k, v in e.items() if k != "key"} == {k: v for k, v in parse_event(template)[0].items() if k != "key"}
               for e in events)


def test_raw_producer_and_consumer_read_every_record(bootstrap_servers: str, topic_factory, kafka: Kafka,
                                                     kafka_client: str) -> None:
    topic = topic_factory(partitions=3)
    values = [b"v%05d" % i for i in range(7_001)]
    assert bench.produce(bootstrap_servers, topic, values, 3, client=kafka_client) > 0
    ends = bench.round_robin_ends(topic, len(values), 3)[topic]
    assert ends == {0: 2_334, 1: 2_334, 2: 2_333}
    assert {tp.partition: o for tp, o in kafka.end_offsets(topic).items()} == ends
    assert [r.value for r in kafka.read_range(topic, 1, 0, 3)] == [b"v00001", b"v00004", b"v00007"]
    assert bench.consume_all(bootstrap_servers, topic, ends, client=kafka_client) > 0
    # Every value is a dead letter to the parse, and still counts as read: the parsing consumer gets to the end.
    assert bench.consume_all(bootstrap_servers, topic, ends, client=kafka_client, parse=True) > 0
    with pytest.raises(Exception, match="read 7001 of 7002 records"):
        bench.consume_all(bootstrap_servers, topic, {**ends, 0: ends[0] + 1}, idle_timeout_s=2, client=kafka_client)
    with pytest.raises(Exception, match=f"the raw parsing consumer \\({kafka_client}\\) read 7001 of 7002"):
        bench.consume_all(bootstrap_servers, topic, {**ends, 0: ends[0] + 1}, idle_timeout_s=2, client=kafka_client,
                          parse=True)


def test_readme_table_is_generated_from_the_results(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench.README_START}\nold\n{bench.README_END}\n\nafter\n")
    results = _results()
    bench.update_readme(readme, results)
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{bench.README_END}\n\nafter\n")
    assert "| legacy | running_counts | 5,000 | 0.25 | 0.50 | 700 / 1,900 | 9.09 |" in text
    assert "raw single kafka-python consumer 20,000 records/s (10,000 when it also parses every value)" in text
    markdown = bench.render_markdown(results)
    assert "| modern state growth ratio | 1.10 x | 1.30 x | yes |  |" in markdown
    assert "| legacy running_counts throughput / consumer that parses | 0.50 x | 1.00 x | NO | ×2.00 |" in markdown
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(ConfigError, match="no <!-- dmk-bench:start -->"):
        bench.update_readme(tmp_path / "plain.md", results)


def test_readme_performance_table_matches_the_latest_results() -> None:
    latest = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())
    for key in ("raw_consumer_rps", "raw_producer_rps", "state_growth_ratio", "machine", "command"):
        assert key in latest
    for engine in ("legacy", "modern"):
        for workload in ("running_counts", "ysb"):
            figures = latest["engines"][engine][workload]
            assert {"throughput_rps", "ratio_to_raw", "latency_ms"} <= set(figures)
            assert {"p50", "p95", "p99"} <= set(figures["latency_ms"])
    assert bench.readme_table(latest) in (ROOT / "README.md").read_text()


def test_cli_regenerates_the_table_and_rejects_bad_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results_file = tmp_path / "r.json"
    results_file.write_text(json.dumps(_results()))
    readme = tmp_path / "README.md"
    readme.write_text(f"{bench.README_START}\n{bench.README_END}\n")
    assert main(["bench", "--from-results", str(results_file), "--readme", str(readme)]) == 0
    assert bench.readme_table(_results()) in readme.read_text()
    assert main(["bench", "--from-results", str(results_file)]) == 2
    assert main(["bench", "--records", "50"]) == 2
    assert main(["bench", "--workloads", "nope"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "give --readme FILE too" in err
    assert "--records must be >= 100, got 50" in err
    assert "unknown workload(s) ['nope']" in err


def test_a_baseline_puts_every_figure_beside_the_earlier_run(tmp_path: Path) -> None:
    before = _results()
    path = tmp_path / "bench-before.json"
    path.write_text(json.dumps(before))
    now = _results(engines={
        "legacy": {"running_counts": dict(before["engines"]["legacy"]["running_counts"], throughput_rps=4000.0)},
        "modern": {"running_counts": dict(before["engines"]["modern"]["running_counts"], throughput_rps=6000.0)},
    })
    now["baseline"] = bench_results.load_baseline(path)
    text = bench.render_markdown(now)
    assert f"## Against the baseline ({path}, 2026-11-24T10:00:00Z)" in text
    # 20 % less throughput is a regression, 20 % more an improvement, an unchanged figure neither.
    assert "| legacy running_counts throughput (records/s) | 5,000 | 4,000 | 0.80× | REGRESSION |" in text
    assert "| modern running_counts throughput (records/s) | 5,000 | 6,000 | 1.20× | better |" in text
    assert "| legacy running_counts at 1 s: latency p99 (ms) | 1,900 | 1,900 | 1.00× |  |" in text
    assert "| legacy state growth ratio | 9.09 | 9.09 | 1.00× |  |" in text
    # Every figure of the results is there, once.
    assert sum(line.startswith("| ") for line in text.split("## Against the baseline")[1].splitlines()) == \
        1 + len(bench_results.bench_figures(now))
    # The previous run's latest.json is the default baseline.
    (tmp_path / "latest.json").write_text(json.dumps(before))
    assert bench_results.previous_results(tmp_path)["figures"] == bench_results.load_baseline(path)["figures"]
    (tmp_path / "not-bench.json").write_text("[]")
    with pytest.raises(ConfigError, match="is not a dmk bench results file"):
        bench_results.load_baseline(tmp_path / "not-bench.json")
    with pytest.raises(ConfigError, match="cannot read the baseline"):
        bench_results.load_baseline(tmp_path / "missing.json")


@pytest.mark.slow
def test_bench_runs_every_phase_on_both_engines(spark, bootstrap_servers: str, tmp_path: Path) -> None:
    settings = bench.BenchSettings(
        out_dir=tmp_path, records=3_000, partitions=4, latency_seconds=3, latency_rate=500, state_keys=20_000,
        bootstrap_servers=bootstrap_servers, command="pytest",
    )
    results, path = bench.run_bench(settings, spark=spark)
    assert json.loads(path.read_text()) == json.loads((tmp_path / "latest.json").read_text()) == results
    assert (tmp_path / "latest.md").read_text() == bench.render_markdown(results)
    assert results["raw_consumer_rps"] > 0 and results["raw_producer_rps"] > 0
    assert results["kafka_client"] == "confluent" and set(results["raw_clients"]) == {"confluent", "kafka-python"}
    assert results["raw_clients"]["confluent"]["consumer_rps"] == results["raw_consumer_rps"]
    assert results["raw_parsing_consumer_rps"] > 0
    assert results["latency_rate_rps"] == 500
    for engine in ("legacy", "modern"):
        for workload in ("running_counts", "ysb"):
            r = results["engines"][engine][workload]
            assert r["matches_oracle"] is True, (engine, workload)
            # the messy profile: malformed records through the dead-letter path, checked against the oracle too
            assert r["messy"]["matches_oracle"] is True and r["messy"]["throughput_rps"] > 0, (engine, workload)
            assert r["messy"]["malformed_records"] > 0
            # capped to tenths of the topic; the first batch with records is the warm-up, not measured
            assert r["batches"] >= bench.THROUGHPUT_BATCHES - 1 - bench.WARMUP_BATCHES
            assert r["throughput_rps"] > 0
            assert r["ratio_to_parsing"] == round(r["throughput_rps"] / results["raw_parsing_consumer_rps"], 3)
            assert set(r["latency_by_trigger"]) == ({"1 s", "0.5 s"} if engine == "legacy" else {"0 seconds", "500 milliseconds"})
            for lat in r["latency_by_trigger"].values():
                # A percentile is published only where MIN_ROWS_BEYOND rows lie beyond it (ysb's few windows back
                # none); those published are ordered, and every figure is within the rows' maximum.
                assert lat["rows_measured"] > 0 and lat["max"] > 0, (engine, workload)
                backed = {q: lat["rows_measured"] * (1 - share) >= bench.MIN_ROWS_BEYOND
                          for q, share in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))}
                assert {q: lat[q] is not None for q in backed} == backed, (engine, workload, lat)
                published = [lat[q] for q in ("p50", "p95", "p99") if backed[q]]
                assert published == sorted(published) and all(v <= lat["max"] for v in published), (engine, workload)
            # every run stays idle for a while: legacy runs empty batches, modern idle triggers (or, with a
            # watermark to move, no-data micro-batches)
            assert all(lat["idle_batch_ms_median"] is not None for lat in r["latency_by_trigger"].values())
    for engine, growth in results["state_growth"].items():
        assert growth["keys_to"] == 20_000
        assert growth["processing_ms_small"] and growth["processing_ms_large"], engine
    assert results["state_growth_ratio"] == results["state_growth"]["modern"]["ratio"]
    # The compare path's batch: a real dmk compare run, equal to the oracle, each engine's batches measured.
    cost = results["fixed_cost"]
    assert cost["equivalent"] is True and cost["records"] == bench.FIXED_COST_RECORDS
    for engine in ("legacy", "modern"):
        figures = cost["engines"][engine]
        assert figures["records"] == bench.FIXED_COST_RECORDS and figures["batch_ms_median"] > 0
        assert figures["warmup_seconds"] > 0 and figures["breakdown_ms"]["Spark jobs"] >= 1
