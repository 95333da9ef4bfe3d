"""Table lock providers: Hudi's transaction lock, behind one interface.

Three providers, chosen with ``lock="in_process" | "storage" | "zookeeper"`` and configured
with ``lock_options={...}`` (:func:`lock_provider` builds them):

=============  ===================================================  =====================================
kind           how                                                   excludes
=============  ===================================================  =====================================
in_process     one ``threading.Lock`` per table base URL,            threads of one process
               shared by every handle in the process
storage        lock file ``.hoodie/.locks/table.lock`` made by an    threads, processes and machines that
               atomic conditional create, with an expiring lease     share the table's storage (local files,
               renewed by a daemon thread                            S3-compatible stores)
zookeeper      kazoo lock recipe (ephemeral sequential znodes)       anything that reaches the ZooKeeper
               on ``<zk_base_path>/<table key>``                     ensemble
=============  ===================================================  =====================================

The lock guards one short critical section: the commit of an instant (reload the timeline,
resolve conflicts, write the completed instant), and the creation of new instant times.
**A lock is never held across data writing**: data files are written before the lock is
taken, and conflicts are found under the lock at commit time (optimistic concurrency).
Taking it is therefore cheap to wait for, and a writer that dies mid-write blocks nobody.

Common behaviour: :meth:`LockProvider.acquire` waits up to ``timeout_s`` (default 60 s) and
raises :class:`LockTimeoutError` (a ``TimeoutError``) naming the lock, the holder if known,
how long it waited and what to do; polling and reconnection use exponential backoff with
jitter (``retry_initial_s`` doubling up to ``retry_max_s``).  Locks are not re-entrant: a
second acquire by the holding thread raises :class:`LockError`.  ``release`` of a lock this
provider does not hold is a no-op.  :meth:`LockProvider.ensure_held` raises
:class:`LockLostError` when a lease expired or a ZooKeeper session was lost: call it just
before the commit point.  The storage lease and the ZooKeeper session are the limits of the
guarantee: a holder that stalls longer than its lease or session timeout loses the lock and,
without fencing in the store, learns it only at its next check.  See
:mod:`lakesdk.concurrency.lock_storage` and :mod:`lakesdk.concurrency.lock_zookeeper`.

>>> from lakesdk.storage import Storage
>>> lock = lock_provider("storage", Storage("memory://doctest-locks/t1"), {"timeout_s": 5, "lease_s": 30})
>>> lock
StorageLockProvider(table='memory://doctest-locks/t1', held=False, lease_s=30.0, timeout_s=5.0)
>>> with lock:
...     lock.held
True
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from lakesdk.concurrency.lock_base import (
    LockConfig,
    LockConfigError,
    LockError,
    LockLostError,
    LockProvider,
    LockTimeoutError,
    default_owner,
)
from lakesdk.concurrency.lock_inprocess import InProcessLockProvider
from lakesdk.concurrency.lock_storage import LOCK_FILE, LockFileInfo, StorageLockProvider, read_lock_file
from lakesdk.concurrency.lock_zookeeper import ZookeeperLockProvider, default_lock_key
from lakesdk.storage import Storage

__all__ = [
    "LOCK_FILE",
    "InProcessLockProvider",
    "LockConfig",
    "LockConfigError",
    "LockError",
    "LockFileInfo",
    "LockKind",
    "LockLostError",
    "LockProvider",
    "LockTimeoutError",
    "StorageLockProvider",
    "ZookeeperLockProvider",
    "default_lock_key",
    "default_owner",
    "lock_provider",
    "read_lock_file",
]

LockKind = Literal["in_process", "storage", "zookeeper"]

_CONFIG_KEYS = ("timeout_s", "retry_initial_s", "retry_max_s", "lease_s", "owner", "clock_skew_s", "renew_interval_s")
_ZK_KEYS = {"zk_connect": "connect", "zk_base_path": "base_path", "zk_lock_key": "lock_key",
            "zk_session_timeout_s": "session_timeout_s", "zk_connection_timeout_s": "connection_timeout_s"}
_STORAGE_KEYS = ("storage_atomic",)
# Hudi's wire names (hoodie.write.lock.*), mapped to ours with a unit factor.
_HOODIE = {
    "hoodie.write.lock.wait_time_ms": ("timeout_s", 1e-3),
    "hoodie.write.lock.wait_time_ms_between_retry": ("retry_initial_s", 1e-3),
    "hoodie.write.lock.max_wait_time_ms_between_retry": ("retry_max_s", 1e-3),
    "hoodie.write.lock.zookeeper.url": ("zk_connect", None),
    "hoodie.write.lock.zookeeper.port": ("_zk_port", None),
    "hoodie.write.lock.zookeeper.base_path": ("zk_base_path", None),
    "hoodie.write.lock.zookeeper.lock_key": ("zk_lock_key", None),
    "hoodie.write.lock.zookeeper.session_timeout_ms": ("zk_session_timeout_s", 1e-3),
    "hoodie.write.lock.zookeeper.connection_timeout_ms": ("zk_connection_timeout_s", 1e-3),
}
_KINDS = {
    "in_process": "in_process", "inprocess": "in_process", "in-process": "in_process",
    "storage": "storage", "zookeeper": "zookeeper", "zk": "zookeeper",
    "org.apache.hudi.client.transaction.lock.inprocesslockprovider": "in_process",
    "org.apache.hudi.client.transaction.lock.storagebasedlockprovider": "storage",
    "org.apache.hudi.client.transaction.lock.filesystembasedlockprovider": "storage",
    "org.apache.hudi.client.transaction.lock.zookeeperbasedlockprovider": "zookeeper",
}
# Protocols whose Storage.create_exclusive is atomic (temp file + hard link, a process lock,
# a conditional put with If-None-Match).  Elsewhere it falls back to check-then-write.
_ATOMIC_CREATE = ("file", "memory", "s3")


def _number(key: str, value: Any, factor: float | None) -> Any:
    if factor is None:
        return value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise LockConfigError(f"lock option {key!r} must be a number, found {value!r}", key=key) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LockConfigError(f"lock option {key!r} must be a number, found {value!r}", key=key)
    return value * factor


def _normalize(options: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    known = (*_CONFIG_KEYS, *_ZK_KEYS, *_STORAGE_KEYS)
    for key, value in dict(options or {}).items():
        if key in _HOODIE:
            ours, factor = _HOODIE[key]
            out[ours] = _number(key, value, factor)
        elif key in known:
            out[key] = _number(key, value, 1.0) if key.endswith("_s") and value is not None else value
        else:
            close = difflib.get_close_matches(str(key), [*known, *_HOODIE], n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise LockConfigError(f"unknown lock option {key!r}.{hint} Known options: {', '.join(known)} "
                                  "(and Hudi's hoodie.write.lock.* names)", key=str(key))
    port = out.pop("_zk_port", None)
    if port is not None and isinstance(out.get("zk_connect"), str):
        hosts = [h.strip() for h in out["zk_connect"].split(",") if h.strip()]
        out["zk_connect"] = ",".join(h if ":" in h else f"{h}:{int(float(port))}" for h in hosts)
    return out


def lock_provider(kind: LockKind | str, storage: Storage | str, options: dict[str, Any] | None = None) -> LockProvider:
    """Build the lock provider ``kind`` for the table at ``storage`` from user ``lock_options``.

    Options (all optional except ``zk_connect``): ``timeout_s``, ``retry_initial_s``,
    ``retry_max_s``, ``lease_s``, ``owner``, ``clock_skew_s``, ``renew_interval_s`` (see
    :class:`LockConfig`); for ``"zookeeper"``: ``zk_connect`` ("host:port[,host:port]"),
    ``zk_base_path`` ("/lakesdk/locks"), ``zk_lock_key`` (default: table name + URL hash),
    ``zk_session_timeout_s`` (60), ``zk_connection_timeout_s`` (15); for ``"storage"``:
    ``storage_atomic=True`` to allow a store other than local files, memory and S3 when you
    know its conditional create is atomic.  Hudi's ``hoodie.write.lock.*`` names are accepted.

    >>> p = lock_provider("in_process", Storage("memory://doctest-factory"), {"hoodie.write.lock.wait_time_ms": 2500})
    >>> type(p).__name__, p.config.timeout_s
    ('InProcessLockProvider', 2.5)
    >>> try:
    ...     lock_provider("storage", Storage("memory://x"), {"timeout": 1})
    ... except LockConfigError as e:
    ...     print(str(e).split(" Known")[0])
    unknown lock option 'timeout'. Did you mean 'timeout_s'?
    """
    if isinstance(storage, str):
        storage = Storage(storage)
    if not isinstance(storage, Storage):
        raise LockConfigError(f"lock_provider needs the table's Storage (or its base URL), found {storage!r}")
    k = _KINDS.get(str(kind).strip().lower()) if isinstance(kind, str) else None
    if k is None:
        raise LockConfigError(f"unknown lock kind {kind!r}: expected 'in_process', 'storage' or 'zookeeper'")
    opts = _normalize(options)
    zk = {_ZK_KEYS[key]: opts.pop(key) for key in list(opts) if key in _ZK_KEYS}
    storage_atomic = bool(opts.pop("storage_atomic", False))
    config = LockConfig(**opts)
    if k == "zookeeper":
        if "connect" not in zk:
            raise LockConfigError("the ZooKeeper lock needs lock_options={'zk_connect': 'host:port[,host:port...]'} "
                                  "(and optionally zk_base_path, zk_lock_key, zk_session_timeout_s)", key="zk_connect")
        return ZookeeperLockProvider(storage, config, **zk)
    if zk:
        raise LockConfigError(f"lock options {sorted('zk_' + key for key in zk)} only apply to lock='zookeeper', "
                              f"not lock={k!r}")
    if k == "in_process":
        return InProcessLockProvider(storage, config)
    if storage.protocol not in _ATOMIC_CREATE and not storage_atomic:
        raise LockConfigError(
            f"the storage lock needs an atomic create-if-absent, which lakesdk guarantees only for local files and "
            f"S3-compatible stores with conditional puts, not for {storage.protocol!r} ({storage.base_url!r}). Use "
            "lock='zookeeper', or pass lock_options={'storage_atomic': True} if your store's create_exclusive is atomic.")
    return StorageLockProvider(storage, config)
