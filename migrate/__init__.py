"""``dmk migrate``: a DStream job's migration plan, read from its source with Python's ``ast`` (never run).

The analyser reports every Spark Streaming construct a job uses (``StreamingContext``, DStream methods,
``KafkaUtils`` of ``pyspark.streaming.kafka`` or the kit's drop-in ``legacy.kafka``, ``spark.streaming.*``
configuration keys), at its line, with the Structured Streaming counterpart, the playbook section, whether the
rewrite is mechanical, and the semantic trap to check (:mod:`migrate.rules`). It can write a draft
Structured Streaming job, and, given the rewrite, say which findings it addressed and print the
``dmk compare-jobs`` command that proves it.

What the analyser tracks (a static reading; docs/migrate.md lists what it cannot know):

- imports and their aliases (``import pyspark.streaming as ps``, ``from pyspark.streaming.kafka import
  KafkaUtils as KU``);
- variables assigned a tracked value (a ``StreamingContext``, a DStream, a list or dict of DStreams), through
  tuple unpacking, ``for`` loops and comprehensions, and the return values of the job's own functions;
- function parameters: annotated ``StreamingContext`` or ``DStream`` (any import of them), else by name: ``ssc``
  is a StreamingContext; ``stream``, ``dstream`` and names ending in ``_stream`` or ``_dstream`` are DStreams
  (Spark's programming guide and examples name them so); ``source`` next to an ``ssc`` parameter is the kit's
  ``legacy.workloads.Source`` (the builder contract ``build(ssc, source)``). Lambda parameters are never
  tracked: inside ``foreachRDD``/``transform`` they are RDDs;
- chained calls: each call of a chain is one finding, at the line of its method name.

A method called on a tracked StreamingContext or DStream that the table does not know is reported as unknown,
never skipped.

Example::

    plan = analyse("jobs/wordcount.py")            # JobSourceError if it does not parse
    for f in plan.findings:
        print(f.line, f.construct, f.counterpart, f.playbook, f.automatic, f.note)
    Path("draft.py").write_text(draft(plan))
    print(render_markdown(plan, review(plan, "jobs/wordcount_ss.py")))

Modules: :mod:`migrate.rules` (the construct table), :mod:`migrate.analysis` (the static reading),
:mod:`migrate.draft` (the draft writer), :mod:`migrate.review` (``--modern``), :mod:`migrate.render`
(Markdown and JSON), :mod:`migrate.errors`. The package imports :mod:`kit` only; the CLI imports it.
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
