"""The playbook's example code: each DStream construct and its Structured Streaming counterpart, side by side.

Not part of the installed kit: ``docs/playbook.md`` shows these functions (between the ``--8<--`` markers, kept
equal by ``tests/test_doc_snippets.py``) and ``tests/test_constructs.py`` and ``tests/test_lifecycle.py`` run each
pair on the same data against a pandas oracle.

* ``oracles`` -- the constructs' small dataset, parameters and pandas oracles;
* ``legacy_constructs`` / ``modern_constructs`` -- the data-processing constructs (DStream → DStream,
  DataFrame → DataFrame), one function of the same name per construct;
* ``legacy_lifecycle`` / ``modern_lifecycle`` -- the lifecycle constructs (outputs with offsets, listeners,
  graceful stop, waiting, test inputs, triggers);
* ``metrics`` -- :class:`~examples.playbook.metrics.BatchMetrics`, the figures both sides' listeners report.
"""
