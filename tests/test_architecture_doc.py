"""docs/architecture.md lists every module of the five packages, and no module that is gone.

Its "Every module" tables name each module by its path (`` `kit/broker.py` ``). A module added without a line
there, or a line left behind by a module moved or deleted, fails here, naming the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kit", "legacy", "modern", "compare", "migrate")
DOC = ROOT / "docs" / "architecture.md"


def _modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _listed() -> set[str]:
    """The module paths the doc's tables name (a table row starting with a path of one of the packages)."""
    rows = re.findall(r"^\| `((?:%s)/[\w/]+\.py)` \|" % "|".join(PACKAGES), DOC.read_text(encoding="utf-8"), re.M)
    return set(rows)


def test_every_module_is_in_the_architecture_doc() -> None:
    missing = sorted(_modules() - _listed())
    assert not missing, (f"docs/architecture.md's 'Every module' tables lack {missing}: add a row "
                         "| `path` | what it holds | for each")


def test_the_architecture_doc_lists_no_module_that_is_gone() -> None:
    gone = sorted(_listed() - _modules())
    assert not gone, f"docs/architecture.md lists {gone}, which do not exist: remove or rename their rows"
