"""Writer heartbeats: ``.hoodie/.heartbeat/<instant>``.

A writer keeps an empty file per in-flight instant and re-creates (overwrites) it every
``interval_s`` (``hoodie.client.heartbeat.interval_in_ms``, default 60 000 ms).  Liveness is
the file's modification time: the instant's writer is considered dead when the file is
missing or its modification time is more than ``interval_s * tolerable_misses``
(``hoodie.client.heartbeat.tolerable.misses``, default 2) in the past.  The file is deleted
when the write stops.  Lazy failed-write cleaning and conflict detection use it; readers
do not.

On-disk grammar (relative to the table base)::

    .hoodie/.heartbeat/<instant>      empty file; mtime = last beat

>>> from lakesdk.storage import Storage
>>> s = Storage("memory://doctest-heartbeat")
>>> with Heartbeat(s, "001", interval_s=60.0) as hb:
...     is_expired(s, "001", 60.0, 2)
False
>>> is_expired(s, "001", 60.0, 2), last_beat(s, "001") is None
(True, True)
"""

from __future__ import annotations

import logging
import re
import threading
import time

from lakesdk.exceptions import HeartbeatError
from lakesdk.storage import Storage

__all__ = ["HEARTBEAT_DIR", "Heartbeat", "HeartbeatError", "heartbeat_path", "is_expired", "last_beat"]

log = logging.getLogger(__name__)

HEARTBEAT_DIR = ".hoodie/.heartbeat"
_INSTANT_RE = re.compile(r"^[0-9A-Za-z_][0-9A-Za-z_.-]*$")


def heartbeat_path(instant: str) -> str:
    """``.hoodie/.heartbeat/<instant>``, relative to the table base."""
    if not isinstance(instant, str) or not _INSTANT_RE.match(instant):
        raise HeartbeatError(f"invalid instant {instant!r} for a heartbeat: expected an instant time such as "
                             "'20240418172802262'", instant=instant if isinstance(instant, str) else None)
    return f"{HEARTBEAT_DIR}/{instant}"


def last_beat(storage: Storage, instant: str) -> float | None:
    """Modification time (epoch seconds) of the instant's heartbeat file, None if it is missing."""
    try:
        return storage.info(heartbeat_path(instant)).modified
    except FileNotFoundError:
        return None


def is_expired(storage: Storage, instant: str, interval_s: float = 60.0, tolerable_misses: int = 2,
               now: float | None = None) -> bool:
    """True when the heartbeat file is missing or older than ``interval_s * tolerable_misses``.

    ``now`` defaults to ``time.time()``; the file's time comes from storage, so writer and
    checker clocks (or the object store's clock) should agree within that bound.
    """
    beat = last_beat(storage, instant)
    if beat is None:
        return True
    now = time.time() if now is None else now
    return now - beat > interval_s * tolerable_misses


class Heartbeat:
    """Keeps ``.hoodie/.heartbeat/<instant>`` fresh from a daemon thread while a write runs.

    ``start()`` writes the first beat synchronously (a failure raises) and then re-writes
    the file every ``interval_s``; a failed later beat is logged and kept in
    :attr:`last_error`, and the next beat retries.  Each later beat runs in a short-lived
    thread of its own, so one storage call that hangs does not stop the beats after it
    (at most :attr:`MAX_IN_FLIGHT` beats are in progress at once).  ``stop()`` stops the
    thread and deletes the file.  As a context manager it starts on entry and stops on exit.

    ``owner``: the claim this heartbeat keeps alive, when a process took a planned table
    service (:mod:`lakesdk.services.claim`); its commit checks that the claim is still this
    owner's.  None for a write's own instant.
    """

    MAX_IN_FLIGHT = 2

    def __init__(self, storage: Storage, instant: str, interval_s: float = 60.0, tolerable_misses: int = 2,
                 *, owner: str | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, found {interval_s}")
        if tolerable_misses < 1:
            raise ValueError(f"tolerable_misses must be >= 1, found {tolerable_misses}")
        self.storage = storage
        self.instant = instant
        self.path = heartbeat_path(instant)
        self.interval_s = float(interval_s)
        self.tolerable_misses = int(tolerable_misses)
        self.owner = owner
        self.beats = 0
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._in_flight: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def beat(self) -> None:
        """Write one beat now (create or refresh the file)."""
        self.storage.touch(self.path)
        self.beats += 1

    def start(self) -> "Heartbeat":
        """Write the first beat and start the background thread (no-op when already running)."""
        if self.running:
            return self
        try:
            self.beat()
        except OSError as exc:
            raise HeartbeatError(f"could not write the heartbeat {self.storage.url(self.path)!r}: {exc}",
                                 instant=self.instant) from exc
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"lakesdk-heartbeat-{self.instant}", daemon=True)
        self._thread.start()
        return self

    def _beat_logged(self) -> None:
        if self._stop.is_set():
            return
        try:
            self.beat()
            self.last_error = None
        except Exception as exc:  # keep beating: a transient storage error must not stop liveness
            self.last_error = exc
            log.warning("heartbeat for instant %s failed: %s", self.instant, exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._in_flight = [t for t in self._in_flight if t.is_alive()]
            if len(self._in_flight) >= self.MAX_IN_FLIGHT:
                log.warning("heartbeat for instant %s: %d beats still in progress, skipping one",
                            self.instant, len(self._in_flight))
                continue
            beat = threading.Thread(target=self._beat_logged, name=f"lakesdk-beat-{self.instant}", daemon=True)
            self._in_flight.append(beat)
            beat.start()

    def abandon(self) -> None:
        """Stop beating and leave the file: the instant time was given up before anything was
        written, and another instant of the same time may own the file (a later writer's
        cleanup removes it otherwise)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stop(self) -> bool:
        """Stop beating and delete the heartbeat file (idempotent).

        A beat in progress is waited for first (up to ``interval_s * tolerable_misses``, after
        which the instant counts as dead anyway), so no beat re-creates the file after the
        delete.  Returns whether the file is gone; a storage error while deleting is logged
        and kept in :attr:`last_error`, never raised (the write it guarded has already
        committed or failed; a left-over file only ages until it expires).
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        # a beat that hangs is waited for up to the expiry bound: if it lands later, the file
        # it leaves belongs to a finished instant and the next writer's cleanup removes it
        deadline = time.monotonic() + self.interval_s * self.tolerable_misses
        for beat in self._in_flight:
            beat.join(max(0.0, deadline - time.monotonic()))
        self._in_flight = []
        try:
            self.storage.delete(self.path)
            return True
        except Exception as exc:  # noqa: BLE001 - see the docstring
            self.last_error = exc
            log.warning("could not delete the heartbeat of instant %s: %s", self.instant, exc)
            return False

    def is_expired(self, now: float | None = None) -> bool:
        """:func:`is_expired` for this heartbeat's instant and settings (reads storage)."""
        return is_expired(self.storage, self.instant, self.interval_s, self.tolerable_misses, now)

    def __enter__(self) -> "Heartbeat":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (f"Heartbeat(instant={self.instant!r}, {state}, interval_s={self.interval_s:g}, "
                f"tolerable_misses={self.tolerable_misses}, beats={self.beats}, base={self.storage.base_url!r})")
