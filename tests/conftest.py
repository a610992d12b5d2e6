"""Shared fixtures: one embedded broker and one Spark JVM per test session, a topic per test.

The broker (``kafka_broker``) and the SparkSession (``spark``) come from the kit's own pytest plugin
(:mod:`compare.pytest_plugin`), so every test here exercises it. ``--kafka-bootstrap HOST:PORT`` (or
``DMK_TEST_BOOTSTRAP_SERVERS``) runs the Kafka tests against an existing broker instead of the embedded one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from _servers import postgres_dsn_factory, postgres_server, zookeeper_hosts  # noqa: F401 - session fixtures
from kit.kafka import CLIENT_ENV, CLIENTS, Kafka


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
