"""``nexmark_q2``: Nexmark query 2, selection: the auction and price of the bids on every 123rd auction.

The definition followed is ``auction % 123 == 0``, the one both references use:
nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q2.sql`` (commit
e0b4a29c53058f37b703389389c51f2bf9e51b4f), ``SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0``, and
Beam's ``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query2.java`` (commit
5fb0adbb30aa6c90ff854457bab3fc595a7139e1), ``bid.auction % configuration.auctionSkip == 0`` with
``auctionSkip`` 123 by default. Both say why they left the original CQL's list of five auction ids (1007, 1020,
2001, 2019, 2087): it yields a few hundred rows however long the stream.

Both engines: the bids of ``Source.nexmark``, filtered, projected; ``last_input_ts`` is the bid's Kafka
timestamp. Append mode, compared as a multiset of rows (two bids on one auction at one price are two rows). No
event time, no state, no late drops.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=20_000, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> bool((rows["auction"] % 123 == 0).all()), len(rows) > 0
    (True, True)
"""

from __future__ import annotations

import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import STATELESS, nexmark_spec, no_late_drops, read_bids

__all__ = ["AUCTION_SKIP", "SPEC", "oracle"]

AUCTION_SKIP = 123
"""Keep the bids on auctions whose id is a multiple of this (Beam's ``auctionSkip`` default, the SQL's 123)."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """The auction and price of every valid bid on an auction whose id is a multiple of 123."""
    bids, rejects = read_bids(frame, dataset)
    chosen = bids[bids["auction"] % AUCTION_SKIP == 0]
    return OracleResult(sorted_rows(SPEC, chosen), rejects, no_late_drops())


SPEC = nexmark_spec(
    name="nexmark_q2",
    summary="Nexmark q2: selection, the bids on every 123rd auction (auction, price)",
    key_columns=("auction", "price"),
    value_columns=(),
    granularity="every selected bid, as a multiset of rows",
    oracle=oracle,
    carry=STATELESS,
)
