"""The names of a run directory's and a checkpoint directory's entries, each defined once.

A run's output directory (``DriverConfig.out_dir``, one per engine) holds one directory of batch files per job
output (:func:`batch_file`, :func:`keyed_file`), per input its dead letters (:func:`dead_letters`), per event-time
job that names its late records :func:`late`, the query progress logs (:func:`progress_log`, idle triggers under
:data:`IDLE`), the StreamingListener's :data:`BATCHES_LOG` and Spark's event log (:data:`EVENT_LOG`). A Structured
Streaming checkpoint holds :data:`OFFSETS`, :data:`COMMITS`, :data:`SOURCES`, :data:`STATE` and :data:`METADATA`.
Writers and readers of every engine take the names from here, so a name is never respelled as a string.

Example:
    >>> from pathlib import Path
    >>> dead_letters(Path("run/legacy"), "events").as_posix(), late(Path("run/legacy"), "windowed").name
    ('run/legacy/dead_letters.events', 'windowed.late')
    >>> dead_letters_input(dead_letters(Path("out"), "events").name), dead_letters_input("counts")
    ('events', None)
    >>> progress_log("out", "counts", idle=True).as_posix()
    'out/progress/idle/counts.jsonl'
    >>> batch_file("out/counts", 7).name, batch_of_file(batch_file("out/counts", 7))
    ('batch=000000000000007.parquet', 7)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "BATCHES_LOG",
    "BATCH_FILES",
    "BROKER_LOG",
    "COLLECTED_OUTPUT",
    "COMMITS",
    "CONTROL",
    "DATASET",
    "DONE",
    "DRAIN",
    "DRIVER_CONFIG",
    "DRIVER_LOG",
    "EVENT_LOG",
    "FAILED",
    "IDLE",
    "INPUTS",
    "JOB_LOG",
    "KEYED_FILES",
    "MANIFEST_SUFFIX",
    "METADATA",
    "METRICS",
    "OFFSETS",
    "OUTPUTS",
    "PRINTED",
    "PROGRESS",
    "READY",
    "REPLAY_LOG",
    "REPORT_HTML",
    "REPORT_MD",
    "SOURCES",
    "STANDIN_PROGRESS",
    "STATE",
    "WARMED",
    "WARMUP",
    "ZOOKEEPER_LOG",
    "batch_file",
    "batch_of_file",
    "dead_letter_dirs",
    "dead_letters",
    "dead_letters_input",
    "input_progress",
    "input_progress_dirs",
    "is_query_checkpoint",
    "keyed_file",
    "late",
    "progress_log",
    "progress_logs",
]

Where = str | os.PathLike[str]

# -- a run's output directory ------------------------------------------------------------------------------

_DEAD_LETTERS = "dead_letters."
_LATE = ".late"
_INPUT_PROGRESS = "progress."

PROGRESS = "progress"
"""The directory of a run's query progress logs: ``<query>.jsonl``, one StreamingQueryProgress a line."""

IDLE = "idle"
"""The directory under :data:`PROGRESS` holding each query's idle triggers (progress without a micro-batch)."""

BATCHES_LOG = Path("metrics") / "batches.jsonl"
"""The legacy StreamingListener's log of completed batches, under the run's output directory."""

EVENT_LOG = "eventlog"
"""Where a driver process's Spark event log goes, under the engine's output directory."""


def dead_letters(out_dir: Where, input_name: str) -> Path:
    """The batch-file directory of input ``input_name``'s dead letters (the same for every engine)."""
    return Path(out_dir) / f"{_DEAD_LETTERS}{input_name}"


def dead_letters_input(name: str) -> str | None:
    """The input whose dead letters a directory or query called ``name`` holds; None if it holds none."""
    return name.removeprefix(_DEAD_LETTERS) if name.startswith(_DEAD_LETTERS) else None


def dead_letter_dirs(out_dir: Where) -> list[Path]:
    """Every input's dead-letter directory a run wrote, sorted by name."""
    return sorted(d for d in Path(out_dir).glob(f"{_DEAD_LETTERS}*") if d.is_dir())


def late(out_dir: Where, job: str) -> Path:
    """The batch-file directory of the records job ``job`` dropped as too late (engines that name them)."""
    return Path(out_dir) / f"{job}{_LATE}"


def progress_log(out_dir: Where, query: str, *, idle: bool = False) -> Path:
    """Query ``query``'s progress log (``idle``: its idle triggers')."""
    directory = Path(out_dir) / PROGRESS
    return (directory / IDLE if idle else directory) / f"{query}.jsonl"


def progress_logs(out_dir: Where) -> list[Path]:
    """Every query's progress log (not the idle triggers'), sorted."""
    return sorted((Path(out_dir) / PROGRESS).glob("*.jsonl"))


def input_progress(out_dir: Where, input_name: str) -> Path:
    """The batch-file directory of the offset ranges each legacy batch read from input ``input_name``."""
    return Path(out_dir) / f"{_INPUT_PROGRESS}{input_name}"


def input_progress_dirs(out_dir: Where) -> list[Path]:
    """Every input's :func:`input_progress` directory of a run, sorted by name."""
    return sorted(d for d in Path(out_dir).glob(f"{_INPUT_PROGRESS}*") if d.is_dir())


# -- a team's job run by dmk compare-jobs (the stand-ins of legacy.standin, modern.standin) ------------------

STANDIN_PROGRESS = "progress.jsonl"
"""The stand-ins' progress log: one :class:`kit.progress.ProgressRow` a line per completed batch."""

PRINTED = "printed.jsonl"
"""The printed output the stand-ins recorded, beside :data:`STANDIN_PROGRESS`."""

INPUTS = "inputs.jsonl"
"""Each input the job opened, beside :data:`STANDIN_PROGRESS`."""

OUTPUTS = "outputs.jsonl"
"""Each write the job made under its own output location (``--output files:LOC``)."""

JOB_LOG = "job.log"
"""The job process's stdout and stderr, under its side's directory."""

COLLECTED_OUTPUT = "output.jsonl"
"""The job's output rows, collected from wherever it wrote them once its run ended (one JSON object a line)."""


# -- a run of dmk compare or dmk compare-jobs: the run directory, one subdirectory per engine or side -------

DATASET = "dataset.parquet"
"""The dataset the run replayed (with its :mod:`kit.dataset` manifest beside it)."""

MANIFEST_SUFFIX = ".manifest.json"
"""A dataset file's manifest is beside it, named as the file plus this (:func:`kit.dataset.generate_to_file`)."""

METRICS = "metrics.json"
"""The run's figures and verdict (:mod:`compare.metrics`)."""

REPORT_MD, REPORT_HTML = "report.md", "report.html"
"""The run's report, as Markdown and as a page."""

BROKER_LOG = "broker.log"
"""The embedded broker's log, when the run started one."""

ZOOKEEPER_LOG = "zookeeper.log"
"""The run's ZooKeeper's log, when it started one."""

DRIVER_CONFIG = "driver-config.json"
"""An engine's :class:`kit.engine.DriverConfig`, as its driver process reads it."""

DRIVER_LOG = "driver.log"
"""An engine's driver process's stdout and stderr."""

REPLAY_LOG = "replay-log.parquet"
"""Where each record of an engine's replay went (topic, partition, offset) and when it was produced."""

CONTROL = "control"
"""An engine's directory of the files its driver process and the harness signal each other with."""

READY, DRAIN, DONE, FAILED = "ready.json", "drain.json", "done.json", "failed.json"
"""Under :data:`CONTROL`: the driver's jobs run; the replay ended (with its end offsets); the driver drained
and stopped; the driver failed (with its error)."""

WARMUP, WARMED = "warmup.json", "warmed.json"
"""Under :data:`CONTROL`: the harness asks the driver to warm up; the driver did."""


# -- a directory of batch files (kit.sink) -----------------------------------------------------------------

_BATCH, _PARQUET = "batch=", ".parquet"

BATCH_FILES = f"{_BATCH}*{_PARQUET}"
"""The glob of a directory's batch files (:func:`batch_file`)."""

KEYED_FILES = "keyed-*.parquet"
"""The glob of a directory's keyed files (:func:`keyed_file`)."""


def batch_file(directory: Where, batch: int) -> Path:
    """Where batch ``batch`` of ``directory`` is (or will be) written; the name sorts in batch order."""
    return Path(directory) / f"{_BATCH}{batch:015d}{_PARQUET}"


def batch_of_file(path: Where) -> int:
    """The batch a :func:`batch_file` holds, from its name.

    Raises:
        ValueError: ``path`` is not named as a batch file.
    """
    name = Path(path).name
    if not (name.startswith(_BATCH) and name.endswith(_PARQUET)):
        msg = f"{path} is not a batch file (batch=<id>.parquet)"
        raise ValueError(msg)
    return int(name[len(_BATCH):-len(_PARQUET)])


def keyed_file(directory: Where, digest: str) -> Path:
    """The keyed file of ``directory`` named after its content's ``digest``."""
    return Path(directory) / f"keyed-{digest}.parquet"


# -- a Structured Streaming checkpoint ---------------------------------------------------------------------

OFFSETS = "offsets"
"""The offset log: one file per planned micro-batch, named by batch id."""

COMMITS = "commits"
"""The commit log: one file per completed micro-batch, named by batch id."""

SOURCES = "sources"
"""Each source's initial offsets, by source index."""

STATE = "state"
"""The state store's files, by operator and partition."""

METADATA = "metadata"
"""The query's id (a file)."""


def is_query_checkpoint(path: Where) -> bool:
    """Whether ``path`` holds a Structured Streaming checkpoint (an offset log or a metadata file)."""
    return (Path(path) / OFFSETS).is_dir() or (Path(path) / METADATA).is_file()
