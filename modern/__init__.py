"""The Structured Streaming side of the kit. It depends on ``kit`` only, never on ``legacy`` or ``compare``.

Public modules:

* :mod:`modern.kafka` -- a Kafka source and sink for Structured Streaming written with PySpark's Python Data
  Source API (``spark.readStream.format("kafka-py")``), with Spark's Kafka option names and offsets;
* :mod:`modern.runner` -- the jobs of a run as named queries with idempotent outputs and progress logs;
* :mod:`modern.engine` -- :class:`kit.engine.Engine` over the runner (what ``compare`` drives);
* :mod:`modern.inspect` -- what a query checkpoint holds (offsets, commits, state);
* :mod:`modern.errors` -- the errors the Structured Streaming side raises (base :class:`~modern.errors.ModernError`).

Example:
    >>> from modern.engine import MODERN
    >>> MODERN.name, MODERN.batches_by_clock
    ('modern', False)

See ``docs/modern.md``.
"""

__all__: list[str] = ["engine", "errors", "inspect", "kafka", "runner"]
