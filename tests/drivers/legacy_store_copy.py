"""A DStream driver that keeps its offsets in an offset store instead of a checkpoint.

    python -m tests.drivers.legacy_store_copy BOOTSTRAP TOPIC STORE LOCATION RESULTS {run|drain} TOTAL

STORE is ``sqlite`` (LOCATION: database file, which also holds the results, written in the same
transaction as the offsets: exactly-once; RESULTS is ignored), ``kafka`` (LOCATION: consumer group) or
``zookeeper`` (LOCATION: ZooKeeper hosts); with those two, results are appended to the JSON Lines file
RESULTS, then the offsets saved: at-least-once. The stream resumes from the store's offsets (``fromOffsets``).
``run`` processes at most 100 records per partition per 0.5 s batch until killed; ``drain`` stops once
TOTAL records have been stored.
"""

from __future__ import annotations

import json
import sys
import time

from kit.spark import streaming_context
from legacy.kafka import KafkaUtils, TopicAndPartition
from legacy.offsets import KafkaGroupOffsetStore, SqlOffsetStore, ZooKeeperOffsetStore


def main(bootstrap: str, topic: str, store_kind: str, location: str, results: str, mode: str, total: str) -> int:
    ssc = streaming_context(0.5, "legacy-store-copy", conf={"spark.streaming.kafka.maxRatePerPartition": 200})
    if store_kind == "sqlite":
        store = SqlOffsetStore.sqlite(location, consumer="copy")
        store_results = None
        with store.transaction(0) as tx:  # schema set-up, no offsets: commits nothing else
            tx.execute("CREATE TABLE IF NOT EXISTS copied (value TEXT)")
            tx.save_offsets([])
    else:
        store = KafkaGroupOffsetStore(bootstrap, location) if store_kind == "kafka" else ZooKeeperOffsetStore(location)
        store_results = results
    resume = store.load([topic])
    params = {"metadata.broker.list": bootstrap, "auto.offset.reset": "smallest"}
    from_offsets = {TopicAndPartition(tp.topic, tp.partition): o for tp, o in resume.items()} or None
    stream = KafkaUtils.createDirectStream(ssc, [topic], params, fromOffsets=from_offsets)

    def output(batch_time, rdd) -> None:
        ranges = rdd.offsetRanges()
        values = rdd.map(lambda kv: kv[1]).collect()
        if store_results is None:
            with store.transaction(batch_time, ranges) as tx:
                if not tx.already_done:
                    tx.executemany("INSERT INTO copied (value) VALUES (?)", [(v,) for v in values])
                    tx.save_offsets()
        else:
            with open(store_results, "a") as out:  # output first, then offsets: at-least-once
                out.writelines(json.dumps(v) + "\n" for v in values)
            store.save(ranges)

    stream.foreachRDD(output)
    ssc.start()
    if mode == "run":
        ssc.awaitTermination()
        return 0
    deadline = time.monotonic() + 240
    while sum(store.load([topic]).values()) < int(total):
        if time.monotonic() > deadline:
            print(f"stored offsets {store.load([topic])} after 240 s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
