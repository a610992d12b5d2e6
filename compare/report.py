"""Render a compare run directory: ``report.md`` and a self-contained ``report.html`` with PNG plots.

Everything is read back from the run directory (``metrics.json``, ``data/*.parquet``, ``diff/``), so
``dmk report RUN_DIR`` re-renders a run without re-running it. Plots (``plots/*.png``, embedded in the HTML
as data URIs): latency CDF per engine, throughput over time, batch duration timeline.

Example::

    render(Path("runs/rc"))      # writes runs/rc/report.md, runs/rc/report.html, runs/rc/plots/*.png
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from kit.errors import ConfigError

__all__ = ["load_metrics", "render"]

ENGINES = ("legacy", "modern")
_COLORS = {"legacy": "#d62728", "modern": "#1f77b4"}


def load_metrics(run_dir: Path) -> dict:
    """``metrics.json`` of a run directory.

    Raises:
        ConfigError: not a compare run directory, or its metrics.json is damaged.
    """
    path = Path(run_dir) / "metrics.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        msg = f"{run_dir} is not a dmk compare run directory (no metrics.json); give the --out of a compare run"
        raise ConfigError(msg) from None
    except (OSError, ValueError) as err:
        msg = f"{path} cannot be read ({err}); re-run the compare"
        raise ConfigError(msg) from None


def _series(run_dir: Path, name: str) -> pd.DataFrame:
    path = run_dir / "data" / f"{name}.parquet"
    return pd.read_parquet(path) if path.exists() else pd.DataFrame()


def _plots(run_dir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = run_dir / "plots"
    target.mkdir(exist_ok=True)

    def latency_cdf(ax, engine: str) -> None:  # noqa: ANN001 - a matplotlib Axes
        latency = _series(run_dir, f"latency_{engine}")
        if not latency.empty:
            values = np.sort(latency["latency_ms"].to_numpy())
            ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=engine, color=_COLORS[engine])

    def throughput(ax, engine: str) -> None:  # noqa: ANN001
        batches = _series(run_dir, f"timeline_{engine}")
        if not batches.empty:
            seconds = (batches["completed_ms"] - batches["completed_ms"].min()) // 1000
            per_second = batches.groupby(seconds)["records"].sum()
            full = per_second.reindex(range(int(seconds.max()) + 1), fill_value=0)
            ax.plot(full.index, full.to_numpy(), label=engine, color=_COLORS[engine], drawstyle="steps-post")

    def durations(ax, engine: str) -> None:  # noqa: ANN001
        batches = _series(run_dir, f"timeline_{engine}")
        if batches.empty:
            return
        seconds = (batches["completed_ms"] - batches["completed_ms"].min()) / 1000
        ax.plot(seconds, batches["duration_ms"], ".", label=f"{engine} batch duration", color=_COLORS[engine],
                markersize=3)
        if batches["scheduling_delay_ms"].any():
            ax.plot(seconds, batches["scheduling_delay_ms"], "x", label=f"{engine} scheduling delay",
                    color=_COLORS[engine], markersize=3, alpha=0.5)

    since = "seconds since the engine's first batch"
    plots = {
        "latency_cdf": ("Latency CDF", "latency per output row (ms): emitted_at − produce time of the newest input",
                        "fraction of rows", latency_cdf),
        "throughput": ("Throughput over time", since, "input records / s", throughput),
        "batch_duration": ("Batch duration", since, "ms", durations),
    }
    made: dict[str, Path] = {}
    for name, (title, xlabel, ylabel, draw) in plots.items():
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for engine in ENGINES:
            draw(ax, engine)
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        made[name] = _save(fig, target / f"{name}.png")
    return made


def _save(fig, path: Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_ROWS = (
    ("rows vs the oracle: missing", "rows_missing"),
    ("rows vs the oracle: unexpected", "rows_unexpected"),
    ("rows vs the oracle: mismatched", "rows_mismatched"),
    ("rows vs the oracle: matched", "rows_matched"),
    ("dead letters", "dead_letters"),
    ("late rows dropped", "late_dropped"),
    ("output rows written", "output_rows"),
    ("throughput (input records/s)", "throughput_rps"),
    ("latency p50 (ms)", "latency_ms.p50"),
    ("latency p95 (ms)", "latency_ms.p95"),
    ("latency p99 (ms)", "latency_ms.p99"),
    ("latency max (ms)", "latency_ms.max"),
    ("driver restarts", "restarts"),
    ("lost output rows", "lost_rows"),
    ("duplicated output rows", "duplicated_rows"),
    ("input records never processed", "input_records_lost"),
    ("input records processed twice or more", "input_records_repeated"),
)


def _get(engine: dict, path: str) -> object:
    value: object = engine
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def summary_rows(metrics: dict) -> list[tuple[str, ...]]:
    """``(figure, legacy, modern, oracle)`` rows of the summary table: a cell per engine, in :data:`ENGINES` order."""
    oracle = metrics["oracle"]
    expected = {"rows_matched": oracle["rows"], "dead_letters": oracle["dead_letters"],
                "late_dropped": oracle["late_dropped"], "rows_missing": 0, "rows_unexpected": 0, "rows_mismatched": 0}
    rows = []
    for label, path in _ROWS:
        cells = [_fmt(_get(metrics["engines"].get(e, {}), path)) for e in ENGINES]
        rows.append((label, *cells, _fmt(expected.get(path))))
    return rows


def _verdict(metrics: dict) -> str:
    if metrics["equivalent"]:
        return "EQUIVALENT: both engines equal the oracle (rows and dead letters)"
    return "DIFFERENT: at least one engine differs from the oracle (see the diff)"


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


def render(run_dir: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (and ``plots/``) for a run directory; return both paths."""
    run_dir = Path(run_dir)
    metrics = load_metrics(run_dir)
    plots = _plots(run_dir)
    rows = summary_rows(metrics)
    settings = metrics.get("settings", {})
    diffs = _diff_preview(run_dir)
    title = f"dmk compare: {metrics['workload']}"

    paragraphs = [metrics.get("summary", "")]
    paragraphs.append(
        f"Dataset: `{metrics['dataset']}` ({metrics['records']:,} records). Replay: "
        + (f"{settings.get('rate_rps'):,.0f} records/s" if settings.get("rate_rps") else "burst before start")
        + f", {settings.get('partitions')} partitions. Legacy mode `{settings.get('legacy_mode')}`, "
        f"batch {settings.get('batch_seconds')} s; modern trigger `{settings.get('trigger')}`. "
        f"Jobs: `{settings.get('legacy_job')}`, `{settings.get('modern_job')}`; oracle `{settings.get('oracle')}`."
    )
    if settings.get("kill_driver") or settings.get("pause_broker_s"):
        paragraphs.append(
            f"Faults asked for: driver SIGKILLed {settings.get('kill_driver')} time(s) per engine and restarted from "
            f"its checkpoint; broker paused {settings.get('pause_broker_s')} s per replay. Injected: "
            + "; ".join(_faults_injected(name, e) for name, e in metrics.get("engines", {}).items()) + "."
        )
        if metrics.get("faults_injected") is False:
            paragraphs.append(
                "**INCOMPLETE: not every requested fault was injected, so the run did not test what was asked.**")
    # report.md and report.html say the same: the verdict, then these paragraphs (settings, faults).
    md = [f"# {title}", "", f"**{_verdict(metrics)}**", ""]
    for paragraph in paragraphs:
        md += [paragraph, ""] if paragraph else []
    md += ["| figure | legacy | modern | oracle |", "|---|---:|---:|---:|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    md += ["", "## Plots", ""]
    md += [f"![{name}](plots/{path.name})" for name, path in plots.items()]
    md += ["", "## Differences", ""]
    if not diffs:
        md.append("None: legacy, modern and the oracle hold the same rows.")
    for label, frame, total in diffs:
        md += [f"### {label} ({total} rows)", "", "```", frame.to_string(index=False), "```", ""]
    md += ["", "Full diff: `diff/*.csv` and `diff/*.parquet`; metrics: `metrics.json`."]
    md_path = run_dir / "report.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")

    def image(path: Path) -> str:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'

    table = "".join(
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td>"
        f"<td>{html.escape(d)}</td></tr>"
        for a, b, c, d in rows
    )
    diff_html = "".join(
        f"<h3>{html.escape(label)} ({total} rows)</h3>{frame.to_html(index=False, border=0)}"
        for label, frame, total in diffs
    ) or "<p>None: legacy, modern and the oracle hold the same rows.</p>"
    color = "#2ca02c" if metrics["equivalent"] else "#d62728"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}}
table{{border-collapse:collapse}}td,th{{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}}
td:first-child,th:first-child{{text-align:left}}.verdict{{color:{color};font-weight:bold}}img{{max-width:100%}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p class="verdict">{html.escape(_verdict(metrics))}</p>
{"".join(f"<p>{_inline_html(paragraph)}</p>" for paragraph in paragraphs if paragraph)}
<h2>Summary</h2><table><tr><th>figure</th><th>legacy</th><th>modern</th><th>oracle</th></tr>{table}</table>
<h2>Plots</h2>{"".join(image(p) for p in plots.values())}
<h2>Differences</h2>{diff_html}
</body></html>
"""
    html_path = run_dir / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return md_path, html_path


def _faults_injected(engine: str, figures: dict) -> str:
    """One engine's injected faults in words: kill and pause times, and how many came after the replay."""
    kills = ", ".join(f"{t:g} s" for t in figures.get("kills_at_s", [])) or "none"
    pauses = ", ".join(f"{t:g} s" for t in figures.get("broker_paused_at_s", [])) or "none"
    late = figures.get("faults_after_replay", 0)
    after = f" ({late} after the replay ended, before the drain)" if late else ""
    return f"{engine} killed at {kills}, broker paused at {pauses}{after}"


def _inline_html(text: str) -> str:
    """A Markdown paragraph's text as HTML: escaped, with its `code` and **strong** spans kept."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
