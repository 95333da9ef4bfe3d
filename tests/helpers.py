"""Helpers shared by several test modules: plain functions and classes, no tests.

Fixtures built on them live in conftest.py (``zk``, ``broker``, ``spark_cluster``, ``gates``,
``spawn_path``).  A test module imports what it uses from here (``from .helpers import rows``),
never from another test module.
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
#: the ``spark`` fixture is a Spark Connect session (``LAKESDK_TEST_SPARK=connect``, conftest.py)
ON_CONNECT = os.environ.get("LAKESDK_TEST_SPARK") == "connect"
#: the start of the reason of a test skipped on Connect (tests/spark/test_connect.py counts them)
CLASSIC_ONLY = "classic session only"


def classic_only(why: str):
    """Skip a test on Connect that checks what a classic session alone has (``why``)."""
    return pytest.mark.skipif(ON_CONNECT, reason=f"{CLASSIC_ONLY}: {why}")


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


# -- a Kafka-protocol broker (the fixture ``broker``) --------------------------------------------
def make_topic(bootstrap: str, partitions: int) -> str:
    """A new topic with a unique name and ``partitions`` partitions; returns once it is listed."""
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"t{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    for _ in range(50):
        md = admin.list_topics(timeout=5)
        if name in md.topics and len(md.topics[name].partitions) == partitions:
            break
        time.sleep(0.1)
    return name


def produce(bootstrap: str, topic: str, ids, *, encode=None) -> None:
    """One record per id (key: the id), JSON ``{id, ts: 1, v: r<id>, part: p<id % 2>}`` unless ``encode``."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    enc = encode or (lambda i: json.dumps({"id": i, "ts": 1, "v": f"r{i}", "part": f"p{i % 2}"}).encode())
    for n, i in enumerate(ids):
        p.produce(topic, key=str(i).encode(), value=enc(i))
        if n % 1000 == 0:
            p.poll(0)
    p.flush(30)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The high watermark of every partition of ``topic``."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}"})
    try:
        n = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(n)}
    finally:
        c.close()


def group_offsets(bootstrap: str, group: str, topic: str, n: int) -> dict[int, int]:
    """The offsets consumer group ``group`` committed for partitions 0 .. n-1 of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)}
    finally:
        c.close()


def topic_records(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes]:
    """Every record of ``topic`` up to its end offsets now: (partition, offset) -> value."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition
    ends = end_offsets(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    out: dict[tuple[int, int], bytes] = {}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + 60
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=1.0) or []:
                if not m.error() and m.offset() < ends[m.partition()]:
                    out[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    assert len(out) == sum(ends.values()), f"read {len(out)} of the {sum(ends.values())} records of {topic}"
    return out


# -- a Spark standalone cluster (the fixture ``spark_cluster``) ----------------------------------
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def spark_home() -> str:
    import pyspark
    return os.path.dirname(pyspark.__file__)


def java_available() -> bool:
    jh = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (jh and os.path.exists(os.path.join(jh, "bin", "java"))))


def spark_env() -> dict[str, str]:
    """The environment of the cluster's processes and of the drivers connecting to it."""
    env = dict(os.environ)
    for k in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "LAKESDK_SPARK_REMOTE", "LAKESDK_SPARK_MASTER", "SPARK_REMOTE"):
        env.pop(k, None)
    env.update({
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,          # the executors' Python workers
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
        # no REST submission server: it would bind the fixed port 6066
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    })
    return env


def start_process(cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """A process in a session of its own (so :func:`stop_process` ends its children too), output to ``log``."""
    f = open(log, "wb")  # noqa: SIM115 - owned by the process, closed in stop_process
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         cwd=str(cwd), start_new_session=True)
    p._lk_log = f  # type: ignore[attr-defined]
    return p


def stop_process(p: subprocess.Popen, grace: float = 10.0) -> None:
    """Terminate the process and its process group (the worker's executors, their Python workers)."""
    import signal
    try:
        pgid = os.getpgid(p.pid)
    except ProcessLookupError:
        pgid = None
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            if pgid is not None:
                os.killpg(pgid, sig)
            else:
                p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    if pgid is not None:  # leftovers of the group (children outliving the leader)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    log = getattr(p, "_lk_log", None)
    if log is not None:
        log.close()


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def wait_for(what: str, check: Callable[[], Any], *, timeout: float,
             procs: dict[str, tuple[subprocess.Popen, Path]]) -> Any:
    """Poll ``check`` until it returns something true; fails when one of ``procs`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        for name, (p, log) in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode} while waiting for {what}:\n{tail(log)}")
        try:
            v = check()
        except Exception:  # noqa: BLE001 - not up yet
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            logs = "\n\n".join(f"--- {n} ---\n{tail(log)}" for n, (_, log) in procs.items())
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{logs}")
        time.sleep(0.2)


def http_json(url: str) -> dict[str, Any]:
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode("utf-8"))


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def spark_cluster_processes(d: Path, *, cores: int, memory: str):
    """Start a standalone master and one worker (``cores``, ``memory``) from pyspark's own
    distribution; yields the cluster's description and stops both afterwards (a generator
    for the fixture ``spark_cluster``)."""
    import re
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    if not java_available():
        pytest.skip("java is not available")
    if not os.path.exists(spark_class):
        pytest.skip(f"{spark_class} not found")
    env = spark_env()
    port = free_port()
    master_log, worker_log = d / "master.log", d / "worker.log"
    procs: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        master = start_process([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                "--port", str(port), "--webui-port", "0"], master_log, env, d)
        procs["master"] = (master, master_log)

        def master_ui() -> int | None:
            text = master_log.read_text(errors="replace")
            m = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
            return int(m.group(1)) if m and "ALIVE" in text else None
        ui_port = wait_for("the master", master_ui, timeout=60, procs=procs)
        url = f"spark://127.0.0.1:{port}"
        json_url = f"http://127.0.0.1:{ui_port}/json/"
        worker = start_process([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                "--cores", str(cores), "--memory", memory, "--webui-port", "0",
                                "--work-dir", str(d / "work")], worker_log, env, d)
        procs["worker"] = (worker, worker_log)
        wait_for("the worker to register", lambda: http_json(json_url).get("aliveworkers", 0) >= 1,
                 timeout=60, procs=procs)
        yield {"url": url, "json_url": json_url, "dir": d, "work_dir": d / "work", "env": env}
    finally:
        for p, _ in reversed(list(procs.values())):
            stop_process(p)
