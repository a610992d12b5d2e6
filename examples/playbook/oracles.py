"""The data-processing constructs of the playbook's map: a small dataset, its parameters and pandas oracles.

``legacy_constructs.py`` (DStream → DStream) and ``modern_constructs.py`` (DataFrame → DataFrame), beside
this module, hold one small function per construct under the same name; this module holds what both sides and
the tests share, and nothing engine-specific. Each oracle takes the events as a pandas DataFrame (columns
``side``, ``key``, ``value``, ``event_time`` in epoch milliseconds) and returns the construct's rows as a sorted
list of tuples of plain Python values, in the shape documented on the oracle.

Times in the rows are whole seconds from :data:`BASE_MS`: ``second`` is the second of event time a record falls
in (the DStream batch it arrives in when batch ``i`` holds exactly the events of second ``i``, and the
micro-batch of the file holding that second), ``window_end`` the end of a window. That correspondence between
arrival and event time is what makes the two engines comparable here, and only here (docs/playbook.md,
"Processing time is not event time").

Example:
    >>> import pandas as pd
    >>> events = pd.DataFrame(sample())
    >>> count_by_window(events)[:2]
    [(1, 4), (2, 9)]
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pandas as pd

__all__ = [
    "BASE_MS",
    "BATCH_S",
    "KEYS",
    "ORACLES",
    "REGIONS",
    "SECONDS",
    "SLIDE_S",
    "TOP_N",
    "WATERMARK_DELAY_S",
    "WINDOW_S",
    "by_second",
    "closed",
    "cogroup",
    "count_by_value",
    "count_by_value_and_window",
    "count_by_window",
    "full_outer_join",
    "group_by_key_and_window",
    "left_outer_join",
    "load_regions",
    "map_partitions",
    "reduce_by_key",
    "reduce_by_key_and_window",
    "reduce_by_window",
    "running_totals",
    "sample",
    "top_per_batch",
    "window_ends",
]

BASE_MS = 1_700_000_000_000
"""Event time of the dataset's first second; a multiple of every window length and slide used here."""

BATCH_S = 1
"""The DStream batch interval, and the length of the event-time windows that stand in for one batch, in seconds."""

WINDOW_S = 5
"""Window length of the windowed constructs, in seconds (a multiple of :data:`BATCH_S`, as DStreams require).

At least 5 slides: PySpark's ``reduceByKeyAndWindow`` uses its inverse function only for a window of 5 slides or
more (``PythonReducedWindowedDStream``: "for small window, reduce once will be better than twice"), and
re-reduces the window's batches below that, as if there were no inverse."""

SLIDE_S = 1
"""Slide of the windowed constructs, in seconds."""

WATERMARK_DELAY_S = 0
"""Allowed lateness on the modern side. The DStream side has none to mirror (a batch holds what arrived), and
in the dataset no event is behind an earlier one's second; a real job sets its own."""

TOP_N = 2
"""How many records ``top_per_batch`` keeps per batch."""

SECONDS = 8
"""Seconds of event time in :func:`sample`."""

KEYS = ("a", "b", "c", "d")
"""The keys of every second; key ``"e"`` appears in second 0 only, so it leaves every window after it."""

REGIONS = {"a": "eu", "b": "us", "c": "eu", "d": "apac", "e": "us"}
"""The lookup table ``map_partitions`` loads once per partition (:func:`load_regions`)."""


def load_regions() -> dict[str, str]:
    """The lookup ``map_partitions`` enriches each record with: a copy of :data:`REGIONS`.

    It stands for what a job sets up once per partition rather than once per record (a database connection,
    a model, a file read); both engines call it once per partition.
    """
    return dict(REGIONS)


def sample(seconds: int = SECONDS, seed: int = 23) -> list[dict]:
    """A deterministic dataset of ``seconds`` seconds of events, sorted by event time.

    Every second holds 1–3 ``left`` and 1–3 ``right`` events with a key of :data:`KEYS` and a value 1–9, at
    distinct milliseconds. Second 0 also holds a ``left`` event of key ``"e"``, which no later second has. The
    last second holds exactly one ``left`` and one ``right`` event of key ``"a"``, so that every row of the
    outer joins in it is a match (an unmatched row of the last second would wait for a watermark that never
    passes it).

    Args:
        seconds: how many seconds of event time, at least 2; default :data:`SECONDS`.
        seed: the random generator's seed; default 23.

    Returns:
        One dict per event: ``side`` (``"left"`` or ``"right"``), ``key``, ``value``, ``event_time`` (epoch ms).
    """
    rng = random.Random(seed)
    events = []
    for second in range(seconds - 1):
        n_left, n_right = rng.randint(1, 3), rng.randint(1, 3)
        millis = sorted(rng.sample(range(1000), n_left + n_right + 1))
        sides = ["left"] * n_left + ["right"] * n_right
        rng.shuffle(sides)
        for side, ms in zip(sides, millis[:-1], strict=True):
            events.append({"side": side, "key": rng.choice(KEYS), "value": rng.randint(1, 9),
                           "event_time": BASE_MS + second * 1000 + ms})
        if second == 0:
            events.append({"side": "left", "key": "e", "value": 5, "event_time": BASE_MS + millis[-1]})
    last = BASE_MS + (seconds - 1) * 1000
    events += [
        {"side": "left", "key": "a", "value": 1, "event_time": last + 100},
        {"side": "right", "key": "a", "value": 2, "event_time": last + 200},
    ]
    return sorted(events, key=lambda e: e["event_time"])


def by_second(events: list[dict]) -> list[list[dict]]:
    """The events grouped by second of event time, second 0 first: the DStream side's batches, one per second."""
    last = max((e["event_time"] - BASE_MS) // 1000 for e in events)
    batches: list[list[dict]] = [[] for _ in range(last + 1)]
    for event in events:
        batches[(event["event_time"] - BASE_MS) // 1000].append(event)
    return batches


def window_ends(second: int, window_s: int = WINDOW_S, slide_s: int = SLIDE_S) -> range:
    """The ends (seconds from :data:`BASE_MS`) of every window ``[end - window_s, end)`` holding ``second``.

    Windows end on multiples of ``slide_s``, as both Spark's ``window()`` (aligned to the epoch, and
    :data:`BASE_MS` is aligned) and a DStream window (every ``slide_s`` batches from the context's start) do.
    """
    first = second - second % slide_s + slide_s
    return range(first, second + window_s + 1, slide_s)


def closed(rows: list[tuple], watermark_s: float) -> list[tuple]:
    """The windowed ``rows`` (window end first) whose window ends at or before ``watermark_s``.

    Structured Streaming emits a window in append mode once the watermark reaches its end; the windows the
    last events still hold stay open when the input stops. A DStream emits every window on the clock.
    """
    return [row for row in rows if row[0] <= watermark_s]


def _second(events: pd.DataFrame) -> pd.Series:
    return (events["event_time"] - BASE_MS) // 1000


def _tuples(frame: pd.DataFrame) -> list[tuple]:
    """Rows of ``frame`` as sorted tuples of plain Python values (None for missing)."""
    rows = []
    for record in frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None):
        rows.append(tuple(v.item() if hasattr(v, "item") else v for v in record))
    return sorted(rows, key=lambda row: tuple((v is None, v) for v in row))


def _windowed(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (event, window holding it), with the window's end as ``window_end``."""
    frame = events.assign(window_end=[list(window_ends(s)) for s in _second(events)])
    return frame.explode("window_end").astype({"window_end": "int64"})


def map_partitions(events: pd.DataFrame) -> list[tuple]:
    """``(event_time, key, value, region)`` per event, ``region`` looked up in :data:`REGIONS`."""
    return _tuples(events.assign(region=events["key"].map(REGIONS))[["event_time", "key", "value", "region"]])


def reduce_by_key(events: pd.DataFrame) -> list[tuple]:
    """``(second, key, total)``: the sum of the values of each key, per second (one DStream batch)."""
    totals = events.assign(second=_second(events)).groupby(["second", "key"])["value"].sum().reset_index()
    return _tuples(totals)


def running_totals(events: pd.DataFrame) -> list[tuple]:
    """``(key, total)``: the sum of the values of each key over the whole stream."""
    return _tuples(events.groupby("key")["value"].sum().reset_index())


def count_by_value(events: pd.DataFrame) -> list[tuple]:
    """``(second, key, count)``: how many events of each key, per second."""
    return _tuples(events.assign(second=_second(events)).groupby(["second", "key"]).size().reset_index())


def count_by_window(events: pd.DataFrame) -> list[tuple]:
    """``(window_end, count)``: how many events in each window that holds any."""
    return _tuples(_windowed(events).groupby("window_end").size().reset_index())


def count_by_value_and_window(events: pd.DataFrame) -> list[tuple]:
    """``(window_end, key, count)``: how many events of each key in each window, for the keys it holds."""
    return _tuples(_windowed(events).groupby(["window_end", "key"]).size().reset_index())


def reduce_by_key_and_window(events: pd.DataFrame) -> list[tuple]:
    """``(window_end, key, total)``: the sum of the values of each key in each window, for the keys it holds."""
    return _tuples(_windowed(events).groupby(["window_end", "key"])["value"].sum().reset_index())


def reduce_by_window(events: pd.DataFrame) -> list[tuple]:
    """``(window_end, total)``: the sum of all values in each window that holds any."""
    return _tuples(_windowed(events).groupby("window_end")["value"].sum().reset_index())


def group_by_key_and_window(events: pd.DataFrame) -> list[tuple]:
    """``(window_end, key, values)``: each key's values in each window, a sorted tuple, for the keys it holds."""
    groups = _windowed(events).groupby(["window_end", "key"])["value"]
    return sorted((int(end), key, tuple(sorted(values.tolist()))) for (end, key), values in groups)


def _sides(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = events.assign(second=_second(events), value=events["value"].astype("Int64"))  # nullable after a join
    frame = frame[["second", "key", "side", "value"]]
    return frame[frame["side"] == "left"].drop(columns="side"), frame[frame["side"] == "right"].drop(columns="side")


def _join(events: pd.DataFrame, how: str) -> list[tuple]:
    left, right = _sides(events)
    joined = left.merge(right, on=["second", "key"], how=how, suffixes=("_left", "_right"))
    return _tuples(joined[["second", "key", "value_left", "value_right"]])


def left_outer_join(events: pd.DataFrame) -> list[tuple]:
    """``(second, key, left_value, right_value)``: left events joined to the right events of their second and key.

    A left event with no such right event has ``right_value`` None; right events without a left one are left out.
    """
    return _join(events, "left")


def full_outer_join(events: pd.DataFrame) -> list[tuple]:
    """``(second, key, left_value, right_value)``: as :func:`left_outer_join`, plus unmatched right events."""
    return _join(events, "outer")


def cogroup(events: pd.DataFrame) -> list[tuple]:
    """``(second, key, left_values, right_values)``: both sides' values of each key and second, sorted tuples."""
    rows = []
    frame = events.assign(second=_second(events))
    for (second, key), group in frame.groupby(["second", "key"]):
        values = {side: tuple(sorted(group.loc[group["side"] == side, "value"].tolist())) for side in ("left", "right")}
        rows.append((int(second), key, values["left"], values["right"]))
    return sorted(rows)


def top_per_batch(events: pd.DataFrame) -> list[tuple]:
    """``(second, rank, key, value)``: the :data:`TOP_N` largest values of each second, rank 1 first.

    Ties are broken by event time, then key.
    """
    ranked = events.assign(second=_second(events)).sort_values(["second", "value", "event_time", "key"],
                                                               ascending=[True, False, True, True])
    ranked["rank"] = ranked.groupby("second").cumcount() + 1
    return _tuples(ranked[ranked["rank"] <= TOP_N][["second", "rank", "key", "value"]])


ORACLES: dict[str, Callable[[pd.DataFrame], list[tuple]]] = {
    "map_partitions": map_partitions,
    "reduce_by_key": reduce_by_key,
    "running_totals": running_totals,
    "count_by_value": count_by_value,
    "count_by_window": count_by_window,
    "count_by_value_and_window": count_by_value_and_window,
    "reduce_by_key_and_window": reduce_by_key_and_window,
    "reduce_by_window": reduce_by_window,
    "group_by_key_and_window": group_by_key_and_window,
    "left_outer_join": left_outer_join,
    "full_outer_join": full_outer_join,
    "cogroup": cogroup,
    "top_per_batch": top_per_batch,
}
"""Each construct's oracle by name: the names of the paired functions in ``examples.playbook.legacy_constructs`` and
``examples.playbook.modern_constructs``."""
