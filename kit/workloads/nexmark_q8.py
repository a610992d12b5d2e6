"""``nexmark_q8``: Nexmark query 8, monitor new users: persons who created an auction in the 10 s window they joined.

Definitions read: Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query8.java``
(commit dcea89b97c832cf41ad192e46ffeba330d2f0253): persons and auctions in fixed windows of ``windowSizeSec``
(10 s), co-grouped on ``person id = seller`` per window, one ``IdNameReserve(person id, name, auction reserve)`` per
(person, auction) pair; and nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q8.sql`` (commit
0f96e93c85ae6f5c29116f8b736e95cb5dc5a318): the same windows, but each side grouped first, so one row ``(id, name,
starttime)`` per person and window with at least one auction. The kit follows Beam's rows (a pair each, with the
reserve), adds the auction id (so that two auctions of one person at one reserve are two rows, and a row has a key)
and the window start (the SQL's ``starttime``). Windows ``[start, start + 10 s)``, starts on multiples of 10 s
from the epoch (Spark's ``window()``).

Output: ``(person_id, auction) -> (name, reserve, window_start)``. The SQL's row set is these rows' distinct
``(person_id, name, window_start)``.

Event time, as the kit's ``join``: each input's watermark is its largest ``dateTime`` so far minus 5 s, and the
query's is the *smaller* of the two (Structured Streaming's default ``multipleWatermarkPolicy``); a person or an
auction whose window has ended by that watermark when it arrives is dropped (a late drop, with its window start).
Nothing else is lost: a window's rows stay in the join state until the watermark passes its end, and each pair of
admitted rows is emitted once, in append mode, when its second row arrives (Beam emits a window's pairs when it
closes; the rows are the same). On the kit's datasets (late records at most 3 s behind, too-late ones at least 17 s)
"window ended by the watermark" and Spark's other late rule, "event time at or behind the watermark", decide every
record alike.

Legacy: :func:`legacy.workloads.event_time_operator` over persons and auctions together, with the min-of-inputs
watermark (``side``), state per ``(person id, window start)``: the window's persons and auctions so far. Modern: a
stream-stream inner join of the two (one Kafka source) on ``id = seller`` and equal ``window(...)`` columns, each
side with a 5 s watermark; the window equality lets Spark evict a window's state once the watermark passes its end.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> bool(rows["window_start"].mod(10_000).eq(0).all()), bool(rows["auction"].is_unique), len(rows)
    (True, True, 204)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import nexmark_spec, read_tables

__all__ = ["SPEC", "WATERMARK_DELAY_MS", "WINDOW_MS", "oracle"]

WINDOW_MS = 10_000
"""The tumbling event-time window (a literal of the oracle's own; the engines take theirs from kit.semantics)."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness of each input."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Pairs of admitted persons and auctions with ``id = seller`` in the same window; late drops per window."""
    tables, rejects = read_tables(frame, dataset, ("persons", "auctions"))
    persons, auctions = tables["persons"], tables["auctions"]
    # Each record's watermark: the smaller of both tables' largest dateTime before it (replay order), minus the delay.
    both = pd.concat([persons[["seq", "dateTime"]].assign(side=0), auctions[["seq", "dateTime"]].assign(side=1)])
    both = both.sort_values("seq", kind="stable")
    times = both["dateTime"].to_numpy(dtype=np.int64)
    prior: list[np.ndarray] = []
    for side in (0, 1):
        mine = np.where(both["side"].to_numpy() == side, times, -(2**62))
        running = np.maximum.accumulate(mine) if len(mine) else mine
        prior.append(np.concatenate([[-(2**62)], running[:-1]]) if len(mine) else mine)
    seen = np.minimum(prior[0], prior[1])
    watermark = pd.Series(np.where(seen == -(2**62), seen, seen - WATERMARK_DELAY_MS), index=both["seq"].to_numpy())

    placed: list[tuple[pd.DataFrame, pd.DataFrame]] = []
    for table in (persons, auctions):
        starts = table["dateTime"] - table["dateTime"] % WINDOW_MS
        late = (starts + WINDOW_MS).to_numpy() <= watermark.loc[table["seq"]].to_numpy()
        placed.append((table.assign(window_start=starts)[~late], table.assign(window_start=starts)[late]))
    (kept_persons, late_persons), (kept_auctions, late_auctions) = placed
    pairs = kept_persons[["id", "name", "window_start"]].rename(columns={"id": "person_id"}).merge(
        kept_auctions[["id", "seller", "reserve", "window_start"]].rename(columns={"id": "auction"}),
        left_on=["person_id", "window_start"], right_on=["seller", "window_start"],
    )
    late_dropped = pd.concat([late_persons[["seq", "window_start"]], late_auctions[["seq", "window_start"]]])
    late_dropped = late_dropped.sort_values("seq").reset_index(drop=True)
    return OracleResult(sorted_rows(SPEC, pairs), rejects, late_dropped)


SPEC = nexmark_spec(
    name="nexmark_q8",
    summary="Nexmark q8: monitor new users, persons and their auctions in the same 10 s event-time window (join)",
    key_columns=("person_id", "auction"),
    value_columns=("name", "reserve", "window_start"),
    granularity="every (person, auction) pair of one window, emitted once when its second event arrives",
    oracle=oracle,
    watermark_delay_ms=WATERMARK_DELAY_MS,
    tables=("persons", "auctions"),
    horizon=lambda dataset: (WINDOW_MS + WATERMARK_DELAY_MS, "a 10 s window and the 5 s watermark delay"),
)
