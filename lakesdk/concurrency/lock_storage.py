"""``StorageLockProvider``: a lock file with an expiring lease, made by conditional create.

On-disk grammar (relative to the table base)::

    .hoodie/.locks/table.lock                       JSON, created with Storage.create_exclusive
        {"owner": "<host>/<pid>/<thread>/<uuid>", "nonce": "<uuid4 hex, one per acquisition>",
         "acquired_at": <epoch s>, "expires_at": <epoch s>, "renewed_at": <epoch s> | null,
         "lease_s": <s>, "version": 1}
    .hoodie/.locks/table.lock.break-<sha256(lock bytes)[:24]>-<generation>
                                                    JSON {"breaker": <owner>, "created_at": <epoch s>};
                                                    exists only while a breaker removes an expired lock

Protocol (every step is one storage call; nothing needs more than ``create_exclusive``,
whole-object reads, whole-object writes and deletes, so it runs on local files and on any
S3-compatible store with conditional puts):

* **acquire**: ``create_exclusive(table.lock, {owner, nonce, expires_at = now + lease_s})``.
  Success means we hold the lock.  Otherwise read the file: if it is live, back off
  (exponential, with jitter) and retry until ``timeout_s``; if its lease has expired by
  more than ``clock_skew_s`` (``expires_at < now - clock_skew_s``), break it (below) and
  retry at once.  A create whose outcome is unknown (the call raised) is recognised on the
  next read by its nonce and adopted.
* **renew**: while held, a daemon thread renews every ``lease_s / 3``: it checks the lease
  has not yet expired on its own clock, reads the file and checks the nonce is still ours,
  rewrites it with ``expires_at = now + lease_s``, then re-reads and verifies the nonce.
  A renewal that would start, or that completes, after the current lease expired marks
  the lock *lost* (:class:`LockLostError` from :meth:`StorageLockProvider.ensure_held`);
  a lost lock is never rewritten or deleted by its former holder.
* **break** an expired lock: ``create_exclusive`` a break token named after the hash of the
  exact bytes read (so only one breaker works on one lock version), re-read the lock and
  delete it only if its bytes are unchanged, then delete the token.  A token older than
  ``lease_s + clock_skew_s`` belongs to a breaker that died; the next breaker takes the next
  generation.
* **release**: stop the renewer, read the file, and delete it only if the nonce is ours
  (within our lease: plain delete; after it: through the break protocol).

The store must make ``create_exclusive`` atomic.  It is for local files (temp file + hard
link) and S3-compatible stores that honour ``If-None-Match: *``; on any remote store the
first acquire in a process probes it (:func:`verify_conditional_create`) and refuses to
run the lock when a second exclusive create of one object succeeds (old s3fs releases sent
no condition for small objects; some S3-compatible servers ignore it).

Guarantees and their limits:

* Mutual exclusion holds as long as (a) writers' clocks differ by less than
  ``clock_skew_s`` and (b) no participant stalls (GC pause, SIGSTOP, a storage call that
  hangs) for longer than its lease between checking and acting.  Why: a holder only writes
  while its lease is valid on its own clock, and nobody else touches a lock before its
  lease has expired by ``clock_skew_s`` on theirs, so a live, renewing holder's file is
  never deleted; a renewal that finishes before the lease expires cannot race a breaker.
* Breakers are serialised per lock version by the token, and each re-reads the exact bytes
  before deleting, so two breakers cannot both delete (one of them would otherwise delete
  the new lock the other just created).  The remaining window: a holder whose lease
  already expired (it stalled) renewing exactly between a breaker's re-read and delete;
  that holder's renewal then fails its checks and it learns it lost the lock.
* Without fencing tokens in the store, a holder that stalls past its lease can still act
  once on a lock it no longer holds before its renewer notices: call
  :meth:`StorageLockProvider.ensure_held` right before the commit point to shrink that to
  the time between the check and the commit write.
* A crashed holder blocks other writers for at most ``lease_s + clock_skew_s``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from lakesdk.concurrency.lock_base import (
    Backoff,
    LockConfig,
    LockError,
    LockLostError,
    LockProvider,
    fmt_s,
    log,
    monotonic,
)
from lakesdk.storage import Storage

__all__ = ["LOCK_DIR", "LOCK_FILE", "LockFileInfo", "StorageLockProvider", "read_lock_file", "verify_conditional_create"]

LOCK_DIR = ".hoodie/.locks"
LOCK_FILE = f"{LOCK_DIR}/table.lock"
_FORMAT_VERSION = 1
_MAX_IMMEDIATE_RETRIES = 3


@dataclass(frozen=True)
class LockFileInfo:
    """The parsed lock file; ``expires_at`` is None when it cannot be known (unparseable file, no mtime)."""

    owner: str | None
    nonce: str | None
    acquired_at: float | None
    expires_at: float | None
    renewed_at: float | None
    raw: bytes
    valid: bool = True

    def expired(self, now: float, clock_skew_s: float) -> bool:
        return self.expires_at is not None and now > self.expires_at + clock_skew_s


def _encode(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")


def parse_lock_file(raw: bytes, *, modified: float | None = None, lease_s: float = 60.0) -> LockFileInfo:
    """Parse the lock file bytes; an unparseable file expires ``lease_s`` after its modification time.

    >>> info = parse_lock_file(b'{"owner": "h/1/Main/ab", "nonce": "n1", "acquired_at": 10, "expires_at": 70}')
    >>> info.owner, info.expires_at, info.expired(71.5, 1.0), info.expired(70.5, 1.0)
    ('h/1/Main/ab', 70.0, True, False)
    >>> parse_lock_file(b"{garbage", modified=100.0, lease_s=60).expires_at
    160.0
    """
    try:
        d = json.loads(raw.decode("utf-8"))
        if not isinstance(d, dict):
            raise ValueError("not an object")
        exp = d.get("expires_at")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            raise ValueError("no expires_at")

        def opt_float(k: str) -> float | None:
            v = d.get(k)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        return LockFileInfo(owner=str(d["owner"]) if d.get("owner") is not None else None,
                            nonce=str(d["nonce"]) if d.get("nonce") is not None else None,
                            acquired_at=opt_float("acquired_at"), expires_at=float(exp),
                            renewed_at=opt_float("renewed_at"), raw=raw)
    except (ValueError, UnicodeDecodeError):
        return LockFileInfo(owner=None, nonce=None, acquired_at=None,
                            expires_at=None if modified is None else modified + lease_s, renewed_at=None, raw=raw,
                            valid=False)


def _read_raw(storage: Storage, rel: str) -> bytes | None:
    """The whole file in one request (None if missing).

    Remote stores use one GET (``cat_file``): a ranged read after a HEAD could mix two
    versions of a file rewritten in between.  Local and in-memory files are replaced atomically.
    """
    try:
        if storage.protocol in ("file", "memory"):
            return storage.read(rel)
        return bytes(storage.fs.cat_file(storage.url(rel)))
    except FileNotFoundError:
        return None


_VERIFIED: set[tuple[str, str, str]] = set()
_VERIFIED_LOCK = threading.Lock()


def verify_conditional_create(storage: Storage) -> None:
    """Check once per process and bucket that the store really refuses a second exclusive create.

    Local files and memory are atomic by construction.  Elsewhere the check writes a probe
    object twice with ``open(..., "xb")`` and deletes it: it catches clients that ignore the
    exclusive mode (s3fs before 2025.7 sent no ``If-None-Match`` for small files,
    fsspec/s3fs#973) and servers that ignore the header, either of which would let two
    writers hold the lock at once.  Raises :class:`LockError` when it fails.
    """
    if storage.protocol in ("file", "memory"):
        return
    endpoint = str((storage.storage_options.get("client_kwargs") or {}).get("endpoint_url", "")) + str(
        storage.storage_options.get("endpoint_url", ""))
    key = (storage.protocol, storage.root.split("/", 1)[0], endpoint)
    with _VERIFIED_LOCK:
        if key in _VERIFIED:
            return
    path = storage.url(f"{LOCK_DIR}/.probe-{uuid.uuid4().hex}")
    fs = storage.fs
    advice = "Upgrade s3fs (>= 2025.7) or the object store, or use lock='zookeeper'."
    try:
        try:
            with fs.open(path, "xb") as f:
                f.write(b"1")
        except (ValueError, NotImplementedError) as exc:
            raise LockError(f"the storage lock needs an exclusive create (open mode 'xb') on {storage.base_url!r}, "
                            f"which {type(fs).__name__} does not support ({exc}). {advice}") from exc
        try:
            with fs.open(path, "xb") as f:
                f.write(b"2")
            refused = False
        except FileExistsError:
            refused = True
        except OSError as exc:
            refused = "PreconditionFailed" in repr(exc) or "412" in repr(exc)
            if not refused:
                raise
        if not refused:
            raise LockError(f"the store at {storage.base_url!r} does not enforce conditional creates: a second "
                            f"exclusive create of the same object succeeded, so two writers could hold the storage "
                            f"lock at once. {advice}")
    except OSError as exc:
        raise LockError(f"could not verify that {storage.base_url!r} supports conditional creates: {exc}") from exc
    finally:
        try:
            fs.rm_file(path)
        except (OSError, ValueError):
            pass
    with _VERIFIED_LOCK:
        _VERIFIED.add(key)


def read_lock_file(storage: Storage, *, lease_s: float = 60.0) -> LockFileInfo | None:
    """The table's current lock file (``.hoodie/.locks/table.lock``), None when the lock is free."""
    raw = _read_raw(storage, LOCK_FILE)
    if raw is None:
        return None
    info = parse_lock_file(raw, lease_s=lease_s)
    if not info.valid:
        try:
            modified = storage.info(LOCK_FILE).modified
        except FileNotFoundError:
            return None
        info = parse_lock_file(raw, modified=modified, lease_s=lease_s)
    return info


class StorageLockProvider(LockProvider):
    """Table lock as a lease file ``.hoodie/.locks/table.lock`` (see the module doc for the protocol).

    >>> from lakesdk.storage import Storage
    >>> s = Storage("memory://doctest-storage-lock")
    >>> lock = StorageLockProvider(s, LockConfig(lease_s=30))
    >>> with lock:
    ...     read_lock_file(s).owner == lock.holder
    True
    >>> read_lock_file(s) is None
    True
    """

    kind = "storage"

    def __init__(self, storage: Storage, config: LockConfig | None = None) -> None:
        super().__init__(storage, config)
        self._mutex = threading.Lock()           # threads sharing this provider object queue here
        self._state = threading.Lock()           # guards the fields below (no I/O under it)
        self._holding_thread: int | None = None
        self._nonce: str | None = None
        self._expires_at = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.renewals = 0
        self.broken_locks = 0                     # expired locks of others this provider broke

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"storage lock {self.storage.url(LOCK_FILE)!r}"

    @property
    def held(self) -> bool:
        return self._nonce is not None and self._lost is None and time.time() < self._expires_at

    @property
    def lease_remaining_s(self) -> float | None:
        """Seconds left on this provider's lease by its own clock (None when not acquired)."""
        return None if self._nonce is None else self._expires_at - time.time()

    @property
    def holder(self) -> str | None:
        """Our owner id while we hold the lock; otherwise the owner in the lock file if its lease is live (reads it)."""
        if self.held:
            return self._owner_id
        try:
            info = read_lock_file(self.storage, lease_s=self.config.lease_s)
        except OSError:
            return None
        if info is None or info.expired(time.time(), 0.0):
            return None
        return info.owner

    def _repr_fields(self) -> dict[str, Any]:
        return {"lease_s": self.config.lease_s, "timeout_s": self.config.timeout_s}

    # -- acquire ----------------------------------------------------------------------------
    def acquire(self, *, timeout_s: float | None = None) -> None:
        timeout = self._timeout(timeout_s)
        start = self._take_thread_mutex(timeout)
        try:
            verify_conditional_create(self.storage)
            self._acquire_remote(start, timeout)
        except BaseException:
            self._mutex.release()
            raise
        self._holding_thread = threading.get_ident()

    def _acquire_remote(self, start: float, timeout: float) -> None:
        cfg = self.config
        deadline = start + timeout
        backoff = Backoff(cfg.retry_initial_s, cfg.retry_max_s)
        attempts = immediate = 0
        seen: LockFileInfo | None = None
        last_error: BaseException | None = None
        unknown: set[str] = set()               # nonces of creates whose outcome is unknown
        while True:
            attempts += 1
            owner = self._new_owner_id()
            nonce = uuid.uuid4().hex
            now = time.time()
            expires_at = now + cfg.lease_s
            data = _encode({"owner": owner, "nonce": nonce, "acquired_at": now, "expires_at": expires_at,
                            "renewed_at": None, "lease_s": cfg.lease_s, "version": _FORMAT_VERSION})
            try:
                created = self.storage.create_exclusive(LOCK_FILE, data)
            except OSError as exc:               # e.g. S3 409 ConditionalRequestConflict, a dropped connection
                created, last_error = False, exc
                unknown.add(nonce)
                log.info("%s: conditional create failed (%s); retrying", self.name, exc)
            if created:
                self._on_acquired(owner, nonce, expires_at)
                return
            retry_now = False
            try:
                info = read_lock_file(self.storage, lease_s=cfg.lease_s)
            except OSError as exc:
                info, last_error = None, exc
            else:
                now = time.time()
                if info is None:
                    retry_now = True                            # released between our create and read
                elif info.nonce is not None and info.nonce in unknown:
                    if info.expires_at is not None and now < info.expires_at:   # our create did land
                        self._on_acquired(info.owner or owner, info.nonce, info.expires_at)
                        return
                    retry_now = self._break(info)
                elif info.expired(now, cfg.clock_skew_s):
                    retry_now = self._break(info)           # else another writer is breaking it: back off
                seen = info if info is not None else seen
            if retry_now and immediate < _MAX_IMMEDIATE_RETRIES:
                immediate += 1
                continue
            immediate = 0
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise self._storage_timeout(seen, monotonic() - start, timeout, attempts, last_error)
            time.sleep(min(backoff.next_delay(), remaining))

    def _storage_timeout(self, seen: LockFileInfo | None, waited: float, timeout: float, attempts: int,
                         last_error: BaseException | None) -> LockError:
        detail = ""
        holder = None
        if seen is not None:
            holder = seen.owner
            if seen.expires_at is not None:
                left = seen.expires_at - time.time()
                detail = (f" (lease expires in {left:.1f} s)" if left >= 0
                          else f" (lease expired {-left:.1f} s ago; it is broken {self.config.clock_skew_s:g} s "
                               "after expiry)")
            elif not seen.valid:
                detail = " (the lock file is unreadable and has no modification time, so it never expires)"
        if last_error is not None:
            detail += f"; last storage error: {last_error}"
        advice = (f"If that writer has died, its lease expires by itself within lease_s ({fmt_s(self.config.lease_s)})"
                  " and the next writer breaks it"
                  + (f"; or delete {self.storage.url(LOCK_FILE)!r} once you are sure no writer is committing."
                     if seen is not None and seen.expires_at is None else "."))
        return self._timeout_error(holder=holder, waited_s=waited, timeout_s=timeout, attempts=attempts,
                                   detail=detail, advice=advice)

    # -- breaking an expired lock -----------------------------------------------------------
    def _break(self, info: LockFileInfo) -> bool:
        """Remove the expired lock version ``info``; True when this call deleted it."""
        cfg = self.config
        digest = hashlib.sha256(info.raw).hexdigest()[:24]
        token_base = f"{LOCK_FILE}.break-{digest}"
        won = -1
        for gen in range(64):
            token = f"{token_base}-{gen}"
            try:
                if self.storage.create_exclusive(token, _encode({"breaker": self._new_owner_id(),
                                                                 "created_at": time.time()})):
                    won = gen
                    break
                raw = _read_raw(self.storage, token)
            except OSError as exc:
                log.info("%s: could not take the break token %s: %s", self.name, token, exc)
                return False
            if raw is None:                       # that breaker finished: the version is gone or changed
                return False
            try:
                created: float | None = float(json.loads(raw.decode("utf-8"))["created_at"])
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                created = None
            if created is not None and time.time() <= created + cfg.lease_s + cfg.clock_skew_s:
                return False                      # another writer is breaking this version right now
            log.warning("%s: break token %s is stale (its breaker died?); taking the next generation",
                        self.name, token)
        if won < 0:
            return False
        try:
            now_raw = _read_raw(self.storage, LOCK_FILE)
            if now_raw != info.raw:
                return False                      # renewed, released or replaced since we looked
            self.storage.delete(LOCK_FILE)
            self.broken_locks += 1
            ago = "" if info.expires_at is None else f", expired {time.time() - info.expires_at:.1f} s ago"
            log.warning("%s: broke the expired lock of %s%s", self.name, info.owner or "an unknown owner", ago)
            return True
        except OSError as exc:
            log.info("%s: could not break the expired lock: %s", self.name, exc)
            return False
        finally:
            for g in range(won + 1):
                try:
                    self.storage.delete(f"{token_base}-{g}")
                except OSError:  # a leftover token only delays a later breaker by one generation
                    pass

    # -- holding: lease renewal ---------------------------------------------------------------
    def _on_acquired(self, owner: str, nonce: str, expires_at: float) -> None:
        with self._state:
            self._owner_id, self._nonce, self._expires_at, self._lost = owner, nonce, expires_at, None
            self._stop = threading.Event()
            self._renewer = threading.Thread(target=self._renew_loop, args=(self._stop, nonce), daemon=True,
                                             name=f"lakesdk-lock-renewer-{nonce[:8]}")
        self._renewer.start()

    def _renew_loop(self, stop: threading.Event, nonce: str) -> None:
        interval = self.config.renew_every_s
        wait = interval
        while not stop.wait(wait):
            try:
                self._renew_once(stop, nonce)
                wait = interval
            except LockLostError as exc:
                with self._state:
                    if self._nonce == nonce:
                        self._lost = str(exc)
                log.warning("%s: lock lost: %s", self.name, exc)
                return
            except Exception as exc:  # transient storage error: retry before the lease runs out
                left = self._expires_at - time.time()
                wait = max(0.01, min(interval, left / 3.0))
                log.warning("%s: lease renewal failed (%s); retrying in %.2f s", self.name, exc, wait)

    def _renew_once(self, stop: threading.Event, nonce: str) -> None:
        cfg = self.config
        old_expiry = self._expires_at
        t0 = time.time()
        if t0 >= old_expiry:
            raise LockLostError(f"the lease expired {t0 - old_expiry:.2f} s before it could be renewed (this process "
                                "or its storage stalled); another writer may have broken it", lock_name=self.name)
        info = read_lock_file(self.storage, lease_s=cfg.lease_s)
        if info is None or info.nonce != nonce:
            raise LockLostError("the lock file was deleted" if info is None
                                else f"the lock file now belongs to {info.owner!r}", lock_name=self.name)
        if stop.is_set():
            return
        try:
            fields = json.loads(info.raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:  # pragma: no cover - we wrote it
            raise LockLostError(f"the lock file became unreadable: {exc}", lock_name=self.name) from exc
        fields.update(expires_at=t0 + cfg.lease_s, renewed_at=t0)
        self.storage.write(LOCK_FILE, _encode(fields))
        t1 = time.time()
        if t1 >= old_expiry:
            raise LockLostError(f"the renewal completed {t1 - old_expiry:.2f} s after the lease had expired; "
                                "another writer may have broken it in between", lock_name=self.name)
        after = read_lock_file(self.storage, lease_s=cfg.lease_s)
        if after is None or after.nonce != nonce:
            raise LockLostError("the lock file changed owner during renewal", lock_name=self.name)
        with self._state:
            if self._nonce == nonce:
                self._expires_at = t0 + cfg.lease_s
                self.renewals += 1

    def _stop_renewer(self) -> None:
        self._stop.set()
        t = self._renewer
        if t is not None and t is not threading.current_thread():
            t.join(timeout=max(5.0, self.config.lease_s))
            if t.is_alive():  # pragma: no cover - a storage call hung
                log.warning("%s: the lease renewer did not stop in time", self.name)
        self._renewer = None

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` unless the lease is live by our clock and the lock file is still ours."""
        nonce = self._nonce
        if nonce is None:
            raise LockLostError(f"{self.name} is not held by this writer; acquire it before committing",
                                lock_name=self.name)
        if self._lost is not None:
            raise LockLostError(f"{self.name} was lost: {self._lost}. Do not commit: retry the write",
                                lock_name=self.name)
        now = time.time()
        if now >= self._expires_at:
            raise LockLostError(f"{self.name}: the lease expired {now - self._expires_at:.2f} s ago without being "
                                "renewed (this process stalled). Do not commit: retry the write", lock_name=self.name)
        info = read_lock_file(self.storage, lease_s=self.config.lease_s)
        if info is None or info.nonce != nonce:
            who = "deleted" if info is None else f"held by {info.owner!r}"
            raise LockLostError(f"{self.name} is now {who}. Do not commit: retry the write", lock_name=self.name)

    # -- release ----------------------------------------------------------------------------
    def release(self) -> None:
        nonce = self._nonce
        if nonce is None:
            log.debug("%s: release() without holding it: nothing to do", self.name)
            return
        self._stop_renewer()
        try:
            if self._lost is not None:
                log.warning("%s: not deleting the lock file on release: the lock was lost (%s)", self.name, self._lost)
                return
            info = read_lock_file(self.storage, lease_s=self.config.lease_s)
            if info is None:
                log.warning("%s: the lock file was already gone at release (broken by another writer?)", self.name)
            elif info.nonce != nonce:
                log.warning("%s: not deleting the lock file on release: it belongs to %r", self.name, info.owner)
            elif time.time() < self._expires_at:
                self.storage.delete(LOCK_FILE)       # within our lease nobody else may touch it
            else:
                self._break(info)                    # our lease ran out: delete only through the break protocol
        except OSError as exc:
            log.warning("%s: could not delete the lock file at release (%s); other writers wait until its lease "
                        "expires", self.name, exc)
        finally:
            with self._state:
                self._nonce, self._lost, self._expires_at = None, None, 0.0
            self._holding_thread = None
            self._mutex.release()
