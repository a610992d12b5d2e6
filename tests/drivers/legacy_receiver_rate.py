"""A DStream driver for the receiver rate test: a receiver Kafka stream under Spark's own receiver rate limit.

    python -m tests.drivers.legacy_receiver_rate BOOTSTRAP TOPIC GROUP MAX_RATE BATCH_S EXPECTED CHECKPOINT

Runs its own JVM, because ``spark.streaming.receiver.maxRate`` and the receiver write-ahead log are read when
the SparkContext starts. Reads ``TOPIC`` from the beginning as group ``GROUP`` with the receiver write-ahead log
on (checkpoint and log under ``CHECKPOINT``), prints one ``BATCH {"batch_ms": ..., "count": ...}`` line per
batch and, once ``EXPECTED`` records have arrived, a ``DONE {...}`` line with the bridge's counters, then
exits 0. Exits 1 with a ``FAILED`` line when they do not all arrive within 60 s.
"""

from __future__ import annotations

import json
import sys
import time

from pyspark import StorageLevel

from kit.spark import streaming_context
from legacy import _receiver
from legacy._receiver import create_receiver_stream

# The block interval divides the batch interval finely, so a block that lands just before or after a
# batch boundary moves at most 1/20 of a batch's records.
BLOCK_INTERVAL_MS = 50

#: Per-batch counts. A module-level list, not a closure over a lock: output functions are pickled into the
#: checkpoint, and appending to a list is atomic.
COUNTS: list[int] = []


def report(time_: object, rdd: object) -> None:
    count = rdd.count()  # type: ignore[attr-defined]
    COUNTS.append(count)
    # Records the bridge has written to the socket by now (reached through the module: a checkpoint pickles
    # this function, and the module is pickled by reference, the bridge's threads are not pickled at all).
    sent = sum(bridge.stats().sent for bridge in list(_receiver._BRIDGES.values()))
    batch_ms = int(time_.timestamp() * 1000)  # type: ignore[attr-defined]
    print("BATCH " + json.dumps({"batch_ms": batch_ms, "count": count, "bridge_sent": sent}), flush=True)


def main(bootstrap: str, topic: str, group: str, max_rate: str, batch_s: str, expected: str, checkpoint: str) -> int:
    ssc = streaming_context(
        float(batch_s),
        "legacy-receiver-rate",
        conf={
            "spark.streaming.receiver.maxRate": max_rate,
            "spark.streaming.blockInterval": f"{BLOCK_INTERVAL_MS}ms",
            "spark.streaming.receiver.writeAheadLog.enable": "true",
        },
    )
    ssc.checkpoint(checkpoint)
    stream = create_receiver_stream(
        ssc, bootstrap, group, {topic: 1}, auto_offset_reset="smallest", storage_level=StorageLevel.MEMORY_AND_DISK,
        # Tansu answers JoinGroup after about half the session timeout: keep the start short.
        kafka_settings={"session_timeout_ms": 2000, "heartbeat_interval_ms": 500},
    )
    stream.foreachRDD(report)
    ssc.start()
    deadline = time.monotonic() + 60
    try:
        while True:
            seen = sum(COUNTS)
            if seen >= int(expected):
                break
            if time.monotonic() > deadline:
                print("FAILED " + json.dumps({"seen": seen, "expected": int(expected)}), flush=True)
                return 1
            ssc.awaitTerminationOrTimeout(0.1)  # raises if the stream failed
    finally:
        stats = stream.bridge.stats()
        ssc.stop(stopSparkContext=True)
    print("DONE " + json.dumps({"total": seen, "polled": stats.polled, "sent": stats.sent}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
