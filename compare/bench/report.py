"""The Markdown of ``dmk bench``'s results: the report (``latest.md``), the baseline section, README's table.

:func:`write_results` writes the results files; their schema is in docs/bench.md. Everything here reads a results
dictionary (as ``latest.json`` holds it), so an old results file renders too.

Example::

    results = json.loads(Path("benchmarks/results/latest.json").read_text())
    print(readme_table(results))
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from compare.bench.results import LATENCY_LOAD, _fmt, bench_figures, latency_load, unchecked_runs
from kit.errors import ConfigError

__all__ = [
    "README_END",
    "README_START",
    "baseline_table",
    "readme_table",
    "render_markdown",
    "update_readme",
    "write_results",
]

README_START, README_END = "<!-- dmk-bench:start -->", "<!-- dmk-bench:end -->"


def _pct(lat: dict[str, Any], q: str) -> str:
    """A latency percentile cell, or "max of N rows: M" when too few rows back it."""
    if lat.get(q) is None and lat.get("max") is not None and lat.get("rows_measured"):
        return f"max of {lat['rows_measured']:,} rows: {lat['max']:,.0f}"
    return _fmt(lat.get(q))



def _raw_sentence(results: dict[str, Any]) -> str:
    """The raw client rates; a results file from before the fast client knew only kafka-python's."""
    clients = results.get("raw_clients") or {
        "kafka-python": {"producer_rps": results["raw_producer_rps"], "consumer_rps": results["raw_consumer_rps"]}
    }
    used = results.get("kafka_client", "kafka-python")
    parsing = results.get("raw_parsing_consumer_rps")  # older files have none
    return "Raw clients (records/s): " + "; ".join(
        f"{client}{' (the engines’ client)' if client == used else ''}: producer {_fmt(r['producer_rps'])}, "
        f"single consumer {_fmt(r['consumer_rps'])}"
        + (f", single consumer that also parses every value {_fmt(parsing)}" if client == used and parsing else "")
        for client, r in clients.items()
    ) + "."


def render_markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown report (what ``latest.md`` holds)."""
    m = results["machine"]
    lines = [
        f"# dmk bench, {results['created']}",
        "",
        f"Command: `{results['command']}`  ",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, {m['os']}, Python {m['python']}, {m['java']}, "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + "  ",
        f"Broker: {results['broker']}; Spark master {results['master']}; {results['records']:,} records "
        f"in {results['partitions']} partitions (clean profile).",
        "",
        "## Throughput",
        "",
        _raw_sentence(results),
        "",
        *_warmup_sentence(results),
        "| engine | workload | records/s | × raw consumer | × consumer that parses | batches | equals oracle "
        "| messy profile: records/s (batches) | equals oracle |",
        "|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for engine, by_workload in results["engines"].items():
        for workload, r in by_workload.items():
            messy = r.get("messy") or {}  # older results files measured the clean profile only
            messy_cells = (f"{_fmt(messy.get('throughput_rps'))} ({messy['batches']}) | {_fmt(messy['matches_oracle'])}"
                           if messy else "– | –")
            lines.append(f"| {engine} | {workload} | {_fmt(r['throughput_rps'])} | {_fmt(r['ratio_to_raw'], 2)} | "
                         f"{_fmt(r.get('ratio_to_parsing'), 2)} | {r['batches']} | {_fmt(r['matches_oracle'])} | "
                         f"{messy_cells} |")
    rate = results.get("latency_rate_rps")
    load = (
        f"{rate:,.0f} records/s" if rate
        else f"{results.get('load_fraction', LATENCY_LOAD):.0%} of each engine's maximum"
    )
    lines += ["", f"## Latency at {load} (ms, output row emitted − newest input's Kafka timestamp)",
              "", "Per setting also: the median processing time of a batch with records and of one without (modern: "
              "an idle trigger, or a no-data micro-batch where a watermark moved), and the largest scheduling delay "
              "(legacy batches wait behind earlier ones).", "",
              "| engine | workload | batch interval or trigger | input records/s | p50 | p95 | p99 | batch ms "
              "| idle batch ms | max scheduling delay ms |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for engine, by_workload in results["engines"].items():
        for workload, r in by_workload.items():
            for setting, lat in r.get("latency_by_trigger", {}).items():
                lines.append(f"| {engine} | {workload} | {setting} | {_fmt(lat.get('rate_rps'))} | "
                             f"{_pct(lat, 'p50')} | {_pct(lat, 'p95')} | {_pct(lat, 'p99')} | "
                             f"{_fmt(lat.get('batch_ms_median'))} | "
                             f"{_fmt(lat.get('idle_batch_ms_median'))} | {_fmt(lat.get('scheduling_delay_ms_max'))} |")
    growth = results.get("state_growth", {})
    if growth:
        lines += ["", "## State growth (`running_counts`)", "",
                  "| engine | keys | batch of | median ms, small state | median ms, large state | ratio |",
                  "|---|---|---:|---:|---:|---:|"]
        for engine, g in growth.items():
            small = statistics.median(g["processing_ms_small"]) if g["processing_ms_small"] else None
            large = statistics.median(g["processing_ms_large"]) if g["processing_ms_large"] else None
            lines.append(f"| {engine} | {g['keys_from']:,} → {g['keys_to']:,} | {g['batch_records']:,} | "
                         f"{_fmt(small)} | {_fmt(large)} | {_fmt(g['ratio'], 2)} |")
    lines += _fixed_cost_lines(results.get("fixed_cost"))
    lines += ["", "## Targets", "", "| target | measured | goal | met | missed by |", "|---|---:|---:|---|---:|"]
    for t in results["targets"]:
        lines.append(f"| {t['target']} | {_fmt(t['value'], 2)} {t['unit']} | {_fmt(t['goal'], 2)} {t['unit']} | "
                     f"{_fmt(t['met'])} | {'×' + _fmt(t['missed_by_factor'], 2) if t['missed_by_factor'] else ''} |")
    if results.get("limits"):
        lines += ["", "## What limits the figures short of their goals (measured)", "",
                  *[f"- {limit}" for limit in results["limits"]]]
    if results.get("baseline"):
        lines += baseline_table(results)
    if results.get("notes"):
        lines += ["", "## Notes", "", *[f"- {note}" for note in results["notes"]]]
    return "\n".join(lines) + "\n"


def _fixed_cost_lines(cost: dict[str, Any] | None) -> list[str]:
    """The fixed-cost phase's section: each engine's batch on the compare path and where its time goes."""
    if not cost:
        return []
    lines = ["", "## A batch's fixed cost on the compare path (`dmk compare running_counts`)", "",
             f"{cost['records']:,} messy records (no too-late ones) through `dmk compare` (driver processes, dead "
             "letters, batch sinks, Spark's event log, the batch caps, the default rate); equals the oracle: "
             f"{_fmt(cost['equivalent'])}. "
             "Medians over the batches with records (ms), then Spark jobs and tasks per batch.", "",
             "| engine | rate (records/s) | batch ms | kept up | p99 after start-up (ms) | warm-up (s) | breakdown |",
             "|---|---:|---:|---|---:|---:|---|"]
    for engine, c in cost["engines"].items():
        parts = "; ".join(f"{phase} {_fmt(value, 1)}" for phase, value in c["breakdown_ms"].items()
                          if phase != "scheduling delay")
        lines.append(f"| {engine} | {_fmt(c['rate_rps'])} | {_fmt(c['batch_ms_median'])} | {_fmt(c['kept_up'])} | "
                     f"{_fmt(c['p99_after_startup_ms'])} | {_fmt(c['warmup_seconds'], 1)} | {parts} |")
    return lines


def _warmup_sentence(results: dict[str, Any]) -> list[str]:
    runs = results.get("warmup_runs")
    if runs is None:  # files from before the warm-up runs measured each job's first run
        return []
    if runs == 0:
        return ["Each job's first run in this JVM was measured (no warm-up run): a cold JVM still compiles Spark's "
                "code (docs/bench.md).", ""]
    batches = results.get("warmup_run_batches")  # older files: as many batches as the measured run
    split = f" in {batches} batches" if batches else ""
    return [f"Each job was measured after {runs} unmeasured run{'s' if runs > 1 else ''} of it{split} in the same "
            "JVM (the JIT's warm-up, docs/bench.md).", ""]


def readme_table(results: dict[str, Any]) -> str:
    """README's performance table, generated from a results file (between :data:`README_START`/``END``)."""
    raw, parsing = results["raw_consumer_rps"], results.get("raw_parsing_consumer_rps")
    lines = [
        f"From `{results['command']}` on {results['machine']['cores']} cores ({results['created'][:10]}; "
        f"{results['records']:,} records, {results['partitions']} partitions; raw single "
        f"{results.get('kafka_client', 'kafka-python')} consumer {_fmt(raw)} records/s"
        + (f" ({_fmt(parsing)} when it also parses every value)" if parsing else "") + ", producer "
        f"{_fmt(results['raw_producer_rps'])} records/s; the engines read with "
        f"{results.get('kafka_client', 'kafka-python')}):",
        "",
        f"| engine | workload | records/s | × raw consumer | × consumer that parses | "
        f"p50 / p99 ms {latency_load(results)} | state growth ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    growth = results.get("state_growth", {})
    for engine, by_workload in results["engines"].items():
        for workload, r in by_workload.items():
            lat = r.get("latency_ms") or {}
            ratio = growth.get(engine, {}).get("ratio") if workload == "running_counts" else None
            lines.append(f"| {engine} | {workload} | {_fmt(r['throughput_rps'])} | {_fmt(r['ratio_to_raw'], 2)} | "
                         f"{_fmt(r.get('ratio_to_parsing'), 2)} | {_pct(lat, 'p50')} / {_pct(lat, 'p99')} | "
                         f"{_fmt(ratio, 2)} |")
    return "\n".join(lines) + "\n"


def update_readme(readme: Path, results: dict[str, Any]) -> None:
    """Replace the table between README's markers with :func:`readme_table` of ``results``.

    Raises:
        ConfigError: the file lacks the markers, or a run of ``results`` did not equal the oracle.
    """
    failed = unchecked_runs(results, older_ok=True)
    if failed:
        msg = (f"results {results.get('created', '')} hold runs whose output differs from the oracle (or was not "
               f"checked): {', '.join(failed)}; their figures measure a wrong job and are not published. Fix the job "
               "and run dmk bench again")
        raise ConfigError(msg)
    replace_block(readme, README_START, README_END, readme_table(results), "the performance table")


def replace_block(path: Path, start: str, end: str, content: str, what: str) -> None:
    """Replace what lies between the markers ``start`` and ``end`` in ``path`` with ``content``.

    Raises:
        ConfigError: the file lacks the markers (``what`` names the block in the message).
    """
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        msg = f"{path} has no {start} ... {end} block for {what}; add one"
        raise ConfigError(msg)
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{content}{end}{tail}", encoding="utf-8")


def baseline_table(results: dict[str, Any]) -> list[str]:
    """The Markdown section putting ``results`` beside its baseline: every figure both have, ratio, change."""
    from compare.report import TOLERANCE, change

    base = results["baseline"]
    lines = ["", f"## Against the baseline ({base['file']}, {base['created']})", "",
             f"Baseline command: `{base['command']}`. Ratio: this run ÷ baseline; REGRESSION: more than "
             f"{TOLERANCE:.0%} worse.", "",
             "| figure | baseline | this run | ratio | change |", "|---|---:|---:|---:|---|"]
    for name, (value, direction) in bench_figures(results).items():
        old = base["figures"].get(name)
        if old is not None:
            ratio, mark = change(old, value, direction)
            digits = 2 if max(abs(old), abs(value)) < 10 else 0  # ratios to raw, state growth
            lines.append(f"| {name} | {_fmt(old, digits)} | {_fmt(value, digits)} | {ratio} | {mark} |")
    return lines


def write_results(out_dir: Path, results: dict[str, Any]) -> Path:
    """Write ``bench-<time>.json``/``.md`` and ``latest.json``/``latest.md``; returns the timestamped JSON."""
    return write_pair(out_dir, "bench", "latest", results, render_markdown(results))


def write_pair(out_dir: Path, prefix: str, latest: str, results: dict[str, Any], markdown: str) -> Path:
    """Write ``<prefix>-<time>.json``/``.md`` and ``<latest>.json``/``.md``, each file renamed into place.

    Returns the timestamped JSON's path.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = results["created"].replace(":", "").replace("-", "")[:15]
    text = json.dumps(results, indent=2) + "\n"
    path = out_dir / f"{prefix}-{stamp}.json"
    for target, content in ((path, text), (path.with_suffix(".md"), markdown),
                            (out_dir / f"{latest}.json", text), (out_dir / f"{latest}.md", markdown)):
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_text(content, encoding="utf-8")
        temp.replace(target)
    return path
