"""A key stored more than once (an insert or bulk insert of a stored key: both skip the key lookup,
as in Hudi) is updated or deleted in every stored copy, as Hudi's index tags an incoming record
with every stored record of its key and its merge handle merges each one on its own.

Copies come three ways: an insert that fills a small file holding the key (copy-on-write: two
copies in one base file), a bulk insert (a new file group: copies in two file groups), and a
clustering of those file groups (two copies in one base file, merge-on-read too).  For each,
an update or a delete gives the same table on copy-on-write and merge-on-read (before and after
compaction), with the local and the Spark engine, and read by lakesdk and by the ``hudi`` reader.
The counts count stored records: a delete of a key stored twice is ``deleted=2``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakesdk as lk

from ..helpers import hudi_read

COLS = ("id", "ts", "v")


def _rows(t) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLS) for r in t.read().to_arrow().to_pylist())


def _hudi(t) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLS) for r in hudi_read(t.path))


def _table(tmp_path, engine, spark, table_type, copies):
    """A table holding ``a`` twice (ts 1 and 2, made by ``copies``) and ``b`` once."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine=engine), spark=spark)
    t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [1, 2]}))
    getattr(t, "bulk_insert" if copies == "cluster" else copies)(pa.table({"id": ["a"], "ts": [2], "v": [10]}))
    if copies == "cluster":
        t.maintenance.cluster(single_group=True)
    assert _rows(t) == [("a", 1, 1), ("a", 2, 10), ("b", 1, 2)]
    return t


# the follow-up write, its counts (updated, deleted, skipped) and the table after it
CASES = {
    "delete": (lambda t: t.delete(["a"]), (0, 2, 0), [("b", 1, 2)]),
    "upsert newer than both": (lambda t: t.upsert(pa.table({"id": ["a"], "ts": [3], "v": [30]})), (2, 0, 0),
                               [("a", 3, 30), ("a", 3, 30), ("b", 1, 2)]),
    "upsert between the copies": (lambda t: t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [30]})), (1, 0, 1),
                                  [("a", 1, 30), ("a", 2, 10), ("b", 1, 2)]),
    "delete with an ordering value between": (
        lambda t: t.delete(pa.table({"id": ["a"], "ts": [1]})), (0, 1, 1), [("a", 2, 10), ("b", 1, 2)]),
}


@pytest.mark.parametrize("copies", ["insert", "bulk_insert", "cluster"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_stored_copy_is_updated_or_deleted(tmp_path, engine, engine_spark, table_type, case, copies):
    t = _table(tmp_path, engine, engine_spark, table_type, copies)
    write, (updated, deleted, skipped), want = CASES[case]
    res = write(t)
    assert (res.updated, res.deleted, res.skipped) == (updated, deleted, skipped), res
    assert _rows(t) == want
    assert _hudi(t) == want
    if table_type == "MERGE_ON_READ":
        t.maintenance.compact()
        assert _rows(t) == want
        assert _hudi(t) == want


def test_a_merge_on_read_file_group_holding_a_key_twice_gets_a_base_file(tmp_path):
    """A log record would reach one copy only (Hudi's key-based reader merges the first base
    record of its key): the write rewrites that file group's base file instead, and time travel
    before it still reads both copies."""
    t = _table(tmp_path, "local", None, "MERGE_ON_READ", "cluster")
    before = t.timeline.commits[-1].requested
    res = t.delete(["a"])
    assert [p.rsplit(".", 1)[-1] for p in res.file_paths] == ["parquet"], res.file_paths
    assert res.action == "deltacommit"
    assert _rows(t) == _hudi(t) == [("b", 1, 2)]
    assert sorted(tuple(r[c] for c in COLS) for r in t.as_of(before).to_arrow().to_pylist()) == \
        [("a", 1, 1), ("a", 2, 10), ("b", 1, 2)]
    t.maintenance.rollback(res.instant)
    assert _rows(t) == _hudi(t) == [("a", 1, 1), ("a", 2, 10), ("b", 1, 2)]


def test_a_key_bulk_inserted_twice_then_upserted_reads_alike_everywhere(tmp_path):
    """A key written twice by bulk_insert, then upserted: every copy takes the update, on
    copy-on-write and merge-on-read, before and after compaction, in both readers."""
    got = {}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        lake = lk.Lake(str(tmp_path / table_type), options=lk.TableOptions(engine="local"))
        t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
        t.bulk_insert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [1, 2]}))
        t.bulk_insert(pa.table({"id": ["a"], "ts": [1], "v": [5]}))
        res = t.upsert(pa.table({"id": ["a"], "ts": [2], "v": [20]}))
        assert (res.inserted, res.updated) == (0, 2), res
        got[table_type] = (_rows(t), _hudi(t))
        if table_type == "MERGE_ON_READ":
            t.maintenance.compact()
            got["compacted"] = (_rows(t), _hudi(t))
    want = [("a", 2, 20), ("a", 2, 20), ("b", 1, 2)]
    assert got == {k: (want, want) for k in got}
