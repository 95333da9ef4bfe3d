"""Concurrent schema evolution: the eight RFC-82 scenarios with really overlapping writers,
the unit cases S1-S17 and the multi-writer cases M1-M21 of the schema-conflict case table
(docs/concurrency-cases.md maps each case to its test), and the reconcile option.

The racing writers run as in tests/concurrency/test_concurrency_cases.py (``helpers.Held`` and the fixture
``gates``): each in its own thread, held after its data files are written and before its commit
until the case lets it go."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.concurrency.schema_conflicts import SchemaEvolutionConflictError, resolve_concurrent_schema
from lakesdk.format.commit_metadata import CommitMetadata

from ..helpers import Held, handle

pytestmark = pytest.mark.usefixtures("gates")       # every write given to Held is held before its commit

S1 = pa.schema([("field1", pa.string())])
S2 = pa.schema([("field1", pa.string()), ("field2", pa.int32())])
S3 = pa.schema([("field1", pa.string()), ("field3", pa.bool_())])


@pytest.mark.parametrize("start,validation,writer,expected", [
    pytest.param(None, None, S1, S1, id="S1"),     # scenario 1
    pytest.param(None, S1, S1, S1, id="S7"),       # scenario 2
    pytest.param(S1, S1, S1, S1, id="S8"),         # scenario 4
    pytest.param(S1, S1, S2, S2, id="S10"),        # scenario 5
    pytest.param(S1, S2, S1, S2, id="S9"),         # scenario 6: the newer table schema is recorded
    pytest.param(S1, S2, S2, S2, id="S11"),        # scenario 7
])
def test_s_resolution_no_conflict(start, validation, writer, expected):
    assert resolve_concurrent_schema(start, validation, writer).equals(expected)


@pytest.mark.parametrize("start,validation,writer", [pytest.param(None, S1, S2, id="S6"),    # scenario 3
                                                     pytest.param(S1, S2, S3, id="S12")])   # scenario 8
def test_s_resolution_conflicts(start, validation, writer):
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
OPTS = dict(engine="local", concurrency="optimistic", lock="in_process")


def data(part: str, cols: list[str], key: int, ts: bool = False) -> pd.DataFrame:
    row = {"id": key, "p": part, "v": "x"}
    if ts:
        row["ts"] = 1
    row.update({c: 1 for c in cols})
    return pd.DataFrame([row])


def new_table(tmp_path, *, reconcile=False, table_type="cow"):
    opts = lk.TableOptions(schema_reconcile=reconcile, **OPTS)
    ordering = "ts" if table_type == "mor" else None
    return lk.Lake(str(tmp_path), options=opts).create_table("s", key="id", partition_by="p",
                                                             table_type=table_type, ordering=ordering)


def race(t, *, other: list[str] | None, mine: list[str]):
    """``mine`` is written by a held writer while the rival commits ``other`` (None: no
    rival) in another partition (no file-group conflict); returns the held write's result."""
    me, rival = handle(t), handle(t)
    w = Held(me, lambda: me.upsert(data("c", mine, 3)))
    if other is not None:
        rival.upsert(data("b", other, 2))
    return w.finish()


SCENARIOS = [
    # initial, other, mine, conflict, final extra columns
    pytest.param(None, None, ["a1"], False, ["a1"], id="scenario1"),
    pytest.param(None, ["a1"], ["a1"], False, ["a1"], id="scenario2"),
    pytest.param(None, ["a2"], ["a3"], True, ["a2"], id="scenario3"),
    pytest.param(["a1"], ["a1"], ["a1"], False, ["a1"], id="scenario4"),
    pytest.param(["a1"], ["a1"], ["a1", "a2"], False, ["a1", "a2"], id="scenario5"),
    pytest.param(["a1"], ["a1", "a2"], ["a1"], False, ["a1", "a2"], id="scenario6"),
    pytest.param(["a1"], ["a1", "a2"], ["a1", "a2"], False, ["a1", "a2"], id="scenario7"),
    pytest.param(["a1"], ["a1", "a2"], ["a1", "a3"], True, ["a1", "a2"], id="scenario8"),
]


@pytest.mark.parametrize("initial,other,mine,conflict,final", SCENARIOS)
def test_rfc82_scenarios_with_racing_writers(tmp_path, initial, other, mine, conflict, final):
    t = new_table(tmp_path)
    if initial is not None:
        t.upsert(data("a", initial, 1))
    if conflict:
        with pytest.raises(SchemaEvolutionConflictError, match="Detected incompatible concurrent schema evolution"):
            race(t, other=other, mine=mine)
        assert not t.timeline.pending
    else:
        race(t, other=other, mine=mine)
    assert lk.open_table(t.path).schema.names == ["id", "p", "v", *final]


def test_scenario8_reconciled_when_evolvable(tmp_path):
    t = new_table(tmp_path, reconcile=True)
    t.upsert(data("a", ["a1"], 1))
    race(t, other=["a1", "a2"], mine=["a1", "a2", "a3"])
    assert lk.open_table(t.path).schema.names == ["id", "p", "v", "a1", "a2", "a3"]
    t2 = new_table(tmp_path / "x", reconcile=True)
    t2.upsert(data("a", ["a1"], 1))
    race(t2, other=["a1", "a2"], mine=["a1", "a3"])   # each writer added a column: unified
    assert lk.open_table(t2.path).schema.names == ["id", "p", "v", "a1", "a2", "a3"]


# -- S3/S4: a writer without a schema of its own (a delete writes the table schema it started with)
def test_s3_s4_delete_racing_a_schema_change_keeps_the_newer_schema(tmp_path):
    t = new_table(tmp_path)
    t.upsert(pd.concat([data("a", [], 1), data("a", [], 2)]))
    me, rival = handle(t), handle(t)
    w = Held(me, lambda: me.delete(pd.DataFrame({"id": [2], "p": ["a"]})))
    rival.upsert(data("b", ["a1"], 5))          # the table schema evolves while the delete runs
    w.finish()
    t2 = lk.open_table(t.path)
    assert t2.schema.names == ["id", "p", "v", "a1"]          # not reverted by the delete's commit
    assert sorted(t2.read().to_pandas().id) == [1, 5]


# -- S13/M20: table services do not evolve the schema --------------------------------------------
def service_overtaken_by_a_schema_change(monkeypatch, task: str, service, meanwhile) -> list[BaseException]:
    """Run ``service()`` in a thread, hold it inside ``lakesdk.engine.tasks.<task>`` (its
    schema is resolved, its files are being written), run ``meanwhile()`` to completion,
    then let the service finish; returns the errors the service raised."""
    import threading

    from lakesdk.engine import local, tasks
    reached, go = threading.Event(), threading.Event()
    original = getattr(tasks, task)

    def held(*a, **k):
        reached.set()
        assert go.wait(60)
        return original(*a, **k)
    for module in (tasks, local):       # the local engine calls some tasks by the names it imported
        if getattr(module, task, None) is original:
            monkeypatch.setattr(module, task, held)
    errors: list[BaseException] = []

    def run():
        try:
            service()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    th = threading.Thread(target=run)
    th.start()
    assert reached.wait(60)
    meanwhile()
    go.set()
    th.join(60)
    return errors


def test_s13_m20_compaction_completing_after_a_schema_change_keeps_it(tmp_path, monkeypatch):
    t = new_table(tmp_path, table_type="mor")
    t.upsert(pd.concat([data("a", [], 1, ts=True), data("a", [], 2, ts=True)]))
    t.upsert(data("a", [], 1, ts=True).assign(v="y"))
    plan = t.maintenance.schedule_compaction()
    errors = service_overtaken_by_a_schema_change(      # the upsert evolves the schema, completes first
        monkeypatch, "compact_file_slice", lambda: t.maintenance.compact(plan.instant),
        lambda: handle(t).upsert(data("b", ["a1"], 5, ts=True)))
    assert not errors and not t.timeline.pending        # S13: the compaction is not checked, never fails
    t2 = lk.open_table(t.path)
    assert t2.schema.names == ["id", "p", "v", "ts", "a1"]
    got = t2.read().to_pandas().set_index("id")
    assert got.loc[1, "v"] == "y" and got.loc[5, "a1"] == 1


def test_s14_clustering_completing_after_a_schema_change_keeps_it(tmp_path, monkeypatch):
    t = new_table(tmp_path)
    t.bulk_insert(pd.concat([data("a", [], 1), data("a", [], 2)]))
    t.bulk_insert(data("a", [], 3))
    plan = t.maintenance.schedule_clustering(small_file_limit=10 * 1024 * 1024)
    errors = service_overtaken_by_a_schema_change(      # the upsert evolves the schema, completes first
        monkeypatch, "write_clustered_file", lambda: t.maintenance.cluster(plan.instant),
        lambda: handle(t).upsert(data("b", ["a1"], 5)))
    assert not errors and not t.timeline.pending        # the clustering is not checked, never fails
    assert [i for i in t.timeline if i.action == "clustering" and i.is_completed]
    t2 = lk.open_table(t.path)
    assert t2.schema.names == ["id", "p", "v", "a1"]
    assert sorted(t2.read().to_pandas().id) == [1, 2, 3, 5]


# -- M1-M21: TestHoodieClientMultiWriter.testHoodieClientWithSchemaConflictResolution ------------
def empty_commit(t, schema_attr: str | None = None) -> None:
    """A completed commit whose metadata carries no schema (null, or an empty string)."""
    store = t.context.store
    action = "deltacommit" if t.config.is_mor else "commit"
    inst = store.create_new(action, after=store.load().max_time())
    inst = store.transition(inst, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())
    extra = {} if schema_attr is None else {"schema": schema_attr}
    store.transition(inst, "completed", CommitMetadata(operation_type="UPSERT", extra_metadata=extra).to_avro())


E1, E2 = ["e1"], ["e2"]       # TRIP_EXAMPLE_SCHEMA_EVOLVED_1 and _2: S0 plus one column each
S0: list[str] = []

M_CASES = [
    # case, initial ("yes" / "no" / "empty"), type, W1, W2, conflict, final extra columns
    ("M1", "yes", "mor", S0, S0, False, S0),
    ("M2", "no", "mor", S0, S0, False, S0),
    ("M3", "empty", "mor", S0, S0, False, S0),
    ("M4", "yes", "cow", S0, E1, False, E1),
    ("M5", "yes", "mor", S0, E1, False, E1),
    ("M6", "yes", "cow", E1, S0, False, E1),
    ("M7", "yes", "mor", E1, S0, False, E1),
    ("M8", "empty", "cow", E1, S0, True, E1),
    ("M9", "no", "mor", E1, S0, True, E1),
    ("M10", "empty", "mor", E1, S0, True, E1),
    ("M11", "yes", "cow", E1, E1, False, E1),
    ("M12", "yes", "mor", E1, E1, False, E1),
    ("M13", "yes", "cow", E1, E2, True, E1),
    ("M14", "yes", "mor", E1, E2, True, E1),
    ("M15", "no", "cow", E1, E2, True, E1),
    ("M16", "no", "mor", E1, E2, True, E1),
    ("M17", "empty", "cow", E1, E2, True, E1),
    ("M18", "empty", "mor", E1, E1, False, E1),
]


@pytest.mark.parametrize("case,initial,kind,w1,w2,conflict,final", M_CASES, ids=[c[0] for c in M_CASES])
def test_m_multi_writer_schema_resolution(tmp_path, case, initial, kind, w1, w2, conflict, final):
    """M1-M18, with the M19 count and M21 (commits without a schema) on every row.  The
    table service between the commits (M20) is a compaction on merge-on-read and a
    clustering on copy-on-write (which gets one more initial commit: a second file group)."""
    t = new_table(tmp_path, table_type=kind)
    mor = kind == "mor"
    if initial == "yes":
        t.upsert(pd.concat([data("a", [], k, ts=mor) for k in range(5)]))          # 0011 insert
        t.upsert(pd.concat([data("a", [], k, ts=mor) for k in range(3)]).assign(v="u"))   # 0012 upsert
        if not mor:
            t.bulk_insert(pd.concat([data("a", [], k, ts=mor) for k in range(5, 8)]))   # a 2nd group to cluster
    elif initial == "empty":
        empty_commit(t)                                                           # 0013
    h1, h2 = handle(t), handle(t)
    txn1 = Held(h1, lambda: h1.upsert(data("b", w1, 21, ts=mor)))                  # 0021 starts
    txn2 = Held(h2, lambda: h2.upsert(data("c", w2, 31, ts=mor)))                  # 0031 starts
    service = None                                                                # 0032
    if initial == "yes":
        service = t.maintenance.schedule_compaction() if mor else \
            t.maintenance.schedule_clustering(small_file_limit=10 * 1024 * 1024)
    txn1.finish()                                                                 # 0021 always commits
    if service is not None:
        (t.maintenance.compact if mor else t.maintenance.cluster)(service.instant)
    empty_commit(t, None)                                                         # 0033: schema null
    empty_commit(t, "")                                                           # 0034: schema ""
    if conflict:
        with pytest.raises(SchemaEvolutionConflictError, match="Detected incompatible concurrent schema evolution"):
            txn2.finish()
    else:
        txn2.finish()
    t2 = lk.open_table(t.path)
    assert t2.schema.names == ["id", "p", "v", *(["ts"] if mor else []), *final]
    completed = [i for i in t2.timeline.completed
                 if i.action in ("commit", "deltacommit", "compaction", "clustering")]
    initial_commits = {"yes": 2 if mor else 3, "no": 0, "empty": 1}[initial]
    expect = initial_commits + 1 + (service is not None) + 2 + (not conflict)   # M19
    assert len(completed) == expect and not t2.timeline.pending
    assert txn1.result.instant in {i.requested for i in completed}
