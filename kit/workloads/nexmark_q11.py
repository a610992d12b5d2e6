"""``nexmark_q11``: Nexmark query 11, user sessions: how many bids each bidder made per session (10 s gap).

Definitions read: nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q11.sql`` (commit
0f96e93c85ae6f5c29116f8b736e95cb5dc5a318): ``GROUP BY bidder, SESSION(dateTime, INTERVAL '10' SECOND)``, output
``(bidder, bid_count, starttime, endtime)``; and Beam's
``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query11.java`` (commit
9068b66b001ff372342319f0cf43162198467ae0): bids keyed by bidder in ``Sessions.withGapDuration(windowSizeSec)``,
a count per session. The kit follows the SQL's columns, as the kit's ``sessions`` workload: a session is a bidder's
run of bids with no silence longer than the gap, spanning ``[first bid, last bid + gap)`` (Spark's
``session_window``; a bid at most a gap after the previous one, inclusive, extends the session).

Output: ``(bidder, session_start) -> (session_end, bid_count)``, times in ms.

Semantic differences, on purpose:

- **each session once, when final.** Beam's Query11 fires early panes (every ``maxLogEvents`` bids, discarding),
  so one session can be several rows there; here, as in the SQL, a session is emitted once, in append mode, when
  the watermark passes its end. Sessions still open when the input ends are emitted by neither engine nor the
  oracle.
- **event time with the kit's watermark**: the largest ``dateTime`` of the bids seen minus 5 s; a bid is dropped
  as too late iff the session it would open has ended by then (``dateTime + gap <= watermark``, Spark's rule for
  session windows; a late drop, no window detail).

Legacy: :func:`legacy.workloads.event_time_operator` per bidder with the kit's session merge
(:func:`kit.semantics.merge_session`, as ``sessions``). Modern: ``withWatermark``, ``groupBy(bidder,
session_window(event_time, 10 s))``, ``count``.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> bool((rows["session_end"] - rows["session_start"] >= 10_000).all()), len(rows), int(rows["bid_count"].max())
    (True, 33, 29)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import nexmark_spec, read_bids

__all__ = ["GAP_MS", "SPEC", "WATERMARK_DELAY_MS", "oracle"]

GAP_MS = 10_000
"""The session gap (a literal of the oracle's own; the engines take theirs from kit.semantics)."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Sessionize the admitted bids per bidder; keep the sessions the final watermark closed."""
    bids, rejects = read_bids(frame, dataset)
    times = bids["dateTime"].to_numpy(dtype=np.int64)
    prior = bids["prior_max_ms"].to_numpy(dtype=np.int64)
    watermark = np.where(prior == -(2**62), prior, prior - WATERMARK_DELAY_MS)
    late = times + GAP_MS <= watermark
    kept = bids[~late].sort_values(["bidder", "dateTime"], kind="stable")
    silence = kept.groupby("bidder")["dateTime"].diff()
    kept = kept.assign(session=(silence.isna() | (silence > GAP_MS)).cumsum())
    sessions = kept.groupby("session").agg(
        bidder=("bidder", "first"), session_start=("dateTime", "min"), session_end=("dateTime", "max"),
        bid_count=("seq", "size"),
    )
    sessions["session_end"] += GAP_MS
    final_watermark = int(times.max()) - WATERMARK_DELAY_MS if len(times) else -(2**62)
    closed = sessions[sessions["session_end"] <= final_watermark]
    return OracleResult(sorted_rows(SPEC, closed), rejects, bids.loc[late, ["seq"]].reset_index(drop=True))


SPEC = nexmark_spec(
    name="nexmark_q11",
    summary="Nexmark q11: user sessions, bids per bidder per event-time session (10 s gap)",
    key_columns=("bidder", "session_start"),
    value_columns=("session_end", "bid_count"),
    granularity="per session (bidder, start), emitted once when the watermark passes its end",
    oracle=oracle,
    watermark_delay_ms=WATERMARK_DELAY_MS,
    horizon=lambda dataset: (GAP_MS + WATERMARK_DELAY_MS, "the 10 s session gap and the 5 s watermark delay"),
)
