"""``dmk migrate --modern``: which findings a Structured Streaming rewrite addressed, and the command that proves it."""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migrate.analysis import Finding, MigrationPlan, _const, analyse
from migrate.rules import RULES


@dataclass(frozen=True)
class ReviewItem:
    """Whether the rewrite addressed one finding.

    Attributes:
        finding: the legacy finding.
        addressed: whether the rewrite holds one of the rule's counterparts.
        evidence: where (``line 12: readStream, format("kafka")``), or what is missing.
    """

    finding: Finding
    addressed: bool
    evidence: str

    def to_json(self) -> dict[str, Any]:
        """``{"line", "construct", "addressed", "evidence"}``."""
        return {"line": self.finding.line, "construct": self.finding.construct, "addressed": self.addressed,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Review:
    """The rewrite's answer to each legacy finding, and the command that proves the two jobs equivalent.

    Attributes:
        path: the modern job.
        items: one per legacy finding, in the same order.
        command: the ``dmk compare-jobs`` command (placeholders in capitals for what it cannot know).
        command_note: what the placeholders are and what to check before running it.
    """

    path: str
    items: tuple[ReviewItem, ...]
    command: str
    command_note: str

    def to_json(self) -> dict[str, Any]:
        """``{"path", "results", "command", "command_note"}``."""
        return {"path": self.path, "results": [i.to_json() for i in self.items], "command": self.command,
                "command_note": self.command_note}


def _tokens(tree: ast.AST) -> dict[str, int]:
    """What a Structured Streaming job uses, each token with its first line.

    Tokens: method, function and imported names, and ``format:X``, ``option:K``, ``trigger:K``, ``outputMode:M``.
    """
    found: dict[str, int] = {}

    def add(token: str, line: int) -> None:
        found.setdefault(token, line)

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            add(node.attr, node.end_lineno or line)
        elif isinstance(node, ast.Name):
            add(node.id, line)
        elif isinstance(node, ast.alias):
            add((node.asname or node.name).split(".")[-1], line)
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            line = (node.func.end_lineno or line) if isinstance(node.func, ast.Attribute) else line
            first = node.args[0] if node.args else None
            if name in ("format", "outputMode", "option") and isinstance(_const(first), str):
                add(f"{name}:{_const(first)}", line)
            if name == "options":
                for keyword in node.keywords:
                    if keyword.arg:
                        add(f"option:{keyword.arg}", line)
            if name in ("text", "json", "csv", "parquet", "orc") and isinstance(node.func, ast.Attribute):
                add(f"format:{name}", line)
            if name == "trigger":
                for keyword in node.keywords:
                    if keyword.arg:
                        add(f"trigger:{keyword.arg}", line)
    return found


def review(plan: MigrationPlan, modern_path: str | Path) -> Review:
    """Which of ``plan``'s findings the Structured Streaming job in ``modern_path`` addressed (read with ``ast``).

    A finding is addressed when the rewrite holds every token of one of its rule's alternatives (e.g.
    ``readStream`` and ``format("kafka")`` for ``KafkaUtils.createDirectStream``); an unknown construct never
    is. This is evidence that a counterpart is present, not proof of equivalence: the command printed runs both
    jobs on the same data.

    Raises:
        JobSourceError: the modern job cannot be read or parsed.
    """
    modern = analyse(modern_path, role="Structured Streaming job (--modern)")  # the same reading and errors
    tokens = _tokens(ast.parse(modern.source))
    items = []
    for site in plan._sites:
        # An unresolved call (a DStream-only method on something not traced) is looked for like the construct it
        # looks like; an unknown construct has nothing to look for.
        rule = site.rule if site.finding.traced else RULES.get(site.finding.construct)
        if rule is None:
            items.append(ReviewItem(site.finding, False, "unknown construct: check the rewrite by hand"))
            continue
        if not rule.addressed_by:
            items.append(ReviewItem(site.finding, False, "no Structured Streaming counterpart to look for: check "
                                                         "by hand"))
            continue
        for alternative in rule.addressed_by:
            if alternative <= tokens.keys():
                shown = ", ".join(f"{t} (line {tokens[t]})" for t in sorted(alternative, key=lambda t: (tokens[t], t)))
                items.append(ReviewItem(site.finding, True, shown))
                break
        else:
            wanted = " or ".join(" + ".join(sorted(alt)) for alt in rule.addressed_by)
            items.append(ReviewItem(site.finding, False, f"none of: {wanted}"))
    command, note = compare_jobs_command(plan, modern)
    return Review(str(modern_path), tuple(items), command, note)


_PLACEHOLDER_OF = (("output_topic", "output_topic"), ("out_topic", "output_topic"), ("output_dir", "output_dir"),
                   ("bootstrap", "bootstrap"), ("broker", "bootstrap"), ("checkpoint", "checkpoint"),
                   ("topic", "topic"))


def _job_command(plan: MigrationPlan) -> tuple[str, list[str]]:
    """``python PATH ARGS`` for compare-jobs, and the arguments it could not map to a placeholder."""
    args, unmapped = [], []
    for name in plan.argv_names:
        lowered = name.lower()
        placeholder = next((p for fragment, p in _PLACEHOLDER_OF if fragment in lowered), None)
        if placeholder is None:
            args.append(name.upper())
            unmapped.append(name.upper())
        else:
            args.append("{" + placeholder + "}")
    if not plan.argv_names:
        args = ["{bootstrap}", "{topic}", "{output_topic}", "{checkpoint}"]
    return shlex.join(["python", plan.path]) + " " + " ".join(args), unmapped


def compare_jobs_command(legacy: MigrationPlan, modern: MigrationPlan) -> tuple[str, str]:
    """The ``dmk compare-jobs`` command that runs both jobs on one capture, and a note on its placeholders.

    The job commands get compare-jobs' placeholders where the ``__main__`` block unpacks ``sys.argv`` into
    names that say what they are (``bootstrap``, ``topic``, ``output_topic``, ``checkpoint``); ``CAPTURE.jsonl``
    and ``KEY`` (and any argument it could not map, in capitals) are for the user to fill in.
    """
    legacy_cmd, legacy_unmapped = _job_command(legacy)
    modern_cmd, modern_unmapped = _job_command(modern)
    command = (f"dmk compare-jobs --input CAPTURE.jsonl --key KEY --legacy {shlex.quote(legacy_cmd)} "
               f"--modern {shlex.quote(modern_cmd)}")
    notes = ["Fill in CAPTURE.jsonl (a capture of the job's input topic: `dmk capture TOPIC --out CAPTURE.jsonl`) "
             "and KEY (the output's key fields): a static reading cannot know them."]
    for job, unmapped in ((legacy, legacy_unmapped), (modern, modern_unmapped)):
        if job.has_main and not job.argv_names:
            notes.append(f"{job.path} unpacks no sys.argv in a __main__ block: its arguments above are a guess; "
                         "give the command that runs it with compare-jobs' placeholders.")
        if unmapped:
            notes.append(f"{job.path}: replace {', '.join(unmapped)} with the value or a placeholder.")
    if not (legacy.has_main and modern.has_main):
        workload = Path(legacy.path).stem if Path(legacy.path).parent.name == "workloads" else "WORKLOAD"
        notes.append("compare-jobs runs scripts, and this pair has no __main__ block: builder modules "
                     f"(build(ssc, source) / build(spark, source)) are compared with `dmk compare {workload}` (or "
                     "`dmk compare SPEC --legacy MOD:FN --modern MOD:FN`) instead.")
    notes.append("Exit code 0 means the outputs are equivalent by key (docs/compare.md).")
    return command, " ".join(notes)
