"""Write markers: names, DIRECT and TIMELINE_SERVER_BASED flavours, the marker server.

Case ids (M1..M31) refer to the case table of shared/spec/semantics/markers.md.  The server
tests use a real HTTP server on 127.0.0.1; no mocks.
"""

from __future__ import annotations

import json
import pickle
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.markers import (
    MARKER_TYPE_FILE,
    DirectWriteMarkers,
    InvalidMarkerNameError,
    MarkerAuthError,
    MarkerError,
    MarkerName,
    MarkerServer,
    MarkerServerError,
    TimelineServerWriteMarkers,
    UnsupportedMarkerTypeError,
    WriteMarkers,
    detect_marker_type,
    format_marker_name,
    marker_dir,
    parse_marker_name,
    read_marker_files,
    read_markers,
    strip_marker_suffix,
    write_markers,
)
from lakesdk.markers.base import markers_file_name, parse_markers_file_index
from lakesdk.markers.http_api import API_PREFIX, TOKEN_HEADER
from lakesdk.storage import Storage

P1, P2, P3, P4 = "2020/06/01", "2020/06/02", "2020/06/03", "2025/03/28"
KINDS = ["DIRECT", "TIMELINE_SERVER_BASED"]


# --------------------------------------------------------------------------------- fixtures
@pytest.fixture
def storage(tmp_path) -> Storage:
    return Storage(str(tmp_path / "table"))


@pytest.fixture
def server(storage):
    with MarkerServer(storage, batch_interval_ms=5, num_threads=4) as srv:
        yield srv


@pytest.fixture(params=KINDS)
def make(request, storage) -> Callable[..., WriteMarkers]:
    """make(instant="000") -> WriteMarkers of the parametrized type."""
    if request.param == "DIRECT":
        return lambda instant="000": write_markers(storage, instant, "DIRECT")
    srv = request.getfixturevalue("server")
    return lambda instant="000": write_markers(storage, instant, "TIMELINE_SERVER_BASED", server=srv)


def create_some(m: WriteMarkers, *, partitioned: bool = True, table_version: int = 8) -> None:
    """Hudi's createSomeMarkers."""
    p = (lambda x: x) if partitioned else (lambda x: "")
    m.create(p(P1), "file1", "MERGE")
    m.create(p(P2), "file2", "APPEND")
    m.create(p(P3), "file3", "CREATE")
    m.create_log_marker(p(P4), "file4.log", table_version=table_version)


def expected_names(*, partitioned: bool = True, log_type: str = "CREATE") -> list[str]:
    names = [f"{P1}/file1.marker.MERGE", f"{P2}/file2.marker.APPEND", f"{P3}/file3.marker.CREATE",
             f"{P4}/file4.log.marker.{log_type}"]
    return sorted(n if partitioned else n.rsplit("/", 1)[1] for n in names)


class GatedStorage(Storage):
    """Local storage whose MARKERS<n> writes wait for ``gate`` and can be made to fail."""

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False
        self.writes: list[str] = []

    def write(self, rel: str, data: bytes) -> None:
        if "/MARKERS" in rel:
            self.gate.wait(10)
            if self.fail:
                raise OSError(f"injected failure writing {rel}")
            self.writes.append(rel.rsplit("/", 1)[1])
        super().write(rel, data)


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


def disk_markers_files(storage: Storage, instant: str = "000") -> dict[str, str]:
    return {e.name: storage.read(e.path).decode() for e in storage.list(marker_dir(instant))
            if e.name.startswith("MARKERS") and e.name != MARKER_TYPE_FILE}


# ------------------------------------------------------------------------------ names (M9)
segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789=_-", min_size=1, max_size=8)
partitions = st.lists(segment, max_size=4).map("/".join)
file_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=40).filter(
    lambda f: f not in (".", "..") and ".marker" not in f)
io_types = st.sampled_from(["CREATE", "MERGE", "APPEND"])


@settings(max_examples=300, deadline=None)
@given(partitions, file_names, io_types)
def test_marker_name_format_parse_round_trip(partition, file_name, io_type):
    name = format_marker_name(partition, file_name, io_type)
    m = parse_marker_name(name)
    assert (m.partition, m.file_name, m.io_type) == (partition, file_name, io_type)
    assert m.name == name == str(m)
    assert strip_marker_suffix(name) == m.data_path == (f"{partition}/{file_name}" if partition else file_name)
    assert format_marker_name(m.partition, m.file_name, m.io_type) == name


@pytest.mark.parametrize("name, parts", [
    ("2020/06/01/file1.marker.MERGE", ("2020/06/01", "file1", "MERGE")),
    ("2020/06/02/file2.marker.APPEND", ("2020/06/02", "file2", "APPEND")),
    ("2025/03/28/file4.log.marker.CREATE", ("2025/03/28", "file4.log", "CREATE")),
    ("file3.marker.CREATE", ("", "file3", "CREATE")),
    ("2016/68b3-0_1-0-1_00000000000001.parquet.marker.CREATE",
     ("2016", "68b3-0_1-0-1_00000000000001.parquet", "CREATE")),
    ("dt=2024-01-01/.f0_20240101000000000.log.1_0-1-2.marker.CREATE",
     ("dt=2024-01-01", ".f0_20240101000000000.log.1_0-1-2", "CREATE")),
])
def test_hudi_marker_names(name, parts):
    m = parse_marker_name(name)
    assert (m.partition, m.file_name, m.io_type) == parts
    assert format_marker_name(*parts) == name


def test_strip_marker_suffix_m9():
    assert strip_marker_suffix("file:///tmp/t/.hoodie/.temp/000/file.marker.APPEND") == "file:///tmp/t/.hoodie/.temp/000/file"
    with pytest.raises(InvalidMarkerNameError):
        strip_marker_suffix("file.parquet")


@pytest.mark.parametrize("bad", [
    "file.parquet", "file.marker.DELETE", "2020/file.marker.", ".marker.CREATE", "/2020/f.marker.CREATE",
    "2020//f.marker.CREATE", "../f.marker.CREATE", "2020/f.marker.CREATE\nx.marker.CREATE",
])
def test_parse_rejects_invalid_names(bad):
    with pytest.raises(InvalidMarkerNameError):
        parse_marker_name(bad)


def test_format_validates_parts_and_normalizes_partition():
    assert format_marker_name("/2020/06/01/", "f", "CREATE") == "2020/06/01/f.marker.CREATE"
    for args in [("p", "a/b", "CREATE"), ("p", "", "CREATE"), ("p", "f", "create"), ("p", "x.marker.y", "MERGE"),
                 ("p/../q", "f", "CREATE")]:
        with pytest.raises(InvalidMarkerNameError) as err:
            format_marker_name(*args)
        assert isinstance(err.value, ValueError) and isinstance(err.value, MarkerError)
    assert MarkerName("p", "f", "MERGE").data_path == "p/f"


def test_markers_file_names():
    assert markers_file_name(3) == "MARKERS3" and parse_markers_file_index("MARKERS3") == 3
    with pytest.raises(MarkerError, match="MARKERSx"):
        parse_markers_file_index("MARKERSx")


def test_marker_dir_and_instant_validation(storage):
    assert marker_dir("000") == ".hoodie/.temp/000"
    for bad in ["", "..", "a/b", "../x"]:
        with pytest.raises(InvalidMarkerNameError):
            DirectWriteMarkers(storage, bad)


# ------------------------------------------------------------------------ creation and layout
@pytest.mark.parametrize("partitioned", [True, False])
def test_m1_direct_markers_on_disk(storage, partitioned):
    m = DirectWriteMarkers(storage, "000")
    create_some(m, partitioned=partitioned)
    assert m.exists()
    on_disk = sorted(e.path[len(".hoodie/.temp/000/"):] for e in storage.find(".hoodie/.temp/000"))
    assert on_disk == expected_names(partitioned=partitioned)
    assert not storage.exists(f".hoodie/.temp/000/{MARKER_TYPE_FILE}")
    assert all(storage.read(".hoodie/.temp/000/" + p) == b"" for p in on_disk)
    assert detect_marker_type(storage, "000") == "DIRECT"


@pytest.mark.parametrize("partitioned", [True, False])
def test_m2_timeline_server_markers_on_disk(storage, server, partitioned):
    m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=server)
    assert isinstance(m, TimelineServerWriteMarkers)
    create_some(m, partitioned=partitioned)
    files = {e.name for e in storage.find(".hoodie/.temp/000")}
    assert MARKER_TYPE_FILE in files
    assert storage.read(f".hoodie/.temp/000/{MARKER_TYPE_FILE}") == b"TIMELINE_SERVER_BASED"
    contents = disk_markers_files(storage)
    assert contents and set(contents) == files - {MARKER_TYPE_FILE}     # no per-file markers
    lines = [ln for text in contents.values() for ln in text.split("\n") if ln]
    assert all(text.endswith("\n") for text in contents.values())
    assert sorted(lines) == expected_names(partitioned=partitioned)
    assert detect_marker_type(storage, "000") == "TIMELINE_SERVER_BASED"
    assert sorted(read_markers(storage, "000")) == expected_names(partitioned=partitioned)


def test_m3_log_marker_by_table_version(make):
    m = make()
    create_some(m, table_version=6)
    assert sorted(m.all_markers()) == expected_names(log_type="APPEND")
    m8 = make("001")
    create_some(m8, table_version=8)
    assert sorted(m8.all_markers()) == expected_names(log_type="CREATE")


def test_m4_exists_then_delete(make):
    m = make()
    m.create(P1, "file1", "MERGE")
    assert m.exists()
    assert m.delete_all() is True
    assert not m.exists()
    assert m.all_markers() == set()


def test_m5_fresh_instant(make):
    m = make("123")
    assert m.exists() is False
    assert m.all_markers() == set()
    assert m.data_files() == set()
    assert m.delete_all() is False


@pytest.mark.parametrize("table_version, expected", [
    (8, [f"{P1}/file1", f"{P3}/file3", f"{P4}/file4.log"]),
    (6, [f"{P1}/file1", f"{P3}/file3"]),
])
def test_m6_data_files_exclude_append_and_stray_files(make, storage, table_version, expected):
    m = make()
    create_some(m, table_version=table_version)
    storage.write(f".hoodie/.temp/000/{P1}/invalid_file3", b"")     # a stray file in p1's marker dir
    non_type = [e for e in storage.find(".hoodie/.temp/000") if e.name != MARKER_TYPE_FILE]
    if m.marker_type == "DIRECT":
        assert len(non_type) == 5                                      # 4 markers + 1 stray
    assert sorted(m.data_files()) == expected


def test_m7_appended_log_files_v6(make):
    m = make()
    create_some(m, table_version=6)
    assert sorted(m.appended_log_files()) == [f"{P2}/file2", f"{P4}/file4.log"]


def test_m8_all_markers(make):
    m = make()
    create_some(m)
    assert sorted(m.all_markers()) == expected_names()
    assert sorted(read_markers(m.storage, "000")) == expected_names()


def test_m10_direct_create_if_absent_dedup(storage):
    m = DirectWriteMarkers(storage, "000")
    assert m.create_if_absent(P1, "f", "CREATE") is True
    assert m.create_if_absent(P1, "f", "CREATE") is False
    assert m.create(P1, "f", "CREATE") == f"{P1}/f.marker.CREATE"      # create is idempotent
    assert m.create_many([(P1, "f", "CREATE"), (P2, "g", "MERGE")]) == [False, True]
    assert m.all_markers() == {f"{P1}/f.marker.CREATE", f"{P2}/g.marker.MERGE"}


def test_direct_concurrent_creators_each_marker_created_once(storage):
    m = DirectWriteMarkers(storage, "000")
    names = [(f"p{i % 3}", f"f{i}", "CREATE") for i in range(200)]

    def work(shift: int) -> list[bool]:
        return [m.create_if_absent(*names[(j + shift) % len(names)]) for j in range(len(names))]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(0, 200, 25)))
    assert sum(sum(r) for r in results) == 200
    assert len(m.all_markers()) == 200


def test_m11_server_dedup_within_and_across_batches(storage, server):
    m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=server)
    # within one batch (one request holding the marker twice)
    assert m.create_many([(P1, "f", "CREATE"), (P1, "f", "CREATE")]) == [True, False]
    # across batches
    assert m.create_if_absent(P1, "f", "CREATE") is False
    assert m.create(P1, "f", "CREATE") == f"{P1}/f.marker.CREATE"
    snap = server.dir_state("000")
    assert snap is not None and snap.markers == {f"{P1}/f.marker.CREATE"}
    contents = disk_markers_files(storage)
    assert [ln for t in contents.values() for ln in t.splitlines()] == [f"{P1}/f.marker.CREATE"]
    # concurrent requests for one marker from many threads: exactly one True
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: m.create_if_absent(P2, "g", "MERGE"), range(16)))
    assert replies.count(True) == 1
    lines = [ln for t in disk_markers_files(storage).values() for ln in t.splitlines()]
    assert Counter(lines) == Counter({f"{P1}/f.marker.CREATE": 1, f"{P2}/g.marker.MERGE": 1})


def test_m11_duplicate_waits_for_inflight_flush(tmp_path):
    """A repeated marker whose first flush is still running is answered only after it is durable."""
    s = GatedStorage(str(tmp_path / "t"))
    with MarkerServer(s, batch_interval_ms=5, num_threads=2) as srv:
        m = write_markers(s, "000", "TIMELINE_SERVER_BASED", server=srv)
        m.create("p", "warm", "CREATE")
        s.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(m.create_if_absent, "p", "x", "CREATE")
            wait_until(lambda: srv.dir_state("000").busy_indices != ())
            second = pool.submit(m.create_if_absent, "p", "x", "CREATE")
            wait_until(lambda: srv.stats.flushes >= 2 or len(srv.dir_state("000").busy_indices) == 2)
            time.sleep(0.05)
            assert not first.done() and not second.done()
            s.gate.set()
            assert (first.result(5), second.result(5)) == (True, False)
        lines = [ln for t in disk_markers_files(s).values() for ln in t.splitlines()]
        assert Counter(lines)["p/x.marker.CREATE"] == 1


# ------------------------------------------------------------------------------ server batching
def test_m12_busy_file_index_keeps_requests_queued(tmp_path):
    s = GatedStorage(str(tmp_path / "t"))
    with MarkerServer(s, batch_interval_ms=5, num_threads=1) as srv:
        m = write_markers(s, "000", "TIMELINE_SERVER_BASED", server=srv)
        s.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            a = pool.submit(m.create_if_absent, "p", "a", "CREATE")
            wait_until(lambda: srv.dir_state("000") is not None and srv.dir_state("000").busy_indices == (0,))
            b = pool.submit(m.create_if_absent, "p", "b", "CREATE")
            wait_until(lambda: srv.dir_state("000").pending == ("p/b.marker.CREATE",))
            time.sleep(0.05)                               # ~10 ticks: index 0 is busy, b stays queued
            snap = srv.dir_state("000")
            assert snap.pending == ("p/b.marker.CREATE",) and snap.busy_indices == (0,)
            assert srv.stats.flushes == 0
            s.gate.set()
            assert a.result(5) is True and b.result(5) is True
        assert srv.stats.flushes == 2
        assert disk_markers_files(s) == {"MARKERS0": "p/a.marker.CREATE\np/b.marker.CREATE\n"}
        assert s.writes == ["MARKERS0", "MARKERS0"]


def test_m13_round_robin_file_indices(storage):
    with MarkerServer(storage, batch_interval_ms=5, num_threads=4) as srv:
        m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv)
        for i in range(6):                                 # one request per tick, no contention
            assert m.create_if_absent("p", f"f{i}", "CREATE")
        assert disk_markers_files(storage) == {
            "MARKERS0": "p/f0.marker.CREATE\np/f4.marker.CREATE\n",
            "MARKERS1": "p/f1.marker.CREATE\np/f5.marker.CREATE\n",
            "MARKERS2": "p/f2.marker.CREATE\n",
            "MARKERS3": "p/f3.marker.CREATE\n",
        }
        st_ = srv.stats
        assert st_.flushes == 6 and st_.storage_writes == 7    # 6 MARKERS<n> rewrites + MARKERS.type once
        assert st_.markers_created == 6 and st_.create_requests == 6


def test_m14_restarted_server_loads_existing_markers(storage):
    a, b, c = (f"{P1}/{x}.parquet.marker.CREATE" for x in "abc")
    storage.write(".hoodie/.temp/000/MARKERS0", f"{a}\n{b}\n".encode())
    storage.write(f".hoodie/.temp/000/{MARKER_TYPE_FILE}", b"TIMELINE_SERVER_BASED")
    type_mtime = storage.info(f".hoodie/.temp/000/{MARKER_TYPE_FILE}").modified
    with MarkerServer(storage, batch_interval_ms=5, num_threads=2) as srv:
        m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv)
        assert m.all_markers() == {a, b}
        assert m.create_if_absent(P1, "a.parquet", "CREATE") is False
        assert m.create_if_absent(P1, "c.parquet", "CREATE") is True
        assert srv.stats.storage_writes == 1 and srv.stats.loads == 1    # MARKERS.type not rewritten
        assert srv.dir_state("000").markers == {a, b, c}
    assert storage.info(f".hoodie/.temp/000/{MARKER_TYPE_FILE}").modified == type_mtime
    assert read_markers(storage, "000") == {a, b, c}


def test_server_restart_recovers_acknowledged_markers(storage):
    with MarkerServer(storage, batch_interval_ms=5) as srv1:
        m1 = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv1)
        create_some(m1)
    # the old client still answers from storage once its server is gone
    assert sorted(m1.all_markers()) == expected_names()
    assert m1.exists()
    with MarkerServer(storage, batch_interval_ms=5) as srv2:
        assert srv2.port != srv1.port or srv2.token != srv1.token
        m2 = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv2)
        assert sorted(m2.all_markers()) == expected_names()
        assert m2.create_if_absent(P1, "file1", "MERGE") is False
        assert m2.create_if_absent(P1, "file9", "CREATE") is True
    lines = [ln for t in disk_markers_files(storage).values() for ln in t.splitlines()]
    assert sorted(lines) == sorted(expected_names() + [f"{P1}/file9.marker.CREATE"])
    assert m1.delete_all() is True and not storage.exists(".hoodie/.temp/000")   # server gone: direct delete


def test_m15_single_request_processing(storage):
    instant = "00000000000001"
    name = "2016/68b3c1e8-8ba3-4d5e-a5c1-b0ae3b4a6c2b-0_1-0-1_00000000000001.parquet.marker.CREATE"
    with MarkerServer(storage, batch_interval_ms=5, num_threads=1) as srv:
        m = write_markers(storage, instant, "TIMELINE_SERVER_BASED", server=srv)
        mk = parse_marker_name(name)
        assert m.create_if_absent(mk.partition, mk.file_name, mk.io_type) is True
        snap = srv.dir_state(instant)
        assert snap.markers == {name} and snap.files == {0: (name,)} and snap.busy_indices == ()
    assert storage.read(f".hoodie/.temp/{instant}/MARKERS0").decode() == name + "\n"


def test_m16_m17_flush_failure_then_retry(tmp_path):
    s = GatedStorage(str(tmp_path / "t"))
    name = "p/f.parquet.marker.CREATE"
    with MarkerServer(s, batch_interval_ms=5, num_threads=1) as srv:
        url, token = srv.url, srv.token
        m = TimelineServerWriteMarkers(s, "000", url, token, retries=0)
        s.fail = True
        with pytest.raises(MarkerServerError, match="injected failure") as err:
            m.create_if_absent("p", "f.parquet", "CREATE")
        assert "HTTP 500" in str(err.value)
        snap = srv.dir_state("000")
        assert snap.markers == set() and snap.busy_indices == () and snap.files == {}   # M16
        assert m.all_markers() == set()
        assert not s.exists(".hoodie/.temp/000/MARKERS0")
        s.fail = False
        assert m.create_if_absent("p", "f.parquet", "CREATE") is True                   # M17
        assert srv.dir_state("000").markers == {name}
    assert s.read(".hoodie/.temp/000/MARKERS0").decode() == name + "\n"


def test_client_retries_a_failed_flush(tmp_path):
    s = GatedStorage(str(tmp_path / "t"))
    with MarkerServer(s, batch_interval_ms=5, num_threads=1) as srv:
        m = TimelineServerWriteMarkers(s, "000", srv.url, srv.token, retries=2, retry_backoff_s=0.05)
        s.fail = True
        threading.Timer(0.02, lambda: setattr(s, "fail", False)).start()
        assert m.create("p", "f", "CREATE") == "p/f.marker.CREATE"
        assert m.all_markers() == {"p/f.marker.CREATE"}


def test_m18_server_delete_drops_state(storage, server):
    m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=server)
    create_some(m)
    assert server.dir_state("000") is not None
    assert m.delete_all() is True
    assert not storage.exists(".hoodie/.temp/000")
    assert server.dir_state("000") is None
    assert m.all_markers() == set() and m.exists() is False
    assert m.delete_all() is False
    assert m.create_if_absent(P1, "file1", "MERGE") is True          # fresh lazy load: not a duplicate


def test_concurrent_server_creation_each_marker_once(storage):
    """8 client threads, 2,000 markers (plus repeats): every marker lands exactly once."""
    n_threads, n_markers = 8, 2000
    names = [(f"p{i % 7}", f"{uuid.uuid4()}-0_1-0-{i}_000.parquet", "CREATE") for i in range(n_markers)]
    with MarkerServer(storage, batch_interval_ms=5, num_threads=n_threads) as srv:
        m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv)
        blob = pickle.dumps(m)                             # as sent to executors

        def creator(k: int) -> list[bool]:
            mine = pickle.loads(blob)
            own = names[k::n_threads]
            out = [mine.create_if_absent(*x) for x in own]
            repeats = [mine.create_if_absent(*x) for x in names[(k + 1) % n_threads::n_threads][:20]]
            return out + repeats

        with ThreadPoolExecutor(n_threads) as pool:
            results = list(pool.map(creator, range(n_threads)))
        assert sum(sum(r) for r in results) == n_markers
        assert srv.stats.markers_created == n_markers
        assert srv.stats.create_requests == n_markers + 20 * n_threads
        assert srv.stats.storage_writes <= srv.stats.flushes + 1
    files = disk_markers_files(storage)
    assert 1 <= len(files) <= n_threads
    assert all(0 <= parse_markers_file_index(f) < n_threads for f in files)
    lines = Counter(ln for t in files.values() for ln in t.splitlines())
    assert set(lines.values()) == {1}
    assert set(lines) == {format_marker_name(*x) for x in names}
    assert read_markers(storage, "000") == set(lines)


def test_create_many_is_one_request(storage, server):
    m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=server)
    before = server.stats.requests
    batch = [("p", f"f{i}", "CREATE") for i in range(500)]
    assert m.create_many(batch) == [True] * 500
    assert server.stats.requests == before + 1
    assert m.create_many([]) == []
    assert len(read_markers(storage, "000")) == 500


# ------------------------------------------------------------------------------ token and HTTP
def _raw(url: str, path: str, *, token: str | None, body: dict[str, Any] | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method="POST" if data else "GET")
    if token is not None:
        req.add_header(TOKEN_HEADER, token)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_requests_without_the_token_are_rejected(storage, server):
    for token, code in ((None, 401), ("wrong", 403), (server.token + "x", 403)):
        status, payload = _raw(server.url, f"{API_PREFIX}/create", token=token,
                               body={"instant": "000", "markers": ["p/f.marker.CREATE"]})
        assert status == code and TOKEN_HEADER in payload["error"]
        status, _ = _raw(server.url, f"{API_PREFIX}/all?instant=000", token=token)
        assert status == code
    assert server.stats.rejected == 6
    assert server.dir_state("000") is None and not storage.exists(".hoodie/.temp/000")
    bad = TimelineServerWriteMarkers(storage, "000", server.url, "not-the-token")
    with pytest.raises(MarkerAuthError, match="403"):
        bad.create("p", "f", "CREATE")
    with pytest.raises(PermissionError):
        bad.all_markers()
    status, payload = _raw(server.url, f"{API_PREFIX}/ping", token=server.token)
    assert (status, payload) == (200, {"ok": True})


def _raw_headers(server: MarkerServer, headers: dict[str, str]) -> tuple[int, dict]:
    """POST /create with ``headers`` and no body bytes sent: the reply must come without the body."""
    import http.client
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.putrequest("POST", f"{API_PREFIX}/create")
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()   # the announced body is never sent
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_marker_server_checks_the_token_before_reading_the_body(storage):
    with MarkerServer(storage, batch_interval_ms=5, num_threads=2, max_body_bytes=1024) as srv:
        huge = str(10 ** 12)
        assert _raw_headers(srv, {"Content-Length": huge})[0] == 401
        assert _raw_headers(srv, {"Content-Length": huge, TOKEN_HEADER: "wrong"})[0] == 403
        status, payload = _raw_headers(srv, {"Content-Length": huge, TOKEN_HEADER: srv.token})
        assert status == 413 and "1024 bytes" in payload["error"]
        status, _ = _raw_headers(srv, {"Transfer-Encoding": "chunked", TOKEN_HEADER: srv.token})
        assert status == 411
        assert srv.stats.rejected == 2 and srv.dir_state("000") is None
        # a client splits a create larger than the server accepts into several requests
        m = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=srv)
        many = [("p", f"f{i:04d}.parquet", "CREATE") for i in range(200)]
        assert m.create_many(many) == [True] * 200
        assert srv.stats.create_requests > 1
        assert len(read_markers(storage, "000")) == 200


def test_bad_requests_get_clear_errors(storage, server):
    status, payload = _raw(server.url, f"{API_PREFIX}/create", token=server.token,
                           body={"instant": "000", "markers": ["not-a-marker"]})
    assert status == 400 and "not a marker name" in payload["error"]
    status, payload = _raw(server.url, f"{API_PREFIX}/all?instant=../x", token=server.token)
    assert status == 400 and "instant" in payload["error"]
    status, payload = _raw(server.url, f"{API_PREFIX}/nope", token=server.token)
    assert status == 404
    status, payload = _raw(server.url, f"{API_PREFIX}/all", token=server.token, body={"instant": "000"})
    assert status == 405


def test_stopped_server_refuses_and_client_reports_unreachable(storage):
    srv = MarkerServer(storage, batch_interval_ms=5).start()
    m = TimelineServerWriteMarkers(storage, "000", srv.url, srv.token, retries=1, retry_backoff_s=0.01)
    m.create("p", "f", "CREATE")                           # opens a keep-alive connection
    srv.stop()
    srv.stop()                                             # idempotent
    with pytest.raises(MarkerServerError, match="could not reach the marker server"):
        m.create("p", "g", "CREATE")
    assert m.all_markers() == {"p/f.marker.CREATE"}       # read from MARKERS* on storage
    with pytest.raises(MarkerError, match="was stopped"):
        srv.start()


# ------------------------------------------------------------------------------ factory and reads
def test_m19_factory_fallbacks(storage):
    with pytest.warns(UserWarning, match="no marker server"):
        m = write_markers(storage, "000", "TIMELINE_SERVER_BASED")
    assert isinstance(m, DirectWriteMarkers)
    with pytest.warns(UserWarning, match="hdfs"):
        m = write_markers(Storage("hdfs://namenode/table"), "000", "TIMELINE_SERVER_BASED", server=None)
    assert isinstance(m, DirectWriteMarkers)
    assert isinstance(write_markers(storage, "000", "direct"), DirectWriteMarkers)
    with pytest.raises(UnsupportedMarkerTypeError, match="DIRECT, TIMELINE_SERVER_BASED"):
        write_markers(storage, "000", "S3")
    with MarkerServer(Storage(str(storage.root) + "-other")) as other:
        with pytest.raises(MarkerError, match="one MarkerServer per table"):
            write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=other)


def test_m20_read_markers_without_type_file_uses_direct_listing(storage):
    create_some(DirectWriteMarkers(storage, "000"))
    assert sorted(read_markers(storage, "000")) == expected_names()


def test_m21_read_markers_without_type_file_reads_markers_files(storage):
    storage.write(".hoodie/.temp/000/MARKERS0", f"{P1}/f0.marker.CREATE\n".encode())
    storage.write(".hoodie/.temp/000/MARKERS3", f"{P2}/f1.marker.MERGE\n{P3}/f2.marker.APPEND\n".encode())
    assert detect_marker_type(storage, "000") == "TIMELINE_SERVER_BASED"
    assert read_markers(storage, "000") == {f"{P1}/f0.marker.CREATE", f"{P2}/f1.marker.MERGE",
                                            f"{P3}/f2.marker.APPEND"}
    assert read_marker_files(storage, "000") == {0: [f"{P1}/f0.marker.CREATE"],
                                                 3: [f"{P2}/f1.marker.MERGE", f"{P3}/f2.marker.APPEND"]}


def test_read_markers_type_file_rules(storage):
    assert read_markers(storage, "000") == set() and detect_marker_type(storage, "000") is None
    storage.write(f".hoodie/.temp/000/{MARKER_TYPE_FILE}", b"DIRECT")
    with pytest.raises(UnsupportedMarkerTypeError, match='The marker type "DIRECT" is not supported'):
        read_markers(storage, "000")
    storage.write(f".hoodie/.temp/001/{MARKER_TYPE_FILE}", b"TIMELINE_SERVER_BASED\n")
    storage.write(".hoodie/.temp/001/MARKERSx", b"junk")
    with pytest.raises(MarkerError, match="MARKERSx"):
        read_markers(storage, "001")


def test_m29_marker_data_files_minus_write_stats(make, storage):
    """The markers part of finalize (M29): marker data paths not in the write stats."""
    m = make()
    create_some(m)
    m.create(P1, "file5.parquet", "CREATE")
    m.create(P1, "file6.parquet", "CREATE")
    stats = {f"{P1}/file1", f"{P3}/file3", f"{P4}/file4.log", f"{P1}/file5.parquet"}
    assert m.data_files() - stats == {f"{P1}/file6.parquet"}


def test_m30_empty_write_has_no_marker_dir(make):
    m = make()
    assert not m.exists() and m.data_files() == set()


# ------------------------------------------------------------------------------ pickling, reprs
def test_markers_pickle_and_repr_without_io(storage, server):
    d = DirectWriteMarkers(storage, "000")
    c = write_markers(storage, "000", "TIMELINE_SERVER_BASED", server=server)
    c.create("p", "f", "CREATE")                           # a live connection in this thread
    for m in (d, c):
        clone = pickle.loads(pickle.dumps(m))
        assert type(clone) is type(m) and clone.instant == "000" and clone.storage == storage
    clone = pickle.loads(pickle.dumps(c))
    assert clone.create_if_absent("p", "g", "CREATE") is True
    assert repr(d) == f"DirectWriteMarkers(type='DIRECT', instant='000', base={storage.base_url!r})"
    assert repr(c).startswith("TimelineServerWriteMarkers(type='TIMELINE_SERVER_BASED', instant='000', url='http://127.0.0.1:")
    assert server.token not in repr(c) and server.token not in repr(server)
    assert "running" in repr(server) and "num_threads=4" in repr(server)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(server)
    not_started = MarkerServer(storage)
    assert "not started" in repr(not_started)
    with pytest.raises(MarkerError, match="not started"):
        _ = not_started.url


def test_memory_storage_both_flavours():
    s = Storage(f"memory://markers-{uuid.uuid4().hex}")
    create_some(DirectWriteMarkers(s, "000"))
    assert sorted(read_markers(s, "000")) == expected_names()
    with MarkerServer(s, batch_interval_ms=5) as srv:
        m = write_markers(s, "001", "TIMELINE_SERVER_BASED", server=srv)
        create_some(m)
    assert sorted(read_markers(s, "001")) == expected_names()
    assert DirectWriteMarkers(s, "000").delete_all() and not DirectWriteMarkers(s, "000").exists()
