"""``dmk bench --suite nexmark``: every Nexmark query's sustained throughput and latency on both engines.

One run, one broker, one Spark JVM, as :mod:`compare.bench.run`, over Nexmark streams (:mod:`kit.nexmark`, the
clean profile in the one-topic layout: persons, auctions and bids in event-number order, one topic):

1. **Throughput.** The stream (``--records``, default :data:`FULL_RECORDS`, ``--quick`` :data:`QUICK_RECORDS`,
   over :data:`EVENT_SECONDS` of event time) is produced once; each query runs over it on each engine, capped to
   :data:`~compare.bench.run.THROUGHPUT_BATCHES` equal batches, after ``warmup_runs`` unmeasured runs (none with
   ``--quick``). Throughput is the records over the span of the batches after the first
   (:func:`compare.bench.run.throughput`).
2. **Latency at a fixed rate.** Per query and engine, a fresh stream whose event time advances with the wall clock
   (``first_event_rate`` = ``--latency-rate``) is replayed at that rate while the engine runs it at its default
   batch interval or trigger, for ``--latency-seconds`` plus an event-time query's window and watermark delay.
   Latency is measured as in the kit's suite (emitted − newest input's Kafka timestamp, after the warm-up fifth).

Each run's final output is diffed against the query's pandas oracle. **A query whose output differs from its oracle
on either engine, in either run, publishes no figure**, nor does one with a run that output no rows (an empty output
equals an empty oracle whatever the engine did): its entry keeps only which runs and why (``withheld``), and the
whole results go to ``nexmark-rejected-<time>.json`` for the diagnosis. Per query the results give
``modern_over_legacy``: modern's throughput over legacy's, and the two p99s (the issue's targets: modern ≥ legacy in
throughput, modern p99 ≤ legacy p99 at the same rate).

Results go to ``<out>/nexmark-<UTC time>.json`` and ``.md`` and to ``nexmark-latest.json``/``.md``;
:func:`readme_table` renders README's Nexmark table (between :data:`README_START` and :data:`README_END`).
"""

from __future__ import annotations

import json
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compare.bench.raw import Progress, new_topic, produce, round_robin_ends
from compare.bench.report import replace_block, write_pair
from compare.bench.results import STATE_GROWTH_TARGETED, _fmt, machine
from compare.bench.run import (
    LATENCY_INTERVALS,
    THROUGHPUT_BATCHES,
    THROUGHPUT_INTERVALS,
    WARMUP_RUN_BATCHES,
    BenchSettings,
    _phase,
    closing_seconds,
    engine_run,
    latency_run,
    matches_oracle,
    throughput,
)
from compare.engines import ENGINES
from kit import workloads
from kit.broker import kafka_or_embedded
from kit.errors import ConfigError
from kit.kafka import resolve_client
from kit.nexmark import ONE_TOPIC_INPUT, NexmarkSpec, generate_nexmark

__all__ = ["EVENT_SECONDS", "FULL_RECORDS", "QUICK_RECORDS", "README_END", "README_START", "NexmarkBench",
           "nexmark_markdown", "publish_nexmark", "readme_table", "run_nexmark", "update_readme"]

FULL_RECORDS, QUICK_RECORDS = 500_000, 100_000
"""Records of the throughput stream: a full run's and ``--quick``'s."""

EVENT_SECONDS = 60
"""Event time the throughput stream spans: several 10 s windows closed past the 5 s watermark delay."""

README_START, README_END = "<!-- dmk-bench-nexmark:start -->", "<!-- dmk-bench-nexmark:end -->"


@dataclass(frozen=True)
class NexmarkBench:
    """What a Nexmark suite run measures: the kit suite's settings (sizes, rate, broker, master...) and the queries.

    ``settings.workloads`` is ignored; ``queries`` (default: every query of :data:`kit.workloads.NEXMARK_NAMES`)
    says which run. ``settings.records`` is the throughput stream's size (default :data:`FULL_RECORDS`, quick
    :data:`QUICK_RECORDS`).
    """

    settings: BenchSettings
    queries: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [q for q in self.queries if q not in workloads.NEXMARK_NAMES]
        if unknown:
            msg = (f"unknown Nexmark quer{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                   f"dmk bench --suite nexmark runs any of {', '.join(workloads.NEXMARK_NAMES)}")
            raise ConfigError(msg, field="workloads", expected=tuple(workloads.NEXMARK_NAMES), actual=tuple(unknown))

    @property
    def names(self) -> tuple[str, ...]:
        """The queries to run, in :data:`kit.workloads.NEXMARK_NAMES` order when none were named."""
        return self.queries or tuple(workloads.NEXMARK_NAMES)

    @property
    def records(self) -> int:
        """Records of the throughput stream."""
        return self.settings.records or (QUICK_RECORDS if self.settings.quick else FULL_RECORDS)


def suite_stream(records: int, rate: float, partitions: int) -> NexmarkSpec:
    """The suite's clean one-topic stream of ``records`` events at ``rate`` events/s of event time (seed 7)."""
    return NexmarkSpec.from_profile("clean", records=records, first_event_rate=int(rate), partitions=partitions,
                                    seed=7)


def run_nexmark(
    bench: NexmarkBench, progress: Progress | None = None, spark: Any = None,
) -> tuple[dict[str, Any], Path]:
    """Run the suite of the module docstring; returns the results and the JSON file written.

    Raises:
        BrokerUnavailable: no Kafka at the settings' ``bootstrap_servers``.
        KitError: a run failed (an engine's error, or records missing).
    """
    import tempfile

    from kit.spark import spark_session

    settings, progress = bench.settings, progress or (lambda task, done, total: None)
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.monotonic()
    queries: dict[str, Any] = {}
    measured: dict[str, Any] = {}  # every figure, a differing query's too: the diagnosis file's
    with ExitStack() as stack:
        kafka = stack.enter_context(kafka_or_embedded(settings.bootstrap_servers))
        bootstrap = kafka.bootstrap_servers
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dmk-bench-nexmark-")))
        if spark is None:
            spark = spark_session("dmk-bench-nexmark", settings.master)
            stack.callback(spark.stop)
        results: dict[str, Any] = {
            "suite": "nexmark", "created": created, "command": settings.command or "dmk bench --suite nexmark",
            "quick": settings.quick, "records": bench.records, "partitions": settings.partitions,
            "broker": kafka.description, "master": spark.sparkContext.master, "machine": machine(),
            "kafka_client": resolve_client(), "latency_rate_rps": settings.latency_rate,
            "latency_seconds": settings.n_latency_seconds, "warmup_runs": settings.n_warmup_runs,
        }

        def topic_named(name: str) -> str:
            return new_topic(bootstrap, f"dmk-bench-nexmark-{uuid.uuid4().hex[:6]}-{name}", settings.partitions)

        # Spread over EVENT_SECONDS of event time, whatever its size: the windows, sessions and joins close and
        # emit rows (the engines read it as fast as they can either way).
        dataset = suite_stream(bench.records, max(1, bench.records // EVENT_SECONDS), settings.partitions)
        frame = generate_nexmark(dataset)
        topic = topic_named("stream")
        with _phase(progress, "produce the Nexmark stream"):
            produce(bootstrap, topic, frame["value"].tolist(), settings.partitions, progress)
        ends = round_robin_ends(topic, len(frame), settings.partitions)
        cap = -(-len(frame) // THROUGHPUT_BATCHES)
        warmup_cap = -(-len(frame) // WARMUP_RUN_BATCHES)
        for query in bench.names:
            spec = workloads.get(query)
            entry: dict[str, Any] = {}
            # The latency runs' stream: the same for both engines, so generated once per query.
            rate = settings.latency_rate
            stream = suite_stream(max(1, int(rate * (settings.n_latency_seconds + closing_seconds(query)))), rate,
                             settings.partitions)
            stream_frame = generate_nexmark(stream)
            for engine in ENGINES:
                interval = THROUGHPUT_INTERVALS.get(engine)
                with _phase(progress, f"{engine} {query}: throughput"):
                    for _ in range(settings.n_warmup_runs):
                        with engine_run(settings, spark, bootstrap, workdir, engine, query, {ONE_TOPIC_INPUT: topic},
                                        dataset, cap=warmup_cap, interval=interval) as warmup:
                            warmup.wait(ends, settings.timeout_s)
                    with engine_run(settings, spark, bootstrap, workdir, engine, query, {ONE_TOPIC_INPUT: topic},
                                    dataset, cap=cap, interval=interval) as run:
                        run.wait(ends, settings.timeout_s)
                    spans, rows = run.spans(), run.rows()
                    rps, batches = throughput(spans, rows.get("emitted_at"))
                    busy = spans.loc[spans["records"] > 0, "processing_ms"]
                    figures: dict[str, Any] = {
                        "throughput_rps": round(rps, 1), "batches": batches, "batch_cap": cap,
                        "batch_ms_median": None if busy.empty else float(busy.median()),
                        "output_rows": len(rows), "matches_oracle": matches_oracle(spec, rows, frame, dataset),
                    }
                with _phase(progress, f"{engine} {query}: latency"):
                    figures["latency"] = latency_run(
                        settings, spark, bootstrap, workdir, engine, query, (ONE_TOPIC_INPUT, topic_named("latency")),
                        stream, stream_frame, rate, LATENCY_INTERVALS[engine][0])
                entry[engine] = figures
            queries[query], measured[query] = _judged(entry), entry
        results["queries"] = queries
    results["run_seconds"] = round(time.monotonic() - started, 1)
    path = publish_nexmark(settings.out_dir, results)
    if not all(q["published"] for q in queries.values()):
        rejected = path.with_name(path.name.replace("nexmark-", "nexmark-rejected-", 1))
        rejected.write_text(json.dumps({**results, "queries": measured}, indent=2) + "\n", encoding="utf-8")
    return results, path


def _judged(entry: dict[str, Any]) -> dict[str, Any]:
    """A query's figures with its verdict: published only if every run of it equalled the oracle on some rows.

    A run with no output rows equals an empty oracle whatever the engine did, so it proves nothing: it withholds
    the query's figures as a differing run does.
    """
    withheld = []
    for engine, figures in entry.items():
        for run, checked in (("throughput", figures), ("latency", figures["latency"])):
            if not checked["matches_oracle"]:
                withheld.append(f"{engine} {run}: differs from the oracle")
            elif not checked["output_rows"]:
                withheld.append(f"{engine} {run}: no output rows, nothing checked")
    if withheld:
        return {"published": False, "withheld": withheld}
    source, target = (entry.get(name, {}) for name in _roles())
    ratio = (round(target["throughput_rps"] / source["throughput_rps"], 3)
             if source.get("throughput_rps") and target.get("throughput_rps") is not None else None)
    return {"published": True, **entry, "modern_over_legacy": ratio}


def _roles() -> tuple[str, str]:
    """``(source, target)``: the engine a migration leaves and the one it lands on (the state-growth target)."""
    target = STATE_GROWTH_TARGETED[0]
    return next(name for name in ENGINES if name != target), target


def _row(query: str, q: dict[str, Any]) -> str:
    if not q["published"]:
        return f"| {query} | no figure is published: {'; '.join(q['withheld'])} | | | | | no |"
    source, target = (q[name] for name in _roles())

    def p99(figures: dict[str, Any]) -> str:
        lat = figures["latency"]
        if lat.get("p99") is None and lat.get("max") is not None:
            return f"max of {lat['rows_measured']:,} rows: {_fmt(lat['max'])}"
        return _fmt(lat.get("p99"))

    ratio = q["modern_over_legacy"]
    return (f"| {query} | {_fmt(source['throughput_rps'])} | {_fmt(target['throughput_rps'])} "
            f"| {'–' if ratio is None else f'{ratio:.2f}'} | {p99(source)} | {p99(target)} | yes |")


def readme_table(results: dict[str, Any]) -> str:
    """README's Nexmark table: per query each engine's throughput, their ratio, and each p99 at the fixed rate."""
    m = results["machine"]
    lines = [
        f"Nexmark, `{results['command']}` ({results['created']}; {m['cores']} cores, {results['master']}, "
        f"{results['broker']}): {results['records']:,} clean events in {results['partitions']} partitions for "
        f"throughput (records/s, {THROUGHPUT_BATCHES} batches after {results['warmup_runs']} warm-up runs), and "
        f"latency p99 (ms) replaying {_fmt(results['latency_rate_rps'])} records/s for "
        f"{_fmt(results['latency_seconds'])} s plus a query's window and watermark delay, at each engine's default "
        "batch interval or trigger.",
        "",
        "| query | {0} records/s | {1} records/s | {1} / {0} | {0} p99 | {1} p99 | equals oracle |".format(*_roles()),
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [_row(name, q) for name, q in results["queries"].items()]
    return "\n".join(lines) + "\n"


_PARSE = ("profiled in docs/nexmark.md, \"Input, both layouts, both engines\": the modern side parses every "
          "record in a Python UDF after the kafka-py reader handed it to Python (a JVM parse was built and measured "
          "slower)")

PROFILED: dict[str, str] = {
    "nexmark_q0": _PARSE,
    "nexmark_q1": _PARSE,
    "nexmark_q2": _PARSE,
    "nexmark_q4": "profiled in docs/nexmark.md, \"q4 on both engines\": transformWithStateInPandas' pandas call per "
    "auction and a state-server round trip per state call",
    "nexmark_q12": "profiled in docs/nexmark.md, \"q12's throughput\": legacy parses and counts a whole window's "
    "records in one job at the window's end (its batches with records only read), modern pays a micro-batch's fixed "
    "cost in each of its 10 (in one micro-batch of the whole stream, modern's per-record cost is the lower)",
}
"""Queries whose figures a profile explained (a pointer to where), said beside a missed target."""


def _latency_ms(figures: dict[str, Any]) -> float | None:
    """The latency a row of the table shows: the p99, or the maximum when too few rows back a p99."""
    latency = figures["latency"]
    value = latency.get("p99") if latency.get("p99") is not None else latency.get("max")
    return None if value is None else float(value)


def target_misses(results: dict[str, Any]) -> list[str]:
    """Issue 43's targets missed by a published query, each with what the runs measured.

    The targets: the target engine's throughput at least the source engine's, and its p99 (or maximum, when too few
    rows back a p99) at most the source's at the same rate. A miss names both figures and both engines' median batch
    times in the run that missed (and, in a latency run, the interval the batches had), plus :data:`PROFILED`'s
    pointer where a profile explained the query.
    """
    source_name, target_name = _roles()
    misses = []
    for query, q in results["queries"].items():
        if not q["published"]:
            continue
        source, target = q[source_name], q[target_name]
        why = f"; {PROFILED[query]}" if query in PROFILED else ""
        if (q["modern_over_legacy"] or 0) < 1:
            misses.append(
                f"{query} throughput: {target_name} {_fmt(target['throughput_rps'])} records/s, "
                f"{q['modern_over_legacy']:.2f}× {source_name}'s {_fmt(source['throughput_rps'])}; median batch "
                f"({_fmt(source['batch_cap'])} records at most): {target_name} {_fmt(target.get('batch_ms_median'))} "
                f"ms, {source_name} {_fmt(source.get('batch_ms_median'))} ms{why}")
        source_ms, target_ms = _latency_ms(source), _latency_ms(target)
        if source_ms is not None and target_ms is not None and target_ms > source_ms:
            lat_s, lat_t = source["latency"], target["latency"]
            misses.append(
                f"{query} latency: {target_name} {_fmt(target_ms)} ms against {source_name} {_fmt(source_ms)} ms at "
                f"{_fmt(lat_t['rate_rps'])} records/s; median batch with records: {target_name} "
                f"{_fmt(lat_t.get('batch_ms_median'))} ms, {source_name} {_fmt(lat_s.get('batch_ms_median'))} ms "
                f"(idle {_fmt(lat_s.get('idle_batch_ms_median'))} ms; scheduling delay at most "
                f"{_fmt(lat_s.get('scheduling_delay_ms_max'))} ms){why}")
    return misses


def nexmark_markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown report (what ``nexmark-latest.md`` holds): the table, then the targets missed."""
    m = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items())
    misses = target_misses(results)
    targets = ("\n## Targets\n\nIssue 43's, per query: modern throughput ≥ legacy's, and modern p99 ≤ legacy's at "
               "the same rate. " + ("Missed, with what the runs measured:\n\n" + "".join(f"- {m}\n" for m in misses)
                                    if misses else "All met.\n"))
    return (f"# dmk bench --suite nexmark, {results['created']}\n\nCommand: `{results['command']}`  \n"
            f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, {m['os']}, Python {m['python']}, "
            f"{m['java']}, {versions}  \nRun: {_fmt(results['run_seconds'])} s.\n\n{readme_table(results)}{targets}")


def publish_nexmark(out_dir: Path, results: dict[str, Any]) -> Path:
    """Write ``nexmark-<time>.json``/``.md`` and ``nexmark-latest.json``/``.md``; returns the timestamped JSON.

    A query whose runs differed from its oracle is in the files without figures (:func:`run_nexmark` writes its
    figures to ``nexmark-rejected-<time>.json`` only, for the diagnosis).
    """
    return write_pair(out_dir, "nexmark", "nexmark-latest", results, nexmark_markdown(results))


def update_readme(readme: Path, results: dict[str, Any]) -> None:
    """Replace the table between README's Nexmark markers with :func:`readme_table` of ``results``.

    Raises:
        ConfigError: the file lacks the markers.
    """
    replace_block(readme, README_START, README_END, readme_table(results), "the Nexmark table")
