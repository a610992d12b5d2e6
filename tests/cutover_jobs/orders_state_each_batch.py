"""examples/orders/legacy_job.py, run unmodified, with its state stream checkpointed every batch.

    python orders_state_each_batch.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT_DIR

Spark checkpoints an ``updateStateByKey`` stream's RDDs every 10 s by default; a team that wants its checkpoint
to hold the state of every batch adds ``state.checkpoint(batch_interval)`` after its ``updateStateByKey``. This
wrapper adds exactly that call (the job's interval is 1 s) and runs the job as its own ``__main__``, so that
``dmk cutover --state-from CHECKPOINT`` can read the state at any batch (tests/test_compare_jobs.py).
"""

import runpy
from pathlib import Path

from pyspark.streaming import DStream

_update_state_by_key = DStream.updateStateByKey


def _checkpointed_every_batch(self, *args, **kwargs):
    state = _update_state_by_key(self, *args, **kwargs)
    state.checkpoint(1)
    return state


DStream.updateStateByKey = _checkpointed_every_batch
runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "orders" / "legacy_job.py"), run_name="__main__")
