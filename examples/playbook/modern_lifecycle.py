"""Structured Streaming counterparts of the DStream lifecycle: sinks, listeners, stopping, waiting, test inputs.

Each function here is the modern half of a pair whose legacy half is in
:mod:`examples.playbook.legacy_lifecycle` (same construct, same order); ``docs/playbook.md`` ("Lifecycle, one
by one") shows both and ``tests/test_lifecycle.py`` runs both on the same data.

* :func:`upsert_batch` — ``foreachBatch`` writing a micro-batch to PostgreSQL idempotently, keyed by batch id
  (what replaces results and offsets committed in one transaction);
* :func:`batch_metrics_listener` — a ``StreamingQueryListener`` reporting
  :class:`examples.playbook.metrics.BatchMetrics`;
* :func:`stop_gracefully` — stop a query between micro-batches, with a deadline (Spark 4.3 has no graceful stop);
* :func:`run_until` / :func:`run_any_until` — ``awaitTermination(timeout)`` that raises the query's error;
* :func:`read_offset_range` — a batch read of offset ranges (``remember``/``slice``);
* :func:`text_file_stream`, :func:`socket_text_stream`, :func:`queue_stream` — the file and socket sources and a
  replayable test stream (PySpark has no Python memory source);
* :func:`with_trigger` — ``once``, ``availableNow``, processing time; continuous refused with a clear error (it is
  the runtime's :func:`modern.triggers.with_trigger`, which :mod:`modern.runner` uses).

Example::

    query = (with_trigger(frame.writeStream.foreachBatch(upsert_batch(dsn, "results")), "1 second")
             .option("checkpointLocation", "/ckpt/results").start())
    ...
    stopped = stop_gracefully(query, timeout_s=60)     # between two micro-batches
    assert stopped.clean
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples.playbook.metrics import BatchMetrics
from modern.errors import GracefulStopTimeout
from modern.triggers import with_trigger

__all__ = [
    "GracefulStop",
    "batch_metrics_listener",
    "queue_stream",
    "read_offset_range",
    "run_any_until",
    "run_until",
    "socket_text_stream",
    "stop_gracefully",
    "text_file_stream",
    "upsert_batch",
    "with_trigger",
]


# -- foreachRDD + offsets in one transaction  →  foreachBatch, idempotent by batch id ----------------------

# --8<-- [start:upsert_batch]
def upsert_batch(dsn: str, table: str) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function replacing micro-batch ``batch_id``'s rows of ``table`` in one transaction.

    The checkpoint keeps the offsets; a micro-batch re-run after a crash (its commit not logged) has the same
    id and the same rows, so deleting what an earlier attempt wrote under that id and inserting again leaves
    each row once. ``table`` has a ``batch_id BIGINT`` column followed by the frame's columns, in order.
    """

    def write(frame: Any, batch_id: int) -> None:
        import psycopg
        from psycopg import sql

        rows = [(batch_id, *row) for row in frame.collect()]
        columns = sql.SQL(", ").join(map(sql.Identifier, ["batch_id", *frame.columns]))
        marks = sql.SQL(", ").join([sql.Placeholder()] * (len(frame.columns) + 1))
        with psycopg.connect(dsn) as connection, connection.cursor() as cursor:  # one transaction
            cursor.execute(sql.SQL("DELETE FROM {} WHERE batch_id = %s").format(sql.Identifier(table)), (batch_id,))
            cursor.executemany(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(sql.Identifier(table), columns, marks),
                               rows)

    return write
# --8<-- [end:upsert_batch]


# -- StreamingListener  →  StreamingQueryListener ----------------------------------------------------------

# --8<-- [start:batch_metrics_listener]
def batch_metrics_listener(on_batch: Callable[[BatchMetrics], None], query_name: str | None = None) -> Any:
    """A listener for ``spark.streams.addListener`` calling ``on_batch`` once per completed micro-batch.

    Args:
        on_batch: called on Spark's listener thread with the micro-batch's figures.
        query_name: only report the query of this name (default: every query of the session).
    """
    from modern._progress import progress_listener

    def report(progress: dict[str, Any]) -> None:
        if query_name is not None and progress.get("name") != query_name:
            return
        on_batch(BatchMetrics(
            engine="modern",
            batch=int(progress["batchId"]),
            records=int(progress["numInputRows"]),
            duration_ms=int(progress["durationMs"]["triggerExecution"]),
            scheduling_delay_ms=None,  # micro-batches never queue: the next starts when the last one ends
            input_rows_per_s=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rows_per_s=float(progress.get("processedRowsPerSecond") or 0.0),
        ))

    return progress_listener(report)
# --8<-- [end:batch_metrics_listener]


# -- ssc.stop(stopGraceFully=True)  →  stop between micro-batches -----------------------------------------

@dataclass(frozen=True)
class GracefulStop:
    """How :func:`stop_gracefully` left a query.

    Attributes:
        last_committed_batch: the newest batch id in the checkpoint's commits log (None: none).
        last_planned_batch: the newest batch id in its offsets log (None: none).
        waited_s: how long the stop waited for a gap between micro-batches.
    """

    last_committed_batch: int | None
    last_planned_batch: int | None
    waited_s: float

    @property
    def clean(self) -> bool:
        """True when no micro-batch was planned and left uncommitted: a restart repeats nothing."""
        return self.last_planned_batch == self.last_committed_batch


def _latest_batch_id(log: Any) -> int | None:
    latest = log.getLatestBatchId()  # a Scala Option[Long]
    return int(latest.get()) if latest.isDefined() else None


# --8<-- [start:stop_gracefully]
def stop_gracefully(query: Any, *, timeout_s: float = 60.0, poll_s: float = 0.005) -> GracefulStop:
    """Stop ``query`` between two micro-batches: after the running one committed, before the next one starts.

    ``query.stop()`` alone interrupts the running micro-batch, which a restart then runs again (a duplicate
    for a sink that is not idempotent). This waits until no trigger is active and every micro-batch in the
    offsets log is in the commits log, then stops. That gap exists while a processing-time trigger waits for
    its next interval, or while a query waits for data; a query with a backlog on the default trigger starts
    the next micro-batch at once, so give it a processing-time trigger (or ``maxOffsetsPerTrigger``) to stop
    gracefully.

    Args:
        query: a running ``StreamingQuery``.
        timeout_s: how long to wait for the gap (default 60 s).
        poll_s: how often to look (default 5 ms: the gap lasts until the next trigger).

    Returns:
        The batches the checkpoint logs after the stop: ``clean`` is False only if a micro-batch started in the
        moment between the last look and the stop (it runs again after a restart).

    Raises:
        GracefulStopTimeout: no gap within ``timeout_s``; the query is left running.
        StreamingQueryException: the query failed meanwhile.
    """
    execution = query._jsq.streamingQuery()  # the StreamExecution: its offsets and commits logs
    start = time.monotonic()
    deadline, status = start + timeout_s, None
    while query.isActive:
        status = query.status
        planned, committed = _latest_batch_id(execution.offsetLog()), _latest_batch_id(execution.commitLog())
        if not status["isTriggerActive"] and planned == committed:
            query.stop()
            break
        if time.monotonic() > deadline:
            raise GracefulStopTimeout(query.name or str(query.id), timeout_s, status, committed)
        time.sleep(poll_s)
    error = query.exception()
    if error is not None:
        raise error
    return GracefulStop(_latest_batch_id(execution.commitLog()), _latest_batch_id(execution.offsetLog()),
                        time.monotonic() - start)
# --8<-- [end:stop_gracefully]


# -- awaitTermination / awaitTerminationOrTimeout  →  query.awaitTermination / awaitAnyTermination ---------

# --8<-- [start:run_until]
def run_until(query: Any, timeout_s: float) -> bool:
    """``ssc.awaitTerminationOrTimeout(timeout_s)`` for one query: True if it stopped within the timeout.

    Raises:
        StreamingQueryException: the query failed (also when it failed before this call).
    """
    return bool(query.awaitTermination(timeout_s))


def run_any_until(spark: Any, timeout_s: float) -> bool:
    """``ssc.awaitTerminationOrTimeout`` for every query of ``spark``: True once any of them stopped.

    ``spark.streams.resetTerminated()`` forgets stopped queries, so the next call waits for a new one.

    Raises:
        StreamingQueryException: a query failed.
    """
    return bool(spark.streams.awaitAnyTermination(timeout_s))
# --8<-- [end:run_until]


# -- remember / slice  →  a batch read of offset ranges ---------------------------------------------------

# --8<-- [start:read_offset_range]
def read_offset_range(spark: Any, bootstrap_servers: str, ranges: Mapping[str, Mapping[int, tuple[int, int]]]) -> Any:
    """The records of ``{topic: {partition: (from_offset, until_offset)}}`` as a batch DataFrame.

    What ``dstream.slice(begin, end)`` gave from remembered batches, read again from Kafka: ``from_offset``
    inclusive, ``until_offset`` exclusive, like ``OffsetRange`` and ``endingOffsets``.
    """
    from modern.kafka import source_format

    starting = {topic: {str(p): r[0] for p, r in parts.items()} for topic, parts in ranges.items()}
    ending = {topic: {str(p): r[1] for p, r in parts.items()} for topic, parts in ranges.items()}
    return (spark.read.format(source_format(spark))
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("assign", json.dumps({topic: sorted(parts) for topic, parts in ranges.items()}))
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
            .load())
# --8<-- [end:read_offset_range]


# -- textFileStream, socketTextStream, queueStream  →  file, socket, and a replayable test stream ---------

# --8<-- [start:text_file_stream]
def text_file_stream(spark: Any, directory: str | os.PathLike[str], *, max_files_per_trigger: int | None = None) -> Any:
    """``ssc.textFileStream(directory)``: one row per line (column ``value``) of the files in ``directory``.

    Unlike ``textFileStream``, the files already there at the query's first start are read too; files are
    remembered by name in the checkpoint, so a file rewritten in place is not read again. Move files in
    atomically (write elsewhere, then rename), as for ``textFileStream``.
    """
    reader = spark.readStream.format("text")
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return reader.load(str(directory))


def socket_text_stream(spark: Any, host: str, port: int) -> Any:
    """``ssc.socketTextStream(host, port)``: lines read from a TCP server (column ``value``), for tests only.

    Neither side can replay: lines received before a crash are lost, as with any receiver.
    """
    return spark.readStream.format("socket").option("host", host).option("port", port).load()
# --8<-- [end:text_file_stream]


# --8<-- [start:queue_stream]
def queue_stream(spark: Any, batches: Sequence[Iterable[str]], directory: str | os.PathLike[str]) -> Any:
    """``ssc.queueStream(rdds)`` for tests: each batch of lines becomes one micro-batch, in order.

    PySpark has no Python memory source, so each batch is written as one file of ``directory`` and read by the
    file source one file per trigger. Modification times one second apart fix the order (the file source
    sorts by them). Unlike ``queueStream``, the stream replays from its checkpoint like any file source.
    Run the query with ``trigger(availableNow=True)`` to process every batch and stop.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    first = int(time.time()) - len(batches)  # in the past: nothing waits for a clock
    for i, lines in enumerate(batches):
        temp = target / f".batch-{i:06d}.{uuid.uuid4().hex}.tmp"  # hidden: the file source skips it
        temp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        os.utime(temp, (first + i, first + i))
        os.replace(temp, target / f"batch-{i:06d}.txt")
    return text_file_stream(spark, target, max_files_per_trigger=1)
# --8<-- [end:queue_stream]
