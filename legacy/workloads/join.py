"""``join`` on DStreams: a windowed join of the two inputs, made to honour event time by hand.

DStreams join by *arrival*: ``impressions.window(W).join(clicks.window(W))`` pairs the records that arrived
in the same last ``W`` seconds of processing time, whatever their event times. (Here both inputs share one
window, tagged by side, and the join splits them again: the same pairs, one window to keep instead of
two.) Three additions turn that into the event-time join of :mod:`kit.workloads.join`:

1. **Late records.** A global watermark, kept in ``updateStateByKey`` state, is the smaller of the two
   inputs' largest event times of the earlier batches, minus the 5 s delay (Structured Streaming's default
   policy for several inputs). A view or click at or behind it is dropped and reported
   (:meth:`legacy.workloads.Source.drop_late`, detail None) before it reaches the window.
2. **Each pair once.** The window is re-joined every batch, so a pair would come out in every batch both
   records stay in it. Records are tagged with their arrival batch, and a batch emits only the pairs with at
   least one record of its own.
3. **The time condition.** The window only bounds arrival times, so the join keeps the pairs whose click
   event time lies in ``[impression time, impression time + 60 s]``.

The window must be long enough for the two records of every pair to arrive inside it: 60 s between their
event times, plus up to the 5 s allowed lateness of either one, plus slack for batch and producer delays
(:data:`WINDOW_SLACK_S`), rounded up to whole batches (75 s for 1 s batches). That holds while event time
advances with the wall clock, as it does for live traffic; a pair whose records arrive further apart (after
an outage upstream, say) is silently missed, where Structured Streaming's event-time state would still pair
it. The window is also the memory cost: every admitted view and click of the last 75 s stays cached (one
serialized copy per batch, and DStreams make the window's ancestors remember their RDDs as long, so the
parsed input of both topics stays cached too), and the whole window is re-read and hashed into the join
*every batch* (in one task, without a shuffle), where Structured Streaming joins only the new rows against
state it evicts by watermark.

Example (``source`` with inputs ``"impressions"`` and ``"clicks"``)::

    pairs = legacy.workloads.join.build(ssc, source)
    pairs.pprint()   # (impression_id, click_id, ad_id, user, impression_time, click_time, last_input_ts)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

from kit.semantics import JOIN_WITHIN_MS as WITHIN_MS
from kit.semantics import WATERMARK_DELAY_MS
from legacy.workloads import NO_WATERMARK

__all__ = ["WINDOW_SLACK_S", "build", "window_seconds"]

WINDOW_SLACK_S = 10
"""Seconds the window covers beyond the 60 s condition and the allowed lateness: batch and producer delays."""


def window_seconds(batch_s: float) -> float:
    """The windowed join's length for a batch interval: 60 s + allowed lateness + slack, in whole batches."""
    needed = WITHIN_MS / 1000 + WATERMARK_DELAY_MS / 1000 + WINDOW_SLACK_S
    return math.ceil(needed / batch_s) * batch_s


def _ms(time_: datetime) -> int:
    return round(time_.timestamp() * 1000)


# --8<-- [start:join]
_VIEW, _CLICK = 0, 1  # the two sides, as tags on one stream


def _side(event: dict) -> int:
    return _VIEW if event["event_type"] == "view" else _CLICK


def _advance(delay_ms: int, new: list[tuple[int, int]], state: tuple | None) -> tuple[int, int, int]:
    # State: (watermark of this batch, largest view time, largest click time) up to this batch. The watermark
    # comes from earlier batches only; until both inputs have had events it is NO_WATERMARK (Spark takes 0
    # for an input that has seen nothing, and the minimum of the inputs).
    _, views, clicks = state if state is not None else (NO_WATERMARK, NO_WATERMARK, NO_WATERMARK)
    mark = min(views, clicks) - delay_ms if NO_WATERMARK not in (views, clicks) else NO_WATERMARK
    for side, time_ in new:
        if side == _VIEW:
            views = max(views, time_)
        else:
            clicks = max(clicks, time_)
    return mark, views, clicks


def _judge(events: Any, marks: Any) -> Any:
    # (admitted, event): the batch's single watermark paired with every event, without a trip to the driver.
    # A batch with events always has its mark: those events updated the state this batch. One task: the
    # events are cached, and a task per Kafka partition costs more Python round trips than the pairing.
    pairs = events.coalesce(1).cartesian(marks.map(lambda kv: kv[1][0]))
    return pairs.map(lambda ew: (ew[0]["event_time"] > ew[1], ew[0]))


def _tagged(time_: datetime, judged: Any) -> Any:
    # Admitted events as (side, (ad_id, user), (event_id, event_time, kafka_ts, arrival batch)), in one
    # partition per batch: the window is the union of its batches, re-read every batch, so this keeps it
    # at one task per batch instead of one per Kafka partition.
    batch = _ms(time_)
    return judged.filter(lambda p: p[0]).map(
        lambda p: (
            _side(p[1]),
            (p[1]["ad_id"], p[1]["user"]),
            (p[1]["event_id"], p[1]["event_time"], p[1]["kafka_ts"], batch),
        )
    ).coalesce(1)


def _new_pairs(time_: datetime, recent: Any) -> Any:
    # The windowed join proper: the window's views joined with its clicks by (ad_id, user), keeping the pairs
    # new in this batch (a record of this batch on either side) that meet the event-time condition. The
    # window is one partition, so the join is a hash join inside it: no shuffle of the whole window every batch.
    batch = _ms(time_)

    def join(records: Iterable[tuple]) -> Iterator[tuple]:
        views: dict[tuple, list[tuple]] = defaultdict(list)
        clicks: dict[tuple, list[tuple]] = defaultdict(list)
        for side, key, record in records:
            (views if side == _VIEW else clicks)[key].append(record)
        for key, key_views in views.items():
            (ad_id, user), key_clicks = key, clicks.get(key, ())
            for view in key_views:
                for click in key_clicks:
                    if batch in (view[3], click[3]) and view[1] <= click[1] <= view[1] + WITHIN_MS:
                        yield view[0], click[0], ad_id, user, view[1], click[1], max(view[2], click[2])

    return recent.coalesce(1).mapPartitions(join)


def build(ssc: Any, source: Any) -> Any:
    views = source.events("impressions").filter(lambda e: e["event_type"] == "view")
    clicks = source.events("clicks").filter(lambda e: e["event_type"] == "click")
    # Both cached: the watermark's state, the late output and the window each read them every batch, and
    # without the cache each would parse the batch's records (and write its dead letters) again.
    events = views.union(clicks).cache()
    marks = events.map(lambda e: (0, (_side(e), e["event_time"]))).updateStateByKey(
        partial(_advance, WATERMARK_DELAY_MS), numPartitions=1
    )
    judged = events.transformWith(_judge, marks).cache()
    source.drop_late(judged.filter(lambda p: not p[0]).map(lambda p: (p[1], None)))
    recent = judged.transform(_tagged).window(window_seconds(events._slideDuration))  # batch interval, s
    return recent.transform(_new_pairs)
# --8<-- [end:join]
