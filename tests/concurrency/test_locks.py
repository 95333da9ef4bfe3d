"""Lock providers (issue 4, item 2): in-process, storage (local files and a real S3-compatible
server), with real threads and real (spawned) processes.

Spec cases (../shared/spec/semantics/concurrency.md): C42..C48 (InProcessLockProvider),
C49/C50 (file lock expiry), C51 (retries then a timeout error).  The ZooKeeper provider is
tested in test_locks_zookeeper.py.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path

import pytest

from lakesdk.concurrency import lock_storage
from lakesdk.concurrency.locks import (
    LOCK_FILE,
    InProcessLockProvider,
    LockConfig,
    LockConfigError,
    LockError,
    LockLostError,
    LockTimeoutError,
    StorageLockProvider,
    ZookeeperLockProvider,
    lock_provider,
    read_lock_file,
)
from lakesdk.exceptions import LakeError, MissingDependencyError
from lakesdk.storage import Storage

from ..helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
FAST = {"retry_initial_s": 0.005, "retry_max_s": 0.05}
SPAWN = mp.get_context("spawn")
BUCKET = "lakesdk-locks"


# -- helpers run in spawned processes (module level, so spawn can import them) ------------------
def _counter_worker(kind: str, base_url: str, storage_options: dict, options: dict, counter_rel: str, n: int,
                    barrier, results) -> None:
    """Increment the counter file ``n`` times, each time under the lock (read, pause, write)."""
    try:
        storage = Storage(base_url, storage_options)
        lock = lock_provider(kind, storage, options)
        barrier.wait(timeout=60)
        for _ in range(n):
            with lock:
                value = int(storage.read(counter_rel).decode())
                time.sleep(0.001)                       # widen the read-modify-write window
                storage.write(counter_rel, str(value + 1).encode())
        results.put(("ok", os.getpid(), None))
    except BaseException:
        results.put(("error", os.getpid(), traceback.format_exc()))


def _hold_worker(kind: str, base_url: str, storage_options: dict, options: dict, ready, go, results) -> None:
    """Acquire, signal ``ready``, wait for ``go``; then report ensure_held() and release."""
    try:
        lock = lock_provider(kind, Storage(base_url, storage_options), options)
        lock.acquire()
        results.put(("owner", lock.holder))
        ready.set()
        go.wait(timeout=60)
        try:
            lock.ensure_held()
            results.put(("ensure_held", "ok"))
        except LockLostError as exc:
            results.put(("ensure_held", f"lost: {exc}"))
        lock.release()
        results.put(("released", "ok"))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _hold_at_barrier_worker(base_url: str, barrier, results) -> None:
    lock = InProcessLockProvider(Storage(base_url))
    lock.acquire(timeout_s=5)
    try:
        barrier.wait(timeout=20)                         # every process is inside "the lock" at once
        results.put("held-together")
    except BaseException as exc:
        results.put(f"error: {exc!r}")
    finally:
        lock.release()


def _run_counter_processes(kind: str, storage: Storage, options: dict, *, procs: int, n: int,
                           timeout: float = 120) -> None:
    counter = f"counter-{uuid.uuid4().hex[:8]}.txt"
    storage.write(counter, b"0")
    barrier, results = SPAWN.Barrier(procs), SPAWN.Queue()
    ps = [SPAWN.Process(target=_counter_worker, args=(kind, storage.base_url, storage.storage_options, options,
                                                      counter, n, barrier, results)) for _ in range(procs)]
    for p in ps:
        p.start()
    try:
        outcomes = [results.get(timeout=timeout) for _ in ps]
    finally:
        for p in ps:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [o[2] for o in outcomes if o[0] != "ok"]
    assert not errors, "\n".join(errors)
    assert int(storage.read(counter).decode()) == procs * n, "lost update: the lock did not exclude"
    assert not storage.exists(LOCK_FILE), "the lock file was left behind"


def _run_counter_threads(make_lock, storage: Storage, *, threads: int, n: int) -> int:
    """Each thread increments a shared counter file ``n`` times under its own lock; returns max concurrency."""
    counter = f"counter-{uuid.uuid4().hex[:8]}.txt"
    storage.write(counter, b"0")
    inside, max_inside, guard, errors = [0], [0], threading.Lock(), []
    barrier = threading.Barrier(threads)

    def run(lock) -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(n):
                with lock:
                    with guard:
                        inside[0] += 1
                        max_inside[0] = max(max_inside[0], inside[0])
                    value = int(storage.read(counter).decode())
                    time.sleep(0.001)
                    storage.write(counter, str(value + 1).encode())
                    with guard:
                        inside[0] -= 1
        except BaseException:
            errors.append(traceback.format_exc())

    ts = [threading.Thread(target=run, args=(make_lock(),)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, "\n".join(errors)
    assert int(storage.read(counter).decode()) == threads * n
    return max_inside[0]


def _expired_lock_bytes(owner: str = "dead-host/1/MainThread/0000", ago: float = 10.0) -> bytes:
    now = time.time()
    return json.dumps({"owner": owner, "nonce": uuid.uuid4().hex, "acquired_at": now - 100, "expires_at": now - ago,
                       "renewed_at": None, "lease_s": 60, "version": 1}).encode()


@pytest.fixture
def local(tmp_path) -> Storage:
    return Storage(str(tmp_path / "table"))


# == configuration and factory ====================================================================
def test_config_defaults_and_validation():
    c = LockConfig()
    assert (c.timeout_s, c.retry_initial_s, c.retry_max_s, c.lease_s, c.owner) == (60.0, 0.05, 2.0, 60.0, None)
    assert c.renew_every_s == 20.0
    for bad in ({"timeout_s": -1}, {"lease_s": 0}, {"retry_initial_s": 0}, {"retry_max_s": 0.01},
                {"renew_interval_s": 60}, {"owner": ""}, {"timeout_s": "soon"}, {"lease_s": float("inf")}):
        with pytest.raises(LockConfigError):
            LockConfig(**bad)
    assert issubclass(LockConfigError, ValueError) and issubclass(LockConfigError, LakeError)


def test_factory_kinds_options_and_aliases(local):
    p = lock_provider("storage", local, {"timeout_s": 10, "lease_s": "30", "owner": "me"})
    assert isinstance(p, StorageLockProvider) and (p.config.timeout_s, p.config.lease_s, p.config.owner) == (10, 30, "me")
    assert isinstance(lock_provider("in_process", local), InProcessLockProvider)
    assert isinstance(lock_provider("org.apache.hudi.client.transaction.lock.InProcessLockProvider", local),
                      InProcessLockProvider)
    z = lock_provider("zookeeper", local, {"hoodie.write.lock.zookeeper.url": "zk1,zk2:2182",
                                           "hoodie.write.lock.zookeeper.port": "2181",
                                           "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
                                           "hoodie.write.lock.zookeeper.lock_key": "trips",
                                           "hoodie.write.lock.zookeeper.session_timeout_ms": 30000,
                                           "hoodie.write.lock.wait_time_ms": 5000})
    assert isinstance(z, ZookeeperLockProvider)
    assert (z.connect, z.path, z.session_timeout_s, z.config.timeout_s) == ("zk1:2181,zk2:2182", "/hudi/locks/trips",
                                                                            30.0, 5.0)
    z2 = lock_provider("zookeeper", local, {"zk_connect": "127.0.0.1:2181"})
    assert z2.path.startswith("/lakesdk/locks/table-") and z2.path != lock_provider(
        "zookeeper", Storage(str(Path(local.base_url).parent / "other" / "table")), {"zk_connect": "h:1"}).path

    with pytest.raises(LockConfigError, match="Did you mean 'lease_s'"):
        lock_provider("storage", local, {"lease": 5})
    with pytest.raises(LockConfigError, match="only apply to lock='zookeeper'"):
        lock_provider("storage", local, {"zk_connect": "h:1"})
    with pytest.raises(LockConfigError, match="zk_connect"):
        lock_provider("zookeeper", local, {})
    with pytest.raises(LockConfigError, match="unknown lock kind"):
        lock_provider("dynamodb", local)
    gs = Storage("gs://bucket/table")
    with pytest.raises(LockConfigError, match="atomic create-if-absent"):
        lock_provider("storage", gs)
    assert isinstance(lock_provider("storage", gs, {"storage_atomic": True}), StorageLockProvider)


def test_name_and_repr_do_no_io(monkeypatch):
    # an endpoint nobody listens on, and every way to it raises: storage, ZooKeeper, sockets
    s = Storage("s3://no-such-bucket/warehouse/t", {"key": "k", "secret": "s",
                                                     "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}})
    providers = (lock_provider("storage", s), lock_provider("in_process", s),
                 lock_provider("zookeeper", s, {"zk_connect": "127.0.0.1:9"}))

    def io(*a, **kw):
        raise AssertionError("I/O in name, repr or held")
    from lakesdk.concurrency import lock_zookeeper
    monkeypatch.setattr(Storage, "fs", property(io))
    monkeypatch.setattr(lock_zookeeper, "_kazoo", io)
    monkeypatch.setattr(socket.socket, "connect", io)
    for p in providers:
        text = repr(p) + p.name
        assert "no-such-bucket" in text + getattr(p, "path", "no-such-bucket")
        assert p.held is False
    assert s._fs is None, "repr/name created a filesystem"


def test_zookeeper_without_kazoo_names_the_extra(local, monkeypatch):
    for mod in [m for m in sys.modules if m == "kazoo" or m.startswith("kazoo.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "kazoo", None)     # makes "import kazoo" raise ImportError
    p = lock_provider("zookeeper", local, {"zk_connect": "127.0.0.1:2181"})
    with pytest.raises(MissingDependencyError, match=r"pip install 'lakesdk\[zookeeper\]'"):
        p.acquire(timeout_s=1)


# == in-process provider: Hudi's InProcessLockProvider cases ======================================
def test_c42_c43_not_reentrant_per_table(tmp_path):
    t1, t2 = Storage(str(tmp_path / "t1")), Storage(str(tmp_path / "t2"))
    a, b = InProcessLockProvider(t1), InProcessLockProvider(t2)
    a.acquire(timeout_s=1)
    b.acquire(timeout_s=1)                              # C43: another table is another lock
    with pytest.raises(LockError, match="not re-entrant"):
        a.acquire(timeout_s=1)                          # C42
    with pytest.raises(LockError, match="not re-entrant"):
        InProcessLockProvider(t2).acquire(timeout_s=1)  # same table, same thread, other handle
    a.release()
    b.release()
    a.acquire(timeout_s=1)
    a.release()


def test_c44_c45_other_thread_times_out_and_cannot_unlock(local):
    main = InProcessLockProvider(local)
    main.acquire()
    out: dict[str, object] = {}

    def other() -> None:
        p = InProcessLockProvider(local)
        p.release()                                      # C45: no effect, no error
        t0 = time.monotonic()
        try:
            p.acquire(timeout_s=0.1)                     # C44
        except LockTimeoutError as exc:
            out["error"], out["waited"] = exc, time.monotonic() - t0

    t = threading.Thread(target=other, name="contender")
    t.start()
    t.join()
    err = out["error"]
    assert isinstance(err, LockTimeoutError) and isinstance(err, TimeoutError) and isinstance(err, LakeError)
    assert 0.09 <= out["waited"] < 3.0
    assert err.holder == main.holder and "MainThread" in err.holder and str(os.getpid()) in err.holder
    msg = str(err)
    assert "in-process lock" in msg and "within 0.1 s" in msg and main.holder in msg and "retry" in msg
    assert main.held
    main.release()
    assert InProcessLockProvider(local).holder is None


def test_c46_c48_identity_and_acquire_before_timeout(local):
    providers = [InProcessLockProvider(local) for _ in range(3)]
    order: list[int] = []
    providers[0].acquire()

    def contender(i: int) -> None:
        providers[i].acquire(timeout_s=5)               # C48: acquired once the holder releases
        order.append(i)
        time.sleep(0.02)
        providers[i].release()

    ts = [threading.Thread(target=contender, args=(i,)) for i in (1, 2)]
    for t in ts:
        t.start()
    time.sleep(0.05)
    assert order == []                                   # C46: all three share one lock
    providers[0].release()
    for t in ts:
        t.join()
    assert sorted(order) == [1, 2]


def test_c47_redundant_release_is_noop(local):
    p = InProcessLockProvider(local)
    p.release()
    p.acquire()
    p.release()
    p.release()
    with p:
        assert p.held
    assert not p.held


def test_in_process_threads_mutual_exclusion(local):
    assert _run_counter_threads(lambda: InProcessLockProvider(local), local, threads=4, n=25) == 1


def test_in_process_does_not_span_processes(tmp_path, spawn_path):
    """Documents the limit: two processes both 'hold' the in-process lock of one table."""
    base = str(tmp_path / "table")
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    ps = [SPAWN.Process(target=_hold_at_barrier_worker, args=(base, barrier, results)) for _ in range(2)]
    for p in ps:
        p.start()
    got = [results.get(timeout=60) for _ in ps]
    for p in ps:
        p.join(timeout=10)
    assert got == ["held-together", "held-together"]


def test_negative_control_without_lock_loses_updates(local):
    """The counter test can see a race: without a lock, concurrent increments are lost."""
    class NoLock:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    counter = "counter-nolock.txt"
    local.write(counter, b"0")
    barrier = threading.Barrier(4)

    def run() -> None:
        barrier.wait()
        for _ in range(5):
            with NoLock():
                v = int(local.read(counter).decode())
                time.sleep(0.01)
                local.write(counter, str(v + 1).encode())

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(local.read(counter).decode()) < 20


# == storage provider on local files ==============================================================
def test_storage_lock_file_grammar_and_release(local):
    p = StorageLockProvider(local, LockConfig(lease_s=30, owner="writer-1"))
    with p:
        raw = json.loads(local.read(LOCK_FILE))
        assert raw["owner"] == "writer-1" == p.holder and len(raw["nonce"]) == 32
        assert raw["expires_at"] - raw["acquired_at"] == pytest.approx(30)
        assert raw["expires_at"] > time.time() + 25
        info = read_lock_file(local)
        assert info is not None and info.owner == "writer-1" and not info.expired(time.time(), 1.0)
        p.ensure_held()
        with pytest.raises(LockError, match="not re-entrant"):
            p.acquire(timeout_s=0)
    assert not local.exists(LOCK_FILE) and read_lock_file(local) is None
    assert sorted(e.name for e in local.list(".hoodie/.locks")) == []      # no temp files or tokens left
    with pytest.raises(LockLostError, match="not held"):
        p.ensure_held()


def test_storage_default_owner_is_host_pid_thread_uuid(local):
    p = StorageLockProvider(local)
    with p:
        host, pid, thread, uid = p.holder.split("/")
        assert host == socket.gethostname() and pid == str(os.getpid()) and thread == "MainThread" and len(uid) == 12


def test_storage_timeout_names_holder_and_lease(local):
    holder = StorageLockProvider(local, LockConfig(lease_s=30))
    holder.acquire()
    try:
        p = StorageLockProvider(local, LockConfig(timeout_s=0.3, **FAST))
        t0 = time.monotonic()
        with pytest.raises(LockTimeoutError) as ei:
            p.acquire()
        waited = time.monotonic() - t0
        err = ei.value
        assert 0.29 <= waited < 3.0 and err.waited_s == pytest.approx(waited, abs=0.2)
        assert err.holder == holder.holder and err.attempts >= 3 and err.timeout_s == 0.3
        msg = str(err)
        for part in ("storage lock", LOCK_FILE, "within 0.3 s", holder.holder, "lease expires in",
                     "timeout_s", "lease_s"):
            assert part in msg, (part, msg)
        assert p.holder == holder.holder                  # read from the lock file
        assert local.exists(LOCK_FILE)
        with pytest.raises(LockTimeoutError):
            p.acquire(timeout_s=0)                       # a single attempt
    finally:
        holder.release()


def test_storage_threads_mutual_exclusion_separate_providers(local):
    cfg = LockConfig(lease_s=10, **FAST)
    assert _run_counter_threads(lambda: StorageLockProvider(local, cfg), local, threads=4, n=25) == 1
    assert not local.exists(LOCK_FILE)


def test_storage_threads_share_one_provider(local):
    shared = StorageLockProvider(local, LockConfig(lease_s=10, **FAST))
    assert _run_counter_threads(lambda: shared, local, threads=4, n=15) == 1
    assert not shared.held and not local.exists(LOCK_FILE)


def test_storage_processes_mutual_exclusion(local, spawn_path):
    _run_counter_processes("storage", local, {"lease_s": 10, **FAST}, procs=4, n=25)


def test_storage_lease_is_renewed_while_held(local):
    holder = StorageLockProvider(local, LockConfig(lease_s=1.0, clock_skew_s=0.1, **FAST))
    holder.acquire()
    try:
        start = time.monotonic()                           # held for more than 2 leases, renewed 3 times
        _wait_for(lambda: time.monotonic() - start > 2.2 and holder.renewals >= 3, "3 renewals over 2 leases")
        with pytest.raises(LockTimeoutError):
            StorageLockProvider(local, LockConfig(timeout_s=0.3, clock_skew_s=0.1, **FAST)).acquire()
        assert holder.renewals >= 3 and holder.held
        holder.ensure_held()
        assert read_lock_file(local).expires_at > time.time()
    finally:
        holder.release()
    assert not local.exists(LOCK_FILE)


def test_c49_c50_expired_lock_is_broken_live_one_is_not(local):
    local.create_exclusive(LOCK_FILE, _expired_lock_bytes(ago=0.05))
    strict = StorageLockProvider(local, LockConfig(timeout_s=0.2, clock_skew_s=5.0, **FAST))
    with pytest.raises(LockTimeoutError, match="lease expired"):
        strict.acquire()                                  # within the clock-skew margin: not broken yet
    p = StorageLockProvider(local, LockConfig(timeout_s=60, clock_skew_s=0.0, **FAST))
    p.acquire()
    assert p.broken_locks == 1                           # broken, not waited out
    p.release()
    assert sorted(e.name for e in local.list(".hoodie/.locks")) == []      # break tokens cleaned up


def test_storage_unreadable_lock_file_expires_by_mtime(local):
    local.create_exclusive(LOCK_FILE, b"{not json")
    p = StorageLockProvider(local, LockConfig(timeout_s=0.1, lease_s=3.0, clock_skew_s=0.1, **FAST))
    with pytest.raises(LockTimeoutError) as ei:
        p.acquire()
    assert ei.value.holder is None and "holder is unknown" in str(ei.value)
    p.acquire(timeout_s=60)                               # once the file's mtime is older than the lease
    assert p.broken_locks == 1
    p.release()


def test_storage_concurrent_breakers_exclude_each_other(local):
    """Many writers find the same expired lock at once: exactly one breaks it, one holds at a time."""
    for _ in range(4):
        local.create_exclusive(LOCK_FILE, _expired_lock_bytes())
        cfg = LockConfig(lease_s=10, clock_skew_s=0.0, **FAST)
        providers = [StorageLockProvider(local, cfg) for _ in range(8)]
        it = iter(providers)
        assert _run_counter_threads(lambda it=it: next(it), local, threads=8, n=1) == 1
        assert sum(p.broken_locks for p in providers) == 1
        assert not local.exists(LOCK_FILE)
        assert [e.name for e in local.list(".hoodie/.locks")] == []


def test_storage_stalled_holder_loses_lock_and_release_keeps_new_owners_file(local):
    cfg = LockConfig(lease_s=1.0, clock_skew_s=0.05, **FAST)
    stalled, other = StorageLockProvider(local, cfg), StorageLockProvider(local, cfg)
    stalled.acquire()
    stalled._stop_renewer()                              # simulate a process that stops renewing (stalls)
    other.acquire(timeout_s=60)                          # breaks the lease after ~1.05 s
    assert other.broken_locks == 1 and other.held
    with pytest.raises(LockLostError, match="Do not commit"):
        stalled.ensure_held()
    assert not stalled.held
    stalled.release()                                    # not the owner any more: must not delete
    info = read_lock_file(local)
    assert info is not None and info.nonce == other._nonce
    other.ensure_held()
    stranger = StorageLockProvider(local, cfg)
    stranger.release()                                   # never acquired: a no-op
    assert read_lock_file(local).nonce == other._nonce
    other.release()
    assert not local.exists(LOCK_FILE)


def test_storage_renewer_detects_lock_taken_over(local):
    cfg = LockConfig(lease_s=3.0, renew_interval_s=0.1, clock_skew_s=0.05, **FAST)
    p = StorageLockProvider(local, cfg)
    p.acquire()
    local.write(LOCK_FILE, _expired_lock_bytes(owner="intruder", ago=-30))     # someone else's lock now
    deadline = time.monotonic() + 60
    while p.held and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not p.held and "intruder" in (p._lost or "")
    with pytest.raises(LockLostError, match="intruder"):
        p.ensure_held()
    p.release()
    assert read_lock_file(local).owner == "intruder"


def test_storage_unknown_create_outcome_is_adopted(local, monkeypatch):
    p = StorageLockProvider(local, LockConfig(lease_s=300, timeout_s=60, **FAST))   # not adopted: a timeout
    real = local.create_exclusive
    calls = []

    def flaky(rel, data=b""):
        calls.append(rel)
        if len(calls) == 1:
            assert real(rel, data)                         # the create lands ...
            raise OSError("connection reset by peer")     # ... but the answer is lost
        return real(rel, data)

    monkeypatch.setattr(local, "create_exclusive", flaky)
    p.acquire()
    assert p.held and read_lock_file(local).nonce == p._nonce and p.broken_locks == 0
    p.release()
    assert not local.exists(LOCK_FILE)


def test_c51_storage_errors_are_retried_then_time_out(local, monkeypatch):
    failures = [0]
    real = local.create_exclusive

    def failing(rel, data=b""):
        if failures[0] < 2:
            failures[0] += 1
            raise OSError("503 SlowDown")
        return real(rel, data)

    monkeypatch.setattr(local, "create_exclusive", failing)
    p = StorageLockProvider(local, LockConfig(timeout_s=2, **FAST))
    p.acquire()
    assert failures[0] == 2
    p.release()

    def always(rel, data=b""):
        raise OSError("503 SlowDown")

    monkeypatch.setattr(local, "create_exclusive", always)
    with pytest.raises(LockTimeoutError, match="last storage error: 503 SlowDown") as ei:
        p.acquire(timeout_s=0.2)
    assert ei.value.attempts >= 3


def test_storage_dead_holder_process_is_broken_after_its_lease(local, spawn_path):
    """SIGKILL a process that holds the lock: others wait while it lives, then break it after the lease."""
    opts = {"lease_s": 1.2, "clock_skew_s": 0.2, **FAST}
    ready, go, results = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    child = SPAWN.Process(target=_hold_worker, args=("storage", local.base_url, {}, opts, ready, go, results))
    child.start()
    try:
        assert ready.wait(60), results.get(timeout=1)
        kind, owner = results.get(timeout=5)
        assert kind == "owner" and f"/{child.pid}/" in owner
        p = StorageLockProvider(local, LockConfig(**opts))
        with pytest.raises(LockTimeoutError) as ei:
            p.acquire(timeout_s=2.0)                     # > 1.5 leases: the live holder keeps renewing
        assert ei.value.holder == owner and "lease expires in" in str(ei.value)
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=10)
        t0 = time.monotonic()
        p.acquire(timeout_s=10)
        waited = time.monotonic() - t0
        assert waited < 1.2 + 0.2 + 1.5, waited            # at most lease + skew (+ polling, a loaded machine)
        assert p.broken_locks == 1 and p.held
        p.release()
    finally:
        if child.is_alive():
            child.kill()


def test_storage_sigstopped_holder_learns_it_lost_the_lock(local, spawn_path):
    """A holder frozen past its lease (SIGSTOP) is broken; on resuming, ensure_held fails and its
    release leaves the new owner's lock file alone."""
    opts = {"lease_s": 0.6, "clock_skew_s": 0.1, **FAST}
    ready, go, results = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    child = SPAWN.Process(target=_hold_worker, args=("storage", local.base_url, {}, opts, ready, go, results))
    child.start()
    try:
        assert ready.wait(60)
        assert results.get(timeout=5)[0] == "owner"
        os.kill(child.pid, signal.SIGSTOP)
        p = StorageLockProvider(local, LockConfig(**opts))
        p.acquire(timeout_s=5)
        assert p.broken_locks == 1
        os.kill(child.pid, signal.SIGCONT)
        go.set()
        got = dict(results.get(timeout=20) for _ in range(2))
        assert got["ensure_held"].startswith("lost:"), got
        assert got["released"] == "ok"
        p.ensure_held()
        assert read_lock_file(local).nonce == p._nonce
        p.release()
    finally:
        if child.is_alive():
            os.kill(child.pid, signal.SIGCONT)
            child.join(timeout=10)
            if child.is_alive():
                child.kill()


# == storage provider on a real S3-compatible server (moto) =======================================
@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    exe = VENV_BIN / "moto_server"
    if not exe.exists():
        found = shutil.which("moto_server")
        if not found:
            pytest.skip("moto_server is not installed (pip install 'moto[server]')")
        exe = Path(found)
    s3fs = pytest.importorskip("s3fs")
    d = tmp_path_factory.mktemp("moto")
    port = free_port()
    log = open(d / "moto.log", "wb")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto_server did not start: {(d / 'moto.log').read_text(errors='replace')}")
                time.sleep(0.05)
        opts = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
        s3fs.S3FileSystem(skip_instance_cache=True, **opts).mkdir(BUCKET)
        yield opts
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def s3_table(s3) -> Storage:
    return Storage(f"s3://{BUCKET}/t-{uuid.uuid4().hex[:10]}", s3)


def test_s3_create_exclusive_is_really_exclusive(s3_table):
    """moto enforces If-None-Match: * on PutObject; a race of 12 creators has exactly one winner."""
    assert s3_table.create_exclusive("x/once", b"1") is True
    assert s3_table.create_exclusive("x/once", b"2") is False
    assert s3_table.read("x/once") == b"1"
    for round_ in range(4):
        wins: list[bool] = []
        barrier = threading.Barrier(12)

        def create(i: int, key: str = f"x/race-{round_}", barrier=barrier, wins=wins) -> None:
            st = Storage(s3_table.base_url, s3_table.storage_options)
            barrier.wait()
            wins.append(st.create_exclusive(key, str(i).encode()))

        ts = [threading.Thread(target=create, args=(i,)) for i in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(wins) == [False] * 11 + [True], f"If-None-Match not enforced (round {round_})"


def test_s3_storage_lock_threads(s3_table):
    cfg = LockConfig(lease_s=10, **FAST)
    assert _run_counter_threads(lambda: StorageLockProvider(s3_table, cfg), s3_table, threads=3, n=8) == 1
    assert not s3_table.exists(LOCK_FILE)


def test_s3_storage_lock_processes(s3_table, spawn_path):
    _run_counter_processes("storage", s3_table, {"lease_s": 10, **FAST}, procs=3, n=8)


def test_s3_lease_renewal_expiry_timeout_and_non_owner_release(s3_table):
    s3_table.create_exclusive(LOCK_FILE, _expired_lock_bytes())
    cfg = LockConfig(lease_s=1.5, renew_interval_s=0.3, clock_skew_s=0.1, **FAST)
    p = StorageLockProvider(s3_table, cfg)
    p.acquire(timeout_s=5)
    assert p.broken_locks == 1
    try:
        _wait_for(lambda: p.renewals >= 2, "2 renewals on S3 (write + whole-object read)")
        p.ensure_held()
        other = StorageLockProvider(s3_table, LockConfig(timeout_s=0.3, clock_skew_s=0.1, **FAST))
        with pytest.raises(LockTimeoutError) as ei:
            other.acquire()
        assert ei.value.holder == p.holder and "s3://" in str(ei.value)
        other.release()                                    # not the owner: no-op
        assert read_lock_file(s3_table).nonce == p._nonce
    finally:
        p.release()
    assert not s3_table.exists(LOCK_FILE)


def test_s3_store_without_conditional_put_is_refused(s3_table, monkeypatch):
    """A client or server that ignores the exclusive create (s3fs < 2025.7 for small objects) is detected."""
    monkeypatch.setattr(lock_storage, "_VERIFIED", set())
    fs = s3_table.fs
    real_open = fs.open
    monkeypatch.setattr(fs, "open", lambda path, mode="rb", **kw: real_open(path, "wb" if mode == "xb" else mode, **kw))
    p = StorageLockProvider(s3_table, LockConfig(timeout_s=1))
    with pytest.raises(LockError, match="does not enforce conditional creates"):
        p.acquire()
    assert not p.held and not s3_table.exists(LOCK_FILE)
    assert [e for e in s3_table.find(".hoodie") if ".probe-" in e.path] == []
    monkeypatch.setattr(fs, "open", real_open)
    p.acquire()                                          # the real store passes the check
    p.release()


def _wait_for(cond, what: str, timeout: float = 120.0) -> None:
    """Poll ``cond`` until it holds (the deadline is far beyond what it takes on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)
