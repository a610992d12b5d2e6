"""An idempotent ``foreachBatch`` sink: one Parquet file per batch id, replaced on replay.

Structured Streaming re-runs the last batch after a restart when its commit was not logged; writing
``batch=<id>`` atomically (:func:`kit.sink.write_batch`) makes that replay harmless, so the end-to-end result
is exactly-once (seed 002: replayable source + idempotent sink).

Example::

    query = (frame.writeStream.foreachBatch(ParquetBatchSink("/tmp/out"))
             .option("checkpointLocation", "/tmp/ckpt").start())
    read_batches("/tmp/out")
"""

from __future__ import annotations

import os
from typing import Any

from kit.sink import read_batches, write_batch

__all__ = ["ParquetBatchSink", "read_batches"]


class ParquetBatchSink:
    """``foreachBatch`` callable writing each batch with :func:`kit.sink.write_batch`.

    The files have the columns ``batch`` and ``emitted_at`` in front of the frame's own.

    Args:
        directory: output directory (created if absent). With a cluster master it must be a path every
            node can reach; the file is written from the driver.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = str(directory)

    def __call__(self, frame: Any, batch_id: int) -> None:
        """Write micro-batch ``batch_id``: ``frame`` is collected to the driver and written there."""
        rows = frame.toPandas()
        # Over Spark Connect, toPandas() leaves the plan's metrics in attrs, which pandas' to_parquet cannot
        # store ("Object of type PlanMetrics is not JSON serializable"); the batch files keep no attrs anyway.
        rows.attrs.clear()
        write_batch(self.directory, batch_id, rows)
