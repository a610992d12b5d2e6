"""Run a team's unmodified Structured Streaming script on the kit, for ``dmk compare-jobs``.

:func:`install`, called in the job's own process before its script runs, does two things:

* ``format("kafka")`` works without Spark's JVM connector (``spark-sql-kafka-0-10``): where that connector
  is absent, reads use the kit's ``kafka-py`` source (:mod:`modern.kafka`). Batch writes use its sink in
  append mode, Spark's only mode for Kafka. A streaming write goes through ``foreachBatch`` with the batch
  sink, because a Python streaming sink refuses update mode, which aggregations write in. Spark's own Kafka
  sink is at-least-once, and so is this. With the connector present, nothing changes.
* every progress of every query the script starts is appended to the progress file as one JSON line, in the
  legacy stand-in's shape (``batch_ms``, ``completed_ms``, ``records``, ``ranges`` of ``[topic, partition,
  from, until]``) plus ``query`` and ``batch_id``. That is how the harness knows the job has consumed its
  input.

Example (what ``python -m compare.jobrun --engine modern SCRIPT ARGS`` does)::

    install("runs/x/modern/progress.jsonl")
    runpy.run_path("jobs/modern.py", run_name="__main__")
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from kit.security import KAFKA_SECURITY_ENV

__all__ = ["install"]

_KAFKA = "kafka"
_LOCK = threading.Lock()


def _kafka_format(spark: Any) -> str:
    from modern.kafka import source_format

    return source_format(spark)


def _batch_row(progress: dict[str, Any]) -> dict[str, Any]:
    """A query progress as the stand-ins report a batch: the legacy stand-in's fields, plus the query's."""
    started = round(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)
    from modern.kafka import offsets_from_json

    ranges = []
    for source in progress.get("sources", []):
        start = offsets_from_json(source.get("startOffset") or {})
        end = offsets_from_json(source.get("endOffset") or {})
        ranges += [[tp.topic, tp.partition, start.get(tp, until), until]
                   for tp, until in sorted(end.items(), key=lambda item: (item[0].topic, item[0].partition))]
    return {"batch_ms": started, "completed_ms": started + int(progress.get("batchDuration", 0)),
            "records": int(progress.get("numInputRows", 0)), "ranges": ranges,
            "query": progress.get("name"), "batch_id": progress.get("batchId")}


def _progress_listener(path: Path) -> Any:
    from modern._progress import progress_listener

    def log(progress: dict[str, Any]) -> None:
        with _LOCK, open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(_batch_row(progress)) + "\n")

    return progress_listener(log)


def install(progress_path: str | Path) -> None:
    """Route ``format("kafka")`` to the kit where Spark's connector is absent; log every query progress.

    Idempotent. Says so on stderr, so the job's log shows what stood in.
    """
    from pyspark.sql import DataFrameReader, DataFrameWriter
    from pyspark.sql.streaming import DataStreamReader, DataStreamWriter

    path = Path(progress_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if getattr(DataStreamWriter, "_dmk_standin", False):
        return
    listening: set[int] = set()
    # dmk compare-jobs --kafka-config/--kafka-option, as kafka.* options: set when the job names the Kafka format,
    # so the job's own options, set after, win over them.
    secured = {f"kafka.{k}": str(v) for k, v in json.loads(os.environ.get(KAFKA_SECURITY_ENV) or "{}").items()}

    def reading(original: Any) -> Any:
        def format_(self: Any, source: str) -> Any:
            reader = original(self, _kafka_format(self._spark) if source == _KAFKA else source)
            return reader.options(**secured) if source == _KAFKA and secured else reader

        return format_

    batch_format = DataFrameWriter.format

    def batch_write_format(self: Any, source: str) -> Any:
        if source != _KAFKA:
            return batch_format(self, source)
        chosen = _kafka_format(self._spark)
        writer = batch_format(self, chosen).options(**secured)
        return writer.mode("append") if chosen != _KAFKA else writer

    stream_format, stream_option = DataStreamWriter.format, DataStreamWriter.option

    def stream_write_format(self: Any, source: str) -> Any:
        if source == _KAFKA and _kafka_format(self._spark) != _KAFKA:
            self._dmk_kafka_options = dict(secured)  # written batch by batch at start(), see the module docstring
            return self
        writer = stream_format(self, source)
        for key, value in (secured.items() if source == _KAFKA else ()):
            writer = stream_option(writer, key, value)
        return writer

    def stream_write_option(self: Any, key: str, value: Any) -> Any:
        if getattr(self, "_dmk_kafka_options", None) is not None:
            self._dmk_kafka_options[key] = value
        return stream_option(self, key, value)

    def stream_write_options(self: Any, **options: Any) -> Any:
        for key, value in options.items():
            stream_write_option(self, key, value)
        return self

    start = DataStreamWriter.start

    def start_reporting(self: Any, *args: Any, **kwargs: Any) -> Any:
        spark = self._spark
        if id(spark) not in listening:
            spark.streams.addListener(_progress_listener(path))
            listening.add(id(spark))
        kafka_options = getattr(self, "_dmk_kafka_options", None)
        if kafka_options is not None:
            sink_options = {k: str(v) for k, v in kafka_options.items() if k.startswith("kafka.") or k in (
                "topic", "includeHeaders")}
            chosen = _kafka_format(spark)

            def write_batch(frame: Any, batch_id: int) -> None:
                frame.write.format(chosen).options(**sink_options).mode("append").save()

            self.foreachBatch(write_batch)
        return start(self, *args, **kwargs)

    DataStreamReader.format = reading(DataStreamReader.format)  # type: ignore[method-assign]
    DataFrameReader.format = reading(DataFrameReader.format)  # type: ignore[method-assign]
    DataFrameWriter.format = batch_write_format  # type: ignore[method-assign]
    DataStreamWriter.format = stream_write_format  # type: ignore[method-assign]
    DataStreamWriter.option = stream_write_option  # type: ignore[method-assign]
    DataStreamWriter.options = stream_write_options  # type: ignore[method-assign]
    DataStreamWriter.start = start_reporting  # type: ignore[method-assign]
    DataStreamWriter._dmk_standin = True  # type: ignore[attr-defined]
    print("dmk: format('kafka') is served by the kit's kafka-py source and sink in this process where Spark's "
          f"spark-sql-kafka connector is absent; query progress is reported to {path}", file=sys.stderr, flush=True)
