"""The engine interface and the layers: DriverConfig's JSON round trip, the registry, and the import rules
(kit imports no engine, the engines never import each other, compare never branches on an engine's name).

No JVM and no broker: these run in the fast tier.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from compare.engines import ENGINES, get_engine, register_engine
from kit.dataset import DatasetSpec
from kit.engine import DriverConfig, Engine, seconds
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
    config = _config(offsets="sqlite", max_rate_per_partition=250, source_options={"maxOffsetsPerTrigger": 800},
                     initial_state={"running_counts": "/tmp/seed.parquet"}, sys_path=("/repo",), fingerprint="f1",
                     drain_timeout_s=900.0, spark_conf={"spark.eventLog.enabled": "true"})
    assert DriverConfig.from_json(config.to_json()) == config
    config.write(tmp_path / "driver-config.json")
    assert DriverConfig.read(tmp_path / "driver-config.json") == config
    # Defaults live in the dataclass only: a file without them reads back with them.
    raw = json.loads(_config().to_json())
    for optional in ("batch_seconds", "trigger", "offsets", "timeout_s", "kafka_params"):
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
    with pytest.raises(ConfigError, match="unknown engine 'spark1'; the engines are: legacy, modern"):
        get_engine("spark1")
    with pytest.raises(ConfigError, match="does not implement kit.engine.Engine"):
        register_engine(object())  # type: ignore[arg-type]
    impostor = dataclasses.make_dataclass("Impostor", [])()
    for member in ("resolve", "session", "start", "exactly_once", "paced", "interval_s", "batch_spans", "batch_phases", "batch_of",
                   "processed_records", "processed_ranges", "late_dropped"):
        setattr(impostor, member, lambda *a, **k: None)
    impostor.name, impostor.batches_by_clock = "legacy", True
    with pytest.raises(ConfigError, match="an engine named 'legacy' is registered already"):
        register_engine(impostor)


def test_paced_sets_each_engines_own_interval() -> None:
    config = _config()
    assert get_engine("legacy").paced(config, "0.5 s").batch_seconds == 0.5
    assert get_engine("modern").paced(config, "500 milliseconds").trigger == "500 milliseconds"
    # and reads it back the same way
    assert get_engine("legacy").interval_s(get_engine("legacy").paced(config, "0.5 s")) == 0.5
    assert get_engine("modern").interval_s(get_engine("modern").paced(config, "500 milliseconds")) == 0.5
    assert get_engine("modern").interval_s(config) == 0.0  # "0 seconds": back to back


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


def test_compare_never_branches_on_an_engines_name() -> None:
    branches = []
    for path in sorted((ROOT / "compare").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq | ast.NotEq):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Constant) and s.value in ENGINES for s in sides):
                    branches.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert branches == []


def test_each_engine_says_whether_a_run_promises_exactly_once() -> None:
    def config(engine: str, stream: str) -> DriverConfig:
        return DriverConfig(engine, "b:9092", {"events": "t"}, "out", "ckpt", stream=stream)

    assert get_engine("legacy").exactly_once(config("legacy", "direct"))
    assert not get_engine("legacy").exactly_once(config("legacy", "receiver"))
    # The stream kind is a legacy setting: a modern query is exactly-once whatever it says.
    assert get_engine("modern").exactly_once(config("modern", "receiver"))
