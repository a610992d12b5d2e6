"""Workload specs, oracles and the shared result shapes (no JVM, no broker)."""

from __future__ import annotations

import re

import pandas as pd
import pyarrow as pa
import pytest

from compare.engines import get_engine
from kit import workloads
from kit.dataset import DatasetSpec, generate
from kit.errors import ConfigError
from kit.sink import read_batches, write_batch

MESSY = DatasetSpec.from_profile("messy", records=20_000, events_per_second=500, lateness_margin_ms=4_000, seed=5)


@pytest.fixture(scope="module")
def messy() -> pd.DataFrame:
    return generate(MESSY)


def test_unknown_workload_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown workload 'wordcount'; the workloads are: running_counts") as info:
        workloads.get("wordcount")
    assert info.value.field == "workload" and info.value.actual == "wordcount"


@pytest.mark.parametrize("name", workloads.NAMES)
def test_every_workload_has_a_spec_and_both_builders(name: str) -> None:
    import importlib

    spec = workloads.get(name)
    assert spec.name == name
    assert spec.columns[-1] == "last_input_ts"
    assert spec.output_mode in ("update", "append")
    for engine in ("legacy", "modern"):
        module = importlib.import_module(f"{engine}.workloads.{name}")
        for variant in spec.variants(engine):
            assert callable(getattr(module, variant.function)), f"{engine}.workloads.{name}.{variant.function}"
    assert spec.variants("legacy")[0].name == spec.variants("modern")[0].name == "default"


def test_parse_dataset_rejects_exactly_the_malformed_records(messy) -> None:
    events, rejects = workloads.parse_dataset(messy)
    labelled = messy.loc[~messy["kind"].isin(["clean", "late", "too_late", "duplicate"]), ["seq", "kind"]]
    assert rejects["seq"].tolist() == labelled["seq"].tolist()
    assert rejects["reason"].tolist() == labelled["kind"].tolist()
    assert len(events) + len(rejects) == len(messy)
    # prior_max_ms is the running maximum of the event times before each event.
    assert events["prior_max_ms"].iloc[0] < 0
    assert (events["prior_max_ms"].iloc[1:].to_numpy() == events["event_time"].cummax().iloc[:-1].to_numpy()).all()


@pytest.mark.parametrize("name", workloads.NAMES)
def test_oracles_are_deterministic_and_dead_letter_the_malformed(messy, name: str) -> None:
    spec = workloads.get(name)
    first, second = spec.oracle(messy, MESSY), spec.oracle(messy, MESSY)
    pd.testing.assert_frame_equal(first.rows, second.rows)
    assert list(first.rows.columns) == [*spec.key_columns, *spec.value_columns]
    assert len(first.rows) > 0
    if spec.output_mode == "update":  # append outputs may repeat a key (a re-delivered impression joins twice)
        assert not first.rows.duplicated(list(spec.key_columns)).any(), "a key appears twice in the final result"
    assert len(first.dead_letters) == int((~messy["kind"].isin(["clean", "late", "too_late", "duplicate"])).sum())
    # Only too_late records are ever late-dropped (the dataset's margins make that exact).
    kinds = messy.set_index("seq").loc[first.late_dropped["seq"], "kind"]
    assert set(kinds) <= {"too_late"}


def test_window_starts_follow_spark_window() -> None:
    times = pd.Series([0, 4_999, 5_000, 12_345], index=[10, 11, 12, 13])
    tumbling = workloads.window_starts(times, 10_000, 10_000)
    assert tumbling["window_start"].tolist() == [0, 0, 0, 10_000]
    sliding = workloads.window_starts(times, 10_000, 5_000)
    assert list(zip(sliding.index, sliding["window_start"])) == [
        (10, 0), (10, -5_000), (11, 0), (11, -5_000), (12, 5_000), (12, 0), (13, 10_000), (13, 5_000),
    ]


def test_final_result_takes_the_last_value_per_key_in_update_mode(tmp_path) -> None:
    spec = workloads.get("running_counts")
    write_batch(tmp_path, 2, pd.DataFrame({"key": ["a", "b"], "count": [3, 1], "last_input_ts": [5, 6]}))
    write_batch(tmp_path, 1, pd.DataFrame({"key": ["a", "c"], "count": [1, 7], "last_input_ts": [1, 2]}))
    write_batch(tmp_path, 3, pd.DataFrame({"key": ["b"], "count": [2], "last_input_ts": [9]}))
    final = workloads.final_result(spec, read_batches(tmp_path))
    assert final.to_dict("list") == {"key": ["a", "b", "c"], "count": [3, 2, 7]}


def test_final_result_keeps_every_row_in_append_mode(tmp_path) -> None:
    spec = workloads.get("dedup")
    rows = pd.DataFrame({c: [] for c in spec.columns})
    assert workloads.final_result(spec, rows).empty


def test_a_replayed_batch_replaces_its_file(tmp_path) -> None:
    write_batch(tmp_path, 7, pd.DataFrame({"key": ["a", "b"]}))
    write_batch(tmp_path, 7, pd.DataFrame({"key": ["a"]}))
    write_batch(tmp_path, 8, pd.DataFrame({"key": []}))
    rows = read_batches(tmp_path)
    assert rows["key"].tolist() == ["a"] and rows["batch"].tolist() == [7]
    assert rows["emitted_at"].iloc[0] > 1_700_000_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch=000000000000007.parquet", "batch=000000000000008.parquet"]


def test_the_readme_workloads_example_runs() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = readme.split("## Paired workloads", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    assert len(scope["expected"].late_dropped) > 0 and len(scope["expected"].rows) > 0


def test_unknown_variant_and_missing_input_are_clear_errors() -> None:
    spec = workloads.get("sessions")
    assert spec.variant("modern", "state").function == "build_with_state"
    with pytest.raises(ConfigError, match="workload 'sessions' has no legacy variant 'state'; it has default") as info:
        spec.variant("legacy", "state")
    assert info.value.field == "variant"
    with pytest.raises(ConfigError, match=r"workload 'join' reads inputs \['impressions', 'clicks'\]; no topic given for \['clicks'\]"):
        workloads.get("join").check_inputs({"impressions": "t1"})


def test_resolve_finds_every_variant_and_your_own_jobs() -> None:
    from examples import event_types

    job = get_engine("modern").resolve("sessions", "state")
    assert (job.name, job.build.__name__, job.equivalent) == ("sessions.state", "build_with_state", True)
    for name in ("sessions", "dedup"):
        tws = get_engine("modern").resolve(name, "transform_with_state")
        assert (tws.name, tws.build.__name__, tws.equivalent) == (
            f"{name}.transform_with_state", "build_transform_with_state", True
        )
    naive = get_engine("legacy").resolve("windowed_counts", "naive")
    assert (naive.name, naive.equivalent) == ("windowed_counts.naive", False)
    # A spec of your own, by reference; its variants name their builders by reference too.
    own = get_engine("legacy").resolve("examples.event_types:SPEC")
    assert own.spec is event_types.SPEC and own.build is event_types.legacy_counts and own.name == "event_types"
    # Your own builder against a built-in contract: named like the default variant, so outputs line up.
    mine = get_engine("modern").resolve("running_counts", "examples.event_types:modern_counts")
    assert (mine.name, mine.build) == ("running_counts", event_types.modern_counts)
    assert get_engine("legacy").resolve("running_counts", event_types.legacy_counts).build is event_types.legacy_counts


@pytest.mark.parametrize(
    ("workload", "variant", "message"),
    [
        ("no_such_module:SPEC", "default", "cannot import 'no_such_module'"),
        ("examples.event_types:NOPE", "default", "has no 'NOPE'"),
        ("examples.event_types:oracle", "default", "is a function, not a kit.workloads.WorkloadSpec"),
        ("running_counts", "examples.event_types:nothing_here", "has no 'nothing_here'"),
        ("running_counts", "examples.event_types:SPEC", "is not a function"),
        ("running_counts", "fast", "has no legacy variant 'fast'"),
    ],
)
def test_resolve_names_what_is_wrong(workload: str, variant: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_engine("legacy").resolve(workload, variant)


def test_keyed_rows_are_written_once_per_content_and_read_without_duplicates(tmp_path) -> None:
    from kit.sink import KEYED_BATCH, write_keyed

    first = pd.DataFrame({"topic": ["t", "t"], "partition": [0, 1], "offset": [5, 9], "reason": ["bad_json", "bad_utf8"]})
    path = write_keyed(tmp_path, first)
    assert write_keyed(tmp_path, first.copy()) == path  # a retried task writes the same file
    # Python workers write Arrow tables (no pandas): the same rows make the same file.
    assert write_keyed(tmp_path, pa.table({c: list(first[c]) for c in first.columns})) == path
    assert write_keyed(tmp_path, pa.Table.from_pandas(first, preserve_index=False)) == path
    # A re-run whose tasks saw the rows in other groups: files overlap, rows count once.
    write_keyed(tmp_path, first.iloc[[1]].reset_index(drop=True))
    write_keyed(tmp_path, pd.DataFrame({"topic": ["t"], "partition": [1], "offset": [10], "reason": ["bad_json"]}))
    assert write_keyed(tmp_path, first.iloc[:0]) is None
    assert write_keyed(tmp_path, pa.table({"topic": pa.array([], pa.string())})) is None
    write_batch(tmp_path, 4, pd.DataFrame({"topic": ["u"], "partition": [0], "offset": [1], "reason": ["bad_json"]}))
    rows = read_batches(tmp_path)
    assert sorted(zip(rows["batch"], rows["topic"], rows["partition"], rows["offset"])) == [
        (KEYED_BATCH, "t", 0, 5), (KEYED_BATCH, "t", 1, 9), (KEYED_BATCH, "t", 1, 10), (4, "u", 0, 1),
    ]
    assert len(list(tmp_path.glob("keyed-*.parquet"))) == 3


def test_a_batch_file_refuses_rows_that_already_have_its_columns(tmp_path) -> None:
    from kit.sink import encode_batch, write_keyed

    with pytest.raises(ValueError, match="batch"):
        encode_batch(1, pd.DataFrame({"batch": [7], "key": ["a"]}))
    with pytest.raises(ValueError, match="emitted_at"):
        write_keyed(tmp_path, pa.table({"emitted_at": [1], "key": ["a"]}))
    assert list(tmp_path.iterdir()) == []
