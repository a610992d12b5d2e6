"""The Structured Streaming late-data rules the oracles are built on, pinned against Spark itself.

A file source with ``maxFilesPerTrigger=1`` makes one micro-batch per file, so the watermark of every batch
is known exactly. Watermark delay 5 s. Batches (key, event time in s): a@100, pad@100, c@125 (max 125, so
the eviction watermark becomes 120 in the next batch and the late-row watermark one batch after that),
pad@125, then x@112, y@117, w@118, v@120, u@121, h@200, one per batch.

What Spark 4.3 does, per operator (the kit's oracles and the legacy emulation follow this):
- ``window()``: a row is dropped from a window iff ``window.end <= watermark``;
- ``session_window``: a row is dropped iff ``event_time + gap <= watermark``;
- ``dropDuplicatesWithinWatermark``: a row is dropped iff ``event_time <= watermark``;
- late rows are judged by the *previous* batch's watermark (c@125 in batch 2 only drops rows from batch 4).
"""

from __future__ import annotations

import json
import os

import pytest

BATCHES = [("a", 100), ("z", 100), ("c", 125), ("z2", 125), ("x", 112), ("y", 117), ("w", 118), ("v", 120), ("u", 121), ("h", 200)]


@pytest.fixture
def events(spark, tmp_path):
    from pyspark.sql import functions as F  # noqa: N812

    source = tmp_path / "in"
    source.mkdir()
    for i, (key, seconds) in enumerate(BATCHES):
        path = source / f"b{i:03d}.json"
        path.write_text(json.dumps({"key": key, "ts": seconds * 1000}) + "\n")
        os.utime(path, (1_000_000 + 10 * i, 1_000_000 + 10 * i))  # the file source orders by mtime
    frame = (
        spark.readStream.schema("key string, ts long").option("maxFilesPerTrigger", 1).json(str(source))
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", "5 seconds")
    )
    return frame, tmp_path


def _run(frame, checkpoint) -> list:
    rows: list = []
    query = (
        frame.writeStream.outputMode("append")
        .foreachBatch(lambda df, batch_id: rows.extend(tuple(r) for r in df.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return sorted(rows)


def test_window_rows_are_dropped_when_the_window_end_is_behind_the_watermark(events) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    frame, tmp = events
    counts = frame.groupBy(F.window("event_time", "10 seconds"), "key").count()
    rows = _run(counts.select((F.unix_millis("window.start") / 1000).cast("long"), "key", "count"), tmp / "ckpt")
    # x, y, w fall in [110, 120), whose end 120 <= watermark 120: dropped. v and u open [120, 130).
    # h's window [200, 210) is still open when the input ends, so it is never emitted.
    assert rows == [(100, "a", 1), (100, "z", 1), (120, "c", 1), (120, "u", 1), (120, "v", 1), (120, "z2", 1)]


def test_session_rows_are_dropped_when_event_time_plus_gap_is_behind_the_watermark(events) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    frame, tmp = events
    sessions = frame.groupBy(F.session_window("event_time", "3 seconds"), "key").count()
    rows = _run(sessions.select((F.unix_millis("session_window.start") / 1000).cast("long"), "key"), tmp / "ckpt")
    # x (112 + 3 <= 120) and y (117 + 3 <= 120) are dropped; w (118 + 3 > 120) is kept.
    assert rows == [(100, "a"), (100, "z"), (118, "w"), (120, "v"), (121, "u"), (125, "c"), (125, "z2")]


def test_dedup_rows_are_dropped_when_event_time_is_not_after_the_watermark(events) -> None:
    frame, tmp = events
    rows = _run(frame.dropDuplicatesWithinWatermark(["key"]).select("key"), tmp / "ckpt")
    # x, y, w and v (120 <= 120) are dropped as late; u (121) is kept.
    assert rows == [("a",), ("c",), ("h",), ("u",), ("z",), ("z2",)]
