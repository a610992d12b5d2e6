"""Engine-neutral figures of a streaming job's life: one :class:`BatchMetrics` per completed batch.

A DStream ``StreamingListener`` and a ``StreamingQueryListener`` report batches in different shapes
(``BatchInfo`` with Scala options; a progress JSON). ``legacy_lifecycle.BatchMetricsListener`` and
``modern_lifecycle.batch_metrics_listener`` (beside this module) turn them into this one record, so a migration
can check that the rewritten job's monitoring sees the same figures.

Example:
    >>> m = BatchMetrics(engine="legacy", batch=1_700_000_000_000, records=50, duration_ms=250,
    ...                  scheduling_delay_ms=3, input_rows_per_s=50.0, processed_rows_per_s=200.0)
    >>> m.records, m.processed_rows_per_s
    (50, 200.0)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BatchMetrics"]


@dataclass(frozen=True)
class BatchMetrics:
    """What one completed batch reported, in the same units on both engines.

    Attributes:
        engine: ``"legacy"`` or ``"modern"``.
        batch: the batch time in epoch ms (legacy) or the micro-batch id (modern).
        records: records the batch read (``numRecords`` / ``numInputRows``).
        duration_ms: how long the batch ran (``processingDelay`` / ``durationMs.triggerExecution``).
        scheduling_delay_ms: how long the batch waited in the queue before it ran (``schedulingDelay``); None on
            the modern side, where micro-batches never queue (the next one starts after the last one ends).
        input_rows_per_s: records per second of wall time arriving: ``numRecords`` over the batch interval
            (what Spark's Streaming UI shows) / ``inputRowsPerSecond`` (over the time since the previous trigger:
            0 for a query's first micro-batch).
        processed_rows_per_s: records per second of processing: over ``duration_ms`` on both sides
            (``processedRowsPerSecond``).
    """

    engine: str
    batch: int
    records: int
    duration_ms: int
    scheduling_delay_ms: int | None
    input_rows_per_s: float
    processed_rows_per_s: float
