"""Run a team's unmodified Spark 2.x DStream script on the kit, for ``dmk compare-jobs``.

:func:`install`, called in the job's own process before its script runs, does two things:

* ``from pyspark.streaming.kafka import KafkaUtils`` works as it did on Spark 2.4: that module is the kit's
  revived one (:mod:`legacy.kafka`), for this process only;
* every batch of the script's direct streams is reported once it completes (all its output operations ran):
  one :class:`kit.progress.ProgressRow` per batch in the progress file, ``{"batch_ms", "completed_ms",
  "records", "ranges": [[topic, partition, from, until], ...]}``. That is how the harness knows the job has
  consumed its input.
  Inputs read as lines or elements (``socketTextStream``, ``textFileStream``, ``queueStream``, Kafka
  ``createStream``) report ``["lines", 0, from, until]``: the elements they had delivered before and after
  the batch (counted by an extra ``count()`` per batch);
* the job's inputs are fed by the harness (``dmk compare-jobs``): ``socketTextStream`` connects to
  ``$DMK_SOCKET`` (``host:port``) whatever host and port the job names, ``textFileStream`` watches
  ``$DMK_INPUT_DIR``, ``queueStream`` gets the elements of ``$DMK_QUEUE_FILE`` (a JSON list of batches,
  one RDD each) instead of the job's own RDDs, and ``KafkaUtils.createStream`` reads the run's Kafka
  (``$DMK_BOOTSTRAP``) from its input topic's start whatever quorum it names (:func:`_fed_receiver_params`;
  the replayed topic instead of its own when the job names its own Kafka, :func:`_receiver_redirected`).
  Each input the job opens is noted in ``inputs.jsonl``;
* printed output is recorded as rows in ``printed.jsonl`` beside the progress file, with its batch
  (``batch_ms``) and its stream (``FILE:LINE`` of the call): every element of a ``pprint()``ed DStream
  (all of them; the console shows the first ``num`` as Spark's ``pprint`` does), and every line the job
  prints (to ``sys.stdout``) inside a ``foreachRDD`` function.
* with ``$DMK_OUTPUT_REDIRECT`` (``dmk compare-jobs --output files:LOC``), what the job writes under its own
  location ``LOC`` (``saveAsTextFiles``, ``saveAsTextFile``, the Hadoop file writers, DataFrame writers) goes
  to the run's directory instead (:mod:`kit.own_output`); every write is noted in ``outputs.jsonl``.

Example (what ``python -m compare.jobrun --engine legacy SCRIPT ARGS`` does)::

    install("runs/x/legacy/progress.jsonl")
    runpy.run_path("jobs/legacy.py", run_name="__main__")
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kit import layout, own_output
from kit.printed import Tee
from kit.progress import ProgressRow
from kit.ranges import LINES, OffsetRange
from kit.security import KAFKA_SECURITY_ENV

__all__ = ["install"]

_RANGES: dict[int, list[OffsetRange]] = {}
_LOCK = threading.Lock()
_PROGRESS: list[Path] = []
_LINES = [0]  # elements delivered so far by the line/element inputs (socket, files, queue, receiver)
_IN_RECEIVER = [0]  # > 0 while createStream builds its receiver (Spark's socket receiver on the kit's bridge)
_HERE = (os.sep + "pyspark" + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _fed_receiver_params(params: dict[str, Any], security: Mapping[str, Any]) -> dict[str, Any]:
    """A ``createStream`` job's ``kafkaParams`` under ``dmk compare-jobs``: it reads the run's Kafka, all of it.

    The job names a ZooKeeper quorum; 2.4's receiver found the brokers there. The kit's receiver keeps its
    group's offsets in Kafka and ignores the quorum, so the brokers are the run's Kafka (``$DMK_BOOTSTRAP``) unless
    the job names brokers itself. The input topic is new for the run and fed only once the job reads, so the
    group starts from its beginning (``auto.offset.reset`` ``smallest``): with 2.4's default ``largest`` the
    records replayed while the group is still joining (seconds) would be skipped. The run's Kafka security
    settings are added as for the direct stream, the job's own keys winning.
    """
    kafka = os.environ.get("DMK_BOOTSTRAP")
    if not kafka:
        return params
    fed = {**security, **params}
    if not (fed.get("metadata.broker.list") or fed.get("bootstrap.servers")):
        fed["metadata.broker.list"] = kafka
    if str(fed.get("auto.offset.reset", "largest")) != "smallest":
        print(f"dmk: createStream reads its new input topic from the start (auto.offset.reset smallest, not "
              f"{fed.get('auto.offset.reset', 'largest')!r}): the harness feeds it only once the job reads",
              file=sys.stderr, flush=True)
    fed["auto.offset.reset"] = "smallest"
    return fed


def _receiver_redirected(named: dict[str, Any]) -> dict[str, Any]:
    """A ``createStream`` on the job's own quorum and topics, redirected to ``DMK_KAFKA_BOOTSTRAP``/``DMK_KAFKA_TOPIC``.

    compare-jobs sets them for a job that names its own Kafka (no ``{zookeeper} {topic}`` in its command), as
    :func:`_kafka_fed` redirects a direct stream: the receiver reads the replayed topic on the run's Kafka.
    ``named``: createStream's arguments by name; anything but a dict of topics and kafkaParams is left to its
    own TypeError.
    """
    servers, topic = os.environ.get("DMK_KAFKA_BOOTSTRAP"), os.environ.get("DMK_KAFKA_TOPIC")
    params = named.get("kafkaParams")
    if not (servers and topic) or not isinstance(named.get("topics"), Mapping) or not (
            params is None or isinstance(params, Mapping)):
        return named
    kept = {k: v for k, v in dict(params or {}).items() if k not in ("metadata.broker.list", "bootstrap.servers")}
    return {**named, "topics": {topic: 1}, "kafkaParams": {**kept, "metadata.broker.list": servers}}


def _caller() -> str:
    """``FILE:LINE`` of the job's own call that reached the stand-in (the first frame outside PySpark and the kit)."""
    for frame in inspect.stack()[2:]:
        if not any(part in frame.filename for part in _HERE):
            return f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return "?"


def _write(name: str, row: dict[str, Any]) -> None:
    for path in _PROGRESS:
        with _LOCK, open(path.parent / name, "a", encoding="utf-8") as out:
            out.write(json.dumps(row, default=repr) + "\n")


def _values(element: Any) -> tuple[list[Any], list[str] | None]:
    """An element as a row: a tuple's or list's items by position, a Row's or dict's by name, else one value."""
    if hasattr(element, "asDict"):
        return list(element), list(element.__fields__)
    if isinstance(element, dict):
        return list(element.values()), [str(k) for k in element]
    if isinstance(element, (tuple, list)):
        return list(element), None
    return [element], None


def _batch_ms(time_: Any) -> int:
    return round(time_.timestamp() * 1000)


def _recording_prints(func: Callable[..., Any], name: str) -> Callable[[Any, Any], Any]:
    """``func`` (a foreachRDD function of one or two arguments) with the lines it prints recorded."""
    if getattr(func, "_dmk_own", False):
        return func
    code = getattr(func, "__code__", None)
    if code is not None and not inspect.ismethod(func):
        takes_time = code.co_argcount != 1  # as PySpark's foreachRDD decides
    else:
        try:
            takes_time = len(inspect.signature(func).parameters) != 1
        except (TypeError, ValueError):
            takes_time = True

    def recorded(time_: Any, rdd: Any) -> Any:
        console, tee = sys.stdout, Tee(sys.stdout)
        sys.stdout = tee
        try:
            return func(time_, rdd) if takes_time else func(rdd)
        finally:
            sys.stdout = console
            for line in "".join(tee.text).splitlines():
                _write(layout.PRINTED, {"stream": name, "kind": "line", "batch_ms": _batch_ms(time_), "line": line})

    return recorded


def _own(func: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A stand-in's own foreachRDD function: what it prints is not recorded as the job's."""

    def own(time_: Any, rdd: Any) -> Any:
        tee = sys.stdout
        if not isinstance(tee, Tee):
            return func(time_, rdd)
        sys.stdout = tee.console
        try:
            return func(time_, rdd)
        finally:
            sys.stdout = tee

    own._dmk_own = True  # type: ignore[attr-defined]
    return own


def _unrecorded(func: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """Mark one of the stand-in's own module-level foreachRDD functions (which print nothing) as not the job's.

    The function itself is returned, not a wrapper: foreachRDD functions are pickled into a checkpointed job's
    checkpoint, and cloudpickle pickles a module-level function by reference only while the module's attribute
    is that function (a wrapper there made it copy the function, with this module's lock, by value).
    """
    func._dmk_own = True  # type: ignore[attr-defined]
    return func


def _take_and_print(name: str, num: int) -> Callable[[Any, Any], None]:
    """The function of ``pprint(num)``: every element recorded as a row of ``name``; ``num`` printed, as Spark does."""

    def take_and_print(time_: Any, rdd: Any) -> None:
        taken = rdd.collect()
        for element in taken:
            values, names = _values(element)
            _write(layout.PRINTED, {"stream": name, "kind": "row", "batch_ms": _batch_ms(time_), "values": values,
                                     "names": names})
        print("-------------------------------------------")
        print(f"Time: {time_}")
        print("-------------------------------------------")
        for record in taken[:num]:
            print(record)
        if len(taken) > num:
            print("...")
        print("")

    return take_and_print


@_unrecorded
def _count_elements(time_: Any, rdd: Any) -> None:
    """A ``foreachRDD`` function noting how many elements a line/element input delivered in this batch."""
    count = rdd.count()
    with _LOCK:
        before = _LINES[0]
        _LINES[0] += count
        _RANGES.setdefault(_batch_ms(time_), []).append(OffsetRange(LINES, 0, before, before + count))


@_unrecorded
def _note_ranges(time_: Any, rdd: Any) -> None:
    """A ``foreachRDD`` function keeping the batch's offset ranges until the batch completes (no Spark job)."""
    batch_ms = _batch_ms(time_)
    ranges = [OffsetRange(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in rdd.offsetRanges()]
    with _LOCK:
        _RANGES.setdefault(batch_ms, []).extend(ranges)


def _batch_completed(batch_ms: int, records: int) -> None:
    with _LOCK:
        ranges = _RANGES.pop(batch_ms, [])
    records = max(records, sum(r.count() for r in ranges if r.topic == LINES))
    row = ProgressRow(batch_ms=batch_ms, completed_ms=time.time_ns() // 1_000_000, records=records,
                      ranges=tuple(ranges)).to_json()
    for path in _PROGRESS:
        with _LOCK, open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(row) + "\n")


def _kafka_fed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A direct stream on its own brokers and topics, redirected to ``DMK_KAFKA_BOOTSTRAP``/``DMK_KAFKA_TOPIC``.

    compare-jobs sets them for a job that names its own Kafka (no ``{bootstrap} {topic}`` in its command).
    """
    servers, topic = os.environ.get("DMK_KAFKA_BOOTSTRAP"), os.environ.get("DMK_KAFKA_TOPIC")
    if not (servers and topic):
        return args, kwargs
    ssc, _topics, params = (list(args[:3]) + [None] * 3)[:3]
    kwargs.pop("topics", None)
    params = kwargs.pop("kafkaParams", params)
    kept = {k: v for k, v in dict(params or {}).items() if k not in ("metadata.broker.list", "bootstrap.servers")}
    rest = list(args[3:])
    if rest:
        rest[0] = None  # fromOffsets: of the job's own topics
    kwargs.pop("fromOffsets", None)
    return (ssc, [topic], {**kept, "metadata.broker.list": servers}, *rest), kwargs


def install(progress_path: str | Path) -> None:
    """Make ``pyspark.streaming.kafka`` the kit's module and report completed batches to ``progress_path``.

    Idempotent. Says so on stderr, so the job's log shows what stood in.
    """
    import pyspark.streaming
    from pyspark.streaming import DStream, StreamingContext
    from pyspark.streaming.listener import StreamingListener

    import legacy.kafka as revived

    path = Path(progress_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.environ.get("DMK_LEGACY_PYTHON2"):  # dmk compare-jobs --legacy-python2: legacy/_py2compat.py
        from legacy._py2compat import install as python2_layer

        python2_layer(path.parent)
    if path not in _PROGRESS:
        _PROGRESS.append(path)
    if getattr(revived.KafkaUtils, "_dmk_standin", False):
        return
    sys.modules["pyspark.streaming.kafka"] = revived
    pyspark.streaming.kafka = revived  # type: ignore[attr-defined]  # the 2.4 module, as an attribute too
    create = revived.KafkaUtils.createDirectStream
    # dmk compare-jobs --kafka-config/--kafka-option: the job's own kafkaParams win over them.
    security = json.loads(os.environ.get(KAFKA_SECURITY_ENV) or "{}")

    def create_direct_stream(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _kafka_fed(args, kwargs)
        if security and len(args) >= 3:
            args = (*args[:2], {**security, **args[2]}, *args[3:])
        elif security and "kafkaParams" in kwargs:
            kwargs["kafkaParams"] = {**security, **kwargs["kafkaParams"]}
        stream = create(*args, **kwargs)
        stream.foreachRDD(_note_ranges)
        _write(layout.INPUTS, {"kind": "kafka", "at": _caller()})
        return stream

    create_receiver = revived.KafkaUtils.createStream
    receiver_args = tuple(inspect.signature(create_receiver).parameters)  # 2.4's, in order

    def create_stream(*args: Any, **kwargs: Any) -> Any:
        named = {**dict(zip(receiver_args, args, strict=False)), **kwargs}  # a surplus argument: its TypeError
        named = _receiver_redirected(named)
        params = named.get("kafkaParams")
        if params is None or isinstance(params, Mapping):  # anything else: createStream's own TypeError
            named["kafkaParams"] = _fed_receiver_params(dict(params or {}), security)
        with _LOCK:
            _IN_RECEIVER[0] += 1
        try:
            stream = create_receiver(*args[len(receiver_args):], **named)
        finally:
            with _LOCK:
                _IN_RECEIVER[0] -= 1
        stream.foreachRDD(_count_elements)
        _write(layout.INPUTS, {"kind": "kafka", "at": _caller()})
        return stream

    foreach_rdd = DStream.foreachRDD

    def foreach_rdd_recorded(self: Any, func: Any) -> None:
        foreach_rdd(self, _recording_prints(func, _caller()))

    def pprint_all(self: Any, num: int = 10) -> None:
        self.foreachRDD(_own(_take_and_print(_caller(), num)))

    socket_text_stream = StreamingContext.socketTextStream
    text_file_stream = StreamingContext.textFileStream
    queue_stream = StreamingContext.queueStream

    def socket_stream(self: Any, hostname: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if _IN_RECEIVER[0]:  # createStream's own receiver reads its bridge, not the job's socket input
            return socket_text_stream(self, hostname, port, *args, **kwargs)
        fed = os.environ.get("DMK_SOCKET")
        if fed:
            hostname, _, port_text = fed.rpartition(":")
            port = int(port_text)
        stream = socket_text_stream(self, hostname, port, *args, **kwargs)
        stream.foreachRDD(_count_elements)
        _write(layout.INPUTS, {"kind": "socket", "at": _caller()})
        return stream

    def file_stream(self: Any, directory: str) -> Any:
        stream = text_file_stream(self, os.environ.get("DMK_INPUT_DIR") or directory)
        stream.foreachRDD(_count_elements)
        _write(layout.INPUTS, {"kind": "files", "at": _caller()})
        return stream

    def queue_stream_fed(self: Any, rdds: Any, *args: Any, **kwargs: Any) -> Any:
        fed = os.environ.get("DMK_QUEUE_FILE")
        if fed:
            with open(fed, encoding="utf-8") as batches:
                rdds = [self.sparkContext.parallelize(batch, 1) for batch in json.load(batches)]
        stream = queue_stream(self, rdds, *args, **kwargs)
        stream.foreachRDD(_count_elements)
        _write(layout.INPUTS, {"kind": "queue", "at": _caller()})
        return stream

    class Completed(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - Spark's names
            info = batchCompleted.batchInfo()
            _batch_completed(int(info.batchTime().milliseconds()), int(info.numRecords()))

    start = StreamingContext.start

    def start_reporting(self: Any) -> None:
        self.addStreamingListener(Completed())
        start(self)

    revived.KafkaUtils.createDirectStream = staticmethod(create_direct_stream)  # type: ignore[method-assign]
    revived.KafkaUtils.createStream = staticmethod(create_stream)  # type: ignore[method-assign]
    DStream.foreachRDD = foreach_rdd_recorded  # type: ignore[method-assign]
    DStream.pprint = pprint_all  # type: ignore[method-assign]
    StreamingContext.socketTextStream = socket_stream  # type: ignore[method-assign]
    StreamingContext.textFileStream = file_stream  # type: ignore[method-assign]
    StreamingContext.queueStream = queue_stream_fed  # type: ignore[method-assign]
    revived.KafkaUtils._dmk_standin = True  # type: ignore[attr-defined]
    StreamingContext.start = start_reporting  # type: ignore[method-assign]
    own_output.install_from_env(lambda row: _write(layout.OUTPUTS, row))  # --output files:LOC
    print("dmk: pyspark.streaming.kafka is the kit's revived Spark 2.4 module (legacy.kafka) in this process; "
          f"completed batches are reported to {path}", file=sys.stderr, flush=True)
