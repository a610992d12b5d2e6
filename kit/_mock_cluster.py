"""librdkafka's mock cluster as a long-lived process: the second embedded broker kind (``EmbeddedBroker(kind="mock")``).

The mock cluster lives inside an ``rd_kafka_t`` handle of librdkafka, the library inside the ``confluent-kafka``
wheel. ``confluent-kafka`` reaches it only through ``test.mock.num.brokers``, which makes a cluster that ends with
the one client holding it; this module opens it through librdkafka's C API (``rd_kafka_mock_cluster_new``, with
ctypes) in a process of its own, so that clients in other processes (Spark drivers and executors) can connect to
its TCP listener for as long as the process runs.

Run as ``python -m kit._mock_cluster``: it prints the cluster's bootstrap servers as its first line of standard
output, then answers one line per command read from standard input, ``ok`` or ``error <text>``:

    create TOPIC PARTITIONS        a topic (the cluster's protocol has no CreateTopics)
    delete TOPIC                   a topic (no DeleteTopics either)
    delete-records TOPIC PARTITION OFFSET
                                   move the partition's log start to OFFSET (no DeleteRecords either)

It exits at the end of its input or on SIGTERM. Which Kafka APIs the cluster answers, and how: ``librdkafka``'s
``src/rdkafka_mock_handlers.c``; measured against Tansu by ``benchmarks/kafka_conformance.py``.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from typing import Any

__all__ = ["MockCluster", "librdkafka_path"]

_RD_KAFKA_PRODUCER = 0


def librdkafka_path() -> str:
    """Path of the librdkafka shared library inside the installed ``confluent-kafka`` wheel."""
    import confluent_kafka

    package = os.path.dirname(confluent_kafka.__file__)
    found = sorted(glob.glob(os.path.join(package, os.pardir, "confluent_kafka.libs", "librdkafka*.so*")))
    if not found:
        msg = f"no librdkafka library next to {package} (expected confluent_kafka.libs/librdkafka*.so)"
        raise RuntimeError(msg)
    return os.path.normpath(found[0])


class MockCluster:
    """A librdkafka mock cluster of ``brokers`` brokers on loopback, alive until :meth:`close` or process exit."""

    def __init__(self, brokers: int = 1) -> None:
        lib = ctypes.CDLL(librdkafka_path())
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_topic_delete.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.rd_kafka_mock_partition_delete_records.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                                                               ctypes.c_int64]
        lib.rd_kafka_err2str.restype = ctypes.c_char_p
        lib.rd_kafka_err2str.argtypes = [ctypes.c_int]
        self._lib: Any = lib
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        lib.rd_kafka_conf_set(conf, b"log_level", b"4", errstr, len(errstr))
        self._rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not self._rk:
            msg = f"librdkafka could not create the handle of the mock cluster: {errstr.value.decode()}"
            raise RuntimeError(msg)
        self._cluster = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._cluster:
            msg = "librdkafka could not create a mock cluster"
            raise RuntimeError(msg)
        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            msg = f"{what}: {self._lib.rd_kafka_err2str(code).decode()}"
            raise RuntimeError(msg)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` partitions (replication factor 1)."""
        self._check(self._lib.rd_kafka_mock_topic_create(self._cluster, topic.encode(), partitions, 1),
                    f"creating {topic}")

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``."""
        self._check(self._lib.rd_kafka_mock_topic_delete(self._cluster, topic.encode()), f"deleting {topic}")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete the records of ``topic``-``partition`` below ``before_offset`` (the log start moves there)."""
        self._check(
            self._lib.rd_kafka_mock_partition_delete_records(self._cluster, topic.encode(), partition, before_offset),
            f"deleting records of {topic}-{partition} below {before_offset}",
        )

    def close(self) -> None:
        """Destroy the cluster and its handle."""
        if self._cluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
            self._cluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None


def _answer(cluster: MockCluster, line: str) -> str:
    words = line.split()
    try:
        if words[:1] == ["create"] and len(words) == 3:
            cluster.create_topic(words[1], int(words[2]))
        elif words[:1] == ["delete"] and len(words) == 2:
            cluster.delete_topic(words[1])
        elif words[:1] == ["delete-records"] and len(words) == 4:
            cluster.delete_records(words[1], int(words[2]), int(words[3]))
        else:
            return f"error unknown command {line.strip()!r}"
    except (RuntimeError, ValueError) as exc:
        return f"error {exc}"
    return "ok"


def main() -> int:
    """Hold a mock cluster: print its bootstrap servers, answer commands from stdin until it closes."""
    cluster = MockCluster()
    print(cluster.bootstrap_servers, flush=True)
    for line in sys.stdin:
        if line.strip():
            print(_answer(cluster, line), flush=True)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
