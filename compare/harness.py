"""Run paired workloads in-process: replay a dataset live while an engine runs its jobs, then collect.

One run = one engine, one dataset, any number of jobs sharing the replay (a StreamingContext hosts all the
legacy jobs, each modern job is its own query). The replay is paced while the engine runs, as production
traffic arrives: batches then cover short, consecutive stretches of the stream, which is what the datasets'
lateness margins assume (see :data:`TEST_DATASET` and docs/kit.md).

Example::

    spec = dataset_spec("messy")
    run = run_engine("modern", (("running_counts", "default"),), spec, generate(spec),
                     bootstrap_servers="127.0.0.1:9092", spark=spark, workdir=Path("runs"))
    workloads.final_result(workloads.get("running_counts"), run.rows("running_counts"))
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compare.engines import get_engine
from compare.inputs import (
    TEST_DATASET,
    batch_records,
    capped,
    common_cap,
    dataset_spec,
    input_shares,
    route_inputs,
)
from kit import workloads
from kit.dataset import DatasetSpec
from kit.engine import LATE_COLUMNS, DriverConfig, RunRecord
from kit.kafka import Kafka
from kit.nexmark import NexmarkSpec
from kit.replay import ReplayResult, ReplaySettings, replay

__all__ = [
    "PARTITIONS",
    "REPLAY_RATE_RPS",
    "TEST_DATASET",
    "EngineOutputs",
    "batch_records",
    "capped",
    "common_cap",
    "dataset_spec",
    "route_inputs",
    "run_engine",
]

# TEST_DATASET (compare.inputs, also dmk compare's default) replayed at twice its event-time rate.
REPLAY_RATE_RPS = 1_000
PARTITIONS = 4


@dataclass
class EngineOutputs:
    """What one engine produced for every job of a run (outputs as :func:`kit.sink.read_batches` frames)."""

    engine: str
    out_dir: Path
    replay: ReplayResult
    jobs: tuple[tuple[str | workloads.WorkloadSpec, str | Callable[..., Any]], ...]

    def record(self) -> RunRecord:
        """What the engine's run wrote, read back (:meth:`kit.engine.Engine.record`)."""
        return get_engine(self.engine).record(self.out_dir)

    def rows(self, workload: str, variant: str = "default") -> pd.DataFrame:
        """The output rows of the job ``(workload, variant)``, every batch's."""
        return self.record().outputs(workloads.job_id(workload, variant))

    def late(self, workload: str, variant: str = "default") -> pd.DataFrame:
        """The records the job ``(workload, variant)`` dropped as too late (empty, with the columns, if none named)."""
        rows = self.record().late_records(workloads.job_id(workload, variant))
        return rows if rows is not None else pd.DataFrame(columns=list(LATE_COLUMNS))

    def dead_letters(self) -> pd.DataFrame:
        """The malformed records of every input, the dead letters (empty, with the columns, if none)."""
        return self.record().dead_letters()

    def seqs_of(self, located: pd.DataFrame) -> pd.Series:
        """Dataset ``seq`` of rows carrying ``topic, partition, offset`` (via the replay log)."""
        log = self.replay.log.set_index(["topic", "partition", "offset"])["seq"]
        keys = list(zip(located["topic"], located["partition"].astype(int), located["offset"].astype(int), strict=True))
        return pd.Series(log.loc[keys].to_numpy() if keys else [], dtype="int64")


def run_engine(
    engine: str,
    jobs: tuple[tuple[str | workloads.WorkloadSpec, str | Callable[..., Any]], ...],
    spec: DatasetSpec | NexmarkSpec,
    frame: pd.DataFrame,
    *,
    bootstrap_servers: str,
    spark: object,
    workdir: Path,
    timeout_s: float = 600,
    partitions: int = PARTITIONS,
    kafka_security: Mapping[str, str] | None = None,
) -> EngineOutputs:
    """Replay ``frame`` (routed to each job's inputs) while ``engine`` runs ``jobs``; wait for all output.

    ``jobs`` are ``(workload, variant)`` pairs as :func:`kit.workloads.resolve` takes them: a workload name or
    spec, and a variant name or your own builder function. ``partitions``: of each input topic (default 4).
    ``kafka_security``: Kafka client settings in the Java client's names (TLS/SASL) for the engine's sources
    (default none); the run's own clients take :func:`kit.kafka.process_settings`.
    """
    tag = f"{engine}-{uuid.uuid4().hex[:6]}"
    routed = route_inputs([w if isinstance(w, workloads.WorkloadSpec) else workloads.get(w) for w, _ in jobs], frame)
    chosen = get_engine(engine)
    shares = input_shares(routed, len(frame), batch_records(spec), partitions,  # by input name, before renaming
                          by_clock=chosen.batches_by_clock)
    topics = {name: f"{tag}-{name}" for name in sorted(set(routed["topic"]))}
    routed["topic"] = routed["topic"].map(topics)
    inputs = sorted(topics)
    with Kafka(bootstrap_servers) as kafka:
        for topic in topics.values():
            kafka.create_topic(topic, partitions)
    out_dir, checkpoint = workdir / engine, workdir / f"{engine}-checkpoint"
    # Paced in dataset records: a dataset record copied to two inputs (the join's and "events") costs one
    # unit of event time, so the stream advances at the same event-time speed whatever the jobs.
    copies = len(routed) / max(len(frame), 1)
    # Even partitions (seq % 4), not keyed ones: with bursty per-user traffic, keyed partitions drift apart
    # in event time whenever an engine works off a backlog under a record limit, and the watermark then
    # drops on-time records (a real trap, shown in docs/playbook.md; not what these runs compare).
    settings = ReplaySettings(
        topic=topics[inputs[0]], partitions=partitions, rate_rps=REPLAY_RATE_RPS * copies, partition_by="seq"
    )
    config = capped(chosen, DriverConfig(
        engine=engine, bootstrap_servers=bootstrap_servers, topics=topics, out_dir=str(out_dir),
        checkpoint_dir=str(checkpoint), dataset=spec, jobs=jobs, timeout_s=timeout_s, partitions=partitions,
        kafka_security=dict(kafka_security or {}),
    ), spec, shares)
    # The first batches' worth is produced and acknowledged before the engine starts, so its first batch is cut at
    # its caps on every partition. Cut while the producer had flushed one partition and not the others, a first
    # batch took 29 records of one partition; an engine at its caps reads the same number from each partition
    # every batch, as Spark's maxRatePerPartition does, so that partition stayed 29 offsets (115 dataset records)
    # ahead for the whole run, and the legacy ysb job read the boundary block's later records a batch before the
    # earlier ones: 4 more late drops than the oracle (benchmarks/results/changes.md §31).
    head = routed[routed["seq"] < routed["seq"].min() + _HEAD_BATCHES * batch_records(spec)]
    first = replay(head, bootstrap_servers, settings)
    run = chosen.start(spark, config)
    try:
        rest = replay(routed.iloc[len(head):], bootstrap_servers, settings) if len(head) < len(routed) else None
        result = _joined(first, rest)
        run.await_offsets(result.topic_end_offsets, timeout_s=timeout_s)
    finally:
        run.stop()
    return EngineOutputs(engine, out_dir, result, jobs)


# Batches' worth of records produced before an engine starts (run_engine): its first batch at the caps, and a lead
# that keeps every later cut at them while the replay keeps pace.
_HEAD_BATCHES = 2


def _joined(first: ReplayResult, rest: ReplayResult | None) -> ReplayResult:
    """One replay's result from the results of its two parts, ``first`` produced before ``rest``.

    Its ``seconds`` are the two parts' own: the engine's start between them is left out.
    """
    if rest is None:
        return first
    # A replay reads every partition's end offset of each topic it wrote, after its last acknowledgement.
    ends = {**first.topic_end_offsets, **rest.topic_end_offsets}
    return ReplayResult(
        topic=first.topic, records=first.records + rest.records, seconds=first.seconds + rest.seconds,
        end_offsets=ends.get(first.topic, {}), log=pd.concat([first.log, rest.log], ignore_index=True),
        topic_end_offsets=ends,
    )
