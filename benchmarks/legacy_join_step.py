"""The legacy join's per-batch step over a full window: the shuffle join it replaced against the hash join it runs.

Usage::

    python benchmarks/legacy_join_step.py [--window-records 56000] [--rounds 6]

Builds a window like the legacy ``join``'s (75 cached one-partition batches of tagged views and clicks over 100
ads and 300 users; 56,000 records is 75 s at 750 records/s, ``dmk compare``'s default rate) and times, alternately
in one ``local[2]`` SparkContext, the step that finds the last batch's new pairs:

- ``shuffle``: the code before 8db5c3e, ``RDD.join`` of the window's views and clicks (one shuffle of the whole
  window every batch), kept here only to measure it;
- ``hash``: :func:`legacy.workloads.join._new_pairs`, a hash join inside the window's one partition.

Both must give the same pairs (checked first). Prints one JSON line: each round's milliseconds and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kit.semantics import JOIN_WITHIN_MS
from kit.spark import spark_context
from legacy.workloads.join import _CLICK, _VIEW, _new_pairs

BATCHES = 75


def _window(sc: Any, records: int) -> Any:
    """The union of ``BATCHES`` cached batches, as the legacy join tags them: (side, key, (id, time, ts, batch ms))."""
    rng = random.Random(3)
    batches = []
    for batch in range(BATCHES):
        batch_ms = 1_000 * batch
        tagged = []
        for i in range(records // BATCHES):
            time_ = batch_ms + rng.randrange(1_000)
            key = (rng.randrange(100), f"user{rng.randrange(300)}")
            tagged.append((rng.choice((_VIEW, _CLICK)), key, (f"e{batch}-{i}", time_, time_, batch_ms)))
        batches.append(sc.parallelize(tagged, 1).cache())
    for rdd in batches:
        rdd.count()
    return sc.union(batches)


def _shuffle_join(window: Any, batch_ms: int) -> list[tuple]:
    recent = window.coalesce(1)
    views = recent.filter(lambda r: r[0] == _VIEW).map(lambda r: (r[1], r[2]))
    clicks = recent.filter(lambda r: r[0] == _CLICK).map(lambda r: (r[1], r[2]))

    def keep(kv: tuple) -> bool:
        view, click = kv[1]
        return batch_ms in (view[3], click[3]) and view[1] <= click[1] <= view[1] + JOIN_WITHIN_MS

    def row(kv: tuple) -> tuple:
        (ad_id, user), (view, click) = kv
        return (view[0], click[0], ad_id, user, view[1], click[1], max(view[2], click[2]))

    return views.join(clicks, numPartitions=1).filter(keep).map(row).collect()


def main() -> None:
    """Time both steps, alternately, and print the JSON line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-records", type=int, default=56_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    sc = spark_context()
    try:
        window = _window(sc, args.window_records)
        batch_ms = 1_000 * (BATCHES - 1)
        at = datetime.fromtimestamp(batch_ms / 1000, UTC)
        steps = {"shuffle": lambda: _shuffle_join(window, batch_ms),
                 "hash": lambda: _new_pairs(at, window).collect()}
        pairs = {name: sorted(step()) for name, step in steps.items()}
        if pairs["shuffle"] != pairs["hash"]:
            msg = "the two steps found different pairs"
            raise SystemExit(msg)
        rounds: dict[str, list[int]] = {name: [] for name in steps}
        for _ in range(args.rounds):
            for name, step in steps.items():
                started = time.perf_counter()
                step()
                rounds[name].append(round(1000 * (time.perf_counter() - started)))
        print(json.dumps({"window_records": args.window_records, "pairs": len(pairs["hash"]), "ms": rounds,
                          "median_ms": {name: statistics.median(ms) for name, ms in rounds.items()},
                          "load_average": os.getloadavg()[0]}))
    finally:
        sc.stop()


if __name__ == "__main__":
    main()
