"""``dmk migrate --out``: a Structured Streaming draft that carries the DStream job's own code and semantics.

The draft is the job's own source, unchanged except for its ``pyspark.streaming`` imports, which are bound to
the runtime :mod:`migrate.microbatch` (its text is copied into the draft, so the draft imports pyspark and the
job's own imports, nothing from this kit). The job's graph then runs per micro-batch of one Structured
Streaming query: its inputs are ``readStream`` sources in one query, its batch interval the trigger, its
checkpoint directory the query's checkpoint, and its own functions run inside ``foreachBatch`` on each batch's
RDD with DStream's semantics (per-batch ``reduceByKey``, ``updateStateByKey`` re-emitting every key, windows on
slide boundaries, ``pprint``'s exact text). Why this rather than a construct-by-construct translation: a job
builds its DStreams with any Python it likes (functions, classes, loops, ``getOrCreate``), and only running
that code keeps both its logic and its per-batch results; docs/migrate.md#the-draft lists what still differs.

Python 2-era code the analysis found a mechanical fix for (:mod:`migrate.python2`: ``reload(sys)``,
``sys.setdefaultencoding``, ``unicode``..., a ``str`` sent to a kafka-python producer) is fixed in place first,
each line keeping its number, and the fixes are listed at the top of the draft.

What the runtime does not carry (``StreamingListener``, ``offsetRanges``, ``slice``, a
construct ``dmk migrate`` does not know, the kit's builder contract) is :attr:`Draft.unresolved`: the draft
then refuses to start, with a message naming each, instead of running without it.
"""

from __future__ import annotations

import ast
import inspect
import json
from dataclasses import dataclass, replace

from migrate import microbatch
from migrate.analysis import MigrationPlan, _Site, analyse_source
from migrate.lift import apply_edits, lift
from migrate.python2 import SERIALIZER, SERIALIZER_DEF, Fix, apply_fixes

__all__ = ["Draft", "draft", "make_draft"]

_RUNTIME_MARK = "# ---- begin runtime ----"
_STREAMING_MODULES = {"pyspark.streaming", "pyspark.streaming.kafka", "pyspark.streaming.context",
                      "pyspark.streaming.dstream", "legacy.kafka"}
_NAMES = {
    "StreamingContext": "MicroBatchContext", "DStream": "MicroBatchStream", "KafkaUtils": "MicroBatchKafka",
    "TopicAndPartition": "TopicAndPartition", "OffsetRange": "OffsetRange",
    "get_or_create": "MicroBatchContext.getOrCreate", "utf8_decoder": "_utf8",
}
"""What each name of ``pyspark.streaming`` (or the kit's drop-in ``legacy.kafka``) is bound to in the draft."""
_KAFKA_NAMES = ("KafkaUtils", "TopicAndPartition", "OffsetRange")

_WHY = {
    "StreamingListener": "a StreamingListener has no counterpart in the draft: port it to a "
                         "StreamingQueryListener (spark.streams.addListener)",
    "StreamingContext.addStreamingListener": "a StreamingListener has no counterpart in the draft: port it to a "
                                             "StreamingQueryListener (spark.streams.addListener)",
    "offsetRanges": "an RDD of a micro-batch has no offsetRanges(): take the offsets from the Kafka source's "
                    "offset/partition columns or the query's progress",
    "DStream.slice": "DStream.slice reads past batches, which a micro-batch does not keep",
}


@dataclass(frozen=True)
class Draft:
    """A draft Structured Streaming job.

    Attributes:
        text: the draft's source (it parses; it runs as written when ``unresolved`` is empty).
        unresolved: what the draft cannot carry, one ``line N: construct: why`` each; the draft refuses to start
            while any is left.
        lifted: the idioms lifted to DataFrame code when the whole job was lifted (:mod:`migrate.lift`); empty
            for a draft that carries the runtime.
        python2: the Python 2-era code fixed for Python 3 (:mod:`migrate.python2`), one ``line N: what`` each.
    """

    text: str
    unresolved: tuple[str, ...]
    lifted: tuple[str, ...] = ()
    python2: tuple[str, ...] = ()

    @property
    def runs(self) -> bool:
        """Whether the draft runs as written (nothing unresolved)."""
        return not self.unresolved


def draft(plan: MigrationPlan) -> str:
    """The text of :func:`make_draft`'s draft."""
    return make_draft(plan).text


def make_draft(plan: MigrationPlan, *, lifting: bool = True) -> Draft:
    """The draft of a DStream job: lifted to DataFrame code, or its own code run by the carried runtime.

    Lifted (:func:`migrate.lift.lift`) when every streaming statement of the job is a known idiom; else the
    job's own code, run per micro-batch by the carried runtime.

    The result always parses (``ast.parse``); a draft with :attr:`Draft.unresolved` parts stops at its start
    with a message naming them. ``lifting=False`` always writes the runtime draft.
    """
    fixes = plan._facts.get("python2_fixes") or []
    if fixes:  # the job's Python 2-era code fixed first (lines stay where they were), then drafted as Python 3
        return _with_python2_fixes(plan, fixes, lifting=lifting)
    tree = ast.parse(plan.source)
    unresolved = _unresolved(plan)
    if lifting and not unresolved:
        lifted = lift(plan)
        if lifted is not None:
            return Draft(text=lifted.text, unresolved=(), lifted=lifted.idioms)
    lines = plan.source.splitlines()
    edits: dict[int, tuple[int, list[str]]] = {}  # first line (0-based) -> (last line, replacement)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            replacement = _import(node, unresolved)
            if replacement is not None:
                indent = " " * node.col_offset
                original = [f"{indent}# was: {' '.join(line.strip() for line in _segment(lines, node))}"]
                edits[node.lineno - 1] = ((node.end_lineno or node.lineno) - 1,
                                          original + [indent + r for r in replacement])
    out = apply_edits(lines, edits)
    unresolved.sort(key=lambda text: int(text.split(":")[0].split()[1]))
    insert_at = _after_preamble(tree)
    header = _header(plan, unresolved)
    body = out[:insert_at] + header + out[insert_at:]
    text = "\n".join(body) + "\n"
    ast.parse(text)  # a draft that does not parse is a bug here, not the user's problem
    return Draft(text=text, unresolved=tuple(unresolved))


def _with_python2_fixes(plan: MigrationPlan, fixes: list[Fix], *, lifting: bool) -> Draft:
    """The draft of the job with its Python 2-era code fixed (:func:`migrate.python2.apply_fixes`), saying so."""
    source, done_fixes = plan.source, list[Fix]()
    for _ in range(4):  # a fix inside another's text (``d.has_key(unicode(k))``) is applied on the next round
        source, applied = apply_fixes(source, fixes)
        done_fixes += applied
        fixed = analyse_source(source, plan.path)
        fixes = fixed._facts.get("python2_fixes") or []
        if not fixes or not applied:
            break
    made = make_draft(replace(fixed, _facts={**fixed._facts, "python2_fixes": []}), lifting=lifting)
    fixes = done_fixes
    done = tuple(dict.fromkeys(f"line {fix.line}: {fix.what}" for fix in sorted(fixes, key=lambda f: f.line)))
    note = ["", "# Python 2-era code fixed for Python 3 by dmk migrate (each line fixed has a `# dmk migrate:` note):",
            *(f"#   {what}" for what in done)]
    if any(SERIALIZER in edit.text for fix in fixes for edit in fix.edits):
        note += ["", "", *SERIALIZER_DEF, ""]
    lines = made.text.splitlines()
    at = _after_preamble(ast.parse(made.text))  # before anything of the job runs
    text = "\n".join([*lines[:at], *note, *lines[at:]]) + "\n"
    ast.parse(text)
    return replace(made, text=text, python2=done)


def _segment(lines: list[str], node: ast.stmt) -> list[str]:
    return lines[node.lineno - 1:(node.end_lineno or node.lineno)]


def _after_preamble(tree: ast.Module) -> int:
    """The line (0-based) after the job's docstring and ``from __future__`` imports: where the runtime goes."""
    end = 0
    for stmt in tree.body:
        is_doc = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
            stmt.value.value, str) and stmt is tree.body[0]
        if is_doc or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            end = stmt.end_lineno or stmt.lineno
        else:
            break
    return end


def _import(node: ast.Import | ast.ImportFrom, unresolved: list[str]) -> list[str] | None:
    """The lines that bind a streaming import's names to the runtime, or None for any other import."""
    if isinstance(node, ast.ImportFrom):
        if not node.level and node.module == "pyspark" and any(a.name == "streaming" for a in node.names):
            # from pyspark import streaming (as x): the module, bound to the runtime; the other names kept
            others = [a.name + (f" as {a.asname}" if a.asname else "") for a in node.names if a.name != "streaming"]
            return ([f"from pyspark import {', '.join(others)}"] if others else []) + [
                f"{a.asname or a.name} = _streaming_module()" for a in node.names if a.name == "streaming"]
        if node.level or node.module not in _STREAMING_MODULES:
            return None
        bound = []
        for alias in node.names:
            name = alias.asname or alias.name
            if alias.name == "*":  # every name the module had that the runtime carries
                kafka = node.module in ("pyspark.streaming.kafka", "legacy.kafka")
                bound += [f"{n} = {_NAMES[n]}" for n in (_KAFKA_NAMES if kafka else ("StreamingContext", "DStream"))]
            elif alias.name == "kafka" and node.module == "pyspark.streaming":
                bound.append(f"{name} = _streaming_module().kafka")
            elif alias.name in _NAMES:
                bound.append(f"{name} = {_NAMES[alias.name]}")
            else:
                bound.append(f"{name} = _unresolved_name({alias.name!r})")
                unresolved.append(f"line {node.lineno}: {node.module}.{alias.name}: not a DStream API the draft "
                                  "carries; port its use by hand")
        return bound
    bound = []
    for alias in node.names:
        if alias.name not in _STREAMING_MODULES:
            if any(a.name in _STREAMING_MODULES for a in node.names):
                bound.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
            continue
        if alias.asname:
            path = alias.name.split(".")[2:] if alias.name.startswith("pyspark.streaming") else ["kafka"]
            bound.append(f"{alias.asname} = _streaming_module()" + "".join(f".{p}" for p in path))
        else:
            top = alias.name.split(".")[0]
            if top == "pyspark":
                bound.append("import pyspark")
                bound.append("pyspark.streaming = _streaming_module()")
            else:  # the kit's legacy.kafka: the draft does not import the kit
                bound.append(f"{top} = _streaming_module()")
    return bound if any(a.name in _STREAMING_MODULES for a in node.names) else None


def _unresolved(plan: MigrationPlan) -> list[str]:
    """What the runtime does not carry, one ``line N: construct: why`` per finding."""
    stream_methods = {n for n, _ in inspect.getmembers(microbatch.MicroBatchStream) if not n.startswith("_")}
    context_methods = {n for n, _ in inspect.getmembers(microbatch.MicroBatchContext) if not n.startswith("_")}
    left: list[tuple[int, str]] = []
    for site in plan._sites:
        why = _why(site, stream_methods, context_methods)
        if why is not None:
            left.append((site.finding.line, f"line {site.finding.line}: {site.finding.construct}: {why}"))
    return [text for _, text in sorted(set(left))]


def _why(site: _Site, stream_methods: set[str], context_methods: set[str]) -> str | None:
    construct = site.finding.construct
    if construct in _WHY:
        return _WHY[construct]
    if site.finding.python2:  # one the draft could not fix mechanically (migrate.python2)
        return f"Python 2-era code the draft cannot fix mechanically: port it to Python 3 ({site.finding.counterpart})"
    if not site.finding.traced:
        # The plan counts it unresolved; the runtime stands in only for streams this file builds, so a stream made
        # in another module (with pyspark.streaming's own classes) would not run here.
        return ("called on an object dmk migrate could not trace to a DStream of this file (built in another "
                "module?): draft that module too, or port the call by hand")
    if construct.startswith("spark.streaming.") or construct in (
            "StreamingContext(sc, batchDuration)", "KafkaUtils.createDirectStream", "KafkaUtils.createStream",
            "OffsetRange", "TopicAndPartition",
            "StreamingContext.stop(stopGraceFully=True)", "get_or_create"):
        return None
    owner, _, method = construct.partition(".")
    method = method.split(" ")[0]  # "reduceByKeyAndWindow (with inverse function)"
    if owner == "DStream" and method in stream_methods:
        return None
    if owner == "StreamingContext" and (method in context_methods or method == "sparkContext"):
        return None
    if site.finding.unknown:
        return "not a DStream API the draft carries (dmk migrate does not know it): port it by hand"
    if owner == "Source" or construct == "event_time_operator":
        return "the kit's builder contract (legacy/workloads): its Structured Streaming twin is in modern/workloads"
    return "the draft's runtime does not carry it: port it by hand"


def _runtime_text() -> str:
    source = inspect.getsource(microbatch)
    return source[source.index(_RUNTIME_MARK):].rstrip("\n")


def _header(plan: MigrationPlan, unresolved: list[str]) -> list[str]:
    lines = [
        "",
        f"# Structured Streaming draft of {plan.path},",
        "# written by `dmk migrate --out` (docs/migrate.md#the-draft).",
        "# The job's own code follows the runtime below, unchanged except for its pyspark.streaming imports: its",
        "# inputs become readStream sources of one query (a socket: a receiver, the dstream-socket source), its",
        "# batch interval the trigger, its checkpoint directory the query's, and its own functions run per",
        "# micro-batch in foreachBatch with DStream semantics.",
        *_runtime_text().splitlines(),
        "",
        "",
        "def _streaming_module():  # pyspark.streaming, as the job imported it",
        "    import types",
        "",
        "    kafka = types.SimpleNamespace(KafkaUtils=MicroBatchKafka, TopicAndPartition=TopicAndPartition,",
        "                                  OffsetRange=OffsetRange)",
        "    return types.SimpleNamespace(StreamingContext=MicroBatchContext, DStream=MicroBatchStream, kafka=kafka)",
        "",
        "",
        "def _unresolved_name(name):",
        "    raise NameError(f\"{name} is not carried by this draft (see DRAFT_UNRESOLVED)\")",
        "",
        "",
        f"DRAFT_UNRESOLVED = {json.dumps(unresolved, indent=4) if unresolved else '[]'}",
        "if DRAFT_UNRESOLVED:",
        f"    raise SystemExit(\"this draft of {plan.path} cannot run as written; port by hand: \" + "
        "\"; \".join(DRAFT_UNRESOLVED))",
        "# ---- end of the runtime: the job's own code ----",
        "",
    ]
    return lines
