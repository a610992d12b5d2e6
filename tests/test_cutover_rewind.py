"""``dmk cutover --rewind``: the rewind rules held to the oracles at many kill points (pandas, no Spark), the CLI's
refusals, and (slow tier) the whole cutover of a killed legacy job, end to end.

The rule of a workload (``spec.carry.rewind``) gives the offsets the modern query starts at (``R``) and what its
output filter drops (``F``: rows at or before a cutoff, and the legacy rows it would produce again). Held to
the definition: the legacy output ``O_L`` plus ``F(modern output)`` equals the oracle over the whole input.

Without Spark, each engine is played by the oracle itself:

- the legacy job killed at a kill point ``k`` (the first ``k`` records processed, partitioned ``seq % 4`` as the
  replay does) emitted the oracle's rows over those ``k`` records, up to its watermark (emit on close): the
  largest event time before ``k``, or before its last batch's start (a batch of up to 1 s of event time, less than
  the datasets' lateness margin, as every engine the kit runs), minus the delay;
- the modern query is the oracle over the records it reads (from ``R`` on, in replay order), and, as its first
  micro-batch has no watermark at all, over the same records with the re-read ones in event-time order (no
  record among them is then late: the oracle's watermark never passes one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compare.cutover import union_of_outputs
from kit import workloads
from kit.dataset import DatasetSpec, generate
from kit.events import parse_event
from kit.workloads.rewind import Rewind, RewindInput, TopicPartition

PARTITIONS = 4
REWOUND = ("windowed_counts", "dedup")


def _dataset(seed: int) -> DatasetSpec:
    # 30 s of event time: windows and the watermark move several times; messy: late, too late, re-deliveries.
    return DatasetSpec.from_profile("messy", records=4000, seed=seed, events_per_second=150)


def _events(frame: pd.DataFrame) -> pd.DataFrame:
    """The valid records of ``frame`` as the cutover reads them: parsed, with topic, partition and offset."""
    rows = []
    for seq, value in zip(frame["seq"].tolist(), frame["value"].tolist(), strict=True):
        event, _ = parse_event(value)
        if event is not None:
            rows.append({**event, "topic": "t", "partition": seq % PARTITIONS, "offset": seq // PARTITIONS})
    columns = ["event_id", "user", "key", "ad_id", "ad_type", "event_type", "event_time", "topic", "partition", "offset"]
    return pd.DataFrame(rows, columns=columns)


def _offsets_below(k: int) -> dict[TopicPartition, int]:
    """The per-partition position after the first ``k`` records (``seq % 4`` partitioning)."""
    return {("t", p): len(range(p, k, PARTITIONS)) for p in range(PARTITIONS)}


_PARSED: dict[int, pd.DataFrame] = {}


def _parsed(frame: pd.DataFrame) -> pd.DataFrame:
    # Parsed once per dataset (the frames are the same object for all of a seed's kill points).
    if id(frame) not in _PARSED:
        _PARSED.clear()
        _PARSED[id(frame)] = _events(frame)
    return _PARSED[id(frame)]


def _time(value: bytes) -> int:
    event, _ = parse_event(value)
    return int(event["event_time"]) if event is not None else -(2**62)


def _last_batch_start(frame: pd.DataFrame, k: int, lag_s: float) -> int:
    """Where the legacy job's last batch before ``k`` began: its newest event time before was ``lag_s`` behind."""
    if not lag_s:
        return k  # the last batch held no records: its watermark came from all of them
    parsed = _parsed(frame)
    times = np.full(k, -(2**62), dtype=np.int64)
    seqs = (parsed["offset"] * PARTITIONS + parsed["partition"]).to_numpy()
    times[seqs[seqs < k]] = parsed["event_time"].to_numpy()[seqs < k]
    running = np.maximum.accumulate(times)
    return int(np.argmax(running >= running[-1] - lag_s * 1000)) + 1


def _drop_suppressed(spec: workloads.WorkloadSpec, rows: pd.DataFrame, rewind: Rewind) -> pd.DataFrame:
    """The output filter (``modern.cutover.suppress_emitted``), in pandas."""
    kept = rows[rows.eval(spec.carry.row_time) > rewind.cutoff_ms]
    keys = list(spec.key_columns)
    marked = kept.merge(rewind.suppress.assign(__emitted=True), on=keys, how="left")
    return marked[marked["__emitted"].isna()].drop(columns="__emitted")


def _cut_over(name: str, frame: pd.DataFrame, dataset: DatasetSpec, k: int, lag_s: float,
              expected: pd.DataFrame) -> dict[str, object]:
    spec = workloads.get(name)
    assert spec.carry.rewind is not None
    parsed = _parsed(frame)
    events = parsed[parsed["offset"] * PARTITIONS + parsed["partition"] < k]
    j = _last_batch_start(frame, k, lag_s)
    prefix = spec.oracle(frame.iloc[:k], dataset).rows
    if spec.output_mode == "append" and name != "dedup":
        legacy_watermark = int(events.loc[events["offset"] * PARTITIONS + events["partition"] < j,
                                          "event_time"].max()) - spec.watermark_delay_ms
        emitted = prefix[prefix.eval(spec.carry.row_time) <= legacy_watermark]
    else:
        emitted = prefix
    rewind = spec.carry.rewind(RewindInput(events, emitted, _offsets_below(k), _offsets_below(j), dataset))
    starts = np.array([rewind.starts[("t", p)] for p in range(PARTITIONS)])
    seqs = frame["seq"].to_numpy()
    read = frame[seqs // PARTITIONS >= starts[seqs % PARTITIONS]]
    assert all(rewind.starts[tp] <= at for tp, at in _offsets_below(k).items())
    for first_batch_unwatermarked in (False, True):
        modern_input = read
        if first_batch_unwatermarked:
            reread = read[read["seq"] < k]
            t = [(parse_event(v)[0] or {"event_time": 0})["event_time"] for v in reread["value"]]
            modern_input = pd.concat([reread.assign(_t=t).sort_values("_t", kind="stable").drop(columns="_t"),
                                      read[read["seq"] >= k]])
        modern = _drop_suppressed(spec, spec.oracle(modern_input, dataset).rows, rewind)
        union = union_of_outputs(spec, emitted.assign(batch=0), modern.assign(batch=1))
        pd.testing.assert_frame_equal(union.astype(expected.dtypes.to_dict()), expected, check_dtype=False)
    return {"k": k, "reread": int(sum(_offsets_below(k)[tp] - r for tp, r in rewind.starts.items())),
            "suppressed": len(rewind.suppress), "emitted": len(emitted)}


@pytest.mark.parametrize("name", REWOUND)
def test_rewound_cutover_equals_the_oracle_at_many_kill_points(name: str) -> None:
    seen = []
    for seed in (3, 11):
        dataset = _dataset(seed)
        frame = generate(dataset)
        expected = workloads.get(name).oracle(frame, dataset).rows
        chooser = random.Random(seed)
        points = sorted(chooser.sample(range(200, len(frame) - 200), 5))
        print(f"{name}: seed {seed}, kill points {points}")
        for k in points:
            for lag_s in (0.0, 1.0):
                seen.append(_cut_over(name, frame, dataset, k, lag_s, expected))
    # The cases exercised something: records re-read, and (for the windows) emitted rows suppressed.
    assert all(case["reread"] > 0 for case in seen)
    assert sum(int(case["suppressed"]) for case in seen) > 0  # type: ignore[call-overload]


def test_without_the_rewind_or_the_filter_the_union_is_wrong() -> None:
    """The rule is not vacuous: starting at the position, or keeping every modern row, breaks the equality."""
    dataset = _dataset(5)
    frame = generate(dataset)
    k = 2001
    for name in REWOUND:
        spec = workloads.get(name)
        assert spec.carry.rewind is not None
        events = _events(frame.iloc[:k])
        prefix = spec.oracle(frame.iloc[:k], dataset).rows
        emitted = prefix[prefix.eval(spec.carry.row_time) <= int(events["event_time"].max()) - 5000]
        position = _offsets_below(k)
        rewind = spec.carry.rewind(RewindInput(events, emitted, position, position, dataset))
        expected = spec.oracle(frame, dataset).rows
        seqs = frame["seq"].to_numpy()
        starts = np.array([rewind.starts[("t", p)] for p in range(PARTITIONS)])
        rewound = spec.oracle(frame[seqs // PARTITIONS >= starts[seqs % PARTITIONS]], dataset).rows
        unfiltered = union_of_outputs(spec, emitted.assign(batch=0), rewound.assign(batch=1))
        assert len(unfiltered) > len(expected)  # rows repeated
        from_position = _drop_suppressed(spec, spec.oracle(frame.iloc[k:], dataset).rows, rewind)
        not_rewound = union_of_outputs(spec, emitted.assign(batch=0), from_position.assign(batch=1))
        assert not not_rewound.equals(expected.astype(not_rewound.dtypes.to_dict()))
