"""A throwaway Kafka-protocol broker for tests, notebooks and benchmarks.

:class:`LocalBroker` runs ``noida-db start --only kafka`` (``pip install noida-db``) on a
free port of 127.0.0.1 with a temporary data directory, waits until it answers a metadata
request, and stops it again::

    from lakesdk.testing.kafka import LocalBroker

    with LocalBroker() as broker:
        sink = KafkaSink(table.path, "orders", broker.bootstrap).start()
        ...

Any Kafka-compatible broker works with the sink; this one only needs a pip install.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lakesdk.exceptions import BrokerNotFoundError, BrokerStartError

__all__ = ["LocalBroker", "BrokerNotFoundError", "BrokerStartError", "find_broker_executable"]

EXECUTABLE = "noida-db"


def find_broker_executable() -> str:
    """The path of ``noida-db``: next to ``sys.executable`` first (a virtualenv's ``bin``), then PATH."""
    beside = Path(sys.executable).with_name(EXECUTABLE)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(EXECUTABLE)
    if found:
        return found
    raise BrokerNotFoundError(searched=[str(beside)], package=EXECUTABLE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalBroker:
    """A local Kafka-protocol broker process (noida-db) on 127.0.0.1.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`.  ``bootstrap`` is
    the ``host:port`` to give to clients.  The data directory is temporary (removed on stop)
    unless ``data_dir`` is given."""

    def __init__(self, *, port: int | None = None, data_dir: str | os.PathLike[str] | None = None,
                 executable: str | None = None, startup_timeout: float = 60.0) -> None:
        self.port = port
        self.executable = executable
        self.startup_timeout = startup_timeout
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._tmp: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    # -- state ---------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` (the port is chosen at :meth:`start` when not given)."""
        if self.port is None:
            raise BrokerStartError("the broker has no port yet: call start() first")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def data_dir(self) -> Path | None:
        return self._data_dir

    @property
    def log_path(self) -> Path | None:
        return None if self._data_dir is None else self._data_dir / "broker.log"

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self.port}" if self.port is not None else "no port yet"
        state = "running" if self.running else "stopped"
        pid = f" pid={self._proc.pid}" if self.running and self._proc is not None else ""
        return f"<LocalBroker {where} {state}{pid}>"

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> "LocalBroker":
        """Start the broker and wait until it answers a metadata request; idempotent."""
        if self.running:
            return self
        exe = self.executable or find_broker_executable()
        if self.port is None:
            self.port = _free_port()
        if self._data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="lakesdk-broker-")
            self._data_dir = Path(self._tmp)
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self._data_dir / "broker.log", "ab")
        self._proc = subprocess.Popen(
            [exe, "start", "--only", "kafka", "--kafka-port", str(self.port), "--data-dir", str(self._data_dir / "data")],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrokerStartError(f"the broker exited with code {self._proc.returncode}: {self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", int(self.port or 0)), timeout=1):
                    pass
                AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=3)
                return
            except Exception as e:  # noqa: BLE001 - not up yet
                last = e
                time.sleep(0.2)
        raise BrokerStartError(f"the broker did not answer on {self.bootstrap} within {self.startup_timeout}s "
                               f"({last}): {self._tail()}")

    def _tail(self) -> str:
        p = self.log_path
        try:
            return p.read_text(errors="replace")[-2000:] if p is not None else ""
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``) and remove a temporary data dir."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
            self._data_dir = None

    # -- helpers -------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, *, timeout: float = 15.0) -> str:
        """Create a topic and wait until its metadata shows every partition; returns the name."""
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=5)
            if name in md.topics and len(md.topics[name].partitions) == partitions:
                return name
            time.sleep(0.1)
        raise BrokerStartError(f"topic {name!r} did not show {partitions} partitions within {timeout}s")

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
