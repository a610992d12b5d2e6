"""``dmk migrate --out``: a draft Structured Streaming job written from a DStream job's plan."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from migrate.analysis import MigrationPlan, _arg, _const, _Site, _Step
from migrate.rules import playbook_link


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
