"""Shared fixtures: one local SparkSession per test run, table folders, conformance tables, a
ZooKeeper server, a Kafka-protocol broker, a Spark standalone cluster, held writes.  Plain helper functions are in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LAKESDK_SHARED", ROOT.parent / "shared"))
CONFORMANCE = SHARED / "conformance"

#: ``connect``: the session fixture is a Spark Connect session on a local server that
#: pyspark starts in this process, and only the tests on that session run
#: (tests/spark/test_connect.py runs a set of modules so)
SPARK_MODE = os.environ.get("LAKESDK_TEST_SPARK", "classic")

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if SPARK_MODE != "connect":   # on Connect, lakesdk finds the workers' Python itself (checked there)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": "2g",   # one driver serves the whole run (Spark's default is 1g)
}


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of this test run: a classic session, or with
    ``LAKESDK_TEST_SPARK=connect`` a Spark Connect session (a local server in this process)."""
    from lakesdk.engine.session import get_spark
    if SPARK_MODE == "connect":
        s = get_spark(remote="local[2]", conf=TEST_SPARK_CONF)
    else:
        s = get_spark(master="local[2]", conf=TEST_SPARK_CONF)
    yield s


@pytest.fixture
def lake(tmp_path, spark):
    """A lake with the test run's SparkSession and the default options."""
    import lakesdk as lk
    return lk.Lake(str(tmp_path / "lake"), spark=spark)


@pytest.fixture
def local_lake(tmp_path):
    """A lake on the local engine (Arrow tasks on the driver), without Spark."""
    import lakesdk as lk
    return lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))


@pytest.fixture(params=["local", "spark"])
def engine(request) -> str:
    """Each engine in turn: ``"local"`` (Arrow tasks on the driver) and ``"spark"`` (Spark jobs)."""
    return request.param


@pytest.fixture
def engine_spark(engine, request):
    """The SparkSession the Spark engine runs on; None for the local engine, which needs none."""
    return request.getfixturevalue("spark") if engine == "spark" else None


@pytest.fixture
def engine_lake(engine, tmp_path, spark):
    """A lake on each engine in turn (``engine``), with the run's SparkSession for reads to Spark."""
    import lakesdk as lk
    return lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine=engine))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The Hudi-written tables of tests/data and ../shared, unpacked once for a module
    (``corpus_model.unpack_corpus``)."""
    from .corpus_model import unpack_corpus
    return unpack_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def conformance_dir(tmp_path_factory) -> Path:
    """Every conformance zip unpacked once: <dir>/<relative zip path without .zip>/<table>/."""
    tables = CONFORMANCE / "tables"
    if not tables.is_dir():
        pytest.skip(f"conformance corpus not found at {tables}")
    out = tmp_path_factory.mktemp("conformance")
    for z in sorted(tables.rglob("*.zip")):
        dest = out / z.relative_to(tables).with_suffix("")
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(z) as zf:
            zf.extractall(dest)
        shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def zk(tmp_path_factory):
    """A real standalone ZooKeeper server for the tests of one module (skips where it is not installed)."""
    from .helpers import ZK_JAR, ZooKeeperServer
    if shutil.which("java") is None or not ZK_JAR.exists():
        pytest.skip("ZooKeeper is not installed: run scripts/system-deps.sh (Debian packages 'zookeeper' and a JRE)")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def broker():
    """A Kafka-protocol broker on 127.0.0.1 (noida-db, pip install noida-db); yields its bootstrap address."""
    pytest.importorskip("confluent_kafka")
    from lakesdk.testing.kafka import BrokerNotFoundError, LocalBroker
    try:
        b = LocalBroker().start()
    except BrokerNotFoundError as e:
        pytest.skip(str(e))
    yield b.bootstrap
    b.stop()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """A Spark standalone master and one worker (2 cores, 2 GiB) on 127.0.0.1, started from
    pyspark's own distribution for the tests of one module.  Drivers connect to ``url`` with
    the environment ``env``; give each application ``spark.cores.max=1`` so that two of them
    get an executor each."""
    from .helpers import spark_cluster_processes
    yield from spark_cluster_processes(tmp_path_factory.mktemp("spark-cluster"), cores=2, memory="2g")


@pytest.fixture
def gates(monkeypatch):
    """Writes of a handle given to ``helpers.Held`` are held before their commit until it lets them go;
    a module opts in with ``pytestmark = pytest.mark.usefixtures("gates")``."""
    from .helpers import install_gates, release_gates
    install_gates(monkeypatch)
    yield
    release_gates()


@pytest.fixture
def spawn_path(monkeypatch):
    """Spawned children import test modules by name: make sure the repository root is importable."""
    monkeypatch.syspath_prepend(str(ROOT))


def conformance_table(root: Path, rel: str) -> str:
    """Path of the table inside an unpacked conformance zip (``rel`` like 'sample_table/cow/v6_nonpartitioned')."""
    d = root / rel
    subs = [p for p in d.iterdir() if p.is_dir() and (p / ".hoodie").is_dir()]
    assert len(subs) == 1, f"expected one table in {d}, found {subs}"
    return str(subs[0])


def _on_session(item) -> bool:
    """Whether a test takes the run's session: the ``spark`` fixture (itself or through another
    fixture), or ``engine_spark`` with the Spark engine."""
    names = getattr(item, "fixturenames", ())
    if "spark" in names:
        return True
    callspec = getattr(item, "callspec", None)
    return "engine_spark" in names and callspec is not None and callspec.params.get("engine") == "spark"


def pytest_collection_modifyitems(config, items):
    """A test on the run's session (the ``spark`` fixture, taken itself or through another
    fixture, or ``engine_spark`` on the Spark engine) carries the ``spark`` marker, so ``-m spark`` selects every Spark test.  On Connect
    (``LAKESDK_TEST_SPARK=connect``) only those run: a test without the session runs alike on
    both, and one that starts Spark sessions of its own would start classic ones.  Tests marked
    ``soak`` (long generated runs) run only when LAKESDK_SOAK_MINUTES is set."""
    on_session = [item for item in items if _on_session(item)]
    for item in on_session:
        item.add_marker(pytest.mark.spark)
    if SPARK_MODE == "connect":
        kept = set(map(id, on_session))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = on_session
    if os.environ.get("LAKESDK_SOAK_MINUTES"):
        return
    skip = pytest.mark.skip(reason="a soak: set LAKESDK_SOAK_MINUTES to run it")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)
