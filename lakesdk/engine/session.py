"""Spark session bootstrap: an embedded local Spark by default, or the session/master/
Spark Connect URL the user gives."""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from lakesdk.exceptions import MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["get_spark", "local_spark_conf", "active_session", "spark_is_local", "session_time_zone", "on_session",
           "announce_session"]

_Session = TypeVar("_Session")   # a classic or Spark Connect session, returned as given

_LOCK = threading.Lock()
_HOOKS: list[Callable[[Any], None]] = []


def on_session(hook: Callable[[Any], None]) -> None:
    """Call ``hook(session)`` with every session :func:`get_spark` returns (the layers above
    the engine register what a session needs, as the ``lakesdk`` data source); ``hook``
    returns quickly for a session it has seen."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def announce_session(spark: _Session) -> _Session:
    """Run the :func:`on_session` hooks for ``spark``; returns it."""
    for hook in list(_HOOKS):
        hook(spark)
    return spark


_announced = announce_session


def local_spark_conf(master: str) -> dict[str, str]:
    """Settings lakesdk applies to a session it creates itself."""
    cores = os.cpu_count() or 2
    conf = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(max(2, min(cores * 2, 200))),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        "spark.python.worker.reuse": "true",
    }
    if master.startswith("local"):
        conf.update({
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.showConsoleProgress": "false",
        })
    return conf


def get_spark(spark: Any = None, *, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Return a SparkSession.

    Order: the ``spark`` given; a Spark Connect URL (``sc://host:port``, from ``master`` or
    ``LAKESDK_SPARK_REMOTE``); the active session; else a new session on ``master`` (or
    ``LAKESDK_SPARK_MASTER``, default ``local[*]``).
    """
    if spark is not None:
        return _announced(spark)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a core dependency
        raise MissingDependencyError("pyspark", "", "Running Spark jobs") from exc
    remote = master if master and master.startswith("sc://") else os.environ.get("LAKESDK_SPARK_REMOTE")
    with _LOCK:
        if remote:
            return _announced(SparkSession.builder.remote(remote).getOrCreate())
        active = SparkSession.getActiveSession()
        if active is not None and master is None:
            return _announced(active)
        master = master or os.environ.get("LAKESDK_SPARK_MASTER", "local[*]")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = SparkSession.builder.master(master).appName("lakesdk")
        for k, v in {**local_spark_conf(master), **(conf or {})}.items():
            b = b.config(k, v)
        s = b.getOrCreate()
        s.sparkContext.setLogLevel("ERROR")
    return _announced(s)


def active_session(*, if_imported: bool = False) -> SparkSession | None:
    """The active SparkSession, or None.  ``if_imported``: None without importing pyspark
    when nothing imported it yet (no session can be active then)."""
    if if_imported and "pyspark.sql" not in sys.modules:
        return None
    try:
        from pyspark.sql import SparkSession
        return SparkSession.getActiveSession()
    except Exception:   # noqa: BLE001 - no usable session
        if if_imported:
            return None
        raise


def spark_is_local(spark: Any = None) -> bool:
    """True when Spark runs (or would start) in this process with a local master: the
    session given, else the active one, else what :func:`get_spark` would start."""
    if spark is None:
        spark = active_session()
        if spark is None:
            return not os.environ.get("LAKESDK_SPARK_REMOTE") and \
                os.environ.get("LAKESDK_SPARK_MASTER", "local").startswith("local")
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - Spark Connect: the cluster is elsewhere
        return False


def session_time_zone(spark: Any = None) -> str:
    """Spark's session time zone (of ``spark`` or the active session), else UTC."""
    if spark is None:
        spark = active_session(if_imported=True)
    if spark is not None:
        try:
            return str(spark.conf.get("spark.sql.session.timeZone") or "UTC")
        except Exception:   # noqa: BLE001
            return "UTC"
    return "UTC"
