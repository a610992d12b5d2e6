"""The report's reading of a run: did each engine keep up, where a batch's time went, what changed against a
baseline; and, in the slow tier, the HTML page of a real run in headless Chromium.

The measurements are checked on hand-made inputs with known answers (batch logs, Spark event logs, metrics);
``tests/test_compare.py`` checks them on real runs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compare.cli import main
from compare.measure import after_startup, backlog, batch_breakdown, keeping_up, spark_jobs, time_breakdown
from compare.metrics import CompareMetrics, Percentiles
from compare.report import baseline_rows, render, smoothed_rate
from kit import workloads
from kit.layout import BATCHES_LOG
from legacy.engine import LEGACY
from modern.engine import MODERN
from tests._metrics import compare_metrics, engine, kept_up, settings


def _spans(ended_s: list[float], records: list[int], processing_ms: list[int], scheduling_ms: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"ended_ms": [int(s * 1000) for s in ended_s], "records": records,
                         "processing_ms": processing_ms, "scheduling_ms": scheduling_ms})


def test_an_engine_that_keeps_up_and_one_that_falls_behind() -> None:
    produced = np.arange(0, 10_000, 1.0)  # 1,000 records/s for 10 s
    # 1 s batches of 1,000 records, each processed in 400 ms: nothing piles up.
    steady = _spans([t + 1.4 for t in range(10)], [1000] * 10, [400] * 10, [0] * 10)
    kept = keeping_up("legacy", steady, produced, 1.0, by_clock=True)
    assert kept is not None and kept.kept_up
    assert (kept.input_rps, kept.capacity_rps, kept.batch_ms) == (1000.1, 2500.0, 400.0)
    # At the replay's last record (9.999 s) the batches ending up to 9.4 s had taken 9,000 records.
    assert kept.backlog_at_end == 1000
    assert kept.reason.startswith("legacy kept up: batches took 0.40 s (median) against a 1 s interval;")
    # It never fell behind: at the first batch's end (1.4 s) 400 records waited, within three batches' worth.
    assert kept.caught_up_ms == 1400.0

    # Batches of 2.5 s against a 1 s interval: each ends 1.5 s later than the one before.
    slow = _spans([1 + 2.5 * (i + 1) for i in range(6)], [1000] * 6, [2500] * 6, [1500 * i for i in range(6)])
    behind = keeping_up("legacy", slow, produced, 1.0, by_clock=True)
    assert behind is not None and not behind.kept_up
    assert behind.capacity_rps == 400.0 and behind.max_delay_ms == 7500.0
    assert behind.backlog_at_end == 7000  # three batches (8.5 s) ended by 10 s: 3,000 of 10,000 records
    assert "legacy fell behind: batches took 2.50 s (median) against a 1 s interval; scheduling delay grew to " \
           "7.5 s; processed 400 records/s of work" in behind.reason

    # Its first batch ended with 2,501 records waiting (within three batches' worth): no start-up backlog, it
    # fell behind afterwards.
    assert behind.caught_up_ms == 3500.0

    # A cold start: the first batch (1 s of input) takes 4 s, the next ones 200 ms each, working the backlog off.
    cold = _spans([5, 5.2, 5.4, 5.6, 5.8, 6.2, 7.2, 8.2, 9.2, 10.2], [1000] * 10, [4000] + [200] * 9,
                  [0, 3000, 2200, 1400, 600, 0, 0, 0, 0, 0])
    started = keeping_up("legacy", cold, produced, 1.0, by_clock=True)
    assert started is not None and started.kept_up
    # Waiting at the batch ends: 4,001 records at 5 s, 3,201 at 5.2 s, 2,401 at 5.4 s: within three batches'
    # worth (3,000) from there on.
    assert started.caught_up_ms == 5400.0
    steady = after_startup(pd.DataFrame({"emitted_at": [5000, 9000], workloads.LAST_INPUT_TS: [900, 8800]}), 0, started)
    assert steady.tolist() == [200]  # the row whose input came during the start-up is left out
    never = dataclasses.replace(started, caught_up_ms=None)
    assert after_startup(pd.DataFrame({"emitted_at": [9000], workloads.LAST_INPUT_TS: [8800]}), 0, never).empty

    # Back-to-back micro-batches (interval 0) judged by how much input waited.
    micro = _spans([2, 4, 6, 8, 10], [2000] * 5, [1900] * 5, [0] * 5)
    fine = keeping_up("modern", micro, produced, 0.0, by_clock=False)
    assert fine is not None and fine.kept_up and fine.reason.startswith("modern kept up: micro-batches took 1.90 s")
    # Nothing paced, or nothing processed: no verdict.
    assert keeping_up("modern", micro.assign(records=0), produced, 0.0, by_clock=False) is None


def test_backlog_counts_input_produced_and_not_yet_processed() -> None:
    spans = pd.DataFrame({"ended_ms": [3000, 1000, 2000], "records": [10, 3, 0]})
    produced = np.array([0, 500, 900, 1000, 1500, 2500, 2600, 2700, 2800, 2900, 2950, 2999, 3000, 3000, 3000, 3001])
    # By 1 s: 4 produced, 3 processed; by 2 s: 5 and 3; by 3 s: 15 and 13.
    assert backlog(spans, produced).to_dict("list") == {"at_ms": [1000, 2000, 3000], "records": [1, 2, 2]}
    # A batch re-run after a restart counts again: never more processed than produced.
    assert backlog(spans.assign(records=[10, 9, 0]), produced)["records"].tolist() == [0, 0, 0]


def test_the_throughput_line_is_a_moving_average_of_records_per_second() -> None:
    # Batches ending at 2, 4 and 5 s with 400, 300 and 100 records: the first is taken as 1 s long, the
    # second spreads over the two seconds since the first.
    at, rate = smoothed_rate(pd.Series([4.0, 2.0, 5.0]), pd.Series([300, 400, 100]), window_s=1)
    assert at.tolist() == [2.0, 3.0, 4.0, 5.0] and rate.tolist() == [400.0, 150.0, 150.0, 100.0]
    # Averaged over 3 s, centred.
    assert smoothed_rate(pd.Series([4.0, 2.0, 5.0]), pd.Series([300, 400, 100]), window_s=3)[1].tolist() == \
        [275.0, 700 / 3, 400 / 3, 125.0]


def _event_log(path: Path, lines: list[dict], *, cut: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + cut, encoding="utf-8")


def _job(job: int, stages: list[int], **properties: str) -> dict:
    return {"Event": "SparkListenerJobStart", "Job ID": job, "Stage IDs": stages, "Properties": properties}


def _task(stage: int, ms: int) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {"Executor Run Time": ms}}


def test_spark_jobs_and_tasks_per_batch_come_from_the_event_log(tmp_path: Path) -> None:
    batch = "spark.streaming.internal.batchTime"
    out = tmp_path / "legacy"
    # A rolling log (Spark 4's default: a directory per application) and a plain one cut short by a kill.
    _event_log(out / "eventlog" / "eventlog_v2_local-1" / "events_1_local-1", [
        _job(0, [0, 1], **{batch: "1000"}), _task(0, 5), _task(0, 7), _task(1, 3),
        _job(1, [1, 2], **{batch: "1000"}), _task(2, 4),  # stage 1 ran in job 0: skipped here
    ])
    _event_log(out / "eventlog" / "eventlog_v2_local-1" / "events_2_local-1", [
        _job(2, [3], **{batch: "2000"}), _task(3, 9), _task(3, 1),
    ])
    (out / "eventlog" / "eventlog_v2_local-1" / "appstatus_local-1").write_text("")
    _event_log(out / "eventlog" / "local-2.inprogress", [
        _job(0, [0], **{batch: "3000"}), _task(0, 2), _job(1, [1]),  # a job of no batch
    ], cut='{"Event": "SparkListenerTaskEnd", "Stage I')
    jobs = spark_jobs(out / "eventlog")
    assert jobs[["job", "stages", "tasks", "task_ms"]].values.tolist() == [
        [0, 2, 3, 15], [1, 2, 1, 4], [2, 1, 2, 10], [0, 1, 1, 2], [1, 1, 0, 0]]

    log = out / BATCHES_LOG
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(row) + "\n" for row in [
        {"batch_time_ms": t, "records": r, "scheduling_delay_ms": d, "processing_delay_ms": 90, "completed_ms": t,
         "output_ops": [{"id": 0, "name": "write counts", "duration_ms": w},
                        {"id": 1, "name": "commit", "duration_ms": 10}]}
        for t, r, d, w in ((1000, 50, 0, 80), (2000, 0, 5, 20), (3000, 70, 20, 60))
    ]))
    batches = batch_breakdown(LEGACY.record(out), out)
    assert batches.columns.tolist() == ["batch", "records", "scheduling delay", "write counts", "commit",
                                        "Spark jobs", "tasks"]
    assert batches[["batch", "Spark jobs", "tasks"]].values.tolist() == [["1000", 2, 4], ["2000", 1, 2],
                                                                         ["3000", 1, 1]]
    # Medians over the batches with records (1000 and 3000).
    assert time_breakdown(batches) == [("scheduling delay", 10.0), ("write counts", 70.0), ("commit", 10.0),
                                       ("Spark jobs", 1.5), ("tasks", 2.5)]


def test_modern_phases_are_the_progress_durations_and_its_jobs_are_found_by_query_and_batch(tmp_path: Path) -> None:
    out = tmp_path / "modern"
    progress = {"id": "q-1", "batchId": 4, "numInputRows": 30, "timestamp": "2026-11-25T10:00:00.000Z",
                "durationMs": {"latestOffset": 12, "walCommit": 20, "queryPlanning": 40, "addBatch": 300,
                               "commitOffsets": 15, "getBatch": 0, "triggerExecution": 390},
                "stateOperators": [{"allUpdatesTimeMs": 25, "allRemovalsTimeMs": 5, "commitTimeMs": 60}]}
    (out / "progress").mkdir(parents=True)
    (out / "progress" / "counts.jsonl").write_text(json.dumps(progress) + "\n")
    _event_log(out / "eventlog" / "local-1", [
        _job(7, [9], **{"sql.streaming.queryId": "q-1", "streaming.sql.batchId": "4"}), _task(9, 3), _task(9, 3),
        _job(8, [10], **{"sql.streaming.queryId": "q-2", "streaming.sql.batchId": "4"}), _task(10, 3),
    ])
    assert time_breakdown(batch_breakdown(MODERN.record(out), out, "counts")) == [
        ("latestOffset (Kafka end offsets)", 12.0), ("walCommit (offset log)", 20.0), ("getBatch", 0.0),
        ("queryPlanning", 40.0), ("addBatch (read, process, state, sink)", 300.0),
        ("commitOffsets (commit log)", 15.0), ("state updates (task time)", 30.0), ("state commit (task time)", 60.0),
        ("Spark jobs", 1.0), ("tasks", 2.0)]


def _metrics(throughput: float, p99: float, lost: int, batch_ms: float) -> CompareMetrics:
    figures = engine(throughput_rps=throughput, lost_rows=lost, output_rows=9,
                     latency_ms=Percentiles(p50=500.0, p95=900.0, p99=p99, max=1200.0), kept_up=kept_up(batch_ms),
                     time_breakdown_ms={"commit": 10.0, "tasks": 4.0})
    return compare_metrics(figures, figures, equivalent=not lost, verdict="DIFFERENT" if lost else "EQUIVALENT",
                           settings=settings(rate_rps=1000.0))


def test_a_baseline_marks_what_got_worse_and_what_got_better(tmp_path: Path) -> None:
    before, now = tmp_path / "before", tmp_path / "now"
    for path, metrics in ((before, _metrics(1000.0, 1000.0, 0, 400.0)), (now, _metrics(850.0, 1050.0, 1, 300.0))):
        path.mkdir()
        metrics.write(path)
    rows = {(figure, engine): rest for figure, engine, *rest in baseline_rows(
        CompareMetrics.read(now), CompareMetrics.read(before))}
    # 15 % less throughput: a regression; 5 % more p99: within the run-to-run spread; a lost row: a regression.
    assert rows["throughput (input records/s)", "legacy"] == ["1,000", "850", "0.85×", "REGRESSION"]
    assert rows["latency p99 (ms)", "modern"] == ["1,000", "1,050", "1.05×", ""]
    assert rows["lost output rows", "legacy"] == ["0", "1", "new", "REGRESSION"]
    assert rows["batch duration, median (ms)", "legacy"] == ["400", "300", "0.75×", "better"]
    assert rows["time: commit (median)", "legacy"] == ["10.0", "10.0", "1.00×", ""]
    assert rows["dead letters", "legacy"][3] == ""  # neither better nor worse

    assert main(["report", str(now), "--baseline", str(before)]) == 1  # not equivalent: a row was lost
    text = (now / "report.md").read_text()
    assert "## Against the baseline" in text and "| throughput (input records/s) | legacy | 1,000 | 850 | 0.85× | " \
        "REGRESSION |" in text
    assert '<tr class="regression"><td>throughput (input records/s)</td>' in (now / "report.html").read_text()
    with pytest.raises(Exception, match="not a dmk compare run directory"):
        render(now, baseline=tmp_path / "nowhere")


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.mark.slow
def test_the_report_of_a_real_run_reads_well_in_chromium(bootstrap_servers: str, tmp_path: Path) -> None:
    """A real run's report.html in headless Chromium (Debian's package): no console errors, every plot an image
    that decoded, nothing wider than a 1280 px window, and a printable page."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "install Debian's chromium (apt-get install chromium): the report test drives it"
    out = tmp_path / "run"
    code = main(["compare", "running_counts", "--records", "12000", "--events-per-second", "300", "--users", "200",
                 "--out", str(out), "--bootstrap-servers", bootstrap_servers])
    assert code == 0
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((out / "report.html").resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.alt, i.complete, i.naturalWidth])")
        widest = page.evaluate("document.documentElement.scrollWidth")
        headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
        shot = page.screenshot(full_page=True)
        page.emulate_media(media="print")
        pdf = page.pdf(format="A4")
        browser.close()
    assert errors == []
    assert sorted(alt for alt, _, _ in images) == ["backlog", "batch_duration", "latency_cdf", "throughput"]
    assert all(complete and width > 0 for _, complete, width in images), images
    assert widest <= 1280
    assert headings[:3] == ["Did each engine keep up?", "Summary", "Where the time goes"]
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and pdf[:5] == b"%PDF-" and len(pdf) > 50_000
