"""A read whose filter prunes partitions plans those partitions only: with the metadata table it
reads their ``files`` records alone, and only their write stats are checked against what is
listed.  The plan (slices, partition counts) is the one a plan of the whole table prunes to."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.exceptions import DataFileMissingError
from lakesdk.read.metadata_table import MetadataTableReader

PARTS = ["a", "b", "c", "d"]


def _table(root, metadata: bool, mor: bool):
    lake = lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=metadata))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p", table_type="MERGE_ON_READ" if mor else "COPY_ON_WRITE")
    for k in range(3):
        n = 8
        t.upsert(pa.table({"id": [f"{(k * 5 + i) % 12}" for i in range(n)], "p": [PARTS[(k + i) % 4] for i in range(n)],
                           "ts": [k] * n, "v": list(range(n))}))
    return t


@pytest.fixture(scope="module", params=[(True, False), (True, True), (False, False), (False, True)],
                ids=["mdt-cow", "mdt-mor", "list-cow", "list-mor"])
def table(request, tmp_path_factory):
    metadata, mor = request.param
    return _table(tmp_path_factory.mktemp("scoped"), metadata, mor)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.sets(st.sampled_from(PARTS + ["z"]), min_size=1, max_size=3))
def test_a_pruned_plan_is_the_whole_plan_pruned(table, kept):
    where = "p IN (" + ", ".join(f"'{p}'" for p in sorted(kept)) + ")"
    whole = table.read().plan()
    pruned = table.read(where=where).plan()
    key = lambda s: (s.partition, s.file_id, s.base_instant, tuple(lf.name for lf in s.log_files))  # noqa: E731
    assert sorted(map(key, pruned.slices)) == sorted(key(s) for s in whole.slices if s.partition.removeprefix("p=") in kept)
    assert pruned.total_partitions == whole.total_partitions == 4
    assert pruned.pruned_partitions == 4 - len(kept & set(PARTS))
    expected = table.read().to_arrow().to_pylist()
    got = table.read(where=where).to_arrow().to_pylist()
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in expected if r["p"] in kept)


@pytest.mark.parametrize("metadata", [True, False], ids=["mdt", "list"])
def test_a_file_missing_in_another_partition_stops_only_reads_that_need_it(tmp_path, metadata):
    t = _table(tmp_path / "lake", metadata, False)
    in_a = sorted(r["id"] for r in t.read(where="p = 'a'").to_arrow().to_pylist())
    victim = next(s for s in t.read().plan().slices if s.partition == "p=b")
    os.remove(os.path.join(t.path, victim.base_path))
    assert sorted(r["id"] for r in t.read(where="p = 'a'").to_arrow().to_pylist()) == in_a and in_a
    with pytest.raises(DataFileMissingError):
        t.read().count()
    with pytest.raises(DataFileMissingError):
        t.read(where="p IN ('a', 'b')").to_arrow()


def test_a_pruned_plan_reads_the_files_records_of_its_partitions_only(tmp_path, monkeypatch):
    t = _table(tmp_path / "lake", True, False)
    asked: list[list[str]] = []
    listed: list[int] = []
    real_files, real_listings = MetadataTableReader.partition_files, MetadataTableReader.listings

    def partition_files(self, partitions):
        asked.append(sorted(partitions))
        return real_files(self, partitions)

    def listings(self):
        listed.append(1)
        return real_listings(self)
    monkeypatch.setattr(MetadataTableReader, "partition_files", partition_files)
    monkeypatch.setattr(MetadataTableReader, "listings", listings)
    assert t.read(where="p = 'c'").plan().slices
    assert asked == [["p=c"]]
    assert not listed
    asked.clear()
    t.upsert(pa.table({"id": ["1", "50"], "p": ["c", "c"], "ts": [5, 5], "v": [1, 2]}))
    assert asked and all(a == ["p=c"] for a in asked)
    assert not listed


@pytest.mark.parametrize("metadata", [True, False], ids=["mdt", "list"])
@pytest.mark.parametrize("mor", [False, True], ids=["cow", "mor"])
def test_a_write_plans_the_partitions_of_its_rows_only(tmp_path, metadata, mor):
    """A write into partition a needs none of b's files: one missing there does not stop it,
    and the table reads as before with a's rows changed; a read of b still fails."""
    t = _table(tmp_path / "lake", metadata, mor)
    before = {r["id"]: r for r in t.read(where="p != 'b'").to_arrow().to_pylist()}
    victim = next(s for s in t.read().plan().slices if s.partition == "p=b")
    os.remove(os.path.join(t.path, victim.base_path or victim.log_paths[0]))
    res = t.upsert(pa.table({"id": ["100", "101"] + [i for i, r in before.items() if r["p"] == "a"][:1],
                             "p": ["a", "a", "a"], "ts": [9, 9, 9], "v": [7, 7, 7]}))
    assert (res.inserted, res.updated) == (2, 1)
    t.delete(pa.table({"id": ["100"], "p": ["a"]}))
    after = {r["id"]: r for r in t.read(where="p != 'b'").to_arrow().to_pylist()}
    changed = [i for i, r in before.items() if r["p"] == "a"][:1]
    assert set(after) == set(before) | {"101"}
    assert all(after[i] == before[i] for i in before if i not in changed)
    assert after[changed[0]]["v"] == 7 and after["101"]["v"] == 7
    with pytest.raises(DataFileMissingError):
        t.read(where="p = 'b'").to_arrow()


def test_a_write_with_a_global_index_still_checks_every_partition(tmp_path):
    """(Listed from storage: with the metadata table a plan lists no data partition, and the
    key index finds the missing file only if it must open it.)"""
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", metadata=False))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p", index="global")
    t.upsert(pa.table({"id": ["1", "2"], "p": ["a", "b"], "ts": [1, 1], "v": [1, 2]}))
    victim = next(s for s in t.read().plan().slices if s.partition == "p=b")
    os.remove(os.path.join(t.path, victim.base_path))
    with pytest.raises(DataFileMissingError):
        t.upsert(pa.table({"id": ["3"], "p": ["a"], "ts": [1], "v": [3]}))


def test_expected_rows_are_kept_with_their_commit_metadata_and_dropped_with_it():
    """The rows of expected files a commit's write stats give are computed once per parsed commit
    metadata (shared by the views of the process) and go when the metadata goes: a table's later
    commits, or another table's, never see rows of metadata that is gone."""
    import gc

    from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
    from lakesdk.format.file_naming import parse_data_file
    from lakesdk.read.listing import _NAMES, _ROWS_BY_COMMIT, _stat_rows

    def parse(name):
        return _NAMES.get(name) or parse_data_file(name)
    base = "f1-0_0-1-1_20250101000000000.parquet"
    md = CommitMetadata({"p=a": [WriteStat("f1-0", f"p=a/{base}", "p=a", fileSizeInBytes=10),
                                 WriteStat("x", "null", "p=a"), WriteStat("y", "p=a/.hoodie_partition_metadata", "p=a")]})
    rows = _stat_rows(md, parse)
    assert rows == [("p=a", [(("p=a", "f1-0"), True,
                              (f"p=a/{base}", 10, "20250101000000000", "p=a", "f1-0", "base", base))])]
    assert _stat_rows(md, parse) is rows
    key = id(md)
    del md, rows
    gc.collect()
    assert key not in _ROWS_BY_COMMIT
