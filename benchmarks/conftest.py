"""Benchmarks share one embedded broker (or ``DMK_BENCH_BOOTSTRAP_SERVERS``) per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kit.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def bootstrap_servers() -> Iterator[str]:
    external = os.environ.get("DMK_BENCH_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers
