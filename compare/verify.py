"""``dmk migrate JOB.py --verify``: the draft (or a team's own rewrite) run against the original on a capture.

:func:`verify` writes the draft :mod:`migrate` makes of the job (unless a rewrite is given), runs the original
and the rewrite through :func:`compare.jobs.compare_jobs` on the capture, and returns one :class:`Verdict`:

* ``proven equal``: both jobs ran on the whole capture and their outputs agree;
* ``differs``: they ran, and the first differing keys (or batch, with ``--mode batches``) are named;
* ``cannot verify``: a job could not be run or compared; why, and what to change.

Both jobs get the same arguments (``args``, with compare-jobs' placeholders: the draft keeps the job's argv).
The output compared is inferred from them: ``{output_topic}`` → the topic, ``{output_dir}`` → the directory,
else what the jobs print (``pprint``, the console sink), per batch by default (a DStream's pprint shows each
batch's result).

Example::

    verdict = verify(VerifySettings(job="jobs/wordcount.py", input_file="words.jsonl", key=("_1",),
                                    args="{socket_host} {socket_port}", out_dir=Path("runs/verify")))
    print(verdict.line())
"""

from __future__ import annotations

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
        mode: ``final``, ``all`` or ``batches``; default: ``batches`` for printed output, else ``final``.
        modern: a team's own rewrite to verify instead of the draft.
        draft_path: where to write the draft (default ``out_dir/draft.py``).
        input_kind: compare-jobs' ``--input-kind`` (e.g. ``queue,files``).
        batch_records: compare-jobs' ``--batch-records``.
        bootstrap_servers: a Kafka to use; None starts the embedded broker.
        timeout_s: bound on each wait.
        output: compare-jobs' ``--output`` (default: inferred from ``args``); ``printed:LINE`` picks the printed
            stream of the original's line LINE, and the draft's stream of the same line.
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


def _output_of(args: str) -> str:
    names = {name for _, name, _, _ in string.Formatter().parse(args) if name}
    if "output_topic" in names:
        return "topic"
    if "output_dir" in names:
        return "dir"
    return "printed"


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
    from legacy._py2compat import PROVIDES

    why = ("--legacy-python2" if settings.legacy_python2 else
           f"--legacy-python2, on because the plan found Python 2-era code: {', '.join(found)}")
    return f" The original ran with dmk's Python 2 compatibility layer ({why}): {PROVIDES}."


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
    output = settings.output or _output_of(settings.args)
    chosen = output.partition(":")[2]
    if output.startswith("printed:") and chosen.isdigit():
        output = f"printed:{chosen},{_draft_line(settings.job, rewrite, int(chosen))}"
    mode = settings.mode or ("batches" if output.startswith("printed") else "final")
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
    if str(metrics.get("verdict", "")).upper().startswith("NOTHING"):  # both outputs empty: no proof either way
        warnings = "; ".join(metrics.get("warnings", []))
        return Verdict(CANNOT, f"nothing was compared: neither job wrote a row ({warnings}); see "
                               f"{result.out_dir / 'report.md'}{note}", result.out_dir, rewrite)
    if result.equivalent:
        return Verdict(EQUAL, f"{rewrite} and {settings.job} agree on {metrics['records']:,} records ({mode}, by "
                              f"{', '.join(settings.key)}); report: {result.out_dir / 'report.md'}{note}",
                       result.out_dir, rewrite)
    return Verdict(DIFFERS, f"{metrics['summary'].strip()} Report: {result.out_dir / 'report.md'}{note}",
                   result.out_dir, rewrite)
