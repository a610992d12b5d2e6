"""Per-record functions as Spark column expressions: which ``map``/``filter``/``flatMap`` lambdas have one.

The analysis marks a per-record finding automatic exactly when its function has a column expression here
(:func:`per_record_columns`); :func:`column` is the translation itself (``line.split(" ")`` becomes
``F.split(F.col("value"), " ")``, ``kv[1]`` of a Kafka pair ``F.col("value").cast("string")``, ``w in ("a",
"b")`` ``isin``, ``and``/``or``/``not``, comparisons, arithmetic, ``lower``/``upper``/``strip``,
``startswith``/``endswith``, ``len``, ``int``/``float``/``str``).

What a record is follows the chain from its source: ``"kafka"`` for a Kafka ``(key, value)`` pair, ``"value"``
for a line of a socket or file stream (or a single column made from one), ``("tuple", n)`` for a tuple built by
an earlier ``map``, ``"fields"`` for the kit's event dicts. Reads the job's ``ast`` only.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["column", "is_sum", "per_record", "per_record_columns"]

_F_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
_SOURCES = {"KafkaUtils.createDirectStream": "kafka", "KafkaUtils.createStream": "kafka",
            "StreamingContext.socketTextStream": "value", "StreamingContext.textFileStream": "value",
            "Source.events": "fields"}
_SAME = ("DStream.cache", "DStream.persist", "DStream.checkpoint", "DStream.repartition")


def _py(value: Any) -> str:
    """A Python literal: strings in double quotes."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def is_sum(function: ast.expr | None) -> bool:
    """``lambda a, b: a + b``, ``operator.add`` or ``add``."""
    if isinstance(function, ast.Lambda) and len(function.args.args) == 2:
        a, b = (p.arg for p in function.args.args)
        body = function.body
        return (isinstance(body, ast.BinOp) and isinstance(body.op, ast.Add) and isinstance(body.left, ast.Name)
                and isinstance(body.right, ast.Name) and {body.left.id, body.right.id} == {a, b})
    return (isinstance(function, ast.Name) and function.id == "add") or (
        isinstance(function, ast.Attribute) and function.attr == "add")


def per_record_columns(tree: ast.Module, sites: Iterable[tuple[ast.AST, str]]) -> dict[int, str]:
    """The per-record calls (``map``, ``filter``, ``flatMap``) whose function has a column expression.

    Args:
        tree: the job's module.
        sites: ``(call node, construct)`` of the job's findings.

    Returns:
        ``id(call node)`` → the DataFrame code the call becomes (``select(...)``, ``where(...)``).
    """
    constructs = {id(node): construct for node, construct in sites}
    bound: dict[str, list[ast.expr]] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            bound.setdefault(stmt.targets[0].id, []).append(stmt.value)
    found: dict[int, str] = {}
    seen: dict[int, Any] = {}

    def model(node: ast.expr, depth: int = 0) -> Any:
        if depth > 50:
            return None
        if isinstance(node, ast.Name):
            values = bound.get(node.id, [])
            return model(values[0], depth + 1) if len(values) == 1 else None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return None
        if id(node) in seen:
            return seen[id(node)]
        construct = constructs.get(id(node), "")
        result: Any = None
        if construct in _SOURCES:
            result = _SOURCES[construct]
        elif construct.startswith("DStream."):
            base = model(node.func.value, depth + 1)
            if construct in _SAME:
                result = base
            elif construct == "DStream.union" and node.args:
                other = model(node.args[0], depth + 1)
                result = base if base == other else None
            elif construct in ("DStream.map", "DStream.filter", "DStream.flatMap") and base is not None:
                translated = per_record(node, construct[len("DStream."):], base)
                if translated is not None:
                    found[id(node)], result = translated
        seen[id(node)] = result
        return result

    for node, construct in sites:
        if construct in ("DStream.map", "DStream.filter", "DStream.flatMap") and isinstance(node, ast.Call):
            model(node)
    return found


def per_record(node: ast.Call, method: str, model: Any) -> tuple[str, Any] | None:
    """The DataFrame code of one per-record call and the model of what it yields, or None."""
    function = node.args[0] if node.args else None
    if not isinstance(function, ast.Lambda) or len(function.args.args) != 1:
        return None
    param = function.args.args[0].arg
    body = function.body
    if method == "filter":
        condition = column(body, param, model)
        return None if condition is None else (f"where({condition})", model)
    if method == "flatMap":
        split = column(body, param, model)
        if split is None or not split.startswith("F.split("):
            return None
        return f'select(F.explode({split}).alias("value"))', "value"
    if isinstance(body, ast.Tuple):
        columns = [column(e, param, model) for e in body.elts]
        if any(c is None for c in columns):
            return None
        shown = ", ".join(f'{c}.alias("_{i + 1}")' for i, c in enumerate(columns))
        return f"select({shown})", ("tuple", len(columns))
    single = column(body, param, model)
    return None if single is None else (f'select({single}.alias("value"))', "value")


def column(node: ast.expr, param: str, model: Any) -> str | None:
    """A Python expression over one record (``param``) as a Spark column expression, or None when it has none."""
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
        return _compare(node, param, model)
    if isinstance(node, ast.BoolOp):
        parts = [column(v, param, model) for v in node.values]
        if any(p is None for p in parts):
            return None
        joiner = " & " if isinstance(node.op, ast.And) else " | "
        return "(" + joiner.join(p for p in parts if p) + ")"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = column(node.operand, param, model)
        return f"~{inner}" if inner else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        if any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in (node.left, node.right)):
            return None  # Python's str + str is a concatenation, Spark's + a number
        left, right = column(node.left, param, model), column(node.right, param, model)
        if left is None or right is None:
            return None
        return f"({left} {_ARITH[type(node.op)]} {right})"
    if isinstance(node, ast.Call):
        return _call(node, param, model)
    return None


def _compare(node: ast.Compare, param: str, model: Any) -> str | None:
    left = column(node.left, param, model)
    right_node = node.comparators[0]
    op = type(node.ops[0])
    if op in (ast.In, ast.NotIn) and isinstance(_const(node.left), str):  # '#' in word: a substring test
        within = column(right_node, param, model)
        if within is None or not within.startswith('F.col("value")'):
            return None
        test = f"{within}.contains({_py(_const(node.left))})"
        return test if op is ast.In else f"~{test}"
    if op in (ast.In, ast.NotIn) and isinstance(right_node, (ast.Tuple, ast.List, ast.Set)):
        values = [_const(e) for e in right_node.elts]
        if left is None or any(v is None for v in values):
            return None
        test = f"{left}.isin([{', '.join(_py(v) for v in values)}])"
        return test if op is ast.In else f"~({test})"
    right = column(right_node, param, model)
    if left is None or right is None or op not in _F_OPS:
        return None
    return f"({left} {_F_OPS[op]} {right})"


def _call(node: ast.Call, param: str, model: Any) -> str | None:
    if isinstance(node.func, ast.Attribute):
        receiver = column(node.func.value, param, model)
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
        inner = column(node.args[0], param, model)
        if inner is None:
            return None
        casts = {"int": '.cast("long")', "float": '.cast("double")', "str": '.cast("string")'}
        if node.func.id in casts:
            return inner + casts[node.func.id]
        if node.func.id == "len":
            return f"F.length({inner})"
    return None
