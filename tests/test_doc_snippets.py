"""Code shown in the docs is the code in the repository: each snippet block must equal its marked region.

A doc embeds a region of a source file like this::

    <!-- snippet: legacy/workloads/running_counts.py#running_counts -->
    ```python
    ...the lines between "# --8<-- [start:running_counts]" and "# --8<-- [end:running_counts]"...
    ```

The test fails on any drift, naming the doc, the region and the fix. ``python tests/test_doc_snippets.py``
rewrites the blocks from the sources (run it after editing a workload, then review the diff).
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
_BLOCK = re.compile(r"<!-- snippet: (?P<path>[^#\s]+)#(?P<name>[\w.-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


def region(path: str, name: str) -> str:
    """The lines between ``# --8<-- [start:name]`` and ``# --8<-- [end:name]`` of ``path``, dedented."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    start, end = f"# --8<-- [start:{name}]", f"# --8<-- [end:{name}]"
    begins = [i for i, line in enumerate(lines) if line.strip() == start]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise LookupError(f"{path}: expected one '{start}' ... '{end}' region, found {len(begins)} start(s), {len(ends)} end(s)")
    return textwrap.dedent("\n".join(lines[begins[0] + 1 : ends[0]])).strip("\n") + "\n"


def snippets(doc: Path) -> list[re.Match]:
    return list(_BLOCK.finditer(doc.read_text(encoding="utf-8")))


def rewrite(doc: Path) -> bool:
    text = doc.read_text(encoding="utf-8")
    new = _BLOCK.sub(
        lambda m: f"<!-- snippet: {m['path']}#{m['name']} -->\n```{m['lang']}\n{region(m['path'], m['name'])}```", text
    )
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text


CASES = [pytest.param(doc, m, id=f"{doc.name}:{m['path']}#{m['name']}") for doc in DOCS for m in snippets(doc)]


def test_the_playbook_shows_code() -> None:
    assert sum(1 for doc, _ in (c.values for c in CASES) if doc.name == "playbook.md") >= 12


@pytest.mark.parametrize(("doc", "match"), CASES)
def test_snippet_matches_its_source(doc: Path, match: re.Match) -> None:
    expected = region(match["path"], match["name"])
    assert match["body"] == expected, (
        f"{doc.relative_to(ROOT)} shows an outdated copy of {match['path']}#{match['name']}. "
        "Fix: run `python tests/test_doc_snippets.py` and review the diff."
    )


if __name__ == "__main__":
    changed = [doc.name for doc in DOCS if rewrite(doc)]
    print(f"rewrote {', '.join(changed)}" if changed else "all snippets up to date")
    sys.exit(0)
