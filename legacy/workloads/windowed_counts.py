"""``windowed_counts`` on DStreams, twice: an exact event-time emulation, and the naive version.

``build`` emulates Structured Streaming's windowed aggregation with :func:`legacy.workloads.event_time_operator`:
counts are kept per ``(window kind, window start, key)``; a record is dropped (and reported) from every
window whose end is at or behind the watermark (largest event time of the previous batches minus 5 s), and
a window is emitted once, when the watermark passes its end, then forgotten. It matches the oracle exactly.

``build_naive`` is what DStream jobs typically did: ``reduceByKeyAndWindow`` with an inverse function, over
*processing-time* windows (a window is the batches that arrived in the last 10 s). Rows carry the window's
processing-time start. Nothing is ever late, so too-late records are counted, every record lands in the
window of its arrival rather than of its event time, and windows are cut at batch boundaries.

Example (``source`` a :class:`legacy.workloads.Source`)::

    rows = build(ssc, source)          # (window_kind, window_start, key, count, last_input_ts) tuples
    naive = build_naive(ssc, source)   # same shape, processing-time windows
"""

from __future__ import annotations

from typing import Any

from kit.semantics import WATERMARK_DELAY_MS, WINDOWS, late_detail
from legacy.workloads import event_time_operator

__all__ = ["build", "build_naive"]


# --8<-- [start:windowed_counts]
_SIZE_MS = {kind: size for kind, size, _ in WINDOWS}


def _count_windows(state: dict | None, events: list[dict], watermark: int) -> tuple[dict, list, list]:
    """``event_time_operator`` step: ``state`` maps ``(kind, window_start, key)`` to ``(count, last_ts)``."""
    state = state if state is not None else {}
    late = []
    for event in events:
        t = event["event_time"]
        for kind, size, slide in WINDOWS:
            last_start = t - t % slide
            for start in range(last_start, t - size, -slide):  # every window [start, start + size) holding t
                if start + size <= watermark:
                    late.append((event, late_detail(kind, start)))
                    continue
                count, last_ts = state.get((kind, start, event["key"]), (0, -1))
                state[kind, start, event["key"]] = (count + 1, max(last_ts, event["kafka_ts"]))
    # The watermark only grows and late records are refused above, so a window past it is final.
    closed = [slot for slot in state if slot[1] + _SIZE_MS[slot[0]] <= watermark]
    rows = [(*slot, *state.pop(slot)) for slot in closed]
    return state, rows, late


def build(ssc: Any, source: Any) -> Any:
    rows, late = event_time_operator(
        source.events(), delay_ms=WATERMARK_DELAY_MS, key=lambda e: e["key"], step=_count_windows
    )
    source.drop_late(late)
    return rows
# --8<-- [end:windowed_counts]


# --8<-- [start:windowed_counts.naive]
def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], max(a[1], b[1])


def _subtract(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    # A max cannot be undone. Keeping a's is exact while the key has records left in the window (they are
    # newer than those leaving: Kafka timestamps grow from batch to batch); with none left, the count is 0
    # and filterFunc drops the key.
    return a[0] - b[0], a[1]


def _labelled(kind: str, size_ms: int) -> Any:
    def label(time: Any, rdd: Any) -> Any:
        start = round(time.timestamp() * 1000) - size_ms  # the window ends at its batch time
        return rdd.map(lambda kv: (kind, start, kv[0], kv[1][0], kv[1][1]))

    return label


def build_naive(ssc: Any, source: Any) -> Any:
    pairs = source.events().map(lambda e: (e["key"], (1, e["kafka_ts"])))
    windows = {
        kind: pairs.reduceByKeyAndWindow(
            _add, _subtract, size_ms / 1000, slide_ms / 1000, filterFunc=lambda kv: kv[1][0] > 0
        ).transform(_labelled(kind, size_ms))
        for kind, size_ms, slide_ms in WINDOWS
    }
    # DStreams only union streams with the same slide: gather the 5 s sliding results every 10 s.
    every_10_s = _SIZE_MS["tumbling"] / 1000
    return windows["tumbling"].union(windows["sliding"].window(every_10_s, every_10_s))
# --8<-- [end:windowed_counts.naive]
