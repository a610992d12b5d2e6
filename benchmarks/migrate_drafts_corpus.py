"""Do the drafts of a directory of DStream jobs run as written? (issue 36: "≥ 60 % of the jobs' drafts run").

    python benchmarks/migrate_drafts_corpus.py --jobs /work/corpus [--only NAME] [--timeout 240]

For each job (``MANIFEST.json``'s entries that are not helper modules, else every ``*.py``), writes its draft
(``migrate.draft.make_draft``; helper modules beside it are drafted too), then runs the draft unmodified as its
own process and feeds it what it reads: a socket server on the job's own host and port (or on a free port
passed where the job takes it from ``sys.argv``), files in its input directory, or records in a topic of an
embedded Kafka broker (on the job's own ``localhost:9092`` when it names that one), a few lines of words
every few seconds. A draft **runs** when it prints or writes output from that input and no Python traceback
shows in its log within the timeout; else the line says why (refused: what is unresolved; crashed: the first
traceback line; no output). Jobs whose input is elsewhere (an absolute directory of their author's machine,
a ZooKeeper quorum) are reported as such. The jobs are never committed (docs/migrate.md, "the draft").
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from migrate import analyse  # noqa: E402
from migrate.draft import make_draft  # noqa: E402

LINES = ["to be or not to be", "that is the question", "to be quick"]


def _jobs(root: Path) -> list[tuple[Path, list[Path]]]:
    manifest = root / "MANIFEST.json"
    if manifest.exists():
        entries = json.loads(manifest.read_text())
        helpers: dict[str, list[Path]] = {}
        for e in entries:
            if e.get("role") == "helper module":
                helpers.setdefault(e["job"], []).append(root / e["local"])
        mains = [e for e in entries if e.get("role") != "helper module"]
        return [(root / e["local"], helpers.get(e["local"], [])) for e in mains]
    return [(p, []) for p in sorted(root.rglob("*.py"))]


def _argv_uses(tree: ast.Module) -> dict[int, str]:
    """Which ``sys.argv[i]`` a source or sink call takes, by role."""
    roles: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names = {"socketTextStream": ["host", "port"], "textFileStream": ["directory"]}.get(node.func.attr)
            for argument, role in zip(node.args, names or [], strict=False):
                for sub in ast.walk(argument):
                    if (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Attribute)
                            and sub.value.attr == "argv" and isinstance(sub.slice, ast.Constant)):
                        roles[int(sub.slice.value)] = role
    return roles


def _value(role: str, ctx: dict[str, str]) -> str:
    role = role.lower()
    for words, key in ((("host",), "host"), (("port",), "port"), (("broker", "bootstrap", "server", "zk"), "broker"),
                       (("topic",), "topic"), (("checkpoint",), "checkpoint"), (("dir", "input", "path"), "directory"),
                       (("output", "out", "file"), "output")):
        if any(w in role for w in words):
            return ctx[key]
    return ctx["directory"]


def _literal_socket(tree: ast.Module) -> tuple[str, int] | None:
    consts: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    consts[t.id] = node.value.value
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "socketTextStream":
            values = []
            for a in node.args[:2]:
                if isinstance(a, ast.Constant):
                    values.append(a.value)
                elif isinstance(a, ast.Name) and a.id in consts:
                    values.append(consts[a.id])
                elif isinstance(a, ast.Attribute) and a.attr in consts:  # spark_config.IP
                    values.append(consts[a.attr])
            if len(values) == 2 and isinstance(values[1], int):
                return str(values[0]), values[1]
    return None


def _helper_consts(helpers: list[Path]) -> dict[str, object]:
    consts: dict[str, object] = {}
    for h in helpers:
        for node in ast.walk(ast.parse(h.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        consts[t.id] = node.value.value
    return consts


class _Server:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1" if host in ("localhost", "127.0.0.1", "0.0.0.0") else host, port))
        self.sock.listen(4)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def send(self, lines: list[str]) -> None:
        for c in list(self.conns):
            try:
                c.sendall("".join(line + "\n" for line in lines).encode())
            except OSError:
                self.conns.remove(c)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, so the port is free again
        except OSError:
            pass
        self.sock.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_one(job: Path, helpers: list[Path], timeout_s: float, broker: str | None) -> tuple[str, str]:
    plan = analyse(job)
    result = make_draft(plan)
    if not result.runs:
        return "refused", "; ".join(result.unresolved)
    work = Path(tempfile.mkdtemp(prefix="draft-run-"))
    prefix = job.name.split("__")[0] + "__" + job.name.split("__")[1] + "__" if "__" in job.name else ""
    for helper in helpers:  # beside the draft, under the module path the job imports
        relative = helper.name[len(prefix):] if prefix and helper.name.startswith(prefix) else helper.name
        parts = relative[:-3].split("__")
        tail = [p for p in parts if p not in job.name[len(prefix):-3].split("__")[:-1]] or parts[-1:]
        target = work.joinpath(*tail[:-1], tail[-1] + ".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(make_draft(analyse(helper)).text)
    draft = work / "draft.py"
    draft.write_text(result.text)
    tree = ast.parse(plan.source)
    kinds = {f.construct for f in plan.findings}
    ctx = {"host": "127.0.0.1", "port": str(_free_port()), "broker": broker or "", "topic": "words",
           "checkpoint": str(work / "ckpt"), "directory": str(work / "in"), "output": str(work / "out.txt")}
    (work / "in").mkdir()
    argv: dict[int, str] = {}
    for index, name in enumerate(plan.argv_names, 1):
        argv[index] = _value(name, ctx)
    for index, role in _argv_uses(tree).items():
        argv[index] = _value(role, ctx)
    args = [argv.get(i, ctx["directory"]) for i in range(1, max(argv, default=0) + 1)]
    server = None
    feed_dir: Path | None = None
    engine = None
    if "StreamingContext.socketTextStream" in kinds:
        literal = _literal_socket(tree)
        if literal is None and helpers:
            consts = _helper_consts(helpers)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "socketTextStream":
                    vals = [consts.get(getattr(a, "attr", getattr(a, "id", "")), None) for a in node.args[:2]]
                    if len(vals) == 2 and isinstance(vals[1], int):
                        literal = (str(vals[0]), vals[1])
        host, port = literal if literal else (ctx["host"], int(ctx["port"]))
        try:
            server = _Server(host, port)
        except OSError as exc:
            return "not run", f"port {port} is taken ({exc})"
    if "StreamingContext.textFileStream" in kinds:
        if not any(r == "directory" for r in _argv_uses(tree).values()):
            return "not run", "reads a directory of its author's machine (a literal path)"
        feed_dir = work / "in"
    if "KafkaUtils.createDirectStream" in kinds:
        if broker is None:
            return "not run", "no Kafka broker (give --kafka)"
        engine = "modern"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false pyspark-shell"}
    command = [sys.executable, str(draft), *args] if engine is None else [
        sys.executable, "-m", "compare.jobrun", "--engine", engine, "--progress", str(work / "progress.jsonl"),
        str(draft), *args]
    env["PYTHONPATH"] = os.pathsep.join([str(work), str(REPO)] if engine else [str(work)])
    log = (work / "job.log").open("w")
    out = (work / "stdout.txt").open("w")
    process = subprocess.Popen(command, cwd=work, env=env, stdout=out, stderr=log, text=True)
    started = time.monotonic()
    verdict = ("no output", f"nothing printed or written from the input in {timeout_s:.0f} s; log {work}/job.log")
    number = 0
    try:
        while time.monotonic() - started < timeout_s:
            time.sleep(3)
            text = (work / "stdout.txt").read_text(errors="replace")
            if "Time: " not in text and time.monotonic() - started < 120:
                continue  # input only once the job runs batches: DStreams skip the files there before the start
            number += 1
            if server is not None:
                server.send(LINES)
            if feed_dir is not None:
                staged = work / "staged.txt"
                staged.write_text("\n".join(LINES) + "\n")
                staged.rename(feed_dir / f"f{number}.txt")
            if engine is not None:
                _produce(broker or "", ctx["topic"], plan.source)
            text = (work / "stdout.txt").read_text(errors="replace")
            errors = (work / "job.log").read_text(errors="replace")
            trace = re.search(r"Traceback \(most recent call last\):.*?\n(\w[\w.]*(?:Error|Exception)[^\n]*)", errors,
                              re.S)
            if trace:
                verdict = ("crashed", trace.group(1)[:300])
                break
            if process.poll() is not None:
                verdict = ("ended", f"exit {process.returncode}; log {work}/job.log")
                break
            data = [line for line in text.splitlines() if line and not line.startswith(("---", "Time: "))]
            written = [p for p in work.rglob("*") if p.is_file() and p.stat().st_size and "ckpt" not in p.parts
                       and p.parent != work / "in" and p.name not in ("job.log", "stdout.txt", "draft.py",
                                                                        "staged.txt", "progress.jsonl")
                       and not p.name.endswith(".py") and "checkpoint" not in str(p) and "dstream-queue" not in str(p)]
            if data or written:
                verdict = ("runs", f"{len(data)} lines printed, {len(written)} files written")
                break
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()
        out.close()
        if server is not None:
            server.close()
    if verdict[0] == "runs":
        shutil.rmtree(work, ignore_errors=True)
    return verdict


def _produce(broker: str, default_topic: str, source: str) -> None:
    from kit.kafka import Kafka

    topics = set(re.findall(r"""\[\s*["']([\w.-]+)["']\s*\]""", source)) or {default_topic}
    with Kafka(broker) as kafka:
        sender = kafka.sender(acks="all")
        try:
            for topic in topics | {default_topic}:
                for line in LINES:
                    sender.send(topic, key=None, value=line.encode())
            sender.flush(30.0)
        finally:
            sender.close()


def main() -> int:
    """Run every job's draft; one line each, then the count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", required=True, type=Path)
    parser.add_argument("--only", default=None)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--kafka", default=None, help="bootstrap servers; 'embedded' starts one on localhost:9092")
    args = parser.parse_args()
    broker_handle = None
    broker = args.kafka
    if broker == "embedded":
        from kit.broker import EmbeddedBroker

        broker_handle = EmbeddedBroker(port=9092)
        broker_handle.start()
        broker = broker_handle.bootstrap_servers
    results = []
    try:
        for job, helpers in _jobs(args.jobs):
            if args.only and args.only not in job.name:
                continue
            verdict, why = run_one(job, helpers, args.timeout, broker)
            results.append(verdict)
            print(f"{verdict:9} {job.relative_to(args.jobs)}: {why}", flush=True)
    finally:
        if broker_handle is not None:
            broker_handle.stop()
    print(f"{results.count('runs')} of {len(results)} drafts ran as written", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
