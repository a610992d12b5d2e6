"""Run a team's unmodified Spark 2.x DStream script on the kit, for ``dmk compare-jobs``.

:func:`install`, called in the job's own process before its script runs, does two things:

* ``from pyspark.streaming.kafka import KafkaUtils`` works as it did on Spark 2.4: that module is the kit's
  revived one (:mod:`legacy.kafka`), for this process only;
* every batch of the script's direct streams is reported once it completes (all its output operations ran):
  one JSON line per batch in the progress file, ``{"batch_ms", "completed_ms", "records", "ranges":
  [[topic, partition, from, until], ...]}``. That is how the harness knows the job has consumed its input.

Example (what ``python -m compare.jobrun --engine legacy SCRIPT ARGS`` does)::

    install("runs/x/legacy/progress.jsonl")
    runpy.run_path("jobs/legacy.py", run_name="__main__")
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kit.security import KAFKA_SECURITY_ENV

__all__ = ["install"]

_RANGES: dict[int, list[list[Any]]] = {}
_LOCK = threading.Lock()
_PROGRESS: list[Path] = []


def _note_ranges(time_: Any, rdd: Any) -> None:
    """A ``foreachRDD`` function keeping the batch's offset ranges until the batch completes (no Spark job)."""
    batch_ms = round(time_.timestamp() * 1000)
    ranges = [[r.topic, r.partition, r.fromOffset, r.untilOffset] for r in rdd.offsetRanges()]
    with _LOCK:
        _RANGES.setdefault(batch_ms, []).extend(ranges)


def _batch_completed(batch_ms: int, records: int) -> None:
    with _LOCK:
        ranges = _RANGES.pop(batch_ms, [])
    row = {"batch_ms": batch_ms, "completed_ms": time.time_ns() // 1_000_000, "records": records, "ranges": ranges}
    for path in _PROGRESS:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(row) + "\n")


def install(progress_path: str | Path) -> None:
    """Make ``pyspark.streaming.kafka`` the kit's module and report completed batches to ``progress_path``.

    Idempotent. Says so on stderr, so the job's log shows what stood in.
    """
    import pyspark.streaming
    from pyspark.streaming import StreamingContext
    from pyspark.streaming.listener import StreamingListener

    import legacy.kafka as revived

    path = Path(progress_path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
        if security and len(args) >= 3:
            args = (*args[:2], {**security, **args[2]}, *args[3:])
        elif security and "kafkaParams" in kwargs:
            kwargs["kafkaParams"] = {**security, **kwargs["kafkaParams"]}
        stream = create(*args, **kwargs)
        stream.foreachRDD(_note_ranges)
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
    revived.KafkaUtils._dmk_standin = True  # type: ignore[attr-defined]
    StreamingContext.start = start_reporting  # type: ignore[method-assign]
    print("dmk: pyspark.streaming.kafka is the kit's revived Spark 2.4 module (legacy.kafka) in this process; "
          f"completed batches are reported to {path}", file=sys.stderr, flush=True)
