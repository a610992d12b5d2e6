"""The runtime a ``dmk migrate`` draft carries: a DStream job's own graph, run per micro-batch of one query.

This module is never imported by the kit: :mod:`migrate.draft` copies its text (from the ``begin runtime``
line on) into every draft, so a draft imports pyspark and the job's own imports, nothing from this kit.

How a DStream job runs here, and why it gives the rows the DStream job gave:

* Every input stream of the job (``textFileStream``, ``queueStream``, ``KafkaUtils.createDirectStream``,
  ``KafkaUtils.createStream`` with the brokers its ZooKeeper quorum registers) becomes a ``spark.readStream``
  source, and all of them, tagged, go into **one** query (a streaming ``union``), so one micro-batch holds what
  one DStream batch held from each. ``socketTextStream`` is a receiver, as it was on DStreams: the
  ``dstream-socket`` Python source (:func:`_socket_source`) reads the server's lines in a thread (again every 2 s
  after a refused or closed connection, as Spark's ``SocketReceiver`` restarts), each micro-batch taking the
  lines received since the last. Structured Streaming's ``format("socket")`` keeps its position in the query's
  checkpoint although it cannot replay, so a restarted query failed on it ("Offsets committed out of order"); the
  receiver, like the DStream one, loses what was sent while the job was down and what it had not committed.
* A ``rate-micro-batch`` source (one row per micro-batch) is in that union too: Structured Streaming runs a
  micro-batch only when a source has new data, DStreams run a batch every interval. With it a micro-batch
  runs every ``trigger(processingTime=<batch interval>)``, as a DStream batch did, so ``updateStateByKey``
  re-emits every key, windows slide and ``pprint`` prints its header on empty intervals too.
* Inside ``foreachBatch``, each input's rows become an RDD of the element type the DStream had (``str``
  lines; ``(key, value)`` of ``str`` from Kafka, through the job's own decoders), and the job's own
  functions run on it with the RDD API, exactly as Spark 2.4's Python DStreams called them (same
  ``numPartitions`` defaults, ``pprint`` text, ``saveAsTextFiles`` names, window and state algorithms).

What differs from a DStream job (docs/migrate.md#the-draft):

* batch times: a micro-batch's time is the batch-interval boundary it started after (``time.time()``
  rounded down); an overrunning micro-batch makes Structured Streaming skip trigger boundaries where DStreams
  queued batches, so one micro-batch then holds several intervals' data;
* state: ``updateStateByKey`` state is kept per micro-batch under a local checkpoint directory (a path or a
  ``file:`` URI) and survives a restart (a re-run micro-batch starts from the state before it); with an
  ``hdfs:``/``s3a:`` checkpoint, and for window contents and the incremental window's previous result, it
  lives in memory only and is empty after a restart;
* ``socketTextStream``'s receiver runs beside the driver (in the process Spark runs a Python source in), not
  on an executor, and has no write-ahead log (``spark.streaming.receiver.writeAheadLog.enable`` has no
  counterpart): lines received and not yet in a committed micro-batch are lost when the job dies;
* ``StreamingContext.getOrCreate`` always runs the setup function (the graph is rebuilt; the query's
  checkpoint restores the offsets), where a DStream job restored from its checkpoint did not call it.
"""

# ---- begin runtime ----
# The DStream graph of this job, run per micro-batch of one Structured Streaming query (written by dmk migrate;
# docs/migrate.md#the-draft says how it keeps the DStream job's semantics and where it cannot).
import base64 as _base64
import contextlib as _contextlib
import datetime as _datetime
import io as _io
import operator as _operator
import os as _os
import pickle as _pickle
import shutil as _shutil
import socket as _socket
import sys as _sys
import tempfile as _tempfile
import threading as _threading
import time as _time
import urllib.parse as _urlparse
import uuid as _uuid
from itertools import chain as _chain
from typing import Any as _Any


def _seconds_ms(duration: _Any) -> int:
    return int(round(float(duration) * 1000))


def _utf8(data: _Any) -> _Any:
    return None if data is None else bytes(data).decode("utf-8")


def _declared_at() -> str:
    """``FILE:LINE`` of the job's call of the output operation calling this (what its printed output is named by)."""
    frame = _sys._getframe(2)
    return f"{_os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _queue_line(element: _Any) -> str:
    """A queued element as one line: its JSON where that reads back as the same value, else its pickle."""
    import json

    try:
        text = json.dumps(element)
        if type(json.loads(text)) is type(element) and json.loads(text) == element:
            return text
    except (TypeError, ValueError):
        pass
    return "pickle:" + _base64.b64encode(_pickle.dumps(element)).decode("ascii")


def _queue_element(line: str) -> _Any:
    """The element of a queued line: a pickle, else its JSON value, else the text (as compare-jobs feeds a queue)."""
    import json

    if line.startswith("pickle:"):
        return _pickle.loads(_base64.b64decode(line[7:]))
    try:
        return json.loads(line)
    except ValueError:
        return line


def _call_with_time(func: _Any, arity: int) -> _Any:
    """``func(time, *rdds)`` for a function declared with one fewer parameter, as DStream.transform did."""
    if func.__code__.co_argcount == arity - 1:
        return lambda t, *rdds: func(*rdds)
    return func


def _truncated(rdd: _Any) -> _Any:
    """``rdd`` computed now and kept (a local checkpoint), so the next batch's RDD built on it has a short lineage.

    Computed through its own JVM RDD, and returned as a plain RDD over it: PySpark pipelines the functions of an
    RDD that it does not know to be cached or checkpointed (``localCheckpoint`` does not tell it) into whatever is
    built on it, so both a ``count()`` and the next batch's RDD skipped the checkpointed RDD and each batch's state
    held every batch before it in its lineage (a restarted draft's batches grew from 1 s to minutes).
    """
    from pyspark import RDD

    rdd.localCheckpoint()
    rdd._jrdd.count()
    return RDD(rdd._jrdd, rdd.ctx, rdd._jrdd_deserializer)


class _SocketReceiver:
    """``socketTextStream``'s receiver: a thread reading a TCP server's lines (in the ``dstream-socket`` reader).

    As Spark's ``SocketReceiver``: lines end at a line feed, a carriage return or both, decoded as UTF-8 (malformed
    bytes replaced, as Java's reader does); a refused or closed connection is tried again 2 s later (a receiver's
    restart delay), and what the server sent meanwhile is not seen.
    """

    RETRY_S = 2.0

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, int(port))
        self._lines: list[str] = []
        self._lock = _threading.Lock()
        self._stopped = _threading.Event()
        self._connection: _Any = None
        _threading.Thread(target=self._receive, name=f"socket-receiver-{host}:{port}", daemon=True).start()

    def _receive(self) -> None:
        while not self._stopped.is_set():
            try:
                with _socket.create_connection(self._address, timeout=self.RETRY_S) as connection:
                    connection.settimeout(None)
                    self._connection = connection
                    reader = _io.TextIOWrapper(connection.makefile("rb"), encoding="utf-8", errors="replace")
                    for line in reader:
                        with self._lock:
                            self._lines.append(line.rstrip("\r\n"))
            except OSError:
                pass
            self._stopped.wait(self.RETRY_S)

    def drain(self) -> list[str]:
        """The lines received since the last call."""
        with self._lock:
            lines, self._lines = self._lines, []
        return lines

    def stop(self) -> None:
        self._stopped.set()
        if self._connection is not None:
            with _contextlib.suppress(OSError):
                self._connection.shutdown(_socket.SHUT_RDWR)


def _socket_source() -> _Any:
    """The ``dstream-socket`` Python data source: ``socketTextStream``'s receiver as a source of the query.

    Its reader (one per query, in the Python process Spark runs a Python source in) keeps a
    :class:`_SocketReceiver` and the lines not yet committed. A position is ``{"run": <reader>, "lines": n}``:
    one from another run (the query restarted from its checkpoint) starts this run's lines from the first, and a
    batch of another run that the restart runs again gets no lines: the receiver cannot replay what the last
    process received, as a DStream receiver without a write-ahead log could not. (Structured Streaming's own
    ``format("socket")`` keeps a position it cannot replay and failed the restarted query: "Offsets committed out
    of order".)
    """
    from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

    class SocketLines(SimpleDataSourceStreamReader):
        """The lines of one run of the query, from its receiver.

        Spark pickles a reader to plan and to read a batch it runs again: the receiver starts at the first read (in
        the process that serves the query's offsets), and is never pickled.
        """

        def __init__(self, host: str, port: int) -> None:
            self._address = (host, port)
            self._run = _uuid.uuid4().hex
            self._receiver: _Any = None
            self._kept: list[str] = []  # received, not committed
            self._first = 0  # the number of the first kept line

        def __getstate__(self) -> dict:
            return {**self.__dict__, "_receiver": None}

        def _position(self, offset: dict) -> int:
            return int(offset["lines"]) if offset.get("run") == self._run else 0

        def initialOffset(self) -> dict:  # noqa: N802
            return {"run": self._run, "lines": 0}

        def read(self, start: dict) -> _Any:
            if self._receiver is None:
                self._receiver = _SocketReceiver(*self._address)
            self._kept += self._receiver.drain()
            begin, end = self._position(start), self._first + len(self._kept)
            return iter([(line,) for line in self._kept[begin - self._first:]]), {"run": self._run, "lines": end}

        def readBetweenOffsets(self, start: dict, end: dict) -> _Any:  # noqa: N802
            if end.get("run") != self._run:
                return iter([])
            lines = self._kept[self._position(start) - self._first:int(end["lines"]) - self._first]
            return iter([(line,) for line in lines])

        def commit(self, end: dict) -> None:
            if end.get("run") == self._run:
                del self._kept[:int(end["lines"]) - self._first]
                self._first = int(end["lines"])

    class DStreamSocket(DataSource):
        @classmethod
        def name(cls) -> str:
            return "dstream-socket"

        def schema(self) -> str:
            for option in ("host", "port"):
                if option not in self.options:
                    msg = f"the dstream-socket source needs the option {option!r}"
                    raise ValueError(msg)
            return "line string"

        def simpleStreamReader(self, schema: _Any) -> SocketLines:  # noqa: N802
            return SocketLines(self.options["host"], int(self.options["port"]))

    return DStreamSocket


class MicroBatchStream:
    """A DStream of the job: its RDD at each micro-batch time, computed by the job's own functions."""

    def __init__(self, ctx: _Any, compute: _Any, slide_ms: _Any = None) -> None:
        self._ssc = ctx
        self._compute = compute  # time in ms -> RDD or None
        self._slide_ms = slide_ms or ctx._interval_ms
        self._rdds: dict[int, _Any] = {}
        ctx._streams.append(self)

    def _valid(self, t: int) -> bool:
        return (t - self._ssc._zero_ms) % self._slide_ms == 0

    def _rdd(self, t: int) -> _Any:
        if not self._valid(t):
            return None
        if t not in self._rdds:
            self._rdds[t] = self._compute(t)
        return self._rdds[t]

    def _forget(self, before: int) -> None:
        for t in [t for t in self._rdds if t < before]:
            rdd = self._rdds.pop(t)
            if rdd is not None and rdd.is_cached:
                rdd.unpersist()

    @property
    def _sc(self) -> _Any:
        return self._ssc.sparkContext

    def context(self) -> _Any:
        """The StreamingContext of this stream."""
        return self._ssc

    # ---- per-batch transformations (each as pyspark.streaming.DStream defines it)
    def transform(self, func: _Any) -> "MicroBatchStream":
        """``func(rdd)`` or ``func(time, rdd)`` on each batch's RDD."""
        func = _call_with_time(func, 2)

        def compute(t: int) -> _Any:
            rdd = self._rdd(t)
            return None if rdd is None else func(_datetime.datetime.fromtimestamp(t / 1000.0), rdd)

        return MicroBatchStream(self._ssc, compute, self._slide_ms)

    def transformWith(self, func: _Any, other: _Any, keepSerializer: bool = False) -> "MicroBatchStream":  # noqa: N802, N803
        """``func(rdd_a, rdd_b)`` or ``func(time, rdd_a, rdd_b)`` on the two streams' batches."""
        func = _call_with_time(func, 3)

        def compute(t: int) -> _Any:
            a, b = self._rdd(t), other._rdd(t)
            a = a if a is not None else self._sc.emptyRDD()
            b = b if b is not None else self._sc.emptyRDD()
            return func(_datetime.datetime.fromtimestamp(t / 1000.0), a, b)

        return MicroBatchStream(self._ssc, compute, self._slide_ms)

    def mapPartitionsWithIndex(self, f: _Any, preservesPartitioning: bool = False) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.mapPartitionsWithIndex(f)`` per batch."""
        return self.transform(lambda rdd: rdd.mapPartitionsWithIndex(f, preservesPartitioning))

    def mapPartitions(self, f: _Any, preservesPartitioning: bool = False) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.mapPartitions(f)`` per batch."""
        return self.mapPartitionsWithIndex(lambda s, it: f(it), preservesPartitioning)

    def map(self, f: _Any, preservesPartitioning: bool = False) -> "MicroBatchStream":  # noqa: N803
        """``f`` on every element."""
        return self.mapPartitions(lambda it: map(f, it), preservesPartitioning)

    def flatMap(self, f: _Any, preservesPartitioning: bool = False) -> "MicroBatchStream":  # noqa: N802, N803
        """``f`` on every element, its results flattened."""
        return self.mapPartitionsWithIndex(lambda s, it: _chain.from_iterable(map(f, it)), preservesPartitioning)

    def filter(self, f: _Any) -> "MicroBatchStream":
        """The elements for which ``f`` is true."""
        return self.mapPartitions(lambda it: filter(f, it), True)

    def mapValues(self, f: _Any) -> "MicroBatchStream":  # noqa: N802
        """``f`` on every pair's value."""
        return self.map(lambda kv: (kv[0], f(kv[1])), True)

    def flatMapValues(self, f: _Any) -> "MicroBatchStream":  # noqa: N802
        """``f`` on every pair's value, flattened."""
        return self.flatMap(lambda kv: ((kv[0], x) for x in f(kv[1])), True)

    def glom(self) -> "MicroBatchStream":
        """Each partition as a list."""
        return self.mapPartitions(lambda it: [list(it)])

    def reduce(self, func: _Any) -> "MicroBatchStream":
        """One element per batch: the batch reduced by ``func``."""
        return self.map(lambda x: (None, x)).reduceByKey(func, 1).map(lambda x: x[1])

    def count(self) -> "MicroBatchStream":
        """One element per batch: its number of elements."""
        return self.mapPartitions(lambda i: [sum(1 for _ in i)]).reduce(_operator.add)

    def combineByKey(self, createCombiner: _Any, mergeValue: _Any, mergeCombiners: _Any,  # noqa: N802, N803
                     numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """``rdd.combineByKey`` per batch, into the default parallelism's partitions as DStreams did."""
        n = numPartitions or self._sc.defaultParallelism
        return self.transform(lambda rdd: rdd.combineByKey(createCombiner, mergeValue, mergeCombiners, n))

    def reduceByKey(self, func: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """Per batch, each key's values reduced by ``func`` (not a running result)."""
        return self.combineByKey(lambda x: x, func, func, numPartitions or self._sc.defaultParallelism)

    def groupByKey(self, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """Per batch, each key's values."""
        n = numPartitions or self._sc.defaultParallelism
        return self.transform(lambda rdd: rdd.groupByKey(n))

    def partitionBy(self, numPartitions: int, partitionFunc: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.partitionBy`` per batch."""
        if partitionFunc is None:
            return self.transform(lambda rdd: rdd.partitionBy(numPartitions))
        return self.transform(lambda rdd: rdd.partitionBy(numPartitions, partitionFunc))

    def countByValue(self) -> "MicroBatchStream":  # noqa: N802
        """Per batch, ``(value, count)`` of every distinct value."""
        return self.map(lambda x: (x, 1)).reduceByKey(lambda x, y: x + y)

    def repartition(self, numPartitions: int) -> "MicroBatchStream":  # noqa: N803
        """``rdd.repartition`` per batch."""
        return self.transform(lambda rdd: rdd.repartition(numPartitions))

    def union(self, other: _Any) -> "MicroBatchStream":
        """Both streams' batches."""
        return self.transformWith(lambda a, b: a.union(b), other, True)

    def _joined(self, how: str, other: _Any, numPartitions: _Any) -> "MicroBatchStream":  # noqa: N803
        n = numPartitions or self._sc.defaultParallelism
        return self.transformWith(lambda a, b: getattr(a, how)(b, n), other)

    def cogroup(self, other: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """``rdd.cogroup`` of the two streams' batches."""
        return self._joined("cogroup", other, numPartitions)

    def join(self, other: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """``rdd.join`` of the two streams' batches."""
        return self._joined("join", other, numPartitions)

    def leftOuterJoin(self, other: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.leftOuterJoin`` of the two streams' batches."""
        return self._joined("leftOuterJoin", other, numPartitions)

    def rightOuterJoin(self, other: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.rightOuterJoin`` of the two streams' batches."""
        return self._joined("rightOuterJoin", other, numPartitions)

    def fullOuterJoin(self, other: _Any, numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N802, N803
        """``rdd.fullOuterJoin`` of the two streams' batches."""
        return self._joined("fullOuterJoin", other, numPartitions)

    def cache(self) -> "MicroBatchStream":
        """Nothing to do: each batch's RDD is computed once per micro-batch."""
        return self

    def persist(self, storageLevel: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """Nothing to do: each batch's RDD is computed once per micro-batch."""
        return self

    def checkpoint(self, interval: _Any = None) -> "MicroBatchStream":
        """Nothing to do: state is checkpointed every micro-batch."""
        return self

    # ---- windows: in processing time, in multiples of the batch interval, emitted on slide boundaries
    def _remember(self, duration_ms: int) -> None:
        self._ssc._remembered.append((self, duration_ms))

    def window(self, windowDuration: _Any, slideDuration: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """The union of the batches of the last ``windowDuration`` seconds, every ``slideDuration`` seconds."""
        length = _seconds_ms(windowDuration)
        slide = _seconds_ms(slideDuration) if slideDuration is not None else self._slide_ms
        self._remember(length)

        def compute(t: int) -> _Any:
            rdds = [r for s in range(t - length + self._slide_ms, t + 1, self._slide_ms)
                    if (r := self._rdd(s)) is not None]
            return self._sc.union(rdds) if rdds else self._sc.emptyRDD()

        return MicroBatchStream(self._ssc, compute, slide)

    def reduceByKeyAndWindow(self, func: _Any, invFunc: _Any, windowDuration: _Any,  # noqa: N802, N803
                             slideDuration: _Any = None, numPartitions: _Any = None,  # noqa: N803
                             filterFunc: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """Each key reduced over the window; incrementally with ``invFunc`` where DStreams did so."""
        n = numPartitions or self._sc.defaultParallelism
        reduced = self.reduceByKey(func, n)
        if not invFunc:
            return reduced.window(windowDuration, slideDuration).reduceByKey(func, n)
        length = _seconds_ms(windowDuration)
        slide = _seconds_ms(slideDuration) if slideDuration is not None else self._slide_ms
        step = reduced._slide_ms
        reduced._remember(length + slide)

        def add(a: _Any, b: _Any) -> _Any:
            b = b.reduceByKey(func, n)
            r = a.union(b).reduceByKey(func, n) if a else b
            return r.filter(filterFunc) if filterFunc else r

        def subtract(a: _Any, b: _Any) -> _Any:
            b = b.reduceByKey(func, n)
            return a.leftOuterJoin(b, n).mapValues(lambda kv: invFunc(kv[0], kv[1]) if kv[1] is not None else kv[0])

        def between(begin: int, end: int) -> list[_Any]:  # the parent's batches in (begin, end]
            return [r for s in range(begin + step, end + 1, step) if (r := reduced._rdd(s)) is not None]

        def compute(t: int) -> _Any:
            previous = windowed._rdds.get(t - slide)
            if previous is not None and length >= slide * 5:  # Spark's PythonReducedWindowedDStream
                old = between(t - slide - length, t - length)
                result = subtract(previous, self._sc.union(old)) if old else previous
                new = between(t - slide, t)
                result = add(result, self._sc.union(new)) if new else result
            else:
                current = between(t - length, t)
                result = add(None, self._sc.union(current)) if current else None
            return _truncated(result) if result is not None else None

        windowed = MicroBatchStream(self._ssc, compute, slide)
        windowed._remember(2 * slide)
        return windowed

    def reduceByWindow(self, reduceFunc: _Any, invReduceFunc: _Any, windowDuration: _Any,  # noqa: N802, N803
                       slideDuration: _Any) -> "MicroBatchStream":  # noqa: N803
        """One element per slide: the window reduced."""
        keyed = self.map(lambda x: (1, x))
        reduced = keyed.reduceByKeyAndWindow(reduceFunc, invReduceFunc, windowDuration, slideDuration, 1)
        return reduced.map(lambda kv: kv[1])

    def countByWindow(self, windowDuration: _Any, slideDuration: _Any) -> "MicroBatchStream":  # noqa: N802, N803
        """One element per slide: the number of elements in the window."""
        return self.map(lambda x: 1).reduceByWindow(_operator.add, _operator.sub, windowDuration, slideDuration)

    def countByValueAndWindow(self, windowDuration: _Any, slideDuration: _Any,  # noqa: N802, N803
                              numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """``(value, count)`` over the window, every slide."""
        keyed = self.map(lambda x: (x, 1))
        counted = keyed.reduceByKeyAndWindow(_operator.add, _operator.sub, windowDuration, slideDuration,
                                             numPartitions)
        return counted.filter(lambda kv: kv[1] > 0)

    def groupByKeyAndWindow(self, windowDuration: _Any, slideDuration: _Any,  # noqa: N802, N803
                            numPartitions: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """Each key's values over the window, every slide."""
        grouped = self.mapValues(lambda x: [x]).reduceByKeyAndWindow(
            lambda a, b: a.extend(b) or a, lambda a, b: a[len(b):], windowDuration, slideDuration, numPartitions)
        from pyspark.resultiterable import ResultIterable

        return grouped.mapValues(ResultIterable)

    # ---- state: updateStateByKey, kept per micro-batch under the checkpoint directory
    def updateStateByKey(self, updateFunc: _Any, numPartitions: _Any = None,  # noqa: N802, N803
                         initialRDD: _Any = None) -> "MicroBatchStream":  # noqa: N803
        """Every key's state, updated each batch by the job's ``updateFunc(new_values, last_state)``."""
        n = numPartitions or self._sc.defaultParallelism
        initial = initialRDD
        if initial is not None and not hasattr(initial, "mapPartitions"):
            initial = self._sc.parallelize(initial)
        name = f"state-{len(self._ssc._states)}"
        self._ssc._states.append(name)
        last: dict[str, _Any] = {}

        def update(a: _Any, b: _Any) -> _Any:
            if a is None:
                g = b.groupByKey(n).mapValues(lambda vs: (list(vs), None))
            else:
                g = a.cogroup(b.partitionBy(n), n)
                g = g.mapValues(lambda ab: (list(ab[1]), list(ab[0])[0] if len(ab[0]) else None))
            return g.mapValues(lambda vs_s: updateFunc(vs_s[0], vs_s[1])).filter(lambda kv: kv[1] is not None)

        def compute(t: int) -> _Any:
            rdd = self._rdd(t)
            previous = last.get("rdd")
            if previous is None:
                previous = self._ssc._load_state(name)
            if previous is None:
                previous = initial
            if rdd is None:
                return previous
            state = _truncated(update(previous, rdd))
            self._ssc._save_state(name, state)
            last["rdd"] = state
            return state

        return MicroBatchStream(self._ssc, compute, self._slide_ms)

    # ---- output operations: run in the order the job declared them, every micro-batch
    def foreachRDD(self, func: _Any) -> None:  # noqa: N802
        """The job's ``func(rdd)`` or ``func(time, rdd)`` on every batch."""
        self._output(func, _declared_at())

    def _output(self, func: _Any, declared_at: str) -> None:
        self._ssc._outputs.append((self, _call_with_time(func, 2), declared_at))

    def pprint(self, num: int = 10) -> None:
        """The first ``num`` elements of every batch, printed as DStream.pprint printed them."""

        def take_and_print(time: _Any, rdd: _Any) -> None:
            taken = rdd.take(num + 1)
            print("-------------------------------------------")
            print(f"Time: {time}")
            print("-------------------------------------------")
            for record in taken[:num]:
                print(record)
            if len(taken) > num:
                print("...")
            print("")

        self._output(take_and_print, _declared_at())

    def saveAsTextFiles(self, prefix: str, suffix: _Any = None) -> None:  # noqa: N802
        """Every batch as text files in ``prefix-<time in ms>[.suffix]``, on any file system Spark writes to."""

        def save(time: _Any, rdd: _Any) -> None:
            stamp = int(_time.mktime(time.timetuple()) * 1000) + time.microsecond // 1000
            path = f"{prefix}-{stamp}" + ("" if suffix is None else f".{suffix}")
            try:
                rdd.saveAsTextFile(path)
            except Exception as exc:  # as DStream's: a micro-batch re-run after a restart finds it written
                if "FileAlreadyExistsException" not in str(exc):
                    raise

        self._output(save, _declared_at())


_INPUT_COLUMNS = {"key": "binary", "value": "binary", "line": "string", "topic": "string", "partition": "int",
                  "offset": "long", "file": "string"}
"""The columns every input's rows have in the query's union (``src`` first: which input, -1 for the ticks)."""


class MicroBatchContext:
    """A StreamingContext: the job's graph, started as one Structured Streaming query."""

    _active: _Any = None

    def __init__(self, sparkContext: _Any = None, batchDuration: _Any = None, **_: _Any) -> None:  # noqa: N803
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        self.sparkContext = sparkContext or SparkContext.getOrCreate()
        self.spark = SparkSession.builder.getOrCreate()
        if batchDuration is None:
            msg = "StreamingContext needs a batch interval (batchDuration, in seconds)"
            raise ValueError(msg)
        self._interval_ms = _seconds_ms(batchDuration)
        self._checkpoint: _Any = None
        self._sources: list[_Any] = []  # (stream, DataFrame, element of a row)
        self._outputs: list[_Any] = []
        self._remembered: list[_Any] = []
        self._streams: list[MicroBatchStream] = []
        self._states: list[str] = []
        self._new_files: list[_Any] = []  # (source index, directory): DStreams read only files newer than start
        self._zero_ms = 0
        self._last_ms: _Any = None
        self._batch_id = 0
        self._query: _Any = None
        MicroBatchContext._active = self

    # ---- the context's own methods
    @classmethod
    def getOrCreate(cls, checkpointPath: str, setupFunc: _Any) -> "MicroBatchContext":  # noqa: N802, N803
        """The job's setup function's context, checkpointed in ``checkpointPath`` (the query resumes from it)."""
        ctx = setupFunc()
        if ctx._checkpoint is None:
            ctx.checkpoint(checkpointPath)
        return ctx

    @classmethod
    def getActive(cls) -> "MicroBatchContext":  # noqa: N802
        """The context created last."""
        return cls._active

    @classmethod
    def getActiveOrCreate(cls, checkpointPath: _Any, setupFunc: _Any) -> "MicroBatchContext":  # noqa: N802, N803
        """The context created last, else the setup function's."""
        return cls._active or cls.getOrCreate(checkpointPath, setupFunc)

    def checkpoint(self, directory: str) -> None:
        """Where the query's checkpoint and the state of ``updateStateByKey`` go."""
        self._checkpoint = directory

    def remember(self, duration: _Any) -> None:
        """Nothing to do: each stream keeps what its windows need."""

    @property
    def _state_dir(self) -> _Any:
        """Where the state goes: a local directory only (a ``file:`` URI too); elsewhere state is not kept."""
        if self._checkpoint is None:
            return None
        parsed = _urlparse.urlparse(self._checkpoint)
        if parsed.scheme not in ("", "file"):
            return None
        return _os.path.join(_urlparse.unquote(parsed.path) if parsed.scheme else self._checkpoint, "dstream-state")

    # ---- inputs
    def _input(self, frame: _Any, element: _Any) -> MicroBatchStream:
        from pyspark.sql import functions as F  # noqa: N812

        index = len(self._sources)
        present = set(frame.columns)
        frame = frame.select(F.lit(index).alias("src"), *[
            (F.col(name) if name in present else F.lit(None)).cast(kind).alias(name)
            for name, kind in _INPUT_COLUMNS.items()])
        batch: dict[str, _Any] = {}  # this micro-batch's RDD of the input, set in _run_batch
        stream = MicroBatchStream(self, lambda t: batch.get("rdd") if t == self._last_ms else None)
        stream._batch = batch  # type: ignore[attr-defined]
        self._sources.append((stream, frame, element))
        return stream

    def socketTextStream(self, hostname: str, port: int, storageLevel: _Any = None) -> MicroBatchStream:  # noqa: N802, N803
        """The lines a TCP server sends, received while the job runs: the ``dstream-socket`` source (a receiver)."""
        self.spark.dataSource.register(_socket_source())
        frame = (self.spark.readStream.format("dstream-socket").option("host", hostname).option("port", int(port))
                 .load())
        return self._input(frame, lambda row: row.line)

    def textFileStream(self, directory: str) -> MicroBatchStream:  # noqa: N802
        """The lines of the files that appear in ``directory`` after the start: the text file source."""
        from pyspark.sql import functions as F  # noqa: N812

        frame = (self.spark.readStream.format("text").load(directory)
                 .select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("file")))
        self._new_files.append((len(self._sources), directory))
        return self._input(frame, lambda row: row.line)

    def queueStream(self, rdds: _Any, oneAtATime: bool = True, default: _Any = None) -> MicroBatchStream:  # noqa: N802, N803
        """One queued RDD per batch: each written as one file, read by the text source one file per trigger."""
        directory = _tempfile.mkdtemp(prefix="dstream-queue-")
        stamp = _time.time() - len(rdds) - 10
        for number, rdd in enumerate(rdds):
            rows = rdd.collect() if hasattr(rdd, "collect") else list(rdd)
            path = _os.path.join(directory, f"rdd-{number:06d}.txt")
            with open(path, "w", encoding="ascii") as out:
                for element in rows:
                    out.write(_queue_line(element) + "\n")
            _os.utime(path, (stamp + number, stamp + number))
        reader = self.spark.readStream.format("text")
        if oneAtATime:
            reader = reader.option("maxFilesPerTrigger", 1)
        frame = reader.load(directory).withColumnRenamed("value", "line")
        return self._input(frame, lambda row: _queue_element(row.line))

    def union(self, *dstreams: _Any) -> MicroBatchStream:
        """All the streams' batches."""
        def compute(t: int) -> _Any:
            rdds = [r for s in dstreams if (r := s._rdd(t)) is not None]
            return self.sparkContext.union(rdds) if rdds else None

        return MicroBatchStream(self, compute, dstreams[0]._slide_ms)

    def transform(self, dstreams: _Any, transformFunc: _Any) -> MicroBatchStream:  # noqa: N803
        """``transformFunc(rdds, time)`` on the streams' batches, as StreamingContext.transform."""
        def compute(t: int) -> _Any:
            rdds = [s._rdd(t) for s in dstreams]
            return transformFunc(rdds, _datetime.datetime.fromtimestamp(t / 1000.0))

        return MicroBatchStream(self, compute, dstreams[0]._slide_ms)

    # ---- state files: one directory per micro-batch, so a re-run micro-batch starts from the state before it
    def _save_state(self, name: str, rdd: _Any) -> None:
        if self._state_dir is None:
            return
        base = _os.path.join(self._state_dir, name)
        path = _os.path.join(base, f"{self._batch_id:012d}")
        _shutil.rmtree(path, ignore_errors=True)
        rdd.saveAsPickleFile(path)
        for old in sorted(_os.listdir(base))[:-2]:
            _shutil.rmtree(_os.path.join(base, old), ignore_errors=True)

    def _load_state(self, name: str) -> _Any:
        if self._state_dir is None or not _os.path.isdir(_os.path.join(self._state_dir, name)):
            return None
        base = _os.path.join(self._state_dir, name)
        saved = [d for d in sorted(_os.listdir(base))
                 if d.isdigit() and int(d) < self._batch_id and _os.path.exists(_os.path.join(base, d, "_SUCCESS"))]
        return self.sparkContext.pickleFile(_os.path.join(base, saved[-1])) if saved else None

    # ---- running
    def _run_batch(self, df: _Any, batch_id: int) -> None:
        now = int(_time.time() * 1000)
        t = now - now % self._interval_ms
        if self._last_ms is None:
            self._zero_ms = t - self._interval_ms
        elif t <= self._last_ms:
            t = self._last_ms + self._interval_ms
        self._last_ms, self._batch_id = t, batch_id
        df = df.persist()
        try:
            rows = df.rdd
            for index, (stream, _frame, element) in enumerate(self._sources):
                stream._batch["rdd"] = rows.filter(lambda row, i=index: row.src == i).map(element)
            for index, _directory in self._new_files:
                old = self._old_files.get(index, ())
                if old:
                    source = self._sources[index][0]
                    source._batch["rdd"] = rows.filter(
                        lambda row, i=index, o=old: row.src == i
                        and _urlparse.unquote(_urlparse.urlparse(row.file).path) not in o
                    ).map(lambda row: row.line)
            for stream, _remember_ms in self._remembered:
                rdd = stream._rdd(t)
                if rdd is not None and not rdd.is_cached:
                    rdd.persist()
                    rdd.count()
            for stream, func, declared_at in self._outputs:  # (a local: what names a draft's printed stream)
                rdd = stream._rdd(t)
                if rdd is not None:
                    try:
                        func(_datetime.datetime.fromtimestamp(t / 1000.0), rdd)
                    except Exception as exc:
                        exc.add_note(f"in the job's output operation at {declared_at}")
                        raise
            kept: dict[int, int] = {}
            for stream, ms in self._remembered:
                kept[id(stream)] = max(ms, kept.get(id(stream), 0))
            for stream in self._streams:  # what no window needs any more
                stream._forget(t - kept.get(id(stream), 0) + 1)
        finally:
            df.unpersist()

    def start(self) -> None:
        """Start the query: all inputs in one micro-batch every batch interval, the graph run in foreachBatch."""
        from pyspark.sql import functions as F  # noqa: N812

        if not self._sources:
            msg = "the job defines no input stream: nothing to start"
            raise ValueError(msg)
        self._old_files: dict[int, set[str]] = {}
        location = _os.path.join(self._checkpoint, "query") if self._checkpoint else None
        local = _urlparse.unquote(_urlparse.urlparse(location).path) if location else None
        fresh = local is None or not _os.path.isdir(_os.path.join(local, "offsets"))
        for index, directory in self._new_files:
            if fresh and _os.path.isdir(directory):  # DStreams ignore the files there before the start
                self._old_files[index] = {_os.path.abspath(_os.path.join(directory, f)) for f in _os.listdir(directory)}
        ticks = self.spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
        frame = ticks.select(F.lit(-1).alias("src"), *[F.lit(None).cast(kind).alias(name)
                                                         for name, kind in _INPUT_COLUMNS.items()])
        for _stream, other, _element in self._sources:
            frame = frame.unionByName(other)
        writer = (frame.writeStream.queryName("dstream_job").trigger(processingTime=f"{self._interval_ms} milliseconds")
                  .foreachBatch(self._run_batch))
        if location is not None:
            writer = writer.option("checkpointLocation", location)
        self._query = writer.start()
        self._started_ms = int(_time.time() * 1000)

    def _batches_run(self) -> int:
        progress = self._query.lastProgress
        return 0 if not progress else int(progress["batchId"]) + 1

    def awaitTermination(self, timeout: _Any = None) -> _Any:  # noqa: N802
        """Wait for the query to end (or ``timeout`` seconds); its failure is raised here."""
        return self._query.awaitTermination(timeout) if timeout is not None else self._query.awaitTermination()

    def awaitTerminationOrTimeout(self, timeout: _Any) -> _Any:  # noqa: N802
        """Whether the query ended within ``timeout`` seconds."""
        return self._query.awaitTermination(timeout)

    def stop(self, stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:  # noqa: N803
        """Stop the query, then the SparkContext if asked.

        Graceful: after as many micro-batches as batch intervals passed since the start (the batches a DStream
        job had generated by then, which its graceful stop finished) and the one running.
        """
        if self._query is not None:
            if stopGraceFully:  # DStream generated a batch every interval since the start, and finished them all
                due = (int(_time.time() * 1000) - self._started_ms) // self._interval_ms
                while self._query.isActive and self._batches_run() < due:
                    _time.sleep(0.05)
            while stopGraceFully and self._query.isActive and self._query.status.get("isTriggerActive"):
                _time.sleep(0.05)
            self._query.stop()
        if stopSparkContext:
            self.sparkContext.stop()


_KAFKA_NOT_PASSED = ("group.id", "enable.auto.commit", "key.deserializer", "value.deserializer",
                     "interceptor.classes", "zookeeper.connect", "zookeeper.connection.timeout.ms")


class MicroBatchKafka:
    """KafkaUtils: a Kafka direct or receiver stream as the Kafka source of the query."""

    @staticmethod
    def createDirectStream(ssc: _Any, topics: _Any, kafkaParams: _Any, fromOffsets: _Any = None,  # noqa: N802, N803
                           keyDecoder: _Any = _utf8, valueDecoder: _Any = _utf8,  # noqa: N803
                           messageHandler: _Any = None) -> MicroBatchStream:  # noqa: N803
        """``(key, value)`` of every record (or the job's ``messageHandler``'s result), per batch."""
        import json

        params = dict(kafkaParams)
        servers = params.pop("metadata.broker.list", None) or params.pop("bootstrap.servers", None)
        if not servers:
            msg = "kafkaParams has no metadata.broker.list or bootstrap.servers: the brokers to read from"
            raise ValueError(msg)
        reset = params.pop("auto.offset.reset", "largest")
        reader = ssc.spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
        if fromOffsets:
            starting: dict[str, dict[str, int]] = {}
            for tp, offset in fromOffsets.items():
                starting.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
            assigned = {topic: sorted(int(p) for p in parts) for topic, parts in starting.items()}
            reader = reader.option("assign", json.dumps(assigned)).option("startingOffsets", json.dumps(starting))
        else:
            reader = reader.option("subscribe", ",".join(topics)).option(
                "startingOffsets", "earliest" if reset in ("smallest", "earliest") else "latest")
        for key, value in params.items():  # the consumer's own settings; Spark sets the rest itself
            if key not in _KAFKA_NOT_PASSED:
                reader = reader.option(f"kafka.{key}", str(value))
        frame = reader.load()

        if messageHandler is None:
            def element(row: _Any) -> _Any:
                return (keyDecoder(row.key), valueDecoder(row.value))
        else:
            def element(row: _Any) -> _Any:
                return messageHandler(_Message(row, keyDecoder, valueDecoder))
        return ssc._input(frame, element)

    @staticmethod
    def createStream(ssc: _Any, zkQuorum: str, groupId: str, topics: _Any, kafkaParams: _Any = None,  # noqa: N802, N803
                     storageLevel: _Any = None, keyDecoder: _Any = _utf8,  # noqa: N803
                     valueDecoder: _Any = _utf8) -> MicroBatchStream:  # noqa: N803
        """``(key, value)`` of every record of ``topics``, per batch: the brokers found in ZooKeeper, as 2.4's receiver.

        Spark 2.4's receiver ran Kafka 0.8's high-level consumer, which found the brokers through ZooKeeper
        (``zkQuorum``, the nodes ``/brokers/ids/<id>`` every broker registers). The draft reads them there once,
        at the start (:func:`_zookeeper_brokers`), and reads the topics with the Kafka source. A ``bootstrap.servers``
        or ``metadata.broker.list`` in ``kafkaParams`` is used instead (a cluster that no longer registers in
        ZooKeeper). The consumer group ``groupId`` is not used: the query keeps its offsets in its checkpoint and
        commits nothing, so a first start begins where ``auto.offset.reset`` says (default ``largest``: the
        latest offsets), not at the group's offsets in ZooKeeper (``/consumers/<groupId>/offsets``): ``dmk
        cutover zookeeper QUORUM --consumer <groupId>`` prints those as the ``startingOffsets`` to give this
        source to continue from them. ``{topic: numThreads}``'s thread counts and ``storageLevel`` have no
        counterpart (a task per partition; no receiver stores blocks).
        """
        if not isinstance(topics, dict):
            msg = "topics should be dict"  # Spark 2.4's own check
            raise TypeError(msg)
        params = dict(kafkaParams or {})
        timeout_ms = int(params.get("zookeeper.connection.timeout.ms", 10000))
        servers = params.pop("metadata.broker.list", None) or params.pop("bootstrap.servers", None)
        if not servers:
            servers = _zookeeper_brokers(ssc.sparkContext._jvm, zkQuorum, timeout_ms)
        reset = params.pop("auto.offset.reset", "largest")
        reader = (ssc.spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", ",".join(topics))
                  .option("startingOffsets", "earliest" if reset in ("smallest", "earliest") else "latest"))
        for key, value in params.items():  # the consumer's own settings; ZooKeeper's were Kafka 0.8's
            if key not in _KAFKA_NOT_PASSED and not key.startswith("zookeeper."):
                reader = reader.option(f"kafka.{key}", str(value))
        frame = reader.load()
        return ssc._input(frame, lambda row: (keyDecoder(row.key), valueDecoder(row.value)))


def _broker_address(registration: _Any) -> _Any:
    """``host:port`` of a broker's ZooKeeper registration (its JSON), as Kafka 0.8's consumer read it.

    ``host`` and ``port`` where the broker set them (its plaintext listener), else the first of its ``endpoints``
    (``PROTOCOL://host:port``); None when it names neither.
    """
    import json

    try:
        node = json.loads(bytes(registration).decode("utf-8"))
    except ValueError:  # not a registration Kafka wrote
        return None
    if not isinstance(node, dict):
        return None
    port = str(node.get("port", ""))
    if node.get("host") and port.isdigit() and int(port) > 0:
        return f"{node['host']}:{port}"
    for endpoint in node.get("endpoints") or ():
        address = str(endpoint).partition("://")[2]
        if address.rpartition(":")[2].isdigit():
            return address
    return None


def _zookeeper_brokers(jvm: _Any, quorum: str, timeout_ms: int) -> str:
    """The brokers registered in ZooKeeper at ``quorum`` (``/brokers/ids``), read by Spark's jars' Curator client.

    Raises:
        ValueError: ZooKeeper did not answer within ``timeout_ms``, or no broker is registered there.
    """
    fix = ("or name the brokers in the job's kafkaParams: KafkaUtils.createStream(ssc, zkQuorum, groupId, topics, "
           "{'metadata.broker.list': 'host:9092'})")
    curator = jvm.org.apache.curator
    client = curator.framework.CuratorFrameworkFactory.newClient(
        quorum, max(timeout_ms, 10000), timeout_ms, curator.retry.RetryOneTime(200))
    try:
        client.start()
        if not client.blockUntilConnected(timeout_ms, jvm.java.util.concurrent.TimeUnit.MILLISECONDS):
            msg = (f"KafkaUtils.createStream: ZooKeeper at {quorum!r} did not answer within {timeout_ms / 1000:g} s, "
                   "so the Kafka brokers registered there could not be read: start ZooKeeper or correct the quorum "
                   f"(host:port[,host:port...][/chroot]), {fix}")
            raise ValueError(msg)
        ids = client.getChildren().forPath("/brokers/ids") if client.checkExists().forPath("/brokers/ids") else []
        found = [_broker_address(client.getData().forPath(f"/brokers/ids/{i}")) for i in sorted(ids, key=str)]
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - a py4j error: a quorum that does not parse, a connection lost while reading
        msg = (f"KafkaUtils.createStream: reading the Kafka brokers from ZooKeeper at {quorum!r} failed "
               f"({(str(exc).splitlines() or [type(exc).__name__])[0][:200]}): correct the quorum "
               f"(host:port[,host:port...][/chroot]), {fix}")
        raise ValueError(msg) from None
    finally:
        client.close()
    servers = [address for address in found if address]
    if not servers:
        msg = (f"KafkaUtils.createStream: no Kafka broker is registered in ZooKeeper at {quorum!r} (/brokers/ids "
               f"is {'empty' if not found else 'without a host:port'}): start the brokers with zookeeper.connect="
               f"{quorum}, add the chroot they use to the quorum (host:port/kafka), {fix}")
        raise ValueError(msg)
    return ",".join(servers)


class _Message:
    """What a Kafka ``messageHandler`` is given (Spark 2.4's MessageAndMetadata)."""

    def __init__(self, row: _Any, key_decoder: _Any, value_decoder: _Any) -> None:
        self.topic, self.partition, self.offset = row.topic, row.partition, row.offset
        self._row, self._key, self._value = row, key_decoder, value_decoder

    def key(self) -> _Any:
        return self._key(self._row.key)

    def message(self) -> _Any:
        return self._value(self._row.value)


class TopicAndPartition:
    """A topic's partition, for ``fromOffsets``."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, int(partition)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopicAndPartition) and (self.topic, self.partition) == (other.topic, other.partition)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))


class OffsetRange:
    """A range of offsets of a topic's partition."""

    def __init__(self, topic: str, partition: int, fromOffset: int, untilOffset: int) -> None:  # noqa: N803
        self.topic, self.partition = topic, int(partition)
        self.fromOffset, self.untilOffset = int(fromOffset), int(untilOffset)


# ---- end runtime ----
