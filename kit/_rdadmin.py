"""The librdkafka path of :mod:`kit.kafka`'s topic admin, offset look-ups and group offsets.

A :class:`kit.kafka.Kafka` handle whose client was asked for by name (``client="confluent"`` or
``DMK_KAFKA_CLIENT=confluent``) sends these requests through confluent-kafka's ``AdminClient`` instead of
kafka-python, so that it needs no kafka-python connection at all: the one way to use a broker kafka-python cannot
connect to (librdkafka's mock cluster, ``EmbeddedBroker(kind="mock")``). The requests are the same Kafka requests
(Metadata, CreateTopics, DeleteTopics, ListOffsets, OffsetCommit, OffsetFetch), so :mod:`kit.kafka` keeps its Tansu
workarounds on top of them unchanged. Private to ``kit.kafka``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

__all__ = ["NoController", "RdAdmin", "RdAdminError", "connection_problem"]

_LOG = logging.getLogger("kit.kafka.librdkafka")

_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
_TIMED_OUT = {KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT}
_NO_TOPIC = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
_NO_OFFSET = -1  # ListOffsets by timestamp: no record at or after the time (-1001 is librdkafka's "no offset")


class RdAdminError(Exception):
    """A request the broker refused or did not answer: ``code`` is librdkafka's error code, ``name`` its name."""

    def __init__(self, code: int, name: str, text: str) -> None:
        super().__init__(text)
        self.code, self.name = code, name

    @property
    def timed_out(self) -> bool:
        return self.code in _TIMED_OUT or self.code in _UNREACHABLE

    @property
    def unknown_topic(self) -> bool:
        return self.code in _NO_TOPIC


class NoController(Exception):
    """The cluster names no live controller, so it cannot answer CreateTopics or DeleteTopics (the mock's case)."""


def _error(exc: BaseException) -> RdAdminError:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return RdAdminError(err.code(), err.name(), err.str())
    return RdAdminError(KafkaError._FAIL, type(exc).__name__, str(exc))


def connection_problem(exc: RdAdminError) -> str | None:
    """``"authentication"`` or ``"tls"`` when librdkafka's error says the broker refused the connection, else None."""
    if exc.code == KafkaError._AUTHENTICATION or exc.code == KafkaError.SASL_AUTHENTICATION_FAILED:
        return "authentication"
    if exc.code == KafkaError._SSL:
        return "tls"
    return None


class RdAdmin:
    """Topic admin, ListOffsets and group offsets through one librdkafka ``AdminClient`` (kept for the handle's life).

    An admin client never fetches, so it is not exposed to librdkafka 2.16's crash on a topic deleted under a
    consumer (kit._rdkafka opens a consumer per read for that reason).
    """

    def __init__(self, bootstrap_servers: str, properties: Mapping[str, Any], timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._admin = AdminClient({
            "bootstrap.servers": bootstrap_servers,
            # An admin client is a producer-type handle, so librdkafka lets its metadata requests create the topics
            # they name (Tansu then makes one of 4 partitions): a topic deleted and created again could come back
            # with the wrong partition count in the moment between the two.
            "allow.auto.create.topics": False,
            "socket.timeout.ms": int(timeout_s * 1000),
            **properties,
        }, logger=_LOG)

    def metadata(self, timeout_s: float | None = None) -> Any:
        """Every topic's metadata, asked from the broker.

        A request naming a topic is not used: the mock (like a broker with ``auto.create.topics.enable``) may create
        the topic it was only asked about.
        """
        try:
            return self._admin.list_topics(timeout=self.timeout_s if timeout_s is None else timeout_s)
        except KafkaException as exc:
            raise _error(exc) from exc

    def topics(self) -> set[str]:
        return set(self.metadata().topics)

    def partitions(self, topic: str) -> list[int] | None:
        """The partition ids of ``topic``, sorted; None when it does not exist."""
        found = self.metadata().topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return None
        return sorted(found.partitions)

    def _controller_known(self) -> bool:
        metadata = self.metadata()
        return metadata.controller_id in metadata.brokers

    def create_topic(self, topic: str, partitions: int) -> bool:
        """CreateTopics; False when the topic already exists.

        Raises:
            NoController: the cluster has no controller to send CreateTopics to (librdkafka would wait it out).
            RdAdminError: the broker refused.
        """
        if not self._controller_known():
            raise NoController
        future = self._admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=self.timeout_s)[topic]
        try:
            future.result(self.timeout_s + 5)
        except KafkaException as exc:
            error = _error(exc)
            if error.code == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise error from exc
        return True

    def delete_topic(self, topic: str) -> None:
        """DeleteTopics; a missing topic is fine.

        Raises:
            NoController: the cluster has no controller to send DeleteTopics to.
        """
        if not self._controller_known():
            raise NoController
        future = self._admin.delete_topics([topic], request_timeout=self.timeout_s)[topic]
        try:
            future.result(self.timeout_s + 5)
        except KafkaException as exc:
            error = _error(exc)
            if not error.unknown_topic:
                raise error from exc

    def list_offsets(self, tps: list[tuple[str, int]], spec: str, timestamp_ms: int = 0) -> dict[tuple[str, int], int]:
        """ListOffsets of ``spec`` ``"earliest"``, ``"latest"`` or ``"timestamp"`` (-1: no record at or after it)."""
        if not tps:
            return {}
        # confluent-kafka leaves OffsetSpec's constructors untyped.
        earliest, latest = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
        offset_spec = {"earliest": earliest, "latest": latest}.get(spec) or OffsetSpec.for_timestamp(timestamp_ms)
        asked = {RdTopicPartition(t, p): offset_spec for t, p in tps}
        futures = self._admin.list_offsets(asked, request_timeout=self.timeout_s)
        found: dict[tuple[str, int], int] = {}
        for rd, future in futures.items():
            try:
                offset = future.result(self.timeout_s + 5).offset
            except KafkaException as exc:
                raise _error(exc) from exc
            found[(rd.topic, rd.partition)] = offset if offset >= 0 else _NO_OFFSET
        return found

    def commit_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        """AlterConsumerGroupOffsets (an OffsetCommit): the partitions refused, with librdkafka's error name."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        partitions = [RdTopicPartition(t, p, int(o)) for (t, p), o in offsets.items()]
        request = ConsumerGroupTopicPartitions(group_id, partitions)
        (future,) = self._admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s).values()
        try:
            answer = future.result(self.timeout_s + 5)
        except KafkaException as exc:
            error = _error(exc)
            return {tp: error.name for tp in offsets}
        refused = {(rd.topic, rd.partition): rd.error.name() for rd in answer.topic_partitions if rd.error is not None}
        answered = {(rd.topic, rd.partition) for rd in answer.topic_partitions}
        refused.update({tp: "no answer for this partition" for tp in offsets if tp not in answered})
        return refused

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """Every offset committed by ``group_id`` (OffsetFetch naming no partitions; partitions with none absent)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = ConsumerGroupTopicPartitions(group_id)
        (future,) = self._admin.list_consumer_group_offsets([request], request_timeout=self.timeout_s).values()
        try:
            answer = future.result(self.timeout_s + 5)
        except KafkaException as exc:
            raise _error(exc) from exc
        return {(rd.topic, rd.partition): rd.offset for rd in answer.topic_partitions or () if rd.offset >= 0}
