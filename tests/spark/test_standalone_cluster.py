"""lakesdk beyond one machine: a Spark standalone cluster (master + one worker) writing a
Hudi table into an S3-compatible store (moto).

The module starts, as module-scoped fixtures, a standalone master and worker from pyspark's
own distribution and a ``moto_server``.  The cluster part runs in a separate Python process
(only one SparkContext can exist per process and the rest of the suite shares a local one):
it upserts, deletes and overwrites through executors on the worker, reads back with the
Arrow reader, Spark, time travel and incremental queries, and reports JSON that this module
checks against a plain-Python model of the table.  The table is also read with the ``hudi``
(Rust) reader straight from the bucket.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..helpers import FAST_JVM, free_port, http_json, port_open, start_process, stop_process, tail, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

PYTHON = sys.executable
VENV_BIN = Path(sys.executable).parent
BUCKET = "lakesdk-cluster"
ROOT = f"s3://{BUCKET}/lake"
TABLE = "trips"
KEY_COLS = ("uuid", "city", "ts", "fare", "rider")


# -- fixtures -----------------------------------------------------------------------------------
# ``spark_cluster`` (a standalone master and worker) is in conftest.py.
@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3-compatible server with one bucket; yields s3fs storage options."""
    exe = VENV_BIN / "moto_server"
    if not exe.exists():
        found = shutil.which("moto_server")
        if not found:
            pytest.skip("moto_server is not installed")
        exe = Path(found)
    s3fs = pytest.importorskip("s3fs")
    d = tmp_path_factory.mktemp("moto")
    port = free_port()
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    log = d / "moto.log"
    p = start_process([str(exe), "-H", "127.0.0.1", "-p", str(port)], log, env, d)
    try:
        wait_for("moto_server", lambda: port_open(port), timeout=30, procs={"moto_server": (p, log)})
        endpoint = f"http://127.0.0.1:{port}"
        opts = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **opts)
        fs.mkdir(BUCKET)
        assert BUCKET in [b.rstrip("/") for b in fs.ls("", refresh=True)]
        yield {"port": port, "endpoint": endpoint, "options": opts, "dir": d}
    finally:
        stop_process(p)


# -- the driver program (runs in its own Python process, connected to the cluster) ---------------
DRIVER = r'''
import json, os, sys, time
import pandas as pd
from pyspark.sql import SparkSession

cfg = json.load(open(sys.argv[1]))
out_path = sys.argv[2]
t_start = time.perf_counter()
spark = (SparkSession.builder.master(cfg["master"]).appName(cfg["app_name"])
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.executor.memory", "512m")
         .config("spark.cores.max", "1")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.adaptive.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.python.worker.reuse", "true")
         .config("spark.driver.extraJavaOptions", cfg["jvm_opts"])
         .config("spark.executor.extraJavaOptions", cfg["jvm_opts"])
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .getOrCreate())
spark.sparkContext.setLogLevel("WARN")
sc = spark.sparkContext
res = {"master": sc.master, "app_id": sc.applicationId, "driver_pid": os.getpid(), "steps": {}}

import lakesdk as lk
COLS = cfg["columns"]

def rows(tbl, cols=COLS):
    return [[r[c] for c in cols] for r in tbl.select(cols).to_pylist()]

def wr(r):
    d = r.to_dict()
    d["file_paths"] = list(r.file_paths)
    return d

lake = lk.Lake(cfg["root"], spark=spark, storage_options=cfg["storage_options"])
t = lake.create_table(cfg["table"], key="uuid", partition_by="city", ordering="ts")
res["tables"] = lake.tables()
d = cfg["data"]
r1 = t.upsert(pd.DataFrame(d["initial"]))
res["steps"]["r1"] = {"result": wr(r1), "snapshot": rows(t.read().to_arrow())}
# executors are up now: one registered executor besides the driver
res["executors"] = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
res["executor_hosts"] = sorted({(e.host() if callable(e.host) else e.host) for e in sc.statusTracker().getExecutorInfos()})
r2 = t.upsert(pd.DataFrame(d["update"]))
res["steps"]["r2"] = {"result": wr(r2), "snapshot": rows(t.read().to_arrow())}
r3 = t.delete(d["delete"])
res["steps"]["r3"] = {"result": wr(r3), "snapshot": rows(t.read().to_arrow())}
inc = t.incremental(start=r1.completed, meta_fields=True).to_arrow()
res["incremental_after_r1"] = rows(inc, ["_hoodie_commit_time"] + COLS)
r4 = t.insert_overwrite(pd.DataFrame(d["overwrite"]))
res["steps"]["r4"] = {"result": wr(r4), "snapshot": rows(t.read().to_arrow())}
res["instants"] = {k: {"instant": r.instant, "completed": r.completed} for k, r in
                   (("r1", r1), ("r2", r2), ("r3", r3), ("r4", r4))}

# reads of the final state, Arrow on the driver and Spark on the executors
res["final_arrow_meta"] = rows(t.read(meta_fields=True).to_arrow(),
                               ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_commit_time", "_hoodie_file_name"])
sdf = t.read().to_spark()
res["final_spark"] = [[r[c] for c in COLS] for r in sdf.collect()]
res["final_spark_where"] = [[r[c] for c in COLS] for r in t.read(where="city = 'sf'").to_spark().collect()]
res["as_of_r1"] = rows(t.as_of(r1.instant).to_arrow())
res["as_of_r2"] = rows(t.as_of(r2.instant).to_arrow())
res["as_of_r3_spark"] = [[r[c] for c in COLS] for r in t.as_of(r3).to_spark().collect()]
res["incremental_after_r3"] = rows(t.incremental(start=r3.completed, meta_fields=True).to_arrow(), ["_hoodie_commit_time"] + COLS)
res["history"] = [list(r.values()) for r in t.history().select(["instant", "action", "operation"]).to_pylist()]
# Spark's own read API (the ``lakesdk`` data source): planned on the driver, read on the executors
lk.spark.register(spark)
src = lambda **o: spark.read.format("lakesdk").options(storage_options=json.dumps(cfg["storage_options"]), **o).load(t.path)
srows = lambda df, cols=COLS: [[r[c] for c in cols] for r in df.collect()]
res["source"] = {
    "snapshot": [srows(src()), srows(t.read().to_spark())],
    "as_of_r2": [srows(src(**{"as.of.instant": r2.instant})), srows(t.as_of(r2.instant).to_spark())],
    "incremental_after_r1": [srows(src(**{"hoodie.datasource.query.type": "incremental",
                                          "hoodie.datasource.read.begin.instanttime": r1.completed,
                                          "hoodie.datasource.read.end.instanttime": r3.completed,
                                          "meta_fields": "true"}),
                                   ["_hoodie_commit_time"] + COLS),
                             srows(t.incremental(r1.completed, r3.completed, meta_fields=True).to_spark(),
                                   ["_hoodie_commit_time"] + COLS)],
}
# one more job whose tasks report where they ran
res["task_pids"] = sorted(set(sc.parallelize(range(4), 2).map(lambda _: os.getpid()).collect()))
res["seconds"] = time.perf_counter() - t_start
json.dump(res, open(out_path, "w"))
spark.stop()
'''


# -- the expected table, in plain Python --------------------------------------------------------
CITIES = ("sf", "nyc", "la")


def _row(uuid: str, city: str, ts: int, fare: float, rider: str) -> dict[str, Any]:
    return {"uuid": uuid, "city": city, "ts": ts, "fare": fare, "rider": rider}


def _dataset() -> dict[str, list[Any]]:
    initial = [_row(f"u{i:03d}", CITIES[i % 3], 100 + i, round(i * 1.5, 2), f"r{i}") for i in range(30)]
    by_key = {r["uuid"]: r for r in initial}
    update = []
    for i in range(8):  # newer ordering value: applied
        k = f"u{i:03d}"
        update.append(_row(k, by_key[k]["city"], 1000 + i, 100.0 + i, f"r{i}-v2"))
    # the same key twice in one batch: the greater ordering value wins
    update.append(_row("u005", by_key["u005"]["city"], 1500, 555.0, "r5-v3"))
    for k in ("u010", "u011"):  # older ordering value: skipped
        update.append(_row(k, by_key[k]["city"], 1, -1.0, "stale"))
    for j, city in enumerate(("sf", "nyc", "chi", "chi", "la")):  # new keys, one new partition
        update.append(_row(f"u{100 + j}", city, 500 + j, 7.0 + j, f"n{j}"))
    delete = ["u001", "u002", "u100", "u999"]  # u999 does not exist
    overwrite = [_row(f"u{200 + j}", "la", 2000 + j, 20.0 + j, f"o{j}") for j in range(3)]
    return {"initial": initial, "update": update, "delete": delete, "overwrite": overwrite}


class Model:
    """The table as a dict key -> row, with Hudi's event-time-ordering upsert semantics."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.commit: dict[str, str] = {}

    def upsert(self, batch: list[dict[str, Any]], instant: str) -> tuple[int, int, int]:
        combined: dict[str, dict[str, Any]] = {}
        for r in batch:
            c = combined.get(r["uuid"])
            if c is None or r["ts"] >= c["ts"]:
                combined[r["uuid"]] = r
        ins = upd = skip = 0
        for k, r in combined.items():
            old = self.rows.get(k)
            if old is not None and r["ts"] < old["ts"]:
                skip += 1
                continue
            if old is None:
                ins += 1
            else:
                upd += 1
            self.rows[k], self.commit[k] = r, instant
        return ins, upd, skip

    def delete(self, keys: list[str]) -> int:
        n = 0
        for k in keys:
            if self.rows.pop(k, None) is not None:
                self.commit.pop(k)
                n += 1
        return n

    def overwrite(self, batch: list[dict[str, Any]], instant: str) -> None:
        cities = {r["city"] for r in batch}
        for k in [k for k, r in self.rows.items() if r["city"] in cities]:
            del self.rows[k], self.commit[k]
        for r in batch:
            self.rows[r["uuid"]], self.commit[r["uuid"]] = r, instant

    def snapshot(self) -> list[tuple]:
        return sorted(tuple(r[c] for c in KEY_COLS) for r in self.rows.values())

    def changed_since(self, instants: set[str]) -> list[tuple]:
        return sorted((self.commit[k], *(r[c] for c in KEY_COLS)) for k, r in self.rows.items()
                      if self.commit[k] in instants)


def _rows(rs: list[list[Any]]) -> list[tuple]:
    return sorted(tuple(r) for r in rs)


def _run_driver(cluster: dict[str, Any], s3: dict[str, Any], tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    script = tmp_path / "cluster_driver.py"
    script.write_text(DRIVER)
    cfg = {"master": cluster["url"], "app_name": f"lakesdk-cluster-test-{os.getpid()}", "root": ROOT, "table": TABLE,
           "storage_options": s3["options"], "columns": list(KEY_COLS), "data": data, "jvm_opts": FAST_JVM}
    cfg_path, out_path, log = tmp_path / "driver_config.json", tmp_path / "driver_result.json", tmp_path / "driver.log"
    cfg_path.write_text(json.dumps(cfg))
    p = start_process([PYTHON, str(script), str(cfg_path), str(out_path)], log, cluster["env"], tmp_path)
    try:
        rc = p.wait(timeout=150)
    except subprocess.TimeoutExpired:
        stop_process(p)
        pytest.fail(f"the cluster driver did not finish in 150 s:\n{tail(log, 80)}")
    finally:
        stop_process(p, grace=5)
    if rc != 0 or not out_path.exists():
        pytest.fail(f"the cluster driver failed (exit {rc}):\n{tail(log, 80)}")
    return json.loads(out_path.read_text())


# -- the test -----------------------------------------------------------------------------------
def test_spark_cluster_writes_hudi_table_to_s3(spark_cluster, s3_server, tmp_path):
    import s3fs

    data = _dataset()
    res = _run_driver(spark_cluster, s3_server, tmp_path, data)
    inst = res["instants"]
    steps = res["steps"]

    # -- ran on the cluster --------------------------------------------------------------------
    assert res["master"] == spark_cluster["url"]
    assert res["executors"] == 1, res
    assert res["executor_hosts"] == ["127.0.0.1"]
    assert res["task_pids"] and res["driver_pid"] not in res["task_pids"]
    master = http_json(spark_cluster["json_url"])
    apps = {a["id"]: a for a in master.get("activeapps", []) + master.get("completedapps", [])}
    assert res["app_id"] in apps, master
    assert apps[res["app_id"]]["cores"] == 1
    # the worker launched an executor for this application, and it ran tasks
    ex_logs = list((spark_cluster["work_dir"] / res["app_id"]).glob("*/stderr"))
    assert ex_logs, f"no executor logs under {spark_cluster['work_dir']}"
    finished = sum(p.read_text(errors="replace").count("Finished task") for p in ex_logs)
    assert finished > 0

    # -- exact rows after each operation -------------------------------------------------------
    m = Model()
    ins, upd, skip = m.upsert(data["initial"], inst["r1"]["instant"])
    r1 = steps["r1"]["result"]
    assert (r1["inserted"], r1["updated"], r1["operation"]) == (ins, 0, "upsert") == (30, 0, "upsert")
    assert _rows(steps["r1"]["snapshot"]) == m.snapshot()
    after_r1 = m.snapshot()

    ins, upd, skip = m.upsert(data["update"], inst["r2"]["instant"])
    r2 = steps["r2"]["result"]
    assert (ins, upd, skip) == (5, 8, 2)
    assert (r2["inserted"], r2["updated"], r2["skipped"]) == (ins, upd, skip)
    assert _rows(steps["r2"]["snapshot"]) == m.snapshot()
    after_r2 = m.snapshot()

    deleted = m.delete(data["delete"])
    r3 = steps["r3"]["result"]
    assert r3["deleted"] == deleted == 3
    assert _rows(steps["r3"]["snapshot"]) == m.snapshot()
    after_r3 = m.snapshot()
    assert _rows(res["incremental_after_r1"]) == m.changed_since({inst["r2"]["instant"], inst["r3"]["instant"]})
    assert len(res["incremental_after_r1"]) == 10  # 8 updated + 5 inserted - 3 deleted (u001, u002, u100)

    m.overwrite(data["overwrite"], inst["r4"]["instant"])
    r4 = steps["r4"]["result"]
    assert r4["action"] == "replacecommit" and r4["inserted"] == 3
    final = m.snapshot()
    assert _rows(steps["r4"]["snapshot"]) == final
    assert not any(r[1] == "la" and not r[0].startswith("u2") for r in final)

    # -- reads: Spark on the executors, time travel, incremental -------------------------------
    assert _rows(res["final_spark"]) == final
    assert _rows(res["final_spark_where"]) == [r for r in final if r[1] == "sf"]
    assert _rows(res["as_of_r1"]) == after_r1
    assert _rows(res["as_of_r2"]) == after_r2
    assert _rows(res["as_of_r3_spark"]) == after_r3
    assert _rows(res["incremental_after_r3"]) == m.changed_since({inst["r4"]["instant"]})
    for name, (got, want) in res["source"].items():   # spark.read.format("lakesdk") on the cluster
        assert _rows(got) == _rows(want), name
    assert _rows(res["source"]["snapshot"][0]) == final
    assert _rows(res["source"]["as_of_r2"][0]) == after_r2
    assert [h[1:] for h in res["history"]] == [["commit", "UPSERT"], ["commit", "UPSERT"], ["commit", "DELETE"],
                                               ["replacecommit", "INSERT_OVERWRITE"]]
    meta = {r[0]: r for r in res["final_arrow_meta"]}
    assert set(meta) == set(m.rows)
    assert all(meta[k][2] == m.commit[k] for k in m.rows)
    assert all(meta[k][1] == f"city={m.rows[k]['city']}" for k in m.rows)

    # -- the files are in the bucket -----------------------------------------------------------
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **s3_server["options"])
    base = f"{BUCKET}/lake/{TABLE}"
    files = {p[len(base) + 1:] for p in fs.find(base)}
    assert ".hoodie/hoodie.properties" in files
    for step in ("r1", "r2", "r3", "r4"):
        i = inst[step]
        action = steps[step]["result"]["action"]
        assert f".hoodie/timeline/{i['instant']}_{i['completed']}.{action}" in files, sorted(files)
        for fp in steps[step]["result"]["file_paths"]:
            assert fp in files, (step, fp)
    for _k, (_, part, _, fname) in meta.items():
        assert f"{part}/{fname}" in files
    parts = {f.split("/", 1)[0] for f in files if f.endswith(".parquet")}
    assert parts == {"city=sf", "city=nyc", "city=la", "city=chi"}
    assert all(f"{p}/.hoodie_partition_metadata" in files for p in parts)
    local = list(tmp_path.rglob("*.parquet")) + list(spark_cluster["work_dir"].rglob("*.parquet"))
    assert not local, f"data files must go to the bucket, not the driver's or executor's disk: {local}"

    # -- the hudi (Rust) reader sees the same table straight from the bucket -------------------
    _check_hudi_reader(s3_server, final, meta)


def _check_hudi_reader(s3: dict[str, Any], expected: list[tuple], meta: dict[str, list[Any]]) -> None:
    hudi = pytest.importorskip("hudi")
    import pyarrow as pa

    opts = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
            "aws_endpoint_url": s3["endpoint"], "aws_allow_http": "true", "aws_region": "us-east-1"}
    table = hudi.HudiTableBuilder.from_base_uri(f"s3://{BUCKET}/lake/{TABLE}").with_storage_options(opts).build()
    got = pa.Table.from_batches(table.read())
    assert sorted(tuple(r[c] for c in KEY_COLS) for r in got.to_pylist()) == expected
    assert {r["_hoodie_record_key"]: r["_hoodie_commit_time"] for r in got.to_pylist()} == \
        {k: v[2] for k, v in meta.items()}
