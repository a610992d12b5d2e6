"""Kafka I/O both engines share: topic admin, exact offsets and exact offset-range reads.

Everything goes through :class:`Kafka`, a handle on one cluster that opens its clients lazily and closes
them on ``close()`` / ``__exit__``. It works the same on Apache Kafka and on the embedded Tansu broker, whose
ListOffsets(latest) answer is wrong after multi-record batches (it returns the last batch's base offset + 1);
:meth:`Kafka.end_offsets` reads the high watermark of a Fetch response instead, which both brokers get right.

Two clients: kafka-python, the reference, does admin, groups and offset look-ups; the hot paths (ranged
reads, high watermarks, :meth:`Kafka.sender`) use librdkafka through ``confluent-kafka`` when it is
installed, several times faster (docs/kit.md, "Kafka clients"). ``client="kafka-python"`` (or the
environment variable ``DMK_KAFKA_CLIENT=kafka-python``) forces the reference client everywhere; settings
with no librdkafka equivalent keep a handle on kafka-python too. ``client="confluent"`` (or
``DMK_KAFKA_CLIENT=confluent``), asked for by name, puts the admin, offset and group requests on librdkafka too
(:mod:`kit._rdadmin`): such a handle opens no kafka-python connection, the one way to use a broker kafka-python
cannot reach (librdkafka's mock cluster, ``kit.broker.EmbeddedBroker(kind="mock")``).

Example::

    with Kafka("127.0.0.1:9092") as kafka:
        kafka.create_topic("events", partitions=4)
        ends = kafka.end_offsets("events")                            # {TopicPartition: offset}
        rows = list(kafka.read_range("events", 0, 0, ends[TopicPartition("events", 0)]))

Records come back as kafka-python ``ConsumerRecord`` tuples (``topic, partition, offset, timestamp,
timestamp_type, key, value, headers`` among their fields) with raw ``bytes`` keys and values.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import (
    KafkaConfigurationError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafka.partitioner.default import murmur2

from kit import security
from kit.errors import (
    BrokerUnavailable,
    ConfigError,
    KafkaConnectionRefused,
    KafkaTimeout,
    OffsetOutOfRange,
    TopicConfigurationMismatch,
    UnknownTopic,
)
from kit.sender import KafkaPythonSender, Sender

# kit._rdkafka and kit._rdadmin (librdkafka) are imported inside the methods of a confluent handle: they import
# confluent-kafka, which may be absent (resolve_client then falls back to kafka-python). Neither imports this module.

__all__ = [
    "CLIENTS",
    "JAVA_CLIENT_SETTINGS",
    "SECURED_PREFIXES",
    "CLIENT_ENV",
    "ConsumerRecord",
    "Kafka",
    "Sender",
    "TopicPartition",
    "client_settings",
    "java_client_settings",
    "key_partition",
    "librdkafka_only",
    "process_settings",
    "python_client_config",
    "register_topic_admin",
    "resolve_client",
    "set_process_settings",
    "using_process_settings",
    "wait_for_broker",
]

CLIENTS = ("confluent", "kafka-python")
"""The Kafka clients the kit's hot paths can use."""

CLIENT_ENV = "DMK_KAFKA_CLIENT"
"""Environment variable forcing one of :data:`CLIENTS` (``auto``, the default, prefers confluent)."""

# The kit's own settings besides kafka-python's: inline PEM (from ssl.truststore.certificates and
# ssl.keystore.certificate.chain/key), written to private files for kafka-python (kit.security.materialize_pem) and
# given inline to librdkafka.
_INLINE_PEM_KEYS = {"ssl_cadata", "ssl_certdata", "ssl_keydata"}
_KNOWN_CLIENT_KEYS = (
    set(KafkaConsumer.DEFAULT_CONFIG) | set(KafkaProducer.DEFAULT_CONFIG) | set(KafkaAdminClient.DEFAULT_CONFIG)
    | _INLINE_PEM_KEYS
)


def _whole(value: Any) -> int:
    return int(str(value))


def _flag(value: Any) -> bool:
    return str(value).strip().lower() == "true"


JAVA_CLIENT_SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "receive.buffer.bytes": ("receive_buffer_bytes", _whole),
    "send.buffer.bytes": ("send_buffer_bytes", _whole),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _whole),
    "retry.backoff.ms": ("retry_backoff_ms", _whole),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _whole),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _whole),
    "request.timeout.ms": ("request_timeout_ms", _whole),
    "metadata.max.age.ms": ("metadata_max_age_ms", _whole),
    "connections.max.idle.ms": ("connections_max_idle_ms", _whole),
    "check.crcs": ("check_crcs", _flag),
}
"""Java Kafka client settings with the same meaning in kafka-python (and in librdkafka, through the fast path's
translation): Java name -> (kafka-python name, conversion of the setting's text). The legacy ``kafkaParams`` and
the modern ``kafka.*`` options both map through it."""
SECURED_PREFIXES = ("security.", "ssl.", "sasl.")
"""Java client settings for TLS and SASL, translated by :func:`kit.security.translate_security`: dropping one
changes the connection, so one with no equivalent here is refused, never ignored."""

# Settings the kit owns: a caller passing them would silently change what a read or an offset means.
_RESERVED_CLIENT_KEYS = {
    "bootstrap_servers",
    "group_id",
    "enable_auto_commit",
    "auto_offset_reset",
    "key_deserializer",
    "value_deserializer",
    "isolation_level",
}


def key_partition(key: bytes, partitions: int) -> int:
    """Partition of a keyed record, exactly as Kafka's Java DefaultPartitioner picks it.

    ``(murmur2(key) & 0x7fffffff) % partitions`` — so the kit, kafka-python and Java producers all put a
    key on the same partition.
    """
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


def client_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate extra kafka-python client settings (security, client id, timeouts...).

    Raises:
        ConfigError: for keys no kafka-python client knows ("Unrecognized configs: {...}") and for keys the
            kit sets itself.
    """
    settings = dict(settings or {})
    unknown = set(settings) - _KNOWN_CLIENT_KEYS
    if unknown:
        msg = (
            f"Unrecognized configs: {unknown}. Use kafka-python setting names "
            "(e.g. security_protocol, sasl_mechanism, ssl_cafile, client_id)."
        )
        raise ConfigError(msg)
    reserved = set(settings) & _RESERVED_CLIENT_KEYS
    if reserved:
        msg = f"the kit sets {sorted(reserved)} itself; remove them from the client settings"
        raise ConfigError(msg)
    return settings


def java_client_settings(java: Mapping[str, Any], *, where: str = "--kafka-config/--kafka-option") -> dict[str, Any]:
    """kafka-python settings for Java client settings given to a ``dmk`` command, the pytest plugin or a driver.

    TLS/SASL settings go through :func:`kit.security.translate_security`; ``client.id`` and
    :data:`JAVA_CLIENT_SETTINGS` are mapped. A TLS/SASL setting that has no effect (``ssl.*`` with
    ``security.protocol=PLAINTEXT``...) is dropped with one warning.

    Raises:
        ConfigError: ``bootstrap.servers`` (``--bootstrap-servers`` says where Kafka is), or a setting the kit
            does not apply to its clients (named, never with its value).
        kit.security.SecuritySettingError: a TLS/SASL setting with no equivalent, or malformed.
    """
    import warnings

    settings, ignored = security.translate_security(java)
    unknown = []
    for key, value in java.items():
        if key.startswith(SECURED_PREFIXES):
            continue
        if key == "client.id":
            settings["client_id"] = str(value)
        elif key in JAVA_CLIENT_SETTINGS:
            name, convert = JAVA_CLIENT_SETTINGS[key]
            try:
                settings[name] = convert(value)
            except ValueError:
                msg = f"{where}: {key} must be a whole number, got {value!r}"
                raise ConfigError(msg, field=key, expected="a whole number", actual=value) from None
        else:
            unknown.append(key)
    if unknown:
        msg = (
            f"{where}: {sorted(unknown)} are not settings the kit applies to its Kafka clients. Fix: remove them; "
            "give the brokers with --bootstrap-servers, and TLS/SASL settings (security.protocol, sasl.*, ssl.*), "
            f"client.id or {', '.join(sorted(JAVA_CLIENT_SETTINGS))} in the Java client's names"
        )
        raise ConfigError(msg, field=sorted(unknown)[0], expected="TLS/SASL or client settings", actual=sorted(unknown))
    if ignored:
        warnings.warn(f"{where}: " + "; ".join(f"{k} has no effect: {why}" for k, why in sorted(ignored.items())),
                      UserWarning, stacklevel=2)
    return settings


_PROCESS_SETTINGS: dict[str, Any] = {}


def set_process_settings(settings: Mapping[str, Any] | None) -> None:
    """Client settings (kafka-python names) every :class:`Kafka` handle of this process starts from.

    Set at the edge, by a ``dmk`` command (``--kafka-config``/``--kafka-option``), a compare driver process or the
    pytest plugin, so that every client a command creates (admin, producers, consumers) connects the same way;
    a handle's own ``settings`` win over them. None or ``{}`` clears them.
    """
    _PROCESS_SETTINGS.clear()
    _PROCESS_SETTINGS.update(client_settings(settings))


@contextlib.contextmanager
def using_process_settings(settings: Mapping[str, Any] | None) -> Iterator[None]:
    """:func:`set_process_settings` for the block's duration, then the settings from before it."""
    before = dict(_PROCESS_SETTINGS)
    set_process_settings({**before, **(settings or {})})
    try:
        yield
    finally:
        _PROCESS_SETTINGS.clear()
        _PROCESS_SETTINGS.update(before)


def process_settings() -> dict[str, Any]:
    """The settings :func:`set_process_settings` gave (a copy; secrets stay :class:`kit.security.Secret`)."""
    return dict(_PROCESS_SETTINGS)


def python_client_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as kafka-python takes them: secrets revealed, inline PEM as private files (in memory on Linux)."""
    return {k: security.reveal(v) for k, v in security.materialize_pem(settings).items()}


class _ConnectionProblems(logging.Handler):
    """Collects what kafka-python logs about failed authentications and TLS handshakes while a client connects.

    kafka-python reports neither to the caller: it logs the failure and retries until the bootstrap times out.
    """

    _AUTH = ("SaslAuthenticationFailed", "Authentication failed", "AuthenticationFailed", "SASL")
    _TLS = ("CERTIFICATE_VERIFY_FAILED", "SSLError", "SSL:", "certificate", "handshake")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.auth: list[str] = []
        self.tls: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except (TypeError, ValueError):
            return
        if any(marker in text for marker in self._AUTH):
            self.auth.append(text)
        elif any(marker in text for marker in self._TLS):
            self.tls.append(text)


@contextlib.contextmanager
def _diagnosed(bootstrap_servers: str, settings: Mapping[str, Any]) -> Iterator[None]:
    """Turn kafka-python's bootstrap timeout into :class:`KafkaConnectionRefused` when it was a refusal."""
    handler = _ConnectionProblems()
    logger = logging.getLogger("kafka")
    logger.addHandler(handler)
    try:
        yield
    except KafkaTimeoutError as exc:
        secrets = security.secret_values(settings)
        if handler.auth:
            reason = security.redact_text(handler.auth[-1], secrets)
            raise KafkaConnectionRefused(bootstrap_servers, "authentication", reason, _AUTH_FIX) from exc
        if handler.tls:
            reason = security.redact_text(handler.tls[-1], secrets)
            raise KafkaConnectionRefused(bootstrap_servers, "tls", reason, _TLS_FIX) from exc
        raise BrokerUnavailable(bootstrap_servers, str(exc)) from exc
    finally:
        logger.removeHandler(handler)


def _confluent_installed() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_client(client: str | None = None) -> str:
    """The client the hot paths use: ``client``, else ``$DMK_KAFKA_CLIENT``, else ``"auto"``.

    ``"auto"`` is ``"confluent"`` when ``confluent-kafka`` is importable and ``"kafka-python"`` otherwise.
    The environment is read here, at the edge, so that Spark's Python workers (which inherit it) choose the
    same client as their driver.

    Raises:
        ConfigError: an unknown client name, or ``"confluent"`` without ``confluent-kafka`` installed.
    """
    import os

    chosen = (client or os.environ.get(CLIENT_ENV) or "auto").strip().lower()
    if chosen == "auto":
        return "confluent" if _confluent_installed() else "kafka-python"
    if chosen not in CLIENTS:
        msg = (
            f"unknown Kafka client {chosen!r} (from {'the client argument' if client else CLIENT_ENV}); "
            f"use one of {', '.join(CLIENTS)} or auto"
        )
        raise ConfigError(
            msg,
            field="client", expected=("auto", *CLIENTS), actual=chosen,
        )
    if chosen == "confluent" and not _confluent_installed():
        msg = (
            "the confluent Kafka client was asked for but confluent-kafka is not installed; "
            "pip install confluent-kafka, or use DMK_KAFKA_CLIENT=kafka-python"
        )
        raise ConfigError(
            msg,
            field="client", expected="confluent-kafka installed", actual="missing",
        )
    return chosen


def librdkafka_only(client: str | None = None) -> bool:
    """Whether ``client`` (else ``$DMK_KAFKA_CLIENT``) names the confluent client explicitly.

    Then a :class:`Kafka` handle sends its admin, offset and group requests through librdkafka too, and opens no
    kafka-python client.

    ``auto`` (the default) keeps those on kafka-python, the reference client, whose diagnostics of refused
    credentials and TLS handshakes and whose error names the offset stores report.
    """
    import os

    chosen = (client or os.environ.get(CLIENT_ENV) or "auto").strip().lower()
    return chosen == "confluent" and resolve_client(client) == "confluent"


_TOPIC_ADMINS: dict[str, Any] = {}


def register_topic_admin(bootstrap_servers: str, admin: Any | None) -> None:
    """Create and delete the topics of ``bootstrap_servers`` through ``admin`` (None: no longer) in this process.

    For a cluster whose protocol has no CreateTopics/DeleteTopics: librdkafka's mock cluster, which
    :class:`kit.broker.EmbeddedBroker` registers with its ``create_topic(topic, partitions)`` and
    ``delete_topic(topic)`` (its C API) while it runs. Only librdkafka handles (:func:`librdkafka_only`) use it.
    """
    if admin is None:
        _TOPIC_ADMINS.pop(bootstrap_servers, None)
    else:
        _TOPIC_ADMINS[bootstrap_servers] = admin


_AUTH_FIX = (
    "check sasl.mechanism and the username and password in sasl.jaas.config against the broker's users "
    "(kafka-configs.sh --describe --entity-type users), and security.protocol"
)
_TLS_FIX = (
    "check that ssl.truststore.* holds the CA that signed the broker's certificate, that the broker's "
    "certificate names the host you connect to (or ssl.endpoint.identification.algorithm= to skip the "
    "check), and that the client certificate (ssl.keystore.*) is one the broker trusts"
)


def _only_known(settings: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k in defaults}


def wait_for_broker(
    bootstrap_servers: str,
    *,
    timeout_s: float = 15.0,
    settings: Mapping[str, Any] | None = None,
    client: str | None = None,
) -> None:
    """Return once a metadata request to ``bootstrap_servers`` succeeds.

    Sent by kafka-python, or by librdkafka when the confluent client is asked for by name
    (:func:`librdkafka_only` of ``client``).

    Raises:
        BrokerUnavailable: when no broker answers within ``timeout_s`` (default 15 s).
    """
    if librdkafka_only(client):
        with Kafka(bootstrap_servers, settings=settings, timeout_s=timeout_s, client="confluent") as kafka:
            kafka.topics()
        return
    extra = _only_known(python_client_config({**_PROCESS_SETTINGS, **client_settings(settings)}),
                        KafkaConsumer.DEFAULT_CONFIG)
    try:
        with _diagnosed(bootstrap_servers, extra):
            consumer = KafkaConsumer(
                bootstrap_servers=bootstrap_servers, bootstrap_timeout_ms=int(timeout_s * 1000), **extra
            )
    except KafkaConnectionRefused:
        raise
    except BrokerUnavailable as exc:
        raise BrokerUnavailable(bootstrap_servers, f"nothing answered within {timeout_s:g} s") from exc
    except (KafkaTimeoutError, OSError) as exc:
        raise BrokerUnavailable(bootstrap_servers, f"nothing answered within {timeout_s:g} s") from exc
    except KafkaConfigurationError as exc:
        msg = f"invalid bootstrap servers {bootstrap_servers!r}: {exc}"
        raise ConfigError(msg) from exc
    consumer.close()


def _listed(
    list_offsets: Callable[[list[TopicPartition]], dict[TopicPartition, Any]], tps: list[TopicPartition]
) -> dict[TopicPartition, Any]:
    """kafka-python's ``beginning_offsets``/``end_offsets`` of ``tps``, also for partitions it has just met.

    Asked for several partitions, kafka-python leaves out those whose leader its metadata does not know yet (a
    topic created since its last metadata refresh, e.g. one a ``subscribePattern`` query just found) and then
    fails with a KeyError on them. Asked for such a partition alone, it refreshes its metadata and waits for the
    leader, so those are asked one by one.
    """
    try:
        return list_offsets(tps)
    except KeyError:
        return {tp: list_offsets([tp])[tp] for tp in tps}


@contextlib.contextmanager
def _positioned(consumer: KafkaConsumer, offsets: Mapping[TopicPartition, int]) -> Iterator[KafkaConsumer]:
    """``consumer`` assigned ``offsets``' partitions, each at its offset, for the block; unassigned after.

    A fresh assignment forgets high watermarks and positions from earlier calls, so each is read anew.
    """
    consumer.unsubscribe()
    consumer.assign(list(offsets))
    try:
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        yield consumer
    finally:
        consumer.unsubscribe()


class _Below(Exception):
    """An offset below the log's beginning (raised and caught inside :meth:`Kafka.beginning_offsets`)."""


class Kafka:
    """A handle on one Kafka cluster: topics, offsets, ranged reads.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        settings: extra client settings in kafka-python's names (security and the like), validated by
            :func:`client_settings`, over those of :func:`set_process_settings`. Secrets may be
            :class:`kit.security.Secret` values; :func:`kit.security.translate_security` makes these from the
            Java client's TLS/SASL settings.
        timeout_s: bound on each admin or offset request (default 30 s).
        client: the client of the hot paths (:func:`resolve_client`; default ``$DMK_KAFKA_CLIENT`` or auto).
            A setting librdkafka has no equivalent for keeps ``"auto"`` on kafka-python and is an error
            with ``"confluent"``. ``"confluent"`` asked for by name (here or in ``$DMK_KAFKA_CLIENT``) also
            sends the admin, offset and group requests through librdkafka (:attr:`librdkafka_only`).

    Not thread-safe: give each thread (and each Spark task) its own handle.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        settings: Mapping[str, Any] | None = None,
        timeout_s: float = 30.0,
        client: str | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.settings = {**_PROCESS_SETTINGS, **client_settings(settings)}
        self._python_settings = python_client_config(self.settings)
        self.timeout_s = timeout_s
        self.client = resolve_client(client)
        self._rd_properties: dict[str, Any] = {}
        if self.client == "confluent":
            from kit._rdkafka import translate

            self._rd_properties, untranslated = translate(self.settings)
            if untranslated and (client or "").lower() == "confluent":
                msg = f"the settings {untranslated} have no librdkafka equivalent; use the kafka-python client"
                raise ConfigError(
                    msg,
                    field="settings", expected="settings librdkafka knows", actual=untranslated,
                )
            if untranslated:
                self.client = "kafka-python"
        self.librdkafka_only = self.client == "confluent" and librdkafka_only(client)
        """Whether every request of this handle goes through librdkafka (no kafka-python client is opened)."""
        self._rd_admin: Any = None
        self._admin: KafkaAdminClient | None = None
        self._offsets_consumer: KafkaConsumer | None = None
        self._reader: KafkaConsumer | None = None
        self._rd_reader: Any = None

    # -- clients ---------------------------------------------------------------------------------------

    def _consumer(self, **config: Any) -> KafkaConsumer:
        # One dict, not keyword arguments side by side: a caller's setting (a 0.8 job's fetch.message.max.bytes
        # is max_partition_fetch_bytes) may name what the kit also sets. The caller's settings win over the
        # kit's defaults (``config``: fetch sizes, buffers), as they do in librdkafka's clients (kit._rdkafka);
        # the high-watermark probe stays one batch whatever they say, as fetch_max_bytes is not mappable.
        merged = {
            "request_timeout_ms": int(self.timeout_s * 1000) + 5000,
            **config,
            **_only_known(self._python_settings, KafkaConsumer.DEFAULT_CONFIG),
            "bootstrap_servers": self.bootstrap_servers,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
            "bootstrap_timeout_ms": int(self.timeout_s * 1000),
        }
        with _diagnosed(self.bootstrap_servers, self.settings):
            return KafkaConsumer(**merged)

    def _rdadmin(self) -> Any:
        """The librdkafka admin client of a :attr:`librdkafka_only` handle (kit._rdadmin.RdAdmin, opened once)."""
        if self._rd_admin is None:
            from kit._rdadmin import RdAdmin

            self._rd_admin = RdAdmin(self.bootstrap_servers, self._rd_properties, self.timeout_s)
        return self._rd_admin

    def _rd_failed(self, exc: Any, operation: str, last_observed: object = None) -> Exception:
        """The kit's error for a librdkafka admin request that failed (``exc``: kit._rdadmin.RdAdminError)."""
        from kit._rdadmin import connection_problem

        problem = connection_problem(exc)
        reason = security.redact_text(str(exc), security.secret_values(self.settings))
        if problem == "authentication":
            return KafkaConnectionRefused(self.bootstrap_servers, "authentication", reason, _AUTH_FIX)
        if problem == "tls":
            return KafkaConnectionRefused(self.bootstrap_servers, "tls", reason, _TLS_FIX)
        if exc.unknown_topic and isinstance(last_observed, str):
            return UnknownTopic(last_observed, self.bootstrap_servers)
        if exc.timed_out:
            return KafkaTimeout(operation=operation, timeout_s=self.timeout_s, last_observed=last_observed)
        return ConfigError(f"{operation} failed on {self.bootstrap_servers}: {exc.name}: {reason}")

    def _rd_metadata(self) -> Any:
        from kit._rdadmin import RdAdminError

        try:
            return self._rdadmin().metadata()
        except RdAdminError as exc:
            failure = self._rd_failed(exc, "asking for metadata")
            if isinstance(failure, KafkaTimeout):
                raise BrokerUnavailable(
                    self.bootstrap_servers, f"nothing answered within {self.timeout_s:g} s ({exc})"
                ) from exc
            raise failure from exc

    def _rd_list(self, tps: list[TopicPartition], spec: str, timestamp_ms: int = 0) -> dict[TopicPartition, int]:
        from kit._rdadmin import RdAdminError

        try:
            found = self._rdadmin().list_offsets([(tp.topic, tp.partition) for tp in tps], spec, timestamp_ms)
        except RdAdminError as exc:
            raise self._rd_failed(
                exc, f"listing {spec} offsets", [str(tp) for tp in tps] if not exc.unknown_topic else tps[0].topic
            ) from exc
        return {TopicPartition(t, p): offset for (t, p), offset in found.items()}

    @property
    def admin(self) -> KafkaAdminClient:
        """The kafka-python admin client (opened on first use; a :attr:`librdkafka_only` handle never uses it)."""
        if self._admin is None:
            with _diagnosed(self.bootstrap_servers, self.settings):
                self._admin = KafkaAdminClient(**{
                    "request_timeout_ms": int(self.timeout_s * 1000),
                    **_only_known(self._python_settings, KafkaAdminClient.DEFAULT_CONFIG),
                    "bootstrap_servers": self.bootstrap_servers,
                    "bootstrap_timeout_ms": int(self.timeout_s * 1000),
                })
        return self._admin

    def producer(self, **config: Any) -> KafkaProducer:
        """A new producer on this cluster with the handle's settings (the caller closes it)."""
        with _diagnosed(self.bootstrap_servers, self.settings):
            return KafkaProducer(**{
                **_only_known(self._python_settings, KafkaProducer.DEFAULT_CONFIG),
                **config,
                "bootstrap_servers": self.bootstrap_servers,
            })

    def sender(self, *, max_block_s: float = 60.0, **config: Any) -> Sender:
        """A new :class:`Sender` on this cluster with the handle's client and settings (the caller closes it).

        ``config`` takes kafka-python producer settings (``acks``, ``linger_ms``, ``batch_size``...).
        """
        if self.client == "confluent":
            from kit._rdkafka import _PRODUCER_NAMES, RdSender, translate

            properties, untranslated = translate(config, _PRODUCER_NAMES)
            if not untranslated:
                return RdSender(self.bootstrap_servers, {**self._rd_properties, **properties}, max_block_s)
        return KafkaPythonSender(self.producer(max_block_ms=int(max_block_s * 1000), **config))

    def close(self) -> None:
        """Close every client this handle opened."""
        for client in (self._admin, self._offsets_consumer, self._reader):
            if client is not None:
                client.close()
        self._admin = self._offsets_consumer = self._reader = None
        self._rd_admin = None  # librdkafka's admin client has no close(): it ends with its last reference

    def __enter__(self) -> Kafka:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- topics ----------------------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """Names of the topics on the cluster (internal ones included)."""
        if self.librdkafka_only:
            return set(self._rd_metadata().topics)
        return set(self.admin.list_topics())

    def partitions(self, topic: str) -> list[int]:
        """Partition ids of ``topic``, sorted, asked from the broker (not from a client's metadata cache).

        Raises:
            UnknownTopic: when the topic does not exist.
        """
        if self.librdkafka_only:
            found = self._rd_metadata().topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                raise UnknownTopic(topic, self.bootstrap_servers)
            return sorted(found.partitions)
        try:
            described = self.admin.describe_topics([topic])
        except UnknownTopicOrPartitionError as exc:
            raise UnknownTopic(topic, self.bootstrap_servers) from exc
        if not described or described[0].get("error_code", 0) != 0 or not described[0]["partitions"]:
            raise UnknownTopic(topic, self.bootstrap_servers)
        return sorted(p["partition_index"] for p in described[0]["partitions"])

    def create_topic(self, topic: str, partitions: int, *, exist_ok: bool = True) -> bool:
        """Create ``topic`` with ``partitions`` partitions; return True if it was created now.

        An existing topic is fine when ``exist_ok`` and its partition count matches.

        Raises:
            TopicConfigurationMismatch: the topic exists with another partition count.
            ConfigError: ``partitions`` < 1, or the topic exists and ``exist_ok`` is False.
        """
        if partitions < 1:
            msg = f"a topic needs at least 1 partition, got {partitions}"
            raise ConfigError(msg)
        if self.librdkafka_only:
            created = self._rd_create_topic(topic, partitions)
        else:
            try:
                self.admin.create_topics([NewTopic(topic, partitions, 1)])
                created = True
            except TopicAlreadyExistsError:
                created = False
        if not created and not exist_ok:
            msg = f"topic {topic!r} already exists"
            raise ConfigError(msg)
        actual = self._wait_for_partitions(topic)
        if len(actual) != partitions:
            raise TopicConfigurationMismatch(topic, expected=partitions, actual=len(actual))
        return created

    def _rd_create_topic(self, topic: str, partitions: int) -> bool:
        from kit._rdadmin import NoController, RdAdminError

        registered = _TOPIC_ADMINS.get(self.bootstrap_servers)
        if registered is not None:  # librdkafka's mock cluster: its C API, as its protocol has no CreateTopics
            with contextlib.suppress(UnknownTopic):
                self.partitions(topic)
                return False
            registered.create_topic(topic, partitions)
            return True
        try:
            return bool(self._rdadmin().create_topic(topic, partitions))
        except NoController:
            msg = (
                f"the cluster at {self.bootstrap_servers} names no controller, so it cannot create topic {topic!r} "
                "(librdkafka's mock cluster has no CreateTopics). Fix: create it through the EmbeddedBroker that "
                "started the mock (create_topic), in the same process as this handle"
            )
            raise ConfigError(msg) from None
        except RdAdminError as exc:
            raise self._rd_failed(exc, f"creating topic {topic!r}") from exc

    def _wait_for_partitions(self, topic: str) -> list[int]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return self.partitions(topic)
            except UnknownTopic:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` if it exists."""
        if self.librdkafka_only:
            self._rd_delete_topic(topic)
            return
        with contextlib.suppress(UnknownTopicOrPartitionError):
            self.admin.delete_topics([topic])

    def _rd_delete_topic(self, topic: str) -> None:
        from kit._rdadmin import NoController, RdAdminError

        registered = _TOPIC_ADMINS.get(self.bootstrap_servers)
        if registered is not None:  # librdkafka's mock cluster: its C API, as its protocol has no DeleteTopics
            if topic in self.topics():
                registered.delete_topic(topic)
            return
        try:
            self._rdadmin().delete_topic(topic)
        except NoController:
            msg = (
                f"the cluster at {self.bootstrap_servers} names no controller, so it cannot delete topic {topic!r}. "
                "Fix: delete it through the EmbeddedBroker that started the mock (delete_topic)"
            )
            raise ConfigError(msg) from None
        except RdAdminError as exc:
            raise self._rd_failed(exc, f"deleting topic {topic!r}") from exc

    # -- offsets ---------------------------------------------------------------------------------------

    def topic_partitions(self, what: str | Iterable[TopicPartition]) -> list[TopicPartition]:
        """All partitions of a topic name, or the given partitions as a sorted list."""
        if isinstance(what, str):
            return [TopicPartition(what, p) for p in self.partitions(what)]
        return sorted(what)

    def beginning_offsets(self, what: str | Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The first offset still in each partition's log.

        ListOffsets(earliest) is exact on Apache Kafka. Tansu answers the base offset of the batch it stored
        first, which is not the log's first when producers wrote the partition at the same moment (it may
        store their batches out of offset order). So a partition listed above 0 is read from offset 0: below
        a real log start that is out of range and the listed offset stands; otherwise the first record read
        is the beginning.
        """
        tps = self.topic_partitions(what)
        listed = self._list_beginnings(tps)
        return {tp: self._first_offset(tp, listed[tp]) if listed[tp] > 0 else 0 for tp in tps}

    def _list_beginnings(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self.librdkafka_only:
            return self._rd_list(tps, "earliest")
        try:
            return _listed(self._offsets().beginning_offsets, tps)
        except KafkaTimeoutError as exc:
            raise KafkaTimeout(
                operation="listing beginning offsets", timeout_s=self.timeout_s, last_observed=[str(tp) for tp in tps]
            ) from exc

    def _first_offset(self, tp: TopicPartition, listed: int) -> int:
        """The offset of ``tp``'s first record below ``listed`` (its ListOffsets earliest), else ``listed``.

        Read with a consumer of its own (never the range reader's, which a read in progress may be using when
        it asks for the end offsets).
        """
        if self.client == "confluent":
            records = self._rd().read(
                tp.topic, tp.partition, 0, listed, idle_timeout_s=self.timeout_s, end_offset=lambda: listed,
                out_of_range=_Below,
                timed_out=lambda position, end: KafkaTimeout(
                    f"reading the first record of {tp.topic}-{tp.partition}", self.timeout_s, {"position": position}
                ),
            )
            try:
                return next((r.offset for r in records), listed)
            except _Below:
                return listed
            finally:
                records.close()
        with _positioned(self._offsets(), {tp: 0}) as consumer:
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                try:
                    records = consumer.poll(timeout_ms=100, max_records=1).get(tp)
                except OffsetOutOfRangeError:
                    return listed
                if records:
                    return min(int(records[0].offset), listed)
            raise KafkaTimeout(
                operation=f"reading the first record of {tp.topic}-{tp.partition}", timeout_s=self.timeout_s,
                last_observed={"listed beginning": listed},
            )

    def end_offsets(
        self, what: str | Iterable[TopicPartition], *, holding: Mapping[TopicPartition, int] | None = None
    ) -> dict[TopicPartition, int]:
        """The exact end (high watermark) of each partition: the offset the next record will get.

        ListOffsets(latest) alone under-reports on Tansu (it answers the last batch's base offset + 1), so
        every non-empty partition is also fetched once, at that listed offset − 1, and the high watermark
        of the Fetch response is the answer. On Tansu that offset is the last batch's base offset, on Apache
        Kafka the last record: either way the fetch returns at once with one batch, never waiting for data.

        ``holding``: an offset per partition known to hold a record, e.g. the last one a reader read. When every
        partition has one, kafka-python fetches there at once, without the two ListOffsets requests: one round
        trip instead of three, for a streaming source or a DStream that asks every batch. Where a record is no
        longer there (retention), every partition is looked up as above. This holds whichever client reads the
        records (the offsets always go through kafka-python but on a handle on librdkafka alone,
        :func:`librdkafka_only`, which asks ListOffsets as above). On Tansu it is also what keeps the look-up's
        cost flat: with a producer sending small batches, the two ListOffsets grew from 8 ms each to 66 and
        117 ms within a minute and the listed offsets fell 3,789 records behind the ends, so the fetch there took
        1.2 s (benchmarks/results/changes.md §33).

        Raises:
            KafkaTimeout: when a partition's leader does not answer within the handle's ``timeout_s``.
        """
        tps = self.topic_partitions(what)
        if self.librdkafka_only:
            listed = self._rd_list(tps, "latest")
        else:
            consumer = self._offsets()
            if holding and all(holding.get(tp, -1) >= 0 for tp in tps):
                with contextlib.suppress(OffsetOutOfRangeError):
                    return self._high_watermarks(consumer, {tp: holding[tp] for tp in tps})
            try:
                listed = _listed(consumer.end_offsets, tps)
            except KafkaTimeoutError as exc:
                raise KafkaTimeout(
                    operation="listing offsets", timeout_s=self.timeout_s, last_observed=[str(tp) for tp in tps]
                ) from exc
        listed_beginnings = self._list_beginnings(tps)
        # Listed at or below its beginning, a partition looks empty: on Apache Kafka it is (retention took every
        # record), on Tansu it may not be (see beginning_offsets), so its first record is looked for first.
        beginnings = {tp: self._first_offset(tp, listed_beginnings[tp]) for tp in tps
                      if 0 < listed[tp] <= listed_beginnings[tp]}
        ends = {tp: listed[tp] for tp in tps if listed[tp] <= beginnings.get(tp, 0)}  # empty: nothing to fetch
        to_fetch = [tp for tp in tps if tp not in ends]
        if to_fetch and self.client == "confluent":
            try:
                found = self._rd().high_watermarks({(tp.topic, tp.partition): listed[tp] - 1 for tp in to_fetch})
            except TimeoutError as exc:
                raise KafkaTimeout(
                    operation="reading high watermarks",
                    timeout_s=self.timeout_s,
                    last_observed={"no answer for": exc.args[0]},
                ) from exc
            ends.update({TopicPartition(t, p): high for (t, p), high in found.items()})
        elif to_fetch:
            ends.update(self._high_watermarks(consumer, {tp: listed[tp] - 1 for tp in to_fetch}))
        return {tp: ends[tp] for tp in tps}

    def _high_watermarks(
        self, consumer: KafkaConsumer, fetch_at: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """kafka-python: the high watermark of a Fetch response for each partition, fetched at its offset.

        Raises:
            OffsetOutOfRangeError: an offset is not in its partition's log.
            KafkaTimeout: no answer for a partition within the handle's ``timeout_s``.
        """
        with _positioned(consumer, fetch_at):
            found: dict[TopicPartition, int] = {}
            deadline = time.monotonic() + self.timeout_s
            while len(found) < len(fetch_at):
                if time.monotonic() > deadline:
                    raise KafkaTimeout(
                        operation="reading high watermarks",
                        timeout_s=self.timeout_s,
                        last_observed={"no answer for": [str(tp) for tp in fetch_at if tp not in found]},
                    )
                # Drain everything fetched so that every partition's response gets parsed.
                consumer.poll(timeout_ms=100, max_records=1_000_000)
                for tp in fetch_at:
                    highwater = consumer.highwater(tp)
                    if highwater is not None:
                        found[tp] = highwater
            return found

    def offsets_for_time(
        self, what: str | Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is >= ``timestamp_ms``, per partition (None: no such record).

        That is Kafka's ListOffsets-by-timestamp definition. The broker's answer is used when the records
        confirm it (the record there is at or after the time, the one before it is not); otherwise, as on
        Tansu, which ignores the timestamp, the partition is scanned, which is exact but reads the log.
        """
        tps = self.topic_partitions(what)
        if not tps:
            return {}
        if self.librdkafka_only:
            listed = self._rd_list(tps, "timestamp", timestamp_ms)
            candidates = {tp: offset if offset >= 0 else None for tp, offset in listed.items()}
        else:
            try:
                answers = self._offsets().offsets_for_times({tp: timestamp_ms for tp in tps})
            except KafkaTimeoutError as exc:
                raise KafkaTimeout(
                    operation="looking up offsets by timestamp", timeout_s=self.timeout_s, last_observed=timestamp_ms
                ) from exc
            candidates = {tp: answer.offset if answer is not None else None for tp, answer in answers.items()}
        beginnings, ends = self.beginning_offsets(tps), self.end_offsets(tps)
        found: dict[TopicPartition, int | None] = {}
        for tp in tps:
            candidate = candidates.get(tp)
            if candidate is not None and self._first_at_or_after(tp, candidate, timestamp_ms, beginnings[tp], ends[tp]):
                found[tp] = candidate
                continue
            # Inline, so that the read is closed as soon as the first match is found.
            found[tp] = next(
                (
                    r.offset
                    for r in self.read_range(tp.topic, tp.partition, beginnings[tp], ends[tp])
                    if r.timestamp >= timestamp_ms
                ),
                None,
            )
        return found

    def _first_at_or_after(self, tp: TopicPartition, offset: int, timestamp_ms: int, beginning: int, end: int) -> bool:
        if not beginning <= offset < end:
            return False
        start = max(beginning, offset - 1)
        records = list(self.read_range(tp.topic, tp.partition, start, offset + 1))
        at = next((r for r in records if r.offset == offset), None)
        before = next((r for r in records if r.offset == offset - 1), None)
        return at is not None and at.timestamp >= timestamp_ms and (before is None or before.timestamp < timestamp_ms)

    def _offsets(self) -> KafkaConsumer:
        if self._offsets_consumer is None:
            # Tansu answers a Fetch with max wait 0 with no partitions at all, so wait a little. A high-watermark
            # fetch needs no records: fetch_max_bytes=1 makes the broker return one batch of the first partition
            # and only the high watermarks of the others. Tansu ignores max_partition_fetch_bytes, so without it a
            # fetch behind the end returned up to 50 MB, decoded record by record, and the fetches kafka-python
            # sends ahead did the same (benchmarks/results/changes.md §19).
            self._offsets_consumer = self._consumer(
                fetch_max_wait_ms=100, max_partition_fetch_bytes=1, fetch_max_bytes=1
            )
        return self._offsets_consumer

    # -- consumer groups -------------------------------------------------------------------------------

    def commit_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str]:
        """Commit ``offsets`` (the next offset to read, per partition) for consumer group ``group_id``.

        Uses the admin API, so nothing joins the group: this only records positions, e.g. for lag tools.
        Returns the partitions the broker refused, with the error's name (empty: all committed).
        """
        from kafka.errors import NoError
        from kafka.structs import OffsetAndMetadata

        if not offsets:
            return {}
        if self.librdkafka_only:
            refused = self._rdadmin().commit_group_offsets(
                group_id, {(tp.topic, tp.partition): o for tp, o in offsets.items()})
            return {TopicPartition(t, p): error for (t, p), error in refused.items()}
        request = {tp: OffsetAndMetadata(int(o), "", -1) for tp, o in offsets.items()}
        result = self.admin.alter_group_offsets(group_id, request)
        refused = {tp: error.__name__ for tp, error in result.items() if error is not NoError}
        refused.update({tp: "no answer for this partition" for tp in offsets if tp not in result})
        return refused

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every offset committed by consumer group ``group_id`` (partitions with none are absent).

        librdkafka's mock cluster answers this request (an OffsetFetch naming no partitions) with no partitions.
        """
        if self.librdkafka_only:
            from kit._rdadmin import RdAdminError

            try:
                committed = self._rdadmin().group_offsets(group_id)
            except RdAdminError as exc:
                raise self._rd_failed(exc, f"fetching the offsets of group {group_id!r}") from exc
            return {TopicPartition(t, p): o for (t, p), o in committed.items()}
        listed = self.admin.list_group_offsets({group_id: None}).get(group_id, {})
        return {TopicPartition(tp.topic, tp.partition): c.offset for tp, c in listed.items() if c.offset != -1}

    # -- reads -----------------------------------------------------------------------------------------

    def read_range(
        self,
        topic: str,
        partition: int,
        from_offset: int,
        until_offset: int,
        *,
        idle_timeout_s: float = 30.0,
    ) -> Iterator[ConsumerRecord]:
        """Yield exactly the records of ``topic``-``partition`` with ``from_offset <= offset < until_offset``.

        Records come in offset order. Offsets missing from the log inside the range (compacted away, or
        transaction markers) are skipped, as Kafka's consumer skips them.

        Raises:
            ConfigError: ``from_offset`` > ``until_offset`` or a negative offset (raised at once).
            OffsetOutOfRange: part of the range is no longer in the log, or not yet (``until_offset``
                beyond the high watermark).
            KafkaTimeout: no record arrived for ``idle_timeout_s`` (default 30 s) before the range ended.
        """
        if from_offset < 0 or until_offset < from_offset:
            msg = (
                f"invalid offset range [{from_offset}, {until_offset}) for {topic}-{partition}: "
                "offsets must be >= 0 and from_offset <= until_offset"
            )
            raise ConfigError(msg)
        return self._read_range(TopicPartition(topic, partition), from_offset, until_offset, idle_timeout_s)

    def _read_range(
        self, tp: TopicPartition, from_offset: int, until_offset: int, idle_timeout_s: float
    ) -> Iterator[ConsumerRecord]:
        if from_offset == until_offset:
            return
        if self.client == "confluent":
            yield from self._rd().read(
                tp.topic, tp.partition, from_offset, until_offset,
                idle_timeout_s=idle_timeout_s,
                end_offset=lambda: self.end_offsets([tp])[tp],
                out_of_range=lambda: self._out_of_range(tp, from_offset, until_offset),
                timed_out=lambda position, end: KafkaTimeout(
                    f"reading [{from_offset}, {until_offset}) of {tp.topic}-{tp.partition}",
                    idle_timeout_s,
                    {"position": position, "end_offset": end},
                ),
            )
            return
        consumer = self._reader_consumer()
        consumer.unsubscribe()
        consumer.assign([tp])
        consumer.seek(tp, from_offset)
        position = from_offset
        last_progress = time.monotonic()
        while position < until_offset:
            try:
                batch = consumer.poll(timeout_ms=200, max_records=10_000).get(tp, ())
            except OffsetOutOfRangeError as exc:
                raise self._out_of_range(tp, from_offset, until_offset) from exc
            for record in batch:
                if record.offset >= until_offset:
                    return
                yield record
            position = consumer.position(tp)
            if batch:
                last_progress = time.monotonic()
                continue
            # Nothing came back: either the range runs past the end (a broker may answer a fetch past the
            # end with nothing rather than an error) or the data is slow to come.
            end = self.end_offsets([tp])[tp]
            if end < until_offset:
                raise self._out_of_range(tp, from_offset, until_offset)
            if time.monotonic() - last_progress > idle_timeout_s:
                raise KafkaTimeout(
                    operation=f"reading [{from_offset}, {until_offset}) of {tp.topic}-{tp.partition}",
                    timeout_s=idle_timeout_s,
                    last_observed={"position": position, "end_offset": end},
                )

    def _out_of_range(self, tp: TopicPartition, from_offset: int, until_offset: int) -> OffsetOutOfRange:
        available = (self.beginning_offsets([tp])[tp], self.end_offsets([tp])[tp])
        return OffsetOutOfRange(tp.topic, tp.partition, requested=(from_offset, until_offset), available=available)

    def _rd(self) -> Any:
        # Holds settings only: each read and look-up opens its own librdkafka consumer (kit._rdkafka).
        if self._rd_reader is None:
            from kit._rdkafka import RdReader

            self._rd_reader = RdReader(self.bootstrap_servers, self._rd_properties, self.timeout_s)
        return self._rd_reader

    def _reader_consumer(self) -> KafkaConsumer:
        if self._reader is None:
            self._reader = self._consumer(
                fetch_max_wait_ms=100,
                max_partition_fetch_bytes=8 * 1024 * 1024,
                fetch_max_bytes=64 * 1024 * 1024,
                receive_buffer_bytes=4 * 1024 * 1024,
            )
        return self._reader
