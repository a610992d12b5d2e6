"""One engine's driver process for ``dmk compare``: run the jobs of a run config until told to drain.

    python -m compare.driver RUN_CONFIG.json

The harness (:mod:`compare.run`) writes the config, starts this process, waits for ``<out>/control/ready``,
replays the dataset, then writes ``<out>/control/drain.json`` (the replay's end offsets per topic). The
driver waits until its jobs have processed everything up to there (and the batches that apply the last
watermark), writes ``<out>/control/done.json`` and exits 0. SIGTERM stops it at once (exit 143).

A driver started again with the same config resumes from its checkpoint (legacy:
:func:`legacy.kafka.get_or_create`; modern: each query's ``checkpointLocation``): that is how
``--kill-driver`` restarts it after a SIGKILL. A legacy receiver stream cannot be restored: it starts a new
context where its consumer group's committed offsets say (see :mod:`legacy.runner`).

Metrics: legacy batches go to ``<out>/metrics/batches.jsonl`` (a StreamingListener: batch time, records,
scheduling and processing delay); modern progress to ``<out>/progress/<query>.jsonl``. A failure is written
to ``<out>/control/failed.json`` (the error's type and message) before the process exits 1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from dataclasses import fields
from pathlib import Path
from typing import Any

from kit.dataset import DatasetSpec

CONTROL = "control"
OFFSET_STORE_ENV = "DMK_LEGACY_OFFSET_STORE"
"""Where the legacy driver's offset store is (``--offset-store``), passed outside the config file."""
READY, DRAIN, DONE, FAILED = "ready.json", "drain.json", "done.json", "failed.json"


class _Stop(Exception):
    """SIGTERM arrived."""


def write_json(path: Path, payload: object) -> None:
    """Write ``payload`` to ``path`` atomically (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(payload), encoding="utf-8")
    temp.replace(path)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _wait_for_drain(out: Path) -> dict[str, dict[int, int]]:
    path = out / CONTROL / DRAIN
    while not path.exists():
        time.sleep(0.1)
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in raw["end_offsets"].items()}


def dataset_spec(raw: dict) -> DatasetSpec:
    """A :class:`DatasetSpec` from its ``asdict`` form (as in configs and dataset manifests)."""
    return DatasetSpec(**{f.name: raw[f.name] for f in fields(DatasetSpec) if f.name in raw})


def batch_listener(out: Path) -> Any:
    """A DStream StreamingListener appending one JSON line per completed batch to metrics/batches.jsonl."""
    from pyspark.streaming.listener import StreamingListener

    target = out / "metrics" / "batches.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)

    def option(value: int) -> int | None:  # Spark's Java API gives -1 for "not known"
        return int(value) if value >= 0 else None

    class Batches(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - Spark's names
            info = batchCompleted.batchInfo()
            row = {
                "batch_time_ms": int(info.batchTime().milliseconds()),
                "records": int(info.numRecords()),
                "scheduling_delay_ms": option(info.schedulingDelay()),
                "processing_delay_ms": option(info.processingDelay()),
                "total_delay_ms": option(info.totalDelay()),
                "completed_ms": _now_ms(),
            }
            with open(target, "a", encoding="utf-8") as log:
                log.write(json.dumps(row) + "\n")

    return Batches()


def _run_legacy(config: dict, out: Path, dataset: DatasetSpec, jobs: tuple) -> None:
    from kit.spark import spark_context
    from legacy.kafka import get_or_create
    from legacy.rate import MAX_RATE_PER_PARTITION
    from legacy.runner import (
        LegacyRunConfig,
        attach_offset_store,
        await_progress,
        create_context,
        export_outputs,
        open_offset_store,
    )

    stream = config.get("stream", "direct")
    cap = config.get("max_rate_per_partition")
    conf: dict[str, object] = {MAX_RATE_PER_PARTITION: cap} if cap else {}
    if stream == "receiver" and cap:
        # One receiver reads every partition of every topic: the same cap in records/s for the whole stream.
        conf["spark.streaming.receiver.maxRate"] = cap * config["partitions"] * len(config["topics"])
    if config.get("write_ahead_log"):
        conf["spark.streaming.receiver.writeAheadLog.enable"] = "true"
    sc = spark_context(f"dmk-compare-legacy-{config['workload_name']}", config.get("master"), conf)
    checkpoint = config["checkpoint_dir"]
    if stream == "receiver":
        # A receiver context cannot be restored (its bridge lived in the dead driver): each start is fresh.
        checkpoint = str(Path(checkpoint) / f"start-{time.time_ns()}")
    run_config = LegacyRunConfig(
        config["bootstrap_servers"], config["topics"], str(out), checkpoint, dataset, jobs,
        batch_seconds=config.get("batch_seconds", 1.0), kafka_params=config.get("kafka_params", {}),
        # The store's address may hold a password: the harness passes it in the environment, not the file.
        offsets=config.get("offsets", "checkpoint"), offset_store=os.environ.get(OFFSET_STORE_ENV), stream=stream,
        job_name=config.get("job_name"),
    )
    store = open_offset_store(run_config)
    try:
        attach_offset_store(run_config, store)
        if stream == "receiver":
            ssc = create_context(sc, run_config, store)
        else:
            ssc = get_or_create(checkpoint, lambda: create_context(sc, run_config, store), fingerprint=config["fingerprint"])
        ssc.addStreamingListener(batch_listener(out))
        ssc.start()
        try:
            write_json(out / CONTROL / READY, {"started_ms": _now_ms()})
            ends = _wait_for_drain(out)
            # A failed output operation fails the driver (Spark would go on with the next batch).
            await_progress(out, ends, timeout_s=config.get("timeout_s", 600),
                           check=lambda: ssc.awaitTerminationOrTimeout(0.001))
        finally:
            ssc.stop(stopSparkContext=True, stopGraceFully=False)
            if store is not None:
                export_outputs(run_config, store)  # what was committed, also when the run failed
    finally:
        if store is not None:
            store.close()


def _run_modern(config: dict, out: Path, dataset: DatasetSpec, jobs: tuple) -> None:
    from kit.spark import spark_session
    from modern.runner import ModernRun, ModernRunConfig

    spark = spark_session(f"dmk-compare-modern-{config['workload_name']}", config.get("master"))
    run_config = ModernRunConfig(
        config["bootstrap_servers"], config["topics"], str(out), config["checkpoint_dir"], dataset, jobs,
        trigger=config.get("trigger", "0 seconds"), source_options=config.get("source_options", {}),
        initial_state=config.get("initial_state", {}),
    )
    run = ModernRun(spark, run_config).start()
    try:
        write_json(out / CONTROL / READY, {"started_ms": _now_ms()})
        run.await_offsets(_wait_for_drain(out), timeout_s=config.get("timeout_s", 600))
    finally:
        run.stop()
        spark.stop()


def run(config: dict) -> int:
    """Run one engine as ``config`` says; returns the exit code."""
    out = Path(config["out_dir"])
    for path in config.get("sys_path", []):
        if path not in sys.path:
            sys.path.insert(0, path)

    def stop(*_: object) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    jobs = tuple(tuple(job) for job in config["jobs"])
    try:
        (_run_legacy if config["engine"] == "legacy" else _run_modern)(config, out, dataset_spec(config["dataset"]), jobs)
    except _Stop:
        return 143
    except BaseException as err:  # reported to the harness, which shows it as the run's error
        write_json(out / CONTROL / FAILED, {"error": type(err).__name__, "message": str(err).strip()[:4000]})
        traceback.print_exc()
        return 1
    write_json(out / CONTROL / DONE, {"done_ms": _now_ms()})
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m compare.driver RUN_CONFIG.json", file=sys.stderr)
        return 2
    return run(json.loads(Path(argv[0]).read_text(encoding="utf-8")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
