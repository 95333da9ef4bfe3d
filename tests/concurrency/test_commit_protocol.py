"""One commit path: every action's completed instant is written by the commit point of
:class:`~lakesdk.services.transaction.InstantTransaction`, under the table lock with several
writers, after the step that drops Hudi's metadata table; the write journal holds one record
per write.

Two writer threads upsert a merge-on-read table while a service thread compacts, clusters,
cleans, savepoints and archives it; then a Kafka-style transaction, a rollback of a failed
write and a restore run.  Every transition to ``completed`` is observed."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.concurrency.journal import read_transactions
from lakesdk.services import transaction
from lakesdk.services.transaction import committing
from lakesdk.table.transaction import begin, commit, write_batch
from lakesdk.timeline.store import TimelineStore

OPTS = lk.TableOptions(concurrency="optimistic", lock="in_process", engine="local", heartbeat_interval_s=1)


def _batch(w: int, i: int) -> pd.DataFrame:
    ids = [(w * 7 + i * 3 + k) % 40 for k in range(6)]
    return pd.DataFrame({"id": ids, "p": [f"p{k % 2}" for k in ids], "ts": [i * 10 + w] * 6, "v": [f"w{w}-{i}"] * 6})


@pytest.fixture
def observed(monkeypatch):
    """(action, instant, inside the commit point, under the table lock) of every completion."""
    seen: list[tuple[str, str, bool, bool]] = []
    locks: list = []
    original = TimelineStore.transition
    dropped: set[tuple[str, str]] = set()   # the metadata-table step of each commit point, by instant
    sync = transaction.sync_metadata_table

    syncing = threading.local()

    def sync_metadata_table(ctx, inflight, data, *args):
        if any(lock.held_by_this_thread() for lock in locks) or not locks:
            dropped.add((ctx.path, inflight.action))
        syncing.now = True
        try:
            return sync(ctx, inflight, data, *args)
        finally:
            syncing.now = False

    def transition(self, instant, state, data=b"", *, after=None):
        if state == "completed" and self.storage.base_url.rstrip("/").endswith("/.hoodie/metadata"):
            # the metadata table's own instants complete inside the data action's commit point
            assert getattr(syncing, "now", False), f"MDT {instant} completed outside a commit point"
        elif state == "completed":
            inside = committing() is not None and committing().requested == instant.requested
            held = any(lock.held_by_this_thread() for lock in locks)
            # the metadata table (if any) was kept or dropped in this commit point, under the lock, before
            inside = inside and (self.storage.base_url, instant.action) in dropped
            dropped.discard((self.storage.base_url, instant.action))
            seen.append((instant.action, instant.requested, inside, held))
        return original(self, instant, state, data, after=after)
    monkeypatch.setattr(TimelineStore, "transition", transition)
    monkeypatch.setattr(transaction, "sync_metadata_table", sync_metadata_table)
    return seen, locks


def test_every_action_commits_through_the_instant_transaction_under_the_lock(tmp_path, observed):
    seen, locks = observed
    lake = lk.Lake(str(tmp_path), options=OPTS)
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    locks.append(t.context.lock())       # the handles of one lake share it
    t.upsert(pd.DataFrame({"id": range(40), "p": [f"p{k % 2}" for k in range(40)], "ts": [0] * 40, "v": ["init"] * 40}))
    outcomes: dict[str, int] = {"ok": 0, "conflict": 0}
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(w: int) -> None:
        h = lake.table("t")
        try:
            for i in range(1, 9):
                try:
                    h.upsert(_batch(w, i))
                    outcomes["ok"] += 1
                except lk.WriteConflictError:
                    outcomes["conflict"] += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    def services() -> None:
        h = lake.table("t")
        m = h.maintenance
        try:
            while not done.is_set():
                for step in (m.compact, lambda: m.cluster(single_group=True, partitions=["p=p0"]),
                             lambda: m.clean(retain_commits=2), lambda: m.archive(min_commits=4, max_commits=6)):
                    try:
                        step()
                    except lk.WriteConflictError:
                        pass
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(w,)) for w in (1, 2)]
    svc = threading.Thread(target=services)
    svc.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    done.set()
    svc.join()
    assert not errors, errors
    # each service once more (the race may not have let one through), a savepoint, a Kafka-style
    # transaction, a failed write rolled back, a restore
    t.upsert(_batch(4, 30))                                    # log files to compact
    assert t.maintenance.compact() is not None
    t.maintenance.cluster(single_group=True, partitions=["p=p1"])
    sp = t.maintenance.savepoint()
    txn = begin(t)
    stats, schema = write_batch(t, txn, _batch(3, 20))
    commit(t, txn, stats, schema=schema)
    from lakesdk.services.transaction import InstantTransaction
    failed = InstantTransaction.begin(t.context, "deltacommit", operation="upsert", heartbeat=False)
    t.maintenance.rollback(failed.instant.requested, force=True)
    t.maintenance.restore(sp.instant)

    actions = {a for a, *_ in seen}
    assert {"deltacommit", "compaction", "clustering", "clean", "savepoint", "rollback", "restore"} <= actions, actions
    outside = [s for s in seen if not (s[2] and s[3])]
    assert not outside, f"completions outside the commit point or the table lock: {outside[:5]}"
    # the journal: one record per write, with its outcome
    writes = [r for r in read_transactions(t.storage) if r.action == "deltacommit"]
    committed = sum(1 for r in writes if r.outcome == "committed")
    assert committed == outcomes["ok"] + 3            # the writers' commits, two upserts and the Kafka one
    assert sum(1 for r in writes if r.outcome == "conflict") == outcomes["conflict"]
    assert sum(1 for a, *_ in seen if a == "deltacommit") == committed
    lake.close()


def test_a_single_writer_commits_through_the_instant_transaction_without_a_lock(tmp_path, observed):
    seen, _ = observed
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1, 2], "v": ["a", "b"]}))
    t.upsert(pd.DataFrame({"id": [1], "v": ["c"]}))
    t.maintenance.compact()
    t.maintenance.clean(retain_commits=1)
    assert [(a, inside) for a, _, inside, _ in seen] == [
        ("deltacommit", True), ("deltacommit", True), ("compaction", True)] + \
        [("clean", True)] * (len(seen) - 3)
