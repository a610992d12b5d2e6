"""The Structured Streaming source's executor read path: Arrow record batches vs plain tuples.

Both read the same 200k-record partition through kit.kafka.read_range and hand rows to Spark in the two
shapes PySpark's Python Data Source API accepts; the raw consumer loop is the reference. Run:
``pytest benchmarks/test_bench_modern_read.py --benchmark-only``.
"""

from __future__ import annotations

import datetime
import pyarrow as pa
import pytest

from kit.kafka import Kafka
from modern._options import SourceSettings
from modern.kafka import KafkaInputPartition, _read

from conftest import RECORDS


def _settings(bootstrap_servers: str, topic: str) -> SourceSettings:
    return SourceSettings.from_options({"kafka.bootstrap.servers": bootstrap_servers, "subscribe": topic}, streaming=True)


def _arrow(settings: SourceSettings, topic: str) -> int:
    return sum(batch.num_rows for batch in _read(settings, KafkaInputPartition(topic, 0, 0, RECORDS)))


def _tuples(settings: SourceSettings, topic: str) -> int:
    utc = datetime.timezone.utc
    with Kafka(settings.bootstrap_servers) as kafka:
        rows = (
            (r.key, r.value, r.topic, r.partition, r.offset,
             datetime.datetime.fromtimestamp(r.timestamp / 1000, utc), r.timestamp_type)
            for r in kafka.read_range(topic, 0, 0, RECORDS)
        )
        return sum(1 for _ in rows)


@pytest.mark.benchmark(group="modern read path, 200k records")
def test_arrow_batches(benchmark, bootstrap_servers: str, loaded_topic: str) -> None:
    settings = _settings(bootstrap_servers, loaded_topic)
    assert benchmark.pedantic(_arrow, args=(settings, loaded_topic), rounds=3) == RECORDS


@pytest.mark.benchmark(group="modern read path, 200k records")
def test_tuples(benchmark, bootstrap_servers: str, loaded_topic: str) -> None:
    settings = _settings(bootstrap_servers, loaded_topic)
    assert benchmark.pedantic(_tuples, args=(settings, loaded_topic), rounds=3) == RECORDS


def test_arrow_schema_is_sparks(bootstrap_servers: str, loaded_topic: str) -> None:
    batch = next(iter(_read(_settings(bootstrap_servers, loaded_topic), KafkaInputPartition(loaded_topic, 0, 0, 10))))
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.num_rows == 10
