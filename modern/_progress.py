"""A StreamingQueryListener that hands each query progress over as its JSON, and nothing else.

PySpark's own listener turns every progress event into Python objects field by field, over py4j: a round trip
for each of the progress's, its sources', sink's and state operators' fields (dozens per micro-batch), several
of them resolving class names against every jar on the classpath, on the same cores as the query (figures in
benchmarks/results/changes.md §19). This one asks the JVM for the progress as JSON
(``StreamingQueryProgress.json``, what ``StreamingQuery.lastProgress`` gives): two calls.

Example::

    listener = progress_listener(lambda progress: print(progress["batchId"]))
    spark.streams.addListener(listener)
    ...
    spark.streams.removeListener(listener)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["progress_listener"]


class _JsonProgress:
    """Spark's ``PythonStreamingQueryListener`` interface, implemented over py4j's callback server."""

    def __init__(self, on_progress: Callable[[dict[str, Any]], None],
                 on_idle: Callable[[dict[str, Any]], None] | None = None, jstreams: Any = None) -> None:
        self.on_progress = on_progress
        self.on_idle = on_idle
        self.jstreams = jstreams

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        self.on_progress(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        if self.on_idle is not None and self.jstreams is not None:
            progress = _idle_progress(self.jstreams, jevent.id().toString(), jevent.timestamp())
            if progress is not None:
                self.on_idle(progress)

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _idle_progress(jstreams: Any, query_id: str, timestamp: str) -> dict[str, Any] | None:
    """The progress of the idle trigger that started at ``timestamp``, or None if the query no longer has it.

    Spark records an idle trigger's progress (its ``latestOffset`` and ``triggerExecution`` durations, no input)
    in the query's ``recentProgress`` but posts only a ``QueryIdleEvent`` (id, run id, the trigger's start), at
    most once per ``spark.sql.streaming.noDataProgressEventInterval`` (ProgressReporter.updateIdleness).
    """
    jquery = jstreams.get(query_id)
    if jquery is None:
        return None
    last = jquery.lastProgress()
    candidates = [last] if last is not None and last.timestamp() == timestamp else list(jquery.recentProgress())[::-1]
    for progress in candidates:
        if progress.timestamp() == timestamp:
            return dict(json.loads(progress.json()))
    return None


def progress_listener(
    on_progress: Callable[[dict[str, Any]], None],
    on_idle: Callable[[dict[str, Any]], None] | None = None,
    spark: Any = None,
) -> Any:
    """A listener for ``spark.streams.addListener`` calling ``on_progress`` with each progress's JSON, parsed.

    ``on_progress`` runs on Spark's listener thread, one event at a time, for every query of the session.
    ``on_idle``, if given with the (classic) ``spark`` session the listener is added to, gets the progress of
    each idle trigger Spark reports there (a trigger that found no new data and ran no micro-batch; see
    :func:`_idle_progress`).
    """
    from pyspark import SparkContext
    from pyspark.sql.streaming import StreamingQueryListener

    class JsonProgressListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            on_progress(json.loads(event.progress.json))  # only if called as a PySpark listener would be

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

        @property
        def _jlistener(self) -> Any:
            # What spark.streams.addListener and removeListener register: PySpark's JVM wrapper around a
            # py4j callback, here the lean one above instead of PySpark's field-by-field converter.
            if not hasattr(self, "_jlistenerobj"):
                jvm = SparkContext._jvm
                if jvm is None:
                    msg = "progress_listener: no SparkContext is running; create the session first"
                    raise RuntimeError(msg)
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(
                    on_progress, on_idle, spark._jsparkSession.streams() if spark is not None else None))
            return self._jlistenerobj

    return JsonProgressListener()
