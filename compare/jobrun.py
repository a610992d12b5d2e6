"""Run a team's job script, unmodified, with the kit standing in for what PySpark 4 lacks (``dmk compare-jobs``).

    python -m compare.jobrun --engine legacy|modern --progress FILE SCRIPT.py [ARGS...]
    python -m compare.jobrun --engine legacy|modern --progress FILE -m MODULE [ARGS...]

Before the script runs, the engine's stand-ins are installed in this process only (:func:`legacy.standin.install`:
``pyspark.streaming.kafka``; :func:`modern.standin.install`: ``format("kafka")``). Both report the job's
progress to FILE, which is how the harness sees what the job has consumed. The script then runs as
``__main__`` with ``sys.argv`` as it would have had. ``PYSPARK_PYTHON`` defaults to this interpreter, so
Spark's Python workers find the kit. A ``PYSPARK_SUBMIT_ARGS`` the job sets itself loses the Kafka packages
the stand-ins provide (:mod:`kit.submit_args`: a 2.x job's ``--packages spark-streaming-kafka-0-8`` is not
fetched, and its log says so).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import runpy
import sys

__all__ = ["main", "standin"]

_USAGE = "usage: python -m compare.jobrun --engine legacy|modern --progress FILE (SCRIPT.py | -m MODULE) [ARGS...]"


def standin(engine: str) -> str | None:
    """The stand-in module of ``engine``'s jobs, ``<engine>.standin`` in the engine's own package (None: it has none).

    Its ``install(progress_path)`` runs before the script. Found by name, without importing the engine: nothing of
    the other engine's (nor of this one's runner) may be loaded into the job's process.

    Example:
        >>> standin("modern"), standin("kit"), standin("no such")
        ('modern.standin', None, None)
    """
    if not engine.isidentifier():
        return None
    module = f"{engine}.standin"
    try:
        return module if importlib.util.find_spec(module) is not None else None
    except ModuleNotFoundError:
        return None


def main(argv: list[str]) -> int:
    """Install the stand-ins and run the script; 2 on a bad command line, else the script decides the exit."""
    args = list(argv)
    options: dict[str, str] = {}
    while args and args[0] in ("--engine", "--progress") and len(args) >= 2:
        options[args[0][2:]] = args[1]
        args = args[2:]
    module = standin(options.get("engine", ""))
    if module is None or "progress" not in options or not args:
        print(_USAGE, file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kit.lifeline import exit_with_parent

    exit_with_parent()  # the harness gone (any signal), the job and its JVM go too
    from kit import submit_args

    submit_args.install()
    importlib.import_module(module).install(options["progress"])
    if args[0] == "-m" and len(args) >= 2:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
