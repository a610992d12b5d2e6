"""Kafka client rates on one broker: kafka-python without and with ``crc32c``, and confluent-kafka.

Produces ``--records`` dataset records (clean profile, ~180 B values) into ``--partitions`` partitions with
``Kafka.sender`` of each client, then reads every partition back with ``Kafka.read_range`` of each client (the
path both engines' executors read through). kafka-python without its C accelerator is measured in a child
process in which ``import crc32c`` fails, as on an install without the package. Prints a Markdown table.

    python benchmarks/kafka_clients.py [--records 200000] [--partitions 4] [--bootstrap-servers HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid

_CHILD = r"""
import json, sys, time
if sys.argv[1] == "no-crc32c":
    sys.modules["crc32c"] = None          # `import crc32c` raises ImportError, as when it is not installed
from kafka.record import util
from kit.kafka import Kafka
bootstrap, topic, client = sys.argv[2], sys.argv[3], sys.argv[4]
with Kafka(bootstrap, client=client) as kafka:
    ends = kafka.end_offsets(topic)
    started = time.perf_counter()
    n = sum(sum(1 for _ in kafka.read_range(topic, tp.partition, 0, end)) for tp, end in ends.items())
    seconds = time.perf_counter() - started
print(json.dumps({"records": n, "seconds": seconds, "crc32c_in_c": util.crc32c_c is not None}))
"""


def _read(mode: str, bootstrap: str, topic: str, client: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, bootstrap, topic, client], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int, client: str) -> float:
    from kit.kafka import Kafka

    failed: list[BaseException] = []
    with Kafka(bootstrap, client=client) as kafka:
        kafka.create_topic(topic, partitions)
        sender = kafka.sender(acks="all", linger_ms=5, batch_size=1 << 20)
        started = time.perf_counter()
        for i, value in enumerate(values):
            sender.send(topic, key=None, value=value, partition=i % partitions,
                        on_done=lambda _p, _o, e: failed.append(e) if e is not None else None)
        outstanding = sender.flush(120)
        seconds = time.perf_counter() - started
        sender.close()
    if failed or outstanding:
        raise SystemExit(f"{len(failed) + outstanding} records not acknowledged: {failed[:1]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap-servers")
    args = parser.parse_args()

    from kit.broker import kafka_or_embedded
    from kit.dataset import DatasetSpec, generate

    values = generate(DatasetSpec.from_profile("clean", records=args.records, seed=7))["value"].tolist()
    rows = []
    with kafka_or_embedded(args.bootstrap_servers) as kafka:
        bootstrap = kafka.bootstrap_servers
        topics = {}
        for client in ("kafka-python", "confluent"):
            topics[client] = f"dmk-clients-{client}-{uuid.uuid4().hex[:6]}"
            seconds = _produce(bootstrap, topics[client], values, args.partitions, client)
            rows.append((f"produce, {client}", args.records / seconds))
        for mode, client in (("no-crc32c", "kafka-python"), ("crc32c", "kafka-python"), ("crc32c", "confluent")):
            result = _read(mode, bootstrap, topics["confluent"], client)
            assert result["records"] == args.records, result
            label = client if client == "confluent" else f"kafka-python, crc32c {'in C' if result['crc32c_in_c'] else 'in pure Python'}"
            rows.append((f"read_range, {label}", result["records"] / result["seconds"]))
    print(f"{args.records:,} records of ~{sum(map(len, values)) // len(values)} B, {args.partitions} partitions\n")
    print("| path | records/s |\n|---|---:|")
    for label, rate in rows:
        print(f"| {label} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
