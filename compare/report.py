"""Render a compare run directory: ``report.md`` and a self-contained ``report.html`` with PNG plots.

Everything is read back from the run directory (``metrics.json``, ``data/*.parquet``, ``diff/``), so
``dmk report RUN_DIR`` re-renders a run without re-running it, and ``dmk report RUN_DIR --baseline OLD_RUN``
puts a previous run beside it, figure by figure. The report says whether each engine kept up with the replay
and why, where a batch's time goes, and shows plots (``plots/*.png``, embedded in the HTML as data URIs):
latency CDF, throughput (a moving average against the replay rate), input waiting over time, and batch
durations with scheduling delays; each engine keeps its colour in every plot.

Example::

    render(Path("runs/rc"))      # writes runs/rc/report.md, runs/rc/report.html, runs/rc/plots/*.png
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from compare.measure import KEPT_UP_BATCHES
from compare.metrics import METRICS_FILE, CompareMetrics, EngineMetrics
from kit import layout

__all__ = ["baseline_rows", "change", "load_metrics", "render", "smoothed_rate", "summary_rows", "verdict_lines"]

ENGINES = ("legacy", "modern")
_COLORS = dict(zip(ENGINES, ("#d62728", "#1f77b4"), strict=True))
"""Each engine's colour in the plots, by its place in :data:`ENGINES`."""


def load_metrics(run_dir: Path) -> CompareMetrics:
    """``metrics.json`` of a compare run directory (:meth:`compare.metrics.CompareMetrics.read`).

    Raises:
        MetricsError: not a compare run directory, or its metrics.json is damaged or of another shape.
        MetricsVersionError: its metrics.json is of another version (the message says to re-run the compare).
    """
    return CompareMetrics.read(Path(run_dir))


def _series(run_dir: Path, name: str) -> pd.DataFrame:
    path = run_dir / "data" / f"{name}.parquet"
    return pd.read_parquet(path) if path.exists() else pd.DataFrame()


SMOOTHING_S = 5
"""The throughput plot's moving window (s): a batch's records spread over the seconds its batch covers."""


def _plots(run_dir: Path, metrics: CompareMetrics) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = run_dir / "plots"
    target.mkdir(exist_ok=True)
    engines = metrics.engines
    rate = metrics.settings.rate_rps

    def since_replay(engine: str, ms: pd.Series) -> pd.Series:
        """Seconds since the engine's replay began (each engine has its own replay, at the same pace)."""
        figures = engines.get(engine)
        start = (figures.replay_started_ms if figures else None) or ms.min()
        return (ms - start) / 1000

    def latency_cdf(ax: Any, engine: str) -> None:  # a matplotlib Axes
        latency = _series(run_dir, f"latency_{engine}")
        if not latency.empty:
            values = np.sort(latency["latency_ms"].to_numpy()) / 1000
            ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=engine, color=_COLORS[engine])

    def throughput(ax: Any, engine: str) -> None:
        batches = _series(run_dir, f"timeline_{engine}")
        if batches.empty:
            return
        ax.plot(*smoothed_rate(since_replay(engine, batches["completed_ms"]), batches["records"]),
                label=f"{engine} ({SMOOTHING_S} s moving average)", color=_COLORS[engine])
        if rate and engine == ENGINES[-1]:
            ax.axhline(rate, color="#555", linestyle="--", linewidth=1, label=f"replay rate ({rate:,.0f} records/s)")

    def waiting(ax: Any, engine: str) -> None:
        frame = _series(run_dir, f"backlog_{engine}")
        figures = engines.get(engine)
        input_rps = figures.kept_up.input_rps if figures and figures.kept_up else None
        if frame.empty or not input_rps:
            return
        # From nothing waiting when the replay began; between batches the input waiting grows, at each batch's end
        # it drops by what the batch took.
        at_s = np.concatenate([[0.0], since_replay(engine, frame["at_ms"]).to_numpy()])
        ax.plot(at_s, np.concatenate([[0.0], frame["records"] / input_rps]), label=engine, color=_COLORS[engine])

    def durations(ax: Any, engine: str) -> None:
        batches = _series(run_dir, f"timeline_{engine}")
        if batches.empty:
            return
        seconds = since_replay(engine, batches["completed_ms"])
        ax.plot(seconds, batches["duration_ms"] / 1000, ".", label=f"{engine} batch duration",
                color=_COLORS[engine], markersize=3)
        if batches["scheduling_delay_ms"].any():
            ax.plot(seconds, batches["scheduling_delay_ms"] / 1000, "x", label=f"{engine} scheduling delay",
                    color=_COLORS[engine], markersize=3, alpha=0.5)

    since = "time since the replay began (s)"
    plots = {
        "latency_cdf": ("Latency CDF", "latency per output row (s): emitted − produce time of its newest input",
                        "fraction of rows", latency_cdf),
        "throughput": ("Throughput", since, "input records processed / s", throughput),
        "backlog": ("Input waiting (did the engine keep up?)", since, "input waiting (s of input)", waiting),
        "batch_duration": ("Batch duration", since, "s", durations),
    }
    made: dict[str, Path] = {}
    for name, (title, xlabel, ylabel, draw) in plots.items():
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for engine in ENGINES:
            draw(ax, engine)
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        if name != "latency_cdf":
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
        made[name] = _save(fig, target / f"{name}.png")
    return made


def smoothed_rate(at_s: pd.Series, records: pd.Series, window_s: int = SMOOTHING_S) -> tuple[np.ndarray, np.ndarray]:
    """Records per second over time, from batches ending at ``at_s`` with ``records``: a moving average.

    Each batch's records are spread over the seconds since the previous batch ended (its share of the time),
    then averaged over ``window_s`` seconds, so that batches cut at any interval give a readable line.

    Example:
        >>> x, y = smoothed_rate(pd.Series([1.0, 2.0, 3.0, 4.0]), pd.Series([100, 100, 100, 100]), window_s=1)
        >>> y.tolist()
        [100.0, 100.0, 100.0, 100.0]
    """
    order = np.argsort(at_s.to_numpy())
    ends, counts = at_s.to_numpy()[order], records.to_numpy()[order].astype(float)
    if len(ends) == 0:
        return np.array([]), np.array([])
    starts = np.concatenate([[ends[0] - 1], ends[:-1]])
    seconds = np.arange(np.floor(starts[0]) + 1, np.ceil(ends[-1]) + 1)
    per_second = np.zeros(len(seconds))
    for start, end, count in zip(starts, ends, counts, strict=True):
        lo, hi = np.searchsorted(seconds, start, side="right"), np.searchsorted(seconds, end, side="right")
        per_second[lo:max(hi, lo + 1)] += count / max(hi - lo, 1)
    smooth = pd.Series(per_second).rolling(window_s, min_periods=1, center=True).mean().to_numpy()
    return seconds, smooth


def _save(fig: Any, path: Path) -> Path:  # a matplotlib Figure
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# Each figure of the summary: label, path in an engine's metrics, and how it should move against a baseline:
# +1 higher is better, -1 lower is better, 0 neither (shown, not judged), None not compared (a count of the
# run's own making, or a yes/no). Counts of wrong rows and records are judged exactly (_EXACT); timings and
# rates with TOLERANCE, a run's own spread.
_ROWS: tuple[tuple[str, str, int | None], ...] = (
    ("rows vs the oracle: missing", "rows_missing", -1),
    ("rows vs the oracle: unexpected", "rows_unexpected", -1),
    ("rows vs the oracle: mismatched", "rows_mismatched", -1),
    ("rows vs the oracle: matched", "rows_matched", None),
    ("dead letters", "dead_letters", 0),
    ("late rows dropped", "late_dropped", 0),
    ("output rows written", "output_rows", None),
    ("throughput (input records/s)", "throughput_rps", 1),
    ("kept up with the replay", "kept_up.kept_up", None),
    ("work rate (records per second of batch time)", "kept_up.capacity_rps", 1),
    ("batch duration, median (ms)", "kept_up.batch_ms", -1),
    ("input waiting when the replay ended (ms)", "kept_up.backlog_at_end_ms", -1),
    ("latency p50 (ms)", "latency_ms.p50", -1),
    ("latency p95 (ms)", "latency_ms.p95", -1),
    ("latency p99 (ms)", "latency_ms.p99", -1),
    ("latency max (ms)", "latency_ms.max", -1),
    ("start-up: caught up after (ms)", "kept_up.caught_up_ms", -1),
    ("latency p50 after start-up (ms)", "latency_after_startup_ms.p50", -1),
    ("latency p99 after start-up (ms)", "latency_after_startup_ms.p99", -1),
    ("driver restarts", "restarts", None),
    ("lost output rows", "lost_rows", -1),
    ("duplicated output rows", "duplicated_rows", -1),
    ("input records never processed", "input_records_lost", -1),
    ("input records processed again (re-read after a restart)", "input_records_repeated", -1),
)


def _get(engine: EngineMetrics | None, path: str) -> object:
    """The figure at ``path`` (attribute names, then keys of a dict figure), None where there is none."""
    value: object = engine
    for part in path.split("."):
        value = (getattr(value, part) if is_dataclass(value) else value.get(part) if isinstance(value, dict)
                 else None)
    return value


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def summary_rows(metrics: CompareMetrics) -> list[tuple[str, ...]]:
    """``(figure, legacy, modern, oracle)`` rows of the summary table: a cell per engine, in :data:`ENGINES` order."""
    oracle = metrics.oracle
    expected = {"rows_matched": oracle.rows, "dead_letters": oracle.dead_letters,
                "late_dropped": oracle.late_dropped, "rows_missing": 0, "rows_unexpected": 0, "rows_mismatched": 0}
    rows = []
    for label, path, _ in _ROWS:
        cells = [_fmt(_get(metrics.engines.get(e), path)) for e in ENGINES]
        rows.append((label, *cells, _fmt(expected.get(path))))
    return rows


def _verdict(metrics: CompareMetrics) -> str:
    verdict = metrics.verdict
    if verdict == "NOTHING COMPARED":
        return ("NOTHING COMPARED: the oracle has no rows, so the run tested nothing (a failure; the warnings below "
                "say what to change)")
    if verdict == "EQUIVALENT":
        return "EQUIVALENT: both engines equal the oracle in every part checked below"
    return "DIFFERENT: at least one engine differs from the oracle (see the parts below and the diff)"


def verdict_lines(metrics: CompareMetrics) -> list[str]:
    """One line per part of the verdict (rows, dead letters, late drops, input) and engine, then the warnings."""
    return [c.line() for c in metrics.checks] + [f"warning: {w}" for w in metrics.warnings]


def _diff_preview(run_dir: Path, limit: int = 10) -> list[tuple[str, pd.DataFrame, int]]:
    parts = []
    for side in ("legacy_vs_oracle", "modern_vs_oracle", "modern_vs_legacy"):
        for kind in ("missing", "unexpected", "mismatched"):
            path = run_dir / "diff" / f"{side}.{kind}.csv"
            if path.exists() and path.stat().st_size:
                frame = pd.read_csv(path)
                if len(frame):
                    parts.append((f"{side}: {kind}", frame.head(limit), len(frame)))
    return parts


TOLERANCE = 0.10
"""A timing or rate counts as a regression when it is this much worse than the baseline's (run-to-run spread)."""


def baseline_rows(metrics: CompareMetrics, baseline: CompareMetrics) -> list[tuple[str, str, str, str, str, str]]:
    """``(figure, engine, baseline, this run, ratio, mark)`` for every figure both runs have.

    ``mark`` is ``REGRESSION`` when a figure moved the wrong way (beyond :data:`TOLERANCE` for timings and
    rates; at all for counts of wrong rows), ``better`` when it moved the right way as far, else empty.
    The time breakdown's phases are compared too (lower is better).
    """
    rows = []
    judged = [(label, path, direction) for label, path, direction in _ROWS if direction is not None]
    for engine in ENGINES:
        now, before = metrics.engines.get(engine), baseline.engines.get(engine)
        if now is None or before is None:
            continue
        phases = [(f"time: {phase} (median)", f"time_breakdown_ms.{phase}", -1)
                  for phase in now.time_breakdown_ms if phase in before.time_breakdown_ms]
        for label, path, direction in (*judged, *phases):
            old, new = _get(before, path), _get(now, path)
            if not isinstance(old, int | float) or not isinstance(new, int | float):
                continue
            ratio, mark = change(old, new, direction, exact=path in _EXACT)
            rows.append((label, engine, _fmt(old), _fmt(new), ratio, mark))
    return rows


def change(old: float, new: float, direction: int, *, exact: bool = False) -> tuple[str, str]:
    """``(ratio, mark)`` of a figure against its baseline.

    ``direction``: +1 higher is better, -1 lower is better, 0 neither. ``mark`` is ``REGRESSION`` when it moved
    the wrong way by more than :data:`TOLERANCE` (``exact``: at all), ``better`` the right way as far, else "".

    Example:
        >>> change(1000, 850, 1), change(10, 10.5, -1), change(0, 1, -1, exact=True)
        (('0.85×', 'REGRESSION'), ('1.05×', ''), ('new', 'REGRESSION'))
    """
    ratio = f"{new / old:.2f}×" if old else ("–" if new == old else "new")
    worse = (new - old) * -direction  # > 0: moved the wrong way
    limit = 0 if exact else TOLERANCE * abs(old)
    mark = "REGRESSION" if direction and worse > limit else "better" if direction and -worse > limit else ""
    return ratio, mark


_EXACT = {"rows_missing", "rows_unexpected", "rows_mismatched", "lost_rows", "duplicated_rows",
          "input_records_lost", "input_records_repeated"}


def _keeping_up(metrics: CompareMetrics) -> list[str]:
    """One sentence per engine: did it keep up with the replay, and why."""
    if not metrics.settings.rate_rps:
        return ["The replay was not paced (all input was in Kafka before the engines started), so there was "
                "nothing to keep up with: the run measures how fast each engine drains a backlog."]
    sentences = []
    for engine in ENGINES:
        engine_figures = metrics.engines.get(engine)
        figures = engine_figures.kept_up if engine_figures is not None else None
        if engine_figures is None or figures is None:
            sentences.append(f"{engine}: no batch processed records.")
            continue
        reason = figures.reason
        caught_up = figures.caught_up_ms
        reason += (" It never caught up with the replay." if caught_up is None
                   else f" Start-up: caught up {caught_up / 1000:.1f} s after the replay began.")
        p99 = engine_figures.latency_after_startup_ms.p99
        side = "within" if figures.p99_within_bound else "over"
        bound = round(figures.latency_bound_ms / 1000, 1)
        latency = ("No output row's input came after that" if p99 is None
                   else f"Latency p99 after that {p99 / 1000:.1f} s")
        reason += (f" {latency}: {side} the {bound:g} s a run that keeps up stays within (2 × batch interval + "
                   "watermark delay; for a window's or session's row 3 × batch interval + its window or gap and the "
                   "delay, at the replay's pace of event time).")
        sentences.append(reason if figures.kept_up else f"**{reason}**")
    return sentences


def _breakdown(metrics: CompareMetrics) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per engine: ``(phase, median)`` rows of where a batch with records spends its time."""
    tables = []
    for engine in ENGINES:
        figures = metrics.engines.get(engine)
        phases = figures.time_breakdown_ms if figures is not None else {}
        rows = [(phase if phase in ("Spark jobs", "tasks") else f"{phase} (ms)", _fmt(value))
                for phase, value in phases.items()]
        if rows:
            tables.append((engine, rows))
    return tables


def _md_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = [f"| {' | '.join(header)} |", "|---|" + "---:|" * (len(header) - 1)]
    return lines + [f"| {' | '.join(row)} |" for row in rows]


def _html_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr" + (' class="regression"' if "REGRESSION" in row else "") + ">"
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(run_dir: Path, baseline: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (and ``plots/``) for a run directory; return both paths.

    ``baseline``: a previous run's directory, put beside this one figure by figure (:func:`baseline_rows`).

    Raises:
        ConfigError: the run directory or the baseline is not a compare run directory.
    """
    run_dir = Path(run_dir)
    metrics = load_metrics(run_dir)
    base = load_metrics(Path(baseline)) if baseline is not None else None
    plots = _plots(run_dir, metrics)
    rows = summary_rows(metrics)
    settings = metrics.settings
    diffs = _diff_preview(run_dir)
    title = f"dmk compare: {metrics.workload}"

    paragraphs = [metrics.summary]
    paragraphs.append(
        f"Dataset: `{metrics.dataset}` ({metrics.records:,} records). Replay: "
        + (f"{settings.rate_rps:,.0f} records/s" if settings.rate_rps else "burst before start")
        + f", {settings.partitions} partitions. Legacy mode `{settings.legacy_mode}`, "
        f"batch {settings.batch_seconds} s; modern trigger `{settings.trigger}`. "
        f"Jobs: `{settings.legacy_job}`, `{settings.modern_job}`; oracle `{settings.oracle}`."
        + (f" {'The legacy driver JVM' if settings.connect else 'Driver JVMs'}: the JIT's first tier only "
           "(`-XX:TieredStopAtLevel=1`: a short run pays less for it than for the second tier's compiling, "
           "docs/compare.md)."
           if "TieredStopAtLevel=1" in settings.driver_java_options else "")
    )
    if settings.kill_driver or settings.pause_broker_s:
        paragraphs.append(
            f"Faults asked for: driver SIGKILLed {settings.kill_driver} time(s) per engine and restarted from "
            f"its checkpoint; broker paused {settings.pause_broker_s} s per replay. Injected: "
            + "; ".join(_faults_injected(name, e) for name, e in metrics.engines.items()) + "."
        )
        if not metrics.faults_injected:
            paragraphs.append(
                "**INCOMPLETE: not every requested fault was injected, so the run did not test what was asked.**")
    kept = _keeping_up(metrics)
    kept_note = (f"An engine kept up when at most {KEPT_UP_BATCHES} batches' worth of input waited as the replay "
                 "ended (a legacy batch lasts its interval; a micro-batch its trigger interval or, when longer, its "
                 "median processing time); the *input waiting* plot shows it over the run.")
    breakdown = _breakdown(metrics)
    breakdown_note = ("Medians over the batches with records. Legacy: the scheduling delay (the wait behind "
                      "earlier batches), then each output operation, inside which the Kafka read and the "
                      "transformations run. Modern: the progress events' `durationMs` parts, and the state "
                      "operators' time summed over their tasks. Spark jobs and tasks per batch come from Spark's "
                      "event log (`<engine>/eventlog/`).")
    compared = baseline_rows(metrics, base) if base is not None else []
    base_note = ""
    if base is not None:
        base_note = (f"Baseline: `{baseline}` ({base.workload}, {base.records:,} records). Ratio: "
                     f"this run ÷ baseline; REGRESSION: a timing or rate more than {TOLERANCE:.0%} worse, or any "
                     "more wrong rows or records.")
        if base.workload != metrics.workload:
            base_note += f" **The baseline ran another workload ({base.workload}).**"
    base_header = ("figure", "engine", "baseline", "this run", "ratio", "change")
    # report.md and report.html say the same, section by section.
    md = [f"# {title}", "", f"**{_verdict(metrics)}**", ""]
    md += [*(f"- {line}" for line in verdict_lines(metrics)), ""] if verdict_lines(metrics) else []
    for paragraph in paragraphs:
        md += [paragraph, ""] if paragraph else []
    md += ["## Did each engine keep up?", ""]
    for sentence in kept:
        md += [f"- {sentence}"]
    md += ["", kept_note, "", "## Summary", ""]
    md += _md_table(("figure", "legacy", "modern", "oracle"), rows)
    md += ["", "## Where the time goes", "", breakdown_note, ""]
    for engine, table in breakdown:
        md += [f"### {engine}", "", *_md_table(("phase", "median per batch"), table), ""]
    if not breakdown:
        md += ["Not measured in this run.", ""]
    if base is not None:
        md += ["## Against the baseline", "", base_note, "", *_md_table(base_header, compared), ""]
    md += ["## Plots", ""]
    md += [f"![{name}](plots/{path.name})" for name, path in plots.items()]
    md += ["", "## Differences", ""]
    if not diffs:
        md.append("None: legacy, modern and the oracle hold the same rows.")
    for label, frame, total in diffs:
        md += [f"### {label} ({total} rows)", "", "```", frame.to_string(index=False), "```", ""]
    md += ["", f"Full diff: `diff/*.csv` and `diff/*.parquet`; metrics: `{METRICS_FILE}`."]
    md_path = run_dir / layout.REPORT_MD
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")

    def image(path: Path) -> str:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'

    diff_html = "".join(
        f"<h3>{html.escape(label)} ({total} rows)</h3>{frame.to_html(index=False, border=0)}"
        for label, frame, total in diffs
    ) or "<p>None: legacy, modern and the oracle hold the same rows.</p>"
    breakdown_html = "".join(
        f'<div class="engine"><h3 style="color:{_COLORS[engine]}">{engine}</h3>'
        f"{_html_table(('phase', 'median per batch'), table)}</div>"
        for engine, table in breakdown
    ) or "<p>Not measured in this run.</p>"
    baseline_html = (
        f"<h2>Against the baseline</h2><p>{_inline_html(base_note)}</p>{_html_table(base_header, compared)}"
        if base is not None else ""
    )
    color = "#2ca02c" if metrics.equivalent else "#d62728"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_CSS}.verdict{{color:{color}}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p class="verdict">{html.escape(_verdict(metrics))}</p>
{"<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in verdict_lines(metrics)) + "</ul>"
 if verdict_lines(metrics) else ""}
{"".join(f"<p>{_inline_html(paragraph)}</p>" for paragraph in paragraphs if paragraph)}
<h2>Did each engine keep up?</h2><ul>{"".join(f"<li>{_inline_html(s)}</li>" for s in kept)}</ul>
<p class="note">{_inline_html(kept_note)}</p>
<h2>Summary</h2>{_html_table(("figure", "legacy", "modern", "oracle"), rows)}
<h2>Where the time goes</h2><p class="note">{_inline_html(breakdown_note)}</p>
<div class="engines">{breakdown_html}</div>
{baseline_html}
<h2>Plots</h2><div class="plots">{"".join(image(p) for p in plots.values())}</div>
<h2>Differences</h2>{diff_html}
</body></html>
"""
    html_path = run_dir / layout.REPORT_HTML
    html_path.write_text(page, encoding="utf-8")
    return md_path, html_path


_CSS = """body{font-family:system-ui,sans-serif;max-width:1180px;margin:2em auto;padding:0 1.5em;color:#222;
line-height:1.45}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}.verdict{font-weight:bold}
tr.regression td{background:#fde8e8}.note{color:#555;font-size:.92em}
.engines{display:flex;flex-wrap:wrap;gap:2em}.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));
gap:1em}figure{margin:0}img{max-width:100%;height:auto}code{font-size:.92em}
@media print{body{max-width:none;margin:0;font-size:10pt}.plots{display:block}figure,table{break-inside:avoid}
h2{break-after:avoid}}"""


def _faults_injected(engine: str, figures: EngineMetrics) -> str:
    """One engine's injected faults in words: kill and pause times, and how many came after the replay."""
    kills = ", ".join(f"{t:g} s" for t in figures.kills_at_s) or "none"
    pauses = ", ".join(f"{t:g} s" for t in figures.broker_paused_at_s) or "none"
    late = figures.faults_after_replay
    after = f" ({late} after the replay ended, before the drain)" if late else ""
    return f"{engine} killed at {kills}, broker paused at {pauses}{after}"


def _inline_html(text: str) -> str:
    """A Markdown paragraph's text as HTML: escaped, with its `code`, **strong** and *emphasis* spans kept."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", escaped)
