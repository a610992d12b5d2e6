"""The five packages' module graph: modules, import edges, imports across packages, the largest files, lines per folder.

Usage::

    python benchmarks/module_graph.py [ROOT]        # ROOT: a checkout (default: this one)
    git archive <commit> | tar -x -C /tmp/old && python benchmarks/module_graph.py /tmp/old   # an earlier commit

An edge is an absolute ``import`` or ``from ... import`` anywhere in a module (function-local ones count) of
another module of the five packages. Issue 41's closing note compares two commits with it.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

PACKAGES = ("kit", "legacy", "modern", "compare", "migrate")


def graph(root: Path) -> dict[str, object]:
    """The figures of the checkout at ``root``."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    edges: set[tuple[str, str]] = set()
    lines: collections.Counter[str] = collections.Counter()
    sizes = []
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        count = text.count("\n")
        sizes.append((count, path.relative_to(root).as_posix()))
        lines[path.parent.relative_to(root).as_posix()] += count
        for node in ast.walk(ast.parse(text)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add((name, target))
    across = collections.Counter((a.split(".")[0], b.split(".")[0]) for a, b in edges
                                 if a.split(".")[0] != b.split(".")[0])
    return {
        "modules": len(modules),
        "import_edges": len(edges),
        "across_packages": {f"{a} -> {b}": n for (a, b), n in sorted(across.items())},
        "compare_to_engines": sorted(f"{a} -> {b}" for a, b in edges
                                     if a.startswith("compare") and b.split(".")[0] in ("legacy", "modern")),
        "largest_files": [f"{path} {count:,}" for count, path in sorted(sizes, reverse=True)[:8]],
        "lines_per_folder": dict(sorted(lines.items())),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(graph(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent),
                     indent=2))
