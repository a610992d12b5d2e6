"""The analysis: every Spark Streaming construct of a DStream job, at its line, read with ``ast`` (never run).

What the analyser tracks (a static reading; docs/migrate.md lists what it cannot know):

- imports and their aliases (``import pyspark.streaming as ps``, ``from pyspark.streaming.kafka import
  KafkaUtils as KU``);
- variables assigned a tracked value (a ``StreamingContext``, a DStream, a list or dict of DStreams), through
  tuple unpacking, ``for`` loops and comprehensions, and the return values of the job's own functions;
- function parameters: annotated ``StreamingContext`` or ``DStream`` (any import of them), else by name: ``ssc``
  is a StreamingContext; ``stream``, ``dstream`` and names ending in ``_stream`` or ``_dstream`` are DStreams
  (Spark's programming guide and examples name them so); ``source`` next to an ``ssc`` parameter is the kit's
  ``legacy.workloads.Source`` (the builder contract ``build(ssc, source)``). Lambda parameters are never
  tracked: inside ``foreachRDD``/``transform`` they are RDDs;
- chained calls: each call of a chain is one finding, at the line of its method name.

A method called on a tracked StreamingContext or DStream that the table does not know is reported as unknown,
never skipped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from migrate.columns import per_record_columns
from migrate.errors import JobSourceError
from migrate.python2 import RENAMED, Fixer
from migrate.rules import (
    CONF_RULES,
    DSTREAM,
    DSTREAM_ONLY_METHODS,
    MODULE_NAMES,
    PAIR_OF_DSTREAMS,
    PYTHON2_RULES,
    RULES,
    SOURCE,
    SSC,
    SSC_ONLY_METHODS,
    Rule,
    playbook_link,
)

FINDING_KEYS = ("line", "construct", "counterpart", "playbook", "automatic", "note", "status")
"""The keys of every finding in ``--json``, in order."""

STATUSES = ("automatic", "manual", "unresolved")
"""A finding's ``status``: a mechanical rewrite, one to port by hand, or a construct dmk migrate could not pin down
(an unknown construct, or a DStream-only method called on something it could not trace)."""

_CONF_KEY = re.compile(r"^(spark\.streaming\.[A-Za-z0-9_.\-]+?)(?:=.*)?$", re.S)
_UNKNOWN_COUNTERPART = "unknown: not in dmk migrate's table"
_CONTAINER = "dstreams"  # a list, dict or set of DStreams
# What an unresolved call returns: taken for a DStream or StreamingContext, every call on it is unresolved too.
_GUESS_DSTREAM, _GUESS_SSC = "dstream?", "ssc?"
_ITEMS = "dstream items"  # a dict of DStreams' items(): (key, DStream) pairs


def _element(kind: Any) -> Any:
    """What iterating over a value of ``kind`` yields."""
    if kind == _CONTAINER:
        return DSTREAM
    return ("tuple", (None, DSTREAM)) if kind == _ITEMS else None
_PER_RECORD = ("DStream.map", "DStream.filter", "DStream.flatMap")


@dataclass(frozen=True)
class Finding:
    """One construct at one line of a DStream job.

    Attributes:
        line: 1-based line of the construct (for a call: the line of its method name).
        construct: what it is (``DStream.map``, ``KafkaUtils.createDirectStream``, a conf key).
        counterpart: the Structured Streaming counterpart.
        playbook: ``docs/playbook.md#anchor``.
        automatic: whether the rewrite is mechanical.
        note: the semantic trap to check (for an unknown construct: that it is unknown).
        traced: False when the construct was recognised by its method name only, on an object the analyser
            could not trace to a DStream or StreamingContext (its status is then ``unresolved``).
    """

    line: int
    construct: str
    counterpart: str
    playbook: str
    automatic: bool
    note: str
    traced: bool = True

    def to_json(self) -> dict[str, Any]:
        """The finding as ``--json`` prints it: exactly :data:`FINDING_KEYS`."""
        return {key: getattr(self, key) for key in FINDING_KEYS}

    @property
    def unknown(self) -> bool:
        """Whether the analyser does not know the construct."""
        return self.counterpart == _UNKNOWN_COUNTERPART

    @property
    def status(self) -> str:
        """``unresolved`` (unknown, or not traced), else ``automatic`` or ``manual``: one of :data:`STATUSES`."""
        if self.unknown or not self.traced:
            return "unresolved"
        return "automatic" if self.automatic else "manual"

    @property
    def python2(self) -> bool:
        """Whether the finding is Python 2-era code rather than a Spark Streaming construct."""
        return self.construct in PYTHON2_RULES


@dataclass(frozen=True)
class _Site:
    """Where a finding came from, for the draft: the node and the rule."""

    finding: Finding
    node: ast.AST
    rule: Rule | None


@dataclass(frozen=True)
class _Step:
    """A statement of the job the draft translates: ``kind`` is assign, unpack, output or return."""

    kind: str
    line: int
    node: ast.AST
    target: str = ""
    value: ast.expr | None = None


@dataclass(frozen=True)
class MigrationPlan:
    """What :func:`analyse` found in one job.

    Attributes:
        path: the job file, as given.
        findings: one per construct and line, in source order (line, then column).
        source: the job's source text.
        has_main: whether the job has an ``if __name__ == "__main__":`` block (a script, not a builder module).
        argv_names: names the ``__main__`` block unpacks ``sys.argv`` into, in order (for compare-jobs).
    """

    path: str
    findings: tuple[Finding, ...]
    source: str
    has_main: bool
    argv_names: tuple[str, ...]
    _sites: tuple[_Site, ...] = field(default=(), repr=False, compare=False)
    _steps: tuple[_Step, ...] = field(default=(), repr=False, compare=False)
    _facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def counts(self) -> dict[str, int]:
        """The job's grade: how many findings are ``automatic``, ``manual`` and ``unresolved``."""
        counts = dict.fromkeys(STATUSES, 0)
        for finding in self.findings:
            counts[finding.status] += 1
        return counts

    @property
    def streaming(self) -> bool:
        """Whether the job uses Spark Streaming at all (any finding that is not Python 2-era code)."""
        return any(not f.python2 for f in self.findings)


# -- the analyser ---------------------------------------------------------------------------------------


_MODULES = frozenset((
    "pyspark", "pyspark.streaming", "pyspark.streaming.kafka", "pyspark.streaming.context", "pyspark.streaming.dstream",
    "pyspark.streaming.listener", "pyspark.streaming.kinesis", "pyspark.streaming.flume", "pyspark.streaming.util",
    "legacy", "legacy.kafka", "legacy.workloads",
))


def _qualify(dotted: str) -> Any:
    """What an imported name is.

    A known entity, a tracked module, a name of pyspark.streaming not in the table (``("unknown", dotted)``,
    reported when called), or None.
    """
    if dotted in MODULE_NAMES:
        return MODULE_NAMES[dotted]
    if dotted in _MODULES:
        return "module:" + dotted
    if dotted.startswith("pyspark.streaming."):
        return ("unknown", dotted)
    return None


class _Scope:
    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def set(self, name: str, kind: Any) -> None:
        self.names[name] = kind


def _is_tuple(kind: Any) -> bool:
    """Whether ``kind`` is the kind of a tuple expression, ``("tuple", element kinds)``."""
    return isinstance(kind, tuple) and kind[0] == "tuple"


def _is_main_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    """Argument ``name`` of ``call``, positional ``index`` or keyword."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[index] if len(call.args) > index else None


def _line_col(node: ast.AST) -> tuple[int, int]:
    """Where a construct is: a method call at its method name's end (so a chain's calls sort in order)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.end_lineno or node.func.lineno, node.func.end_col_offset or 0
    if isinstance(node, ast.Attribute):
        return node.end_lineno or node.lineno, node.end_col_offset or 0
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


class _Analyser:
    def __init__(self, tree: ast.Module, source: str = "") -> None:
        self.tree = tree
        self.source = source
        self.returns: dict[int, Any] = {}
        self.record = False
        self.sites: dict[tuple[int, str], tuple[tuple[int, int], _Site]] = {}
        self.steps: list[_Step] = []
        self.facts: dict[str, Any] = {}
        self.deferred: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, _Scope, int | None]] = []
        self.function: list[int] = []
        self.builder: list[bool] = [False]
        # What flows between functions and methods, settled over passes: self.<attr> of a class, the job's
        # own functions' parameters as their call sites pass them, a class's methods by name.
        self.class_attrs: dict[tuple[int, str], Any] = {}
        self.param_kinds: dict[tuple[int, str], Any] = {}
        self.class_methods: dict[tuple[int, str], int] = {}
        self.functions: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.class_body: list[int] = []
        self.imported: set[str] = set()

    # ---- driving
    def run(self) -> None:
        for attempt in range(8):  # until what flows between functions settles, then once more recording
            before = (dict(self.returns), dict(self.class_attrs), dict(self.param_kinds))
            self._pass()
            if (self.returns, self.class_attrs, self.param_kinds) == before and attempt:
                break
        self.record = True
        self._pass()
        for node in ast.walk(self.tree):  # configuration keys, wherever the string is
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = _CONF_KEY.match(node.value.strip())
                if match:
                    self._conf(node, match.group(1))
        self._python2()

    def _python2(self) -> None:
        """Python 2-era code that still parses as Python 3 but fails there (PYTHON2_RULES).

        Each finding is ``automatic`` when :class:`migrate.python2.Fixer` has its mechanical fix (kept in
        ``facts["python2_fixes"]`` for the draft), else ``manual``.
        """
        defined = set(self.imported)
        producers: dict[str, list[ast.Call]] = {}  # the receiver's text -> the KafkaProducer(...) calls building it
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "KafkaProducer" and not any(k.arg == "value_serializer" for k in node.value.keywords):
                    for target in node.targets:
                        if isinstance(target, (ast.Name, ast.Attribute)):  # producer, self.producer
                            producers.setdefault(ast.unparse(target), []).append(node.value)
        fixer = Fixer(self.tree, self.source, producers)
        for node in ast.walk(self.tree):
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined
                    and node.id in RENAMED):
                self._python2_finding(node, f"Python 2: {node.id}", fixer)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "reload" and "reload" not in defined
                    and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "sys"):
                self._python2_finding(node, "Python 2: reload(sys)", fixer)
            if not isinstance(func, ast.Attribute):
                continue
            if func.attr == "setdefaultencoding" and isinstance(func.value, ast.Name) and func.value.id == "sys":
                self._python2_finding(node, "Python 2: sys.setdefaultencoding", fixer)
            elif func.attr in ("iteritems", "itervalues", "iterkeys") and not node.args:
                self._python2_finding(node, "Python 2: dict.iteritems", fixer)
            elif func.attr == "has_key" and len(node.args) == 1:
                self._python2_finding(node, "Python 2: dict.has_key", fixer)
            elif (func.attr == "send" and ast.unparse(func.value) in producers
                  and (_stringy(_arg(node, 1, "value")) or _stringy(_arg(node, 2, "key")))):
                self._python2_finding(node, "Python 2: KafkaProducer.send(str)", fixer)

    def _python2_finding(self, node: ast.AST, construct: str, fixer: Fixer) -> None:
        rule = PYTHON2_RULES[construct]
        fix = fixer.fix(construct, node)
        if fix is None:
            note = f"{rule.note} The draft cannot fix this one mechanically: it refuses to start until it is ported."
        else:
            note = f"{rule.note} The draft fixes it: {fix.what}."
            self.facts.setdefault("python2_fixes", []).append(fix)
        self._report(node, replace(rule, note=note), automatic=fix is not None)

    def _pass(self) -> None:
        self.deferred = []
        self.steps = []
        module = _Scope()
        self._body(self.tree.body, module)
        while self.deferred:
            func, scope, class_id = self.deferred.pop(0)
            self._function(func, scope, class_id)

    # ---- findings
    def _report(self, node: ast.AST, rule: Rule, automatic: bool | None = None) -> None:
        if not self.record:
            return
        line, col = _line_col(node)
        finding = Finding(line, rule.construct, rule.counterpart, rule.playbook,
                          rule.automatic if automatic is None else automatic, rule.note)
        self.sites.setdefault((id(node), rule.construct), ((line, col), _Site(finding, node, rule)))

    def _unresolved(self, node: ast.Call, owner: str, method: str, derived: bool = False) -> Any:
        """A DStream- or StreamingContext-only method called on something the analyser could not trace.

        ``derived``: any method called on the result of such a call (a guess, so unresolved too).
        """
        key = f"{owner}.{method}"
        if method == "reduceByKeyAndWindow":
            key += " (with inverse function)" if _has_inverse(node, "invFunc") else " (without inverse function)"
        rule = RULES.get(key)
        if rule is None and derived:
            self._unknown(node, owner, method, called=True)
            return None
        if self.record:
            assert isinstance(node.func, ast.Attribute)
            receiver = " ".join(ast.unparse(node.func.value).split())
            receiver = receiver if len(receiver) <= 40 else receiver[:37] + "..."
            article = "a" if owner == "DStream" else "the"
            if derived:
                note = (f"unresolved: `{receiver}` is taken for {article} {owner} only because it comes from an "
                        "unresolved call (a DStream-only method on something dmk migrate could not trace): confirm "
                        "by hand, and port it as below. ")
            else:
                note = (f"unresolved: {method}() is a {owner}-only method, but dmk migrate could not trace "
                        f"`{receiver}` to {article} {owner} (it comes from another module, an attribute or a "
                        "container it does not follow): confirm by hand that it is one, and port it as below. ")
            note += rule.note if rule is not None else ""
            line, col = _line_col(node)
            finding = Finding(line, key, rule.counterpart if rule is not None else _UNKNOWN_COUNTERPART,
                              rule.playbook if rule is not None else playbook_link("the-map"), False, note.strip(),
                              traced=False)
            self.sites.setdefault((id(node), key), ((line, col), _Site(finding, node, None)))
        returns = rule.returns if rule is not None else None
        return {DSTREAM: _GUESS_DSTREAM, SSC: _GUESS_SSC}.get(returns) if returns is not None else None

    def _unknown(self, node: ast.AST, owner: str, name: str, called: bool) -> None:
        if not self.record:
            return
        what = f"{owner}.{name}"
        line, col = _line_col(node)
        note = (f"unknown construct: {what}{'()' if called else ''} is used on a tracked {owner} but dmk migrate's "
                f"table does not know it (not in Spark 2.4's Python {owner} API); check by hand what it does and "
                "what replaces it.")
        finding = Finding(line, what, _UNKNOWN_COUNTERPART, playbook_link("the-map"), False, note)
        self.sites.setdefault((id(node), what), ((line, col), _Site(finding, node, None)))

    def _conf(self, node: ast.Constant, key: str) -> None:
        rule = CONF_RULES.get(key)
        if rule is not None:
            self._report(node, rule)
            return
        line, col = _line_col(node)
        note = (f"unknown construct: the configuration key {key} is not in dmk migrate's table; check what it "
                "did on DStreams and whether Structured Streaming has an equivalent.")
        finding = Finding(line, key, _UNKNOWN_COUNTERPART, playbook_link("the-map"), False, note)
        self.sites.setdefault((id(node), key), ((line, col), _Site(finding, node, None)))

    def _step(self, kind: str, node: ast.AST, target: str = "", value: ast.expr | None = None) -> None:
        if self.record:
            self.steps.append(_Step(kind, getattr(node, "lineno", 0), node, target, value))

    # ---- statements
    def _body(self, body: Iterable[ast.stmt], scope: _Scope) -> None:
        for stmt in body:
            self._stmt(stmt, scope)

    def _stmt(self, stmt: ast.stmt, scope: _Scope) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.imported.add(alias.asname or alias.name.split(".")[0])
                if alias.asname:
                    scope.set(alias.asname, _qualify(alias.name))
                else:
                    top = alias.name.split(".")[0]
                    scope.set(top, _qualify(top))
        elif isinstance(stmt, ast.ImportFrom):
            self.imported.update(alias.asname or alias.name for alias in stmt.names)
            if stmt.level == 0 and stmt.module:
                for alias in stmt.names:
                    if alias.name != "*":
                        scope.set(alias.asname or alias.name, _qualify(f"{stmt.module}.{alias.name}"))
        elif isinstance(stmt, ast.Assign):
            kind = self._eval(stmt.value, scope)
            if (kind is None and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == "ssc" and isinstance(stmt.value, (ast.Attribute, ast.Call, ast.Name))):
                kind = SSC  # named as Spark's guide names a StreamingContext, from code it cannot see into
            for target in stmt.targets:
                self._bind(target, kind, scope)
            self._assign_step(stmt, stmt.targets, kind)
        elif isinstance(stmt, ast.AnnAssign):
            kind = self._eval(stmt.value, scope) if stmt.value is not None else self._annotation(stmt.annotation, scope)
            self._bind(stmt.target, kind, scope)
            if stmt.value is not None:
                self._assign_step(stmt, [stmt.target], kind)
        elif isinstance(stmt, (ast.AugAssign, ast.Expr)):
            self._eval(stmt.value, scope)
        elif isinstance(stmt, ast.Return):
            kind = self._eval(stmt.value, scope) if stmt.value is not None else None
            if self.function and kind is not None:
                self.returns[self.function[-1]] = kind
            if kind == DSTREAM and stmt.value is not None and self.builder[-1]:
                self._step("return", stmt.value)
        elif isinstance(stmt, ast.If):
            self._eval(stmt.test, scope)
            if _is_main_test(stmt.test):
                self.facts["has_main"] = True
            self._body(stmt.body, scope)
            self._body(stmt.orelse, scope)
        elif isinstance(stmt, ast.While):
            self._eval(stmt.test, scope)
            self._body(stmt.body, scope)
            self._body(stmt.orelse, scope)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            kind = self._eval(stmt.iter, scope)
            self._bind(stmt.target, _element(kind), scope)
            self._body(stmt.body, scope)
            self._body(stmt.orelse, scope)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._eval(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, None, scope)
            self._body(stmt.body, scope)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            self._body(stmt.body, scope)
            for handler in stmt.handlers:
                self._body(handler.body, scope)
            self._body(stmt.orelse, scope)
            self._body(stmt.finalbody, scope)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in stmt.decorator_list:
                self._eval(decorator, scope)
            for default in [*stmt.args.defaults, *stmt.args.kw_defaults]:
                if default is not None:
                    self._eval(default, scope)
            class_id = self.class_body[-1] if self.class_body else None
            self.functions[id(stmt)] = stmt
            if class_id is not None:
                self.class_methods[(class_id, stmt.name)] = id(stmt)
            else:
                scope.set(stmt.name, ("func", id(stmt)))
            self.deferred.append((stmt, scope, class_id))
        elif isinstance(stmt, ast.ClassDef):
            for base in stmt.bases:
                if self._eval(base, scope) == "listener_class":
                    self._report(stmt, RULES["StreamingListener"])
            self.class_body.append(id(stmt))
            self._body(stmt.body, _Scope(scope))
            self.class_body.pop()
        else:  # raise, assert, del, match...: whatever expressions and statements they hold
            self._children(stmt, scope)

    def _children(self, node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child, scope)
            elif isinstance(child, ast.stmt):
                self._stmt(child, scope)
            elif isinstance(child, ast.match_case):
                self._children(child, scope)

    def _function(self, func: ast.FunctionDef | ast.AsyncFunctionDef, parent: _Scope, class_id: int | None) -> None:
        scope = _Scope(parent)
        params = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
        names = {a.arg for a in params}
        for param in params:
            kind = self._param_kind(param, names, parent)
            scope.set(param.arg, kind if kind is not None else self.param_kinds.get((id(func), param.arg)))
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)
        if class_id is not None and params and not static:
            scope.set(params[0].arg, ("self", class_id))  # self (or cls): its attributes are the class's
        for extra in (func.args.vararg, func.args.kwarg):
            if extra is not None:
                scope.set(extra.arg, None)
        self.function.append(id(func))
        # A builder of the kit's contract (build(ssc, source)) hands its returned DStream to a runner that writes
        # it: that return is the job's output. Any other function's return value is just a value.
        self.builder.append(scope.names.get("source") == SOURCE)
        self._body(func.body, scope)
        self.function.pop()
        self.builder.pop()

    def _param_kind(self, param: ast.arg, names: set[str], scope: _Scope) -> Any:
        if param.annotation is not None:
            kind = self._annotation(param.annotation, scope)
            if kind is not None:
                return kind
        name = param.arg
        if name == "ssc":
            return SSC
        if name in ("stream", "dstream") or name.endswith(("_stream", "_dstream")):
            return DSTREAM
        if name == "source" and "ssc" in names:
            return SOURCE
        return None

    def _annotation(self, node: ast.expr, scope: _Scope) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        kind = self._eval(node, scope, quiet=True)
        return {"ssc_class": SSC, "dstream_class": DSTREAM, "source_class": SOURCE}.get(kind)

    def _bind(self, target: ast.expr, kind: Any, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            scope.set(target.id, kind)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            if _is_tuple(kind) and len(kind[1]) == len(elements):
                kinds = list(kind[1])
            elif kind in (PAIR_OF_DSTREAMS, _CONTAINER):
                kinds = [DSTREAM] * len(elements)
            else:
                kinds = [None] * len(elements)
            for element, element_kind in zip(elements, kinds, strict=True):
                self._bind(element.value if isinstance(element, ast.Starred) else element, element_kind, scope)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            base = self._eval(target.value, scope)
            if isinstance(target, ast.Attribute) and _is_self(base) and kind is not None:
                self.class_attrs.setdefault((base[1], target.attr), kind)
            elif isinstance(target, ast.Subscript) and kind == DSTREAM:  # streams[topic] = a DStream
                self._contains_dstreams(target.value, scope)

    def _contains_dstreams(self, holder: ast.expr, scope: _Scope) -> None:
        """``holder`` (a name, or an attribute of self) is a list or dict a DStream was put into."""
        if isinstance(holder, ast.Name):
            scope.set(holder.id, _CONTAINER)
        elif isinstance(holder, ast.Attribute):
            base = self._eval(holder.value, scope, quiet=True)
            if _is_self(base):
                self.class_attrs[(base[1], holder.attr)] = _CONTAINER

    def _assign_step(self, stmt: ast.stmt, targets: list[ast.expr], kind: Any) -> None:
        value = getattr(stmt, "value", None)
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and kind == DSTREAM:
            self._step("assign", stmt, targets[0].id, value)
        elif (len(targets) == 1 and isinstance(targets[0], ast.Tuple) and isinstance(value, ast.Tuple)
              and _is_tuple(kind) and len(kind[1]) == len(value.elts) == len(targets[0].elts)
              and all(isinstance(t, ast.Name) for t in targets[0].elts)):
            for target, element, element_kind in zip(targets[0].elts, value.elts, kind[1], strict=True):
                if element_kind == DSTREAM:
                    assert isinstance(target, ast.Name)
                    self._step("assign", stmt, target.id, element)
        elif kind in (PAIR_OF_DSTREAMS, _CONTAINER) or (_is_tuple(kind) and DSTREAM in kind[1]):
            self._step("unpack", stmt)

    # ---- expressions
    def _eval(self, node: ast.expr | None, scope: _Scope, quiet: bool = False) -> Any:
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return scope.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._eval(node.value, scope, quiet)
            if _is_self(base):
                return self.class_attrs.get((base[1], node.attr))
            if isinstance(base, str) and base.startswith("module:"):
                return _qualify(f"{base[len('module:'):]}.{node.attr}")
            if not quiet:
                self._attribute(node, base)
            return None
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Lambda):
            inner = _Scope(scope)
            for param in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                inner.set(param.arg, None)
            for extra in (node.args.vararg, node.args.kwarg):
                if extra is not None:
                    inner.set(extra.arg, None)
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                self._eval(default, scope)
            self._eval(node.body, inner)
            return None
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = _Scope(scope)
            for generator in node.generators:
                kind = self._eval(generator.iter, inner)
                self._bind(generator.target, _element(kind), inner)
                for condition in generator.ifs:
                    self._eval(condition, inner)
            if isinstance(node, ast.DictComp):
                self._eval(node.key, inner)
                element = self._eval(node.value, inner)
            else:
                element = self._eval(node.elt, inner)
            return _CONTAINER if element == DSTREAM else None
        if isinstance(node, ast.Tuple):
            return ("tuple", tuple(self._eval(e, scope) for e in node.elts))
        if isinstance(node, (ast.List, ast.Set)):
            kinds = [self._eval(e, scope) for e in node.elts]
            return _CONTAINER if DSTREAM in kinds else None
        if isinstance(node, ast.Dict):
            for key in node.keys:
                self._eval(key, scope)
            values = [self._eval(v, scope) for v in node.values]
            return _CONTAINER if DSTREAM in values else None
        if isinstance(node, ast.Subscript):
            base = self._eval(node.value, scope)
            self._eval(node.slice, scope)
            if base in (_CONTAINER, PAIR_OF_DSTREAMS):
                return DSTREAM
            if _is_tuple(base) and isinstance(_const(node.slice), int):
                index = _const(node.slice)
                return base[1][index] if -len(base[1]) <= index < len(base[1]) else None
            return None
        if isinstance(node, ast.Starred):
            return self._eval(node.value, scope)
        if isinstance(node, ast.NamedExpr):
            kind = self._eval(node.value, scope)
            self._bind(node.target, kind, scope)
            return kind
        if isinstance(node, ast.IfExp):
            self._eval(node.test, scope)
            body, orelse = self._eval(node.body, scope), self._eval(node.orelse, scope)
            return body if body == orelse else (body or orelse)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child, scope)
        return None

    def _attribute(self, node: ast.Attribute, base: Any) -> None:
        """An attribute read (not called) on a tracked object."""
        if base == SSC:
            rule = RULES.get(f"StreamingContext.{node.attr}")
            if rule is not None and node.attr == "sparkContext":
                self._report(node, rule)
            else:
                self._unknown(node, "StreamingContext", node.attr, called=False)
        elif base == DSTREAM:
            self._unknown(node, "DStream", node.attr, called=False)

    def _call(self, node: ast.Call, scope: _Scope) -> Any:
        func = node.func
        result: Any = None
        target: tuple[int, int] | None = None  # (id of the job's own function called, index of its first argument)
        if isinstance(func, ast.Attribute):
            base = self._eval(func.value, scope)
            result = self._method(node, func.attr, base, scope)
            if _is_self(base) and (base[1], func.attr) in self.class_methods:
                target = (self.class_methods[(base[1], func.attr)], 1)
        else:
            callee = self._eval(func, scope)
            result = self._callee(node, callee)
            if isinstance(callee, tuple) and callee[0] == "func":
                target = (callee[1], 0)
        kinds = [self._eval(argument, scope) for argument in node.args]
        keywords = {keyword.arg: self._eval(keyword.value, scope) for keyword in node.keywords}
        if (isinstance(func, ast.Attribute) and func.attr in ("append", "add", "insert", "appendleft")
                and DSTREAM in kinds):  # streams.append(a DStream)
            self._contains_dstreams(func.value, scope)
        if target is not None and target[0] in self.functions:
            # The job's own function is passed a StreamingContext or a DStream: so is its parameter.
            called = self.functions[target[0]]
            params = [a.arg for a in [*called.args.posonlyargs, *called.args.args]][target[1]:]
            passed = [*zip(params, kinds, strict=False), *((k, v) for k, v in keywords.items() if k is not None)]
            for name, kind in passed:
                if kind in (SSC, DSTREAM, SOURCE):
                    self.param_kinds.setdefault((target[0], name), kind)
        return result

    def _method(self, node: ast.Call, method: str, base: Any, scope: _Scope) -> Any:
        if base in (_GUESS_DSTREAM, _GUESS_SSC):
            return self._unresolved(node, "DStream" if base == _GUESS_DSTREAM else "StreamingContext", method, True)
        if base == _CONTAINER:
            return {"values": _CONTAINER, "items": _ITEMS, "get": DSTREAM, "pop": DSTREAM}.get(method)
        if _is_self(base):
            function = self.class_methods.get((base[1], method))
            return self.returns.get(function) if function is not None else None
        if isinstance(base, str) and base.startswith("module:"):
            return self._callee(node, _qualify(f"{base[len('module:'):]}.{method}"))
        if method == "offsetRanges" and base not in (SSC, DSTREAM):
            self._report(node, RULES["offsetRanges"])
            return None
        if base == SSC:
            key = f"StreamingContext.{method}"
            if method == "stop":
                graceful = _arg(node, 1, "stopGraceFully")
                if graceful is not None and _const(graceful) is not False:
                    key = "StreamingContext.stop(stopGraceFully=True)"
            if method == "checkpoint":
                self.facts.setdefault("checkpoint", _arg(node, 0, "directory"))
            return self._known(node, key, "StreamingContext", method)
        if base == "ssc_class":
            if method in ("getOrCreate", "getActive", "getActiveOrCreate"):
                if method != "getActive":
                    self.facts.setdefault("checkpoint", _arg(node, 0, "checkpointPath"))
                return self._known(node, f"StreamingContext.{method}", "StreamingContext", method)
            self._unknown(node, "StreamingContext", method, called=True)
            return None
        if base == DSTREAM:
            key = f"DStream.{method}"
            if method in ("foreachRDD", "pprint", "saveAsTextFiles"):
                self._step("output", node)
            if method == "reduceByKeyAndWindow":
                key += " (with inverse function)" if _has_inverse(node, "invFunc") else " (without inverse function)"
            return self._known(node, key, "DStream", method)
        if isinstance(base, str) and base.startswith(("kafka:", "utils:")):
            owner = base.split(":", 1)[1]
            return self._known(node, f"{owner}.{method}", owner, method)
        if base == SOURCE:
            if method in ("events", "nexmark", "drop_late"):
                self._report(node, RULES[f"Source.{method}"])
                return RULES[f"Source.{method}"].returns
            return None
        if base is None and not self._imported_root(node.func):
            if method in DSTREAM_ONLY_METHODS:
                return self._unresolved(node, "DStream", method)
            if method in SSC_ONLY_METHODS:
                return self._unresolved(node, "StreamingContext", method)
        return None

    def _imported_root(self, func: ast.expr) -> bool:
        """Whether ``func`` (``a.b.method``) hangs off an imported name (``F.window``, ``pprint.pprint``)."""
        node = func.value if isinstance(func, ast.Attribute) else func
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.imported

    def _known(self, node: ast.Call, key: str, owner: str, method: str) -> Any:
        rule = RULES.get(key)
        if rule is None:
            self._unknown(node, owner, method, called=True)
            return None
        self._report(node, rule)
        if key == "KafkaUtils.createDirectStream" or key == "KafkaUtils.createStream":
            self.facts.setdefault("kafka", node)
        return rule.returns

    def _callee(self, node: ast.Call, callee: Any) -> Any:
        if callee == "ssc_class":
            self._report(node, RULES["StreamingContext(sc, batchDuration)"])
            self.facts.setdefault("batch", _arg(node, 1, "batchDuration"))
            return SSC
        if isinstance(callee, str) and callee.startswith("kafka:") and callee != "kafka:KafkaUtils":
            self._report(node, RULES[callee.split(":", 1)[1]])
            return None
        if callee == "kit:get_or_create":
            self._report(node, RULES["get_or_create"])
            self.facts.setdefault("checkpoint", _arg(node, 0, "checkpointPath"))
            return SSC
        if callee == "kit:event_time_operator":
            self._report(node, RULES["event_time_operator"])
            return PAIR_OF_DSTREAMS
        if isinstance(callee, tuple) and callee[0] == "func":
            return self.returns.get(callee[1])
        if isinstance(callee, tuple) and callee[0] == "unknown":
            owner, _, name = callee[1].rpartition(".")
            self._unknown(node, owner, name, called=True)
        return None


def _is_self(kind: Any) -> bool:
    """Whether ``kind`` is a method's ``self``: ``("self", id of its class)``."""
    return isinstance(kind, tuple) and len(kind) == 2 and kind[0] == "self"


def _has_inverse(node: ast.Call, name: str) -> bool:
    inverse = _arg(node, 1, name)
    return inverse is not None and not (isinstance(inverse, ast.Constant) and inverse.value is None)


def _stringy(node: ast.expr | None) -> bool:
    """Whether an expression is surely a ``str``.

    A literal, an f-string, ``str()``, ``json.dumps()``, ``"...".format()`` or ``"..." % x``.
    """
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id == "str"
        if isinstance(func, ast.Attribute):
            return func.attr == "dumps" or (func.attr == "format" and isinstance(func.value, ast.Constant)
                                            and isinstance(func.value.value, str))
    return False


def _argv_names(tree: ast.Module) -> tuple[str, ...]:
    """The names a job unpacks its command-line arguments into, in order.

    ``a, b = sys.argv[1:3]`` anywhere; else ``a, b = argv[:2]`` where ``argv`` (or ``args``) is a parameter of
    the function the job calls with ``sys.argv[...]`` (``main(sys.argv[1:5])``).
    """
    unpackings = [s for s in ast.walk(tree) if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Tuple)]

    def names(stmt: ast.Assign) -> tuple[str, ...]:
        target = stmt.targets[0]
        assert isinstance(target, ast.Tuple)
        return tuple(e.id for e in target.elts if isinstance(e, ast.Name))

    def source_of(stmt: ast.Assign) -> ast.expr:
        value = stmt.value
        return value.value if isinstance(value, ast.Subscript) else value

    for stmt in unpackings:
        value = source_of(stmt)
        if isinstance(value, ast.Attribute) and value.attr == "argv":
            return names(stmt)
    for stmt in unpackings:
        value = source_of(stmt)
        if isinstance(value, ast.Name) and value.id in ("argv", "args"):
            return names(stmt)
    return ()


_PY2_SYNTAX = (
    re.compile(r"^\s*print(\s+[^\s(=.,)\]}]|\s*$|\s*>>)"),  # print "x", print x, print, print >> f
    re.compile(r"^\s*except\s+[\w.]+\s*,\s*\w+\s*:"),  # except E, e:
    re.compile(r"^\s*raise\s+[\w.]+\s*,"),  # raise E, "message"
    re.compile(r"^\s*exec\s+[\"'\w]"),  # exec "code"
    re.compile(r"\b\d+L\b|\b0[0-7]+\b|<>|`[^`]*`"),  # 10L, 0777, <>, `repr`
)
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")  # a one-line '...' or "..."


def _python2_line(source: str) -> int | None:
    """The first line of Python 2-only syntax in ``source`` (outside strings, roughly), or None."""
    in_string = False
    for number, text in enumerate(source.splitlines(), 1):
        if text.count('"""') % 2 or text.count("'''") % 2:
            in_string = not in_string
            continue
        code = _STRING_LITERAL.sub('""', text).split("#", 1)[0]
        if not in_string and any(pattern.search(code) for pattern in _PY2_SYNTAX):
            return number
    return None


def analyse_source(source: str, path: str = "<job>") -> MigrationPlan:
    """Analyse a DStream job's source text (never executed).

    Args:
        source: the job's Python source.
        path: its file name, for messages and the plan.

    Raises:
        JobSourceError: the source is not Python 3 (binary, Python 2 only, or not Python at all).
    """
    if "\x00" in source:
        msg = (f"{path} is not Python source: it holds NUL bytes (a binary file?). Give dmk migrate the DStream "
               "job's .py source file.")
        raise JobSourceError(msg, path=path)
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 0
        text = (exc.text or "").strip()
        where = f"{path}, line {line}: {exc.msg}{f' ({text!r})' if text else ''}"
        py2 = _python2_line(source)
        if py2 is not None or "Missing parentheses in call to" in (exc.msg or ""):
            msg = (f"{where}. This is Python 2 code (line {py2 or line}), and PySpark 4 runs Python 3 only: port "
                   "the job to Python 3 first (`2to3 -w` of Python 3.12 or earlier does the syntax), then run dmk "
                   "migrate again.")
        else:
            msg = (f"{where}. dmk migrate reads the job as Python 3 source without running it, so it must parse: "
                   "is this the job's .py file? Fix the syntax and run dmk migrate again.")
        raise JobSourceError(msg, path=path, line=line) from None
    analyser = _Analyser(tree, source)
    analyser.run()
    ordered = sorted(analyser.sites.values(), key=lambda item: (item[0], item[1].finding.construct))
    sites = tuple(site for _, site in ordered)
    # A per-record function is mechanical exactly when it has a column expression (migrate.columns).
    columns = per_record_columns(tree, [(site.node, site.finding.construct) for site in sites])
    sites = tuple(
        _Site(replace(site.finding, automatic=True), site.node, site.rule)
        if site.finding.construct in _PER_RECORD and id(site.node) in columns else site
        for site in sites
    )
    return MigrationPlan(
        path=path, findings=tuple(site.finding for site in sites), source=source,
        has_main=bool(analyser.facts.get("has_main")), argv_names=_argv_names(tree),
        _sites=sites, _steps=tuple(analyser.steps), _facts=analyser.facts,
    )


def analyse(path: str | Path, *, role: str = "DStream job") -> MigrationPlan:
    """Analyse the DStream job in ``path`` (read, parsed, never imported or run).

    Args:
        path: the job's source file.
        role: what the file is, for the error message (default "DStream job").

    Raises:
        JobSourceError: the file cannot be read, or is not valid Python 3.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        msg = f"cannot read the {role} {str(path)!r}: {exc}. Give the path of the {role}'s .py file."
        raise JobSourceError(msg, path=str(path)) from None
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (f"the {role} {str(path)!r} is not Python source: it is not UTF-8 text ({exc.reason} at byte "
               f"{exc.start}; a binary file?). Give the path of the {role}'s .py file (re-encode a Latin-1 "
               "source as UTF-8).")
        raise JobSourceError(msg, path=str(path)) from None
    return analyse_source(source, str(path))
