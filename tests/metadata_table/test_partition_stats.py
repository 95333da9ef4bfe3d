"""The partition statistics of Hudi's metadata table (``partition_stats``), as lakesdk writes them
and prunes partitions by them.

- Hudi's records, for every corpus table that has the partition (Hudi 1.1's on version 9,
  Hudi 1.0's layout on version 8): for the files Hudi
  aggregated (the latest file slices of the partition as of the last write touching it, the file
  groups that write replaced still counted), lakesdk's aggregation of their ``column_stats``
  gives the same records (key, file group, every field), and a partition whose files hold no row
  keeps an older record (Hudi writes none then);
- lakesdk's writer: an MDT lakesdk builds for a Hudi-written table holds, for every partition
  whose record Hudi computed from exactly the partition's latest file slices, Hudi's record;
- a filtered read returns the rows a full read keeps when whole partitions are pruned by them.
"""

from __future__ import annotations

import decimal
import io
import json
import math

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.column_stats import layout_of, partition_id, partition_stats_key, range_of_record
from lakesdk.format.instant import WRITE_ACTIONS
from lakesdk.format.metadata_records import decode_record, record_schema_json
from lakesdk.format.partition_stats import aggregate, file_group_of, partition_record
from lakesdk.format.timeline import Timeline
from lakesdk.read.metadata_table import MetadataTableReader
from lakesdk.read.predicate import parse_where
from lakesdk.read.view import FileSystemView

from ..corpus_model import MDT_TABLES, check_mdt, copy_table
from .test_column_stats import _COLS, _table, _values, batches, check_filtered_reads, conditions

#: partition statistics are kept (the option's default)
PSTATS = lk.TableOptions(metadata_partition_stats=True)
#: the corpus tables whose MDT has partition_stats (version 8's in Hudi 1.0's layout)
PSTATS_TABLES = sorted(rel for rel, cfg in MDT_TABLES.items()
                       if "partition_stats" in cfg.props.get("hoodie.table.metadata.partitions", "")
                       and cfg.version >= 8)


def _decoded(rec: dict, version: int = 9) -> dict:
    """A record as a reader decodes it (fastavro's encoding, lakesdk's record schema of a table
    of ``version``)."""
    buf = io.BytesIO()
    schema = record_schema_json(version)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema)), rec)
    return dict(decode_record(buf.getvalue(), schema).raw["ColumnStatsMetadata"])


def _hudi_files(t: lk.Table) -> dict[str, list[str]]:
    """Partition -> the files whose column ranges Hudi aggregated into its record: the latest file
    slices as of the last write touching the partition, the file groups it replaced still
    counted (they are "latest, inflight included" while it commits)."""
    ctx = t.context
    tl = ctx.store.load()
    files = FileSystemView(ctx.storage, ctx.config, ctx.store, tl)._files
    last = {}
    for inst in tl.completed:
        if inst.completed_action in WRITE_ACTIONS:
            for st_ in ctx.store.commit_metadata(inst).write_stats:
                last[st_.partitionPath or ""] = inst
    out = {}
    for part, inst in last.items():
        upto = Timeline(tuple(i for i in tl.instants if i.is_completed and (i.completed or "") <= (inst.completed or "")),
                        tl.layout)
        view = FileSystemView(ctx.storage, ctx.config, ctx.store, upto, files=files)
        if inst.completed_action == "replacecommit":
            md = ctx.store.commit_metadata(inst)
            view.replaced -= {(p, f) for p, fids in (md.partition_to_replace_file_ids or {}).items() for f in fids}
        out[part] = [n for g in view.file_groups if g.partition == part and g.latest is not None
                     for n in ([g.latest.base_file.name] if g.latest.base_file else [])
                     + [lf.name for lf in g.latest.log_files]]
    return out


def test_the_corpus_has_tables_with_partition_stats():
    assert len(PSTATS_TABLES) >= 10, PSTATS_TABLES


@pytest.mark.parametrize("rel", PSTATS_TABLES)
def test_lakesdk_aggregates_the_records_hudi_wrote(corpus, rel):
    from ..helpers import zipped_table
    t = lk.open_table(zipped_table(corpus, rel), options=PSTATS)
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    theirs = mdt.records("partition_stats")
    groups = {sl.file_id: sl for sl in mdt.slices("partition_stats")}
    assert list(groups) == ["partition-stats-0000-0"]
    for sl in groups.values():     # each key is in the file group its hash names
        for key in mdt._slice_records(sl):
            assert file_group_of(key, len(groups)) == sl.file_id
    ranges: dict[tuple[str, str], dict] = {}
    for r in mdt.records("column_stats").values():
        rng = range_of_record(r.raw["ColumnStatsMetadata"])
        if rng is not None:
            ranges.setdefault((r.key[12:24], r.raw["ColumnStatsMetadata"]["fileName"]), {})[rng.column] = rng
    compared = empty = 0
    for part, names in sorted(_hudi_files(t).items()):
        per_file = [ranges.get((partition_id(part), n), {}) for n in names]
        columns = sorted({c for f in per_file for c in f})
        if not columns:
            # no row in the partition's files: Hudi writes nothing, its older record stays
            empty += 1
            assert "lance" in rel or any(k.endswith(partition_id(part)) for k in theirs), part
            continue
        for c in columns:
            version = t.context.config.version
            mine = partition_record(part, aggregate([f[c] for f in per_file if c in f]), layout_of(version))
            hudi = theirs.get(partition_stats_key(c, part))
            assert hudi is not None and mine["key"] == hudi.key, (part, c)
            assert _decoded(mine, version) == dict(hudi.raw["ColumnStatsMetadata"]), (part, c)
            compared += 1
    assert compared > 0 or "lance" in rel, (compared, empty)


#: Hudi-written tables lakesdk builds an MDT for (not Lance: lakesdk keeps no partition_stats there)
REBUILT = [rel for rel in PSTATS_TABLES if MDT_TABLES[rel].base_file_format != "LANCE"]


@pytest.mark.parametrize("rel", REBUILT)
def test_an_mdt_lakesdk_builds_holds_the_records_hudi_wrote(corpus, rel, tmp_path):
    """Hudi's record of a partition it computed from exactly the latest file slices (its last
    write replaced no file group, its files hold rows) is what lakesdk writes, field for field."""
    from lakesdk.commit.table_properties import read_properties, rewrite_properties
    from lakesdk.format.metadata_table import INFLIGHT_KEY, METADATA_DIR, PARTITIONS_KEY
    from lakesdk.format.table_config import TableConfig
    path = copy_table(corpus, rel, tmp_path)
    t = lk.open_table(path, options=PSTATS)
    tl = t.context.store.load()
    theirs = MetadataTableReader(t.storage, tl).records("partition_stats")
    current = {g.partition: {n for n in ([g.latest.base_file.name] if g.latest.base_file else [])
                             + [lf.name for lf in g.latest.log_files]}
               for g in FileSystemView(t.storage, t.context.config, t.context.store, tl).file_groups}
    hudi_files = _hudi_files(t)
    raw, cfg = read_properties(t.storage)
    rewrite_properties(t.storage, raw, TableConfig({**cfg.props, PARTITIONS_KEY: "", INFLIGHT_KEY: ""}))
    t.storage.delete_dir(METADATA_DIR)
    t = lk.open_table(path, options=PSTATS)
    mine = t.maintenance.create_metadata_table().records("partition_stats")
    same = 0
    for key, rec in theirs.items():
        part = rec.raw["ColumnStatsMetadata"]["fileName"]
        ours = mine.get(key)
        assert ours is not None and not ours.deleted, (part, key)
        if ours.raw["ColumnStatsMetadata"]["valueCount"] == 0:
            continue        # no row left in the partition: Hudi's older record stays, lakesdk's says none
        if set(hudi_files.get(part, ())) == current.get(part):
            assert dict(ours.raw["ColumnStatsMetadata"]) == dict(rec.raw["ColumnStatsMetadata"]), part
            same += 1
    # every partition whose last write replaced file groups (a clustering, an insert_overwrite): wider
    assert same > 0 or all(set(hudi_files.get(p, ())) != names for p, names in current.items())
    check_mdt(path, "after lakesdk built the MDT of a Hudi-written table")


def test_partitions_are_pruned_by_their_statistics(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_partition_stats=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    for i in range(4):
        t.bulk_insert(pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [f"p{i}"] * 10, "ts": [0] * 10,
                                "d": [decimal.Decimal(i * 10 + j) for j in range(10)]}))
    t.upsert(pa.table({"id": [3], "p": ["p0"], "ts": [1], "d": [decimal.Decimal(500)]}))   # a log file
    check_mdt(t.path, "after the writes")
    t = lk.open_table(t.path, options=PSTATS)
    plan = t.read(where="id = 15").plan()
    assert (len(plan.slices), plan.skipped_slices, plan.pruned_by_partition_stats) == (1, 3, 3)
    assert t.read(where="d = 500").to_arrow().column("id").to_pylist() == [3]
    assert t.read(where="d = 500").plan().pruned_by_partition_stats == 3
    assert t.read(where="d > 1000").plan().slices == ()


def test_a_pending_compaction_stops_pruning_by_partition(tmp_path):
    """Hudi takes the empty slice a pending compaction opens as a file group's latest, so its
    records may miss rows then: no partition is pruned while a compaction is pending."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_partition_stats=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    t.bulk_insert(pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [0, 0]}))
    t.upsert(pa.table({"id": [1], "p": ["a"], "ts": [1]}))
    assert t.maintenance.schedule_compaction() is not None
    t = lk.open_table(t.path, options=PSTATS)
    plan = t.read(where="id = 2").plan()
    assert plan.pruned_by_partition_stats == 0 and plan.skipped_slices == 1     # the file-level statistics still skip
    assert t.read(where="id = 2").to_arrow().column("id").to_pylist() == [2]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_rolled_back_overwrite_gives_back_the_partitions_it_replaced(tmp_path, table_type):
    """A rollback of an insert_overwrite of the whole table says again the partitions whose
    file groups it replaced though it wrote no file there (the overwrite's delta commit, kept in
    lakesdk's MDT, said them empty); a partition name beyond ASCII is listed from the log blocks."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_partition_stats=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(pa.table({"id": [1, 2], "p": ["A", "Zürich"], "v": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": [2], "p": ["Zürich"], "v": [3], "ts": [2]}))
    t.insert_overwrite(pa.table({"id": [3], "p": ["A"], "v": [4], "ts": [1]}), scope="table")
    check_mdt(t.path, "after the overwrite")
    replace = [i for i in t.context.store.load().instants if i.action == "replacecommit"][-1]
    t.maintenance.rollback(replace.requested)
    check_mdt(t.path, "after its rollback")
    t = lk.open_table(t.path, options=PSTATS)
    assert t.read(where="v = 3").to_arrow().column("id").to_pylist() == [2]
    assert t.read(where="v = 3").plan().pruned_by_partition_stats == 1


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@settings(max_examples=20, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=batches(), update=st.data(), where=st.lists(conditions(), min_size=4, max_size=8))
def test_a_read_pruned_by_partition_returns_the_rows_a_full_read_keeps(tmp_path_factory, table_type, data, update,
                                                                       where):
    """Generated batches, each written into a partition drawn from three (so a partition holds
    the values of several files, and updates in log files), read with generated filters."""
    root = tmp_path_factory.mktemp("prune")
    lake = lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=True, metadata_partition_stats=True))
    t = lake.create_table("t", key="id", partition_by="part", ordering="ts", table_type=table_type)
    for ids, cols in data:
        part = update.draw(st.sampled_from(["x", "y", "z"]))
        t.bulk_insert(_table(ids, cols, 0).append_column("part", pa.array([part] * len(ids))))
    full = t.read().to_arrow()
    parts = dict(zip(full.column("id").to_pylist(), full.column("part").to_pylist()))
    ids, cols = data[0]
    chosen = update.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True))
    new = {f"c_{k}": update.draw(st.lists(_values(k), min_size=len(chosen), max_size=len(chosen))) for k in _COLS}
    t.upsert(_table(chosen, new, 1).append_column("part", pa.array([parts[i] for i in chosen])))
    check_mdt(t.path, "after the generated writes")
    for plan in check_filtered_reads(lk.open_table(t.path, options=PSTATS), update, where):
        PRUNED["pruned"] += plan.pruned_by_partition_stats
        PRUNED["plans"] += 1


PRUNED: dict[str, int] = {"pruned": 0, "plans": 0}


def test_pruning_happened():
    """The generated reads above pruned partitions (run after them)."""
    if PRUNED["plans"] == 0:
        pytest.skip("run with the generated reads")
    assert PRUNED["pruned"] > 0


def test_a_nan_bound_of_a_partition_rules_nothing_out():
    from lakesdk.format.column_stats import ColumnRange, ValueType
    from lakesdk.read.skipping import may_match
    a = ColumnRange("x", ValueType.DOUBLE, None, 1.0, 2.0, 0, 3)
    b = ColumnRange("x", ValueType.DOUBLE, None, 0.5, math.nan, 0, 2)     # a Hudi log file range
    agg = aggregate([a, b])
    assert agg is not None and math.isnan(agg.max_value) and agg.min_value == 0.5
    schema = pa.schema([("x", pa.float64())])
    for w in ("x = 7.0", "x <= 7.0", "x IN (3.0, 4.0)"):
        assert may_match(parse_where(w).bind(schema, "UTC").tree, {"x": agg}), w


def test_files_of_other_types_make_a_partition_unknown():
    """A decimal of another scale (or a string and a number) does not compare: the null count
    is unknown, the bounds are those of every value of the column's type."""
    from lakesdk.format.column_stats import ColumnRange, ValueType
    a = ColumnRange("d", ValueType.DECIMAL, "10,2", 100, 200, 0, 3)
    b = ColumnRange("d", ValueType.DECIMAL, "12,4", 10000, 20000, 0, 2)
    agg = aggregate([a, b], (ValueType.DECIMAL, "12,4"))
    assert agg is not None and (agg.min_value, agg.max_value, agg.null_count, agg.value_count) == \
        (-(10 ** 12 - 1), 10 ** 12 - 1, -1, 5)


@pytest.mark.parametrize("racer", ["write", "clean"])
def test_an_action_completing_before_an_earlier_one_does_not_hide_its_rows(tmp_path, racer):
    """Two actions of one partition, the later one (by instant time) completing first: the
    earlier one's record, written last, says the partition with both; readers take it, not
    the later instant's record written before it (MDT log files sort by instant time)."""
    from lakesdk.table.write import WriteOperation
    opts = lk.TableOptions(engine="local")
    lake = lk.Lake(str(tmp_path), options=opts, concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(pa.table({"id": [1], "p": ["a"], "v": [1], "ts": [1]}))
    t.upsert(pa.table({"id": [1], "p": ["a"], "v": [2], "ts": [2]}))       # a second file version
    other = lk.open_table(t.path, options=opts, concurrency="optimistic", lock="in_process")
    original = WriteOperation._finalize
    fired: list = []

    def racing_finalize(self, ctx, stats, partitions):
        if not fired and self.table is t:
            if racer == "write":
                fired.append(other.bulk_insert(pa.table({"id": [3], "p": ["a"], "v": [50], "ts": [1]})))
            else:
                fired.append(other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1))
            assert fired[0] is not None
        return original(self, ctx, stats, partitions)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WriteOperation, "_finalize", racing_finalize)
        t.bulk_insert(pa.table({"id": [2], "p": ["a"], "v": [100], "ts": [1]}))
    check_mdt(t.path, f"after a {racer} completed inside a write begun before it")
    t = lk.open_table(t.path, options=PSTATS)
    assert t.read(where="v = 100").to_arrow().column("id").to_pylist() == [2]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_restore_across_an_overwrite_says_its_partitions_again_and_prunes(tmp_path, table_type):
    """A restore to a savepoint across an insert_overwrite of the whole table (a partition it
    replaced without writing there) and a later write: the partitions are said as the savepoint
    had them, and reads prune by them again (the restore's rollbacks leave the timeline with
    it; their delta commits, which said the partitions again, count)."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(pa.table({"id": [1, 2], "p": ["A", "B"], "v": [1, 2], "ts": [1, 1]}))
    sp = t.maintenance.savepoint()
    t.insert_overwrite(pa.table({"id": [3], "p": ["A"], "v": [4], "ts": [1]}), scope="table")
    t.upsert(pa.table({"id": [5], "p": ["A"], "v": [5], "ts": [1]}))
    t.maintenance.restore(sp.instant)
    check_mdt(t.path, "after the restore")
    t = lk.open_table(t.path, options=PSTATS)
    assert t.read(where="v = 2").to_arrow().column("id").to_pylist() == [2]
    assert t.read(where="v = 2").plan().pruned_by_partition_stats == 1


def test_a_commit_reads_the_metadata_table_once_for_its_partition_statistics(tmp_path, monkeypatch):
    """Bringing the MDT up to a commit builds one reader of it for the partition statistics,
    after the MDT's compaction (which reads it once more); an action that changes no file, none."""
    import sys
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata_compact_every=2))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(pa.table({"id": [1], "p": ["a"], "v": [1], "ts": [1]}))
    built: list[str] = []
    original = MetadataTableReader.__init__

    def counting(self, *args, **kwargs):
        f = sys._getframe(1)
        while f is not None and f.f_code.co_name != "sync_metadata_table":
            f = f.f_back
        if f is not None:
            built.append(sys._getframe(1).f_code.co_name)
        original(self, *args, **kwargs)
    monkeypatch.setattr(MetadataTableReader, "__init__", counting)
    t.maintenance.savepoint()
    assert built == []
    t.upsert(pa.table({"id": [2], "p": ["a"], "v": [2], "ts": [1]}))     # the MDT compacts first
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    assert any(i.completed_action == "commit" for i in mdt.store.load().completed)
    assert built == ["_maybe_compact", "sync_metadata_table"]
    check_mdt(t.path, "after the compacting write")
