"""One snapshot per operation: how often an upsert and a read load the timeline and build a
file-system view (each load is a LIST of the timeline on an object store, each view a listing
of the table or a read of the metadata table's ``files`` partition).

A single writer's upsert loads the data table's timeline twice: to plan (the write's snapshot,
after which its view lists the files and checks them, and its instant takes a time after the
snapshot's), and for the metadata table's delta commit at the commit point.  Under optimistic
concurrency three times: to plan, under the table lock to create its instant at a time later
than every instant (the view lists again when a clean, restore or archival ran since), and at
the commit point under the lock (which passes it on to the metadata table's delta commit).  The
view does not read the timeline again after its listing, as a read's does: the instant's
creation does that check, and a file found missing before it makes the write read the timeline
again then.  It builds one view that lists files, used by the check before its instant, the key
index and the merge.  The metadata table's timeline is loaded once by that view's listing and
once by the delta commit.  A read loads the timeline to plan and once after its view's listing
(with the metadata table, the listing as of a timeline a clean has passed still names the files
the clean deleted: only the second load shows it)."""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.read.view import FileSystemView
from lakesdk.timeline.store import TimelineStore


@pytest.fixture
def counted(monkeypatch):
    counts: collections.Counter[str] = collections.Counter()
    load, init = TimelineStore.timeline_of, FileSystemView.__init__

    def counting_load(self, *a, **k):     # a timeline made of a listing: loaded, or listed with other calls
        counts["mdt_loads" if self.storage.base_url.rstrip("/").endswith(".hoodie/metadata") else "loads"] += 1
        return load(self, *a, **k)

    def counting_init(self, *a, **k):
        counts["listing_views" if k.get("files") is None else "views_of_given_files"] += 1
        return init(self, *a, **k)
    monkeypatch.setattr(TimelineStore, "timeline_of", counting_load)
    monkeypatch.setattr(FileSystemView, "__init__", counting_init)
    return counts


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("concurrency", ["single_writer", "optimistic"])
def test_an_upsert_loads_the_timeline_two_or_three_times_and_lists_once(tmp_path, counted, table_type, concurrency):
    opts = lk.TableOptions(engine="local", concurrency=concurrency)
    t = lk.Lake(str(tmp_path), options=opts).create_table("t", key="id", partition_by="p", ordering="ts",
                                                           table_type=table_type)
    t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [1, 1, 1]}))
    assert (tmp_path / "t" / ".hoodie" / "metadata" / "files").exists()
    counted.clear()
    t.upsert(pa.table({"id": [1, 4], "p": ["a", "b"], "ts": [2, 2]}))
    assert counted["loads"] == (2 if concurrency == "single_writer" else 3), counted
    assert counted["listing_views"] == 1, counted
    assert counted["mdt_loads"] == 2, counted
    assert counted["views_of_given_files"] <= 1, counted     # the partition statistics' slices after the commit


def test_a_read_loads_the_timeline_twice_and_lists_once(tmp_path, counted):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", partition_by="p", ordering="ts")
    t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [1, 1, 1]}))
    counted.clear()
    assert t.read(where="id > 1").to_arrow().num_rows == 2
    assert counted == {"loads": 2, "listing_views": 1, "mdt_loads": 1}, counted


def test_a_read_binds_its_filter_once(tmp_path, monkeypatch):
    """The plan binds the filter to the schema and carries it (and the output columns) to the
    executor: neither the query nor the executor binds it again."""
    from lakesdk.read.predicate import Predicate
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", partition_by="p", ordering="ts")
    t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [1, 1, 1]}))
    binds = []
    bind = Predicate.bind

    def counting(self, *a, **k):
        binds.append(str(self))
        return bind(self, *a, **k)
    monkeypatch.setattr(Predicate, "bind", counting)
    q = t.read(where="id > 1 and p = 'a'")
    for run in (lambda: q.to_arrow().num_rows, lambda: q.to_batches().read_all().num_rows, q.count):
        binds.clear()
        assert run() == 1
        assert len(binds) == 1, binds
    plan = q.plan()
    assert plan.row_filter is not None and plan.columns == ("id", "p", "ts")
    assert plan.columns == tuple(q.to_arrow().column_names)


def test_a_plan_reads_the_commit_metadata_of_the_timeline_at_once(tmp_path, monkeypatch):
    """The commit files a plan needs are read together (on an object store, one round trip
    for all rather than one per commit: bench/listing.py), each parsed once; a read answers
    as before."""
    import threading

    from lakesdk.storage import Storage
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", partition_by="p", ordering="ts")
    for k in range(4):
        t.upsert(pa.table({"id": [k], "p": ["a"], "ts": [1]}))
    readers: collections.Counter[str] = collections.Counter()
    read = Storage.read

    def watched(self, path, *a, **kw):
        if "/timeline/" in path and not path.startswith(".hoodie/metadata") and path.endswith(".commit"):
            readers[threading.current_thread().name.split("_")[0]] += 1
        return read(self, path, *a, **kw)
    monkeypatch.setattr(Storage, "read", watched)
    store = TimelineStore(t.storage, t.config)
    FileSystemView(t.storage, t.config, store, store.load()).verify()
    assert readers == {"timeline": 4}, readers          # every commit file, by the prefetch's threads
    assert sorted(lk.open_table(t.path).read().to_pandas().id) == [0, 1, 2, 3]
