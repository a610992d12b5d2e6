"""``nexmark_q3`` (Nexmark local item suggestion) on DStreams: category-10 auctions of sellers in OR, ID or CA.

An incremental join by seller id, kept for ever as the SQL's regular join is (see ``kit.workloads.nexmark_q3``):
the qualifying persons and auctions go through :func:`legacy.workloads.event_time_operator` keyed by person id
(``id`` of a person, ``seller`` of an auction), only for its sharded ``updateStateByKey`` state (its watermark is
not used: nothing is ever late). Per person id the state holds the person once seen, and the auctions that came
before their person; a person flushes its waiting auctions, and a later auction of a known person is emitted at
once, so each pair is emitted once, in the batch where its second event arrives. Persons are never evicted.

Example (``source`` a :class:`legacy.workloads.Source` over a Nexmark stream)::

    rows = build(ssc, source)   # (auction, name, city, state, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.semantics import NEXMARK_Q3_CATEGORY as CATEGORY
from kit.semantics import NEXMARK_Q3_STATES as STATES
from kit.semantics import WATERMARK_DELAY_MS
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:nexmark_q3]
def _person_id(event: dict) -> int:
    return int(event["id"] if event["type"] == "person" else event["seller"])


def _join(state: dict | None, events: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps a person id to ``[person or None, waiting auctions]``."""
    state = state if state is not None else {}
    rows = []
    for event in events:
        entry = state.setdefault(_person_id(event), [None, []])
        if event["type"] == "person":
            person = (event["name"], event["city"], event["state"], event["kafka_ts"])
            entry[0] = person
            waiting, entry[1] = entry[1], []
        elif entry[0] is None:
            entry[1].append((event["id"], event["kafka_ts"]))
            continue
        else:
            person, waiting = entry[0], [(event["id"], event["kafka_ts"])]
        name, city, where, person_ts = person
        rows += [(auction, name, city, where, max(person_ts, auction_ts)) for auction, auction_ts in waiting]
    return state, rows, []


def _local(person: dict) -> bool:
    return person["state"] in STATES


def _in_category(auction: dict) -> bool:
    return bool(auction["category"] == CATEGORY)


def build(ssc: Any, source: Any) -> Any:
    persons = source.nexmark("persons").filter(_local)
    auctions = source.nexmark("auctions").filter(_in_category)
    rows, _ = event_time_operator(
        persons.union(auctions), delay_ms=WATERMARK_DELAY_MS, key=_person_id, step=_join
    )
    return rows
# --8<-- [end:nexmark_q3]
