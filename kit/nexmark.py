"""The Nexmark event generator: persons, auctions and bids as the reference generator makes them, as a dataset.

Nexmark is the streaming benchmark Beam runs on every runner and nexmark/nexmark runs on Flink. This module
reproduces the *behaviour* of Beam's generator (``sdks/java/testing/nexmark/.../sources/generator``, see
docs/nexmark.md for the files and commit) with numpy, vectorized: the event kind of each event number by the
1 : 3 : 46 epoch rule, the person / auction id spaces and their "last id so far", the hot sellers, bidders and
auctions, the auction lengths, the prices, the event-time spacing of the configured rate (square or sine
shape) and the out-of-order groups. The fields are random draws of numpy's PCG64 seeded by
:attr:`NexmarkSpec.seed`: deterministic per seed (same spec, byte-identical file), but not the random stream
of Beam's ``java.util.Random``, so field values differ from Beam's while ids, kinds, times and every
distribution match.

The result is a kit dataset (:mod:`kit.dataset`'s columns and ``kind`` labels, its file formats and manifest),
so ``dmk replay`` produces it to Kafka. Two layouts, as the reference offers: ``"one"`` (one topic, each JSON
value carries ``"type": "person" | "auction" | "bid"``) or ``"three"`` (a ``topic`` column routes each record
to ``persons``, ``auctions`` or ``bids``; values without ``type``). The messy profile adds the kit's malformed
records (labelled with :data:`kit.events.REJECT_REASONS`, judged by :func:`parse_nexmark`) and late and too-late
records (labelled by their lateness, as :func:`kit.dataset.generate` labels them).

Example:
    >>> spec = NexmarkSpec(records=500, seed=1)
    >>> df = generate_nexmark(spec)
    >>> [int(n) for n in np.bincount(event_types(spec), minlength=3)]  # person, auction, bid: 1 : 3 : 46
    [10, 30, 460]
    >>> event, reason = parse_nexmark(df["value"][0])
    >>> event["type"], event["id"], event["dateTime"], reason
    ('person', 1000, 1436918400000, None)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kit.dataset import KINDS, DatasetSpec, LatenessBands, _frame, _lateness, _round_count, write_files
from kit.errors import ConfigError, DatasetError
from kit.events import EVENT_TIME_MAX_MS, EVENT_TIME_MIN_MS, REJECT_REASONS
from kit.kafka import key_partition

__all__ = [
    "AUCTION_PROPORTION",
    "BID_PROPORTION",
    "FIRST_AUCTION_ID",
    "FIRST_CATEGORY_ID",
    "FIRST_PERSON_ID",
    "HOT_BATCH",
    "ID_LEAD",
    "NEXMARK_PROFILES",
    "NUM_CATEGORIES",
    "ONE_TOPIC_INPUT",
    "TABLE_TYPES",
    "TYPE_FIELDS",
    "PERSON_PROPORTION",
    "PROPORTION_DENOMINATOR",
    "TOPICS",
    "TYPES",
    "NexmarkSpec",
    "adjusted_event_numbers",
    "event_timestamps",
    "event_types",
    "generate_nexmark",
    "last_base0_auction_id",
    "last_base0_person_id",
    "spec_from_dict",
    "nexmark_to_file",
    "parse_nexmark",
]

# The reference's constants (GeneratorConfig, PersonGenerator, AuctionGenerator, BidGenerator).
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
HOT_BATCH = 100
"""A hot seller, bidder or auction is the first (bidder: second) of the last batch of this many ids."""
ID_LEAD = 10
"""A random person or auction id may be up to this many ids beyond the last one generated (the reference's lead)."""
_SHUFFLE_MULTIPLIER = 953  # GeneratorConfig.nextAdjustedEventNumber
_MIN_STRING_LENGTH = 3

TYPES: tuple[str, ...] = ("person", "auction", "bid")
"""Event types, in the order of their codes (0, 1, 2) and of the epoch rule."""
TOPICS: tuple[str, ...] = ("persons", "auctions", "bids")
"""Topic names of the three-topic layout, per type."""
TABLE_TYPES: MappingProxyType[str, str] = MappingProxyType(dict(zip(TOPICS, TYPES, strict=True)))
"""The event type of each table (topic of the three-topic layout): ``{"persons": "person", ...}``."""
ONE_TOPIC_INPUT = "nexmark"
"""The input name of a query's stream in the one-topic layout (every type in one topic, told apart by ``type``).
In the three-topic layout a query's inputs are the tables it reads (:data:`TOPICS`)."""

# The reference's vocabularies: queries select on them (q3: state in OR, ID, CA).
_US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
              "Cheyenne")
_FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

# Beam's NexmarkUtils.BASE_TIME, 2015-07-15T00:00:00Z: event times are relative to it, not to the wall clock.
_BASE_TIME_MS = 1_436_918_400_000

NEXMARK_PROFILES: MappingProxyType[str, MappingProxyType[str, float]] = MappingProxyType(
    {
        "clean": MappingProxyType({}),
        "messy": MappingProxyType({"late_fraction": 0.05, "too_late_fraction": 0.01, "malformed_fraction": 0.01}),
    }
)
"""Named starting points for :meth:`NexmarkSpec.from_profile` (the kit's messy shares, without duplicates)."""

_STREAMS = {"person": 10, "auction": 11, "bid": 12, "extra": 13, "disorder": 14, "malformed": 15}


def _rng(seed: int, purpose: str) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[purpose]])


def _config_error(field: str, expected: object, actual: object, fix: str = "") -> ConfigError:
    return ConfigError(
        f"NexmarkSpec.{field}: expected {expected}, got {actual!r}.{' ' + fix if fix else ''}",
        field=field, expected=expected, actual=actual,
    )


_INT_RANGES = {
    "records": (1, None),
    "seed": (0, None),
    "first_event_rate": (1, 1_000_000),
    "next_event_rate": (1, 1_000_000),
    "rate_period_s": (1, None),
    "out_of_order_group_size": (1, None),
    "num_active_people": (1, None),
    "num_in_flight_auctions": (1, None),
    "hot_auction_ratio": (1, None),
    "hot_sellers_ratio": (1, None),
    "hot_bidders_ratio": (1, None),
    "avg_person_byte_size": (1, None),
    "avg_auction_byte_size": (1, None),
    "avg_bid_byte_size": (1, None),
    "partitions": (1, None),
    "allowed_lateness_ms": (1, None),
    "lateness_margin_ms": (0, None),
    "window_ms": (0, None),
}
_FRACTIONS = ("late_fraction", "too_late_fraction", "malformed_fraction")


@dataclass(frozen=True)
class NexmarkSpec(LatenessBands):
    """Everything that determines a Nexmark dataset; validated on construction.

    The generator settings carry the names and defaults of Beam's ``NexmarkConfiguration`` (snake_case), for one
    generator (``numEventGenerators = 1``: the whole stream on one timeline, event ids = event numbers). Errors
    are :class:`~kit.errors.ConfigError` with ``field``, ``expected`` and ``actual``.

    Attributes:
        records: rows of the dataset, malformed ones included; the generated events are the others. Default 100_000.
        seed: seed of every random draw (non-negative). Default 42.
        layout: ``"one"`` (one topic, a ``type`` field in each value; the default) or ``"three"`` (persons,
            auctions, bids: a ``topic`` column).
        first_event_rate: events per second at the start (``firstEventRate``). Default 10_000.
        next_event_rate: the second rate of the shape (``nextEventRate``); None (default): the first, a constant rate.
        rate_shape: ``"sine"`` (Beam's default) or ``"square"``; matters only when the two rates differ.
        rate_period_s: period of the rate shape (``ratePeriodSec``). Default 600.
        out_of_order_group_size: events per out-of-order group (``outOfOrderGroupSize``); 1 (default): in order.
            Must not be a multiple of 953, the reference's shuffle multiplier (the shuffle is then no permutation).
        num_active_people: people a random seller or bidder is drawn from (``numActivePeople``). Default 1000.
        num_in_flight_auctions: auctions a random bid is for (``numInFlightAuctions``); also sets auction
            lengths. Default 100.
        hot_auction_ratio, hot_sellers_ratio, hot_bidders_ratio: a bid is for the hot auction, an auction by the
            hot seller, a bid by the hot bidder with probability ``1 - 1/ratio`` (plus the random draw's chance).
            Defaults 2, 4, 4.
        avg_person_byte_size, avg_auction_byte_size, avg_bid_byte_size: the reference's idealised sizes the
            ``extra`` field pads to. Defaults 200, 500, 100.
        start_ms: event time of event 0 (``baseTime``). Default Beam's 1436918400000 (2015-07-15T00:00:00Z).
        partitions: partitions the ``partition`` column is computed for (murmur2 of the key). Default 4.
        late_fraction, too_late_fraction: shares of records delivered late within / beyond the allowed lateness,
            as in :class:`kit.dataset.DatasetSpec`. Default 0.
        malformed_fraction: share of malformed records, split evenly over :data:`kit.events.REJECT_REASONS`.
            Default 0.
        allowed_lateness_ms, lateness_margin_ms, window_ms: the lateness bands, as in
            :class:`kit.dataset.DatasetSpec` (defaults 5_000, 2_000, 10_000: late by at most 3 s, too late by at
            least 17 s).
    """

    records: int = 100_000
    seed: int = 42
    layout: str = "one"
    first_event_rate: int = 10_000
    next_event_rate: int | None = None
    rate_shape: str = "sine"
    rate_period_s: int = 600
    out_of_order_group_size: int = 1
    num_active_people: int = 1000
    num_in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    start_ms: int = _BASE_TIME_MS
    partitions: int = 4
    late_fraction: float = 0.0
    too_late_fraction: float = 0.0
    malformed_fraction: float = 0.0
    allowed_lateness_ms: int = 5_000
    lateness_margin_ms: int = 2_000
    window_ms: int = 10_000

    def __post_init__(self) -> None:
        for name, (low, high) in _INT_RANGES.items():
            value = getattr(self, name)
            if name == "next_event_rate" and value is None:
                continue
            if type(value) is not int or value < low or (high is not None and value > high):
                expected = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
                raise _config_error(name, expected, value)
        if self.layout not in ("one", "three"):
            raise _config_error(field="layout", expected="'one' or 'three'", actual=self.layout)
        if self.rate_shape not in ("sine", "square"):
            raise _config_error(field="rate_shape", expected="'sine' or 'square'", actual=self.rate_shape)
        if self.out_of_order_group_size % _SHUFFLE_MULTIPLIER == 0:
            raise _config_error(
                field="out_of_order_group_size",
                expected=f"a size that is not a multiple of {_SHUFFLE_MULTIPLIER}",
                actual=self.out_of_order_group_size,
                fix=f"The reference shuffles a group by (event number * {_SHUFFLE_MULTIPLIER}) % size: no permutation "
                "then.",
            )
        if type(self.start_ms) is not int or not EVENT_TIME_MIN_MS <= self.start_ms < EVENT_TIME_MAX_MS:
            raise _config_error(field="start_ms", expected=f"an int in [{EVENT_TIME_MIN_MS}, {EVENT_TIME_MAX_MS})",
                                actual=self.start_ms)
        for name in _FRACTIONS:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
                raise _config_error(name, "a number in [0, 1)", value)
        total = sum(getattr(self, name) for name in _FRACTIONS)
        if not total < 0.5:
            raise _config_error(field="malformed_fraction",
                                expected="late, too_late and malformed fractions summing to < 0.5", actual=total)
        if self.lateness_margin_ms >= self.allowed_lateness_ms:
            raise _config_error(field="lateness_margin_ms",
                                expected=f"less than allowed_lateness_ms={self.allowed_lateness_ms}",
                                actual=self.lateness_margin_ms)
        span_ms = self.out_of_order_group_size * int(max(self.inter_event_delays_us)) / 1000
        if span_ms > self.late_max_ms:
            raise _config_error(
                field="out_of_order_group_size",
                expected=f"groups spanning at most late_max_ms = {self.late_max_ms} ms of event time",
                actual=self.out_of_order_group_size,
                fix=f"A group of {self.out_of_order_group_size} events spans {span_ms:g} ms at the slowest rate, so "
                "its records could be neither late nor too late; lower the group size or raise the rates.",
            )
        if self.events < 1:
            raise _config_error(field="records", expected="enough records to leave at least one event",
                                actual=self.records)

    @classmethod
    def from_profile(cls, name: str, **overrides: Any) -> NexmarkSpec:
        """A spec from a profile of :data:`NEXMARK_PROFILES` (``clean`` or ``messy``), then overrides.

        Raises:
            ConfigError: unknown profile, unknown override ("Unrecognized configs: {...}"), or an invalid spec.
        """
        if name not in NEXMARK_PROFILES:
            msg = f"unknown Nexmark profile {name!r}; valid profiles: {', '.join(NEXMARK_PROFILES)}."
            raise ConfigError(msg, field="profile", expected=tuple(NEXMARK_PROFILES), actual=name)
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ConfigError(
                "Unrecognized configs: {" + ", ".join(repr(k) for k in unknown) + "}. "
                f"Valid NexmarkSpec fields: {', '.join(valid)}.",
                field=unknown[0], expected=tuple(valid), actual=tuple(unknown),
            )
        return cls(**{**NEXMARK_PROFILES[name], **overrides})

    @property
    def inter_event_delays_us(self) -> tuple[int, ...]:
        """The reference's ``interEventDelayUs``: one delay for a constant rate, 2 (square) or 10 (sine) otherwise."""
        def period(rate: float) -> int:
            rate = int(rate)
            return (1_000_000 + rate // 2) // rate  # RateUnit.PER_SECOND.rateToPeriodUs

        first, nxt = self.first_event_rate, self.next_event_rate or self.first_event_rate
        if first == nxt:
            return (period(first),)
        if self.rate_shape == "square":
            return period(first), period(nxt)
        mid, amp = (first + nxt) / 2.0, (first - nxt) / 2.0
        return tuple(period(_java_round(mid + amp * math.cos(2.0 * math.pi * i / 10))) for i in range(10))

    @property
    def step_length_s(self) -> int:
        """Seconds each delay of :attr:`inter_event_delays_us` lasts (``RateShape.stepLengthSec``)."""
        n = 2 if self.rate_shape == "square" else 10
        return (self.rate_period_s + n - 1) // n

    @property
    def malformed(self) -> int:
        """Malformed records: ``floor(malformed_fraction * records + 0.5)``."""
        return _round_count(self.malformed_fraction, self.records)

    @property
    def events(self) -> int:
        """Generated (valid) events: ``records`` minus :attr:`malformed`."""
        return self.records - self.malformed

    @property
    def events_per_second(self) -> int:
        """The slowest rate of the stream, the ``events_per_second`` of :class:`kit.dataset.DatasetSpec`.

        The batch caps read it: records per batch that keep a batch within a stretch of event time.
        """
        return min(self.first_event_rate, self.next_event_rate or self.first_event_rate)

    def manifest_spec(self) -> dict[str, Any]:
        """The spec as the manifest records it: its fields plus ``"generator": "nexmark"``."""
        return {"generator": "nexmark", **asdict(self)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NexmarkSpec:
        """The spec of its :meth:`manifest_spec` form (dataset manifests, driver configs).

        Raises:
            ConfigError: a spec of another generator, or an invalid spec.
        """
        if raw.get("generator") != "nexmark":
            msg = (f"a Nexmark spec has \"generator\": \"nexmark\"; got generator {raw.get('generator')!r}. Generate a "
                   "Nexmark dataset with dmk gen --nexmark")
            raise ConfigError(msg, field="generator", expected="nexmark", actual=raw.get("generator"))
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})

    @classmethod
    def like(cls, dataset: DatasetSpec, **overrides: Any) -> NexmarkSpec:
        """The Nexmark stream of the same size, seed, rate and messiness as a kit dataset spec.

        What ``dmk compare nexmark_q1 --records N --profile messy ...`` replays: ``records``, ``seed``,
        ``partitions``, ``events_per_second`` (as ``first_event_rate``), the late, too-late and malformed shares and
        the lateness bands carry over; the kit's duplicates and boundary block have no Nexmark counterpart.
        """
        return cls(**{
            "records": dataset.records, "seed": dataset.seed, "partitions": dataset.partitions,
            "first_event_rate": max(1, int(dataset.events_per_second)), "late_fraction": dataset.late_fraction,
            "too_late_fraction": dataset.too_late_fraction, "malformed_fraction": dataset.malformed_fraction,
            "allowed_lateness_ms": dataset.allowed_lateness_ms, "lateness_margin_ms": dataset.lateness_margin_ms,
            "window_ms": dataset.window_ms, **overrides,
        })


def spec_from_dict(raw: Mapping[str, Any]) -> DatasetSpec | NexmarkSpec:
    """A dataset spec of either generator from its dict form (a manifest's ``spec``, a driver config's ``dataset``).

    Raises:
        ConfigError: an invalid spec.
    """
    return NexmarkSpec.from_dict(raw) if raw.get("generator") == "nexmark" else DatasetSpec.from_dict(raw)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)  # Math.round


# --------------------------------------------------------------------------------------------------------
# The reference's arithmetic, vectorized over event numbers / event ids


def adjusted_event_numbers(spec: NexmarkSpec, n: int | None = None) -> np.ndarray:
    """The event id at each position (``nextAdjustedEventNumber``): event numbers shuffled within groups.

    ``base + (number * 953) % size`` with ``base`` the group's first number. The last group, when partial, takes
    ids of the whole group, so a few ids at the end may be skipped and as many beyond ``n`` used, as in the
    reference.
    """
    numbers = np.arange(spec.events if n is None else n, dtype=np.int64)
    size = spec.out_of_order_group_size
    return (numbers // size) * size + (numbers * _SHUFFLE_MULTIPLIER) % size


def event_types(spec: NexmarkSpec) -> np.ndarray:
    """Type code (0 person, 1 auction, 2 bid) of each generated event, by the epoch rule on its event id."""
    rem = adjusted_event_numbers(spec) % PROPORTION_DENOMINATOR
    return np.where(rem < PERSON_PROPORTION, 0, np.where(rem < PERSON_PROPORTION + AUCTION_PROPORTION, 1, 2))


def event_timestamps(spec: NexmarkSpec, numbers: np.ndarray) -> np.ndarray:
    """Event time (ms) of event numbers (``timestampAndInterEventDelayUsForEvent``)."""
    delays = np.array(spec.inter_event_delays_us, np.int64)
    numbers = np.asarray(numbers, np.int64)
    if len(delays) == 1:
        return np.asarray(spec.start_ms + (numbers * delays[0]) // 1000, np.int64)
    per_cycle = (spec.step_length_s * 1_000_000) // delays
    events_per_epoch = int(per_cycle.sum())
    cycle_ms = (per_cycle * delays) // 1000
    epoch_ms = int(cycle_ms.sum())
    cycle_start = np.concatenate([[0], np.cumsum(per_cycle)[:-1]])
    cycle_offset_ms = np.concatenate([[0], np.cumsum(cycle_ms)[:-1]])
    epoch, within = numbers // events_per_epoch, numbers % events_per_epoch
    cycle = np.searchsorted(np.cumsum(per_cycle), within, side="right")
    return np.asarray(spec.start_ms + epoch * epoch_ms + cycle_offset_ms[cycle]
                      + ((within - cycle_start[cycle]) * delays[cycle]) // 1000, np.int64)


def last_base0_person_id(event_ids: np.ndarray) -> np.ndarray:
    """The last person id (base 0) generated at or before each event id (``lastBase0PersonId``)."""
    epoch, offset = np.divmod(np.asarray(event_ids, np.int64), PROPORTION_DENOMINATOR)
    return epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)


def last_base0_auction_id(event_ids: np.ndarray) -> np.ndarray:
    """The last auction id (base 0) generated at or before each event id (``lastBase0AuctionId``; -1: none yet)."""
    epoch, offset = np.divmod(np.asarray(event_ids, np.int64), PROPORTION_DENOMINATOR)
    before = offset < PERSON_PROPORTION
    epoch = np.where(before, epoch - 1, epoch)
    offset = np.where(before | (offset >= PERSON_PROPORTION + AUCTION_PROPORTION), AUCTION_PROPORTION - 1,
                      offset - PERSON_PROPORTION)
    return epoch * AUCTION_PROPORTION + offset


def _below(rng: np.random.Generator, bounds: np.ndarray) -> np.ndarray:
    """A uniform draw in [0, bound) per bound (``nextInt(bound)`` / ``nextLong``)."""
    return np.asarray(rng.random(len(bounds)) * bounds, np.float64).astype(np.int64)


def _random_person(rng: np.random.Generator, event_ids: np.ndarray, spec: NexmarkSpec) -> np.ndarray:
    # nextBase0PersonId: one of the active people, or up to ID_LEAD beyond the last.
    people = last_base0_person_id(event_ids) + 1
    active = np.minimum(people, spec.num_active_people)
    return np.asarray(people - active + _below(rng, active + ID_LEAD), np.int64)


def _random_auction(rng: np.random.Generator, event_ids: np.ndarray, spec: NexmarkSpec) -> np.ndarray:
    # nextBase0AuctionId: one of the last num_in_flight_auctions, or up to ID_LEAD beyond the last.
    last = last_base0_auction_id(event_ids)
    low = np.maximum(last - spec.num_in_flight_auctions, 0)
    return np.asarray(low + _below(rng, last - low + 1 + ID_LEAD), np.int64)


def _prices(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.floor(10.0 ** (rng.random(n) * 6.0) * 100.0 + 0.5).astype(np.int64)  # PriceGenerator.nextPrice


# Arrow text is large_string throughout (64-bit offsets): the bids' padding alone passes 2 GiB near 30M events.
_TEXT = pa.large_string()


def _text_array(chars: np.ndarray, lengths: np.ndarray) -> pa.LargeStringArray:
    """An Arrow string array of consecutive ``lengths`` characters of ``chars`` (uint8 ASCII), no Python loop."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(chars))


def _strings(rng: np.random.Generator, n: int, max_length: int) -> pa.LargeStringArray:
    """``nextString``: 3 to max_length - 1 characters, each a space (1 in 13) or a lowercase letter, trimmed."""
    lengths = _MIN_STRING_LENGTH + rng.integers(0, max_length - _MIN_STRING_LENGTH, n)
    total = int(lengths.sum())
    chars = rng.integers(0, 26, total, dtype=np.uint8) + np.uint8(ord("a"))
    chars[rng.integers(0, 13, total) == 0] = ord(" ")
    return pc.utf8_trim(_text_array(chars, lengths), " ")


def _extras(rng: np.random.Generator, current: np.ndarray, average: int) -> pa.LargeStringArray:
    """``nextExtra``: lowercase letters padding each record's ``current`` size to ``average`` on average."""
    wanted = np.maximum(average - current, 0)
    delta = np.floor(wanted * 0.2 + 0.5).astype(np.int64)
    size = wanted - delta + np.where(delta > 0, _below(rng, np.maximum(2 * delta, 1)), 0)
    size = np.where(current > average, 0, size)
    return _text_array(rng.integers(0, 26, int(size.sum()), dtype=np.uint8) + np.uint8(ord("a")), size)


def _pick(rng: np.random.Generator, words: tuple[str, ...], n: int) -> pa.Array:
    return pa.array(words, _TEXT).take(pa.array(rng.integers(0, len(words), n)))


def _length(text: pa.Array) -> np.ndarray:
    return np.asarray(pc.utf8_length(text).to_numpy(), np.int64)


def _json(*parts: str | np.ndarray | pa.Array) -> np.ndarray:
    """Each record's value: the parts (literal text, int arrays, string arrays) joined, as an array of bytes."""
    columns = [pa.scalar(p, _TEXT) if isinstance(p, str) else pc.cast(pa.array(p), _TEXT) for p in parts]
    joined = pc.binary_join_element_wise(*columns, pa.scalar("", _TEXT))
    return np.asarray(pc.cast(joined, pa.large_binary()).to_numpy(zero_copy_only=False), object)


# --------------------------------------------------------------------------------------------------------
# Events


def _persons(spec: NexmarkSpec, ids: np.ndarray, times: np.ndarray, head: str) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(spec.seed, "person")
    n = len(ids)
    person = last_base0_person_id(ids) + FIRST_PERSON_ID
    name = pc.binary_join_element_wise(_pick(rng, _FIRST_NAMES, n), _pick(rng, _LAST_NAMES, n), pa.scalar(" ", _TEXT))
    email = pc.binary_join_element_wise(_strings(rng, n, 7), pa.scalar("@", _TEXT), _strings(rng, n, 5),
                                        pa.scalar(".com", _TEXT), pa.scalar("", _TEXT))
    groups = [pc.utf8_lpad(pc.cast(pa.array(g), _TEXT), 4, "0") for g in rng.integers(0, 10_000, (4, n))]
    card = pc.binary_join_element_wise(*groups, pa.scalar(" ", _TEXT))
    city, state = _pick(rng, _US_CITIES, n), _pick(rng, _US_STATES, n)
    size = 8 + _length(name) + _length(email) + _length(card) + _length(city) + _length(state)
    extra = _extras(rng, size, spec.avg_person_byte_size)
    values = _json("{" + head + '"id":', person, ',"name":"', name, '","emailAddress":"', email, '","creditCard":"',
                   card, '","city":"', city, '","state":"', state, '","dateTime":', times, ',"extra":"', extra, '"}')
    return values, person


def _auctions(spec: NexmarkSpec, ids: np.ndarray, times: np.ndarray, head: str) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(spec.seed, "auction")
    n = len(ids)
    auction = last_base0_auction_id(ids) + FIRST_AUCTION_ID
    hot = _below(rng, np.full(n, spec.hot_sellers_ratio)) > 0
    seller = np.where(hot, (last_base0_person_id(ids) // HOT_BATCH) * HOT_BATCH, _random_person(rng, ids, spec))
    seller += FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, n)
    initial = _prices(rng, n)
    # nextAuctionLengthMs: uniform in [1, 2 * horizon], horizon = time until num_in_flight_auctions more auctions.
    ahead = (spec.num_in_flight_auctions * PROPORTION_DENOMINATOR) // AUCTION_PROPORTION
    horizon = event_timestamps(spec, ids + ahead) - times
    expires = times + 1 + _below(rng, np.maximum(horizon * 2, 1))
    name, description = _strings(rng, n, 20), _strings(rng, n, 100)
    reserve = initial + _prices(rng, n)
    extra = _extras(rng, 8 + _length(name) + _length(description) + 40, spec.avg_auction_byte_size)
    values = _json("{" + head + '"id":', auction, ',"itemName":"', name, '","description":"', description,
                   '","initialBid":', initial, ',"reserve":', reserve, ',"dateTime":', times, ',"expires":', expires,
                   ',"seller":', seller, ',"category":', category, ',"extra":"', extra, '"}')
    return values, auction


def _bids(spec: NexmarkSpec, ids: np.ndarray, times: np.ndarray, head: str) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(spec.seed, "bid")
    n = len(ids)
    hot_auction = _below(rng, np.full(n, spec.hot_auction_ratio)) > 0
    auction = np.where(hot_auction, (last_base0_auction_id(ids) // HOT_BATCH) * HOT_BATCH,
                       _random_auction(rng, ids, spec)) + FIRST_AUCTION_ID
    hot_bidder = _below(rng, np.full(n, spec.hot_bidders_ratio)) > 0
    bidder = np.where(hot_bidder, (last_base0_person_id(ids) // HOT_BATCH) * HOT_BATCH + 1,
                      _random_person(rng, ids, spec)) + FIRST_PERSON_ID
    price = _prices(rng, n)
    extra = _extras(_rng(spec.seed, "extra"), np.full(n, 32, np.int64), spec.avg_bid_byte_size)
    values = _json("{" + head + '"auction":', auction, ',"bidder":', bidder, ',"price":', price, ',"dateTime":', times,
                   ',"extra":"', extra, '"}')
    return values, auction


def _events(spec: NexmarkSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Values, type codes, event times and Kafka key ids of the generated events, in event-number order."""
    ids = adjusted_event_numbers(spec)
    times = event_timestamps(spec, ids)
    types = event_types(spec)
    values = np.empty(len(ids), object)
    keys = np.empty(len(ids), np.int64)
    for code, build in enumerate((_persons, _auctions, _bids)):
        at = np.flatnonzero(types == code)
        head = f'"type":"{TYPES[code]}",' if spec.layout == "one" else ""
        made, key = build(spec, ids[at], times[at], head)
        values[at] = made
        keys[at] = key
    return values, types, times, keys


# --------------------------------------------------------------------------------------------------------
# Parsing: the Nexmark record contract, with the kit's reject reasons

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
"""The range of the engines' ``long`` columns: an integer field outside it is not a valid value of the field."""

TYPE_FIELDS: MappingProxyType[str, tuple[tuple[str, type], ...]] = MappingProxyType({
    "person": (("id", int), ("name", str), ("emailAddress", str), ("creditCard", str), ("city", str),
               ("state", str), ("dateTime", int), ("extra", str)),
    "auction": (("id", int), ("itemName", str), ("description", str), ("initialBid", int), ("reserve", int),
                ("dateTime", int), ("expires", int), ("seller", int), ("category", int), ("extra", str)),
    "bid": (("auction", int), ("bidder", int), ("price", int), ("dateTime", int), ("extra", str)),
})
"""Each event type's fields, in the order records carry them, with their exact JSON types (:func:`parse_nexmark`)."""


def parse_nexmark(
    value: bytes | bytearray | memoryview | None, event_type: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """Decide whether a record value is a valid Nexmark event, and why not, in :func:`kit.events.parse_event`'s terms.

    Checks in order, the first failure wins: UTF-8 (``bad_utf8``); a JSON object (``bad_json``); the type's
    fields present with their exact JSON types, ``type`` itself when ``event_type`` is None, and each integer but
    ``dateTime`` within a signed 64-bit long, what every engine's schema holds (``missing_field``); ``dateTime``
    in [2000-01-01, 2100-01-01) (``bad_timestamp``).

    Args:
        value: the Kafka record value.
        event_type: ``"person"``, ``"auction"`` or ``"bid"`` for a record of the three-topic layout (its topic
            says the type); None (default) reads the value's ``type`` field (one-topic layout).

    Returns:
        ``(event, None)`` or ``(None, reason)``.
    """
    if value is None:
        return None, "bad_json"
    try:
        text = str(value, "utf-8")
    except UnicodeDecodeError:
        return None, "bad_utf8"
    try:
        event = json.loads(text)
    except (ValueError, RecursionError):
        return None, "bad_json"
    if type(event) is not dict:
        return None, "bad_json"
    declared = event_type if event_type is not None else event.get("type")
    checks = TYPE_FIELDS.get(declared) if type(declared) is str else None
    if checks is None:
        return None, "missing_field"
    for name, kind in checks:
        value = event.get(name)
        if type(value) is not kind:
            return None, "missing_field"
        if type(value) is int and name != "dateTime" and not _LONG_MIN <= value <= _LONG_MAX:
            return None, "missing_field"
    if not EVENT_TIME_MIN_MS <= event["dateTime"] < EVENT_TIME_MAX_MS:
        return None, "bad_timestamp"
    return event, None


# --------------------------------------------------------------------------------------------------------
# The dataset


def _disorder(spec: NexmarkSpec, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Delay ``late`` and ``too_late`` records; returns the replay order (event positions) and the intended band.

    A too-late record goes right after the first kept record whose running maximum event time reaches its event
    time plus its delay (too_late_min_ms .. + 5 s), so its lateness is at least that; a late one after the last
    kept record whose running maximum is within its delay (1 .. late_max_ms) but past its own time.
    """
    n = len(times)
    n_late = _round_count(spec.late_fraction, spec.records)
    n_too = _round_count(spec.too_late_fraction, spec.records)
    intended = np.zeros(n, np.int8)
    if n_late + n_too == 0:
        return np.arange(n), intended
    rng = _rng(spec.seed, "disorder")
    end = int(times.max())
    too_max = spec.too_late_max_ms
    eligible_too = np.flatnonzero(times + too_max < end)
    if len(eligible_too) < n_too:
        raise _too_short(spec, "too_late_fraction", n_too)
    too = rng.choice(eligible_too, n_too, replace=False)
    intended[too] = 2
    eligible_late = np.flatnonzero((times + spec.late_max_ms < end) & (intended == 0))
    if len(eligible_late) < n_late:
        raise _too_short(spec, "late_fraction", n_late)
    late = rng.choice(eligible_late, n_late, replace=False)
    intended[late] = 1
    delayed = np.sort(np.concatenate([late, too]))
    delay = np.where(intended[delayed] == 1, rng.integers(1, spec.late_max_ms + 1, len(delayed)),
                     rng.integers(spec.too_late_min_ms, too_max + 1, len(delayed)))
    kept = np.flatnonzero(intended == 0)
    running = np.maximum.accumulate(times[kept])
    target = times[delayed] + delay
    is_late = intended[delayed] == 1
    # A late record goes after the last kept record whose running maximum is within its delay (but past its own
    # time: late by at least 1 ms); a too-late one after the first whose running maximum reaches its delay.
    slot = np.where(is_late,
                    np.maximum(np.searchsorted(running, target, side="right") - 1,
                               np.searchsorted(running, times[delayed], side="right")),
                    np.searchsorted(running, target, side="left"))
    # Kept records in their order; each delayed one after its slot's kept record, delayed ones in event order.
    slots = np.concatenate([np.arange(len(kept)), slot])
    tier = np.concatenate([np.zeros(len(kept), np.int8), np.ones(len(delayed), np.int8)])
    positions = np.concatenate([kept, delayed])
    order = positions[np.lexsort((positions, tier, slots))]
    return order, intended


def _too_short(spec: NexmarkSpec, field: str, wanted: int) -> ConfigError:
    span_s = spec.events / spec.first_event_rate
    return _config_error(
        field, f"a stream long enough to place {wanted} such records", getattr(spec, field),
        f"The stream spans about {span_s:g} s of event time and a too-late record needs "
        f"{spec.too_late_min_ms / 1000:g} s and more after it: raise records or lower first_event_rate "
        "(dmk gen: --records, --first-event-rate).",
    )


_BAD_UTF8 = (b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82")
_BAD_TIMESTAMPS = (-1, 0, 10**16, 946_684_799_999, 4_102_444_800_000)


def _malformed_value(valid: bytes, reason: str, variant: int, cut: float) -> bytes:
    """A malformed record made from a valid one, rejected by :func:`parse_nexmark` for ``reason``."""
    text = valid.decode("ascii")
    if reason == "bad_utf8":
        at = valid.index(b'"extra":"') + len(b'"extra":"')
        return valid[:at] + _BAD_UTF8[variant % len(_BAD_UTF8)] + valid[at:]
    if reason == "bad_json":
        if variant % 2:
            return f"[{text}]".encode()  # valid JSON, not an object
        return text[: 1 + int(cut * (len(text) - 1))].encode()  # an unclosed object: never valid
    event = json.loads(text)
    if reason == "missing_field":
        which = variant % 3
        if which == 0:
            del event["dateTime"]
        elif which == 1:
            event["dateTime"] = str(event["dateTime"])  # present, a string: the wrong type counts as missing
        else:
            del event[next(iter(k for k in event if k != "type"))]  # the id (person, auction) or auction (bid)
    else:
        event["dateTime"] = _BAD_TIMESTAMPS[variant % len(_BAD_TIMESTAMPS)]
    return json.dumps(event, separators=(",", ":")).encode()


def generate_nexmark(spec: NexmarkSpec) -> pd.DataFrame:
    """Generate the Nexmark dataset of ``spec``, in replay order.

    Events come in event-number order (shuffled within out-of-order groups as the reference does); the messy
    profile's delayed records move later (:func:`_disorder`) and its malformed records take random positions.
    Every valid record's ``kind`` is then its measured lateness band (``clean`` at 0 or less, ``late`` up to
    ``late_max_ms``, ``too_late`` from ``too_late_min_ms``), and every malformed one is checked to be rejected for
    its reason by :func:`parse_nexmark`, so the labels are right by verification.

    Returns:
        :data:`kit.dataset.COLUMNS` (``key`` is the person id, the auction id, or the bid's auction id as ASCII
        decimal; ``timestamp_ms`` the event's ``dateTime``, for a malformed record the largest so far), plus
        ``topic`` in the three-topic layout.

    Raises:
        ConfigError: the stream is too short or too sparse for its late / too-late records.
    """
    return _generate(spec)[0]


def _generate(spec: NexmarkSpec) -> tuple[pd.DataFrame, np.ndarray]:
    """The frame and each row's type code (a malformed row: the type of the event it was made from)."""
    values, types, times, key_ids = _events(spec)
    order, intended = _disorder(spec, times)

    n, n_bad = spec.records, spec.malformed
    rng = _rng(spec.seed, "malformed")
    bad_pos = np.sort(rng.choice(n, n_bad, replace=False))
    is_bad = np.zeros(n, bool)
    is_bad[bad_pos] = True
    good_pos = np.flatnonzero(~is_bad)

    source = np.full(n, -1, np.int64)  # the event each row carries (a malformed row: the one it was made from)
    source[good_pos] = order
    source[bad_pos] = rng.integers(0, len(times), n_bad)
    share, extra = divmod(n_bad, len(REJECT_REASONS))
    reasons = np.repeat(np.arange(len(REJECT_REASONS)), [share + (i < extra) for i in range(len(REJECT_REASONS))])
    reasons = rng.permutation(reasons)
    variants = rng.integers(0, 60, n_bad).tolist()
    cuts = rng.random(n_bad).tolist()

    value = values[source]
    value[bad_pos] = [_malformed_value(values[s], REJECT_REASONS[r], v, c)
                      for s, r, v, c in zip(source[bad_pos].tolist(), reasons.tolist(), variants, cuts, strict=True)]
    event_time = times[source]
    running = np.maximum.accumulate(np.where(is_bad, times.min(), event_time))
    timestamp = np.where(is_bad, running, event_time)

    lateness = _lateness(timestamp, ~is_bad)
    band = np.full(n, -1, np.int8)
    band[lateness <= 0] = 0
    band[(lateness > 0) & (lateness <= spec.late_max_ms)] = 1
    band[lateness >= spec.too_late_min_ms] = 2
    kinds = np.empty(n, object)
    kinds[good_pos] = np.array(KINDS[:3], dtype=object)[np.maximum(band[good_pos], 0)]
    kinds[bad_pos] = np.array(REJECT_REASONS, dtype=object)[reasons]
    _verify(spec, band, intended[source], is_bad, kinds, value, types[source])

    key_text = key_ids[source]
    unique, inverse = np.unique(key_text, return_inverse=True)
    unique_keys = np.array([str(k).encode() for k in unique.tolist()], dtype=object)
    partition_of = np.array([key_partition(k, spec.partitions) for k in unique_keys], np.int32)
    topic = np.array(TOPICS, dtype=object)[types[source]] if spec.layout == "three" else None
    frame = _frame(np.arange(n, dtype=np.int64), unique_keys[inverse], value, timestamp, partition_of[inverse], kinds,
                   topic=topic)
    return frame, types[source]


def _verify(spec: NexmarkSpec, band: np.ndarray, intended: np.ndarray, is_bad: np.ndarray, kinds: np.ndarray,
            values: np.ndarray, types: np.ndarray) -> None:
    """Refuse labels that are not what the record is: a sparse stream (user error) or a generator bug."""
    good = ~is_bad
    gap = good & (band < 0)
    missed = good & (intended > 0) & (band != intended)
    if gap.any() or missed.any():
        raise _config_error(
            field="first_event_rate",
            expected="a stream dense enough that every delayed record lands in its lateness band",
            actual=spec.first_event_rate,
            fix=f"{int(gap.sum())} records would be late by between {spec.late_max_ms} and {spec.too_late_min_ms} ms, "
            f"{int(missed.sum())} delayed ones missed their band; raise the rate or lower the delayed fractions.",
        )
    rows = np.flatnonzero(is_bad)
    spread = np.flatnonzero(good)
    if len(spread) > 5_000:
        spread = spread[np.linspace(0, len(spread) - 1, 5_000).astype(int)]
    rows = np.sort(np.concatenate([rows, spread]))
    wrong = []
    for row in rows.tolist():
        event_type = TYPES[types[row]] if spec.layout == "three" else None
        reason = parse_nexmark(values[row], event_type)[1]
        if reason != (None if good[row] else kinds[row]):
            wrong.append(f"seq {row} {kinds[row]} read as {reason or 'valid'}")
    if wrong:
        raise DatasetError(path=f"generate_nexmark(seed={spec.seed})",
                           problem="labels and kit.nexmark.parse_nexmark disagree: " + ", ".join(wrong[:3]),
                           fix="This is a bug in kit.nexmark; report it with the NexmarkSpec")


def nexmark_to_file(spec: NexmarkSpec, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Generate the dataset of ``spec`` and write it and its manifest (:func:`kit.dataset.write_files`).

    The manifest is a kit dataset manifest whose ``spec`` is :meth:`NexmarkSpec.manifest_spec` (``"generator":
    "nexmark"``), with ``types`` (valid records per event type) and,
    in the three-topic layout, ``topics`` (records per topic).

    Returns:
        The manifest.
    """
    df, row_types = _generate(spec)
    kinds = df["kind"].to_numpy(dtype=object)
    valid = ~np.isin(kinds, list(REJECT_REASONS))
    per_type = np.bincount(row_types[valid], minlength=len(TYPES))
    times = df["timestamp_ms"].to_numpy()[valid]
    extra: dict[str, Any] = {
        "spec": spec.manifest_spec(),
        "counts": {kind: int((kinds == kind).sum()) for kind in KINDS},
        "types": {t: int(count) for t, count in zip(TYPES, per_type, strict=True)},
        "event_time_ms": {"min": int(times.min()), "max": int(times.max())},
        "partitions": {str(p): int(c) for p, c in
                       enumerate(np.bincount(df["partition"].to_numpy(), minlength=spec.partitions))},
    }
    if spec.layout == "three":
        topics = df["topic"].to_numpy(dtype=object)
        extra["topics"] = {t: int((topics == t).sum()) for t in TOPICS}
    return write_files(df, Path(path), extra)

