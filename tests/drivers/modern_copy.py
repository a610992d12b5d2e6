"""A Structured Streaming driver: Kafka topic -> idempotent per-batch Parquet files.

    python -m tests.drivers.modern_copy BOOTSTRAP TOPIC CHECKPOINT OUT {run|drain}

``run`` processes 50 records per batch every 200 ms until killed; ``drain`` processes what is there
(Trigger.AvailableNow) and exits 0.
"""

from __future__ import annotations

import sys

from kit.spark import spark_session
from modern.kafka import source_format
from modern.sinks import ParquetBatchSink


def main(bootstrap: str, topic: str, checkpoint: str, out: str, mode: str) -> int:
    spark = spark_session("modern-copy")
    frame = (
        spark.readStream.format(source_format(spark))
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    )
    writer = frame.writeStream.foreachBatch(ParquetBatchSink(out)).option("checkpointLocation", checkpoint)
    if mode == "drain":
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return 0 if query.exception() is None else 1
    writer.trigger(processingTime="200 milliseconds").start().awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
