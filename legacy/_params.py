"""The ``kafkaParams`` real 2.x jobs pass: what each key becomes here.

Spark 2.4's 0.8 integration handed ``kafkaParams`` to Kafka 0.8's ``ConsumerConfig``, which accepted any key
and logged the ones it did not use ("Property X is not valid"). So real jobs carry 0.8 keys
(``zookeeper.connect``, ``fetch.message.max.bytes``, ``refresh.leader.backoff.ms``...) and, after a move to
the 0.10 integration and back, 0.10 ones (``key.deserializer``, ``enable.auto.commit``...). Here every such key
is accepted:

- mapped, when a Kafka client setting here means the same (:data:`MAPPED`);
- ignored with one :class:`IgnoredKafkaParams` warning listing them, when it had no effect on what the stream
  reads in 2.4 either, or concerns what this design does not have (ZooKeeper, a high-level consumer's
  threads); an unknown key is ignored the same way, with the closest known key named, as 2.4 did;
- TLS and SASL settings (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, PEM ``ssl.*`` stores...)
  translated by :func:`kit.security.translate_security`, the one translation both engines share;
- refused (:class:`~legacy.errors.UnsupportedKafkaParams`, with the reason and the fix) only when ignoring it would
  change what the job does without a word: TLS/SASL settings with no equivalent here (JKS/PKCS12 stores,
  Kerberos, OAUTHBEARER; dropping them would connect in plaintext, or not at all, where the job expects a
  secured connection), or a value that is not a number.

Example:
    >>> settings, ignored = kafka_params_settings({"fetch.message.max.bytes": "2097152", "zookeeper.connect": "zk",
    ...                                            "fetch.mesage.max.bytes": "1"}, handled=set())
    >>> settings
    {'max_partition_fetch_bytes': 2097152}
    >>> ignored["zookeeper.connect"][:15], ignored["fetch.mesage.max.bytes"]
    ('no ZooKeeper he', "unknown (did you mean 'fetch.message.max.bytes'?)")
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kit.kafka import JAVA_CLIENT_SETTINGS, SECURED_PREFIXES
from kit.security import SecuritySettingError, translate_security
from legacy.errors import UnsupportedKafkaParams

__all__ = ["MAPPED", "IgnoredKafkaParams", "kafka_params_settings", "warn_ignored"]


class IgnoredKafkaParams(UserWarning):
    """``kafkaParams`` keys accepted and ignored (Spark 2.4's consumer config logged them as not used)."""


MAPPED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # 0.8 consumer names of the same settings
    "socket.receive.buffer.bytes": JAVA_CLIENT_SETTINGS["receive.buffer.bytes"],
    "fetch.message.max.bytes": JAVA_CLIENT_SETTINGS["max.partition.fetch.bytes"],
    "refresh.leader.backoff.ms": JAVA_CLIENT_SETTINGS["retry.backoff.ms"],
    # 0.10 consumer (and later) names
    **JAVA_CLIENT_SETTINGS,
}
"""``kafkaParams`` key → (kafka-python setting, conversion), for keys with the same meaning here."""

_NO_ZOOKEEPER = "no ZooKeeper here: offsets come from the brokers and the checkpoint (or the consumer group)"
_NO_COMMIT = "a direct stream never commits offsets, as in 2.4: store them after each batch (or commitAsync)"
_DESERIALIZER = "records are bytes, decoded by keyDecoder/valueDecoder, as in the 0.8 API"
_HIGH_LEVEL = "a setting of the 0.8 high-level consumer's threads and rebalancing, which this design has not"
_UNUSED = "not used by Spark 2.4's direct stream either (its SimpleConsumer read only what it was given)"
IGNORED: dict[str, str] = {
    "zookeeper.connect": _NO_ZOOKEEPER,
    "zookeeper.connection.timeout.ms": _NO_ZOOKEEPER,
    "zookeeper.session.timeout.ms": _NO_ZOOKEEPER,
    "zookeeper.sync.time.ms": _NO_ZOOKEEPER,
    "offsets.storage": _NO_ZOOKEEPER,
    "dual.commit.enabled": _NO_ZOOKEEPER,
    "offsets.channel.backoff.ms": _NO_ZOOKEEPER,
    "offsets.channel.socket.timeout.ms": _NO_ZOOKEEPER,
    "offsets.commit.max.retries": _NO_ZOOKEEPER,
    "auto.commit.enable": _NO_COMMIT,
    "enable.auto.commit": _NO_COMMIT,
    "auto.commit.interval.ms": _NO_COMMIT,
    "key.deserializer": _DESERIALIZER,
    "value.deserializer": _DESERIALIZER,
    "consumer.id": _HIGH_LEVEL,
    "num.consumer.fetchers": _HIGH_LEVEL,
    "queued.max.message.chunks": _HIGH_LEVEL,
    "rebalance.max.retries": _HIGH_LEVEL,
    "rebalance.backoff.ms": _HIGH_LEVEL,
    "partition.assignment.strategy": _HIGH_LEVEL,
    "consumer.timeout.ms": _HIGH_LEVEL,
    "exclude.internal.topics": _HIGH_LEVEL,
    "session.timeout.ms": _HIGH_LEVEL,
    "heartbeat.interval.ms": _HIGH_LEVEL,
    "max.poll.records": _HIGH_LEVEL,
    "max.poll.interval.ms": _HIGH_LEVEL,
    "fetch.min.bytes": _UNUSED,
    "fetch.wait.max.ms": _UNUSED,
    "fetch.max.wait.ms": _UNUSED,
    "fetch.max.bytes": _UNUSED,
    "isolation.level": "the kit reads every record up to the high watermark, as the 0.8 API did",
    "interceptor.classes": "JVM classes cannot run in a Python client",
    "metric.reporters": "JVM classes cannot run in a Python client",
    "metrics.num.samples": "JVM client metrics",
    "metrics.sample.window.ms": "JVM client metrics",
    "metrics.recording.level": "JVM client metrics",
    "client.dns.lookup": "the Python clients resolve as they do",
    "client.rack": "no rack-aware fetching here",
    "default.api.timeout.ms": "bounded by socket.timeout.ms here",
}
"""``kafkaParams`` key → why it is ignored (0.8 and 0.10 consumer keys with no effect here)."""

def kafka_params_settings(
    params: Mapping[str, Any], *, handled: Iterable[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """kafka-python settings for ``params``' mapped and TLS/SASL keys, and ``{key: why}`` for the ignored ones.

    ``handled``: the keys the caller reads itself (brokers, ``auto.offset.reset``...), left alone. Secrets come
    back as :class:`kit.security.Secret` values.

    Raises:
        UnsupportedKafkaParams: TLS/SASL keys with no equivalent or malformed (the reason and the fix, never the
            secret), or a mapped key whose value is not a number (all listed).
    """
    handled = set(handled)
    settings: dict[str, Any] = {}
    ignored: dict[str, str] = {}
    refused: dict[str, str] = {}
    try:
        secured, secured_ignored = translate_security(params)
    except SecuritySettingError as err:
        field = str(err.field)
        refused[field] = str(err).removeprefix(f"{field}: ")
        secured, secured_ignored = {}, {}
    settings.update(secured)
    ignored.update(secured_ignored)
    known = set(MAPPED) | set(IGNORED) | handled
    for key, value in params.items():
        if key in handled or key.startswith(SECURED_PREFIXES):
            continue
        if key in MAPPED:
            name, convert = MAPPED[key]
            try:
                settings[name] = convert(value)
            except ValueError:
                refused[key] = f"must be a whole number, got {value!r}"
        elif key in IGNORED:
            ignored[key] = IGNORED[key]
        else:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            ignored[key] = "unknown" + (f" (did you mean {close[0]!r}?)" if close else "")
    if refused:
        raise UnsupportedKafkaParams(refused, supported=sorted(known))
    return settings, ignored


def warn_ignored(ignored: Mapping[str, str], where: str) -> None:
    """One :class:`IgnoredKafkaParams` warning listing every ignored key with why (none: no warning)."""
    if ignored:
        listed = "; ".join(f"{key!r}: {why}" for key, why in sorted(ignored.items()))
        warnings.warn(f"{where} ignores these kafkaParams, as Spark 2.4 did: {listed}", IgnoredKafkaParams,
                      stacklevel=3)
