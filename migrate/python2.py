"""Python 2-era code in a DStream job, fixed for Python 3 in its draft (``dmk migrate --out``).

The analysis flags Python 2-era code that still parses as Python 3 but fails there (:data:`migrate.rules.
PYTHON2_RULES`). For each such finding, :class:`Fixer` says whether the fix is mechanical and what it is; a
finding with a fix is ``automatic``, one without stays ``manual`` (the draft refuses to start naming it).
:func:`apply_fixes` writes the fixes into the job's text, each in place, keeping every line where it was (so the
plan's line numbers hold in the draft), with a ``# dmk migrate:`` comment on the line:

* ``reload(sys)`` and ``sys.setdefaultencoding("utf-8")`` (or ``"ascii"``) statements are dropped: the line
  becomes a comment (``pass`` when it was the only statement of its block). Python 3's ``str`` is Unicode and its
  default encoding UTF-8; ``reload(sys)`` only served to reach ``setdefaultencoding``. Another encoding stays
  manual: Python 3 has no implicit str/bytes conversion to give it;
* ``unicode`` → ``str``, ``basestring`` → ``str``, ``long`` → ``int``, ``unichr`` → ``chr``, ``xrange`` →
  ``range``, ``d.iteritems()`` → ``d.items()`` (``itervalues``, ``iterkeys`` likewise), ``d.has_key(k)`` →
  ``(k in d)``: 2to3's fixers, applied to the flagged names only;
* a kafka-python ``KafkaProducer(...)`` that is sent a ``str`` gets ``value_serializer`` and ``key_serializer``
  (those it does not set) encoding a ``str`` as UTF-8, passing bytes and None through. A Python 2 ``str`` was
  bytes: UTF-8 text went on the wire as it was, so the draft writes the same bytes.

Example::

    fixer = Fixer(tree, source, producers)       # producers: receiver text -> its KafkaProducer(...) calls
    fix = fixer.fix("Python 2: unicode", node)   # None: not mechanical here (the finding stays manual)
    fixed, applied = apply_fixes(source, [fix])
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["RENAMED", "SERIALIZER", "SERIALIZER_DEF", "Edit", "Fix", "Fixer", "apply_fixes"]

SERIALIZER = "_python2_bytes"
"""The serializer a draft gives a kafka-python producer that was sent ``str`` (defined by :data:`SERIALIZER_DEF`)."""

SERIALIZER_DEF = (
    f"def {SERIALIZER}(value):",
    '    """A str as a Python 2 str went to Kafka: its UTF-8 bytes (bytes and None pass through)."""',
    '    return value.encode("utf-8") if isinstance(value, str) else value',
)
"""The serializer's definition, which the draft carries before the job's code when a producer uses it."""

RENAMED = {"unicode": "str", "basestring": "str", "long": "int", "unichr": "chr", "xrange": "range"}
"""Python 2 builtins and their Python 3 names (2to3's)."""

_NO_OP_ENCODINGS = ("utf-8", "ascii")  # Python 3 decodes as UTF-8 (a superset of ASCII): dropping the call is exact
_MARK = "# dmk migrate:"


@dataclass(frozen=True)
class Edit:
    """Source text replaced by ``text``: from ``(line, col)`` to ``(end_line, end_col)``.

    Lines are 1-based, columns ``ast``'s (UTF-8 bytes); ``text`` holds as many line breaks as the span, so the
    lines after it stay where they were.
    """

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Fix:
    """A Python 2-era construct's mechanical fix: the edits, and what it did (for the comment and the plan)."""

    line: int
    what: str
    edits: tuple[Edit, ...]
    comment: bool = True  # False: the edit is a comment already (a dropped statement)


class Fixer:
    """The fixes of one job's Python 2-era constructs (``ast`` nodes of ``tree``, parsed from ``source``).

    Args:
        tree: the job's module.
        source: its text.
        producers: for each kafka-python producer the job sends to (by the text of the receiver: ``producer``,
            ``self.producer``), the ``KafkaProducer(...)`` calls that build it.
    """

    def __init__(self, tree: ast.Module, source: str, producers: Mapping[str, list[ast.Call]]) -> None:
        self.lines = source.splitlines()
        self.source = source
        self.producers = producers
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def fix(self, construct: str, node: ast.AST) -> Fix | None:
        """The fix of the finding ``construct`` at ``node``, or None when it is not mechanical here."""
        name = construct.removeprefix("Python 2: ")
        if isinstance(node, ast.Name) and node.id in RENAMED:
            new = RENAMED[node.id]
            return Fix(node.lineno, f"{node.id} → {new}", (self._replace(node, new),))
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if name == "reload(sys)":
            return self._drop(node, "dropped reload(sys): Python 2 only (it re-exposed sys.setdefaultencoding)")
        if name == "sys.setdefaultencoding":
            encoding = node.args[0].value if len(node.args) == 1 and isinstance(node.args[0], ast.Constant) else None
            try:
                normal = codecs.lookup(encoding).name if isinstance(encoding, str) else None
            except LookupError:
                normal = None
            if normal not in _NO_OP_ENCODINGS:
                return None  # another encoding changed what Python 2 decoded: no Python 3 equivalent to write
            return self._drop(node, f"dropped sys.setdefaultencoding({encoding!r}): Python 3's str is Unicode, its "
                                    "default encoding UTF-8")
        if name == "dict.iteritems" and isinstance(func, ast.Attribute) and func.end_lineno is not None:
            new = func.attr[len("iter"):]
            end = func.end_col_offset or 0
            start = end - len(func.attr.encode())
            if self._text(func.end_lineno, start, func.end_lineno, end) != func.attr:
                return None
            return Fix(node.lineno, f".{func.attr}() → .{new}()", (Edit(func.end_lineno, start, func.end_lineno, end,
                                                                       new),))
        if name == "dict.has_key" and isinstance(func, ast.Attribute) and node.lineno == node.end_lineno:
            receiver = ast.get_source_segment(self.source, func.value)
            key = ast.get_source_segment(self.source, node.args[0])
            if receiver is None or key is None:
                return None
            return Fix(node.lineno, ".has_key(k) → k in d", (self._replace(node, f"({key} in {receiver})"),))
        if name == "KafkaProducer.send(str)" and isinstance(func, ast.Attribute):
            calls = self.producers.get(ast.unparse(func.value), [])
            edits = [self._serializers(call) for call in calls]
            if not calls or any(edit is None for edit in edits):
                return None
            return Fix(calls[0].lineno, "str sent as UTF-8 bytes, as a Python 2 str was",
                       tuple(edit for edit in edits if edit is not None))
        return None

    # ---- edits
    def _text(self, line: int, col: int, end_line: int, end_col: int) -> str:
        """The source between two ``ast`` positions."""
        first = self.lines[line - 1].encode()
        if line == end_line:
            return first[col:end_col].decode(errors="replace")
        middle = [text for text in self.lines[line:end_line - 1]]
        last = self.lines[end_line - 1].encode()[:end_col].decode(errors="replace")
        return "\n".join([first[col:].decode(errors="replace"), *middle, last])

    def _replace(self, node: ast.AST, text: str) -> Edit:
        line, col = getattr(node, "lineno"), getattr(node, "col_offset")  # noqa: B009 - any expression node
        return Edit(line, col, getattr(node, "end_lineno", line) or line, getattr(node, "end_col_offset", col) or col,
                    text)

    def _drop(self, call: ast.Call, what: str) -> Fix | None:
        """A statement that is only ``call`` turned into a comment (``pass`` if it was its block's only one)."""
        stmt = self.parents.get(call)
        if not isinstance(stmt, ast.Expr) or stmt.end_lineno is None or stmt.end_col_offset is None:
            return None  # its value is used: not a statement to drop
        first, last = self.lines[stmt.lineno - 1], self.lines[stmt.end_lineno - 1]
        before = first.encode()[:stmt.col_offset].decode(errors="replace")
        after = last.encode()[stmt.end_col_offset:].decode(errors="replace").strip()
        if before.strip() or (after and not after.startswith("#")):
            return None  # shares its line with other statements (``a; reload(sys)``): left to a person
        parent = self.parents.get(stmt)
        alone = parent is not None and any(
            isinstance(body, list) and body == [stmt] for _, body in ast.iter_fields(parent))
        original = self._text(stmt.lineno, stmt.col_offset, stmt.end_lineno, len(last.encode())).splitlines()
        indent = " " * len(before)
        text = ("pass  " if alone else "") + f"{_MARK} {what}"
        if len(original) > 1:  # the statement's own text, on the lines it held
            text += "".join(f"\n{indent}#   {line.strip()}" for line in original[1:])
        return Fix(stmt.lineno, what, (Edit(stmt.lineno, stmt.col_offset, stmt.end_lineno, len(last.encode()),
                                            text),), comment=False)

    def _serializers(self, call: ast.Call) -> Edit | None:
        """The producer's call with the serializers it lacks, inserted after its last argument."""
        if any(keyword.arg is None for keyword in call.keywords) or call.end_lineno is None:
            return None  # KafkaProducer(**config): whether config sets them is not known
        given = {keyword.arg for keyword in call.keywords}
        added = ", ".join(f"{name}={SERIALIZER}" for name in ("value_serializer", "key_serializer")
                          if name not in given)
        arguments: list[ast.expr] = [*call.args, *(keyword.value for keyword in call.keywords)]
        if not arguments:  # KafkaProducer(): inside the parentheses
            end = (call.end_col_offset or 0) - 1
            return Edit(call.end_lineno, end, call.end_lineno, end, added)
        last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
        line, col = last.end_lineno or call.lineno, last.end_col_offset or 0
        return Edit(line, col, line, col, ", " + added)


def _continued_lines(source: str) -> set[int]:
    """Lines (1-based) a comment cannot end: inside a multi-line string, or continued by a backslash."""
    lines = {n + 1 for n, text in enumerate(source.splitlines()) if text.rstrip().endswith("\\")}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                lines.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return set(range(1, source.count("\n") + 2))
    return lines


def apply_fixes(source: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """``source`` with ``fixes`` applied (each edit once), and a ``# dmk migrate:`` comment on each fixed line.

    Line breaks stay where they were. A line a comment cannot end (inside a multi-line string) gets none. A fix
    whose edits overlap one applied before it (``d.has_key(unicode(k))``: the outer call first) is left out;
    the caller analyses the result again and applies what is still to fix.

    Returns:
        the fixed source, and the fixes applied.
    """
    lines = source.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text.encode()))

    def span(edit: Edit) -> tuple[int, int]:
        return starts[edit.line - 1] + edit.col, starts[edit.end_line - 1] + edit.end_col

    taken: dict[Edit, tuple[int, int]] = {}
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: min(span(e) for e in f.edits)):
        new = {edit: span(edit) for edit in fix.edits if edit not in taken}
        if any(_overlap(a, b) for a in new.values() for b in [*taken.values(), *new.values()] if a is not b):
            continue
        taken.update(new)
        applied.append(fix)
    data = source.encode()
    for edit, (begin, end) in sorted(taken.items(), key=lambda item: item[1], reverse=True):  # from the end
        data = data[:begin] + edit.text.encode() + data[end:]
    fixed = data.decode()
    notes: dict[int, list[str]] = {}
    for fix in applied:
        if fix.comment:
            for edit in fix.edits:
                if fix.what not in notes.setdefault(edit.end_line, []):
                    notes[edit.end_line].append(fix.what)
    blocked = _continued_lines(fixed) if notes else set()
    out = fixed.splitlines(keepends=True)
    for line, whats in notes.items():
        if line in blocked:
            continue
        text = out[line - 1]
        body = text.rstrip("\r\n")
        out[line - 1] = f"{body}  {_MARK} {'; '.join(whats)}{text[len(body):]}"
    return "".join(out), applied


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two spans of edits touch the same text (or insert at the same point)."""
    if a[0] == a[1] or b[0] == b[1]:  # an insertion: inside the other span, or at the same point
        return a[0] == b[0] if a[0] == a[1] and b[0] == b[1] else (b[0] < a[0] < b[1] or a[0] < b[0] < a[1])
    return a[0] < b[1] and b[0] < a[1]
