"""``nexmark_q12``: Nexmark query 12, processing-time windows: each bidder's bids per 10 s of *processing* time.

Definitions read: nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q12.sql`` (commit
63b8d3163c4b8df5d7ca6763ca7f6fcda9032c53): ``PROCTIME()`` as ``p_time``, ``TUMBLE(p_time, 10 s)``, ``count(*)``
per bidder and window; and Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/
Query12.java`` (commit 5fb0adbb30aa6c90ff854457bab3fc595a7139e1): the bidders in the global window, a count per
bidder fired ``windowSizeSec`` of processing time after a pane's first bid, discarding fired panes.

A processing-time window holds the bids an engine happened to process in it, so its rows differ from run to run
and between the engines, and no oracle can give them. What does not depend on when batches ran is checked
exactly: each bidder's counts summed over its windows are its valid bids, every bid counted once
(:attr:`~kit.workloads.WorkloadSpec.summed_over`: the window start is written, and left out of the comparison).
The windows themselves are checked by the tests: aligned as each engine aligns them, and within the run's wall
clock.

How each engine windows, on purpose the idiom a team has on each side (the playbook shows the differences):

- **legacy**: ``reduceByKeyAndWindow`` over 10 s windows sliding by 10 s: a window is the batches whose batch time
  lies in ``(end - 10 s, end]``, ends on multiples of 10 s from the StreamingContext's start (not the epoch), and
  each window is emitted once, complete, at its end. A run waits for the last one (the variant's ``settle_ms``).
- **modern**: ``groupBy(bidder, window(current_timestamp(), 10 s))`` with a 0 s watermark, in update mode: a
  micro-batch's ``current_timestamp()`` is its batch timestamp (the same for every row, kept in the offset log so
  a replayed batch gets it again), windows start on multiples of 10 s from the epoch, and every micro-batch emits
  the count so far of each window it changed. Append mode would hold the last window until a later batch with
  data moved the watermark past it: after the input ends, forever.

The final result per ``(bidder, window_start)`` is its last row (update mode); summed per bidder it is compared.
No event time, so no late drops: every valid bid counts.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=1_000, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> list(rows.columns), int(rows["bid_count"].sum())
    (['bidder', 'bid_count'], 920)
"""

from __future__ import annotations

import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, Variant, sorted_rows
from kit.workloads._nexmark import nexmark_spec, no_late_drops, read_bids

__all__ = ["SPEC", "WINDOW_MS", "oracle"]

WINDOW_MS = 10_000
"""The tumbling processing-time window (a literal of the oracle's own; the engines take theirs from kit.semantics)."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Each bidder's valid bids: what its windows' counts add up to, whenever the batches ran."""
    bids, rejects = read_bids(frame, dataset)
    counts = bids.groupby("bidder", as_index=False).size().rename(columns={"size": "bid_count"})
    return OracleResult(sorted_rows(SPEC, counts.astype("int64")), rejects, no_late_drops())


SPEC = nexmark_spec(
    name="nexmark_q12",
    summary="Nexmark q12: bids per bidder per 10 s processing-time window",
    key_columns=("bidder",),
    value_columns=("bid_count",),
    summed_over=("window_start",),
    output_mode="update",
    granularity="each bidder's bids summed over its processing-time windows (the windows depend on when batches "
    "ran: not compared)",
    oracle=oracle,
    legacy=(Variant("default", "build", note="reduceByKeyAndWindow, 10 s windows sliding by 10 s",
                    settle_ms=WINDOW_MS),),
)
