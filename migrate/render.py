"""The plan as Markdown and as JSON (``dmk migrate`` and ``dmk migrate --json``)."""

from __future__ import annotations

import json
from typing import Any

from migrate.analysis import MigrationPlan
from migrate.review import Review


def render_json(plan: MigrationPlan, modern: Review | None = None) -> str:
    """``--json``: ``{"job": path, "findings": [...]}`` (and ``"modern"`` with ``--modern``)."""
    document: dict[str, Any] = {"job": plan.path, "findings": [f.to_json() for f in plan.findings]}
    if modern is not None:
        document["modern"] = modern.to_json()
    return json.dumps(document, indent=2, ensure_ascii=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: MigrationPlan, modern: Review | None = None) -> str:
    """The migration plan as Markdown: a summary, one table row per finding, and the review of a rewrite."""
    findings = plan.findings
    unknown = sum(f.unknown for f in findings)
    automatic = sum(f.automatic for f in findings)
    lines = [
        f"# Migration plan: {plan.path}",
        "",
        f"{len(findings)} findings: {automatic} automatic, {len(findings) - automatic - unknown} manual, "
        f"{unknown} unknown. Read from the source with `ast`; the job was not run.",
        "",
    ]
    if findings:
        lines += ["| line | construct | Structured Streaming | automatic | playbook | check |",
                  "|---:|---|---|---|---|---|"]
        for f in findings:
            anchor = f.playbook.split("#", 1)[1]
            lines.append(f"| {f.line} | `{_cell(f.construct)}` | {_cell(f.counterpart)} | "
                         f"{'yes' if f.automatic else 'no'} | [{anchor}]({f.playbook}) | {_cell(f.note)} |")
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
