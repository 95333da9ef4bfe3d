"""Helpers shared by several test modules: plain functions and classes, no tests.

Fixtures built on them live in conftest.py (``zk``, ``gates``, ``spawn_path``).  A test
module imports what it uses from here (``from .helpers import rows``), never from another
test module.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


# -- reading a table back ------------------------------------------------------------------------
def rows(q, cols: Sequence[str] = ("id", "v")) -> list[tuple]:
    """Sorted tuples of ``cols`` of a query, a table or a pandas DataFrame (read by lakesdk)."""
    df = q.to_pandas() if hasattr(q, "to_pandas") else q
    return sorted(zip(*(df[c] for c in cols)))


def hudi_read(path: str, *, as_of: str | None = None, start: str | None = None,
              end: str | None = None) -> list[dict]:
    """Every record of the table at ``path`` as the PyPI ``hudi`` reader reads it: a snapshot,
    as of an instant, or incremental from ``start`` (default: the beginning) to ``end``.
    Skips the test where the reader is not installed."""
    hudi = pytest.importorskip("hudi")
    opts = hudi.HudiReadOptions()
    if start is not None or end is not None:
        opts = opts.with_query_type(hudi.HudiQueryType.Incremental)
        opts = opts.with_start_timestamp(start or "19700101000000000")
        if end is not None:
            opts = opts.with_end_timestamp(end)
    elif as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    import pyarrow as pa
    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read(opts)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def canon(rows: Sequence[dict], cols: Sequence[str]) -> list[tuple]:
    """Rows (dicts, as ``to_pylist`` gives them) as sorted tuples of ``cols``: the form two
    readers' answers are compared in."""
    return sorted((tuple(r[c] for c in cols) for r in rows), key=repr)


def unpack_zips(src: Path, out: Path) -> Path:
    """Every zip under ``src`` unpacked to ``out/<its path without .zip>/`` (``__MACOSX`` junk
    removed): the layout of the hudi-rs test corpus, a table folder in each."""
    import zipfile
    for z in sorted(src.rglob("*.zip")):
        dest = out / z.relative_to(src).with_suffix("")
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(z) as zf:
            zf.extractall(dest)
        shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    return out


def zipped_table(root: Path, rel: str) -> str:
    """Path of the one table (the folder holding ``.hoodie/hoodie.properties``) of an unpacked zip."""
    (props,) = (root / rel).glob("*/.hoodie/hoodie.properties")
    return str(props.parent.parent)


def hudi_rows(path: str, as_of: str | None = None, *, cols: Sequence[str] = ("id", "v"),
              start: str | None = None, end: str | None = None) -> list[tuple]:
    """Sorted tuples of ``cols`` of the table at ``path`` read by the ``hudi`` reader (see :func:`hudi_read`)."""
    return sorted(tuple(r[c] for c in cols) for r in hudi_read(path, as_of=as_of, start=start, end=end))


def values(t, *, unique: bool = False) -> dict:
    """``{id: v}`` of the table's latest snapshot; ``unique``: first assert that no key is read twice."""
    df = t.read().to_pandas()
    if unique:
        assert df.id.is_unique, f"duplicate keys: {df.id[df.id.duplicated()].tolist()}"
    return dict(zip(df.id, df.v))


def data_files(t) -> list[str]:
    """Local paths of the table's base and log files (nothing under .hoodie)."""
    out = []
    for root, dirs, files in os.walk(t.path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out += [os.path.join(root, f) for f in files if f.endswith(".parquet") or ".log." in f]
    return out


# -- small batches -------------------------------------------------------------------------------
def batch(i: int, ids=(1, 2, 3)) -> pd.DataFrame:
    """Write number ``i``: columns id, p ('a' for odd ids, 'b' for even), ts = i, v = 'v<i>'."""
    return pd.DataFrame({"id": list(ids), "p": ["a" if k % 2 else "b" for k in ids], "ts": [i] * len(ids),
                         "v": [f"v{i}"] * len(ids)})


def city_batch(keys, value, city="sf") -> pd.DataFrame:
    """Columns id (``keys``), city and v (``value`` for every key)."""
    return pd.DataFrame({"id": list(keys), "city": [city] * len(keys), "v": [value] * len(keys)})


def rides(n: int, ts: int = 1, start: int = 0) -> pd.DataFrame:
    """``n`` rides r<start>.. with columns uuid, city (ams, bcn, cph in turn), ts and fare."""
    return pd.DataFrame({"uuid": [f"r{i}" for i in range(start, start + n)],
                         "city": [("ams", "bcn", "cph")[i % 3] for i in range(start, start + n)],
                         "ts": [ts] * n, "fare": [float(i) for i in range(start, start + n)]})


# -- widgets -------------------------------------------------------------------------------------
def click(figure, trace_index: int, point_index: int) -> None:
    """What the browser sends when a bar is clicked: a points-callback message."""
    figure._js2py_pointsCallback = {
        "event_type": "plotly_click",
        "points": {"xs": [0], "ys": [""], "point_indexes": [point_index], "trace_indexes": [trace_index]},
    }


# -- network -------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- held writes (the concurrency case table) ----------------------------------------------------
class Gate:
    """Where a held write waits: ``reached`` when its files are written, ``go`` to commit."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()
        self.instant = ""


GATES: dict[int, Gate] = {}
HEARTBEATS: dict[str, Any] = {}     # instant -> the Heartbeat started for it (while the fixture `gates` is in use)


def install_gates(monkeypatch) -> None:
    """Writes of a handle with a :class:`Gate` wait before their commit; heartbeats are recorded
    in HEARTBEATS.  The fixture ``gates`` (conftest.py) calls this and :func:`release_gates`."""
    from lakesdk.concurrency.heartbeat import Heartbeat
    from lakesdk.table.write import WriteOperation
    original = WriteOperation._finalize
    original_start = Heartbeat.start

    def gated(self, ctx, stats, partitions):
        gate = GATES.get(id(self.table))
        if gate is not None:
            gate.instant = ctx.instant
            gate.reached.set()
            assert gate.go.wait(60), "the case never let the write go"
        return original(self, ctx, stats, partitions)

    def start(self):
        HEARTBEATS[self.instant] = self
        return original_start(self)
    monkeypatch.setattr(WriteOperation, "_finalize", gated)
    monkeypatch.setattr(Heartbeat, "start", start)


def release_gates() -> None:
    for g in GATES.values():
        g.go.set()
    GATES.clear()
    HEARTBEATS.clear()


class Held:
    """A write running in its own thread, held before its commit until :meth:`finish`."""

    def __init__(self, handle: Any, write: Callable[[], Any]) -> None:
        self.gate = GATES[id(handle)] = Gate()
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(write,), daemon=True)
        self.thread.start()
        assert self.gate.reached.wait(60)
        if self.error is not None:
            raise self.error
        assert self.gate.instant, "the write was not held: is the fixture `gates` in use?"

    def _run(self, write: Callable[[], Any]) -> None:
        try:
            self.result = write()
        except BaseException as e:  # noqa: BLE001 - handed to finish()
            self.error = e
        finally:
            self.gate.reached.set()

    @property
    def instant(self) -> str:
        return self.gate.instant

    def release(self) -> "Held":
        self.gate.go.set()
        return self

    def finish(self) -> Any:
        self.release()
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.result


def handle(t, **kw):
    """Another handle on the table ``t``, with its options."""
    import lakesdk as lk
    return lk.open_table(t.path, options=t.options, **kw)


# -- writer processes ----------------------------------------------------------------------------
def stress(path: str, lock: str, *, script: str, writers=4, commits=25, lock_options=None, env=None, args=()):
    """Run ``writers`` processes of ``script`` (argv: path, writer id, lock, commits, lock
    options as JSON, then ``args``); each prints ``RESULT`` and its commits as JSON."""
    procs = [subprocess.Popen([sys.executable, "-c", script, path, str(w), lock, str(commits),
                               json.dumps(lock_options or {}), *map(str, args)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or os.environ.copy())
             for w in range(writers)]
    results = []
    for p in procs:
        results += result_of(p)
    return results


def result_of(p: subprocess.Popen, timeout: float = 600) -> Any:
    """What a script process printed after ``RESULT`` (JSON), once it exited successfully."""
    out, err = p.communicate(timeout=timeout)
    line = [x for x in out.splitlines() if x.startswith("RESULT")]
    assert p.returncode == 0 and line, err[-3000:]
    return json.loads(line[0][6:])


def check_no_leftovers(t, completed: set[str]) -> None:
    """No markers or heartbeats are left, and every data file belongs to a commit in ``completed``."""
    from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file
    for f in t.storage.find(""):
        name = f.path.rsplit("/", 1)[-1]
        if f.path.startswith(".hoodie/.temp/") or f.path.startswith(".hoodie/.heartbeat/"):
            raise AssertionError(f"left behind: {f.path}")   # markers or a heartbeat of a finished write
        if f.path.startswith(".hoodie") or name == ".hoodie_partition_metadata":
            continue
        inst = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        assert inst in completed, f"orphan file {f.path}"


# -- a real ZooKeeper server ---------------------------------------------------------------------
ZK_JAR = Path("/usr/share/java/zookeeper.jar")
LOG_JARS = [Path("/usr/share/java/slf4j-simple.jar")]      # optional: server log lines instead of NOP


def four_letter(port: int, word: bytes) -> bytes:
    """A ZooKeeper four-letter command (``srvr``, ``ruok``) and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
        s.sendall(word)
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                return b"".join(chunks)
            chunks.append(b)


class ZooKeeperServer:
    """One standalone ZooKeeper server in the foreground (a child process of the test run)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.port = free_port()
        self.connect = f"127.0.0.1:{self.port}"
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        self.cfg = workdir / "zoo.cfg"
        self.cfg.write_text("\n".join([
            "tickTime=200",                       # session timeouts are multiples of ticks: 0.4 s .. 60 s
            f"dataDir={workdir / 'data'}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "minSessionTimeout=400",
            "maxSessionTimeout=60000",
            "",
        ]))
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "zookeeper.log"

    def start(self, timeout: float = 30.0) -> None:
        cp = ":".join(str(p) for p in [ZK_JAR, *LOG_JARS] if p.exists())
        cmd = [shutil.which("java") or "java", "-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true", "-cp", cp,
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.cfg)]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if b"Mode: standalone" in four_letter(self.port, b"srvr"):
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"ZooKeeper did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
