"""Instants opened by a coordinator and written by several participant processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.table.transaction import abort, begin, commit, write_batch

PARTICIPANT = textwrap.dedent("""
    import json, sys
    import pandas as pd
    import lakesdk as lk
    from lakesdk.table.transaction import OpenInstant, write_batch
    t = lk.open_table(sys.argv[1])
    txn = OpenInstant.from_json(sys.argv[2])
    lo, hi, ts = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    df = pd.DataFrame({"id": list(range(lo, hi)), "ts": [ts] * (hi - lo), "v": [f"p{lo}"] * (hi - lo)})
    stats, schema = write_batch(t, txn, df)
    print("RESULT" + json.dumps({"stats": stats, "schema": schema}))
""")


def participant(path, txn, lo, hi, ts):
    r = subprocess.run([sys.executable, "-c", PARTICIPANT, path, txn.to_json(), str(lo), str(hi), str(ts)],
                       capture_output=True, text=True, timeout=120)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert line, r.stderr[-3000:]
    return json.loads(line[0][6:])


def test_participants_in_processes_one_commit(tmp_path):
    t = lk.Lake(str(tmp_path)).create_table("k", key="id", ordering="ts", table_type="mor")
    t.upsert(pd.DataFrame({"id": range(0, 10), "ts": [0] * 10, "v": ["init"] * 10}))
    txn = begin(t)
    outs = [participant(t.path, txn, 0, 5, 1), participant(t.path, txn, 5, 15, 1)]
    assert t.read().to_pandas().v.eq("init").all()         # nothing visible before the commit
    res = commit(t, txn, [s for o in outs for s in o["stats"]], schema=outs[0]["schema"],
                 extra_metadata={"kafka.offsets": json.dumps({"0": 41})})
    df = t.read().to_pandas().set_index("id").sort_index()
    assert len(df) == 15 and (df.v.loc[0:4] == "p0").all() and (df.v.loc[5:14] == "p5").all()
    assert t.inspect.commit_metadata(res.instant).extra_metadata["kafka.offsets"] == '{"0": 41}'
    assert not t.timeline.pending and t.storage.list(".hoodie/.temp") == []


def test_abort_rolls_back_participant_files(tmp_path):
    t = lk.Lake(str(tmp_path)).create_table("k", key="id", ordering="ts", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1], "ts": [0], "v": ["init"]}))
    txn = begin(t)
    participant(t.path, txn, 0, 5, 1)
    abort(t, txn)
    assert t.read().to_pandas().to_dict("records") == [{"id": 1, "ts": 0, "v": "init"}]
    assert not t.timeline.pending
    assert not [f for f in t.storage.find("") if txn.instant in f.path and not f.path.startswith(".hoodie")]


def test_commit_under_optimistic_concurrency_fails_on_a_concurrent_rewrite(tmp_path):
    """A coordinator's instant that rewrote a file group a concurrent writer committed
    since it opened loses with WriteConflictError and is rolled back; the other write stays."""
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    lake.create_table("t", key="id", ordering="ts").upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "a"]}))
    path = str(tmp_path / "lake" / "t")
    t = lk.open_table(path, concurrency="optimistic", lock="storage", options=lk.TableOptions(engine="local"))
    other = lk.open_table(path, concurrency="optimistic", lock="storage", options=lk.TableOptions(engine="local"))
    from lakesdk.table.transaction import write_batch
    txn = begin(t)
    stats, schema = write_batch(t, txn, pd.DataFrame({"id": [1], "ts": [2], "v": ["txn"]}))
    other.upsert(pd.DataFrame({"id": [2], "ts": [2], "v": ["other"]}))     # same (only) file group, commits first
    try:
        commit(t, txn, stats, schema=schema)
    except lk.WriteConflictError as err:
        assert txn.instant in str(err)
    else:
        raise AssertionError("the transaction should have lost the race")
    rows = dict(zip(*[lk.open_table(path).read().to_pandas()[c] for c in ("id", "v")]))
    assert rows == {1: "a", 2: "other"}
    timeline = lk.open_table(path).timeline
    assert txn.instant not in {i.requested for i in timeline if i.action == "commit"}   # rolled back, not pending
    assert any(i.action == "rollback" for i in timeline.completed)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_refused_batch_writes_nothing_and_leaves_the_transaction_usable(tmp_path, spark, engine):
    import pyarrow as pa
    t = lk.Lake(str(tmp_path), spark=spark, options=lk.TableOptions(engine=engine)).create_table(
        "k", key="id", partition_by="p", table_type="mor")
    t.upsert(pa.table({"id": [0], "p": ["x"], "v": [0]}))
    data_files = sorted(f.path for f in t.storage.find("") if not f.path.startswith(".hoodie"))
    txn = begin(t)
    refused = [
        (pa.table({"id": [1], "p": ["a/b"], "v": [1]}), lk.InvalidPartitionValueError),
        (pa.table({"id": [1], "p": ["a"]}), lk.MissingColumnError),
        (pa.table({"id": [1], "p": ["a"], "v": pa.array([2**64 - 1], pa.uint64())}), lk.IncompatibleSchemaError),
        (spark.createDataFrame([(1, "a/b", 1)], "id long, p string, v long"), lk.InvalidPartitionValueError),
        (spark.createDataFrame([(None, "a", 1)], "id long, p string, v long"), lk.NullKeyError),
    ]
    for data, error in refused:
        with pytest.raises(error):
            write_batch(t, txn, data)
        assert sorted(f.path for f in t.storage.find("") if not f.path.startswith(".hoodie")) == data_files
        assert [i.state for i in t.timeline if i.requested == txn.instant] == ["inflight"]   # still open
    stats, schema = write_batch(t, txn, pa.table({"id": [2], "p": ["a"], "v": [2]}))
    commit(t, txn, stats, schema=schema)
    assert sorted(t.read().to_arrow().column("id").to_pylist()) == [0, 2]
    assert not t.timeline.pending and not any(i.action == "rollback" for i in t.timeline)


def _slow_writer(tmp_path):
    """An optimistic merge-on-read table of two rows and a writer with a batch written, not
    committed: (options, table, the writer's handle, its instant, stats, schema)."""
    opts = lk.TableOptions(concurrency="optimistic", lock="in_process", engine="local")
    t = lk.Lake(str(tmp_path), options=opts).create_table("t", key="id", ordering="ts", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "a"]}))
    slow = lk.open_table(t.path, options=opts)
    txn = begin(slow)
    stats, schema = write_batch(slow, txn, pd.DataFrame({"id": [1], "ts": [2], "v": ["slow"]}))
    return opts, t, slow, txn, stats, schema


def test_lazy_rollback_of_a_slow_writer_is_decided_under_the_lock(tmp_path, monkeypatch):
    """A writer taken for dead (heartbeat expired under load) completes while another writer
    rolls it back: the rollback used to check "still pending" and write its plan outside the
    lock, so the slow writer could complete in between and its landed commit then lost its files
    (DataFileMissingError in the at-scale race). Now the writer waits for the lock, sees the
    plan and refuses to complete; the table stays whole."""
    import threading
    import time

    from lakesdk.services import rollback as rb
    opts, t, slow, txn, stats, schema = _slow_writer(tmp_path)
    monkeypatch.setattr(rb, "_dead", lambda *a: True)         # its heartbeat looks expired
    outcome: dict = {}

    def slow_commits() -> None:
        try:
            outcome["result"] = commit(slow, txn, stats, schema=schema)
        except lk.LakeError as e:
            outcome["error"] = e
    original = rb._plan_data

    def plan_while_the_writer_commits(*a, **kw):
        th = threading.Thread(target=slow_commits)
        th.start()
        th.join(timeout=3)            # the writer needs the lock the rollback holds: it waits
        return original(*a, **kw)
    monkeypatch.setattr(rb, "_plan_data", plan_while_the_writer_commits)
    other = lk.open_table(t.path, options=opts)
    rb.rollback_failed_writes(other, policy="lazy")
    deadline = time.monotonic() + 60
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.05)
    assert isinstance(outcome.get("error"), lk.WriteConflictError), outcome
    assert lk.open_table(t.path).inspect.check().ok
    assert sorted(lk.open_table(t.path).read().to_pandas().v) == ["a", "a"]


def test_a_writer_refuses_to_complete_once_a_rollback_of_it_completed(tmp_path, monkeypatch):
    """The lock is not fair: the rollback that wrote its plan under the lock can take the lock
    again and complete before the waiting writer gets it.  Between the rollback's completion
    and the removal of the rolled-back instant's own timeline files the instant still looks
    pending, its data files already deleted; the writer must see the completed rollback that
    names it and refuse (it used to complete, and the commit lost its files)."""
    from lakesdk.services import rollback as rb
    from lakesdk.timeline.store import TimelineStore
    opts, t, slow, txn, stats, schema = _slow_writer(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(rb, "_dead", lambda *a: True)
        m.setattr(TimelineStore, "all_states", lambda self, *a: [])    # stop in the window
        [res] = rb.rollback_failed_writes(lk.open_table(t.path, options=opts), policy="lazy")
    assert res.rolled_back.requested == txn.instant
    assert any(i.requested == txn.instant and not i.is_completed for i in t.timeline)      # looks pending
    with pytest.raises(lk.WriteConflictError):
        commit(slow, txn, stats, schema=schema)
    assert not any(i.requested == txn.instant for i in lk.open_table(t.path).timeline if i.action != "rollback")
    assert lk.open_table(t.path).inspect.check().ok
    assert sorted(lk.open_table(t.path).read().to_pandas().v) == ["a", "a"]


def _files_of(t, instant):
    return [f.path for f in t.storage.find("") if instant in f.path and not f.path.startswith(".hoodie")]


@pytest.mark.parametrize("when", ["before", "while"])
def test_a_participant_that_writes_into_a_rolled_back_round_leaves_no_file(tmp_path, monkeypatch, when):
    """A participant still writing when its round is rolled back (the coordinator died; the
    next one aborted the round, found in the Kafka sink's kill test): its files, finished
    after the rollback, would be left behind, and every reader takes a file of an instant
    older than the active timeline for committed once the rollback is archived.  The
    participant checks the instant once its files are written and deletes them."""
    from lakesdk.table.write import WriteOperation
    t = lk.Lake(str(tmp_path)).create_table("k", key="id", ordering="ts", table_type="mor", partition_by="p")
    t.upsert(pd.DataFrame({"id": [1], "ts": [0], "v": ["init"], "p": ["a"]}))
    txn = begin(t)
    batch = pd.DataFrame({"id": [1, 2, 3], "ts": [1] * 3, "v": ["x"] * 3, "p": ["a", "b", "b"]})
    if when == "before":
        abort(t, txn)
    else:   # the round is rolled back after the participant's files are written, before it looks
        real = WriteOperation.write_files

        def then_rolled_back(self, *a, **kw):
            out = real(self, *a, **kw)
            assert _files_of(t, txn.instant)
            abort(t, txn)
            return out
        monkeypatch.setattr(WriteOperation, "write_files", then_rolled_back)
    with pytest.raises(lk.WriteConflictError):
        write_batch(t, txn, batch)
    assert _files_of(t, txn.instant) == []
    assert t.read().to_pandas().to_dict("records") == [{"id": 1, "ts": 0, "v": "init", "p": "a"}]


def test_a_rollback_deletes_files_marked_after_its_plan(tmp_path, monkeypatch):
    """A rollback lists the instant's markers again once its plan is written: a writer of
    another process that made its marker after the plan listed them, and looked for a
    rollback before the plan existed, has its file deleted by the rollback."""
    import lakesdk.services.rollback as rollback_mod
    from lakesdk.markers import DirectWriteMarkers
    t = lk.Lake(str(tmp_path)).create_table("k", key="id", ordering="ts", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1], "ts": [0], "v": ["init"]}))
    txn = begin(t)
    write_batch(t, txn, pd.DataFrame({"id": [2], "ts": [1], "v": ["x"]}))
    planned = set(_files_of(t, txn.instant))
    late = f"{'0' * 8}-late-0000-0000-000000000000-0_9-9-9_{txn.instant}.parquet"
    real = rollback_mod._execute

    def late_writer(table, store, target, plan, rollback_instant, *rest):
        DirectWriteMarkers(t.storage, txn.instant).create("", late, "CREATE")
        t.storage.write(late, b"late file")
        return real(table, store, target, plan, rollback_instant, *rest)
    monkeypatch.setattr(rollback_mod, "_execute", late_writer)
    res = abort(t, txn)
    assert _files_of(t, txn.instant) == []
    assert late in res.deleted_files and planned <= set(res.deleted_files)
