"""The modern side's parse (``modern.workloads.with_parsed``) decides exactly as the event contract says.

Canonical records are parsed in the JVM, the others in Python; these tests hold both paths to the contract as
the oracle reads it (``kit.workloads._contract.read_record``, its bounds literals of that spec file, sharing no
code with ``kit.events.parse_event``), on the corner cases where Spark's JSON parser and Python's differ and at
and around both timestamp bounds.
"""

from __future__ import annotations

import re

import pytest

from kit.dataset import DatasetSpec, generate
from kit.events import REQUIRED_FIELDS, parse_event
from kit.workloads._contract import BOUNDARY_TIMES, read_record
from modern.workloads import CANONICAL_EVENT, with_parsed

pytestmark = pytest.mark.spark

_CANON = (
    b'{"event_id":"e1","user":"u1","key":"k1","ad_id":"a","ad_type":"banner","event_type":"view",'
    b'"event_time":1767225600123}'
)


def _with_time(text: bytes) -> bytes:
    return _CANON.replace(b"1767225600123", text)


def _with_user(text: bytes) -> bytes:
    return _CANON.replace(b'"u1"', text)


CORNER_CASES = [
    _CANON,
    *(_with_time(t) for t in (b"-1", b"0", b"-0", b"946684800000", b"946684799999", b"4102444799999", b"4102444800000")),
    *(_with_time(t) for t in (b"10000000000000000", b"99999999999999999999", b"1.5e12", b"1767225600123.0", b"NaN",
                              b"true", b'"1767225600123"', b"01767225600123")),
    *(_with_time(str(ms).encode()) for ms in BOUNDARY_TIMES),
    _with_user(b'"u\\u0031"'),            # an escape: same value, not canonical
    _with_user(b'"u\xed\xa0\x80"'),       # a UTF-8-encoded surrogate: invalid UTF-8
    _with_user(b'"u\xff\xfe"'),
    _with_user(b'"\xc3\xa9"'),            # non-ASCII, valid
    _with_user(b'"\xf0\x9f\x98\x80"'),    # outside the BMP
    _with_user(b'"u\x01"'),               # a raw control character: invalid JSON
    _with_user(b"1"),                     # a number where a string belongs
    _CANON + b"\xc2\x85",                 # U+0085 after the object (Java's $ would match before it)
    _CANON + b"\n",
    _CANON + b" x",
    b" " + _CANON,
    _CANON.replace(b'{"event_id":"e1",', b'{"event_id":"e1","event_id":"e2",'),  # duplicate key: last wins
    _CANON.replace(b',"event_type":"view"', b""),
    b"[" + _CANON + b"]",
    _CANON[:40],
    None,
    b"",
    b"null",
]


def _expected(value: bytes | None) -> tuple:
    event, reason = read_record(value)
    fields = tuple(event[name] for name in REQUIRED_FIELDS) if event else (None,) * len(REQUIRED_FIELDS)
    return (*fields, reason)


def _parsed(spark, values: list[bytes | None]) -> list[tuple]:
    frame = spark.createDataFrame(list(enumerate(values)), "i int, value binary")
    return [tuple(row.p) for row in with_parsed(frame).select("i", "p").orderBy("i").collect()]


def test_corner_cases_are_decided_as_parse_event_decides(spark) -> None:
    assert _parsed(spark, CORNER_CASES) == [_expected(v) for v in CORNER_CASES]


def test_every_record_of_a_messy_dataset_is_decided_as_parse_event_decides(spark) -> None:
    values = generate(DatasetSpec.from_profile("messy", records=3_000, seed=11, events_per_second=50))["value"].tolist()
    assert _parsed(spark, values) == [_expected(v) for v in values]


def test_the_datasets_valid_records_take_the_jvm_path() -> None:
    frame = generate(DatasetSpec.from_profile("messy", records=3_000, seed=11, events_per_second=50))
    # Python's re reads this pattern as Java does, but for \z, which Python spells \Z.
    canonical = re.compile(CANONICAL_EVENT.replace(r"\z", r"\Z").encode())
    valid = [v for v in frame["value"] if parse_event(v)[1] is None]
    assert len(valid) > 2_000
    assert all(canonical.match(v) for v in valid)


def test_the_parse_dead_letters_only_from_the_given_offsets(tmp_path) -> None:
    """A rewound cutover's modern query re-reads records below the legacy job's position: its parse (both UDFs) writes
    the malformed ones from the position on, per partition; a partition without one, all of them."""
    import pyarrow as pa

    from kit.sink import read_batches
    from modern.workloads import _parse_and_dead_letter, _parse_nexmark_udf

    values = [b"{not json", _CANON] * 6
    topics, partitions, offsets = ["t"] * 12, [0, 1] * 6, [i // 2 for i in range(12)]
    arrays = (pa.array(topics), pa.array(partitions, pa.int32()), pa.array(offsets, pa.int64()),
              pa.array(values, pa.binary()))
    floors = {"t": {0: 3}}
    events = tmp_path / "events"
    _parse_and_dead_letter({"t": str(events)}, floors)(pa.array([True] * 12), *arrays)
    written = read_batches(events)
    assert sorted(zip(written["partition"], written["offset"], strict=True)) == [(0, 3), (0, 4), (0, 5)]
    nexmark = tmp_path / "nexmark"
    # To the Nexmark parse a kit event is malformed too (no "type"): partition 1's records are dead letters there.
    _parse_nexmark_udf("bid", None, {"t": str(nexmark)}, {"t": {0: 4, 1: 5}})(*arrays)
    written = read_batches(nexmark)
    assert sorted(zip(written["partition"], written["offset"], strict=True)) == [(0, 4), (0, 5), (1, 5)]
    _parse_nexmark_udf("bid", None, {"t": str(nexmark)}, None)(*arrays)
    assert len(read_batches(nexmark)) == 12


def test_the_parse_writes_each_topic_s_dead_letters_to_its_own_directory(tmp_path) -> None:
    """One task reads several topics (a query over a stream's inputs): each malformed record goes to its topic's
    directory, with Spark's Kafka types, and a topic without a directory gets none."""
    import pyarrow as pa

    from kit.sink import KEYED_BATCH, read_batches
    from modern.workloads import _parse_and_dead_letter

    topics = ["a", "b", "c", "a", "b", "c", "a"]
    values = [b"{not json", _CANON, b"\xff", b"[]", b"{not json", b"{", _CANON]
    arrays = (pa.array(topics), pa.array([0, 1, 2, 3, 4, 5, 6], pa.int32()), pa.array(range(10, 17), pa.int64()),
              pa.array(values, pa.binary()))
    parsed = _parse_and_dead_letter({"a": str(tmp_path / "a"), "b": str(tmp_path / "b")})(
        pa.array([True] * 7), *arrays)
    assert parsed.field("reason").to_pylist() == [
        "bad_json", None, "bad_utf8", "bad_json", "bad_json", "bad_json", None,
    ]
    a, b = read_batches(tmp_path / "a"), read_batches(tmp_path / "b")
    assert a[["batch", "topic", "partition", "offset", "reason"]].values.tolist() == [
        [KEYED_BATCH, "a", 0, 10, "bad_json"], [KEYED_BATCH, "a", 3, 13, "bad_json"],
    ]
    assert b[["topic", "partition", "offset", "reason"]].values.tolist() == [["b", 4, 14, "bad_json"]]
    assert (str(a["partition"].dtype), str(a["offset"].dtype)) == ("int32", "int64")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
