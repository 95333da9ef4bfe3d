"""CDC logging (``create_table(cdc=...)``, ``hoodie.table.cdc.*``): a copy-on-write rewrite
of a base file leaves a CDC log file of its changes beside it, on both engines; the file is
named as Hudi names it, recorded in the write stat's ``cdcStats`` and the metadata table,
never read as data, and cleaned with its slice."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.exceptions import SchemaError
from lakesdk.format.cdc import CDC_ENABLED_KEY, CDC_MODE_KEY, logging_mode
from lakesdk.format.file_naming import LogFile, parse_data_file
from lakesdk.format.log_block import read_log_file

from ..helpers import hudi_rows

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _batch(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


def _cdc_paths(t) -> list[str]:
    return sorted(p for i in t.timeline.commits for s in t.inspect.commit_metadata(i.requested).write_stats
                  for p in (s.cdcStats or {}))


def test_cdc_file_names_parse_and_are_not_data():
    name = ".5b1c3f9e-8f0e-4a5e-9d0e-2b7a3c4d5e6f-0_20250312101522123.log.1_0-37-112.cdc"
    lf = LogFile.parse(name)
    assert lf.is_cdc and lf.name == name and parse_data_file(name) == lf
    old = LogFile.parse(".f-0_20250312101522123.log.2_1-2-3-cdc")        # Hudi before 0.13
    assert old.is_cdc and old.version == 2 and old.write_token == "1-2-3"
    assert not LogFile.parse(".f-0_20250312101522123.log.2_1-2-3").is_cdc


def test_create_table_records_the_mode_as_hudi_does(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    for cdc, mode in [(True, "DATA_BEFORE_AFTER"), ("op_key_only", "OP_KEY_ONLY"), ("DATA_BEFORE", "DATA_BEFORE")]:
        t = lake.create_table(f"t_{mode.lower()}", key="id", cdc=cdc)
        assert t.config.props[CDC_ENABLED_KEY] == "true" and t.config.props[CDC_MODE_KEY] == mode
        assert logging_mode(t.config.props) == mode
    assert logging_mode(lake.create_table("plain", key="id").config.props) is None
    assert logging_mode({CDC_ENABLED_KEY: "true", CDC_MODE_KEY: "data_before"}) == "DATA_BEFORE"   # Hudi 0.13
    with pytest.raises(SchemaError):
        lake.create_table("bad", key="id", cdc="everything")


@pytest.mark.spark
def test_copy_on_write_rewrites_log_their_changes_on_both_engines(tmp_path, engine, engine_spark):
    lake = lk.Lake(str(tmp_path), spark=engine_spark, options=lk.TableOptions(engine=engine))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", cdc=True)
    t.upsert(_batch([(1, "a", 1, "x"), (2, "a", 1, "y"), (3, "b", 1, "z")]))
    assert _cdc_paths(t) == []                         # inserts only: the new base file says it all
    up = t.upsert(_batch([(2, "a", 2, "y2"), (4, "a", 2, "w")]))
    t.delete([1])
    paths = _cdc_paths(t)
    assert len(paths) == 2 and all(LogFile.parse(p.rsplit("/", 1)[1]).is_cdc for p in paths)
    logged = read_log_file(t.storage.read(paths[0]))[0].records().to_pylist()
    assert sorted((r["op"], (r["after"] or r["before"])["v"]) for r in logged) == [("i", "w"), ("u", "y2")]
    assert all(r["ts_ms"] == up.instant for r in logged)
    # the reads ignore them; the hudi reader too; the table checks clean (the MDT lists them)
    assert sorted((r["id"], r["v"]) for r in t.to_arrow().to_pylist()) == [(2, "y2"), (3, "z"), (4, "w")]
    assert hudi_rows(t.path) == [(2, "y2"), (3, "z"), (4, "w")]
    report = t.inspect.check()
    assert report.ok, report
    assert t.changes(up).to_arrow().column("op").to_pylist() == ["d"]


def test_a_clean_deletes_the_cdc_logs_of_the_slices_it_cleans(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", ordering="ts", cdc=True)
    t.upsert(_batch([(1, "a", 1, "x")]))
    for n in range(2, 7):
        t.upsert(_batch([(1, "a", n, f"x{n}")]))
    paths = _cdc_paths(t)
    assert len(paths) == 5 and all(t.storage.exists(p) for p in paths)
    t.maintenance.clean(retain_commits=1)
    kept = [p for p in paths if t.storage.exists(p)]
    assert 0 < len(kept) < len(paths)
    report = t.inspect.check()
    assert report.ok, report


def test_merge_on_read_writes_log_no_changes_but_name_their_slice(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", ordering="ts", cdc=True, table_type="mor")
    t.upsert(_batch([(1, "a", 1, "x"), (2, "a", 1, "y")]))
    t.upsert(_batch([(1, "a", 2, "x2")]))
    second = t.upsert(_batch([(2, "a", 2, "y2")]))
    assert _cdc_paths(t) == []
    (stat,) = t.inspect.commit_metadata(second.instant).write_stats
    # Hudi's CDC reader merges the log onto the slice the stat names (base instant, earlier logs)
    assert stat.prevCommit != second.instant and len(stat.logFiles or []) == 2
    assert [(r["op"], r["after"]["v"]) for r in t.changes(t.timeline.commits.instants[-2].completed).to_arrow().to_pylist()] \
        == [("u", "y2")]


def test_the_logs_answer_where_a_clean_removed_the_state_before(tmp_path):
    """The state before the oldest commit a clean retains is gone; that commit's CDC log (kept
    with its slice) still holds its changes. Without logs the range is refused."""
    from lakesdk.exceptions import DataFileMissingError, TimeTravelError
    from lakesdk.read.changes import iter_changes, plan_changes
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", ordering="ts", cdc=True)
    results = [t.upsert(_batch([(1, "a", n, f"x{n}"), (2, "a", 1, "y")])) for n in range(1, 6)]
    t.maintenance.clean(retain_commits=2)
    start = results[2].completed                      # the changes of the last two commits
    got = [(r["op"], r["before"]["v"], r["after"]["v"]) for r in t.changes(start).to_arrow().to_pylist()]
    assert [g for g in got if g[1] != g[2]] == [("u", "x3", "x4"), ("u", "x4", "x5")]
    with pytest.raises(TimeTravelError):
        list(iter_changes(t.context, plan_changes(t.context, start, None, use_cdc_logs=False)))
    # a log the commit names and storage lacks (where no clean can have deleted it)
    log = next(p for p in _cdc_paths(t) if results[4].instant in p)
    t.storage.delete(log)
    with pytest.raises(DataFileMissingError, match="CDC log"):
        t.changes(start).to_arrow()


def test_a_rollback_of_a_completed_write_deletes_its_cdc_log(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", ordering="ts", cdc=True)
    t.upsert(_batch([(1, "a", 1, "x")]))
    last = t.upsert(_batch([(1, "a", 2, "x2")]))
    (path,) = _cdc_paths(t)
    t.maintenance.rollback(last.instant)
    assert not t.storage.exists(path)
    report = t.inspect.check()
    assert report.ok, report
    assert [r["v"] for r in t.to_arrow().to_pylist()] == ["x"]
