"""Kafka I/O shared by both engines (placeholder: being written)."""

from __future__ import annotations

from kafka.partitioner.default import murmur2


def key_partition(key: bytes, partitions: int) -> int:
    """Partition of a keyed record, exactly as Kafka's Java DefaultPartitioner picks it.

    ``(murmur2(key) & 0x7fffffff) % partitions`` — so the kit, kafka-python and Java producers all put a
    key on the same partition.
    """
    return (murmur2(key) & 0x7FFFFFFF) % partitions
