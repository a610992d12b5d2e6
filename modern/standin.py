"""Run a team's unmodified Structured Streaming script on the kit, for ``dmk compare-jobs``.

:func:`install`, called in the job's own process before its script runs, does two things:

* ``format("kafka")`` works without Spark's JVM connector (``spark-sql-kafka-0-10``): where that connector
  is absent, reads use the kit's ``kafka-py`` source (:mod:`modern.kafka`). Batch writes use its sink in
  append mode, Spark's only mode for Kafka. A streaming write goes through ``foreachBatch`` with the batch
  sink, because a Python streaming sink refuses update mode, which aggregations write in. Spark's own Kafka
  sink is at-least-once, and so is this. With the connector present, nothing changes.
* every progress of every query the script starts is appended to the progress file as one
  :class:`kit.progress.ProgressRow`, as the legacy stand-in's (``batch_ms``, ``completed_ms``, ``records``,
  ``ranges`` of ``[topic, partition, from, until]``) plus ``query``, ``query_id``, ``batch_id`` and ``clock``.
  That is how the harness knows the job has consumed its input. A source other than Kafka (socket, files)
  reports ``["lines", 0, from, until]``: the rows it had delivered before and after the batch (from
  ``numInputRows``);
* the job's inputs are fed by the harness: ``format("socket")`` (and a draft's ``dstream-socket``) connects to
  ``$DMK_SOCKET`` (``host:port``) whatever host and port the job names, file sources (``text``, ``csv``,
  ``json``...) read ``$DMK_INPUT_DIR`` when it is set. Each input the job opens is noted in ``inputs.jsonl``;
* printed output is recorded as rows in ``printed.jsonl`` beside the progress file, with its batch
  (``batch_id`` and the query's ``writer``) and its stream (``FILE:LINE`` of the call): every row of a
  ``format("console")`` sink (the console shows what Spark's console sink shows: ``numRows``, ``truncate``),
  and every line the job prints (to ``sys.stdout``) inside a ``foreachBatch`` function. A ``pprint``
  reproduced there (a function named ``take_and_print`` calling ``rdd.take(num + 1)``, as Spark's pprint and
  ``dmk migrate``'s drafts do) records every element of the batch as a row, not only the ``num`` it prints.
* with ``$DMK_OUTPUT_REDIRECT`` (``dmk compare-jobs --output files:LOC``), what the job writes under its own
  location ``LOC`` goes to the run's directory instead (:mod:`kit.own_output`): a query's ``writeStream``
  path (``option("path", ...)``, ``start(path)``), DataFrame writers (in ``foreachBatch`` too) and RDD writers
  (a ``dmk migrate`` draft's ``saveAsTextFiles``); every write is noted in ``outputs.jsonl``.

Example (what ``python -m compare.jobrun --engine modern SCRIPT ARGS`` does)::

    install("runs/x/modern/progress.jsonl")
    runpy.run_path("jobs/modern.py", run_name="__main__")
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from kit import layout, own_output
from kit.printed import Tee
from kit.progress import ProgressRow
from kit.ranges import LINES, OffsetRange
from kit.security import KAFKA_SECURITY_ENV

__all__ = ["install"]

_KAFKA = "kafka"
_LOCK = threading.Lock()
_FILE_FORMATS = ("text", "csv", "json", "parquet", "orc")
# Spark's socket source, and the receiver source `dmk migrate`'s drafts read a socketTextStream through (its
# draft runtime registers it; the same host and port options).
_SOCKET_FORMATS = ("socket", "dstream-socket")
_HERE = (os.sep + "pyspark" + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)
_LINES: dict[tuple[str, int], int] = {}  # rows delivered so far by each (query, source) that is not Kafka


def _caller() -> str:
    """``FILE:LINE`` of the job's own call that reached the stand-in (the first frame outside PySpark and the kit)."""
    for frame in inspect.stack()[2:]:
        if not any(part in frame.filename for part in _HERE):
            return f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return "?"


def _write(progress: Path, name: str, row: dict[str, Any]) -> None:
    with _LOCK, open(progress.parent / name, "a", encoding="utf-8") as out:
        out.write(json.dumps(row, default=repr) + "\n")


def _declared_output(frame: Any) -> str | None:
    """A ``dmk migrate`` draft's pprint: the job's ``FILE:LINE`` of it (its runtime's ``declared_at``), else None.

    A draft runs all of a job's outputs in one foreachBatch; each is named by its own line, as the DStream job's
    are by the legacy stand-in, so a job printing several streams can be compared stream by stream.
    """
    for _ in range(8):
        if frame is None:
            return None
        declared = frame.f_locals.get("declared_at")
        if isinstance(declared, str):
            return declared
        frame = frame.f_back
    return None


_BATCH = threading.local()  # the foreachBatch call running in this thread (its batch, its printed lines)


def _values(element: Any) -> tuple[list[Any], list[str] | None]:
    """An element as a row: a tuple's or list's items by position, a Row's or dict's by name, else one value."""
    if hasattr(element, "asDict"):
        return [_jsonable(v) for v in element], list(element.__fields__)
    if isinstance(element, dict):
        return [_jsonable(v) for v in element.values()], [str(k) for k in element]
    if isinstance(element, (tuple, list)):
        return [_jsonable(v) for v in element], None
    return [_jsonable(element)], None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return {k: _jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _kafka_format(spark: Any) -> str:
    from modern.kafka import source_format

    return source_format(spark)


def _batch_row(progress: dict[str, Any]) -> ProgressRow:
    """A query progress as the stand-ins report a batch: the legacy stand-in's fields, plus the query's."""
    started = round(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)
    from modern.kafka import offsets_from_json

    ranges: list[OffsetRange] = []
    clock = False  # a micro-batch every interval (a dmk migrate draft's tick source): settled by count, not by quiet
    for n, source in enumerate(progress.get("sources", [])):
        if str(source.get("description", "")).startswith("RatePerMicroBatch"):
            clock = True
            continue  # a dmk migrate draft's tick source (one row a micro-batch, so quiet intervals run): no input
        end_json = _parsed(source.get("endOffset"))
        if isinstance(end_json, dict) and end_json and all(isinstance(v, dict) for v in end_json.values()):
            start = offsets_from_json(_parsed(source.get("startOffset")) or {})
            end = offsets_from_json(end_json)
            ranges += [OffsetRange(tp.topic, tp.partition, start.get(tp, until), until)
                       for tp, until in sorted(end.items(), key=lambda item: (item[0].topic, item[0].partition))]
        elif "numInputRows" in source:  # a socket, file or other source: the rows it delivered, counted
            key = (str(progress.get("id")), n)
            before = _LINES.get(key, 0)
            _LINES[key] = before + int(source["numInputRows"])
            ranges.append(OffsetRange(LINES, 0, before, _LINES[key]))
    return ProgressRow(batch_ms=started, completed_ms=started + int(progress.get("batchDuration", 0)),
                       records=int(progress.get("numInputRows", 0)), ranges=tuple(ranges),
                       query=progress.get("name"), query_id=progress.get("id"), batch_id=progress.get("batchId"),
                       clock=clock)


def _parsed(offset: Any) -> Any:
    if isinstance(offset, str):
        try:
            return json.loads(offset)
        except ValueError:
            return offset
    return offset


def _progress_listener(path: Path) -> Any:
    from modern._progress import progress_listener

    def log(progress: dict[str, Any]) -> None:
        with _LOCK, open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(_batch_row(progress).to_json()) + "\n")

    return progress_listener(log)


def install(progress_path: str | Path) -> None:
    """Route ``format("kafka")`` to the kit where Spark's connector is absent; log every query progress.

    Idempotent. Says so on stderr, so the job's log shows what stood in.
    """
    from pyspark.sql import DataFrameReader, DataFrameWriter
    from pyspark.sql.streaming import DataStreamReader, DataStreamWriter

    path = path_ = Path(progress_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if getattr(DataStreamWriter, "_dmk_standin", False):
        return
    redirect = own_output.install_from_env(lambda row: _write(path_, layout.OUTPUTS, row))  # --output files:LOC
    listening: set[int] = set()
    # dmk compare-jobs --kafka-config/--kafka-option, as kafka.* options: set when the job names the Kafka format,
    # so the job's own options, set after, win over them.
    secured = {f"kafka.{k}": str(v) for k, v in json.loads(os.environ.get(KAFKA_SECURITY_ENV) or "{}").items()}

    def reading(original: Any) -> Any:
        def format_(self: Any, source: str) -> Any:
            self._dmk_format = source
            reader = original(self, _kafka_format(self._spark) if source == _KAFKA else source)
            return reader.options(**secured) if source == _KAFKA and secured else reader

        return format_

    stream_load = DataStreamReader.load

    def load_fed(self: Any, path: Any = None, format: Any = None, *args: Any, **kwargs: Any) -> Any:
        source = format or getattr(self, "_dmk_format", None)
        if format is not None:
            self._dmk_format = format
        socket, directory = os.environ.get("DMK_SOCKET"), os.environ.get("DMK_INPUT_DIR")
        if source in _SOCKET_FORMATS:
            if socket:
                host, _, port = socket.rpartition(":")
                self.option("host", host).option("port", port)
            _write(path_, layout.INPUTS, {"kind": "socket", "at": _caller()})
        elif source in _FILE_FORMATS:
            path = directory or path
            _write(path_, layout.INPUTS, {"kind": "files", "at": _caller()})
        elif source == _KAFKA:
            servers, topic = os.environ.get("DMK_KAFKA_BOOTSTRAP"), os.environ.get("DMK_KAFKA_TOPIC")
            if servers and topic:  # a job naming its own Kafka (compare-jobs: no {bootstrap} {topic} given)
                self.option("kafka.bootstrap.servers", servers).option("subscribe", topic)
            _write(path_, layout.INPUTS, {"kind": "kafka", "at": _caller()})
        return stream_load(self, path, format, *args, **kwargs)

    def file_reader(name: str) -> Any:
        def read(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
            directory = os.environ.get("DMK_INPUT_DIR")
            _write(path_, layout.INPUTS, {"kind": "files", "at": _caller()})
            return original[name](self, directory or path, *args, **kwargs)

        return read

    original = {name: getattr(DataStreamReader, name) for name in _FILE_FORMATS}

    batch_format = DataFrameWriter.format

    def batch_write_format(self: Any, source: str) -> Any:
        if source != _KAFKA:
            return batch_format(self, source)
        chosen = _kafka_format(self._spark)
        writer = batch_format(self, chosen).options(**secured)
        return writer.mode("append") if chosen != _KAFKA else writer

    stream_format, stream_option = DataStreamWriter.format, DataStreamWriter.option

    def stream_write_format(self: Any, source: str) -> Any:
        if source == "console":  # recorded row by row, and shown as Spark's console sink shows it, at start()
            self._dmk_console = {"stream": _caller(), "numRows": 20, "truncate": True}
            return self
        if source == _KAFKA and _kafka_format(self._spark) != _KAFKA:
            self._dmk_kafka_options = dict(secured)  # written batch by batch at start(), see the module docstring
            return self
        writer = stream_format(self, source)
        for key, value in (secured.items() if source == _KAFKA else ()):
            writer = stream_option(writer, key, value)
        return writer

    def stream_write_option(self: Any, key: str, value: Any) -> Any:
        if redirect is not None and str(key).lower() == "path":
            value = redirect(value, "DataStreamWriter.option('path')")
        if getattr(self, "_dmk_kafka_options", None) is not None:
            self._dmk_kafka_options[key] = value
        console = getattr(self, "_dmk_console", None)
        if console is not None and key in ("numRows", "truncate"):
            console[key] = int(value) if key == "numRows" else str(value).lower() == "true"
        return stream_option(self, key, value)

    for_each_batch = DataStreamWriter.foreachBatch

    def recorded_batches(func: Any, name: str, writer: str) -> Any:
        def recorded(frame: Any, batch_id: int) -> Any:
            console, tee = sys.stdout, Tee(sys.stdout)
            sys.stdout = tee
            _BATCH.context = {"stream": name, "writer": writer, "batch_id": batch_id, "tee": tee, "skip": []}
            try:
                return func(frame, batch_id)
            finally:
                sys.stdout = console
                skipped = {i for start, count in _BATCH.context["skip"] for i in range(start, start + count)}
                _BATCH.context = None
                for n, line in enumerate("".join(tee.text).splitlines()):
                    if n not in skipped:
                        _write(path_, layout.PRINTED, {"stream": name, "kind": "line", "writer": writer,
                                                        "batch_id": batch_id, "line": line})

        return recorded

    from pyspark import RDD

    rdd_take = RDD.take

    def take_all_for_pprint(self: Any, num: int) -> Any:
        """``RDD.take``, recording every element where a foreachBatch function's ``take_and_print`` calls it.

        That is pprint reproduced per micro-batch (as ``dmk migrate``'s drafts do): all of the batch is a row
        each, not only the ``num - 1`` elements it prints.
        """
        context = getattr(_BATCH, "context", None)
        if context is None or sys._getframe(1).f_code.co_name != "take_and_print":
            return rdd_take(self, num)
        everything = self.collect()
        stream = _declared_output(sys._getframe(1)) or context["stream"]
        for element in everything:
            values, names = _values(element)
            _write(path_, layout.PRINTED, {"stream": stream, "kind": "row", "writer": context["writer"],
                                            "batch_id": context["batch_id"], "values": values, "names": names})
        shown = min(num - 1, len(everything))
        # pprint's lines (frame, elements, "...", blank) are recorded as the rows above, not again as lines.
        start = len("".join(context["tee"].text).splitlines())
        context["skip"].append((start, 3 + shown + (1 if len(everything) > shown else 0) + 1))
        return everything[:num]

    def for_each_batch_recorded(self: Any, func: Any) -> Any:
        self._dmk_writer = getattr(self, "_dmk_writer", None) or uuid.uuid4().hex
        return for_each_batch(self, recorded_batches(func, _caller(), self._dmk_writer))

    def console_batches(console: dict[str, Any], writer: str) -> Any:
        def show(frame: Any, batch_id: int) -> None:
            rows = frame.collect()
            for row in rows:
                _write(path_, layout.PRINTED, {"stream": console["stream"], "kind": "row", "writer": writer,
                                                "batch_id": batch_id, "values": [_jsonable(v) for v in row],
                                                "names": list(frame.columns)})
            # As Spark's console sink prints a batch.
            print("-------------------------------------------")
            print(f"Batch: {batch_id}")
            print("-------------------------------------------")
            frame.show(console["numRows"], console["truncate"])

        return show

    def stream_write_options(self: Any, **options: Any) -> Any:
        for key, value in options.items():
            stream_write_option(self, key, value)
        return self

    start = DataStreamWriter.start

    def start_reporting(self: Any, *args: Any, **kwargs: Any) -> Any:
        if redirect is not None and (args or kwargs.get("path") is not None):
            if args:
                args = (redirect(args[0], "DataStreamWriter.start(path)"), *args[1:])
            else:
                kwargs["path"] = redirect(kwargs["path"], "DataStreamWriter.start(path)")
        spark = self._spark
        if id(spark) not in listening:
            spark.streams.addListener(_progress_listener(path))
            listening.add(id(spark))
        self._dmk_writer = getattr(self, "_dmk_writer", None) or uuid.uuid4().hex
        console = getattr(self, "_dmk_console", None)
        if console is not None:
            for_each_batch(self, console_batches(console, self._dmk_writer))
        kafka_options = getattr(self, "_dmk_kafka_options", None)
        if kafka_options is not None:
            sink_options = {k: str(v) for k, v in kafka_options.items() if k.startswith("kafka.") or k in (
                "topic", "includeHeaders")}
            chosen = _kafka_format(spark)

            def write_batch(frame: Any, batch_id: int) -> None:
                frame.write.format(chosen).options(**sink_options).mode("append").save()

            for_each_batch(self, write_batch)
        query = start(self, *args, **kwargs)
        _write(path_, layout.PRINTED, {"writer": self._dmk_writer, "query_id": str(query.id)})
        return query

    DataStreamReader.format = reading(DataStreamReader.format)  # type: ignore[method-assign]
    DataStreamReader.load = load_fed  # type: ignore[method-assign]
    for name in _FILE_FORMATS:
        setattr(DataStreamReader, name, file_reader(name))
    DataStreamWriter.foreachBatch = for_each_batch_recorded  # type: ignore[method-assign]
    RDD.take = take_all_for_pprint  # type: ignore[method-assign]
    DataFrameReader.format = reading(DataFrameReader.format)  # type: ignore[method-assign]
    DataFrameWriter.format = batch_write_format  # type: ignore[method-assign]
    DataStreamWriter.format = stream_write_format  # type: ignore[method-assign]
    DataStreamWriter.option = stream_write_option  # type: ignore[method-assign]
    DataStreamWriter.options = stream_write_options  # type: ignore[method-assign]
    DataStreamWriter.start = start_reporting  # type: ignore[method-assign]
    DataStreamWriter._dmk_standin = True  # type: ignore[attr-defined]
    print("dmk: format('kafka') is served by the kit's kafka-py source and sink in this process where Spark's "
          f"spark-sql-kafka connector is absent; query progress is reported to {path}", file=sys.stderr, flush=True)
