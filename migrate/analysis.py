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
from migrate.rules import (
    CONF_RULES,
    DSTREAM,
    MODULE_NAMES,
    PAIR_OF_DSTREAMS,
    RULES,
    SOURCE,
    SSC,
    Rule,
    playbook_link,
)

FINDING_KEYS = ("line", "construct", "counterpart", "playbook", "automatic", "note")
"""The keys of every finding in ``--json``, in order."""

_CONF_KEY = re.compile(r"^(spark\.streaming\.[A-Za-z0-9_.\-]+?)(?:=.*)?$", re.S)
_UNKNOWN_COUNTERPART = "unknown: not in dmk migrate's table"
_CONTAINER = "dstreams"  # a list, dict or set of DStreams
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
    """

    line: int
    construct: str
    counterpart: str
    playbook: str
    automatic: bool
    note: str

    def to_json(self) -> dict[str, Any]:
        """The finding as ``--json`` prints it: exactly :data:`FINDING_KEYS`."""
        return {key: getattr(self, key) for key in FINDING_KEYS}

    @property
    def unknown(self) -> bool:
        """Whether the analyser does not know the construct."""
        return self.counterpart == _UNKNOWN_COUNTERPART


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
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.returns: dict[int, Any] = {}
        self.record = False
        self.sites: dict[tuple[int, str], tuple[tuple[int, int], _Site]] = {}
        self.steps: list[_Step] = []
        self.facts: dict[str, Any] = {}
        self.deferred: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, _Scope]] = []
        self.function: list[int] = []
        self.builder: list[bool] = [False]

    # ---- driving
    def run(self) -> None:
        for attempt in range(4):  # until the functions' return kinds settle, then once more recording
            before = dict(self.returns)
            self._pass()
            if self.returns == before and attempt:
                break
        self.record = True
        self._pass()
        for node in ast.walk(self.tree):  # configuration keys, wherever the string is
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = _CONF_KEY.match(node.value.strip())
                if match:
                    self._conf(node, match.group(1))

    def _pass(self) -> None:
        self.deferred = []
        self.steps = []
        module = _Scope()
        self._body(self.tree.body, module)
        while self.deferred:
            func, scope = self.deferred.pop(0)
            self._function(func, scope)

    # ---- findings
    def _report(self, node: ast.AST, rule: Rule, automatic: bool | None = None) -> None:
        if not self.record:
            return
        line, col = _line_col(node)
        finding = Finding(line, rule.construct, rule.counterpart, rule.playbook,
                          rule.automatic if automatic is None else automatic, rule.note)
        self.sites.setdefault((id(node), rule.construct), ((line, col), _Site(finding, node, rule)))

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
                if alias.asname:
                    scope.set(alias.asname, _qualify(alias.name))
                else:
                    top = alias.name.split(".")[0]
                    scope.set(top, _qualify(top))
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level == 0 and stmt.module:
                for alias in stmt.names:
                    if alias.name != "*":
                        scope.set(alias.asname or alias.name, _qualify(f"{stmt.module}.{alias.name}"))
        elif isinstance(stmt, ast.Assign):
            kind = self._eval(stmt.value, scope)
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
            self._bind(stmt.target, DSTREAM if kind == _CONTAINER else None, scope)
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
            scope.set(stmt.name, ("func", id(stmt)))
            self.deferred.append((stmt, scope))
        elif isinstance(stmt, ast.ClassDef):
            for base in stmt.bases:
                if self._eval(base, scope) == "listener_class":
                    self._report(stmt, RULES["StreamingListener"])
            self._body(stmt.body, _Scope(scope))
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

    def _function(self, func: ast.FunctionDef | ast.AsyncFunctionDef, parent: _Scope) -> None:
        scope = _Scope(parent)
        params = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
        names = {a.arg for a in params}
        for param in params:
            scope.set(param.arg, self._param_kind(param, names, parent))
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
            self._eval(target.value, scope)

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
                self._bind(generator.target, DSTREAM if kind == _CONTAINER else None, inner)
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
        if isinstance(func, ast.Attribute):
            base = self._eval(func.value, scope)
            result = self._method(node, func.attr, base, scope)
        else:
            callee = self._eval(func, scope)
            result = self._callee(node, callee)
        for argument in node.args:
            self._eval(argument, scope)
        for keyword in node.keywords:
            self._eval(keyword.value, scope)
        return result

    def _method(self, node: ast.Call, method: str, base: Any, scope: _Scope) -> Any:
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
            if method in ("reduceByKeyAndWindow", "reduceByWindow"):
                inverse = _arg(node, 1, "invFunc" if method == "reduceByKeyAndWindow" else "invReduceFunc")
                has_inverse = inverse is not None and not (isinstance(inverse, ast.Constant) and inverse.value is None)
                if method == "reduceByKeyAndWindow":
                    key += " (with inverse function)" if has_inverse else " (without inverse function)"
            return self._known(node, key, "DStream", method)
        if isinstance(base, str) and base.startswith(("kafka:", "utils:")):
            owner = base.split(":", 1)[1]
            return self._known(node, f"{owner}.{method}", owner, method)
        if base == SOURCE:
            if method in ("events", "drop_late"):
                self._report(node, RULES[f"Source.{method}"])
                return RULES[f"Source.{method}"].returns
            return None
        return None

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


def analyse_source(source: str, path: str = "<job>") -> MigrationPlan:
    """Analyse a DStream job's source text (never executed).

    Args:
        source: the job's Python source.
        path: its file name, for messages and the plan.

    Raises:
        JobSourceError: the source is not valid Python 3.
    """
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 0
        text = (exc.text or "").strip()
        msg = (f"{path}, line {line}: {exc.msg}{f' ({text!r})' if text else ''}. dmk migrate reads the job as "
               "Python 3 source without running it, so it must parse; fix the syntax (a Python 2 job: port print "
               "statements and `except E, e:` to Python 3 first) and run dmk migrate again.")
        raise JobSourceError(msg, path=path, line=line) from None
    analyser = _Analyser(tree)
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
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read the {role} {str(path)!r}: {exc}. Give the path of the {role}'s .py file."
        raise JobSourceError(msg, path=str(path)) from None
    return analyse_source(source, str(path))
