"""The harness and the ``dmk`` command line (``compare.cli``).

Only the CLI and the tests import this package.
"""

__all__: list[str] = []
