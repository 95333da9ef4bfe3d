"""The process's listings from the metadata table (lakesdk.read.view_cache): what a view of a
timeline planned before takes from it, when it checks the timeline again, and what it keeps."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

import lakesdk as lk
from lakesdk.read import view_cache
from lakesdk.read.view import FileSystemView


def _table(tmp_path, n: int = 3) -> lk.Table:
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(n):
        t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [i] * 3, "v": [f"v{i}"] * 3}))
    return t


def _view(t: lk.Table, timeline, **kw) -> FileSystemView:
    ctx = t.context
    return FileSystemView(ctx.storage, ctx.config, ctx.store, timeline, **kw)


def _entry(t: lk.Table, timeline) -> view_cache.Listed | None:
    ctx = t.context
    return view_cache.get(view_cache.key_of(ctx.storage, ctx.config, timeline))


def test_a_view_from_the_cache_checks_the_timeline_again_unless_fresh(tmp_path):
    """A view whose files are kept for its timeline reads the timeline again, as a listing does:
    a clean that started since (here: one that deleted the slices it needs) makes it list again
    against the newer timeline, as without the cache.  A read's plan, which read the timeline
    just before (``fresh``), takes them without."""
    t = _table(tmp_path)
    old = t.context.store.load()
    _view(t, old).latest_slices()
    assert _entry(t, old) is not None
    other = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True)).table("t")
    other.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "ts": [9] * 3, "v": ["v9"] * 3}))
    other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    v = _view(t, old)
    assert v.timeline is not old and v.timeline.max_time() > old.max_time()
    assert all(t.storage.exists(s.base_path) for s in v.latest_slices() if s.base_path)
    now = t.context.store.load()
    _view(t, now).latest_slices()
    calls = []
    store = t.context.store
    load = store.load
    store.load = lambda: calls.append(1) or load()     # type: ignore[method-assign]
    try:
        assert _view(t, now).timeline is now and len(calls) == 1
        assert _view(t, now, fresh=True).timeline is now and len(calls) == 1
    finally:
        store.load = load               # type: ignore[method-assign]


def test_an_entry_keeps_the_file_groups_of_a_few_moments(tmp_path):
    """Time travel to many moments of one timeline keeps the file groups of the latest state and
    of at most MAX_MOMENTS others (each is a copy of the table's file groups)."""
    t = _table(tmp_path, n=8)
    tl = t.context.store.load()
    assert _view(t, tl).file_groups
    for c in tl.commits:
        assert _view(t, tl, as_of=c.requested).file_groups
    entry = _entry(t, tl)
    assert entry is not None and (None, "requested") in entry.built
    assert sum(m[0] is not None for m in entry.built) == view_cache.MAX_MOMENTS


def test_only_the_newest_timeline_read_from_storage_is_kept(tmp_path):
    """A timeline a caller made (not read) is not kept, nor one read before the kept one; a
    later one takes the place of the table's entry."""
    t = _table(tmp_path)
    ctx = t.context
    tl = ctx.store.load()
    _view(t, tl).latest_slices()
    made = dataclasses.replace(tl, instants=tl.instants[:-1], loaded_at=0.0)
    _view(t, made).latest_slices()
    assert _entry(t, made) is None and _entry(t, tl) is not None
    earlier = dataclasses.replace(tl, instants=tl.instants[:-1], loaded_at=tl.loaded_at - 1)
    assert view_cache.keep(ctx.storage, ctx.config, earlier, [], []) is None and _entry(t, tl) is not None
    t.upsert(pa.table({"id": [4], "p": ["b"], "ts": [5], "v": ["x"]}))
    t.read().to_arrow()
    assert _entry(t, tl) is None and _entry(t, ctx.store.load()) is not None


def test_views_that_show_replaced_file_groups_build_their_own(tmp_path):
    """Archival and clean see the file groups a replace hid (they set ``replaced`` to none):
    their views neither take nor keep the shared file groups, which keep hiding them."""
    t = _table(tmp_path)
    t.insert_overwrite(pa.table({"id": [7], "p": ["a"], "ts": [1], "v": ["o"]}))
    want = sorted(t.read().to_arrow().column("id").to_pylist())
    tl = t.context.store.load()
    hidden = {(g.partition, g.file_id) for g in _view(t, tl).file_groups}
    every = _view(t, tl)
    every.replaced = set()
    shown = {(g.partition, g.file_id) for g in every.file_groups}
    assert hidden < shown
    assert {(g.partition, g.file_id) for g in _view(t, tl).file_groups} == hidden
    assert sorted(t.read().to_arrow().column("id").to_pylist()) == want


def test_views_of_other_threads_add_their_moments_at_once():
    """Views of one entry in several threads add what they built and checked at the same time
    (a dictionary counted while another thread grew it raised RuntimeError)."""
    import sys
    import threading
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []
    try:
        for _ in range(300):
            entry = view_cache.Listed([], [], 1.0)
            moments = [(None, "requested"), (None, "completed")] + [(f"2024010100000{k}", "requested")
                                                                    for k in range(6)]
            barrier = threading.Barrier(len(moments))

            def work(m, entry=entry, barrier=barrier):
                barrier.wait()
                try:
                    view_cache.add_built(entry, m, ({}, [], None))
                    view_cache.add_verified(entry, m)
                except BaseException as e:      # noqa: BLE001 - collected, asserted below
                    errors.append(e)
            threads = [threading.Thread(target=work, args=(m,)) for m in moments]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert not errors, errors[0]
            assert sum(m[0] is not None for m in entry.built) == view_cache.MAX_MOMENTS
    finally:
        sys.setswitchinterval(switch)
