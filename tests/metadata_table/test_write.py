"""lakesdk keeps Hudi's metadata table (lakesdk.services.metadata_writer): on tables it creates with
``metadata=True``, after every action, the MDT's ``files`` partition lists exactly the files of
the completed instants, and the ``hudi`` reader (which lists files from it) reads what lakesdk
reads."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.format.metadata_table import METADATA_DIR

from ..corpus_model import check_mdt, kept_partitions, mdt_state
from ..helpers import hudi_rows, rows


def batch(i: int, ids=(1, 2, 3)) -> pa.Table:
    return pa.table({"id": list(ids), "p": ["a" if k % 2 else "b" for k in ids], "ts": [i] * len(ids),
                     "v": [f"v{i}"] * len(ids)})


def agree(t: lk.Table, what: str) -> None:
    assert mdt_state(t.path) == (kept_partitions(t.path), True), what
    check_mdt(t.path, what)
    assert rows(t.read()) == hudi_rows(t.path), f"hudi reader {what}"


@pytest.mark.interop
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_every_action_keeps_the_metadata_table(tmp_path, table_type):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(batch(0))
    agree(t, "after the first upsert (the MDT built from a listing, then the commit's delta commit)")
    steps = [
        ("upsert", lambda: t.upsert(batch(1, ids=(1, 4)))),
        ("insert", lambda: t.insert(batch(2, ids=(5,)))),
        ("bulk_insert", lambda: t.bulk_insert(batch(3, ids=(6, 7)))),
        ("delete", lambda: t.delete([2])),
        ("merge", lambda: t.merge(batch(4, ids=(1, 8))).when_matched_update_all().when_not_matched_insert_all()
         .execute()),
        ("insert_overwrite", lambda: t.insert_overwrite(batch(5, ids=(3,)))),
        ("compaction", lambda: t.maintenance.compact() if table_type == "mor" else None),
        ("clustering", lambda: t.maintenance.cluster(small_file_limit=1 << 40)),
        ("clean", lambda: t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)),
        ("savepoint", lambda: t.maintenance.savepoint()),
        ("upsert after the savepoint", lambda: t.upsert(batch(6, ids=(1, 9)))),
        ("restore", lambda: t.maintenance.restore(t.maintenance.savepoints()[-1])),
        ("upsert to roll back", lambda: t.upsert(batch(8, ids=(1, 11)))),
        ("rollback of the last commit", lambda: t.maintenance.rollback(t.timeline.commits.instants[-1].requested)),
        ("archival", lambda: t.maintenance.archive(min_commits=2, max_commits=3)),
        ("upsert after all", lambda: t.upsert(batch(7, ids=(2, 10)))),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        for what, step in steps:
            step()
            agree(t, f"after {what}")


def test_an_existing_table_gets_its_metadata_table_from_a_listing(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=None))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(2, 4)))
    assert mdt_state(t.path) == ((), False)          # metadata=None: none created
    reader = t.maintenance.create_metadata_table()
    assert reader.partitions() == ["p=a", "p=b"]
    agree(t, "after create_metadata_table()")
    assert t.maintenance.create_metadata_table().partitions() == ["p=a", "p=b"]   # kept as it is
    t.upsert(batch(2, ids=(5,)))                     # metadata=None keeps the MDT the table has
    agree(t, "after an upsert with metadata=None")
    t.with_options(metadata=False).upsert(batch(3, ids=(6,)))
    assert mdt_state(t.path) == ((), False) and not (Path(t.path) / METADATA_DIR).exists()
    t.with_options(metadata=True).upsert(batch(4, ids=(7,)))
    agree(t, "after an upsert with metadata=True built it again")


def test_a_pending_write_is_not_listed_until_it_commits(tmp_path):
    """The MDT built while another write is pending lists the completed instants only; the
    pending write's files come with its own delta commit."""
    from lakesdk.services.transaction import InstantTransaction
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts")
    t.upsert(batch(0))
    built = []
    real = InstantTransaction.commit

    def commit(self, *args, **kwargs):
        if not built:                     # another handle builds the MDT while this write is pending
            built.append(t.maintenance.create_metadata_table().listings())
        return real(self, *args, **kwargs)
    mp = pytest.MonkeyPatch()
    mp.setattr(InstantTransaction, "commit", commit)
    try:
        t.upsert(batch(1, ids=(4,)))
    finally:
        mp.undo()
    agree(t, "after the pending write committed")


def test_partition_names_beyond_ascii_are_read_by_prefix_from_log_blocks(tmp_path):
    """The files of a partition read by key prefix (as partition statistics read them) include
    those its log blocks add, whatever the partition's name."""
    from lakesdk.read.metadata_table import MetadataTableReader
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    for i, p in enumerate(["Zürich", "東京", "a b", "Zürich"]):
        t.upsert(pa.table({"id": [i], "p": [p], "ts": [i]}))
    reader = MetadataTableReader(t.storage, t.context.store.load())
    names = ["p=Zürich", "p=東京", "p=a b"]
    assert reader.partition_files(names) == {lst.partition: lst.files for lst in reader.listings()}
    assert len(reader.partition_files(["p=Zürich"])["p=Zürich"]) == 2


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_savepoint_in_progress_leaves_the_commit_it_saves_listed(tmp_path, table_type):
    """A savepoint has the time of the commit it saves: while it is pending, that commit's
    delta commit still counts (found by the service soak: its files left the listing, so a
    compaction planned without them and racing writes read an older file slice)."""
    from lakesdk.format.instant import Instant
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(batch(0))
    saved = t.upsert(batch(1, ids=(1, 2, 3, 4)))
    store = t.context.store
    requested = Instant("savepoint", "requested", saved.instant)
    store.create(requested)
    store.transition(requested, "inflight")         # a savepoint of the commit, in progress
    want = [(k, "v1") for k in (1, 2, 3, 4)]
    assert sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_arrow().to_pylist()) == want
    t.upsert(batch(2, ids=(1,)))        # the index finds key 1 in the slice the saved commit wrote
    assert sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_arrow().to_pylist()) == \
        [(1, "v2")] + want[1:]
    check_mdt(t.path, "with a savepoint in progress")


def test_version_6_tables_refuse_to_build_one(tmp_path):
    from ..corpus_model import SHARED, copy_table, unpack_corpus
    if not SHARED.is_dir():
        pytest.skip("the conformance corpus is not beside the project")
    corpus = unpack_corpus(tmp_path / "corpus")
    t = lk.open_table(copy_table(corpus, "sample_table/cow/v6_nonpartitioned", tmp_path))
    with pytest.raises(lk.UnsupportedTableVersionError, match="version 6"):
        t.maintenance.create_metadata_table()


def test_check_compares_the_metadata_table_with_storage(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(2, 4)))
    assert t.inspect.check().ok
    # the last delta commit's log file lost: the files of the last upsert are not listed
    logs = sorted((Path(t.path) / METADATA_DIR / "files").glob(".files-*"))
    logs[-1].unlink()
    report = t.inspect.check()
    assert report.names == ["metadata_table_mismatch"]
    assert [p.detail for p in report.problems if "does not list" in p.detail] and len(report.problems) == 1


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_the_metadata_table_compacts_every_n_delta_commits(tmp_path, table_type):
    """hoodie.metadata.compact.max.delta.commits: the files partition gets a new base HFile of
    the merged records (deletions applied), and readers read one base file and a few log files."""
    from lakesdk.read.metadata_table import MetadataTableReader
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_compact_every=3))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    for i in range(10):
        t.upsert(batch(i, ids=(i % 4, 10 + i)))
        if i % 4 == 3:
            t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
        agree(t, f"after write {i}")
    mdt = MetadataTableReader(t.storage, t.timeline)
    compactions = [i for i in mdt.store.load().completed if i.action == "compaction"]
    assert len(compactions) == 2          # three or more ran; the MDT's clean keeps the two latest
    [sl] = mdt.slices("files")
    assert sl.base_instant == compactions[-1].requested and len(sl.log_files) <= 3
    from lakesdk.format.hfile import HFileReader
    from lakesdk.format.metadata_records import decode_record
    base = HFileReader(mdt.mdt.read(sl.base_path))
    schema = base.file_info[b"schema"].decode()
    assert not any(e.deleted for k, v in base for e in (decode_record(v, schema, key=k).files or {}).values())


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_with_a_metadata_table_planning_lists_no_data_partition(tmp_path, table_type, monkeypatch):
    """Reads and writes plan from the metadata table's files partition: no listing of the
    table's data partitions (on an object store, a LIST per partition)."""
    from lakesdk.storage import Storage
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    for i in range(3):
        t.upsert(batch(i, ids=(i, 10 + i)))
    listed: list[str] = []
    for name in ("find", "list"):
        real = getattr(Storage, name)

        def spy(self, rel="", *args, _real=real, name=name, **kwargs):
            if not self.base_url.rstrip("/").endswith("/.hoodie/metadata") and not str(rel).startswith(".hoodie"):
                listed.append(f"{name}({rel!r})")
            return _real(self, rel, *args, **kwargs)
        monkeypatch.setattr(Storage, name, spy)
    assert len(t.read().to_arrow()) == 6
    t.upsert(batch(5, ids=(1, 20)))
    t.delete([10])
    assert listed == []
    monkeypatch.undo()
    agree(t, "after planning from the metadata table")


@pytest.mark.interop
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_the_metadata_table_cleans_its_old_file_slices_and_instants(tmp_path, table_type):
    """After each compaction of the MDT, the file slices and instants before the previous one go:
    its files and timeline stay bounded however many commits the table takes, and it still lists
    exactly the table's files (the hudi reader reads from it)."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_compact_every=2))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    sizes = []
    for i in range(14):
        t.upsert(batch(i, ids=(i % 4, 10 + i)))
        mdt = Path(t.path) / METADATA_DIR
        files = [f for f in mdt.rglob("*") if f.is_file() and ".hoodie" not in f.relative_to(mdt).parts]
        sizes.append((len(files), len(list((mdt / ".hoodie/timeline").glob("*")))))
    agree(t, "after 14 upserts with an MDT compacted every 2 delta commits")
    # four file groups (files, two of column_stats, partition_stats): 14 commits leave 56+ files uncleaned
    assert all(f <= 27 and n <= 18 for f, n in sizes[4:]), sizes
    assert not any((Path(t.path) / METADATA_DIR / "files").glob("*_00000000000000000.hfile")), "the first base file went"


def delta_commit_records(t: lk.Table, instant: str) -> dict[str, dict[str, int]] | None:
    """The ``files`` records of the MDT delta commit of ``instant`` (key -> the record's file
    names and sizes), or None when it wrote no log file there; fails unless it completed."""
    from lakesdk.format.log_block import hfile_block_items, read_log_file
    from lakesdk.format.metadata_records import decode_record
    mdt = Path(t.path) / METADATA_DIR
    done = [f.name for f in (mdt / ".hoodie/timeline").glob(f"{instant}_*.deltacommit")]
    assert done, f"no completed MDT delta commit of {instant}"
    logs = list((mdt / "files").glob(f".files-0000-0_{instant}.log.*"))
    if not logs:
        return None
    [block] = read_log_file(logs[0].read_bytes())
    schema = block.header[next(k for k in block.header if k.name == "SCHEMA")]
    return {k.decode(): {n: e.size for n, e in (decode_record(v, schema, key=k).files or {}).items()}
            for k, v in hfile_block_items(block)}


@pytest.mark.interop
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_of_no_file_has_its_metadata_table_delta_commit(tmp_path, table_type):
    """As Apache Hudi's writer (HoodieBackedTableMetadataWriter.update), every write completes an
    MDT delta commit at its instant time, one that wrote no file too (a delete of absent keys):
    its block holds the partition list alone, naming no partition.
    Those delta commits count toward the MDT's compaction (Hudi's data-table archival keeps
    every instant after the MDT's latest compaction), which still lists the table's files."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_compact_every=3))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(batch(0))
    steps = [("delete of an absent key", lambda i: t.delete([100 + i])),
             ("delete matching no row", lambda i: t.delete(where=f"id = {200 + i}"))]
    for i in range(8):
        what, step = steps[i % 2]
        result = step(i)
        assert result.instant and result.files == 0, what
        assert delta_commit_records(t, result.instant) == {"__all_partitions__": {}}, what
        agree(t, f"after the {what} {i}")
    from lakesdk.read.metadata_table import MetadataTableReader
    mdt = MetadataTableReader(t.storage, t.timeline)
    assert [i for i in mdt.store.load().completed if i.action == "compaction"], "empty delta commits count"
    t.upsert(batch(9, ids=(1, 5)))
    agree(t, "after an upsert following the compactions")


@pytest.mark.interop
def test_a_clean_that_deletes_nothing_has_its_metadata_table_delta_commit(tmp_path, monkeypatch):
    """Hudi's writer commits an MDT delta commit for every clean, with a record of each
    partition it cleaned: a clean whose deletes all failed (the files stay, and stay listed)
    has one whose records name no file."""
    from lakesdk.storage import Storage
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(3):
        t.upsert(batch(i))
    real = Storage.delete

    def failing(self, rel, *args, **kwargs):
        if str(rel).endswith(".parquet") and not self.base_url.rstrip("/").endswith("/.hoodie/metadata"):
            raise OSError(f"refused: {rel}")
        return real(self, rel, *args, **kwargs)
    monkeypatch.setattr(Storage, "delete", failing)
    result = t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    monkeypatch.undo()
    assert result is not None and result.failed and not result.deleted
    assert delta_commit_records(t, result.instant) == {"p=a": {}, "p=b": {}}
    agree(t, "after a clean that deleted nothing")
