"""``join``: each click paired with the impressions it may follow, on two topics, by event time.

Two inputs: ``clicks`` (every record whose ``event_type`` is ``"click"``) and ``impressions`` (everything
else: views, purchases and the malformed records, so all dead letters come from the impressions topic; the
impressions side keeps only ``"view"`` events). A click pairs with an impression when both have the same
``ad_id`` **and the same** ``user`` and the click's event time lies in ``[impression time, impression time +
60 s]``, both ends included (Spark's ``BETWEEN``). Joining on ``ad_id`` alone, as the issue's one-line
description reads, would pair every click with every view of its ad in the last minute: with 100 ads and
thousands of events a minute the output grows quadratically with the rate. Adding ``user`` (a click follows
an impression *the same user saw*) is the deliberate, documented narrowing that keeps the output about as
large as the input.

Event time: both sides have a 5 s watermark delay. As in Structured Streaming, each input's watermark is its
own largest event time minus the delay, and the join uses the *smaller* of the two (Spark's default
``spark.sql.streaming.multipleWatermarkPolicy=min``). A view or click is dropped as too late iff its event
time is ``<=`` that watermark (measured with a file-source probe on PySpark 4.3: a row exactly at the
watermark is dropped, one a millisecond later joins). The oracle uses the ideal watermark, from the records
before each one in replay order; the datasets' lateness margins make the engines' real watermarks decide the
same way. Nothing else is lost: Spark evicts join state only once no admissible row can match it, so every
pair of admitted rows satisfying the condition is emitted, once, in append mode. A re-delivered
(``duplicate``) record is a row like any other and pairs again, as it does in both engines.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> spec = DatasetSpec.from_profile("messy", records=20_000, seed=7)
    >>> frame = generate(spec)
    >>> pairs = SPEC.oracle(frame, spec).rows
    >>> bool(((pairs["click_time"] - pairs["impression_time"]).between(0, 60_000)).all())
    True
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import OracleResult, StateCarry, WorkloadSpec, parse_dataset, sorted_rows
from kit.workloads._contract import read_record
from kit.workloads.rewind import Rewind, RewindInput, rewind_pairs

WITHIN_MS = 60_000
"""A click joins impressions at most this long before it (inclusive)."""
WATERMARK_DELAY_MS = 5_000
"""The allowed lateness: ``SPEC.watermark_delay_ms`` as an int (the field is None for workloads without event time)."""


def route(frame: pd.DataFrame) -> pd.Series:
    """``"clicks"`` for each record that parses as a click event, ``"impressions"`` for every other one."""
    kinds = [(read_record(value)[0] or {}).get("event_type") for value in frame["value"].tolist()]
    return pd.Series(np.where(np.array(kinds, dtype=object) == "click", "clicks", "impressions"), index=frame.index)


def _prior_max(times: np.ndarray, mine: np.ndarray) -> np.ndarray:
    # Largest time among the earlier rows of `mine` (replay order), -2**62 before the first.
    running = np.maximum.accumulate(np.where(mine, times, -(2**62)))
    return np.concatenate([[-(2**62)], running[:-1]])


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Drop views and clicks at or behind the ideal min-of-inputs watermark; pair the rest on the condition."""
    pairs, rejects, dropped = _pairs(frame)
    return OracleResult(sorted_rows(SPEC, pairs), rejects, dropped)


def pairs_with_inputs(frame: pd.DataFrame) -> pd.DataFrame:
    """The oracle's pairs with the ``seq`` of their two records (``impression_seq``, ``click_seq``).

    A re-delivered record pairs again under the same ids: a pair is told apart by its records (a rewound cutover's
    filter, :func:`kit.workloads.rewind.rewind_pairs`).
    """
    return _pairs(frame)[0].rename(columns={"seq_x": "impression_seq", "seq_y": "click_seq"})


def _pairs(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    events, rejects = parse_dataset(frame)
    times = events["event_time"].to_numpy(dtype=np.int64)
    is_view = (events["event_type"] == "view").to_numpy()
    is_click = (events["event_type"] == "click").to_numpy()
    watermark = np.minimum(_prior_max(times, is_view), _prior_max(times, is_click)) - SPEC.watermark_delay_ms
    late = (is_view | is_click) & (times <= watermark)

    kept = events[~late]
    views = kept[kept["event_type"] == "view"].rename(
        columns={"event_id": "impression_id", "event_time": "impression_time"}
    )
    clicks = kept[kept["event_type"] == "click"].rename(columns={"event_id": "click_id", "event_time": "click_time"})
    pairs = views.merge(clicks, on=["ad_id", "user"])
    pairs = pairs[pairs["click_time"].between(pairs["impression_time"], pairs["impression_time"] + WITHIN_MS)]
    dropped = events.loc[late, ["seq"]].reset_index(drop=True)
    return pairs, rejects, dropped


def rewind(inp: RewindInput) -> Rewind:
    """``dmk cutover --rewind``: start at the oldest view a click after the legacy job's next watermark may follow.

    :func:`kit.workloads.rewind.rewind_pairs`; the filter goes by each pair's input records.
    """
    joined = inp.events[inp.events["event_type"].isin(["view", "click"])].reset_index(drop=True)  # purchases: neither
    return rewind_pairs(joined, inp, sides=(joined["event_type"] == "view", joined["event_type"] == "click"),
                        within_ms=WITHIN_MS, delay_ms=WATERMARK_DELAY_MS)


SPEC = WorkloadSpec(
    name="join",
    summary=(
        "impressions x clicks on (ad_id, user), click within 60 s after the view (windowed DStream join vs "
        "stream-stream join with watermarks); user narrows ad_id-only matching, which grows quadratically"
    ),
    inputs=("impressions", "clicks"),
    key_columns=("impression_id", "click_id"),
    value_columns=("ad_id", "user", "impression_time", "click_time"),
    output_mode="append",
    granularity="every (impression, click) pair",
    watermark_delay_ms=WATERMARK_DELAY_MS,
    oracle=oracle,
    router=route,
    carry=StateCarry(
        "rewound", row_time="click_time", rewind=rewind, row_inputs=("impression", "click"),
        note="the buffered views and clicks are in no output row: dmk cutover --rewind starts the modern query at "
        "the oldest view a later click may pair with, and drops the pairs of two records the legacy job had read",
    ),
)
