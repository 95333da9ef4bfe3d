"""The Spark driver lakesdk starts logs errors only, so that starting Spark prints nothing into a
notebook cell; a log4j configuration of the user's own is kept. Each Spark test starts its own
driver in a subprocess (a process has one JVM, and the test run's is started already)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakesdk.engine.session import LOG4J2_PROPERTIES, quiet_java_options, spark_is_quiet

from ..helpers import FAST_JVM

ROOT = Path(__file__).resolve().parents[2]
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# a log4j line of Spark's layouts ("26/01/31 12:00:00 WARN NativeCodeLoader: ..."), and what Spark
# prints itself when it configures logging
LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN) ", re.M)
SPARK_NOTICES = ("Using Spark's default log4j profile", "Setting default log level", "To adjust logging level")

SCRIPT = textwrap.dedent("""
    import json, sys
    from lakesdk.engine.session import get_spark
    kwargs = json.loads(sys.argv[1])
    if kwargs.pop("existing", False):   # the user's own session, started before
        from pyspark.sql import SparkSession
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark = get_spark(master="local[1]", **kwargs)
    rows = spark.range(1000).selectExpr("id % 3 AS k").groupBy("k").count().orderBy("k").collect()
    try:
        spark.sql("SELECT assert_true(false)").collect()
        failed = False
    except Exception:
        failed = True
    jvm = spark.sparkContext._jvm
    print(json.dumps({
        "counts": [r["count"] for r in rows], "failed": failed,
        "config": jvm.java.lang.System.getProperty("log4j2.configurationFile"),
        "marker": jvm.java.lang.System.getProperty("lakesdk.test.marker"),
        "root": jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString()}))
""")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without the user's Spark and JVM settings; Spark's conf folder an empty one."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
                        "_JAVA_OPTIONS", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
           and not k.startswith("LAKESDK_SPARK")}
    (tmp_path / "conf").mkdir(exist_ok=True)
    env.update({"SPARK_CONF_DIR": str(tmp_path / "conf"), "PYTHONPATH": str(ROOT)}, **extra)
    return env


def _start(tmp_path: Path, env: dict[str, str], **kwargs: object) -> tuple[dict, str]:
    """Start a session as lakesdk does, run a job and a failing query; (what the driver says, stderr)."""
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(kwargs)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


@pytest.mark.spark
def test_a_started_spark_logs_errors_only(tmp_path):
    conf = {JAVA_OPTIONS: f"{FAST_JVM} -Dlakesdk.test.marker=kept"}
    said, stderr = _start(tmp_path, _env(tmp_path), conf=conf)
    assert said["counts"] == [334, 333, 333] and said["failed"]
    assert said["config"] == LOG4J2_PROPERTIES.resolve().as_uri()   # the driver JVM read lakesdk's file
    assert said["marker"] == "kept"                                  # the user's options are kept
    assert said["root"] == "ERROR"
    assert not LOG_LINE.search(stderr), stderr
    assert not [n for n in SPARK_NOTICES if n in stderr], stderr
    # an error still comes out: the failed query's task
    assert re.search(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d ERROR ", stderr, re.M), stderr


@pytest.mark.spark
def test_the_users_log4j_configuration_is_kept(tmp_path):
    config = tmp_path / "my log4j2.properties"
    config.write_text(textwrap.dedent("""
        rootLogger.level = info
        rootLogger.appenderRef.stderr.ref = console
        appender.console.type = Console
        appender.console.name = console
        appender.console.target = SYSTEM_ERR
        appender.console.layout.type = PatternLayout
        appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
        # else Spark shows a PySpark driver's warnings and errors only
        logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
        logger.gateway.level = info
    """))
    conf = {JAVA_OPTIONS: f'{FAST_JVM} "-Dlog4j2.configurationFile={config}"'}
    said, stderr = _start(tmp_path, _env(tmp_path), conf=conf)
    assert said["config"] == str(config)
    assert said["root"] == "INFO"          # lakesdk did not lower it to errors
    assert re.search(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO SparkContext: Running Spark version", stderr, re.M), stderr


@pytest.mark.spark
def test_quiet_can_be_turned_off(tmp_path):
    env = _env(tmp_path, LAKESDK_SPARK_QUIET="0", SPARK_SUBMIT_OPTS=FAST_JVM)
    said, stderr = _start(tmp_path, env)
    assert said["config"] is None and said["root"] != "ERROR"
    assert "Using Spark's default log4j profile" in stderr    # Spark's own defaults


@pytest.mark.spark
def test_a_running_session_keeps_its_logging(tmp_path):
    said, stderr = _start(tmp_path, _env(tmp_path, SPARK_SUBMIT_OPTS=FAST_JVM), existing=True)
    assert said["config"] is None and said["root"] != "ERROR"
    assert "Using Spark's default log4j profile" in stderr


def test_quiet_follows_the_argument_then_the_variable(monkeypatch):
    monkeypatch.delenv("LAKESDK_SPARK_QUIET", raising=False)
    assert spark_is_quiet() and not spark_is_quiet(False)
    for off in ("0", "false", "No", "off"):
        monkeypatch.setenv("LAKESDK_SPARK_QUIET", off)
        assert not spark_is_quiet() and spark_is_quiet(True)
    monkeypatch.setenv("LAKESDK_SPARK_QUIET", "1")
    assert spark_is_quiet()


@pytest.fixture
def conf_dir(tmp_path, monkeypatch):
    for k in ("PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    return tmp_path


def test_lakesdks_configuration_is_appended_to_the_users_options(conf_dir):
    ours = f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.resolve().as_uri()}"
    assert quiet_java_options({}) == ours
    assert quiet_java_options({JAVA_OPTIONS: "-Xss4m -Da=1"}) == f"-Xss4m -Da=1 {ours}"
    # spark-defaults.conf's options, which the session's would replace, are kept
    (conf_dir / "spark-defaults.conf").write_text("# defaults\nspark.driver.memory 2g\n"
                                                  f"{JAVA_OPTIONS}   -Xss8m -Db=2\n")
    assert quiet_java_options({}) == f"-Xss8m -Db=2 {ours}"
    assert quiet_java_options({JAVA_OPTIONS: "-Da=1"}) == f"-Da=1 {ours}"
    (conf_dir / "log4j2.properties.template").write_text("rootLogger.level = info\n")   # no configuration
    assert quiet_java_options({}) == f"-Xss8m -Db=2 {ours}"


@pytest.mark.parametrize("where", ["options", "default options", "defaults", "PYSPARK_SUBMIT_ARGS",
                                   "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "file", "xml file"])
def test_a_log4j_configuration_of_the_users_own_is_left_alone(conf_dir, monkeypatch, where):
    conf = {}
    if where == "options":
        conf = {JAVA_OPTIONS: "-Xss4m -Dlog4j.configurationFile=/etc/mine.xml"}
    elif where == "default options":
        conf = {"spark.driver.defaultJavaOptions": "-Dlog4j2.configurationFile=/etc/mine.xml"}
    elif where == "defaults":
        (conf_dir / "spark-defaults.conf").write_text(f"{JAVA_OPTIONS}=-Dlog4j2.level=DEBUG\n")
    elif where == "PYSPARK_SUBMIT_ARGS":
        monkeypatch.setenv(where, "--driver-java-options '-Dlog4j2.configurationFile=/etc/mine.xml' pyspark-shell")
    elif where in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS"):
        monkeypatch.setenv(where, "-Dlog4j2.configurationFile=/etc/mine.xml")
    else:
        (conf_dir / ("log4j2.properties" if where == "file" else "log4j2.xml")).write_text("")
    assert quiet_java_options(conf) is None
