"""``dmk bench --suite nexmark``: a query publishes figures only if every run of it equals its oracle.

The figures themselves are benchmarks (benchmarks/results/nexmark-*.json), never asserted here. The unit tests
check the verdict, the files and README's table on results shaped as the suite writes them; the slow test runs
the suite itself, on a small stream, on both engines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compare import bench
from compare.bench import nexmark
from compare.cli import main
from kit import workloads
from kit.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore:DStream is deprecated:FutureWarning")

ROOT = Path(__file__).resolve().parent.parent


def _figures(rps: float, p99: float, *, throughput_ok: bool = True, latency_ok: bool = True,
             latency_rows: int = 500) -> dict:
    return {"throughput_rps": rps, "batches": 9, "batch_cap": 2_000, "output_rows": 800,
            "matches_oracle": throughput_ok,
            "latency": {"rate_rps": 1_000.0, "records": 5_000, "output_rows": latency_rows,
                        "rows_measured": 400, "p50": p99 / 2, "p95": p99,
                        "p99": p99, "max": p99, "matches_oracle": latency_ok, "batch_ms_median": 300.0,
                        "idle_batch_ms_median": 100.0, "scheduling_delay_ms_max": None}}


def _results(queries: dict) -> dict:
    return {"suite": "nexmark", "created": "2026-12-01T22:00:00Z", "command": "dmk bench --suite nexmark --quick",
            "quick": True, "records": 100_000, "partitions": 8, "broker": "embedded", "master": "local[2]",
            "machine": {"cpu": "x", "cores": 2, "memory_gb": 23.0, "os": "Linux", "python": "3.11", "java": "17",
                        "versions": {"pyspark": "4.3.0"}},
            "kafka_client": "confluent", "latency_rate_rps": 1_000.0, "latency_seconds": 10.0, "warmup_runs": 0,
            "queries": queries, "run_seconds": 321.0}


def test_a_query_equal_to_its_oracle_everywhere_is_published_with_the_engines_ratio() -> None:
    judged = nexmark._judged({"legacy": _figures(4_000.0, 900.0), "modern": _figures(6_000.0, 700.0)})
    assert judged["published"] is True and judged["modern_over_legacy"] == 1.5
    assert judged["legacy"]["throughput_rps"] == 4_000.0 and judged["modern"]["latency"]["p99"] == 700.0


def test_a_query_that_differs_in_any_run_publishes_no_figure() -> None:
    judged = nexmark._judged({"legacy": _figures(4_000.0, 900.0, throughput_ok=False),
                              "modern": _figures(6_000.0, 700.0, latency_ok=False)})
    assert judged == {"published": False, "withheld": ["legacy throughput: differs from the oracle",
                                                       "modern latency: differs from the oracle"]}
    table = nexmark.readme_table(_results({"nexmark_q7": judged}))
    row = next(line for line in table.splitlines() if line.startswith("| nexmark_q7"))
    assert row == ("| nexmark_q7 | no figure is published: legacy throughput: differs from the oracle; modern "
                   "latency: differs from the oracle | | | | | no |")
    assert "4,000" not in table and "6,000" not in table


def test_a_run_without_output_rows_checks_nothing_and_publishes_no_figure() -> None:
    # q11's sessions, say, when no bidder pauses for a gap: an empty output equals an empty oracle, proving nothing
    judged = nexmark._judged({"legacy": _figures(4_000.0, 900.0, latency_rows=0), "modern": _figures(6_000.0, 700.0)})
    assert judged == {"published": False, "withheld": ["legacy latency: no output rows, nothing checked"]}


def test_the_table_shows_throughput_ratio_and_p99_per_query() -> None:
    results = _results({
        "nexmark_q1": nexmark._judged({"legacy": _figures(4_000.0, 900.0), "modern": _figures(6_000.0, 700.0)}),
        "nexmark_q5": nexmark._judged({"legacy": _figures(3_000.0, 1_500.0), "modern": _figures(1_500.0, 800.0)}),
    })
    rows = [line for line in nexmark.readme_table(results).splitlines() if line.startswith("| nexmark_")]
    assert rows == ["| nexmark_q1 | 4,000 | 6,000 | 1.50 | 900 | 700 | yes |",
                    "| nexmark_q5 | 3,000 | 1,500 | 0.50 | 1,500 | 800 | yes |"]


def test_the_report_names_each_missed_target_with_what_the_runs_measured() -> None:
    """A target missed (modern throughput below legacy's, modern p99 above legacy's) is listed with both figures and
    both engines' median batches; a query meeting both is not; a withheld query is not judged."""
    slow = {**_figures(3_000.0, 600.0), "batch_ms_median": 820.0}
    laggard = _figures(6_000.0, 1_500.0)
    laggard["latency"]["batch_ms_median"] = 900.0
    queries = {
        "nexmark_q5": nexmark._judged({"legacy": {**_figures(4_000.0, 900.0), "batch_ms_median": 510.0},
                                       "modern": slow}),
        "nexmark_q7": nexmark._judged({"legacy": _figures(4_000.0, 900.0), "modern": laggard}),
        "nexmark_q4": nexmark._judged({"legacy": _figures(4_000.0, 900.0), "modern": _figures(5_000.0, 800.0)}),
        "nexmark_q8": nexmark._judged({"legacy": _figures(4_000.0, 900.0, throughput_ok=False),
                                       "modern": _figures(1.0, 9_000.0)}),
    }
    assert nexmark.target_misses(_results(queries)) == [
        "nexmark_q5 throughput: modern 3,000 records/s, 0.75× legacy's 4,000; median batch (2,000 records at most): "
        "modern 820 ms, legacy 510 ms",
        "nexmark_q7 latency: modern 1,500 ms against legacy 900 ms at 1,000 records/s; median batch with records: "
        "modern 900 ms, legacy 300 ms (idle 100 ms; scheduling delay at most – ms)",
    ]
    report = nexmark.nexmark_markdown(_results(queries))
    assert report.endswith("Missed, with what the runs measured:\n\n- nexmark_q5 throughput: modern 3,000 records/s, "
                           "0.75× legacy's 4,000; median batch (2,000 records at most): modern 820 ms, legacy 510 ms\n"
                           "- nexmark_q7 latency: modern 1,500 ms against legacy 900 ms at 1,000 records/s; median batch "
                           "with records: modern 900 ms, legacy 300 ms (idle 100 ms; scheduling delay at most – ms)\n")
    met = _results({"nexmark_q4": queries["nexmark_q4"]})
    profiled = _results({"nexmark_q2": queries["nexmark_q7"]})
    assert nexmark.target_misses(profiled)[0].endswith(f"; {nexmark.PROFILED['nexmark_q2']}")
    assert nexmark.target_misses(met) == [] and nexmark.nexmark_markdown(met).endswith("All met.\n")


def test_results_files_and_readme_block(tmp_path: Path) -> None:
    results = _results({"nexmark_q1": nexmark._judged({"legacy": _figures(4_000.0, 900.0),
                                                        "modern": _figures(6_000.0, 700.0)})})
    path = nexmark.publish_nexmark(tmp_path, results)
    assert path.name == "nexmark-20261201T220000.json"
    assert json.loads(path.read_text()) == json.loads((tmp_path / "nexmark-latest.json").read_text()) == results
    assert (tmp_path / "nexmark-latest.md").read_text() == nexmark.nexmark_markdown(results)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{nexmark.README_START}\nold\n{nexmark.README_END}\n\nrest\n")
    nexmark.update_readme(readme, results)
    assert readme.read_text() == (f"# x\n\n{nexmark.README_START}\n{nexmark.readme_table(results)}"
                                  f"{nexmark.README_END}\n\nrest\n")
    readme.write_text("# no block\n")
    with pytest.raises(ConfigError, match="no <!-- dmk-bench-nexmark:start -->"):
        nexmark.update_readme(readme, results)
    # `dmk bench --from-results` regenerates the Nexmark table from a Nexmark results file, the kit's left alone.
    readme.write_text(f"{bench.README_START}\nkit\n{bench.README_END}\n{nexmark.README_START}\nold\n{nexmark.README_END}\n")
    assert main(["bench", "--from-results", str(path), "--readme", str(readme)]) == 0
    assert readme.read_text() == (f"{bench.README_START}\nkit\n{bench.README_END}\n{nexmark.README_START}\n"
                                  f"{nexmark.readme_table(results)}{nexmark.README_END}\n")


def test_readme_nexmark_table_matches_the_latest_results() -> None:
    latest = ROOT / "benchmarks" / "results" / "nexmark-latest.json"
    results = json.loads(latest.read_text(encoding="utf-8"))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(nexmark.README_START, 1)[1].split(nexmark.README_END, 1)[0]
    assert block == f"\n{nexmark.readme_table(results)}", (
        "README's Nexmark table is not the latest results': run "
        "`dmk bench --from-results benchmarks/results/nexmark-latest.json --readme README.md`"
    )
    assert all(q["published"] for q in results["queries"].values())


def test_unknown_queries_are_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="unknown Nexmark query nexmark_q99; .* runs any of nexmark_q0"):
        nexmark.NexmarkBench(bench.BenchSettings(), ("nexmark_q99",))
    assert main(["bench", "--suite", "nexmark", "--workloads", "running_counts"]) == 2
    assert "unknown Nexmark query running_counts" in capsys.readouterr().err
    assert nexmark.NexmarkBench(bench.BenchSettings()).names == tuple(workloads.NEXMARK_NAMES)
    assert nexmark.NexmarkBench(bench.BenchSettings(quick=True)).records == nexmark.QUICK_RECORDS


def test_dmk_compare_help_names_every_nexmark_query(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(f"{name}," in text or f"{name})" in text for name in workloads.NEXMARK_NAMES)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # eight engine runs: 12 min 41 s at load 11
def test_the_nexmark_suite_runs_each_query_on_both_engines(spark, bootstrap_servers: str, tmp_path: Path) -> None:
    settings = bench.BenchSettings(out_dir=tmp_path, records=4_000, partitions=4, latency_seconds=3,
                                   latency_rate=500, bootstrap_servers=bootstrap_servers, command="pytest")
    results, path = nexmark.run_nexmark(nexmark.NexmarkBench(settings, ("nexmark_q1", "nexmark_q7")), spark=spark)
    assert json.loads(path.read_text()) == json.loads((tmp_path / "nexmark-latest.json").read_text()) == results
    assert list(results["queries"]) == ["nexmark_q1", "nexmark_q7"] and results["records"] == 4_000
    for name, query in results["queries"].items():
        assert query["published"] is True, (name, query)
        for engine in ("legacy", "modern"):
            figures = query[engine]
            assert figures["matches_oracle"] is True and figures["latency"]["matches_oracle"] is True
            assert figures["throughput_rps"] > 0 and figures["batches"] >= 1
        assert query["modern_over_legacy"] == round(query["modern"]["throughput_rps"]
                                                    / query["legacy"]["throughput_rps"], 3)
    # q1 emits a row per bid: its latency runs measure rows after the warm-up on both engines
    assert all(results["queries"]["nexmark_q1"][e]["latency"]["rows_measured"] > 0 for e in ("legacy", "modern"))
    assert not list(tmp_path.glob("nexmark-rejected-*"))
