"""The event contract shared by the legacy engine, the modern engine and the oracle.

An event is a compact JSON object (the Kafka record value) with the fields in :data:`REQUIRED_FIELDS`, in
that order, modelled on the Yahoo Streaming Benchmark. :func:`parse_event` is the single definition of
"valid": every consumer that has to decide whether to count a record calls it (or mirrors it exactly),
so a record is dropped for the same reason everywhere, and the reason is one of :data:`REJECT_REASONS`.

Example:
    >>> event, reason = parse_event(
    ...     b'{"event_id":"e42-0000000000","user":"u0042","key":"k0007","ad_id":"ad-0013",'
    ...     b'"ad_type":"banner","event_type":"view","event_time":1767225600123}'
    ... )
    >>> event["user"], event["event_time"], reason
    ('u0042', 1767225600123, None)
    >>> parse_event(b'{"event_id":"e1","user":"u1"')
    (None, 'bad_json')
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

__all__ = [
    "AD_TYPES",
    "EVENT_TIME_MAX_MS",
    "EVENT_TIME_MIN_MS",
    "EVENT_TYPES",
    "FIELD_TYPES",
    "REJECT_REASONS",
    "REQUIRED_FIELDS",
    "parse_event",
]

REQUIRED_FIELDS: tuple[str, ...] = (
    "event_id",
    "user",
    "key",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
)
"""Field names of a valid event, in the order the dataset writes them."""

FIELD_TYPES: MappingProxyType[str, type] = MappingProxyType(
    {
        "event_id": str,
        "user": str,
        "key": str,
        "ad_id": str,
        "ad_type": str,
        "event_type": str,
        "event_time": int,
    }
)
"""Exact JSON type of each required field (``event_time`` is milliseconds since the epoch, never a bool)."""

EVENT_TIME_MIN_MS = 946_684_800_000
"""Smallest valid ``event_time``: 2000-01-01T00:00:00Z, inclusive."""

EVENT_TIME_MAX_MS = 4_102_444_800_000
"""End of the valid ``event_time`` range: 2100-01-01T00:00:00Z, exclusive."""

EVENT_TYPES: tuple[str, ...] = ("view", "click", "purchase")
"""Values of ``event_type`` (Yahoo Streaming Benchmark)."""

AD_TYPES: tuple[str, ...] = ("banner", "modal", "sponsored-search", "mail", "mobile")
"""Values of ``ad_type`` (Yahoo Streaming Benchmark)."""

REJECT_REASONS: tuple[str, ...] = ("bad_utf8", "bad_json", "missing_field", "bad_timestamp")
"""Every reason :func:`parse_event` can give, in the order it checks them. These strings are stable: the
dataset labels its malformed records with them and reports count rejects by them."""

# Bound once: parse_event runs per record over millions of records, and attribute look-ups add up there.
_loads = json.loads
_CHECKS: tuple[tuple[str, type], ...] = tuple(FIELD_TYPES.items())


def parse_event(value: bytes | bytearray | memoryview | None) -> tuple[dict[str, Any] | None, str | None]:
    """Decide whether a Kafka record value is a valid event, and why not when it isn't.

    Checks run in this order and the first failure wins: the bytes are UTF-8 (``"bad_utf8"``); the text is
    JSON and the JSON is an object (``"bad_json"``); every field of :data:`REQUIRED_FIELDS` is present with
    the exact type of :data:`FIELD_TYPES`, so ``true`` is not an int and ``1.5e12`` is not an int
    (``"missing_field"``); ``event_time`` lies in [:data:`EVENT_TIME_MIN_MS`, :data:`EVENT_TIME_MAX_MS`)
    (``"bad_timestamp"``). A ``None`` value (a Kafka tombstone) is not a JSON object, so it is
    ``"bad_json"``. Fields beyond the required ones are kept in the returned dict and ignored by the
    contract.

    Args:
        value: the record value as Kafka delivers it.

    Returns:
        ``(event, None)`` when the value is a valid event, else ``(None, reason)`` with ``reason`` one of
        :data:`REJECT_REASONS`.
    """
    if value is None:
        return None, "bad_json"
    try:
        text = str(value, "utf-8")
    except UnicodeDecodeError:
        return None, "bad_utf8"
    try:
        event = _loads(text)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and ints longer than Python's digit limit;
        # RecursionError is what absurdly deep nesting raises.
        return None, "bad_json"
    if type(event) is not dict:
        return None, "bad_json"
    for name, kind in _CHECKS:
        # `type(...) is` rather than isinstance: bool is an int subclass and must not pass as event_time.
        if type(event.get(name)) is not kind:
            return None, "missing_field"
    if not EVENT_TIME_MIN_MS <= event["event_time"] < EVENT_TIME_MAX_MS:
        return None, "bad_timestamp"
    return event, None
