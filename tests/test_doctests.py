"""Every ``>>>`` example in the kit's modules runs, in the default tier (chispa's habit: examples are tests).

An example that needs Spark or a broker is a plain ``Example::`` block instead, never a skipped ``>>>``: a
skipped example is one nobody runs, so it drifts from the code without a test noticing.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kit", "legacy", "modern", "compare", "migrate", "examples/playbook")


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


WITH_EXAMPLES = [_module(path) for path in _sources() if ">>>" in path.read_text(encoding="utf-8")]


def test_the_examples_are_found() -> None:
    assert len(WITH_EXAMPLES) >= 30 and "compare.diff" in WITH_EXAMPLES and "kit.dataset" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_module_s_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, verbose=False, report=True)
    assert result.attempted > 0, f"{name}: its '>>>' examples were not collected (inside a string, not a docstring?)"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (printed above)"


def test_no_example_is_skipped() -> None:
    skipped = [str(p.relative_to(ROOT)) for p in _sources() if "doctest: +SKIP" in p.read_text(encoding="utf-8")]
    assert skipped == [], f"{skipped}: make a skipped '>>>' example an 'Example::' block, or make it run"
