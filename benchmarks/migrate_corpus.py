"""Construct recall of ``dmk migrate`` on real DStream jobs that are not in this repository.

Usage::

    python benchmarks/migrate_corpus.py --jobs /work/corpus [--data tests/data/migrate_corpus.json] [--verbose]

``--jobs`` is a directory laid out as ``tests/data/migrate_corpus.json`` cites it (``spark-2.4/*.py``,
``public/*.py``): the external jobs are reference data and are never committed, only their citations
(repository, path, commit, sha256) and, per file, the constructs a reader expects at their lines (the ground
truth, determined by reading each job, not by running the analyser).

For each job (a main file and, for jobs split over modules, its helper modules) the analyser reads every file
and its findings are matched to the expected ``(line, construct)`` pairs. Printed per job, per group (Spark's
examples, public jobs, and the jobs held out from development: ``"heldout": true``) and overall:

- found / expected: expected constructs with a finding of the same name at the same line (recall);
- misses: expected constructs without one, split into *reported* (a finding with status ``unresolved`` at that
  line, or the file refused with an error) and *silent* (nothing said at that line);
- false: findings that match no expected construct (an ``unresolved`` finding at a missed construct's line
  is the report of that miss, not a false finding);
- statuses: the findings' ``automatic`` / ``manual`` / ``unresolved`` counts (for an analyser without
  ``status``: ``unresolved`` for unknown constructs, else by ``automatic``).

A file whose sha256 differs from the citation is measured anyway and flagged ``CHANGED``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from migrate import JobSourceError, analyse
from migrate.errors import MigrateError

_DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "migrate_corpus.json"


def _status(finding: object) -> str:
    status = getattr(finding, "status", None)
    if status:
        return str(status)
    if getattr(finding, "unknown", False):
        return "unresolved"
    return "automatic" if getattr(finding, "automatic", False) else "manual"


@dataclass
class Score:
    expected: int = 0
    found: int = 0
    reported: int = 0
    silent: int = 0
    false: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        self.expected += other.expected
        self.found += other.found
        self.reported += other.reported
        self.silent += other.silent
        self.false += other.false
        self.statuses.update(other.statuses)

    def row(self, name: str) -> str:
        recall = f"{100 * self.found / self.expected:5.1f} %" if self.expected else "    -  "
        statuses = " ".join(f"{k}={self.statuses[k]}" for k in ("automatic", "manual", "unresolved"))
        return (f"{name:<60} {self.found:>3}/{self.expected:<3} {recall}  reported={self.reported} "
                f"silent={self.silent} false={self.false}  {statuses}")


def score_file(path: Path, cited: dict, verbose: bool) -> Score:
    score = Score()
    expected = [(e["line"], e["construct"]) for e in cited["expected"]]
    score.expected = len(expected)
    if not path.is_file():
        score.silent = len(expected)
        score.notes.append(f"{cited['local']}: MISSING from --jobs")
        return score
    if hashlib.sha256(path.read_bytes()).hexdigest() != cited["sha256"]:
        score.notes.append(f"{cited['local']}: CHANGED (sha256 differs from the citation)")
    try:
        plan = analyse(path)
    except MigrateError as exc:  # a refused file: every expected construct is a reported miss
        score.reported = len(expected)
        score.notes.append(f"{cited['local']}: refused: {str(exc).splitlines()[0][:160]}")
        return score
    findings = list(plan.findings)
    score.statuses.update(_status(f) for f in findings)
    got = Counter((f.line, f.construct) for f in findings)
    unresolved_lines = {f.line for f in findings if _status(f) == "unresolved"}
    remaining = Counter(got)
    missed_lines: set[int] = set()
    for line, construct in expected:
        if remaining[(line, construct)] > 0:
            remaining[(line, construct)] -= 1
            score.found += 1
        elif line in unresolved_lines:
            score.reported += 1
            missed_lines.add(line)
            if verbose:
                score.notes.append(f"{cited['local']}:{line}: {construct} missed, reported unresolved")
        else:
            score.silent += 1
            if verbose:
                score.notes.append(f"{cited['local']}:{line}: {construct} missed SILENTLY")
    for (line, construct), count in remaining.items():
        for _ in range(count):
            status = next(_status(f) for f in findings if (f.line, f.construct) == (line, construct))
            if status == "unresolved" and line in missed_lines:
                continue
            score.false += 1
            if verbose:
                score.notes.append(f"{cited['local']}:{line}: false finding {construct} ({status})")
    return score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", required=True, type=Path, help="the corpus directory (e.g. /work/corpus)")
    parser.add_argument("--data", type=Path, default=_DATA, help="the citations and ground truth")
    parser.add_argument("--verbose", action="store_true", help="list every miss and false finding")
    args = parser.parse_args(argv)
    if not args.jobs.is_dir():
        print(f"error: --jobs {args.jobs} is not a directory; give the corpus directory (see {args.data}).",
              file=sys.stderr)
        return 2
    data = json.loads(args.data.read_text(encoding="utf-8"))
    groups = {"spark": Score(), "public": Score(), "heldout": Score()}
    sizes = dict.fromkeys(groups, 0)
    for job in data["jobs"]:
        score = Score()
        for cited in job["files"]:
            file_score = score_file(args.jobs / cited["local"], cited, args.verbose)
            score.add(file_score)
            score.notes += file_score.notes
        print(score.row(job["job"]))
        for note in score.notes:
            print(f"    {note}")
        group = "heldout" if job.get("heldout") else "spark" if job["job"].startswith("spark-2.4/") else "public"
        groups[group].add(score)
        sizes[group] += 1
    development, total = Score(), Score()
    for name in ("spark", "public"):
        development.add(groups[name])
    for score in groups.values():
        total.add(score)
    print()
    print(groups["spark"].row(f"Spark 2.x examples ({sizes['spark']} jobs)"))
    print(groups["public"].row(f"public jobs ({sizes['public']} jobs)"))
    print(development.row(f"development corpus ({sizes['spark'] + sizes['public']} jobs)"))
    if sizes["heldout"]:
        print(groups["heldout"].row(f"held out, measured once ({sizes['heldout']} jobs)"))
    print(total.row(f"all ({len(data['jobs'])} jobs)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["JobSourceError", "Score", "main", "score_file"]
