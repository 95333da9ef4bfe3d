"""Concurrent schema evolution: the eight RFC-82 scenarios with racing writers, the unit
cases S1-S17 of schema-conflict.md that apply, and the reconcile option."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.concurrency.schema_conflicts import SchemaEvolutionConflictError, resolve_concurrent_schema
from lakesdk.table.write import WriteOperation

S1 = pa.schema([("field1", pa.string())])
S2 = pa.schema([("field1", pa.string()), ("field2", pa.int32())])
S3 = pa.schema([("field1", pa.string()), ("field3", pa.bool_())])


@pytest.mark.parametrize("start,validation,writer,expected", [
    (None, None, S1, S1),       # S1 / scenario 1
    (None, S1, S1, S1),         # S7 / scenario 2
    (S1, S1, S1, S1),           # S8 / scenario 4
    (S1, S1, S2, S2),           # S10 / scenario 5
    (S1, S2, S1, S2),           # S9 / scenario 6: the newer table schema is recorded
    (S1, S2, S2, S2),           # S11 / scenario 7
])
def test_resolution_no_conflict(start, validation, writer, expected):
    assert resolve_concurrent_schema(start, validation, writer).equals(expected)


@pytest.mark.parametrize("start,validation,writer", [(None, S1, S2), (S1, S2, S3)])   # S6 (scenario 3), S12 (8)
def test_resolution_conflicts(start, validation, writer):
    with pytest.raises(SchemaEvolutionConflictError, match="Detected incompatible concurrent schema evolution"):
        resolve_concurrent_schema(start, validation, writer, table="t", instant="0040")


def test_reconcile_option_unifies_evolvable_schemas():
    s4 = pa.schema([("field1", pa.string()), ("field2", pa.int32()), ("field3", pa.bool_())])
    assert resolve_concurrent_schema(S1, S2, s4, reconcile=True).names == ["field1", "field2", "field3"]
    # S3 added field3 while S2 added field2: both kept field1, so they unify
    assert resolve_concurrent_schema(S1, S2, S3, reconcile=True).names == ["field1", "field2", "field3"]
    clash = pa.schema([("field1", pa.string()), ("field2", pa.string())])   # field2 as text vs int
    with pytest.raises(SchemaEvolutionConflictError):
        resolve_concurrent_schema(S1, S2, clash, reconcile=True)
    with pytest.raises(SchemaEvolutionConflictError):   # a writer that dropped field1 is not evolvable
        resolve_concurrent_schema(S1, S2, pa.schema([("field9", pa.string())]), reconcile=True)


# -- racing writers --------------------------------------------------------------------------------
def data(part: str, cols: list[str], key: int) -> pd.DataFrame:
    row = {"id": key, "p": part, "v": "x"}
    row.update({c: 1 for c in cols})
    return pd.DataFrame([row])


def race(tmp_path, monkeypatch, *, initial: list[str] | None, other: list[str] | None, mine: list[str],
         reconcile: bool = False):
    """``initial``: columns of a first commit (None: no commit); ``other``: columns the racing
    writer commits while this write is in flight (None: no race); ``mine``: this write's columns."""
    opts = lk.TableOptions(concurrency="optimistic", schema_reconcile=reconcile)
    lake = lk.Lake(str(tmp_path), options=opts)
    t = lake.create_table("s", key="id", partition_by="p")
    if initial is not None:
        t.upsert(data("a", initial, 1))
    rival = lk.open_table(t.path, options=opts)
    original = WriteOperation._finalize

    def racing(self, ctx, stats, partitions):
        if other is not None and self.table is t and not getattr(racing, "done", False):
            racing.done = True
            rival.upsert(data("b", other, 2))       # another partition: no file-group conflict
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing)
    return t, (lambda: t.upsert(data("c", mine, 3)))


SCENARIOS = [
    # (scenario, initial, other, mine, conflict, final extra columns)
    (1, None, None, ["a1"], False, ["a1"]),
    (2, None, ["a1"], ["a1"], False, ["a1"]),
    (3, None, ["a2"], ["a3"], True, ["a2"]),
    (4, ["a1"], ["a1"], ["a1"], False, ["a1"]),
    (5, ["a1"], ["a1"], ["a1", "a2"], False, ["a1", "a2"]),
    (6, ["a1"], ["a1", "a2"], ["a1"], False, ["a1", "a2"]),
    (7, ["a1"], ["a1", "a2"], ["a1", "a2"], False, ["a1", "a2"]),
    (8, ["a1"], ["a1", "a2"], ["a1", "a3"], True, ["a1", "a2"]),
]


@pytest.mark.parametrize("scenario,initial,other,mine,conflict,final", SCENARIOS, ids=[f"scenario{s[0]}" for s in SCENARIOS])
def test_rfc82_scenarios_with_racing_writers(tmp_path, monkeypatch, scenario, initial, other, mine, conflict, final):
    t, write = race(tmp_path, monkeypatch, initial=initial, other=other, mine=mine)
    if conflict:
        with pytest.raises(SchemaEvolutionConflictError, match="Detected incompatible concurrent schema evolution"):
            write()
        assert not t.timeline.pending
    else:
        write()
    assert lk.open_table(t.path).schema.names == ["id", "p", "v", *final]


def test_scenario8_reconciled_when_evolvable(tmp_path, monkeypatch):
    t, write = race(tmp_path, monkeypatch, initial=["a1"], other=["a1", "a2"], mine=["a1", "a2", "a3"],
                    reconcile=True)
    write()
    assert lk.open_table(t.path).schema.names == ["id", "p", "v", "a1", "a2", "a3"]
    t2, write2 = race(tmp_path / "x", monkeypatch, initial=["a1"], other=["a1", "a2"], mine=["a1", "a3"],
                      reconcile=True)
    write2()   # each writer added a column: unified
    assert lk.open_table(t2.path).schema.names == ["id", "p", "v", "a1", "a2", "a3"]
