"""A ZooKeeper with Kafka's brokers registered in it, for jobs that name a ZooKeeper quorum (``createStream``).

Spark 2.4's ``KafkaUtils.createStream(ssc, zkQuorum, ...)`` found the Kafka brokers through ZooKeeper: every
broker registers itself under ``/brokers/ids/<id>`` (a JSON node with its ``host``, ``port`` and
``endpoints``). ``dmk compare-jobs`` gives such a job a real quorum (``{zookeeper}``): :func:`kafka_quorum`
starts a standalone ZooKeeper from PySpark's own jars (``ZooKeeperServerMain``, no other package) on a free
loopback port and registers the run's brokers there as Kafka does; a ``dmk migrate`` draft then finds the
brokers where the original job did.

Example::

    with kafka_quorum("127.0.0.1:9092") as quorum:   # "127.0.0.1:PORT"
        registered_brokers(quorum)                    # "127.0.0.1:9092"
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kit.broker import free_port
from kit.errors import KitError
from kit.lifeline import die_with_parent

__all__ = ["ZooKeeperError", "ZooKeeperServer", "broker_registration", "kafka_quorum", "register_brokers",
           "registered_brokers"]

_LOOPBACK = "127.0.0.1"


class ZooKeeperError(KitError):
    """A ZooKeeper could not be started, or did not answer."""


class ZooKeeperServer:
    """A standalone ZooKeeper (``ZooKeeperServerMain`` from PySpark's jars) on a loopback port, always stopped.

    Args:
        port: the client port (default: a free one); a port in use is an error, not a shared server.
        startup_timeout_s: how long to wait for it to serve.
        log_path: its log (default: in its temporary directory, removed with it).
    """

    def __init__(self, port: int | None = None, *, startup_timeout_s: float = 60.0,
                 log_path: str | Path | None = None) -> None:
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path is not None else None
        self.workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        """The quorum clients connect to: ``127.0.0.1:PORT``."""
        return f"{_LOOPBACK}:{self.port}"

    def start(self) -> ZooKeeperServer:
        """Start the server and wait until it serves as a standalone server.

        Raises:
            ZooKeeperError: no ZooKeeper in PySpark's jars, no ``java``, the port taken, or it did not serve.
        """
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        if not any(jars.glob("zookeeper-3*.jar")):
            msg = f"no zookeeper-3*.jar in {jars}: reinstall pyspark (its jars hold ZooKeeper's server)"
            raise ZooKeeperError(msg)
        java = shutil.which("java")
        if java is None:
            msg = "no `java` on PATH to run ZooKeeper: install a Java 17 runtime"
            raise ZooKeeperError(msg)
        if self.port is None:
            self.port = free_port()
        elif not _free(self.port):
            msg = f"port {self.port} is in use: ZooKeeper cannot be started there; stop what listens on it"
            raise ZooKeeperError(msg)
        self.workdir = Path(tempfile.mkdtemp(prefix="dmk-zookeeper-"))
        config = self.workdir / "zoo.cfg"
        config.write_text(f"tickTime=1000\ndataDir={self.workdir / 'data'}\nclientPort={self.port}\n"
                          f"clientPortAddress={_LOOPBACK}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
                          "4lw.commands.whitelist=srvr\n")
        log = self.log_path or self.workdir / "zookeeper.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            self._process = subprocess.Popen(
                [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", str(jars / "*"),
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                preexec_fn=die_with_parent)
        try:
            self._wait_until_serving(log)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_serving(self, log: Path) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                msg = (f"ZooKeeper exited with code {self._process.returncode} while starting on port {self.port}; "
                       f"see its log {log}")
                raise ZooKeeperError(msg)
            try:
                with socket.create_connection((_LOOPBACK, self.port or 0), timeout=2) as sock:
                    sock.sendall(b"srvr")
                    answer = b"".join(iter(lambda: sock.recv(4096), b""))
            except OSError as exc:
                last = repr(exc)
            else:
                if b"Mode: standalone" in answer:
                    return
                last = answer.decode("utf-8", "replace").strip()
            time.sleep(0.05)
        msg = (f"ZooKeeper on port {self.port} did not serve within {self.startup_timeout_s:g} s (last answer: "
               f"{last}); see its log {log}")
        raise ZooKeeperError(msg)

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 10 s) and remove its directory. Safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((_LOOPBACK, port))
        except OSError:
            return False
    return True


def broker_registration(address: str, *, timestamp_ms: int | None = None) -> dict[str, Any]:
    """The JSON a Kafka broker at ``host:port`` registers in ``/brokers/ids/<id>`` (Kafka 2.x's version 4)."""
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit():
        msg = f"a broker address is host:port, got {address!r}"
        raise ValueError(msg)
    return {"listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "endpoints": [f"PLAINTEXT://{address}"],
            "jmx_port": -1, "host": host, "port": int(port),
            "timestamp": str(timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000),
            "version": 4}


def _client(quorum: str, timeout_s: float) -> Any:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    client = KazooClient(hosts=quorum, timeout=timeout_s)
    try:
        client.start(timeout=timeout_s)
    except KazooTimeoutError:
        client.close()
        msg = f"ZooKeeper at {quorum!r} did not answer within {timeout_s:g} s: start it or correct the quorum"
        raise ZooKeeperError(msg) from None
    return client


def register_brokers(quorum: str, bootstrap_servers: str, *, timeout_s: float = 10.0) -> list[int]:
    """Register each of ``bootstrap_servers`` (``host:port,...``) in ZooKeeper at ``quorum`` as Kafka does; their ids.

    The nodes are persistent (a broker's own are ephemeral): they stay until the server is stopped.
    """
    addresses = [a.strip() for a in bootstrap_servers.split(",") if a.strip()]
    client = _client(quorum, timeout_s)
    try:
        for broker_id, address in enumerate(addresses):
            path = f"/brokers/ids/{broker_id}"
            data = json.dumps(broker_registration(address)).encode()
            if client.exists(path):
                client.set(path, data)
            else:
                client.create(path, data, makepath=True)
    finally:
        client.stop()
        client.close()
    return list(range(len(addresses)))


def registered_brokers(quorum: str, *, timeout_s: float = 10.0) -> str:
    """``host:port,...`` of the brokers registered in ZooKeeper at ``quorum`` ('' when none is)."""
    client = _client(quorum, timeout_s)
    try:
        ids = client.get_children("/brokers/ids") if client.exists("/brokers/ids") else []
        found = []
        for broker_id in sorted(ids):
            node = json.loads(client.get(f"/brokers/ids/{broker_id}")[0])
            if node.get("host") and int(node.get("port", -1)) > 0:
                found.append(f"{node['host']}:{int(node['port'])}")
            else:
                found += [str(e).partition("://")[2] for e in node.get("endpoints", ())[:1]]
    finally:
        client.stop()
        client.close()
    return ",".join(found)


@contextlib.contextmanager
def kafka_quorum(bootstrap_servers: str, *, port: int | None = None,
                 log_path: str | Path | None = None) -> Iterator[str]:
    """A ZooKeeper (on ``port`` or a free one) with ``bootstrap_servers`` registered in it; its quorum. Stopped after.

    Raises:
        ZooKeeperError: it could not be started (see :meth:`ZooKeeperServer.start`).
    """
    with ZooKeeperServer(port, log_path=log_path) as server:
        register_brokers(server.hosts, bootstrap_servers)
        yield server.hosts
