"""lakesdk on a Spark Connect URL: a real Connect server started on 127.0.0.1 by the fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .helpers import free_port

pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect]")

pytestmark = pytest.mark.cluster


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
    out = {
        "session": type(spark).__module__,
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


def test_writes_and_reads_over_spark_connect(connect_url, tmp_path):
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, connect_url, str(tmp_path / "lake")], capture_output=True,
                       text=True, timeout=300, env=env)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert line, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(line[0][6:])
    assert out["session"].startswith("pyspark.sql.connect")
    assert out["counts"] == [[3, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert out["rows"] == [["a", 10.0], ["c", 3.0], ["d", 4.0]]
    assert out["as_of_first"] == ["a", "b", "c"]
    assert out["source_rows"] == out["rows"]
    assert out["source_as_of"] == ["a", "b", "c"]
