"""Crash recovery: a writer process is killed (SIGKILL) at each step of the write protocol;
the next writer recovers, reads return exactly the last completed commit, no orphan data
files remain, and the hudi reader agrees."""

from __future__ import annotations

import os
import posixpath
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file

from ..helpers import hudi_read

pytestmark = [pytest.mark.spark, pytest.mark.crash]

POINTS = ["after_requested", "after_markers", "mid_data_file", "after_data", "during_commit", "after_commit"]

WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pandas as pd
    import lakesdk as lk
    from lakesdk.engine.session import get_spark
    spark = get_spark(master="local[1]", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    t = lk.open_table(sys.argv[1], spark=spark, options=lk.TableOptions(engine=sys.argv[3]))
    t.upsert(pd.read_parquet(sys.argv[2]))
    print("WRITE FINISHED")
""")


def batch(rows):
    return pd.DataFrame(rows, columns=["uuid", "city", "ts", "fare"])


FIRST = batch([(f"u{i}", "ab"[i % 2], 1, float(i)) for i in range(6)])
SECOND = batch([("u0", "a", 2, 100.0), ("u1", "b", 2, 101.0), ("u7", "a", 1, 7.0), ("u8", "c", 1, 8.0)])
THIRD = batch([("u2", "a", 3, 222.0), ("u9", "b", 1, 9.0)])


def fold(*batches) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for b in batches:
        for r in b.itertuples():
            if r.uuid not in out or r.ts >= out[r.uuid][1]:
                out[r.uuid] = (r.city, r.ts, r.fare)
    return out


def rows(t) -> dict[str, tuple]:
    return {r.uuid: (r.city, r.ts, r.fare) for r in t.read().to_pandas().itertuples()}


def hudi_rows(path) -> dict[str, tuple]:
    return {r["uuid"]: (r["city"], r["ts"], r["fare"]) for r in hudi_read(path)}


def data_file_instants(t) -> set[str]:
    out = set()
    for f in t.storage.find(""):
        name = posixpath.basename(f.path)
        if f.path.startswith(".hoodie"):
            continue
        if is_base_file(name):
            out.add(BaseFile.parse(name).instant)
        elif name.startswith(".") and ".log." in name and not name.endswith(".tmp"):
            out.add(LogFile.parse(name).instant)
        elif name != ".hoodie_partition_metadata":
            out.add(f"stray file {f.path}")
    return out


CASES = [(p, tt, "local") for p in POINTS for tt in ("cow", "mor")] + [
    # the points inside Spark tasks: an executor-side Python worker kills its driver
    (p, tt, "spark") for p in ("after_markers", "mid_data_file") for tt in ("cow", "mor")]


@pytest.mark.parametrize("point,table_type,engine", CASES)
def test_crash_at_each_step_then_recover(lake, point, table_type, engine, tmp_path):
    t = lake.create_table("crash", key="uuid", partition_by="city", ordering="ts", table_type=table_type)
    t.upsert(FIRST)
    env = {**os.environ, "LAKESDK_CRASH_AT": point, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    SECOND.to_parquet(tmp_path / "second.parquet")
    r = subprocess.run([sys.executable, "-c", WRITER, t.path, str(tmp_path / "second.parquet"), engine],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == -9, f"writer was not killed at {point}: rc={r.returncode}\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    assert "WRITE FINISHED" not in r.stdout
    landed = point == "after_commit"
    expected = fold(FIRST, SECOND) if landed else fold(FIRST)
    # readers see exactly the last completed commit, before any repair
    assert rows(t) == expected
    assert hudi_rows(t.path) == expected
    pending_before = [i for i in t.timeline.pending if i.action in ("commit", "deltacommit")]
    assert bool(pending_before) == (not landed)
    # the next writer repairs the table (eager rollback of the dead writer's instant)
    t.upsert(THIRD)
    final = fold(FIRST, SECOND, THIRD) if landed else fold(FIRST, THIRD)
    assert rows(t) == final and hudi_rows(t.path) == final
    tl = t.timeline
    assert not tl.pending
    completed_writes = {i.requested for i in tl.commits}
    assert data_file_instants(t) <= completed_writes, "orphan data files remain"
    if not landed:
        assert [i.action for i in tl if i.action == "rollback"] == ["rollback"]
        assert pending_before[0].requested not in {i.requested for i in tl}
    leftovers = [e.name for e in t.storage.list(".hoodie/.temp")] + [e.name for e in t.storage.list(".hoodie/.heartbeat")]
    assert leftovers == [] or landed and leftovers == [], leftovers
    tmp = [e.name for e in t.storage.list(".hoodie/timeline") if e.name.endswith(".tmp")]
    assert tmp == [], f"half-written timeline files left: {tmp}"


# -- Hudi's metadata table: kept (lakesdk.services.metadata_writer) or dropped at the commit point --------
MDT_WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pyarrow.parquet as pq
    import lakesdk as lk
    keep = {"keep": None, "compact": None, "drop": False}[sys.argv[3]]
    every = 1 if sys.argv[3] == "compact" else 10
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local", metadata=keep, metadata_compact_every=every))
    t.upsert(pq.read_table(sys.argv[2]))
    print("WRITE FINISHED")
""")


def _kill_mdt_writer(table_type: str, point: str, mode: str, tmp_path: Path) -> tuple[str, Any, tuple, list]:
    """A copy of the Hudi-written v9_txns_simple_meta table of ``table_type`` and a writer (MDT
    ``mode``: keep, compact or drop) of an update and an insert into it, killed at ``point``.
    Returns (path, the model before the write, the MDT partitions named before, the rows written)."""
    import pyarrow as pa

    import lakesdk as lk

    from ..corpus_model import DATA, Model, mdt_state, remember_hudi_partition_stats
    from ..helpers import unpack_zips, zipped_table
    rel = f"sample_table/{table_type}/v9_txns_simple_meta"
    zdir = tmp_path / "zip"
    (zdir / rel).parent.mkdir(parents=True)
    (zdir / f"{rel}.zip").write_bytes((DATA / f"{rel}.zip").read_bytes())
    path = zipped_table(unpack_zips(zdir, tmp_path / "t"), rel)
    remember_hudi_partition_stats(path)
    m = Model(lk.open_table(path, options=lk.TableOptions(engine="local")))
    listed = mdt_state(path)[0]
    changed = [m.updated(m.first()), m.new()]
    pa.Table.from_pylist(changed, schema=m.snap.schema).to_pandas().to_parquet(tmp_path / "batch.parquet")
    env = {**os.environ, "LAKESDK_CRASH_AT": point}
    r = subprocess.run([sys.executable, "-c", MDT_WRITER, path, str(tmp_path / "batch.parquet"), mode],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == -9, f"writer was not killed at {point}: rc={r.returncode}\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    return path, m, listed, changed


MDT_POINTS = ["after_data", "properties_backup_written", "metadata_table_unlisted", "metadata_table_deleted",
              "after_commit"]


@pytest.mark.interop
@pytest.mark.parametrize("point", MDT_POINTS)
@pytest.mark.parametrize("table_type", ["cow", "mor/avro"])
def test_crash_while_the_metadata_table_is_dropped_then_recover(point, table_type, tmp_path):
    """A writer with the MDT disabled (``metadata=False``) killed at each step of dropping the
    MDT (before, with the properties backup
    written, with hoodie.properties cleared, with the MDT deleted, after the commit): readers
    (the hudi reader lists from the MDT while hoodie.properties names it) see exactly the last
    completed commit, the MDT and its listing are either both untouched (the instant not
    completed) or no reader trusts the MDT any more; the next writer finishes the drop."""

    import lakesdk as lk
    from lakesdk.format.metadata_table import METADATA_DIR

    from ..corpus_model import mdt_state as _state
    path, m, listed, changed = _kill_mdt_writer(table_type, point, "drop", tmp_path)
    landed = point == "after_commit"
    # what a crash at each point leaves
    state = {"after_data": (listed, True), "properties_backup_written": (listed, True),
             "metadata_table_unlisted": ((), True), "metadata_table_deleted": ((), False),
             "after_commit": ((), False)}[point]
    assert _state(path) == state
    assert (Path(path) / ".hoodie/hoodie.properties.backup").exists() == (point == "properties_backup_written")
    if landed:
        m.put(*changed)
    m.check(path, f"after a crash at {point}")
    # the next writer rolls the dead instant back and finishes the drop
    more = m.new(1)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        lk.open_table(path, options=lk.TableOptions(engine="local", metadata=False)).upsert(m.table([more]))
    m.put(more)
    dropped = [w for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    assert len(dropped) == (1 if state[0] else 0), "told when the listing goes, once"
    assert _state(path) == ((), False) and not (Path(path) / METADATA_DIR).exists()
    assert not (Path(path) / ".hoodie/hoodie.properties.backup").exists()
    m.check(path, f"after a crash at {point} and the next write")
    tl = lk.open_table(path).timeline
    assert not tl.pending
    assert bool(tl.filter(actions=["rollback"]).completed.instants) != landed


KEEP_POINTS = ["after_data", "properties_backup_written", "metadata_compacted", "metadata_log_written",
               "metadata_committed", "after_commit"]


@pytest.mark.interop
@pytest.mark.parametrize("point", KEEP_POINTS)
@pytest.mark.parametrize("table_type", ["cow", "mor/avro"])
def test_crash_while_the_metadata_table_is_kept_then_recover(point, table_type, tmp_path):
    """A writer keeping a Hudi-written table's MDT killed at each step of its commit point
    (before the MDT changes, while the partitions lakesdk does not maintain are dropped, with
    the new base file of an MDT compaction written, with the MDT log file written, with the MDT delta commit completed and the data instant not,
    after the commit): lakesdk and the hudi reader (which lists from the MDT) read exactly the
    last completed commit, and the MDT lists exactly the files of the completed instants; the
    next writer rolls the dead instant back, the MDT still agreeing with storage."""

    import lakesdk as lk
    from lakesdk.read.metadata_table import MetadataTableReader

    from ..corpus_model import check_mdt, kept_partitions
    from ..corpus_model import mdt_state as _state
    mode = "compact" if point in ("metadata_compacted", "metadata_log_written") else "keep"
    path, m, listed, changed = _kill_mdt_writer(table_type, point, mode, tmp_path)
    landed = point == "after_commit"
    trimmed = point not in ("after_data", "properties_backup_written")
    assert _state(path) == (kept_partitions(path) if trimmed else listed, True)
    assert (Path(path) / ".hoodie/hoodie.properties.backup").exists() == (point == "properties_backup_written")
    if landed:
        m.put(*changed)
    m.check(path, f"after a crash at {point}")
    check_mdt(path, f"after a crash at {point}")
    more = m.new(1)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        lk.open_table(path, options=lk.TableOptions(engine="local")).upsert(m.table([more]))
    m.put(more)
    dropped = [w for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    assert len(dropped) == (0 if trimmed else 1), "told once when the partitions lakesdk does not keep go"
    assert _state(path) == (kept_partitions(path), True)
    assert not (Path(path) / ".hoodie/hoodie.properties.backup").exists()
    m.check(path, f"after a crash at {point} and the next write")
    check_mdt(path, f"after a crash at {point} and the next write")
    t = lk.open_table(path)
    assert not t.timeline.pending
    assert not MetadataTableReader(t.storage, t.timeline).store.load().pending, "the MDT's dead delta commit is gone"
    assert bool(t.timeline.filter(actions=["rollback"]).completed.instants) != landed


ROLLBACK_WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pyarrow as pa
    import lakesdk as lk
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local", metadata=True))
    t.upsert(pa.table({"id": [int(sys.argv[2])], "ts": [1], "v": ["x"]}))
    print("WRITE FINISHED")
""")


@pytest.mark.parametrize("point", ["metadata_log_written", "metadata_committed"])
def test_a_rollback_killed_inside_its_metadata_delta_commit_is_finished_by_the_next_writer(point, tmp_path):
    """A dead writer's instant, then the rollback of it by the next writer killed inside the
    rollback's MDT delta commit (the MDT delta commit completed, the rollback not): the rollback
    is retried at the same instant time and its MDT delta commit written again (it failed with
    CorruptTimelineError on every later write; found by review)."""
    import lakesdk as lk

    from ..corpus_model import check_mdt
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", ordering="ts")
    t.upsert({"id": [1], "ts": [0], "v": ["a"]})

    def run(key: int, at: str) -> None:
        env = {**os.environ, "LAKESDK_CRASH_AT": at}
        r = subprocess.run([sys.executable, "-c", ROLLBACK_WRITER, t.path, str(key)], env=env, capture_output=True,
                           text=True, timeout=240)
        assert r.returncode == -9, f"not killed at {at}: rc={r.returncode}\n{r.stderr[-3000:]}"
    run(2, "after_data")            # a dead write
    run(3, point)                   # the next writer's eager rollback of it dies in its MDT delta commit
    t = lk.open_table(t.path, options=lk.TableOptions(engine="local"))
    check_mdt(t.path, f"after a rollback killed at {point}")
    t.upsert({"id": [4], "ts": [0], "v": ["d"]})
    assert sorted(r["id"] for r in t.read().to_arrow().to_pylist()) == [1, 4]
    assert sorted(r["id"] for r in hudi_read(t.path)) == [1, 4]
    check_mdt(t.path, "after the next write")
    assert not t.timeline.pending


OVERWRITE_WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pyarrow as pa
    import lakesdk as lk
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local"))
    t.insert_overwrite(pa.table({"id": [9], "p": ["a"], "ts": [1]}), scope="table")
""")


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_an_overwrite_killed_after_its_metadata_delta_commit_is_undone_in_the_partition_statistics(table_type,
                                                                                                 tmp_path):
    """An insert_overwrite of the whole table killed with its MDT delta commit completed (its
    partition statistics say the partitions it replaced empty) and rolled back by the next
    writer: the rollback says those partitions again, the one where the overwrite wrote no
    file included."""
    import lakesdk as lk

    from ..corpus_model import check_mdt
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert({"id": [1, 2], "p": ["a", "Zürich"], "ts": [0, 0]})
    r = subprocess.run([sys.executable, "-c", OVERWRITE_WRITER, t.path], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "LAKESDK_CRASH_AT": "metadata_committed"})
    assert r.returncode == -9, f"not killed: rc={r.returncode}\n{r.stderr[-3000:]}"
    t = lk.open_table(t.path, options=lk.TableOptions(engine="local"))
    dead = t.context.store.load().pending.instants
    assert [i.action for i in dead] == ["replacecommit"]
    t.maintenance.rollback(dead[0].requested, force=True)      # its heartbeat has not expired yet
    assert not t.context.store.load().pending
    check_mdt(t.path, "after the rollback of the killed overwrite")
    assert t.read(where="id = 2").to_arrow().column("id").to_pylist() == [2]
    assert t.read(where="id = 2").plan().pruned_by_partition_stats == 1
