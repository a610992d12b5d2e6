"""Option parsing for the Kafka source and sink: Spark's option names, defaults and messages.

Parsed once into frozen settings objects; every problem raises :class:`modern.errors.KafkaOptionError`
with the message Spark's ``spark-sql-kafka-0-10`` connector would give, where it has one.
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kit.kafka import JAVA_CLIENT_SETTINGS, SECURED_PREFIXES
from kit.security import SecuritySettingError, translate_security
from modern.errors import KafkaOptionError, KafkaOptionWarning

__all__ = ["EARLIEST", "LATEST", "SinkSettings", "SourceSettings"]

#: Spark's markers in per-partition offset JSON.
EARLIEST = -2
LATEST = -1

_SOURCE_KEYS = {
    "subscribe", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "failondataloss", "minpartitions", "maxpartitions", "maxrecordsperpartition",
    "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
    "fetchoffset.numretries", "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms",
    "groupidprefix", "includeheaders", "path",
}
# checkpointLocation reaches stream writers with the other writeStream options.
_SINK_KEYS = {"topic", "includeheaders", "path", "checkpointlocation"}
# Options are case-insensitive; these are Spark's spellings, for messages.
_SPELLING = {name.lower(): name for name in (
    "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs", "groupIdPrefix", "includeHeaders", "checkpointLocation",
)}

# Kafka client settings (Java names after the ``kafka.`` prefix) and their kafka-python equivalents.
_CLIENT_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    **{java: python for java, (python, _) in JAVA_CLIENT_SETTINGS.items()},
}
_PRODUCER_KEYS = {
    "acks": "acks",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "compression.type": "compression_type",
    "retries": "retries",
    "max.request.size": "max_request_size",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "enable.idempotence": "enable_idempotence",
    "delivery.timeout.ms": "delivery_timeout_ms",
}
_INT_SETTINGS = {
    "linger_ms", "batch_size", "retries", "max_request_size", "max_in_flight_requests_per_connection",
    "delivery_timeout_ms",
}
_BOOL_SETTINGS = {"enable_idempotence"}

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details."
)
_GROUP_ID_MESSAGE = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set this option. "
    "This option is unsafe to use since multiple concurrent queries or sources using the same group id will "
    "interfere with each other as they are part of the same consumer group. Restarted queries may also suffer "
    "interference from the previous run having the same group id. The user should have only one query per group "
    "id, and/or set the option 'kafka.session.timeout.ms' to be very small so that the Kafka consumers from the "
    "previous query are marked dead by the Kafka group coordinator before the restarted query starts running. "
    "(Here, as in Spark, the group commits nothing and does not decide what is read: this source reads assigned "
    "partitions without joining it. To let consumer-lag tools see the query's progress, attach "
    "modern.kafka.GroupOffsetCommitter(spark, group_id=...).)"
)


def _warn(message: str) -> None:
    """Spark logs these as warnings and runs the query: so does the kit (a :class:`KafkaOptionWarning`)."""
    warnings.warn(message, KafkaOptionWarning, stacklevel=3)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _int(options: dict[str, str], key: str, name: str, *, positive: bool = False) -> int | None:
    if key not in options:
        return None
    try:
        value = int(options[key].strip())
    except ValueError:
        msg = f"Option '{name}' must be an integer, got {options[key]!r}"
        raise KafkaOptionError(msg, option=name) from None
    if positive and value <= 0:
        msg = f"{name} must be positive"
        raise KafkaOptionError(msg, option=name)
    return value


def _bool(options: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    msg = f"Option '{name}' must be 'true' or 'false', got {raw!r}"
    raise KafkaOptionError(msg, option=name)


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.I)
_DURATION_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(raw: str, name: str) -> int:
    match = _DURATION.match(raw)
    if not match:
        msg = f"Option '{name}' must be a duration such as '15m', '30s' or '500ms', got {raw!r}"
        raise KafkaOptionError(msg, option=name)
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "").lower() or None]


def _kafka_params(
    options: dict[str, str], allowed: dict[str, str], what: str, *, accepted: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The ``kafka.*`` options as kafka-python settings.

    A Java client setting with an equivalent here is mapped; TLS/SASL settings are translated by
    :func:`kit.security.translate_security` (secrets become :class:`kit.security.Secret`), and one of them with no
    equivalent is an error, since dropping it changes the connection; any other is accepted with a warning (the
    Java client, too, only logs a setting it does not use). ``accepted``: settings handled elsewhere, left out.
    """
    # Spark lower-cases option keys; the Java names of TLS/SASL settings are lower case, so nothing is lost.
    java_secured = {k[len("kafka."):]: v for k, v in options.items()
                    if k.startswith("kafka.") and k[len("kafka."):].startswith(SECURED_PREFIXES)}
    try:
        params, secured_ignored = translate_security(java_secured, prefix="kafka.")
    except SecuritySettingError as err:
        raise KafkaOptionError(str(err), option=str(err.field)) from None
    no_effect: list[str] = []
    for key, raw in options.items():
        if not key.startswith("kafka."):
            continue
        java_name = key[len("kafka."):]
        if java_name in accepted or java_name in java_secured:
            continue
        python_name = allowed.get(java_name)
        if python_name is None:
            no_effect.append(java_name)
            continue
        value: Any = raw
        if java_name in JAVA_CLIENT_SETTINGS:
            value = JAVA_CLIENT_SETTINGS[java_name][1](raw)
        elif python_name in _INT_SETTINGS:
            value = int(raw)
        elif python_name in _BOOL_SETTINGS:
            value = raw.strip().lower() == "true"
        elif python_name == "acks" and raw not in ("all", "-1"):
            value = int(raw)
        params[python_name] = value
    if secured_ignored:
        _warn("; ".join(f"Kafka option 'kafka.{k}' has no effect on this {what}: {why}"
                        for k, why in sorted(secured_ignored.items())))
    if no_effect:
        _warn(f"Kafka option(s) {sorted('kafka.' + k for k in no_effect)} have no effect on this {what}: the "
              "Python Kafka clients it runs on have no such setting (the Java client's own tuning). Settings "
              f"that do apply: {sorted('kafka.' + k for k in allowed)}.")
    return params


def _check_unknown(options: dict[str, str], known: set[str], what: str) -> None:
    """Spark ignores options it does not know: warn, naming the closest known one (a misspelling)."""
    unknown = sorted(k for k in options if k not in known and not k.startswith("kafka."))
    for option in unknown:
        close = difflib.get_close_matches(option, sorted(known), n=1)
        hint = f"did you mean {_SPELLING.get(close[0], close[0])!r}?" if close else (
            f"known options: {sorted(_SPELLING.get(k, k) for k in known - {'path', 'checkpointlocation'})}")
        _warn(f"Unknown option {option!r} for the Kafka {what} is ignored, as Spark ignores it: {hint}")


def _partition_offsets(raw: str, name: str) -> dict[tuple[str, int], int]:
    try:
        parsed = json.loads(raw)
        return {
            (topic, int(partition)): int(offset)
            for topic, partitions in parsed.items()
            for partition, offset in partitions.items()
        }
    except (ValueError, AttributeError, TypeError):
        msg = f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, got {raw} (option '{name}')"
        raise KafkaOptionError(
            msg,
            option=name,
        ) from None


@dataclass(frozen=True)
class OffsetSpec:
    """Where a query starts or a batch query ends.

    ``kind`` is ``"earliest"``, ``"latest"``, ``"offsets"`` (``offsets``: (topic, partition) → offset, with
    -2/-1 for earliest/latest), ``"timestamp"`` (``timestamp`` for every partition) or ``"timestamps"``
    (``offsets`` holds per-partition timestamps). ``by_timestamp_strategy`` is "error" or "latest".
    """

    kind: str
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None
    by_timestamp_strategy: str = "error"


def _offset_spec(options: dict[str, str], prefix: str, default: str) -> OffsetSpec:
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        msg = f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', got {strategy!r}"
        raise KafkaOptionError(
            msg,
            option="startingOffsetsByTimestampStrategy",
        )
    if f"{prefix}timestamp" in options:
        ts = _int(options, f"{prefix}timestamp", f"{prefix}Timestamp")
        return OffsetSpec("timestamp", timestamp=ts, by_timestamp_strategy=strategy)
    if f"{prefix}offsetsbytimestamp" in options:
        name = f"{prefix}OffsetsByTimestamp"
        return OffsetSpec(
            "timestamps",
            _partition_offsets(options[f"{prefix}offsetsbytimestamp"], name),
            by_timestamp_strategy=strategy,
        )
    raw = options.get(f"{prefix}offsets", default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    return OffsetSpec("offsets", _partition_offsets(raw, f"{prefix}Offsets"))


@dataclass(frozen=True)
class SourceSettings:
    """The Kafka source's options, validated.

    Build with :meth:`from_options`; attribute names are the options' in snake case.
    """

    bootstrap_servers: str
    strategy: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    client: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, streaming: bool) -> SourceSettings:
        """Validate reader options as Spark's ``KafkaSourceProvider`` does (plus unknown-option checks).

        Raises:
            KafkaOptionError: with Spark's message where Spark has one.
        """
        opts = _lower(options)
        _check_unknown(opts, _SOURCE_KEYS, "source")
        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
        if not strategies:
            msg = (
                "One of the following options must be specified for Kafka source: subscribe, subscribepattern, "
                "assign. See the docs for more details."
            )
            raise KafkaOptionError(
                msg,
                option="subscribe",
            )
        if len(strategies) > 1:
            msg = (
                "Only one of the following options can be specified for Kafka source: subscribe, "
                "subscribepattern, assign. See the docs for more details."
            )
            raise KafkaOptionError(
                msg,
                option=strategies[1],
            )
        strategy = strategies[0]
        value = opts[strategy]
        topics: tuple[str, ...] = ()
        pattern = None
        assigned: tuple[tuple[str, int], ...] = ()
        if strategy == "assign":
            if not value.strip().startswith("{"):
                msg = f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
                raise KafkaOptionError(msg, option="assign")
            try:
                assigned = tuple(sorted((t, int(p)) for t, ps in json.loads(value).items() for p in ps))
            except (ValueError, AttributeError, TypeError):
                msg = f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {value}"
                raise KafkaOptionError(msg, option="assign") from None
        elif strategy == "subscribe":
            topics = tuple(t.strip() for t in value.split(",") if t.strip())
            if not topics:
                msg = f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
                raise KafkaOptionError(msg, option="subscribe")
        else:
            pattern = value.strip()
            if not pattern:
                msg = f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
                raise KafkaOptionError(
                    msg,
                    option="subscribePattern",
                )
            try:
                re.compile(pattern)
            except re.error as exc:
                msg = f"subscribePattern {pattern!r} is not a valid regex: {exc}"
                raise KafkaOptionError(msg, option="subscribePattern") from None

        min_partitions = _int(opts, "minpartitions", "minPartitions")
        if min_partitions is not None and min_partitions <= 0:
            msg = "minPartitions must be positive"
            raise KafkaOptionError(msg, option="minPartitions")
        max_partitions = _int(opts, "maxpartitions", "maxPartitions")
        if max_partitions is not None and max_partitions <= 0:
            msg = "maxPartitions must be positive"
            raise KafkaOptionError(msg, option="maxPartitions")
        if max_partitions is not None and min_partitions is not None and min_partitions > max_partitions:
            msg = (
                f"minPartitions ({min_partitions}) is greater than maxPartitions ({max_partitions}); set at most one "
                "of them, or minPartitions <= maxPartitions"
            )
            raise KafkaOptionError(
                msg,
                option="maxPartitions",
            )
        max_records = _int(opts, "maxrecordsperpartition", "maxRecordsPerPartition")
        if max_records is not None and max_records <= 0:
            msg = "maxrecordsperpartition must be positive"
            raise KafkaOptionError(msg, option="maxRecordsPerPartition")

        if "kafka.group.id" in opts:
            _warn(_GROUP_ID_MESSAGE)
            if "groupidprefix" in opts:
                _warn("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")
        if "kafka.auto.offset.reset" in opts:
            raise KafkaOptionError(_AUTO_OFFSET_RESET_MESSAGE, option="kafka.auto.offset.reset")
        if "kafka.key.deserializer" in opts:
            msg = (
                "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays with "
                "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
            )
            raise KafkaOptionError(
                msg,
                option="kafka.key.deserializer",
            )
        if "kafka.value.deserializer" in opts:
            msg = (
                "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays with "
                "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values."
            )
            raise KafkaOptionError(
                msg,
                option="kafka.value.deserializer",
            )
        for java_name in ("enable.auto.commit", "interceptor.classes"):
            if f"kafka.{java_name}" in opts:
                msg = f"Kafka option '{java_name}' is not supported"
                raise KafkaOptionError(msg, option=f"kafka.{java_name}")
        if "kafka.bootstrap.servers" not in opts:
            msg = "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
            raise KafkaOptionError(
                msg,
                option="kafka.bootstrap.servers",
            )
        max_per_trigger = _int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", positive=True)
        min_per_trigger = _int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger", positive=True)
        if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
            msg = (
                f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                f"maxOffsetsPerTrigger({max_per_trigger})."
            )
            raise KafkaOptionError(
                msg,
                option="minOffsetsPerTrigger",
            )
        client = _kafka_params(opts, _CLIENT_KEYS, "source", accepted=frozenset({"group.id"}))
        bootstrap = client.pop("bootstrap_servers")

        if streaming:
            if "endingoffsets" in opts:
                msg = "ending offset not valid in streaming queries"
                raise KafkaOptionError(msg, option="endingOffsets")
            if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
                msg = "ending timestamp not valid in streaming queries"
                raise KafkaOptionError(msg, option="endingOffsetsByTimestamp")
            starting = _offset_spec(opts, "starting", "latest")
            ending = OffsetSpec("latest")
        else:
            starting = _offset_spec(opts, "starting", "earliest")
            ending = _offset_spec(opts, "ending", "latest")
            if starting.kind == "latest":
                msg = "starting offset can't be latest for batch queries on Kafka"
                raise KafkaOptionError(msg, option="startingOffsets")
            for (topic, partition), offset in starting.offsets.items():
                if starting.kind == "offsets" and offset == LATEST:
                    msg = f"startingOffsets for {topic}-{partition} can't be latest for batch queries on Kafka"
                    raise KafkaOptionError(
                        msg,
                        option="startingOffsets",
                    )
            if ending.kind == "earliest":
                msg = "ending offset can't be earliest for batch queries on Kafka"
                raise KafkaOptionError(msg, option="endingOffsets")
            for (topic, partition), offset in ending.offsets.items():
                if ending.kind == "offsets" and offset == EARLIEST:
                    msg = f"ending offset for {topic}-{partition} can't be earliest for batch queries on Kafka"
                    raise KafkaOptionError(
                        msg,
                        option="endingOffsets",
                    )
            if starting.kind == "offsets" and ending.kind == "offsets":
                if set(starting.offsets) != set(ending.offsets):
                    msg = (
                        "The topic-partitions of startingOffsets and endingOffsets differ: "
                        f"{sorted(starting.offsets)} vs {sorted(ending.offsets)}"
                    )
                    raise KafkaOptionError(
                        msg,
                        option="endingOffsets",
                    )
                for tp, start in starting.offsets.items():
                    end = ending.offsets[tp]
                    if start >= 0 and end >= 0 and start > end:
                        msg = f"startingOffsets for {tp[0]}-{tp[1]} ({start}) is greater than its endingOffsets ({end})"
                        raise KafkaOptionError(
                            msg,
                            option="startingOffsets",
                        )
        return cls(
            bootstrap_servers=bootstrap,
            strategy={"subscribepattern": "subscribePattern"}.get(strategy, strategy),
            topics=topics,
            pattern=pattern,
            assigned=assigned,
            starting=starting,
            ending=ending,
            fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
            include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
            max_offsets_per_trigger=max_per_trigger,
            min_offsets_per_trigger=min_per_trigger,
            max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay"),
            min_partitions=min_partitions,
            max_partitions=max_partitions,
            max_records_per_partition=max_records,
            poll_timeout_ms=(
                _int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs", positive=True) or 120_000
            ),
            client=client,
        )


@dataclass(frozen=True)
class SinkSettings:
    """The Kafka sink's options, validated (``topic`` option, ``kafka.*`` producer settings)."""

    bootstrap_servers: str
    topic: str | None
    client: dict[str, Any]
    producer: dict[str, Any]

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkSettings:
        opts = _lower(options)
        _check_unknown(opts, _SINK_KEYS, "sink")
        for java_name, message in (
            ("key.serializer", "Kafka option 'key.serializer' is not supported as keys are serialized with "
             "ByteArraySerializer. Use DataFrame operations to explicitly serialize the keys into either strings "
             "or byte arrays."),
            ("value.serializer", "Kafka option 'value.serializer' is not supported as values are serialized with "
             "ByteArraySerializer. Use DataFrame operations to explicitly serialize the values into either strings "
             "or byte arrays."),
        ):
            if f"kafka.{java_name}" in opts:
                raise KafkaOptionError(message, option=f"kafka.{java_name}")
        if "kafka.bootstrap.servers" not in opts:
            msg = "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
            raise KafkaOptionError(
                msg,
                option="kafka.bootstrap.servers",
            )
        params = _kafka_params(opts, {**_CLIENT_KEYS, **_PRODUCER_KEYS}, "sink")
        bootstrap = params.pop("bootstrap_servers")
        producer = {k: v for k, v in params.items() if k in _PRODUCER_KEYS.values()}
        client = {k: v for k, v in params.items() if k not in producer}  # TLS/SASL settings included
        topic = opts.get("topic")
        return cls(bootstrap, topic.strip() if topic else None, client, producer)
