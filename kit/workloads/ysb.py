"""``ysb``: the Yahoo Streaming Benchmark: views per campaign in 10 s event-time windows.

The benchmark's pipeline: keep ``view`` events, join each one's ``ad_id`` to its ``campaign_id`` in a static
table (:func:`kit.dataset.ad_campaigns`, an inner join), count per campaign in tumbling 10 s event-time
windows. The watermark is the largest event time *of the views* seen minus 5 s (the filter comes before the
watermark in every implementation); a view whose window has ended by the watermark when it arrives is dropped,
and each window is emitted once, in append mode, when the watermark passes its end.

Legacy: a ``transform`` joining each batch with a static RDD, then
:func:`legacy.workloads.event_time_operator`. Modern: a stream-static join, ``withWatermark``,
``groupBy(window(...), "campaign_id")``. Compared per event-time window: ``(campaign_id, window_start) ->
count``; a late drop is identified by the record and its window start.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> dataset = DatasetSpec.from_profile("clean", records=20_000, seed=1)
    >>> result = SPEC.oracle(generate(dataset), dataset)
    >>> list(result.rows.columns), len(result.late_dropped)
    (['campaign_id', 'window_start', 'count'], 0)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.dataset import DatasetSpec, ad_campaigns
from kit.errors import ConfigError
from kit.workloads import OracleResult, StateCarry, WorkloadSpec, parse_dataset, sorted_rows
from kit.workloads.rewind import Rewind, RewindInput, rewind_windows

__all__ = ["ROW_TIME", "SPEC", "WATERMARK_DELAY_MS", "WINDOW_MS", "oracle", "rewind"]

WINDOW_MS = 10_000
"""Size of the tumbling event-time windows."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness: ``SPEC.watermark_delay_ms`` as an int (the field is None for workloads without event time)."""


ROW_TIME = f"window_start + {WINDOW_MS}"
"""An output row's event time for a rewound cutover: its window's end."""


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Count the views per campaign and window; drop views whose window the watermark had passed."""
    events, rejects = parse_dataset(frame)
    views = events[events["event_type"] == "view"].copy()
    views["campaign_id"] = views["ad_id"].map(ad_campaigns(dataset))
    views = views.dropna(subset=["campaign_id"])
    # The watermark comes from the joined views only: recompute the running maximum over them.
    times = views["event_time"].to_numpy(dtype=np.int64)
    prior_max = np.concatenate([[-(2**62)], np.maximum.accumulate(times)[:-1]]) if len(times) else times
    watermark_then = prior_max - WATERMARK_DELAY_MS
    final_watermark = int(times.max()) - WATERMARK_DELAY_MS if len(times) else -(2**62)
    views["window_start"] = times - times % WINDOW_MS
    ends = views["window_start"].to_numpy() + WINDOW_MS
    too_late = ends <= watermark_then
    kept = views[~too_late & (ends <= final_watermark)]  # windows still open at the end are never emitted
    rows = kept.groupby(["campaign_id", "window_start"]).size().rename("count").reset_index()
    late_dropped = views.loc[too_late, ["seq", "window_start"]].reset_index(drop=True)
    return OracleResult(sorted_rows(SPEC, rows), rejects, late_dropped)


def rewind(inp: RewindInput) -> Rewind:
    """``dmk cutover --rewind``: start at the oldest joined view of a window still open at the legacy watermark.

    :func:`kit.workloads.rewind.rewind_windows` over the views with a campaign: they alone are counted and move
    the watermark (the filter and the join come before it).

    Raises:
        ConfigError: no dataset spec, whose campaign table the join reads.
    """
    if inp.dataset is None:
        msg = ("ysb's rewind joins the views to their campaigns, a table of the replayed dataset: the legacy output's "
               "driver-config.json names the dataset")
        raise ConfigError(msg, field="dataset", expected="the replayed dataset's spec", actual=None)
    events = inp.events
    views = events[(events["event_type"] == "view") & events["ad_id"].isin(set(ad_campaigns(inp.dataset)))]
    return rewind_windows(views, inp, windows=(("tumbling", WINDOW_MS, WINDOW_MS),), delay_ms=WATERMARK_DELAY_MS,
                          window_end=inp.emitted.eval(ROW_TIME) if len(inp.emitted) else pd.Series(dtype="int64"),
                          key_columns=SPEC.key_columns)


SPEC = WorkloadSpec(
    name="ysb",
    summary="Yahoo Streaming Benchmark: views joined to campaigns, counted per campaign per 10 s window",
    inputs=("events",),
    key_columns=("campaign_id", "window_start"),
    value_columns=("count",),
    output_mode="append",
    granularity="view count per campaign per event-time window (each window emitted once, when final)",
    watermark_delay_ms=WATERMARK_DELAY_MS,
    oracle=oracle,
    horizon=lambda dataset: (WINDOW_MS + WATERMARK_DELAY_MS, "a 10 s window and the 5 s watermark delay"),
    carry=StateCarry(
        "rewound", row_time=ROW_TIME, rewind=rewind,
        note="open windows are in no output row: dmk cutover --rewind starts the modern query at the oldest joined "
        "view of a window the legacy watermark had not closed and drops the windows the legacy job emitted",
    ),
)
