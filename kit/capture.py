"""Capture a topic of any Kafka into a file, exactly, so it can be replayed elsewhere with :func:`replay_capture`.

A capture keeps every field of every record: partition, offset, timestamp and its type, key and value bytes
(null stays null), and headers. The format follows the extension:

* ``.parquet``: columns ``partition`` (int32), ``offset`` (int64), ``timestamp_ms`` (int64),
  ``timestamp_type`` (string: ``CreateTime``, ``LogAppendTime`` or null), ``key`` and ``value`` (binary,
  nullable), ``headers`` (list of ``{key: string, value: binary}``).
* ``.jsonl``: one object per record with the same fields. ``key``, ``value`` and each header's ``value`` are
  text where the bytes are valid UTF-8, else ``key_b64`` / ``value_b64`` hold them in base64.

Next to it, ``<file>.manifest.json`` (format ``dmk-capture/1``) records the topic, each partition's offset range
and record count, and the file's sha256, which :func:`read_capture` checks.

Positions (``start``/``end``, the CLI's ``--from``/``--until``) are offsets (``1200``) or times (an ISO-8601
time such as ``2026-11-25T10:00:00Z``, or ``ts:<epoch ms>``). A time means what Kafka's ``offsetsForTimes``
answers: the first record, in offset order, whose timestamp is at or after it. Times are found by reading
the partition, so they work on any broker.

Example::

    result = capture("127.0.0.1:9092", "orders", Path("orders.jsonl"), max_records=10_000)
    frame = read_capture("orders.jsonl")
    replay_capture(frame, "127.0.0.1:9092", "orders-copy", speed=10.0)
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# The dataset files' manifest, checksum and atomic-write helpers: a capture's files work alike.
from kit.dataset import _manifest_path, _sha256, _write_atomically
from kit.errors import ConfigError, DatasetError
from kit.kafka import Kafka, TopicPartition
from kit.replay import ReplayResult, ReplaySettings, replay

__all__ = [
    "CAPTURE_FORMAT",
    "COLUMNS",
    "CaptureResult",
    "Position",
    "arrival_order",
    "capture",
    "capture_of_values",
    "is_capture",
    "read_capture",
    "replay_capture",
]

CAPTURE_FORMAT = "dmk-capture/1"
COLUMNS = ("partition", "offset", "timestamp_ms", "timestamp_type", "key", "value", "headers")
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_SCHEMA = pa.schema([
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp_ms", pa.int64(), nullable=False),
    pa.field("timestamp_type", pa.string()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", pa.list_(_HEADER), nullable=False),
])
_FIX = "Capture the topic again with dmk capture TOPIC --out FILE"

Progress = Callable[[int, int], None]
"""Called with (records captured, records expected at most) as the capture goes on."""


@dataclass(frozen=True)
class Position:
    """Where a capture starts or ends in each partition: an offset, or a time (epoch ms).

    Example:
        >>> Position.parse("1200"), Position.parse("ts:1700000000000")
        (Position(offset=1200, time_ms=None), Position(offset=None, time_ms=1700000000000))
        >>> Position.parse("2023-11-14T22:13:20Z").time_ms
        1700000000000
    """

    offset: int | None = None
    time_ms: int | None = None

    @classmethod
    def parse(cls, text: str) -> Position:
        """An offset (``1200``), ``ts:<epoch ms>``, or an ISO-8601 time with a zone (``2026-11-25T10:00:00Z``).

        Raises:
            ConfigError: none of those, or a negative offset.
        """
        text = text.strip()
        if re.fullmatch(r"\d+", text):
            return cls(offset=int(text))
        if re.fullmatch(r"ts:\d+", text):
            return cls(time_ms=int(text[3:]))
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            msg = (f"position {text!r} is neither an offset (1200), ts:<epoch ms>, nor an ISO-8601 time with a zone "
                   "(2026-11-25T10:00:00Z)")
            raise ConfigError(msg, field="position", expected="offset, ts:<ms> or ISO time", actual=text)
        return cls(time_ms=round(when.timestamp() * 1000))


@dataclass(frozen=True)
class CaptureResult:
    """What a capture wrote.

    Attributes:
        path: the capture file.
        topic: the topic captured.
        ranges: partition → ``(from_offset, until_offset)`` of the records captured (until: exclusive).
        counts: partition → records captured (fewer than the range where offsets are missing from the log).
    """

    path: Path
    topic: str
    ranges: dict[int, tuple[int, int]]
    counts: dict[int, int]

    @property
    def records(self) -> int:
        """Records captured, over every partition."""
        return sum(self.counts.values())


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        msg = f"capture file {path} must end in .jsonl or .parquet, not {suffix or '(no extension)'!r}"
        raise ConfigError(msg, field="out", expected=(".jsonl", ".parquet"), actual=suffix)
    return suffix[1:]


def capture(
    bootstrap_servers: str,
    topic: str,
    path: str | os.PathLike[str],
    *,
    partitions: Sequence[int] | None = None,
    start: Position | None = None,
    end: Position | None = None,
    max_records: int | None = None,
    on_progress: Progress | None = None,
    kafka_settings: dict[str, Any] | None = None,
) -> CaptureResult:
    """Write the records of ``topic`` to ``path`` (and its manifest), exactly as the log holds them.

    Args:
        bootstrap_servers: the Kafka to read.
        topic: the topic.
        path: a ``.jsonl`` or ``.parquet`` file (written under a temporary name, then renamed).
        partitions: which partitions (default: every one).
        start: where each partition starts (default: its beginning).
        end: where each partition ends, exclusive (default: its end when the capture starts).
        max_records: at most this many records from each partition (its first ones from ``start``).
        on_progress: called with (captured, most expected) as records come.
        kafka_settings: extra client settings for the reads.

    Raises:
        ConfigError: a bad path, partition or position; an offset outside the partition's log.
        UnknownTopic: no such topic.
    """
    target = Path(path)
    kind = _format(target)
    if max_records is not None and max_records < 1:
        msg = f"max_records must be >= 1, got {max_records}"
        raise ConfigError(msg, field="max_records", expected=">= 1", actual=max_records)
    rows: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    ranges: dict[int, tuple[int, int]] = {}
    counts: dict[int, int] = {}
    with Kafka(bootstrap_servers, settings=kafka_settings) as kafka:
        every = kafka.partitions(topic)
        chosen = sorted(set(partitions)) if partitions is not None else sorted(every)
        unknown = sorted(set(chosen) - set(every))
        if unknown:
            msg = f"topic {topic!r} has partitions {sorted(every)}; it has no {unknown}"
            raise ConfigError(msg, field="partitions", expected=sorted(every), actual=unknown)
        tps = [TopicPartition(topic, p) for p in chosen]
        begins, ends = kafka.beginning_offsets(tps), kafka.end_offsets(tps)
        bounds = {tp.partition: _bounds(tp, begins[tp], ends[tp], start, end) for tp in tps}
        most = sum(min(until - first, max_records or until - first) for first, until in bounds.values())
        start_ms = start.time_ms if start is not None else None
        end_ms = end.time_ms if end is not None else None
        done = 0
        for partition, (first, until) in bounds.items():
            taken, begin, last = 0, first, first - 1
            matched = start_ms is None
            for record in kafka.read_range(topic, partition, first, until):
                if not matched:  # a time: the first record at or after it, in offset order
                    if record.timestamp < start_ms:
                        continue
                    matched, begin = True, record.offset
                if end_ms is not None and record.timestamp >= end_ms:
                    break
                _append(rows, partition, record)
                taken, last, done = taken + 1, record.offset, done + 1
                if on_progress is not None and done % 5_000 == 0:
                    on_progress(done, most)
                if max_records is not None and taken >= max_records:
                    break
            ranges[partition] = (begin, last + 1) if taken else (begin, begin)
            counts[partition] = taken
    _write(target, kind, rows)
    manifest = {
        "format": CAPTURE_FORMAT, "topic": topic, "records": sum(counts.values()),
        "partitions": {
            str(p): {"from_offset": r[0], "until_offset": r[1], "records": counts[p]} for p, r in ranges.items()
        },
        "sha256": _sha256(target),
    }
    text = json.dumps(manifest, indent=2) + "\n"
    _write_atomically(_manifest_path(target), lambda temp: temp.write_text(text, encoding="utf-8"))
    if on_progress is not None:
        on_progress(done, done)
    return CaptureResult(target, topic, ranges, counts)


def capture_of_values(path: str | os.PathLike[str], values: Sequence[str], *, start_ms: int = 1_700_000_000_000,
                      spacing_ms: int = 10) -> Path:
    """Write a one-partition capture of ``values`` (UTF-8, no keys) to ``path``, as :func:`capture` would, manifest too.

    For a job's input that was never in Kafka: lines of a socket or file job, a test's records. Record ``i`` gets
    offset ``i`` and the Kafka timestamp ``start_ms + i * spacing_ms``.

    Example:
        >>> import tempfile
        >>> path = capture_of_values(Path(tempfile.mkdtemp()) / "words.jsonl", ["a b", "c"])
        >>> read_capture(path)[["offset", "timestamp_ms", "value"]].values.tolist()
        [[0, 1700000000000, b'a b'], [1, 1700000000010, b'c']]
    """
    target, n = Path(path), len(values)
    _write(target, "jsonl", {"partition": [0] * n, "offset": list(range(n)),
                             "timestamp_ms": [start_ms + spacing_ms * i for i in range(n)],
                             "timestamp_type": ["CreateTime"] * n, "key": [None] * n,
                             "value": [v.encode() for v in values], "headers": [[] for _ in values]})
    text = json.dumps({"format": CAPTURE_FORMAT, "sha256": _sha256(target)})
    _write_atomically(_manifest_path(target), lambda temp: temp.write_text(text, encoding="utf-8"))
    return target


def _bounds(tp: TopicPartition, begin: int, end: int, start: Position | None, stop: Position | None) -> tuple[int, int]:
    """The offset range to read in one partition (times narrow it further while reading)."""
    first, until = begin, end
    if start is not None and start.offset is not None:
        if not begin <= start.offset <= end:
            msg = (f"--from offset {start.offset} is outside {tp.topic}-{tp.partition}, which holds offsets "
                   f"{begin}..{end - 1 if end > begin else begin} (end {end})")
            raise ConfigError(msg, field="from", expected=(begin, end), actual=start.offset)
        first = start.offset
    if stop is not None and stop.offset is not None:
        if not first <= stop.offset <= end:
            msg = (f"--until offset {stop.offset} is outside [{first}, {end}] of {tp.topic}-{tp.partition} (it must "
                   "not be before --from or beyond the partition's end)")
            raise ConfigError(msg, field="until", expected=(first, end), actual=stop.offset)
        until = stop.offset
    return first, until


def _append(rows: dict[str, list[Any]], partition: int, record: Any) -> None:
    rows["partition"].append(partition)
    rows["offset"].append(record.offset)
    rows["timestamp_ms"].append(record.timestamp)
    rows["timestamp_type"].append(_TIMESTAMP_TYPES.get(record.timestamp_type))
    rows["key"].append(record.key)
    rows["value"].append(record.value)
    rows["headers"].append([{"key": k, "value": v} for k, v in (record.headers or [])])


def _text_or_b64(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode("ascii")}


def _write(target: Path, kind: str, rows: dict[str, list[Any]]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(target, lambda temp: _write_rows(temp, kind, rows))


def _write_rows(temp: Path, kind: str, rows: dict[str, list[Any]]) -> None:
    if kind == "parquet":
        pq.write_table(pa.table(rows, schema=_SCHEMA), temp, compression="zstd")
    else:
        with open(temp, "w", encoding="utf-8") as out:
            for i in range(len(rows["offset"])):
                line = {
                    "partition": rows["partition"][i], "offset": rows["offset"][i],
                    "timestamp_ms": rows["timestamp_ms"][i], "timestamp_type": rows["timestamp_type"][i],
                    **_text_or_b64("key", rows["key"][i]), **_text_or_b64("value", rows["value"][i]),
                    "headers": [{"key": h["key"], **_text_or_b64("value", h["value"])} for h in rows["headers"][i]],
                }
                out.write(json.dumps(line, ensure_ascii=False) + "\n")


def is_capture(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` has a capture manifest next to it (``dmk replay`` tells captures from datasets so)."""
    manifest = _manifest_path(Path(path))
    if not manifest.is_file():
        return False
    try:
        return bool(json.loads(manifest.read_text(encoding="utf-8")).get("format") == CAPTURE_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


def _from_text_or_b64(line: dict[str, Any], name: str) -> bytes | None:
    if f"{name}_b64" in line:
        return base64.b64decode(line[f"{name}_b64"], validate=True)
    text = line.get(name)
    return None if text is None else str(text).encode("utf-8")


def read_capture(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The records of a capture file, in partition and offset order.

    The columns are :data:`COLUMNS`; ``headers`` are lists of ``(name, value bytes or None)``.

    Raises:
        DatasetError: the file or its manifest is missing, changed since the capture (sha256), or does not
            parse (the line or column at fault).
    """
    source = Path(path)
    kind = _format(source)
    manifest_path = _manifest_path(source)
    if not source.is_file():
        raise DatasetError(source, "does not exist", _FIX)
    if not manifest_path.is_file():
        raise DatasetError(source, f"has no manifest {manifest_path.name} next to it", _FIX)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise DatasetError(source, f"its manifest is not JSON ({err})", _FIX) from None
    if manifest.get("format") != CAPTURE_FORMAT:
        raise DatasetError(source, f"its manifest's format is {manifest.get('format')!r}, not {CAPTURE_FORMAT!r}", _FIX)
    if manifest.get("sha256") != _sha256(source):
        raise DatasetError(source, "changed since it was captured (its sha256 differs from the manifest's)", _FIX)
    if kind == "parquet":
        try:
            table = pq.read_table(source)
        except (OSError, pa.ArrowException) as err:
            raise DatasetError(source, f"is not a readable Parquet file ({err})", _FIX) from None
        if [(f.name, f.type) for f in table.schema] != [(f.name, f.type) for f in _SCHEMA]:
            raise DatasetError(source, f"has schema {table.schema}, not a capture's", _FIX)
        frame = table.to_pandas()
        frame["headers"] = [[(h["key"], h["value"]) for h in hs] for hs in frame["headers"]]
    else:
        frame = _read_jsonl(source)
    return frame.astype({"partition": "int32", "offset": "int64", "timestamp_ms": "int64"})


def _read_jsonl(source: Path) -> pd.DataFrame:
    rows: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    with open(source, encoding="utf-8") as lines:
        for number, text in enumerate(lines, start=1):
            try:
                line = json.loads(text)
                rows["partition"].append(int(line["partition"]))
                rows["offset"].append(int(line["offset"]))
                rows["timestamp_ms"].append(int(line["timestamp_ms"]))
                rows["timestamp_type"].append(line.get("timestamp_type"))
                rows["key"].append(_from_text_or_b64(line, "key"))
                rows["value"].append(_from_text_or_b64(line, "value"))
                headers = line.get("headers", [])
                rows["headers"].append([(str(h["key"]), _from_text_or_b64(h, "value")) for h in headers])
            except (ValueError, KeyError, TypeError) as err:
                raise DatasetError(source, f"line {number} is not a captured record ({type(err).__name__}: {err})",
                                   _FIX) from None
    return pd.DataFrame(rows, columns=list(COLUMNS))


def arrival_order(frame: pd.DataFrame) -> pd.DataFrame:
    """The records in the order they arrived: by timestamp across partitions, by offset within one.

    A record's arrival is the largest timestamp up to it in its partition (a record with an older timestamp
    than its predecessor still came after it), so each partition keeps its offset order.
    """
    ordered = frame.sort_values(["partition", "offset"], kind="stable")
    arrival = ordered.groupby("partition", sort=False)["timestamp_ms"].cummax()
    return ordered.assign(arrival_ms=arrival).sort_values(["arrival_ms", "partition", "offset"], kind="stable")


def replay_capture(
    frame: pd.DataFrame,
    bootstrap_servers: str,
    topic: str,
    *,
    speed: float | None = 1.0,
    rate_rps: float | None = None,
    partitions: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Produce a capture into ``topic``, every record as it was captured.

    Each record goes to its own partition with its key, value, headers and timestamp, in arrival order
    (:func:`arrival_order`).

    Args:
        frame: :func:`read_capture`'s frame.
        bootstrap_servers: the Kafka to write.
        topic: the target topic (created with ``partitions``, default the capture's highest partition + 1).
        speed: replay the original inter-arrival times this many times faster (1.0: as they were). Default 1.0.
        rate_rps: instead of the original timing, an even ``rate_rps`` records/s (``speed`` must be None).
        partitions: partitions of a new topic.
        on_progress: called with (sent, acknowledged).

    Raises:
        ConfigError: both or a non-positive ``speed``/``rate_rps``; a topic with too few partitions.
        ReplayError: a record was not acknowledged.
    """
    if speed is not None and rate_rps is not None:
        msg = "give either speed (the capture's own timing, scaled) or rate_rps (an even rate), not both"
        raise ConfigError(msg, field="speed", expected="one of speed, rate_rps", actual=(speed, rate_rps))
    if speed is not None and not speed > 0:
        msg = f"speed must be > 0 (2.0: twice as fast as captured), got {speed}"
        raise ConfigError(msg, field="speed", expected="> 0", actual=speed)
    ordered = arrival_order(frame)
    settings = ReplaySettings(
        topic=topic, partitions=partitions, rate_rps=rate_rps, timestamps="event", partition_by="field",
        headers="frame", speed=speed,
    )
    return replay(ordered.reset_index(drop=True), bootstrap_servers, settings, on_progress=on_progress)

