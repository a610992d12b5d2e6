"""Python 2-era code in a DStream job: the plan says what the draft fixes, and the draft runs on Python 3.

Default tier: no JVM. The draft's text is checked line by line; tests/test_legacy_python2.py checks the
compatibility layer the original runs with, and its slow test proves our Python 2-era job equal to its draft.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrate import analyse, analyse_source, make_draft, render_markdown
from migrate.python2 import SERIALIZER_DEF

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "migrate_jobs" / "python2_records_to_kafka.py"
MARK = "# ---- end of the runtime: the job's own code ----"


def _fixed_lines(source: str, draft_text: str) -> dict[int, str]:
    """The job's lines the draft changed (other than its streaming imports), by the job's line number."""
    job = source.splitlines()
    code = draft_text[draft_text.index(MARK):].splitlines()[2:]  # the job's code after its docstring
    code = [line for line in code if not line.startswith(("# was: from pyspark.streaming", "StreamingContext = ",
                                                          "KafkaUtils = "))]
    after_docstring = ast.parse(source).body[0].end_lineno or 0
    imports = [n for n, line in enumerate(job, 1) if line.startswith("from pyspark.streaming")]
    kept = [(n, line) for n, line in enumerate(job, 1) if n not in imports and n > after_docstring]
    assert len(code) == len(kept), "the draft keeps every other line of the job, in place"
    return {n: new for (n, old), new in zip(kept, code, strict=True) if new != old}


def test_the_draft_fixes_each_python2_line_in_place_and_runs() -> None:
    source = JOB.read_text(encoding="utf-8")
    plan = analyse(JOB)
    made = make_draft(plan)
    assert made.runs and made.unresolved == () and not made.lifted
    assert _fixed_lines(source, made.text) == {
        18: "# dmk migrate: dropped reload(sys): Python 2 only (it re-exposed sys.setdefaultencoding)",
        19: "# dmk migrate: dropped sys.setdefaultencoding('utf-8'): Python 3's str is Unicode, its default encoding "
            "UTF-8",
        23: '    parts = str(line).split(u" ")  # dmk migrate: unicode → str',
        24: "    words = [w for w in parts[1:] if isinstance(w, str) and w]  # dmk migrate: basestring → str",
        25: '    return {"n": int(parts[0]), "words": len(words), "first": words[0].upper() if words else None}  '
            "# dmk migrate: long → int",
        30: "        producer = KafkaProducer(bootstrap_servers=brokers, value_serializer=_python2_bytes, "
            "key_serializer=_python2_bytes)  # dmk migrate: str sent as UTF-8 bytes, as a Python 2 str was",
    }
    assert made.python2 == (
        "line 18: dropped reload(sys): Python 2 only (it re-exposed sys.setdefaultencoding)",
        "line 19: dropped sys.setdefaultencoding('utf-8'): Python 3's str is Unicode, its default encoding UTF-8",
        "line 23: unicode → str", "line 24: basestring → str", "line 25: long → int",
        "line 30: str sent as UTF-8 bytes, as a Python 2 str was")
    # The header says so, and defines the serializer before anything of the job runs.
    head = made.text[:made.text.index("# Structured Streaming draft of")]
    assert "# Python 2-era code fixed for Python 3 by dmk migrate" in head
    assert "\n".join(SERIALIZER_DEF) in head
    compile(made.text, str(JOB), "exec")


def test_the_serializer_sends_what_a_python2_str_held() -> None:
    scope: dict = {}
    exec("\n".join(SERIALIZER_DEF), scope)  # the draft's own definition
    serialize = scope["_python2_bytes"]
    assert serialize("héllo") == "héllo".encode()
    assert serialize(b"\xff raw") == b"\xff raw" and serialize(None) is None


def test_the_plan_says_what_the_draft_fixed_and_what_is_manual() -> None:
    source = (
        "import sys\nfrom kafka import KafkaProducer\nfrom pyspark.streaming import StreamingContext\n"
        "sys.setdefaultencoding('latin-1')\n"  # 4: another encoding: no Python 3 equivalent to write
        "x = 1; reload(sys)\n"  # 5: shares its line
        "conf = {}\nproducer = KafkaProducer(**conf)\n"  # 7: whether conf has serializers is not known
        "producer.send('t', 'text')\n"  # 8
        "for i in xrange(2):\n    pass\n"  # 9: mechanical
        "ssc = StreamingContext(sc, 1)\nssc.socketTextStream('h', 1).pprint()\nssc.start()\n"
    )
    plan = analyse_source(source, "job.py")
    statuses = {(f.line, f.construct): f.status for f in plan.findings if f.python2}
    assert statuses == {(4, "Python 2: sys.setdefaultencoding"): "manual", (5, "Python 2: reload(sys)"): "manual",
                        (8, "Python 2: KafkaProducer.send(str)"): "manual", (9, "Python 2: xrange"): "automatic"}
    text = render_markdown(plan)
    assert ("Python 2-era code: 1 of 4 findings fixed in the draft (line 9 `xrange`); to port by hand: line 4 "
            "`Python 2: sys.setdefaultencoding`, line 5 `Python 2: reload(sys)`, line 8 "
            "`Python 2: KafkaProducer.send(str)`. `dmk migrate --verify` runs the original") in text
    made = make_draft(plan)
    assert not made.runs and made.python2 == ("line 9: xrange → range",)
    assert [u.split(": ")[1] for u in made.unresolved] == [
        "Python 2", "Python 2", "Python 2"]  # "line N: Python 2: <construct>: why"
    assert all("Python 2-era code the draft cannot fix mechanically: port it to Python 3" in u
               for u in made.unresolved)
    assert "for i in range(2):  # dmk migrate: xrange → range\n" in made.text


def test_fixes_keep_lines_columns_and_strings_right() -> None:
    source = (
        "import sys\nfrom kafka import KafkaProducer\nfrom pyspark.streaming import StreamingContext\n"
        "if True:\n    reload(sys)\n"  # 5: the block's only statement: pass
        "sys.setdefaultencoding(\n    'UTF8')\n"  # 6-7: over two lines
        "label = 'é' + unicode(1)\n"  # 8: columns are UTF-8 bytes
        'doc = """text\n""" + unicode(2)\n'  # 9-10: line 9 ends inside a string: no comment there
        "class Sender:\n"
        "    def __init__(self):\n        self.producer = KafkaProducer(\n            bootstrap_servers='h',\n"
        "        )\n"  # 13-15: a trailing comma
        "    def send(self, d):\n        if d.has_key('k'):\n"  # 17
        "            self.producer.send('t', key='k', value=b'v')\n"  # 18: a str key
        "        return [v for _, v in d.iteritems()]\n"  # 19
        "empty = KafkaProducer()\nempty.send('t', '%d' % 1)\n"  # 20-21
        "ssc = StreamingContext(sc, 1)\nssc.socketTextStream('h', 1).pprint()\nssc.start()\n"
    )
    plan = analyse_source(source, "job.py")
    assert all(f.status == "automatic" for f in plan.findings if f.python2)
    made = make_draft(plan, lifting=False)
    assert made.runs
    code = made.text[made.text.index(MARK):].splitlines()[1:]
    code = [line for line in code if not line.startswith(("# was: from pyspark", "StreamingContext = "))]
    assert code[3:] == [
        "if True:",
        "    pass  # dmk migrate: dropped reload(sys): Python 2 only (it re-exposed sys.setdefaultencoding)",
        "# dmk migrate: dropped sys.setdefaultencoding('UTF8'): Python 3's str is Unicode, its default encoding UTF-8",
        "#   'UTF8')",
        "label = 'é' + str(1)  # dmk migrate: unicode → str",
        'doc = """text',
        '""" + str(2)  # dmk migrate: unicode → str',
        "class Sender:",
        "    def __init__(self):",
        "        self.producer = KafkaProducer(",
        "            bootstrap_servers='h', value_serializer=_python2_bytes, key_serializer=_python2_bytes,  "
        "# dmk migrate: str sent as UTF-8 bytes, as a Python 2 str was",
        "        )",
        "    def send(self, d):",
        "        if ('k' in d):  # dmk migrate: .has_key(k) → k in d",
        "            self.producer.send('t', key='k', value=b'v')",
        "        return [v for _, v in d.items()]  # dmk migrate: .iteritems() → .items()",
        "empty = KafkaProducer(value_serializer=_python2_bytes, key_serializer=_python2_bytes)  "
        "# dmk migrate: str sent as UTF-8 bytes, as a Python 2 str was",
        "empty.send('t', '%d' % 1)",
        "ssc = StreamingContext(sc, 1)",
        "ssc.socketTextStream('h', 1).pprint()",
        "ssc.start()",
    ]
    assert len(code) == 1 + len(source.splitlines()) - 1  # a blank line first; less the streaming import


def test_a_fix_inside_another_is_applied_on_a_second_round() -> None:
    source = (
        "from pyspark.streaming import StreamingContext\n"
        "def seen(d, k):\n    return d.has_key(unicode(k))\n"
        "ssc = StreamingContext(sc, 1)\nssc.socketTextStream('h', 1).filter(lambda w: seen({}, w)).pprint()\n"
    )
    made = make_draft(analyse_source(source, "job.py"), lifting=False)
    assert made.runs and made.python2 == ("line 3: .has_key(k) → k in d", "line 3: unicode → str")
    assert ("    return (str(k) in d)  # dmk migrate: .has_key(k) → k in d  # dmk migrate: unicode → str\n"
            in made.text)


def test_from_pyspark_import_streaming_is_bound_to_the_runtime() -> None:
    # A spelling of a real Python 2-era job's import (the module, not its names), which the draft left to
    # pyspark's own DStreams until the job's Python 2 code no longer stopped it first.
    source = ("from pyspark import SparkContext, streaming as st\nssc = st.StreamingContext(SparkContext(), 1)\n"
              "ssc.socketTextStream('h', 1).pprint()\nssc.start()\n")
    made = make_draft(analyse_source(source, "job.py"), lifting=False)
    assert made.runs
    assert ("# was: from pyspark import SparkContext, streaming as st\nfrom pyspark import SparkContext\n"
            "st = _streaming_module()\n") in made.text
