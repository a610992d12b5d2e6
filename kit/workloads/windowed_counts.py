"""``windowed_counts``: events per ``key`` in event-time windows, tumbling and sliding, with allowed lateness.

Two window kinds over the same events: tumbling 10 s windows, and sliding 10 s windows every 5 s (Spark's
``window()``: ``[start, start + 10 s)``, starts on multiples of the slide from the epoch). The watermark is
the largest event time seen minus 5 s (:attr:`WorkloadSpec.watermark_delay_ms`); a record is dropped from a
window whose end is at or behind the watermark when it arrives (so it can be kept in one sliding window and
dropped from the other), and a window is emitted once, in append mode, when its end is at or behind the
watermark. Windows still open when the input ends are emitted by no engine.

Modern: ``withWatermark`` + ``groupBy(window(...), "key")`` for each kind, unioned, in append mode. Legacy:
:func:`legacy.workloads.event_time_operator` keeps the counts per window and emits each window once, when
final; a second legacy variant, ``naive``, is what DStream code usually looked like
(``reduceByKeyAndWindow`` over *processing-time* windows), kept to show the divergence, not to match.

Compared per event-time window: ``(window_kind, window_start, key) -> count``. A late drop is identified by
the record and the window it was dropped from, ``"<kind>:<window_start>"``.

Example:
    >>> from kit.dataset import DatasetSpec, generate
    >>> dataset = DatasetSpec.from_profile("clean", records=20_000, seed=1)
    >>> result = SPEC.oracle(generate(dataset), dataset)
    >>> sorted(result.rows["window_kind"].unique())
    ['sliding', 'tumbling']
"""

from __future__ import annotations

import pandas as pd

from kit.dataset import DatasetSpec
from kit.workloads import (
    OracleResult,
    StateCarry,
    Variant,
    WorkloadSpec,
    parse_dataset,
    sorted_rows,
    window_starts,
)
from kit.workloads.rewind import Rewind, RewindInput, rewind_windows

__all__ = ["ROW_TIME", "SPEC", "WATERMARK_DELAY_MS", "WINDOWS", "late_detail", "oracle", "rewind"]

WINDOWS: tuple[tuple[str, int, int], ...] = (("tumbling", 10_000, 10_000), ("sliding", 10_000, 5_000))
"""``(window_kind, size_ms, slide_ms)`` of every window kind the workload counts in."""

WATERMARK_DELAY_MS = 5_000
"""The allowed lateness: ``SPEC.watermark_delay_ms`` as an int (the field is None for workloads without event time)."""


assert len({size for _, size, _ in WINDOWS}) == 1, "ROW_TIME assumes one window size"
ROW_TIME = f"window_start + {WINDOWS[0][1]}"
"""An output row's event time for a rewound cutover: its window's end (both kinds are 10 s long)."""


def late_detail(kind: str, window_start: int) -> str:
    """How a late drop names the window it was dropped from, e.g. ``"sliding:1767225605000"``."""
    return f"{kind}:{window_start}"


def oracle(frame: pd.DataFrame, dataset: DatasetSpec) -> OracleResult:
    """Count valid events per key and window; drop them from windows already behind the watermark."""
    events, rejects = parse_dataset(frame)
    delay = WATERMARK_DELAY_MS
    final_watermark = int(events["event_time"].max()) - delay if len(events) else -(2**62)
    counted, late = [], []
    for kind, size, slide in WINDOWS:
        placed = events[["seq", "key", "prior_max_ms"]].join(window_starts(events["event_time"], size, slide))
        placed["window_kind"] = kind
        # Spark's rule, per window: late iff the window had ended by the watermark the record arrived under.
        too_late = placed["window_start"] + size <= placed["prior_max_ms"] - delay
        late.append(placed[too_late])
        kept = placed[~too_late]
        # Only windows the final watermark has passed are ever emitted.
        counted.append(kept[kept["window_start"] + size <= final_watermark])
    rows = pd.concat(counted).groupby(["window_kind", "window_start", "key"]).size().rename("count").reset_index()
    dropped = pd.concat(late)
    late_dropped = pd.DataFrame(
        {
            "seq": dropped["seq"].astype("int64"),
            "window": [
                late_detail(k, s)
                for k, s in zip(dropped["window_kind"], dropped["window_start"].tolist(), strict=True)
            ],
        }
    )
    return OracleResult(sorted_rows(SPEC, rows), rejects, late_dropped.reset_index(drop=True))


def rewind(inp: RewindInput) -> Rewind:
    """``dmk cutover --rewind``: start at the oldest record of a window still open at the legacy watermark.

    :func:`kit.workloads.rewind.rewind_windows` over every valid event (all of them move the watermark).
    """
    return rewind_windows(inp.events, inp, windows=WINDOWS, delay_ms=WATERMARK_DELAY_MS,
                          window_end=inp.emitted.eval(ROW_TIME) if len(inp.emitted) else pd.Series(dtype="int64"),
                          key_columns=SPEC.key_columns)


SPEC = WorkloadSpec(
    name="windowed_counts",
    summary="count per key in 10 s tumbling and 10 s/5 s sliding event-time windows, 5 s allowed lateness",
    inputs=("events",),
    key_columns=("window_kind", "window_start", "key"),
    value_columns=("count",),
    output_mode="append",
    granularity="count per key per event-time window (each window emitted once, when final)",
    watermark_delay_ms=WATERMARK_DELAY_MS,
    oracle=oracle,
    horizon=lambda dataset: (10_000 + WATERMARK_DELAY_MS, "a 10 s window and the 5 s watermark delay"),
    carry=StateCarry(
        "rewound", row_time=ROW_TIME, rewind=rewind,
        note="open windows are in no output row: dmk cutover --rewind starts the modern query at the oldest record "
        "of a window the legacy watermark had not closed and drops the windows the legacy job emitted",
    ),
    legacy=(
        Variant("default", "build"),
        Variant(
            "naive",
            "build_naive",
            equivalent=False,
            note="reduceByKeyAndWindow over processing-time windows: counts too-late records, windows by arrival",
        ),
    ),
)
