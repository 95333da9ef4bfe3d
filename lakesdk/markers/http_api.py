"""The HTTP side of the timeline-server marker service: the request routing and handler of a
:class:`~lakesdk.markers.server.MarkerServer` (which owns the state and the batching).

HTTP protocol (JSON bodies and replies; every request carries the header
``X-Lakesdk-Marker-Token: <token>``: the token is checked before the body is read, a
request without it is answered 401 and one with a wrong token 403, and the connection is
closed; a body larger than ``max_body_bytes`` is refused with 413 without reading it)::

    POST /v1/hoodie/marker/create            {"instant": I, "markers": [name, ...]}  -> {"created": [bool, ...]}
    GET  /v1/hoodie/marker/all?instant=I                                            -> {"markers": [name, ...]}
    GET  /v1/hoodie/marker/create-and-merge?instant=I                               -> {"markers": [...]}  (not APPEND)
    GET  /v1/hoodie/marker/append?instant=I                                         -> {"markers": [...]}  (APPEND)
    GET  /v1/hoodie/marker/dir/exists?instant=I                                     -> {"exists": bool}
    POST /v1/hoodie/marker/dir/delete        {"instant": I}                          -> {"deleted": bool}
    GET  /v1/hoodie/marker/ping                                                     -> {"ok": true}

Errors reply ``{"error": message}`` with 400 (bad request), 401 (no token), 403 (wrong
token), 404 (unknown path), 411 (chunked body), 413 (body too large), 409 (early conflict detection stopped the instant: the reply also holds
``"conflict": {"instant", "action", "file_groups", "completed", "planned"}``), 500 (the
flush failed: the markers of that batch are *not* kept, a retry may succeed) or 503 (the server is stopping, or the request timed out waiting for its flush).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Protocol
from urllib.parse import parse_qs, urlsplit

from lakesdk.exceptions import _MarkerHTTPError
from lakesdk.markers.base import InvalidMarkerNameError, parse_marker_name, validate_instant

__all__ = ["TOKEN_HEADER", "API_PREFIX", "DEFAULT_MAX_BODY_BYTES", "MarkerService", "MarkerHTTPServer",
           "MarkerRequestHandler"]

log = logging.getLogger("lakesdk.markers.server")

TOKEN_HEADER = "X-Lakesdk-Marker-Token"
API_PREFIX = "/v1/hoodie/marker"
#: the largest request body a server reads; clients split larger create requests
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


class MarkerService(Protocol):
    """What the HTTP side calls on the :class:`~lakesdk.markers.server.MarkerServer` it serves:
    the token and body limit it checks, the counters, and one call per endpoint."""

    token: str
    max_body_bytes: int
    _closing: bool

    def _count(self, key: str, n: int = 1) -> None: ...
    def _create(self, instant: str, names: list[str]) -> list[bool]: ...
    def _all(self, instant: str) -> set[str]: ...
    def _exists(self, instant: str) -> bool: ...
    def _delete(self, instant: str) -> bool: ...


class MarkerHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: MarkerService) -> None:
        self.owner = owner
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._handlers: set[threading.Thread] = set()
        super().__init__(addr, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        me = threading.current_thread()
        with self._conns_lock:
            self._handlers.add(me)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conns_lock:
                self._handlers.discard(me)

    def join_handlers(self) -> None:
        """Wait for the connection threads (their sockets are shut down: they end at once)."""
        with self._conns_lock:
            threads = list(self._handlers)
        for t in threads:
            t.join(5.0)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Close kept-alive connections so that no request reaches a stopped server."""
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _instant_param(params: dict[str, Any]) -> str:
    instant = params.get("instant")
    if not isinstance(instant, str):
        raise _MarkerHTTPError(400, "missing parameter 'instant'")
    try:
        return validate_instant(instant)
    except InvalidMarkerNameError as exc:
        raise _MarkerHTTPError(400, str(exc)) from exc


def _route_create(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    instant = _instant_param(params)
    names = params.get("markers")
    if names is None and isinstance(params.get("marker"), str):
        names = [params["marker"]]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _MarkerHTTPError(400, "expected 'markers': a list of marker names")
    try:
        names = [parse_marker_name(n).name for n in names]
    except InvalidMarkerNameError as exc:
        raise _MarkerHTTPError(400, str(exc)) from exc
    return {"created": srv._create(instant, names)}


def _route_all(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"markers": sorted(srv._all(_instant_param(params)))}


def _route_create_and_merge(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"markers": sorted(m for m in srv._all(_instant_param(params)) if not m.endswith(".APPEND"))}


def _route_append(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"markers": sorted(m for m in srv._all(_instant_param(params)) if m.endswith(".APPEND"))}


def _route_exists(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"exists": srv._exists(_instant_param(params))}


def _route_delete(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"deleted": srv._delete(_instant_param(params))}


def _route_ping(srv: MarkerService, params: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


_ROUTES: dict[tuple[str, str], Callable[[MarkerService, dict[str, Any]], dict[str, Any]]] = {
    ("POST", f"{API_PREFIX}/create"): _route_create,
    ("GET", f"{API_PREFIX}/all"): _route_all,
    ("GET", f"{API_PREFIX}/create-and-merge"): _route_create_and_merge,
    ("GET", f"{API_PREFIX}/append"): _route_append,
    ("GET", f"{API_PREFIX}/dir/exists"): _route_exists,
    ("POST", f"{API_PREFIX}/dir/delete"): _route_delete,
    ("GET", f"{API_PREFIX}/ping"): _route_ping,
}


class MarkerRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: one connection per client thread
    server: MarkerHTTPServer
    timeout = 300                   # idle keep-alive connections are closed after this

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        log.debug("marker server: " + format, *args)

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def _handle(self, method: str) -> None:
        srv = self.server.owner
        srv._count("requests")
        # the token first: nothing of an unauthenticated request's body is read (the
        # connection is closed instead, since the unread body would follow on it)
        given = self.headers.get(TOKEN_HEADER)
        if not given:
            srv._count("rejected")
            self._reply(401, {"error": f"missing {TOKEN_HEADER} header: this marker server only serves the writer "
                                       "that started it"}, close=True)
            return
        if not hmac.compare_digest(given.encode("utf-8", "replace"), srv.token.encode("utf-8")):
            srv._count("rejected")
            self._reply(403, {"error": f"wrong {TOKEN_HEADER} header: this marker server only serves the writer "
                                       "that started it"}, close=True)
            return
        if self.headers.get("Transfer-Encoding"):
            self._reply(411, {"error": "chunked request bodies are not accepted: send Content-Length"}, close=True)
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._reply(400, {"error": "invalid Content-Length"}, close=True)
            return
        if length > srv.max_body_bytes:
            self._reply(413, {"error": f"request body of {length} bytes is larger than this server accepts "
                                       f"({srv.max_body_bytes} bytes): send fewer markers per request"}, close=True)
            return
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        route = _ROUTES.get((method, url.path))
        if route is None:
            known = any(p == url.path for _, p in _ROUTES)
            self._reply(405 if known else 404, {"error": f"no endpoint {method} {url.path}"})
            return
        params: dict[str, Any] = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                self._reply(400, {"error": "the request body is not JSON"})
                return
            if not isinstance(data, dict):
                self._reply(400, {"error": "the request body must be a JSON object"})
                return
            params.update(data)
        try:
            payload = route(srv, params)
            status = 200
        except _MarkerHTTPError as exc:
            status, payload = exc.status, {"error": exc.message, **exc.extra}
        except Exception as exc:  # storage failures while loading, listing or deleting
            log.warning("marker server request %s %s failed", method, url.path, exc_info=True)
            status, payload = 500, {"error": f"{type(exc).__name__}: {exc}"}
        self._reply(status, payload, close=srv._closing)

    def _reply(self, status: int, payload: dict[str, Any], *, close: bool = False) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # client went away
            self.close_connection = True
