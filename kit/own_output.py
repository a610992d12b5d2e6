"""A job's own output location, redirected to a directory of the run (``dmk compare-jobs --output files:LOC``).

Real jobs write where their authors' machines had room: ``saveAsTextFiles("hdfs://namenode:9000/counts")``,
``rdd.saveAsTextFile("file:///home/me/out")``, ``writeStream.format("parquet").start("/data/out")``. Under
``dmk compare-jobs`` each job's process gets ``$DMK_OUTPUT_REDIRECT`` (an :class:`OutputRedirect`), and the
stand-ins point every write under that location at a fresh local directory of the run instead, so the job
runs unmodified, writes nothing outside the run, and the harness reads what it wrote.

What is redirected (:func:`install`): the RDD writers (``saveAsTextFile``, which DStream's ``saveAsTextFiles``
calls each batch, and the pickle, sequence and Hadoop file writers) and the DataFrame writers (``save``,
``csv``, ``json``, ``parquet``, ``text``, ``orc``, ``option("path", ...)``) in both engines' jobs; the modern
stand-in adds a query's ``writeStream`` path (``option("path", ...)``, ``start(path)``) through
:meth:`Redirector.__call__`. A path is under the location when it is the location, lies below it, or is a
``saveAsTextFiles`` name made from it (``LOC-<time in ms>[.suffix]``). It goes to ``TO/<last part of
LOC><rest>``: ``hdfs://nn:9000/test-1700000000000`` with ``LOC = hdfs://nn:9000/test`` lands in
``TO/test-1700000000000``. Any scheme is a local directory there (no HDFS or S3 runs). Every write the job
makes, redirected or not, is noted through the stand-in's ``record`` (``outputs.jsonl``), so the harness
can say where a job wrote when it wrote nothing under the location it was given.

Example::

    redirect = OutputRedirect(location="hdfs://localhost:9000/test", to="/runs/x/legacy/files")
    redirect.target("hdfs://localhost:9000/test-1700000000000")  # '/runs/x/legacy/files/test-1700000000000'
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import unquote, urlsplit

from kit.errors import ConfigError

__all__ = ["ENV", "OutputRedirect", "Redirector", "install", "install_from_env", "normalized"]

ENV = "DMK_OUTPUT_REDIRECT"
"""The environment variable a job's process gets its :class:`OutputRedirect` in (JSON)."""

_STAMPED = re.compile(r"-\d+(?:\.[^/]*)?(?:/.*)?")
"""What ``saveAsTextFiles(prefix, suffix)`` adds to its prefix: ``-<time in ms>[.suffix]`` (then its part files)."""
_RDD_WRITERS = ("saveAsTextFile", "saveAsPickleFile", "saveAsSequenceFile", "saveAsHadoopFile",
                "saveAsNewAPIHadoopFile")
_FRAME_WRITERS = ("save", "csv", "json", "parquet", "text", "orc")
_NOT_THE_JOBS = (*(str(Path(__file__).resolve().parents[1] / part) + os.sep for part in ("kit", "legacy", "modern")),
                 os.path.dirname(os.__file__) + os.sep)  # the kit's stand-ins and the standard library
_LIBRARIES = (f"{os.sep}pyspark{os.sep}", f"{os.sep}py4j{os.sep}", f"{os.sep}site-packages{os.sep}",
              f"{os.sep}dist-packages{os.sep}")


def normalized(location: str) -> str:
    """``location`` as the paths written under it are compared: a local path (``file:`` too) absolute, else its URI.

    ``file:///home/me/out/`` and ``/home/me/out`` are the same; ``hdfs://nn:9000//a/./b/`` is
    ``hdfs://nn:9000/a/b``. A relative path is taken from the current directory (the job's and the harness's).
    """
    parts = urlsplit(location)
    if len(parts.scheme) <= 1:  # no scheme (a Windows drive letter is no scheme either)
        return os.path.abspath(location)
    if parts.scheme == "file":
        return posixpath.normpath("/" + unquote(parts.path).lstrip("/"))
    path = posixpath.normpath("/" + parts.path.lstrip("/")) if parts.path else ""
    return f"{parts.scheme}://{parts.netloc}{path}"


def checked_location(location: str, option: str = "--output files:LOC") -> str:
    """``location`` if a job can write under it and a directory can stand for it.

    Raises:
        ConfigError: empty, or a file system's root (whose last part would name nothing).
    """
    text = location.strip()
    if not text or not posixpath.basename(normalized(text)):
        msg = (f"{option} needs the directory or prefix the job writes to, got {location!r}: e.g. --output "
               "files:/data/out, files:hdfs://namenode:9000/counts (saveAsTextFiles' prefix) or files:LEGACY,MODERN")
        raise ConfigError(msg, field="output", expected="a location under a root", actual=location)
    return text


@dataclass(frozen=True)
class OutputRedirect:
    """Where a job's writes under ``location`` go instead: the local directory ``to``.

    Attributes:
        location: the job's own location, as it names it (a path, ``file:``, ``hdfs://host:port/path``...).
        to: a local directory of the run.
    """

    location: str
    to: str

    def to_json(self) -> str:
        """The redirect as JSON (what :data:`ENV` holds)."""
        return json.dumps({"location": self.location, "to": self.to})

    @classmethod
    def from_json(cls, text: str) -> OutputRedirect:
        """The redirect :meth:`to_json` wrote.

        Raises:
            ConfigError: not that JSON.
        """
        try:
            fields = json.loads(text)
            return cls(location=str(fields["location"]), to=str(fields["to"]))
        except (ValueError, TypeError, KeyError) as err:
            msg = f"${ENV} must be {{\"location\": ..., \"to\": ...}}, got {text[:100]!r} ({err})"
            raise ConfigError(msg, field=ENV, expected="location and to", actual=text[:100]) from None

    def target(self, path: str) -> str | None:
        """The local path a write of ``path`` goes to, or None when ``path`` is not under the location."""
        location, written = normalized(self.location), normalized(str(path))
        if not written.startswith(location):
            return None
        rest = written[len(location):]
        if rest and not rest.startswith("/") and not _STAMPED.fullmatch(rest):
            return None
        return os.path.join(self.to, posixpath.basename(location) + rest)


class Redirector:
    """The stand-ins' hook: a path a job writes, redirected when under the location; every write recorded.

    Args:
        redirect: where to.
        record: called with ``{"path", "to", "how", "at"}`` for every write (``to`` None: not redirected).
        log: where the ``dmk: output redirected`` lines go (the job's log). Default: ``sys.stderr``.
    """

    def __init__(self, redirect: OutputRedirect, record: Callable[[dict[str, Any]], None], log: Any = None) -> None:
        self.redirect, self.record, self.log = redirect, record, log
        self._said = False

    def __call__(self, path: Any, how: str) -> Any:
        """``path`` or, under the location, its local stand-in (a ``file:`` URI, whatever the default file system)."""
        if not isinstance(path, (str, os.PathLike)):
            return path
        target = self.redirect.target(os.fspath(path))
        self.record({"path": os.fspath(path), "to": target, "how": how, "at": _caller()})
        if target is None:
            return path
        if not self._said:
            self._said = True
            print(f"dmk: output redirected: {os.fspath(path)} → {target} ({how}; later writes under "
                  f"{self.redirect.location} likewise, all noted in outputs.jsonl)", file=self.log or sys.stderr,
                  flush=True)
        return "file://" + target


def _caller() -> str:
    """``FILE:LINE`` of the job's own call (the first frame outside libraries and the kit), or ``?``.

    A DStream's output operation runs in a callback from the JVM: no frame of the job's is on the stack then.
    """
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(_NOT_THE_JOBS) and not any(part in name for part in _LIBRARIES):
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _path_first(original: Callable[..., Any], how: str, redirector: Redirector) -> Callable[..., Any]:
    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            args = (redirector(args[0], how), *args[1:])
        elif kwargs.get("path") is not None:
            kwargs["path"] = redirector(kwargs["path"], how)
        return original(self, *args, **kwargs)

    write.__name__ = write.__qualname__ = original.__name__
    write.__doc__ = original.__doc__
    return write


def install(redirector: Redirector) -> None:
    """Redirect the RDD and DataFrame writers of this process (idempotent: the first redirector stays)."""
    from pyspark import RDD
    from pyspark.sql import DataFrameWriter

    if getattr(RDD, "_dmk_redirected", False):
        return
    for name in _RDD_WRITERS:
        setattr(RDD, name, _path_first(getattr(RDD, name), f"RDD.{name}", redirector))
    for name in _FRAME_WRITERS:
        setattr(DataFrameWriter, name, _path_first(getattr(DataFrameWriter, name), f"DataFrameWriter.{name}",
                                                   redirector))
    option, options = DataFrameWriter.option, DataFrameWriter.options

    def option_redirected(self: Any, key: str, value: Any) -> Any:
        if str(key).lower() == "path":
            value = redirector(value, "DataFrameWriter.option('path')")
        return option(self, key, value)

    def options_redirected(self: Any, **given: Any) -> Any:
        for key in [k for k in given if k.lower() == "path"]:
            given[key] = redirector(given[key], "DataFrameWriter.options(path=)")
        return options(self, **given)

    DataFrameWriter.option = option_redirected  # type: ignore[method-assign]
    DataFrameWriter.options = options_redirected  # type: ignore[method-assign]
    RDD._dmk_redirected = True  # type: ignore[attr-defined]


def install_from_env(record: Callable[[dict[str, Any]], None]) -> Redirector | None:
    """:func:`install` with ``$DMK_OUTPUT_REDIRECT``'s redirect, saying so on stderr; None (nothing done) without it."""
    text = os.environ.get(ENV)
    if not text:
        return None
    redirect = OutputRedirect.from_json(text)
    redirector = Redirector(redirect, record)
    install(redirector)
    scheme = urlsplit(redirect.location).scheme
    remote = len(scheme) > 1 and scheme != "file"
    local = f" ({scheme}:// is a local directory here: no {scheme} runs)" if remote else ""
    print(f"dmk: output redirected: {redirect.location} → {redirect.to}{local}: every write of the job there "
          "(saveAsTextFiles' prefix-<time> directories too) goes to the run's directory", file=sys.stderr, flush=True)
    return redirector
