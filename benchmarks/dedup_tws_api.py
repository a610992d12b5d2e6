"""``dedup``'s stateful-processor variant in each form of Spark 4's API: over Rows, and over pandas DataFrames.

Usage::

    python benchmarks/dedup_tws_api.py rows|pandas [--records 2300]

``rows`` runs the kit's variant (:class:`modern.workloads.dedup.FirstDelivery`, ``transformWithState``);
``pandas`` runs the same processor written for ``transformWithStateInPandas`` (:class:`PandasFirstDelivery` below,
the kit's variant before benchmarks/results/changes.md §32). Both run alone through ``compare.harness.run_engine``
on the default tier's short messy stream (``tests/test_workloads.py``'s ``SHORT_STREAM``; ``--records`` for a longer
one), on the embedded broker and a local Spark. Prints one line: the run's wall time, its micro-batches with
records, their median processing time (``triggerExecution``) and the median of the operator's update time
(``allUpdatesTimeMs``: the processor's calls, its state and timer round trips, and the pandas or Row conversions),
and whether the rows equal the oracle's. Run the two alternately, several times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from compare.diff import assert_outputs_equal
from compare.harness import dataset_spec, run_engine
from kit import workloads
from kit.broker import EmbeddedBroker
from kit.dataset import generate
from kit.semantics import WATERMARK_DELAY_MS
from kit.spark import spark_session
from modern.runner import read_progress
from modern.workloads import dedup

SHORT_STREAM = {"events_per_second": 100, "lateness_margin_ms": 4_900}  # and 2,300 records, as the test's


class PandasFirstDelivery(StatefulProcessor):
    """:class:`modern.workloads.dedup.FirstDelivery` for ``transformWithStateInPandas``: DataFrames, not Rows."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.seen = handle.getValueState("forget_at", "forget_at long")

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        if self.seen.exists():
            return iter([])
        chunks = list(rows)
        delivered = chunks[0] if len(chunks) == 1 else pd.concat(chunks)
        if len(delivered) > 1:
            delivered = delivered.sort_values(["topic", "partition", "offset"])
        first = delivered.iloc[0]
        forget_at = int(first["event_time_ms"]) + WATERMARK_DELAY_MS
        self.seen.update((forget_at,))
        self.handle.registerTimer(forget_at - 1)
        return iter([pd.DataFrame({
            "event_id": [first["event_id"]], "user": [first["user"]], "key": [first["key"]],
            "event_time": [int(first["event_time_ms"])], "last_input_ts": [int(first["last_input_ts"])],
        })])

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        self.seen.clear()
        return iter([])


def build_pandas(spark: Any, source: Any) -> Any:
    """``dedup``'s variant with :class:`PandasFirstDelivery`: the kit's ``first_deliveries`` in the pandas form."""
    from pyspark.sql import functions as F  # noqa: N812

    events = source.events().withWatermark("event_time", f"{WATERMARK_DELAY_MS} milliseconds")
    return events.select(
        "event_id", "user", "key", "event_time", "event_time_ms", "topic", "partition", "offset",
        F.unix_millis("kafka_ts").alias("last_input_ts"),
    ).groupBy("event_id").transformWithStateInPandas(
        PandasFirstDelivery(), dedup._OUTPUT, outputMode="Append", timeMode="EventTime")


def main() -> None:
    """Run one form once and print its line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("form", choices=("rows", "pandas"))
    parser.add_argument("--records", type=int, default=2_300)
    args = parser.parse_args()
    spec = dataset_spec("messy", records=args.records, **SHORT_STREAM)
    frame = generate(spec)
    dedup_spec = workloads.get("dedup")
    expected = dedup_spec.oracle(frame, spec)
    # A builder of your own is named like the workload's default variant (kit.workloads.resolve).
    variant, name = ("transform_with_state",) * 2 if args.form == "rows" else (build_pandas, "default")
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="dmk-dedup-tws-") as work:
        spark = spark_session("dmk-dedup-tws-api")
        started = time.monotonic()
        run = run_engine("modern", (("dedup", variant),), spec, frame, bootstrap_servers=broker.bootstrap_servers,
                         spark=spark, workdir=Path(work))
        wall = time.monotonic() - started
        got = workloads.final_result(dedup_spec, run.rows("dedup", name))
        progress = [p for p in read_progress(run.out_dir, workloads.job_id("dedup", name)) if p["numInputRows"]]
        try:
            assert_outputs_equal(expected.rows, got, keys=dedup_spec.key_columns, values=dedup_spec.value_columns)
            equal = "equal to the oracle"
        except AssertionError as error:
            equal = f"NOT equal to the oracle: {str(error)[:300]}"
        print(f"{args.form}: {args.records} records, {wall:.1f} s, {len(progress)} micro-batches; median "
              f"{statistics.median(p['durationMs']['triggerExecution'] for p in progress):.0f} ms, operator updates "
              f"{statistics.median(p['stateOperators'][0]['allUpdatesTimeMs'] for p in progress):.0f} ms "
              f"({progress[0]['stateOperators'][0]['operatorName']}); {len(got)} rows, {equal}")
        spark.stop()


if __name__ == "__main__":
    main()
