"""One engine's driver process for ``dmk compare``: run the jobs of a run config until told to drain.

    python -m compare.driver RUN_CONFIG.json

The harness writes the config, starts this process, waits for ``<out>/control/ready``, replays the dataset,
then writes ``<out>/control/drain.json`` (the replay's end offsets per topic). The driver waits until its
jobs have processed everything up to there (and the batches that apply the last watermark), writes
``<out>/control/done.json`` and exits 0. On SIGTERM it stops at once. A driver started again with the same
config resumes from its checkpoint (legacy: :func:`legacy.kafka.get_or_create`; modern: each query's
``checkpointLocation``): that is how ``--kill-driver`` restarts it.

Metrics: legacy batches go to ``<out>/metrics/batches.jsonl`` (a StreamingListener: batch time, records,
scheduling and processing delay); modern progress to ``<out>/progress/<query>.jsonl``.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from kit.dataset import DatasetSpec

CONTROL = "control"


def _write_json(path: Path, payload: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(payload), encoding="utf-8")
    temp.replace(path)


def _wait_for_drain(out: Path, stop: list[bool]) -> dict[str, dict[int, int]] | None:
    path = out / CONTROL / "drain.json"
    while not path.exists():
        if stop:
            return None
        time.sleep(0.1)
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in raw["end_offsets"].items()}


def _batch_listener(out: Path) -> Any:
    from pyspark.streaming.listener import StreamingListener

    target = out / "metrics" / "batches.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)

    class Batches(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803 - Spark's names
            info = batchCompleted.batchInfo()
            row = {
                "batch_time_ms": info.batchTime().milliseconds(),
                "records": info.numRecords(),
                "scheduling_delay_ms": info.schedulingDelay().getOrElse(None) if info.schedulingDelay().isDefined() else None,
                "processing_delay_ms": info.processingDelay().get() if info.processingDelay().isDefined() else None,
                "completed_ms": int(time.time() * 1000),
            }
            with open(target, "a", encoding="utf-8") as log:
                log.write(json.dumps(row) + "\n")

    return Batches()


def run(config: dict) -> int:
    from kit.spark import spark_session

    out = Path(config["out_dir"])
    dataset = DatasetSpec(**{f.name: config["dataset"][f.name] for f in fields(DatasetSpec) if f.name in config["dataset"]})
    jobs = tuple(tuple(j) for j in config["jobs"])
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    spark = spark_session(f"dmk-{config['engine']}", master=config.get("master"))
    if config["engine"] == "legacy":
        from legacy.kafka import get_or_create
        from legacy.runner import LegacyRunConfig, await_progress, create_context

        run_config = LegacyRunConfig(
            config["bootstrap_servers"], config["topics"], str(out), config["checkpoint_dir"], dataset, jobs,
            batch_seconds=config.get("batch_seconds", 1.0), kafka_params=config.get("kafka_params", {}),
        )
        ssc = get_or_create(
            config["checkpoint_dir"], lambda: create_context(spark.sparkContext, run_config),
            fingerprint=config.get("fingerprint", "dmk-compare"),
        )
        ssc.addStreamingListener(_batch_listener(out))
        ssc.start()
        _write_json(out / CONTROL / "ready", {"started_ms": int(time.time() * 1000)})
        try:
            ends = _wait_for_drain(out, stop)
            if ends is not None:
                await_progress(out, ends, timeout_s=config.get("timeout_s", 600), check=lambda: None)
                _write_json(out / CONTROL / "done.json", {"done_ms": int(time.time() * 1000)})
        finally:
            ssc.stop(stopSparkContext=True, stopGraceFully=False)
        return 0
    from modern.runner import ModernRun, ModernRunConfig

    run_config = ModernRunConfig(
        config["bootstrap_servers"], config["topics"], str(out), config["checkpoint_dir"], dataset, jobs,
        trigger=config.get("trigger", "0 seconds"), source_options=config.get("source_options", {}),
    )
    modern = ModernRun(spark, run_config).start()
    _write_json(out / CONTROL / "ready", {"started_ms": int(time.time() * 1000)})
    try:
        ends = _wait_for_drain(out, stop)
        if ends is not None:
            modern.await_offsets(ends, timeout_s=config.get("timeout_s", 600))
            _write_json(out / CONTROL / "done.json", {"done_ms": int(time.time() * 1000)})
    finally:
        modern.stop()
        spark.stop()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m compare.driver RUN_CONFIG.json", file=sys.stderr)
        return 2
    return run(json.loads(Path(argv[0]).read_text(encoding="utf-8")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
