"""``ysb`` (Yahoo Streaming Benchmark) on DStreams: filter, ``transform`` join with a static RDD, window count.

Views are joined to their campaign by joining every batch's RDD with a static ``(ad_id, campaign_id)`` RDD
inside ``transform``, the DStream way to join a stream with a table. The event-time window count that
follows is :func:`legacy.workloads.event_time_operator`: counts per ``(campaign_id, window_start)``, views
behind the watermark dropped (and reported with their window start), each window emitted once, when final.

Example (``source`` a :class:`legacy.workloads.Source`)::

    rows = build(ssc, source)   # (campaign_id, window_start, count, last_input_ts) tuples
"""

from __future__ import annotations

from typing import Any

from kit.dataset import ad_campaigns
from kit.semantics import WATERMARK_DELAY_MS
from kit.semantics import YSB_WINDOW_MS as WINDOW_MS
from legacy.workloads import event_time_operator

__all__ = ["build"]


# --8<-- [start:ysb]
class _CampaignTable:
    """The static table, joined to each batch. It travels as data and becomes an RDD on first use: PySpark
    pickles ``transform`` functions into the checkpoint, and an RDD cannot be pickled."""

    def __init__(self, campaign_of: dict[str, str]) -> None:
        self.pairs = sorted(campaign_of.items())
        self._rdd: Any = None

    def __getstate__(self) -> dict:
        return {"pairs": self.pairs, "_rdd": None}

    def join(self, rdd: Any) -> Any:
        if self._rdd is None:
            self._rdd = rdd.context.parallelize(self.pairs).cache()
        return rdd.join(self._rdd)


def _count_windows(state: dict | None, views: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps ``(campaign_id, window_start)`` to ``(count, last_ts)``."""
    state = state if state is not None else {}
    late = []
    for view in views:
        start = view["event_time"] - view["event_time"] % WINDOW_MS
        if start + WINDOW_MS <= watermark:
            late.append((view, start))
            continue
        count, last_ts = state.get((view["campaign_id"], start), (0, -1))
        state[view["campaign_id"], start] = (count + 1, max(last_ts, view["kafka_ts"]))
    # The watermark only grows and late views are refused above, so a window past it is final.
    closed = [slot for slot in state if slot[1] + WINDOW_MS <= watermark]
    rows = [(*slot, *state.pop(slot)) for slot in closed]
    return state, rows, late


def build(ssc: Any, source: Any) -> Any:
    table = _CampaignTable(ad_campaigns(source.dataset))
    views = (
        source.events()
        .filter(lambda e: e["event_type"] == "view")
        .map(lambda e: (e["ad_id"], e))
        .transform(lambda rdd: table.join(rdd))
        .map(lambda kv: {**kv[1][0], "campaign_id": kv[1][1]})
    )
    rows, late = event_time_operator(
        views, delay_ms=WATERMARK_DELAY_MS, key=lambda v: v["campaign_id"], step=_count_windows
    )
    source.drop_late(late)
    return rows
# --8<-- [end:ysb]
