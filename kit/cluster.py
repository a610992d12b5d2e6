"""A real Spark standalone cluster on this machine, started from the pyspark wheel: ``dmk cluster``.

The wheel ships ``bin/spark-class`` but no ``sbin/start-master.sh``, so the master and the workers are started
here as Spark's own daemons (``org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``), bound
to loopback, each in its own process group with its log under the cluster's directory. A worker's executors
are its child processes, in its process group: stopping a worker's group stops its executors too, and
:meth:`LocalCluster.stop` leaves no process behind.

The cluster's state (master URL, web UI port, process ids, logs) is ``<dir>/cluster.json``; ``dir`` defaults
to ``$DMK_CLUSTER_DIR``, else ``~/.dmk/cluster``.

Example::

    cluster = LocalCluster("/tmp/dmk-cluster")
    state = cluster.start(workers=2, cores=1, memory="1g")
    state.master_url
    # 'spark://127.0.0.1:41234'
    cluster.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from kit.errors import ClusterError, ConfigError
from kit.spark import log_tail, spark_home

__all__ = ["CLUSTER_DIR_ENV", "ClusterError", "ClusterState", "LocalCluster", "default_dir"]

CLUSTER_DIR_ENV = "DMK_CLUSTER_DIR"
_MEMORY = re.compile(r"^\d+[mMgG]$")
_DAEMON_MEMORY = "256m"  # the master and workers only schedule; executors get the workers' --memory


def default_dir() -> Path:
    """``$DMK_CLUSTER_DIR``, else ``~/.dmk/cluster``."""
    return Path(os.environ.get(CLUSTER_DIR_ENV) or Path.home() / ".dmk" / "cluster")


@dataclass(frozen=True)
class ClusterState:
    """A started cluster, as ``cluster.json`` records it.

    Attributes:
        master_url: ``spark://127.0.0.1:PORT``, the ``--master`` of jobs.
        webui_url: the master's web UI (its JSON at ``<webui_url>/json/``).
        master_pid: the master's process (and process group) id.
        worker_pids: each worker's process (and process group) id.
        cores: cores per worker. memory: memory per worker for executors (``1g``).
        directory: the cluster's directory (logs: ``master.log``, ``worker-<i>.log``; executors: ``work/``).
    """

    master_url: str
    webui_url: str
    master_pid: int
    worker_pids: tuple[int, ...]
    cores: int
    memory: str
    directory: str
    started_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    """Whether anything of process group ``pid`` still runs (a daemon's executors may outlive it)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap our own exited child, or it counts as alive (a zombie)
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalCluster:
    """Start, inspect and stop the standalone cluster kept in ``directory`` (default :func:`default_dir`)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_dir()

    @property
    def state_path(self) -> Path:
        """The JSON file recording the cluster started here: ``cluster.json`` in the cluster's directory."""
        return self.directory / "cluster.json"

    def state(self) -> ClusterState | None:
        """The recorded cluster, or None if none was started here."""
        try:
            raw = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError as err:
            msg = (
                f"{self.state_path} is not valid JSON ({err}); stop any Spark daemons by hand "
                "(pkill -f deploy.master.Master; pkill -f deploy.worker.Worker) and delete it"
            )
            raise ClusterError(msg) from None
        raw["worker_pids"] = tuple(raw["worker_pids"])
        return ClusterState(**raw)

    def _env(self) -> dict[str, str]:
        home = spark_home()
        return {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",  # bind the daemons and their web UIs to loopback only
            "SPARK_DAEMON_MEMORY": _DAEMON_MEMORY,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_LOG_DIR": str(self.directory),
        }

    def _spawn(self, log: Path, args: list[str]) -> int:
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True,
            )
        return process.pid

    def start(self, *, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 60.0) -> ClusterState:
        """Start a master and ``workers`` workers on loopback, and wait until every worker is registered.

        Args:
            workers: number of workers (default 2).
            cores: cores each worker offers (default 1).
            memory: memory each worker offers to executors, as Spark writes it (default ``1g``).
            timeout_s: how long to wait for the workers (default 60 s).

        Raises:
            ConfigError: bad counts or memory.
            ClusterError: a cluster is already running here, or a daemon did not come up (with its log's end).
        """
        if workers < 1 or cores < 1:
            msg = f"a cluster needs at least 1 worker with 1 core, got {workers} worker(s) with {cores} core(s)"
            raise ConfigError(msg, field="workers", expected=">= 1", actual=(workers, cores))
        if not _MEMORY.match(memory):
            msg = f"--memory is Spark's notation, like 512m or 2g, got {memory!r}"
            raise ConfigError(msg, field="memory", expected="<n>m or <n>g", actual=memory)
        existing = self.state()
        if existing is not None and self._any_alive(existing):
            msg = (
                f"a cluster is already running from {self.directory} (master {existing.master_url}); "
                "run `dmk cluster stop` first, or pass another --dir"
            )
            raise ClusterError(msg)
        self.directory.mkdir(parents=True, exist_ok=True)
        port, webui = _free_port(), _free_port()
        master_url = f"spark://127.0.0.1:{port}"
        master_pid = self._spawn(self.directory / "master.log", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(webui),
        ])
        state = ClusterState(master_url, f"http://127.0.0.1:{webui}", master_pid, (), cores, memory,
                             str(self.directory))
        self._write(state)  # from here on, `stop` can clean up whatever starts
        try:
            self._wait(state, 0, timeout_s, self.directory / "master.log")
            pids = []
            for i in range(workers):
                pids.append(self._spawn(self.directory / f"worker-{i}.log", [
                    "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1", "--cores", str(cores),
                    "--memory", memory, "--webui-port", "0", "--work-dir", str(self.directory / "work"),
                ]))
                state = ClusterState(**{**asdict(state), "worker_pids": tuple(pids)})
                self._write(state)
            self._wait(state, workers, timeout_s, self.directory / "worker-0.log")
        except BaseException:
            self.stop()
            raise
        return state

    def _write(self, state: ClusterState) -> None:
        temp = self.state_path.with_name(".cluster.json.tmp")
        temp.write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")
        temp.replace(self.state_path)

    def master_json(self, state: ClusterState, timeout_s: float = 5.0) -> dict[str, Any]:
        """The master's view (``/json/``): workers, cores, memory, applications.

        Raises:
            ClusterError: the master's web UI does not answer.
        """
        try:
            with urllib.request.urlopen(f"{state.webui_url}/json/", timeout=timeout_s) as response:  # loopback
                return cast(dict[str, Any], json.loads(response.read()))
        except (OSError, ValueError) as err:
            msg = (
                f"the master's web UI {state.webui_url} does not answer ({err}); see "
                f"{self.directory / 'master.log'}"
            )
            raise ClusterError(msg) from None

    def _wait(self, state: ClusterState, workers: int, timeout_s: float, log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            for pid in (state.master_pid, *state.worker_pids):
                if not _alive(pid):
                    msg = f"a Spark daemon (pid {pid}) exited while starting; its log ends:\n{log_tail(log, 8)}"
                    raise ClusterError(msg)
            try:
                view = self.master_json(state, timeout_s=2.0)
                if view.get("status") == "ALIVE" and int(view.get("aliveworkers", 0)) >= workers:
                    return
            except ClusterError as err:
                last = err
            time.sleep(0.3)
        msg = (
            f"the cluster did not have {workers} live worker(s) within {timeout_s:.0f} s ({last}); "
            f"its log ends:\n{log_tail(log, 8)}"
        )
        raise ClusterError(msg)

    @staticmethod
    def _any_alive(state: ClusterState) -> bool:
        return any(_alive(pid) for pid in (state.master_pid, *state.worker_pids))

    def status(self) -> dict[str, Any]:
        """What runs: ``{"running": bool, "master_url", "webui_url", "workers": [...], "apps": [...]}``."""
        state = self.state()
        if state is None or not self._any_alive(state):
            return {"running": False, "directory": str(self.directory)}
        view = self.master_json(state)
        return {
            "running": True,
            "directory": str(self.directory),
            "master_url": state.master_url,
            "webui_url": state.webui_url,
            "workers": [
                {"id": w["id"], "state": w["state"], "cores": w["cores"], "cores_used": w["coresused"],
                 "memory_mb": w["memory"], "memory_used_mb": w["memoryused"]}
                for w in view.get("workers", []) if w.get("state") != "DEAD"
            ],
            "apps": [{"id": a["id"], "name": a["name"], "cores": a["cores"], "state": a["state"]}
                     for a in view.get("activeapps", [])],
        }

    def kill_worker(self, index: int) -> int:
        """SIGKILL worker ``index`` and its executors (a crashed host, for fault tests); returns its pid."""
        state = self.state()
        if state is None or not 0 <= index < len(state.worker_pids):
            msg = f"no worker {index} in the cluster of {self.directory}"
            raise ClusterError(msg)
        pid = state.worker_pids[index]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        return pid

    def stop(self, timeout_s: float = 20.0) -> list[int]:
        """Stop the workers (and their executors), then the master; SIGKILL what outlives ``timeout_s``.

        Returns:
            The process group ids that were still running.
        """
        state = self.state()
        if state is None:
            return []
        groups = [pid for pid in (*state.worker_pids, state.master_pid) if _alive(pid)]
        for pid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(_alive(pid) for pid in groups) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        while any(_alive(pid) for pid in groups) and time.monotonic() < deadline + 5:
            time.sleep(0.1)
        self.state_path.unlink(missing_ok=True)
        return groups
