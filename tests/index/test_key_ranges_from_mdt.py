"""The key index takes each base file's record key range from the metadata table's
``column_stats`` (the statistics of ``_hoodie_record_key``): a file whose range holds none of the
incoming keys of its partition is not read at all, neither its footer nor its keys.  Without
the statistics (no metadata table, or a table whose index leaves the column out) every
candidate file's footer is read as before.  Either way an upsert finds every stored key."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine import key_index as K


def _spy(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = K.footer_of

    def footer_of(storage, path):
        seen.append(path)
        return real(storage, path)
    monkeypatch.setattr(K, "footer_of", footer_of)
    return seen


def _table(tmp_path, metadata: bool) -> lk.Table:
    lake = lk.Lake(str(tmp_path / ("mdt" if metadata else "plain")), options=lk.TableOptions(engine="local", metadata=metadata))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for k in range(4):   # four files a partition, with the key ranges a000-a099, b000-b099, ...
        ids = [f"{'abcd'[k]}{i:03d}" for i in range(100)]
        t.bulk_insert(pa.table({"id": ids, "p": ["x" if i % 2 else "y" for i in range(100)], "ts": [1] * 100}))
    return t


@pytest.mark.parametrize("budget", [None, 0])
@pytest.mark.parametrize("metadata", [True, False])
def test_an_upsert_reads_only_the_files_whose_key_range_holds_its_keys(tmp_path, monkeypatch, metadata, budget):
    if budget is not None:    # the keys sorted once and each range sought in them
        monkeypatch.setattr(K, "RANGE_CHECK_BUDGET", budget)
    t = _table(tmp_path, metadata)
    seen = _spy(monkeypatch)
    res = t.upsert(pa.table({"id": ["b001", "b003", "e000"], "p": ["x", "x", "x"], "ts": [2, 2, 2]}))
    assert (res.updated, res.inserted) == (2, 1)
    if metadata:
        assert len(seen) == 1, seen        # only the file of b000-b099 in p=x
    else:
        assert len(seen) == 4, seen        # every file of p=x: its footer holds its key range
    rows = t.read().to_arrow()
    assert rows.num_rows == 401 and len(set(rows.column("id").to_pylist())) == 401
    got = dict(zip(rows.column("id").to_pylist(), rows.column("ts").to_pylist()))
    assert got["b001"] == got["b003"] == got["e000"] == 2 and got["b002"] == 1


@pytest.mark.parametrize("metadata", [True, False])
def test_no_footer_is_read_where_its_bloom_filter_would_not_be_asked(tmp_path, monkeypatch, metadata):
    """Forty keys in the range of a file of 50 rows: its bloom filter would not be asked (the
    keys are read anyway), so with the metadata table's range and row count its footer is not
    read at all; without them every file of the partition's footer is."""
    t = _table(tmp_path, metadata)
    seen = _spy(monkeypatch)
    ids = [f"b{i:03d}" for i in range(40)]
    res = t.upsert(pa.table({"id": ids, "p": ["x"] * 40, "ts": [2] * 40}))
    assert (res.updated, res.inserted) == (20, 20)       # the odd ids are stored in x, the even ones in y
    assert len(seen) == (0 if metadata else 4), seen
    rows = t.read().to_arrow()
    assert rows.num_rows == 420
    got = {(i, p): ts for i, p, ts in zip(rows.column("id").to_pylist(), rows.column("p").to_pylist(),
                                          rows.column("ts").to_pylist())}
    assert all(got[(i, "x")] == 2 for i in ids) and got[("b000", "y")] == 1 and ("b001", "y") not in got


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=st.lists(st.lists(st.text("abcé😀", min_size=1, max_size=4), min_size=1, max_size=12, unique=True),
                        min_size=1, max_size=4),
       upsert=st.lists(st.text("abcé😀", min_size=1, max_size=4), min_size=1, max_size=10, unique=True))
@pytest.mark.parametrize("budget", [K.RANGE_CHECK_BUDGET, 0])
def test_upserts_find_every_stored_key_with_the_ranges(tmp_path_factory, budget, batches, upsert):
    """Keys of any characters (beyond U+FFFF too: the statistics order by code point, Hudi's
    footers by UTF-16), written in several files, then upserted: every key once, the upserted
    ones with the new value, as with the ranges left out.  Both ways of matching the keys with
    the ranges: compared with each file's range, and sorted once and sought (``budget`` 0)."""
    from unittest import mock
    with mock.patch.object(K, "RANGE_CHECK_BUDGET", budget):
        _upsert_with_ranges(tmp_path_factory, batches, upsert)


def _upsert_with_ranges(tmp_path_factory, batches, upsert) -> None:
    root = tmp_path_factory.mktemp("ranges")
    t = lk.Lake(str(root)).create_table("t", key="id", ordering="ts")
    model: dict[str, int] = {}
    for n, ids in enumerate(batches):
        ids = [i for i in ids if i not in model]
        if ids:
            t.bulk_insert(pa.table({"id": ids, "ts": [n] * len(ids)}))
            model.update({i: n for i in ids})
    t.upsert(pa.table({"id": upsert, "ts": [99] * len(upsert)}))
    model.update({i: 99 for i in upsert})
    rows = t.read().to_arrow()
    got = dict(zip(rows.column("id").to_pylist(), rows.column("ts").to_pylist()))
    assert rows.num_rows == len(model) and got == model


def test_the_key_index_threads_follow_the_storage(monkeypatch):
    """Reads of footers and keys are CPU work on a local file system (the cores, at most 8) and
    mostly a round trip's wait on an object store (more threads than cores); ``LAKESDK_THREADS``
    sets both."""
    from lakesdk.storage import Storage
    monkeypatch.delenv("LAKESDK_THREADS", raising=False)
    local, remote = Storage("/tmp/x"), Storage("memory://x")
    assert 1 <= K.io_threads(local) <= 8
    assert K.io_threads(remote) >= K.OBJECT_STORE_READ_THREADS
    monkeypatch.setenv("LAKESDK_THREADS", "3")
    assert K.io_threads(local) == K.io_threads(remote) == 3


def test_footers_on_an_object_store_are_read_on_more_threads_than_cores(monkeypatch):
    """Twelve footers of one partition, on in-memory storage (not a local file system), are
    read at once: each read waits until all twelve have begun (a barrier: it fails when they
    run on fewer threads)."""
    import threading
    import uuid
    monkeypatch.delenv("LAKESDK_THREADS", raising=False)
    lake = lk.Lake(f"memory://io-threads-{uuid.uuid4().hex}", options=lk.TableOptions(engine="local", metadata=False))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for k in range(12):
        t.bulk_insert(pa.table({"id": [f"{k:02d}{i:02d}" for i in range(5)], "p": ["x"] * 5, "ts": [1] * 5}))
    met = threading.Barrier(12, timeout=120)
    real = K.footer_of

    def footer_of(storage, path):
        met.wait()
        return real(storage, path)
    monkeypatch.setattr(K, "footer_of", footer_of)
    res = t.upsert(pa.table({"id": [f"{k:02d}01" for k in range(12)], "p": ["x"] * 12, "ts": [2] * 12}))
    assert (res.updated, res.inserted) == (12, 0)
    lake.close()
