"""``dmk cluster start|stop|status``: a Spark standalone cluster on this machine."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from compare.cli.common import console

if TYPE_CHECKING:
    from compare.cli.common import Commands

__all__ = ["add_cluster"]


def cmd_cluster(args: argparse.Namespace) -> int:
    from kit.cluster import LocalCluster

    cluster = LocalCluster(args.dir)
    if args.cluster_command == "start":
        with console.status(f"starting a master and {args.workers} worker(s) ..."):
            state = cluster.start(workers=args.workers, cores=args.cores, memory=args.memory)
        console.print(f"master   {state.master_url}   (use: --master {state.master_url} or "
                      f"DMK_SPARK_MASTER={state.master_url})", highlight=False)
        console.print(f"web UI   {state.webui_url}", highlight=False)
        console.print(f"workers  {args.workers} x {args.cores} core(s), {args.memory}; logs in {cluster.directory}",
                      highlight=False)
        return 0
    if args.cluster_command == "stop":
        stopped = cluster.stop()
        console.print(
            f"stopped {len(stopped)} Spark daemon(s)" if stopped else f"no cluster runs from {cluster.directory}"
        )
        return 0
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    elif not status["running"]:
        console.print(f"no cluster runs from {status['directory']}", highlight=False)
    else:
        console.print(f"master {status['master_url']}  web UI {status['webui_url']}", highlight=False)
        for w in status["workers"]:
            console.print(f"  worker {w['id']}  {w['state']}  cores {w['cores_used']}/{w['cores']}  memory "
                          f"{w['memory_used_mb']}/{w['memory_mb']} MB", highlight=False)
        for a in status["apps"]:
            console.print(f"  app {a['id']}  {a['name']}  {a['cores']} core(s)  {a['state']}", highlight=False)
    return 0 if status["running"] else 1


def add_cluster(commands: Commands) -> None:
    """Add ``dmk cluster``'s parser to ``commands``."""
    clu = commands.add_parser("cluster", help="a Spark standalone cluster on this machine (docs/deploy.md)")
    clu_commands = clu.add_subparsers(dest="cluster_command", required=True, metavar="SUBCOMMAND")
    for name, text in (("start", "start a master and workers on loopback"), ("stop", "stop them, leaving no process"),
                       ("status", "what runs: workers, cores, applications (exit code 1 if nothing)")):
        sub = clu_commands.add_parser(name, help=text)
        sub.add_argument("--dir",
                         help="the cluster's directory: state, logs (default $DMK_CLUSTER_DIR or ~/.dmk/cluster)")
        if name == "start":
            sub.add_argument("--workers", type=int, default=2, help="workers (default 2)")
            sub.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
            sub.add_argument("--memory", default="1g", help="executor memory per worker (default 1g)")
        if name == "status":
            sub.add_argument("--json", action="store_true", help="machine-readable output")
        sub.set_defaults(func=cmd_cluster)
