"""``nexmark_q0`` (Nexmark pass-through) on DStreams: every bid, its five fields.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (auction, bidder, price, dateTime, extra, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

__all__ = ["build"]


# --8<-- [start:nexmark_q0]
def _row(bid: dict) -> tuple:
    return bid["auction"], bid["bidder"], bid["price"], bid["dateTime"], bid["extra"], bid["kafka_ts"]


def build(ssc: Any, source: Any) -> Any:
    return source.nexmark("bids").map(_row)
# --8<-- [end:nexmark_q0]
