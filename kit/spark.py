"""Spark factories both engines use: a SparkSession, a SparkContext and a DStream StreamingContext.

They make the settings that bite people consistent in one place: Python workers run this interpreter
(``PYSPARK_PYTHON`` = ``sys.executable``, or workers fail with "Python worker failed to connect back"),
few shuffle partitions, no UI unless asked, quiet logs, and the DStream deprecation warning shown at most
never (it is expected here: DStreams are what the kit migrates from).

The master comes from the ``master`` argument, else ``DMK_SPARK_MASTER``, else ``local[2]``; any Spark master
URL works (``local[N]``, ``spark://host:port``...).

Example:
    >>> spark = spark_session("my-app")                                   # doctest: +SKIP
    >>> ssc = streaming_context(1.0)                                       # doctest: +SKIP
    >>> ssc.stop(stopSparkContext=False)                                   # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.streaming import StreamingContext

__all__ = ["DEFAULT_MASTER", "MASTER_ENV", "kit_settings", "resolve_master", "spark_conf", "spark_context", "spark_session", "streaming_context"]

MASTER_ENV = "DMK_SPARK_MASTER"
DEFAULT_MASTER = "local[2]"
_DSTREAM_WARNING = "DStream is deprecated as of Spark 3.4.0. Migrate to Structured Streaming."

_LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
_JAVA_OPTIONS = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_LOG4J}"

_BASE_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": _JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    # Spark stops StreamingContexts on JVM shutdown; the kit's runners stop them themselves.
    "spark.streaming.stopGracefullyOnShutdown": "false",
}


def resolve_master(master: str | None = None) -> str:
    """The Spark master to use: ``master``, else ``$DMK_SPARK_MASTER``, else ``local[2]``."""
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def _quiet_dstream_warning() -> None:
    warnings.filterwarnings("ignore", message=_DSTREAM_WARNING.replace(".", r"\."), category=FutureWarning)


def kit_settings(master: str | None = None, conf: Mapping[str, Any] | None = None, *, ui: bool = False) -> dict[str, str]:
    """The Spark settings the kit applies for ``master``: its defaults, overridden by ``conf``."""
    settings = dict(_BASE_CONF)
    settings["spark.master"] = resolve_master(master)
    if settings["spark.master"].startswith("local"):
        # A local run stays on loopback, whatever the host name resolves to.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if ui:
        settings["spark.ui.enabled"] = "true"
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    return settings


def spark_conf(
    app_name: str = "dmk", master: str | None = None, conf: Mapping[str, Any] | None = None, *, ui: bool = False
):
    """A ``SparkConf`` with :func:`kit_settings` applied and the app name set."""
    from pyspark import SparkConf

    spark_conf = SparkConf().setAppName(app_name)
    for key, value in kit_settings(master, conf, ui=ui).items():
        spark_conf.set(key, value)
    return spark_conf


def _python_workers_use_this_interpreter() -> None:
    # Read by PySpark when it launches Python workers; must be set before the SparkContext starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_context(
    app_name: str = "dmk",
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    ui: bool = False,
    log_level: str = "WARN",
) -> SparkContext:
    """The active SparkContext, or a new one with the kit's defaults.

    Args:
        app_name: Spark application name (default "dmk").
        master: Spark master URL; default from ``DMK_SPARK_MASTER``, else ``local[2]``.
        conf: extra Spark settings, applied over the kit's defaults.
        ui: start the Spark UI (off by default).
        log_level: JVM log level (default "WARN").
    """
    from pyspark import SparkContext

    _python_workers_use_this_interpreter()
    if resolve_master(master).startswith("local"):
        # Spark's own address lookup runs before any setting is read; without this it warns and picks a
        # non-loopback interface for a run that never leaves this machine.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    context = SparkContext.getOrCreate(spark_conf(app_name, master, conf, ui=ui))
    context.setLogLevel(log_level)
    return context


def spark_session(
    app_name: str = "dmk",
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    ui: bool = False,
    log_level: str = "WARN",
) -> SparkSession:
    """The active SparkSession, or a new one on :func:`spark_context` (same arguments)."""
    from pyspark.sql import SparkSession

    spark_context(app_name, master, conf, ui=ui, log_level=log_level)
    return SparkSession.builder.getOrCreate()


def streaming_context(
    batch_seconds: float,
    app_name: str = "dmk",
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> StreamingContext:
    """A new DStream StreamingContext with a batch interval of ``batch_seconds`` on :func:`spark_context`.

    Stop it with ``ssc.stop(stopSparkContext=False)`` to keep the SparkContext for the next one.
    """
    if not batch_seconds > 0:
        from kit.errors import ConfigError

        raise ConfigError(f"batch_seconds must be > 0, got {batch_seconds}")
    _quiet_dstream_warning()
    from pyspark.streaming import StreamingContext

    return StreamingContext(spark_context(app_name, master, conf, **kwargs), batch_seconds)
