"""TIMELINE_SERVER_BASED markers, client side: requests to the writer's :class:`MarkerServer`.

The client holds the table :class:`~lakesdk.storage.Storage`, the instant, the server URL
and its token, nothing live, so it pickles to Spark executors.  Each thread keeps one
HTTP/1.1 keep-alive connection (re-opened after unpickling).  Requests time out after
``timeout_s`` and are retried ``retries`` times on connection errors, 500 and 503
replies (a retried create is safe: the server de-duplicates; the retried call may then
report ``False`` for a marker its own first attempt created).

A create request the server refuses because early conflict detection found a conflict
(HTTP 409) raises :class:`lakesdk.EarlyConflictError`.

When the server is gone (the writer stopped), :meth:`all_markers` reads the ``MARKERS*``
files directly from storage (Hudi's ``readTimelineServerBasedMarkersFromFileSystem``), and
:meth:`exists` / :meth:`delete_all` act on storage directly.  Creating markers needs
the server.  See :mod:`lakesdk.markers.http_api` for the protocol and :mod:`lakesdk.markers.server` for the on-disk layout.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any, Iterable, Literal
from urllib.parse import urlencode, urlsplit

from lakesdk.markers.base import (
    MarkerAuthError,
    MarkerError,
    MarkerServerError,
    MarkerServerUnavailableError,
    WriteMarkers,
    format_marker_name,
    read_marker_files,
)
from lakesdk.markers.http_api import API_PREFIX, DEFAULT_MAX_BODY_BYTES, TOKEN_HEADER
from lakesdk.storage import Storage

__all__ = ["TimelineServerWriteMarkers"]


class _Connection(http.client.HTTPConnection):
    """A keep-alive connection with Nagle's algorithm off (small requests, answered at once)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class TimelineServerWriteMarkers(WriteMarkers):
    """Markers created through the marker server at ``url`` (``http://host:port``)."""

    marker_type: Literal["TIMELINE_SERVER_BASED"] = "TIMELINE_SERVER_BASED"

    def __init__(self, storage: Storage, instant: str, url: str, token: str, *, timeout_s: float = 30.0,
                 retries: int = 2, retry_backoff_s: float = 0.1,
                 max_request_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        super().__init__(storage, instant)
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise MarkerError(f"marker server URL must look like 'http://127.0.0.1:<port>', found {url!r}")
        self.url = f"http://{parts.hostname}:{parts.port}"
        self.token = token
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.retry_backoff_s = float(retry_backoff_s)
        self.max_request_bytes = int(max_request_bytes)   # the server's max_body_bytes: larger creates are split
        self._local = threading.local()

    # -- pickling and repr ------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def __repr__(self) -> str:
        return (f"TimelineServerWriteMarkers(type={self.marker_type!r}, instant={self.instant!r}, "
                f"url={self.url!r}, base={self.storage.base_url!r})")

    # -- HTTP -------------------------------------------------------------------------------------
    def _connection(self) -> _Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            parts = urlsplit(self.url)
            conn = _Connection(parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close this thread's connection (optional; connections are also closed when collected)."""
        self._drop_connection()

    def _request(self, method: str, endpoint: str, params: dict[str, Any]) -> dict[str, Any]:
        path = f"{API_PREFIX}{endpoint}"
        headers = {TOKEN_HEADER: self.token, "Accept": "application/json"}
        body: bytes | None = None
        if method == "GET":
            path += "?" + urlencode(params)
        else:
            body = json.dumps(params).encode("utf-8")
            headers["Content-Type"] = "application/json"
        what = f"{method} {path.split('?')[0]} (instant {self.instant}) at {self.url}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                conn = self._connection()
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self._drop_connection()
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                if not last:
                    time.sleep(self.retry_backoff_s * (2 ** attempt))
                    continue
                raise MarkerServerUnavailableError(
                    f"could not reach the marker server for {what} after {self.retries + 1} attempts: "
                    f"{type(exc).__name__}: {exc}. Is the writer that started it still running?"
                ) from exc
            try:
                payload = json.loads(data) if data else {}
            except ValueError:
                payload = {"error": data[:200].decode("utf-8", "replace")}
            if resp.status == 200:
                return payload
            message = payload.get("error", "") if isinstance(payload, dict) else ""
            if resp.status == 409 and isinstance(payload, dict) and "conflict" in payload:
                c = payload["conflict"]
                from lakesdk.exceptions import EarlyConflictError
                raise EarlyConflictError(message, other_instant=c.get("instant"), other_action=c.get("action"),
                                         file_groups=tuple((str(p), str(f)) for p, f in c.get("file_groups") or ()),
                                         planned=tuple((str(p), str(f)) for p, f in c.get("planned") or ()))
            if resp.status in (401, 403):
                raise MarkerAuthError(f"the marker server rejected {what}: {message} (HTTP {resp.status}); "
                                      "the client's token does not match the server's", status=resp.status)
            if resp.status in (500, 503) and not last:
                time.sleep(self.retry_backoff_s * (2 ** attempt))
                continue
            raise MarkerServerError(f"marker server request {what} failed with HTTP {resp.status}: {message}",
                                    status=resp.status)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- WriteMarkers -----------------------------------------------------------------------------
    def create_if_absent(self, partition: str, file_name: str, io_type: str) -> bool:
        name = format_marker_name(partition, file_name, io_type)
        reply = self._request("POST", "/create", {"instant": self.instant, "markers": [name]})
        return bool(reply["created"][0])

    def create_many(self, markers: Iterable[tuple[str, str, str]]) -> list[bool]:
        """Create several markers in one request; they are all durable when this returns."""
        names = [format_marker_name(p, f, t) for p, f, t in markers]
        out: list[bool] = []
        for chunk in self._chunks(names):
            reply = self._request("POST", "/create", {"instant": self.instant, "markers": chunk})
            out.extend(bool(x) for x in reply["created"])
        return out

    def _chunks(self, names: list[str]) -> Iterable[list[str]]:
        """``names`` in runs whose request body stays within the server's ``max_body_bytes``."""
        limit = max(1, self.max_request_bytes - len(json.dumps({"instant": self.instant, "markers": []})))
        chunk: list[str] = []
        size = 0
        for n in names:
            b = len(json.dumps(n)) + 2   # the name and its ", " separator
            if chunk and size + b > limit:
                yield chunk
                chunk, size = [], 0
            chunk.append(n)
            size += b
        if chunk:
            yield chunk

    def all_markers(self) -> set[str]:
        try:
            return set(self._request("GET", "/all", {"instant": self.instant})["markers"])
        except MarkerServerUnavailableError:
            return self.read_from_storage()

    def read_from_storage(self) -> set[str]:
        """The union of the instant's ``MARKERS<n>`` files, read without the server."""
        out: set[str] = set()
        for lines in read_marker_files(self.storage, self.instant).values():
            out.update(lines)
        return out

    def exists(self) -> bool:
        try:
            return bool(self._request("GET", "/dir/exists", {"instant": self.instant})["exists"])
        except MarkerServerUnavailableError:
            return self.storage.exists(self.marker_dir)

    def delete_all(self) -> bool:
        try:
            return bool(self._request("POST", "/dir/delete", {"instant": self.instant})["deleted"])
        except MarkerServerUnavailableError:
            if not self.storage.exists(self.marker_dir):
                return False
            self.storage.delete_dir(self.marker_dir)
            return True
