"""Spark 2.4's ``pyspark.streaming.kafka``, on PySpark 4.3, without the JVM Kafka connector.

A PySpark 2.x job that used the removed module runs by changing only its import::

    from legacy.kafka import KafkaUtils, OffsetRange, TopicAndPartition   # was: pyspark.streaming.kafka

The API is 2.4's (0.8 direct API): ``KafkaUtils.createDirectStream``, ``KafkaUtils.createRDD``,
``OffsetRange``, ``TopicAndPartition``, ``Broker``, ``KafkaMessageAndMetadata``, ``utf8_decoder``, and
``offsetRanges()`` on the RDDs a direct stream hands to ``transform``/``foreachRDD``. Records are read in the
executors, one Spark partition per Kafka partition range, with :meth:`kit.kafka.Kafka.read_range`. Offsets
live in the stream's checkpointed state (as ``DirectKafkaInputDStreamCheckpointData`` did), rate control is
Spark's (``legacy.rate``), and :func:`get_or_create` refuses checkpoints written by other job code.

``createStream`` runs a consumer-group bridge feeding Spark's socket receiver (``docs/legacy-receiver.md``);
see ``docs/legacy.md`` for all differences from 2.4.

Example (``ssc`` a StreamingContext)::

    stream = KafkaUtils.createDirectStream(
        ssc, ["events"], {"metadata.broker.list": "127.0.0.1:9092", "auto.offset.reset": "smallest"})

    def save(rdd):
        for o in rdd.offsetRanges():
            print(o.topic, o.partition, o.fromOffset, o.untilOffset)

    stream.foreachRDD(save)
    stream.map(lambda kv: kv[1]).count().pprint()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from legacy._checkpoint import get_or_create
from legacy._direct import KafkaDStream, KafkaRDD, create_direct_stream, create_rdd
from legacy._types import Broker, KafkaMessageAndMetadata, OffsetRange, TopicAndPartition, utf8_decoder
from legacy.errors import ArgumentTypeError

__all__ = [
    "Broker",
    "KafkaDStream",
    "KafkaMessageAndMetadata",
    "KafkaRDD",
    "KafkaUtils",
    "OffsetRange",
    "TopicAndPartition",
    "get_or_create",
    "utf8_decoder",
]


def _typed(value: Any, kind: type, name: str, method: str, hint: str) -> None:
    """Refuse ``value`` with a TypeError where Spark 2.4's ``KafkaUtils.<method>`` did (``isinstance`` checks)."""
    if not isinstance(value, kind):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        msg = (f"{name} should be {kind.__name__ if kind is not Mapping else 'dict'} (KafkaUtils.{method}, as in Spark "
               f"2.4), got {type(value).__name__} {shown}: {hint}")
        raise ArgumentTypeError(msg, field=name, expected=kind.__name__, actual=type(value).__name__)


class KafkaUtils:
    """Factory of Kafka streams and RDDs, as ``pyspark.streaming.kafka.KafkaUtils`` in Spark 2.4."""

    @staticmethod
    def createStream(  # noqa: N802 - Spark 2.4's name
        ssc: Any,
        zkQuorum: str,  # noqa: N803
        groupId: str,  # noqa: N803
        topics: Mapping[str, int],
        kafkaParams: Mapping[str, str] | None = None,  # noqa: N803
        storageLevel: Any = None,  # noqa: N803
        keyDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
        valueDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
    ) -> Any:
        """A receiver-based stream of ``(key, value)`` read by consumer group ``groupId``, as 2.4's.

        2.4's receiver talked to ZooKeeper (``zkQuorum``) through Kafka 0.8's high-level consumer. Here a
        consumer-group bridge (kafka-python, auto-commit like the old consumer) feeds Spark's own socket
        receiver, so ``spark.streaming.receiver.maxRate``, receiver backpressure, the block interval and the
        write-ahead log apply as in Spark. ``zkQuorum`` is accepted and unused: Kafka's group coordinator
        keeps the group's offsets. Delivery semantics: ``docs/legacy-receiver.md``.

        Args:
            ssc: the StreamingContext.
            zkQuorum: accepted for compatibility; not used.
            groupId: the consumer group.
            topics: ``{topic: numThreads}`` (numThreads is accepted; one consumer reads all partitions).
            kafkaParams: ``metadata.broker.list`` or ``bootstrap.servers`` (required here, as ZooKeeper no
                longer provides them), ``auto.offset.reset`` (smallest/largest, default largest), ``group.id``
                (must equal ``groupId``); ``session.timeout.ms``, ``heartbeat.interval.ms``,
                ``auto.commit.interval.ms``, ``client.id`` go to the consumer; every other 0.8/0.10 consumer key
                is mapped or ignored with a warning (:mod:`legacy._params`).
            storageLevel: receiver storage level; default MEMORY_AND_DISK_2 (2.4's).
            keyDecoder: decodes key bytes; default :func:`utf8_decoder`.
            valueDecoder: decodes value bytes; default :func:`utf8_decoder`.

        Raises:
            ArgumentTypeError: ``topics`` or ``kafkaParams`` not a dict (a ``TypeError``, as 2.4 raised).
            UnsupportedKafkaParams: TLS/SASL keys with no equivalent here (all listed, with the fix; docs/security.md).
            ConfigError: no brokers in ``kafkaParams``, ``group.id`` differing from ``groupId``, or
                ``auto.commit.enable=false``.
        """
        from kit.errors import ConfigError
        from legacy._params import kafka_params_settings, warn_ignored
        from legacy._receiver import create_receiver_stream

        _typed(topics, Mapping, "topics", "createStream", "pass {topic: numThreads}, e.g. {'events': 1}")
        if kafkaParams is not None:
            _typed(kafkaParams, Mapping, "kafkaParams", "createStream", "pass a dict of Kafka settings")
        params = {str(k): v for k, v in (kafkaParams or {}).items()}
        # The receiver's consumer is a group member that commits, like 0.8's high-level consumer: these keep
        # their meaning. Every other key a 0.8 or 0.10 consumer accepted is mapped or ignored (legacy._params).
        consumer_keys = {"session.timeout.ms": "session_timeout_ms", "heartbeat.interval.ms": "heartbeat_interval_ms",
                         "auto.commit.interval.ms": "auto_commit_interval_ms", "client.id": "client_id"}
        commits = ("auto.commit.enable", "enable.auto.commit")
        handled = {"metadata.broker.list", "bootstrap.servers", "auto.offset.reset", "group.id", *consumer_keys,
                   *commits}
        mapped, ignored = kafka_params_settings(params, handled=handled)
        warn_ignored(ignored, "createStream")
        for key in commits:
            if key in params and str(params[key]).strip().lower() != "true":
                msg = (f"kafkaParams[{key!r}]={params[key]!r}: the receiver's consumer always commits the group's "
                       "offsets (2.4's default); a job that must not commit needs a direct stream "
                       "(createDirectStream), which never does")
                raise ConfigError(msg, field=key, expected="true", actual=params[key])
        brokers = params.get("metadata.broker.list") or params.get("bootstrap.servers")
        if not brokers:
            msg = (
                f"createStream needs the Kafka brokers in kafkaParams['metadata.broker.list']: the group's offsets "
                f"are kept by Kafka's group coordinator, not ZooKeeper, so zkQuorum={zkQuorum!r} cannot supply them"
            )
            raise ConfigError(
                msg,
                field="metadata.broker.list", expected="host:port[,...]", actual=None,
            )
        if "group.id" in params and params["group.id"] != groupId:
            msg = f"kafkaParams['group.id']={params['group.id']!r} differs from groupId={groupId!r}; drop one"
            raise ConfigError(
                msg,
                field="group.id", expected=groupId, actual=params["group.id"],
            )
        settings = {python: int(params[java]) if java.endswith(".ms") else params[java]
                    for java, python in consumer_keys.items() if java in params} | mapped
        kwargs = {} if storageLevel is None else {"storage_level": storageLevel}
        return create_receiver_stream(
            ssc, str(brokers), groupId, topics, key_decoder=keyDecoder, value_decoder=valueDecoder,
            auto_offset_reset=str(params.get("auto.offset.reset", "largest")), kafka_settings=settings, **kwargs,
        )

    @staticmethod
    def createDirectStream(  # noqa: N802 - Spark 2.4's name
        ssc: Any,
        topics: list[str],
        kafkaParams: Mapping[str, Any],  # noqa: N803
        fromOffsets: Mapping[TopicAndPartition, int] | None = None,  # noqa: N803
        keyDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
        valueDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
        messageHandler: Callable[[KafkaMessageAndMetadata], Any] | None = None,  # noqa: N803
    ) -> KafkaDStream:
        r"""An input stream that reads each batch's offset ranges directly from Kafka (no receiver).

        Each batch covers, per partition, the records from the previous batch's end to the partition's end
        offset when the batch is generated (rate limited by ``spark.streaming.kafka.maxRatePerPartition`` and
        backpressure). Nothing is committed to Kafka or ZooKeeper; with ``ssc.checkpoint(dir)`` the offsets are
        in the checkpoint and a restarted driver continues exactly where the stream was.

        Args:
            ssc: the StreamingContext.
            topics: list of topic names; every partition of each is read (the set is fixed at creation, as in
                0.8; new partitions are not picked up).
            kafkaParams: ``metadata.broker.list`` (or ``bootstrap.servers``) is required;
                ``auto.offset.reset`` is ``smallest``/``earliest`` or ``largest``/``latest`` (the default), used
                when ``fromOffsets`` is not given; also read: ``group.id`` (commitAsync's group), ``client.id``,
                ``socket.timeout.ms`` (default 30000). Every other 0.8/0.10 consumer key is mapped
                (``fetch.message.max.bytes``, ``socket.receive.buffer.bytes``, ``refresh.leader.backoff.ms``...)
                or ignored with one warning, as 2.4's consumer config did (:mod:`legacy._params`); TLS/SASL keys
                (``security.protocol``, ``sasl.jaas.config``, PEM ``ssl.*``) are translated for both Kafka clients,
                those with no equivalent refused (docs/security.md).
            fromOffsets: ``{TopicAndPartition: offset}`` to start from; its topics must be ``topics``, and its
                partitions are then the ones read.
            keyDecoder: decodes key bytes (None for records without key); default :func:`utf8_decoder`.
            valueDecoder: decodes value bytes; default :func:`utf8_decoder`.
            messageHandler: if given, maps each :class:`KafkaMessageAndMetadata` (with the decoders set) to
                the stream's element; default None: elements are ``(key, value)`` tuples.

        Returns:
            A :class:`KafkaDStream`; its ``transform``/``foreachRDD`` functions get :class:`KafkaRDD`\ s.

        Raises:
            ArgumentTypeError: ``topics`` not a list or ``kafkaParams`` not a dict (a ``TypeError``, as 2.4 raised).
            UnsupportedKafkaParams: TLS/SASL keys with no equivalent here (all listed, with the fix; docs/security.md).
            ConfigError: other invalid arguments.
            UnknownTopic: a topic does not exist.
            OffsetOutOfRange: a ``fromOffsets`` offset outside the partition's log.
        """
        _typed(topics, list, "topics", "createDirectStream", "pass a list of topic names, e.g. ['events']")
        _typed(kafkaParams, Mapping, "kafkaParams", "createDirectStream",
               "pass a dict, e.g. {'metadata.broker.list': 'host:9092'}")
        return create_direct_stream(ssc, topics, kafkaParams, fromOffsets, keyDecoder, valueDecoder, messageHandler)

    @staticmethod
    def createRDD(  # noqa: N802 - Spark 2.4's name
        sc: Any,
        kafkaParams: Mapping[str, Any],  # noqa: N803
        offsetRanges: list[OffsetRange],  # noqa: N803
        leaders: Mapping[TopicAndPartition, Broker] | None = None,
        keyDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
        valueDecoder: Callable[[bytes | None], Any] = utf8_decoder,  # noqa: N803
        messageHandler: Callable[[KafkaMessageAndMetadata], Any] | None = None,  # noqa: N803
    ) -> KafkaRDD:
        """An RDD of the records in ``offsetRanges``, one partition per range.

        Args:
            sc: the SparkContext.
            kafkaParams: as for :meth:`createDirectStream` (``auto.offset.reset`` has no effect).
            offsetRanges: list of :class:`OffsetRange`; they are checked against the partitions' logs now.
            leaders: ``{TopicAndPartition: Broker}``; accepted and validated but not needed (the Kafka client
                finds the leaders), default None.
            keyDecoder: as for :meth:`createDirectStream`.
            valueDecoder: as for :meth:`createDirectStream`.
            messageHandler: as for :meth:`createDirectStream`.

        Raises:
            ArgumentTypeError: ``kafkaParams`` not a dict or ``offsetRanges`` not a list (a ``TypeError``, as 2.4
                raised).
            OffsetOutOfRange: a range not (or no longer) in its partition's log.
            ConfigError: invalid arguments (``UnsupportedKafkaParams`` for TLS/SASL keys with no equivalent here).
        """
        _typed(kafkaParams, Mapping, "kafkaParams", "createRDD",
               "pass a dict, e.g. {'metadata.broker.list': 'host:9092'}")
        _typed(offsetRanges, list, "offsetRanges", "createRDD", "pass a list of OffsetRange")
        return create_rdd(sc, kafkaParams, offsetRanges, leaders, keyDecoder, valueDecoder, messageHandler)
