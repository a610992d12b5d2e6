"""``dmk capture`` and the replay of a capture: every field of every record survives capture → replay → capture."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import main
from kit.capture import Position, arrival_order, capture, read_capture, replay_capture
from kit.errors import ConfigError, DatasetError
from kit.kafka import Kafka
from kit.replay import _due_seconds

ON_BOTH_CLIENTS = pytest.mark.usefixtures("kafka_client")
ON_BOTH_BROKERS = pytest.mark.librdkafka_only  # librdkafka alone on DMK_KAFKA_CLIENT=confluent: also on the mock

BASE_MS = 1_700_000_000_000
RECORDS = [  # partition, timestamp, key, value, headers: null keys and values, non-UTF-8 bytes, repeated headers
    (0, BASE_MS + 0, b"order-1", b'{"id": 1, "total": 9.5}', [("trace", b"a1"), ("trace", b"a2")]),
    (1, BASE_MS + 40, None, b"\xff\xfe not utf-8", []),
    (2, BASE_MS + 80, b"\x00\x01binary-key", b"{\"id\": 3}", [("empty", b""), ("bin", b"\x80\x81")]),
    (0, BASE_MS + 20, b"order-4", None, [("tombstone", b"yes")]),  # older than its predecessor: arrives after it
    (1, BASE_MS + 120, b"order-5", "ünïcödé €".encode(), [("lang", "ü".encode())]),
    (2, BASE_MS + 160, b"order-6", b"", []),
]


def _produce(bootstrap: str, topic: str, records: list = RECORDS) -> None:
    with Kafka(bootstrap) as kafka:
        sender = kafka.sender(acks="all")
        try:
            for partition, ts, key, value, headers in records:
                sender.send(topic, key=key, value=value, partition=partition, timestamp_ms=ts, headers=headers)
            assert sender.flush(30.0) == 0
        finally:
            sender.close()


def _fields(frame: pd.DataFrame) -> list[tuple]:
    return [
        (r.partition, r.offset, r.timestamp_ms, r.timestamp_type, r.key, r.value, [tuple(h) for h in r.headers])
        for r in frame.sort_values(["partition", "offset"]).itertuples()
    ]


@pytest.mark.kafka
@ON_BOTH_CLIENTS
@ON_BOTH_BROKERS
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_capture_then_replay_then_capture_gives_identical_records(
    bootstrap_servers: str, topic_factory, tmp_path: Path, suffix: str
) -> None:
    source, copy = topic_factory(3), topic_factory(3)
    _produce(bootstrap_servers, source)
    first = capture(bootstrap_servers, source, tmp_path / f"first{suffix}")
    assert (first.records, first.counts, first.ranges) == (6, {0: 2, 1: 2, 2: 2}, {0: (0, 2), 1: (0, 2), 2: (0, 2)})
    captured = read_capture(first.path)
    expected = sorted(
        (p, i, ts, "CreateTime", key, value, headers)
        for p in range(3)
        for i, (_, ts, key, value, headers) in enumerate(r for r in RECORDS if r[0] == p)
    )
    assert _fields(captured) == expected
    replayed = replay_capture(captured, bootstrap_servers, copy, speed=1_000.0)
    assert replayed.end_offsets == {0: 2, 1: 2, 2: 2}
    second = capture(bootstrap_servers, copy, tmp_path / f"second{suffix}")
    assert _fields(read_capture(second.path)) == expected


@pytest.mark.kafka
@ON_BOTH_CLIENTS
@ON_BOTH_BROKERS
def test_positions_and_limits_choose_the_records(bootstrap_servers: str, topic_factory, tmp_path: Path) -> None:
    topic = topic_factory(2)
    records = [(i % 2, BASE_MS + 1_000 * i, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(10)]
    _produce(bootstrap_servers, topic, records)  # partition 0: times 0, 2, 4, 6, 8 s; partition 1: 1, 3, 5, 7, 9 s
    by_offset = capture(bootstrap_servers, topic, tmp_path / "o.jsonl", partitions=[1], start=Position(offset=1),
                        end=Position(offset=4))
    assert (by_offset.ranges, [r.value for r in read_capture(by_offset.path).itertuples()]) == (
        {1: (1, 4)}, [b"v3", b"v5", b"v7"])
    by_time = capture(bootstrap_servers, topic, tmp_path / "t.jsonl", start=Position(time_ms=BASE_MS + 3_000),
                      end=Position(time_ms=BASE_MS + 7_000))
    assert by_time.ranges == {0: (2, 4), 1: (1, 3)}
    assert sorted(read_capture(by_time.path)["value"]) == [b"v3", b"v4", b"v5", b"v6"]
    limited = capture(bootstrap_servers, topic, tmp_path / "m.parquet", max_records=2)
    assert (limited.counts, limited.ranges) == ({0: 2, 1: 2}, {0: (0, 2), 1: (0, 2)})
    manifest = json.loads((tmp_path / "m.parquet.manifest.json").read_text())
    assert manifest["partitions"]["1"] == {"from_offset": 0, "until_offset": 2, "records": 2}
    with pytest.raises(ConfigError, match="--from offset 9 is outside"):
        capture(bootstrap_servers, topic, tmp_path / "x.jsonl", start=Position(offset=9))
    with pytest.raises(ConfigError, match="has no \\[5\\]"):
        capture(bootstrap_servers, topic, tmp_path / "x.jsonl", partitions=[0, 5])


@pytest.mark.kafka
@ON_BOTH_CLIENTS
@ON_BOTH_BROKERS
def test_the_cli_captures_and_replays_a_capture(bootstrap_servers: str, topic_factory, tmp_path: Path) -> None:
    source, copy = topic_factory(3), topic_factory(3)
    _produce(bootstrap_servers, source)
    out = tmp_path / "orders.jsonl"
    assert main(["capture", source, "--out", str(out), "--bootstrap-servers", bootstrap_servers]) == 0
    assert main(["replay", str(out), "--topic", copy, "--speed", "100", "--bootstrap-servers", bootstrap_servers]) == 0
    again = tmp_path / "again.jsonl"
    assert main(["capture", copy, "--out", str(again), "--bootstrap-servers", bootstrap_servers]) == 0
    assert _fields(read_capture(again)) == _fields(read_capture(out))
    # --speed is for captures: a dataset file is paced with --rate.
    assert main(["gen", "--records", "1000", "--out", str(tmp_path / "data.parquet")]) == 0
    assert main(["replay", str(tmp_path / "data.parquet"), "--topic", copy, "--speed", "2",
                 "--bootstrap-servers", bootstrap_servers]) == 2


@pytest.mark.kafka
@ON_BOTH_CLIENTS
@ON_BOTH_BROKERS
def test_a_changed_or_broken_capture_is_refused_by_name(bootstrap_servers: str, topic_factory, tmp_path: Path) -> None:
    topic = topic_factory(3)
    _produce(bootstrap_servers, topic)
    path = capture(bootstrap_servers, topic, tmp_path / "c.jsonl").path
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[0], '{"partition": 0, "offset": "x"}', *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="changed since it was captured"):
        read_capture(path)
    manifest = path.with_name(path.name + ".manifest.json")
    data = json.loads(manifest.read_text())
    import hashlib

    data["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match="line 2 is not a captured record"):
        read_capture(path)
    manifest.unlink()
    with pytest.raises(DatasetError, match="has no manifest"):
        read_capture(path)
    with pytest.raises(ConfigError, match="must end in .jsonl or .parquet"):
        capture(bootstrap_servers, topic, tmp_path / "c.csv")


def test_positions_parse_offsets_and_times() -> None:
    assert Position.parse("0") == Position(offset=0)
    assert Position.parse("2023-11-14T22:13:20.5Z") == Position(time_ms=1_700_000_000_500)
    with pytest.raises(ConfigError, match="neither an offset"):
        Position.parse("yesterday")
    with pytest.raises(ConfigError, match="neither an offset"):
        Position.parse("2023-11-14T22:13:20")  # no zone: which time would it be?


def test_arrival_order_keeps_each_partitions_offsets_and_paces_by_timestamps() -> None:
    frame = pd.DataFrame({"partition": [0, 0, 1, 1], "offset": [0, 1, 0, 1], "timestamp_ms": [100, 50, 60, 300]})
    ordered = arrival_order(frame)
    # 0/1 is stamped before 0/0 but came after it; 1/0 (60) arrives before 0/1 (counted at 100).
    assert list(zip(ordered["partition"], ordered["offset"], strict=True)) == [(1, 0), (0, 0), (0, 1), (1, 1)]
    assert list(_due_seconds(ordered.reset_index(drop=True), speed=2.0)) == [0.0, 0.02, 0.02, 0.12]
