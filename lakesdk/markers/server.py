"""The timeline-server marker service: a small HTTP server that batches marker creation.

Executors send marker requests to one server started by the writer (driver) instead of
creating one file per marker.  The server queues them and, every batch interval, a pool
of worker threads flushes them: each worker appends its batch to the content of its own
``MARKERS<n>`` file (``n`` = the thread slot it holds) and rewrites that whole file with
``Storage.write`` (object stores cannot append).  A create request is answered only after
its marker is durable, so a restarted server, which reloads the ``MARKERS*`` files on the
first request for an instant, recovers every acknowledged marker.

On-disk layout (relative to the table base)::

    .hoodie/.temp/<instant>/MARKERS.type    text "TIMELINE_SERVER_BASED", written once (exclusive create)
    .hoodie/.temp/<instant>/MARKERS<n>      "<marker>\\n" per marker, 0 <= n < num_threads
    marker                                  [<partitionPath>/]<dataFileName>.marker.<IOType>

The HTTP protocol (endpoints, the token header, the replies and their errors) is in
:mod:`lakesdk.markers.http_api`.

Batching rules (Hudi's ``MarkerDirState`` and ``MarkerCreationDispatchingRunnable``):

* per instant, the dispatcher takes a free thread slot round robin from the last one
  used, and hands *all* pending requests to one worker; if every slot is busy the
  requests wait for a later tick;
* a slot (hence a ``MARKERS<n>`` file) is used by one worker at a time;
* requests are de-duplicated against the set of durable markers of the instant (loaded
  lazily from ``MARKERS*`` files); a repeated marker, also within one batch or while the
  first request's flush is still running, is answered ``false`` once the first is durable.

Early conflict detection (Hudi's ``AsyncTimelineServerBasedDetectionStrategy``): the writer
registers an instant with :meth:`MarkerServer.watch` and a detector
(:class:`lakesdk.concurrency.early.EarlyConflictDetector`).  Every create request of that
instant is then checked before it is queued (the detector's listing of the other writers'
markers is refreshed when older than ``early_conflict_interval_ms``), and a background
thread re-lists every interval and matches the instant's durable and queued markers, so a
conflict with a writer that created its markers later is found too.  Once a conflict is
found, every create request of the instant is answered 409 and nothing more is flushed.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

from lakesdk.exceptions import _MarkerHTTPError
from lakesdk.markers.base import (
    MARKER_TYPE_FILE,
    ConflictDetector,
    MarkerConflict,
    MarkerError,
    marker_dir,
    markers_file_name,
    read_marker_files,
    validate_instant,
)
from lakesdk.markers.http_api import DEFAULT_MAX_BODY_BYTES, MarkerHTTPServer, MarkerRequestHandler
from lakesdk.storage import Storage

__all__ = ["MarkerServer", "MarkerServerStats", "MarkerDirSnapshot"]

log = logging.getLogger(__name__)

MARKER_TYPE_TEXT = b"TIMELINE_SERVER_BASED"


@dataclass(frozen=True)
class MarkerServerStats:
    """Counters of one :class:`MarkerServer` since it was created."""

    requests: int = 0            #: HTTP requests received (any endpoint, including rejected ones)
    rejected: int = 0            #: requests refused with 401/403 (missing or wrong token)
    create_requests: int = 0     #: create requests accepted
    markers_requested: int = 0   #: marker names received in create requests
    markers_created: int = 0     #: markers made durable (replied ``true``)
    flushes: int = 0             #: batches processed by a worker
    storage_writes: int = 0      #: ``MARKERS<n>`` rewrites plus ``MARKERS.type`` creations
    loads: int = 0               #: lazy loads of an instant's state from storage
    early_checks: int = 0        #: early-conflict checks (request-time and periodic)
    early_conflicts: int = 0     #: instants stopped by early conflict detection


@dataclass(frozen=True)
class MarkerDirSnapshot:
    """What the server holds in memory for one instant (for tests, widgets and debugging)."""

    instant: str
    markers: frozenset[str]
    files: dict[int, tuple[str, ...]]
    busy_indices: tuple[int, ...]
    pending: tuple[str, ...]
    type_written: bool


@dataclass(eq=False)
class _Detection:
    """Early conflict detection of one watched instant."""

    detector: ConflictDetector
    conflict: MarkerConflict | None = None   # the conflict found, then every create is refused
    error: str = ""
    planned: tuple = ()           # (partition, fileId) this instant was writing when it was stopped

    def payload(self) -> dict[str, Any]:
        c = self.conflict
        assert c is not None      # built once a conflict stopped the instant
        return {"conflict": {"instant": c.instant, "action": c.action,
                             "file_groups": [list(g) for g in c.file_groups], "completed": bool(c.completed),
                             "planned": [list(g) for g in self.planned]}}


@dataclass(eq=False)
class _Request:
    name: str
    done: threading.Event = field(default_factory=threading.Event)
    created: bool | None = None
    error: str | None = None

    def finish(self, created: bool | None, error: str | None = None) -> None:
        self.created, self.error = created, error
        self.done.set()


class _DirState:
    """In-memory state of one instant's marker dir (Hudi's ``MarkerDirState``)."""

    def __init__(self, instant: str, num_threads: int) -> None:
        self.instant = instant
        self.lock = threading.Lock()
        self.markers: set[str] = set()                 # durable markers
        self.files: dict[int, list[str]] = {}          # durable content of MARKERS<n>
        self.inflight: dict[str, list[_Request]] = {}  # being flushed -> duplicates waiting for it
        self.pending: list[_Request] = []
        self.busy = [False] * num_threads
        self.last_index = -1
        self.type_written = False
        self.type_writing = False
        self.deleted = False

    def next_free_index(self) -> int | None:
        n = len(self.busy)
        for k in range(1, n + 1):
            i = (self.last_index + k) % n
            if not self.busy[i]:
                self.busy[i] = True
                self.last_index = i
                return i
        return None


class MarkerServer:
    """The writer's marker server on ``host`` (default 127.0.0.1) and an ephemeral port.

    >>> from lakesdk.storage import Storage
    >>> with MarkerServer(Storage("memory://doctest-marker-server"), batch_interval_ms=5) as srv:
    ...     srv.url.startswith("http://127.0.0.1:")
    True

    ``token`` defaults to a fresh random string; clients must send it.  Request bodies larger
    than ``max_body_bytes`` are refused (413) unread.  The server is
    not picklable: hand executors ``write_markers(storage, instant, "TIMELINE_SERVER_BASED",
    server=srv)``, which holds only the URL and the token.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        batch_interval_ms: float = 50.0,
        num_threads: int = 20,
        token: str | None = None,
        request_timeout_s: float = 120.0,
        early_conflict_interval_ms: float = 1000.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if batch_interval_ms <= 0:
            raise ValueError(f"batch_interval_ms must be > 0, found {batch_interval_ms}")
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, found {num_threads}")
        self.storage = storage
        self.host = host
        self.port = port
        self.batch_interval_ms = float(batch_interval_ms)
        self.num_threads = int(num_threads)
        self.token = token if token is not None else secrets.token_urlsafe(24)
        self.request_timeout_s = request_timeout_s
        if early_conflict_interval_ms <= 0:
            raise ValueError(f"early_conflict_interval_ms must be > 0, found {early_conflict_interval_ms}")
        self.early_conflict_interval_ms = float(early_conflict_interval_ms)
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, found {max_body_bytes}")
        self.max_body_bytes = int(max_body_bytes)
        self._detections: dict[str, _Detection] = {}
        self._detect_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._states: dict[str, _DirState] = {}
        self._counts: dict[str, int] = {k: 0 for k in MarkerServerStats.__dataclass_fields__}
        self._httpd: MarkerHTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._dispatcher: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._stop_event = threading.Event()
        self._closing = False
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._httpd is not None and not self._closing

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the running server."""
        if self._httpd is None:
            raise MarkerError("the marker server is not started: call MarkerServer.start() (or use it as a context manager)")
        return f"http://{self.host}:{self.port}"

    def start(self) -> "MarkerServer":
        """Bind, start serving and start the batch dispatcher.  Returns ``self``."""
        if self._httpd is not None:
            if self._closing:
                raise MarkerError("this MarkerServer was stopped; create a new one (markers on storage are reloaded)")
            return self
        self._httpd = MarkerHTTPServer((self.host, self.port), MarkerRequestHandler, self)
        self.port = self._httpd.server_address[1]
        self._pool = ThreadPoolExecutor(max_workers=self.num_threads, thread_name_prefix="lakesdk-markers-flush")
        self._serve_thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"lakesdk-markers-http-{self.port}", daemon=True,
        )
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name=f"lakesdk-markers-dispatch-{self.port}",
                                            daemon=True)
        self._serve_thread.start()
        self._dispatcher.start()
        self._start_detector()
        return self

    def stop(self) -> None:
        """Flush what is queued, answer it, then stop serving and close every connection."""
        if self._httpd is None or self._stopped:
            return
        with self._lock:
            self._closing = True
        self._stop_event.set()
        if self._dispatcher is not None:
            self._dispatcher.join()
        if self._detect_thread is not None:
            self._detect_thread.join()
        deadline = time.monotonic() + self.request_timeout_s
        while self._has_pending() and time.monotonic() < deadline:   # drain: answer queued requests
            self._tick()
            time.sleep(0.005)
        assert self._pool is not None
        self._pool.shutdown(wait=True)
        self._fail_pending("the marker server stopped before the request was flushed")
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join()
        self._httpd.join_handlers()
        self._stopped = True

    def __enter__(self) -> "MarkerServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            "a MarkerServer cannot be pickled (it owns sockets and threads); send executors the client "
            "from lakesdk.markers.write_markers(storage, instant, 'TIMELINE_SERVER_BASED', server=server)"
        )

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running" if self._httpd is not None else "not started"
        where = f"http://{self.host}:{self.port}" if self._httpd is not None else f"{self.host}:{self.port or '<ephemeral>'}"
        return (f"MarkerServer({where!r}, {state}, base={self.storage.base_url!r}, "
                f"batch_interval_ms={self.batch_interval_ms:g}, num_threads={self.num_threads})")

    # -- introspection -------------------------------------------------------------------
    @property
    def stats(self) -> MarkerServerStats:
        with self._lock:
            return MarkerServerStats(**self._counts)

    def dir_state(self, instant: str) -> MarkerDirSnapshot | None:
        """A snapshot of the in-memory state of ``instant``, or None if it is not loaded.  No I/O."""
        with self._lock:
            st = self._states.get(instant)
        if st is None:
            return None
        with st.lock:
            return MarkerDirSnapshot(
                instant=instant, markers=frozenset(st.markers),
                files={i: tuple(v) for i, v in sorted(st.files.items())},
                busy_indices=tuple(i for i, b in enumerate(st.busy) if b),
                pending=tuple(r.name for r in st.pending), type_written=st.type_written,
            )

    # -- early conflict detection -----------------------------------------------------------
    def watch(self, instant: str, detector: ConflictDetector) -> None:
        """Check every marker of ``instant`` with ``detector`` (an
        :class:`~lakesdk.concurrency.early.EarlyConflictDetector`) before creating it, and
        re-check the instant's markers every ``early_conflict_interval_ms`` until its marker
        dir is deleted or the server stops."""
        validate_instant(instant)
        with self._lock:
            self._detections[instant] = _Detection(detector)
        self._start_detector()

    def _start_detector(self) -> None:
        """Start the periodic detection thread once the server runs and an instant is watched."""
        with self._lock:
            if self._detect_thread is not None or self._httpd is None or self._closing or not self._detections:
                return
            self._detect_thread = threading.Thread(target=self._detect_loop, daemon=True,
                                                   name=f"lakesdk-markers-ecd-{self.port}")
        self._detect_thread.start()

    def unwatch(self, instant: str) -> None:
        """Stop early conflict detection for ``instant`` (no-op when not watched)."""
        with self._lock:
            self._detections.pop(instant, None)

    def early_conflict(self, instant: str) -> MarkerConflict | None:
        """The conflict found for a watched ``instant`` (None: none found, or not watched).  No I/O."""
        with self._lock:
            det = self._detections.get(instant)
        return None if det is None else det.conflict

    def _stopped_by(self, det: _Detection, found: MarkerConflict, names: Iterable[str]) -> None:
        err = det.detector.error(found, names)
        det.error, det.planned = str(err), tuple(getattr(err, "planned", ()))
        det.conflict = found
        self._count("early_conflicts")

    def _refuse(self, det: _Detection) -> _MarkerHTTPError:
        return _MarkerHTTPError(409, det.error, det.payload())

    def _early_check(self, instant: str, names: list[str]) -> None:
        """Request time: refuse when a conflict is known, or when ``names`` conflict."""
        with self._lock:
            det = self._detections.get(instant)
        if det is None:
            return
        if det.conflict is None:
            self._count("early_checks")
            try:
                found = det.detector.find(names)
            except Exception:  # as Hudi: a failed check is logged and the marker created anyway
                log.warning("early conflict check of instant %s failed", instant, exc_info=True)
                return
            if found is not None and det.conflict is None:
                self._stopped_by(det, found, names)
        if det.conflict is not None:
            raise self._refuse(det)

    def _detect_loop(self) -> None:
        interval = self.early_conflict_interval_ms / 1000.0
        while not self._stop_event.wait(interval):
            with self._lock:
                watched = [(i, d) for i, d in self._detections.items() if d.conflict is None]
            for instant, det in watched:
                try:
                    self._detect_once(instant, det)
                except Exception:  # pragma: no cover - defensive: the detector thread must survive
                    log.warning("early conflict detection of instant %s failed", instant, exc_info=True)

    def _detect_once(self, instant: str, det: _Detection) -> None:
        """Hudi's ``MarkerBasedEarlyConflictDetectionRunnable.run``: re-list, then match the
        durable and the queued markers of the instant."""
        with self._lock:
            st = self._states.get(instant)
        if st is None:
            return            # no marker requested yet: the first request checks
        with st.lock:
            names = set(st.markers) | {r.name for r in st.pending} | set(st.inflight)
        self._count("early_checks")
        det.detector.refresh()
        found = det.detector.match(names)
        if found is not None and det.conflict is None:
            self._stopped_by(det, found, names)
            log.info("early conflict detected for instant %s: %r", instant, found)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    # -- state -----------------------------------------------------------------------------
    def _state(self, instant: str) -> _DirState:
        with self._lock:
            st = self._states.get(instant)
            if st is None:
                st = self._load(instant)
                self._states[instant] = st
            return st

    def _load(self, instant: str) -> _DirState:
        """Lazy load from storage (Hudi's ``syncMarkersFromFileSystem``); called under ``self._lock``."""
        st = _DirState(instant, self.num_threads)
        files = read_marker_files(self.storage, instant)
        for idx, lines in files.items():
            st.files[idx] = list(lines)
            st.markers.update(lines)
        st.type_written = self.storage.exists(f"{marker_dir(instant)}/{MARKER_TYPE_FILE}")
        self._counts["loads"] += 1
        return st

    def _has_pending(self) -> bool:
        with self._lock:
            states = list(self._states.values())
        for st in states:
            with st.lock:
                if st.pending or any(st.busy):
                    return True
        return False

    def _fail_pending(self, message: str) -> None:
        with self._lock:
            states = list(self._states.values())
        for st in states:
            with st.lock:
                reqs, st.pending = st.pending, []
            for r in reqs:
                r.finish(None, message)

    # -- operations (called by the HTTP handler) ------------------------------------------------
    def _create(self, instant: str, names: list[str]) -> list[bool]:
        self._early_check(instant, names)
        reqs = [_Request(n) for n in names]
        while True:
            st = self._state(instant)
            with st.lock:
                if self._closing:
                    raise _MarkerHTTPError(503, "the marker server is stopping; retry against the new server or use DIRECT markers")
                if st.deleted:       # deleted between lookup and lock: take the fresh state
                    continue
                st.pending.extend(reqs)
                break
        self._count("create_requests")
        self._count("markers_requested", len(reqs))
        deadline = time.monotonic() + self.request_timeout_s
        for r in reqs:
            if not r.done.wait(max(0.0, deadline - time.monotonic())):
                raise _MarkerHTTPError(503, f"timed out after {self.request_timeout_s:g}s waiting for marker {r.name!r} to be flushed")
        errors = [r.error for r in reqs if r.error is not None]
        if errors:
            with self._lock:
                det = self._detections.get(instant)
            if det is not None and det.conflict is not None:
                raise self._refuse(det)
            raise _MarkerHTTPError(500, errors[0])
        return [bool(r.created) for r in reqs]

    def _all(self, instant: str) -> set[str]:
        st = self._state(instant)
        with st.lock:
            return set(st.markers)

    def _exists(self, instant: str) -> bool:
        return self.storage.exists(marker_dir(instant))

    def _delete(self, instant: str) -> bool:
        with self._lock:
            st = self._states.pop(instant, None)
            self._detections.pop(instant, None)
        reqs: list[_Request] = []
        if st is not None:
            with st.lock:
                st.deleted = True
                reqs, st.pending = st.pending, []
        for r in reqs:
            r.finish(None, f"the marker dir of instant {instant} was deleted before the marker was flushed")
        d = marker_dir(instant)
        if not self.storage.exists(d):
            return False
        self.storage.delete_dir(d)
        return True

    # -- batching --------------------------------------------------------------------------------
    def _dispatch_loop(self) -> None:
        interval = self.batch_interval_ms / 1000.0
        next_at = time.monotonic() + interval
        while not self._stop_event.wait(max(0.0, next_at - time.monotonic())):
            next_at += interval
            now = time.monotonic()
            if next_at < now:         # fell behind (slow tick): do not burst
                next_at = now + interval
            try:
                self._tick()
            except Exception:  # pragma: no cover - defensive: the dispatcher must survive
                log.exception("marker dispatcher tick failed")

    def _tick(self) -> None:
        with self._lock:
            states = list(self._states.values())
        for st in states:
            with st.lock:
                if not st.pending or st.deleted:
                    continue
                idx = st.next_free_index()
                if idx is None:       # every MARKERS<n> is being written: wait for a later tick
                    continue
                reqs, st.pending = st.pending, []
            assert self._pool is not None
            self._pool.submit(self._process, st, reqs, idx)

    def _process(self, st: _DirState, reqs: list[_Request], idx: int) -> None:
        """One worker: dedup, write MARKERS.type once, rewrite MARKERS<idx>, then answer."""
        with self._lock:
            det = self._detections.get(st.instant)
        if det is not None and det.conflict is not None:   # stopped by early conflict detection
            with st.lock:
                st.busy[idx] = False
            for r in reqs:
                r.finish(None, det.error)
            return
        new: list[str] = []
        owners: list[_Request] = []
        same_batch_dups: list[_Request] = []
        known: list[_Request] = []
        with st.lock:
            in_batch: set[str] = set()
            for r in reqs:
                if r.name in st.markers:
                    known.append(r)
                elif r.name in in_batch:
                    same_batch_dups.append(r)
                elif r.name in st.inflight:
                    st.inflight[r.name].append(r)   # answered when the other batch's flush ends
                else:
                    in_batch.add(r.name)
                    st.inflight[r.name] = []
                    new.append(r.name)
                    owners.append(r)
            write_type = bool(new) and not st.type_written and not st.type_writing
            if write_type:
                st.type_writing = True
            content = st.files.get(idx, []) + new
            deleted = st.deleted
        for r in known:
            r.finish(False)
        error: str | None = None
        type_ok = False
        d = marker_dir(st.instant)
        try:
            if deleted:
                raise MarkerError(f"the marker dir of instant {st.instant} was deleted while markers were queued")
            if write_type:
                self.storage.create_exclusive(f"{d}/{MARKER_TYPE_FILE}", MARKER_TYPE_TEXT)
                self._count("storage_writes")
                type_ok = True
            if new:
                self.storage.write(f"{d}/{markers_file_name(idx)}", "".join(m + "\n" for m in content).encode("utf-8"))
                self._count("storage_writes")
        except Exception as exc:
            error = (f"could not write markers of instant {st.instant} to "
                     f"{self.storage.url(d + '/' + markers_file_name(idx))!r}: {type(exc).__name__}: {exc}; "
                     "the markers were not created, retry the request")
            log.warning("%s", error)
        followers: list[_Request] = []
        with st.lock:
            if write_type:
                st.type_writing = False
                st.type_written = st.type_written or type_ok
            for name in new:
                followers.extend(st.inflight.pop(name, []))
            if error is None and new:
                st.markers.update(new)
                st.files[idx] = content
            st.busy[idx] = False
        self._count("flushes")
        if error is None:
            self._count("markers_created", len(new))
        for r in owners:
            r.finish(True if error is None else None, error)
        for r in same_batch_dups + followers:
            r.finish(False if error is None else None, error)
