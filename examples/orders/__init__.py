"""A team's own job pair, not in the kit's event schema: revenue per customer from an ``orders`` topic.

* ``legacy_job.py``: the Spark 2.4 DStream job as a team wrote it (``pyspark.streaming.kafka``, a
  ``kafka-python`` producer in ``foreachPartition``, ``StreamingContext.getOrCreate``);
* ``modern_job.py``: its Structured Streaming rewrite (``format("kafka")`` in and out, ``from_json``);
* ``modern_wrong.py``: a rewrite with a bug (it counts only each order's first item);
* :func:`orders`: records to capture and compare on, malformed ones included.

Run them as ``dmk compare-jobs`` does (docs/compare.md, "Your own jobs, unmodified").
"""

from __future__ import annotations

import json
import random

__all__ = ["orders"]


def orders(n: int, seed: int = 5, customers: int = 40) -> list[tuple[bytes | None, bytes]]:
    """``n`` order records ``(key, value)``: JSON orders of 1-3 items, about 1 in 25 malformed (not JSON, no
    customer, items not a list), all valid UTF-8."""
    rng = random.Random(seed)
    records: list[tuple[bytes | None, bytes]] = []
    for i in range(n):
        customer = f"c{rng.randrange(customers):03d}"
        order = {
            "order_id": f"o-{i}",
            "customer": {"id": customer, "country": rng.choice(["DE", "FR", "PL"])},
            "items": [{"sku": rng.choice("ABCDE"), "qty": rng.randint(1, 4), "price_cents": rng.randint(99, 9_999)}
                      for _ in range(rng.randint(1, 3))],
        }
        roll = rng.random()
        if roll < 0.01:
            value = b"{not json"
        elif roll < 0.02:
            value = json.dumps({"order_id": f"o-{i}", "items": order["items"]}).encode()
        elif roll < 0.04:
            value = json.dumps({**order, "items": "see attachment"}).encode()
        else:
            value = json.dumps(order).encode()
        records.append((customer.encode(), value))
    return records


def expected_revenue(frame: object) -> object:
    """The oracle: revenue and order count per customer over a capture's values (pandas, no Spark)."""
    import pandas as pd

    totals: dict[str, list[int]] = {}
    for value in frame["value"]:  # type: ignore[index]
        parsed = _parse(value)
        if parsed is not None:
            customer, revenue = parsed
            total = totals.setdefault(customer, [0, 0])
            total[0] += revenue
            total[1] += 1
    return pd.DataFrame([{"customer": c, "revenue": r, "orders": n} for c, (r, n) in totals.items()])


def _parse(value: bytes | None) -> tuple[str, int] | None:
    try:
        order = json.loads(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(order, dict) or not isinstance(order.get("customer"), dict):
        return None
    items, customer = order.get("items"), order["customer"].get("id")
    if not isinstance(items, list) or not isinstance(customer, str):
        return None
    return customer, sum(int(item["qty"]) * int(item["price_cents"]) for item in items)
