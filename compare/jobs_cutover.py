"""``dmk compare-jobs --cutover-at N``: a team's own job cut over mid-stream, checked against an uninterrupted run.

The legacy job runs on the capture's first ``N`` records (in arrival order) in a topic of its own, settles and
is stopped; :func:`compare.cutover.read_position` reads its position from its checkpoint, exactly as
``dmk cutover checkpoint`` does, and :func:`compare.cutover.own_seed` its state, its last output row per key
(``dmk cutover --state-from``; or, with ``cutover_state="checkpoint"``, its ``updateStateByKey`` state from the
checkpoint, :func:`compare.cutover.checkpoint_seed`). The rest of the capture is then replayed into the same
topic and the modern job continues from there: its command's ``{starting_offsets}`` is the position,
``{initial_state}`` the seed's Parquet file. The legacy job's rows then the modern job's, joined, are what
:func:`compare.jobs.compare_jobs` compares with the legacy job's uninterrupted run (and the oracle): a record
lost, processed twice or a state not carried shows as a differing key.

Everything lands under ``<run>/cutover/``: both jobs' directories and checkpoints, ``seed.parquet``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from compare.cutover import PositionSource, checkpoint_seed, own_seed, plan_cutover, read_position, write_seed
from compare.jobs import JobsSettings, ScriptEngine, _run_side
from compare.metrics import JobFigures, JobsCutover

__all__ = ["CUTOVER_DIR", "cut_over"]

CUTOVER_DIR = "cutover"
"""The run directory's folder of the cutover's two jobs and its seed."""


def cut_over(
    settings: JobsSettings, frame: pd.DataFrame, bootstrap: str, run_id: str,
    progress: Callable[[str, int, int], None], zookeeper: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], JobsCutover]:
    """Run the legacy job up to ``settings.cutover_at`` records and the modern job from its position on.

    Returns the joined rows (the legacy job's, then the modern job's), the modern job's figures, and what the
    cutover read and carried.

    Raises:
        CutoverAmbiguous: the stopped legacy job's checkpoint has pending batches holding records.
        ConfigError, EngineFailed, RunTimeout: as :func:`compare.jobs.compare_jobs`.
    """
    at = int(settings.cutover_at or 0)
    root = settings.out_dir / CUTOVER_DIR
    topic = f"dmk-jobs-{run_id}-cutover"
    legacy = ScriptEngine("legacy", settings.legacy, output=settings.output, python2=settings.legacy_python2,
                          role="before")
    legacy.zookeeper = zookeeper
    before, before_figures = _run_side(legacy, settings, frame, bootstrap, run_id, progress, root=root, topic=topic,
                                       records=slice(0, at))
    _raise_refused(before)
    checkpoint = str(root / "legacy-checkpoint")
    plan = plan_cutover(read_position(PositionSource("checkpoint", checkpoint)))
    seed = (checkpoint_seed(plan, checkpoint, tuple(settings.key), settings.state_columns)
            if settings.cutover_state == "checkpoint" else own_seed(plan, before, tuple(settings.key)))
    seed_file = root / "seed.parquet"
    seed_bytes = write_seed(seed, seed_file)
    # No row before the cutover: nothing to continue from ({initial_state} empty, as in a run without cutover).
    modern = ScriptEngine("modern", settings.modern, output=settings.output,
                          starting_offsets=plan.starting_offsets_json(),
                          initial_state=str(seed_file) if len(seed) else "", role="after")
    modern.zookeeper = zookeeper
    after, after_figures = _run_side(modern, settings, frame, bootstrap, run_id, progress, root=root, topic=topic,
                                     records=slice(at, None))
    _raise_refused(after)
    joined = pd.concat([f for f in (before, after) if not f.empty] or [pd.DataFrame()], ignore_index=True)
    figures = JobsCutover(
        at_records=at, position=plan.starting_offsets(), state_from=settings.cutover_state, seed_file=str(seed_file),
        keys_seeded=len(seed),
        seed_bytes=seed_bytes, legacy_rows_before=len(before), modern_rows_after=len(after),
        legacy_before=JobFigures(**before_figures, rows_compared=len(seed)),
    )
    return joined, after_figures, figures


def _raise_refused(rows: pd.DataFrame) -> None:
    """Raise what reading a job's input or output refused (``_run_side`` keeps it for after both jobs ran)."""
    if "error" in rows.attrs:
        raise rows.attrs["error"]
