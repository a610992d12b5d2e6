"""Deterministic event datasets: what gets replayed into Kafka and what the oracle recomputes.

A dataset is a table in **replay order** (row ``seq`` is the ``seq``-th record produced to Kafka) with the
Kafka key, value and timestamp of each record, its partition, and a ``kind`` label saying what the record
is for the comparison: in order (``clean``), out of order but within the allowed lateness (``late``),
beyond it (``too_late``), a re-delivery (``duplicate``), or malformed in one of the ways
:func:`kit.events.parse_event` rejects. Everything is a pure function of a :class:`DatasetSpec`: the
same spec gives byte-identical files and manifests on every machine, so a diff between the engines can
always be replayed.

Example:
    >>> import tempfile, pathlib
    >>> spec = DatasetSpec.from_profile("messy", records=20_000, seed=7)
    >>> df = generate(spec)
    >>> int((df["kind"] == "late").sum()), spec.kind_counts()["late"]
    (1000, 1000)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "events.parquet"
    ...     manifest = generate_to_file(spec, path)
    ...     same = read_dataset(path).equals(df)
    >>> manifest["counts"]["too_late"], same
    (200, True)
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from kit import layout
from kit.errors import ConfigError, DatasetError
from kit.events import (
    AD_TYPES,
    EVENT_TIME_MAX_MS,
    EVENT_TIME_MIN_MS,
    EVENT_TYPES,
    REJECT_REASONS,
    parse_event,
)
from kit.kafka import key_partition

__all__ = [
    "COLUMNS",
    "DATASET_FORMAT",
    "KINDS",
    "PROFILES",
    "DatasetSpec",
    "LatenessBands",
    "ad_campaigns",
    "check_labels",
    "generate",
    "generate_to_file",
    "read_dataset",
    "read_manifest",
    "write_dataset",
    "write_files",
]

DATASET_FORMAT = "dmk-dataset/4"
"""Value of the manifest's ``format`` field; bumped whenever the file layout or the generator changes."""

COLUMNS: tuple[str, ...] = ("seq", "key", "value", "timestamp_ms", "partition", "kind")
"""Columns of a dataset frame, in order. A frame may add ``topic`` (:data:`TOPIC`) after them."""

TOPIC = "topic"
"""Optional last column: the input (topic) each record goes to, for datasets of several inputs (Nexmark's
three-topic layout, :mod:`kit.nexmark`); :func:`kit.replay.replay` sends each row to its own topic."""

KINDS: tuple[str, ...] = ("clean", "late", "too_late", "duplicate", "boundary", *REJECT_REASONS)
"""Every ``kind`` label. The malformed ones are exactly :data:`kit.events.REJECT_REASONS`; ``boundary`` marks the
valid records of the boundary block (:attr:`DatasetSpec.boundary_records`)."""

_VALID_KINDS = frozenset(KINDS[:5])

PROFILES: MappingProxyType[str, MappingProxyType[str, float]] = MappingProxyType(
    {
        "clean": MappingProxyType({}),
        "messy": MappingProxyType(
            {
                "late_fraction": 0.05,
                "too_late_fraction": 0.01,
                "duplicate_fraction": 0.02,
                "malformed_fraction": 0.01,
            }
        ),
    }
)
"""Named starting points for :meth:`DatasetSpec.from_profile` (overrides of the defaults)."""

# Extra event-time spread of a too_late record beyond its minimum lateness.
_TOO_LATE_SPREAD_MS = 5_000
# Target mean events per session when the per-user rate allows it ("a few dozen").
_SESSION_EVENTS_TARGET = 30.0
# Rounds of re-choosing late / too_late records before giving up on a spec whose stream is too sparse.
_MAX_DISORDER_ROUNDS = 100

_ARROW_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
    ]
)

_ARROW_SCHEMA_WITH_TOPIC = _ARROW_SCHEMA.append(pa.field(TOPIC, pa.string(), nullable=False))

_FILE_FORMATS = {".parquet": "parquet", ".jsonl": "jsonl"}

_REGENERATE = "Re-generate it with kit.dataset.generate_to_file(spec, path)"

# The boundary block (DatasetSpec.boundary_records): lead-ins of this many batches' worth of records, and its
# fixed records: 6 of the session-gap chain, 2 x 6 lateness probes, 6 around the validity bounds.
_LEAD_IN_BATCHES = 3
_BOUNDARY_FIXED = 24
# The event contract's validity bounds as literals (not kit.events' constants, for the reason given at
# _BAD_TIMESTAMPS): 2000-01-01T00:00:00Z and 2099-12-31T23:59:59.999Z.
_FIRST_VALID_MS = 946_684_800_000
_LAST_VALID_MS = 4_102_444_799_999

# Independent random streams per purpose, so e.g. adding duplicates does not reshuffle the keys.
_STREAMS = {"sessions": 0, "fields": 1, "disorder": 2, "duplicates": 3, "malformed": 4, "campaigns": 5}


def _rng(seed: int, purpose: str) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[purpose]])


# --------------------------------------------------------------------------------------------------------
# Specification


def _config_error(field: str, expected: object, actual: object, fix: str = "") -> ConfigError:
    return ConfigError(
        f"DatasetSpec.{field}: expected {expected}, got {actual!r}.{' ' + fix if fix else ''}",
        field=field,
        expected=expected,
        actual=actual,
    )


def _round_count(fraction: float, records: int) -> int:
    # Nearest integer, halves up: documented in DatasetSpec.kind_counts and asserted by the tests.
    return math.floor(fraction * records + 0.5)


_INT_MINIMUMS = {
    "records": 1,
    "seed": 0,
    "partitions": 1,
    "keys": 1,
    "users": 1,
    "session_gap_ms": 1,
    "session_margin_ms": 0,
    "ads": 1,
    "campaigns": 1,
    "allowed_lateness_ms": 1,
    "lateness_margin_ms": 0,
    "window_ms": 0,
    "boundary_records": 0,
}
_FRACTIONS = ("late_fraction", "too_late_fraction", "duplicate_fraction", "malformed_fraction")


class LatenessBands:
    """The lateness bands of a spec with ``allowed_lateness_ms``, ``lateness_margin_ms`` and ``window_ms``.

    A ``late`` record is at most :attr:`late_max_ms` behind the newest event before it, a ``too_late`` one between
    :attr:`too_late_min_ms` and :attr:`too_late_max_ms`: each a margin away from the allowed lateness, so every
    engine's watermark and the oracle's decide them alike (:class:`DatasetSpec`, :class:`kit.nexmark.NexmarkSpec`).
    """

    allowed_lateness_ms: int
    lateness_margin_ms: int
    window_ms: int

    @property
    def late_max_ms(self) -> int:
        """Largest lateness of a ``late`` (and of a ``duplicate``) record: allowed lateness minus margin."""
        return self.allowed_lateness_ms - self.lateness_margin_ms

    @property
    def too_late_min_ms(self) -> int:
        """Smallest lateness of a ``too_late`` record: allowed lateness plus margin plus ``window_ms``."""
        return self.allowed_lateness_ms + self.lateness_margin_ms + self.window_ms

    @property
    def too_late_max_ms(self) -> int:
        """Largest lateness of a ``too_late`` record: :attr:`too_late_min_ms` plus a fixed 5 s spread."""
        return self.too_late_min_ms + _TOO_LATE_SPREAD_MS


@dataclass(frozen=True)
class DatasetSpec(LatenessBands):
    """Everything that determines a dataset; validated on construction.

    Errors are :class:`~kit.errors.ConfigError` with attributes ``field``, ``expected`` and ``actual``.

    Attributes:
        records: rows in the dataset, every kind included. Default 100_000.
        seed: seed of every random choice (non-negative). Default 42.
        partitions: Kafka partitions of the topic; the ``partition`` column is the murmur2 partition of
            the key. Default 4.
        keys: distinct values of the ``key`` field (the aggregation key). Default 1000.
        key_skew: ``"uniform"`` or ``"zipf"`` (bounded Zipf over ``keys`` values, ``k0000`` hottest).
            Default ``"uniform"``.
        zipf_exponent: exponent of the bounded Zipf law. Default 1.2.
        users: distinct users; the Kafka key is the user id. Default 100.
        session_gap_ms: session-window gap the session workload uses. Default 30_000.
        session_margin_ms: no gap between a user's consecutive events is within this distance of
            ``session_gap_ms``, so every engine cuts sessions in the same places. Default 5_000.
        events_per_second: event-time rate of the whole stream. Default 1000.
        ads: distinct ``ad_id`` values. Default 100.
        campaigns: campaigns the ads are spread over (:func:`ad_campaigns`). Default 10.
        late_fraction: share of records that are out of order by at most
            ``allowed_lateness_ms - lateness_margin_ms``. Default 0.0.
        too_late_fraction: share of records out of order by at least
            ``allowed_lateness_ms + lateness_margin_ms + window_ms`` (:attr:`too_late_min_ms`). Default 0.0.
        allowed_lateness_ms: the watermark delay the workloads use. Default 5_000.
        lateness_margin_ms: distance kept between every record's lateness and ``allowed_lateness_ms``,
            so late/too-late is never decided by a millisecond of watermark timing. Default 2_000.
        window_ms: the longest event-time window of the workloads. Spark drops a record from a window only
            when the *window's end* is behind the watermark, so a too_late record is made late by this
            much more than the allowed lateness: then it is dropped from every window containing it.
            Default 10_000.
        duplicate_fraction: share of records that re-deliver an earlier clean record. Default 0.0.
        malformed_fraction: share of records :func:`kit.events.parse_event` rejects, split evenly over
            its four reasons. Default 0.0.
        start_ms: event time the stream starts at. Default 1_767_225_600_000 (2026-01-01T00:00Z).
        boundary_records: how many of the ``records`` form the boundary block at the end of the stream (0: none,
            the default; else at least :attr:`boundary_minimum`, and records beyond it lengthen the lead-ins). The
            block puts records exactly at and 1 ms either side of the lateness tolerance, the session gap, the
            window ends and both validity bounds of the event contract (:func:`boundary_plan` lists them); the
            fractions above apply to the other ``records - boundary_records``.

    Constraints beyond the ranges: ``campaigns <= ads``; ``session_margin_ms < session_gap_ms``;
    ``lateness_margin_ms < allowed_lateness_ms``; no too_late record is late by more than
    ``allowed_lateness_ms + session_gap_ms - lateness_margin_ms`` (session windows, which Spark closes only
    a gap after their last event, keep every too_late record); the four fractions each lie in [0, 1) and sum to
    less than 0.5; and ``session_margin_ms > allowed_lateness_ms - lateness_margin_ms``. The last one is why late
    records cannot move session boundaries: a late record arrives when the stream's maximum event time is
    at most ``allowed_lateness_ms - lateness_margin_ms`` past its own event time, and its user's previous
    event in the same session is at most ``session_gap_ms - session_margin_ms`` before it, so at arrival
    the stream clock is less than one gap past that previous event. Even an engine that closes a session
    the moment the clock passes its last event plus the gap (no lateness allowance at all, as a DStream
    emulation might) still has the session open, and puts the record into the same session as
    event-time order would.
    """

    records: int = 100_000
    seed: int = 42
    partitions: int = 4
    keys: int = 1000
    key_skew: str = "uniform"
    zipf_exponent: float = 1.2
    users: int = 100
    session_gap_ms: int = 30_000
    session_margin_ms: int = 5_000
    events_per_second: float = 1000
    ads: int = 100
    campaigns: int = 10
    late_fraction: float = 0.0
    too_late_fraction: float = 0.0
    allowed_lateness_ms: int = 5_000
    lateness_margin_ms: int = 2_000
    window_ms: int = 10_000
    duplicate_fraction: float = 0.0
    malformed_fraction: float = 0.0
    start_ms: int = 1_767_225_600_000
    boundary_records: int = 0

    def __post_init__(self) -> None:
        for name, minimum in _INT_MINIMUMS.items():
            value = getattr(self, name)
            if type(value) is not int or value < minimum:
                raise _config_error(name, f"an int >= {minimum}", value)
        if type(self.start_ms) is not int or not EVENT_TIME_MIN_MS <= self.start_ms < EVENT_TIME_MAX_MS:
            raise _config_error(
                field="start_ms",
                expected=f"an int in [{EVENT_TIME_MIN_MS}, {EVENT_TIME_MAX_MS}) (years 2000-2099)",
                actual=self.start_ms,
            )
        if self.key_skew not in ("uniform", "zipf"):
            raise _config_error(field="key_skew", expected="'uniform' or 'zipf'", actual=self.key_skew)
        for name in ("zipf_exponent", "events_per_second"):
            value = getattr(self, name)
            if not _is_real(value) or not value > 0:
                raise _config_error(name, "a finite number > 0", value)
        for name in _FRACTIONS:
            value = getattr(self, name)
            if not _is_real(value) or not 0 <= value < 1:
                raise _config_error(name, "a number in [0, 1)", value)
        total = sum(getattr(self, name) for name in _FRACTIONS)
        if not total < 0.5:
            raise _config_error(
                field="malformed_fraction",
                expected="late, too_late, duplicate and malformed fractions summing to < 0.5",
                actual=total,
                fix="Most records must stay clean so that sessions and duplicates have in-order records to build on.",
            )
        if self.campaigns > self.ads:
            raise _config_error(field="campaigns", expected=f"at most ads={self.ads}", actual=self.campaigns)
        if self.session_margin_ms >= self.session_gap_ms:
            raise _config_error(
                field="session_margin_ms",
                expected=f"less than session_gap_ms={self.session_gap_ms}",
                actual=self.session_margin_ms,
            )
        if self.lateness_margin_ms >= self.allowed_lateness_ms:
            raise _config_error(
                field="lateness_margin_ms",
                expected=f"less than allowed_lateness_ms={self.allowed_lateness_ms}",
                actual=self.lateness_margin_ms,
            )
        if self.too_late_max_ms + self.lateness_margin_ms > self.allowed_lateness_ms + self.session_gap_ms:
            raise _config_error(
                field="window_ms",
                expected=f"at most session_gap_ms - 2 * lateness_margin_ms - {_TOO_LATE_SPREAD_MS} = "
                f"{self.session_gap_ms - 2 * self.lateness_margin_ms - _TOO_LATE_SPREAD_MS}",
                actual=self.window_ms,
                fix="A too_late record must stay within one session gap of the watermark, so that session windows "
                "keep it in every engine; raise session_gap_ms or lower window_ms.",
            )
        if self.session_margin_ms <= self.late_max_ms:
            raise _config_error(
                field="session_margin_ms",
                expected=f"more than allowed_lateness_ms - lateness_margin_ms = {self.late_max_ms}",
                actual=self.session_margin_ms,
                fix="Otherwise a late record could arrive after an engine without lateness allowance has "
                "closed its session; raise session_margin_ms or lateness_margin_ms.",
            )
        if self.boundary_records and self.boundary_records < self.boundary_minimum:
            raise _config_error(
                field="boundary_records",
                expected=f"0 or at least {self.boundary_minimum} (two lead-ins of {self.boundary_lead_in} records, 3 "
                f"batches' worth at this rate and margin, and {_BOUNDARY_FIXED} probes)",
                actual=self.boundary_records,
                fix=f"Pass --boundary-records {self.boundary_minimum} (and raise --records by as much).",
            )
        if self.main_records < 1:
            raise _config_error(
                field="records", expected=f"more than boundary_records={self.boundary_records}", actual=self.records
            )
        counts = self.kind_counts()
        if counts["clean"] < counts["duplicate"]:
            raise _config_error(
                field="duplicate_fraction",
                expected=f"at most as many duplicates as clean records ({counts['clean']})",
                actual=self.duplicate_fraction,
                fix="Each duplicate re-delivers a different clean record; raise records or lower the fractions.",
            )
        if counts["clean"] < 1:
            raise _config_error(
                field="records", expected="enough records to leave at least one clean record", actual=self.records
            )

    @classmethod
    def from_profile(cls, name: str, **overrides: Any) -> DatasetSpec:
        """Build a spec from a named profile of :data:`PROFILES`, then apply overrides.

        Args:
            name: ``"clean"`` (defaults: every record valid and in order) or ``"messy"`` (5 % late, 1 % too
                late, 2 % duplicates, 1 % malformed).
            **overrides: any :class:`DatasetSpec` field.

        Raises:
            ConfigError: unknown profile, unknown override (in kafka-python's words, "Unrecognized
                configs: {...}"), or an invalid resulting spec.
        """
        if name not in PROFILES:
            msg = f"unknown dataset profile {name!r}; valid profiles: {', '.join(PROFILES)}."
            raise ConfigError(
                msg,
                field="profile",
                expected=tuple(PROFILES),
                actual=name,
            )
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ConfigError(
                "Unrecognized configs: {" + ", ".join(repr(k) for k in unknown) + "}. "
                f"Valid DatasetSpec fields: {', '.join(valid)}.",
                field=unknown[0],
                expected=tuple(valid),
                actual=tuple(unknown),
            )
        return cls(**{**PROFILES[name], **overrides})

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DatasetSpec:
        """The spec of its ``dataclasses.asdict`` form (as in dataset manifests and driver configs).

        Keys that are not fields are left out: a manifest may come from a kit that knew more fields.

        Raises:
            ConfigError: a field missing, a spec of another generator (``dmk gen --nexmark``), or an invalid spec.
        """
        if raw.get("generator", "events") != "events":
            msg = (f"the dataset was written by the {raw['generator']!r} generator (dmk gen --{raw['generator']}); "
                   "the kit's workloads read datasets of dmk gen without it. Generate one with dmk gen --records N")
            raise ConfigError(msg, field="generator", expected="events", actual=raw["generator"])
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})

    @property
    def main_records(self) -> int:
        """Records of the generated stream before the boundary block: ``records - boundary_records``."""
        return self.records - self.boundary_records

    @property
    def boundary_lead_in(self) -> int:
        """Fewest records at one event time before each set of lateness probes (see :func:`boundary_plan`).

        Three batches' worth at the batch caps the kit runs engines with (``events_per_second *
        lateness_margin_ms / 2000`` records per batch, :func:`compare.inputs.batch_records`): Spark judges a batch's
        late records by the watermark of two batches back, so the record that set the maximum must be at least
        two whole batches before a probe for every engine's watermark to be exactly the oracle's.
        """
        return _LEAD_IN_BATCHES * math.ceil(self.events_per_second * self.lateness_margin_ms / 2_000)

    @property
    def boundary_minimum(self) -> int:
        """The smallest non-zero :attr:`boundary_records`: two lead-ins and the fixed probes."""
        return 2 * self.boundary_lead_in + _BOUNDARY_FIXED

    def kind_counts(self) -> dict[str, int]:
        """Exact number of rows of each kind in :func:`generate`'s output.

        Each of late, too_late, duplicate and malformed is ``floor(fraction * records + 0.5)`` (nearest
        integer, halves up). The malformed count is split over :data:`kit.events.REJECT_REASONS` as evenly
        as possible, the remainder going one each to the first reasons in that order. Clean records are
        the rest.

        Returns:
            ``{kind: count}`` for every kind of :data:`KINDS`, zeros included.
        """
        main = self.main_records
        late = _round_count(self.late_fraction, main)
        too_late = _round_count(self.too_late_fraction, main)
        duplicate = _round_count(self.duplicate_fraction, main)
        malformed = _round_count(self.malformed_fraction, main)
        share, extra = divmod(malformed, len(REJECT_REASONS))
        counts = {
            "clean": main - late - too_late - duplicate - malformed,
            "late": late,
            "too_late": too_late,
            "duplicate": duplicate,
            "boundary": 0,
        }
        for i, reason in enumerate(REJECT_REASONS):
            counts[reason] = share + (1 if i < extra else 0)
        if self.boundary_records:
            # The lead-ins are in order (late by 0 ms: clean); two validity probes are bad_timestamp.
            counts["clean"] += self.boundary_records - _BOUNDARY_FIXED
            counts["boundary"] += _BOUNDARY_FIXED - 2
            counts["bad_timestamp"] += 2
        return counts


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _idents(prefix: str, n: int) -> list[str]:
    # At least four digits ("u0042"), more only when n needs them, so ids sort as they number.
    width = max(4, len(str(n - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


# --------------------------------------------------------------------------------------------------------
# Generation


def generate(spec: DatasetSpec) -> pd.DataFrame:
    """Generate the dataset a spec describes, in replay order.

    Base events are per-user session streams merged in event-time order; ``late`` and ``too_late``
    records are base events whose *arrival* is delayed (their event time is untouched, so sessions stay
    intact); duplicates re-deliver clean records a little later; malformed records are inserted at random
    positions. Before returning, every record's lateness (the largest event time of the valid records
    before it, minus its own) is recomputed and checked against its kind, so a returned frame's labels
    are right by verification, not only by construction.

    Args:
        spec: what to generate.

    Returns:
        A frame with :data:`COLUMNS`: ``seq`` int64 (0..records-1), ``key`` bytes (user id, the Kafka
        key), ``value`` bytes (the Kafka value), ``timestamp_ms`` int64 (the event time; for a malformed
        record the largest event time so far), ``partition`` int32 (``key_partition(key,
        spec.partitions)``) and ``kind`` string (one of :data:`KINDS`).

    Raises:
        ConfigError: the spec's stream is too short or too sparse to place its late / too_late records,
            or runs past the year 2100.
    """
    if spec.boundary_records:
        main = generate(DatasetSpec(**{**asdict(spec), "records": spec.main_records, "boundary_records": 0}))
        return _with_boundary(spec, main)
    counts = spec.kind_counts()
    n_malformed = sum(counts[r] for r in REJECT_REASONS)
    n_dup = counts["duplicate"]
    n_base = spec.records - n_dup - n_malformed

    times, users = _session_times(spec, n_base)
    if int(times[-1]) >= EVENT_TIME_MAX_MS:
        raise _config_error(
            field="start_ms",
            expected=f"a start leaving room for {n_base} events before {EVENT_TIME_MAX_MS} (2100-01-01)",
            actual=spec.start_ms,
        )
    base_values = _base_values(spec, times, users)
    status, arrival = _disorder(spec, times, users, counts["late"], counts["too_late"])

    rng = _rng(spec.seed, "duplicates")
    originals = rng.choice(np.flatnonzero(status == 0), size=n_dup, replace=False)
    dup_arrival = times[originals] + rng.integers(1, spec.late_max_ms + 1, size=n_dup)

    # Replay order: by arrival; at equal arrival in-order records first (a delayed record is "placed
    # after records with the same arrival"), then by construction order.
    n_valid = n_base + n_dup
    all_arrival = np.concatenate([arrival, dup_arrival])
    tier = np.concatenate([(status != 0).astype(np.int8), np.ones(n_dup, np.int8)])
    order = np.lexsort((np.arange(n_valid), tier, all_arrival))
    base_of = np.concatenate([np.arange(n_base), originals])[order]
    valid_code = np.concatenate([status, np.full(n_dup, 3, np.int8)])[order]

    # Malformed records take random slots among the final positions; valid ones fill the rest in order.
    rng = _rng(spec.seed, "malformed")
    n = spec.records
    malformed_pos = np.sort(rng.choice(n, size=n_malformed, replace=False))
    is_malformed = np.zeros(n, bool)
    is_malformed[malformed_pos] = True
    valid_pos = np.flatnonzero(~is_malformed)

    event_time = np.empty(n, np.int64)
    event_time[valid_pos] = times[base_of]
    # A malformed record's Kafka timestamp is the event time "at its position": the running maximum,
    # starting from the first event so records in front of every valid one are still sane.
    running = event_time.copy()
    running[malformed_pos] = times[0]
    running = np.maximum.accumulate(running)
    timestamp = np.where(is_malformed, running, event_time)

    code = np.empty(n, np.int8)  # an index into KINDS, as are status (0-2) and 3 for duplicates above
    code[valid_pos] = valid_code
    user = np.empty(n, np.int64)
    user[valid_pos] = users[base_of]
    value = np.empty(n, object)
    value[valid_pos] = base_values[base_of]

    reason_codes = np.repeat([KINDS.index(r) for r in REJECT_REASONS], [counts[r] for r in REJECT_REASONS])
    code[malformed_pos] = rng.permutation(reason_codes.astype(np.int8))
    user[malformed_pos] = rng.integers(0, spec.users, size=n_malformed)
    value[malformed_pos] = _malformed_values(
        spec, rng, code[malformed_pos], user[malformed_pos], timestamp[malformed_pos]
    )

    user_keys = np.empty(spec.users, object)
    user_keys[:] = [u.encode() for u in _idents("u", spec.users)]
    user_partition = np.array([key_partition(k, spec.partitions) for k in user_keys], np.int32)
    kinds = np.array(KINDS, dtype=object)[code]

    _verify(spec, kinds, timestamp, value, originals, order, n_base)
    return _frame(np.arange(n, dtype=np.int64), user_keys[user], value, timestamp, user_partition[user], kinds)


BOUNDARY_COLUMNS: tuple[str, ...] = ("role", "event_time", "user", "key", "event_type", "kind", "watermark_ms")
"""Columns of :func:`boundary_plan`."""


def boundary_plan(spec: DatasetSpec, main_max_ms: int) -> pd.DataFrame:
    """The boundary block appended to a stream whose valid records reach ``main_max_ms``, in replay order.

    With ``d`` the allowed lateness (the watermark delay), ``gap`` the session gap and windows aligned to
    ``window_ms`` from the epoch, the block is:

    1. **session gap** (6 records): three users each with an event at ``T`` (1 ms after ``main_max_ms``) and one
       ``gap - 1``, ``gap`` and ``gap + 1`` ms later. Spark merges an event into a session iff it starts at
       or before the session's end (``MergingSessionsIterator``: ``sessionStart <= currentSessionEnd``), so
       the first two users have one session each and the third two. In order: no watermark decides them.
    2. **lead-in A**: at least :attr:`DatasetSpec.boundary_lead_in` records all at one event time ``M_A``
       (kind ``clean``: late by 0 ms), chosen so that the watermark ``W_A = M_A - d`` is a window end. Some users
       send views and others clicks (both inputs of ``join`` reach ``M_A``; no pair joins), spread evenly over
       the partitions of both (:func:`_lead_in_users`).
    3. **probes A** (6 views, each its own user and key), judged at ``W_A``: event times ``W_A - 1``, ``W_A``,
       ``W_A + 1`` (late by ``d + 1``, ``d``, ``d - 1``: Spark drops a record iff its event time, or its
       window's end, is ``<= watermark``; ``W_A - 1`` is in the window ending at ``W_A``, dropped from it,
       ``W_A`` in the next) and ``W_A - gap - 1``, ``W_A - gap``, ``W_A - gap + 1`` (a session is late iff its
       end ``t + gap <= watermark``).
    4. **lead-in B** at ``M_B > M_A`` with ``W_B + 1`` a window end, and **probes B** at the same six offsets
       from ``W_B``: a window ending 1 ms after the watermark keeps its records.
    5. **validity bounds** (6): ``event_time`` 2000-01-01T00:00:00Z - 1 ms (``bad_timestamp``), + 0 and + 1 ms
       (valid, decades late), 2100-01-01T00:00:00Z (``bad_timestamp``), then 2099-12-31T23:59:59.998Z and
       .999Z (valid: the stream's last events, a view and a click, so the final watermark passes every window
       and session before them, and all are emitted).

    The lead-ins make the probes exact on every engine: a probe's watermark is the oracle's (the largest
    event time before it, minus ``d``) only if the record that set that maximum is at least two batches
    before it (Spark's late-record filter uses the watermark of the previous batch, itself computed from
    the batches before that); the lead-in holds that many batches of records at the batch caps.

    Returns:
        One row per record (:data:`BOUNDARY_COLUMNS`): ``role`` in words, ``event_time``, ``user``, ``key``,
        ``event_type``, ``kind`` (``boundary``, ``clean`` or ``bad_timestamp``) and ``watermark_ms``, the
        watermark a probe is judged at (-1 for the others).
    """
    d, gap = spec.allowed_lateness_ms, spec.session_gap_ms
    grid = spec.window_ms or 1
    rest = spec.boundary_records - _BOUNDARY_FIXED
    lead_ins = ((rest + 1) // 2, rest // 2)
    rows: list[tuple[Any, ...]] = []

    t0 = main_max_ms + 1
    for i in range(3):
        rows.append(("session start", t0, f"bs{i}", f"bks{i}", "view", "boundary", -1))
    for i, off in enumerate((-1, 0, 1)):
        rows.append((f"session gap {off:+d} ms", t0 + gap + off, f"bs{i}", f"bks{i}", "view", "boundary", -1))

    anchor = t0 + gap + 2
    lead_in_users = _lead_in_users(spec.partitions)
    for part, (residue, lead_in) in enumerate(zip((0, grid - 1), lead_ins, strict=True)):
        anchor += (residue - (anchor - d)) % grid  # the first time at or after anchor with watermark = residue
        watermark = anchor - d
        name = "AB"[part]
        for i in range(lead_in):
            user, event_type = lead_in_users[i % len(lead_in_users)]
            rows.append((f"lead-in {name}", anchor, f"bf{user:02d}", f"bkf{user:02d}", event_type, "clean", -1))
        probes = [(f"watermark {off:+d} ms", watermark + off) for off in (-1, 0, 1)]
        probes += [(f"session end at watermark {off:+d} ms", watermark - gap + off) for off in (-1, 0, 1)]
        for i, (role, t) in enumerate(probes):
            rows.append((f"probe {name}: {role}", t, f"bp{name}{i}", f"bkp{name}{i}", "view", "boundary", watermark))
        anchor += 1

    for i, (role, t, kind, event_type) in enumerate((
        ("2000-01-01 - 1 ms", _FIRST_VALID_MS - 1, "bad_timestamp", "view"),
        ("2000-01-01", _FIRST_VALID_MS, "boundary", "view"),
        ("2000-01-01 + 1 ms", _FIRST_VALID_MS + 1, "boundary", "view"),
        ("2100-01-01", _LAST_VALID_MS + 1, "bad_timestamp", "view"),
        ("2100-01-01 - 2 ms", _LAST_VALID_MS - 1, "boundary", "view"),
        ("2100-01-01 - 1 ms", _LAST_VALID_MS, "boundary", "click"),
    )):
        rows.append((f"validity {role}", t, f"bv{i}", f"bkv{i}", event_type, kind, -1))
    return pd.DataFrame(rows, columns=list(BOUNDARY_COLUMNS))


def _lead_in_users(partitions: int) -> list[tuple[int, str]]:
    """``(user number, event type)`` of the lead-ins' records: a cycle of ``partitions`` views, then as many clicks.

    Record ``i``'s user is on partition ``i % partitions``, and no user sends both types.

    So every partition of the one topic, and of both of ``join``'s topics, gets an equal share of a lead-in,
    whether the replay partitions by key (users ``bf<n>`` are the Kafka keys; each user here is on the
    partition ``key_partition`` gives it) or by ``seq % partitions`` (a run of ``partitions`` records of one
    type covers every partition). A reader whose per-batch limit is shared out by each partition's backlog
    (Spark's ``maxOffsetsPerTrigger``) then keeps the partitions together in event time. With views and clicks
    alternating record by record, under ``seq`` partitioning every lead-in click was on an odd partition:
    those partitions were read ahead into the lead-in while the others still held the main stream's last
    seconds, the watermark jumped to the lead-in's, and modern ``join`` dropped those seconds' clicks as late
    (225 of 1,007 pairs missing on the messy profile).
    """
    users: dict[tuple[int, str], int] = {}  # (partition, event type) -> user number; no user sends both types
    n = 0
    while len(users) < 2 * partitions:
        partition = key_partition(f"bf{n:02d}".encode(), partitions)
        users.setdefault((partition, "view" if (partition, "view") not in users else "click"), n)
        n += 1
    return [(users[(p, kind)], kind) for kind in ("view", "click") for p in range(partitions)]


def _with_boundary(spec: DatasetSpec, main: pd.DataFrame) -> pd.DataFrame:
    """``main`` (the stream of ``main_records``) followed by the boundary block of :func:`boundary_plan`."""
    valid = main["kind"].isin(list(_VALID_KINDS)).to_numpy()
    plan = boundary_plan(spec, int(main["timestamp_ms"].to_numpy()[valid].max()))
    ads = _idents("ad-", spec.ads)
    head = f'{{"event_id":"b{spec.seed}-'
    values = [
        f'{head}{i:010x}","user":"{user}","key":"{key}","ad_id":"{ads[i % spec.ads]}",'
        f'"ad_type":"{AD_TYPES[i % len(AD_TYPES)]}","event_type":"{event_type}","event_time":{t}}}'.encode()
        for i, (user, key, event_type, t) in enumerate(
            zip(plan["user"], plan["key"], plan["event_type"], plan["event_time"].tolist(), strict=True)
        )
    ]
    kinds = plan["kind"].to_numpy(dtype=object)
    times = plan["event_time"].to_numpy(np.int64)
    bad = kinds == "bad_timestamp"
    # A malformed record's Kafka timestamp is the largest event time so far, as in the main stream.
    running = np.maximum.accumulate(np.where(bad, np.iinfo(np.int64).min, times))
    timestamp = np.where(bad, np.maximum(running, int(main["timestamp_ms"].max())), times)
    keys = [u.encode() for u in plan["user"]]
    n = len(main)
    block = _frame(
        np.arange(n, n + len(plan), dtype=np.int64), np.array(keys, dtype=object), np.array(values, dtype=object),
        timestamp,
        np.array([key_partition(k, spec.partitions) for k in keys], np.int32), kinds,
    )
    frame = pd.concat([main, block], ignore_index=True)
    _verify_boundary(spec, frame, plan)
    check_labels(block["kind"], block["value"], f"generate(seed={spec.seed}) boundary block")
    return frame


def _verify_boundary(spec: DatasetSpec, frame: pd.DataFrame, plan: pd.DataFrame) -> None:
    """Refuse a block whose probes are not judged at their watermark, or whose lead-in is too short."""
    valid = frame["kind"].isin(list(_VALID_KINDS)).to_numpy()
    times = frame["timestamp_ms"].to_numpy(np.int64)
    floor = np.iinfo(np.int64).min
    running = np.maximum.accumulate(np.where(valid, times, floor))
    prior = np.concatenate([[floor], running[:-1]])
    start = len(frame) - len(plan)
    problems = []
    for i, (role, watermark) in enumerate(zip(plan["role"], plan["watermark_ms"].tolist(), strict=True)):
        row = start + i
        if watermark < 0:
            continue
        if prior[row] - spec.allowed_lateness_ms != watermark:
            problems.append(f"{role} (seq {row}) is judged at {prior[row] - spec.allowed_lateness_ms}, not {watermark}")
        first = int(np.flatnonzero(valid & (times == prior[row]))[0])
        if row - first < spec.boundary_lead_in:
            problems.append(f"{role} (seq {row}) is {row - first} records after the maximum it is judged by")
    if problems:
        raise DatasetError(
            path=f"generate(seed={spec.seed})",
            problem="the boundary block failed verification: " + "; ".join(problems[:3]),
            fix="This is a bug in kit.dataset; report it with the DatasetSpec",
        )


def _session_model(spec: DatasetSpec) -> tuple[float, float, float]:
    """Mean in-session gap, mean events per session and mean between-session gap, all in ms.

    The rate equation is ``mean_events * mean_interval = (mean_events - 1) * in_gap + off_gap``, where
    ``mean_interval`` is one user's share of the stream (``1000 * users / events_per_second``). Sessions
    aim at a few dozen events; when users are so busy that a between-session gap (at least
    ``session_gap_ms + session_margin_ms``) cannot be paid for by a few dozen events, sessions grow
    instead (in-session gaps at half the mean interval). When users are so idle that in-session gaps
    would approach their cap, the between-session gaps grow instead.
    """
    interval = 1000.0 * spec.users / spec.events_per_second
    gap, margin = spec.session_gap_ms, spec.session_margin_ms
    off_gap = gap + margin + gap / 2
    in_cap = (gap - margin) / 4  # keeps the clip at gap - margin from biasing the mean by more than ~2 %
    events = _SESSION_EVENTS_TARGET
    in_gap = (events * interval - off_gap) / (events - 1)
    if in_gap < interval / 2:
        in_gap = min(interval / 2, in_cap)
        events = (off_gap - in_gap) / (interval - in_gap)
    elif in_gap > in_cap:
        in_gap = in_cap
        off_gap = events * interval - (events - 1) * in_gap
    return in_gap, events, off_gap


def _session_times(spec: DatasetSpec, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` events of all users' session streams, sorted by (event time, user).

    Each user is a renewal process in integer ms: in-session gaps are geometric (the integer
    exponential) clipped to ``gap - margin``; a session ends after each event with probability
    ``1 / mean_events``; between-session gaps are ``gap + margin`` plus a geometric extra. Users start
    in a stationary phase (in a session with the share of time users spend in one, else part-way through
    a between-session gap, drawn length-biased), so the stream has its full rate from ``start_ms`` on.
    """
    rng = _rng(spec.seed, "sessions")
    in_gap, events, off_gap = _session_model(spec)
    in_max = spec.session_gap_ms - spec.session_margin_ms
    off_min = spec.session_gap_ms + spec.session_margin_ms
    p_in = 1.0 / (in_gap + 1.0)
    p_off = 1.0 / (off_gap - off_min + 1.0)
    p_end = 1.0 / events
    n_users = spec.users

    def gaps(k: int) -> np.ndarray:
        out = np.minimum(rng.geometric(p_in, (n_users, k)) - 1, in_max)
        ends = rng.random((n_users, k)) < p_end
        out[ends] = off_min + rng.geometric(p_off, int(ends.sum())) - 1
        return out

    in_session_share = (events - 1) * in_gap / ((events - 1) * in_gap + off_gap)
    starts_in_session = rng.random(n_users) < in_session_share
    first_in = np.minimum(rng.geometric(p_in, n_users) - 1, in_max)
    # Residual of a length-biased "off_min + geometric extra" gap: uniform over the fixed part with
    # probability off_min / off_gap, else the fixed part plus a fresh (memoryless) extra.
    uniform_part = rng.random(n_users) < off_min / off_gap
    first_off = np.where(
        uniform_part,
        rng.integers(0, off_min, n_users),
        off_min + rng.geometric(p_off, n_users) - 1,
    )
    first = spec.start_ms + np.where(starts_in_session, first_in, first_off)

    k = max(2, math.ceil(n / n_users * 1.25) + 8)
    times = np.hstack([first[:, None], first[:, None] + np.cumsum(gaps(k - 1), axis=1)])
    while True:
        if times.size >= n:
            flat_t = times.ravel()
            flat_u = np.repeat(np.arange(n_users, dtype=np.int64), times.shape[1])
            take = np.lexsort((flat_u, flat_t))[:n]
            cut = flat_t[take[-1]]
            # Every user's generated stream must run past the cut, or events it has not generated yet
            # would belong among the first n.
            if times[:, -1].min() > cut:
                return flat_t[take], flat_u[take]
        more = max(8, times.shape[1] // 2)
        times = np.hstack([times, times[:, -1:] + np.cumsum(gaps(more), axis=1)])


def _base_values(spec: DatasetSpec, times: np.ndarray, users: np.ndarray) -> np.ndarray:
    rng = _rng(spec.seed, "fields")
    n = len(times)
    if spec.key_skew == "zipf":
        weights = np.arange(1, spec.keys + 1, dtype=np.float64) ** -spec.zipf_exponent
        cdf = np.cumsum(weights)
        keys = np.minimum(np.searchsorted(cdf / cdf[-1], rng.random(n), side="right"), spec.keys - 1)
    else:
        keys = rng.integers(0, spec.keys, n)
    ads = rng.integers(0, spec.ads, n)
    ad_types = rng.integers(0, len(AD_TYPES), n)
    event_types = rng.integers(0, len(EVENT_TYPES), n)

    user_s = _idents("u", spec.users)
    key_s = _idents("k", spec.keys)
    ad_s = _idents("ad-", spec.ads)
    head = f'{{"event_id":"e{spec.seed}-'
    # f-strings rather than json.dumps: every piece is a known-safe ASCII token, and this runs per record.
    values = np.empty(n, object)
    values[:] = [
        f'{head}{i:010x}","user":"{user_s[u]}","key":"{key_s[k]}","ad_id":"{ad_s[a]}",'
        f'"ad_type":"{AD_TYPES[at]}","event_type":"{EVENT_TYPES[et]}","event_time":{t}}}'.encode()
        for i, u, k, a, at, et, t in zip(
            range(n),
            users.tolist(),
            keys.tolist(),
            ads.tolist(),
            ad_types.tolist(),
            event_types.tolist(),
            times.tolist(),
            strict=True,
        )
    ]
    return values


def _disorder(
    spec: DatasetSpec, times: np.ndarray, users: np.ndarray, n_late: int, n_too_late: int
) -> tuple[np.ndarray, np.ndarray]:
    """Choose the late and too_late base events and their arrival times.

    Only in-order records raise the running maximum event time (delayed records and duplicates never
    exceed it), so a delayed record arriving at ``a`` has lateness ``M(a) - t``, with ``M(a)`` the
    largest in-order event time ``<= a``. That makes the bands exact to arrange: a late record arrives no
    earlier than the first in-order event after it, which must lie within ``late_max_ms``; a too_late one
    no earlier than the first in-order event at least ``too_late_min_ms`` after it. A too_late record is
    also chosen only inside a session, between two kept events of its user at most ``gap - margin``
    apart, so an engine that drops it sees the same session boundaries as one that keeps it. Candidates
    that cannot be placed (near the end of the stream, or whose in-order neighbour was itself chosen)
    become clean and are replaced, in a fixed random priority order, until all fit.

    Returns:
        ``status`` per base event (0 clean, 1 late, 2 too_late) and its ``arrival`` time.
    """
    n = len(times)
    status = np.zeros(n, np.int8)  # 3 marks a rejected candidate; it stays in order
    if n_late + n_too_late == 0:
        return status, times.copy()
    rng = _rng(spec.seed, "disorder")
    late_max, too_late_min = spec.late_max_ms, spec.too_late_min_ms
    priority = rng.permutation(n)

    by_user = np.lexsort((np.arange(n), users))
    same = users[by_user[1:]] == users[by_user[:-1]]
    prev = np.full(n, -1)
    nxt = np.full(n, -1)
    prev[by_user[1:][same]] = by_user[:-1][same]
    nxt[by_user[:-1][same]] = by_user[1:][same]
    inside = (prev >= 0) & (nxt >= 0)
    inside[inside] = times[nxt[inside]] - times[prev[inside]] <= spec.session_gap_ms - spec.session_margin_ms

    for _ in range(_MAX_DISORDER_ROUNDS):
        for code, wanted in ((2, n_too_late), (1, n_late)):
            need = wanted - int((status == code).sum())
            if need <= 0:
                continue
            last_in_order = times[(status == 0) | (status == 3)].max()
            open_ = status[priority] == 0
            if code == 2:
                open_ &= inside[priority] & (times[priority] + too_late_min <= last_in_order)
            else:
                open_ &= times[priority] < last_in_order
            chosen = priority[open_][:need]
            if len(chosen) < need:
                raise _too_sparse(spec, code, wanted)
            status[chosen] = code
        in_order = np.sort(times[(status == 0) | (status == 3)])
        late = np.flatnonzero(status == 1)
        too_late = np.flatnonzero(status == 2)
        next_after = np.searchsorted(in_order, times[late], side="right")
        late_reach = np.where(
            next_after < len(in_order), in_order[np.minimum(next_after, len(in_order) - 1)], np.iinfo(np.int64).max
        )
        far_enough = np.searchsorted(in_order, times[too_late] + too_late_min, side="left")
        bad = np.concatenate(
            [
                late[late_reach - times[late] > late_max],
                # An adjacent pair of too_late records would leave a gap of two; reject the later one.
                too_late[(far_enough >= len(in_order)) | (status[prev[too_late]] == 2)],
            ]
        )
        if bad.size == 0:
            break
        status[bad] = 3
    else:
        raise _too_sparse(spec, 2 if n_too_late else 1, n_too_late or n_late)

    arrival = times.copy()
    arrival[late] = np.maximum(times[late] + rng.integers(1, late_max + 1, len(late)), late_reach)
    arrival[too_late] = np.maximum(
        times[too_late] + rng.integers(too_late_min, too_late_min + _TOO_LATE_SPREAD_MS + 1, len(too_late)),
        in_order[far_enough],
    )
    status[status == 3] = 0
    return status, arrival


def _too_sparse(spec: DatasetSpec, code: int, wanted: int) -> ConfigError:
    kind, field = ("too_late", "too_late_fraction") if code == 2 else ("late", "late_fraction")
    need = spec.too_late_min_ms if code == 2 else spec.late_max_ms
    span_s = spec.records / spec.events_per_second
    return _config_error(
        field,
        f"a stream long and dense enough to place {wanted} {kind} records "
        f"(each needs an in-order record {'at least' if code == 2 else 'at most'} {need} ms after it)",
        getattr(spec, field),
        f"The stream spans about {span_s:g} s of event time: raise records, lower events_per_second, "
        f"or lower {field} or allowed_lateness_ms.",
    )


# Invalid UTF-8 put inside a JSON string: a lone 0xff/0xfe, a bad continuation byte, an encoded UTF-16
# surrogate, and a sequence cut short.
_BAD_UTF8 = (b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82")
# One millisecond outside each validity bound among them, as literals (2000-01-01T00:00:00Z - 1 ms and
# 2100-01-01T00:00:00Z), not kit.events' constants: a parser whose bound slipped by a millisecond then
# disagrees with these labels (check_labels), whichever constant it slipped in.
_BAD_TIMESTAMPS = (-1, 0, 10**16, 946_684_799_999, 4_102_444_800_000)


def _malformed_values(
    spec: DatasetSpec, rng: np.random.Generator, codes: np.ndarray, users: np.ndarray, times: np.ndarray
) -> list[bytes]:
    n = len(codes)
    user_s = _idents("u", spec.users)
    keys = rng.integers(0, spec.keys, n).tolist()
    ads = rng.integers(0, spec.ads, n).tolist()
    ad_types = rng.integers(0, len(AD_TYPES), n).tolist()
    event_types = rng.integers(0, len(EVENT_TYPES), n).tolist()
    variants = rng.integers(0, 12, n).tolist()
    cuts = rng.random(n).tolist()
    key_s = _idents("k", spec.keys)
    ad_s = _idents("ad-", spec.ads)
    out: list[bytes] = []
    for i, (code, u, t) in enumerate(zip(codes.tolist(), users.tolist(), times.tolist(), strict=True)):
        # A prefix no base event_id can have ("m" rather than "e"), so no malformed record collides with one.
        fields_ = {
            "event_id": f'"m{spec.seed}-{i:010x}"',
            "user": f'"{user_s[u]}"',
            "key": f'"{key_s[keys[i]]}"',
            "ad_id": f'"{ad_s[ads[i]]}"',
            "ad_type": f'"{AD_TYPES[ad_types[i]]}"',
            "event_type": f'"{EVENT_TYPES[event_types[i]]}"',
            "event_time": str(t),
        }
        reason = KINDS[code]
        variant = variants[i]
        if reason == "bad_utf8":
            encoded = _object_text(fields_).encode()
            bad = _BAD_UTF8[variant % len(_BAD_UTF8)]
            at = encoded.index(b'","user"')
            out.append(encoded[:at] + bad + encoded[at:])
        elif reason == "bad_json":
            text = _object_text(fields_)
            if variant % 2:
                out.append(f"[{text}]".encode())  # valid JSON, but not an object
            else:
                out.append(text[: 1 + int(cuts[i] * (len(text) - 1))].encode())  # truncated: never valid
        elif reason == "missing_field":
            which = variant % 3
            if which == 0:
                del fields_["event_time"]
            elif which == 1:
                del fields_["user"]
            else:
                fields_["event_time"] = f'"{t}"'  # present, but a string: the wrong type counts as missing
            out.append(_object_text(fields_).encode())
        else:
            fields_["event_time"] = str(_BAD_TIMESTAMPS[variant % len(_BAD_TIMESTAMPS)])
            out.append(_object_text(fields_).encode())
    return out


def _object_text(literals: dict[str, str]) -> str:
    return "{" + ",".join(f'"{name}":{literal}' for name, literal in literals.items()) + "}"


def _lateness(timestamp: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Max event time of the valid records before each row minus its own; 0 where none come before."""
    floor = np.iinfo(np.int64).min
    running = np.maximum.accumulate(np.where(valid, timestamp, floor))
    before = np.concatenate([[floor], running[:-1]])
    return np.where(before == floor, 0, before - timestamp)


def _verify(
    spec: DatasetSpec,
    kinds: np.ndarray,
    timestamp: np.ndarray,
    value: np.ndarray,
    originals: np.ndarray,
    order: np.ndarray,
    n_base: int,
) -> None:
    """Refuse to return a frame whose labels are wrong (a generator bug, never a user error)."""
    valid = np.isin(kinds, list(_VALID_KINDS))
    lateness = _lateness(timestamp, valid)
    bands = {
        "clean": lateness <= 0,
        "late": (lateness > 0) & (lateness <= spec.late_max_ms),
        "too_late": lateness >= spec.too_late_min_ms,
        "duplicate": (lateness >= 0) & (lateness <= spec.late_max_ms),
    }
    problems = []
    for kind, ok in bands.items():
        wrong = int(((kinds == kind) & ~ok).sum())
        if wrong:
            problems.append(f"{wrong} {kind} records outside their lateness band")
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    if len(originals) and not (position[originals] < position[n_base:]).all():
        problems.append("a duplicate precedes its original")
    if problems:
        raise DatasetError(
            path=f"generate(seed={spec.seed})",
            problem="generated labels failed verification: " + "; ".join(problems),
            fix="This is a bug in kit.dataset; report it with the DatasetSpec",
        )
    check_labels(kinds, value, f"generate(seed={spec.seed})")


_VALID_CHECKED = 5_000
"""How many valid records :func:`check_labels` parses at most (every malformed one is parsed)."""


def check_labels(kinds: np.ndarray | pd.Series, values: np.ndarray | pd.Series, where: str) -> None:
    """Hold every record's ``kind`` to both parsers: valid kinds must parse as valid, malformed ones with their reason.

    The parsers are the engines' (:func:`kit.events.parse_event`) and the oracle's
    (:func:`kit.workloads._contract.read_record`, written apart from it). The labels come from how the generator
    built each record, so a parser that disagrees with them has drifted from the event contract: the error names
    it, with the first records it gets wrong. Run on every generated dataset and on every ``--dataset FILE``.

    Raises:
        DatasetError: a parser disagrees with the labels (``where`` names the dataset).
    """
    from kit.workloads._contract import read_record  # here: kit.workloads imports this module

    kinds = np.asarray(kinds, dtype=object)
    values = np.asarray(values, dtype=object)
    valid = np.isin(kinds, list(_VALID_KINDS))
    # Every malformed record, and valid ones spread evenly over the dataset (all of them up to _VALID_CHECKED):
    # valid records share one shape, so a parser that rejects one rejects them all, and parsing a million twice
    # would cost seconds per dataset.
    spread = np.flatnonzero(valid)
    spread = spread[np.linspace(0, len(spread) - 1, _VALID_CHECKED).astype(int)] if len(spread) > _VALID_CHECKED \
        else spread
    rows = np.sort(np.concatenate([np.flatnonzero(~valid), spread]))
    expected = np.where(valid[rows], None, kinds[rows])
    problems = []
    for name, parse in (("kit.events.parse_event (the engines' parser)", parse_event),
                        ("kit.workloads._contract.read_record (the oracle's parser)", read_record)):
        got = np.array([parse(v)[1] for v in values[rows]], dtype=object)
        wrong = np.flatnonzero(got != expected)
        if len(wrong):
            shown = ", ".join(f"seq {rows[i]} {kinds[rows[i]]} read as {got[i] or 'valid'}" for i in wrong[:3].tolist())
            problems.append(f"{name} disagrees on {len(wrong):,} records ({shown})")
    if problems:
        raise DatasetError(
            path=where,
            problem="the labels and the parsers disagree: " + "; ".join(problems),
            fix="That parser has drifted from the event contract (docs/kit.md, 'kit.events'); fix it, not the dataset",
        )


def ad_campaigns(spec: DatasetSpec) -> dict[str, str]:
    """Map every ``ad_id`` to its campaign, for the Yahoo Streaming Benchmark join.

    Ads are shuffled by the spec's seed and dealt round-robin to the campaigns, so each campaign gets
    ``ads / campaigns`` ads (one more for the first ``ads % campaigns`` positions when it does not
    divide).

    Args:
        spec: supplies ``ads``, ``campaigns`` and ``seed``.

    Returns:
        ``{"ad-0013": "c-0003", ...}`` for every ad, in ad order.
    """
    order = _rng(spec.seed, "campaigns").permutation(spec.ads)
    campaign_of = np.empty(spec.ads, np.int64)
    campaign_of[order] = np.arange(spec.ads) % spec.campaigns
    campaigns = _idents("c-", spec.campaigns)
    return {ad: campaigns[c] for ad, c in zip(_idents("ad-", spec.ads), campaign_of.tolist(), strict=True)}


# --------------------------------------------------------------------------------------------------------
# Files


def _frame(
    seq: np.ndarray, key: np.ndarray, value: np.ndarray, timestamp: np.ndarray, partition: np.ndarray, kind: Any,
    topic: Any = None,
) -> pd.DataFrame:
    # One constructor for generate() and both readers, so a round trip compares equal dtype for dtype.
    columns = {
        "seq": np.asarray(seq, np.int64),
        "key": np.asarray(key, object),
        "value": np.asarray(value, object),
        "timestamp_ms": np.asarray(timestamp, np.int64),
        "partition": np.asarray(partition, np.int32),
        "kind": pd.array(np.asarray(kind, object), dtype="string"),
    }
    if topic is not None:
        columns[TOPIC] = pd.array(np.asarray(topic, object), dtype="string")
    return pd.DataFrame(columns)


def _format_of(path: Path) -> str:
    fmt = _FILE_FORMATS.get(path.suffix)
    if fmt is None:
        raise DatasetError(
            path,
            f"unknown dataset file extension {path.suffix!r}",
            "Use a path ending in .parquet or .jsonl",
        )
    return fmt


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + layout.MANIFEST_SUFFIX)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _check_frame(df: pd.DataFrame, path: Path) -> None:
    if list(df.columns) not in (list(COLUMNS), [*COLUMNS, TOPIC]):
        raise DatasetError(
            path, f"has columns {list(df.columns)}, expected {list(COLUMNS)} (and optionally {TOPIC!r})",
            "Write the frame generate() returned",
        )
    if TOPIC in df and not all(type(t) is str and t for t in df[TOPIC].astype(object)):
        raise DatasetError(path, f"column {TOPIC!r} holds something other than topic names")
    if not np.array_equal(df["seq"].to_numpy(), np.arange(len(df))):
        raise DatasetError(path, "rows are not in seq order 0..N-1", "Write the frame generate() returned, unsorted")
    unknown = set(pd.unique(df["kind"].astype(object))) - set(KINDS)
    if unknown:
        raise DatasetError(path, f"unknown kinds {sorted(map(str, unknown))}; valid kinds: {', '.join(KINDS)}")
    for column in ("key", "value"):
        if not all(type(v) is bytes for v in df[column].to_numpy()):
            raise DatasetError(path, f"column {column!r} holds something other than bytes")


def write_dataset(df: pd.DataFrame, path: str | os.PathLike[str], spec: DatasetSpec) -> dict[str, Any]:
    """Write a dataset file and its manifest next to it.

    The format follows the extension: ``.parquet`` (pyarrow, explicit schema, zstd, no pandas metadata) or
    ``.jsonl`` (one object per line: ``seq``, ``partition``, ``timestamp_ms``, ``kind``, ``key``,
    ``value``, with ``value_b64`` (or ``key_b64``) replacing the text when the bytes are not UTF-8). The
    manifest ``<path>.manifest.json`` records the file's sha256, the spec, and counts per kind and
    partition. Same frame and spec give byte-identical files: nothing time- or host-dependent is written.
    Both files are written to a temporary name and renamed into place, so a crash leaves no half file.

    Args:
        df: a frame as :func:`generate` returns it for ``spec``.
        path: where to write; parent directories are created.
        spec: the spec ``df`` was generated from, recorded in the manifest.

    Returns:
        The manifest as a dict.

    Raises:
        DatasetError: unknown extension, or a frame that is not a dataset of ``spec``.
    """
    path = Path(path)
    _format_of(path)
    _check_frame(df, path)
    if len(df) != spec.records:
        raise DatasetError(
            path,
            f"the frame has {len(df)} rows but spec.records is {spec.records}",
            "Write generate(spec) with its own spec",
        )
    partition = df["partition"].to_numpy()
    key = df["key"].to_numpy()
    expected = {k: key_partition(k, spec.partitions) for k in pd.unique(key)}
    if not np.array_equal(partition, np.array([expected[k] for k in key], np.int32)):
        raise DatasetError(
            path,
            f"the partition column is not key_partition(key, {spec.partitions})",
            "Write generate(spec) with its own spec",
        )

    kinds = df["kind"].to_numpy(dtype=object)
    valid = np.isin(kinds, list(_VALID_KINDS))
    valid_times = df["timestamp_ms"].to_numpy()[valid]
    return write_files(df, path, {
        "spec": asdict(spec),
        "counts": {kind: int((kinds == kind).sum()) for kind in KINDS},
        "event_time_ms": {
            "min": int(valid_times.min()) if valid_times.size else None,
            "max": int(valid_times.max()) if valid_times.size else None,
        },
        "partitions": {str(p): int(n) for p, n in enumerate(np.bincount(partition, minlength=spec.partitions))},
        "boundary": _boundary_manifest(spec, df),
    })


def write_files(df: pd.DataFrame, path: str | os.PathLike[str], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Write a dataset frame and a manifest of ``fields`` plus the file's name, format, sha256 and record count.

    The writing half of :func:`write_dataset`, for generators with their own spec (:mod:`kit.nexmark`): the same
    file formats, the same atomic writes, a manifest :func:`read_dataset` checks the file against.

    Raises:
        DatasetError: unknown extension, or a frame that is not a dataset frame.
    """
    path = Path(path)
    fmt = _format_of(path)
    _check_frame(df, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, lambda tmp: (_write_parquet if fmt == "parquet" else _write_jsonl)(df, tmp))
    manifest = {
        **fields,
        "format": DATASET_FORMAT,
        "file": path.name,
        "format_of_file": fmt,
        "sha256": _sha256(path),
        "records": len(df),
    }
    text = json.dumps(manifest, sort_keys=True, indent=2) + "\n"
    _write_atomically(_manifest_path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return manifest


def _boundary_manifest(spec: DatasetSpec, df: pd.DataFrame) -> dict[str, Any] | None:
    """Where the boundary block starts, its lead-ins and the watermarks its probes are judged at (None: no block)."""
    if not spec.boundary_records:
        return None
    main = df.iloc[: spec.main_records]
    plan = boundary_plan(spec, int(main["timestamp_ms"][main["kind"].isin(list(_VALID_KINDS))].max()))
    return {
        "first_seq": spec.main_records,
        "records": spec.boundary_records,
        "lead_in_records": [int((plan["role"] == f"lead-in {p}").sum()) for p in "AB"],
        "watermarks_ms": sorted({int(w) for w in plan["watermark_ms"] if w >= 0}),
    }


def _write_atomically(path: Path, write: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_arrays(
        [
            pa.array(df["seq"].to_numpy(np.int64), pa.int64()),
            pa.array(df["key"].to_numpy(object), pa.binary()),
            pa.array(df["value"].to_numpy(object), pa.binary()),
            pa.array(df["timestamp_ms"].to_numpy(np.int64), pa.int64()),
            pa.array(df["partition"].to_numpy(np.int32), pa.int32()),
            pa.array(df["kind"].to_numpy(object), pa.string()),
            *([pa.array(df[TOPIC].to_numpy(object), pa.string())] if TOPIC in df else []),
        ],
        schema=_ARROW_SCHEMA_WITH_TOPIC if TOPIC in df else _ARROW_SCHEMA,
    )
    # Every setting that shapes the bytes is pinned, so a pyarrow default change shows up as a test
    # failure rather than as silently different checksums.
    pq.write_table(
        table,
        path,
        row_group_size=262_144,
        version="2.6",
        data_page_version="1.0",
        use_dictionary=["key", "kind", "partition", TOPIC],
        compression="zstd",
        compression_level=3,
        write_statistics=True,
        store_schema=True,
    )


def _utf8_or_none(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _texts(raws: list[bytes]) -> list[str | None]:
    try:
        return [raw.decode("utf-8") for raw in raws]
    except UnicodeDecodeError:
        return [_utf8_or_none(raw) for raw in raws]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _write_jsonl(df: pd.DataFrame, path: Path) -> None:
    keys = df["key"].tolist()
    values = df["value"].tolist()
    enc = encode_basestring_ascii  # C-accelerated JSON string quoting; ASCII output keeps files portable
    key_field = [
        f'"key":{enc(t)}' if t is not None else f'"key_b64":"{_b64(r)}"'
        for t, r in zip(_texts(keys), keys, strict=True)
    ]
    kind_json = {kind: enc(kind) for kind in KINDS}
    topics = [f'"{TOPIC}":{enc(t)},' for t in df[TOPIC].tolist()] if TOPIC in df else [""] * len(df)
    lines = [
        f'{{"seq":{s},"partition":{p},"timestamp_ms":{ts},"kind":{kind_json[k]},{tp}{kf},'
        + (f'"value":{enc(t)}}}\n' if t is not None else f'"value_b64":"{_b64(r)}"}}\n')
        for s, p, ts, k, tp, kf, t, r in zip(
            df["seq"].tolist(),
            df["partition"].tolist(),
            df["timestamp_ms"].tolist(),
            df["kind"].tolist(),
            topics,
            key_field,
            _texts(values),
            values,
            strict=True,
        )
    ]
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.writelines(lines)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the manifest of a dataset file.

    Args:
        path: the dataset file (its manifest is ``<path>.manifest.json``) or the manifest itself.

    Returns:
        The manifest dict :func:`write_dataset` wrote.

    Raises:
        DatasetError: the manifest is missing, not JSON, or not a ``dmk-dataset/1`` manifest.
    """
    path = Path(path)
    manifest_path = path if path.name.endswith(layout.MANIFEST_SUFFIX) else _manifest_path(path)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(
            manifest_path, "no manifest found", _REGENERATE + ", which writes the manifest too"
        ) from None
    except (OSError, ValueError) as err:
        raise DatasetError(manifest_path, f"the manifest cannot be read ({err})", _REGENERATE) from None
    if not isinstance(manifest, dict) or manifest.get("format") != DATASET_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DatasetError(manifest_path, f"not a {DATASET_FORMAT} manifest (format {found!r})", _REGENERATE)
    return manifest


def read_dataset(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a dataset file back into the frame :func:`generate` returned.

    When a manifest sits next to the file, the file's sha256 must match it first.

    Args:
        path: a ``.parquet`` or ``.jsonl`` dataset file.

    Returns:
        The frame, equal (values and dtypes) to the one that was written.

    Raises:
        DatasetError: unknown extension; file missing or unreadable; not a dataset; or changed since it
            was generated (sha256 differs from the manifest's).
    """
    path = Path(path)
    fmt = _format_of(path)
    if not path.is_file():
        problem = "is a directory, not a file" if path.exists() else "does not exist"
        raise DatasetError(
            path, problem, "Check the path, or generate it with kit.dataset.generate_to_file(spec, path)"
        )
    if _manifest_path(path).exists():
        manifest = read_manifest(path)
        actual = _sha256(path)
        if actual != manifest.get("sha256"):
            raise DatasetError(
                path,
                f"the file changed since generation (sha256 {actual}, the manifest says {manifest.get('sha256')})",
                _REGENERATE + " (both the file and its manifest)",
            )
    df = _read_parquet(path) if fmt == "parquet" else _read_jsonl(path)
    _check_frame(df, path)
    return df


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise DatasetError(path, f"is not a readable Parquet file ({err})", _REGENERATE) from None
    got = [(f.name, f.type) for f in table.schema]
    want = [(f.name, f.type) for f in _ARROW_SCHEMA]
    if got not in (want, [*want, (TOPIC, pa.string())]):
        raise DatasetError(path, f"has schema {got}, expected {want} (and optionally {TOPIC!r})", _REGENERATE)
    if any(table[name].null_count for name in table.column_names):
        raise DatasetError(path, "holds null values", _REGENERATE)
    topic = table[TOPIC].to_numpy(zero_copy_only=False) if TOPIC in table.column_names else None
    seq, key, value, timestamp, partition, kind = (table[name].to_numpy() for name in COLUMNS)
    return _frame(seq, key, value, timestamp, partition, kind, topic=topic)


_JSONL_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("partition", pa.int32()),
        ("timestamp_ms", pa.int64()),
        ("kind", pa.string()),
        (TOPIC, pa.string()),
        ("key", pa.string()),
        ("key_b64", pa.string()),
        ("value", pa.string()),
        ("value_b64", pa.string()),
    ]
)


def _read_jsonl(path: Path) -> pd.DataFrame:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 1))
            last = f.read(1)
    except OSError as err:
        raise DatasetError(path, f"cannot be read ({err})", _REGENERATE) from None
    if size == 0:
        raise DatasetError(path, "is empty", _REGENERATE)
    if last != b"\n":
        raise DatasetError(path, "the last line is not terminated (truncated file?)", _REGENERATE)
    # pyarrow's JSON reader rather than json.loads per line: several times faster (changes.md §19),
    # and the explicit schema rejects wrong types and unknown fields for us.
    try:
        table = pa_json.read_json(
            path,
            parse_options=pa_json.ParseOptions(
                explicit_schema=_JSONL_SCHEMA, unexpected_field_behavior="error", newlines_in_values=False
            ),
        )
    except (OSError, pa.ArrowException) as err:
        raise DatasetError(path, f"is not a dataset JSON Lines file ({err})", _REGENERATE) from None
    for name in ("seq", "partition", "timestamp_ms", "kind"):
        if table[name].null_count:
            raise DatasetError(path, f"a line lacks {name!r}", _REGENERATE)
    key = _text_or_b64(table, "key", path)
    value = _text_or_b64(table, "value", path)
    missing_topics = table[TOPIC].null_count
    if 0 < missing_topics < len(table):
        raise DatasetError(path, f"{missing_topics} lines lack {TOPIC!r} and the others have it", _REGENERATE)
    return _frame(
        table["seq"].to_numpy(),
        key,
        value,
        table["timestamp_ms"].to_numpy(),
        table["partition"].to_numpy(),
        table["kind"].to_numpy(zero_copy_only=False),
        topic=table[TOPIC].to_numpy(zero_copy_only=False) if missing_topics == 0 else None,
    )


def _text_or_b64(table: pa.Table, name: str, path: Path) -> np.ndarray:
    text, b64 = table[name], table[f"{name}_b64"]
    both_or_none = pc.equal(pc.is_null(text), pc.is_null(b64))
    if pc.any(both_or_none).as_py():
        bad = pc.index(both_or_none, True).as_py()
        raise DatasetError(path, f"line {bad + 1} needs exactly one of {name!r} and {name + '_b64'!r}", _REGENERATE)
    out = pc.cast(text, pa.binary()).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(pc.is_null(text).to_numpy(zero_copy_only=False)).tolist():
        try:
            out[i] = base64.b64decode(b64[i].as_py(), validate=True)
        except ValueError:
            raise DatasetError(path, f"line {i + 1} has invalid base64 in {name + '_b64'!r}", _REGENERATE) from None
    return cast(np.ndarray, out)


def generate_to_file(spec: DatasetSpec, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Generate the dataset of ``spec`` and write it (and its manifest) to ``path``.

    Args:
        spec: what to generate.
        path: a ``.parquet`` or ``.jsonl`` path.

    Returns:
        The manifest, as :func:`write_dataset` returns it.
    """
    return write_dataset(generate(spec), path, spec)
