"""The harness: pairs the engines' runs, diffs them against the oracle, measures and reports.

The top level holds the harness:

- ``dmk compare``: :mod:`compare.run` (orchestration), :mod:`compare.settings`, :mod:`compare.inputs` (the default
  dataset, its rows routed to the inputs, the batch caps), :mod:`compare.supervise` (driver processes and faults),
  :mod:`compare.driver` (the driver process), :mod:`compare.measure`, :mod:`compare.diff`, :mod:`compare.report`;
- ``dmk compare-jobs`` and ``dmk migrate --verify``: :mod:`compare.jobs`, :mod:`compare.jobrun` (a job script's
  process), :mod:`compare.verify`;
- ``dmk cutover``: :mod:`compare.cutover`;
- the engines by name: :mod:`compare.engines`; the errors: :mod:`compare.errors`;
- for tests: :mod:`compare.harness` (in-process runs) and :mod:`compare.pytest_plugin`.

Two subpackages sit beside it: :mod:`compare.bench` (``dmk bench``: its runner, raw clients, results and report)
and :mod:`compare.cli` (the ``dmk`` command line, one module per command group). The migration assistant is the
package ``migrate``.

Only the CLI, the tests and the benchmarks import this package.
"""

__all__: list[str] = []
