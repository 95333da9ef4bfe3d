"""ZooKeeper lock provider against a real ZooKeeper server (Debian's ``zookeeper`` package).

The fixture installs nothing: it runs ``org.apache.zookeeper.server.quorum.QuorumPeerMain``
with java and the package's jars (/usr/share/java/zookeeper.jar, whose manifest lists its
dependencies) on 127.0.0.1, a free port and a temporary data dir, and skips when java or
the package is missing (``scripts/system-deps.sh`` installs it).

Covered: mutual exclusion across threads and spawned processes, timeouts naming the holder,
session loss (expired session, SIGKILLed holder, stopped server) and connection failures.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
import uuid
from pathlib import Path

import pytest

from lakesdk.concurrency.locks import (
    LockError,
    LockLostError,
    LockTimeoutError,
    ZookeeperLockProvider,
    lock_provider,
)
from lakesdk.storage import Storage

from ..helpers import ZooKeeperServer, free_port

pytestmark = pytest.mark.zookeeper
kazoo_client = pytest.importorskip("kazoo.client")

ROOT = Path(__file__).resolve().parents[2]
SPAWN = mp.get_context("spawn")
FAST = {"retry_initial_s": 0.01, "retry_max_s": 0.1}


# -- the server: the fixture `zk` (conftest.py) runs a helpers.ZooKeeperServer for the module ---------
@pytest.fixture
def table(tmp_path) -> Storage:
    return Storage(str(tmp_path / f"table-{uuid.uuid4().hex[:6]}"))


def _zk_lock(zk: ZooKeeperServer, table: Storage, **options) -> ZookeeperLockProvider:
    opts = {"zk_connect": zk.connect, "zk_session_timeout_s": 4, "zk_connection_timeout_s": 5, **FAST, **options}
    p = lock_provider("zookeeper", table, opts)
    assert isinstance(p, ZookeeperLockProvider)
    return p


def _children(zk: ZooKeeperServer, path: str) -> list[str]:
    c = kazoo_client.KazooClient(hosts=zk.connect)
    c.start(timeout=5)
    try:
        return c.get_children(path) if c.exists(path) else []
    finally:
        c.stop()
        c.close()


def _expire_session(p: ZookeeperLockProvider) -> None:
    """Make the server expire ``p``'s session: a second client on the same session id closes it."""
    client = p._client
    other = kazoo_client.KazooClient(hosts=p.connect, client_id=client.client_id, timeout=p.session_timeout_s)
    other.start(timeout=5)
    other.stop()
    other.close()


def _wait_until(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - t0


# -- spawned workers ---------------------------------------------------------------------------------
def _zk_counter_worker(base_url: str, options: dict, counter: str, n: int, barrier, results) -> None:
    try:
        storage = Storage(base_url)
        lock = lock_provider("zookeeper", storage, options)
        barrier.wait(timeout=60)
        for _ in range(n):
            with lock:
                v = int(storage.read(counter).decode())
                time.sleep(0.001)
                storage.write(counter, str(v + 1).encode())
        results.put(("ok", None))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _zk_hold_worker(base_url: str, options: dict, ready, results) -> None:
    try:
        lock = lock_provider("zookeeper", Storage(base_url), options)
        lock.acquire()
        results.put(lock.holder)
        ready.set()
        time.sleep(120)
    except BaseException:
        results.put("error: " + traceback.format_exc())


# == tests ============================================================================================
def test_zk_acquire_release_node_and_timeout_message(zk, table):
    a = _zk_lock(zk, table)
    b = _zk_lock(zk, table, timeout_s=0.3)
    assert a.path == b.path and a.path.startswith("/lakesdk/locks/table-")
    a.acquire()
    try:
        assert a.held and a.session_id is not None
        a.ensure_held()
        kids = _children(zk, a.path)
        assert len(kids) == 1 and "__lock__" in kids[0]
        assert b.holder == a.holder and str(os.getpid()) in a.holder
        t0 = time.monotonic()
        with pytest.raises(LockTimeoutError) as ei:
            b.acquire()
        assert time.monotonic() - t0 >= 0.29               # waited out its timeout (0.3 s)
        err = ei.value
        assert isinstance(err, TimeoutError) and err.holder == a.holder
        msg = str(err)
        for part in ("ZooKeeper lock", a.path, zk.connect, "within 0.3 s", a.holder, "session expires", "timeout_s"):
            assert part in msg, (part, msg)
        with pytest.raises(LockError, match="not re-entrant"):
            a.acquire(timeout_s=0)
        assert len(_children(zk, a.path)) == 1          # the timed-out contender cleaned up its node
    finally:
        a.release()
    assert _children(zk, a.path) == [] and not a.held and b.holder is None
    a.release()                                          # redundant: a no-op
    with b:
        assert b.held


def test_zk_threads_mutual_exclusion(zk, table):
    counter = "counter.txt"
    table.write(counter, b"0")
    inside, max_inside, guard, errors = [0], [0], threading.Lock(), []
    barrier = threading.Barrier(4)

    def run() -> None:
        lock = _zk_lock(zk, table)
        try:
            barrier.wait(timeout=10)
            for _ in range(10):
                with lock:
                    with guard:
                        inside[0] += 1
                        max_inside[0] = max(max_inside[0], inside[0])
                    v = int(table.read(counter).decode())
                    time.sleep(0.001)
                    table.write(counter, str(v + 1).encode())
                    with guard:
                        inside[0] -= 1
        except BaseException:
            errors.append(traceback.format_exc())

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors, "\n".join(errors)
    assert max_inside[0] == 1 and int(table.read(counter).decode()) == 40


def test_zk_processes_mutual_exclusion(zk, table, spawn_path):
    counter = "counter.txt"
    table.write(counter, b"0")
    opts = {"zk_connect": zk.connect, "zk_session_timeout_s": 4, **FAST}
    procs, n = 3, 15
    barrier, results = SPAWN.Barrier(procs), SPAWN.Queue()
    ps = [SPAWN.Process(target=_zk_counter_worker, args=(table.base_url, opts, counter, n, barrier, results))
          for _ in range(procs)]
    for p in ps:
        p.start()
    try:
        outcomes = [results.get(timeout=120) for _ in ps]
    finally:
        for p in ps:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [o[1] for o in outcomes if o[0] != "ok"]
    assert not errors, "\n".join(errors)
    assert int(table.read(counter).decode()) == procs * n


def test_zk_expired_session_releases_the_lock(zk, table):
    a = _zk_lock(zk, table, zk_session_timeout_s=2)
    b = _zk_lock(zk, table, timeout_s=60)
    a.acquire()
    _expire_session(a)
    b.acquire()                                           # ZooKeeper deleted a's ephemeral node
    try:
        _wait_until(lambda: a._lost is not None, 60, "the holder to see its session LOST")
        assert not a.held
        with pytest.raises(LockLostError, match="session expired"):
            a.ensure_held()
        a.release()                                       # must not disturb the new holder
        b.ensure_held()
        assert len(_children(zk, b.path)) == 1
    finally:
        b.release()


def test_zk_killed_holder_is_released_after_its_session_timeout(zk, table, spawn_path):
    session = 1.5
    opts = {"zk_connect": zk.connect, "zk_session_timeout_s": session, **FAST}
    ready, results = SPAWN.Event(), SPAWN.Queue()
    child = SPAWN.Process(target=_zk_hold_worker, args=(table.base_url, opts, ready, results))
    child.start()
    try:
        assert ready.wait(60), results.get(timeout=1)
        owner = results.get(timeout=5)
        assert f"/{child.pid}/" in owner
        p = lock_provider("zookeeper", table, opts)
        with pytest.raises(LockTimeoutError) as ei:
            p.acquire(timeout_s=0.5)
        assert ei.value.holder == owner
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=10)
        t0 = time.monotonic()
        p.acquire(timeout_s=10)
        waited = time.monotonic() - t0
        assert waited < session + 3, waited               # the server expires the dead session
        p.release()
    finally:
        if child.is_alive():
            child.kill()


@pytest.mark.timeout(120)                                # the acquire gives up after 1 s: it never hangs
def test_zk_unreachable_server_times_out_with_advice(table):
    port = free_port()                                   # nobody listens there
    p = lock_provider("zookeeper", table, {"zk_connect": f"127.0.0.1:{port}", "zk_connection_timeout_s": 0.5,
                                           "timeout_s": 1.0, **FAST})
    with pytest.raises(LockTimeoutError) as ei:
        p.acquire()
    msg = str(ei.value)
    assert "Could not connect to ZooKeeper" in msg and f"127.0.0.1:{port}" in msg and "zk_connect" in msg
    assert not p.held


def test_zk_holder_reconnects_often_enough_to_keep_its_session(zk, table):
    """A holder cut off from a restarting server tries to reconnect at least every tenth of
    its session timeout.  kazoo's default backoff doubles up to an hour: after an outage of
    30 s (a server restarting on a loaded machine) the next attempt came 25 s later, after
    the restored session had expired."""
    a = _zk_lock(zk, table, zk_session_timeout_s=20)
    a.acquire()
    try:
        retry = a._client._conn_retry
        assert retry.max_tries == -1 and retry.max_delay <= 2.0
    finally:
        a.release()


def test_zk_stopped_server_suspends_the_lock(zk, table):
    """Last: it restarts the server.  While the connection is down the lock is uncertain, so
    ensure_held() refuses; a server back within the session timeout keeps the session (and lock).
    The session timeout is the server's maximum (60 s): the restart of a JVM on a loaded
    machine takes most of 20 s.  Each wait is for an event, with a deadline far beyond it."""
    a = _zk_lock(zk, table, zk_session_timeout_s=60)
    a.acquire()
    try:
        zk.stop()
        _wait_until(lambda: not a.held, 60, "the client to notice the lost connection")
        with pytest.raises(LockLostError, match="suspended"):
            a.ensure_held()
        zk.start(timeout=120)
        _wait_until(lambda: a.held, 120, "the client to reconnect")
        a.ensure_held()                                   # same session: the node survived the restart
    finally:
        a.release()
    assert _children(zk, a.path) == []
