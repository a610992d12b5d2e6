"""Are the drafts of a directory of DStream jobs proven equal to their originals? (issue 36's nine examples).

    python benchmarks/migrate_verify_corpus.py --jobs /work/corpus/spark-2.4 [--only NAME[,NAME]] [--out DIR]

For each job (``*.py`` in the directory) it runs ``dmk migrate JOB --verify`` on a capture written here (300
lines of 5 words from 8, or the numbers 1..1000 five times for a ``queueStream``), with the arguments, mode and
input kind the job needs, one job at a time, and prints one Markdown table row per job: its draft (lifted to
DataFrame code or the carried runtime, ``migrate.draft.make_draft``), the verdict, the mode, the seconds, and
the command. Settings are inferred from the job's source (its input: Kafka, socket, directory, queue; a
stateful ``updateStateByKey`` job is compared on its final rows, others batch by batch) unless
:data:`SETTINGS` names the job (Spark 2.4's examples that take more arguments or print every batch, even
empty ones). The jobs are never committed (docs/migrate.md#proven-equal-sparks-examples).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.capture import CAPTURE_FORMAT, _write  # noqa: E402
from kit.dataset import _manifest_path, _sha256  # noqa: E402
from migrate import analyse  # noqa: E402
from migrate.draft import make_draft  # noqa: E402

WORDS = ["spark", "stream", "batch", "word", "count", "kafka", "socket", "queue"]
SENTIMENTS = {w: i + 1 for i, w in enumerate(WORDS)}
"""Our own word list for network_wordjoinsentiments (it reads data/streaming/AFINN-111.txt from its directory)."""

SETTINGS: dict[str, dict[str, object]] = {
    # Each batch prints three lines (even an empty one): compared on the distinct lines, not per batch.
    "recoverable_network_wordcount.py": {"args": "{socket_host} {socket_port} {checkpoint} OUTPUT/out.txt",
                                         "mode": "final"},
    # Each batch prints its header, even an empty one; its top 5 by a sentiment of our own word list.
    "network_wordjoinsentiments.py": {"args": "{socket_host} {socket_port}", "mode": "final", "batch_records": 300},
    # It stops itself after 6 s: the draft's queue files are written at once (not paced per batch, as --mode
    # batches would), and every batch's rows are compared as one multiset.
    "queue_stream.py": {"capture": "numbers", "input_kind": "queue,files", "batch_records": 1000, "mode": "all"},
}


def write_capture(path: Path, values: list[str]) -> Path:
    """A capture of one partition holding ``values`` (as ``dmk capture`` writes it)."""
    n = len(values)
    _write(path, "jsonl", {"partition": [0] * n, "offset": list(range(n)),
                           "timestamp_ms": [1_700_000_000_000 + i for i in range(n)],
                           "timestamp_type": ["CreateTime"] * n, "key": [None] * n,
                           "value": [v.encode() for v in values], "headers": [[] for _ in values]})
    _manifest_path(path).write_text(json.dumps({"format": CAPTURE_FORMAT, "sha256": _sha256(path)}))
    return path


def _inferred(source: str) -> dict[str, object]:
    calls = {n.func.attr for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    settings: dict[str, object] = {"mode": "final" if "updateStateByKey" in calls else "batches"}
    if "createStream" in calls:  # a ZooKeeper quorum: compare-jobs runs one, the run's brokers registered in it
        settings["args"] = "{zookeeper} {topic}"
    elif "createDirectStream" in calls:
        settings["args"] = "{bootstrap} {topic}"
    elif "socketTextStream" in calls:
        settings["args"] = "{socket_host} {socket_port}"
    elif "textFileStream" in calls:
        settings["args"] = "{input_dir}"
    elif "queueStream" in calls:
        settings.update(capture="numbers", input_kind="queue,files", batch_records=1000, mode="all")
    return settings


def verify_job(job: Path, out: Path, captures: dict[str, Path], timeout: float) -> dict[str, object]:
    """Run ``dmk migrate JOB --verify``; the row of the table."""
    source = job.read_text(encoding="utf-8")
    settings = {**_inferred(source), **SETTINGS.get(job.name, {})}
    made = make_draft(analyse(job))
    run = out / job.stem
    cwd = run / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "OUTPUT").mkdir(exist_ok=True)
    data = cwd / "data" / "streaming"
    data.mkdir(parents=True, exist_ok=True)
    (data / "AFINN-111.txt").write_text("".join(f"{w}\t{s}\n" for w, s in SENTIMENTS.items()), encoding="utf-8")
    capture = captures[str(settings.get("capture", "words"))]
    command = [sys.executable, "-m", "compare.cli", "migrate", str(job), "--verify", "--input", str(capture),
               "--key", "_1", "--batch-records", str(settings.get("batch_records", 100)),
               "--verify-out", str(run / "verify"), "--out", str(run / "draft.py"), "--timeout", str(timeout)]
    if settings.get("args"):
        command += ["--args", str(settings["args"])]
    if settings.get("mode"):
        command += ["--mode", str(settings["mode"])]
    if settings.get("input_kind"):
        command += ["--input-kind", str(settings["input_kind"])]
    started = time.monotonic()
    with open(run / "migrate.log", "w", encoding="utf-8") as log:
        code = subprocess.run(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)}).returncode
    lines = (run / "migrate.log").read_text(encoding="utf-8").splitlines()
    verdict = next((line for line in reversed(lines) if line.startswith(("PROVEN EQUAL", "DIFFERS", "CANNOT"))),
                   lines[-1] if lines else f"exit {code}")
    return {"job": job.name, "draft": "lifted" if made.lifted else "runtime", "runs": made.runs,
            "verdict": verdict, "exit": code, "mode": settings.get("mode", "batches"),
            "seconds": round(time.monotonic() - started), "command": shlex.join(["dmk", *command[3:]])}


def main(argv: list[str] | None = None) -> int:
    """Verify each job; print the table; exit 0 when every job was proven equal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", required=True, type=Path, help="a directory of DStream jobs (*.py)")
    parser.add_argument("--only", help="comma-separated job names (file names without .py)")
    parser.add_argument("--out", type=Path, default=Path("runs/migrate-verify"), help="run directory")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound on each wait, seconds")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    captures = {
        "words": write_capture(out / "words.jsonl",
                               [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(300)]),
        "numbers": write_capture(out / "numbers.jsonl", [str(j) for _ in range(5) for j in range(1, 1001)]),
    }
    only = set(args.only.split(",")) if args.only else None
    jobs = [p for p in sorted(args.jobs.glob("*.py")) if only is None or p.stem in only]
    print(f"<!-- {time.strftime('%Y-%m-%d %H:%M')} UTC, {len(jobs)} jobs from {args.jobs} -->")
    print("| job | draft | verdict | mode | seconds |")
    print("|---|---|---|---|---:|")
    rows = []
    for job in jobs:
        row = verify_job(job, out, captures, args.timeout)
        rows.append(row)
        print(f"| {row['job']} | {row['draft']} | {str(row['verdict']).replace('|', '/')} | {row['mode']} | "
              f"{row['seconds']} |", flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    proven = sum(str(r["verdict"]).startswith("PROVEN EQUAL") for r in rows)
    print(f"\n{proven} of {len(rows)} proven equal; commands in {out / 'results.json'}")
    return 0 if proven == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
