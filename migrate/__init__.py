"""``dmk migrate``: a DStream job's migration plan, read from its source with Python's ``ast`` (never run).

The analyser reports every Spark Streaming construct a job uses (``StreamingContext``, DStream methods,
``KafkaUtils`` of ``pyspark.streaming.kafka`` or the kit's drop-in ``legacy.kafka``, ``spark.streaming.*``
configuration keys), at its line, with the Structured Streaming counterpart, the playbook section, whether the
rewrite is mechanical, and the semantic trap to check (:mod:`migrate.rules`). Each finding has a
status: automatic, manual or unresolved. It writes a draft Structured Streaming job (the job's own code, run per
micro-batch by :mod:`migrate.microbatch`), and, given the rewrite, say which findings it addressed and print the
``dmk compare-jobs`` command that proves it.

What the analyser tracks, and what it reports when it cannot trace a call: :mod:`migrate.analysis`.

Example::

    plan = analyse("jobs/wordcount.py")            # JobSourceError if it does not parse
    for f in plan.findings:
        print(f.line, f.construct, f.status, f.counterpart, f.playbook, f.note)
    Path("draft.py").write_text(draft(plan))
    print(render_markdown(plan, review(plan, "jobs/wordcount_ss.py")))

Modules: :mod:`migrate.rules` (the construct table), :mod:`migrate.analysis` (the static reading),
:mod:`migrate.draft` (the draft writer), :mod:`migrate.python2` (Python 2-era code fixed in the draft),
:mod:`migrate.review` (``--modern``), :mod:`migrate.render` (Markdown and JSON), :mod:`migrate.columns`
(lambdas as column expressions), :mod:`migrate.microbatch` (the runtime a draft carries), :mod:`migrate.errors`.
The package imports :mod:`kit` only; the CLI imports it.
"""

from __future__ import annotations

from migrate.analysis import FINDING_KEYS, Finding, MigrationPlan, analyse, analyse_source
from migrate.draft import Draft, draft, make_draft
from migrate.errors import JobSourceError, MigrateError
from migrate.render import render_json, render_markdown
from migrate.review import Review, ReviewItem, compare_jobs_command, review

__all__ = [
    "FINDING_KEYS",
    "Draft",
    "Finding",
    "JobSourceError",
    "MigrateError",
    "MigrationPlan",
    "Review",
    "ReviewItem",
    "analyse",
    "analyse_source",
    "compare_jobs_command",
    "draft",
    "make_draft",
    "render_json",
    "render_markdown",
    "review",
]
