"""The transaction journal: one record per write under optimistic concurrency, with every
field filled, for committed writes, lost races, schema conflicts and failures."""

from __future__ import annotations

import os
import socket
import threading

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.concurrency.journal import JOURNAL_DIR, TransactionRecord, Transactions, read_transactions
from lakesdk.table import transaction as txn_mod
from lakesdk.table.write import WriteOperation

from ..helpers import city_batch as rows


def occ_table(tmp_path, **kw):
    opts = lk.TableOptions(engine="local", **kw)
    return lk.Lake(str(tmp_path), options=opts, concurrency="optimistic", lock="in_process").create_table(
        "t", key="id", partition_by="city")


def race(t, other, monkeypatch, mine, theirs):
    """``t`` writes ``mine``; just before its commit, ``other`` commits ``theirs``."""
    original = WriteOperation._finalize
    fired = []

    def racing(self, ctx, stats, partitions):
        if not fired and self.table is t:
            fired.append(other.upsert(theirs))
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing)
    try:
        t.upsert(mine)
    finally:
        monkeypatch.setattr(WriteOperation, "_finalize", original)
    return fired


def test_committed_write_fills_every_field(tmp_path):
    t = occ_table(tmp_path)
    first = t.upsert(rows(range(4), "a"))
    second = t.upsert(rows([1, 9], "b"))
    recs = t.inspect.transactions()
    assert [r.instant for r in recs] == [first.instant, second.instant]
    r = recs.get(second.instant)
    assert r.outcome == "committed" and r.won and r.action == "commit" and r.operation == "upsert"
    assert r.writer == f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"
    assert 0 < r.started_ms <= r.ended_ms and r.seconds >= 0
    fids = set(t.inspect.file_groups()["file_id"].to_pylist())
    assert r.file_groups and {f for _, f in r.file_groups} <= fids and {p for p, _ in r.file_groups} == {"city=sf"}
    assert r.conflicts_with is None and r.reason == ""
    cols = [("id", "int64"), ("city", "string"), ("v", "string")]
    assert list(r.schema) == cols and list(r.schema_at_start) == cols and list(r.schema_at_commit) == cols
    assert recs.get(first.instant).schema_at_start is None          # the table had no schema yet
    # the on-disk record is the documented JSON, one file per write
    names = sorted(e.name for e in t.storage.list(JOURNAL_DIR))
    assert names == [f"{first.instant}.commit.json", f"{second.instant}.commit.json"]


def test_lost_race_points_at_the_winner(tmp_path, monkeypatch):
    t = occ_table(tmp_path)
    t.upsert(rows(range(10), "base"))
    other = lk.open_table(t.path, options=t.options)
    with pytest.raises(lk.WriteConflictError) as e:
        race(t, other, monkeypatch, rows([2], "loser"), rows([1], "winner"))
    winner = other.inspect.transactions()[-1]
    assert winner.outcome == "committed"
    loser = next(r for r in t.inspect.transactions() if r.outcome == "conflict")
    assert loser.instant != winner.instant and loser.instant in str(e.value)
    cw = loser.conflicts_with
    assert cw["instant"] == winner.instant == e.value.other_instant
    assert cw["action"] == "commit" and cw["file_groups"] and tuple(cw["file_groups"][0]) in winner.file_groups
    assert loser.file_groups and loser.reason == str(e.value) and loser.ended_ms >= loser.started_ms
    assert loser.schema and loser.schema_at_start and loser.schema_at_commit


def test_schema_conflict_keeps_the_three_schemas(tmp_path, monkeypatch):
    t = occ_table(tmp_path)
    t.upsert(rows(range(3), "base"))
    other = lk.open_table(t.path, options=t.options)
    mine = rows([1], "x").assign(mine=1)
    theirs = rows([7], "y", city="nyc").assign(theirs="t")
    with pytest.raises(lk.WriteConflictError, match="schema"):
        race(t, other, monkeypatch, mine, theirs)
    rec = next(r for r in t.inspect.transactions() if r.outcome == "schema_conflict")
    names = lambda s: [n for n, _ in s]  # noqa: E731
    assert names(rec.schema_at_start) == ["id", "city", "v"]
    assert names(rec.schema) == ["id", "city", "v", "mine"]
    assert names(rec.schema_at_commit) == ["id", "city", "v", "theirs"]
    assert "schema" in rec.reason


def test_failed_write_is_journaled(tmp_path, monkeypatch):
    t = occ_table(tmp_path)
    t.upsert(rows(range(3), "base"))

    def boom(self, *a, **k):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(WriteOperation, "_finalize", boom)
    with pytest.raises(RuntimeError):
        t.upsert(rows([1], "x"))
    rec = t.inspect.transactions()[-1]
    assert rec.outcome == "failed" and rec.reason == "disk on fire" and rec.conflicts_with is None
    assert rec.file_groups                                  # what it had written before failing
    assert not t.timeline.pending


def test_single_writer_keeps_no_journal(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id")
    t.upsert(pd.DataFrame({"id": [1], "v": ["a"]}))
    assert len(t.inspect.transactions()) == 0 and not t.storage.exists(JOURNAL_DIR)


def test_open_instant_commit_and_abort_are_journaled(tmp_path):
    t = occ_table(tmp_path)
    txn = txn_mod.begin(t)
    stats, schema = txn_mod.write_batch(t, txn, rows(range(3), "p"))
    txn_mod.commit(t, txn, stats, schema=schema)
    bad = txn_mod.begin(t)
    txn_mod.write_batch(t, bad, rows([5], "q"))
    txn_mod.abort(t, bad)
    recs = t.inspect.transactions()
    ok, aborted = recs.get(txn.instant), recs.get(bad.instant)
    assert ok.outcome == "committed" and ok.file_groups and ok.schema and ok.started_ms <= ok.ended_ms
    assert aborted.outcome == "failed" and aborted.reason == "aborted" and aborted.file_groups


def test_transactions_view_repr_html_and_pandas(tmp_path, monkeypatch):
    t = occ_table(tmp_path)
    t.upsert(rows(range(10), "base"))
    other = lk.open_table(t.path, options=t.options)
    with pytest.raises(lk.WriteConflictError):
        race(t, other, monkeypatch, rows([2], "<loser>"), rows([1], "winner"))
    recs = t.inspect.transactions()
    assert len(recs) == 3 and len(recs.committed) == 2 and len(recs.lost) == 1
    text = repr(recs)
    assert text.startswith("<Transactions 't': 3 writes (2 committed, 1 conflict)")
    assert f"vs {recs.lost[0].conflicts_with['instant']}" in text
    html = recs._repr_html_()
    assert "<table>" in html and html.count("<tr>") == 4 and "conflict" in html
    df = recs.to_pandas()
    lost = recs.lost[0]
    assert list(df.outcome) == [r.outcome for r in recs]
    assert df[df.instant == lost.instant].conflicts_with.item() == lost.conflicts_with["instant"]
    assert isinstance(recs[:1], Transactions) and len(recs[:1]) == 1
    assert "transactions()" in repr(t.inspect)


def test_torn_records_are_skipped(tmp_path):
    t = occ_table(tmp_path)
    t.upsert(rows([1], "a"))
    t.storage.write(f"{JOURNAL_DIR}/20990101000000000.commit.json", b"{not json")
    assert [r.outcome for r in read_transactions(t.storage)] == ["committed"]
    r = TransactionRecord.from_json(read_transactions(t.storage)[0].to_json())
    assert r == read_transactions(t.storage)[0]
