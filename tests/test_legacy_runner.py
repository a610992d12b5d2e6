"""The legacy runner's offset-store plumbing without Spark: config checks, the transactional commit of a
batch's outputs with its offsets, and the export of committed outputs as batch files."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from kit.dataset import DatasetSpec
from kit.errors import ConfigError, RunTimeout
from kit.sink import batch_path, read_batches, write_batch
from legacy.errors import LegacyError, NonContiguousOffsets
from legacy.runner import (
    LegacyRunConfig,
    _commit_batch,
    _ProgressPoll,
    _commit_transaction,
    _pending,
    attach_offset_store,
    await_progress,
    export_outputs,
    open_offset_store,
)


def _config(tmp_path: Path, **kwargs) -> LegacyRunConfig:
    return LegacyRunConfig("127.0.0.1:1", {"events": "t"}, str(tmp_path / "out"), str(tmp_path / "ckpt"),
                           DatasetSpec(), (("running_counts", "default"),), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offsets": "etcd"}, "offsets must be one of checkpoint, kafka, zookeeper, sqlite, postgresql"),
        ({"stream": "push"}, "stream must be one of direct, receiver"),
        ({"stream": "receiver"}, "use offsets='kafka', not 'checkpoint'"),
        ({"offsets": "zookeeper"}, "needs offset_store: the ZooKeeper hosts"),
        ({"offsets": "postgresql"}, "needs offset_store: a PostgreSQL DSN"),
    ],
)
def test_bad_run_configs_are_refused(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **kwargs)


def test_consumer_names() -> None:
    base = LegacyRunConfig("b", {}, "o", "/x/ckpt", DatasetSpec(), ())
    assert base.consumer == "dmk-ckpt"
    assert LegacyRunConfig("b", {}, "o", "c", DatasetSpec(), (), job_name="job").consumer == "job"
    assert LegacyRunConfig("b", {}, "o", "c", DatasetSpec(), (), offsets="kafka", offset_store="grp").consumer == "grp"


def test_a_batch_commits_outputs_with_offsets_once_and_exports_them(tmp_path: Path) -> None:
    config = _config(tmp_path, offsets="sqlite", job_name="job")
    store = open_offset_store(config)
    try:
        first = [("t", 0, 0, 5), ("t", 1, 0, 3)]
        counts = pd.DataFrame({"user_id": ["a", "b"], "count": [5, 3]})
        _commit_transaction(store, 1000, first, [("running_counts", counts), ("dead_letters.events", counts.iloc[:0])])
        # The same batch again (a restarted driver regenerating it), with other rows: skipped entirely.
        _commit_transaction(store, 1000, first, [("running_counts", counts.assign(count=[50, 30]))])
        _commit_transaction(store, 2000, [("t", 0, 5, 6), ("t", 1, 3, 3)], [("running_counts", counts.iloc[:1].assign(count=6))])
        assert store.load(["t"]) == {("t", 0): 6, ("t", 1): 3}
        assert export_outputs(config, store) == 3
    finally:
        store.close()
    rows = read_batches(Path(config.out_dir) / "running_counts")
    assert rows[["batch", "user_id", "count"]].values.tolist() == [[1000, "a", 5], [1000, "b", 3], [2000, "a", 6]]
    assert rows["emitted_at"].gt(0).all()
    assert read_batches(Path(config.out_dir) / "dead_letters.events").empty
    assert (Path(config.out_dir) / "dead_letters.events" / f"batch={1000:015d}.parquet").exists()


def test_export_is_nothing_for_file_modes(tmp_path: Path) -> None:
    assert export_outputs(_config(tmp_path), None) == 0


def test_a_batch_regenerated_with_a_longer_range_replaces_its_commit(tmp_path: Path) -> None:
    """A context restored from a checkpoint older than its last commit regenerates that batch time over a
    longer range: its outputs and offsets replace the committed ones. Any other gap is refused."""
    config = _config(tmp_path, offsets="sqlite", job_name="job")
    store = open_offset_store(config)
    try:
        counts = pd.DataFrame({"user_id": ["a"], "count": [5]})
        _commit_transaction(store, 1000, [("t", 0, 0, 5)], [("running_counts", counts)])
        _commit_transaction(store, 1000, [("t", 0, 0, 8)], [("running_counts", counts.assign(count=8))])
        assert store.load(["t"]) == {("t", 0): 8}
        with pytest.raises(NonContiguousOffsets):  # batch 2000 never committed: a real overlap
            _commit_transaction(store, 2000, [("t", 0, 6, 9)], [("running_counts", counts)])
        assert store.load(["t"]) == {("t", 0): 8}
        export_outputs(config, store)
    finally:
        store.close()
    assert read_batches(Path(config.out_dir) / "running_counts")[["batch", "count"]].values.tolist() == [[1000, 8]]


def test_a_batch_with_a_failed_output_commits_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path, offsets="sqlite", job_name="job")
    store = open_offset_store(config)
    attach_offset_store(config, store)
    try:
        run = config.run_key
        _pending(run, 1000)["ranges"]["events"] = [("t", 0, 0, 5)]
        # The job's writer ran, the dead letters' did not (its Spark job failed).
        _pending(run, 1000)["outputs"].append(("running_counts", pd.DataFrame({"user_id": ["a"], "count": [5]})))
        _pending(run, 1000)["written"].add("running_counts")
        progress = {"events": str(Path(config.out_dir) / "progress.events")}
        with pytest.raises(LegacyError, match="batch 1000: dead_letters.events did not complete"):
            _commit_batch(run, "sqlite", {}, progress, ("running_counts", "dead_letters.events"), 1000)
        assert store.load(["t"]) == {}
        assert export_outputs(config, store) == 0
        assert not (Path(config.out_dir) / "progress.events").exists()
    finally:
        attach_offset_store(config, None)
        store.close()


def test_progress_polls_read_new_and_replaced_files(tmp_path: Path) -> None:
    columns = ["topic", "partition", "from_offset", "until_offset"]
    progress = tmp_path / "progress.events"
    poll = _ProgressPoll(tmp_path)
    assert poll.rows().empty
    write_batch(progress, 1000, pd.DataFrame([("t", 0, 0, 5)], columns=columns))
    assert poll.rows()[["batch", "until_offset"]].values.tolist() == [[1000, 5]]
    write_batch(progress, 2000, pd.DataFrame([("t", 0, 5, 9)], columns=columns))
    write_batch(progress, 1000, pd.DataFrame([("t", 0, 0, 7)], columns=columns))  # a regenerated batch
    rows = poll.rows().sort_values("batch")
    assert rows[["batch", "until_offset"]].values.tolist() == [[1000, 7], [2000, 9]]


def test_extra_batches_of_a_kafka_committing_run_count_only_batches_generated_after_the_last_one_completed(
    tmp_path: Path,
) -> None:
    # A direct stream sends a batch's commitAsync when it generates the next batch (as Spark does): a batch
    # generated while the last one was still queued or running has not sent it, so it does not count there.
    # Elsewhere any later batch counts: batches run in order, so it sees the last records' watermark.
    columns = ["topic", "partition", "from_offset", "until_offset"]
    progress = tmp_path / "progress.events"
    at = 1_800_000_000_000
    write_batch(progress, at, pd.DataFrame([("t", 0, 0, 10)], columns=columns))
    for later in (at + 1000, at + 2000):
        write_batch(progress, later, pd.DataFrame(columns=columns))
    completed_ns = (at + 1500) * 1_000_000  # the last batch with records completed after at + 1 s was generated
    os.utime(batch_path(progress, at), ns=(completed_ns, completed_ns))
    assert await_progress(tmp_path, {"t": {0: 10}}, timeout_s=5, extra_batches=2, poll_s=0.05) == at + 2000
    with pytest.raises(RunTimeout):
        await_progress(tmp_path, {"t": {0: 10}}, timeout_s=0.3, extra_batches=2, poll_s=0.05, after_completion=True)
    write_batch(progress, at + 3000, pd.DataFrame(columns=columns))
    assert await_progress(tmp_path, {"t": {0: 10}}, timeout_s=5, extra_batches=2, poll_s=0.05,
                          after_completion=True) == at + 3000
