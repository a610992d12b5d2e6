"""Where a stopped DStream job left off, for ``dmk cutover``: :class:`kit.engine.Handover` over legacy's readers.

The job's position is read from wherever it kept it: its checkpoint (:mod:`legacy.inspect`), or an offset store
(:mod:`legacy.offsets`); its outputs in the kit's layout say which records each completed batch read
(:mod:`legacy.runner`). ``compare.cutover`` reaches this through the engine (``LEGACY.handover``).

Example::

    offsets, pending = LEGACY_HANDOVER.checkpoint_position("ckpt/legacy")
    LEGACY_HANDOVER.stored_offsets("sqlite", "offsets.sqlite", "job", ["events"], "127.0.0.1:9092")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kit.errors import ConfigError

__all__ = ["LEGACY_HANDOVER", "LegacyHandover"]


class LegacyHandover:
    """A DStream job's last position and completed batches, read from its checkpoint, offset store and outputs."""

    sources: tuple[str, ...] = ("checkpoint", "kafka", "zookeeper", "sqlite", "postgresql")
    """Where a DStream job can have kept its position (the offset modes of ``dmk compare --legacy-mode``)."""
    transactional: tuple[str, ...] = ("sqlite", "postgresql")
    """The stores that commit a batch's offsets in one transaction with its outputs (an exact position)."""

    def checkpoint_position(self, checkpoint: str) -> tuple[dict[tuple[str, int], int], tuple[int, ...]]:
        """``(offsets, pending)`` of the checkpoint's last completed batch.

        ``offsets``: (topic, partition) → where the next batch starts; ``pending``: the times of the batches the
        job started and had not completed that hold records (or may: their records are not known).

        Raises:
            ConfigError: the checkpoint has no direct Kafka stream of the kit's, so it holds no offsets.
            CheckpointError and the checkpoint reader's other errors: as their messages say.
        """
        from legacy.inspect import inspect_legacy_checkpoint, last_completed_position

        found = inspect_legacy_checkpoint(checkpoint)
        if not found.direct_streams:
            msg = (
                f"the checkpoint {checkpoint} has no direct Kafka stream of the kit's (legacy.kafka), so it holds no "
                "offsets; a receiver job keeps its position in its consumer group: use the kafka source"
            )
            raise ConfigError(msg, field="checkpoint", expected="a checkpoint with direct streams", actual=checkpoint)
        positions = last_completed_position(found)
        offsets = {(t, int(p)): int(o) for pos in positions for t, parts in pos.offsets.items()
                   for p, o in parts.items()}
        pending = tuple(sorted({t for pos in positions for t in (*pos.pending_with_records, *pos.pending_unknown)}))
        return offsets, pending

    def checkpoint_state(self, checkpoint: str) -> tuple[int, list[tuple[Any, Any]]]:
        """``(batch time, (key, state) pairs)``: the job's ``updateStateByKey`` state at its last completed batch.

        Read as Spark restores it: the state stream's RDD checkpoint file that the checkpoint records for that
        batch (``DStreamCheckpointData``), through ``SparkContext.checkpointFile`` and PySpark's serializer. Spark
        checkpoints a state RDD only every ``checkpoint_ms`` (10 s by default: the batches since are recomputed
        on restart, which needs the job's code), so the state at the last completed batch is there only when
        that batch is on the interval; a job that checkpoints its state stream every batch
        (``state.checkpoint(batch_interval)``) always has it.

        Raises:
            ConfigError: no state stream, several, or none of its files at the last completed batch (the fix:
                checkpoint the state stream every batch, or carry the state from the job's output).
        """
        from pyspark import SparkContext

        from legacy.inspect import inspect_legacy_checkpoint, state_at_last_batch

        last, path = state_at_last_batch(inspect_legacy_checkpoint(checkpoint))
        sc = SparkContext.getOrCreate()  # the one the checkpoint was read with
        # The state RDD's rows are pickled (key, state) pairs, written with the job's serializer (PySpark's default).
        pairs = sc._checkpointFile(path, sc.serializer).collect()  # type: ignore[arg-type]
        return last, [tuple(pair) for pair in pairs]

    def stored_offsets(
        self, kind: str, where: str, consumer: str, topics: Sequence[str], bootstrap_servers: str | None,
    ) -> dict[tuple[str, int], int]:
        """(topic, partition) → offset that the store ``kind`` at ``where`` holds for ``consumer``.

        The store is laid out as :mod:`legacy.runner` keeps it (:func:`legacy.offsets.open_store`).
        """
        from legacy.offsets import open_store

        with open_store(kind, where, consumer, bootstrap_servers=bootstrap_servers) as store:
            return {(tp[0], tp[1]): offset for tp, offset in store.load(list(topics)).items()}

    def export_committed(self, kind: str, where: str, consumer: str, out: Path) -> None:
        """Write the outputs a transactional store committed for ``consumer`` as batch files under ``out``.

        Those outputs live in the database until the driver exports them on stop, which a killed driver never
        did (:func:`legacy.runner.export_committed_outputs`).
        """
        from legacy.offsets import open_store
        from legacy.runner import export_committed_outputs

        with open_store(kind, where, consumer) as store:
            export_committed_outputs(store, out)

    def completed_batches(self, out: Path) -> pd.DataFrame:
        """The progress rows of the outputs under ``out`` (:func:`legacy.runner.read_progress`).

        Columns ``batch, emitted_at, topic, partition, from_offset, until_offset``; empty when there are none.
        """
        from legacy.runner import read_progress

        return read_progress(out)


LEGACY_HANDOVER = LegacyHandover()
"""The DStream engine's handover (``LEGACY.handover``)."""
