"""The Nexmark generator on 1M events against the reference's formulas: counts, hot shares, leads, time taken.

Usage::

    python benchmarks/nexmark_generator.py [RECORDS] [SEED]      # default 1000000 events, seed 42

Prints the person / auction / bid counts (the epoch rule: 1 : 3 : 46 exactly), the share of bids on the hot
auction (formula 1/2 + 1/2 * 1/111 once 100 auctions exist), by the hot bidder and of auctions by the hot seller
(3/4 + 1/4 * 1/1010 once 1000 people exist), the share of bids for an auction not generated yet (the reference's
lead: about 1/2 * 10/111), and the seconds ``kit.nexmark.generate_nexmark`` took (wall clock: noisy on a shared
machine). docs/nexmark.md quotes a run of it.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from kit.nexmark import (
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    HOT_BATCH,
    TYPES,
    NexmarkSpec,
    adjusted_event_numbers,
    generate_nexmark,
    last_base0_auction_id,
    last_base0_person_id,
)


def main(records: int = 1_000_000, seed: int = 42) -> None:
    """Generate, then measure and print one line."""
    spec = NexmarkSpec(records=records, seed=seed)
    started = time.monotonic()
    df = generate_nexmark(spec)
    seconds = time.monotonic() - started
    events = [json.loads(v) for v in df["value"]]
    types = np.array([TYPES.index(e["type"]) for e in events])
    ids = adjusted_event_numbers(spec)
    auction = np.array([e.get("auction", -1) for e in events]) - FIRST_AUCTION_ID
    bidder = np.array([e.get("bidder", -1) for e in events]) - FIRST_PERSON_ID
    seller = np.array([e.get("seller", -1) for e in events]) - FIRST_PERSON_ID
    last_auction, last_person = last_base0_auction_id(ids), last_base0_person_id(ids)
    bids, auctions = types == 2, types == 1
    hot_auction = (auction[bids] == (last_auction[bids] // HOT_BATCH) * HOT_BATCH).mean()
    hot_bidder = (bidder[bids] == (last_person[bids] // HOT_BATCH) * HOT_BATCH + 1).mean()
    hot_seller = (seller[auctions] == (last_person[auctions] // HOT_BATCH) * HOT_BATCH).mean()
    ahead = (auction[bids] > last_auction[bids]).mean()
    print(f"generate_nexmark({records:,} records, seed {seed}): {seconds:.1f} s; person/auction/bid "
          f"{np.bincount(types, minlength=3).tolist()}; hot auction {hot_auction:.4f}, hot bidder {hot_bidder:.4f}, "
          f"hot seller {hot_seller:.4f}; bids for an auction not generated yet {ahead:.4f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
