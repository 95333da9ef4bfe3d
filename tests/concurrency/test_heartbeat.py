"""Heartbeats: ``.hoodie/.heartbeat/<instant>`` refreshed from a daemon thread; expiry by mtime.

Tests named test_c<N>_ cover case C<N> of the concurrency case table (docs/concurrency-cases.md)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from lakesdk.concurrency.heartbeat import Heartbeat, HeartbeatError, heartbeat_path, is_expired, last_beat
from lakesdk.storage import Storage


@pytest.fixture(params=["local", "memory"])
def storage(request, tmp_path) -> Storage:
    if request.param == "local":
        return Storage(str(tmp_path / "table"))
    return Storage(f"memory://hb-{uuid.uuid4().hex}")


def wait_for(cond, what: str, timeout: float = 60.0) -> None:
    """Poll ``cond`` until it holds; the deadline is far beyond what it takes on a loaded machine."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_c52_c53_c55_start_refresh_stop(storage):
    # 200 misses tolerated: a beat thread a loaded machine schedules late still counts as alive
    hb = Heartbeat(storage, "001", interval_s=0.05, tolerable_misses=200)
    assert last_beat(storage, "001") is None and is_expired(storage, "001", 0.05, 200)
    hb.start()
    try:
        assert hb.running and hb._thread is not None and hb._thread.daemon
        assert storage.exists(".hoodie/.heartbeat/001") and storage.read(".hoodie/.heartbeat/001") == b""
        first = last_beat(storage, "001")
        assert first is not None
        wait_for(lambda: hb.beats >= 3 and last_beat(storage, "001") > first, "two more beats")
        assert not is_expired(storage, "001", 0.05, 200) and not hb.is_expired()
        assert hb.start() is hb                        # already running: no-op
    finally:
        hb.stop()
    assert not hb.running
    assert not storage.exists(".hoodie/.heartbeat/001")
    assert last_beat(storage, "001") is None and is_expired(storage, "001", 0.05, 2)
    hb.stop()                                          # idempotent


def test_expiry_is_interval_times_misses(storage):
    Heartbeat(storage, "002", interval_s=60.0).beat()
    beat = last_beat(storage, "002")
    assert beat is not None and abs(beat - time.time()) < 5
    assert not is_expired(storage, "002", 60.0, 2, now=beat + 120.0)     # exactly 2 intervals: still alive
    assert is_expired(storage, "002", 60.0, 2, now=beat + 120.5)
    assert not is_expired(storage, "002", 60.0, 3, now=beat + 150.0)
    assert is_expired(storage, "002", 1.0, 1, now=beat + 1.5)
    assert not is_expired(storage, "002")                                 # defaults: 60 s x 2


def test_c54_stopped_writer_expires(storage):
    hb = Heartbeat(storage, "003", interval_s=0.05, tolerable_misses=2)
    hb.start()
    hb._stop.set()                                     # the writer dies: no more beats, file left behind
    hb._thread.join()
    time.sleep(0.2)
    assert storage.exists(".hoodie/.heartbeat/003")
    assert is_expired(storage, "003", 0.05, 2)


def test_context_manager(storage):
    with Heartbeat(storage, "004", interval_s=10.0) as hb:
        assert hb.running and not is_expired(storage, "004", 10.0, 2)
        assert repr(hb).startswith("Heartbeat(instant='004', running, interval_s=10")
    assert not storage.exists(".hoodie/.heartbeat/004")
    assert "stopped" in repr(hb)


class FlakyStorage(Storage):
    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.fail = False

        self.refuse_delete = False
        self.slow = 0.0
        self.slow_beat_started = threading.Event()
        self.events: list[str] = []

    def touch(self, rel: str) -> None:
        if self.fail:
            raise OSError("injected storage failure")
        if self.slow:
            self.slow_beat_started.set()
            time.sleep(self.slow)
        super().touch(rel)
        self.events.append("beat")

    def delete(self, rel: str, *, missing_ok: bool = True) -> None:
        if self.refuse_delete:
            raise OSError("injected: delete refused")
        super().delete(rel, missing_ok=missing_ok)
        self.events.append("delete")


def test_c59_beat_failures(tmp_path):
    s = FlakyStorage(str(tmp_path / "t"))
    s.fail = True
    with pytest.raises(HeartbeatError, match="could not write the heartbeat"):
        Heartbeat(s, "005", interval_s=0.02).start()
    s.fail = False
    hb = Heartbeat(s, "005", interval_s=0.02).start()
    try:
        s.fail = True
        wait_for(lambda: hb.last_error is not None, "a failed beat")
        assert isinstance(hb.last_error, OSError) and hb.running      # keeps trying
        n = hb.beats
        s.fail = False
        wait_for(lambda: hb.beats > n and hb.last_error is None, "a beat after the failures")
    finally:
        hb.stop()


def test_c62_validation():
    s = Storage("memory://hb-validation")
    assert heartbeat_path("20240418172802262") == ".hoodie/.heartbeat/20240418172802262"
    with pytest.raises(HeartbeatError, match="invalid instant"):
        Heartbeat(s, "../x")
    with pytest.raises(ValueError):
        Heartbeat(s, "001", interval_s=0)
    with pytest.raises(ValueError):
        Heartbeat(s, "001", tolerable_misses=0)


def test_c56_stopping_a_heartbeat_that_never_started(tmp_path):
    s = FlakyStorage(str(tmp_path / "t"))
    hb = Heartbeat(s, "101", interval_s=1.0)
    assert hb.stop() is True and not s.exists(heartbeat_path("101"))   # nothing to delete: no error
    assert is_expired(s, "101", 1.0, 2)


def test_c60_stop_waits_for_a_beat_in_progress(tmp_path):
    s = FlakyStorage(str(tmp_path / "t"))
    hb = Heartbeat(s, "102", interval_s=0.05, tolerable_misses=200).start()   # waits up to 10 s for a beat
    s.slow = 0.3                       # the next beats are slow writes
    assert s.slow_beat_started.wait(60)   # one of them is in progress
    assert hb.stop() is True
    assert s.events[-1] == "delete" and not s.exists(heartbeat_path("102"))
    time.sleep(0.4)
    assert not s.exists(heartbeat_path("102"))     # no beat re-created it after the delete


def test_c61_refused_delete_is_reported_not_raised(tmp_path):
    s = FlakyStorage(str(tmp_path / "t"))
    hb = Heartbeat(s, "103", interval_s=10.0).start()
    s.refuse_delete = True
    assert hb.stop() is False and isinstance(hb.last_error, OSError) and not hb.running
    s.refuse_delete = False
    assert hb.stop() is True and not s.exists(heartbeat_path("103"))


def test_c58_a_hanging_beat_does_not_stop_the_next_ones(tmp_path):

    class Hanging(FlakyStorage):
        def __init__(self, base: str) -> None:
            super().__init__(base)
            self.release = threading.Event()
            self.calls = 0

        def touch(self, rel: str) -> None:
            self.calls += 1
            if self.calls == 2:              # the first scheduled beat hangs
                assert self.release.wait(30)
            super().touch(rel)

    s = Hanging(str(tmp_path / "t"))
    hb = Heartbeat(s, "104", interval_s=0.05, tolerable_misses=10).start()
    try:
        deadline = time.monotonic() + 30
        while s.events.count("beat") < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.events.count("beat") >= 3       # the first (synchronous) and later ones, past the hung one
        assert s.calls >= 4
    finally:
        s.release.set()
        assert hb.stop() is True
    time.sleep(0.2)
    assert not s.exists(heartbeat_path("104"))
