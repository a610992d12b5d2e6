"""What ``dmk migrate`` knows: every DStream-era construct it reports, with its Structured Streaming counterpart.

One :class:`Rule` per construct: the counterpart (Spark 4.x), the section of ``docs/playbook.md`` that covers it,
whether the rewrite is mechanical, the semantic trap to check, and the evidence in a rewrite that addresses it
(alternatives of tokens that :mod:`migrate.review` collects from the modern job). The counterparts follow
``docs/playbook.md``'s map; ``tests/test_migrate.py`` checks that every anchor here is a heading there.

Example:
    >>> RULES["DStream.updateStateByKey"].playbook
    'docs/playbook.md#running_counts'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONF_RULES", "DSTREAM_ONLY_METHODS", "MODULE_NAMES", "PLAYBOOK", "PYTHON2_RULES", "RULES", "Rule",
    "SSC_ONLY_METHODS", "playbook_link",
]

PLAYBOOK = "docs/playbook.md"

# Result kinds of a construct (what the analyser tracks in variables).
SSC, DSTREAM, SOURCE, PAIR_OF_DSTREAMS = "ssc", "dstream", "source", "pair_of_dstreams"


def playbook_link(anchor: str) -> str:
    """``docs/playbook.md#anchor``."""
    return f"{PLAYBOOK}#{anchor}"


@dataclass(frozen=True)
class Rule:
    """One construct of a DStream job and how it migrates.

    Attributes:
        construct: its name in findings (``DStream.map``, ``KafkaUtils.createDirectStream``, a conf key).
        counterpart: the Structured Streaming (Spark 4.x) counterpart.
        anchor: the heading of docs/playbook.md that covers it (GitHub's slug).
        automatic: whether the rewrite is mechanical.
        note: the semantic trap to check.
        addressed_by: alternatives, each a set of tokens that must all occur in the rewrite
            (method names, ``format:kafka``, ``option:checkpointLocation``, ``trigger:processingTime``...).
        returns: what the construct evaluates to, for the analyser's tracking (None: nothing tracked).
    """

    construct: str
    counterpart: str
    anchor: str
    automatic: bool
    note: str
    addressed_by: tuple[frozenset[str], ...] = ()
    returns: str | None = None

    @property
    def playbook(self) -> str:
        """``docs/playbook.md#anchor``."""
        return playbook_link(self.anchor)


def _any(*alternatives: str) -> tuple[frozenset[str], ...]:
    """Alternatives written as ``"a+b"`` (all of a and b) separated as arguments."""
    return tuple(frozenset(alt.split("+")) for alt in alternatives)


_MAP = "the-map"
_CONTRACT = "the-contract-both-sides-follow"
_LATE = "late-data-what-each-operator-drops"
_PT = "processing-time-is-not-event-time"
_SKEW = "partition-skew-under-a-record-limit"
_TWO = "two-inputs-one-watermark"
_DUPS = "duplicates-after-a-restart"
_RECEIVERS = "loss-after-a-restart-receivers"
# The lifecycle subsections ("Lifecycle, one by one"): both sides' code, in examples/playbook/.
_EXACTLY_ONCE = "output-and-offsets-exactly-once"
_LISTENERS = "batch-metrics-listeners"
_GRACEFUL = "graceful-stop"
_WAITING = "waiting-for-termination"
_SLICE = "remembered-batches-and-slice"
_INPUTS = "file-socket-and-queue-streams"
_TRIGGERS = "triggers"
# The subsections of "Constructs, one by one": each construct's code on both sides, checked by tests/test_constructs.py.
_PARTITIONS = "mappartitions"
_BATCH_REDUCE = "reducebykey-and-countbyvalue"
_COUNT_WINDOW = "countbywindow-and-countbyvalueandwindow"
_REDUCE_WINDOW = "reducebykeyandwindow-with-and-without-inverse"
_OUTER = "outer-joins-and-cogroup"
_TRANSFORM = "transform-with-rdd-code"

_PER_BATCH = (
    "Per batch on DStreams; a streaming groupBy().agg() keeps a running result across micro-batches in the state "
    "store and emits it by output mode. For a per-batch result, aggregate the batch DataFrame inside foreachBatch."
)
_ARRIVAL = (
    "Processing vs event time: DStream windows hold what arrived in the last batches; window() groups by an "
    "event-time column and needs withWatermark to bound state and to emit in append mode."
)
_STATELESS = "Per record, no state: equivalent once the function is a column expression (a Python UDF otherwise)."
# A map that builds key-value pairs for an aggregation is folded into the groupBy of the rewrite.
_SELECT = _any("select", "withColumn", "withColumns", "selectExpr", "mapInPandas", "mapInArrow", "groupBy+agg")
_WINDOWED = _any("withWatermark+window", "withWatermark+session_window")
_OUTPUT = _any("writeStream+start", "foreachBatch")

_R: list[Rule] = [
    # -- StreamingContext --------------------------------------------------------------------------------
    Rule("StreamingContext(sc, batchDuration)", 'SparkSession; the batch interval becomes trigger(processingTime="N '
         'seconds") on each query', _TRIGGERS, True,
         "Batch timing: a DStream batch is generated every interval even while the previous one runs (batches "
         "queue; scheduling delay); a micro-batch starts at the next interval boundary, or at once if the previous "
         "one overran, and none starts without new data unless a watermark or state timeout needs it.",
         _any("trigger"), SSC),
    Rule("StreamingContext.getOrCreate", 'writeStream.option("checkpointLocation", dir) on each query', _MAP, True,
         "Checkpoint incompatibility: a DStream checkpoint (the pickled graph) is read by neither Structured "
         "Streaming nor changed job code. Start the query from the legacy offsets (`dmk cutover checkpoint DIR`); "
         "state carries over only as seeded data.", _any("option:checkpointLocation"), SSC),
    Rule("get_or_create", 'writeStream.option("checkpointLocation", dir) on each query', _MAP, True,
         "The kit's getOrCreate (legacy.kafka) refuses checkpoints of other code; a query's checkpoint cannot be "
         "seeded from it: start from the legacy offsets (`dmk cutover checkpoint DIR`).",
         _any("option:checkpointLocation"), SSC),
    Rule("StreamingContext.getActive", "spark.streams.active (the running queries)", _MAP, False,
         "There is no single streaming context: each query is its own StreamingQuery.", _any("streams"), SSC),
    Rule("StreamingContext.getActiveOrCreate", 'SparkSession.builder.getOrCreate() and a query with a '
         "checkpointLocation", _MAP, False,
         "Checkpoint incompatibility: as getOrCreate, the DStream checkpoint cannot be reused.",
         _any("option:checkpointLocation"), SSC),
    Rule("StreamingContext.checkpoint", 'writeStream.option("checkpointLocation", dir): one directory per query',
         _MAP, True,
         "Checkpoint incompatibility: the new checkpoint starts empty; two queries must never share one.",
         _any("option:checkpointLocation")),
    Rule("StreamingContext.start", "writeStream....start(): one query per output operation", _MAP, True,
         "Each output operation becomes its own query with its own checkpoint, reading the source itself; DStream "
         "outputs of one context ran in one sequence of batch jobs.", _any("start")),
    Rule("StreamingContext.awaitTermination", "query.awaitTermination() (spark.streams.awaitAnyTermination() for "
         "several queries)", _WAITING, True,
         "A failed query raises StreamingQueryException here; check query.exception() after a timeout.",
         _any("awaitTermination", "awaitAnyTermination")),
    Rule("StreamingContext.awaitTerminationOrTimeout", "query.awaitTermination(timeout_s): False on timeout", _WAITING,
         True, "Timeout in seconds on both sides.", _any("awaitTermination", "awaitAnyTermination")),
    Rule("StreamingContext.stop", "query.stop() (and spark.stop() for stopSparkContext=True)", _DUPS, True,
         "stop() interrupts the running micro-batch; a restart re-runs it from the checkpoint, so the sink must be "
         "idempotent by batch id.", _any("stop")),
    Rule("StreamingContext.stop(stopGraceFully=True)", "no graceful stop in Spark: "
         "the playbook's stop_gracefully(query) waits until no micro-batch is running or uncommitted, then "
         "query.stop(); or trigger(availableNow=True) runs that end by themselves", _GRACEFUL, False,
         "A graceful stop finished the queued batches and drained receivers; query.stop() interrupts the current "
         "micro-batch, which is re-run after a restart: no loss only with an idempotent sink. A query with a backlog "
         "on the default trigger has no gap between micro-batches to stop in: give it a processing-time trigger.",
         _any("stop_gracefully", "stop+status", "trigger:availableNow")),
    Rule("StreamingContext.remember", "nothing: a query keeps no past batches; a past range is read again with a "
         "batch read of its offsets (the playbook's read_offset_range); state retention comes from withWatermark",
         _SLICE, True, "remember() kept batch RDDs for slice() and ad-hoc queries; drop it.",
         _any("withWatermark", "read_offset_range", "read+option:endingOffsets")),
    Rule("StreamingContext.sparkContext", "spark.sparkContext", _MAP, True, "", _any("sparkContext", "SparkSession")),
    Rule("StreamingContext.socketTextStream", 'spark.readStream.format("socket").option("host", h).option("port", p)'
         ".load() (one column, value)", _RECEIVERS, True,
         "Receiver loss: neither side is fault tolerant (the socket source cannot replay); for tests only.",
         _any("readStream+format:socket"), DSTREAM),
    Rule("StreamingContext.textFileStream", 'spark.readStream.format("text").load(dir) (one column, value); '
         "maxFilesPerTrigger caps a micro-batch", _INPUTS, True,
         "textFileStream picks files by modification time (new ones only, moved in atomically); the file source "
         "also reads the files already there at its first start, and remembers names in its checkpoint.",
         _any("readStream+format:text", "readStream+text"), DSTREAM),
    Rule("StreamingContext.binaryRecordsStream", 'spark.readStream.format("binaryFile").load(dir) and a UDF that cuts '
         "fixed-length records", _MAP, False,
         "binaryFile yields whole files, not records of recordLength bytes.", _any("readStream+format:binaryFile"),
         DSTREAM),
    Rule("StreamingContext.queueStream", "no Python memory source: in tests, files in a directory read by the file "
         "source with maxFilesPerTrigger=1 (the playbook's queue_stream), or the transformation tested on a static "
         "DataFrame", _INPUTS, False,
         "queueStream RDDs are not checkpointable; a test source must replay from its own offsets.",
         _any("queue_stream", "readStream+maxFilesPerTrigger", "readStream+format:rate", "readStream"), DSTREAM),
    Rule("StreamingContext.union", "df1.unionByName(df2) (or one Kafka source subscribed to every topic)", _TWO, True,
         "Same schema on both sides; with two sources the query's watermark is the minimum of theirs.",
         _any("union", "unionByName", "subscribe"), DSTREAM),
    Rule("StreamingContext.transform", "DataFrame operators on the streams; arbitrary RDD code only in foreachBatch",
         _MAP, False, "The function ran on the driver every batch with that batch's RDDs; a query plan is fixed at "
         "start.", _any("foreachBatch", "join"), DSTREAM),
    Rule("StreamingContext.addStreamingListener",
         "spark.streams.addListener(StreamingQueryListener): onQueryProgress's durationMs (batch time), "
         "inputRowsPerSecond, processedRowsPerSecond", _LISTENERS, False,
         "No scheduling delay metric: micro-batches do not queue. Progress events come per query.",
         _any("addListener")),
    Rule("StreamingListener", "pyspark.sql.streaming.StreamingQueryListener (onQueryStarted, onQueryProgress, "
         "onQueryIdle, onQueryTerminated)", _LISTENERS, False,
         "onBatchCompleted's batchInfo becomes event.progress (durationMs, numInputRows, sources' offsets).",
         _any("StreamingQueryListener", "addListener")),
    # -- Kafka (pyspark.streaming.kafka, legacy.kafka) -----------------------------------------------------
    Rule("KafkaUtils.createDirectStream", 'spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...)'
         '.option("subscribe", ...).option("startingOffsets", ...)', _MAP, True,
         "Rows are (key, value) as binary with topic, partition, offset, timestamp: CAST(value AS STRING). "
         "Offsets move to the query's checkpoint; startingOffsets applies only to a new checkpoint (continue the "
         "legacy job's position with `dmk cutover`); auto.offset.reset and enable.auto.commit are not Kafka options "
         "there.", _any("readStream+format:kafka", "readStream+source_format", "readStream+events", "events"),
         DSTREAM),
    Rule("KafkaUtils.createStream", 'spark.readStream.format("kafka").option("kafka.bootstrap.servers", <the brokers '
         "the quorum registers>).option(\"subscribe\", ...) (no receivers; offsets in the checkpoint)",
         _RECEIVERS, True,
         "Receiver loss is gone: the offsets move to the query's checkpoint. The draft reads the brokers the ZooKeeper "
         "quorum registers (/brokers/ids) at its start, as 2.4's receiver did (brokers in kafkaParams win). The "
         "group's offsets in ZooKeeper are neither read nor committed: a first start begins at auto.offset.reset "
         "(default largest: the latest offsets); continue from the group with `dmk cutover zookeeper QUORUM "
         "--consumer GROUP`. {topic: threads} and storageLevel have no counterpart.",
         _any("readStream+format:kafka", "readStream+source_format", "events"), DSTREAM),
    Rule("KafkaUtils.createRDD", 'spark.read.format("kafka").option("startingOffsets", json).option("endingOffsets", '
         "json) (a batch read)", _MAP, True,
         "untilOffset and endingOffsets are both exclusive; the offsets JSON maps topic to partition to offset.",
         _any("read+format:kafka", "option:endingOffsets")),
    Rule("OffsetRange", 'offsets JSON {"topic": {"partition": offset}} in startingOffsets / endingOffsets', _MAP, True,
         "fromOffset is inclusive, untilOffset exclusive, as Spark's startingOffsets and endingOffsets.",
         _any("option:startingOffsets", "option:endingOffsets")),
    Rule("TopicAndPartition", 'a partition of the offsets JSON, or option("assign", \'{"topic": [0, 1]}\')', _MAP, True,
         "", _any("option:assign", "option:startingOffsets")),
    Rule("Broker", "kafka.bootstrap.servers (leaders are found by the consumer)", _MAP, True, "",
         _any("option:kafka.bootstrap.servers")),
    Rule("offsetRanges", "the offsets log in the checkpoint; per micro-batch the rows' topic, partition, offset "
         "columns, or query.lastProgress['sources']", _EXACTLY_ONCE, False,
         "Offsets stored with the results in one transaction become an idempotent write keyed by batch_id in "
         "foreachBatch; commitAsync to the group becomes a listener that commits finished batches for lag tools.",
         _any("foreachBatch", "lastProgress", "addListener")),
    Rule("KinesisUtils.createStream", "no Kinesis source in Apache Spark: a third-party connector or a Python data "
         "source", _MAP, False, "", (), DSTREAM),
    Rule("FlumeUtils.createStream", "none: Flume support was removed in Spark 3.0", _MAP, False,
         "Move the producer to Kafka or files first.", (), DSTREAM),
    Rule("FlumeUtils.createPollingStream", "none: Flume support was removed in Spark 3.0", _MAP, False,
         "Move the producer to Kafka or files first.", (), DSTREAM),
    # -- DStream transformations ---------------------------------------------------------------------------
    Rule("DStream.map", "select / withColumn with column expressions", _MAP, False, _STATELESS, _SELECT, DSTREAM),
    Rule("DStream.flatMap", "select(F.explode(...)) (e.g. F.explode(F.split(col, pattern)))", _MAP, False,
         _STATELESS + " An empty result drops the record, as explode drops a row with an empty array.",
         _any("explode", "explode_outer", "mapInPandas", "select+where"), DSTREAM),
    Rule("DStream.filter", "where / filter with a column expression", _MAP, False,
         _STATELESS + " A predicate that is null drops the row.", _any("where", "filter"), DSTREAM),
    Rule("DStream.mapPartitions", "mapInPandas / mapInArrow (an iterator of DataFrames or Arrow batches per "
         "partition)", _PARTITIONS, False,
         "Per-partition set-up (connections) moves into the function; a partition is a Kafka partition range only "
         "until a shuffle.", _any("mapInPandas", "mapInArrow"), DSTREAM),
    Rule("DStream.mapPartitionsWithIndex", "mapInPandas / mapInArrow; the index is F.spark_partition_id()", _PARTITIONS,
         False, "", _any("mapInPandas", "mapInArrow", "spark_partition_id"), DSTREAM),
    Rule("DStream.mapValues", "withColumn(value_column, expression)", _MAP, False, _STATELESS,
         _any("withColumn", "select"), DSTREAM),
    Rule("DStream.flatMapValues", "withColumn(value_column, F.explode(...))", _MAP, False, _STATELESS,
         _any("explode", "explode_outer"), DSTREAM),
    Rule("DStream.glom", "no counterpart: mapInPandas sees a partition's rows; per batch, in foreachBatch", _PARTITIONS,
         False, "", _any("mapInPandas", "foreachBatch"), DSTREAM),
    Rule("DStream.reduceByKey", "groupBy(key).agg(...) (a running result) or, per batch, in foreachBatch",
         _BATCH_REDUCE, False, _PER_BATCH, _any("groupBy+agg", "groupBy+count", "foreachBatch"), DSTREAM),
    Rule("DStream.groupByKey", "groupBy(key).agg(F.collect_list(value)) or, per batch, in foreachBatch", _BATCH_REDUCE,
         False,
         _PER_BATCH + " collect_list state grows without bound unless a watermark closes the groups.",
         _any("groupBy+agg", "foreachBatch"), DSTREAM),
    Rule("DStream.combineByKey", "groupBy(key).agg(built-in aggregates), applyInPandasWithState for a custom "
         "combiner, or per batch in foreachBatch", _BATCH_REDUCE, False, _PER_BATCH,
         _any("groupBy+agg", "applyInPandasWithState", "foreachBatch"), DSTREAM),
    Rule("DStream.countByValue", "groupBy(column).count() or, per batch, in foreachBatch", _BATCH_REDUCE, False,
         _PER_BATCH,
         _any("groupBy+count", "groupBy+agg", "foreachBatch"), DSTREAM),
    Rule("DStream.count", "groupBy().count() (a running count) or, per batch, df.count() in foreachBatch (or the "
         "progress's numInputRows)", _BATCH_REDUCE, False, _PER_BATCH, _any("count", "foreachBatch"), DSTREAM),
    Rule("DStream.reduce", "agg(...) over the stream (a running result) or, per batch, in foreachBatch", _BATCH_REDUCE,
         False,
         _PER_BATCH, _any("agg", "foreachBatch"), DSTREAM),
    Rule("DStream.partitionBy", "repartition(n, key_column)", _MAP, True,
         "State partitions are fixed by spark.sql.shuffle.partitions at the checkpoint's first start.",
         _any("repartition"), DSTREAM),
    Rule("DStream.repartition", "repartition(n)", _MAP, True,
         "Stateful operators shuffle to spark.sql.shuffle.partitions, fixed at the checkpoint's first start.",
         _any("repartition"), DSTREAM),
    Rule("DStream.union", "unionByName / union (or one Kafka source subscribed to both topics)", _TWO, True,
         "Same schema on both sides (DStreams needed the same slide); with two sources the watermark is the minimum "
         "of theirs.", _any("union", "unionByName", "subscribe", "events_together"), DSTREAM),
    Rule("DStream.cache", "nothing on the stream: persist the micro-batch inside foreachBatch when it is written "
         "twice (df.persist() ... df.unpersist())", _MAP, True, "", _any("persist", "foreachBatch"), DSTREAM),
    Rule("DStream.persist", "nothing on the stream: persist the micro-batch inside foreachBatch when it is written "
         "twice (df.persist() ... df.unpersist())", _MAP, True, "", _any("persist", "foreachBatch"), DSTREAM),
    Rule("DStream.checkpoint", "nothing: the state store checkpoints every micro-batch (deltas, periodic snapshots)",
         _MAP, True, "Checkpoint incompatibility: DStream state checkpoints are not readable by the state store.",
         _any("option:checkpointLocation"), DSTREAM),
    Rule("DStream.context", "df.sparkSession", _MAP, True, "", _any("sparkSession"), SSC),
    Rule("DStream.transform", "DataFrame operators; a join with a static RDD becomes a stream-static join; arbitrary "
         "RDD code only in foreachBatch", _TRANSFORM, False,
         "The function ran on the driver every batch (with the batch time if it takes two arguments); a query plan "
         "is fixed at start, so per-batch driver logic moves to foreachBatch.",
         _any("join", "foreachBatch", "select"), DSTREAM),
    Rule("DStream.transformWith", "a stream-stream join or union of the two DataFrames; arbitrary two-RDD code has no "
         "counterpart", "join", False,
         "The function saw both streams' RDDs of one batch, matched by arrival; a stream-stream join matches by "
         "event time from state.", _any("join", "union", "unionByName"), DSTREAM),
    Rule("DStream.slice", 'no counterpart: a batch read of the same range (spark.read.format("kafka") with '
         "startingOffsets/endingOffsets or startingTimestamp/endingTimestamp; the playbook's read_offset_range)",
         _SLICE, False,
         "slice returned the remembered batch RDDs between two times.", _any("read"), None),
    # -- joins ---------------------------------------------------------------------------------------------
    *[
        Rule(f"DStream.{name}", f"a stream-stream join{how}: both sides withWatermark and a time-range condition",
             _OUTER if how else "join", False,
             "DStream joins pair the records of the same batch (or of windows over arrival time); a stream-stream "
             "join matches across micro-batches from state, bounded only by watermarks and the time condition"
             + (", and emits unmatched rows only when the watermark passes them." if how else "."),
             _any("withWatermark+join"), DSTREAM)
        for name, how in (("join", ""), ("leftOuterJoin", ' (how="left_outer")'),
                          ("rightOuterJoin", ' (how="right_outer")'), ("fullOuterJoin", ' (how="full_outer")'))
    ],
    Rule("DStream.cogroup", "no stateful counterpart: groupBy(F.window(...), key) over unionByName of both sides "
         "with a collect_list per side; per micro-batch, groupBy(key).cogroup(other.groupBy(key)).applyInPandas(...)",
         _OUTER, False,
         "cogroup grouped both streams' records of one batch by key; the aggregation groups them by event-time "
         "window and emits a group once the watermark passes it.",
         _any("join", "groupBy+unionByName", "cogroup+applyInPandas"), DSTREAM),
    # -- windows -------------------------------------------------------------------------------------------
    Rule("DStream.window", 'F.window("event_time", length, slide) in a groupBy, with withWatermark (for a windowed '
         "join: a stream-stream join with a time-range condition)", "windowed_counts", False,
         _ARRIVAL + " A windowed DStream re-emits each record in every window holding it.",
         _WINDOWED + _any("withWatermark+join"), DSTREAM),
    Rule("DStream.countByWindow", 'groupBy(F.window("event_time", length, slide)).count() with withWatermark',
         _COUNT_WINDOW, False, _ARRIVAL + " countByWindow also needs ssc.checkpoint (an inverse reduce).",
         _WINDOWED, DSTREAM),
    Rule("DStream.countByValueAndWindow", 'groupBy(F.window("event_time", length, slide), column).count() with '
         "withWatermark", _COUNT_WINDOW, False,
         _ARRIVAL + " It also needs ssc.checkpoint (an inverse reduce).", _WINDOWED, DSTREAM),
    Rule("DStream.reduceByWindow", 'groupBy(F.window("event_time", length, slide)).agg(...) with withWatermark',
         _COUNT_WINDOW, False, _ARRIVAL, _WINDOWED, DSTREAM),
    Rule("DStream.groupByKeyAndWindow", 'groupBy(F.window("event_time", length, slide), key).agg(F.collect_list(...))'
         " with withWatermark", _COUNT_WINDOW, False,
         _ARRIVAL + " PySpark reduces it with an inverse from 5 slides up (it needs ssc.checkpoint); a key that left "
         "the window then stayed in every later window with an empty list.", _WINDOWED, DSTREAM),
    Rule("DStream.reduceByKeyAndWindow (with inverse function)", 'groupBy(F.window("event_time", length, slide), key)'
         ".agg(...) with withWatermark", _REDUCE_WINDOW, False,
         _ARRIVAL + " The inverse function made the arrival-time window incremental (it needs ssc.checkpoint, and "
         "filterFunc to drop keys that fell to zero; PySpark uses it only for a window of 5 slides or more); there "
         "is no inverse in Structured Streaming: each window's aggregate is kept in state until the watermark passes "
         "it, and emitted once in append mode.",
         _WINDOWED, DSTREAM),
    Rule("DStream.reduceByKeyAndWindow (without inverse function)", 'groupBy(F.window("event_time", length, slide), '
         "key).agg(...) with withWatermark", _PT, False,
         _ARRIVAL + " Without an inverse, each slide re-reduced the whole window from the remembered batches.",
         _WINDOWED, DSTREAM),
    # -- state ---------------------------------------------------------------------------------------------
    Rule("DStream.updateStateByKey", "groupBy(key).agg(...) in update mode; arbitrary state: applyInPandasWithState "
         "or transformWithStateInPandas (RocksDB state store)", "running_counts", False,
         "State re-emission vs update mode: updateStateByKey returned every key's state every batch and called the "
         "function for every key (None removes it); update mode emits only the changed rows, so a sink that wanted "
         "full snapshots must change. State schema and keys cannot change across restarts of a checkpoint.",
         _any("groupBy+agg", "groupBy+count", "applyInPandasWithState", "transformWithStateInPandas",
              "transformWithState"), DSTREAM),
    # -- output operations ---------------------------------------------------------------------------------
    Rule("DStream.foreachRDD", "writeStream.foreachBatch(lambda df, batch_id: ...)", _EXACTLY_ONCE, False,
         "foreachRDD got (rdd) or (time, rdd); foreachBatch gets (DataFrame, batch_id). A micro-batch is re-run after "
         "a restart: make the write idempotent by batch_id.", _any("foreachBatch") + _OUTPUT, None),
    Rule("DStream.pprint", 'writeStream.format("console").option("numRows", n)', _MAP, True,
         "The console sink prints on the driver: for tests and debugging.", _any("format:console") + _OUTPUT, None),
    Rule("DStream.saveAsTextFiles", 'writeStream.format("text") (or "json", "parquet").option("path", dir)', _MAP,
         True, "saveAsTextFiles wrote a directory prefix-TIME.suffix per batch; the file sink writes part files under "
         "one path with a _spark_metadata log (exactly once for readers of that log), in append mode only.",
         _any("format:text", "format:json", "format:parquet", "format:csv") + _OUTPUT, None),
    # -- the kit's builder contract (legacy/workloads) -----------------------------------------------------
    Rule("Source.events", "modern.workloads.Source.events(name): the Kafka source, parsed by the same "
         "kit.events.parse_event", _CONTRACT, True,
         "Malformed records go to the dead-letter output on both sides, for the same reason.",
         _any("events", "events_together"), DSTREAM),
    Rule("Source.nexmark", "modern.workloads.Source.nexmark(table): the Nexmark table's Kafka source, parsed by "
         "the same kit.nexmark.parse_nexmark", _CONTRACT, True,
         "Malformed records go to the dead-letter output on both sides, for the same reason.",
         _any("nexmark"), DSTREAM),
    Rule("Source.drop_late", "nothing: Spark drops late rows itself (numRowsDroppedByWatermark)", _LATE, True,
         "numRowsDroppedByWatermark counts rows entering the operator, after partial aggregation.",
         _any("withWatermark")),
    Rule("event_time_operator", "withWatermark and the built-in event-time operator: groupBy(window(...)), "
         "session_window, dropDuplicatesWithinWatermark, a stream-stream join; applyInPandasWithState, "
         "transformWithStateInPandas or transformWithState for custom logic", _LATE, False,
         "Each built-in operator drops different late rows (the playbook's table); check the operator you choose "
         "against the emulation's step function.",
         _any("withWatermark+window", "withWatermark+session_window", "withWatermark+dropDuplicatesWithinWatermark",
              "withWatermark+join", "applyInPandasWithState", "transformWithStateInPandas",
              "transformWithState"), PAIR_OF_DSTREAMS),
]

_PY2 = (
    "Python 2-era code: it fails under Python 3 (PySpark 4.x runs Python 3.9+), in the original job as in any "
    "draft that keeps its functions. "
)
# Python 2-era code the analyser flags: (construct, the fix). Print statements and `except E, e:` do not parse
# as Python 3 at all: dmk migrate refuses such a job with the line and the fix (migrate.analysis).
PYTHON2_RULES: dict[str, Rule] = {
    rule.construct: rule for rule in (
        Rule("Python 2: reload(sys)", "nothing: delete the line (reload is importlib.reload in Python 3, and the "
             "reload(sys) idiom only existed to reach sys.setdefaultencoding)", _MAP, False,
             _PY2 + "reload is not a builtin in Python 3: NameError at start."),
        Rule("Python 2: sys.setdefaultencoding", "nothing: delete the line (Python 3's str is Unicode and its "
             "default encoding is UTF-8)", _MAP, False,
             _PY2 + "sys.setdefaultencoding does not exist in Python 3: AttributeError at start."),
        Rule("Python 2: unicode", "str", _MAP, False, _PY2 + "unicode is not a builtin in Python 3: NameError."),
        Rule("Python 2: xrange", "range", _MAP, False, _PY2 + "xrange is not a builtin in Python 3: NameError."),
        Rule("Python 2: basestring", "str", _MAP, False, _PY2 + "basestring is not a builtin in Python 3: NameError."),
        Rule("Python 2: long", "int", _MAP, False, _PY2 + "long is not a builtin in Python 3 (int has no size "
             "limit): NameError."),
        Rule("Python 2: unichr", "chr", _MAP, False, _PY2 + "unichr is not a builtin in Python 3: NameError."),
        Rule("Python 2: dict.iteritems", ".items() (.values(), .keys() for itervalues, iterkeys)", _MAP, False,
             _PY2 + "dicts have no iteritems/itervalues/iterkeys in Python 3: AttributeError."),
        Rule("Python 2: dict.has_key", "key in d", _MAP, False, _PY2 + "dicts have no has_key in Python 3."),
        Rule("Python 2: KafkaProducer.send(str)", "send bytes: value.encode(\"utf-8\"), or a KafkaProducer whose "
             "value_serializer and key_serializer encode str as UTF-8 and pass bytes through", _MAP, False,
             _PY2 + "A Python 2 str was bytes; kafka-python under Python 3 refuses a str value without a "
             "value_serializer (TypeError in send; AssertionError in older releases), inside the job's "
             "foreachRDD/foreachPartition."),
    )
}
"""Python 2-era constructs → their fix (the counterpart), for the findings of Python 2 code that still parses."""

# Method names that only a DStream (or a StreamingContext) has, in Spark 2.4's Python API: not RDD, DataFrame or
# builtin methods. Called on an object the analyser cannot trace, such a call is reported with status
# `unresolved` (the construct it looks like), never dropped.
DSTREAM_ONLY_METHODS = frozenset((
    "foreachRDD", "pprint", "updateStateByKey", "reduceByKeyAndWindow", "reduceByWindow", "countByWindow",
    "countByValueAndWindow", "groupByKeyAndWindow", "saveAsTextFiles", "transform", "transformWith", "window",
))
SSC_ONLY_METHODS = frozenset((  # not awaitTermination: a StreamingQuery has it too
    "socketTextStream", "textFileStream", "queueStream", "binaryRecordsStream", "awaitTerminationOrTimeout",
    "addStreamingListener",
))

RULES: dict[str, Rule] = {rule.construct: rule for rule in _R}
RULES.update(PYTHON2_RULES)
"""Every construct by its name in findings."""

CONF_RULES: dict[str, Rule] = {
    rule.construct: rule
    for rule in (
        Rule("spark.streaming.backpressure.enabled", "none: a micro-batch starts when the previous one ends; cap the "
             "input with maxOffsetsPerTrigger", _MAP, True,
             "Rate limits: the PID estimator adapted the rate to the processing time; a query with a backlog takes "
             "everything available unless maxOffsetsPerTrigger caps it.", _any("option:maxOffsetsPerTrigger")),
        Rule("spark.streaming.backpressure.initialRate", "none: maxOffsetsPerTrigger caps every micro-batch, the first "
             "included", _SKEW, True, "", _any("option:maxOffsetsPerTrigger")),
        Rule("spark.streaming.kafka.maxRatePerPartition", "maxOffsetsPerTrigger (records per micro-batch, split over "
             "partitions by lag) = rate × partitions × trigger seconds", _SKEW, False,
             "Rate limits: a per-partition cap per second vs a per-micro-batch total split by lag; under a backlog "
             "partitions drift apart in event time and the watermark drops on-time records of lagging ones.",
             _any("option:maxOffsetsPerTrigger")),
        Rule("spark.streaming.kafka.minRatePerPartition", "none (minOffsetsPerTrigger is different: it delays a "
             "trigger until that many offsets are available)", _SKEW, False, "", ()),
        Rule("spark.streaming.kafka.maxRetries", 'option("fetchOffset.numRetries", n) of the Kafka source', _MAP, True,
             "", _any("option:fetchOffset.numRetries")),
        Rule("spark.streaming.receiver.maxRate", "maxOffsetsPerTrigger (Kafka) or maxFilesPerTrigger (files): there "
             "are no receivers", _RECEIVERS, False, "Rate limits: per receiver per second vs per micro-batch.",
             _any("option:maxOffsetsPerTrigger", "option:maxFilesPerTrigger")),
        Rule("spark.streaming.receiver.writeAheadLog.enable", "nothing to enable: the source is replayed from the "
             "offsets log", _RECEIVERS, True,
             "Receiver loss: even with the WAL a killed receiver driver lost records; the Kafka source loses none.",
             ()),
        Rule("spark.streaming.driver.writeAheadLog.closeFileAfterWrite", "nothing: the offsets and commits logs",
             _RECEIVERS, True, "", ()),
        Rule("spark.streaming.stopGracefullyOnShutdown", "none: on shutdown query.stop() interrupts the micro-batch, "
             "which is re-run after a restart; stop queries with the playbook's stop_gracefully before shutting "
             "down", _GRACEFUL, False,
             "No loss and no duplicate only with an idempotent sink (foreachBatch keyed by batch_id).",
             _any("foreachBatch")),
        Rule("spark.streaming.gracefulStopTimeout", "none (no graceful stop in Spark): stop_gracefully(query, "
             "timeout_s=...)", _GRACEFUL, False, "", _any("stop_gracefully")),
        Rule("spark.streaming.blockInterval", 'none: one task per Kafka partition (option("minPartitions", n) splits '
             "them)", _MAP, True, "", _any("option:minPartitions")),
        Rule("spark.streaming.concurrentJobs", "none: one micro-batch at a time per query; run several queries",
             _MAP, False, "Concurrent jobs broke batch ordering; queries keep it.", ()),
        Rule("spark.streaming.unpersist", "none: no batch RDDs to unpersist", _MAP, True, "", ()),
        Rule("spark.streaming.dynamicAllocation.enabled", "spark.dynamicAllocation.enabled (no streaming-specific "
             "policy)", _MAP, False, "", ()),
        Rule("spark.streaming.ui.retainedBatches", "spark.sql.streaming.ui.retainedProgressUpdates", _MAP, True, "",
             ()),
        Rule("spark.streaming.kafka.consumer.poll.ms", 'option("kafkaConsumer.pollTimeoutMs", ms)', _MAP, True, "",
             _any("option:kafkaConsumer.pollTimeoutMs")),
    )
}
"""The ``spark.streaming.*`` configuration keys by name."""

# Fully qualified names the analyser resolves imports to, and what each is.
MODULE_NAMES: dict[str, str] = {
    **{f"{mod}.StreamingContext": "ssc_class" for mod in ("pyspark.streaming", "pyspark.streaming.context")},
    **{f"{mod}.DStream": "dstream_class" for mod in ("pyspark.streaming", "pyspark.streaming.dstream")},
    **{f"{mod}.StreamingListener": "listener_class" for mod in ("pyspark.streaming", "pyspark.streaming.listener")},
    **{f"{mod}.{name}": f"kafka:{name}" for mod in ("pyspark.streaming.kafka", "legacy.kafka")
       for name in ("KafkaUtils", "OffsetRange", "TopicAndPartition", "Broker")},
    "legacy.kafka.KafkaDStream": "dstream_class",
    "pyspark.streaming.kafka.KafkaDStream": "dstream_class",
    "legacy.kafka.get_or_create": "kit:get_or_create",
    "legacy.workloads.event_time_operator": "kit:event_time_operator",
    "legacy.workloads.Source": "source_class",
    "pyspark.streaming.kinesis.KinesisUtils": "utils:KinesisUtils",
    "pyspark.streaming.flume.FlumeUtils": "utils:FlumeUtils",
}
"""Fully qualified name → what it is (``ssc_class``, ``kafka:KafkaUtils``...)."""
