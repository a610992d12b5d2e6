"""PySpark's Python worker daemon, with the modules every kit task needs imported before it forks workers.

Spark starts one daemon per executor (``python -m pyspark.daemon``) and forks a worker from it whenever a
task needs one and none is idle: a stage with several Python RDDs holds several workers per task, and more
are forked as batches overlap. Each fork imported pandas, pyarrow and the kit's modules again when it
unpickled its first function: 0.5 to 1 s of CPU per worker, on the same cores as the tasks (py-spy of a legacy
``running_counts`` run: two thirds of the Python workers' CPU went to these imports). Imported here, once,
they are in every forked worker already.

:func:`kit.spark.kit_settings` sets ``spark.python.daemon.module`` to this module for ``local`` masters
only: a cluster's executors run the copy of the kit the driver ships them (:func:`kit.spark.ship_kit`), which
a daemon importing the installed kit first would shadow.
"""

from __future__ import annotations

import importlib

from pyspark import daemon

PRELOADED = ("pandas", "pyarrow", "kit.events", "kit.dataset", "kit.kafka", "kit.sink")
"""What a worker of the kit's jobs imports anyway (the engines' workload modules import these)."""


if __name__ == "__main__":
    for name in PRELOADED:
        importlib.import_module(name)
    daemon.manager()
