"""Tables with Lance base files (``hoodie.table.base.file.format=LANCE``, Apache Hudi 1.2):
lakesdk reads the Lance tables of the hudi-rs test corpus (tests/data/hudi-rs) with the rows
the ``hudi`` reader returns, snapshot, as of every commit and incrementally, copy-on-write and
merge-on-read, on the Arrow and the Spark path; it refuses to write them (it writes Parquet
base files only) and names the extra to install when ``pylance`` is missing."""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path

import pytest

import lakesdk as lk
from lakesdk.format.table_config import TableConfig

from .. import helpers

DATA = Path(__file__).parents[1] / "data" / "hudi-rs"
TABLES = sorted(str(z.relative_to(DATA).with_suffix("")) for z in DATA.rglob("*.zip") if "lance" in z.name)
MOR = [t for t in TABLES if "/mor/" in t]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Every vendored zip unpacked once: <dir>/<zip path without .zip>/<table>/."""
    return helpers.unpack_zips(DATA, tmp_path_factory.mktemp("hudi-rs"))


table_dir = helpers.zipped_table
canon = helpers.canon


def ours(query, cols: list[str]) -> list[tuple]:
    return canon(query.to_arrow().select(cols).to_pylist(), cols)


def hudi(path: str, cols: list[str], **kw) -> list[tuple]:
    return canon(helpers.hudi_read(path, **kw), cols)


def test_corpus_has_six_lance_tables():
    assert len(TABLES) == 6 and len(MOR) == 2


def test_table_config_names_the_format():
    base = {"hoodie.table.name": "t", "hoodie.table.version": "9", "hoodie.table.type": "COPY_ON_WRITE"}
    assert TableConfig({**base, "hoodie.table.base.file.format": "LANCE"}).base_file_format == "LANCE"
    assert TableConfig({**base, "hoodie.table.base.file.format": "lance"}).base_file_format == "LANCE"
    assert TableConfig(base).base_file_format == "PARQUET"
    TableConfig({**base, "hoodie.table.base.file.format": "LANCE"}).validate()
    with pytest.raises(lk.TableConfigError, match="PARQUET and LANCE") as e:
        TableConfig({**base, "hoodie.table.base.file.format": "ORC"}).validate()
    assert e.value.key == "hoodie.table.base.file.format"


@pytest.mark.interop
@pytest.mark.parametrize("rel", TABLES)
def test_reads_match_the_hudi_reader(corpus, rel):
    """Every column (meta fields included) of the snapshot, of a read as of each commit and of
    each incremental read between two commits' completion times (and from the start)."""
    pytest.importorskip("lance")
    path = table_dir(corpus, rel)
    t = lk.open_table(path)
    assert t.context.config.base_file_format == "LANCE"
    snap = t.read(meta_fields=True).to_arrow()
    cols = snap.schema.names
    assert snap.num_rows > 0 and cols[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                              "_hoodie_partition_path", "_hoodie_file_name"]
    assert canon(snap.to_pylist(), cols) == hudi(path, cols)
    commits = t.timeline.commits
    assert len(commits) >= 5
    for c in commits:
        assert ours(t.as_of(c.requested).with_meta_fields(), cols) == hudi(path, cols, as_of=c.requested), f"as of {c.requested}"
    bounds = [None] + [c.completed for c in commits]
    pairs = [(a, b) for a, b in itertools.combinations(bounds, 2) if a is None or bounds.index(b) - bounds.index(a) <= 2]
    for a, b in pairs:
        assert ours(t.incremental(a, b, meta_fields=True), cols) == hudi(path, cols, start=a, end=b), f"incremental ({a}, {b}]"


@pytest.mark.parametrize("rel", TABLES)
def test_projection_filter_and_count(corpus, rel):
    pytest.importorskip("lance")
    t = lk.open_table(table_dir(corpus, rel))
    full = t.read().to_arrow()
    assert t.read().count() == full.num_rows
    key = t.context.config.record_key_fields[0]
    one = full.column(key)[0].as_py()
    proj = t.read(columns=[key, "_hoodie_commit_time"]).to_arrow()
    assert proj.schema.names == [key, "_hoodie_commit_time"] and proj.num_rows == full.num_rows
    hit = t.read(where=[(key, "=", one)]).to_arrow()
    assert hit.num_rows == 1 and hit.to_pylist() == [r for r in full.to_pylist() if r[key] == one]
    assert t.read(where=[(key, "=", one)]).count() == 1
    # a filter on a column the read does not return: read for the filter, left out after
    other = next(c for c in full.column_names if c != key)
    narrow = t.read(where=[(key, "=", one)], columns=[other]).to_arrow()
    assert narrow.schema.names == [other] and narrow.to_pylist() == [{other: r[other]} for r in hit.to_pylist()]
    # a stream of batches (the path of Spark's data source tasks) gives the same rows
    streamed = t.read().to_batches().read_all()
    assert canon(streamed.to_pylist(), full.schema.names) == canon(full.to_pylist(), full.schema.names)


@pytest.mark.parametrize("rel", MOR)
def test_merge_on_read_read_optimized_is_the_base_files(corpus, rel):
    """A read-optimized read returns the Lance base files' rows as they are (no log merged)."""
    pytest.importorskip("lance")
    path = table_dir(corpus, rel)
    t = lk.open_table(path)
    plan = t.read().plan()
    assert plan.merges and all(s.base_path.endswith(".lance") for s in plan.slices if s.base_path)
    ro = t.read(read_optimized=True).to_arrow()
    from lance.file import LanceFileReader
    rows = sum(LanceFileReader(f"{path}/{s.base_path}").num_rows() for s in plan.slices if s.base_path)
    assert ro.num_rows == rows


@pytest.mark.spark
@pytest.mark.parametrize("rel", ["quickstart_trips_table/cow/v9_trips_lance", "quickstart_trips_table/mor/avro/v9_trips_lance"])
def test_spark_reads_lance_in_arrow_tasks(corpus, spark, rel):
    """Spark has no Lance source here: the Spark path reads Lance files in Python tasks, and
    gives the Arrow path's rows (snapshot and as of the first commit)."""
    pytest.importorskip("lance")
    t = lk.open_table(table_dir(corpus, rel), spark=spark)
    cols = ["_hoodie_commit_time", "_hoodie_record_key", "uuid", "rider", "fare", "city", "ts"]
    for q in (t.read(meta_fields=True), t.as_of(t.timeline.commits[0].requested).with_meta_fields()):
        got = sorted(tuple(r[c] for c in cols) for r in q.to_spark().select(*cols).collect())
        assert got == sorted(tuple(r.values()) for r in q.to_arrow().select(cols).to_pylist())
    df = spark.read.format("lakesdk").load(t.path)
    assert df.count() == t.read().count()


def test_remote_store_reads_a_local_copy(corpus, tmp_path):
    """A table on an fsspec store that is not the local disk (memory://): Lance files are
    copied to a temporary local file to be read."""
    pytest.importorskip("lance")
    import fsspec
    src = table_dir(corpus, "sample_table/cow/v9_lance_nonpartitioned")
    mem = fsspec.filesystem("memory")
    root = f"/lance-{tmp_path.name}"
    for f in Path(src).rglob("*"):
        if f.is_file():
            mem.pipe(f"{root}/{f.relative_to(src).as_posix()}", f.read_bytes())
    remote = lk.open_table(f"memory://{root}")
    local = lk.open_table(src)
    cols = local.read().to_arrow().schema.names
    assert ours(remote.read(), cols) == ours(local.read(), cols)
    assert remote.read().count() == local.read().count()


def _copy(corpus: Path, rel: str, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(table_dir(corpus, rel), dest)
    return dest


def _snapshot_files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_writes_are_refused_before_anything_is_written(corpus, tmp_path):
    path = _copy(corpus, "quickstart_trips_table/mor/avro/v9_trips_lance", tmp_path)
    before = _snapshot_files(path)
    t = lk.open_table(str(path))
    row = {"ts": 1, "uuid": "u-new", "rider": "r", "driver": "d", "fare": 1.0, "city": "chennai"}
    for write in (lambda: t.upsert([row]), lambda: t.insert([row]), lambda: t.delete(["u-new"]),
                  lambda: t.insert_overwrite([row]),
                  lambda: t.merge([row], on="uuid").when_not_matched_insert_all().execute(),
                  lambda: t.maintenance.schedule_compaction(), lambda: t.maintenance.compact()):
        with pytest.raises(lk.TableConfigError, match="writes PARQUET ones only") as e:
            write()
        assert e.value.key == "hoodie.table.base.file.format"
    assert _snapshot_files(path) == before


def test_without_pylance_a_read_names_the_extra(corpus, monkeypatch):
    path = table_dir(corpus, "sample_table/cow/v9_lance_nonpartitioned")
    t = lk.open_table(path)           # opening needs no pylance: only reading the files does
    assert len(t.timeline.commits) == 5
    monkeypatch.setitem(sys.modules, "lance", None)
    monkeypatch.setitem(sys.modules, "lance.file", None)
    with pytest.raises(lk.MissingDependencyError, match=r"pip install 'lakesdk\[lance\]'") as e:
        t.read().to_arrow()
    assert (e.value.package, e.value.extra) == ("pylance", "lance")


def test_damaged_and_missing_lance_files(corpus, tmp_path):
    pytest.importorskip("lance")
    path = _copy(corpus, "sample_table/cow/v9_lance_nonpartitioned", tmp_path)
    t = lk.open_table(str(path))
    base = t.read().plan().files[0]
    f = path / base
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises((lk.CorruptFileError, lk.DataFileMissingError)) as e:
        t.read().to_arrow()
    assert base.rsplit("/", 1)[-1] in str(e.value)
    f.unlink()
    with pytest.raises((lk.DataFileMissingError, FileNotFoundError)) as e2:
        t.read().to_arrow()
    assert base.rsplit("/", 1)[-1] in str(e2.value)
