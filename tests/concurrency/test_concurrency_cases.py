"""The concurrency case table (spec/semantics/concurrency.md section 7), case by case.

Every test is named after its case (``test_c3_...``) so that docs/concurrency-cases.md can
be checked against this file.  Writers really overlap: each write of a case runs in its own
thread and is held after its data files are written and before its commit (the conflict
check under the lock) until the case lets it go, while other writers and table services run.
Everything is real files on the local engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.concurrency.heartbeat import is_expired

from ..helpers import HEARTBEATS, Held, handle, values

pytestmark = pytest.mark.usefixtures("gates")       # every write given to Held is held before its commit
OCC = dict(concurrency="optimistic", lock="in_process")


def table(tmp_path, *, name="t", table_type="cow", ordering=None, partition_by="p", options=None, **kw):
    opts = options or lk.TableOptions(engine="local", **OCC)
    return lk.Lake(str(tmp_path), options=opts).create_table(name, key="id", partition_by=partition_by,
                                                             table_type=table_type, ordering=ordering, **kw)


def df(keys, v, p="a", ts=None):
    keys = list(keys)
    out = pd.DataFrame({"id": keys, "p": [p] * len(keys), "v": [v] * len(keys)})
    if ts is not None:
        out["ts"] = ts
    return out


values = partial(values, unique=True)      # every read of a case also checks that no key is read twice


def clean_state(t) -> None:
    """No pending instant, no markers and no heartbeat left behind."""
    assert not t.timeline.pending, t.timeline.pending
    assert not [e for e in t.storage.list(".hoodie/.temp")], "markers left behind"
    assert not [e for e in t.storage.list(".hoodie/.heartbeat")], "heartbeats left behind"


# -- C1-C16: candidates and conflicts at commit --------------------------------------------------
def test_c1_no_concurrent_write_no_conflict(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    w = Held(t, lambda: t.upsert(df([1], "w")))
    w.finish()
    assert values(t)[1] == "w"
    clean_state(t)


def test_c2_inflight_writes_are_not_candidates(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    h1, h2, h3 = handle(t), handle(t), handle(t)
    w1 = Held(h1, lambda: h1.upsert(df([1], "w1")))
    w2 = Held(h2, lambda: h2.upsert(df([1], "w2")))
    w3 = Held(h3, lambda: h3.upsert(df([1], "w3")))
    w3.finish()                                   # W1 and W2 are inflight on the same file group: no conflict
    for w in (w1, w2):                            # they finish later and lose to W3
        with pytest.raises(lk.WriteConflictError) as e:
            w.finish()
        assert e.value.other_instant == w3.instant
    assert values(t)[1] == "w3"
    clean_state(t)


def test_c3_interleaving_successful_commit_conflicts(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    ha, hb = handle(t), handle(t)
    a = Held(ha, lambda: ha.upsert(df([2], "a")))
    b = hb.upsert(df([3], "b"))                   # starts after A, touches the same file group, completes
    assert b.instant > a.instant
    with pytest.raises(lk.WriteConflictError) as e:
        a.finish()
    assert e.value.other_instant == b.instant and b.instant in str(e.value)
    assert values(t) == {0: "base", 1: "base", 2: "base", 3: "b", 4: "base"}
    clean_state(t)


def test_c4_pending_insert_overwrite_later_the_first_to_commit_wins(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    ha, hr = handle(t), handle(t)
    a = Held(ha, lambda: ha.upsert(df([1], "a")))
    r = Held(hr, lambda: hr.insert_overwrite(df([7], "overwrite")))
    assert r.instant > a.instant
    a.finish()             # the pending replacecommit carries no write stats yet: not a candidate
    with pytest.raises(lk.WriteConflictError) as e:
        r.finish()         # the overwrite would replace the file group A just rewrote
    assert e.value.other_instant == a.instant
    assert values(t)[1] == "a" and 7 not in values(t)
    clean_state(t)


def test_c14_completed_insert_overwrite_conflicts(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    ha, hr = handle(t), handle(t)
    a = Held(ha, lambda: ha.upsert(df([1], "a")))
    r = hr.insert_overwrite(df([7], "overwrite"))
    with pytest.raises(lk.WriteConflictError) as e:
        a.finish()
    assert e.value.other_instant == r.instant
    assert values(t) == {7: "overwrite"}
    clean_state(t)


def test_c15_pending_insert_overwrite_without_overlap_no_conflict(tmp_path):
    t = table(tmp_path)
    t.upsert(pd.concat([df(range(5), "base", "a"), df(range(5, 10), "base", "b")]))
    ha, hr = handle(t), handle(t)
    a = Held(ha, lambda: ha.upsert(df([1], "a", "a")))
    r = Held(hr, lambda: hr.insert_overwrite(df([20], "overwrite", "b")))
    a.finish()
    r.finish()
    assert values(t) == {0: "base", 1: "a", 2: "base", 3: "base", 4: "base", 20: "overwrite"}
    clean_state(t)


# -- merge-on-read and compaction (table version 8: ordering by completion time) -----------------
def mor(tmp_path, **kw):
    t = table(tmp_path, table_type="mor", ordering="ts", **kw)
    t.upsert(df(range(5), "base", ts=1))
    t.upsert(df([0], "u", ts=2))                     # a log file in the file group: something to compact
    return t


def test_c7_c8_compaction_scheduled_during_a_write_is_no_candidate(tmp_path):
    t = mor(tmp_path)
    ha = handle(t)
    a = Held(ha, lambda: ha.upsert(pd.concat([df([1], "a", ts=3), df([10], "new", ts=3)])))  # update + insert
    plan = t.maintenance.schedule_compaction()
    assert plan.instant > a.instant and plan.operations
    a.finish()                                        # v8: the pending compaction is not a candidate
    t.maintenance.compact(plan.instant)
    assert values(t) == {0: "u", 1: "a", 2: "base", 3: "base", 4: "base", 10: "new"}
    clean_state(t)


@pytest.mark.parametrize("updates_only", [True, False], ids=["log-only", "log-and-insert"])
def test_c9_compaction_completed_during_a_write_is_no_candidate(tmp_path, updates_only):
    t = mor(tmp_path)
    ha = handle(t)
    data = df([1], "a", ts=3) if updates_only else pd.concat([df([1], "a", ts=3), df([10], "new", ts=3)])
    a = Held(ha, lambda: ha.upsert(data))
    done = t.maintenance.compact()                    # scheduled and completed after A started
    assert done.instant > a.instant
    a.finish()                                        # A's log lands in the compacted slice (completion time)
    expect = {0: "u", 1: "a", 2: "base", 3: "base", 4: "base"} | ({} if updates_only else {10: "new"})
    assert values(t) == expect
    t.maintenance.compact()
    assert values(t) == expect
    clean_state(t)


def test_c10_inflight_compaction_during_a_write_is_no_candidate(tmp_path):
    t = mor(tmp_path)
    ha = handle(t)
    a = Held(ha, lambda: ha.upsert(pd.concat([df([0, 1], "a", ts=3), df([10], "new", ts=3)])))
    plan = t.maintenance.schedule_compaction()
    store = t.context.store
    req = next(i for i in store.load().pending if i.requested == plan.instant)
    store.transition(req, "inflight")                 # the compaction runs: requested -> inflight
    a.finish()
    t.maintenance.compact(plan.instant)               # and finishes after A committed
    assert values(t) == {0: "a", 1: "a", 2: "base", 3: "base", 4: "base", 10: "new"}
    clean_state(t)


def test_c11_compaction_completed_before_the_write_started(tmp_path):
    t = mor(tmp_path)
    t.maintenance.compact()
    ha = handle(t)
    a = Held(ha, lambda: ha.upsert(df([0, 1], "a", ts=3)))
    a.finish()
    assert values(t) == {0: "a", 1: "a", 2: "base", 3: "base", 4: "base"}
    clean_state(t)


def test_c16_writes_pending_at_start_that_complete_meanwhile_conflict(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(5), "base"))
    h12, ha, h4 = handle(t), handle(t), handle(t)
    c12 = Held(h12, lambda: h12.upsert(df([1], "c12")))   # pending when A starts
    a = Held(ha, lambda: ha.upsert(df([2], "a")))
    c4 = Held(h4, lambda: h4.upsert(df([3], "c4")))       # requested after A started
    c12.finish()
    with pytest.raises(lk.WriteConflictError):
        c4.finish()                                        # c4 loses to c12 on the same file group
    with pytest.raises(lk.WriteConflictError) as e:
        a.finish()
    assert e.value.other_instant == c12.instant
    assert values(t) == {0: "base", 1: "c12", 2: "base", 3: "base", 4: "base"}
    clean_state(t)


def test_c16_mor_pending_compaction_and_writes_complete_during_a_write(tmp_path):
    t = mor(tmp_path)
    plan = t.maintenance.schedule_compaction()            # pending compaction, requested before A
    h12, ha, h4 = handle(t), handle(t), handle(t)
    c12 = Held(h12, lambda: h12.upsert(df([1], "c12", ts=5)))
    a = Held(ha, lambda: ha.upsert(df([1, 2], "a", ts=4)))
    c4 = Held(h4, lambda: h4.upsert(df([3], "c4", ts=5)))
    t.maintenance.compact(plan.instant)                   # the compaction completes: no conflict (C11 in Hudi)
    c12.finish()
    c4.finish()                                           # merge-on-read log appends do not block each other
    a.finish()
    assert values(t) == {0: "u", 1: "c12", 2: "a", 3: "c4", 4: "base"}   # merged by ordering value
    clean_state(t)


# -- C17-C24: multi-writer scenarios of TestHoodieClientMultiWriter ------------------------------
def test_c17_same_records_second_committer_fails_cow(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(200), "base"))
    h1, h2 = handle(t), handle(t)
    w1 = Held(h1, lambda: h1.upsert(df(range(100), "w1")))
    w2 = Held(h2, lambda: h2.upsert(df(range(100), "w2")))
    w1.finish()
    with pytest.raises(lk.WriteConflictError):
        w2.finish()
    got = values(t)
    assert all(got[k] == "w1" for k in range(100)) and all(got[k] == "base" for k in range(100, 200))
    clean_state(t)


def test_c17_same_records_mor_log_appends_both_land(tmp_path):
    """A deliberate difference from Hudi's OCC: on merge-on-read both log appends commit
    (non-blocking, like Hudi's NBCC) and the ordering value decides per record."""
    t = table(tmp_path, table_type="mor", ordering="ts")
    t.upsert(df(range(200), "base", ts=0))
    h1, h2 = handle(t), handle(t)
    w1 = Held(h1, lambda: h1.upsert(df(range(100), "w1", ts=[2 if k % 2 else 1 for k in range(100)])))
    w2 = Held(h2, lambda: h2.upsert(df(range(100), "w2", ts=[1 if k % 2 else 2 for k in range(100)])))
    w1.finish()
    w2.finish()
    got = values(t)
    assert all(got[k] == ("w1" if k % 2 else "w2") for k in range(100))
    clean_state(t)


def test_c18_inserts_to_distinct_partitions_all_land(tmp_path):
    t = table(tmp_path)
    t.upsert(df(range(100), "base", "2016-03-01"))
    hs = [handle(t) for _ in range(5)]
    held = [Held(h, lambda h=h, i=i: h.upsert(df(range(100 * (i + 1), 100 * (i + 2)), f"w{i}", f"2016-03-0{i + 2}")))
            for i, h in enumerate(hs)]
    for w in held:
        w.finish()
    got = values(t)
    assert len(got) == 600 and {got[100 * (i + 1)] for i in range(5)} == {f"w{i}" for i in range(5)}
    clean_state(t)


def test_c19_racing_commits_of_the_same_updates_exactly_one_lands(tmp_path):
    t = table(tmp_path)
    base = pd.concat([df(range(i * 50, i * 50 + 50), "base", f"p{i}") for i in range(4)])
    t.upsert(base)
    h1, h2 = handle(t), handle(t)
    upd = [base.assign(v=f"w{i}") for i in (1, 2)]
    w1 = Held(h1, lambda: h1.upsert(upd[0]))
    w2 = Held(h2, lambda: h2.upsert(upd[1]))
    w1.release(), w2.release()                      # both commit at the same moment
    outcomes = []
    for w in (w1, w2):
        try:
            outcomes.append(w.finish().instant)
        except lk.WriteConflictError:
            outcomes.append(None)
    assert sum(o is not None for o in outcomes) == 1
    winner = "w1" if outcomes[0] else "w2"
    assert set(values(t).values()) == {winner}
    clean_state(t)


def test_c20_concurrent_bulk_inserts_of_new_records_both_land(tmp_path):
    t = table(tmp_path)
    h1, h2 = handle(t), handle(t)
    w1 = Held(h1, lambda: h1.bulk_insert(df(range(200), "w1")))
    w2 = Held(h2, lambda: h2.bulk_insert(df(range(200, 400), "w2")))
    w2.finish()
    w1.finish()
    assert len(values(t)) == 400
    clean_state(t)


def test_c22_write_with_concurrent_compaction_and_clean_all_succeed(tmp_path):
    """The compaction and clean part of C22 (the clustering part waits for clustering)."""
    t = mor(tmp_path)
    t.upsert(df([2], "u", ts=2))
    ha, hi = handle(t), handle(t)
    a = Held(ha, lambda: ha.upsert(df([0, 1, 2], "a", ts=3)))
    plan = t.maintenance.schedule_compaction()
    assert plan.instant > a.instant
    i = Held(hi, lambda: hi.insert(df([50, 51], "ins", ts=3)))
    t.maintenance.compact(plan.instant)
    t.maintenance.clean(retain_commits=1)
    i.finish()
    a.finish()
    assert values(t) == {0: "a", 1: "a", 2: "a", 3: "base", 4: "base", 50: "ins", 51: "ins"}
    clean_state(t)


def test_c24_clean_in_the_middle_of_a_write(tmp_path):
    t = table(tmp_path)
    for v in ("v1", "v2", "v3"):
        t.upsert(df(range(5), v))
    ha = Held(t, lambda: t.upsert(df([1], "w1")))
    cleaned = t.maintenance.clean(retain_commits=1)
    assert cleaned is not None and cleaned.deleted
    ha.finish()
    assert values(t) == {0: "v3", 1: "w1", 2: "v3", 3: "v3", 4: "v3"}
    clean_state(t)


def test_concurrent_inserts_of_the_same_new_key_do_not_duplicate_it(tmp_path):
    """Not a Hudi case (Hudi notes "UUID's can clash even for insert/insert" and lets both
    land): two writers that both insert a key the table does not have yet write it to two
    new file groups; the second to commit must fail, or the key would be there twice."""
    t = table(tmp_path)
    t.upsert(df([0], "base", "a"))
    h1, h2 = handle(t), handle(t)
    w1 = Held(h1, lambda: h1.upsert(df([5, 6], "w1", "b")))    # partition b is new: new file groups
    w2 = Held(h2, lambda: h2.upsert(df([6, 7], "w2", "b")))
    w1.finish()
    with pytest.raises(lk.WriteConflictError, match="record keys this write inserts too") as e:
        w2.finish()
    assert e.value.other_instant == w1.instant
    assert values(t) == {0: "base", 5: "w1", 6: "w1"}
    clean_state(t)


# -- C23, C63, C64: failed writers, heartbeats and rollback -------------------------------------
def fast_heartbeats(**kw):
    return lk.TableOptions(engine="local", heartbeat_interval_s=0.1, heartbeat_misses=10, **OCC, **kw)


def stop_heartbeat(w: Held) -> None:
    """The writer of ``w`` stops beating, as if its process died (its thread stays held)."""
    HEARTBEATS[w.instant].stop()


def wait_expired(t, *instants: str) -> None:
    deadline = time.monotonic() + 30
    tolerance = t.options.heartbeat_interval_s * t.options.heartbeat_misses
    while time.monotonic() < deadline:
        time.sleep(tolerance)
        if all(is_expired(t.storage, i, t.options.heartbeat_interval_s, t.options.heartbeat_misses)
               for i in instants):
            return
    raise AssertionError(f"heartbeats of {instants} did not expire")


def test_c23_lazy_rollback_takes_only_the_dead_writer(tmp_path):
    t = table(tmp_path, options=fast_heartbeats())
    t.upsert(df([0], "base"))
    h2, h3 = handle(t), handle(t)
    w2 = Held(h2, lambda: h2.upsert(df([2], "w2", "b")))
    w3 = Held(h3, lambda: h3.upsert(df([3], "w3", "c")))
    stop_heartbeat(w3)
    wait_expired(t, w3.instant)
    w2.finish()
    rolled = t.maintenance.rollback_failed_writes()
    assert [r.rolled_back.requested for r in rolled] == [w3.instant]
    late = f"p=c/late-file-0_0-0-0_{w3.instant}.parquet"
    t.storage.write(late, b"a task of w3 that finished after the rollback")
    with pytest.raises(lk.WriteConflictError, match="rolled back"):
        w3.finish()                  # the writer that was taken for dead comes back: it must not commit
    assert not t.storage.exists(late)                 # and it removes what it wrote since
    assert values(t) == {0: "base", 2: "w2"}
    clean_state(t)


def test_c23_writer_whose_rollback_is_in_progress_cannot_commit(tmp_path, monkeypatch):
    """The rollback of a writer taken for dead has written its plan but not finished (it
    removes the instant's timeline files last): the writer must not commit meanwhile."""
    from lakesdk.services import rollback as rb
    t = table(tmp_path, options=fast_heartbeats())
    t.upsert(df([0], "base"))
    h3 = handle(t)
    w3 = Held(h3, lambda: h3.upsert(df([3], "w3", "c")))
    stop_heartbeat(w3)
    wait_expired(t, w3.instant)
    original = rb._execute

    def interrupted(*a, **k):
        raise OSError("injected: the rollback stops after its plan")
    monkeypatch.setattr(rb, "_execute", interrupted)
    with pytest.raises(OSError, match="injected"):
        t.maintenance.rollback_failed_writes()
    monkeypatch.setattr(rb, "_execute", original)
    assert any(i.action == "rollback" for i in t.timeline.pending) and t.timeline.contains(w3.instant)
    with pytest.raises(lk.WriteConflictError, match="rolled back"):
        w3.finish()                  # and its own clean-up finishes that rollback
    assert not t.timeline.contains(w3.instant)
    assert values(t) == {0: "base"}
    clean_state(t)


def test_c63_lazy_rollback_rechecks_after_the_heartbeat_check(tmp_path, monkeypatch):
    """X is alive, Y's heartbeat is gone, Z's heartbeat expired but Z completes between the
    heartbeat check and the rollback: only Y is rolled back."""
    from lakesdk.services import rollback as rb
    t = table(tmp_path, options=fast_heartbeats())
    t.upsert(df([0], "base"))
    hx, hy, hz = handle(t), handle(t), handle(t)
    x = Held(hx, lambda: hx.upsert(df([1], "x", "x")))
    y = Held(hy, lambda: hy.upsert(df([2], "y", "y")))
    z = Held(hz, lambda: hz.upsert(df([3], "z", "z")))
    stop_heartbeat(y)
    HEARTBEATS[z.instant].stop()
    wait_expired(t, y.instant, z.instant)
    original = rb._dead

    def dead(table_, inst, is_expired):
        verdict = original(table_, inst, is_expired)
        if inst.requested == z.instant:
            z.finish()               # the slow writer completes right after the check
        return verdict
    monkeypatch.setattr(rb, "_dead", dead)
    rolled = t.maintenance.rollback_failed_writes()
    assert [r.rolled_back.requested for r in rolled] == [y.instant]
    x.finish()
    with pytest.raises(lk.WriteConflictError, match="rolled back"):
        y.finish()
    assert values(t) == {0: "base", 1: "x", 3: "z"}
    clean_state(t)


def test_c31_optimistic_forces_lazy_failed_write_cleaning(tmp_path):
    opts = lk.TableOptions(engine="local", failed_writes="eager", **OCC)   # eager asked for, lazy used
    t = table(tmp_path, options=opts)
    t.upsert(df([0], "base"))
    h1, h2 = handle(t), handle(t)
    w1 = Held(h1, lambda: h1.upsert(df([1], "w1", "b")))
    h2.upsert(df([2], "w2", "c"))          # eager would roll back the live writer w1 here
    w1.finish()
    assert values(t) == {0: "base", 1: "w1", 2: "w2"}
    clean_state(t)


CRASHING_WRITER = """
import sys, pandas as pd, lakesdk as lk
t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local"))
t.upsert(pd.DataFrame({"id": [1, 9], "p": ["a", "a"], "v": ["crashed", "crashed"]}))
"""


def test_c64_eager_rollback_of_a_failed_single_writer(tmp_path):
    t = table(tmp_path, options=lk.TableOptions(engine="local"))   # single writer, eager
    t.upsert(df(range(3), "base"))
    env = {**os.environ, "LAKESDK_CRASH_AT": "after_data"}
    p = subprocess.run([sys.executable, "-c", CRASHING_WRITER, t.path], env=env, capture_output=True, timeout=120)
    assert p.returncode == -9, p.stderr[-2000:]
    failed = [i for i in t.timeline.pending if i.action == "commit"]
    assert len(failed) == 1                      # its heartbeat file is fresh: eager does not ask
    r = t.upsert(df([2], "w"))
    assert not t.timeline.contains(failed[0].requested) and r.instant > failed[0].requested
    assert values(t) == {0: "base", 1: "base", 2: "w"}
    assert not [f for f in t.storage.find("") if failed[0].requested in f.path]
    clean_state(t)


# -- C32-C41: non-blocking concurrency (lakesdk: merge-on-read log appends under OCC) ------------
def test_c32_no_separate_non_blocking_mode(tmp_path):
    with pytest.raises(lk.LakeError, match="single_writer.*optimistic"):
        lk.Lake(str(tmp_path), concurrency="non_blocking")


def test_c33_overlapping_partial_updates_both_commit_and_compact(tmp_path):
    """Two streams update different column groups of the same record at the same time:
    both log appends commit, and compaction stitches the row (PartialUpdateAvroPayload)."""
    opts = lk.TableOptions(engine="local", **OCC)
    t = lk.Lake(str(tmp_path), options=opts).create_table(
        "t", key="id", table_type="mor", merge_mode="partial_update",
        column_groups={"name_ts": ["name"], "age_ts": ["age"]})
    t.upsert(pd.DataFrame({"id": ["id1"], "name_ts": [0], "name": ["?"], "age_ts": [0], "age": [0]}))
    h1, h2 = handle(t), handle(t)
    txn1 = Held(h1, lambda: h1.upsert(pd.DataFrame({"id": ["id1"], "name_ts": [1], "name": ["Danny"]})))
    txn2 = Held(h2, lambda: h2.upsert(pd.DataFrame({"id": ["id1"], "age_ts": [2], "age": [23]})))
    txn1.finish()
    txn2.finish()
    t.maintenance.compact()
    row = t.read().to_pandas().iloc[0]
    assert (row["name"], int(row["age"]), int(row["name_ts"]), int(row["age_ts"])) == ("Danny", 23, 1, 2)
    clean_state(t)


def test_c34_compaction_plan_excludes_inflight_and_later_writes(tmp_path):
    t = table(tmp_path, table_type="mor", ordering="ts", partition_by=None)
    t.upsert(pd.DataFrame({"id": ["id1"], "v": ["init"], "ts": [0]}))
    h1, h2, h3 = handle(t), handle(t), handle(t)
    txn1 = Held(h1, lambda: h1.upsert(pd.DataFrame({"id": ["id1"], "v": ["Danny"], "ts": [1]})))
    txn2 = Held(h2, lambda: h2.upsert(pd.DataFrame({"id": ["id1"], "v": ["txn2"], "ts": [2]})))
    txn1.finish()
    plan = t.maintenance.schedule_compaction()
    h3.upsert(pd.DataFrame({"id": ["id3"], "v": ["txn3"], "ts": [1]}))   # completes after scheduling
    t.maintenance.compact(plan.instant)
    ro = t.read(read_optimized=True).to_pandas()     # the compacted base files alone
    assert dict(zip(ro.id, ro.v)) == {"id1": "Danny", "id3": "txn3"}   # id3: its own new file group
    assert [len(op.log_files) for op in plan.operations] == [1]          # only txn1's log was planned
    txn2.finish()                                     # the inflight write lands in the next slice
    assert values(t) == {"id1": "txn2", "id3": "txn3"}
    clean_state(t)


@pytest.mark.parametrize("starts,commits", [
    pytest.param(("insert", "bulk_insert"), ("insert", "bulk_insert"), id="C37"),
    pytest.param(("bulk_insert", "insert"), ("insert", "bulk_insert"), id="C38"),
    pytest.param(("insert", "bulk_insert"), ("bulk_insert", "insert"), id="C39"),
    pytest.param(("bulk_insert", "insert"), ("bulk_insert", "insert"), id="C40"),
])
def test_c37_c38_c39_c40_concurrent_insert_and_bulk_insert_of_one_key(tmp_path, starts, commits):
    """C37/C38: the bulk_insert that commits second fails, as in Hudi.  C39/C40 differ: Hudi's
    bucket index sends both to one file group and both land; lakesdk has no bucket index, the
    two new file groups would hold the key twice, so whichever commits second fails."""
    t = table(tmp_path, table_type="mor", ordering="ts")
    held = {}
    for n, op in enumerate(starts):
        h = handle(t)
        held[op] = Held(h, lambda h=h, op=op, n=n: getattr(h, op)(df(["id1"], op, ts=n + 1)))
    held[commits[0]].finish()
    with pytest.raises(lk.WriteConflictError):
        held[commits[1]].finish()
    assert values(t) == {"id1": commits[0]}
    clean_state(t)


def test_overwrite_of_a_partition_that_a_concurrent_write_inserted_into_conflicts(tmp_path):
    """Not a Hudi case: an insert_overwrite replaces the file groups it saw when it started;
    a file group that a concurrent write created in that partition meanwhile would survive
    the overwrite, so the table would not be the fold of the two commits."""
    t = table(tmp_path)
    t.upsert(df(range(3), "base", "a"))
    hr, hw = handle(t), handle(t)
    r = Held(hr, lambda: hr.insert_overwrite(df([7], "overwrite", "a")))
    hw.bulk_insert(df([8], "new", "a"))        # a new file group in the partition being overwritten
    with pytest.raises(lk.WriteConflictError, match="partitions this overwrite replaces"):
        r.finish()
    assert values(t) == {0: "base", 1: "base", 2: "base", 8: "new"}
    clean_state(t)


def test_overwrite_after_a_concurrent_write_elsewhere_lands(tmp_path):
    t = table(tmp_path)
    t.upsert(pd.concat([df(range(3), "base", "a"), df([5], "base", "b")]))
    hr, hw = handle(t), handle(t)
    r = Held(hr, lambda: hr.insert_overwrite(df([7], "overwrite", "a")))
    hw.upsert(df([5, 6], "w", "b"))
    r.finish()
    assert values(t) == {5: "w", 6: "w", 7: "overwrite"}
    clean_state(t)


# -- the coverage map ----------------------------------------------------------------------------
def test_case_map_is_complete():
    """docs/concurrency-cases.md names every case of the three case tables once, and every
    test it names exists (with its parameter id)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "concurrency-cases.md").read_text()
    named: list[str] = []
    for first, last in re.findall(r"^\| ([CSM]\d+)(?:-([CSM]\d+))? \|", doc, re.M):
        if last:
            named += [f"{first[0]}{i}" for i in range(int(first[1:]), int(last[1:]) + 1)]
        else:
            named.append(first)
    want = [f"C{i}" for i in range(1, 68)] + [f"S{i}" for i in range(1, 18)] + [f"M{i}" for i in range(1, 22)]
    assert sorted(named) == sorted(want), set(named) ^ set(want)
    files = {"cases": "test_concurrency_cases.py", "schema": "test_schema_conflicts.py",
             "heartbeat": "test_heartbeat.py", "locks": "test_locks.py", "concurrency": "test_optimistic.py",
             "early": "test_early_conflict.py"}
    refs = re.findall(r"`(\w+)::(test_\w+)(?:\[([^\]]+)\])?`", doc)
    assert len(refs) > 80
    for short, name, param in refs:
        text = (Path(__file__).parent / files[short]).read_text()
        assert f"def {name}(" in text, f"{short}::{name} does not exist"
        if param:
            assert f'"{param}"' in text, f"{short}::{name}[{param}]: no such parameter id"


# -- clustering: C5, C6, C12, C13, C16, C21, C22 ------------------------------------------------
def two_groups(tmp_path, **kw):
    """A table with two small file groups in partition a (something to cluster)."""
    t = table(tmp_path, **kw)
    t.bulk_insert(df(range(5), "base"))
    t.bulk_insert(df(range(5, 10), "base"))
    return t


def test_c5_c12_clustering_scheduled_during_a_write_yields_to_it(tmp_path):
    """Differs from Hudi on purpose: Hudi fails the write that started first (a pending
    clustering is always a candidate); lakesdk lets it land, and the clustering, which
    checks that its input slices are still the latest, rolls itself back."""
    t = two_groups(tmp_path)
    ha = handle(t)
    a = Held(ha, lambda: ha.upsert(df([1], "a")))
    plan = t.maintenance.schedule_clustering(small_file_limit=10 * 1024 * 1024)
    assert plan.instant > a.instant and plan.groups
    a.finish()
    with pytest.raises(lk.ClusteringConflictError):
        t.maintenance.cluster(plan.instant)
    assert values(t)[1] == "a" and len(values(t)) == 10
    clean_state(t)


def test_c6_c16_write_under_a_pending_clustering_is_rejected(tmp_path):
    """A clustering pending before the write started: the write of its file groups fails
    (Hudi's reject-update strategy, before any file is written); the clustering completes."""
    t = two_groups(tmp_path)
    plan = t.maintenance.schedule_clustering(small_file_limit=10 * 1024 * 1024)
    with pytest.raises(lk.ClusteringConflictError) as e:
        handle(t).upsert(df([1], "a"))
    assert isinstance(e.value, lk.WriteConflictError) and plan.instant in str(e.value)
    handle(t).upsert(df([50], "insert"))              # inserts of new keys proceed
    t.maintenance.cluster(plan.instant)
    assert values(t)[1] == "base" and values(t)[50] == "insert"
    clean_state(t)


def test_c13_clustering_completed_during_a_write_conflicts(tmp_path):
    t = two_groups(tmp_path)
    ha = handle(t)
    a = Held(ha, lambda: ha.upsert(df([1], "a")))
    done = t.maintenance.cluster(small_file_limit=10 * 1024 * 1024)
    assert done is not None
    with pytest.raises(lk.WriteConflictError) as e:
        a.finish()
    assert e.value.other_instant == done.instant
    assert values(t)[1] == "base" and len(values(t)) == 10
    clean_state(t)


def test_c21_inline_clustering_after_a_concurrent_commit_fails_the_pending_write(tmp_path):
    t = two_groups(tmp_path)
    h3 = handle(t)
    h4 = lk.open_table(t.path, options=lk.TableOptions(engine="local", cluster_every=1,
                                                        cluster_small_file_limit=10 * 1024 * 1024, **OCC))
    w3 = Held(h3, lambda: h3.upsert(df([1], "w3")))
    h4.upsert(df([7], "w4"))                           # commits, then clusters inline
    assert any(i.action == "clustering" and i.is_completed for i in t.timeline)
    with pytest.raises(lk.WriteConflictError):
        w3.finish()
    assert values(t)[1] == "base" and values(t)[7] == "w4"
    clean_state(t)


def test_c22_insert_with_inline_clustering_compaction_and_clean_all_succeed(tmp_path):
    """The clustering part of C22: an upsert whose handle clusters inline while a compaction
    is scheduled; then an insert runs while the compaction and a clean run."""
    t = table(tmp_path, table_type="mor", ordering="ts")
    for lo in (0, 5, 10):                               # three small file groups
        t.bulk_insert(df(range(lo, lo + 5), "base", ts=1))
    t.upsert(df([0], "u", ts=2))                        # a log in the first one
    h1 = lk.open_table(t.path, options=lk.TableOptions(engine="local", cluster_every=1,
                                                        cluster_small_file_limit=10 * 1024 * 1024, **OCC))
    up = Held(h1, lambda: h1.upsert(df([5], "up", ts=3)))
    plan = t.maintenance.schedule_compaction()
    up.finish()                                         # commits, then clusters inline
    assert [i for i in t.timeline if i.action == "clustering" and i.is_completed]
    hi = handle(t)
    ins = Held(hi, lambda: hi.insert(df([60], "ins", ts=3)))
    t.maintenance.compact(plan.instant)
    t.maintenance.clean(retain_commits=1)
    ins.finish()
    assert values(t) == {**{k: "base" for k in range(15)}, 0: "u", 5: "up", 60: "ins"}
    clean_state(t)
