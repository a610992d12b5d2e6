"""The run- and checkpoint-directory names of :mod:`kit.layout`: each name round-trips through the functions
that make and read it, and the names on disk are the ones earlier runs wrote (so old run directories still read)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kit import layout
from kit.sink import read_batches, write_batch, write_keyed


def test_the_names_on_disk_are_the_ones_runs_have_always_written(tmp_path: Path) -> None:
    assert layout.dead_letters(tmp_path, "events") == tmp_path / "dead_letters.events"
    assert layout.late(tmp_path, "windowed_counts") == tmp_path / "windowed_counts.late"
    assert layout.input_progress(tmp_path, "events") == tmp_path / "progress.events"
    assert layout.progress_log(tmp_path, "counts") == tmp_path / "progress" / "counts.jsonl"
    assert layout.progress_log(tmp_path, "counts", idle=True) == tmp_path / "progress" / "idle" / "counts.jsonl"
    assert layout.BATCHES_LOG == Path("metrics/batches.jsonl") and layout.EVENT_LOG == "eventlog"
    assert layout.batch_file(tmp_path, 1_700_000_000_000) == tmp_path / "batch=001700000000000.parquet"
    assert (layout.STANDIN_PROGRESS, layout.PRINTED, layout.INPUTS, layout.OUTPUTS) == (
        "progress.jsonl", "printed.jsonl", "inputs.jsonl", "outputs.jsonl")
    assert (layout.OFFSETS, layout.COMMITS, layout.SOURCES, layout.STATE, layout.METADATA) == (
        "offsets", "commits", "sources", "state", "metadata")


def test_each_name_round_trips_through_its_reader(tmp_path: Path) -> None:
    for name in ("events", "clicks.v2", "a-b"):
        assert layout.dead_letters_input(layout.dead_letters(tmp_path, name).name) == name
    assert layout.dead_letters_input("counts") is None and layout.dead_letters_input("counts.late") is None
    for batch in (0, 7, 1_700_000_000_000):
        assert layout.batch_of_file(layout.batch_file(tmp_path, batch)) == batch
    with pytest.raises(ValueError, match="is not a batch file"):
        layout.batch_of_file(tmp_path / "keyed-abc.parquet")

    # Written by kit.sink under the layout's names, found again by the layout's listings, sorted, directories only.
    rows = pd.DataFrame({"topic": ["t"], "partition": [0], "offset": [3], "reason": ["bad json"]})
    for name in ("zeta", "alpha"):
        write_keyed(layout.dead_letters(tmp_path, name), rows)
        write_batch(layout.input_progress(tmp_path, name), 5, pd.DataFrame({"records": [1]}))
    (tmp_path / "dead_letters.stray").write_text("a file, not an output")
    (tmp_path / layout.STANDIN_PROGRESS).write_text("")  # a stand-in's progress file is no input's progress
    assert layout.dead_letter_dirs(tmp_path) == [layout.dead_letters(tmp_path, "alpha"),
                                                 layout.dead_letters(tmp_path, "zeta")]
    assert layout.input_progress_dirs(tmp_path) == [layout.input_progress(tmp_path, "alpha"),
                                                    layout.input_progress(tmp_path, "zeta")]
    assert read_batches(layout.dead_letters(tmp_path, "alpha"))["reason"].tolist() == ["bad json"]
    assert [layout.batch_of_file(p) for p in layout.input_progress(tmp_path, "zeta").glob(layout.BATCH_FILES)] == [5]

    for query in ("counts", "dead_letters.events"):
        path = layout.progress_log(tmp_path, query)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    layout.progress_log(tmp_path, "counts", idle=True).parent.mkdir()
    layout.progress_log(tmp_path, "counts", idle=True).write_text("{}\n")
    assert [p.stem for p in layout.progress_logs(tmp_path)] == ["counts", "dead_letters.events"]


def test_a_query_checkpoint_is_told_by_its_offset_log_or_metadata(tmp_path: Path) -> None:
    assert not layout.is_query_checkpoint(tmp_path)
    (tmp_path / layout.OFFSETS).mkdir()
    assert layout.is_query_checkpoint(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / layout.METADATA).write_text('{"id": "q"}')
    assert layout.is_query_checkpoint(other)
