"""Damaged tables: a file the timeline needs and storage lacks is a typed error at read and at
write (never a fallback to an older file version), damaged properties are a typed error at open,
and ``t.inspect.check()`` / ``lakesdk check PATH`` name each damage."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

import lakesdk as lk
from lakesdk.cli.main import main

from ..helpers import batch, rows

pytestmark = pytest.mark.spark


def _table(lake, name: str, table_type: str, *, metadata: bool = False):
    """A damaged-table fixture, by default without the metadata table: plans list storage, so
    a write refuses a damaged table before it writes anything (the tables that keep one: below)."""
    lake = lk.Lake(lake.root, spark=lake._spark, options=lk.TableOptions(metadata=metadata, engine=lake.options.engine))
    t = lake.create_table(name, key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(1, 3)))
    if table_type == "cow":
        t.upsert(batch(2, ids=(1,)))
    return t


def _state(t) -> tuple[list[str], list[str]]:
    data = sorted(os.path.relpath(f, t.path) for f in glob.glob(f"{t.path}/p=*/*") + glob.glob(f"{t.path}/p=*/.*"))
    return sorted(os.listdir(f"{t.path}/.hoodie/timeline")), data


def _latest_base(t) -> str:
    return max(glob.glob(f"{t.path}/p=a/*.parquet"), key=lambda f: f.rsplit("_", 1)[1])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_missing_latest_base_file_is_an_error_at_read_write_and_check(lake, table_type, capsys):
    t = _table(lake, f"dmg_{table_type}", table_type)
    latest = _latest_base(t)
    os.remove(latest)
    name = os.path.basename(latest)
    with pytest.raises(lk.DataFileMissingError, match=name) as e:
        t.read().to_arrow()                    # COW: no fallback to the previous version; MOR: not the logs alone
    assert isinstance(e.value, FileNotFoundError) and e.value.path == f"p=a/{name}" and "lakesdk check" in str(e.value)
    with pytest.raises(lk.DataFileMissingError):
        t.read().to_spark().collect()
    before = _state(t)
    with pytest.raises(lk.DataFileMissingError, match=name):
        t.upsert(batch(5, ids=(1,)))
    assert _state(t) == before                 # nothing was written
    report = t.inspect.check()
    assert not report.ok and report.names == ["missing_file"] and report.problems[0].path == f"p=a/{name}"
    assert "missing_file" in repr(report) and "<table>" in report._repr_html_()
    assert main(["check", t.path]) == 1
    assert f"missing_file: p=a/{name}" in capsys.readouterr().out


def test_missing_data_file_refuses_the_write_before_rolling_back_a_failed_write(lake):
    t = _table(lake, "dmg_failed", "cow")
    t.context.store.create_new("commit")   # an earlier writer failed: its instant stays requested
    os.remove(_latest_base(t))
    before = _state(t)
    with pytest.raises(lk.DataFileMissingError):
        t.upsert(batch(5, ids=(1,)))
    assert _state(t) == before                 # no rollback instant, nothing else written


def test_missing_log_file_is_an_error_and_reported(lake):
    t = _table(lake, "dmg_log", "mor")
    log = glob.glob(f"{t.path}/p=a/.*.log.*")[0]
    os.remove(log)
    with pytest.raises(lk.DataFileMissingError, match=os.path.basename(log)):
        t.read().to_arrow()
    assert t.inspect.check().names == ["missing_file"]


def test_properties_without_table_type_on_merge_on_read_is_an_error_at_open(lake, capsys):
    t = _table(lake, "dmg_type", "mor")
    pp = f"{t.path}/.hoodie/hoodie.properties"
    text = open(pp).read()
    open(pp, "w").write("".join(line for line in text.splitlines(True) if not line.startswith("hoodie.table.type=")))
    with pytest.raises(lk.TableConfigError, match="MERGE_ON_READ") as e:
        lk.open_table(t.path)
    assert e.value.key == "hoodie.table.type"
    assert main(["check", t.path]) == 1
    out = capsys.readouterr().out
    assert "missing_property" in out and "hoodie.table.type" in out


def test_truncated_properties_is_an_error_at_open(lake, capsys):
    t = _table(lake, "dmg_trunc", "cow")
    pp = f"{t.path}/.hoodie/hoodie.properties"
    text = open(pp).read()
    cut = text.index("hoodie.table.recordkey.fields=") + len("hoodie.table.recordkey.fields=")
    open(pp, "w").write(text[:cut])
    with pytest.raises(lk.TableConfigError, match="truncated|empty record key field") as e:
        lk.open_table(t.path)
    assert e.value.key in (None, "hoodie.table.recordkey.fields")
    assert main(["check", t.path]) == 1
    out = capsys.readouterr().out
    assert "missing_property" in out and "hoodie.table.recordkey.fields" in out and "hoodie.table.checksum" in out
    cut = text.index("hoodie.table.checksum=")                  # every key there but the last one
    open(pp, "w").write(text[:cut])
    with pytest.raises(lk.TableConfigError, match="truncated") as e:
        lk.open_table(t.path)
    assert e.value.key == "hoodie.table.checksum"
    assert "missing_property" in t.inspect.check().names


def test_check_names_bad_checksum_unparsable_instant_orphan_and_size_mismatch(lake):
    t = _table(lake, "dmg_misc", "cow")
    assert t.inspect.check().ok
    pp = f"{t.path}/.hoodie/hoodie.properties"
    text = open(pp).read()
    open(pp, "w").write(text.replace("hoodie.table.checksum=", "hoodie.table.checksum=1"))
    assert t.inspect.check().names == ["bad_checksum"]
    open(pp, "w").write(text)
    latest = _latest_base(t)
    with open(latest, "ab") as f:
        f.write(b"x")
    assert t.inspect.check().names == ["size_mismatch"]
    with open(latest, "rb+") as f:
        f.truncate(os.path.getsize(latest) - 1)
    orphan = latest.replace(latest.rsplit("_", 1)[1], "20200101000000000.parquet")
    shutil.copy(latest, orphan)
    report = t.inspect.check()
    assert report.names == ["orphan_file"] and report.problems[0].path.endswith("20200101000000000.parquet")
    os.remove(orphan)
    tl = f"{t.path}/.hoodie/timeline"
    done = sorted(n for n in os.listdir(tl) if n.endswith(".commit"))[-1]
    open(f"{tl}/{done}", "wb").write(b"not avro")
    assert "unparsable_instant" in t.inspect.check().names


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_check_reports_a_clean_table_after_services_as_clean(lake, table_type, capsys):
    t = lake.create_table(f"ok_{table_type}", key="id", partition_by="p", ordering="ts", table_type=table_type)
    for i in range(8):
        t.upsert(batch(i, ids=(i % 4, 10 + i)))
    for i in range(3):                         # small file groups for the clustering
        t.bulk_insert(batch(i, ids=(20 + i, 30 + i)))
    if table_type == "mor":
        t.maintenance.compact()
    assert t.maintenance.cluster().replaced_file_groups > 0
    for i in range(8, 12):
        t.upsert(batch(i, ids=(i % 4,)))
    t.maintenance.clean(retain_commits=2)
    assert t.maintenance.archive(min_commits=2, max_commits=3).archived
    assert t.inspect.check().ok
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    report = t.inspect.check()
    assert report.ok and report.problems == () and "ok" in repr(report)
    assert main(["check", t.path]) == 0
    assert "ok;" in capsys.readouterr().out
    assert main(["check", f"{t.path}-nothing"]) == 2 and "no Hudi table" in capsys.readouterr().err
    assert len(rows(t.read())) == 18


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_file_cut_short_is_an_error_at_read_write_and_compaction_not_a_shorter_read(lake, table_type):
    """A log file cut at a block boundary reads as a valid shorter one: its committed update
    vanished without an error and a compaction made the loss permanent.  Reads and writes use
    check's size rule (a base file of another size, a log file shorter than its stat)."""
    t = _table(lake, f"short_{table_type}", table_type)
    pattern = f"{t.path}/p=a/.*.log.*" if table_type == "mor" else f"{t.path}/p=a/*.parquet"
    f = max(glob.glob(pattern), key=os.path.getmtime)
    data = open(f, "rb").read()
    open(f, "wb").write(data[:-10])
    before = _state(t)
    u = lk.open_table(t.path)
    with pytest.raises(lk.CorruptFileError, match="damaged: expected") as e:
        u.read().to_arrow()
    assert e.value.path and os.path.basename(e.value.path) == os.path.basename(f)
    with pytest.raises(lk.CorruptFileError):
        u.upsert(batch(5, ids=(1,)))
    if table_type == "mor":
        with pytest.raises(lk.CorruptFileError):
            u.maintenance.compact()
    assert _state(t) == before
    assert "size_mismatch" in u.inspect.check().names


def test_merge_on_read_table_without_type_is_known_by_its_compaction(lake):
    """With every delta commit archived and the log files compacted and cleaned, a compaction
    on the timeline still shows the table is merge-on-read."""
    import pandas as pd
    t = lake.create_table("untyped_c", key="k", table_type="mor")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "v": [1, 1]}))
    for i in range(3):
        t.upsert(pd.DataFrame({"k": ["1"], "v": [i + 2]}))
    t.maintenance.compact()
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    t.maintenance.archive(min_commits=1, max_commits=2)
    names = os.listdir(f"{t.path}/.hoodie/timeline")
    assert not any(".deltacommit" in n for n in names) and any(".compaction." in n for n in names)
    assert not glob.glob(f"{t.path}/.*.log.*")
    pp = f"{t.path}/.hoodie/hoodie.properties"
    kept = [line for line in open(pp) if not line.startswith("hoodie.table.type=")]
    open(pp, "w").write("".join(kept))
    with pytest.raises(lk.TableConfigError, match="MERGE_ON_READ"):
        lk.open_table(t.path)


# -- tables that keep the metadata table: plans list no data partition, so a damaged file is found
# when it is read (a read lists storage then, to say what is wrong) -----------------------------------
def _mdt_table(tmp_path, name: str, table_type: str):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = _table(lake, name, table_type, metadata=True)
    assert os.path.isdir(f"{t.path}/.hoodie/metadata/files")
    return lk.open_table(t.path, options=lk.TableOptions(engine="local"))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_with_the_metadata_table_a_missing_base_file_is_an_error_at_read(tmp_path, table_type):
    t = _mdt_table(tmp_path, f"mdt_dmg_{table_type}", table_type)
    latest = _latest_base(t)
    os.remove(latest)
    name = os.path.basename(latest)
    with pytest.raises(lk.DataFileMissingError, match=name) as e:
        t.read().to_arrow()
    assert e.value.path == f"p=a/{name}"
    with pytest.raises(lk.DataFileMissingError, match=name):
        t.read().count()
    with pytest.raises(lk.DataFileMissingError, match=name):
        t.read().to_batches().read_all()
    # a write that reads the file fails typed; its own instant is rolled back, no data file changes
    data = _state(t)[1]
    with pytest.raises(lk.DataFileMissingError, match=name):
        t.upsert(batch(5, ids=(1,)))
    assert _state(t)[1] == data and not t.context.store.load().pending
    assert t.inspect.check().names[0] in ("missing_file", "metadata_table_mismatch")
    assert "missing_file" in t.inspect.check().names


def test_with_the_metadata_table_a_missing_log_file_is_an_error_at_read(tmp_path):
    t = _mdt_table(tmp_path, "mdt_dmg_log", "mor")
    log = glob.glob(f"{t.path}/p=a/.*.log.*")[0]
    os.remove(log)
    with pytest.raises(lk.DataFileMissingError, match=os.path.basename(log)):
        t.read().to_arrow()


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_with_the_metadata_table_a_file_cut_short_is_an_error_not_a_shorter_read(tmp_path, table_type):
    """The metadata table lists the size the commit recorded; a log file cut at a block
    boundary is caught when it is read (its bytes are fewer), never read as a shorter one."""
    t = _mdt_table(tmp_path, f"mdt_short_{table_type}", table_type)
    pattern = f"{t.path}/p=a/.*.log.*" if table_type == "mor" else f"{t.path}/p=a/*.parquet"
    f = max(glob.glob(pattern), key=os.path.getmtime)
    data = open(f, "rb").read()
    open(f, "wb").write(data[:-10])
    with pytest.raises(lk.CorruptFileError, match="damaged: expected") as e:
        t.read().to_arrow()
    assert os.path.basename(e.value.path) == os.path.basename(f)
    if table_type == "mor":
        before = _state(t)
        with pytest.raises(lk.CorruptFileError):
            t.maintenance.compact()
        assert _state(t) == before
    assert "size_mismatch" in t.inspect.check().names


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_with_the_metadata_table_a_missing_base_file_is_an_error_in_spark(lake, table_type):
    t = _table(lake, f"mdt_spark_{table_type}", table_type, metadata=True)
    latest = _latest_base(t)
    os.remove(latest)
    # copy-on-write: Spark looks the files up when the DataFrame is made, and the error is typed;
    # merge-on-read: the slices are read in Spark tasks, and the task's error names the file
    with pytest.raises(lk.DataFileMissingError if table_type == "cow" else Exception, match=os.path.basename(latest)):
        t.read().to_spark().collect()
