"""The harness and the ``dmk`` command line: pairs the engines' runs, diffs, measures and reports.

Modules: :mod:`compare.engines` (the engine registry), :mod:`compare.run` (``dmk compare``: orchestration),
:mod:`compare.settings`, :mod:`compare.supervise` (driver processes and faults), :mod:`compare.driver` (the
driver process), :mod:`compare.measure`, :mod:`compare.diff`, :mod:`compare.report`, :mod:`compare.bench` and
:mod:`compare.bench_results` (``dmk bench``), :mod:`compare.cutover`, :mod:`compare.harness` (in-process runs
for tests), :mod:`compare.pytest_plugin`, :mod:`compare.cli`,
:mod:`compare.errors`.

Only the CLI, the tests and the benchmarks import this package.
"""

__all__: list[str] = []
