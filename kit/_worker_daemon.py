"""PySpark's Python worker daemon, with the modules every kit task needs imported before it forks workers.

Spark starts one daemon per executor (``python -m pyspark.daemon``) and forks a worker from it whenever a
task needs one and none is idle: a stage with several Python RDDs holds several workers per task, and more
are forked as batches overlap. Each fork imported pandas, pyarrow and the kit's modules again when it
unpickled its first function: 0.5 to 1 s of CPU per worker, on the same cores as the tasks (py-spy of a legacy
``running_counts`` run: two thirds of the Python workers' CPU went to these imports). Imported here, once,
they are in every forked worker already. So is PySpark's worker module, which PySpark imports after the fork.

The daemon then freezes its objects out of the garbage collector (``gc.freeze()``, CPython's advice for
servers that fork). PySpark's daemon runs a full ``gc.collect()`` in a reused worker after every task, and
each collection walked the ~93,000 objects of these imports: 48 ms of CPU per task, the largest part of a
trivial Python task's cost here. Frozen, they are never walked again (and their pages stay shared with the
daemon). ``python benchmarks/python_task_cost.py --rounds 5`` on ``local[2]``: a 64-task Python job took
1.7-2.3 s before and 0.29-0.48 s after, an 8-task one 0.33-0.41 s and 0.09-0.19 s.
"""

from __future__ import annotations

import gc
import importlib
import sys

from pyspark import daemon

PRELOADED = ("pandas", "pyarrow", "kit.events", "kit.dataset", "kit.kafka", "kit.sink")
"""What a worker of the kit's jobs imports anyway (the engines' workload modules import these)."""


def warm() -> None:
    """Do once, here, what a worker's first dead-letter write did in every forked worker.

    A task that meets malformed records writes them with :func:`kit.sink.write_keyed`: an Arrow table to pandas,
    ``hash_pandas_object``, ``to_parquet``. Their first call in a process imports more modules (pyarrow's pandas
    compatibility layer, pandas' Arrow extension types, ``concurrent.futures``) and sets up pyarrow's Parquet
    writer: 150-400 ms of CPU in each new worker on this machine (under load), and Spark forks new workers all
    through a run. Nothing is written: the file's bytes stay in memory.
    """
    import pandas as pd
    import pyarrow as pa

    from kit.sink import encode_batch

    rows = pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32()), "offset": [0], "reason": ["r"]})
    frame = rows.to_pandas()
    pd.util.hash_pandas_object(frame, index=False)
    encode_batch(-1, frame)


if __name__ == "__main__":
    for name in PRELOADED:
        importlib.import_module(name)
    # The worker module (``pyspark.worker``) too: PySpark imports it in each forked worker, and Spark puts
    # pyspark.zip first on the workers' path, so every fork compiled it from the zip's sources (zipimport keeps
    # no bytecode): 83-86 ms of CPU per worker here, after the imports above. It starts no thread when imported.
    if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark"):
        importlib.import_module(sys.argv[1])
    warm()
    gc.freeze()
    daemon.manager()
