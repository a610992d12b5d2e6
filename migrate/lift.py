"""Idiom lifting: a DStream job made only of recognised idioms, drafted as idiomatic DataFrame code.

:func:`lift` reads the job's streaming statements one by one (the ``__main__`` block, else the module's top
level) and writes each as DataFrame code; the job's other statements (argv checks, constants, its
SparkContext, helper functions) stay as they are. It recognises, and nothing else:

* inputs: ``socketTextStream(host, port)`` → ``format("socket")``; ``textFileStream(dir)`` → ``format("text")``;
  ``KafkaUtils.createDirectStream(ssc, topics, {"metadata.broker.list" or "bootstrap.servers": ...})`` (no
  other parameter than ``auto.offset.reset``) → ``format("kafka")``;
* per-record calls whose lambda has a column expression (:mod:`migrate.columns`): ``line.split(" ")`` →
  ``F.explode(F.split(...))``, ``(w, 1)`` → two columns, ``'#' in w`` → ``contains``, ``x[1]`` of a Kafka pair;
* ``reduceByKey`` of a sum (``lambda a, b: a + b``, ``add``) on pairs: a **per-batch** result, so it is
  aggregated inside ``foreachBatch`` (``batch_df.groupBy("_1").count()`` for ``(w, 1)``, else
  ``agg(F.sum)``); ``countByValue()`` likewise;
* ``updateStateByKey(f[, initialRDD=rdd])`` where ``f`` is a recognised fold (the sum or the count of the new
  values added to the old state) → a streaming ``groupBy("_1").agg(...)`` in **complete** output mode, since
  DStream's ``updateStateByKey`` emits every key every batch; the initial RDD's pairs are merged with the
  aggregate in ``foreachBatch`` by the same fold;
* ``pprint(n)`` → ``foreachBatch`` printing DStream's pprint text of the micro-batch (its ``Time:`` header, the
  first ``n`` elements, ``...``); ``ssc.start()``/``awaitTermination()`` → the queries' ``start()`` and
  ``awaitTermination()``; the batch interval → ``trigger(processingTime=...)``.

Anything else that touches a DStream or the StreamingContext (``foreachRDD``, ``transform``, windows, a
function of the job given a DStream, an unrecognised ``f``...) makes :func:`lift` return None, and the draft
is the carried runtime (:mod:`migrate.microbatch`): lifting is only chosen for shapes whose drafts are proven
equal to their originals by ``dmk migrate --verify`` (docs/migrate.md#lifted-drafts).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, NoReturn

from migrate.analysis import MigrationPlan
from migrate.columns import is_sum, per_record

__all__ = ["Lifted", "apply_edits", "lift"]

_STREAMING_MODULES = {"pyspark.streaming", "pyspark.streaming.kafka", "pyspark.streaming.context",
                      "pyspark.streaming.dstream", "legacy.kafka"}
_DASHES = '"-------------------------------------------"'


class _NotLifted(Exception):
    """A statement the lifter does not recognise: the draft falls back to the runtime."""


def _refuse(why: str) -> NoReturn:
    raise _NotLifted(why)


@dataclass(frozen=True)
class Lifted:
    """A lifted draft: its text and the idioms it lifted (one line each, for the header and the report)."""

    text: str
    idioms: tuple[str, ...]


@dataclass
class _Stream:
    """A DStream of the job as a streaming DataFrame: its code, what its rows are, and a pending aggregation."""

    code: str
    model: Any  # "value" (one string column), "kafka" (the Kafka source's row), ("tuple", n): columns _1.._n
    ones: bool = False  # a pair whose value is the literal 1: its sum is a count
    per_batch: str = ""  # "sum" or "count": aggregated per batch inside foreachBatch
    fold: str = ""  # "sum" or "count": a running aggregation (updateStateByKey)
    initial: str = ""  # the initial RDD's expression, for a fold


@dataclass
class _Job:
    interval: str = ""  # the batch interval's source text, in seconds
    context: str = ""  # the StreamingContext's name
    checkpoint: str = ""
    streams: dict[str, _Stream] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)  # the writers' names, in order
    idioms: list[str] = field(default_factory=list)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)


def apply_edits(lines: list[str], edits: dict[int, tuple[int, list[str]]]) -> list[str]:
    """``lines`` with each edit applied: ``edits[first] = (last, replacement)`` replaces lines first..last (0-based)."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index in edits:
            last, replacement = edits[index]
            out += replacement
            index = last + 1
        else:
            out.append(lines[index])
            index += 1
    return out


def lift(plan: MigrationPlan) -> Lifted | None:
    """The job as idiomatic DataFrame code, or None when any of its streaming statements is not a known idiom."""
    try:
        return _lift(plan)
    except _NotLifted:
        return None


def _lift(plan: MigrationPlan) -> Lifted:
    tree = ast.parse(plan.source)
    lines = plan.source.splitlines()
    if any(not s.finding.traced or s.finding.unknown or s.finding.python2 for s in plan._sites):
        _refuse("untraced, unknown or Python 2 constructs")
    block = _block(tree)
    site_lines = {s.finding.line for s in plan._sites if not s.finding.construct.startswith("spark.streaming.")}
    if any(s.finding.construct.startswith("spark.streaming.") for s in plan._sites):
        _refuse("spark.streaming.* settings")
    job = _Job(functions={n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)})
    edits: dict[int, tuple[int, list[str]]] = {}
    covered: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            replacement = _import(stmt)
            if replacement is not None:
                edits[stmt.lineno - 1] = ((stmt.end_lineno or stmt.lineno) - 1, replacement)
    for stmt in block:
        span = set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
        if not span & site_lines:
            _check_kept(stmt, job)
            continue
        covered |= span
        indent = " " * stmt.col_offset
        code = _statement(stmt, job)
        original = " ".join(line.strip().rstrip("\\").strip() for line in lines[stmt.lineno - 1:stmt.end_lineno])
        was = [f"{indent}# was: {original}"]
        edits[stmt.lineno - 1] = ((stmt.end_lineno or stmt.lineno) - 1, was + [indent + c if c else "" for c in code])
    if site_lines - covered - {i.lineno for i in ast.walk(tree) if isinstance(i, (ast.Import, ast.ImportFrom))}:
        _refuse("a streaming construct outside the job's main block")
    if not job.outputs or not job.interval:
        _refuse("no output or no StreamingContext")
    out = apply_edits(lines, edits)
    insert_at = _after_imports(tree)
    text = "\n".join(out[:insert_at] + _helpers(plan, job) + out[insert_at:]) + "\n"
    ast.parse(text)
    return Lifted(text=text, idioms=tuple(dict.fromkeys(job.idioms)))


def _block(tree: ast.Module) -> list[ast.stmt]:
    for stmt in tree.body:
        if (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare)
                and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__"):
            return stmt.body
    return tree.body


def _import(stmt: ast.Import | ast.ImportFrom) -> list[str] | None:
    names = [stmt.module or ""] if isinstance(stmt, ast.ImportFrom) else [a.name for a in stmt.names]
    if not any(n in _STREAMING_MODULES for n in names):
        return None
    if isinstance(stmt, ast.Import) and len(stmt.names) > 1:
        _refuse("an import of streaming and other modules in one statement")
    return [f"# was: {ast.unparse(stmt)} (the draft uses no DStream)"]


def _after_imports(tree: ast.Module) -> int:
    """The line (0-based) after the job's last top-level import: where the draft's helpers go."""
    end = 0
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            end = stmt.end_lineno or stmt.lineno
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            break
    return end


def _check_kept(stmt: ast.stmt, job: _Job) -> None:
    """A statement kept as written must not use the StreamingContext or a DStream (they are gone)."""
    used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    if used & ({job.context} | set(job.streams)):
        _refuse(f"line {stmt.lineno} uses a DStream or the StreamingContext")
    bound = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if bound & {"spark", "F", "take_and_print", "batch_time"}:
        _refuse(f"line {stmt.lineno} binds a name the draft uses")


def _src(node: ast.expr) -> str:
    return ast.unparse(node)


def _statement(stmt: ast.stmt, job: _Job) -> list[str]:
    """The DataFrame code of one streaming statement of the job."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        target = stmt.targets[0].id
        value = stmt.value
        if isinstance(value, ast.Call) and _callee(value) == "StreamingContext":
            if job.context or len(value.args) < 2 or value.keywords:
                _refuse("a second StreamingContext, or no batch interval")
            job.context, job.interval = target, _src(value.args[1])
            job.idioms.append("the batch interval → trigger(processingTime=...)")
            return ["spark = SparkSession.builder.getOrCreate()",
                    "# DStream's reduceByKey used the default parallelism: so do the aggregations here.",
                    'spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))']
        stream = _chain(value, job)
        job.streams[target] = _Stream(target, stream.model, stream.ones, stream.per_batch, stream.fold,
                                      stream.initial)
        return [f"{target} = {stream.code}"]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        call = stmt.value
        method, receiver = stmt.value.func.attr, stmt.value.func.value
        if isinstance(receiver, ast.Name) and receiver.id == job.context:
            return _context_call(method, call, job)
        if method == "pprint":
            return _pprint(_chain(receiver, job), call, job)
    _refuse(f"line {stmt.lineno}: not a recognised idiom")


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _context_call(method: str, call: ast.Call, job: _Job) -> list[str]:
    if method == "checkpoint" and len(call.args) == 1:
        job.checkpoint = _src(call.args[0])
        return [f"# The DStream job checkpointed to {job.checkpoint} but never restored from it (no getOrCreate): it",
                "# started afresh each run, and so do the queries below (no checkpointLocation: a temporary one).",
                f'# To resume after a restart, give each query .option("checkpointLocation", {job.checkpoint} + '
                '"/<query>").']
    if method == "start" and not call.args:
        return [f"query_{n} = writer_{n}.start()" for n in range(1, len(job.outputs) + 1)]
    if method == "awaitTermination":
        if len(job.outputs) == 1:
            return [f"query_1.awaitTermination({', '.join(_src(a) for a in call.args)})"]
        return [f"spark.streams.awaitAnyTermination({', '.join(_src(a) for a in call.args)})"]
    _refuse(f"StreamingContext.{method}")


def _chain(node: ast.expr, job: _Job) -> _Stream:
    """The streaming DataFrame a DStream expression is."""
    if isinstance(node, ast.Name):
        if node.id not in job.streams:
            _refuse(f"{node.id} is not a stream the lifter built")
        return job.streams[node.id]
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        _refuse("not a DStream call")
    method, receiver = node.func.attr, node.func.value
    if isinstance(receiver, ast.Name) and receiver.id == job.context:
        return _source(method, node, job)
    if method == "createDirectStream":
        return _kafka(node, job)
    base = _chain(receiver, job)
    if base.per_batch or base.fold:
        _refuse("a call after an aggregation")
    if method in ("map", "filter", "flatMap") and len(node.args) == 1 and not node.keywords:
        translated = per_record(node, method, base.model)
        if translated is None:
            _refuse(f"{method}'s function has no column expression")
        code, model = translated
        job.idioms.append({"map": "map → select", "filter": "filter → where",
                           "flatMap": "flatMap(split) → F.explode(F.split(...))"}[method])
        if "F.col(\"value\").contains(" in code:
            job.idioms.append("'x' in w → contains")
        ones = method == "map" and model == ("tuple", 2) and code.endswith('F.lit(1).alias("_2"))')
        return _Stream(f"{base.code}.{code}", model, ones=ones)
    if method == "reduceByKey" and len(node.args) == 1 and not node.keywords and is_sum(node.args[0]):
        if base.model != ("tuple", 2):
            _refuse("reduceByKey on something that is not a pair")
        job.idioms.append("reduceByKey(add) per batch → groupBy().agg() in foreachBatch")
        return _Stream(base.code, base.model, ones=base.ones, per_batch="count" if base.ones else "sum")
    if method == "countByValue" and not node.args and base.model == "value":
        job.idioms.append("countByValue per batch → groupBy().count() in foreachBatch")
        return _Stream(f'{base.code}.select(F.col("value").alias("_1"), F.lit(1).alias("_2"))', ("tuple", 2),
                       ones=True, per_batch="count")
    if method == "updateStateByKey":
        return _update_state(node, base, job)
    _refuse(f"DStream.{method} is not lifted")


def _source(method: str, node: ast.Call, job: _Job) -> _Stream:
    if node.keywords:
        _refuse("an input's keyword arguments")
    if method == "socketTextStream" and len(node.args) == 2:
        host, port = (_src(a) for a in node.args)
        job.idioms.append("socketTextStream → format(\"socket\")")
        return _Stream(f'spark.readStream.format("socket").option("host", {host}).option("port", {port}).load()',
                       "value")
    if method == "textFileStream" and len(node.args) == 1:
        job.idioms.append("textFileStream → format(\"text\") (which also reads the files already in the directory at "
                          "its first start: a DStream skipped those)")
        return _Stream(f'spark.readStream.format("text").load({_src(node.args[0])})', "value")
    _refuse(f"StreamingContext.{method}")


def _kafka(node: ast.Call, job: _Job) -> _Stream:
    if len(node.args) != 3 or node.keywords or not isinstance(node.args[2], ast.Dict):
        _refuse("createDirectStream with more than topics and a literal kafkaParams")
    params: dict[str, ast.expr] = {}
    for key, value in zip(node.args[2].keys, node.args[2].values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            _refuse("a kafkaParams key that is not a literal")
        params[key.value] = value
    servers = params.pop("metadata.broker.list", None) or params.pop("bootstrap.servers", None)
    reset = params.pop("auto.offset.reset", None)
    if servers is None or params:
        _refuse("kafkaParams other than the brokers and auto.offset.reset")
    starting = '"latest"'
    if reset is not None:
        if not isinstance(reset, ast.Constant) or reset.value not in ("smallest", "largest", "earliest", "latest"):
            _refuse("auto.offset.reset that is not a literal")
        starting = '"earliest"' if reset.value in ("smallest", "earliest") else '"latest"'
    topics = node.args[1]
    subscribe = (_src(topics.elts[0]) if isinstance(topics, ast.List) and len(topics.elts) == 1
                 else f'",".join({_src(topics)})')
    job.idioms.append("KafkaUtils.createDirectStream → format(\"kafka\")")
    return _Stream(f'spark.readStream.format("kafka").option("kafka.bootstrap.servers", {_src(servers)})'
                   f'.option("subscribe", {subscribe}).option("startingOffsets", {starting}).load()', "kafka")


def _fold(function: ast.FunctionDef | ast.Lambda) -> str:
    """``sum`` or ``count`` when ``f(new_values, last)`` is that fold, else ``""``.

    Recognised: ``sum(new) + (last or 0)`` and ``len(new) + (last or 0)`` (either order; ``last or 0`` also
    spelled with ``is None``). Other folds (max, min, a list that grows) are not lifted yet: no verified draft
    covers them, so the runtime runs the job's own ``f`` as written.
    """
    args = function.args
    if len(args.args) != 2 or args.vararg or args.kwonlyargs or args.defaults:
        return ""
    new, last = (a.arg for a in args.args)
    if isinstance(function, ast.Lambda):
        body: ast.expr | None = function.body
    else:
        statements = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        body = statements[0].value if len(statements) == 1 and isinstance(statements[0], ast.Return) else None
    if body is None:
        return ""
    text = ast.unparse(body).replace(" ", "")
    olds = (f"({last}or0)", f"(0if{last}isNoneelse{last})", f"({last}if{last}isnotNoneelse0)")
    for kind, call in (("sum", f"sum({new})"), ("count", f"len({new})")):
        if any(text in (f"{call}+{old}", f"{old}+{call}") for old in olds):
            return kind
    return ""


def _update_state(node: ast.Call, base: _Stream, job: _Job) -> _Stream:
    if base.model != ("tuple", 2) or len(node.args) != 1:
        _refuse("updateStateByKey on something that is not a pair, or with numPartitions")
    keywords = {k.arg: k.value for k in node.keywords}
    initial = keywords.pop("initialRDD", None)
    if keywords:
        _refuse("updateStateByKey's other keyword arguments")
    function = node.args[0]
    if isinstance(function, ast.Name) and function.id in job.functions:
        kind = _fold(job.functions[function.id])
    elif isinstance(function, ast.Lambda):
        kind = _fold(function)
    else:
        kind = ""
    if not kind:
        _refuse("updateStateByKey with a function that is not a recognised fold")
    aggregate = {"sum": 'F.sum("_2")', "count": 'F.count("_2")'}[kind]
    if kind == "sum" and base.ones:
        aggregate = 'F.count("_2")'
    job.idioms.append(f"updateStateByKey({kind} fold) → groupBy().agg() in complete output mode")
    if initial is not None:
        job.idioms.append("initialRDD → the initial state, merged in foreachBatch")
    return _Stream(f'{base.code}.groupBy("_1").agg({aggregate}.alias("_2"))', ("tuple", 2), fold=kind,
                   initial=_src(initial) if initial is not None else "")


def _pprint(stream: _Stream, call: ast.Call, job: _Job) -> list[str]:
    if call.keywords or len(call.args) > 1:
        _refuse("pprint's arguments")
    num = _src(call.args[0]) if call.args else "10"
    if job.outputs:  # each output would be a query reading its input again: batches no longer shared
        _refuse("a second output")
    n = len(job.outputs) + 1
    name = f"print_batch_{n}"
    lines = [f"def {name}(batch_df, batch_id):"]
    if stream.per_batch:
        what = ('batch_df.groupBy("_1").count().withColumnRenamed("count", "_2")' if stream.per_batch == "count"
                else 'batch_df.groupBy("_1").agg(F.sum("_2").alias("_2"))')
        lines += ['    """This micro-batch\'s result, per batch as the DStream\'s reduceByKey was, printed as '
                  'pprint."""', f"    result = {what}"]
        mode = "append"
    elif stream.fold:
        lines += ['    """Every key\'s running result (complete mode: all keys each batch, as updateStateByKey emitted '
                  'them)."""']
        if stream.initial:
            lines += [f"    initial = spark.createDataFrame({stream.initial}).toDF(\"_1\", \"_2\")",
                      '    merged = batch_df.alias("b").join(initial.alias("i"), "_1", "full_outer")',
                      '    result = merged.select("_1", (F.coalesce("b._2", F.lit(0)) + '
                      'F.coalesce("i._2", F.lit(0))).alias("_2"))']
        else:
            lines += ["    result = batch_df"]
        mode = "complete"
    else:
        lines += ['    """This micro-batch\'s rows, printed as pprint."""']
        if stream.model == "kafka":
            lines += ['    result = batch_df.select(F.col("key").cast("string"), F.col("value").cast("string"))']
        else:
            lines += ["    result = batch_df"]
        mode = "append"
    element = "lambda row: row[0]" if stream.model == "value" else "tuple"
    lines += [f"    take_and_print(batch_time(), result.rdd.map({element}), {num})", ""]
    lines += [f"writer_{n} = ({stream.code}.writeStream.outputMode({mode!r})",
              f"            .trigger(processingTime={_trigger(job.interval)}).foreachBatch({name}))"]
    job.outputs.append(f"writer_{n}")
    job.idioms.append("pprint → foreachBatch printing DStream's pprint text")
    return lines


def _trigger(interval: str) -> str:
    """``"N seconds"`` for a literal interval, else an f-string of the job's expression."""
    try:
        return f'"{ast.literal_eval(interval)} seconds"'
    except (ValueError, SyntaxError):
        return f'f"{{{interval}}} seconds"'


def _helpers(plan: MigrationPlan, job: _Job) -> list[str]:
    idioms = "".join(f"\n#   - {i}" for i in dict.fromkeys(job.idioms))
    return f'''
# Structured Streaming draft of {plan.path},
# written by `dmk migrate --out` (docs/migrate.md#lifted-drafts): every streaming statement of the job is a
# known idiom, lifted to DataFrame code (each under a "# was:" comment with the DStream code it replaces):{idioms}
# Per-batch results stay per batch (aggregated inside foreachBatch); a running one (updateStateByKey) is a
# streaming aggregation. Micro-batches run every batch interval, but only when input arrived (a DStream
# printed an empty batch too). Windows would be in processing time; none is lifted here.
import datetime as _datetime
import time as _time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

DRAFT_UNRESOLVED = []


def batch_time():
    """The micro-batch's time as DStream's pprint showed it: now, down to a multiple of the batch interval."""
    interval_ms = int(float({job.interval}) * 1000)
    now_ms = int(_time.time() * 1000)
    return _datetime.datetime.fromtimestamp((now_ms - now_ms % interval_ms) / 1000.0)


def take_and_print(time, rdd, num=10):
    """Print an RDD as DStream.pprint printed each batch: a header with its time, the first num elements."""
    taken = rdd.take(num + 1)
    print({_DASHES})
    print("Time: %s" % time)
    print({_DASHES})
    for record in taken[:num]:
        print(record)
    if len(taken) > num:
        print("...")
    print("")
'''.splitlines()
