"""Spark session bootstrap: an embedded local Spark by default, or the session/master/
Spark Connect URL the user gives."""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from lakesdk.exceptions import MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["get_spark", "is_connect", "local_spark_conf", "spark_is_quiet", "quiet_java_options", "active_session", "spark_is_local",
           "connect_server_here", "session_time_zone", "on_session", "announce_session"]

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
            # a local Spark Connect server answers this machine only
            "spark.connect.grpc.binding.address": "127.0.0.1",
        })
    return conf


# the driver's logging when lakesdk starts its JVM: errors only (see the file)
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
# where the user's own options for the driver JVM can name a log4j configuration
_JAVA_OPTION_VARIABLES = ("PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
                          "_JAVA_OPTIONS")
# the files log4j 2 configures itself from when they are on the class path (Spark's conf folder is)
_LOG4J2_FILES = tuple(f"{stem}.{ext}" for stem in ("log4j2", "log4j2-test")
                      for ext in ("properties", "xml", "yaml", "yml", "json", "jsn")) + ("log4j2.component.properties",)


def _spark_conf_dir() -> Path:
    """The folder spark-submit reads spark-defaults.conf from and puts on the driver's class path."""
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"]) / "conf"
    import pyspark
    return Path(pyspark.__file__).parent / "conf"


def _spark_defaults(conf_dir: Path) -> dict[str, str]:
    """The settings of ``conf_dir``/spark-defaults.conf (a properties file: ``key value`` or
    ``key=value`` lines)."""
    try:
        text = (conf_dir / "spark-defaults.conf").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^[ \t]*([^\s=:#!]+)[ \t]*[=: \t][ \t]*(.*)$",
                                                                  text, re.M)}


def spark_is_quiet(quiet: bool | None = None) -> bool:
    """Whether :func:`get_spark` quiets the logging of a Spark driver it starts: ``quiet`` if
    given, else ``LAKESDK_SPARK_QUIET`` (``0``, ``false``, ``no`` or ``off`` say no), else yes."""
    if quiet is not None:
        return quiet
    return os.environ.get("LAKESDK_SPARK_QUIET", "1").strip().lower() not in ("0", "false", "no", "off")


def quiet_java_options(conf: dict[str, str]) -> str | None:
    """The driver's ``spark.driver.extraJavaOptions`` for a session of settings ``conf``, with
    lakesdk's log4j 2 configuration added after the options ``conf`` or spark-defaults.conf
    give; None when the user configures log4j: ``log4j`` named in the driver's Java options
    (``conf``'s, spark-defaults.conf's, ``PYSPARK_SUBMIT_ARGS`` or the JVM's option
    variables), or a log4j 2 file in Spark's conf folder (which is on the driver's class path)."""
    conf_dir = _spark_conf_dir()
    defaults = _spark_defaults(conf_dir)
    options = {k: conf.get(k, defaults.get(k)) or "" for k in (_DEFAULT_JAVA_OPTIONS, _JAVA_OPTIONS)}
    mentioned = " ".join([*options.values(), *(os.environ.get(k, "") for k in _JAVA_OPTION_VARIABLES)])
    if "log4j" in mentioned.lower() or any((conf_dir / f).is_file() for f in _LOG4J2_FILES):
        return None
    if not LOG4J2_PROPERTIES.is_file():   # pragma: no cover - the file is package data
        return None
    # a file: URI holds no space, quote or backslash, which spark-submit would split or unescape
    option = f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.resolve().as_uri()}"
    return f"{options[_JAVA_OPTIONS]} {option}".lstrip()


def get_spark(spark: Any = None, *, master: str | None = None, remote: str | None = None,
              conf: dict[str, str] | None = None, quiet: bool | None = None) -> SparkSession:
    """Return a SparkSession.

    Order: the ``spark`` given; a Spark Connect session (``remote``, else a ``sc://`` URL as
    ``master``, else ``LAKESDK_SPARK_REMOTE``); the active session; else a new session on
    ``master`` (or ``LAKESDK_SPARK_MASTER``, default ``local[*]``).

    ``remote`` is a Spark Connect server's URL (``sc://host:15002``), or ``local`` /
    ``local[N]``: a Connect server that pyspark starts in this process (a local master),
    with the settings and logging of a local session lakesdk starts, ``conf`` included.

    The Python workers of a session this call starts run this process's interpreter
    (``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` default to ``sys.executable``), so
    they import the lakesdk and pyarrow this process imports.  A remote server's workers
    run the Python its own environment names.

    ``quiet`` (default: ``LAKESDK_SPARK_QUIET``, else True): a Spark driver this call starts
    logs errors only (``lakesdk/engine/log4j2.properties``), so that starting it prints no log
    lines; a log4j configuration of the user's own (see :func:`quiet_java_options`) is kept,
    and so is the logging of a running session.
    """
    if spark is not None:
        return _announced(spark)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a core dependency
        raise MissingDependencyError("pyspark", "", "Running Spark jobs") from exc
    if remote is None:
        remote = master if master and master.startswith("sc://") else os.environ.get("LAKESDK_SPARK_REMOTE") or None
    with _LOCK:
        if remote and remote.startswith("sc://"):
            b = SparkSession.builder.remote(remote)
            for k, v in (conf or {}).items():
                b = b.config(k, v)
            return _announced(b.getOrCreate())
        if not remote:
            _forget_inherited_connect_mode()
            active = SparkSession.getActiveSession()
            if active is not None and master is None:
                return _announced(active)
        master = remote or master or os.environ.get("LAKESDK_SPARK_MASTER", "local[*]")
        # the workers run this interpreter unless the user names one: a Spark Connect server
        # reads these from its JVM's environment, which a local server inherits from here
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark import SparkContext
        settings = {**local_spark_conf(master), **(conf or {})}
        java_options = None   # set when this call starts a driver whose logging lakesdk quiets
        if spark_is_quiet(quiet) and SparkContext._active_spark_context is None:
            java_options = quiet_java_options(settings)
        if java_options is not None and SparkContext._gateway is None:   # the JVM starts now
            settings[_JAVA_OPTIONS] = java_options
        b = SparkSession.builder.remote(master) if remote else SparkSession.builder.master(master).appName("lakesdk")
        for k, v in settings.items():
            b = b.config(k, v)
        with warnings.catch_warnings():
            # a local Connect server starts with every setting, then pyspark sets them once more
            # on the session and warns for each one a running session cannot change
            warnings.filterwarnings("ignore", message=r"Failed to set spark\.", category=UserWarning)
            s = b.getOrCreate()
        if java_options is not None:   # also for a JVM that ran already (a stopped session's)
            _quiet_running_driver(s)
    return _announced(s)


def _forget_inherited_connect_mode() -> None:
    """pyspark marks a process that holds a Spark Connect session in its environment
    (``SPARK_CONNECT_MODE_ENABLED``, and ``SPARK_LOCAL_REMOTE`` for a local server), and the
    processes it starts inherit the marks: a lakesdk command run from a notebook on Spark
    Connect then failed to start its own session (``CONNECT_URL_NOT_SET``).  Marks that no
    session of this process set are dropped; ``SPARK_REMOTE``, the user's choice of Connect,
    is kept."""
    if "SPARK_CONNECT_MODE_ENABLED" not in os.environ or os.environ.get("SPARK_REMOTE"):
        return
    from pyspark import SparkContext
    if SparkContext._active_spark_context is not None:   # a local Connect server runs here
        return
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None and (connect.SparkSession._default_session is not None
                                or getattr(connect.SparkSession._active_session, "session", None) is not None):
        return
    for k in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
        os.environ.pop(k, None)


def _quiet_running_driver(spark: Any) -> None:
    """Errors only from the driver of ``spark`` (for a local Spark Connect server: the
    driver pyspark started in this process)."""
    if is_connect(spark):
        from pyspark import SparkContext
        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.setLogLevel("ERROR")
        return
    spark.sparkContext.setLogLevel("ERROR")


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (whose client has no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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
    session given, else the active one, else what :func:`get_spark` would start.  Without a
    session given, pyspark is not imported to find out (a process that never imported it has
    no active session)."""
    if spark is None:
        spark = active_session(if_imported=True)
        if spark is None:
            return not os.environ.get("LAKESDK_SPARK_REMOTE") and \
                os.environ.get("LAKESDK_SPARK_MASTER", "local").startswith("local")
    if is_connect(spark):
        return connect_server_here(spark)
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - no usable context
        return False


def connect_server_here(spark: Any) -> bool:
    """True for a Spark Connect session served by the local server pyspark started in this
    process (``get_spark(remote="local[*]")``): its driver runs here with a local master, as a
    local classic session's does, and its tasks reach this process.  A session of a server
    elsewhere (``sc://host:port``, on this machine or not) is not."""
    if not is_connect(spark) or not os.environ.get("SPARK_LOCAL_REMOTE"):
        return False
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context   # the driver of the local server (pyspark keeps it)
    try:
        if sc is None or not str(sc.master).startswith("local"):
            return False
        host = str(spark.client.host).strip("[]")
        port = str(getattr(spark.client._builder, "_port", ""))
        served = sc.getConf().get("spark.connect.grpc.binding.port", "15002")
    except Exception:  # noqa: BLE001 - a client or context of another shape: not known to be here
        return False
    # (port 0: the server took a free port, which the client asked the driver for)
    return host in ("localhost", "127.0.0.1", "::1") and served in (port, "0")


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
