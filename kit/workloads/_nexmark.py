"""What the Nexmark queries' specs and oracles share: the inputs, the router, and the oracle's reading of the bids.

A Nexmark query reads tables (``bids``...). In the three-topic layout each table is a topic of its own and the
router sends each dataset row of a table the query reads to that table's input; rows of the other tables go
nowhere (no job reads them, so nobody dead-letters them either). In the one-topic layout every row goes to the
one input, ``"nexmark"``, and a query keeps the rows of its types (``"type": "bid"``); every malformed row of
that topic is a dead letter.

The oracle reads records without :func:`kit.nexmark.parse_nexmark` (the engines' parser): a malformed record is
known by its dataset label (the generator made it malformed for that reason, and checked that
``parse_nexmark`` agrees before it returned), and a valid one is read with plain ``json.loads``. A slip in the
engines' parse then shows as a difference in the dead letters or the rows.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> spec = NexmarkSpec.from_profile("messy", records=20_000, first_event_rate=500, seed=3)
    >>> frame = generate_nexmark(spec)
    >>> bids, rejects = read_bids(frame, spec)
    >>> len(bids) + len(rejects) < len(frame), sorted(set(rejects["reason"]))
    (True, ['bad_json', 'bad_timestamp', 'bad_utf8', 'missing_field'])
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd

from kit.nexmark import ONE_TOPIC_INPUT, NexmarkSpec
from kit.workloads import NOT_CARRIED, OracleResult, StateCarry, Variant, WorkloadSpec

__all__ = [
    "BID_COLUMNS", "REASONS", "STATELESS", "nexmark_spec", "no_late_drops", "read_bids", "read_tables", "reads",
    "router",
]

REASONS: tuple[str, ...] = ("bad_utf8", "bad_json", "missing_field", "bad_timestamp")
"""The reject reasons, as the dataset labels malformed records (the kit's four, a literal here on purpose)."""

BID_COLUMNS: tuple[str, ...] = ("auction", "bidder", "price", "dateTime", "extra")
"""A bid's fields (Beam's ``Bid``)."""


def reads(frame: pd.DataFrame, tables: tuple[str, ...]) -> np.ndarray:
    """Which rows of ``frame`` a query reading ``tables`` reads: all (one topic), or its tables' (three topics)."""
    if "topic" in frame.columns and frame["topic"].notna().all():
        return np.asarray(frame["topic"].isin(tables).to_numpy(), bool)
    return np.ones(len(frame), bool)


def router(tables: tuple[str, ...]) -> Callable[[pd.DataFrame], pd.Series]:
    """The spec's router: each row's input (its table, or ``"nexmark"`` in the one-topic layout); None: not read."""

    def route(frame: pd.DataFrame) -> pd.Series:
        if "topic" in frame.columns and frame["topic"].notna().all():
            topics = frame["topic"].astype(object)
            return topics.where(topics.isin(tables), None)
        return pd.Series(ONE_TOPIC_INPUT, index=frame.index, dtype=object)

    return route


def read_bids(frame: pd.DataFrame, dataset: NexmarkSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The valid bids a bid query reads, in replay order, and the records it must dead-letter.

    Returns:
        ``(bids, rejects)``: ``bids`` has ``seq``, :data:`BID_COLUMNS` and ``prior_max_ms`` (the largest
        ``dateTime`` of the bids before it, ``-2**62`` for the first: what a watermark set on the bids is computed
        from); ``rejects`` has ``seq`` and ``reason`` (the record's label).
    """
    read = frame[reads(frame, ("bids",))]
    kinds = read["kind"].astype(object).to_numpy()
    bad = np.isin(kinds, REASONS)
    rejects = pd.DataFrame({"seq": read["seq"].to_numpy()[bad], "reason": kinds[bad]})
    one_topic = dataset.layout == "one"
    rows: list[dict[str, Any]] = []
    for seq, value in zip(read["seq"].to_numpy()[~bad].tolist(), read["value"].to_numpy()[~bad].tolist(), strict=True):
        record = json.loads(bytes(value).decode("utf-8"))
        if one_topic and record["type"] != "bid":
            continue
        rows.append({"seq": seq, **{c: record[c] for c in BID_COLUMNS}})
    bids = pd.DataFrame(rows, columns=["seq", *BID_COLUMNS])
    bids = bids.astype({c: "int64" for c in ("seq", "auction", "bidder", "price", "dateTime")})
    times = bids["dateTime"].to_numpy(dtype=np.int64)
    bids["prior_max_ms"] = np.concatenate([[-(2**62)], np.maximum.accumulate(times)[:-1]]) if len(times) else times
    return bids, rejects


_FIELDS: dict[str, tuple[str, ...]] = {
    "persons": ("id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"),
    "auctions": ("id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller",
                 "category", "extra"),
    "bids": BID_COLUMNS,
}
"""Each table's fields (Beam's ``Person``, ``Auction``, ``Bid``; literals of the oracle's own)."""

_TYPES = {"persons": "person", "auctions": "auction", "bids": "bid"}


def read_tables(
    frame: pd.DataFrame, dataset: NexmarkSpec, tables: tuple[str, ...]
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """The valid events of each of ``tables`` a query reads, in replay order, and the records it must dead-letter.

    Returns:
        ``(events, rejects)``: ``events`` maps each table to a frame with ``seq``, its fields and ``prior_max_ms``
        (the largest ``dateTime`` of that table's events before it, ``-2**62`` for the first: each input's own
        watermark is computed from it); ``rejects`` has ``seq`` and ``reason`` of every malformed record the
        query's inputs hold (every one of the one-topic layout, its tables' topics' in the three-topic one).
    """
    read = frame[reads(frame, tables)]
    kinds = read["kind"].astype(object).to_numpy()
    bad = np.isin(kinds, REASONS)
    rejects = pd.DataFrame({"seq": read["seq"].to_numpy()[bad], "reason": kinds[bad]})
    topics = read["topic"].astype(object).to_numpy()[~bad] if dataset.layout == "three" else None
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in tables}
    values = read["value"].to_numpy()[~bad].tolist()
    for i, (seq, value) in enumerate(zip(read["seq"].to_numpy()[~bad].tolist(), values, strict=True)):
        record = json.loads(bytes(value).decode("utf-8"))
        table = topics[i] if topics is not None else {v: k for k, v in _TYPES.items()}[record["type"]]
        if table in rows:
            rows[table].append({"seq": seq, **{c: record[c] for c in _FIELDS[table]}})
    events: dict[str, pd.DataFrame] = {}
    for table in tables:
        table_rows = pd.DataFrame(rows[table], columns=["seq", *_FIELDS[table]])
        numeric = [c for c in table_rows.columns if c in ("seq", "id", "dateTime", "initialBid", "reserve", "expires",
                                                          "seller", "category", "auction", "bidder", "price")]
        table_rows = table_rows.astype(dict.fromkeys(numeric, "int64"))
        times = table_rows["dateTime"].to_numpy(dtype=np.int64)
        prior = np.concatenate([[-(2**62)], np.maximum.accumulate(times)[:-1]]) if len(times) else times
        events[table] = table_rows.assign(prior_max_ms=prior)
    return events, rejects


STATELESS = StateCarry("stateless", note="a stateless query: the starting offsets are the whole cutover")
"""The carry of the queries without state (q0, q1, q2)."""


def no_late_drops() -> pd.DataFrame:
    """The late drops of a query without event time: none."""
    return pd.DataFrame({"seq": pd.Series(dtype="int64")})


def nexmark_spec(
    *,
    name: str,
    summary: str,
    key_columns: tuple[str, ...],
    value_columns: tuple[str, ...],
    granularity: str,
    oracle: Callable[[pd.DataFrame, NexmarkSpec], OracleResult],
    output_mode: Literal["update", "append"] = "append",
    watermark_delay_ms: int | None = None,
    tables: tuple[str, ...] = ("bids",),
    horizon: Callable[[Any], tuple[int, str]] | None = None,
    carry: StateCarry = NOT_CARRIED,
    summed_over: tuple[str, ...] = (),
    legacy: tuple[Variant, ...] = (Variant("default", "build"),),
) -> WorkloadSpec:
    """A Nexmark query's :class:`~kit.workloads.WorkloadSpec`: ``parse="nexmark"``, its tables as inputs, the router."""
    return WorkloadSpec(
        name=name, summary=summary, inputs=tables, key_columns=key_columns, value_columns=value_columns,
        output_mode=output_mode, granularity=granularity, watermark_delay_ms=watermark_delay_ms, oracle=oracle,
        router=router(tables), horizon=horizon, carry=carry, parse="nexmark", summed_over=summed_over, legacy=legacy,
    )
