"""``nexmark_q2`` (Nexmark selection) on DStreams: auction and price of the bids on every 123rd auction.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (auction, price, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_AUCTION_SKIP

__all__ = ["build"]


# --8<-- [start:nexmark_q2]
def _selected(bid: dict) -> bool:
    return bool(bid["auction"] % NEXMARK_AUCTION_SKIP == 0)


def build(ssc: Any, source: Any) -> Any:
    return source.nexmark("bids").filter(_selected).map(lambda b: (b["auction"], b["price"], b["kafka_ts"]))
# --8<-- [end:nexmark_q2]
