"""The lock-provider interface shared by every provider: errors, :class:`LockConfig`, :class:`LockProvider`.

Users import these names from :mod:`lakesdk.concurrency.locks`; this module exists so the
providers can share them without import cycles.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from lakesdk.exceptions import LockConfigError, LockError, LockLostError, LockTimeoutError
from lakesdk.storage import Storage

__all__ = [
    "LockConfig",
    "LockConfigError",
    "LockError",
    "LockLostError",
    "LockProvider",
    "LockTimeoutError",
    "default_owner",
]

log = logging.getLogger("lakesdk.concurrency.locks")


# -- configuration ----------------------------------------------------------------------------
def default_owner(uid: str | None = None) -> str:
    """An owner id ``host/pid/thread/uuid`` for the calling thread."""
    return f"{socket.gethostname()}/{os.getpid()}/{threading.current_thread().name}/{uid or uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class LockConfig:
    """Settings shared by the lock providers (keyword arguments or ``lock_options`` keys).

    * ``timeout_s``: how long :meth:`LockProvider.acquire` waits (Hudi's
      ``hoodie.write.lock.wait_time_ms``, 60 s); ``math.inf`` waits forever, 0 tries once.
    * ``retry_initial_s`` / ``retry_max_s``: polling backoff of the storage provider and the
      reconnect backoff of the ZooKeeper provider: exponential (x2 per attempt) from the
      initial to the maximum delay, each sleep drawn uniformly from [delay/2, delay] (jitter).
    * ``lease_s``: storage provider lease; a holder renews it every ``renew_interval_s``
      (default ``lease_s / 3``), and another writer breaks it once it has been expired for
      more than ``clock_skew_s`` (the largest clock difference tolerated between writers).
    * ``owner``: the owner id written into the lock; by default ``host/pid/thread/uuid``,
      made when the lock is acquired (the thread is the acquiring one).

    >>> LockConfig(timeout_s=5).lease_s
    60.0
    >>> LockConfig(lease_s=6).renew_every_s
    2.0
    """

    timeout_s: float = 60.0
    retry_initial_s: float = 0.05
    retry_max_s: float = 2.0
    lease_s: float = 60.0
    owner: str | None = None
    clock_skew_s: float = 1.0
    renew_interval_s: float | None = None

    def __post_init__(self) -> None:
        def num(name: str, *, low: float, strict: bool, allow_none: bool = False) -> None:
            v = getattr(self, name)
            if v is None and allow_none:
                return
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
                raise LockConfigError(f"lock option {name!r} must be a number of seconds, found {v!r}", key=name)
            if (v <= low) if strict else (v < low):
                raise LockConfigError(f"lock option {name!r} must be {'>' if strict else '>='} {low:g}, found {v!r}",
                                      key=name)
            object.__setattr__(self, name, float(v))

        num("timeout_s", low=0, strict=False)
        num("retry_initial_s", low=0, strict=True)
        num("retry_max_s", low=0, strict=True)
        num("lease_s", low=0, strict=True)
        num("clock_skew_s", low=0, strict=False)
        num("renew_interval_s", low=0, strict=True, allow_none=True)
        if math.isinf(self.lease_s):
            raise LockConfigError("lock option 'lease_s' must be finite", key="lease_s")
        if self.retry_max_s < self.retry_initial_s:
            raise LockConfigError(f"lock option 'retry_max_s' ({self.retry_max_s:g}) must be >= 'retry_initial_s' "
                                  f"({self.retry_initial_s:g})", key="retry_max_s")
        if self.renew_interval_s is not None and self.renew_interval_s >= self.lease_s:
            raise LockConfigError(f"lock option 'renew_interval_s' ({self.renew_interval_s:g}) must be shorter than "
                                  f"'lease_s' ({self.lease_s:g}), or the lease expires between renewals",
                                  key="renew_interval_s")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner.strip()):
            raise LockConfigError(f"lock option 'owner' must be a non-empty string, found {self.owner!r}", key="owner")

    @property
    def renew_every_s(self) -> float:
        return self.renew_interval_s if self.renew_interval_s is not None else self.lease_s / 3.0


class Backoff:
    """Exponential backoff with jitter: delays d, 2d, 4d, ... capped at ``maximum``; each sleep is in [d/2, d]."""

    def __init__(self, initial: float, maximum: float, rng: random.Random | None = None) -> None:
        self._delay = initial
        self._max = maximum
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        d = self._delay
        self._delay = min(self._delay * 2.0, self._max)
        return d / 2.0 + self._rng.uniform(0.0, d / 2.0)


def fmt_s(seconds: float) -> str:
    return "forever" if math.isinf(seconds) else f"{seconds:.3g} s"


# -- the interface ----------------------------------------------------------------------------
class LockProvider(ABC):
    """One table-level lock (Hudi's transaction lock) for the table at ``storage.base_url``.

    ``acquire`` blocks until the lock is held or ``timeout_s`` (default ``config.timeout_s``)
    has passed, then raises :class:`LockTimeoutError`; ``release`` gives it up and is a no-op
    when this provider does not hold it.  A provider is not re-entrant: acquiring again from
    the thread that holds it raises :class:`LockError` instead of deadlocking.  Use it as a
    context manager around the short critical section only (conflict check + commit write).

    ``name`` and ``repr`` never do I/O; :attr:`holder` may (it reads the lock's state).
    """

    kind: ClassVar[str] = ""
    _mutex: threading.Lock   # set by providers shared by threads (see _take_thread_mutex)

    def __init__(self, storage: Storage, config: LockConfig | None = None) -> None:
        self.storage = storage
        self.config = config or LockConfig()
        self._uid = uuid.uuid4().hex[:12]
        self._owner_id: str | None = None   # owner id of the current (or last) acquisition

    # -- identity (no I/O) --------------------------------------------------------------------
    @property
    def table_url(self) -> str:
        return self.storage.base_url

    @property
    @abstractmethod
    def name(self) -> str:
        """Human-readable lock name (no I/O)."""

    @property
    @abstractmethod
    def held(self) -> bool:
        """Whether this provider believes it holds the lock (no I/O; see :meth:`ensure_held`)."""

    def held_by_this_thread(self) -> bool:
        """Whether the calling thread holds the lock through this provider (no I/O)."""
        thread = getattr(self, "_holding_thread", None)
        return self.held and (thread is None or thread == threading.get_ident())

    @property
    @abstractmethod
    def holder(self) -> str | None:
        """Owner id of the current holder if known (this provider's own id when it holds the lock)."""

    def _new_owner_id(self) -> str:
        return self.config.owner or default_owner(self._uid)

    # -- the protocol -----------------------------------------------------------------------
    @abstractmethod
    def acquire(self, *, timeout_s: float | None = None) -> None:
        """Block until the lock is held; raise :class:`LockTimeoutError` after ``timeout_s``."""

    @abstractmethod
    def release(self) -> None:
        """Release the lock if this provider holds it (otherwise a logged no-op)."""

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` unless the lock is still this provider's own.

        Call it right before the commit point: it catches a lease that expired while the
        process was stalled, or a lost ZooKeeper session.  Default: checks :attr:`held`.
        """
        if not self.held:
            raise LockLostError(f"{self.name} is not held by this writer ({self._owner_id or 'never acquired'}); "
                                "acquire it before committing", lock_name=self.name)

    def _timeout(self, timeout_s: float | None) -> float:
        t = self.config.timeout_s if timeout_s is None else timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or math.isnan(t) or t < 0:
            raise LockConfigError(f"timeout_s must be a number of seconds >= 0 (or math.inf), found {timeout_s!r}",
                                  key="timeout_s")
        return float(t)

    def _take_thread_mutex(self, timeout: float) -> float:
        """Providers shared by threads: refuse re-entry, then queue on the provider's own
        mutex (``self._mutex``, ``self._holding_thread``, ``self._owner_id``).  Returns the
        monotonic start time of the wait."""
        if getattr(self, "_holding_thread", None) == threading.get_ident():
            raise LockError(f"{self.name} is already held by this thread ({self._owner_id}); the lock is not "
                            "re-entrant: release it before acquiring it again")
        start = monotonic()
        if not self._mutex.acquire(timeout=-1 if math.isinf(timeout) else timeout):
            raise self._timeout_error(holder=self._owner_id, waited_s=monotonic() - start, timeout_s=timeout,
                                      attempts=1, detail=" (another thread using the same lock provider object)")
        return start

    def _timeout_error(self, *, holder: str | None, waited_s: float, timeout_s: float, attempts: int,
                       detail: str = "", advice: str = "", reason: str | None = None) -> LockTimeoutError:
        """The error of a timed-out ``acquire``: what, how long, who holds it, what to do."""
        head = (f"Could not acquire the {self.name} within {fmt_s(timeout_s)} (waited {waited_s:.2f} s, "
                f"{attempts} attempt{'s' if attempts != 1 else ''}).")
        if reason is None:
            who = f"It is held by {holder!r}" if holder else "Its holder is unknown"
            reason = (f"{who}{detail}. Another writer is committing to this table: retry the write later, or wait "
                      "longer with lock_options={'timeout_s': ...}.")
        msg = f"{head} {reason}" + (f" {advice}" if advice else "")
        return LockTimeoutError(msg, lock_name=self.name, holder=holder, waited_s=waited_s, timeout_s=timeout_s,
                                attempts=attempts)

    def __enter__(self) -> "LockProvider":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _repr_fields(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        fields = {"table": self.table_url, "held": self.held, **self._repr_fields()}
        if self.held:
            fields["owner"] = self._owner_id
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{type(self).__name__}({inner})"


def monotonic() -> float:
    return time.monotonic()
