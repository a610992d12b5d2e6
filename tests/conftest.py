"""Shared fixtures: one embedded broker and one Spark JVM per test session, a topic per test.

The SparkSession (``spark``) and the Kafka client settings come from the kit's own pytest plugin
(:mod:`compare.pytest_plugin`), so every test here exercises it; ``kafka_broker`` is the plugin's too, with one
addition: ``DMK_TEST_BROKER=tansu|mock`` chooses the embedded broker kind (default Tansu; ``mock`` is librdkafka's
mock cluster, ``kit.broker.EmbeddedBroker(kind="mock")``). Only librdkafka clients can connect to the mock, so on it
every test that uses the session broker is skipped, marked ``kafka_python``, unless it is marked
``librdkafka_only`` (it uses librdkafka clients alone): ``DMK_TEST_BROKER=mock pytest -m librdkafka_only`` runs
those on the mock. ``--kafka-bootstrap HOST:PORT`` (or ``DMK_TEST_BOOTSTRAP_SERVERS``) runs the Kafka tests
against an existing broker instead of the embedded one.
``connect_server`` / ``connect_spark``: one local Spark Connect server per session, started only by the tests
that ask for it (tests/test_connect.py).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _servers import postgres_dsn_factory, postgres_server, zookeeper_hosts  # noqa: F401 - session fixtures
from kit.broker import BROKER_KINDS, KafkaEndpoint
from kit.kafka import CLIENT_ENV, CLIENTS, Kafka

CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
"""Set by PySpark in a process that created a Spark Connect session; see ``_connect_session``."""


TEST_BROKER_ENV = "DMK_TEST_BROKER"
"""Which embedded broker the session's Kafka tests use: ``tansu`` (default) or ``mock`` (librdkafka's mock cluster)."""

KAFKA_PYTHON_REASON = (
    "needs kafka-python (a kafka-python client, or kit handles on DMK_KAFKA_CLIENT=auto, whose topic admin, offset "
    "look-ups and group offsets go through it), which cannot connect to librdkafka's mock cluster "
    "(DMK_TEST_BROKER=mock): kafka-python cannot decode the mock's ApiVersions answer"
)


def session_broker_kind() -> str:
    """``$DMK_TEST_BROKER``, checked: one of :data:`kit.broker.BROKER_KINDS` (default ``tansu``)."""
    kind = os.environ.get(TEST_BROKER_ENV, "").strip().lower() or "tansu"
    if kind not in BROKER_KINDS:
        msg = f"{TEST_BROKER_ENV}={kind!r} is not a broker kind. Fix: set it to one of {', '.join(BROKER_KINDS)}"
        raise pytest.UsageError(msg)
    return kind


_CLIENT_BEFORE: list[str | None] = []


def pytest_configure(config: pytest.Config) -> None:
    """On the mock, ``DMK_KAFKA_CLIENT=confluent`` for the whole session, before any Spark JVM starts (its Python
    workers inherit it): every kit handle is then on librdkafka alone (:func:`kit.kafka.librdkafka_only`), and the
    mock's topics are created through its C API (:func:`kit.kafka.register_topic_admin`)."""
    if session_broker_kind() == "mock":
        _CLIENT_BEFORE.append(os.environ.get(CLIENT_ENV))
        os.environ[CLIENT_ENV] = "confluent"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give ``DMK_KAFKA_CLIENT`` back its value from before the session."""
    if _CLIENT_BEFORE:
        before = _CLIENT_BEFORE.pop()
        if before is None:
            os.environ.pop(CLIENT_ENV, None)
        else:
            os.environ[CLIENT_ENV] = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the mock, skip every test that uses the session broker and is not marked ``librdkafka_only``, and the
    kafka-python run of those that are (``kafka_client`` parameter)."""
    if session_broker_kind() != "mock":
        return
    skip = pytest.mark.skip(reason=KAFKA_PYTHON_REASON)
    for item in items:
        if "kafka_broker" not in getattr(item, "fixturenames", ()):
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if not item.get_closest_marker("librdkafka_only") or params.get("kafka_client") == "kafka-python":
            item.add_marker(pytest.mark.kafka_python)
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kafka_endpoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, kafka_settings: dict[str, str]
) -> Iterator[KafkaEndpoint]:
    """The session's Kafka: ``--kafka-bootstrap``, or an embedded broker of the ``DMK_TEST_BROKER`` kind.

    ``.broker`` is the embedded :class:`kit.broker.EmbeddedBroker` (None for a given Kafka): tests create topics
    on the mock through it (``create_topic``), as its protocol has no CreateTopics.
    """
    from kit.broker import kafka_or_embedded
    from kit.kafka import java_client_settings, using_process_settings

    kind = session_broker_kind()
    external = request.config.getoption("--kafka-bootstrap")
    if external and kind != "tansu":
        msg = f"{TEST_BROKER_ENV}={kind} starts its own broker. Fix: drop --kafka-bootstrap, or {TEST_BROKER_ENV}"
        raise pytest.UsageError(msg)
    log = None if external else tmp_path_factory.mktemp("broker") / f"{kind}.log"
    with using_process_settings(java_client_settings(kafka_settings, where="--kafka-config/--kafka-option")), \
            kafka_or_embedded(external, kind=kind, log_path=log) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def kafka_broker(kafka_endpoint: KafkaEndpoint) -> str:
    """Bootstrap servers of the session's Kafka (overrides the plugin's fixture to add ``DMK_TEST_BROKER``)."""
    return kafka_endpoint.bootstrap_servers


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: str) -> str:
    """Bootstrap servers of the session's broker (the plugin's ``kafka_broker``)."""
    return kafka_broker


@pytest.fixture(params=CLIENTS)
def kafka_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each Kafka client of the kit's hot paths in turn, chosen through ``DMK_KAFKA_CLIENT``.

    Use it (``pytestmark = pytest.mark.usefixtures("kafka_client")``) in the tests of reads and sends, so
    they run on confluent-kafka and on kafka-python alike.
    """
    monkeypatch.setenv(CLIENT_ENV, request.param)
    return request.param


@pytest.fixture
def kafka(bootstrap_servers: str) -> Iterator[Kafka]:
    """A Kafka handle on the session's broker, closed after the test."""
    with Kafka(bootstrap_servers, timeout_s=20) as handle:
        yield handle


@pytest.fixture
def topic_factory(request: pytest.FixtureRequest, kafka: Kafka) -> Iterator[Callable[..., str]]:
    """Create uniquely named topics for this test (``topic_factory(partitions=4)``); deleted afterwards."""
    created: list[str] = []
    base = re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)[:80]

    def make(partitions: int = 1, *, create: bool = True) -> str:
        name = f"pytest_{base}_{uuid.uuid4().hex[:8]}"
        if create:
            kafka.create_topic(name, partitions)
        created.append(name)
        return name

    yield make
    for name in created:
        kafka.delete_topic(name)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect server on loopback (:class:`kit.connect.LocalConnectServer`), started by the first test
    that asks for it and stopped at the end of the session; ``.url`` is its ``sc://`` URL."""
    from kit.connect import LocalConnectServer

    server = LocalConnectServer(log_path=tmp_path_factory.mktemp("connect") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _connect_session(connect_server: Any, spark: Any) -> Iterator[Any]:
    # The classic session (``spark``) starts first: launching its JVM after the Connect client's gRPC threads
    # are running failed in a mixed run (JAVA_GATEWAY_EXITED, after gRPC's "skipping fork() handlers").
    from kit.connect import connect_session

    spark = connect_session(connect_server.url)
    # PySpark switches the whole process to Connect when it creates a Connect session (pyspark.sql.functions and
    # SparkSession.builder then go to the server): off again, so that the classic tests after this one run on
    # the classic session; connect_spark turns it on for each Connect test.
    os.environ.pop(CONNECT_MODE_ENV, None)
    yield spark
    os.environ[CONNECT_MODE_ENV] = "1"
    try:
        spark.stop()
    finally:
        os.environ.pop(CONNECT_MODE_ENV, None)


@pytest.fixture
def connect_spark(_connect_session: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Spark Connect session on ``connect_server`` (one per test session), with this process in Connect mode
    for the test."""
    monkeypatch.setenv(CONNECT_MODE_ENV, "1")
    return _connect_session
