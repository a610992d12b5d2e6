"""The ``metrics.json`` contract (:mod:`compare.metrics`): written and read by the same types, and a file of
another version, of none, or of the other kind of run refused with one line that names the file and the fix."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from compare.cli import main
from compare.metrics import (
    METRICS_FILE,
    VERSION,
    BatchesCompared,
    CompareMetrics,
    DiffCounts,
    JobFigures,
    JobsMetrics,
    JobsOracle,
    MetricsError,
    MetricsVersionError,
    read_metrics,
)
from tests._metrics import compare_metrics, engine, kept_up


def _jobs_metrics(**changes: object) -> JobsMetrics:
    figures = JobFigures(output_rows=3, input_records=5, input_kind="kafka", seconds=1.5, batches=2,
                         command="python job.py", throughput_rps=10.0, result_latency_ms=None, rows_compared=3)
    values = dict(input="c.jsonl", records=5, key=("customer",), mode="final", output="topic", equivalent=True,
                  jobs_agree=True, modern_vs_legacy=DiffCounts(0, 0, 0, 3), summary="",
                  jobs={"legacy": figures, "modern": dataclasses.replace(figures, printed_stream="counts")},
                  legacy_python2=None, verdict="EQUIVALENT", warnings=())
    return JobsMetrics(**{**values, **changes})  # type: ignore[arg-type]


def test_both_documents_round_trip_through_the_file(tmp_path: Path) -> None:
    run = compare_metrics(modern=engine(kept_up=kept_up(), kills_at_s=(3.5,), time_breakdown_ms={"commit": 10.0}))
    run.write(tmp_path)
    data = json.loads((tmp_path / METRICS_FILE).read_text())
    assert (data["version"], data["kind"]) == (VERSION, "compare")
    # The shape the reports, the docs and the slow tests read: nested objects and lists of plain values.
    assert data["engines"]["modern"]["kept_up"]["batch_ms"] == 400.0 and data["engines"]["legacy"]["kept_up"] is None
    assert data["engines"]["modern"]["kills_at_s"] == [3.5] and data["oracle"] == {"rows": 2, "dead_letters": 3,
                                                                                   "late_dropped": 0}
    assert data["checks"][0] == {"part": "rows", "engine": "legacy", "ok": True, "detail": "equal"}
    assert data["settings"]["legacy_job"] == "legacy.workloads.running_counts:build"
    assert CompareMetrics.read(tmp_path) == run == read_metrics(tmp_path)

    jobs = _jobs_metrics()
    other = tmp_path / "jobs"
    other.mkdir()
    jobs.write(other)
    data = json.loads((other / METRICS_FILE).read_text())
    # Only the printed outputs name their stream; batches and oracle only when asked for: absent, not null.
    assert "printed_stream" not in data["jobs"]["legacy"] and data["jobs"]["modern"]["printed_stream"] == "counts"
    assert "batches" not in data and "oracle" not in data
    assert JobsMetrics.read(other) == jobs == read_metrics(other)
    full = _jobs_metrics(batches=BatchesCompared(3, {"batch": 2, "input": [4, 8], "keys": ["c1"]}),
                         oracle=JobsOracle(3, DiffCounts(0, 0, 0, 3), DiffCounts(1, 0, 0, 2)))
    full.write(other)
    assert JobsMetrics.read(other) == full
    assert json.loads((other / METRICS_FILE).read_text())["oracle"]["modern_vs_oracle"]["rows_missing"] == 1


@pytest.mark.parametrize(("version", "held"), [
    (VERSION + 1, f"has metrics version {VERSION + 1}"),
    (None, "has no metrics version (written by a dmk before versioned metrics)"),
])
def test_a_file_of_another_version_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int | None, held: str,
) -> None:
    data = compare_metrics().to_json()
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    (tmp_path / METRICS_FILE).write_text(json.dumps(data))
    path = tmp_path / METRICS_FILE
    with pytest.raises(MetricsVersionError) as refused:
        CompareMetrics.read(tmp_path)
    assert str(refused.value) == f"{path} {held}; this dmk reads version {VERSION}: re-run the compare with this dmk"
    assert (refused.value.path, refused.value.expected, refused.value.actual) == (str(path), VERSION, version)
    assert main(["report", str(tmp_path)]) == 2
    printed = capsys.readouterr().err.strip()
    assert printed.count("\n") == 0 and f"{path} {held}" in printed and "re-run the compare with this dmk" in printed
    assert not (tmp_path / "report.md").exists()


def test_the_other_kind_of_run_a_missing_or_unknown_field_and_no_file_are_refused(tmp_path: Path) -> None:
    _jobs_metrics().write(tmp_path)
    with pytest.raises(MetricsError, match=r"is the metrics of a dmk compare-jobs run, not of a dmk compare run; give"):
        CompareMetrics.read(tmp_path)
    data = compare_metrics().to_json()
    del data["engines"]["modern"]["kept_up"]
    (tmp_path / METRICS_FILE).write_text(json.dumps(data))
    with pytest.raises(MetricsError, match=r"engines\.modern\.kept_up should be a value, got nothing; re-run"):
        CompareMetrics.read(tmp_path)
    data = compare_metrics().to_json()
    data["settings"]["batch_ms"] = 1000
    (tmp_path / METRICS_FILE).write_text(json.dumps(data))
    with pytest.raises(MetricsError, match=r"settings\.batch_ms is not a field of RunSettings; re-run"):
        CompareMetrics.read(tmp_path)
    with pytest.raises(MetricsError, match="is not a dmk compare run directory"):
        CompareMetrics.read(tmp_path / "nowhere")
