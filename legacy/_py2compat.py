"""Python 2 as a Python 2-era DStream job's ORIGINAL had it, for ``dmk compare-jobs --legacy-python2``.

To be proven equal to its draft, the original must run; PySpark 4 runs Python 3 only, where a Python 2-era job
fails at its first Python 2 line. With ``--legacy-python2`` (which ``dmk migrate --verify`` turns on when the
analysis found Python 2-era code), the legacy job's process and its Spark Python workers get what such jobs use
of Python 2 (:data:`PROVIDES`), and the job's log says so. Nothing else changes: print statements and other
Python 2 syntax still do not parse (``dmk migrate`` refuses those jobs, naming the fix), and ``dict.iteritems``
/ ``has_key`` cannot be given back (Python 3's built-in ``dict`` takes no new methods).

How it reaches the workers: a job's functions run in Spark's Python workers, whose builtins are their own. The
layer writes a ``sitecustomize.py`` (which Python imports at start-up) calling :func:`install_quietly` into a
directory of the run, and puts that directory first on ``PYTHONPATH`` before the job starts its SparkContext:
the JVM, and so every Python worker it starts, inherits it.

Example (what :func:`legacy.standin.install` does when ``$DMK_LEGACY_PYTHON2`` is set)::

    install(Path("runs/x/legacy"))   # this process, and (through PYTHONPATH) its Spark workers
"""

from __future__ import annotations

import builtins
import codecs
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["ENV", "PROVIDES", "install", "install_quietly"]

ENV = "DMK_LEGACY_PYTHON2"
"""Set (to ``1``) in the legacy job's environment by ``dmk compare-jobs --legacy-python2``."""

PROVIDES = (
    "reload(sys) returns sys (Python 2's idiom to reach sys.setdefaultencoding); reload(other) is "
    "importlib.reload; sys.setdefaultencoding('utf-8' or 'ascii') is a no-op (Python 3's str is already "
    "Unicode and UTF-8 its default: the same for UTF-8 data; any other encoding stops the job, as Python 3 "
    "cannot do it); kafka-python producers built without serializers send a str as its UTF-8 bytes (what a "
    "Python 2 str was on the wire; bytes and None pass through); unicode = str, basestring = (str, bytes), "
    "long = int, unichr = chr, xrange = range"
)
"""What the layer provides, as the run's log and verdict say it."""

_NO_OP = ("utf-8", "ascii")


def _reload(module: ModuleType) -> ModuleType:
    """Python 2's builtin ``reload``: ``reload(sys)`` returns ``sys`` unchanged.

    Re-initialising ``sys`` would reset the streams the harness records the job's prints on; Python 2 jobs
    reloaded it only to reach ``sys.setdefaultencoding``, which the layer provides.
    """
    if module is sys:
        return sys
    return importlib.reload(module)


def _setdefaultencoding(encoding: str) -> None:
    """Python 2's ``sys.setdefaultencoding``: a no-op for UTF-8 (and ASCII), an error naming the problem otherwise."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        name = str(encoding)
    if name not in _NO_OP:
        msg = (f"sys.setdefaultencoding({encoding!r}): dmk's Python 2 compatibility layer (--legacy-python2) "
               "emulates it for UTF-8 (and ASCII) only, where Python 3's str behaves as Python 2's did with it; "
               "port the job's byte/text handling to Python 3 by hand")
        raise NotImplementedError(msg)


def _python2_bytes(value: Any) -> Any:
    """A str as a Python 2 str went to Kafka: its UTF-8 bytes; bytes and None pass through."""
    return value.encode("utf-8") if isinstance(value, str) else value


def _kafka_producers() -> None:
    """kafka-python's ``KafkaProducer``: a serializer the job did not give encodes ``str`` as UTF-8."""
    try:
        from kafka import KafkaProducer
    except ImportError:  # the job cannot use kafka-python either
        return
    if getattr(KafkaProducer.__init__, "_dmk_python2", False):
        return
    init = KafkaProducer.__init__

    def __init__(self: Any, **configs: Any) -> None:  # noqa: N807 - the method it stands in for
        for name in ("value_serializer", "key_serializer"):
            if configs.get(name) is None:
                configs[name] = _python2_bytes
        init(self, **configs)

    __init__._dmk_python2 = True  # type: ignore[attr-defined]
    KafkaProducer.__init__ = __init__


def install_quietly() -> None:
    """The layer in this process (a Spark Python worker's, through ``sitecustomize``). Idempotent."""
    names = {"reload": _reload, "unicode": str, "basestring": (str, bytes), "long": int, "unichr": chr,
             "xrange": range}
    for name, value in names.items():
        if not hasattr(builtins, name):
            setattr(builtins, name, value)
    if not hasattr(sys, "setdefaultencoding"):
        sys.setdefaultencoding = _setdefaultencoding  # type: ignore[attr-defined]
    _kafka_producers()


_SITECUSTOMIZE = '''"""By dmk compare-jobs --legacy-python2 (legacy/_py2compat.py): Python 2 builtins in workers."""
import importlib.machinery
import importlib.util
import os
import sys

import legacy._py2compat

legacy._py2compat.install_quietly()
# The sitecustomize this one shadows (a distribution's), run as Python would have run it.
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or os.curdir) != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
'''


def install(run_dir: Path) -> None:
    """The layer in this process and in the Spark Python workers it will start; says so on stderr (the job's log).

    Args:
        run_dir: the legacy job's run directory: the workers' ``sitecustomize.py`` is written under it.
    """
    install_quietly()
    site = Path(run_dir) / "python2-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    print(f"dmk: --legacy-python2: this job runs under Python {sys.version_info[0]}.{sys.version_info[1]} with dmk's "
          f"Python 2 compatibility layer (legacy/_py2compat.py; in its Spark workers through {site}): {PROVIDES}",
          file=sys.stderr, flush=True)
