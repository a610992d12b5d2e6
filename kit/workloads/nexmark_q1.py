"""``nexmark_q1``: Nexmark query 1, currency conversion: every bid with its price in euros (price × 0.908).

The definition followed is nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q1.sql`` (commit
d3ba063984a039bca6d01c2c6d45b31508bd7e8d): ``SELECT auction, bidder, 0.908 * price as price, ..., extra FROM
bid``. Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query1.java`` (commit
4355bd44139f64555b96355f6af08df3cbeee529) converts with integer arithmetic, ``(price * 89) / 100``; the kit takes
the SQL's rate, the one the issue names.

Semantic difference: the SQL's result is a ``DECIMAL(23, 3)``; here ``price`` is a double, ``price * 0.908``
computed in IEEE doubles on all three sides (Spark's ``double * double``, Python's ``float * float``, numpy's), so
the three agree bit for bit; it is within one rounding of the exact decimal. The SQL's time column (in that
version ``customTime``, earlier ``dateTime``) is ``dateTime`` here, as in q0.

Both engines: the bids of ``Source.nexmark``, the price converted; ``last_input_ts`` is the bid's Kafka
timestamp. Append mode, compared as a multiset of rows. No event time, no state, no late drops.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=1_000, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> list(rows.columns), rows["price"].dtype.name
    (['auction', 'bidder', 'dateTime', 'price', 'extra'], 'float64')
"""

from __future__ import annotations

import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import STATELESS, nexmark_spec, no_late_drops, read_bids

__all__ = ["DOLLARS_TO_EUROS", "SPEC", "oracle"]

DOLLARS_TO_EUROS = 0.908
"""The SQL's conversion rate (a literal of the oracle's own; the engines take theirs from kit.semantics)."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Every valid bid, its price times 0.908 in doubles."""
    bids, rejects = read_bids(frame, dataset)
    bids["price"] = bids["price"].to_numpy(dtype="float64") * DOLLARS_TO_EUROS
    return OracleResult(sorted_rows(SPEC, bids), rejects, no_late_drops())


SPEC = nexmark_spec(
    name="nexmark_q1",
    summary="Nexmark q1: currency conversion, every bid's price × 0.908",
    key_columns=("auction", "bidder", "dateTime"),
    value_columns=("price", "extra"),
    granularity="every bid, as a multiset of rows",
    oracle=oracle,
    carry=STATELESS,
)
