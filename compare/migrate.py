"""``dmk migrate``: a DStream job's migration plan, read from its source with Python's ``ast`` (never run).

The analyser reports every Spark Streaming construct a job uses (``StreamingContext``, DStream methods,
``KafkaUtils`` of ``pyspark.streaming.kafka`` or the kit's drop-in ``legacy.kafka``, ``spark.streaming.*``
configuration keys), at its line, with the Structured Streaming counterpart, the playbook section, whether the
rewrite is mechanical, and the semantic trap to check (:mod:`compare._migrate_rules`). It can write a draft
Structured Streaming job, and, given the rewrite, say which findings it addressed and print the
``dmk compare-jobs`` command that proves it.

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

Example::

    plan = analyse("jobs/wordcount.py")            # JobSourceError if it does not parse
    for f in plan.findings:
        print(f.line, f.construct, f.counterpart, f.playbook, f.automatic, f.note)
    Path("draft.py").write_text(draft(plan))
    print(render_markdown(plan, review(plan, "jobs/wordcount_ss.py")))
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compare._migrate_rules import (
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
from compare.errors import JobSourceError

__all__ = [
    "FINDING_KEYS",
    "Finding",
    "JobSourceError",
    "MigrationPlan",
    "Review",
    "ReviewItem",
    "analyse",
    "analyse_source",
    "compare_jobs_command",
    "draft",
    "render_json",
    "render_markdown",
    "review",
]

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
    # A per-record function is mechanical exactly when the draft translates it to a column expression.
    translated = _Drafter(MigrationPlan(path, (), source, False, (), sites, tuple(analyser.steps), analyser.facts))
    translated.render()
    sites = tuple(
        _Site(replace(site.finding, automatic=True), site.node, site.rule)
        if site.finding.construct in _PER_RECORD and id(site.node) in translated.done else site
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


# -- rendering ------------------------------------------------------------------------------------------


def render_json(plan: MigrationPlan, modern: Review | None = None) -> str:
    """``--json``: ``{"job": path, "findings": [...]}`` (and ``"modern"`` with ``--modern``)."""
    document: dict[str, Any] = {"job": plan.path, "findings": [f.to_json() for f in plan.findings]}
    if modern is not None:
        document["modern"] = modern.to_json()
    return json.dumps(document, indent=2, ensure_ascii=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: MigrationPlan, modern: Review | None = None) -> str:
    """The migration plan as Markdown: a summary, one table row per finding, and the review of a rewrite."""
    findings = plan.findings
    unknown = sum(f.unknown for f in findings)
    automatic = sum(f.automatic for f in findings)
    lines = [
        f"# Migration plan: {plan.path}",
        "",
        f"{len(findings)} findings: {automatic} automatic, {len(findings) - automatic - unknown} manual, "
        f"{unknown} unknown. Read from the source with `ast`; the job was not run.",
        "",
    ]
    if findings:
        lines += ["| line | construct | Structured Streaming | automatic | playbook | check |",
                  "|---:|---|---|---|---|---|"]
        for f in findings:
            anchor = f.playbook.split("#", 1)[1]
            lines.append(f"| {f.line} | `{_cell(f.construct)}` | {_cell(f.counterpart)} | "
                         f"{'yes' if f.automatic else 'no'} | [{anchor}]({f.playbook}) | {_cell(f.note)} |")
    else:
        lines.append("No DStream, StreamingContext or KafkaUtils construct found.")
    if modern is not None:
        lines += ["", f"## The rewrite: {modern.path}", "",
                  f"{sum(i.addressed for i in modern.items)} of {len(modern.items)} findings addressed.", "",
                  "| line | construct | addressed | evidence in the rewrite |", "|---:|---|---|---|"]
        for item in modern.items:
            lines.append(f"| {item.finding.line} | `{_cell(item.finding.construct)}` | "
                         f"{'yes' if item.addressed else 'NO'} | {_cell(item.evidence)} |")
        lines += ["", "## Prove it", "", "```bash", modern.command, "```", "", modern.command_note]
    return "\n".join(lines) + "\n"


# -- the rewrite ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewItem:
    """Whether the rewrite addressed one finding.

    Attributes:
        finding: the legacy finding.
        addressed: whether the rewrite holds one of the rule's counterparts.
        evidence: where (``line 12: readStream, format("kafka")``), or what is missing.
    """

    finding: Finding
    addressed: bool
    evidence: str

    def to_json(self) -> dict[str, Any]:
        """``{"line", "construct", "addressed", "evidence"}``."""
        return {"line": self.finding.line, "construct": self.finding.construct, "addressed": self.addressed,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Review:
    """The rewrite's answer to each legacy finding, and the command that proves the two jobs equivalent.

    Attributes:
        path: the modern job.
        items: one per legacy finding, in the same order.
        command: the ``dmk compare-jobs`` command (placeholders in capitals for what it cannot know).
        command_note: what the placeholders are and what to check before running it.
    """

    path: str
    items: tuple[ReviewItem, ...]
    command: str
    command_note: str

    def to_json(self) -> dict[str, Any]:
        """``{"path", "results", "command", "command_note"}``."""
        return {"path": self.path, "results": [i.to_json() for i in self.items], "command": self.command,
                "command_note": self.command_note}


def _tokens(tree: ast.AST) -> dict[str, int]:
    """What a Structured Streaming job uses, each token with its first line.

    Tokens: method, function and imported names, and ``format:X``, ``option:K``, ``trigger:K``, ``outputMode:M``.
    """
    found: dict[str, int] = {}

    def add(token: str, line: int) -> None:
        found.setdefault(token, line)

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            add(node.attr, node.end_lineno or line)
        elif isinstance(node, ast.Name):
            add(node.id, line)
        elif isinstance(node, ast.alias):
            add((node.asname or node.name).split(".")[-1], line)
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            line = (node.func.end_lineno or line) if isinstance(node.func, ast.Attribute) else line
            first = node.args[0] if node.args else None
            if name in ("format", "outputMode", "option") and isinstance(_const(first), str):
                add(f"{name}:{_const(first)}", line)
            if name == "options":
                for keyword in node.keywords:
                    if keyword.arg:
                        add(f"option:{keyword.arg}", line)
            if name in ("text", "json", "csv", "parquet", "orc") and isinstance(node.func, ast.Attribute):
                add(f"format:{name}", line)
            if name == "trigger":
                for keyword in node.keywords:
                    if keyword.arg:
                        add(f"trigger:{keyword.arg}", line)
    return found


def review(plan: MigrationPlan, modern_path: str | Path) -> Review:
    """Which of ``plan``'s findings the Structured Streaming job in ``modern_path`` addressed (read with ``ast``).

    A finding is addressed when the rewrite holds every token of one of its rule's alternatives (e.g.
    ``readStream`` and ``format("kafka")`` for ``KafkaUtils.createDirectStream``); an unknown construct never
    is. This is evidence that a counterpart is present, not proof of equivalence: the command printed runs both
    jobs on the same data.

    Raises:
        JobSourceError: the modern job cannot be read or parsed.
    """
    modern = analyse(modern_path, role="Structured Streaming job (--modern)")  # the same reading and errors
    tokens = _tokens(ast.parse(modern.source))
    items = []
    for site in plan._sites:
        rule = site.rule
        if rule is None:
            items.append(ReviewItem(site.finding, False, "unknown construct: check the rewrite by hand"))
            continue
        if not rule.addressed_by:
            items.append(ReviewItem(site.finding, False, "no Structured Streaming counterpart to look for: check "
                                                         "by hand"))
            continue
        for alternative in rule.addressed_by:
            if alternative <= tokens.keys():
                shown = ", ".join(f"{t} (line {tokens[t]})" for t in sorted(alternative, key=lambda t: (tokens[t], t)))
                items.append(ReviewItem(site.finding, True, shown))
                break
        else:
            wanted = " or ".join(" + ".join(sorted(alt)) for alt in rule.addressed_by)
            items.append(ReviewItem(site.finding, False, f"none of: {wanted}"))
    command, note = compare_jobs_command(plan, modern)
    return Review(str(modern_path), tuple(items), command, note)


_PLACEHOLDER_OF = (("output_topic", "output_topic"), ("out_topic", "output_topic"), ("output_dir", "output_dir"),
                   ("bootstrap", "bootstrap"), ("broker", "bootstrap"), ("checkpoint", "checkpoint"),
                   ("topic", "topic"))


def _job_command(plan: MigrationPlan) -> tuple[str, list[str]]:
    """``python PATH ARGS`` for compare-jobs, and the arguments it could not map to a placeholder."""
    args, unmapped = [], []
    for name in plan.argv_names:
        lowered = name.lower()
        placeholder = next((p for fragment, p in _PLACEHOLDER_OF if fragment in lowered), None)
        if placeholder is None:
            args.append(name.upper())
            unmapped.append(name.upper())
        else:
            args.append("{" + placeholder + "}")
    if not plan.argv_names:
        args = ["{bootstrap}", "{topic}", "{output_topic}", "{checkpoint}"]
    return shlex.join(["python", plan.path]) + " " + " ".join(args), unmapped


def compare_jobs_command(legacy: MigrationPlan, modern: MigrationPlan) -> tuple[str, str]:
    """The ``dmk compare-jobs`` command that runs both jobs on one capture, and a note on its placeholders.

    The job commands get compare-jobs' placeholders where the ``__main__`` block unpacks ``sys.argv`` into
    names that say what they are (``bootstrap``, ``topic``, ``output_topic``, ``checkpoint``); ``CAPTURE.jsonl``
    and ``KEY`` (and any argument it could not map, in capitals) are for the user to fill in.
    """
    legacy_cmd, legacy_unmapped = _job_command(legacy)
    modern_cmd, modern_unmapped = _job_command(modern)
    command = (f"dmk compare-jobs --input CAPTURE.jsonl --key KEY --legacy {shlex.quote(legacy_cmd)} "
               f"--modern {shlex.quote(modern_cmd)}")
    notes = ["Fill in CAPTURE.jsonl (a capture of the job's input topic: `dmk capture TOPIC --out CAPTURE.jsonl`) "
             "and KEY (the output's key fields): a static reading cannot know them."]
    for job, unmapped in ((legacy, legacy_unmapped), (modern, modern_unmapped)):
        if job.has_main and not job.argv_names:
            notes.append(f"{job.path} unpacks no sys.argv in a __main__ block: its arguments above are a guess; "
                         "give the command that runs it with compare-jobs' placeholders.")
        if unmapped:
            notes.append(f"{job.path}: replace {', '.join(unmapped)} with the value or a placeholder.")
    if not (legacy.has_main and modern.has_main):
        workload = Path(legacy.path).stem if Path(legacy.path).parent.name == "workloads" else "WORKLOAD"
        notes.append("compare-jobs runs scripts, and this pair has no __main__ block: builder modules "
                     f"(build(ssc, source) / build(spark, source)) are compared with `dmk compare {workload}` (or "
                     "`dmk compare SPEC --legacy MOD:FN --modern MOD:FN`) instead.")
    notes.append("Exit code 0 means the outputs are equivalent by key (docs/compare.md).")
    return command, " ".join(notes)


# -- the draft ------------------------------------------------------------------------------------------


def draft(plan: MigrationPlan) -> str:
    """A draft Structured Streaming job: the mechanical parts translated, a TODO with a playbook link elsewhere.

    Every DStream assignment of the job becomes a DataFrame assignment, in source order; every output operation
    (or a builder's returned DStream) becomes a ``writeStream`` query with the job's checkpoint directory and
    batch interval. The result always parses (``ast.parse``); it is a starting point, not a finished job.
    """
    return _Drafter(plan).render()


_F_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}


class _Drafter:
    def __init__(self, plan: MigrationPlan) -> None:
        self.plan = plan
        self.source = plan.source
        self.models: dict[str, Any] = {}  # draft variable → element model
        self.lines: list[str] = []
        self.done: set[int] = set()  # ids of the call nodes the draft translated
        self.stateful = any(
            s.rule is not None and s.rule.construct.startswith(
                ("DStream.updateStateByKey", "DStream.reduceByKey", "DStream.countBy", "DStream.reduceBy",
                 "DStream.groupBy", "DStream.combineByKey", "event_time_operator"))
            for s in plan._sites
        )
        self.queries = 0
        self.trigger: str | None = None
        self.checkpoint = _py("CHECKPOINT_DIR")

    def _text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def _flat(self, node: ast.AST) -> str:
        """The node's source on one line, for a comment."""
        return " ".join(self._text(node).split())

    def _todo(self, site: _Site, indent: str = "") -> str:
        rule, f = site.rule, site.finding
        what = rule.counterpart if rule is not None else "unknown construct: port it by hand"
        return f"{indent}# TODO(playbook: {f.playbook}): line {f.line} {f.construct} -> {what}"

    def _sites_in(self, node: ast.AST) -> list[_Site]:
        ids = {id(n) for n in ast.walk(node)}
        return [s for s in self.plan._sites if id(s.node) in ids]

    def render(self) -> str:
        facts = self.plan._facts
        out = [f'"""Draft Structured Streaming rewrite of {self.plan.path}, written by `dmk migrate --out`.',
               "",
               "Generated from a static reading of the DStream job: the mechanical parts are translated; every",
               "TODO links the playbook section for a part to port by hand. Review all of it before running.",
               '"""', "", "from pyspark.sql import SparkSession", "from pyspark.sql import functions as F", "",
               'spark = SparkSession.builder.appName("migrated").getOrCreate()']
        batch = facts.get("batch")
        self.trigger = None
        if isinstance(_const(batch), (int, float)) and not isinstance(_const(batch), bool):
            self.trigger = f"{_const(batch):g} seconds"
        elif batch is not None:
            out.append(f"# TODO(playbook: {playbook_link('the-map')}): the batch interval is "
                       f"{self._flat(batch)}: set TRIGGER below to it in seconds")
            self.trigger = "TRIGGER"
        checkpoint = facts.get("checkpoint")
        if isinstance(_const(checkpoint), str):
            self.checkpoint = _py(_const(checkpoint))
        else:
            if checkpoint is not None:
                out.append(f"# TODO(playbook: {playbook_link('the-map')}): the job's checkpoint directory is "
                           f"{self._flat(checkpoint)}; give each query its own directory under it")
            self.checkpoint = _py("CHECKPOINT_DIR")
        out.append("")
        self.lines = out
        steps = sorted(self.plan._steps, key=lambda s: s.line)
        for step in steps:
            self._step(step)
        covered = {id(s) for step in steps for s in self._sites_in(step.node)}
        rest = [s for s in self.plan._sites if id(s) not in covered and not self._header_site(s)]
        if rest:
            self.lines += ["", "# What the job does elsewhere (configuration, context, listeners):"]
            for site in rest:
                if site.rule is not None and site.rule.automatic:
                    self.lines.append(f"# line {site.finding.line} {site.finding.construct} -> "
                                      f"{site.rule.counterpart} (done above or not needed)")
                else:
                    self.lines.append(self._todo(site))
        if self.queries:
            self.lines += ["", "spark.streams.awaitAnyTermination()"]
        else:
            self.lines += ["", f"# TODO(playbook: {playbook_link('the-map')}): no output operation was found: "
                               "add the query's writeStream ... start()"]
        text = "\n".join(self.lines) + "\n"
        ast.parse(text)  # a draft that does not parse is a bug here, not the user's problem
        return text

    @staticmethod
    def _header_site(site: _Site) -> bool:
        return site.finding.construct in ("StreamingContext(sc, batchDuration)", "StreamingContext.getOrCreate",
                                          "get_or_create", "StreamingContext.checkpoint", "StreamingContext.start",
                                          "StreamingContext.awaitTermination",
                                          "StreamingContext.awaitTerminationOrTimeout")

    def _step(self, step: _Step) -> None:
        node = step.node
        sites = self._sites_in(node)
        original = [f"# line {step.line + i}: {line.strip()}" for i, line in enumerate(self._text(node).splitlines())]
        if step.kind == "assign":
            value = step.value
            assert value is not None
            sites = self._sites_in(value)
            translated = self._translate(value)
            self.lines += ["", *original]
            for site in sites:
                if id(site.node) not in self.done:
                    self.lines.append(self._todo(site))
            if translated is None:
                partial = self._partial(value)
                if not sites:
                    self.lines.append(f"# TODO(playbook: {playbook_link('the-map')}): {step.target} comes from "
                                      f"{self._flat(value)}, which the draft does not translate")
                self.models[step.target] = None
                self.lines.append(f"{step.target} = {partial if partial else 'None'}")
            else:
                code, model = translated
                self.models[step.target] = model
                self.lines.append(f"{step.target} = {code}")
        elif step.kind == "unpack":
            self.lines += ["", *original, *[self._todo(s) for s in sites]]
            if not sites:
                self.lines.append(f"# TODO(playbook: {playbook_link('the-map')}): these streams come from code the "
                                  "draft does not translate")
            for target in node.targets:  # type: ignore[attr-defined]
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        self.models[name.id] = None
                        self.lines.append(f"{name.id} = None")
        else:
            self._output(step, sites, original)

    def _best(self, node: ast.expr) -> tuple[str, Any] | None:
        """``node`` translated, else its longest translatable receiver."""
        translated = self._translate(node)
        if translated is not None:
            return translated
        partial = self._partial(node)
        return (partial, None) if partial is not None else None

    def _output(self, step: _Step, sites: list[_Site], original: list[str]) -> None:
        node = step.node
        self.lines += ["", *original]
        todos: list[str] = []
        if step.kind == "return":
            assert isinstance(node, ast.expr)
            stream = self._best(node)
            sink = 'format("console")'
            todos.append(f"# TODO(playbook: {playbook_link('the-contract-both-sides-follow')}): the builder returned "
                         "this stream and its runner wrote it: choose the sink")
        else:
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            stream = self._best(node.func.value)
            method = node.func.attr
            if method == "pprint":
                number = _arg(node, 0, "num")
                sink = f'format("console").option("numRows", {self._text(number) if number is not None else 10})'
                self.done.add(id(node))
            elif method == "saveAsTextFiles":
                sink = f'format("text").option("path", {self._literal(_arg(node, 0, "prefix"))})'
                self.done.add(id(node))
                todos.append(f"# TODO(playbook: {playbook_link('the-map')}): the text sink writes one string "
                             "column: select it (e.g. F.to_json(F.struct(...)))")
            else:
                function = f"batch_{self.queries + 1}"
                self.lines += [
                    f"def {function}(df, batch_id):",
                    f"    # TODO(playbook: {playbook_link('duplicates-after-a-restart')}): port the foreachRDD "
                    f"function of line {step.line}; write idempotently by batch_id",
                    f'    raise NotImplementedError("port the foreachRDD function of line {step.line}")',
                    "",
                ]
                sink = f"foreachBatch({function})"
        self._query(stream, sink, todos + [self._todo(s) for s in sites if id(s.node) not in self.done])

    def _query(self, stream: tuple[str, Any] | None, sink: str, todos: list[str]) -> None:
        if stream is None:
            todos = [*todos, f"# TODO(playbook: {playbook_link('the-map')}): the stream written here was not "
                             "translated: put its DataFrame in place of None"]
        self.queries += 1
        name = f"query_{self.queries}"
        mode = "update" if self.stateful else "append"
        self.lines += todos
        if self.stateful:
            self.lines.append(f"# TODO(playbook: {playbook_link('output-mode-timing')}): output mode {mode!r}: "
                              "aggregations emit changed rows; windowed ones with a watermark may use append")
        code = stream[0] if stream is not None else "None"
        trigger = f'.trigger(processingTime="{self.trigger}")' if self.trigger else ""
        self.lines.append(
            f"{name} = ({code}.writeStream.queryName({_py(name)}).outputMode({_py(mode)})\n"
            f"    .option(\"checkpointLocation\", {self.checkpoint} + \"/{name}\"){trigger}\n"
            f"    .{sink}.start())"
        )

    def _partial(self, value: ast.expr) -> str | None:
        """The longest translatable receiver of a call chain."""
        node: ast.expr = value
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
            translated = self._translate(node)
            if translated is not None:
                return translated[0]
        return None

    # ---- expressions to DataFrame code
    def _translate(self, node: ast.expr) -> tuple[str, Any] | None:
        if isinstance(node, ast.Name):
            if node.id in self.models:
                return node.id, self.models[node.id]
            return None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return None
        method = node.func.attr
        site = next((s for s in self.plan._sites if s.node is node), None)
        construct = site.finding.construct if site is not None else ""
        if construct in ("KafkaUtils.createDirectStream", "KafkaUtils.createStream"):
            return self._kafka(node, construct), "kafka"
        if construct == "StreamingContext.socketTextStream":
            host, port = _arg(node, 0, "hostname"), _arg(node, 1, "port")
            self.done.add(id(node))
            return (f'spark.readStream.format("socket").option("host", {self._literal(host)})'
                    f'.option("port", {self._literal(port)}).load()'), "value"
        if construct == "StreamingContext.textFileStream":
            self.done.add(id(node))
            return f'spark.readStream.format("text").load({self._literal(_arg(node, 0, "directory"))})', "value"
        if construct == "Source.events":
            self.done.add(id(node))
            arguments = ", ".join(self._text(a) for a in [*node.args, *node.keywords])
            return f"source.events({arguments})", "fields"
        if site is None or not construct.startswith("DStream."):
            return None
        base = self._translate(node.func.value)
        if base is None:
            return None
        code, model = base
        if method in ("cache", "persist", "checkpoint"):
            self.done.add(id(node))
            return code, model
        if method == "repartition":
            self.done.add(id(node))
            return f"{code}.repartition({self._text(node.args[0]) if node.args else ''})", model
        if method == "union" and node.args:
            other = self._translate(node.args[0])
            if other is None:
                return None
            self.done.add(id(node))
            return f"{code}.unionByName({other[0]})", model if model == other[1] else None
        function = node.args[0] if node.args else None
        if method in ("map", "filter", "flatMap") and isinstance(function, ast.Lambda):
            params = function.args.args
            if len(params) != 1:
                return None
            param = params[0].arg
            if method == "filter":
                condition = _column(function.body, param, model)
                if condition is None:
                    return None
                self.done.add(id(node))
                return f"{code}.where({condition})", model
            if method == "flatMap":
                body = function.body
                column = _column(body, param, model)
                if column is None or not column.startswith("F.split("):
                    return None
                self.done.add(id(node))
                return f'{code}.select(F.explode({column}).alias("value"))', "value"
            body = function.body
            if isinstance(body, ast.Tuple):
                columns = [_column(e, param, model) for e in body.elts]
                if any(c is None for c in columns):
                    return None
                self.done.add(id(node))
                shown = ", ".join(f'{c}.alias("_{i + 1}")' for i, c in enumerate(columns))
                return f"{code}.select({shown})", ("tuple", len(columns))
            column = _column(body, param, model)
            if column is None:
                return None
            self.done.add(id(node))
            return f'{code}.select({column}.alias("value"))', "value"
        if method == "reduceByKey" and model == ("tuple", 2) and _is_sum(function):
            # Translated, but not done: a running total is not a per-batch reduce (the TODO says so).
            return f'{code}.groupBy("_1").agg(F.sum("_2").alias("_2"))', ("tuple", 2)
        return None

    def _literal(self, node: ast.expr | None) -> str:
        if node is None:
            return '"TODO"'
        if isinstance(node, ast.Constant):
            return _py(node.value)
        return _py(f"TODO: {self._text(node)}")

    def _kafka(self, node: ast.Call, construct: str) -> str:
        self.done.add(id(node))
        direct = construct == "KafkaUtils.createDirectStream"
        topics = _arg(node, 1, "topics") if direct else _arg(node, 3, "topics")
        params = _arg(node, 2, "kafkaParams") if direct else _arg(node, 4, "kafkaParams")
        params = self._resolve(params)
        options: list[tuple[str, str]] = []
        servers = None
        reset = None
        if isinstance(params, ast.Dict):
            for key, value in zip(params.keys, params.values, strict=True):
                name = _const(key)
                if name in ("metadata.broker.list", "bootstrap.servers"):
                    servers = value
                elif name == "auto.offset.reset":
                    reset = {"smallest": "earliest", "largest": "latest", "earliest": "earliest",
                             "latest": "latest"}.get(_const(value))
        options.append(("kafka.bootstrap.servers", self._literal(servers) if servers is not None else
                        '"TODO: the brokers"'))
        topics = self._resolve(topics)
        if isinstance(topics, (ast.List, ast.Tuple)) and all(isinstance(_const(t), str) for t in topics.elts):
            options.append(("subscribe", _py(",".join(_const(t) for t in topics.elts))))
        elif isinstance(topics, ast.Dict) and all(isinstance(_const(k), str) for k in topics.keys):
            options.append(("subscribe", _py(",".join(_const(k) for k in topics.keys))))
        else:
            options.append(("subscribe", self._literal(topics)))
        from_offsets = _arg(node, 3, "fromOffsets") if direct else None
        if from_offsets is not None:
            options.append(("startingOffsets", _py(f"TODO: the JSON of {self._text(from_offsets)}")))
        else:
            options.append(("startingOffsets", _py(reset or "latest")))
        shown = "".join(f"\n    .option({json.dumps(k)}, {v})" for k, v in options)
        return f'(spark.readStream.format("kafka"){shown}\n    .load())'

    def _resolve(self, node: ast.expr | None) -> ast.expr | None:
        """A Name bound once to a literal in the job: that literal."""
        if not isinstance(node, ast.Name):
            return node
        values = [s.value for s in ast.walk(ast.parse(self.source)) if isinstance(s, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == node.id for t in s.targets)]
        return values[0] if len(values) == 1 and isinstance(values[0], (ast.Dict, ast.List, ast.Tuple)) else node


def _py(value: Any) -> str:
    """A Python literal for the draft: strings in double quotes, as the rest of the draft."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _is_sum(function: ast.expr | None) -> bool:
    """``lambda a, b: a + b``, ``operator.add`` or ``add``."""
    if isinstance(function, ast.Lambda) and len(function.args.args) == 2:
        a, b = (p.arg for p in function.args.args)
        body = function.body
        return (isinstance(body, ast.BinOp) and isinstance(body.op, ast.Add) and isinstance(body.left, ast.Name)
                and isinstance(body.right, ast.Name) and {body.left.id, body.right.id} == {a, b})
    return (isinstance(function, ast.Name) and function.id == "add") or (
        isinstance(function, ast.Attribute) and function.attr == "add")


def _column(node: ast.expr, param: str, model: Any) -> str | None:
    """A Python expression over one record as a Spark column expression, or None when it has none."""
    if isinstance(node, ast.Name) and node.id == param:
        return 'F.col("value")' if model == "value" else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param:
        index = _const(node.slice)
        if model == "kafka" and index in (0, 1):
            return f'F.col("{("key", "value")[index]}").cast("string")'
        if isinstance(model, tuple) and isinstance(index, int) and 0 <= index < model[1]:
            return f'F.col("_{index + 1}")'
        if model == "fields" and isinstance(index, str):
            return f"F.col({_py(index)})"
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
        return f"F.lit({_py(node.value)})"
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left = _column(node.left, param, model)
        right_node = node.comparators[0]
        op = type(node.ops[0])
        if op in (ast.In, ast.NotIn) and isinstance(right_node, (ast.Tuple, ast.List, ast.Set)):
            values = [_const(e) for e in right_node.elts]
            if left is None or any(v is None for v in values):
                return None
            test = f"{left}.isin([{', '.join(_py(v) for v in values)}])"
            return test if op is ast.In else f"~({test})"
        right = _column(right_node, param, model)
        if left is None or right is None or op not in _F_OPS:
            return None
        return f"({left} {_F_OPS[op]} {right})"
    if isinstance(node, ast.BoolOp):
        parts = [_column(v, param, model) for v in node.values]
        if any(p is None for p in parts):
            return None
        joiner = " & " if isinstance(node.op, ast.And) else " | "
        return "(" + joiner.join(p for p in parts if p) + ")"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _column(node.operand, param, model)
        return f"~{inner}" if inner else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        if any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in (node.left, node.right)):
            return None  # Python's str + str is a concatenation, Spark's + a number
        left, right = _column(node.left, param, model), _column(node.right, param, model)
        if left is None or right is None:
            return None
        return f"({left} {_ARITH[type(node.op)]} {right})"
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            receiver = _column(node.func.value, param, model)
            if receiver is None:
                return None
            method = node.func.attr
            if method == "split":
                sep = _const(node.args[0]) if node.args else None
                if node.args and not isinstance(sep, str):
                    return None
                # F.split takes a Java regular expression: escape a separator only where it has metacharacters.
                pattern = (re.escape(sep) if set(sep) & set(".^$*+?{}[]\\|()") else sep) if sep else r"\s+"
                return f"F.split({receiver if sep else f'F.trim({receiver})'}, {_py(pattern)})"
            unary = {"lower": "F.lower", "upper": "F.upper", "strip": "F.trim"}
            if method in unary and not node.args:
                return f"{unary[method]}({receiver})"
            if method in ("startswith", "endswith") and len(node.args) == 1 and isinstance(_const(node.args[0]), str):
                return f"{receiver}.{method}({_py(_const(node.args[0]))})"
            return None
        if isinstance(node.func, ast.Name) and len(node.args) == 1 and not node.keywords:
            inner = _column(node.args[0], param, model)
            if inner is None:
                return None
            casts = {"int": '.cast("long")', "float": '.cast("double")', "str": '.cast("string")'}
            if node.func.id in casts:
                return inner + casts[node.func.id]
            if node.func.id == "len":
                return f"F.length({inner})"
    return None
