"""Run legacy workloads: build their DStreams over direct Kafka streams, write outputs, tell when done.

The runner owns everything a builder must not do: the StreamingContext and its checkpoint, the Kafka
streams, the idempotent sinks, start, stop and waiting. Output layout under ``out_dir``::

    <job>/                    the job's rows (kit.sink batch files; batch = batch time in ms)
    <job>.late/               events the job dropped as too late (event_id, topic, partition, offset, detail)
    dead_letters.<input>/     malformed records of an input: topic, partition, offset, reason
    progress.<input>/         per batch: topic, partition, from_offset, until_offset (written last)

``<job>`` is the workload name, or ``<workload>.<variant>`` for a non-default variant. Every output is keyed
by batch time, so batches a restarted driver regenerates from its checkpoint replace their earlier files.

Example::

    config = LegacyRunConfig(bootstrap_servers="127.0.0.1:9092", topics={"events": "events"},
                             out_dir="out", checkpoint_dir="ckpt", dataset=spec,
                             jobs=(("running_counts", "default"),))
    ssc = create_context(sc, config)
    ssc.start()
    await_progress(config.out_dir, {"events": {0: 2500, 1: 2500}}, timeout_s=120)
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kit import workloads
from kit.dataset import DatasetSpec
from kit.errors import RunTimeout
from kit.sink import read_batches, write_batch
from kit.workloads import job_id
from legacy.kafka import KafkaUtils, OffsetRange
from legacy.workloads import Source

__all__ = ["LegacyRunConfig", "RunTimeout", "await_progress", "create_context", "job_id", "read_progress"]


@dataclass(frozen=True)
class LegacyRunConfig:
    """One legacy run: which jobs, over which topics, writing where.

    Attributes:
        bootstrap_servers: Kafka to read.
        topics: input name → topic.
        out_dir: output root (see the module docstring).
        checkpoint_dir: the StreamingContext's checkpoint directory.
        dataset: the spec of the replayed dataset.
        jobs: ``(workload, variant)`` pairs; all share one StreamingContext and one read of each topic.
        batch_seconds: batch interval. Default 1.0.
        kafka_params: extra ``kafkaParams`` for ``createDirectStream``. Default: none.
    """

    bootstrap_servers: str
    topics: Mapping[str, str]
    out_dir: str
    checkpoint_dir: str
    dataset: DatasetSpec
    jobs: tuple[tuple[str, str], ...]
    batch_seconds: float = 1.0
    kafka_params: Mapping[str, Any] = field(default_factory=dict)


def _record(message: Any) -> tuple:
    return (message.topic, message.partition, message.offset, message.timestamp, message.message)


def _raw_bytes(value: bytes | None) -> bytes | None:
    return value


def _ms(time_: Any) -> int:
    return round(time_.timestamp() * 1000)


def _batch_writer(directory: Path, columns: tuple[str, ...]) -> Any:
    """A ``foreachRDD`` function writing a DStream's rows as one batch file per batch time.

    A plain function, not a callable object: PySpark's ``foreachRDD`` inspects ``func.__code__``.
    """
    target, names = str(directory), list(columns)

    def write(time_: Any, rdd: Any) -> None:
        write_batch(target, _ms(time_), pd.DataFrame(rdd.collect(), columns=names))

    return write


def _late_row(item: Any) -> tuple:
    event, detail = item if isinstance(item, tuple) else (item, None)
    return (event["event_id"], event["topic"], event["partition"], event["offset"], detail)


def _progress_writer(directory: Path) -> Any:
    target = str(directory)
    columns = ["topic", "partition", "from_offset", "until_offset"]

    def write(time_: Any, rdd: Any) -> None:
        ranges: list[OffsetRange] = rdd.offsetRanges()
        rows = [(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in ranges]
        write_batch(target, _ms(time_), pd.DataFrame(rows, columns=columns))

    return write


def create_context(sc: Any, config: LegacyRunConfig) -> Any:
    """A StreamingContext with every job of ``config`` attached (usable as ``get_or_create``'s factory).

    Raises:
        ConfigError: unknown workload or variant, or a job needing an input ``config.topics`` lacks.
    """
    from pyspark.streaming import StreamingContext

    out = Path(config.out_dir)
    ssc = StreamingContext(sc, config.batch_seconds)
    ssc.checkpoint(str(config.checkpoint_dir))
    params = {"metadata.broker.list": config.bootstrap_servers, "auto.offset.reset": "smallest", **config.kafka_params}
    raw = {
        name: KafkaUtils.createDirectStream(
            ssc, [topic], params, valueDecoder=_raw_bytes, messageHandler=_record
        )
        for name, topic in config.topics.items()
    }
    source = Source(raw, config.dataset)
    for workload, variant in config.jobs:
        job = workloads.resolve("legacy", workload, variant)
        job.spec.check_inputs(config.topics)
        late_before = len(source.late)
        rows = job.build(ssc, source)
        name = job.name
        rows.foreachRDD(_batch_writer(out / name, job.spec.columns))
        reported = source.late[late_before:]
        if reported:
            # One writer per job: its batch files are per batch time, so two writers would overwrite.
            late = ssc.union(*reported)
            late.map(_late_row).foreachRDD(
                _batch_writer(out / f"{name}.late", ("event_id", "topic", "partition", "offset", "detail"))
            )
    for name, dead in source.dead_letters.items():
        dead.foreachRDD(_batch_writer(out / f"dead_letters.{name}", ("topic", "partition", "offset", "reason")))
    # Registered last: output operations of a batch run in order, so a progress file means the batch's
    # outputs are all written.
    for name, stream in raw.items():
        stream.foreachRDD(_progress_writer(out / f"progress.{name}"))
    return ssc


def read_progress(out_dir: str | Path) -> pd.DataFrame:
    """The progress rows of a run: ``batch, emitted_at, topic, partition, from_offset, until_offset``."""
    frames = [read_batches(d) for d in sorted(Path(out_dir).glob("progress.*"))]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def await_progress(
    out_dir: str | Path,
    end_offsets: Mapping[str, Mapping[int, int]],
    *,
    timeout_s: float,
    extra_batches: int = 2,
    poll_s: float = 0.2,
    check: Any = None,
) -> int:
    """Wait until the run has processed every topic up to ``end_offsets``, plus ``extra_batches`` batches.

    The extra batches let the event-time jobs see the watermark the last records set (they close their last
    windows one batch later, exactly as a Structured Streaming no-data batch does).

    Args:
        out_dir: the run's output root.
        end_offsets: topic → partition → end offset (from the replay).
        timeout_s: how long to wait.
        extra_batches: completed batches required after the one reaching the end offsets.
        poll_s: polling interval.
        check: optional callable run every poll (e.g. to raise if the driver died).

    Returns:
        The batch time (ms) of the last batch waited for.

    Raises:
        RunTimeout: the offsets (or the extra batches) were not reached in time; says where it was.
    """
    deadline = time.monotonic() + timeout_s
    reached: dict = {}
    while True:
        if check is not None:
            check()
        progress = read_progress(out_dir)
        if not progress.empty:
            reached = {
                (t, int(p)): int(u) for (t, p), u in progress.groupby(["topic", "partition"])["until_offset"].max().items()
            }
            done = [
                progress.loc[(progress["topic"] == t) & (progress["partition"] == p) & (progress["until_offset"] >= end), "batch"].min()
                for t, parts in end_offsets.items()
                for p, end in parts.items()
            ]
            if done and not any(pd.isna(d) for d in done):
                at = max(int(d) for d in done)
                later = sorted(b for b in progress["batch"].unique() if b > at)
                if len(later) >= extra_batches:
                    return int(later[extra_batches - 1]) if extra_batches else at
        if time.monotonic() > deadline:
            expected = {(t, p): e for t, parts in end_offsets.items() for p, e in parts.items()}
            raise RunTimeout(
                f"legacy run did not finish within {timeout_s:.0f} s: reached offsets {reached}, expected "
                f"{expected} plus {extra_batches} more batch(es). Check the driver log; raise the timeout for "
                "larger datasets.",
                reached=reached,
                expected=expected,
            )
        time.sleep(poll_s)
