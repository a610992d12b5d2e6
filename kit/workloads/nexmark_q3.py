"""``nexmark_q3``: Nexmark query 3, local item suggestion: who sells in category 10 from OR, ID or CA, and what.

Definitions read: nexmark/nexmark's ``nexmark-flink/src/main/resources/queries/q3.sql`` (commit
0f96e93c85ae6f5c29116f8b736e95cb5dc5a318): ``auction INNER JOIN person ON A.seller = P.id WHERE A.category = 10
AND P.state IN ('OR', 'ID', 'CA')``, output ``(name, city, state, id)``, a regular (unwindowed) join; and Beam's
``sdks/java/testing/nexmark/src/main/java/org/apache/beam/sdk/nexmark/queries/Query3.java`` (commit
8d9cd19ead7107e75157a1052834bd65d7e89560): the same rows from a stateful ``DoFn`` per person id that keeps the
person for later auctions and the auctions that came before their person (the generator may name a seller up to
ten ids beyond the last person made), emitting each pair once, when its second event arrives.

Output: one row per auction, ``auction -> (name, city, state)`` (an auction has one seller and a person id one
person, so the auction id is the key; the SQL's and Beam's ``id`` is that auction id).

State, on purpose the SQL's: **kept for ever on both engines**. No watermark, no time bound, no late drops: every
pair of a qualifying person and a qualifying auction is emitted, once, whenever either arrives. Legacy:
``updateStateByKey`` per seller id (through :func:`legacy.workloads.event_time_operator`'s shards, its watermark
unused): the person once seen, and the auctions still waiting for their person. Modern: a stream-stream inner
join without watermarks, which Structured Streaming allows and keeps both sides' rows for ever (its join state
cannot tell that a person id is unique, so it also keeps every auction that found its person, where legacy keeps
only the waiting ones). Differences from the references:

- **Beam evicts**: its person state is cleared by an event-time timer ``maxAuctionsWaitingTime`` (600 s) after the
  person's ``dateTime``, so an auction more than 600 s of event time after its seller joined is not output there.
  A Structured Streaming version of that needs watermarks and a time condition on both sides (``A.dateTime
  BETWEEN P.dateTime - x AND P.dateTime + 600 s``), and then also drops late records, which neither reference
  does; the kit keeps the SQL's unbounded join instead. The kit's streams span far less than 600 s of event time,
  so the rows are Beam's too; on a long stream, state grows with the persons of OR, ID and CA (half of them) and,
  on the modern side, with their category-10 auctions.
- Flink's regular join would also retract and re-emit on updates; Nexmark's tables are append-only, so its rows
  are these.

Example:
    >>> from kit.nexmark import NexmarkSpec, generate_nexmark
    >>> dataset = NexmarkSpec(records=10_000, first_event_rate=200, seed=1)
    >>> rows = SPEC.oracle(generate_nexmark(dataset), dataset).rows
    >>> sorted(set(rows["state"])), int(rows["auction"].is_unique)
    (['CA', 'ID', 'OR'], 1)
"""

from __future__ import annotations

import pandas as pd

from kit.nexmark import NexmarkSpec
from kit.workloads import OracleResult, sorted_rows
from kit.workloads._nexmark import nexmark_spec, no_late_drops, read_tables

__all__ = ["CATEGORY", "SPEC", "STATES", "oracle"]

STATES: tuple[str, ...] = ("OR", "ID", "CA")
"""The sellers' states the query keeps (a literal of the oracle's own; the engines take theirs from kit.semantics)."""

CATEGORY = 10
"""The auctions' category the query keeps."""


def oracle(frame: pd.DataFrame, dataset: NexmarkSpec) -> OracleResult:
    """Every qualifying auction with its qualifying seller: a plain inner join of all valid persons and auctions."""
    tables, rejects = read_tables(frame, dataset, ("persons", "auctions"))
    persons = tables["persons"]
    auctions = tables["auctions"]
    local = persons[persons["state"].isin(STATES)][["id", "name", "city", "state"]]
    chosen = auctions[auctions["category"] == CATEGORY][["id", "seller"]].rename(columns={"id": "auction"})
    pairs = chosen.merge(local, left_on="seller", right_on="id")
    return OracleResult(sorted_rows(SPEC, pairs), rejects, no_late_drops())


SPEC = nexmark_spec(
    name="nexmark_q3",
    summary="Nexmark q3: local item suggestion, category-10 auctions of sellers in OR, ID or CA (unbounded join)",
    key_columns=("auction",),
    value_columns=("name", "city", "state"),
    granularity="every (auction, seller) pair, emitted once when its second event arrives",
    oracle=oracle,
    tables=("persons", "auctions"),
)
