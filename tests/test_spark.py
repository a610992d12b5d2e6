"""Spark factories: the right Python in workers, a working DStream context, master resolution."""

from __future__ import annotations

import sys
import time
import warnings

import pytest

from kit.errors import ConfigError
from kit.spark import DEFAULT_MASTER, MASTER_ENV, kit_settings, resolve_master, streaming_context

pytestmark = pytest.mark.spark


def test_python_workers_run_this_interpreter(spark) -> None:
    executables = (
        spark.sparkContext.parallelize(range(4), 2).map(lambda _: __import__("sys").executable).distinct().collect()
    )
    assert executables == [sys.executable]
    # Forked from kit._worker_daemon, which imported pandas before forking.
    preloaded = spark.sparkContext.parallelize(range(2), 2).map(lambda _: "pandas" in __import__("sys").modules).collect()
    assert preloaded == [True, True]
    # ... and had written a dead-letter file's bytes once (kit._worker_daemon.warm): what that loads is there too.
    warmed = spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: "pyarrow.pandas_compat" in __import__("sys").modules).collect()
    assert warmed == [True, True]
    assert spark.sparkContext.master == resolve_master()
    # One state/shuffle partition per core on a local master, as many as tasks of a DStream batch.
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(spark.sparkContext.defaultParallelism) == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_python_workers_import_the_installed_pyspark_not_spark_s_zips(spark) -> None:
    """Spark puts the installed PySpark's own pyspark.zip, py4j's zip and the spark-core jar first on its workers'
    path; kit._worker_daemon takes them off, so workers import the same modules from the installation (with
    bytecode) and ``importlib.invalidate_caches()`` (PySpark's worker calls it on a forked worker's first task)
    re-reads no archive."""
    import pyspark

    def where(_: object) -> list[tuple[str, list[str]]]:
        import sys as worker_sys

        archives = [p for p in worker_sys.path if p.endswith((".zip", ".jar")) and "pyspark" in p]
        return [(worker_sys.modules["pyspark"].__file__, archives)]

    seen = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    assert seen == [(pyspark.__file__, []), (pyspark.__file__, [])]


def test_only_archives_of_the_installed_pyspark_leave_the_path(tmp_path) -> None:
    import zipfile

    from kit._worker_daemon import prefer_installed_pyspark

    site = tmp_path / "site"
    lib, jars = site / "pyspark" / "python" / "lib", site / "pyspark" / "jars"
    lib.mkdir(parents=True)
    jars.mkdir()
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "py4j").mkdir()
    (site / "py4j" / "version.py").write_text("__version__ = '0.10.9.9'\n")
    archives = {}
    for name, where_, inside in (
        ("pyspark.zip", lib, "pyspark/__init__.py"), ("py4j-0.10.9.9-src.zip", lib, "py4j/__init__.py"),
        ("py4j-0.10.9.7-src.zip", lib, "py4j/__init__.py"), ("spark-core.jar", jars, "org/A.class"),
        ("with-python.jar", jars, "mod.py"),
    ):
        with zipfile.ZipFile(where_ / name, "w") as archive:
            archive.writestr(inside, "")
        archives[name] = str(where_ / name)
    distribution = tmp_path / "spark-4.3.0-bin" / "python" / "lib"
    distribution.mkdir(parents=True)
    with zipfile.ZipFile(distribution / "pyspark.zip", "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
    path = ["/app", *archives.values(), str(distribution / "pyspark.zip"), str(site)]

    kept = prefer_installed_pyspark(path)

    assert kept == ["/app", archives["py4j-0.10.9.7-src.zip"], archives["with-python.jar"],
                    str(distribution / "pyspark.zip"), str(site)]
    # Without the installation on the path, nothing goes.
    assert prefer_installed_pyspark(path[:-1]) == path[:-1]


def test_dataframes_work(spark) -> None:
    frame = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "n int, k string")
    assert sorted(map(tuple, frame.groupBy("k").count().collect())) == [("a", 2), ("b", 1)]


def test_a_deep_rdd_chain_runs(spark) -> None:
    """A backlogged DStream job's state RDDs form a chain back to the last checkpoint it wrote, and a task
    deserializes its chain recursively: with the JVM's default 1 MB stacks 100 levels failed with
    StackOverflowError (kit.spark's -Xss16m)."""
    sc = spark.sparkContext
    chain = sc.parallelize([0], 1)
    for level in range(1, 300):
        chain = chain.union(sc.parallelize([level], 1)).coalesce(1)
    assert sorted(chain.collect()) == list(range(300))


def test_the_local_file_system_writes_no_checksum_files(spark, tmp_path) -> None:
    """A streaming query's checkpoint and a file sink's output on a local master: every file there, no `.crc`
    beside any (kit.spark turns checksum writes off: a micro-batch's offset and commit logs wrote two files each),
    and the data reads back whole, through the same file system."""
    source, sink, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    spark.createDataFrame([(n, f"k{n % 3}") for n in range(30)], "n int, k string").write.parquet(str(source))
    query = (
        spark.readStream.schema("n int, k string").parquet(str(source))
        .writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert {"checkpoint/offsets/0", "checkpoint/commits/0", "checkpoint/metadata", "out/_spark_metadata/0"} <= written
    assert [name for name in written if name.endswith(".crc")] == []
    assert sorted(spark.read.parquet(str(sink)).collect()) == sorted(spark.read.parquet(str(source)).collect())


def test_a_short_run_jvm_has_the_first_jit_tier_and_a_full_size_code_cache(spark) -> None:
    # With C1 only HotSpot reserves 48 MB of code cache, which Spark filled in a minute; the sweeper's flush and
    # the recompiling stalled batches (changes.md §35). The session's JVM must really run with 240 MB.
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert bean.getVMOption("TieredStopAtLevel").getValue() == "1"
    assert int(bean.getVMOption("ReservedCodeCacheSize").getValue()) == 240 * 1024 * 1024


def test_streaming_context_runs_batches_without_the_deprecation_warning(spark) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ssc = streaming_context(0.2)
    assert not [w for w in caught if "DStream is deprecated" in str(w.message)]
    batches: list[list[int]] = []
    queue = [spark.sparkContext.parallelize([1, 2, 3]), spark.sparkContext.parallelize([4])]
    ssc.queueStream(queue, oneAtATime=True).map(lambda x: x * 10).foreachRDD(
        lambda rdd: batches.append(sorted(rdd.collect()))
    )
    ssc.start()
    try:
        deadline = time.monotonic() + 60
        while len(batches) < 2:
            assert time.monotonic() < deadline, f"only {batches} after 60 s"
            time.sleep(0.05)
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert batches[:2] == [[10, 20, 30], [40]]
    assert spark.sparkContext._jsc is not None  # the shared SparkContext survives the stop


def test_master_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASTER_ENV, raising=False)
    assert resolve_master() == DEFAULT_MASTER == "local[2]"
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master() == "spark://127.0.0.1:7077"
    assert resolve_master("local[1]") == "local[1]"
    settings = kit_settings("spark://127.0.0.1:7077", {"spark.sql.shuffle.partitions": 8})
    assert settings["spark.master"] == "spark://127.0.0.1:7077"
    assert settings["spark.sql.shuffle.partitions"] == "8"
    # Masters on this machine (local, or a cluster on loopback) are pinned to loopback; others are not.
    assert settings["spark.driver.host"] == "127.0.0.1" == kit_settings("local[2]")["spark.driver.host"]
    assert "spark.driver.host" not in kit_settings("spark://10.1.2.3:7077")
    # One task per core on local masters; a cluster keeps Spark's default (its total cores).
    assert kit_settings("local[2]")["spark.default.parallelism"] == "2"
    assert kit_settings("local[3,2]")["spark.default.parallelism"] == "3"
    assert "spark.default.parallelism" not in settings
    # Workers fork from the daemon with the kit imported on local masters; a cluster runs the kit it is shipped.
    assert kit_settings("local[2]")["spark.python.daemon.module"] == "kit._worker_daemon"
    assert "spark.python.daemon.module" not in settings
    assert kit_settings()["spark.master"] == "spark://127.0.0.1:7077"  # from the environment


def test_batch_seconds_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="batch_seconds"):
        streaming_context(0)


def test_a_worker_whose_socket_the_jvm_closed_ends_quietly() -> None:
    """A task the JVM stops wanting (a StreamingContext stopped mid-batch) closes the worker's socket; PySpark's
    daemon printed the flush's BrokenPipeError traceback to the terminal (in 2 of 3 runs of a queueStream
    job stopped mid-batch here, 28 times in a ``dmk bench``). kit._worker_daemon ends such a worker quietly, not reused."""
    from kit._worker_daemon import _quiet_on_a_closed_socket

    def closed(sock: object, authenticated: bool) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def failing(sock: object, authenticated: bool) -> int:
        raise ValueError("a real failure")

    assert _quiet_on_a_closed_socket(closed)(None, True) == 1  # type: ignore[arg-type]
    assert _quiet_on_a_closed_socket(lambda sock, authenticated: 0)(None, False) == 0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a real failure"):
        _quiet_on_a_closed_socket(failing)(None, True)  # type: ignore[arg-type]
