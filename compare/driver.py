"""One engine's driver process for ``dmk compare``: run the jobs of a driver config until told to drain.

    python -m compare.driver DRIVER_CONFIG.json

The harness (:mod:`compare.supervise`) writes the config (a :class:`kit.engine.DriverConfig`), starts this
process, waits for ``<out>/control/ready.json``, replays the dataset, then writes
``<out>/control/drain.json`` (the replay's end offsets per topic). The driver waits until its jobs have
processed everything up to there (and the batches that apply the last watermark), writes
``<out>/control/done.json`` and exits 0. SIGTERM stops it at once (exit 143).

Before a paced replay the harness also fills warm-up topics with the dataset's first records and names them in
``<out>/control/warmup.json``. The driver's first start then runs the same jobs over them, to their end, into
``<out>/warmup/`` with a checkpoint of their own, before it says it is ready: the JVM's first compilations, the
Python workers, code generation and the state store's first open are paid there, not by the measured replay
(a production job pays them once per deployment, not once per run). ``<out>/control/warmed.json`` records how
long it took; a restarted driver does not warm up again.

Everything engine-specific is the engine's (:mod:`compare.engines`): its Spark session, starting its jobs
(``recover=True``: a driver started again with the same config resumes from its checkpoint, which is how
``--kill-driver`` restarts it after a SIGKILL), and waiting for the end offsets. A failure is written to
``<out>/control/failed.json`` (the error's type and message) before the process exits 1. Every wait has a
deadline, and a driver whose harness died (its parent process changed) stops (:func:`kit.lifeline.exit_with_parent`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compare.engines import get_engine
from kit.engine import DriverConfig, KitEngine, option_items
from kit.errors import RunTimeout
from kit.kafka import java_client_settings, set_process_settings
from kit.layout import CONTROL, DONE, DRAIN, FAILED, READY, WARMED, WARMUP
from kit.lifeline import exit_with_parent
from kit.security import KAFKA_SECURITY_ENV, redact_text, secret_values

__all__ = [
    "CONTROL", "DONE", "DRAIN", "FAILED", "KAFKA_SECURITY_ENV", "OFFSET_STORE_ENV", "READY", "WARMED", "WARMUP",
    "WARMUP_DIR", "main", "read_config", "run", "write_json",
]

OFFSET_STORE_ENV = "DMK_LEGACY_OFFSET_STORE"
"""Where the legacy driver's offset store is (``--offset-store``), passed outside the config file (a DSN may
hold a password; the file holds it redacted)."""
WARMUP_DIR = "warmup"
"""Where the warm-up's outputs go, under the driver's output root (nothing reads them)."""


class _Stop(Exception):
    """SIGTERM arrived, or the harness is gone."""


def write_json(path: Path, payload: object) -> None:
    """Write ``payload`` to ``path`` atomically (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(payload), encoding="utf-8")
    temp.replace(path)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _wait_for_drain(out: Path, timeout_s: float, parent: int) -> dict[str, dict[int, int]]:
    """The end offsets the harness writes once its replay is done.

    Raises:
        RunTimeout: no drain file within ``timeout_s``.
        _Stop: the harness (the parent process) died.
    """
    path = out / CONTROL / DRAIN
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if os.getppid() != parent:
            raise _Stop
        if time.monotonic() > deadline:
            msg = (f"the harness did not write {path} within {timeout_s:.0f} s of the driver being ready; a replay "
                   "that long needs a larger drain_timeout_s")
            raise RunTimeout(msg, reached=None, expected=str(path))
        time.sleep(0.1)
    return _offsets(json.loads(path.read_text(encoding="utf-8"))["end_offsets"])


def _offsets(raw: dict[str, Any]) -> dict[str, dict[int, int]]:
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in raw.items()}


def _warm_up(engine: KitEngine, spark: object, config: DriverConfig, out: Path) -> None:
    """Run ``config``'s jobs over the harness's warm-up topics to their end, once per run (see the module docstring).

    The warm-up reads its own topics from their beginning and writes under ``<out>/warmup`` with a checkpoint of
    its own, without what outlives a run (:meth:`kit.engine.KitEngine.plain`: legacy runs the direct stream with
    checkpointed offsets whatever the run's mode): it warms the job's code, not the offset store or a receiver's
    consumer group.
    """
    plan, warmed = out / CONTROL / WARMUP, out / CONTROL / WARMED
    if not plan.exists() or warmed.exists():
        return
    raw = json.loads(plan.read_text(encoding="utf-8"))
    started = time.monotonic()
    warm = engine.plain(dataclasses.replace(
        config, topics=dict(raw["topics"]), out_dir=str(out / WARMUP_DIR),
        checkpoint_dir=f"{config.checkpoint_dir.rstrip('/')}-{WARMUP_DIR}",
    ))
    run = engine.start(spark, warm)
    try:
        # Its end offsets only: the batches after them (legacy) would wait out a queue of idle batches.
        run.await_offsets(_offsets(raw["end_offsets"]), timeout_s=config.timeout_s, extra_batches=0)
    finally:
        run.stop()
    write_json(warmed, {"seconds": round(time.monotonic() - started, 2)})


def _drive(config: DriverConfig, out: Path) -> None:
    engine = get_engine(config.engine)
    parent = os.getppid()
    spark = engine.session(config)
    try:
        _warm_up(engine, spark, config, out)
        run = engine.start(spark, config, recover=True)
        try:
            write_json(out / CONTROL / READY, {"started_ms": _now_ms()})
            ends = _wait_for_drain(out, config.drain_timeout_s or config.timeout_s, parent)
            run.await_offsets(ends, timeout_s=config.timeout_s)
        finally:
            run.stop()
    finally:
        spark.stop()


def run(config: DriverConfig) -> int:
    """Run ``config``'s engine as the module docstring says; returns the exit code."""
    out = Path(config.out_dir)
    for path in config.sys_path:
        if path not in sys.path:
            sys.path.insert(0, path)

    def stop(*_: object) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    try:
        _drive(config, out)
    except _Stop:
        return 143
    except BaseException as err:  # noqa: BLE001 - any failure goes to the harness, which shows it as the run's error
        secrets = secret_values(config.kafka_security)
        write_json(out / CONTROL / FAILED, {"error": type(err).__name__,
                                            "message": redact_text(str(err).strip(), secrets)[:4000]})
        print(redact_text(traceback.format_exc(), secrets), file=sys.stderr)
        return 1
    write_json(out / CONTROL / DONE, {"done_ms": _now_ms()})
    return 0


def read_config(path: Path, environ: Mapping[str, str]) -> DriverConfig:
    """The driver's config: the file at ``path``, with what the harness passes outside it from ``environ``.

    The offset store's real address (:data:`OFFSET_STORE_ENV`: the file holds it redacted, or not at all) goes to
    the engine whose options have an offset store; the Kafka security settings (``KAFKA_SECURITY_ENV``) to every
    engine.
    """
    config = DriverConfig.read(path)
    store = environ.get(OFFSET_STORE_ENV)
    if store and hasattr(get_engine(config.engine).options(config), "offset_store"):
        config = dataclasses.replace(config, options={**option_items(config.options), "offset_store": store})
    security = environ.get(KAFKA_SECURITY_ENV)
    if security:
        config = dataclasses.replace(config, kafka_security=json.loads(security))
    return config


def main(argv: list[str]) -> int:
    """``python -m compare.driver DRIVER_CONFIG.json``: the exit code of :func:`run`."""
    if len(argv) != 1:
        print("usage: python -m compare.driver DRIVER_CONFIG.json", file=sys.stderr)
        return 2
    config = read_config(Path(argv[0]), os.environ)
    # The driver's own clients (topic checks, offset look-ups, group commits) connect as the engines' do.
    set_process_settings(java_client_settings(config.kafka_security, where="the run's Kafka settings"))
    exit_with_parent()  # a harness killed by any signal takes its driver and JVM with it
    return run(config)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
