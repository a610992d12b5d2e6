"""The plan as Markdown and as JSON (``dmk migrate`` and ``dmk migrate --json``)."""

from __future__ import annotations

import json
from typing import Any

from migrate.analysis import MigrationPlan
from migrate.review import Review


def render_json(plan: MigrationPlan, modern: Review | None = None, *, draft_runs: bool | None = None,
                verified: bool | None = None) -> str:
    """``--json``: the job, its grade and its findings (and ``"modern"`` with ``--modern``).

    ``{"job": path, "draft_runs": bool|null, "verified": bool|null, "summary": {"automatic": n, "manual": n,
    "unresolved": n}, "findings": [...]}``: ``draft_runs`` is whether the draft writer left no part unresolved
    (null when no draft was asked for or the writer cannot tell), ``verified`` whether ``--verify`` proved the
    draft equal to the original (null unless it ran).
    """
    document: dict[str, Any] = {
        "job": plan.path, "draft_runs": draft_runs, "verified": verified, "summary": plan.counts(),
        "findings": [f.to_json() for f in plan.findings],
    }
    if modern is not None:
        document["modern"] = modern.to_json()
    return json.dumps(document, indent=2, ensure_ascii=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: MigrationPlan, modern: Review | None = None) -> str:
    """The migration plan as Markdown: a summary, one table row per finding, and the review of a rewrite."""
    findings = plan.findings
    counts = plan.counts()
    lines = [
        f"# Migration plan: {plan.path}",
        "",
        f"{len(findings)} findings: {counts['automatic']} automatic, {counts['manual']} manual, "
        f"{counts['unresolved']} unresolved. Read from the source with `ast`; the job was not run.",
        "",
    ]
    python2 = [f for f in findings if f.python2]
    if python2:  # what the draft does about them (migrate.python2), and what is left to a person
        fixed = [f for f in python2 if f.automatic]
        manual = [f for f in python2 if not f.automatic]
        text = f"Python 2-era code: {len(fixed)} of {len(python2)} findings fixed in the draft"
        if fixed:
            text += " (" + ", ".join(f"line {f.line} `{f.construct.removeprefix('Python 2: ')}`" for f in fixed) + ")"
        if manual:
            text += "; to port by hand: " + ", ".join(f"line {f.line} `{f.construct}`" for f in manual)
        lines += [text + ". `dmk migrate --verify` runs the original with dmk's Python 2 compatibility layer "
                  "(docs/compare.md#python-2-era-originals).", ""]
    unresolved = [f for f in findings if f.status == "unresolved"]
    if unresolved:
        lines += ["Unresolved, to check by hand before trusting this plan: "
                  + ", ".join(f"line {f.line} `{f.construct}`" for f in unresolved) + ".", ""]
    if findings:
        lines += ["| line | construct | Structured Streaming | status | playbook | check |",
                  "|---:|---|---|---|---|---|"]
        for f in findings:
            anchor = f.playbook.split("#", 1)[1]
            lines.append(f"| {f.line} | `{_cell(f.construct)}` | {_cell(f.counterpart)} | "
                         f"{f.status} | [{anchor}]({f.playbook}) | {_cell(f.note)} |")
    else:
        lines.append("No DStream, StreamingContext or KafkaUtils construct found.")
    if modern is not None:
        lines += ["", f"## The rewrite: {modern.path}", "",
                  f"{sum(i.addressed for i in modern.items)} of {len(modern.items)} findings addressed.", "",
                  "| line | construct | addressed | evidence in the rewrite |", "|---:|---|---|---|"]
        for item in modern.items:
            lines.append(f"| {item.finding.line} | `{_cell(item.finding.construct)}` | "
                         f"{'yes' if item.addressed else 'NO'} | {_cell(item.evidence)} |")
        lines += ["", "## Prove it", "", "```bash", modern.command, "```", "", modern.command_note]
    return "\n".join(lines) + "\n"
