"""The oracle's own reading of the event contract: a second parser, and the contract's bounds as literals.

The engines parse records with :func:`kit.events.parse_event` (legacy, and modern's Python path) and with
Spark's ``from_json`` (modern's JVM path). The oracle must not share that code: a one-character slip in a
shared parser makes all three sides wrong the same way, and the diff then says EQUIVALENT. So this module is
written from the contract as docs/kit.md states it, not from ``parse_event``, and holds the contract's
numbers as literals. It is the *spec file* both engines are tested against (``tests/test_verdicts.py``:
every engine path must decide the boundary records of :data:`BOUNDARY_TIMES` as :func:`read_record` does).

The contract (docs/kit.md, "kit.events: what a valid event is"), checked in this order, first failure wins:

1. the value is UTF-8 text, else ``bad_utf8`` (a null value, a Kafka tombstone, is no JSON object:
   ``bad_json``);
2. the text is one JSON document and that document is an object, else ``bad_json``;
3. each of the seven fields is present with its exact JSON type (six strings; ``event_time`` an integer,
   which ``true`` and ``1.5e12`` are not), else ``missing_field``;
4. ``event_time`` (ms since the epoch) lies in years 2000-2099: from 2000-01-01T00:00:00Z inclusive to
   2100-01-01T00:00:00Z exclusive, else ``bad_timestamp``.

Only the JSON grammar itself comes from a library (Python's ``json``, which the contract names as the
reference: duplicate keys keep the last value, ``NaN`` is a number).

Example:
    >>> read_record(b'{"event_id":"e","user":"u","key":"k","ad_id":"a","ad_type":"banner",'
    ...             b'"event_type":"view","event_time":946684799999}')
    (None, 'bad_timestamp')
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BOUNDARY_TIMES", "FIRST_VALID_MS", "LAST_VALID_MS", "FIELDS", "REASONS", "read_record"]

FIRST_VALID_MS = 946_684_800_000
"""2000-01-01T00:00:00Z: the earliest valid ``event_time`` (a literal, on purpose: see the module docstring)."""

LAST_VALID_MS = 4_102_444_799_999
"""2099-12-31T23:59:59.999Z: the latest valid ``event_time``."""

FIELDS: tuple[tuple[str, str], ...] = (
    ("event_id", "string"),
    ("user", "string"),
    ("key", "string"),
    ("ad_id", "string"),
    ("ad_type", "string"),
    ("event_type", "string"),
    ("event_time", "integer"),
)
"""The contract's fields in the order records carry them, with their JSON types."""

REASONS: tuple[str, ...] = ("bad_utf8", "bad_json", "missing_field", "bad_timestamp")
"""Why a record is not an event, in the order the contract checks."""

BOUNDARY_TIMES: dict[int, str | None] = {
    FIRST_VALID_MS - 1: "bad_timestamp",
    FIRST_VALID_MS: None,
    FIRST_VALID_MS + 1: None,
    LAST_VALID_MS - 1: None,
    LAST_VALID_MS: None,
    LAST_VALID_MS + 1: "bad_timestamp",
}
"""``event_time`` at and one millisecond either side of both bounds, and the verdict the contract gives it."""

_decoder = json.JSONDecoder()


def _has_type(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    # JSON integers only: Python's bool is an int subclass, and a float (1.5e12, 1e3) is not an integer.
    return isinstance(value, int) and not isinstance(value, bool)


def read_record(value: bytes | bytearray | memoryview | None) -> tuple[dict[str, Any] | None, str | None]:
    """``(fields, None)`` for a record the contract calls an event, else ``(None, reason)``.

    ``fields`` holds the seven contract fields only.
    """
    if value is None:
        return None, "bad_json"
    try:
        text = bytes(value).decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return None, "bad_utf8"
    try:
        document = _decoder.decode(text)
    except (ValueError, RecursionError):
        return None, "bad_json"
    if not isinstance(document, dict):
        return None, "bad_json"
    event = {}
    for name, kind in FIELDS:
        if name not in document or not _has_type(document[name], kind):
            return None, "missing_field"
        event[name] = document[name]
    if event["event_time"] < FIRST_VALID_MS or event["event_time"] > LAST_VALID_MS:
        return None, "bad_timestamp"
    return event, None
