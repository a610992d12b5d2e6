"""A batch's requests to Tansu while a producer sends 5,000 records/s, as ``dmk compare``'s replay does.

Usage::

    python benchmarks/tansu_end_offsets_under_load.py listed|held|reads [--seconds 60] [--linger-ms 5]

A producer thread sends 5,000 records/s to an 8-partition topic on the embedded broker, gathering records for
``--linger-ms`` before each send (5: Kafka's default, and ``kit.replay``'s until changes.md §34; at this rate,
batches of about three records). Once a second what a batch asks of the broker runs: ``listed``, the end-offset
look-up without held records (ListOffsets latest, ListOffsets earliest, then a fetch at each listed offset − 1
for its high watermark, each timed); ``held``, ``Kafka.end_offsets(holding=...)`` at the last record before the
previous answer (one fetch); ``reads``, the held look-up and then the reads of every partition's new records
(``Kafka.read_range``, as a batch reads them). Every 10 s it prints the broker's CPU (cores), the look-up's median
time and, for ``listed``, its parts and how far the listed offsets were behind the ends, for ``reads`` the reads'
time. Figures: benchmarks/results/changes.md §33 and §34.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kit.broker import EmbeddedBroker
from kit.kafka import Kafka, TopicPartition
from kit.replay import TokenBucket

VALUE = b'{"event_id":"e42-0000000000","user":"u0042","key":"k0007","ad_id":"ad-0013","event_time":1767225600123}'
PARTITIONS = 8
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _listed(kafka: Kafka, tps: list[TopicPartition]) -> tuple[float, float, float, int]:
    """The look-up without held records, part by part: ms of each ListOffsets and of the fetch, and the lag."""
    started = time.monotonic()
    latest = kafka._offsets().end_offsets(tps)
    listed_at = time.monotonic()
    kafka._list_beginnings(tps)
    begun_at = time.monotonic()
    ends = kafka._rd().high_watermarks({(tp.topic, tp.partition): latest[tp] - 1 for tp in tps})
    done = time.monotonic()
    lag = sum(ends[(tp.topic, tp.partition)] - latest[tp] for tp in tps)
    return (listed_at - started) * 1000, (begun_at - listed_at) * 1000, (done - begun_at) * 1000, lag


def main() -> None:
    """Run the producer and the look-ups for ``--seconds`` and print the figures every 10 s."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("how", choices=("listed", "held", "reads"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--linger-ms", type=int, default=5)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        kafka = Kafka(broker.bootstrap_servers)
        kafka.create_topic("paced", PARTITIONS)
        stop = threading.Event()

        def produce() -> None:
            sender = kafka.sender(acks="all", linger_ms=args.linger_ms, batch_size=512 * 1024)
            bucket, seq = TokenBucket(5000), 0
            while not stop.is_set():
                bucket.acquire()
                sender.send("paced", key=None, value=VALUE, partition=seq % PARTITIONS, headers=[])
                seq += 1
            sender.flush(30)

        producer = threading.Thread(target=produce)
        producer.start()
        lookups = Kafka(broker.bootstrap_servers)
        tps = lookups.topic_partitions("paced")
        ends: dict[TopicPartition, int] = {}
        read_to = dict.fromkeys(tps, 0)
        started = mark = time.monotonic()
        cpu, took, parts, reads = _cpu_s(broker.pid), [], [], []
        try:
            while time.monotonic() - started < args.seconds:
                tick = time.monotonic()
                if args.how == "listed":
                    parts.append(_listed(lookups, tps))
                else:
                    held = {tp: end - 1 for tp, end in ends.items() if end > 0}
                    ends = lookups.end_offsets(tps, holding=held)
                took.append((time.monotonic() - tick) * 1000)
                if args.how == "reads":
                    reading = time.monotonic()
                    for tp in tps:
                        read_to[tp] += sum(1 for _ in lookups.read_range(tp.topic, tp.partition, read_to[tp], ends[tp]))
                    reads.append((time.monotonic() - reading) * 1000)
                time.sleep(max(0.0, 1 - (time.monotonic() - tick)))
                if time.monotonic() - mark >= 10:
                    now = _cpu_s(broker.pid)
                    line = (f"{time.monotonic() - started:4.0f} s: Tansu {(now - cpu) / (time.monotonic() - mark):.2f} "
                            f"cores, look-up {statistics.median(took):.1f} ms")
                    if parts:
                        latest, earliest, fetch, lag = (statistics.median(p[i] for p in parts) for i in range(4))
                        line += (f" (ListOffsets latest {latest:.0f} ms, earliest {earliest:.0f} ms, "
                                 f"fetch {fetch:.0f} ms; listed {lag:.0f} records behind the ends)")
                    if reads:
                        line += f", reads of the new records {statistics.median(reads):.1f} ms"
                    print(line, flush=True)
                    mark, cpu, took, parts, reads = time.monotonic(), now, [], [], []
        finally:
            stop.set()
            producer.join()


if __name__ == "__main__":
    main()
