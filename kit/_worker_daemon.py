"""PySpark's Python worker daemon, with the modules every kit task needs imported before it forks workers.

Spark starts one daemon per executor (``python -m pyspark.daemon``) and forks a worker from it whenever a
task needs one and none is idle: a stage with several Python RDDs holds several workers per task, and more
are forked as batches overlap. Each fork imported pandas, pyarrow and the kit's modules again when it
unpickled its first function, on the same cores as the tasks (most of the Python workers' CPU in a py-spy
profile of a legacy ``running_counts`` run). Imported here, once, they are in every forked worker already.
So is PySpark's worker module, which PySpark imports after the fork.

The daemon then freezes its objects out of the garbage collector (``gc.freeze()``, CPython's advice for
servers that fork). PySpark's daemon runs a full ``gc.collect()`` in a reused worker after every task, and
each collection walked every object of these imports, the largest part of a trivial Python task's cost.
Frozen, they are never walked again (and their pages stay shared with the daemon).
``benchmarks/python_task_cost.py`` measures a Python task's cost; the figures before and after both changes are
in benchmarks/results/changes.md §19.

A worker whose socket the JVM has closed (its task no longer wanted) ends without PySpark's traceback on the
terminal (:func:`_quiet_on_a_closed_socket`).
"""

from __future__ import annotations

import gc
import importlib
import socket
import sys
from collections.abc import Callable

from pyspark import daemon

PRELOADED = ("pandas", "pyarrow", "kit.events", "kit.dataset", "kit.kafka", "kit.sink")
"""What a worker of the kit's jobs imports anyway (the engines' workload modules import these)."""


def warm() -> None:
    """Do once, here, what a worker's first dead-letter write did in every forked worker.

    A task that meets malformed records writes them with :func:`kit.sink.write_keyed`: an Arrow table named
    after its content, written as Parquet. The first Parquet write in a process imports more modules and sets up
    pyarrow's writer: CPU in each new worker (benchmarks/results/changes.md §19), and Spark forks new workers
    all through a run. Nothing is written: the file's bytes stay in memory.
    """
    import pyarrow as pa

    from kit.sink import encode_table

    rows = pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32()), "offset": [0], "reason": ["r"]})
    rows.to_pydict()
    encode_table(-1, rows)


def _quiet_on_a_closed_socket(
    worker: Callable[[socket.socket, bool], int],
) -> Callable[[socket.socket, bool], int]:
    """``worker`` ending quietly when the JVM has closed the task's socket (``BrokenPipeError``).

    The JVM closes it when it no longer wants the task's output: a task interrupted by a stopping query or
    StreamingContext, a ``take`` that has its rows. PySpark's daemon then kills the worker on the failed flush
    (``spark.python.daemon.killWorkerOnFlushFailure``) and prints the traceback to the executor's stderr, which
    on a local master is the terminal: ``dmk bench`` showed 28 of them. The worker still ends, and is not reused.
    """

    def run(sock: socket.socket, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except BrokenPipeError:
            return 1  # non-zero: the daemon closes this worker instead of reusing it

    return run


if __name__ == "__main__":
    daemon.worker = _quiet_on_a_closed_socket(daemon.worker)  # type: ignore[assignment]  # manager calls it by name
    for name in PRELOADED:
        importlib.import_module(name)
    # The worker module (``pyspark.worker``) too: PySpark imports it in each forked worker, and Spark puts
    # pyspark.zip first on the workers' path, so every fork compiled it from the zip's sources (zipimport keeps
    # no bytecode), in each worker. It starts no thread when imported.
    if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark"):
        importlib.import_module(sys.argv[1])
    warm()
    gc.freeze()
    daemon.manager()
