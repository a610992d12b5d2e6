"""The DStream lifecycle as Spark 2.4 jobs wrote it: transactional output, listeners, stopping, waiting, test inputs.

Each function here is the legacy half of a pair whose modern half is in :mod:`examples.playbook.modern_lifecycle` (same
construct, same order); ``docs/playbook.md`` ("Lifecycle, one by one") shows both and ``tests/test_lifecycle.py``
runs both on the same data.

* :func:`save_with_offsets` — ``foreachRDD`` writing a batch's results and its Kafka offset ranges to a database
  in ONE transaction (:class:`legacy.offsets.SqlOffsetStore`), and :func:`resume_from_store`, the direct stream
  that starts where the stored offsets end;
* :class:`BatchMetricsListener` — a ``StreamingListener`` reporting :class:`examples.playbook.metrics.BatchMetrics`;
* :func:`stop_gracefully` — ``ssc.stop(stopSparkContext=False, stopGraceFully=True)``;
* :func:`run_until` — ``awaitTerminationOrTimeout``;
* :func:`records_between` — ``ssc.remember`` and ``dstream.slice``;
* :func:`text_file_stream`, :func:`queue_stream` — the file stream and the test stream.

Example::

    store = SqlOffsetStore.postgres(dsn, consumer="clicks")
    stream = resume_from_store(ssc, store, "clicks", bootstrap_servers)
    stream.foreachRDD(save_with_offsets(store, "results"))
    ssc.start()
    ...
    stop_gracefully(ssc)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from pyspark.streaming import StreamingListener

from examples.playbook.metrics import BatchMetrics
from kit.kafka import Kafka

__all__ = [
    "BatchMetricsListener",
    "queue_stream",
    "record_of",
    "records_between",
    "resume_from_store",
    "run_until",
    "save_with_offsets",
    "stop_gracefully",
    "text_file_stream",
]


def record_of(message: Any) -> tuple[int, int, str]:
    """A direct stream's ``messageHandler``: ``(partition, offset, value)`` of a Kafka message."""
    return message.partition, message.offset, message.message


# -- foreachRDD writing results and offsets in one transaction --------------------------------------------

# --8<-- [start:save_with_offsets]
def resume_from_store(ssc: Any, store: Any, topic: str, bootstrap_servers: str) -> Any:
    """A direct stream of ``(partition, offset, value)`` starting at ``store``'s offsets (else the beginning).

    The offsets live in the database, not in a checkpoint: the job's code may change between restarts.
    """
    from legacy.kafka import KafkaUtils, TopicAndPartition

    stored = store.load(topic)
    with Kafka(bootstrap_servers) as kafka:
        starts = {TopicAndPartition(tp.topic, tp.partition): stored.get(tp, begin)
                  for tp, begin in kafka.beginning_offsets(topic).items()}
    return KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": bootstrap_servers},
                                         fromOffsets=starts, messageHandler=record_of)


def save_with_offsets(store: Any, table: str) -> Callable[[datetime, Any], None]:
    """A ``foreachRDD`` function inserting each batch's records into ``table`` with its offsets, atomically.

    ``table`` has columns ``batch_time BIGINT, partition INT, "offset" BIGINT, value TEXT``. A batch whose
    offsets the store already holds (replayed after a crash) writes nothing; a crash before the commit
    rolls back rows and offsets together, and the restarted stream reads the batch again.
    """

    def save(time: datetime, rdd: Any) -> None:
        ranges = rdd.offsetRanges()  # before any transformation: only the Kafka RDD has them
        records = rdd.collect()
        with store.transaction(time, ranges) as tx:
            if tx.already_done:
                return
            marks = ", ".join([store.placeholder] * 4)
            tx.executemany(f'INSERT INTO {table} (batch_time, "partition", "offset", value) VALUES ({marks})',
                           [(tx.batch_time_ms, *record) for record in records])
            tx.save_offsets()

    return save
# --8<-- [end:save_with_offsets]


# -- StreamingListener --------------------------------------------------------------------------------------

def _ms_or_none(value: Any) -> int | None:
    return None if int(value) < 0 else int(value)  # PySpark's JavaBatchInfo: -1 for "not known yet"


# --8<-- [start:batch_metrics_listener]
class BatchMetricsListener(StreamingListener):
    """A ``StreamingListener`` (``ssc.addStreamingListener``) calling ``on_batch`` once per completed batch.

    Args:
        on_batch: called on Spark's listener thread with the batch's figures.
        batch_interval_s: the context's batch interval: the input rate is records over it, as Spark's UI shows.
    """

    def __init__(self, on_batch: Callable[[BatchMetrics], None], batch_interval_s: float) -> None:
        super().__init__()
        self.on_batch = on_batch
        self.batch_interval_s = batch_interval_s

    def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - Spark's names
        """Report the batch: ``batchInfo`` has ``numRecords``, ``schedulingDelay``, ``processingDelay``."""
        info = batchCompleted.batchInfo()
        records = int(info.numRecords())
        duration_ms = _ms_or_none(info.processingDelay()) or 0
        self.on_batch(BatchMetrics(
            engine="legacy",
            batch=int(info.batchTime().milliseconds()),
            records=records,
            duration_ms=duration_ms,
            scheduling_delay_ms=_ms_or_none(info.schedulingDelay()),
            input_rows_per_s=records / self.batch_interval_s,
            processed_rows_per_s=records * 1000.0 / duration_ms if duration_ms else 0.0,
        ))
# --8<-- [end:batch_metrics_listener]


# -- stopping and waiting -----------------------------------------------------------------------------------

# --8<-- [start:stop_gracefully]
def stop_gracefully(ssc: Any) -> None:
    """``ssc.stop(stopSparkContext=False, stopGraceFully=True)``: finish every generated batch, then stop.

    Spark stops generating batches, waits for the queued and running ones (and, with receivers, for the data
    received) up to ``spark.streaming.gracefulStopTimeout`` (default ten batch intervals), then stops. The
    SparkContext stays up. ``spark.streaming.stopGracefullyOnShutdown=true`` does the same on JVM shutdown.
    """
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
# --8<-- [end:stop_gracefully]


# --8<-- [start:run_until]
def run_until(ssc: Any, timeout_s: float) -> bool:
    """``ssc.awaitTerminationOrTimeout(timeout_s)``: True if the context stopped within the timeout.

    Raises:
        Py4JJavaError: an output operation failed (Spark's error, with the Python traceback in its message).
    """
    return bool(ssc.awaitTerminationOrTimeout(timeout_s))
# --8<-- [end:run_until]


# -- remember / slice ---------------------------------------------------------------------------------------

# --8<-- [start:records_between]
def records_between(stream: Any, begin: datetime, end: datetime) -> list[Any]:
    """The elements of ``stream``'s batches from ``begin`` to ``end`` (both included), batch after batch.

    The batches must still be remembered: call ``ssc.remember(seconds)`` before ``ssc.start()`` with a
    duration covering them (a DStream otherwise forgets a batch once nothing needs it). The times go to
    ``slice`` as float seconds: PySpark turns a datetime into whole seconds, which drops the batches of a
    sub-second interval that fall between them.
    """
    return [element for rdd in stream.slice(begin.timestamp(), end.timestamp()) for element in rdd.collect()]
# --8<-- [end:records_between]


# -- textFileStream, queueStream ------------------------------------------------------------------------------

# --8<-- [start:text_file_stream]
def text_file_stream(ssc: Any, directory: str) -> Any:
    """``ssc.textFileStream(directory)``: the lines of files moved into ``directory`` after the start.

    A file is picked by its modification time, in the batch after it appears; files already there at the
    start are ignored.
    """
    return ssc.textFileStream(directory)
# --8<-- [end:text_file_stream]


# --8<-- [start:queue_stream]
def queue_stream(ssc: Any, batches: Sequence[Iterable[str]]) -> Any:
    """``ssc.queueStream``: each batch of lines becomes one batch of the stream, in order, then empty batches."""
    sc = ssc.sparkContext
    return ssc.queueStream([sc.parallelize(list(lines), 1) for lines in batches], oneAtATime=True)
# --8<-- [end:queue_stream]

