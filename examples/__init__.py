"""Worked examples of your own jobs under ``dmk compare`` and the pytest plugin (see docs/compare.md)."""
