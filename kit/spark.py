"""Spark factories both engines use: a SparkSession, a SparkContext and a DStream StreamingContext.

They make the settings that bite people consistent in one place: Python workers run this interpreter
(``PYSPARK_PYTHON`` = ``sys.executable``, or workers fail with "Python worker failed to connect back"),
a shuffle partition per core, no UI unless asked, quiet logs, and the DStream deprecation warning shown at most
never (it is expected here: DStreams are what the kit migrates from).

The master comes from the ``master`` argument, else ``DMK_SPARK_MASTER``, else ``local[2]``; any Spark master
URL works (``local[N]``, ``spark://host:port``...). On a cluster master the kit's own packages (``kit``,
``legacy``, ``modern``) are shipped to the executors with ``addPyFile`` (so executors run exactly the driver's
code), and a probe job checks that the executors' Python can import them and the kit's dependencies; where it
cannot, the context is stopped and :class:`~kit.errors.ConfigError` says what is missing and how to install it.
Checkpoint locations must be reachable from every node: :func:`check_location`.

Example::

    spark = spark_session("my-app")
    ssc = streaming_context(1.0)
    ssc.stop(stopSparkContext=False)
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession
    from pyspark.streaming import StreamingContext

__all__ = [
    "DEFAULT_MASTER",
    "MASTER_ENV",
    "check_location",
    "default_parallelism",
    "has_scheme",
    "HDFS_STATE_STORE",
    "is_connect",
    "ROCKSDB_STATE_STORE",
    "SHORT_RUN_CONF",
    "kit_settings",
    "log_tail",
    "on_this_host",
    "resolve_master",
    "session_master",
    "ship_kit",
    "spark_conf",
    "spark_context",
    "spark_home",
    "spark_session",
    "streaming_context",
]

MASTER_ENV = "DMK_SPARK_MASTER"
DEFAULT_MASTER = "local[2]"
_DSTREAM_WARNING = "DStream is deprecated as of Spark 3.4.0. Migrate to Structured Streaming."

_LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
# -Xss16m: a task's RDD chain is deserialized recursively, about ten stack frames per RDD. A DStream's state RDD
# depends on the one before it until a checkpoint is written, and a backlogged job generates batches ahead of the
# checkpoints: its chain grows with the queue. With the JVM's default 1 MB stacks a chain of 100 nested RDDs
# already failed with StackOverflowError (legacy running_counts in the bench's warm-up did, under load); 16 MB
# took 1,000 (tests/test_spark.py runs 300). Only the pages a thread touches are committed.
_JAVA_OPTIONS = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_LOG4J} -Xss16m"

SHORT_RUN_CONF: dict[str, str] = {
    key: f"{_JAVA_OPTIONS} -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
}
"""Settings for a JVM that lives a minute or two (a ``dmk compare`` driver, a test session): the JIT's first tier
only. HotSpot's second tier (C2) compiles Spark's hot methods again, optimized, on compiler threads that compete
with the batches for the cores; in a short run that costs more than it saves (measured with
``benchmarks/compare_batch_cost.py``, benchmarks/results/changes.md §17). A long-lived job (the bench's
throughput runs, production) keeps both tiers. With the first tier only HotSpot reserves 48 MB of code cache
instead of 240 MB, which Spark fills in about a minute: the sweeper then flushes thousands of methods and the
JIT recompiles them for seconds while batches stall (changes.md §35), hence the full-size code cache."""

ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
"""Spark's RocksDB state store provider: the kit's default (``transformWithStateInPandas`` requires it)."""

HDFS_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
"""Spark's own default state store provider; ``conf={"spark.sql.streaming.stateStore.providerClass":
HDFS_STATE_STORE}`` goes back to it."""

CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
"""How the kit's Structured Streaming queries write checkpoint files (see ``_BASE_CONF``)."""

_BASE_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    # The HDFS-backed store copies its whole map into each new version, so a batch's cost grows with the
    # state; RocksDB with changelog checkpointing writes only each batch's changes. A query keeps the
    # provider its checkpoint was started with (Spark pins it in the offset log).
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_STATE_STORE,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Without Hadoop's native library (PySpark's wheel has none) the local file system sets every file's
    # permissions by forking `chmod`, and FileContext, Spark's default way to write checkpoint files, also
    # forks `readlink` for each: dozens of processes forked from the JVM per micro-batch (JFR's ProcessStart
    # events). The FileSystem-based manager writes the same files, renamed into place the same way, without
    # the readlinks, in a fraction of the time (benchmarks/modern_batch_cost.py; changes.md §19).
    # Spark falls back to it by itself on stores without FileContext (S3); rename is atomic on local disks
    # and HDFS, which is what it needs.
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": _JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    # Spark stops StreamingContexts on JVM shutdown; the kit's runners stop them themselves.
    "spark.streaming.stopGracefullyOnShutdown": "false",
    # Query plans and errors show data source options: redact the Kafka secrets there too (Spark's default redacts
    # only "url"; docs/security.md).
    "spark.sql.redaction.options.regex": "(?i)url|jaas|password|keystore[.]key|secret|token",
}


def spark_home() -> Path:
    """PySpark's installation directory, its ``SPARK_HOME`` (``bin/spark-submit``, ``sbin/``, ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a Spark process's log at ``path`` (``(no log)`` if it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def resolve_master(master: str | None = None) -> str:
    """The Spark master to use: ``master``, else ``$DMK_SPARK_MASTER``, else ``local[2]``."""
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM in this process; :mod:`kit.connect`)."""
    # By the class's module, not by importing pyspark.sql.connect, which needs the Connect client's packages.
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def session_master(spark: Any) -> str:
    """The Spark master ``spark`` runs on: its SparkContext's, or over Connect the server's ``spark.master``."""
    if is_connect(spark):
        return cast(str, spark.conf.get("spark.master"))
    return cast(str, spark.sparkContext.master)


def default_parallelism(spark: Any) -> int | None:
    """``spark``'s default parallelism (tasks per stage without shuffle partitions); None when it cannot be known.

    A classic session asks its SparkContext. A Connect client has none: the server's
    ``spark.default.parallelism`` (the kit sets it on ``local`` masters, :func:`kit_settings`), else None.
    """
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value else None


_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_SHIPPED_PACKAGES = ("kit", "legacy", "modern")
# google.protobuf: transformWithStateInPandas's workers talk to the state server in protobuf.
_EXECUTOR_MODULES = ("pandas", "pyarrow", "kafka", "google.protobuf", *_SHIPPED_PACKAGES)


def on_this_host(master: str | None = None) -> bool:
    """Whether every process of ``master`` runs on this machine.

    It does for ``local[...]``, and for a ``spark://`` master on loopback (a cluster on one host, like ``dmk
    cluster start``'s). A master on this host's name does not: its workers may be anywhere (Spark's own scripts
    bind a master to the host name).
    """
    resolved = resolve_master(master)
    if resolved.startswith("local"):
        return True
    if not resolved.startswith("spark://"):
        return False
    hosts = [part.rsplit(":", 1)[0] for part in resolved[len("spark://"):].split(",")]
    return all(host in _LOOPBACK for host in hosts)


def has_scheme(location: str) -> bool:
    """Whether ``location`` is a URI (``file:/...``, ``hdfs://...``) rather than a plain path."""
    import re

    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", location) is not None


def check_location(location: str, master: str | None = None, *, what: str = "checkpoint location") -> str:
    """``location`` if every node of ``master`` can reach it, else raise.

    A URI with a file system scheme (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``...) is for every node to
    reach (Spark will say if it cannot). A local path (or ``file:``) is accepted only when the master runs on
    this machine (:func:`on_this_host`): executors on other hosts would write state and checkpoint files to
    their own disks, and a restarted query would not find them.

    Raises:
        ConfigError: a local path with a master on other hosts.
    """
    from urllib.parse import urlparse

    scheme = urlparse(location).scheme
    if (len(scheme) > 1 and scheme != "file") or on_this_host(master):
        return location
    from kit.errors import ConfigError

    msg = (
        f"the {what} {location!r} is a local path, but the Spark master {resolve_master(master)} may run executors "
        "on other hosts, which cannot reach this machine's disk. Use a URI every node reaches (hdfs://..., "
        "s3a://..., abfss://...), see docs/deploy.md."
    )
    raise ConfigError(msg, field=what, expected="a URI reachable from every node", actual=location)


def ship_kit(sc: SparkContext) -> str:
    """Ship the kit's packages to ``sc``'s executors; returns the zip's path.

    The packages go as ``addPyFile`` of a zip built from the driver's copy. The zip is cached by content under
    the temporary directory.
    """
    import hashlib
    import importlib
    import tempfile
    import zipfile
    from pathlib import Path

    files: list[tuple[Path, str]] = []
    for package in _SHIPPED_PACKAGES:
        # The kit's packages are regular packages (each with an __init__.py), so each has a __file__.
        root = Path(cast(str, importlib.import_module(package).__file__)).resolve().parent
        files += [(f, f"{package}/{f.relative_to(root)}") for f in sorted(root.rglob("*"))
                  if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".properties")]
    digest = hashlib.sha256()
    for path, name in files:
        digest.update(name.encode())
        digest.update(path.read_bytes())
    target = Path(tempfile.gettempdir()) / f"dmk-kit-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(temp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, name in files:
                archive.write(path, name)
        os.replace(temp, target)
    sc.addPyFile(str(target))
    return str(target)


def _probe(_: Any) -> dict[str, Any]:
    import importlib
    import socket

    missing = {}
    for module in _EXECUTOR_MODULES:
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - reported to the driver as it is
            missing[module] = f"{type(err).__name__}: {err}"
    kit_file = getattr(sys.modules.get("kit"), "__file__", None)
    return {"host": socket.gethostname(), "python": list(sys.version_info[:2]), "executable": sys.executable,
            "missing": missing, "kit": kit_file}


def check_executors(sc: SparkContext) -> list[dict[str, Any]]:
    """Run one probe task per default-parallelism slot (the executors registered so far); returns what each saw.

    Raises:
        ConfigError: an executor cannot import the kit or a dependency, or runs another Python minor version.
    """
    from py4j.protocol import Py4JJavaError

    from kit.errors import ConfigError

    slots = max(int(sc.defaultParallelism), 1)
    try:
        seen = sc.parallelize(range(slots), slots).map(_probe).collect()
    except Py4JJavaError as err:  # the worker itself failed: no Python there, another version, no pyspark...
        lines = [line for line in str(err.java_exception).splitlines() if line.strip()][:3]
        msg = (
            f"executors could not run a Python task for the kit: {' / '.join(lines)}. Every worker needs Python "
            f"{sys.version_info[0]}.{sys.version_info[1]} with pyspark==4.3.*, pandas<3, pyarrow, kafka-python and "
            f"protobuf at {os.environ.get('PYSPARK_PYTHON', sys.executable)} (or set spark.pyspark.python); see "
            "docs/deploy.md."
        )
        raise ConfigError(msg, field="executors", expected="a Python that runs the kit", actual=lines) from None
    wrong = [s for s in seen if s["missing"] or s["python"] != list(sys.version_info[:2])]
    if wrong:
        first = wrong[0]
        msg = (
            f"executors on {sorted({s['host'] for s in wrong})} cannot run the kit: Python {first['python']} at "
            f"{first['executable']} (the driver runs {list(sys.version_info[:2])}), missing {first['missing']}. "
            "Install the kit's dependencies into that interpreter on every worker (pip install 'pyspark==4.3.*' "
            "'pandas<3' pyarrow kafka-python 'protobuf>=6.33.5,<7', or the kit itself), or point "
            "spark.pyspark.python at one that has them; the kit's own packages are shipped with the job."
        )
        raise ConfigError(msg, field="executors", expected="the kit's modules importable", actual=first)
    return seen


def _local_cores(master: str) -> int | None:
    """The cores of a ``local``, ``local[N]`` or ``local[*]`` master (None for any other master)."""
    import re

    match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if match is None:
        return None
    if match.group(1) in (None, ""):
        return 1
    return os.cpu_count() or 1 if match.group(1) == "*" else int(match.group(1))


def _quiet_dstream_warning() -> None:
    warnings.filterwarnings("ignore", message=_DSTREAM_WARNING.replace(".", r"\."), category=FutureWarning)


def kit_settings(
    master: str | None = None, conf: Mapping[str, Any] | None = None, *, ui: bool = False,
) -> dict[str, str]:
    """The Spark settings the kit applies for ``master``: its defaults, overridden by ``conf``."""
    settings = dict(_BASE_CONF)
    settings["spark.master"] = resolve_master(master)
    cores = _local_cores(settings["spark.master"])
    if cores:
        # One task per core: every task of a Python stage is a round trip to a Python worker, and the DStream
        # side's updateStateByKey runs a task per state partition every batch, records or not. The same for
        # Structured Streaming's state partitions (a task each per micro-batch): fewer tasks, shorter
        # micro-batches (benchmarks/modern_batch_cost.py; changes.md §19). A checkpoint keeps the number it was
        # started with.
        settings["spark.default.parallelism"] = str(cores)
        settings["spark.sql.shuffle.partitions"] = str(cores)
    if on_this_host(settings["spark.master"]):
        # A local run stays on loopback, whatever the host name resolves to.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if settings["spark.master"].startswith("local"):
        # Python workers forked with the kit's modules already imported (see kit/_worker_daemon.py). Not on
        # a cluster: its executors run the copy of the kit the driver ships them (ship_kit).
        settings["spark.python.daemon.module"] = "kit._worker_daemon"
    if ui:
        settings["spark.ui.enabled"] = "true"
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    return settings


def spark_conf(
    app_name: str = "dmk", master: str | None = None, conf: Mapping[str, Any] | None = None, *, ui: bool = False
) -> SparkConf:
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


def _no_local_checksum_files(context: SparkContext) -> None:
    # Hadoop's LocalFileSystem is a ChecksumFileSystem: every file it writes gets a ".name.crc" beside it, written
    # through a second stream, and renamed and deleted with it. A micro-batch's offset and commit logs pay that
    # twice each: 14-17 ms apiece against 8-10 without checksums, 25-30 ms a micro-batch at the same CPU
    # (benchmarks/results/changes.md §30). Checksum writes go off on the cached `file:` instance, which Spark's
    # checkpoint manager, the state stores and RocksDB's snapshot upload share: it stays a LocalFileSystem
    # (RocksDB casts to one; swapping in RawLocalFileSystem broke that, §29), files read the same, and .crc files
    # already there are still verified. Local masters only: on a cluster, checkpoints are not on this disk.
    jvm: Any = context._jvm  # py4j's JVM view, untyped; None only before a SparkContext starts
    jvm.org.apache.hadoop.fs.FileSystem.getLocal(context._jsc.hadoopConfiguration()).setWriteChecksum(False)


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
    if on_this_host(master):
        # Spark's own address lookup runs before any setting is read; without this it warns and picks a
        # non-loopback interface for a run that never leaves this machine.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    context = SparkContext.getOrCreate(spark_conf(app_name, master, conf, ui=ui))
    context.setLogLevel(log_level)
    # A running SparkContext always has a master (Spark refuses to start without one); pyspark types it Optional.
    master_url = cast(str, context.master)
    if master_url.startswith("local"):
        _no_local_checksum_files(context)
    elif not getattr(context, "_dmk_kit_shipped", False):
        try:
            ship_kit(context)
            check_executors(context)
        except BaseException:
            context.stop()
            raise
        context._dmk_kit_shipped = True  # type: ignore[attr-defined]  # the kit's marker on Spark's object
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

        msg = f"batch_seconds must be > 0, got {batch_seconds}"
        raise ConfigError(msg)
    _quiet_dstream_warning()
    from pyspark.streaming import StreamingContext

    # pyspark types batchDuration as int, but takes fractional seconds (it sends int(seconds * 1000) ms).
    return StreamingContext(spark_context(app_name, master, conf, **kwargs), batch_seconds)  # type: ignore[arg-type]
