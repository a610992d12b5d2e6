"""``dmk migrate JOB.py --verify``: the draft (or a team's own rewrite) run against the original on a capture.

:func:`verify` writes the draft :mod:`migrate` makes of the job (unless a rewrite is given), runs the original
and the rewrite through :func:`compare.jobs.compare_jobs` on the capture, and returns one :class:`Verdict`:

* ``proven equal``: both jobs ran on the whole capture and their outputs agree;
* ``differs``: they ran, and the first differing keys (or batch, with ``--mode batches``) are named;
* ``cannot verify``: a job could not be run or compared; why, and what to change.

Both jobs get the same arguments (``args``, with compare-jobs' placeholders: the draft keeps the job's argv).
The output compared is inferred from them: ``{output_topic}`` → the topic, ``{output_dir}`` → the directory;
else, where the job's text names one literal location it writes (``saveAsTextFiles("hdfs://nn:9000/counts")``,
``saveAsTextFile``, a DataFrame or ``writeStream`` path: :func:`written_locations`), the files written there
(``--output files:LOC``, redirected to the run); else what the jobs print (``pprint``, the console sink). Printed
and written files are compared per batch by default (a DStream's pprint shows each batch's result, and
``saveAsTextFiles`` writes each batch's into a directory of its own).

Example::

    verdict = verify(VerifySettings(job="jobs/wordcount.py", input_file="words.jsonl", key=("_1",),
                                    args="{socket_host} {socket_port}", out_dir=Path("runs/verify")))
    print(verdict.line())
"""

from __future__ import annotations

import ast
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compare.errors import EngineFailed
from kit.errors import ConfigError, DatasetError, KitError, RunTimeout

__all__ = ["Verdict", "VerifySettings", "verify"]

EQUAL, DIFFERS, CANNOT = "proven equal", "differs", "cannot verify"


@dataclass(frozen=True)
class VerifySettings:
    """What ``dmk migrate JOB.py --verify`` runs.

    Attributes:
        job: the DStream job's source file.
        input_file: a capture (``dmk capture``).
        key: the output's key columns (printed tuples: ``_1``, ``_2``... or the rewrite's column names).
        out_dir: the run directory (the draft is written there as ``draft.py`` unless ``draft_path``).
        args: the arguments both jobs get, with compare-jobs' placeholders (``{bootstrap} {topic}``,
            ``{socket_host} {socket_port}``, ``{input_dir}``...).
        mode: ``final``, ``all`` or ``batches``; default: ``batches`` for printed output and files, else ``final``.
        modern: a team's own rewrite to verify instead of the draft.
        draft_path: where to write the draft (default ``out_dir/draft.py``).
        input_kind: compare-jobs' ``--input-kind`` (e.g. ``queue,files``).
        batch_records: compare-jobs' ``--batch-records``.
        bootstrap_servers: a Kafka to use; None starts the embedded broker.
        timeout_s: bound on each wait.
        output: compare-jobs' ``--output`` (default: inferred from ``args``, else from a location the job's text
            writes, else ``printed``); ``printed:LINE`` picks the printed stream of the original's line LINE, and the
            draft's stream of the same line.
        settle_batches: compare-jobs' ``--settle-batches`` (default 2): a window sliding every 10 batches needs
            more for its last window to be written.
        legacy_python2: run the original with the Python 2 compatibility layer (compare-jobs
            ``--legacy-python2``). Default (None): on when ``dmk migrate``'s analysis finds Python 2-era code in it.
    """

    job: str
    input_file: str
    key: tuple[str, ...]
    out_dir: Path
    args: str = ""
    mode: str | None = None
    modern: str | None = None
    draft_path: Path | None = None
    input_kind: str | None = None
    batch_records: int | None = None
    bootstrap_servers: str | None = None
    timeout_s: float = 600.0
    output: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    settle_batches: int = 2
    legacy_python2: bool | None = None


@dataclass(frozen=True)
class Verdict:
    """One verification's outcome: ``status`` (:data:`EQUAL`, :data:`DIFFERS`, :data:`CANNOT`) and why."""

    status: str
    detail: str
    run_dir: Path
    rewrite: str

    @property
    def exit_code(self) -> int:
        """0 proven equal, 1 differs, 2 cannot verify (as the CLI exits)."""
        return {EQUAL: 0, DIFFERS: 1}.get(self.status, 2)

    def line(self) -> str:
        """The verdict as one line."""
        return f"{self.status.upper()}: {self.detail}"

    @property
    def verified(self) -> bool | None:
        """The plan's job-level ``verified`` field: proven equal, differs, or null (it could not be verified)."""
        return {EQUAL: True, DIFFERS: False}.get(self.status)

    def to_json(self) -> dict[str, Any]:
        """The verdict in full (``verification`` beside the plan's ``verified``)."""
        return {"status": self.status, "detail": self.detail, "run_dir": str(self.run_dir), "rewrite": self.rewrite}


_RDD_WRITERS = frozenset({"saveAsTextFiles", "saveAsTextFile", "saveAsPickleFile", "saveAsSequenceFile",
                          "saveAsHadoopFile", "saveAsNewAPIHadoopFile"})
_FRAME_WRITERS = frozenset({"save", "start", "csv", "json", "parquet", "text", "orc"})


def _writes(node: ast.expr) -> bool:
    """Whether a call's receiver chain goes through ``.write`` or ``.writeStream`` (a DataFrame writer)."""
    while isinstance(node, (ast.Attribute, ast.Call)):
        if isinstance(node, ast.Attribute) and node.attr in ("write", "writeStream"):
            return True
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return False


def written_locations(source: str) -> list[str]:
    """The literal locations a job's text writes to, in order, each once.

    The first argument (or ``path=``) of ``saveAsTextFiles`` and the other RDD file writers, of a DataFrame or
    ``writeStream`` writer's ``save``/``start``/``csv``/``json``/``parquet``/``text``/``orc``, and the value of
    its ``option("path", ...)``, where it is a string literal. Text that does not parse has none.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method, args = node.func.attr, list(node.args)
        path = next((k.value for k in node.keywords if k.arg == "path"), args[0] if args else None)
        if method == "option" and len(args) == 2 and isinstance(args[0], ast.Constant) and args[0].value == "path":
            path = args[1]
        elif method not in _RDD_WRITERS and not (method in _FRAME_WRITERS and _writes(node.func.value)):
            continue
        if isinstance(path, ast.Constant) and isinstance(path.value, str) and path.value and path.value not in found:
            found.append(path.value)
    return sorted(found, key=lambda location: source.find(location))


def _output_of(args: str, job: str = "", rewrite: str = "") -> str:
    """compare-jobs' ``--output``, inferred from the jobs' arguments and, failing those, the jobs' own text."""
    names = {name for _, name, _, _ in string.Formatter().parse(args) if name}
    if "output_topic" in names:
        return "topic"
    if "output_dir" in names:
        return "dir"
    own = [written_locations(_text(path)) if path else [] for path in (job, rewrite)]
    if len(own[0]) == 1:  # the rewrite (a draft carries the job's) writes its own one, or the same
        return f"files:{own[0][0]}" + (f",{own[1][0]}" if len(own[1]) == 1 and own[1][0] != own[0][0] else "")
    return "printed"


def _text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _draft_line(job: str, rewrite: str, line: int) -> int:
    """The line of the rewrite holding the job's line ``line`` (a draft carries the job's code after its runtime)."""
    wanted = Path(job).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    lines = Path(rewrite).read_text(encoding="utf-8").splitlines()
    marker = next((n for n, text in enumerate(lines) if text.startswith("# ---- end of the runtime")), 0)
    found = [n + 1 for n, text in enumerate(lines) if n >= marker and text.strip() == wanted]
    return found[0] if len(found) == 1 else line


def _python2_era(job: str) -> list[str]:
    """The Python 2-era findings of ``job`` (``line N construct``), by dmk migrate's analysis; none if it fails."""
    from migrate import MigrateError, analyse

    try:
        plan = analyse(job)
    except MigrateError:
        return []
    return [f"line {f.line} {f.construct.removeprefix('Python 2: ')}" for f in plan.findings if f.python2]


def _python2_note(settings: VerifySettings, found: list[str]) -> str:
    from compare.engines import ENGINES, get_engine

    provides = next(e.python2_layer for e in map(get_engine, ENGINES) if e.python2_layer is not None)
    why = ("--legacy-python2" if settings.legacy_python2 else
           f"--legacy-python2, on because the plan found Python 2-era code: {', '.join(found)}")
    return f" The original ran with dmk's Python 2 compatibility layer ({why}): {provides}."


def verify(
    settings: VerifySettings, *, write_draft: Callable[[str], str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Verdict:
    """Run the job and its rewrite (the draft ``write_draft(job)`` returns, or ``settings.modern``) on the capture.

    Never raises for what a run can meet (a job that crashes, outputs that cannot be compared): those are
    ``cannot verify`` verdicts naming the fix.

    Raises:
        ConfigError: no rewrite: neither ``modern`` nor ``write_draft`` given.
    """
    from compare.diff import NOTHING_COMPARED
    from compare.jobs import JobsSettings, compare_jobs

    out = settings.out_dir
    rewrite = settings.modern
    if rewrite is None:
        if write_draft is None:
            msg = "verify needs the rewrite: a draft writer, or --modern NEW.py"
            raise ConfigError(msg, field="modern", expected="a rewrite", actual=None)
        path = settings.draft_path or out / "draft.py"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(write_draft(settings.job), encoding="utf-8")
        except KitError as exc:
            return Verdict(CANNOT, f"no draft could be written: {exc}", out, str(path))
        rewrite = str(path)
    output = settings.output or _output_of(settings.args, settings.job, rewrite)
    chosen = output.partition(":")[2]
    if output.startswith("printed:") and chosen.isdigit():
        output = f"printed:{chosen},{_draft_line(settings.job, rewrite, int(chosen))}"
    mode = settings.mode or ("batches" if output.startswith(("printed", "files:")) else "final")
    found = _python2_era(settings.job) if settings.legacy_python2 is None else []
    python2 = bool(found) if settings.legacy_python2 is None else settings.legacy_python2
    note = _python2_note(settings, found) if python2 else ""
    try:
        jobs = JobsSettings(
            input_file=settings.input_file, key=settings.key, out_dir=out / "compare", mode=mode, output=output,
            legacy=f"python {shlex.quote(settings.job)} {settings.args}",
            modern=f"python {shlex.quote(rewrite)} {settings.args}",
            bootstrap_servers=settings.bootstrap_servers, timeout_s=settings.timeout_s,
            input_kind=settings.input_kind, batch_records=settings.batch_records, legacy_python2=python2,
            settle_batches=settings.settle_batches,
        )
    except ConfigError as exc:
        return Verdict(CANNOT, f"{exc}; give the job's arguments with --args (e.g. --args \"{{bootstrap}} {{topic}}\", "
                               "\"{socket_host} {socket_port}\", \"{input_dir}\") and --input-kind for a queueStream",
                       out, rewrite)
    try:
        result = compare_jobs(jobs, progress)
    except (EngineFailed, RunTimeout, ConfigError, DatasetError) as exc:
        return Verdict(CANNOT, f"{exc}{note}", out / "compare", rewrite)
    metrics = result.metrics
    if metrics.verdict == NOTHING_COMPARED:  # both outputs empty: no proof either way
        warnings = "; ".join(metrics.warnings)
        return Verdict(CANNOT, f"nothing was compared: neither job wrote a row ({warnings}); see "
                               f"{result.out_dir / 'report.md'}{note}", result.out_dir, rewrite)
    if result.equivalent:
        return Verdict(EQUAL, f"{rewrite} and {settings.job} agree on {metrics.records:,} records ({mode}, by "
                              f"{', '.join(settings.key)}); report: {result.out_dir / 'report.md'}{note}",
                       result.out_dir, rewrite)
    return Verdict(DIFFERS, f"{metrics.summary.strip()} Report: {result.out_dir / 'report.md'}{note}",
                   result.out_dir, rewrite)
