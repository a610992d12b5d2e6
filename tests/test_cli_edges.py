"""Every dmk command with a malformed value for each of its options: one line, exit 2, nothing started.

The sweep runs :func:`compare.cli.main` in-process. Starting a broker, connecting to Kafka, a Spark session or
context, a driver, a job or a cluster fails the test: each refusal must come before any of them (a bad input
costs no broker start-up, and leaves no process behind). A few subprocess runs check the same of the installed
``dmk`` (the exit code and stderr a shell sees).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compare.cli import main

# (argv, what the one line must name). Placeholders: {tmp} a fresh directory, {data} a dataset file (dmk gen),
# {file} a regular file that is no dataset, capture, database or directory, {missing} a path that does not exist.
DATA = "--dataset {data}"
SWEEP: list[tuple[str, str]] = [
    # demo
    ("demo --records x", "--records"),
    ("demo --records 0", "--records"),
    ("demo --seed x", "--seed"),
    ("demo --profile dirty", "--profile"),
    ("demo --partitions 0", "--partitions"),
    ("demo --workloads no_such_workload", "no_such_workload"),
    ("demo --out {file}", "--out"),
    ("demo --master nonsense", "--master"),
    ("demo --bootstrap-servers 127.0.0.1:notaport", "--bootstrap-servers"),
    ("demo --kafka-config {missing}", "missing"),
    ("demo --kafka-option novalue", "--kafka-option"),
    # broker start
    ("broker start --port x", "--port"),
    ("broker start --port 0", "--port"),
    ("broker start --port 70000", "--port"),
    ("broker start --log {file}/x/broker.log", "--log"),
    ("broker stop", "stop"),
    # gen
    ("gen --out {tmp}/x.parquet", "--records"),
    ("gen --records x --out {tmp}/x.parquet", "--records"),
    ("gen --records 0 --out {tmp}/x.parquet", "--records"),
    ("gen --records -5 --out {tmp}/x.parquet", "--records"),
    ("gen --records 10 --seed 1.5 --out {tmp}/x.parquet", "--seed"),
    ("gen --records 10 --profile dirty --out {tmp}/x.parquet", "--profile"),
    ("gen --records 10 --out {tmp}/x.csv", ".csv"),
    ("gen --records 10 --out {file}/x.parquet", "--out"),
    ("gen --records 10 --out {tmp}", "--out"),
    ("gen --records 10 --out {tmp}/x.parquet --partitions 0", "partitions"),
    ("gen --records 10 --out {tmp}/x.parquet --keys 0", "keys"),
    ("gen --records 10 --out {tmp}/x.parquet --key-skew steep", "key_skew"),
    ("gen --records 10 --out {tmp}/x.parquet --zipf-exponent 0", "zipf_exponent"),
    ("gen --records 10 --out {tmp}/x.parquet --users 0", "users"),
    ("gen --records 10 --out {tmp}/x.parquet --session-gap-ms 0", "session_gap_ms"),
    ("gen --records 10 --out {tmp}/x.parquet --events-per-second 0", "events_per_second"),
    ("gen --records 10 --out {tmp}/x.parquet --ads 0", "ads"),
    ("gen --records 10 --out {tmp}/x.parquet --campaigns 0", "campaigns"),
    ("gen --records 10 --out {tmp}/x.parquet --late-fraction 2", "late_fraction"),
    ("gen --records 10 --out {tmp}/x.parquet --too-late-fraction -1", "too_late_fraction"),
    ("gen --records 10 --out {tmp}/x.parquet --allowed-lateness-ms 0", "allowed_lateness_ms"),
    ("gen --records 10 --out {tmp}/x.parquet --lateness-margin-ms -1", "lateness_margin_ms"),
    ("gen --records 10 --out {tmp}/x.parquet --duplicate-fraction 1.5", "duplicate_fraction"),
    ("gen --records 10 --out {tmp}/x.parquet --malformed-fraction x", "--malformed-fraction"),
    # capture
    ("capture t --out {tmp}/c.jsonl --partitions x,y", "--partitions"),
    ("capture t --out {tmp}/c.jsonl --partitions ,", "--partitions"),
    ("capture t --out {tmp}/c.jsonl --from yesterday", "yesterday"),
    ("capture t --out {tmp}/c.jsonl --until -3", "-3"),
    ("capture t --out {tmp}/c.jsonl --max-records 0", "--max-records"),
    ("capture t --out {tmp}/c.csv", ".csv"),
    ("capture t --out {file}/c.jsonl", "--out"),
    ("capture t --out {tmp}/c.jsonl --bootstrap-servers 'not a host::x'", "--bootstrap-servers"),
    # replay
    ("replay {missing} --topic t", "does not exist"),
    ("replay {file} --topic t", "file"),
    ("replay {data}", "--topic"),
    ("replay {data} --topic t --partitions 0", "--partitions"),
    ("replay {data} --topic t --rate 0", "--rate"),
    ("replay {data} --topic t --rate x", "--rate"),
    ("replay {data} --topic t --speed 0", "--speed"),
    ("replay {data} --topic t --speed 2", "--speed"),
    ("replay {data} --topic t --timestamps wall", "--timestamps"),
    ("replay {data} --topic t --partition-by hash", "--partition-by"),
    ("replay {data} --topic t --log {file}/log.parquet", "--log"),
    ("replay {data} --topic t --bootstrap-servers 127.0.0.1:", "--bootstrap-servers"),
    # offsets
    ("offsets", "topic"),
    ("offsets t --bootstrap-servers 127.0.0.1:notaport", "--bootstrap-servers"),
    ("offsets t --bootstrap-servers host:0", "--bootstrap-servers"),
    # compare
    ("compare no_such_workload " + DATA, "no_such_workload"),
    ("compare running_counts --dataset {missing}", "--dataset"),
    ("compare running_counts --dataset {file}", "file"),
    ("compare running_counts --records 0", "--records"),
    ("compare running_counts --seed x", "--seed"),
    ("compare running_counts --profile dirty", "--profile"),
    ("compare running_counts --partitions 0 " + DATA, "--partitions"),
    ("compare running_counts --partitions 0", "--partitions"),
    ("compare running_counts --events-per-second 0", "events_per_second"),
    ("compare running_counts --users 0", "users"),
    ("compare running_counts --lateness-margin-ms -1", "lateness_margin_ms"),
    ("compare running_counts --out {file} " + DATA, "--out"),
    ("compare running_counts --out {file}/run " + DATA, "--out"),
    ("compare running_counts --rate 0 " + DATA, "--rate"),
    ("compare running_counts --legacy-mode direct-redis " + DATA, "direct-redis"),
    ("compare running_counts --legacy-mode direct-zookeeper " + DATA, "--offset-store"),
    ("compare running_counts --offset-store x " + DATA, "--offset-store"),
    ("compare running_counts --batch-seconds 0 " + DATA, "--batch-seconds"),
    ("compare running_counts --kill-driver -1 " + DATA, "--kill-driver"),
    ("compare running_counts --kill-driver 1 --burst " + DATA, "--rate"),
    ("compare running_counts --pause-broker -1 " + DATA, "--pause-broker"),
    ("compare running_counts --legacy no_such_module:build " + DATA, "no_such_module"),
    ("compare running_counts --modern no_such_variant " + DATA, "no_such_variant"),
    ("compare running_counts --oracle no_such_module:oracle " + DATA, "no_such_module"),
    ("compare running_counts --timeout 0 " + DATA, "--timeout"),
    ("compare running_counts --master nonsense " + DATA, "--master"),
    ("compare running_counts --connect http://x " + DATA, "http://x"),
    ("compare running_counts --broker-port 70000 " + DATA, "--broker-port"),
    ("compare running_counts --bootstrap-servers 127.0.0.1:notaport " + DATA, "--bootstrap-servers"),
    ("compare running_counts --kafka-option bootstrap.servers=h:1 " + DATA, "bootstrap.servers"),
    # compare-jobs
    ("compare-jobs --input {missing} --key k --legacy {legacy} --modern {modern}", "missing"),
    ("compare-jobs --input {file} --key k --legacy {legacy} --modern {modern}", "file"),
    ("compare-jobs --input {data} --key , --legacy {legacy} --modern {modern}", "--key"),
    ("compare-jobs --input {data} --key k --legacy \"python 'job.py\" --modern {modern}", "--legacy"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern 'python \"job.py'", "--modern"),
    ("compare-jobs --input {data} --key k --legacy '' --modern {modern}", "--legacy"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --mode some", "--mode"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --output kafka", "kafka"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --out {file}", "--out"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --partitions 0", "--partitions"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --rate 0", "--rate"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --speed -1", "--speed"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --settle-batches -1", "--settle-batches"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --timeout 0", "--timeout"),
    ("compare-jobs --input {data} --key k --legacy {legacy} --modern {modern} --bootstrap-servers :1", "--bootstrap"),
    # migrate --verify
    ("migrate {file} --verify --input {data} --key _1 --settle-batches -1", "--settle-batches"),
    ("migrate {file} --verify --input {data} --key _1 --batch-records 0", "--batch-records"),
    # report
    ("report {missing}", "missing"),
    ("report {file}", "file"),
    ("report {tmp} --baseline {missing}", ""),
    # checkpoint inspect
    ("checkpoint inspect {missing}", "not a directory"),
    ("checkpoint inspect {file}", "not a directory"),
    ("checkpoint inspect {tmp}", "neither"),
    ("checkpoint inspect {tmp} --master nonsense", "--master"),
    ("checkpoint look {tmp}", "look"),
    # cutover
    ("cutover redis x", "redis"),
    ("cutover sqlite {file} --consumer c --topic t", "not a SQLite database"),
    ("cutover sqlite {missing} --consumer c --topic t", "does not exist"),
    ("cutover checkpoint {missing}", "missing"),
    ("cutover checkpoint {tmp} --seed-state {tmp}/s.parquet", "--workload"),
    ("cutover checkpoint {tmp} --seed-state {tmp}/s.parquet --workload no_such_workload", "no_such_workload"),
    ("cutover checkpoint {tmp} --master nonsense", "--master"),
    ("cutover kafka group --topic t --bootstrap-servers 'not a host::x'", "--bootstrap-servers"),
    ("cutover kafka group --topic t", "--bootstrap-servers"),
    # bench
    ("bench --records x", "--records"),
    ("bench --records 0", "--records"),
    ("bench --partitions 0", "--partitions"),
    ("bench --latency-seconds 0", "--latency-seconds"),
    ("bench --latency-rate 0", "--latency-rate"),
    ("bench --state-keys 1", "--state-keys"),
    ("bench --workloads no_such_workload", "no_such_workload"),
    ("bench --out {file}", "--out"),
    ("bench --readme {missing}", "--readme"),
    ("bench --from-results {missing} --readme {file}", "missing"),
    ("bench --from-results {file}", "--readme"),
    ("bench --timeout 0", "--timeout"),
    ("bench --master nonsense", "--master"),
    ("bench --bootstrap-servers 127.0.0.1:notaport", "--bootstrap-servers"),
    # cluster
    ("cluster start --workers 0 --dir {tmp}/c", "--workers"),
    ("cluster start --cores 0 --dir {tmp}/c", "--cores"),
    ("cluster start --memory lots --dir {tmp}/c", "--memory"),
    ("cluster start --dir {file}", "--dir"),
    ("cluster stop --dir {file}", "--dir"),
    ("cluster status --dir {file}", "--dir"),
    ("cluster restart", "restart"),
    # no command, unknown command
    ("", "COMMAND"),
    ("frobnicate", "frobnicate"),
]

# Environment variables dmk reads, each malformed, with a command that reads it.
ENV_SWEEP: list[tuple[str, str, str, str]] = [
    ("DMK_BOOTSTRAP_SERVERS", "not a host::x", "offsets t", "$DMK_BOOTSTRAP_SERVERS"),
    ("DMK_BOOTSTRAP_SERVERS", "127.0.0.1:notaport", "capture t --out {tmp}/c.jsonl", "$DMK_BOOTSTRAP_SERVERS"),
    ("DMK_BOOTSTRAP_SERVERS", "127.0.0.1:notaport", "compare running_counts " + DATA, "$DMK_BOOTSTRAP_SERVERS"),
    ("DMK_KAFKA_CONFIG", "{missing}", "offsets t", "missing"),
    ("DMK_KAFKA_CONFIG", "{tmp}", "offsets t", "{tmp}"),
    ("DMK_SPARK_MASTER", "nonsense", "compare running_counts " + DATA, "$DMK_SPARK_MASTER"),
    ("DMK_KAFKA_CLIENT", "librdkafka", "offsets t --bootstrap-servers 127.0.0.1:9", "librdkafka"),
    ("DMK_CLUSTER_DIR", "{file}", "cluster status", "{file}"),
]


class _Started(AssertionError):
    """Something started before the command line was checked."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A dataset file and a plain text file, shared by the module's tests."""
    base = tmp_path_factory.mktemp("files")
    data = base / "d.parquet"
    assert main(["gen", "--records", "100", "--out", str(data)]) == 0
    (base / "plain.txt").write_text("neither a dataset, a capture, a database nor a directory\n")
    job = "'python job.py {bootstrap} {topic} {output_topic} {checkpoint}'"
    return {"data": str(data), "file": str(base / "plain.txt"), "legacy": job, "modern": job}


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """No broker, Kafka connection, Spark, driver, job or cluster may start; returns the placeholders."""
    import compare.jobs
    import compare.supervise
    import kit.broker
    import kit.cluster
    import kit.kafka
    import kit.spark

    def refuse(what: str):
        def started(*args: object, **kwargs: object) -> None:
            raise _Started(f"{what} started before the command line was refused")
        return started

    for target, name in [
        (kit.broker.EmbeddedBroker, "start"), (kit.broker, "wait_for_broker"), (kit.kafka, "wait_for_broker"),
        (kit.kafka.Kafka, "__init__"), (kit.spark, "spark_session"), (kit.spark, "spark_context"),
        (compare.supervise.DriverProcess, "start"), (compare.jobs.ScriptEngine, "start"),
        (kit.cluster.LocalCluster, "start"), (kit.cluster.LocalCluster, "stop"), (kit.cluster.LocalCluster, "status"),
    ]:
        monkeypatch.setattr(target, name, refuse(f"{getattr(target, '__name__', target)}.{name}"))
    for variable in ("DMK_BOOTSTRAP_SERVERS", "DMK_KAFKA_CONFIG", "DMK_SPARK_MASTER", "DMK_KAFKA_CLIENT",
                     "DMK_CLUSTER_DIR"):
        monkeypatch.delenv(variable, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {**files, "tmp": str(scratch), "missing": str(tmp_path / "missing")}


def _argv(template: str, places: dict[str, str]) -> list[str]:
    import shlex

    return shlex.split(template.format(**places)) if template else []


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run dmk in-process: assert exit code 2 and one line on stderr, nothing on stdout; return the line."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, f"dmk {' '.join(argv)}: exit {code}, stderr {captured.err!r}"
    assert "Traceback" not in captured.err
    assert len(lines) == 1, f"dmk {' '.join(argv)}: {len(lines)} lines: {captured.err!r}"
    assert "error" in lines[0]
    assert captured.out == ""
    return lines[0]


@pytest.mark.parametrize(("template", "named"), SWEEP, ids=[t or "(nothing)" for t, _ in SWEEP])
def test_a_malformed_option_is_one_line_and_exit_2_before_anything_starts(
    template: str, named: str, nothing_starts: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(_argv(template, nothing_starts), capsys)
    assert named.format(**nothing_starts) in line


@pytest.mark.parametrize(("variable", "value", "template", "named"), ENV_SWEEP,
                         ids=[f"{v}={x}" for v, x, _, _ in ENV_SWEEP])
def test_a_malformed_environment_variable_is_one_line_and_exit_2(
    variable: str, value: str, template: str, named: str, nothing_starts: dict[str, str],
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value.format(**nothing_starts))
    line = _refused(_argv(template, nothing_starts), capsys)
    assert named.format(**nothing_starts) in line


def test_compare_with_a_dataset_keeps_the_partitions_given(nothing_starts: dict[str, str]) -> None:
    """``--dataset FILE --partitions 0`` once became 4: 0 is refused above, and any other count is kept."""
    from compare.cli import build_parser
    from compare.cli.runs import _settings_from_args

    args = build_parser().parse_args(["compare", "running_counts", "--dataset", nothing_starts["data"],
                                      "--partitions", "3"])
    args.kafka_security = {}
    assert _settings_from_args(args).partitions == 3
    args.partitions = None
    assert _settings_from_args(args).partitions == 4


def test_a_compare_that_failed_before_its_drivers_can_run_again_in_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kit.broker
    from kit.errors import BrokerUnavailable

    def unavailable(servers: str, **kwargs: object) -> None:
        raise BrokerUnavailable(servers, "nothing answered within 0 s")

    monkeypatch.setattr(kit.broker, "wait_for_broker", unavailable)
    out = tmp_path / "run"
    argv = ["compare", "running_counts", "--records", "2000", "--profile", "clean", "--out", str(out), "--bootstrap-servers", "127.0.0.1:9"]
    assert main(argv) == 2
    assert "no Kafka broker answered" in capsys.readouterr().err
    assert not out.exists()  # the generated dataset went with the failed run: nothing of it is evidence
    assert main(argv) == 2
    assert "not empty" not in capsys.readouterr().err
    # A run directory holding a driver's files is kept: the error points at its logs.
    (out / "legacy").mkdir(parents=True)
    (out / "legacy" / "driver.log").write_text("a failed driver's log\n")
    assert main(argv) == 2
    assert "not empty" in capsys.readouterr().err and (out / "legacy" / "driver.log").exists()


@pytest.mark.parametrize(("argv", "env", "named"), [
    (["offsets", "t"], {"DMK_BOOTSTRAP_SERVERS": "not a host::x"}, "$DMK_BOOTSTRAP_SERVERS"),
    (["capture", "t", "--out", "c.jsonl", "--partitions", "x,y"], {}, "--partitions"),
    (["gen", "--records", "x", "--out", "x.parquet"], {}, "--records"),
])
def test_the_installed_dmk_prints_one_line_and_exits_2(
    argv: list[str], env: dict[str, str], named: str, tmp_path: Path
) -> None:
    dmk = Path(sys.executable).with_name("dmk")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DMK_")}
    run = subprocess.run([str(dmk), *argv], capture_output=True, text=True, cwd=tmp_path, env={**environ, **env},
                         timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and named in run.stderr, run.stderr
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == "[]"  # nothing written


def test_an_unreachable_zookeeper_is_one_error_without_kazoo_lines() -> None:
    # In a process of its own: pytest's log capture would hide what kazoo prints to a user's console.
    code = (
        "from legacy.offsets import ZooKeeperOffsetStore\n"
        "try:\n"
        "    ZooKeeperOffsetStore('nohost.invalid:2181', timeout_s=2)\n"
        "except Exception as err:\n"
        "    print(err)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert "Cannot resolve" not in run.stderr, run.stderr  # kazoo printed one line per attempt
    assert "no server answered within 2 s (kazoo: Cannot resolve nohost.invalid" in run.stdout, run.stdout
