"""pytest plugin: equivalence tests for your own DStream → Structured Streaming migrations, in your CI.

Its entry point is ``pytest11``, so pytest loads it automatically once the kit is installed.

Fixtures:
    ``kafka_broker``        session: bootstrap servers of an embedded Tansu broker, or of ``--kafka-bootstrap``
                            (env ``DMK_TEST_BOOTSTRAP_SERVERS``). Every Kafka client of the fixtures connects
                            with ``kafka_settings``.
    ``kafka_settings``      session: the Kafka client settings of ``--kafka-config FILE`` (a ``.properties``
                            file in the Java client's names, env ``DMK_TEST_KAFKA_CONFIG``) and each
                            ``--kafka-option key=value`` (repeatable, later wins; env ``DMK_TEST_KAFKA_OPTIONS``,
                            options separated by newlines), as a dict in Java names: TLS/SASL for a secured
                            cluster (docs/security.md). Give them to your own jobs' ``kafkaParams`` /
                            ``kafka.*`` options; ``assert_equivalent`` passes them to both engines' sources.
    ``spark``               session: one SparkSession (local[2] unless ``DMK_SPARK_MASTER`` says otherwise).
    ``streaming_context``   a DStream StreamingContext (1 s batches) on that session's SparkContext, stopped
                            after the test (the SparkContext stays).
    ``replayed_topic``      ``replayed_topic(dataset, partitions=4, rate_rps=None)``: a fresh topic holding the
                            dataset; returns the :class:`kit.replay.ReplayResult` (``.topic``, ``.end_offsets``,
                            ``.log``). Deleted after the test.
    ``assert_equivalent``   ``assert_equivalent(legacy_fn, modern_fn, dataset, oracle=None, *, spec=None)``: runs
                            both jobs on a live replay of ``dataset`` and fails with a readable three-way diff
                            unless both equal the oracle (and each other); fails with ``NothingCompared``
                            when the oracle has no rows (equal empty results test nothing).
    ``assert_jobs_equivalent``  ``assert_jobs_equivalent(legacy_cmd, modern_cmd, input_file, key=..., mode="final",
                            **settings)``: your two job scripts, unmodified, on a capture (``dmk compare-jobs``);
                            fails with the first differing keys unless their outputs agree. Returns the
                            :class:`compare.jobs.JobsResult`.

Example (``tests/test_my_migration.py``)::

    from myjobs import counts

    def test_counts_migrated(assert_equivalent):
        assert_equivalent(counts.legacy_counts, counts.modern_counts, "messy", spec="running_counts")
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kit import layout
from kit.errors import ConfigError

BOOTSTRAP_ENV = "DMK_TEST_BOOTSTRAP_SERVERS"
KAFKA_CONFIG_ENV = "DMK_TEST_KAFKA_CONFIG"
KAFKA_OPTIONS_ENV = "DMK_TEST_KAFKA_OPTIONS"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--kafka-bootstrap``, ``--kafka-config`` and ``--kafka-option`` (see the module docstring)."""
    parser.addoption(
        "--kafka-bootstrap",
        default=os.environ.get(BOOTSTRAP_ENV),
        help=f"run dmk's Kafka fixtures against this broker instead of an embedded one (env {BOOTSTRAP_ENV})",
    )
    parser.addoption(
        "--kafka-config", default=os.environ.get(KAFKA_CONFIG_ENV), metavar="FILE",
        help=f"Kafka client settings (Java names, .properties; TLS/SASL) for dmk's fixtures (env {KAFKA_CONFIG_ENV})",
    )
    parser.addoption(
        "--kafka-option", action="append", metavar="KEY=VALUE",
        default=[line for line in os.environ.get(KAFKA_OPTIONS_ENV, "").splitlines() if line.strip()],
        help=f"one Kafka client setting (Java name) for dmk's fixtures, repeatable, over --kafka-config (env "
             f"{KAFKA_OPTIONS_ENV}: one per line)",
    )


@pytest.fixture(scope="session")
def kafka_settings(request: pytest.FixtureRequest) -> dict[str, str]:
    """The session's Kafka client settings in Java names (``--kafka-config``, then each ``--kafka-option``)."""
    from kit.security import parse_kafka_option, read_properties

    path = request.config.getoption("--kafka-config")
    java = read_properties(path) if path else {}
    for option in request.config.getoption("--kafka-option") or ():
        key, value = parse_kafka_option(option)
        java[key] = value
    return java


@pytest.fixture(scope="session")
def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, kafka_settings: dict[str, str]
) -> Iterator[str]:
    """Bootstrap servers of the session's Kafka: an embedded Tansu broker unless ``--kafka-bootstrap`` is given.

    Every Kafka client the fixtures create in this process connects with ``kafka_settings``.
    """
    from kit.broker import kafka_or_embedded
    from kit.kafka import java_client_settings, using_process_settings

    external = request.config.getoption("--kafka-bootstrap")
    log = None if external else tmp_path_factory.mktemp("broker") / "tansu.log"
    with using_process_settings(java_client_settings(kafka_settings, where="--kafka-config/--kafka-option")), \
            kafka_or_embedded(external, log_path=log) as kafka:
        yield kafka.bootstrap_servers


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session's SparkSession (one JVM for the whole test session, the JIT's first tier only).

    Tests are many short runs of different code: HotSpot's second tier would keep recompiling for them on the
    cores the tests use (``kit.spark.SHORT_RUN_CONF``; the default tier's ``tests/test_workloads.py``: 242-263 s
    with both tiers, 182 s with the first only, on 2 cores beside another test run).
    """
    from kit.spark import SHORT_RUN_CONF, spark_session

    session = spark_session("dmk-tests", conf=SHORT_RUN_CONF)
    yield session
    session.stop()


@pytest.fixture
def streaming_context(spark: Any) -> Iterator[Any]:
    """A StreamingContext with 1 s batches on the session's SparkContext; stopped after the test."""
    from kit.spark import streaming_context as make

    ssc = make(1.0)
    yield ssc
    ssc.stop(stopSparkContext=False, stopGraceFully=False)


def _dataset(dataset: Any) -> tuple[Any, pd.DataFrame]:
    """``(DatasetSpec, frame)`` of a profile name, a DatasetSpec or a dataset file path."""
    from compare.inputs import dataset_spec
    from kit.dataset import DatasetSpec, check_labels, generate, read_dataset, read_manifest

    if isinstance(dataset, DatasetSpec):
        return dataset, generate(dataset)
    if isinstance(dataset, str) and dataset in ("clean", "messy"):
        spec = dataset_spec(dataset)
        return spec, generate(spec)
    if isinstance(dataset, (str, os.PathLike)):
        frame = read_dataset(dataset)
        check_labels(frame["kind"], frame["value"], str(dataset))
        return DatasetSpec.from_dict(read_manifest(dataset)["spec"]), frame
    msg = (
        "dataset must be 'clean', 'messy', a kit.dataset.DatasetSpec or a dataset file path, "
        f"not {type(dataset).__name__}"
    )
    raise ConfigError(msg)


@pytest.fixture
def replayed_topic(request: pytest.FixtureRequest, kafka_broker: str) -> Iterator[Callable[..., Any]]:
    """``replayed_topic(dataset, partitions=4, rate_rps=None)`` → ReplayResult of a fresh topic (deleted after)."""
    from kit.kafka import Kafka
    from kit.replay import ReplaySettings, replay

    created: list[str] = []
    base = re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)[:60]

    def make(dataset: Any, partitions: int = 4, rate_rps: float | None = None) -> Any:
        _, frame = _dataset(dataset)
        topic = f"dmk_{base}_{uuid.uuid4().hex[:8]}"
        created.append(topic)
        return replay(frame, kafka_broker, ReplaySettings(topic=topic, partitions=partitions, rate_rps=rate_rps))

    yield make
    with Kafka(kafka_broker) as kafka:
        for topic in created:
            kafka.delete_topic(topic)


def _spec_for(spec: Any, legacy_fn: Callable[..., Any]) -> Any:
    from kit import workloads

    if isinstance(spec, workloads.WorkloadSpec):
        return spec
    if isinstance(spec, str):
        return workloads.get(spec)
    module = getattr(legacy_fn, "__module__", "")
    if module.startswith("legacy.workloads."):
        return workloads.get(module.rsplit(".", 1)[1])
    msg = (
        "assert_equivalent needs the workload's contract (key and value columns, output mode): pass "
        "spec='running_counts' (a built-in workload name) or spec=your kit.workloads.WorkloadSpec"
    )
    raise ConfigError(msg)


@pytest.fixture
def assert_equivalent(
    kafka_broker: str, spark: Any, tmp_path: Path, kafka_settings: dict[str, str]
) -> Callable[..., Any]:
    """``assert_equivalent(legacy_fn, modern_fn, dataset, oracle=None, *, spec=None)``.

    Runs ``legacy_fn(ssc, source)`` and ``modern_fn(spark, source)`` (the job contract of docs/compare.md),
    one after the other, each on its own live replay of ``dataset`` ('clean', 'messy', a DatasetSpec or a
    dataset file); takes each engine's final result and fails, with a three-way table of the differing keys
    and the counts, unless both equal the oracle. ``oracle(frame, dataset_spec)`` returns an
    :class:`~kit.workloads.OracleResult` or a frame of rows; default: the spec's oracle. ``spec`` is a
    built-in workload name or a WorkloadSpec; default: the workload whose ``legacy.workloads`` module defines
    ``legacy_fn``. Returns the :class:`compare.diff.ThreeWayDiff`.
    """
    from compare.diff import assert_three_way, three_way
    from compare.harness import run_engine
    from kit import workloads

    def check(
        legacy_fn: Callable[..., Any], modern_fn: Callable[..., Any], dataset: Any,
        oracle: Callable[..., Any] | None = None, *, spec: Any = None,
    ) -> Any:
        contract = _spec_for(spec, legacy_fn)
        dataset_spec, frame = _dataset(dataset)
        finals = {}
        for engine, fn in (("legacy", legacy_fn), ("modern", modern_fn)):
            run = run_engine(
                engine, ((contract, fn),), dataset_spec, frame,
                bootstrap_servers=kafka_broker, spark=spark, workdir=tmp_path / engine, kafka_security=kafka_settings,
            )
            finals[engine] = workloads.final_result(contract, run.rows(contract.name))
        expected = (oracle or contract.oracle)(frame, dataset_spec)
        rows = (
            expected.rows if isinstance(expected, workloads.OracleResult)
            else workloads.sorted_rows(contract, expected)
        )
        legacy, modern = finals.values()
        diff = three_way(legacy, modern, rows, contract.key_columns, contract.value_columns)
        assert_three_way(diff, contract.name)
        return diff

    return check


@pytest.fixture
def assert_jobs_equivalent(kafka_broker: str, tmp_path: Path) -> Callable[..., Any]:
    """``assert_jobs_equivalent(legacy_cmd, modern_cmd, input_file, key=..., mode="final", **settings)``.

    Runs both job commands as ``dmk compare-jobs`` does (each its own process, the kit's stand-ins
    installed) on one replay each of ``input_file`` (a ``dmk capture`` file), on the session's Kafka.
    ``key`` is a column name or a tuple of them; ``settings`` are further :class:`compare.jobs.JobsSettings`
    fields (``output``, ``oracle``, ``rate_rps``...). Fails with the run's report unless the outputs agree.
    """
    from compare.diff import OutputsDiffer
    from compare.jobs import JobsSettings, compare_jobs

    def check(legacy_cmd: str, modern_cmd: str, input_file: str | os.PathLike[str], *, key: str | tuple[str, ...],
              mode: str = "final", **settings: Any) -> Any:
        keys = (key,) if isinstance(key, str) else tuple(key)
        result = compare_jobs(JobsSettings(
            input_file=str(input_file), key=keys, legacy=legacy_cmd, modern=modern_cmd, mode=mode,
            out_dir=tmp_path / f"jobs-{uuid.uuid4().hex[:6]}", bootstrap_servers=kafka_broker, **settings,
        ))
        if not result.equivalent:
            raise OutputsDiffer((result.out_dir / layout.REPORT_MD).read_text(encoding="utf-8"), result.diff)
        return result

    return check
