"""The kit's one offset-range type (:mod:`kit.ranges`), legacy's Spark 2.4 ``OffsetRange`` built on it, and the
stand-ins' progress row (:mod:`kit.progress`) that carries such ranges."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from kafka import TopicPartition

from kit.errors import ConfigError, InvalidOffsetRange
from kit.progress import ProgressRow, read_progress_rows
from kit.ranges import LINES, OffsetRange
from legacy.kafka import OffsetRange as SparkOffsetRange
from legacy.offsets import OffsetRange as StoreOffsetRange
from legacy.offsets import to_offset_ranges


def test_one_type_for_every_offset_range() -> None:
    assert StoreOffsetRange is OffsetRange  # the offset stores' ranges are the kit's
    r = OffsetRange("events", 2, 10, 25)
    assert (r.count(), r.fromOffset, r.untilOffset, r.topic_partition) == (15, 10, 25, TopicPartition("events", 2))
    topic, partition, first, until = r
    assert (topic, partition, first, until) == ("events", 2, 10, 25)
    assert sorted([OffsetRange("b", 0, 0, 1), OffsetRange("a", 1, 5, 6), OffsetRange("a", 0, 9, 9)]) == [
        OffsetRange("a", 0, 9, 9), OffsetRange("a", 1, 5, 6), OffsetRange("b", 0, 0, 1)]
    for bad, problem in ((("events", 0, 5, 3), "until_offset 3 < from_offset 5"),
                         (("events", -1, 0, 3), "partition and offsets must be >= 0"),
                         (("no spaces", 0, 0, 3), "is not a Kafka topic name"),
                         (("events", 0, 1.5, 3), "is not an integer")):
        with pytest.raises(InvalidOffsetRange, match=problem) as refused:
            OffsetRange(*bad)
        assert refused.value.value == bad


def test_legacys_spark_24_offset_range_is_the_kit_type_with_spark_names() -> None:
    spark = SparkOffsetRange(topic="events", partition=0, fromOffset=3, untilOffset=9)
    assert isinstance(spark, OffsetRange) and (spark.from_offset, spark.until_offset, spark.count()) == (3, 9, 6)
    assert str(spark) == "OffsetRange(topic: events, partition: 0, range: [3 -> 9]"
    assert eval(repr(spark), {"OffsetRange": SparkOffsetRange}) == spark  # noqa: S307 - its repr round-trips
    assert pickle.loads(pickle.dumps(spark)) == spark and hash(spark) == hash(SparkOffsetRange("events", 0, 3, 9))
    assert to_offset_ranges([spark]) == (spark,)  # the stores take it as it is
    with pytest.raises(ConfigError, match="untilOffset 2 is before fromOffset 3 for events-0") as refused:
        SparkOffsetRange("events", 0, 3, 2)
    assert refused.value.field == "untilOffset"


def test_a_progress_row_round_trips_in_each_stand_ins_shape(tmp_path: Path) -> None:
    dstream = ProgressRow(batch_ms=1000, completed_ms=1400, records=7,
                          ranges=(OffsetRange("events", 0, 0, 5), OffsetRange(LINES, 0, 0, 2)))
    query = ProgressRow(batch_ms=2000, completed_ms=2300, records=0, ranges=(), query="counts", query_id="q-1",
                        batch_id=4, clock=True)
    assert dstream.to_json() == {"batch_ms": 1000, "completed_ms": 1400, "records": 7,
                                 "ranges": [["events", 0, 0, 5], ["lines", 0, 0, 2]]}
    assert set(query.to_json()) == {"batch_ms", "completed_ms", "records", "ranges", "query", "query_id", "batch_id",
                                    "clock"}
    assert (dstream.key, query.key) == ("1000", "q-1/4")
    import json

    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in (dstream, query)) + '{"batch_ms": 3')
    assert read_progress_rows(path) == [dstream, query]  # the line still being written is left out
    assert read_progress_rows(tmp_path / "none.jsonl") == []
    with pytest.raises(ConfigError, match="a progress row with no 'records'"):
        ProgressRow.from_json({"batch_ms": 1, "completed_ms": 2, "ranges": []})
    with pytest.raises(ConfigError, match="a progress row with unknown field 'batch'"):
        ProgressRow.from_json({**dstream.to_json(), "batch": 1})
