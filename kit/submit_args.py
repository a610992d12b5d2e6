"""``PYSPARK_SUBMIT_ARGS`` of a job under ``dmk compare-jobs``: the Kafka artifacts the kit stands in for, not fetched.

Spark 2.x jobs often set, in their own text, ``os.environ['PYSPARK_SUBMIT_ARGS'] = '--packages
org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1 pyspark-shell'``, so that ``spark-submit`` downloads
``KafkaUtils``' JVM side when the SparkContext starts. Under ``dmk compare-jobs`` that artifact is neither
needed (the stand-ins provide ``pyspark.streaming.kafka`` and ``format("kafka")`` in the job's process) nor
usable (a Spark 2.3 Scala 2.11 jar on Spark 4), and fetching it needs Maven Central. :func:`install` wraps
PySpark's gateway launch so that, whenever the job set the variable, the coordinates of Spark's own Kafka
connectors (``org.apache.spark:spark-streaming-kafka*``, ``org.apache.spark:spark-sql-kafka*``) are taken
out of ``--packages`` (and ``--conf spark.jars.packages=``) before ``spark-submit`` runs, saying so in the
job's log; the same for ``spark.jars.packages`` set on the job's ``SparkConf`` (or its session builder's
config), which PySpark passes to ``spark-submit`` too. Other packages are left as the job asked.

Example::

    without_standin_packages("--packages org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1 pyspark-shell")
    # ('pyspark-shell', ['org.apache.spark:spark-streaming-kafka-0-8_2.11:2.3.1'])
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

__all__ = ["STANDIN_PACKAGES", "install", "without_standin_packages"]

STANDIN_PACKAGES = ("org.apache.spark:spark-streaming-kafka", "org.apache.spark:spark-sql-kafka")
"""Maven coordinates (prefixes) of the Kafka connectors the kit's stand-ins provide."""
_VARIABLE = "PYSPARK_SUBMIT_ARGS"


def _split(coordinates: str) -> tuple[list[str], list[str]]:
    given = [c.strip() for c in coordinates.split(",") if c.strip()]
    ours = [c for c in given if c.startswith(STANDIN_PACKAGES)]
    return [c for c in given if c not in ours], ours


def without_standin_packages(submit_args: str) -> tuple[str, list[str]]:
    """``submit_args`` without the stand-ins' Kafka packages, and the coordinates taken out (in order)."""
    argv = shlex.split(submit_args)
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        value = None
        if arg == "--packages" and i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        elif arg.startswith("--packages="):
            value, i = arg.partition("=")[2], i + 1
        elif arg == "--conf" and i + 1 < len(argv) and argv[i + 1].startswith("spark.jars.packages="):
            rest, out = _split(argv[i + 1].partition("=")[2])
            dropped += out
            kept += ["--conf", f"spark.jars.packages={','.join(rest)}"] if rest else []
            i += 2
            continue
        else:
            kept.append(arg)
            i += 1
            continue
        rest, out = _split(value)
        dropped += out
        kept += ["--packages", ",".join(rest)] if rest else []
    return (shlex.join(kept), dropped) if dropped else (submit_args, [])


def _scrub(log: Any = None) -> None:
    given = os.environ.get(_VARIABLE)
    if not given:
        return
    cleaned, dropped = without_standin_packages(given)
    if dropped:
        os.environ[_VARIABLE] = cleaned
        print(f"dmk: {_VARIABLE} asks spark-submit to fetch {', '.join(dropped)}: not fetched; the kit's stand-ins "
              f"provide KafkaUtils (pyspark.streaming.kafka) and format('kafka') in this process ({_VARIABLE} is now "
              f"{cleaned!r})", file=log or sys.stderr, flush=True)


def _scrub_conf(conf: Any, log: Any = None) -> None:
    """Take the stand-ins' Kafka packages out of a not yet launched ``SparkConf``'s ``spark.jars.packages``."""
    key = "spark.jars.packages"
    given = conf.get(key) if conf is not None else None
    if not given:
        return
    rest, dropped = _split(given)
    if not dropped:
        return
    if rest:
        conf.set(key, ",".join(rest))
    else:
        conf._conf.pop(key, None)  # no JVM yet: a SparkConf keeps its settings in this dict until launch
    print(f"dmk: the job's SparkConf asks spark-submit to fetch {', '.join(dropped)} ({key}): not fetched; the kit's "
          "stand-ins provide KafkaUtils (pyspark.streaming.kafka) and format('kafka') in this process",
          file=log or sys.stderr, flush=True)


def install() -> None:
    """Scrub ``PYSPARK_SUBMIT_ARGS`` whenever this process launches Spark's JVM (idempotent)."""
    from pyspark.core import context

    launch = context.launch_gateway
    if getattr(launch, "_dmk_scrubbing", False):
        return

    def launch_gateway(conf: Any = None, popen_kwargs: Any = None) -> Any:
        _scrub()
        _scrub_conf(conf)
        return launch(conf, popen_kwargs)  # type: ignore[no-untyped-call]  # PySpark leaves it untyped

    launch_gateway._dmk_scrubbing = True  # type: ignore[attr-defined]
    context.launch_gateway = launch_gateway
