"""``nexmark_q1`` (Nexmark currency conversion) on DStreams: every bid, its price × 0.908 in doubles.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (auction, bidder, dateTime, price, extra, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_DOLLARS_TO_EUROS

__all__ = ["build"]


# --8<-- [start:nexmark_q1]
def _in_euros(bid: dict) -> tuple:
    euros = float(bid["price"]) * NEXMARK_DOLLARS_TO_EUROS
    return bid["auction"], bid["bidder"], bid["dateTime"], euros, bid["extra"], bid["kafka_ts"]


def build(ssc: Any, source: Any) -> Any:
    return source.nexmark("bids").map(_in_euros)
# --8<-- [end:nexmark_q1]
