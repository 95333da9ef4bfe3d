"""Finalize with real Spark task failures: a task's first attempt writes half of its data
file and fails; Spark retries it; the commit deletes the files that markers show but
write stats do not, so readers never see the partial files (markers.md M29)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.crash]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import pandas as pd
    import lakesdk as lk
    from lakesdk.engine.session import get_spark
    os.environ["LAKESDK_FAIL_FIRST_ATTEMPT"] = "1"     # Python workers inherit it from the JVM
    spark = get_spark(master="local[2,4]", conf={   # 4 attempts per task
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    opts = lk.TableOptions(engine="spark", markers=sys.argv[3])
    lake = lk.Lake(sys.argv[1], spark=spark, options=opts)
    t = lake.create_table("t", key="uuid", partition_by="city", ordering="ts", table_type=sys.argv[2])
    rows = lambda a, b, ts: pd.DataFrame({"uuid": [f"u{i}" for i in range(a, b)], "city": ["x", "y"] * ((b - a) // 2),
                                          "ts": [ts] * (b - a), "fare": [float(i) for i in range(a, b)]})
    r1 = t.upsert(rows(0, 40, 1))
    r2 = t.upsert(rows(20, 60, 2))
    files = sorted(f.path for f in t.storage.find("") if not f.path.startswith(".hoodie"))
    stats = {i: sorted(s.path for s in t.inspect.commit_metadata(i).write_stats) for i in (r1.instant, r2.instant)}
    snap = t.read().to_pandas()
    print("RESULT" + json.dumps({"files": files, "stats": stats, "instants": [r1.instant, r2.instant],
                                 "rows": sorted(zip(snap.uuid, snap.ts.astype(int), snap.fare)),
                                 "temp": [e.name for e in t.storage.list(".hoodie/.temp")]}))
""")


@pytest.mark.parametrize("table_type,markers", [("cow", "timeline_server"), ("mor", "direct")])
def test_failed_task_attempts_leave_no_files(tmp_path, table_type, markers):
    log = tmp_path / "faults.log"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "LAKESDK_FAULT_LOG": str(log)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "lake"), table_type, markers],
                       capture_output=True, text=True, timeout=300, env=env)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert line, r.stdout[-2000:] + r.stderr[-4000:]
    out = json.loads(line[0][6:])
    failed = log.read_text().splitlines() if log.exists() else []
    assert failed, "no task attempt failed: the test proves nothing"
    partial = {x.split(" ", 3)[-1] for x in failed}
    assert partial and not partial & set(out["files"]), "a partial file of a failed attempt survived"
    data_files = [f for f in out["files"] if not f.endswith(".hoodie_partition_metadata")]
    committed = {p for paths in out["stats"].values() for p in paths}
    # every data file on storage is named by a commit's write stats: the partial files are gone
    assert set(data_files) == committed, set(data_files) ^ committed
    expected = {f"u{i}": (1, float(i)) for i in range(0, 20)} | {f"u{i}": (2, float(i)) for i in range(20, 60)}
    assert [tuple(x) for x in out["rows"]] == sorted((k, *v) for k, v in expected.items())
    assert out["temp"] == []   # markers removed after the commit
