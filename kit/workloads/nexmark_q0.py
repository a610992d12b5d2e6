"""``nexmark_q0``: Nexmark query 0, pass-through: every bid, unchanged.

The definition followed is nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q0.sql`` (commit
0f96e93c85ae6f5c29116f8b736e95cb5dc5a318): ``SELECT auction, bidder, price, dateTime, extra FROM bid``. Beam's
``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query0.java`` (commit
31d586b66812c3b6ac4eb7370f70f0566f907805) passes *every* event (persons and auctions too) through a coder round
trip; the SQL keeps bids only, the most numerous events, so that the output has one schema. It measures the cost
of reading, parsing and writing, nothing else.

Both engines: the bids of :meth:`Source.nexmark` (``legacy.workloads.Source``, ``modern.workloads.Source``),
projected; ``last_input_ts`` is the bid's own Kafka timestamp. Append mode: each bid is one output row, compared
as a multiset of rows (no key identifies a bid; :func:`compare.diff.diff_outputs` pairs repeated keys in order).
No event time, no state, no late drops.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=1_000, seed=1)
    >>> result = SPEC.oracle(generate_nexmark(dataset), dataset)
    >>> list(result.rows.columns), len(result.rows)
    (['auction', 'bidder', 'price', 'dateTime', 'extra'], 920)
"""

from __future__ import annotations

import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import STATELESS, nexmark_spec, no_late_drops, read_bids

__all__ = ["SPEC", "oracle"]


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Every valid bid, its five fields."""
    bids, rejects = read_bids(frame, dataset)
    return OracleResult(sorted_rows(SPEC, bids), rejects, no_late_drops())


SPEC = nexmark_spec(
    name="nexmark_q0",
    summary="Nexmark q0: pass-through, every bid unchanged",
    key_columns=("auction", "bidder", "price", "dateTime"),
    value_columns=("extra",),
    granularity="every bid, as a multiset of rows",
    oracle=oracle,
    carry=STATELESS,
)
