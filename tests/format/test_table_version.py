"""Table versions 9 (the default) and 8: what lakesdk writes, what the `hudi` reader reads, and
the upgrade of a version 8 table to 9."""

from __future__ import annotations

import json
import shutil
import warnings

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.exceptions import SchemaError, UnsupportedTableVersionError
from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig

from .. import helpers
from ..conftest import conformance_table

hudi = pytest.importorskip("hudi")

COLS = ["uuid", "city", "ts", "fare"]


def props(t) -> dict[str, str]:
    return dict(TableConfig.from_bytes(t.storage.read(PROPERTIES_PATH)).props)


def ours(q) -> list[tuple]:
    return sorted(tuple(r.values()) for r in q.to_arrow().select(COLS).to_pylist())


def theirs(path, **kw) -> list[tuple]:
    return helpers.hudi_rows(path, kw.pop("as_of", None), cols=COLS, **kw)


def df(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLS)


def write_steps(t) -> list:
    """Every write operation once; returns their WriteResults.  On copy-on-write an upsert
    carries a late event (u2, ts 0 < 1: skipped); merge-on-read logs append such a version and
    the `hudi` reader (0.5.0) resurfaces it in incremental reads (a known limit, see
    tests/model/test_model.py), so there every event is in order."""
    late = 0 if not t.config.is_mor else 2
    res = [t.insert(df([(f"u{i}", ["sf", "nyc"][i % 2], 1, float(i)) for i in range(8)]))]
    res.append(t.upsert(df([("u1", "nyc", 5, 50.0), ("u2", "sf", late, -1.0), ("u9", "sf", 1, 9.0)])))
    res.append(t.delete(["u3", "u9"]))
    res.append(t.upsert(df([("u4", "sf", 1, 44.0), ("u5", "nyc", 7, 55.0)])))
    if t.config.is_mor:
        res.append(t.maintenance.compact())
    res.append(t.insert_overwrite(df([("z1", "sf", 1, 1.0)])))
    res.append(t.bulk_insert(df([("b1", "nyc", 1, 2.0)])))
    return res


def assert_hudi_reads_the_same(t, results) -> None:
    """Snapshot, as of each instant and incremental between each pair: lakesdk == hudi."""
    assert ours(t.read()) == theirs(t.path)
    for r in results:
        assert ours(t.as_of(r.instant)) == theirs(t.path, as_of=r.instant), f"as of {r.instant}"
    bounds = [None] + [r.completed for r in results]
    for i, a in enumerate(bounds):
        for b in bounds[i + 1:]:
            assert ours(t.incremental(a, b)) == theirs(t.path, start=a, end=b), f"incremental ({a}, {b}]"


@pytest.mark.interop
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_hudi_reads_versions_9_and_8_identically(local_lake, table_type):
    """The same operations on a version 9 and a version 8 table: the `hudi` reader reads each
    step of both as lakesdk does, and both tables hold the same rows."""
    seen = {}
    for version in (9, 8):
        t = local_lake.create_table(f"trips_v{version}", key="uuid", partition_by="city", ordering="ts",
                              table_type=table_type, table_version=version)
        assert t.config.version == version and f" v{version} " in repr(t)
        results = write_steps(t)
        assert_hudi_reads_the_same(t, results)
        seen[version] = theirs(t.path)
        p = props(t)
        assert p["hoodie.table.version"] == p["hoodie.table.initial.version"] == str(version)
        if version == 9:
            assert p["hoodie.table.ordering.fields"] == "ts" and "hoodie.table.precombine.field" not in p
        else:
            assert p["hoodie.table.precombine.field"] == "ts" and "hoodie.table.ordering.fields" not in p
    assert seen[9] == seen[8]


def test_a_version_8_table_stays_version_8(local_lake):
    """A table created as version 8 opens and writes as version 8: nothing upgrades it silently."""
    t = local_lake.create_table("old", key="uuid", ordering="ts", table_type="mor", table_version=8)
    t.upsert(df([("a", "sf", 1, 1.0)]))
    before = props(t)
    # Hudi 1.0's column statistics, in its layout (no partition statistics: not partitioned)
    assert before["hoodie.table.metadata.partitions"] == "column_stats,files"
    t2 = lk.open_table(t.path)
    t2.upsert(df([("a", "sf", 2, 2.0)]))
    t2.maintenance.compact()
    assert props(t2) == before and t2.config.version == 8
    assert theirs(t2.path) == [("a", "sf", 2, 2.0)]


def test_create_table_version_checks(local_lake):
    with pytest.raises(SchemaError, match="table_version"):
        local_lake.create_table("v7", key="id", table_version=7)
    with pytest.raises(SchemaError, match="table_version=9"):
        local_lake.create_table("two", key="id", ordering=["ts", "seq"], table_version=8)
    with pytest.raises(SchemaError, match="table_version=9"):
        local_lake.create_table("pu", key="id", partial_update="ignore_defaults", table_version=8)
    assert not local_lake.tables()


@pytest.mark.interop
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_upgrade_8_to_9(local_lake, table_type):
    t = local_lake.create_table("up", key="uuid", partition_by="city", ordering="ts", table_type=table_type,
                          table_version=8)
    results = write_steps(t)[:4]      # log files stay on the merge-on-read table
    rows = theirs(t.path)
    # an index definition without a version (as Hudi 1.0 writes them) gets V1
    defs = {"indexDefinitions": {"record_index": {"indexName": "record_index", "indexType": "record_index",
                                                  "sourceFields": [], "indexOptions": {}}}}
    t.storage.write(".hoodie/.index_defs/index.json", json.dumps(defs).encode())
    t.storage.write(PROPERTIES_PATH, TableConfig({**t.refresh().config.props, "hoodie.table.index.defs.path":
                                                  ".hoodie/.index_defs/index.json"}).to_text().encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)   # its files partition is built again
        new = t.refresh().maintenance.upgrade()
    assert new.version == 9
    p = props(t)
    assert (p["hoodie.table.version"], p["hoodie.table.initial.version"]) == ("9", "8")
    assert p["hoodie.table.ordering.fields"] == "ts"
    assert not {"hoodie.table.precombine.field", "hoodie.record.merge.strategy.id",
                "hoodie.compaction.payload.class"} & set(p)
    assert p["hoodie.table.legacy.payload.class"] == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    assert not t.storage.exists(PROPERTIES_PATH + ".backup")
    index = json.loads(t.storage.read(".hoodie/.index_defs/index.json"))
    assert index["indexDefinitions"]["record_index"]["version"] == "V1"
    # the data is untouched: both readers read what they read before, as of every instant too
    up = lk.open_table(t.path, options=lk.TableOptions(engine="local"))
    assert up.config.version == 9
    assert theirs(t.path) == rows and ours(up.read()) == rows
    assert_hudi_reads_the_same(up, results)
    # and the table writes on as version 9
    results.append(up.upsert(df([("u1", "nyc", 9, 99.0), ("n1", "sf", 1, 1.0)])))
    assert_hudi_reads_the_same(up, results)
    # the metadata table was built again with the statistics a partitioned version 9 table keeps
    assert p["hoodie.table.metadata.partitions"] == "column_stats,files,partition_stats"
    assert up.maintenance.upgrade() is None and props(up) == p


def test_a_version_6_table_is_not_upgraded_by_lakesdk(conformance_dir, tmp_path):
    src = conformance_table(conformance_dir, "sample_table/cow/v6_nonpartitioned")
    shutil.copytree(src, tmp_path / "v6")
    t = lk.open_table(str(tmp_path / "v6"))
    with pytest.raises(UnsupportedTableVersionError, match="Apache Hudi"):
        t.maintenance.upgrade()
    assert t.refresh().config.version == 6
