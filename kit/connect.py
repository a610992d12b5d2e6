"""Spark Connect: a session on a Connect server, checked, and a local server the kit starts and stops.

Structured Streaming runs over Spark Connect; DStreams cannot (they are RDDs, and a Connect client has no
SparkContext). :func:`connect_session` opens a session on a server at an ``sc://host:port`` URL and checks,
before any query starts, that the server answers and that its Python workers can import the kit (the Kafka
source, the parse UDF and the ``foreachBatch`` sink all run there). :class:`LocalConnectServer` runs PySpark's
own server (``org.apache.spark.sql.connect.service.SparkConnectServer``, in the ``spark-connect_2.13`` jar
PySpark 4.3 ships) on this machine with the kit's Spark settings, in a process group of its own, so it can be
stopped with everything it started.

Example::

    with LocalConnectServer() as server:
        spark = connect_session(server.url)                         # sc://127.0.0.1:<free port>
        spark.range(3).count()
    # 3
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kit.errors import ConfigError, ConnectError
from kit.lifeline import die_with_parent
from kit.spark import log_tail, spark_home

__all__ = [
    "CONNECT_SERVER_CLASS",
    "LocalConnectServer",
    "check_reachable",
    "check_server",
    "connect_session",
    "parse_url",
    "spark_home",
]

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
"""The JVM class of PySpark's Spark Connect server (``sbin/start-connect-server.sh`` runs the same)."""

_CLIENT_MODULES = ("grpc", "grpc_status", "google.rpc", "zstandard")
"""What PySpark's Connect client needs besides pandas and pyarrow (its ``connect`` extra)."""

# What the server's Python workers import for a modern run: the kit's packages (the Kafka source, the parse
# UDF, the foreachBatch sink) and what they import.
_SERVER_MODULES = ("pandas", "pyarrow", "kafka", "google.protobuf", "kit", "modern")


def parse_url(url: str) -> tuple[str, int]:
    """``(host, port)`` of a Spark Connect URL ``sc://host:port[/;param=value...]``.

    Example:
        >>> parse_url("sc://127.0.0.1:15002"), parse_url("sc://spark.example.com")
        (('127.0.0.1', 15002), ('spark.example.com', 15002))

    Raises:
        ConfigError: not an ``sc://`` URL with a host (the port defaults to Spark's 15002).
    """
    parsed = urlparse(url)
    try:
        port = parsed.port or 15002
    except ValueError:
        port = -1
    if parsed.scheme != "sc" or not parsed.hostname or port <= 0:
        msg = f"{url!r} is not a Spark Connect URL; write sc://HOST:PORT (the port defaults to 15002)"
        raise ConfigError(msg, field="connect", expected="sc://HOST:PORT", actual=url)
    return parsed.hostname, port


def _check_client() -> None:
    import importlib

    missing = []
    for module in _CLIENT_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        msg = (
            f"PySpark's Spark Connect client needs {missing}, which this Python ({sys.executable}) cannot import; "
            "install them with pip install 'dstream-migration-kit[connect]' (or 'pyspark[connect]==4.3.*')"
        )
        raise ConnectError(msg, url=None, missing=missing)


def _reachable(host: str, port: int, timeout_s: float) -> str | None:
    """None if a TCP connection to ``host:port`` opens within ``timeout_s``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as err:
        return f"{type(err).__name__}: {err}"


def check_reachable(url: str, timeout_s: float = 10.0) -> None:
    """Raise unless something accepts connections at ``url`` and this Python has PySpark's Connect client.

    Raises:
        ConfigError: ``url`` is not an ``sc://`` URL.
        ConnectError: the client's dependencies are missing, or nothing answers at ``url`` within ``timeout_s``.
    """
    host, port = parse_url(url)
    _check_client()
    refused = _reachable(host, port, timeout_s)
    if refused is not None:
        msg = (
            f"no Spark Connect server answered at {url} ({refused}). Start one (PySpark's "
            "sbin/start-connect-server.sh, or kit.connect.LocalConnectServer) or fix the address"
        )
        raise ConnectError(msg, url=url)


def connect_session(url: str, *, timeout_s: float = 30.0, check: bool = True) -> Any:
    """A new Spark Connect session on the server at ``url``, checked with :func:`check_server`.

    PySpark then turns this whole process to Connect (it sets ``SPARK_CONNECT_MODE_ENABLED``:
    ``pyspark.sql.functions`` and ``SparkSession.builder`` go to the server from then on), so a process holds
    Connect sessions or a classic one, not both at once; the kit's ``dmk compare --connect`` runs its modern
    driver in a process of its own.

    Args:
        url: the server, ``sc://host:port``.
        timeout_s: how long the first connection may take (default 30 s).
        check: check that the server's Python workers can import the kit (default True).

    Raises:
        ConfigError: ``url`` is not an ``sc://`` URL.
        ConnectError: the Connect client's dependencies are missing here, nothing answers at ``url``, it does
            not answer as a Spark Connect server, or its Python workers cannot run the kit (:func:`check_server`).
    """
    check_reachable(url, timeout_s)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).create()
    if check:
        try:
            check_server(spark, url)
        except BaseException:
            spark.stop()
            raise
    return spark


def _probe_function(modules: tuple[str, ...]) -> Any:
    # Built in a function, so cloudpickle sends it by value: the server's workers need nothing of the kit to run it.
    # No type hints: over Connect, PySpark reads a UDF's hints to guess a pandas UDF and warns when it cannot.
    def probe(_):  # type: ignore[no-untyped-def]  # hints left out on purpose (above)
        import importlib
        import json
        import socket
        import sys

        missing = {}
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception as err:  # noqa: BLE001 - reported to the client as it is
                missing[module] = f"{type(err).__name__}: {err}"
        return json.dumps({"host": socket.gethostname(), "python": list(sys.version_info[:2]),
                           "executable": sys.executable, "missing": missing})

    return probe


def check_server(spark: Any, url: str = "", *, modules: tuple[str, ...] = _SERVER_MODULES) -> dict[str, Any]:
    """What the Connect server of ``spark`` runs Python with; raise unless it can run the kit's modern side.

    One Python UDF runs on the server and imports ``modules`` there (default: the kit's ``kit`` and ``modern``
    and what they need: pandas, pyarrow, kafka-python, protobuf). Returns its report: ``host``, ``python``
    (``[major, minor]``), ``executable``, ``missing`` (module → error; empty).

    Raises:
        ConnectError: the server does not answer as Spark Connect, cannot run a Python UDF (another Python
            minor version, no PySpark), or its Python cannot import the kit or a dependency.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    url = url or "the Connect server"
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    fix = (
        f"The server's Python workers need Python {python} with this kit installed (pip install "
        "'dstream-migration-kit[connect]' into the interpreter the server runs workers with, or point the server's "
        "PYSPARK_PYTHON or spark.pyspark.python at one that has it) and must be able to write the run's output "
        "directory: see docs/playbook.md, 'Spark Connect'"
    )
    try:
        probe = F.udf(_probe_function(tuple(modules)), "string")
        row = spark.range(1).select(probe(F.lit(0)).alias("report")).first()
    except Exception as err:  # noqa: BLE001 - any failure here is the server's; reported with the fix
        lines = [line for line in str(err).splitlines() if line.strip()][:3]
        msg = f"{url} could not run the kit's Python check ({type(err).__name__}: {' / '.join(lines)}). {fix}"
        raise ConnectError(msg, url=url) from None
    report: dict[str, Any] = json.loads(row["report"])
    if report["missing"] or report["python"] != list(sys.version_info[:2]):
        msg = (
            f"{url}'s Python workers cannot run the kit: Python {report['python']} at {report['executable']} on "
            f"{report['host']}, missing {report['missing']}. {fix}"
        )
        raise ConnectError(msg, url=url, missing=sorted(report["missing"]))
    return report


class LocalConnectServer:
    """PySpark's Spark Connect server on this machine's loopback, with the kit's Spark settings.

    The server runs ``spark-submit --class`` :data:`CONNECT_SERVER_CLASS` in the foreground of a process group
    of its own (not ``start-connect-server.sh``, which daemonizes), with ``PYSPARK_PYTHON`` set to this
    interpreter so its Python workers import this kit. :meth:`stop` ends the group: the JVM and its workers.

    Args:
        port: the gRPC port (default: a free one).
        master: the server's Spark master (default as :func:`kit.spark.resolve_master`).
        conf: Spark settings over :func:`kit.spark.kit_settings`.
        log_path: where the server's output goes (default: a file in the temporary directory).
        timeout_s: how long :meth:`start` waits for the port to open (default 120 s).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        master: str | None = None,
        conf: Mapping[str, Any] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        from kit.broker import free_port

        self.port = port or free_port()
        self.master = master
        self.conf = dict(conf or {})
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"dmk-connect-{self.port}.log"
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's URL, ``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that runs the server."""
        from kit.spark import kit_settings

        settings = kit_settings(self.master, {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            **self.conf,
        })
        args = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS,
                "--name", f"dmk Spark Connect server :{self.port}"]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self) -> LocalConnectServer:
        """Start the server and wait until its port accepts connections.

        Raises:
            ConnectError: it exited or did not open its port within ``timeout_s`` (with its log's end); it is
                stopped then.
        """
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                msg = f"the Spark Connect server exited with code {code} while starting; {self.log_path} ends:\n" \
                      f"{log_tail(self.log_path, 12)}"
                raise ConnectError(msg, url=self.url)
            if _reachable("127.0.0.1", self.port, 1.0) is None:
                return self
            if time.monotonic() > deadline:
                self.stop()
                msg = (f"the Spark Connect server did not open port {self.port} within {self.timeout_s:.0f} s; "
                       f"{self.log_path} ends:\n{log_tail(self.log_path, 12)}")
                raise ConnectError(msg, url=self.url)
            time.sleep(0.25)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after ``timeout_s``); idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout_s)

    def __enter__(self) -> LocalConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
