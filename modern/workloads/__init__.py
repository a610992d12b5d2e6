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
Spark's connector would; any other record goes to ``parse_event`` itself in a pandas UDF, because Spark's
JSON parser and Python's disagree on corner cases (duplicate keys, ``NaN``, numbers as strings, huge
integers...). Builders see only valid events; the malformed ones are a separate DataFrame the runner writes
to the dead-letter output.

Example::

    source = Source(spark, "127.0.0.1:9092", {"events": "events"}, dataset_spec)
    counts = modern.workloads.running_counts.build(spark, source)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from kit.dataset import DatasetSpec
from kit.errors import ConfigError
from kit.events import EVENT_TIME_MAX_MS, EVENT_TIME_MIN_MS, REQUIRED_FIELDS, parse_event

__all__ = ["CANONICAL_EVENT", "EVENT_COLUMNS", "Source", "parse_value"]

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

_PARSED = (
    "event_id string, user string, key string, ad_id string, ad_type string, event_type string, "
    "event_time long, reason string"
)
_EVENT_SCHEMA = (
    "event_id string, user string, key string, ad_id string, ad_type string, event_type string, event_time long"
)

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


def _parse_values(values: pd.Series) -> pd.DataFrame:
    rows = []
    for value in values:
        event, reason = parse_event(value)
        if event is None:
            rows.append((None, None, None, None, None, None, None, reason))
        else:
            rows.append((*(event[name] for name in REQUIRED_FIELDS), None))
    return pd.DataFrame(rows, columns=[*REQUIRED_FIELDS, "reason"])


def parse_value(value: Any) -> Any:
    """The Column of :func:`kit.events.parse_event` over a binary ``value`` Column: a struct of the event
    fields and ``reason`` (null for a valid event), exactly as ``parse_event`` decides.

    Records of the form :data:`CANONICAL_EVENT` are parsed in the JVM; the pandas UDF sees only the others'
    values (nulls cost next to nothing to ship to Python).
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    text = value.cast("string")
    canonical = F.coalesce(F.is_valid_utf8(text) & text.rlike(CANONICAL_EVENT), F.lit(False))
    fields = F.from_json(text, _EVENT_SCHEMA)
    in_range = fields["event_time"].between(EVENT_TIME_MIN_MS, EVENT_TIME_MAX_MS - 1)
    in_jvm = F.struct(
        *(F.when(in_range, fields[name]).alias(name) for name in REQUIRED_FIELDS),
        F.when(in_range, F.lit(None).cast("string")).otherwise(F.lit("bad_timestamp")).alias("reason"),
    )
    in_python = F.pandas_udf(_parse_values, _PARSED)(F.when(~canonical, value))
    return F.when(canonical, in_jvm).otherwise(in_python)


class Source:
    """A modern workload's input: one Kafka stream per input name, parsed.

    Args:
        spark: the SparkSession.
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        dataset: the spec of the dataset being replayed (YSB reads its campaign table from it).
        options: extra Kafka source options for every input (e.g. ``maxOffsetsPerTrigger``).
    """

    def __init__(
        self,
        spark: Any,
        bootstrap_servers: str,
        topics: Mapping[str, str],
        dataset: DatasetSpec,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.spark = spark
        self.dataset = dataset
        self.bootstrap_servers = bootstrap_servers
        self.topics = dict(topics)
        self.options = dict(options or {})
        self.used: list[str] = []
        """Input names builders asked for, in order."""

    def _parsed(self, *names: str) -> Any:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

        from modern.kafka import source_format

        for name in names:
            if name not in self.topics:
                raise ConfigError(
                    f"workload asked for input {name!r}, but this run has only {sorted(self.topics)}.",
                    field="input",
                    expected=tuple(sorted(self.topics)),
                    actual=name,
                )
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
            # At most one task per core (the options below can change it): see modern.kafka.group_ranges.
            reader = reader.option("maxPartitions", self.spark.sparkContext.defaultParallelism)
        for option, value in self.options.items():
            reader = reader.option(option, value)
        return reader.load().select(
            "topic", "partition", "offset", F.col("timestamp").alias("kafka_ts"), parse_value(F.col("value")).alias("p")
        )

    def events(self, name: str = "events") -> Any:
        """The valid events of input ``name``: a streaming DataFrame with :data:`EVENT_COLUMNS`.

        Raises:
            ConfigError: ``name`` is not an input of this run.
        """
        return self.events_together(name)

    def events_together(self, *names: str) -> Any:
        """The valid events of several inputs from *one* Kafka source subscribed to all their topics
        (tell them apart by ``topic``, see :attr:`topics`).

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
        """The malformed records of input ``name``: ``topic, partition, offset, reason``."""
        from pyspark.sql import functions as F  # noqa: N812

        parsed = self._parsed(name)
        return parsed.where(F.col("p.reason").isNotNull()).select(
            "topic", "partition", "offset", F.col("p.reason").alias("reason")
        )
