"""Archival racing a write: a write whose commit check needs a commit that archival moves into
the timeline history while the write runs must still see it (the conflict check reads its
metadata from the history), and a write whose snapshot held a pending write that completed
and was archived before the write's instant was created must plan against that write's files.

Found by the race of two writers against an archival loop (tests/services/test_service_races.py):
a commit that completed between a write's snapshot and its requested instant is not protected
by archival's pending-write bound (that bound keeps what completed after the instant), so it
could be archived, and the write's update of the same file group landed over it unchecked."""

from __future__ import annotations

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.services import rollback as rollback_module
from lakesdk.services.transaction import InstantTransaction

from ..helpers import hudi_rows


def _rows(ids, v, p="a"):
    return pd.DataFrame({"id": list(ids), "p": [p] * len(ids), "v": [v] * len(ids)})


def _tables(tmp_path, table_type):
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="p", table_type=table_type)
    return t, lk.open_table(t.path, concurrency="optimistic", lock="in_process")


def _once(monkeypatch, t, moment, fn):
    """Run ``fn`` once when a write of ``t`` reaches ``moment``: ``"snapshot"`` (it has read its
    timeline and listed its files) or ``"instant"`` (its instant exists); returns the list that
    then holds ``fn``'s result."""
    done: list = []
    cls, name = (None, "rollback_failed_writes") if moment == "snapshot" else (InstantTransaction, "start")
    original = getattr(rollback_module if cls is None else cls, name)

    def hook(first, *a, **kw):
        ctx = first if cls is None else first.ctx
        if not done and ctx is t.context:
            done.append(fn())
        return original(first, *a, **kw)
    monkeypatch.setattr(rollback_module if cls is None else cls, name, hook)
    return done


def _archived(other, instant) -> bool:
    """Archive ``other``'s table keeping one commit; whether ``instant`` went."""
    return instant in {i.requested for i in other.maintenance.archive(min_commits=1, max_commits=2).archived}


def _land_then_fill(other, ids, fillers, p):
    """``other`` updates ``ids`` in partition a, then writes ``fillers`` commits into partition
    ``p`` (so that archival can take the first); the first commit's instant."""
    instant = other.upsert(_rows(ids, "other")).instant
    for i in range(fillers):
        other.upsert(_rows([10 + i], "filler", p=p))
    return instant


def _read(t):
    df = t.read().to_pandas()
    assert df.id.is_unique, f"duplicate keys {sorted(df.id[df.id.duplicated()])}"
    return dict(zip(df.id, df.v))


def test_commit_completed_after_the_snapshot_and_archived_during_the_write_is_checked(tmp_path, monkeypatch):
    """(Copy-on-write: on merge-on-read tables the other write's log files, read by the latest
    file slice, keep its delta commit active.)"""
    t, other = _tables(tmp_path, "cow")
    t.upsert(_rows([1, 2], "base"))
    other_write = _once(monkeypatch, t, "snapshot", lambda: _land_then_fill(other, [1, 2], 4, "b"))
    archived = _once(monkeypatch, t, "instant", lambda: _archived(other, other_write[0]))
    try:
        t.upsert(_rows([1], "mine"))
        landed = True
    except lk.WriteConflictError as e:
        assert e.other_instant == other_write[0]
        landed = False
    assert archived == [True]
    got = _read(t)
    assert not landed and got[1] == "other" and got[2] == "other"    # never lost over the other's update
    assert hudi_rows(t.path) == sorted(got.items())


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_write_pending_at_the_snapshot_then_archived_before_the_instant_is_planned_against(tmp_path, monkeypatch,
                                                                                          table_type):
    """The other write was pending when this one read its timeline (its files were not the
    table's yet), then completed and was archived before this write created its instant
    (a savepoint kept the commit this write had seen active): the write's files are listed
    again, so its update of a key the other write inserted goes to that key's file group."""
    from lakesdk.table import transaction as open_instants
    t, other = _tables(tmp_path, table_type)
    x = open_instants.begin(other)
    stats, schema = open_instants.write_batch(other, x, _rows([1, 2], "other"))
    seen = t.upsert(_rows([5], "seen", p="b"))
    t.maintenance.savepoint(seen.instant)

    def land_and_archive():                     # the pending write lands and is archived
        instant = open_instants.commit(other, x, stats, schema=schema).instant
        for i in range(3):
            other.upsert(_rows([10 + i], "filler", p="c"))
        return _archived(other, instant)
    archived = _once(monkeypatch, t, "snapshot", land_and_archive)
    t.upsert(_rows([1], "mine"))
    assert archived == [True]
    got = _read(t)
    assert got == {1: "mine", 2: "other", 5: "seen", 10: "filler", 11: "filler", 12: "filler"}
    assert hudi_rows(t.path) == sorted(got.items())


def test_write_to_a_table_without_commits_whose_racing_commits_were_archived_lists_again(tmp_path, monkeypatch):
    """The snapshot held no commit for archival to take first: the commits made and archived
    before the write's instant leave no gone instant behind, only new ones."""
    t, other = _tables(tmp_path, "cow")
    archived = _once(monkeypatch, t, "snapshot", lambda: _archived(other, _land_then_fill(other, [1, 2], 3, "b")))
    t.upsert(_rows([1], "mine"))
    assert archived == [True]
    got = _read(t)
    assert got == {1: "mine", 2: "other", 10: "filler", 11: "filler", 12: "filler"}
    assert hudi_rows(t.path) == sorted(got.items())


def test_a_racing_write_rolled_back_while_this_one_runs_is_no_conflict(tmp_path, monkeypatch):
    t, other = _tables(tmp_path, "cow")
    t.upsert(_rows([1], "base"))
    racing = _once(monkeypatch, t, "snapshot", lambda: other.upsert(_rows([5], "other", p="b")).instant)
    rolled = _once(monkeypatch, t, "instant", lambda: other.maintenance.rollback(racing[0]))
    t.upsert(_rows([1], "mine"))
    assert len(rolled) == 1
    assert _read(t) == {1: "mine"}


# -- writes computed from rows they read ---------------------------------------------------------------
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_computed_from_rows_a_write_changed_since_conflicts(tmp_path, monkeypatch, table_type):
    """A merge setting ``n = t.n + 1`` read n = 1; an update to n = 10 lands before the merge
    commits: the merge fails with a conflict (on merge-on-read tables too, where two plain log
    appends do not conflict), never n = 2 over the update."""
    from lakesdk.table import local_merge
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", table_type=table_type)
    t.upsert(pd.DataFrame({"id": [1, 2], "n": [1, 1]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = local_merge._read_target
    landed = []

    def read_then_a_write_lands(*a, **kw):
        out = original(*a, **kw)
        if not landed:
            landed.append(other.upsert(pd.DataFrame({"id": [1], "n": [10]})).instant)
        return out
    monkeypatch.setattr(local_merge, "_read_target", read_then_a_write_lands)
    src = pd.DataFrame({"id": [1], "d": [1]})
    with pytest.raises(lk.WriteConflictError) as e:
        t.merge(src, on="id").when_matched_update({"n": "t.n + s.d"}).execute()
    assert e.value.other_instant == landed[0]
    df = t.read().to_pandas()
    assert dict(zip(df.id, df.n)) == {1: 10, 2: 1}


def test_delete_where_of_rows_a_write_changed_since_conflicts(tmp_path, monkeypatch):
    """``delete(where="n = 1")`` read the keys of the rows matching it; an update moves one of
    them out of the predicate before the delete commits: a conflict, the row kept."""
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id")
    t.upsert(pd.DataFrame({"id": [1, 2], "n": [1, 5]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = type(t)._keys_where
    landed = []

    def read_then_a_write_lands(self, where):
        out = original(self, where)
        if not landed:
            landed.append(other.upsert(pd.DataFrame({"id": [1], "n": [7]})).instant)
        return out
    monkeypatch.setattr(type(t), "_keys_where", read_then_a_write_lands)
    with pytest.raises(lk.WriteConflictError):
        t.delete(where="n = 1")
    df = t.read().to_pandas()
    assert dict(zip(df.id, df.n)) == {1: 7, 2: 5}


@pytest.mark.parametrize("when", ["before_reading", "after_writing"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_read_by_this_one_and_rolled_back_meanwhile_is_a_conflict(tmp_path, monkeypatch, table_type, when):
    """This write planned against the latest commit, which is rolled back while it runs: before
    it read the commit's files (they are gone: a conflict, not a bare missing file), or after
    it wrote its own (a rewrite of the file group would bring the rolled-back rows back: a
    conflict; a merge-on-read log append holds only its own rows and lands)."""
    from lakesdk.table.write import WriteOperation
    t, other = _tables(tmp_path, table_type)
    t.upsert(_rows([1, 2], "base"))
    undone = other.upsert(_rows([1], "rolled back")).instant
    hooks: list[str] = []
    cls, name = (InstantTransaction, "start") if when == "before_reading" else (WriteOperation, "_finalize")
    original = getattr(cls, name)

    def then_roll_back(self, *a, **kw):
        owner = self.ctx if cls is InstantTransaction else self.table.context
        if not hooks and owner is t.context:
            other.maintenance.rollback(undone)
            hooks.append("rolled back")
        return original(self, *a, **kw)
    monkeypatch.setattr(cls, name, then_roll_back)
    if table_type == "mor" and when == "after_writing":
        t.upsert(_rows([2], "mine"))
        assert hooks and _read(t) == {1: "base", 2: "mine"}
        assert hudi_rows(t.path) == [(1, "base"), (2, "mine")]
        return
    with pytest.raises(lk.WriteConflictError, match=undone):
        t.upsert(_rows([2], "mine"))
    assert hooks and _read(t) == {1: "base", 2: "base"}


def test_a_column_added_by_a_commit_planned_against_after_a_clean_is_never_dropped(tmp_path, monkeypatch):
    """A clean ran after this write read its timeline, so its files are listed again at its
    instant, and it plans against the commits landed meanwhile; one of them added a column to
    the file group this write rewrites: the write, planned with the older schema, stops with a
    schema conflict instead of rewriting the file group without the column."""
    t, other = _tables(tmp_path, "cow")
    t.upsert(_rows([1, 2], "base"))

    def add_a_column_then_clean():
        other.upsert(_rows([1], "other").assign(c=["new column"]))
        return other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    cleaned = _once(monkeypatch, t, "snapshot", add_a_column_then_clean)
    with pytest.raises(lk.SchemaEvolutionConflictError):
        t.upsert(_rows([2], "mine"))
    assert cleaned and cleaned[0] is not None
    df = t.read().to_pandas()
    assert dict(zip(df.id, df.c)) == {1: "new column", 2: None}


def test_a_write_committing_while_a_commit_it_read_is_being_rolled_back_is_a_conflict(tmp_path, monkeypatch):
    """The rollback of the latest commit is in flight (its plan written, its files not yet
    deleted) while a write that read that commit's files commits: a conflict, or the write's
    rewrite would keep the rolled-back rows once the rollback deletes the commit's files."""
    import threading

    import lakesdk.markers as markers
    t, other = _tables(tmp_path, "cow")
    t.upsert(_rows([1, 2], "base"))
    undone = other.upsert(_rows([1], "rolled back")).instant
    planned, go = threading.Event(), threading.Event()
    original = markers.marked_data_files

    calls: list[str] = []

    def paused(storage, instant):      # planning the rollback lists the markers, then executing it
        if threading.current_thread().name == "rollback":   # does again, inflight with its plan:
            calls.append(instant)                           # it waits there
        if threading.current_thread().name == "rollback" and calls.count(undone) == 2:
            planned.set()
            assert go.wait(120)
        return original(storage, instant)
    monkeypatch.setattr(markers, "marked_data_files", paused)
    errors: list[BaseException] = []

    def roll_back():
        try:
            other.maintenance.rollback(undone)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    rb = threading.Thread(target=roll_back, name="rollback")
    rb.start()
    try:
        assert planned.wait(120)
        with pytest.raises(lk.WriteConflictError, match=undone):
            t.upsert(_rows([2], "mine"))
    finally:
        go.set()
        rb.join(120)
    assert not errors and _read(t) == {1: "base", 2: "base"}


def test_a_merge_whose_read_spans_an_archival_of_older_commits_lands(tmp_path, monkeypatch):
    """Archival of older commits while a merge reads (no write lands meanwhile) leaves nothing
    the merge's check could miss: it lands."""
    from lakesdk.table import local_merge
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id")
    for i in range(4):
        t.upsert(pd.DataFrame({"id": [i], "n": [1]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = local_merge._read_target
    archived = []

    def read_then_archive(*a, **kw):
        out = original(*a, **kw)
        if not archived:
            archived.append(len(other.maintenance.archive(min_commits=1, max_commits=2).archived))
        return out
    monkeypatch.setattr(local_merge, "_read_target", read_then_archive)
    t.merge(pd.DataFrame({"id": [0], "d": [1]}), on="id").when_matched_update({"n": "t.n + s.d"}).execute()
    assert archived[0] >= 1
    df = t.read().to_pandas()
    assert dict(zip(df.id, df.n)) == {0: 2, 1: 1, 2: 1, 3: 1}


def test_merge_into_a_table_without_commits_is_checked_from_its_read(tmp_path, monkeypatch):
    """The merge read an empty timeline (no rows: key 1 is not matched, so it inserts it); a write
    of key 1 lands before the merge commits: a conflict, not the merge's insert over that row."""
    from lakesdk.table import local_merge
    t, other = _tables(tmp_path, "cow")
    original = local_merge.local_merge_plan
    landed = []

    def planned_then_a_write_lands(*a, **kw):     # (a table without commits has no target to read)
        out = original(*a, **kw)
        if not landed:
            landed.append(other.upsert(_rows([1], "other")).instant)
        return out
    monkeypatch.setattr(local_merge, "local_merge_plan", planned_then_a_write_lands)
    with pytest.raises(lk.WriteConflictError):
        t.merge(_rows([1], "merged"), on="id").when_not_matched_insert_all().execute()
    assert landed
    assert _read(t) == {1: "other"}


def test_a_dead_writers_instant_rolled_back_by_a_merge_into_a_table_without_commits_is_no_conflict(tmp_path):
    """A writer killed before its first commit completed leaves the table's only instant
    pending; the next merge (or delete by predicate) rolls it back when it creates its own, and
    the rollback is no sign of archival (it undid an instant the merge's read saw pending): the
    merge lands (found by the model test: it raised a WriteConflictError asking to run it again)."""
    import os
    import subprocess
    import sys
    import textwrap
    t = lk.Lake(str(tmp_path)).create_table("t", key="id", partition_by="p")
    writer = textwrap.dedent("""
        import os, sys
        os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
        import pandas as pd, lakesdk as lk
        t = lk.open_table(sys.argv[1])
        t.upsert(pd.DataFrame({"id": [9], "p": ["a"], "v": ["dead"]}))
    """)
    r = subprocess.run([sys.executable, "-c", writer, t.path], env={**os.environ, "LAKESDK_CRASH_AT": "after_data"},
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == -9, r.stderr[-2000:]
    assert [i.state for i in t.timeline.instants] == ["inflight"]
    t.merge(_rows([1, 2], "merged"), on="id").when_not_matched_insert_all().execute()
    assert _read(t) == {1: "merged", 2: "merged"}
    assert not lk.open_table(t.path).timeline.pending
    assert sorted(hudi_rows(t.path)) == sorted((k, v) for k, v in _read(t).items())
