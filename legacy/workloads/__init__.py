"""The DStream halves of the paired workloads, and what they build on.

Each module here has the name of a workload in :mod:`kit.workloads` and exposes ``build(ssc, source) ->
DStream`` (plus any extra variant its spec names). A builder only describes the computation: it never starts,
stops, sleeps or talks to Kafka; :mod:`legacy.runner` does. The returned DStream's elements are tuples in the
spec's column order (keys, values, ``last_input_ts``).

:class:`Source` hands a builder its input as parsed events (dicts with the event fields plus ``kafka_ts``,
``topic``, ``partition`` and ``offset``: :meth:`Source.events` for the kit's events, :meth:`Source.nexmark` for
a Nexmark table); records :func:`kit.events.parse_event` (or :func:`kit.nexmark.parse_nexmark`) rejects never
reach the builder, they go to the dead-letter output (written by the parse itself when given ``dead_letter_root``, so a
batch reads and parses its records once). :func:`event_time_operator` is the event-time machinery DStreams
lack: a global watermark and per-key state with Spark's rules for late records, which the windowed, session,
dedup, YSB and join workloads all use.

Example (``raw`` a direct stream of ``(topic, partition, offset, timestamp, value)`` tuples)::

    source = Source({"events": raw}, dataset_spec)
    counts = legacy.workloads.running_counts.build(ssc, source)
"""

from __future__ import annotations

import functools
import importlib
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kit import workloads
from kit.dataset import DatasetSpec
from kit.engine import DEAD_LETTER_COLUMNS
from kit.errors import ConfigError
from kit.events import parse_event
from kit.nexmark import ONE_TOPIC_INPUT, TABLE_TYPES, NexmarkSpec, parse_nexmark

__all__ = [
    "DEAD_LETTER_COLUMNS", "NO_WATERMARK", "Source", "event_time_operator", "parse_nexmark_record", "parse_record",
    "resolve", "sliding_window_starts",
]

NO_WATERMARK = -(2**62)
"""The watermark before any event was seen: earlier than every event time."""


def parse_record(record: tuple[str, int, int, int, bytes | None]) -> tuple[bool, Any]:
    """``(True, event)`` for a valid record, ``(False, (topic, partition, offset, reason))`` otherwise.

    ``record`` is ``(topic, partition, offset, kafka_timestamp_ms, value)``; a valid event gets those as
    ``topic``, ``partition``, ``offset`` and ``kafka_ts`` next to its own fields.
    """
    event, reason = parse_event(record[4])
    return _decided(record, event, reason)


def _decided(record: tuple[str, int, int, int, bytes | None], event: dict | None, reason: str | None,
             ) -> tuple[bool, Any]:
    """A parse's verdict on ``record``: the valid ``event`` with the record's place and time, or the dead letter."""
    topic, partition, offset, timestamp, _ = record
    if event is None:
        return False, (topic, partition, offset, reason)
    event["kafka_ts"] = timestamp
    event["topic"] = topic
    event["partition"] = partition
    event["offset"] = offset
    return True, event


def parse_nexmark_record(event_type: str | None, record: tuple[str, int, int, int, bytes | None]) -> tuple[bool, Any]:
    """:func:`parse_record` for a Nexmark record: :func:`kit.nexmark.parse_nexmark` decides, with the same reasons.

    ``event_type`` is the type of a three-topic layout's table (``"bid"``...), None for the one-topic layout (the
    value's ``type`` says). A valid event gets ``type`` (in both layouts), ``event_time`` (its ``dateTime``: what
    :func:`event_time_operator` reads) and the record's ``kafka_ts``, ``topic``, ``partition`` and ``offset``.
    """
    event, reason = parse_nexmark(record[4], event_type)
    if event is not None:
        if event_type is not None:
            event["type"] = event_type
        event["event_time"] = event["dateTime"]
    return _decided(record, event, reason)


def _is_valid(parsed: tuple[bool, Any]) -> bool:
    return parsed[0]


def _is_malformed(parsed: tuple[bool, Any]) -> bool:
    return not parsed[0]


def _payload(parsed: tuple[bool, Any]) -> Any:
    return parsed[1]


def _parse_writing_dead_letters(
    directory: str, parse: Callable[[Any], tuple[bool, Any]] = parse_record
) -> Callable[[Iterable[Any]], Iterator[dict]]:
    """A ``mapPartitions`` function: the valid events of a partition's records (``parse``), its malformed ones written.

    The malformed records' ``(topic, partition, offset, reason)`` go to ``directory`` as one keyed file
    (:func:`kit.sink.write_keyed`) once the partition is read: a task that runs again (a retried task, a batch
    regenerated after a restart) writes the same file, so each dead letter is in the output once.
    """

    def parse_all(records: Iterable[Any]) -> Iterator[dict]:
        malformed = []
        for record in records:
            valid, payload = parse(record)
            if valid:
                yield payload
            else:
                malformed.append(payload)
        if malformed:
            import pyarrow as pa

            from kit.sink import write_keyed

            # An Arrow table, not a pandas frame: a partition's parse and write take a third of the time
            # (benchmarks/results/changes.md §33).
            write_keyed(directory, pa.table(dict(zip(DEAD_LETTER_COLUMNS, zip(*malformed, strict=True), strict=True))))

    return parse_all


"""The columns of a dead-letter row."""


def _at_most_one_task_per_core(rdd: Any) -> Any:
    # A batch has a task per Kafka partition, and each Python task costs a round trip to a worker however
    # few records it holds: with 8 partitions on 2 cores, most of an idle batch's time. Coalescing (no
    # shuffle) reads several ranges in one task, in partition order; the records and their order per
    # partition are unchanged.
    # A batch whose ranges are all empty runs no read task at all: its records (none) are the same.
    # A direct stream's own read is regrouped rather than coalesced, so the parse runs in the read's Python pass.
    ranges = rdd.offsetRanges() if hasattr(rdd, "offsetRanges") else None
    if ranges is not None and not any(r.count() for r in ranges):
        return rdd.context.emptyRDD()
    cores = rdd.context.defaultParallelism
    if rdd.getNumPartitions() <= cores:
        return rdd
    return rdd.read_in_tasks(cores) if hasattr(rdd, "read_in_tasks") else rdd.coalesce(cores)


class Source:
    """A legacy workload's input: parsed events per input name, dead letters and late records split off.

    Args:
        raw: input name → DStream of ``(topic, partition, offset, kafka_timestamp_ms, value)`` tuples.
        dataset: the spec of the dataset being replayed (YSB reads its campaign table from it; a
            :class:`~kit.nexmark.NexmarkSpec` for the Nexmark queries).
        dead_letter_root: where the parse writes each input's malformed records,
            ``<root>/dead_letters.<input>`` (keyed files, see :func:`_parse_writing_dead_letters`): one pass
            over the records, nothing cached for a second consumer. A path every executor can write (on a
            cluster, a shared file system). Default: none; :attr:`dead_letters` then has a DStream per input
            for an output operation to write, and the parsed records are cached for it.
    """

    def __init__(
        self, raw: Mapping[str, Any], dataset: DatasetSpec | NexmarkSpec, dead_letter_root: str | None = None
    ) -> None:
        self.dataset = dataset
        self._raw = dict(raw)
        self._dead_letter_root = dead_letter_root
        self._parsed: dict[str, Any] = {}
        self.dead_letters: dict[str, Any] = {}
        """Input name → DStream of ``(topic, partition, offset, reason)``, filled as inputs are used; empty
        with ``dead_letter_root`` (the parse writes them)."""
        self.late: list[Any] = []
        """DStreams of the events builders dropped as too late (:meth:`drop_late`)."""

    def events(self, name: str = "events") -> Any:
        """The valid events of input ``name`` as a DStream of dicts (see :func:`parse_record`).

        Raises:
            ConfigError: ``name`` is not an input of this run.
        """
        if name not in self._raw:
            msg = f"workload asked for input {name!r}, but this run has only {sorted(self._raw)}."
            raise ConfigError(msg, field="input", expected=tuple(sorted(self._raw)), actual=name)
        return self._parse(name, parse_record)

    def nexmark(self, table: str = "bids") -> Any:
        """The valid Nexmark events of ``table`` (``"persons"``, ``"auctions"`` or ``"bids"``) as a DStream of dicts.

        The table's own input in the three-topic layout (its records parsed as that type), else the one-topic
        layout's input ``"nexmark"`` (each record's ``type`` says), keeping the table's type. Either way every
        record of the input read is parsed by :func:`parse_nexmark_record` and each malformed one is a dead letter
        of that input, once, however many tables a workload reads from it.

        Raises:
            ConfigError: an unknown table, or a run with neither input.
        """
        if table not in TABLE_TYPES:
            msg = f"Nexmark has no table {table!r}; its tables are {', '.join(TABLE_TYPES)}."
            raise ConfigError(msg, field="table", expected=tuple(TABLE_TYPES), actual=table)
        if table in self._raw:
            return self._parse(table, functools.partial(parse_nexmark_record, TABLE_TYPES[table]))
        if ONE_TOPIC_INPUT not in self._raw:
            msg = (f"a Nexmark workload asked for table {table!r}: this run has neither its topic nor the one-topic "
                   f"layout's input {ONE_TOPIC_INPUT!r}, only {sorted(self._raw)}.")
            raise ConfigError(msg, field="input", expected=(table, ONE_TOPIC_INPUT), actual=tuple(sorted(self._raw)))
        wanted = TABLE_TYPES[table]
        events = self._parse(ONE_TOPIC_INPUT, functools.partial(parse_nexmark_record, None))
        return events.filter(functools.partial(_of_type, wanted))

    def _parse(self, name: str, parse: Callable[[Any], tuple[bool, Any]]) -> Any:
        """The valid events of input ``name`` by ``parse`` (once per input), its dead letters split off."""
        if name not in self._parsed:
            # Read in no more tasks than the cluster has cores (see _at_most_one_task_per_core).
            records = self._raw[name].transform(_at_most_one_task_per_core)
            if self._dead_letter_root is not None:
                directory = f"{self._dead_letter_root}/dead_letters.{name}"
                self._parsed[name] = records.mapPartitions(_parse_writing_dead_letters(directory, parse))
            else:
                # Parsed once per batch and cached: the workload and the dead-letter output both read it.
                parsed = records.map(parse).cache()
                self._parsed[name] = parsed.filter(_is_valid).map(_payload)
                self.dead_letters[name] = parsed.filter(_is_malformed).map(_payload)
        return self._parsed[name]

    def drop_late(self, dropped: Any) -> None:
        """Report a DStream of events (or ``(event, detail)`` pairs) a builder dropped as too late."""
        self.late.append(dropped)


def _of_type(wanted: str, event: dict) -> bool:
    return bool(event["type"] == wanted)


# --------------------------------------------------------------------------------------------------------
# Event time on DStreams


def _advance(new_times: Iterable[int], state: tuple[int, int] | None) -> tuple[int, int]:
    # State is (watermark for this batch, max event time up to this batch). The watermark a batch works with
    # comes from the batches before it, as in Structured Streaming.
    seen = state[1] if state is not None else NO_WATERMARK
    return seen, max([seen, *new_times])


def _advance_sides(sides: int, new: Iterable[tuple[int, int]], state: tuple[int, tuple[int, ...]] | None,
                   ) -> tuple[int, tuple[int, ...]]:
    # State is (smallest of the inputs' max event times up to the batch before, each input's max up to this
    # batch): Spark's default multipleWatermarkPolicy, min. An input that has seen nothing counts as NO_WATERMARK
    # (Spark takes 0 for it, before every event), so the min stays NO_WATERMARK until every input has events.
    maxes = list(state[1]) if state is not None else [NO_WATERMARK] * sides
    seen = min(maxes)
    for side, time_ in new:
        maxes[side] = max(maxes[side], time_)
    return seen, tuple(maxes)


def _watermark(max_seen: int, delay_ms: int) -> int:
    # Before any event there is nothing to subtract the delay from.
    return NO_WATERMARK if max_seen == NO_WATERMARK else max_seen - delay_ms


def event_time_operator(
    events: Any,
    *,
    delay_ms: int,
    key: Callable[[dict], Any],
    step: Callable[[Any, list[dict], int], tuple[Any, list, list]],
    shards: int = 4,
    side: Callable[[dict], int] | None = None,
    sides: int = 1,
    then: Sequence[tuple[Callable[[Any], Any], Callable[[Any, list, int], tuple[Any, list, list]]]] = (),
) -> tuple[Any, Any]:
    """Run ``step`` over keyed state with a global event-time watermark.

    This is Structured Streaming's stateful operator model, on DStreams.

    The watermark of batch N is the largest ``event_time`` of batches 0..N-1 minus ``delay_ms`` (Spark
    computes it the same way; it stays :data:`NO_WATERMARK` until events arrive). It is kept in
    ``updateStateByKey`` state, so it survives a restart from the checkpoint with the rest of the state.
    Every batch, each shard of the state (``hash(key(event)) % shards``) is called as
    ``step(shard_state, new_events, watermark) -> (shard_state, output_rows, late_events)`` with the shard's
    new events (in no particular order; may be empty), including batches without any.

    Args:
        events: DStream of event dicts.
        delay_ms: the allowed lateness.
        key: what state is kept by (e.g. ``lambda e: e["user"]``); also decides the shard.
        step: the operator's logic; ``shard_state`` is None the first time.
        shards: state partitions.
        side: for a job over several inputs (a join), which of ``sides`` inputs an event is of (``0 ..
            sides - 1``): the watermark is then the smallest of the inputs' largest event times, minus the
            delay (Structured Streaming's default ``multipleWatermarkPolicy``, ``min``), and stays
            :data:`NO_WATERMARK` until every input has had an event. Default None: one input.
        sides: how many inputs ``side`` tells apart.
        then: further stages, each ``(key, step)`` as above, run over the previous stage's output rows in the
            same batch with the same watermark: Structured Streaming's chained stateful operators (Spark 4), where
            a downstream operator gets its upstream's output in the same micro-batch and evicts by the same
            watermark. A stage's rows are what ``key`` and ``step`` of the next one read.

    Returns:
        ``(rows, late)``: DStreams of the last stage's output rows and of the late events every stage returned.
    """
    events = events.cache()  # read twice a batch: for the watermark and for the state
    if side is None:
        marks = events.map(lambda e: (0, e["event_time"])).updateStateByKey(_advance)
    else:
        which = side
        marks = events.map(lambda e: (0, (which(e), e["event_time"]))).updateStateByKey(
            functools.partial(_advance_sides, sides)
        )
    ticks = marks.flatMap(lambda kv: [(shard, ("w", _watermark(kv[1][0], delay_ms))) for shard in range(shards)])
    rows, late = _keyed_stage(events, ticks, key, step, shards)
    for next_key, next_step in then:
        rows, more_late = _keyed_stage(rows, ticks, next_key, next_step, shards)
        late = late.union(more_late)
    return rows, late


def sliding_window_starts(t: int, size_ms: int, slide_ms: int) -> list[int]:
    """The starts of every window ``[start, start + size_ms)`` holding ``t``, starts on multiples of ``slide_ms``."""
    last = t - t % slide_ms
    return [start for start in range(last, t - size_ms, -slide_ms) if start + size_ms > t]


def _keyed_stage(events: Any, ticks: Any, key: Callable[[Any], Any], step: Callable[..., tuple[Any, list, list]],
                 shards: int) -> tuple[Any, Any]:
    """One stage of :func:`event_time_operator`: ``step`` per shard of ``key``, given the batch's watermark tick."""
    keyed = events.map(lambda e: (zlib.crc32(repr(key(e)).encode()) % shards, ("e", e)))

    def update(values: list, state: tuple | None) -> tuple:
        watermark = NO_WATERMARK
        new: list = []
        for tag, item in values:
            if tag == "w":
                watermark = item
            else:
                new.append(item)
        inner, rows, late = step(state[0] if state is not None else None, new, watermark)
        return inner, rows, late

    state = keyed.union(ticks).updateStateByKey(update, numPartitions=shards)
    return state.flatMap(lambda kv: kv[1][1]), state.flatMap(lambda kv: kv[1][2])


def resolve(workload: str | workloads.WorkloadSpec, variant: str | Callable = "default") -> workloads.Job:
    """The job running ``variant`` of ``workload`` here.

    ``variant`` is a variant of the spec (a builder in ``legacy.workloads.<workload>``), or your own builder
    (``fn(ssc, source) -> DStream``, or its ``package.module:name``).

    Raises:
        ConfigError: unknown workload or variant, or a reference that cannot be imported.
    """
    return workloads.resolve("legacy", workload, variant, builders=_builders)


def _builders(workload: str) -> object:
    """The module of this engine's builders of ``workload``."""
    return importlib.import_module(f"legacy.workloads.{workload}")
