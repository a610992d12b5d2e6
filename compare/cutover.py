"""``dmk cutover``: where a stopped DStream job left off, as ``startingOffsets`` for its successor, and its state.

The position becomes the ``startingOffsets`` of its Structured Streaming successor; the state is carried over
for workloads whose state is totals.

The last step of a migration: stop the legacy job, start the modern query exactly where it stopped, with no
record processed twice and none skipped. :func:`read_position` reads the legacy job's last completed position
from wherever the job kept it (its checkpoint, its Kafka consumer group, ZooKeeper, or the SQLite/PostgreSQL
offset table), and refuses when that position is ambiguous — a checkpoint whose pending batches hold records
(their outputs may be partial). :func:`plan_cutover` checks it against the legacy job's outputs when they are
in the kit's layout (:mod:`legacy.runner`): outputs of batches beyond the position make the cutover ambiguous
too, until they are discarded (the modern query produces them again). :func:`seed_state` writes the legacy
job's last totals for the modern query to continue (:mod:`modern.seed`: in its state store, checked). For state that
cannot be seeded (open windows, sessions, ids seen), :func:`plan_rewind` computes earlier starting offsets and
the filter (:func:`write_suppress`) that drops what the legacy job already emitted (:mod:`kit.workloads.rewind`,
:mod:`modern.cutover`).

Example::

    position = read_position(PositionSource("sqlite", "offsets.sqlite", consumer="job", topics=("events",)))
    plan = plan_cutover(position, legacy_output="out/legacy", discard_beyond=True)
    print(plan.starting_offsets_json())      # {"events": {"0": 1250, "1": 1250}}
    seed_state(plan, "running_counts", "seed.parquet")
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from compare.engines import handover
from compare.errors import CutoverAmbiguous
from kit import layout, workloads
from kit.errors import ConfigError
from kit.sink import read_batches, write_keyed
from kit.workloads.rewind import Rewind, RewindInput

__all__ = [
    "EARLIEST",
    "CutoverAmbiguous",
    "CutoverPlan",
    "LegacyPosition",
    "PositionSource",
    "SOURCES",
    "RewindPlan",
    "carried_spec",
    "checkpoint_seed",
    "ids_seed",
    "is_dstream_checkpoint",
    "own_seed",
    "plan_cutover",
    "plan_rewind",
    "read_position",
    "read_state_from",
    "rewound_spec",
    "seed_state",
    "state_rows",
    "state_seed",
    "union_of_outputs",
    "write_options",
    "write_seed",
    "write_suppress",
]

SOURCES = handover().sources
"""Where a legacy job can have kept its position (the offset modes of ``dmk compare --legacy-mode``):
``checkpoint``, ``kafka``, ``zookeeper``, ``sqlite``, ``postgresql`` (:attr:`kit.engine.Handover.sources`)."""

EARLIEST = -2
"""``startingOffsets``' value for "the beginning of the partition" (Spark's)."""


@dataclass(frozen=True)
class PositionSource:
    """Where the legacy job kept its position.

    Attributes:
        kind: one of :data:`SOURCES`.
        where: the checkpoint directory, the consumer group (``kafka``), the ZooKeeper hosts, the SQLite file
            or the PostgreSQL DSN.
        consumer: the job's name in a ZooKeeper or SQL store (``LegacyRunConfig.consumer``).
        topics: the job's topics (every store but the checkpoint, which knows them).
        bootstrap_servers: Kafka, to list the topics' partitions (every store but the checkpoint).
    """

    kind: str
    where: str
    consumer: str | None = None
    topics: tuple[str, ...] = ()
    bootstrap_servers: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in SOURCES:
            msg = f"the position source must be one of {', '.join(SOURCES)}, got {self.kind!r}"
            raise ConfigError(msg, field="kind", expected=SOURCES, actual=self.kind)
        if self.kind == "checkpoint":
            return
        if not self.topics:
            msg = f"a {self.kind} store is read per topic: name the legacy job's topics (--topic)"
            raise ConfigError(msg, field="topics", expected="one or more topics", actual=())
        if not self.bootstrap_servers:
            msg = (
                f"reading a {self.kind} store needs Kafka's address to list the topics' partitions "
                "(--bootstrap-servers)"
            )
            raise ConfigError(msg, field="bootstrap_servers", expected="host:port", actual=None)
        if self.kind in ("zookeeper", "sqlite", "postgresql") and not self.consumer:
            msg = (
                f"a {self.kind} store keeps offsets per job: name the legacy job (--consumer, the "
                "name it commits under)"
            )
            raise ConfigError(msg, field="consumer", expected="the job's name", actual=None)

    def describe(self) -> str:
        """The source in words, for messages (a PostgreSQL DSN with its password redacted)."""
        if self.kind == "checkpoint":
            return f"checkpoint {self.where}"
        if self.kind == "kafka":
            return f"Kafka consumer group {self.where!r}"
        from kit.engine import redacted_dsn

        where = redacted_dsn(self.where) if self.kind == "postgresql" else self.where
        return f"{self.kind} store {where} (job {self.consumer!r})"


@dataclass(frozen=True)
class LegacyPosition:
    """The legacy job's last completed position.

    Attributes:
        source: where it was read.
        offsets: ``(topic, partition)`` → the next offset to process (:data:`EARLIEST`: nothing processed).
        exact: True when the store is written in one transaction with the outputs (SQL stores) or is a
            checkpoint with no pending records; False for stores written after the outputs (Kafka group,
            ZooKeeper), whose job may have written outputs beyond the position.
        pending: checkpoint only: pending batch times whose ranges hold records, accepted with
            ``allow_pending`` (the position is then where the earliest of them starts).
    """

    source: PositionSource
    offsets: dict[tuple[str, int], int]
    exact: bool
    pending: tuple[int, ...] = ()


@dataclass(frozen=True)
class CutoverPlan:
    """What the modern query needs to start where the legacy job stopped.

    Attributes:
        position: the legacy job's position.
        last_batch_ms: the legacy job's last batch within the position (from its outputs; None if unknown).
        beyond: batch times of legacy outputs beyond the position (produced again by the modern query).
        discarded: the files discarded for that (``discard_beyond``).
        legacy_output: the legacy job's output directory, if given.
        notes: what the user should know (printed by the CLI).
    """

    position: LegacyPosition
    last_batch_ms: int | None = None
    beyond: tuple[int, ...] = ()
    discarded: tuple[str, ...] = ()
    legacy_output: str | None = None
    notes: tuple[str, ...] = field(default=())

    def starting_offsets(self) -> dict[str, dict[str, int]]:
        """Spark's ``startingOffsets`` JSON form: ``{"topic": {"0": offset, ...}}``."""
        result: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(self.position.offsets.items()):
            result.setdefault(topic, {})[str(partition)] = offset
        return result

    def starting_offsets_json(self) -> str:
        """:meth:`starting_offsets` as compact JSON, the value of the Kafka source's ``startingOffsets`` option."""
        return json.dumps(self.starting_offsets(), separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        """The whole plan as a JSON object (``dmk cutover --json``)."""
        return {
            "source": self.position.source.describe(),
            "startingOffsets": self.starting_offsets(),
            "exact": self.position.exact,
            "pending_batches_accepted": list(self.position.pending),
            "last_legacy_batch_ms": self.last_batch_ms,
            "legacy_batches_beyond": list(self.beyond),
            "discarded_files": list(self.discarded),
            "notes": list(self.notes),
        }


# -- reading the position ------------------------------------------------------------------------------------


def read_position(source: PositionSource, *, allow_pending: bool = False) -> LegacyPosition:
    """The legacy job's last completed position, from where ``source`` says it is.

    Raises:
        CutoverAmbiguous: a checkpoint whose pending batches hold records (unless ``allow_pending``), or a
            store holding no offsets for the job's topics.
        ConfigError, OffsetStoreUnavailable, and the checkpoint reader's errors: as their messages say.
    """
    if source.kind == "checkpoint":
        return _checkpoint_position(source, allow_pending)
    return _store_position(source)


def _checkpoint_position(source: PositionSource, allow_pending: bool) -> LegacyPosition:
    offsets, pending = handover().checkpoint_position(source.where)
    if not pending:
        return LegacyPosition(source, offsets, exact=True)
    if not allow_pending:
        msg = (
            f"the checkpoint {source.where} lists {len(pending)} pending batch(es) holding records (batch times "
            f"{', '.join(map(str, pending[:5]))}{' ...' if len(pending) > 5 else ''}): the legacy job had started "
            "them and not completed them, so their outputs may be partial. Resolve it one of three ways: restart the "
            "legacy job from this checkpoint and stop it gracefully (ssc.stop(stopGraceFully=True)) once they are "
            "done, then cut over again; or, if its outputs are in the kit's layout, pass --legacy-output DIR "
            "--discard-beyond --allow-pending (their outputs are removed, the modern query produces them again); "
            "or pass --allow-pending and make your sink drop or overwrite the outputs of those batch times."
        )
        raise CutoverAmbiguous(msg, reason="pending batches", batches=pending)
    # Batches complete in time order, one at a time: the position is where the earliest of them starts.
    return LegacyPosition(source, offsets, exact=True, pending=pending)


def _store_position(source: PositionSource) -> LegacyPosition:
    from kit.kafka import Kafka

    # PositionSource refuses a store without Kafka's address, and only stores come here.
    assert source.bootstrap_servers is not None, "a store's PositionSource has bootstrap_servers"
    with Kafka(source.bootstrap_servers) as kafka:
        partitions = {topic: kafka.partitions(topic) for topic in source.topics}
    stored = handover().stored_offsets(source.kind, source.where, source.consumer or source.where, source.topics,
                                       source.bootstrap_servers)
    empty = [topic for topic in source.topics if not any(t == topic for t, _ in stored)]
    if empty:
        msg = (
            f"the {source.describe()} holds no offsets for {', '.join(map(repr, empty))}: the legacy job never "
            "committed a batch of them, or --consumer/--topic name another job. Check the names; if the job really "
            "processed nothing, start the modern query with startingOffsets=earliest."
        )
        raise CutoverAmbiguous(msg, reason="nothing stored")
    offsets = {(topic, p): stored.get((topic, p), EARLIEST) for topic, parts in partitions.items() for p in parts}
    return LegacyPosition(source, offsets, exact=source.kind in handover().transactional)


# -- checking against the legacy job's outputs -----------------------------------------------------------------


def _export_committed(source: PositionSource, out: Path) -> None:
    """Export a transactional legacy job's committed outputs from its database into ``out``.

    Those outputs live in the database until the driver exports them on stop, which a killed driver never did:
    exported here, the outputs in ``out`` are the committed ones.
    """
    handover().export_committed(source.kind, source.where, source.consumer or "", out)


def _batch_files(directory: Path) -> dict[int, list[Path]]:
    files: dict[int, list[Path]] = {}
    for path in directory.glob(f"*/{layout.BATCH_FILES}"):
        files.setdefault(layout.batch_of_file(path), []).append(path)
    return files


def _keyed_beyond(directory: Path, offsets: dict[tuple[str, int], int]) -> dict[Path, pd.DataFrame]:
    """Dead-letter files the legacy parse wrote (keyed, not per batch) holding records beyond ``offsets``.

    Maps each such file to the rows it holds within the position (those stay).
    """
    found: dict[Path, pd.DataFrame] = {}
    for path in sorted(p for d in layout.dead_letter_dirs(directory) for p in d.glob(layout.KEYED_FILES)):
        rows = pd.read_parquet(path)
        ends = [offsets.get((t, int(p)), EARLIEST) for t, p in zip(rows["topic"], rows["partition"], strict=True)]
        beyond = rows["offset"].astype("int64").to_numpy() >= pd.Series(ends, dtype="int64").to_numpy()
        if beyond.any():
            found[path] = rows[~beyond]
    return found


def _has_rows(paths: list[Path]) -> bool:
    import pyarrow.parquet as pq

    return any(pq.ParquetFile(p).metadata.num_rows > 0 for p in paths if not p.parent.name.startswith("progress."))


def plan_cutover(
    position: LegacyPosition, *, legacy_output: str | Path | None = None, discard_beyond: bool = False,
    dry_run: bool = False,
) -> CutoverPlan:
    """The cutover from ``position``, checked against the legacy job's outputs when they are in the kit's layout.

    The outputs of every batch a legacy job ran are batch files keyed by batch time, and its progress files say
    which records each completed batch read (:mod:`legacy.runner`). A batch is *within* the position when its
    ranges end at or before it. Outputs of later batches — a pending batch's partial output, or a completed
    batch whose offsets the store had not yet taken (Kafka's ``commitAsync`` commits at the next batch) — hold
    records the modern query will process again; so do the dead letters the parse wrote (keyed files, by
    offset) of records beyond the position. With ``discard_beyond`` every batch file beyond the position
    is deleted (outputs and progress), so that legacy outputs and modern outputs add up to each record exactly
    once; without it, the cutover is refused when any of them holds rows. ``dry_run``: the plan lists what it would
    delete and deletes nothing (``dmk cutover --rewind`` plans first, as its rewind may still be refused).

    Raises:
        CutoverAmbiguous: legacy outputs beyond the position and no ``discard_beyond``; or the position is not
            at the end of any batch the outputs record.
    """
    notes: list[str] = []
    if not position.exact and legacy_output is None:
        notes.append(
            f"the {position.source.describe()} is written after the outputs (at-least-once): the legacy job may have "
            "written outputs of its last batch without committing its offsets; the modern query processes that "
            "batch's records again. Pass --legacy-output to find and discard such outputs."
        )
    if position.pending:
        notes.append(f"pending batches accepted: {', '.join(map(str, position.pending))}; the modern query processes "
                     "their records again")
    if legacy_output is None:
        return CutoverPlan(position, notes=tuple(notes))
    out = Path(legacy_output)
    if not out.is_dir():
        msg = (
            f"--legacy-output {out} is not a directory (the legacy job's output root, with "
            "progress.<input>/ and one directory per output)"
        )
        raise ConfigError(msg, field="legacy_output", expected="a directory", actual=str(out))
    if position.source.kind in handover().transactional:
        _export_committed(position.source, out)
    progress = handover().completed_batches(out)
    if progress.empty:
        msg = (
            f"{out} has no progress.<input>/ batch files: it is not a legacy output root of the kit's "
            "(legacy.runner)"
        )
        raise ConfigError(msg, field="legacy_output", expected="progress.<input>/", actual=str(out))
    tps = set(zip(progress["topic"], progress["partition"].astype(int), strict=True))
    unknown = sorted(tp for tp in tps if tp not in position.offsets)
    if unknown:
        msg = (
            f"{out} holds batches of {unknown}, for which the position has no offset: the legacy job read more "
            "topics than --topic names (name them all), or these outputs belong to another job"
        )
        raise CutoverAmbiguous(msg, reason="partitions missing from the position")
    within: list[int] = []
    for batch_ms, ranges in progress.groupby("batch"):
        untils = {
            (t, int(p)): int(u) for t, p, u in ranges[["topic", "partition", "until_offset"]].itertuples(index=False)
        }
        if all(until <= position.offsets[tp] for tp, until in untils.items()):
            within.append(int(batch_ms))
    # The position must be a batch boundary: where the last batch within it ends, or where the first begins.
    done = progress[progress["batch"].isin(within)]
    boundary = (
        done.groupby(["topic", "partition"])["until_offset"].max() if within
        else progress.groupby(["topic", "partition"])["from_offset"].min()
    )
    off = {(t, int(p)): int(b) for (t, p), b in boundary.items()
           if position.offsets[(t, int(p))] != int(b)
           and not (not within and position.offsets[(t, int(p))] == EARLIEST)}
    if off:
        msg = (
            f"the position is not where a completed batch in {out} ends (partition -> batch boundary: {off}, "
            f"position: { {tp: position.offsets[tp] for tp in off} }): the store and these outputs belong to "
            "different jobs or runs, or the job was killed between committing a batch and writing its progress "
            "file (restart it and let it complete a batch). Check --consumer/--topic and --legacy-output."
        )
        raise CutoverAmbiguous(msg, reason="position inside a batch")
    last = max(within) if within else None
    files = _batch_files(out)
    beyond = tuple(sorted(b for b in files if last is None or b > last))
    holding = tuple(b for b in beyond if _has_rows(files[b]))
    # The parse writes dead letters as it reads (keyed files, legacy.workloads.Source): those of records beyond
    # the position are outputs beyond it too, found by their offsets.
    keyed = _keyed_beyond(out, position.offsets)
    discarded: list[str] = []
    if keyed and not discard_beyond:
        msg = (
            f"{out} holds dead letters of records beyond the position in {len(keyed)} file(s) "
            f"({', '.join(str(p.relative_to(out)) for p in list(keyed)[:3])}{' ...' if len(keyed) > 3 else ''}): "
            "the parse of a batch whose offsets were not committed wrote them. The modern query will process their "
            "records again. Pass --discard-beyond to delete them, or restart the legacy job so that it commits "
            "them and stop it gracefully."
        )
        raise CutoverAmbiguous(msg, reason="outputs beyond the position", batches=holding)
    if holding and not discard_beyond:
        msg = (
            f"{out} holds outputs of {len(holding)} batch(es) beyond the position (batch times "
            f"{', '.join(map(str, holding[:5]))}{' ...' if len(holding) > 5 else ''}): partial output of a pending "
            "batch, or a batch whose offsets were not committed. The modern query will process their records again. "
            "Pass --discard-beyond to delete those outputs (and their progress files), or restart the legacy job so "
            "that it commits them and stop it gracefully."
        )
        raise CutoverAmbiguous(msg, reason="outputs beyond the position", batches=holding)
    if discard_beyond:
        for batch_ms in beyond:
            for path in files[batch_ms]:
                if not dry_run:
                    path.unlink()
                discarded.append(str(path.relative_to(out)))
        for path, kept in keyed.items():
            if not dry_run:
                if not kept.empty:
                    write_keyed(path.parent, kept.drop(columns=["batch", "emitted_at"]).reset_index(drop=True))
                path.unlink()
            discarded.append(str(path.relative_to(out)))
    return CutoverPlan(position, last, beyond, tuple(discarded), str(out), tuple(notes))


# -- state and options ---------------------------------------------------------------------------------------


def carried_spec(workload: str) -> workloads.WorkloadSpec:
    """The spec of ``workload``, whose state :func:`seed_state` can carry.

    Raises:
        ConfigError: the workload's state cannot be seeded (:attr:`kit.workloads.StateCarry.seeded`; its ``carry``
            says why and what to do instead).
    """
    spec = workloads.get(workload)
    if spec.carry.how != "totals" and not spec.carry.seeded:
        msg = f"{spec.name}'s state is {spec.carry.how}: {spec.carry.note}"
        raise ConfigError(msg, field="workload", expected="a workload whose state is totals, ids seen or sessions",
                          actual=spec.carry.how)
    return spec


def own_seed(plan: CutoverPlan, rows: pd.DataFrame, key: tuple[str, ...]) -> pd.DataFrame:
    """A team's own job's state at ``plan``'s position: its last output row per ``key`` (``--state-from``).

    For a job that re-emits each key's whole state (``updateStateByKey``/``mapWithState`` writing every key,
    or every changed key, each batch), its last row per key is its state; ``rows`` are its output in the order
    written. Only a position that no output can be beyond will do: a store written in one transaction with the
    outputs or a checkpoint with no pending records; the outputs of accepted pending batches, or of a batch a
    Kafka group or ZooKeeper store had not taken yet, cannot be told apart in an output the kit did not write.

    Raises:
        CutoverAmbiguous: such a position.
        ConfigError: ``rows`` lack a key column.
    """
    position = plan.position
    if position.pending or not position.exact:
        why = (f"batches {', '.join(map(str, position.pending))} were accepted pending (their outputs may be partial)"
               if position.pending else f"a {position.source.kind} store is written after the outputs (a batch's "
               "rows may be in the output and its offsets not in the store)")
        msg = (f"--state-from cannot tell which of the job's output rows lie within the position: {why}; restart "
               "the legacy job, stop it gracefully, and cut over from its checkpoint or a SQL store")
        raise CutoverAmbiguous(msg, reason="outputs may be beyond the position", batches=position.pending)
    from compare.jobs import _shape

    return _shape(rows, key, "final", "legacy")  # the last row per key, as compare-jobs compares a final result


def is_dstream_checkpoint(where: str) -> bool:
    """Whether ``--state-from`` names a DStream checkpoint rather than an output.

    As ``dmk checkpoint inspect`` tells one: the engine with the handover owns it (``checkpoint-<time>`` files,
    or a URI such as ``hdfs://...``). ``kafka:TOPIC`` and ``sql:DSN#TABLE`` are outputs.
    """
    if where.startswith(("kafka:", "sql:")):
        return False
    from compare.engines import ENGINES, get_engine

    return any(engine.handover is not None and engine.owns_checkpoint(where) for engine in map(get_engine, ENGINES))


def checkpoint_seed(plan: CutoverPlan, where: str, key: tuple[str, ...], columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A team's own job's ``updateStateByKey`` state, read from its checkpoint at ``plan``'s position.

    The position must be read from the same checkpoint (its last completed batch is the state's batch). Each
    ``(key, state)`` pair is a row (:func:`state_rows`).

    Raises:
        ConfigError: another source than that checkpoint; a checkpoint that does not hold the state there
            (:meth:`kit.engine.Handover.checkpoint_state`); a key or state ``columns`` do not fit.
    """
    source = plan.position.source
    if source.kind != "checkpoint" or _location(source.where) != _location(where):
        msg = (f"--state-from {where} is a checkpoint, so the position must be read from it too: dmk cutover "
               f"checkpoint {where} --state-from {where} (the state is the one of its last completed batch)")
        raise ConfigError(msg, field="state_from", expected=f"checkpoint {where}", actual=source.describe())
    _batch, pairs = handover().checkpoint_state(where)
    return state_rows(pairs, key, columns)


def _location(where: str) -> str:
    """A checkpoint location to compare: a local path resolved, a URI as written."""
    from kit.spark import has_scheme

    return where if has_scheme(where) else str(Path(where).resolve())


def state_rows(pairs: list[tuple[Any, Any]], key: tuple[str, ...], columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """``(key, state)`` pairs as rows: the key's ``key`` columns, then the state's.

    A key of several columns is a tuple of as many values. A state is one value (column ``columns[0]``, default
    ``state``), a tuple or list (one column each: ``columns`` names them, and must), or a dict (its keys, or the
    ``columns`` named).

    Raises:
        ConfigError: a key or a state that does not fit those columns (naming the first such pair).
    """
    rows = []
    for pair_key, state in pairs:
        keys = pair_key if len(key) > 1 else (pair_key,)
        if not isinstance(keys, tuple | list) or len(keys) != len(key):
            msg = f"the state's key {pair_key!r} does not fit --key {','.join(key)} ({len(key)} columns)"
            raise ConfigError(msg, field="key", expected=list(key), actual=repr(pair_key))
        if isinstance(state, dict):
            values = {c: state.get(c) for c in columns} if columns else dict(state)
        elif isinstance(state, tuple | list):
            if len(columns) != len(state):
                msg = (f"the state of {pair_key!r} is {type(state).__name__} {state!r}: name its {len(state)} fields "
                       f"with --state-columns (e.g. --state-columns {','.join(f'f{i}' for i in range(len(state)))})")
                raise ConfigError(msg, field="state_columns", expected=len(state), actual=list(columns))
            values = dict(zip(columns, state, strict=True))
        else:
            if len(columns) > 1:
                msg = f"the state of {pair_key!r} is one value, {state!r}: give --state-columns one name"
                raise ConfigError(msg, field="state_columns", expected=1, actual=list(columns))
            values = {columns[0] if columns else "state": state}
        rows.append({**dict(zip(key, keys, strict=True)), **values})
    return pd.DataFrame(rows, columns=None if rows else list(key))


def read_state_from(where: str, bootstrap_servers: str | None = None) -> pd.DataFrame:
    """A team's legacy job's output, in the order written: ``kafka:TOPIC``, ``sql:DSN#TABLE`` or a directory.

    A topic's values and a directory's lines are JSON objects (Parquet and CSV files are read as tables), as
    ``dmk compare-jobs`` reads a job's output.

    Raises:
        ConfigError: ``kafka:`` without ``bootstrap_servers``; a path that is not a directory, or a checkpoint.
    """
    from compare.jobs import _read_dir, _read_sql, _read_topic, _sql_output

    if where.startswith("kafka:"):
        if not bootstrap_servers:
            msg = f"--state-from {where} reads a topic: give --bootstrap-servers"
            raise ConfigError(msg, field="bootstrap_servers", expected="host:port", actual=None)
        return _read_topic(bootstrap_servers, where.removeprefix("kafka:"), "legacy")
    if where.startswith("sql:"):
        return _read_sql(*_sql_output(where), "legacy")
    path = Path(where)
    if not path.is_dir():
        msg = (f"--state-from {where}: not a directory, kafka:TOPIC or sql:DSN#TABLE; name where the legacy job "
               "writes its rows")
        raise ConfigError(msg, field="state_from", expected=("DIR", "kafka:TOPIC", "sql:DSN#TABLE"), actual=where)
    if is_dstream_checkpoint(where):
        msg = f"--state-from {where} is a DStream checkpoint, not an output: its state is read by checkpoint_seed"
        raise ConfigError(msg, field="state_from", expected="the job's output", actual=where)
    return _read_dir(path, "legacy")


def write_seed(seed: pd.DataFrame, target: str | Path) -> int:
    """Write ``seed`` to ``target`` as Parquet (its directory created); returns the file's size in bytes."""
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = seed.reset_index(drop=True)
    rows.attrs = {}  # pandas keeps a frame's attrs in the file (a topic's rows carry every row's timestamp)
    rows.to_parquet(path, index=False)
    return path.stat().st_size


def seed_state(plan: CutoverPlan, workload: str, target: str | Path, bootstrap_servers: str | None = None, *,
               dataset: Any = None, rows: pd.DataFrame | None = None) -> int:
    """Write :func:`state_seed` (or ``rows``, computed before) to ``target`` as Parquet; returns its key count.

    A key is one of the spec's key columns' values in the seed (a user's several open sessions are one key).
    """
    seed = state_seed(plan, workload, bootstrap_servers, dataset=dataset) if rows is None else rows
    write_seed(seed, target)
    keys = [c for c in workloads.get(workload).key_columns if c in seed.columns]
    return len(seed.drop_duplicates(keys))


def state_seed(plan: CutoverPlan, workload: str, bootstrap_servers: str | None = None, *,
               dataset: Any = None) -> pd.DataFrame:
    """The legacy job's state of ``workload`` at ``plan``'s position, as the modern query's initial state.

    Totals: each key's last row within the position. Ids seen (:attr:`kit.workloads.StateCarry.seeds_ids`,
    ``dedup``): :func:`ids_seed` of the rows within the position. Sessions
    (:attr:`~kit.workloads.StateCarry.seed_from_input`): the sessions it held open, from the records it processed,
    read again from Kafka (``bootstrap_servers``; ``dataset`` as for :func:`plan_rewind`). The modern query reads
    it as ``ModernRunConfig.initial_state``.

    Raises:
        ConfigError: no ``legacy_output`` in the plan, the workload's state cannot be seeded (:func:`carried_spec`),
            or a sessions seed without Kafka, or one its rule refuses.
        CutoverAmbiguous: a sessions seed needs records the topic no longer holds.
    """
    spec = carried_spec(workload)
    if plan.legacy_output is None:
        msg = "seeding the state reads the legacy job's outputs: pass --legacy-output"
        raise ConfigError(msg, field="legacy_output", expected="a directory", actual=None)
    if spec.carry.seed_from_input is not None:  # _legacy_left reads the legacy rows with the records
        left, read_from, first = _legacy_left(plan, spec, bootstrap_servers, dataset, "--seed-state")
        gone = {tp: o for tp, o in read_from.items() if o > first[tp]}
        if gone:
            where = ", ".join(f"{t}-{p}: before {o}" for (t, p), o in sorted(gone.items()))
            msg = (
                f"the topic no longer holds records the legacy job processed ({where}), so the {spec.name} state "
                "cannot be rebuilt from them: cut over with --rewind, which reads only the records of the state "
                "still open"
            )
            raise CutoverAmbiguous(msg, reason="seed beyond retention")
        return spec.carry.seed_from_input(left).reset_index(drop=True)
    rows = read_batches(Path(plan.legacy_output) / spec.name)
    if not rows.empty and plan.last_batch_ms is not None:
        rows = rows[rows["batch"] <= plan.last_batch_ms]
    if spec.carry.seeds_ids:
        last = ids_seed(spec, rows)
    else:
        columns = [*spec.key_columns, *spec.carry.sum_columns, "last_input_ts"]
        if rows.empty:
            last = pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
        else:
            last = rows.sort_values("batch", kind="stable").drop_duplicates(list(spec.key_columns), keep="last")
            last = last[columns].sort_values(list(spec.key_columns))
    return last.reset_index(drop=True)


def ids_seed(spec: workloads.WorkloadSpec, emitted: pd.DataFrame) -> pd.DataFrame:
    """The ids a deduplication's legacy job still remembers, from its ``emitted`` rows: ``<keys>, seen_at``.

    The legacy job emitted each id once, at its first delivery; a re-delivery carries its event time. Its next
    batch judges records against its next watermark ``W'``: the largest event time below the position minus the
    delay, which is the largest ``row_time`` it emitted minus the delay (every event it did not drop as late either
    was emitted or repeats one that was, with the same event time). A record at or before ``W'`` is too late
    whatever its id, so the ids that still matter are those seen after ``W'``: the seed. ``seen_at`` is their
    ``row_time``; the modern query takes ``W'`` back from the seed (its newest ``seen_at`` minus the delay,
    :func:`modern.seed.seed_watermark`). Columns: the spec's key columns and ``seen_at`` (ms).
    """
    keys = list(spec.key_columns)
    if emitted.empty:
        return pd.DataFrame({**{k: pd.Series(dtype="object") for k in keys}, "seen_at": pd.Series(dtype="int64")})
    seen_at = emitted.eval(spec.carry.row_time).astype("int64")
    assert spec.watermark_delay_ms is not None, "a workload that seeds ids has a watermark"
    remembered = emitted.assign(seen_at=seen_at)[seen_at > int(seen_at.max()) - spec.watermark_delay_ms]
    return remembered[[*keys, "seen_at"]].drop_duplicates(keys).sort_values(keys).reset_index(drop=True)


def write_options(plan: CutoverPlan | RewindPlan, target: str | Path) -> dict[str, Any]:
    """Merge ``startingOffsets`` into the JSON object of Kafka source options at ``target``; returns the options.

    The file is created if absent. Any other starting option (``startingTimestamp``...) is replaced; the options
    returned are those written. A :class:`RewindPlan` writes its rewound offsets.
    """
    path = Path(target)
    options: dict[str, Any] = {}
    if path.exists():
        try:
            options = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            msg = f"{path} is not a JSON object of source options ({err}); fix or remove it"
            raise ConfigError(msg, field="options", expected="a JSON object", actual=str(path)) from None
        if not isinstance(options, dict):
            msg = f"{path} holds a JSON {type(options).__name__}, not an object of source options"
            raise ConfigError(msg, field="options", expected="a JSON object", actual=type(options).__name__)
    # Spark gives startingTimestamp and startingOffsetsByTimestamp precedence over startingOffsets, and
    # options are case-insensitive: any earlier starting point would silently win.
    for key in [k for k in options if k.lower().startswith("starting")]:
        del options[key]
    options["startingOffsets"] = plan.starting_offsets_json()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(options, indent=2) + "\n", encoding="utf-8")
    return options


def union_of_outputs(spec: workloads.WorkloadSpec, legacy: pd.DataFrame, modern: pd.DataFrame) -> pd.DataFrame:
    """The final result of a job cut over from ``legacy`` to ``modern`` rows (:func:`kit.sink.read_batches` frames).

    Every legacy batch comes before every modern one, then :func:`kit.workloads.final_result` applies.
    """
    frames = [f for f in (legacy, modern) if not f.empty]
    if not frames:
        return workloads.final_result(spec, pd.DataFrame())
    ordered = []
    offset = 0
    for frame in frames:
        rank = frame["batch"].rank(method="dense").astype("int64")
        ordered.append(frame.assign(batch=rank + offset))
        offset += int(rank.max())
    return workloads.final_result(spec, pd.concat(ordered, ignore_index=True))



# -- rewinding (workloads whose state cannot be seeded) ----------------------------------------------------------


def rewound_spec(workload: str) -> workloads.WorkloadSpec:
    """The spec of ``workload``, whose cutover :func:`plan_rewind` can rewind.

    Raises:
        ConfigError: the workload's state is not ``"rewound"`` (stateless, totals, or not carried yet).
    """
    spec = workloads.get(workload)
    if spec.carry.how != "rewound" or spec.carry.rewind is None:
        fix = {
            "stateless": "it keeps no state: the position's startingOffsets are the whole cutover (drop --rewind)",
            "totals": "its totals are carried instead: --seed-state FILE (drop --rewind)",
        }.get(spec.carry.how, spec.carry.note)
        msg = f"--rewind: {spec.name}'s state is {spec.carry.how}; {fix}"
        raise ConfigError(msg, field="workload", expected="a workload whose state is rewound", actual=spec.carry.how)
    return spec


@dataclass(frozen=True)
class RewindPlan:
    """A rewound cutover: where the modern query starts and what its output filter drops (``dmk cutover --rewind``).

    Attributes:
        spec: the workload.
        position: the legacy job's position (``(topic, partition)`` → offset).
        rewind: the workload rule's answer (:class:`kit.workloads.rewind.Rewind`).
        read_from: ``(topic, partition)`` → the first offset read to compute it.
    """

    spec: workloads.WorkloadSpec
    position: dict[tuple[str, int], int]
    rewind: Rewind
    read_from: dict[tuple[str, int], int]

    def starting_offsets(self) -> dict[str, dict[str, int]]:
        """The rewound ``startingOffsets`` (Spark's JSON form)."""
        return _by_topic(self.rewind.starts)

    def starting_offsets_json(self) -> str:
        """:meth:`starting_offsets` as compact JSON, the Kafka source's ``startingOffsets`` option."""
        return json.dumps(self.starting_offsets(), separators=(",", ":"))

    def reread(self) -> dict[tuple[str, int], int]:
        """Records the modern query reads again, per partition (``P - R``)."""
        return {tp: max(at, 0) - max(self.rewind.starts[tp], 0) for tp, at in sorted(self.position.items())}

    def suppress_json(self) -> dict[str, Any]:
        """The output filter's file (``--suppress FILE``; read by ``modern.cutover.suppress_emitted``)."""
        keys = self.rewind.suppress[list(self.spec.key_columns)]
        return {
            "workload": self.spec.name,
            "row_time": self.spec.carry.row_time,
            "cutoff_ms": self.rewind.cutoff_ms,
            "key_columns": list(self.spec.key_columns),
            "keys": [[_plain(v) for v in row] for row in keys.itertuples(index=False)],
            # The legacy job dead-lettered the malformed records below its position: the modern query, re-reading
            # them, dead-letters only those from the position on (modern.cutover.dead_letters_from).
            "dead_letters_from": _by_topic(self.position),
        } | ({
            # A join's filter goes by its pairs' input records (StateCarry.row_inputs): rows made only of records
            # below the position, or of one the legacy job dropped as too late, are the legacy job's.
            "row_inputs": list(self.spec.carry.row_inputs),
            "position": _by_topic(self.position),
            "dropped": [[_plain(v) for v in row] for row in self.rewind.dropped.itertuples(index=False)],
        } if self.spec.carry.row_inputs else {})

    def to_json(self) -> dict[str, Any]:
        """The rewind's report (``dmk cutover --rewind --json``)."""
        reread = self.reread()
        return {
            "workload": self.spec.name,
            "rewound_for": self.rewind.needed,
            "legacy_watermark_ms": self.rewind.watermark_ms,
            "legacy_next_watermark_ms": self.rewind.next_watermark_ms,
            "cutoff_ms": self.rewind.cutoff_ms,
            "partitions": [
                {"topic": t, "partition": p, "position": self.position[(t, p)], "start": self.rewind.starts[(t, p)],
                 "reread": n} for (t, p), n in reread.items()
            ],
            "records_reread": sum(reread.values()),
            "suppressed_keys": len(self.rewind.suppress),
            "dropped_records": len(self.rewind.dropped),
            "filter": (
                f"rows made only of records below the position, and those of {len(self.rewind.dropped)} re-read "
                "record(s) the legacy job dropped as too late" if self.spec.carry.row_inputs else
                f"rows at or before {self.rewind.cutoff_ms} and {len(self.rewind.suppress)} key(s) the legacy job "
                "emitted"
            ),
        }


def _by_topic(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``(topic, partition)`` → offset as Spark's JSON form of offsets: topic → partition (a string) → offset."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def _plain(value: Any) -> Any:
    # numpy scalars as JSON's own numbers and strings
    return value.item() if hasattr(value, "item") else value


def _read_events(bootstrap_servers: str, ranges: dict[tuple[str, int], tuple[int, int]]) -> pd.DataFrame:
    """The valid events of ``ranges`` (``[from, until)`` per partition), parsed as the legacy job parses them."""
    from kit.events import parse_event
    from kit.kafka import Kafka

    rows: list[dict[str, Any]] = []
    with Kafka(bootstrap_servers) as kafka:
        for (topic, partition), (start, until) in sorted(ranges.items()):
            for record in kafka.read_range(topic, partition, start, until):
                event, _ = parse_event(record.value)
                if event is not None:
                    rows.append({**event, "topic": topic, "partition": partition, "offset": record.offset,
                                 "kafka_ts": record.timestamp})
    columns = ["event_id", "user", "key", "ad_id", "ad_type", "event_type", "event_time", "topic", "partition",
               "offset", "kafka_ts"]
    return pd.DataFrame(rows, columns=columns)


def _beginnings(bootstrap_servers: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from kit.kafka import Kafka, TopicPartition

    with Kafka(bootstrap_servers) as kafka:
        found = kafka.beginning_offsets([TopicPartition(t, p) for t, p in tps])
    return {(tp.topic, tp.partition): offset for tp, offset in found.items()}


def _legacy_left(plan: CutoverPlan, spec: workloads.WorkloadSpec, bootstrap_servers: str | None, dataset: Any,
                 flag: str) -> tuple[RewindInput, dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """What the legacy job left at ``plan``'s position, for a rewind rule or a seed read from its input.

    Returns the :class:`RewindInput`, where each partition it processed was read from (its first batch, or the
    topic's earliest retained offset), and where its first batch began.

    Raises:
        ConfigError: no legacy outputs or Kafka address (``flag`` names the option that needs them).
    """
    if plan.legacy_output is None:
        msg = (f"{flag} reads what the legacy job emitted and where its batches began: pass --legacy-output DIR "
               "(its outputs in the kit's layout)")
        raise ConfigError(msg, field="legacy_output", expected="a directory", actual=None)
    if not bootstrap_servers:
        msg = f"{flag} reads the records the legacy job processed from Kafka: pass --bootstrap-servers HOST:PORT"
        raise ConfigError(msg, field="bootstrap_servers", expected="host:port", actual=None)
    out = Path(plan.legacy_output)
    position = {tp: offset for tp, offset in plan.position.offsets.items()}
    progress = handover().completed_batches(out)
    if plan.last_batch_ms is not None and not progress.empty:
        progress = progress[progress["batch"] <= plan.last_batch_ms]
    else:
        progress = progress.iloc[:0]
    firsts = progress.groupby(["topic", "partition"])["from_offset"].min()
    first = {(str(t), int(p)): int(o) for (t, p), o in firsts.items()}
    last = progress.loc[progress["batch"] == plan.last_batch_ms, ["topic", "partition", "from_offset"]]
    last_from = {(str(t), int(p)): int(o) for t, p, o in last.itertuples(index=False)}
    processed = [tp for tp, at in position.items() if at > first.get(tp, at)]
    beginnings = _beginnings(bootstrap_servers, processed) if processed else {}
    read_from = {tp: max(first[tp], beginnings.get(tp, 0)) for tp in processed}
    events = _read_events(bootstrap_servers, {tp: (read_from[tp], position[tp]) for tp in processed})
    emitted = read_batches(out / spec.name)
    if not emitted.empty and plan.last_batch_ms is not None:
        emitted = emitted[emitted["batch"] <= plan.last_batch_ms]
    emitted = emitted[list(spec.columns)] if not emitted.empty else pd.DataFrame(columns=list(spec.columns))
    if dataset is None and (out / "driver-config.json").exists():
        from kit.engine import DriverConfig

        dataset = DriverConfig.read(out / "driver-config.json").dataset  # a kit run's replayed dataset (YSB's table)
    late = _late_within(layout.late(out, spec.name), plan.last_batch_ms)
    left = RewindInput(events, emitted.reset_index(drop=True), position, last_from, dataset, late)
    return left, read_from, first


def plan_rewind(plan: CutoverPlan, workload: str, bootstrap_servers: str | None, *,
                dataset: Any = None) -> RewindPlan:
    """The rewound cutover of ``workload`` from ``plan``'s position (``dmk cutover --rewind``).

    Reads the legacy job's outputs and batches (``plan.legacy_output``) and the records it processed (Kafka, from
    its first batch or the topic's earliest retained offset up to the position), and applies the workload's rule
    (``spec.carry.rewind``, :mod:`kit.workloads.rewind`). ``dataset``: the replayed dataset's spec, for a rule that
    reads it (YSB's campaign table); default: the one of the legacy output's ``driver-config.json``, if any.

    Raises:
        ConfigError: the workload is not rewound (:func:`rewound_spec`), or no legacy outputs or Kafka address.
        CutoverAmbiguous: the modern query would need records the topic no longer holds.
    """
    spec = rewound_spec(workload)
    left, read_from, first = _legacy_left(plan, spec, bootstrap_servers, dataset, "--rewind")
    rule = spec.carry.rewind
    assert rule is not None, "rewound_spec returns specs with a rewind rule"
    rewind = rule(left)
    processed = list(read_from)
    lost = {tp: read_from[tp] for tp in processed
            if read_from[tp] > first[tp] and rewind.starts[tp] <= read_from[tp]}
    if lost:
        msg = (
            f"rewind beyond retention: the modern query needs the records of {spec.name}'s open state from the "
            f"oldest offsets the topic still holds ({', '.join(f'{t}-{p}: {o}' for (t, p), o in sorted(lost.items()))}"
            ") and perhaps older ones, which it no longer holds. Cut over at a quieter point (restart the legacy job "
            "and stop it again), or raise the topic's retention.ms before the next cutover."
        )
        raise CutoverAmbiguous(msg, reason="rewind beyond retention")
    return RewindPlan(spec, left.position, rewind, read_from)


def _late_within(directory: Path, last_batch_ms: int | None) -> pd.DataFrame:
    """``topic, partition, offset`` of the records the legacy job dropped as too late up to its last batch.

    The rewind rule keeps those below the position (:func:`kit.workloads.rewind.rewind_pairs`).
    """
    late = read_batches(directory)
    if late.empty:
        return pd.DataFrame({"topic": pd.Series(dtype=str), "partition": pd.Series(dtype="int64"),
                             "offset": pd.Series(dtype="int64")})
    if last_batch_ms is not None:
        late = late[late["batch"] <= last_batch_ms]
    return late[["topic", "partition", "offset"]].astype({"partition": "int64", "offset": "int64"}).reset_index(
        drop=True)


def write_suppress(plan: RewindPlan, target: str | Path) -> Path:
    """Write the modern query's output filter (:meth:`RewindPlan.suppress_json`) to ``target``; returns its path."""
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan.suppress_json(), indent=1) + "\n", encoding="utf-8")
    return path
