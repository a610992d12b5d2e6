"""``KafkaUtils.createStream`` in a ``dmk migrate`` draft: the brokers come from the job's ZooKeeper quorum.

Default tier: the draft's text, the broker registrations it reads (Kafka's JSON, pure Python), and the lookup
itself against the session's real ZooKeeper through the session's Spark JVM (Curator, from PySpark's jars).
Slow tier: our own createStream job (tests/print_jobs/legacy_receiver.py) proven equal to its draft by
``dmk migrate --verify``, compare-jobs running a ZooKeeper for ``{zookeeper}`` with the run's broker registered.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.zookeeper import ZooKeeperError, ZooKeeperServer, broker_registration, register_brokers, registered_brokers
from migrate import analyse
from migrate.draft import make_draft
from migrate.microbatch import MicroBatchKafka, _broker_address, _zookeeper_brokers

REPO = Path(__file__).resolve().parent.parent
RECEIVER_JOB = REPO / "tests" / "print_jobs" / "legacy_receiver.py"


def test_the_draft_of_a_createstream_job_carries_the_receiver_and_runs_as_written() -> None:
    result = make_draft(analyse(RECEIVER_JOB))
    assert result.runs and result.unresolved == ()
    assert "KafkaUtils = MicroBatchKafka" in result.text
    assert "def _zookeeper_brokers(jvm" in result.text  # the lookup is the draft's own code: it imports no kit
    assert "import kit" not in result.text and "from kit" not in result.text
    plan = analyse(RECEIVER_JOB)
    receiver = next(f for f in plan.findings if f.construct == "KafkaUtils.createStream")
    assert receiver.status == "automatic" and plan.counts()["unresolved"] == 0


@pytest.mark.parametrize(("registration", "address"), [
    (json.dumps(broker_registration("k1.example:9092")).encode(), "k1.example:9092"),  # what Kafka 2.x writes
    (b'{"jmx_port":-1,"timestamp":"1400000000000","host":"old","version":1,"port":9092}', "old:9092"),  # Kafka 0.8
    # A broker with no plaintext listener: no host/port, its endpoints only.
    (b'{"listener_security_protocol_map":{"SASL_SSL":"SASL_SSL"},"endpoints":["SASL_SSL://b2:9093"],'
     b'"jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}', "b2:9093"),
    (b'{"endpoints":[],"host":null,"port":-1,"version":4}', None),
    (b"{not json", None),
    (b"[1, 2]", None),
])
def test_a_broker_registration_gives_the_address_kafka_0_8_s_consumer_read(registration: bytes,
                                                                           address: str | None) -> None:
    assert _broker_address(registration) == address


def test_create_stream_takes_a_dict_of_topics_as_spark_2_4_did() -> None:
    with pytest.raises(TypeError, match="topics should be dict"):
        MicroBatchKafka.createStream(None, "zk:2181", "group", ["events"])


def test_a_receiver_on_its_own_quorum_and_topics_reads_the_replayed_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare-jobs --input-kind kafka, no {zookeeper} {topic}: the stand-in redirects createStream as a direct stream."""
    from legacy.standin import _receiver_redirected

    named = {"ssc": None, "zkQuorum": "localhost:2181", "groupId": "g", "topics": {"test": 3},
             "kafkaParams": {"bootstrap.servers": "own:9092", "client.id": "c"}}
    assert _receiver_redirected(named) == named  # not under compare-jobs' redirect: as written
    monkeypatch.setenv("DMK_KAFKA_BOOTSTRAP", "127.0.0.1:9999")
    monkeypatch.setenv("DMK_KAFKA_TOPIC", "dmk-jobs-1-legacy")
    assert _receiver_redirected(named) == {**named, "topics": {"dmk-jobs-1-legacy": 1},
                                           "kafkaParams": {"client.id": "c", "metadata.broker.list": "127.0.0.1:9999"}}
    assert _receiver_redirected({**named, "kafkaParams": None})["kafkaParams"] == {
        "metadata.broker.list": "127.0.0.1:9999"}
    wrong = {**named, "topics": ["test"]}  # createStream's own TypeError, not a redirect
    assert _receiver_redirected(wrong) == wrong


def test_the_zookeeper_placeholder_is_the_run_s_quorum_when_one_runs() -> None:
    from compare.jobs import ScriptEngine
    from kit.engine import DriverConfig

    engine = ScriptEngine("modern", "python draft.py {zookeeper} {topic}", output="printed")
    config = DriverConfig(engine="modern", bootstrap_servers="127.0.0.1:9092", topics={"input": "t"}, out_dir="run",
                          checkpoint_dir="run/cp")
    assert engine.placeholders(config)["zookeeper"] == "127.0.0.1:9092"  # no ZooKeeper runs: the Kafka's address
    engine.zookeeper = "127.0.0.1:2999"
    assert engine.placeholders(config)["zookeeper"] == "127.0.0.1:2999"


def test_a_side_s_named_stream_that_printed_nothing_is_not_replaced_by_its_other_stream(tmp_path: Path) -> None:
    """A createStream and a direct stream pprinted (lines 13, 14): if line 13's printed nothing, 14's is not it."""
    from compare.jobs import read_printed
    from kit.errors import ConfigError

    (tmp_path / "printed.jsonl").write_text(json.dumps(
        {"stream": "job.py:14", "kind": "row", "batch_ms": 1000, "values": [None, "a b"], "names": None}) + "\n")
    with pytest.raises(ConfigError, match=r"the legacy job printed 1 stream, job.py:14: name one with --output "
                                          r"printed:NAME .*; '13' names none of them"):
        read_printed(tmp_path, "legacy", "13,856")
    assert read_printed(tmp_path, "legacy", "14,857")["_2"].tolist() == ["a b"]
    assert read_printed(tmp_path, "legacy", "13")["_2"].tolist() == ["a b"]  # one NAME for both: chooses among several


def test_a_job_reading_a_topic_by_receiver_and_direct_stream_has_consumed_it_once_both_have() -> None:
    from compare.jobs import _consumed

    wanted = {("t", 0): 40}
    assert _consumed({("t", 0): 40}, wanted, counts_lines=True)  # a direct stream alone
    assert _consumed({("lines", 0): 40}, wanted, counts_lines=True)  # a receiver alone: records, not offsets
    assert not _consumed({("lines", 0): 0, ("t", 0): 40}, wanted, counts_lines=True)  # the receiver had nothing yet
    assert not _consumed({("lines", 0): 40, ("t", 0): 20}, wanted, counts_lines=True)
    assert _consumed({("lines", 0): 40, ("t", 0): 40}, wanted, counts_lines=True)
    assert not _consumed({("lines", 0): 39}, {("lines", 0): 40}, counts_lines=False)  # socket, files, queue lines


def test_two_sources_of_one_topic_have_consumed_it_once_the_slower_has() -> None:
    from compare.jobs import _reached_by_every_source

    per_source: dict = {}
    assert _reached_by_every_source(per_source, [["t", 0, 0, 0], ["t", 0, 0, 40]]) == {("t", 0): 0}
    assert _reached_by_every_source(per_source, [["t", 0, 0, 40], ["t", 0, 40, 40]]) == {("t", 0): 40}
    assert _reached_by_every_source({}, [["t", 0, 0, 25], ["t", 1, 0, 15], ["lines", 0, 0, 40]]) == {
        ("t", 0): 25, ("t", 1): 15, ("lines", 0): 40}
    # Two receivers (or sockets) share one running count: the later range is the count.
    assert _reached_by_every_source({}, [["lines", 0, 0, 10], ["lines", 0, 10, 30]]) == {("lines", 0): 30}


@pytest.fixture
def chroot(zookeeper_hosts: str) -> Iterator[str]:
    """A quorum of its own on the session's ZooKeeper (``HOST:PORT/dmk-<id>``), its nodes removed afterwards."""
    from kazoo.client import KazooClient

    path = f"/dmk-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper_hosts, timeout=10)
    client.start(timeout=10)
    client.ensure_path(path)
    try:
        yield zookeeper_hosts + path
    finally:
        client.delete(path, recursive=True)
        client.stop()
        client.close()


def test_brokers_registered_as_kafka_does_are_read_back(chroot: str) -> None:
    assert registered_brokers(chroot) == ""
    assert register_brokers(chroot, "127.0.0.1:9092, 127.0.0.2:9093") == [0, 1]
    assert registered_brokers(chroot) == "127.0.0.1:9092,127.0.0.2:9093"


def test_a_zookeeper_on_a_port_in_use_is_refused_before_it_starts(zookeeper_hosts: str) -> None:
    port = int(zookeeper_hosts.rpartition(":")[2])
    with pytest.raises(ZooKeeperError, match=f"port {port} is in use"):
        ZooKeeperServer(port).start()


@pytest.mark.spark
def test_the_draft_reads_the_brokers_its_quorum_registers(spark: Any, chroot: str) -> None:
    jvm = spark.sparkContext._jvm
    with pytest.raises(ValueError, match=(
            rf"KafkaUtils.createStream: no Kafka broker is registered in ZooKeeper at '{chroot}' \(/brokers/ids is "
            rf"empty\): start the brokers with zookeeper.connect={chroot}, .*\{{'metadata.broker.list': 'host:9092'\}}\)$")):
        _zookeeper_brokers(jvm, chroot, 5000)
    register_brokers(chroot, "127.0.0.1:9092,127.0.0.2:9093")
    assert _zookeeper_brokers(jvm, chroot, 5000) == "127.0.0.1:9092,127.0.0.2:9093"


@pytest.mark.spark
def test_a_quorum_that_does_not_answer_is_one_error_naming_the_fix(spark: Any) -> None:
    from kit.broker import free_port

    quorum = f"127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match=(
            rf"^KafkaUtils.createStream: ZooKeeper at '{quorum}' did not answer within 1 s, so the Kafka brokers "
            r"registered there could not be read: start ZooKeeper or correct the quorum")):
        _zookeeper_brokers(spark.sparkContext._jvm, quorum, 1000)


# -- slow: proven equal ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.timeout(1800)
def test_a_createstream_job_is_proven_equal_to_its_draft(tmp_path: Path, kafka_broker: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """compare-jobs runs a ZooKeeper for {zookeeper}: the draft reads the run's broker there, the original its Kafka."""
    from kit.capture import capture_of_values as write_capture
    from compare.verify import EQUAL, VerifySettings, verify

    monkeypatch.chdir(REPO)
    lines = [" ".join(["to", "be", "or", "not"][: 1 + i % 4]) for i in range(40)]
    capture = write_capture(tmp_path / "words.jsonl", lines)
    verdict = verify(VerifySettings(job=str(RECEIVER_JOB), input_file=str(capture), key=("_1",),
                                    out_dir=tmp_path / "run", args="{zookeeper} {topic}", batch_records=20,
                                    bootstrap_servers=kafka_broker, timeout_s=600),
                     write_draft=lambda path: make_draft(analyse(path)).text)
    assert verdict.status == EQUAL, verdict.detail
    metrics = json.loads((tmp_path / "run" / "compare" / "metrics.json").read_text())
    # Two batches of 20 lines, 5 of each length: per batch, "to" 20, "be" 15, "or" 10, "not" 5.
    assert metrics["batches"]["compared"] == 2
    assert metrics["jobs"]["legacy"]["rows_compared"] == metrics["jobs"]["modern"]["rows_compared"] == 8
    command = next(line for line in (tmp_path / "run" / "compare" / "modern" / "job.log").read_text().splitlines()
                   if line.startswith("--- ")).split()
    quorum = command[3]  # "--- python draft.py QUORUM TOPIC"
    assert quorum != kafka_broker and quorum.startswith("127.0.0.1:")  # the draft was given a ZooKeeper
    with pytest.raises(ConnectionRefusedError):  # which was stopped after the run
        socket.create_connection(("127.0.0.1", int(quorum.rpartition(":")[2])), timeout=5).close()
