"""lakesdk on Spark Connect.

The tests that take the ``spark`` fixture run on the session of the test run: a classic
local session, or with ``LAKESDK_TEST_SPARK=connect`` a Spark Connect session on a local
server that pyspark starts in the test process (``get_spark(remote="local[2]")``), and
then only they run.  The suite runs them on Connect too: :func:`test_the_connect_set` runs
pytest in a child process in that mode, over this module and :data:`CONNECT_MODULES`.  One process holds one kind of session: creating a Connect session switches
pyspark's whole process to Connect (``pyspark.sql.utils.is_remote()``), and a local Connect
server cannot start beside a running SparkContext.

:func:`test_writes_and_reads_over_a_connect_url` talks to a Connect server of its own process
(``spark-submit``), from a client process that starts no JVM.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.engine.session import is_connect

from ..helpers import CLASSIC_ONLY, ON_CONNECT, free_port

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

#: the modules whose Spark tests (those on the ``spark`` session) the child run repeats on
#: Connect, with this one's: every module that has such tests (docs/spark.md, "Spark Connect").
#: Three modules marked ``spark`` have no test on the session, so on Connect none would run:
#: tests/spark/test_finalize.py (a driver of its own whose tasks fail and are retried),
#: tests/spark/test_session_logging.py (a driver's logging from its start, in a process of its
#: own) and tests/concurrency/test_optimistic.py (writers on the local engine).
CONNECT_MODULES = [
    # writes of both table types, merges and the merge modes
    "tests/write/test_writes.py", "tests/write/test_merge.py", "tests/write/test_input.py",
    "tests/write/test_counts.py", "tests/write/test_is_deleted.py", "tests/write/test_record_keys.py",
    "tests/write/test_merge_local.py", "tests/write/test_cdc_write.py", "tests/write/test_duplicate_keys.py",
    "tests/merge/test_partial_update.py", "tests/merge/test_payloads.py", "tests/merge/test_custom_merger.py",
    "tests/merge/test_ordering.py", "tests/merge/test_float_ordering.py",
    # reads, the lakesdk data source, other readers
    "tests/read/test_read_api.py", "tests/read/test_mor.py", "tests/read/test_predicates.py",
    "tests/read/test_partition_values.py", "tests/read/test_engine_seam.py", "tests/spark/test_data_source.py",
    "tests/interop/test_hudi_reader.py", "tests/interop/test_lance.py", "tests/interop/test_conformance.py",
    # services, indexes, the metadata table, concurrency
    "tests/services/test_clustering.py", "tests/services/test_check.py", "tests/services/test_clean.py",
    "tests/services/test_archival.py", "tests/services/test_savepoint.py", "tests/services/test_services_cases.py",
    "tests/services/test_crash.py", "tests/services/test_damaged_tables.py", "tests/services/test_service_races.py",
    "tests/index/test_global_index.py", "tests/index/test_bloom.py", "tests/index/test_record_index.py",
    "tests/index/test_bloom_option.py", "tests/spark/test_file_group_tasks.py",
    "tests/metadata_table/test_column_stats.py", "tests/metadata_table/test_never_stale.py",
    "tests/concurrency/test_transaction.py", "tests/concurrency/test_early_conflict.py",
    # the API, the command line, the widgets
    "tests/api/test_trust_acceptance.py", "tests/api/test_cli.py", "tests/widgets/test_widget_data.py",
]


def _rows(df) -> list[tuple]:
    return sorted((r["id"], r["city"], r["fare"]) for r in df.collect())


def test_the_session_is_the_kind_asked_for(spark):
    assert is_connect(spark) == ON_CONNECT


def test_the_workers_run_this_interpreter(spark):
    """Spark's Python workers run the interpreter of this process (lakesdk sets
    ``PYSPARK_PYTHON`` for a session it starts; the child run on Connect unsets it first)."""
    import pyarrow as pa

    def where(batches):
        import sys as worker_sys
        for b in batches:
            yield pa.RecordBatch.from_pydict({"exe": [worker_sys.executable] * b.num_rows})
    got = {r["exe"] for r in spark.range(2).mapInArrow(where, "exe string").collect()}
    assert got == {sys.executable}


def test_spark_in_this_process_writes_pandas_data_with_the_local_engine(tmp_path, spark):
    """A local Connect server, which pyspark starts in this process, has its driver here as a
    local classic session does: on both, the default engine writes pandas data with the thread
    pool (a merge's clauses too), and a write's markers go to the timeline server, which the
    tasks of a Spark engine write reach."""
    from lakesdk.engine.session import connect_server_here, spark_is_local
    from lakesdk.markers import DirectWriteMarkers
    assert spark_is_local(spark) and connect_server_here(spark) == ON_CONNECT
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark)
    t = lake.create_table("here", key="id", ordering="ts")
    assert t.context.engine() == "local"
    assert not isinstance(t.context.markers("20240101000000000"), DirectWriteMarkers)
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    m = (t.merge(pd.DataFrame({"id": [2, 3], "ts": [2, 2], "v": ["B", "c"]})).when_matched_update_all()
         .when_not_matched_insert_all().execute())
    assert (m.engine, m.updated, m.inserted) == ("local", 1, 1)
    spark_lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    spark_lake.table("here").upsert(pd.DataFrame({"id": [3], "ts": [3], "v": ["C"]}))
    assert sorted(map(tuple, t.read().to_pandas()[["id", "v"]].values.tolist())) == [(1, "a"), (2, "B"), (3, "C")]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_writes_of_both_table_types(tmp_path, spark, table_type):
    """Every write of a Spark DataFrame (bulk insert, upsert, delete, merge) and of pandas
    data, then reads: the snapshot, time travel and Spark's read API."""
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("trips", key="id", partition_by="city", ordering="ts", table_type=table_type)
    sdf = spark.createDataFrame(pd.DataFrame({"id": ["a", "b", "c"], "city": ["x", "y", "x"], "ts": [1, 1, 1],
                                              "fare": [1.0, 2.0, 3.0]}))
    r1 = t.bulk_insert(sdf)
    r2 = t.upsert(spark.createDataFrame(pd.DataFrame({"id": ["a", "d"], "city": ["x", "y"], "ts": [2, 1],
                                                      "fare": [10.0, 4.0]})))
    r3 = t.upsert(pd.DataFrame({"id": ["c"], "city": ["x"], "ts": [2], "fare": [30.0]}))
    r4 = t.delete(spark.createDataFrame(pd.DataFrame({"id": ["b"], "city": ["y"], "ts": [5]})))
    src = spark.createDataFrame(pd.DataFrame({"id": ["d", "e"], "city": ["y", "x"], "ts": [3, 1], "fare": [40.0, 5.0]}))
    m = t.merge(src).when_matched_update_all().when_not_matched_insert_all().execute()
    assert [(r.inserted, r.updated, r.deleted) for r in (r1, r2, r3, r4)] == [(3, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 1)]
    assert (m.updated, m.inserted) == (1, 1)
    want = [("a", "x", 10.0), ("c", "x", 30.0), ("d", "y", 40.0), ("e", "x", 5.0)]
    assert _rows(t.read().to_spark()) == want
    assert sorted(t.read().to_pandas()[["id", "city", "fare"]].itertuples(index=False, name=None)) == want
    assert _rows(t.as_of(r1.instant).to_spark()) == [("a", "x", 1.0), ("b", "y", 2.0), ("c", "x", 3.0)]
    assert _rows(spark.read.format("lakesdk").load(t.path)) == want
    assert _rows(spark.read.format("lakesdk").option("as.of.instant", r2.instant).load(t.path)) == \
        [("a", "x", 10.0), ("b", "y", 2.0), ("c", "x", 3.0), ("d", "y", 4.0)]
    changed = (spark.read.format("lakesdk").option("hoodie.datasource.query.type", "incremental")
               .option("hoodie.datasource.read.begin.instanttime", r4.instant).load(t.path))
    assert _rows(changed) == _rows(t.incremental(r4.instant).to_spark()) == [("d", "y", 40.0), ("e", "x", 5.0)]


def test_merge_into_an_unpartitioned_table(tmp_path, spark):
    """A merge's source rows match stored ones by key alone (the partition path is a constant)."""
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("plain", key="id", ordering="ts", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1, 2, 3], "ts": [1, 1, 1], "v": ["a", "b", "c"]}))
    src = spark.createDataFrame(pd.DataFrame({"id": [2, 3, 4], "ts": [2, 2, 2], "v": ["B", "drop", "D"]}))
    m = (t.merge(src).when_matched_delete(where="s.v = 'drop'").when_matched_update_all()
         .when_not_matched_insert_all().execute())
    assert (m.updated, m.inserted, m.deleted) == (1, 1, 1)
    assert sorted(map(tuple, t.read().to_pandas()[["id", "v"]].values.tolist())) == [(1, "a"), (2, "B"), (4, "D")]


def test_compaction_and_clustering_on_the_spark_engine(tmp_path, spark):
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("svc", key="id", partition_by="p", ordering="ts", table_type="mor")
    for i in range(3):   # three base files in each partition, then log files over them
        t.bulk_insert(pd.DataFrame({"id": [f"{p}{i}" for p in "xy"], "p": list("xy"), "ts": [1, 1], "v": [i, -i]}))
    t.upsert(pd.DataFrame({"id": ["x0", "y1"], "p": ["x", "y"], "ts": [2, 2], "v": [100, 200]}))
    want = sorted(map(tuple, t.read().to_pandas()[["id", "v"]].values.tolist()))
    res = t.maintenance.compact()
    assert res is not None
    assert not any(s.log_files for s in t.read().plan().slices)
    clustered = t.maintenance.cluster(small_file_limit=1 << 20, sort_by="v")
    assert clustered is not None and clustered.new_file_groups == 2
    assert len(t.inspect.file_groups()) == 2
    assert sorted(map(tuple, t.read().to_pandas()[["id", "v"]].values.tolist())) == want


def test_a_write_sizes_its_shuffles(tmp_path, spark, monkeypatch, capsys):
    """A write's shuffles take two partitions per core, whatever the session's
    ``spark.sql.shuffle.partitions`` (Spark's default of 200 here): adaptive execution does not
    coalesce the plan of a DataFrame the write persists (a combine's window, for a batch where a
    key repeats; on Connect, a merge's join too)."""
    from lakesdk.engine.spark import SparkWriteJob, shuffle_partitions
    persisted: list[str] = []
    keep = SparkWriteJob._persist

    def spy(self, df):
        capsys.readouterr()
        df.explain()
        persisted.append(capsys.readouterr().out)
        keep(self, df)
    monkeypatch.setattr(SparkWriteJob, "_persist", spy)
    before = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    try:
        lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
        t = lake.create_table("sized", key="id", ordering="ts")
        # a key twice: the combine's shuffle (a batch of distinct keys skips it)
        t.upsert(spark.createDataFrame(pd.DataFrame({"id": [*range(50), 7], "ts": [1] * 50 + [2]})))
        src = spark.createDataFrame(pd.DataFrame({"id": range(40, 60), "ts": [2] * 20}))
        t.merge(src).when_matched_update_all().when_not_matched_insert_all().execute()
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
    assert t.read().to_pandas().shape[0] == 60
    sizes = [int(n) for p in persisted for n in re.findall(r"Exchange \w+partitioning\(.*?, (\d+)\), [A-Z_]+", p)]
    assert sizes and set(sizes) == {shuffle_partitions(spark)}, persisted


def test_a_process_started_from_a_connect_one_can_start_a_classic_session():
    """pyspark marks a process on Spark Connect in its environment, which the processes it
    starts inherit (a lakesdk command run from a notebook's shell): lakesdk drops the marks
    that no session of its own process set before it starts a classic session."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env.update({"SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_LOCAL_REMOTE": "1"})
    code = ("from pyspark.sql.utils import is_remote\n"
            "from lakesdk.engine.session import _forget_inherited_connect_mode\n"
            "before = is_remote()\n_forget_inherited_connect_mode()\nprint(before, is_remote())")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.stdout.split() == ["True", "False"], r.stdout + r.stderr


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # as the server binds: a port whose last connections wait out TIME_WAIT is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.skipif(ON_CONNECT, reason="this run is the one on Connect")
def test_the_connect_set(tmp_path):
    """The Spark tests of this module and of :data:`CONNECT_MODULES` pass on a Spark Connect
    session, with no ``PYSPARK_PYTHON`` set: lakesdk's session makes the server's workers run
    this interpreter.  Every one of them runs: none fails, and none is skipped but the tests
    that check what a classic session alone has (``helpers.classic_only``) and soaks."""
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
    if not _port_free(15002):   # a local Connect server listens on Spark's default port
        pytest.skip("port 15002 is taken (another Spark Connect server): the local server could not start")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE",
                        "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "LAKESDK_SPARK_REMOTE",
                        "LAKESDK_SPARK_MASTER", "PYTEST_ADDOPTS")}
    env["LAKESDK_TEST_SPARK"] = "connect"
    # functions of the test modules (a custom merger) reach the server's Python workers by reference:
    # those run in a directory of the Connect session's own, so the tests' package is put on their path
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    report = tmp_path / "connect.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", f"--junitxml={report}",
           f"--basetemp={tmp_path / 'tmp'}", "tests/spark/test_connect.py", *CONNECT_MODULES]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    took = time.perf_counter() - t0
    out = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, out
    suite = ET.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == 0, (counts, out)
    skips = {f"{case.get('classname')}::{case.get('name')}": case.find("skipped").get("message", "")
             for case in suite.iter("testcase") if case.find("skipped") is not None}
    # (a run on Connect deselects the tests that do not take the session: this one among them)
    assert all(why.startswith((CLASSIC_ONLY, "a soak")) for why in skips.values()), skips
    assert counts["tests"] > 450, counts   # the modules' Spark tests, not a selection that lost them
    print(f"the Connect set: {counts['tests'] - counts['skipped']} tests passed, {len(skips)} skipped, "
          f"in {took:.0f} s")


# -- a Connect server of its own, reached by its URL ------------------------------------------------
@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    import pyspark
    home = Path(pyspark.__file__).parent
    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cmd = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
           "--master", "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.driver.host=127.0.0.1",
           "--driver-java-options", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1", "spark-internal"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"Spark Connect server exited: {log.read_text()[-2000:]}")
            if "Spark Connect server started" in log.read_text(errors="replace"):
                break
            time.sleep(0.5)
        else:
            pytest.fail("Spark Connect server did not start in 90 s")
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


SCRIPT = textwrap.dedent("""
    import json, sys
    import pandas as pd
    import lakesdk as lk
    from lakesdk.engine.session import get_spark
    spark = get_spark(master=sys.argv[1])
    lake = lk.Lake(sys.argv[2], spark=spark)
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    r1 = t.upsert(pd.DataFrame({"uuid": ["a", "b", "c"], "city": ["x", "y", "x"], "ts": [1, 1, 1], "fare": [1.0, 2.0, 3.0]}))
    r2 = t.upsert(spark.createDataFrame(pd.DataFrame({"uuid": ["a", "d"], "city": ["x", "y"], "ts": [2, 1], "fare": [10.0, 4.0]})))
    r3 = t.delete(["b"])
    snap = t.read().to_spark()
    from lakesdk.engine.session import spark_is_local
    out = {
        "session": type(spark).__module__,
        "here": [spark_is_local(spark), t.context.engine(), type(t.context.markers(r1.instant)).__name__],
        "counts": [(r.inserted, r.updated, r.deleted) for r in (r1, r2, r3)],
        "rows": sorted((r["uuid"], r["fare"]) for r in snap.collect()),
        "as_of_first": sorted(t.as_of(r1.instant).to_pandas().uuid),
        # Spark's own read API: the Python data source registered over Connect
        "source_rows": sorted((r["uuid"], r["fare"]) for r in
                              lk.spark.register(spark).read.format("lakesdk").load(t.path).collect()),
        "source_as_of": sorted(r["uuid"] for r in
                               spark.read.format("lakesdk").option("as.of.instant", r1.instant).load(t.path).collect()),
    }
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.cluster
@pytest.mark.skipif(ON_CONNECT, reason="runs in the suite's own process")
def test_writes_and_reads_over_a_connect_url(connect_url, tmp_path):
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, connect_url, str(tmp_path / "lake")], capture_output=True,
                       text=True, timeout=300, env=env)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert line, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(line[0][6:])
    assert out["session"].startswith("pyspark.sql.connect")
    # a server elsewhere: pandas data goes to Spark jobs, whose tasks write direct markers
    assert out["here"] == [False, "spark", "DirectWriteMarkers"]
    assert out["counts"] == [[3, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert out["rows"] == [["a", 10.0], ["c", 3.0], ["d", 4.0]]
    assert out["as_of_first"] == ["a", "b", "c"]
    assert out["source_rows"] == out["rows"]
    assert out["source_as_of"] == ["a", "b", "c"]
