"""The Structured Streaming halves of the paired workloads, and the source they read.

Each module here has the name of a workload in :mod:`kit.workloads` and exposes ``build(spark, source) ->
DataFrame`` (plus any extra variant its spec names): a streaming DataFrame with the spec's columns (keys,
values, ``last_input_ts`` in milliseconds). A builder only describes the query; :mod:`modern.runner` names,
starts, and stops it, and writes its output with an idempotent ``foreachBatch`` sink in the spec's output
mode.

:class:`Source` reads each input topic with the Kafka source (:mod:`modern.kafka`) and parses records the
way :func:`kit.events.parse_event` does (the function the legacy side and the oracle use, so a record is
rejected for the same reason everywhere): a record in the canonical form events are written in (compact
JSON, the fields in order, strings without escapes) is parsed in the JVM with ``from_json``, as a team with
Spark's connector would; any other record goes to ``parse_event`` itself in an Arrow UDF, because Spark's
JSON parser and Python's disagree on corner cases (duplicate keys, ``NaN``, numbers as strings, huge
integers...). A valid event is in the canonical form unless it was written otherwise, so every malformed
record goes through the UDF, which writes it to the dead-letter output as it finds it (``dead_letter_root``):
a run reads each topic once, not a second time for the dead letters. Builders see only valid events.

Example::

    source = Source(spark, "127.0.0.1:9092", {"events": "events"}, dataset_spec)
    counts = modern.workloads.running_counts.build(spark, source)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kit import layout, workloads
from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.events import EVENT_TIME_MAX_MS, EVENT_TIME_MIN_MS, FIELD_TYPES, REQUIRED_FIELDS, parse_event
from kit.nexmark import ONE_TOPIC_INPUT, TABLE_TYPES, TYPE_FIELDS, NexmarkSpec, parse_nexmark

__all__ = ["CANONICAL_EVENT", "EVENT_COLUMNS", "DeadLettersFrom", "Source", "resolve", "with_nexmark", "with_parsed"]

DeadLettersFrom = Mapping[str, Mapping[int, int]]
"""Topic → partition → the first offset whose malformed record is dead-lettered (a partition absent: all)."""

EVENT_COLUMNS: tuple[str, ...] = (
    *REQUIRED_FIELDS,
    "event_time_ms",
    "kafka_ts",
    "topic",
    "partition",
    "offset",
)
"""Columns of :meth:`Source.events`: the event fields (``event_time`` as a timestamp), ``event_time_ms``,
the Kafka timestamp ``kafka_ts`` (a timestamp) and the record's coordinates."""

_SPARK_TYPES = {str: "string", int: "long"}
_ARROW_TYPES = {str: pa.string(), int: pa.int64()}
_EVENT_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[kind]}" for name, kind in FIELD_TYPES.items())
"""The event fields of :data:`kit.events.FIELD_TYPES` as Spark DDL: what ``from_json`` parses."""
_PARSED = f"{_EVENT_SCHEMA}, reason string"
"""The struct :func:`with_parsed` adds: the event fields and ``reason`` (null for a valid event)."""
_PARSED_ARROW = pa.struct(
    [pa.field(name, _ARROW_TYPES[kind]) for name, kind in FIELD_TYPES.items()] + [pa.field("reason", pa.string())]
)
""":data:`_PARSED` as an Arrow type (what the UDF of :func:`with_parsed` returns)."""

# The canonical form of an event: what the dataset writes, and what json.dumps(event, separators=(",", ":"))
# writes for plain strings. A JSON string without quotes, backslashes or control characters is the same text
# to every JSON parser, and an integer of at most 18 digits fits a long, so for text of this form Spark's
# from_json and Python's json.loads agree exactly; the event is valid iff event_time is in range. (\z, not $:
# Java's $ also matches before a final line terminator such as U+0085, which json.loads rejects.)
_STRING = r'"[^"\\\x00-\x1f]*"'
CANONICAL_EVENT = (
    "^\\{"
    + ",".join(f'"{name}":{_STRING}' for name in REQUIRED_FIELDS if name != "event_time")
    + r',"event_time":(0|-?[1-9][0-9]{0,17})\}\z'
)
"""Regular expression (Java syntax) of the records :class:`Source` parses in the JVM."""


def _parse_values(sent: pa.Array, values: pa.Array) -> pa.StructArray:
    """``parse_event`` over the ``values`` that were ``sent``: the event fields and ``reason``, a row each.

    A row that was not sent (parsed in the JVM, and :func:`with_parsed` takes the JVM's result) is a null
    struct. A sent null value is a tombstone, which ``parse_event`` calls ``bad_json``. With the canonical
    records of a clean topic nothing is sent, and a batch costs one null array instead of a Python loop over
    its rows (and no pandas conversion either way: this is an Arrow UDF).
    """
    n = len(values)
    was_sent = pc.fill_null(sent, False)
    rows = pc.indices_nonzero(was_sent).to_pylist()
    if not rows:
        return pa.nulls(n, _PARSED_ARROW)
    columns: dict[str, list[Any]] = {name: [None] * n for name in (*REQUIRED_FIELDS, "reason")}
    reasons = columns["reason"]
    for i, value in zip(rows, values.take(rows).to_pylist(), strict=True):
        event, reasons[i] = parse_event(value)
        if event is not None:
            for name in REQUIRED_FIELDS:
                columns[name][i] = event[name]
    arrays = [pa.array(columns[field.name], type=field.type) for field in _PARSED_ARROW]
    return pa.StructArray.from_arrays(arrays, fields=list(_PARSED_ARROW), mask=pc.invert(was_sent))


def _parse_and_dead_letter(
    directories: Mapping[str, str] | None, dead_letters_from: DeadLettersFrom | None = None
) -> Any:
    """The Arrow UDF function of :func:`with_parsed`: ``parse_event`` over the values it is sent.

    Given ``directories`` (topic → directory), it also writes the malformed records to their topic's directory
    as it finds them (those at or after ``dead_letters_from``'s offset of their partition, if given).

    The dead letters are keyed files (:func:`kit.sink.write_keyed`): a task that runs again (a retried task, a
    batch re-run after a restart) writes the same files, so each malformed record is in the output once,
    exactly as a batch sink's idempotence makes it, and the records are read only by the query that also
    computes the job.
    """
    directories = dict(directories or {})

    # Spark infers the kind of UDF from these type hints (Arrays -> Array: a scalar Arrow UDF).
    def parse(sent: pa.Array, topic: pa.Array, partition: pa.Array, offset: pa.Array, value: pa.Array) -> pa.Array:
        parsed = _parse_values(sent, value)
        if directories:
            _write_dead_letters(directories, topic, partition, offset, parsed.field("reason"), dead_letters_from)
        return parsed

    return parse


def _write_dead_letters(
    directories: Mapping[str, str],
    topic: pa.Array,
    partition: pa.Array,
    offset: pa.Array,
    reason: pa.Array,
    dead_letters_from: DeadLettersFrom | None = None,
) -> None:
    """Write the rows with a ``reason`` to their topic's directory of ``directories`` (keyed files).

    With ``dead_letters_from`` (topic → partition → offset), only those at or after their partition's offset.
    """
    malformed = pc.fill_null(pc.is_valid(reason), False)
    if not pc.any(malformed).as_py():
        return
    from kit.sink import write_keyed

    # In Arrow from end to end: through pandas, the write cost a task several times more (changes.md §33).
    rows = pa.table({
        "topic": topic.filter(malformed),
        "partition": partition.filter(malformed).cast(pa.int32()),
        "offset": offset.filter(malformed).cast(pa.int64()),
        "reason": reason.filter(malformed),
    })
    if dead_letters_from:
        rows = rows.filter(pa.array(_at_or_after_floor(rows, dead_letters_from), pa.bool_()))
    for name in sorted(set(rows.column("topic").to_pylist()) & directories.keys()):
        write_keyed(directories[name], rows.filter(pc.equal(rows.column("topic"), name)))


def _at_or_after_floor(rows: pa.Table, dead_letters_from: DeadLettersFrom) -> list[bool]:
    """Whether each dead-letter row is at or after its topic's and partition's first offset to write (none: all)."""
    topics, partitions, offsets = (rows.column(c).to_pylist() for c in ("topic", "partition", "offset"))
    return [offset >= dead_letters_from.get(t, {}).get(p, -1)
            for t, p, offset in zip(topics, partitions, offsets, strict=True)]


_NEXMARK_SPARK_TYPES = {str: "string", int: "long"}


def _nexmark_struct(event_type: str) -> tuple[str, pa.StructType]:
    """What :func:`with_nexmark` parses ``event_type`` into, as DDL and Arrow: ``type``, its fields, ``reason``."""
    fields = [("type", str), *TYPE_FIELDS[event_type], ("reason", str)]
    ddl = ", ".join(f"`{name}` {_NEXMARK_SPARK_TYPES[kind]}" for name, kind in fields)
    return ddl, pa.struct([pa.field(name, _ARROW_TYPES[kind]) for name, kind in fields])


def _parse_nexmark_udf(
    wanted: str,
    topic_types: Mapping[str, str] | None,
    directories: Mapping[str, str] | None,
    dead_letters_from: DeadLettersFrom | None = None,
) -> Any:
    """The Arrow UDF function of :func:`with_nexmark`: :func:`kit.nexmark.parse_nexmark` over every value.

    ``topic_types``: each topic's event type (the three-topic layout), or None (the one-topic layout: the
    value's ``type``). A valid event of type ``wanted`` gets its fields, one of another type only ``type``; a
    malformed record only ``reason``, and with ``directories`` it is also written there as it is found (as
    :func:`_parse_and_dead_letter`, from ``dead_letters_from``'s offsets if given).
    """
    _, arrow = _nexmark_struct(wanted)
    names = [field.name for field in arrow]
    fields = [name for name, _ in TYPE_FIELDS[wanted]]
    topic_types = dict(topic_types) if topic_types is not None else None
    directories = dict(directories or {})

    def parse(topic: pa.Array, partition: pa.Array, offset: pa.Array, value: pa.Array) -> pa.Array:
        n = len(value)
        columns: dict[str, list[Any]] = {name: [None] * n for name in names}
        types, reasons = columns["type"], columns["reason"]
        for i, (where, record) in enumerate(zip(topic.to_pylist(), value.to_pylist(), strict=True)):
            declared = topic_types[where] if topic_types is not None else None
            event, reasons[i] = parse_nexmark(record, declared)
            if event is None:
                continue
            types[i] = declared if declared is not None else event["type"]
            if types[i] == wanted:
                for name in fields:
                    columns[name][i] = event[name]
        parsed = pa.StructArray.from_arrays([pa.array(columns[f.name], type=f.type) for f in arrow], fields=list(arrow))
        if directories:
            _write_dead_letters(directories, topic, partition, offset, parsed.field("reason"), dead_letters_from)
        return parsed

    return parse


def with_nexmark(
    frame: Any,
    event_type: str,
    topic_types: Mapping[str, str] | None,
    column: str = "p",
    dead_letters: Mapping[str, str] | None = None,
    dead_letters_from: DeadLettersFrom | None = None,
) -> Any:
    """``frame`` with ``column``: :func:`kit.nexmark.parse_nexmark` over its binary ``value``, exactly as it decides.

    The new column is a struct of ``type``, the fields of ``event_type`` (null for an event of another type) and
    ``reason`` (null for a valid event). Every record goes through the Arrow UDF (Python): unlike the kit's
    events, no JVM fast path yet.

    Args:
        frame: a DataFrame with ``topic``, ``partition``, ``offset`` and a binary ``value``.
        event_type: the type whose fields the struct carries (``"bid"``...).
        topic_types: topic → event type in the three-topic layout; None in the one-topic layout.
        column: the name of the new column.
        dead_letters: topic → directory where the UDF writes each malformed record (it is then declared
            non-deterministic, as in :func:`with_parsed`).
        dead_letters_from: as :func:`with_parsed`'s.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    ddl, _ = _nexmark_struct(event_type)
    # PySpark's stubs lack the form that infers the UDF's kind from the function's type hints (no functionType).
    parse = _parse_nexmark_udf(event_type, topic_types, dead_letters, dead_letters_from)
    udf = F.arrow_udf(parse, ddl)  # type: ignore[call-overload]
    if dead_letters:
        udf = udf.asNondeterministic()
    return frame.withColumn(column, udf(F.col("topic"), F.col("partition"), F.col("offset"), F.col("value")))


_TEXT, _JSON, _CANONICAL = "_dmk_text", "_dmk_json", "_dmk_canonical"
"""with_parsed's intermediate columns (dropped before it returns)."""


def with_parsed(
    frame: Any,
    column: str = "p",
    dead_letters: Mapping[str, str] | None = None,
    dead_letters_from: DeadLettersFrom | None = None,
) -> Any:
    """``frame`` with ``column``: :func:`kit.events.parse_event` over its binary ``value``, exactly as it decides.

    The new column is a struct of the event fields and ``reason`` (null for a valid event).

    Valid records of the form :data:`CANONICAL_EVENT` are parsed in the JVM; the Arrow UDF is sent only the
    others' values (the rest go as nulls and come back as null structs). Each record's text, ``from_json`` and
    form check are computed once, in a projection of their own: in one projection Spark evaluated
    ``from_json`` again for every field it took and for the condition (a ``CASE WHEN`` condition's
    subexpressions are not shared with its branches), and its optimizer does not merge a projection into the
    next when that would repeat such an expression.

    Args:
        frame: a DataFrame with a binary ``value`` column; with ``dead_letters``, also ``topic``,
            ``partition`` and ``offset``.
        column: the name of the new column.
        dead_letters: topic → directory: where the UDF writes each malformed record (see
            :func:`_parse_and_dead_letter`). The UDF is then declared non-deterministic, so that Spark neither
            evaluates it twice for a row nor pushes a filter below it (every record is seen).
        dead_letters_from: topic → partition → offset: write only the malformed records at or after it (a rewound
            cutover's modern query re-reads records the legacy job already dead-lettered). Default: all.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    staged = frame.withColumn(_TEXT, F.col("value").cast("string"))
    text = F.col(_TEXT)
    staged = staged.withColumns({
        _JSON: F.from_json(text, _EVENT_SCHEMA),
        _CANONICAL: F.coalesce(F.is_valid_utf8(text) & text.rlike(CANONICAL_EVENT), F.lit(False)),
    })
    fields = F.col(_JSON)
    in_jvm = F.col(_CANONICAL) & F.coalesce(
        fields["event_time"].between(EVENT_TIME_MIN_MS, EVENT_TIME_MAX_MS - 1), F.lit(False)
    )
    parsed_in_jvm = F.struct(
        *(fields[name].alias(name) for name in REQUIRED_FIELDS), F.lit(None).cast("string").alias("reason")
    )
    # PySpark's stubs lack the form that infers the UDF's kind from the function's type hints (no functionType).
    parse = _parse_and_dead_letter(dead_letters, dead_letters_from)
    udf = F.arrow_udf(parse, _PARSED)  # type: ignore[call-overload]
    if dead_letters:
        udf = udf.asNondeterministic()
        topic, partition, offset = F.col("topic"), F.col("partition"), F.col("offset")
    else:
        topic, partition, offset = F.lit(None).cast("string"), F.lit(None).cast("int"), F.lit(None).cast("long")
    sent = ~in_jvm
    in_python = udf(
        sent, F.when(sent, topic), F.when(sent, partition), F.when(sent, offset), F.when(sent, F.col("value"))
    )
    return staged.withColumn(column, F.when(in_jvm, parsed_in_jvm).otherwise(in_python)).drop(
        _TEXT, _JSON, _CANONICAL
    )


class Source:
    """A modern workload's input: one Kafka stream per input name, parsed.

    Args:
        spark: the SparkSession.
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        dataset: the spec of the dataset being replayed (YSB reads its campaign table from it).
        options: extra Kafka source options for every input (e.g. ``maxOffsetsPerTrigger``).
        dead_letter_root: where the parse writes each input's malformed records, ``<root>/dead_letters.<input>``
            (as keyed files, see :func:`_parse_and_dead_letter`), so no second query reads the topics for them.
            A local path the executors can reach (on a cluster, a shared file system). Default: none written;
            :meth:`dead_letters` gives them as a DataFrame instead.
        max_offsets_by_input: input name → records per trigger of that input: a source's ``maxOffsetsPerTrigger``
            is the sum over the inputs it reads, so a query of the stream's smaller inputs gets batches as short in
            event time as one reading the whole stream. Default: none (``options`` hold the cap, if any).
        dead_letters_from: topic → partition → offset: only the malformed records at or after it are dead letters
            of this query (a rewound cutover: the legacy job dead-lettered those before its position). Default: all.
    """

    def __init__(
        self,
        spark: Any,
        bootstrap_servers: str,
        topics: Mapping[str, str],
        dataset: DatasetSpec | NexmarkSpec,
        options: Mapping[str, Any] | None = None,
        dead_letter_root: str | None = None,
        max_offsets_by_input: Mapping[str, int] | None = None,
        dead_letters_from: DeadLettersFrom | None = None,
    ) -> None:
        self.spark = spark
        self.dataset = dataset
        self.bootstrap_servers = bootstrap_servers
        self.topics = dict(topics)
        self.options = dict(options or {})
        self.dead_letter_root = dead_letter_root
        self.max_offsets_by_input = dict(max_offsets_by_input or {})
        self.dead_letters_from = {topic: dict(offsets) for topic, offsets in (dead_letters_from or {}).items()}
        self.used: list[str] = []
        """Input names builders asked for, in order."""
        self._nexmark_inputs: dict[str, Mapping[str, str] | None] = {}
        """Inputs read as Nexmark records (:meth:`nexmark`): each one's topic → event type (None: one topic)."""

    def _parsed(self, *names: str, with_dead_letters: bool = True) -> Any:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

        frame, directories = self._read(names, with_dead_letters)
        return with_parsed(frame, "p", directories, self.dead_letters_from).select(
            "topic", "partition", "offset", F.col("timestamp").alias("kafka_ts"), "p"
        )

    def _read(self, names: tuple[str, ...], with_dead_letters: bool) -> tuple[Any, dict[str, str] | None]:
        """One Kafka source subscribed to the topics of ``names``, and each topic's dead-letter directory."""
        from modern.kafka import source_format

        for name in names:
            if name not in self.topics:
                msg = f"workload asked for input {name!r}, but this run has only {sorted(self.topics)}."
                raise ConfigError(msg, field="input", expected=tuple(sorted(self.topics)), actual=name)
            if name not in self.used:
                self.used.append(name)
        fmt = source_format(self.spark)
        reader = (
            self.spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", ",".join(self.topics[name] for name in names))
            .option("startingOffsets", "earliest")
        )
        if fmt == "kafka-py":
            from kit.spark import default_parallelism

            # At most one task per core (the options below can change it): see modern.kafka.group_ranges. A
            # Connect server that does not say its parallelism gets Spark's one task per partition range.
            cores = default_parallelism(self.spark)
            if cores is not None:
                reader = reader.option("maxPartitions", cores)
        for option, value in self.options.items():
            reader = reader.option(option, value)
        if names and all(name in self.max_offsets_by_input for name in names):
            reader = reader.option("maxOffsetsPerTrigger", sum(self.max_offsets_by_input[name] for name in names))
        directories = None
        if self.dead_letter_root is not None and with_dead_letters:
            directories = {
                self.topics[name]: str(layout.dead_letters(self.dead_letter_root, name)) for name in names
            }
        return reader.load(), directories

    def nexmark(self, table: str = "bids") -> Any:
        """The valid Nexmark events of ``table`` (``"persons"``, ``"auctions"`` or ``"bids"``): a streaming DataFrame.

        Its columns: the type's fields (:data:`kit.nexmark.TYPE_FIELDS`, ``dateTime`` in ms), ``event_time``
        (``dateTime`` as a timestamp), ``kafka_ts`` (a timestamp), ``topic``, ``partition`` and ``offset``. Read
        from the table's own input in the three-topic layout (its records parsed as that type), else from the
        one-topic layout's input ``"nexmark"`` (each record's ``type`` says), keeping the table's type. Every
        malformed record of the input read goes to its dead-letter output.

        Raises:
            ConfigError: an unknown table, or a run with neither input.
        """
        return self.nexmark_together(table)[0]

    def nexmark_together(self, *tables: str) -> list[Any]:
        """:meth:`nexmark` of several tables from *one* Kafka source: a DataFrame per table, in order.

        The source subscribes to the tables' topics (three-topic layout) or reads the one-topic input once; each
        table's DataFrame parses every record of it and keeps its own type. Spark plans one source for the
        relation the DataFrames share, so the tables advance together (see :meth:`events_together`: with a
        source per table, a rate limit lets the smaller table run ahead in event time, and a query watermark,
        the minimum of its inputs', then admits the other's too-late records). Each malformed record is
        dead-lettered by every table's parse, as the same keyed file, so once.

        Raises:
            ConfigError: an unknown table, or a run with neither the tables' topics nor the one-topic input.
        """
        from pyspark.sql import functions as F  # noqa: N812

        for table in tables:
            if table not in TABLE_TYPES:
                msg = f"Nexmark has no table {table!r}; its tables are {', '.join(TABLE_TYPES)}."
                raise ConfigError(msg, field="table", expected=tuple(TABLE_TYPES), actual=table)
        topic_types: dict[str, str] | None
        if all(table in self.topics for table in tables):
            names = tables
            topic_types = {self.topics[table]: TABLE_TYPES[table] for table in tables}
        elif ONE_TOPIC_INPUT in self.topics:
            names, topic_types = (ONE_TOPIC_INPUT,), None
        else:
            msg = (f"a Nexmark workload asked for tables {list(tables)}: this run has neither their topics nor the "
                   f"one-topic layout's input {ONE_TOPIC_INPUT!r}, only {sorted(self.topics)}.")
            raise ConfigError(msg, field="input", expected=(*tables, ONE_TOPIC_INPUT),
                              actual=tuple(sorted(self.topics)))
        for name in names:
            self._nexmark_inputs[name] = topic_types
        frame, directories = self._read(tuple(names), with_dead_letters=True)
        frames = []
        for table in tables:
            wanted = TABLE_TYPES[table]
            parsed = with_nexmark(frame, wanted, topic_types, "p", directories, self.dead_letters_from)
            fields = [F.col(f"p.{field}").alias(field) for field, _ in TYPE_FIELDS[wanted]]
            frames.append(parsed.where(F.col("p.reason").isNull() & (F.col("p.type") == wanted)).select(
                *fields,
                F.timestamp_millis("p.dateTime").alias("event_time"),
                F.col("timestamp").alias("kafka_ts"),
                "topic",
                "partition",
                "offset",
            ))
        return frames

    def events(self, name: str = "events") -> Any:
        """The valid events of input ``name``: a streaming DataFrame with :data:`EVENT_COLUMNS`.

        Raises:
            ConfigError: ``name`` is not an input of this run.
        """
        return self.events_together(name)

    def events_together(self, *names: str) -> Any:
        """The valid events of several inputs from *one* Kafka source subscribed to all their topics.

        Tell them apart by ``topic`` (see :attr:`topics`).

        A source applies ``maxOffsetsPerTrigger`` on its own; with one source per input, a backlog makes
        each read the same number of records per micro-batch, so the busier input falls behind the other
        in event time, and a query watermark (the minimum over its inputs) then lags the leading input's
        clock: its too-late records are admitted. One source splits the limit over every partition in
        proportion to its lag, so the inputs advance together, as they were produced.

        Raises:
            ConfigError: a name is not an input of this run.
        """
        from pyspark.sql import functions as F  # noqa: N812

        parsed = self._parsed(*names)
        fields = [F.col(f"p.{field}").alias(field) for field in REQUIRED_FIELDS if field != "event_time"]
        return parsed.where(F.col("p.reason").isNull()).select(
            *fields,
            F.timestamp_millis("p.event_time").alias("event_time"),
            F.col("p.event_time").alias("event_time_ms"),
            "kafka_ts",
            "topic",
            "partition",
            "offset",
        )

    def dead_letters(self, name: str = "events") -> Any:
        """Malformed records of input ``name`` (from :attr:`dead_letters_from`): topic, partition, offset, reason."""
        from pyspark.sql import functions as F  # noqa: N812

        if name in self._nexmark_inputs:
            frame, _ = self._read((name,), with_dead_letters=False)
            parsed = with_nexmark(frame, "bid", self._nexmark_inputs[name])
        else:
            parsed = self._parsed(name, with_dead_letters=False)
        malformed = F.col("p.reason").isNotNull()
        for topic, offsets in self.dead_letters_from.items():
            for partition, first in offsets.items():
                before = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < first)
                malformed = malformed & ~before
        return parsed.where(malformed).select("topic", "partition", "offset", F.col("p.reason").alias("reason"))


def resolve(workload: str | workloads.WorkloadSpec, variant: str | Callable = "default") -> workloads.Job:
    """The job running ``variant`` of ``workload`` here.

    ``variant`` is a variant of the spec (a builder in ``modern.workloads.<workload>``), or your own builder
    (``fn(spark, source) -> DataFrame``, or its ``package.module:name``).

    Raises:
        ConfigError: unknown workload or variant, or a reference that cannot be imported.
    """
    return workloads.resolve("modern", workload, variant, builders=_builders)


def _builders(workload: str) -> object:
    """The module of this engine's builders of ``workload``."""
    return importlib.import_module(f"modern.workloads.{workload}")
