"""``InProcessLockProvider``: one threading lock per table base URL, shared by the whole process.

Hudi's ``InProcessLockProvider`` semantics (spec cases C42..C48): every provider instance for
the same table in this process shares one lock; the lock belongs to the thread that acquired
it; it is not re-entrant (a second ``acquire`` by the holding thread raises); ``release`` by a
thread that does not hold it is a logged no-op, and a redundant release is a no-op.  It does
not exclude other processes: use ``"storage"`` or ``"zookeeper"`` for those.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from lakesdk.concurrency.lock_base import LockConfig, LockError, LockProvider, log, monotonic
from lakesdk.storage import Storage

__all__ = ["InProcessLockProvider"]


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: int | None = None      # ident of the holding thread
    owner: str | None = None       # owner id of the holder


_REGISTRY: dict[str, _Entry] = {}
_REGISTRY_LOCK = threading.Lock()


def _entry(key: str) -> _Entry:
    with _REGISTRY_LOCK:
        e = _REGISTRY.get(key)
        if e is None:
            e = _REGISTRY[key] = _Entry()
        return e


class InProcessLockProvider(LockProvider):
    """A process-wide lock per table base URL (threads of one process only).

    >>> from lakesdk.storage import Storage
    >>> a = InProcessLockProvider(Storage("memory://doctest-inproc"))
    >>> b = InProcessLockProvider(Storage("memory://doctest-inproc"))
    >>> with a:
    ...     b.holder == a.holder != None
    True
    >>> a.held, b.holder
    (False, None)
    """

    kind = "in_process"

    def __init__(self, storage: Storage, config: LockConfig | None = None) -> None:
        super().__init__(storage, config)
        self._key = storage.base_url.rstrip("/")
        self._entry = _entry(self._key)

    @property
    def name(self) -> str:
        return f"in-process lock of table {self._key!r}"

    @property
    def held(self) -> bool:
        e = self._entry
        return e.thread == threading.get_ident() and e.owner is not None and e.owner == self._owner_id

    @property
    def holder(self) -> str | None:
        return self._entry.owner

    def acquire(self, *, timeout_s: float | None = None) -> None:
        timeout = self._timeout(timeout_s)
        e = self._entry
        me = threading.get_ident()
        if e.thread == me:
            raise LockError(f"{self.name} is already held by this thread ({e.owner}); the lock is not re-entrant: "
                            "release it before acquiring it again")
        start = monotonic()
        got = e.lock.acquire(timeout=-1 if math.isinf(timeout) else timeout)
        if not got:
            raise self._timeout_error(holder=e.owner, waited_s=monotonic() - start, timeout_s=timeout, attempts=1,
                                      detail=" (another thread of this process)")
        self._owner_id = self._new_owner_id()
        e.thread, e.owner = me, self._owner_id

    def release(self) -> None:
        e = self._entry
        me = threading.get_ident()
        if e.thread != me:
            if e.thread is None:
                log.debug("%s: release() without holding it: nothing to do", self.name)
            else:
                log.warning("%s: release() from a thread that does not hold it (held by %s): ignored",
                            self.name, e.owner)
            return
        e.thread, e.owner = None, None
        e.lock.release()

    def _repr_fields(self) -> dict[str, Any]:
        return {"timeout_s": self.config.timeout_s}
