"""Shared fixtures: one embedded broker and one Spark JVM per test session, a topic per test.

``--kafka-bootstrap HOST:PORT`` (or ``DMK_TEST_BOOTSTRAP_SERVERS``) runs the Kafka tests against an existing
broker instead of the embedded one.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from _servers import postgres_dsn_factory, postgres_server, zookeeper_hosts  # noqa: F401 - session fixtures
from kit.broker import EmbeddedBroker
from kit.kafka import Kafka


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kafka-bootstrap",
        default=os.environ.get("DMK_TEST_BOOTSTRAP_SERVERS"),
        help="run Kafka tests against this broker instead of an embedded one (env DMK_TEST_BOOTSTRAP_SERVERS)",
    )


@pytest.fixture(scope="session")
def bootstrap_servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of the session's broker."""
    external = request.config.getoption("--kafka-bootstrap")
    if external:
        yield external
        return
    log = tmp_path_factory.mktemp("broker") / "tansu.log"
    with EmbeddedBroker(log_path=log) as broker:
        yield broker.bootstrap_servers


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
def spark():
    """The session's SparkSession (local[2] unless DMK_SPARK_MASTER says otherwise)."""
    from kit.spark import spark_session

    session = spark_session("dmk-tests")
    yield session
    session.stop()
