"""The engine interface and the layers: DriverConfig's JSON round trip, the registry, and the import rules
(kit imports no engine, the engines never import each other, compare knows an engine only through the registry).

No JVM and no broker: these run in the fast tier.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from compare.engines import ENGINES, get_engine, register_engine
from kit import workloads
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig, Engine, KitEngine, seconds
from kit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _config(**overrides: object) -> DriverConfig:
    base = {
        "engine": "legacy", "bootstrap_servers": "127.0.0.1:9092", "topics": {"events": "t1"},
        "out_dir": "/tmp/out", "checkpoint_dir": "/tmp/ckpt", "dataset": DatasetSpec.from_profile("messy", records=500),
        "jobs": (("running_counts", "default"), ("examples.event_types:SPEC", "default")),
    }
    return DriverConfig(**{**base, **overrides})  # type: ignore[arg-type]


def test_driver_config_round_trips_through_json(tmp_path: Path) -> None:
    config = _config(options={"offsets": "sqlite", "max_rate_per_partition": 250, "fingerprint": "f1"},
                     sys_path=("/repo",),
                     drain_timeout_s=900.0, spark_conf={"spark.eventLog.enabled": "true"})
    assert DriverConfig.from_json(config.to_json()) == config
    config.write(tmp_path / "driver-config.json")
    assert DriverConfig.read(tmp_path / "driver-config.json") == config
    # Defaults live in the dataclass only: a file without them reads back with them.
    raw = json.loads(_config().to_json())
    for optional in ("options", "timeout_s", "partitions", "sys_path"):
        del raw[optional]
    assert DriverConfig.from_json(json.dumps(raw)) == _config()


def test_driver_config_refuses_unknown_and_missing_keys(tmp_path: Path) -> None:
    raw = json.loads(_config().to_json())
    with pytest.raises(ConfigError, match=r"Unrecognized configs: \['batch_secs'\]") as unknown:
        DriverConfig.from_json(json.dumps({**raw, "batch_secs": 2}))
    assert unknown.value.actual == ["batch_secs"]
    del raw["checkpoint_dir"]
    with pytest.raises(ConfigError, match=r"lacks \['checkpoint_dir'\]"):
        DriverConfig.from_json(json.dumps(raw))
    with pytest.raises(ConfigError, match="must be a JSON object"):
        DriverConfig.from_json("[1, 2]")
    with pytest.raises(ConfigError, match="cannot read the driver config"):
        DriverConfig.read(tmp_path / "missing.json")


def test_driver_config_of_objects_stays_in_process() -> None:
    def build(ssc: object, source: object) -> object:
        return source

    config = _config(jobs=(("running_counts", build),))
    with pytest.raises(ConfigError, match="cannot cross a process boundary") as err:
        config.to_json()
    assert err.value.field == "jobs"


def test_seconds_reads_batch_intervals_and_triggers() -> None:
    assert [seconds(t) for t in ("1 s", "0.5 s", "500 milliseconds", "1 second", "5 seconds", "2 minutes")] == [
        1.0, 0.5, 0.5, 1.0, 5.0, 120.0]
    with pytest.raises(ConfigError, match="not '<number> <unit>'"):
        seconds("fast")


def test_the_registry_holds_both_engines_and_refuses_impostors() -> None:
    assert ENGINES == ("legacy", "modern")
    assert [get_engine(name).name for name in ENGINES] == ["legacy", "modern"]
    assert all(isinstance(get_engine(name), Engine) for name in ENGINES)
    assert (get_engine("legacy").batches_by_clock, get_engine("modern").batches_by_clock) == (True, False)
    from compare.jobs import ScriptEngine

    script = ScriptEngine("legacy", "python job.py {bootstrap} {topic} {output_topic}")
    assert isinstance(script, Engine) and script.batches_by_clock
    # A script is an engine, not a kit engine: it has no workload to resolve, no pace or cap to set from outside.
    assert not isinstance(script, KitEngine)
    assert not any(hasattr(script, member) for member in ("resolve", "paced", "capped"))
    with pytest.raises(ConfigError, match="unknown engine 'spark1'; the engines are: legacy, modern"):
        get_engine("spark1")
    with pytest.raises(ConfigError, match="does not implement kit.engine.KitEngine"):
        register_engine(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="does not implement kit.engine.KitEngine"):
        register_engine(script)  # type: ignore[arg-type]
    impostor = dataclasses.make_dataclass("Impostor", [])()
    for member in ("resolve", "session", "start", "exactly_once", "paced", "capped", "interval_s", "record",
                   "owns_checkpoint", "inspect_checkpoint", "options", "plain"):
        setattr(impostor, member, lambda *a, **k: None)
    for attribute in ("name", "batches_by_clock", "cap_share", "modes", "handover", "bench", "python2_layer",
                      "refused_script_inputs"):
        setattr(impostor, attribute, getattr(get_engine("legacy"), attribute))
    with pytest.raises(ConfigError, match="an engine named 'legacy' is registered already"):
        register_engine(impostor)


def test_paced_sets_each_engines_own_interval() -> None:
    config = _config()
    assert get_engine("legacy").paced(config, "0.5 s").options.batch_seconds == 0.5
    modern = _config(engine="modern")
    assert get_engine("modern").paced(modern, "500 milliseconds").options.trigger == "500 milliseconds"
    # and reads it back the same way
    assert get_engine("legacy").interval_s(get_engine("legacy").paced(config, "0.5 s")) == 0.5
    assert get_engine("modern").interval_s(get_engine("modern").paced(modern, "500 milliseconds")) == 0.5
    assert get_engine("modern").interval_s(modern) == 0.0  # "0 seconds": back to back


def test_capped_turns_records_per_batch_into_each_engines_own_cap() -> None:
    legacy, modern = get_engine("legacy"), get_engine("modern")
    config = _config(partitions=4)
    # legacy: records/s per partition, over the batch interval, rounded down (a batch never reads more)
    assert legacy.capped(config, 1_000).options.max_rate_per_partition == 250
    assert legacy.capped(legacy.paced(config, "0.5 s"), 1_000).options.max_rate_per_partition == 500
    assert legacy.capped(_config(partitions=3), 1_000).options.max_rate_per_partition == 333
    assert legacy.capped(config, 1).options.max_rate_per_partition == 1
    # modern: records per trigger, the other source options kept
    mine = _config(engine="modern", options={"source_options": {"minOffsetsPerTrigger": 5}})
    assert modern.capped(mine, 800.9).options.source_options == {"minOffsetsPerTrigger": 5, "maxOffsetsPerTrigger": 800}


def test_capped_with_shares_gives_each_input_its_share_of_the_batch(tmp_path: Path) -> None:
    legacy, modern = get_engine("legacy"), get_engine("modern")
    topics = {"persons": "tp", "auctions": "ta", "bids": "tb"}
    shares = {"persons": 0.02, "auctions": 0.06, "bids": 0.92, "elsewhere": 0.5}  # an input the run lacks: ignored
    config = legacy.capped(_config(partitions=4, topics=topics), 1_000, shares)
    # legacy: each input's direct stream its own maxRatePerPartition (records/s per partition, rounded down)
    assert config.options.max_rate_by_input == {"persons": 5, "auctions": 15, "bids": 230}
    assert config.options.max_rate_per_partition == 250  # an input without a share: the whole batch
    config.write(tmp_path / "c.json")  # what a driver process reads
    assert legacy.options(DriverConfig.read(tmp_path / "c.json")).max_rate_by_input == {
        "persons": 5, "auctions": 15, "bids": 230}
    # modern: records per trigger by input; a source reading several inputs takes their sum
    config = modern.capped(_config(engine="modern", partitions=4, topics=topics), 800, shares)
    assert config.options.max_offsets_by_input == {"persons": 16, "auctions": 48, "bids": 736}
    assert config.options.source_options == {"maxOffsetsPerTrigger": 800}
    # a small input's cap is rounded to the nearest, not down (4.975 records/s per partition would be 4: a fifth less)
    assert legacy.capped(_config(partitions=4, topics=topics), 1_000, {"persons": 0.0199}).options.max_rate_by_input \
        == {"persons": 5}
    with pytest.raises(ConfigError, match="max_rate_by_input"):
        legacy._with(_config(), max_rate_by_input={"events": 0})
    with pytest.raises(ConfigError, match="max_offsets_by_input"):
        get_engine("modern").options(_config(engine="modern", options={"max_offsets_by_input": {"events": "9"}}))


def test_input_shares_are_each_inputs_fraction_of_the_dataset_raised_alike_to_cover_its_densest_batch() -> None:
    from compare.harness import dataset_spec, route_inputs
    from compare.inputs import batch_records, input_shares
    from kit.dataset import generate
    from kit.nexmark import NexmarkSpec, generate_nexmark

    spec = dataset_spec("messy")
    frame = generate(spec)
    routed = route_inputs([workloads.get("join")], frame)
    shares = input_shares(routed, len(frame), batch_records(spec))
    fractions = {name: (routed["topic"] == name).sum() / 20_000 for name in ("impressions", "clicks")}
    assert 0.25 < fractions["clicks"] < 0.4
    # one factor for both inputs: the largest ratio of an input's densest 1000 dataset records to its fraction
    factor = shares["clicks"] / fractions["clicks"]
    assert shares == pytest.approx({name: fraction * factor for name, fraction in fractions.items()})
    densest = {name: max(((g >= s) & (g < s + 1_000)).sum() for s in g)
               for name, g in ((n, routed.loc[routed["topic"] == n, "seq"].to_numpy()) for n in fractions)}
    assert factor == pytest.approx(max(densest[n] / 1_000 / fractions[n] for n in fractions)) and 1 < factor < 1.2
    # every input then reads at least its densest batch's records: a replay at the batch's rate never leaves it behind
    assert all(shares[n] * 1_000 >= densest[n] - 1e-9 for n in fractions)
    # a query of some tables: their share of the whole dataset, not of the rows routed to it
    nexmark = generate_nexmark(NexmarkSpec(records=5_000, seed=2, layout="three"))
    q8 = input_shares(route_inputs([workloads.get("nexmark_q8")], nexmark), len(nexmark), window=len(nexmark))
    assert q8 == {table: (nexmark["topic"] == table).mean() for table in ("auctions", "persons")}
    assert 0.05 < q8["auctions"] < 0.07 and 0.015 < q8["persons"] < 0.025
    # a row fed to two inputs counts for both: each input's share of the dataset, not of the replay
    both = input_shares(route_inputs([workloads.get("join"), workloads.get("running_counts")], frame), len(frame),
                        batch_records(spec))
    assert both == pytest.approx({**shares, "events": factor})
    # an engine that starts its next batch when the last ends catches up by itself: the bare fractions
    assert input_shares(routed, len(frame), batch_records(spec), by_clock=False) == pytest.approx(fractions)
    # an input whose records all bunch in one batch raises every input as far (here tenfold)
    bunched = pd.DataFrame({"seq": range(100), "topic": ["a"] * 95 + ["b"] * 5})
    assert input_shares(bunched, 100, window=10) == pytest.approx({"a": 9.5, "b": 0.5})
    # per partition (seq % partitions, as the runs replay): each partition's densest stretch against its average
    alternate = pd.DataFrame({"seq": range(8), "topic": ["a", "b"] * 4})  # a on partition 0 only, b on 1 only
    assert input_shares(alternate, 8, window=8) == {"a": 0.5, "b": 0.5}
    assert input_shares(alternate, 8, window=8, partitions=2) == {"a": 1.0, "b": 1.0}


def test_the_harness_caps_keep_batches_within_half_the_lateness_margin() -> None:
    from compare.harness import batch_records, capped, common_cap, dataset_spec

    spec = dataset_spec("messy")  # 500 events/s, 4 s margin: 1000 records are 2 s of event time
    config = _config(partitions=4)
    assert batch_records(spec) == 1_000.0
    assert capped(get_engine("legacy"), config, spec).options.max_rate_per_partition == 250
    assert capped(get_engine("modern"), _config(engine="modern"), spec).options.source_options == {
        "maxOffsetsPerTrigger": 800}
    assert common_cap(spec) == 800  # the smallest share: what every engine can be given


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(("package", "forbidden"), [
    ("kit", {"legacy", "modern", "compare"}),
    ("legacy", {"modern", "compare"}),
    ("modern", {"legacy", "compare"}),
])
def test_the_layers_import_only_downwards(package: str, forbidden: set[str]) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & forbidden) for path in (ROOT / package).rglob("*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


REGISTRY_MODULES = {"compare/engines.py"}
"""The only modules of compare/ that may import an engine's package (the registry)."""


def _engine_knowledge(path: Path, text: str | None = None) -> list[str]:
    """Where ``path`` imports an engine's modules, or keys a dict, a comparison, an ``in`` test, a match case or a
    subscript by an engine's name (a string constant ``"legacy"``/``"modern"``): each a sign the engine protocol
    lacks a method or an attribute. ``text``: the module's source, if not the file's."""

    def named(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value in ENGINES

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if text is None else text)):
        what = None
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if (any(m.split(".")[0] in ENGINES for m in modules) and getattr(node, "level", 0) == 0
                    and path.relative_to(ROOT).as_posix() not in REGISTRY_MODULES):
                what = f"imports {', '.join(modules)}"
        elif isinstance(node, ast.Dict) and any(named(key) for key in node.keys):
            what = "a dict keyed by an engine's name"
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            members = [e for s in sides if isinstance(s, ast.Tuple | ast.List | ast.Set) for e in s.elts]
            if any(named(s) for s in sides) or any(named(e) for e in members):
                what = "a comparison or in-test with an engine's name"
        elif isinstance(node, ast.match_case) and any(
                named(p.value) for p in ast.walk(node.pattern) if isinstance(p, ast.MatchValue)):
            what = "a match case on an engine's name"
        elif isinstance(node, ast.Subscript) and named(node.slice):
            what = "a subscript by an engine's name"
        if what:
            line = node.pattern.lineno if isinstance(node, ast.match_case) else getattr(node, "lineno", 0)
            found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    return found


def test_compare_knows_engines_only_through_the_registry() -> None:
    offenders = [hit for path in sorted((ROOT / "compare").rglob("*.py")) for hit in _engine_knowledge(path)]
    assert offenders == []


@pytest.mark.parametrize("planted", [
    "import legacy.inspect",
    "from modern.inspect import list_query_checkpoints",
    "CAPS = {'legacy': 250, 'modern': 800}",
    "slow = engine == 'legacy'",
    "slow = engine in ('legacy',)",
    "cap = caps['modern']",
    "match engine:\n    case 'legacy':\n        pass",
])
def test_the_registry_guard_catches_engine_knowledge(planted: str) -> None:
    module = ROOT / "compare" / "planted.py"  # parsed from the text below, never written
    assert len(_engine_knowledge(module, f"engine, caps = 'x', {{}}\n{planted}\n")) == 1
    assert _engine_knowledge(module, "engine, caps = 'x', {}\nslow = engine in ENGINES\n") == []
    # and the registry itself may import the engines
    assert not _engine_knowledge(ROOT / "compare" / "engines.py")


def test_each_engine_says_whether_a_run_promises_exactly_once() -> None:
    def config(engine: str, stream: str) -> DriverConfig:
        return DriverConfig(engine, "b:9092", {"events": "t"}, "out", "ckpt", options={"stream": stream})

    assert get_engine("legacy").exactly_once(config("legacy", "direct"))
    assert not get_engine("legacy").exactly_once(config("legacy", "receiver"))
    # The stream kind is a legacy option: a modern query is exactly-once, and refuses an option it does not have.
    assert get_engine("modern").exactly_once(DriverConfig("modern", "b:9092", {"events": "t"}, "out", "ckpt"))
    with pytest.raises(ConfigError, match=r"Unrecognized options of the modern engine: \['stream'\]"):
        get_engine("modern").options(config("modern", "receiver"))


def test_each_engine_parses_validates_and_reports_its_own_options(tmp_path: Path) -> None:
    legacy, modern = get_engine("legacy"), get_engine("modern")
    dsn = "postgresql://dmk:s3cret@db:5432/offsets"
    config = _config(options={"offsets": "postgresql", "offset_store": dsn, "batch_seconds": 0.5})
    parsed = legacy.options(config)
    assert (parsed.offsets, parsed.offset_store, parsed.batch_seconds, parsed.stream) == (
        "postgresql", dsn, 0.5, "direct")  # the defaults are the options type's
    # The password never reaches a file or a repr; the driver gets it from its environment.
    assert "s3cret" not in config.to_json() and "s3cret" not in repr(config) and "s3cret" not in repr(parsed)
    assert json.loads(config.to_json())["options"]["offset_store"] == "postgresql://dmk:***@db:5432/offsets"
    # Across the process boundary: a mapping again, parsed by the engine into the same options.
    assert legacy.options(DriverConfig.from_json(_config(options=parsed).to_json())) == legacy.options(
        _config(options={**vars(parsed), "offset_store": "postgresql://dmk:***@db:5432/offsets"}))
    for bad, match in (({"batch_secs": 1}, r"Unrecognized options of the legacy engine: \['batch_secs'\]"),
                       ({"stream": "kinesis"}, "stream must be one of direct, receiver"),
                       ({"offsets": "redis"}, "offsets must be one of checkpoint, kafka"),
                       ({"batch_seconds": 0}, "batch_seconds must be a number of seconds > 0"),
                       ({"max_rate_per_partition": 0}, "max_rate_per_partition must be a whole number")):
        with pytest.raises(ConfigError, match=match):
            legacy.options(_config(options=bad))
    with pytest.raises(ConfigError, match="not '<number> <unit>'"):
        modern.options(_config(engine="modern", options={"trigger": "fast"}))
    assert modern.options(_config(engine="modern", options={"trigger": "availableNow"})).trigger == "availableNow"
    # A warm-up runs the job's code only: no store, name or fingerprint.
    plain = legacy.options(legacy.plain(_config(options={"stream": "receiver", "offsets": "kafka", "job_name": "j",
                                                         "write_ahead_log": True, "fingerprint": "f"})))
    assert (plain.stream, plain.offsets, plain.write_ahead_log, plain.job_name, plain.fingerprint) == (
        "direct", "checkpoint", False, None, None)


def test_every_engines_record_reads_back_the_outputs_its_runs_write(tmp_path: Path) -> None:
    import pandas as pd

    from compare.jobs import ScriptEngine
    from kit import layout
    from kit.sink import write_batch, write_keyed

    counts = pd.DataFrame({"key": ["a", "b"], "count": [2, 1], "last_input_ts": [10, 20]})
    dead = pd.DataFrame({"topic": ["t"], "partition": [1], "offset": [7], "reason": ["bad_json"]})
    late = pd.DataFrame({"event_id": ["e9"], "topic": ["t"], "partition": [0], "offset": [9], "detail": ["tumbling:0"]})
    for name in ENGINES:
        out = tmp_path / name
        record = get_engine(name).record(out)
        assert record.outputs("running_counts").empty and record.dead_letters().empty  # nothing written yet
        write_batch(out / "running_counts", 3, counts.iloc[:1])
        write_batch(out / "running_counts", 4, counts.iloc[1:])
        write_keyed(layout.dead_letters(out, "events"), dead)
        write_batch(layout.late(out, "windowed_counts"), 4, late)
        rows = record.outputs("running_counts")
        assert rows[["batch", *counts.columns]].values.tolist() == [[3, "a", 2, 10], [4, "b", 1, 20]]
        assert record.dead_letters()[list(dead.columns)].values.tolist() == dead.values.tolist()
        assert record.late_records("windowed_counts")[list(late.columns)].values.tolist() == late.values.tolist()
        assert record.late_records("running_counts") is None  # a job without a watermark names none
    assert get_engine("legacy").record(tmp_path / "legacy").late_dropped("windowed_counts") == 1
    # A script's output is collected into the run directory when its run ends; numbers-as-text stay text.
    script = ScriptEngine("legacy", "python job.py {bootstrap} {topic} {output_topic}")
    out = tmp_path / "script"
    out.mkdir()
    record = script.record(out)
    assert record.outputs("job").empty
    pd.DataFrame({"word": ["007", "b"], "count": [1, 2]}).to_json(out / layout.COLLECTED_OUTPUT, orient="records",
                                                                 lines=True)
    assert record.outputs("job").values.tolist() == [["007", 1], ["b", 2]]
    assert record.dead_letters().empty and record.late_records("job") is None


def test_the_driver_gives_the_offset_store_from_its_environment_to_the_engine_that_has_one(tmp_path: Path) -> None:
    """The file holds the store redacted, or (a config written by hand or by a test) not at all."""
    from compare.driver import OFFSET_STORE_ENV, read_config

    dsn = "postgresql://dmk:secret@127.0.0.1:5432/dmk"
    for options in ({"offsets": "postgresql"}, {"offsets": "postgresql", "offset_store": "postgresql://dmk:***@h/dmk"}):
        path = tmp_path / "legacy.json"
        _config(options=options).write(path)
        config = read_config(path, {OFFSET_STORE_ENV: dsn})
        assert get_engine("legacy").options(config).offset_store == dsn
        assert get_engine("legacy").options(read_config(path, {})).offset_store == options.get("offset_store")
    path = tmp_path / "modern.json"
    _config(engine="modern", options={"trigger": "1 second"}).write(path)
    assert "offset_store" not in dict(read_config(path, {OFFSET_STORE_ENV: dsn}).options)  # modern has no store
