"""``ZookeeperLockProvider``: kazoo's lock recipe on ``<zk_base_path>/<lock key>``.

Needs the ``kazoo`` package: ``pip install 'lakesdk[zookeeper]'``.

Each contender creates an *ephemeral sequential* znode under the lock node
(``kazoo.recipe.lock.Lock``); the lowest sequence number holds the lock and the others watch
their predecessor, so waiting needs no polling.  The lock key defaults to the table folder
name plus a hash of the table's base URL (``<name>-<sha1(url)[:12]>``), so two tables with
the same name in different places never share a lock; set ``zk_lock_key`` to choose it.

Sessions: ``acquire`` opens a ZooKeeper session (``zk_session_timeout_s``, bounded by the
server's min/max session timeout) and ``release`` deletes the node and closes the session.
The lock lives exactly as long as the session:

* a holder that dies, or is cut off from ZooKeeper for longer than the session timeout,
  loses the lock when the server expires its session and deletes its ephemeral node; the
  next contender then gets it.  A lost session therefore *releases* the lock;
* the holder learns it only through its client: the state goes ``SUSPENDED`` when the
  connection drops (the session may still be alive) and ``LOST`` when the session expired.
  :meth:`ZookeeperLockProvider.ensure_held` raises :class:`LockLostError` in both states
  (while suspended nobody can tell whether the lock still exists), so the writer must check
  it right before its commit point.  As with any lease, a holder that stalls past the
  session timeout can act once more before it notices (there is no fencing token).

Connection failures are retried with exponential backoff and jitter until ``timeout_s``;
each connection attempt waits at most ``zk_connection_timeout_s``.  A holder whose
connection drops tries to reconnect at least every tenth of the session timeout (2 s at
most, plus jitter), so a server that is back within the session timeout keeps its session
and lock.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import re
import threading
import time
from typing import Any

from lakesdk.concurrency.lock_base import (
    Backoff,
    LockConfig,
    LockConfigError,
    LockLostError,
    LockProvider,
    fmt_s,
    log,
    monotonic,
)
from lakesdk.exceptions import MissingDependencyError
from lakesdk.storage import Storage

__all__ = ["ZookeeperLockProvider", "default_lock_key"]

DEFAULT_BASE_PATH = "/lakesdk/locks"
# Also treat Apache Curator's lock nodes ("..-lock-<seq>", used by Hudi's Java
# ZookeeperBasedLockProvider) as contenders when the same lock node is shared.
_CURATOR_PATTERN = "-lock-"


def default_lock_key(base_url: str) -> str:
    """``<table folder name>-<sha1(base URL)[:12]>``, safe as one znode name.

    >>> default_lock_key("s3://bucket/warehouse/trips")
    'trips-9e8069fc985f'
    """
    url = base_url.rstrip("/")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", posixpath.basename(url.split("://", 1)[-1]))[:80] or "table"
    return f"{name}-{hashlib.sha1(url.encode('utf-8')).hexdigest()[:12]}"


def _kazoo() -> Any:
    try:
        import kazoo.client
        import kazoo.exceptions
        import kazoo.handlers.threading  # noqa: F401
        import kazoo.protocol.states  # noqa: F401
        import kazoo.recipe.lock  # noqa: F401
        import kazoo.retry  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("kazoo", "zookeeper", "The ZooKeeper lock provider") from exc
    return kazoo


class ZookeeperLockProvider(LockProvider):
    """Table lock held in ZooKeeper (see the module doc for sessions and guarantees).

    >>> from lakesdk.storage import Storage
    >>> p = ZookeeperLockProvider(Storage("/data/trips"), connect="zk1:2181,zk2:2181")
    >>> p.path.startswith("/lakesdk/locks/trips-")
    True
    >>> p.held
    False
    """

    kind = "zookeeper"

    def __init__(self, storage: Storage, config: LockConfig | None = None, *, connect: str,
                 base_path: str = DEFAULT_BASE_PATH, lock_key: str | None = None, session_timeout_s: float = 60.0,
                 connection_timeout_s: float = 15.0) -> None:
        super().__init__(storage, config)
        if not isinstance(connect, str) or not connect.strip():
            raise LockConfigError("the ZooKeeper lock needs lock_options={'zk_connect': 'host:port[,host:port...]'}, "
                                  f"found {connect!r}", key="zk_connect")
        if not isinstance(base_path, str) or not base_path.startswith("/"):
            raise LockConfigError(f"zk_base_path must be an absolute znode path such as '/lakesdk/locks', "
                                  f"found {base_path!r}", key="zk_base_path")
        key = default_lock_key(storage.base_url) if lock_key is None else lock_key
        if not isinstance(key, str) or not key or "/" in key:
            raise LockConfigError(f"zk_lock_key must be a non-empty znode name without '/', found {lock_key!r}",
                                  key="zk_lock_key")
        for label, v in (("zk_session_timeout_s", session_timeout_s), ("zk_connection_timeout_s", connection_timeout_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
                raise LockConfigError(f"{label} must be a positive number of seconds, found {v!r}", key=label)
        self.connect = connect.strip()
        self.path = f"{base_path.rstrip('/') or ''}/{key}"
        self.session_timeout_s = float(session_timeout_s)
        self.connection_timeout_s = float(connection_timeout_s)
        self._mutex = threading.Lock()
        self._holding_thread: int | None = None
        self._client: Any = None
        self._lock: Any = None
        self._lost: str | None = None
        self._suspended = False

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"ZooKeeper lock {self.path!r} on {self.connect!r}"

    @property
    def held(self) -> bool:
        return self._lock is not None and self._lost is None and not self._suspended

    @property
    def session_id(self) -> int | None:
        """The ZooKeeper session id while the lock is held (None otherwise)."""
        c = self._client
        return None if c is None or c.client_id is None else int(c.client_id[0])

    @property
    def holder(self) -> str | None:
        """Our owner id while we hold the lock; otherwise the first contender's (opens a short session)."""
        if self.held:
            return self._owner_id
        kz = _kazoo()
        client = None
        try:
            client = kz.client.KazooClient(hosts=self.connect, timeout=self.session_timeout_s)
            client.start(timeout=self.connection_timeout_s)
            contenders = client.Lock(self.path, extra_lock_patterns=(_CURATOR_PATTERN,)).contenders()
            return contenders[0] or None if contenders else None
        except Exception:  # unknown is an acceptable answer for a status property
            return None
        finally:
            if client is not None:
                _close(client)

    def _repr_fields(self) -> dict[str, Any]:
        return {"path": self.path, "connect": self.connect, "timeout_s": self.config.timeout_s}

    def _reconnect_retry(self, kz: Any) -> Any:
        """How the holder's client reconnects after its connection dropped: without end, the
        delay between attempts growing to a tenth of the session timeout at most (2 s at
        most; plus jitter), so a server back within the session timeout finds the session
        still alive.  kazoo's default backoff doubles up to an hour: after a restart that
        took 30 s its next attempt came 25 s later, after the restored session had expired."""
        return kz.retry.KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_jitter=0.4,
                                   max_delay=max(0.1, min(2.0, self.session_timeout_s / 10)))

    # -- acquire ----------------------------------------------------------------------------
    def acquire(self, *, timeout_s: float | None = None) -> None:
        timeout = self._timeout(timeout_s)
        kz = _kazoo()
        start = self._take_thread_mutex(timeout)
        try:
            self._acquire_zk(kz, start, timeout)
        except BaseException:
            self._mutex.release()
            raise
        self._holding_thread = threading.get_ident()

    def _acquire_zk(self, kz: Any, start: float, timeout: float) -> None:
        cfg = self.config
        deadline = start + timeout
        backoff = Backoff(cfg.retry_initial_s, cfg.retry_max_s)
        attempts = 0
        connected_once = False
        last_error: BaseException | None = None
        holder: str | None = None
        while True:
            attempts += 1
            remaining = deadline - monotonic()
            client = lock = None
            try:
                client = kz.client.KazooClient(hosts=self.connect, timeout=self.session_timeout_s,
                                               connection_retry=self._reconnect_retry(kz))
                client.start(timeout=min(self.connection_timeout_s, max(remaining, 0.5)))
                connected_once = True
                owner = self._new_owner_id()
                lock = client.Lock(self.path, identifier=owner, extra_lock_patterns=(_CURATOR_PATTERN,))
                remaining = deadline - monotonic()
                if remaining <= 0:
                    got = lock.acquire(blocking=False)
                else:
                    got = lock.acquire(blocking=True, timeout=None if math.isinf(remaining) else remaining)
                if got:
                    self._on_acquired(kz, client, lock, owner)
                    return
                holder = _first_contender(lock)
            except kz.exceptions.LockTimeout:
                holder = _first_contender(lock) if lock is not None else None
            except (kz.handlers.threading.KazooTimeoutError, kz.exceptions.KazooException) as exc:
                last_error = exc          # no connection, connection loss, session expired while waiting
                log.info("%s: attempt %d failed: %r", self.name, attempts, exc)
            finally:
                if client is not None and self._client is not client:
                    _close(client)
            remaining = deadline - monotonic()
            if remaining <= 0:
                waited = monotonic() - start
                if not connected_once or (holder is None and last_error is not None):
                    raise self._timeout_error(
                        holder=None, waited_s=waited, timeout_s=timeout, attempts=attempts,
                        reason=(f"Could not {'connect to' if not connected_once else 'keep a session with'} "
                                f"ZooKeeper at {self.connect!r}: {last_error!r}."),
                        advice=("Check that ZooKeeper is running and reachable (lock_options zk_connect), or raise "
                                "zk_connection_timeout_s / timeout_s."))
                raise self._timeout_error(
                    holder=holder, waited_s=waited, timeout_s=timeout, attempts=attempts,
                    advice=(f"If that writer has died, ZooKeeper releases the lock when its session expires (within "
                            f"its session timeout, here {fmt_s(self.session_timeout_s)})."))
            time.sleep(min(backoff.next_delay(), remaining))

    def _on_acquired(self, kz: Any, client: Any, lock: Any, owner: str) -> None:
        states = kz.protocol.states.KazooState

        def listener(state: Any) -> bool | None:
            if state == states.LOST:
                self._lost = ("the ZooKeeper session expired: ZooKeeper deleted the lock node, so another writer may "
                              "hold the lock now")
                log.warning("%s: %s", self.name, self._lost)
                return True
            self._suspended = state == states.SUSPENDED
            if self._suspended:
                log.warning("%s: connection to ZooKeeper suspended; the lock is uncertain until it reconnects",
                            self.name)
            return None

        self._owner_id, self._client, self._lock, self._lost, self._suspended = owner, client, lock, None, False
        client.add_listener(listener)

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` unless our session is connected and our lock node still exists."""
        client, lock = self._client, self._lock
        if lock is None or client is None:
            raise LockLostError(f"{self.name} is not held by this writer; acquire it before committing",
                                lock_name=self.name)
        if self._lost is not None:
            raise LockLostError(f"{self.name} was lost: {self._lost}. Do not commit: retry the write",
                                lock_name=self.name)
        if self._suspended or not client.connected:
            raise LockLostError(f"{self.name}: the connection to ZooKeeper is suspended, so the session (and the "
                                "lock) may expire at any moment. Do not commit: retry the write", lock_name=self.name)
        try:
            stat = client.exists(f"{self.path}/{lock.node}")
        except Exception as exc:
            raise LockLostError(f"{self.name}: could not check the lock node: {exc!r}. Do not commit",
                                lock_name=self.name) from exc
        if stat is None or stat.ephemeralOwner != client.client_id[0]:
            raise LockLostError(f"{self.name}: our lock node is gone. Do not commit: retry the write",
                                lock_name=self.name)

    # -- release ----------------------------------------------------------------------------
    def release(self) -> None:
        client, lock = self._client, self._lock
        if lock is None:
            log.debug("%s: release() without holding it: nothing to do", self.name)
            return
        try:
            if self._lost is None:
                try:
                    lock.release()
                except Exception as exc:  # closing the session below deletes the ephemeral node anyway
                    log.warning("%s: could not delete the lock node (%r); closing the session releases it", self.name,
                                exc)
        finally:
            self._client = self._lock = None
            self._lost, self._suspended = None, False
            self._holding_thread = None
            _close(client)
            self._mutex.release()


def _first_contender(lock: Any) -> str | None:
    try:
        c = lock.contenders()
        return (c[0] or None) if c else None
    except Exception:
        return None


def _close(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception as exc:  # pragma: no cover - best effort
        log.debug("closing the ZooKeeper client failed: %r", exc)

