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

Spark puts the ``pyspark.zip`` and ``py4j-*-src.zip`` it ships, and the ``spark-core`` jar, first on its Python
workers' path. Where they are those of the pip-installed PySpark the daemon runs from (``<site-packages>/pyspark/``;
the zips hold the same files, byte for byte, and the jar no Python), the daemon takes them off its path before it
imports anything of PySpark's (:func:`prefer_installed_pyspark`). They cost twice: zipimport keeps no bytecode, so
each process compiled every PySpark module it imported from source; and each archive on the path makes
``importlib.invalidate_caches()`` re-read its directory once per package imported from it, which PySpark's worker
calls on the first task of every forked worker (``setup_spark_files`` adds the task's files directory to the path):
53-105 ms a worker. A session's first Python job took 1.9-2.1 s with them, 1.1-1.2 s without
(benchmarks/results/changes.md §36).

A worker whose socket the JVM has closed (its task no longer wanted) ends without PySpark's traceback on the
terminal (:func:`_quiet_on_a_closed_socket`).
"""

from __future__ import annotations

import gc
import importlib
import os
import socket
import sys
import zipfile
from collections.abc import Callable


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without the archives Spark adds from a PySpark installation that is itself on ``path``.

    Spark's workers get ``<dir>/pyspark/python/lib/pyspark.zip``, ``py4j-<version>-src.zip`` beside it and the
    ``spark-core`` jar (``SparkContext.jarOfObject``, from when PySpark shipped inside Spark's assembly jar). When
    ``<dir>`` is on ``path`` with PySpark installed in it (``pyspark/__init__.py``), these go: pyspark.zip holds
    that installation's modules, py4j's zip goes when ``<dir>/py4j`` is of the zip's version, and a jar under
    ``<dir>/pyspark/jars`` when it holds no Python file. A Spark distribution's archives (``$SPARK_HOME/python/lib``)
    stay, as does anything else on the path.
    """
    owners: dict[str, str] = {}  # a directory Spark's wheel keeps archives in -> where that PySpark is installed
    for directory in {os.path.realpath(p) for p in path if p and os.path.isdir(p)}:
        if os.path.isfile(os.path.join(directory, "pyspark", "__init__.py")):
            for where in (("python", "lib"), ("jars",)):
                owners[os.path.join(directory, "pyspark", *where)] = directory

    def redundant(entry: str) -> bool:
        root = owners.get(os.path.dirname(os.path.realpath(entry))) if entry else None
        if root is None or not os.path.isfile(entry):
            return False
        name = os.path.basename(entry)
        if name == "pyspark.zip":
            return True
        if name.startswith("py4j-") and name.endswith("-src.zip"):
            return _py4j_version(root) == name[len("py4j-"):-len("-src.zip")]
        if name.endswith(".jar"):
            return not _holds_python(entry)
        return False

    return [p for p in path if not redundant(p)]


def _py4j_version(root: str) -> str | None:
    try:
        with open(os.path.join(root, "py4j", "version.py"), encoding="utf-8") as file:
            text = file.read()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return None


def _holds_python(archive: str) -> bool:
    try:
        with zipfile.ZipFile(archive) as jar:
            return any(name.endswith((".py", ".pyc", ".so")) for name in jar.namelist())
    except (OSError, zipfile.BadZipFile):
        return True  # unreadable here: left for zipimport to judge


if __name__ == "__main__":
    _kept = prefer_installed_pyspark(sys.path)
    for _entry in set(sys.path) - set(_kept):
        sys.path_importer_cache.pop(_entry, None)  # its importer, made when Python started, would be asked again
    sys.path[:] = _kept

from pyspark import daemon  # noqa: E402 - after the path is settled

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
    # The worker module (``pyspark.worker``) too: PySpark imports it in each forked worker (from pyspark.zip, before
    # prefer_installed_pyspark, each fork compiled it from source). It starts no thread when imported.
    if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark"):
        importlib.import_module(sys.argv[1])
    warm()
    gc.freeze()
    daemon.manager()
