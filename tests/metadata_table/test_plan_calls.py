"""What planning from the metadata table asks of storage: the MDT's calls go through the table's
own storage (a wrapper that counts or delays calls sees them), a handle does not read an MDT
file again that it read before unchanged, a file changed since is read again, and a handle
whose first write built the MDT plans from it without asking storage whether there is one."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.format.metadata_table import METADATA_DIR, metadata_partitions
from lakesdk.read import metadata_table, view_cache
from lakesdk.storage import Storage

from ..helpers import hudi_rows, rows


def batch(i: int, ids=(1, 2, 3)) -> pa.Table:
    return pa.table({"id": list(ids), "p": ["a" if k % 2 else "b" for k in ids], "ts": [i] * len(ids),
                     "v": [f"v{i}"] * len(ids)})


class Recording(Storage):
    """Local storage that records every read and existence check, by URL."""

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.calls: Counter[tuple[str, str]] = Counter()

    def read(self, rel: str, *args, **kwargs) -> bytes:
        self.calls[("read", self.url(rel))] += 1
        return super().read(rel, *args, **kwargs)

    def exists(self, rel: str) -> bool:
        self.calls[("exists", self.url(rel))] += 1
        return super().exists(rel)


def test_a_child_storage_is_of_the_same_class_and_shares_its_state(tmp_path):
    s = Recording(str(tmp_path))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x").write_bytes(b"1")
    c = s.child("m")
    assert type(c) is Recording and c.base_url == s.url("m") and c.read("x") == b"1"
    assert s.calls[("read", s.url("m/x"))] == 1       # counted where the parent counts


def _table(tmp_path: Path, table_type: str) -> lk.Table:
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    for i in range(3):
        t.upsert(batch(i, ids=(i, 10 + i)))
    return t


def _on(t: lk.Table, storage: Storage) -> lk.Table:
    from lakesdk.table.table import Table
    return Table(storage, options=t.options)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_handle_reads_an_unchanged_mdt_file_once(tmp_path, table_type):
    t = _table(tmp_path, table_type)
    s = Recording(t.path)
    h = _on(t, s)
    assert "files" in metadata_partitions(h.config.props)
    metadata_table._RAW.clear()
    first = rows(h.read())
    mdt_files = {u for (op, u) in s.calls if op == "read" and f"{METADATA_DIR}/files/" in u}
    assert mdt_files, "the first plan reads the files partition's file slice"
    s.calls.clear()
    assert rows(h.read()) == first
    again = {u for (op, u) in s.calls if op == "read" and f"{METADATA_DIR}/files/" in u}
    assert again == set(), f"read again though unchanged: {sorted(again)}"


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_an_mdt_file_changed_since_it_was_read_is_read_again(tmp_path, table_type):
    t = _table(tmp_path, table_type)
    s = Recording(t.path)
    h = _on(t, s)
    first = rows(h.read())
    files = sorted((Path(t.path) / METADATA_DIR / "files").glob("*"), key=lambda p: p.name)
    newest = [p for p in files if p.is_file() and not p.name.endswith(".crc")][-1]
    data = newest.read_bytes()
    # the same size and new bytes, another modified time: read again (here: refused, damaged)
    newest.write_bytes(bytes(len(data)))
    st = newest.stat()
    os.utime(newest, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    # a plan of the same timeline takes the files this process listed against it (the answer
    # for that timeline, whatever became of the MDT's bytes since): no MDT file read
    s.calls.clear()
    assert rows(h.read()) == first
    assert not [u for (op, u) in s.calls if op == "read" and f"{METADATA_DIR}/" in u]
    view_cache.clear()      # as a new process: the MDT read again
    with pytest.raises(lk.LakeError):
        h.read().to_arrow()
    # cut short: read again too
    newest.write_bytes(data[: len(data) // 2])
    with pytest.raises(lk.LakeError):
        h.read().to_arrow()


def test_the_handle_whose_first_write_built_the_mdt_plans_from_it(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    assert "files" not in metadata_partitions(t.config.props)
    t.upsert(batch(0))
    assert "files" in metadata_partitions(t.config.props), "the handle knows the MDT its write built"
    s = Recording(t.path)
    h = _on(t, s)
    assert rows(h.read()) == rows(t.read())
    assert not [u for (op, u) in s.calls if op == "exists" and u.endswith(METADATA_DIR)]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_handle_reads_an_mdt_built_again_under_the_same_file_names(tmp_path, table_type):
    """The MDT dropped by a writer that keeps none and built again by the next (its first base
    file has the name the first one had): the handle that read the first reads the second."""
    t = _table(tmp_path, table_type)
    h = _on(t, Recording(t.path))
    rows(h.read())
    names = {p.name for p in (Path(t.path) / METADATA_DIR / "files").glob("*")}
    off = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=False)).table("t")
    with pytest.warns(lk.MetadataTableDroppedWarning):
        off.upsert(batch(7, ids=(1, 30)))
    lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True)).table("t").upsert(
        batch(8, ids=(2, 31)))
    assert names & {p.name for p in (Path(t.path) / METADATA_DIR / "files").glob("*")}, "a file name again"
    fresh = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=False)).table("t")
    assert rows(h.read()) == rows(fresh.read()) == hudi_rows(t.path)


def test_on_an_object_store_the_mdt_is_listed_while_its_timeline_is(tmp_path):
    """The MDT's timeline and its ``files`` partition are listed at the same time on storage
    that is not a local file system (``memory://`` here): the timeline's listing waits until the
    partition's has started, which one after the other would never do."""
    import threading
    import uuid
    started = threading.Event()
    waited: list[bool] = []

    class Gated(Storage):
        def list(self, rel: str = ""):
            mdt = self.base_url.rstrip("/").endswith(METADATA_DIR)
            if mdt and rel == "files":
                started.set()
            elif mdt and rel == ".hoodie/timeline" and gate_on:
                waited.append(started.wait(30))
            return super().list(rel)

    gate_on = False
    url = f"memory://plan-calls-{uuid.uuid4().hex}"
    lake = lk.Lake(url, options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(1, 4)))
    h = _on(t, Gated(t.path))
    gate_on = True
    assert rows(h.read()) == rows(t.read())
    assert waited and all(waited), waited


class Counting(Recording):
    """Recording that records listings and every other read of storage too."""

    def list(self, rel: str = ""):
        self.calls[("list", self.url(rel))] += 1
        return super().list(rel)

    def find(self, rel: str = ""):
        self.calls[("find", self.url(rel))] += 1
        return super().find(rel)

    def open_input(self, rel: str):
        self.calls[("open_input", self.url(rel))] += 1
        return super().open_input(rel)

    def size(self, rel: str) -> int:
        self.calls[("size", self.url(rel))] += 1
        return super().size(rel)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_plan_of_a_timeline_planned_before_lists_its_timeline_only(tmp_path, table_type):
    """The process keeps a table's files as its MDT listed them against a timeline
    (lakesdk.read.view_cache): a plan of the same timeline (any handle) lists the timeline and
    asks storage nothing else; a write (by another handle) changes the timeline, and the next plan
    reads the MDT and sees it; a filtered read of a kept listing reads the MDT's statistics."""
    t = _table(tmp_path, table_type)
    s = Counting(t.path)
    h = _on(t, s)
    first = rows(h.read())
    plan = h.read().plan()
    s.calls.clear()
    assert rows(h.read()) == first
    timeline = s.url(t.config.timeline_dir)
    assert {c for c in s.calls if "/.hoodie/" in c[1] or c[0] != "read"} == {("list", timeline)}, sorted(s.calls)
    assert _on(t, Counting(t.path)).read().plan().slices == plan.slices     # another handle
    t.upsert(batch(5, ids=(1, 40)))
    s.calls.clear()
    got = rows(h.read())
    assert got == rows(lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=False)).table("t").read())
    assert got != first and [u for (op, u) in s.calls if op == "read" and f"{METADATA_DIR}/" in u]
    s.calls.clear()
    assert h.read(where="id = 40").plan().skipped_slices > 0       # the MDT read when asked: its statistics
    assert h.read(where="id = 40").to_arrow().column("id").to_pylist() == [40]

