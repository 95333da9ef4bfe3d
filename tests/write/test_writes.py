"""COW writes on Spark: upsert semantics, deletes, overwrite, file sizing, and bad input."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.commit.results import SchemaChange
from lakesdk.exceptions import (
    IncompatibleSchemaError,
    InvalidFilterError,
    MissingColumnError,
    NullKeyError,
    TableConfigError,
    TableExistsError,
    TableNotFoundError,
)

pytestmark = pytest.mark.spark


def trips(n: int, start: int = 0, ts: int = 1, cities=("sf", "nyc", "la")) -> pd.DataFrame:
    return pd.DataFrame({
        "uuid": [f"u{i:04d}" for i in range(start, start + n)],
        "city": [cities[i % len(cities)] for i in range(start, start + n)],
        "ts": [ts] * n,
        "fare": [float(i) for i in range(start, start + n)],
    })


def snapshot(t) -> dict[str, tuple]:
    df = t.read().to_pandas()
    return {r.uuid: (r.city, r.ts, r.fare) for r in df.itertuples()}


@pytest.fixture
def table(engine_lake):
    return engine_lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")


def test_upsert_event_time_ordering(table):
    r1 = table.upsert(trips(6))
    assert (r1.inserted, r1.updated, r1.deleted) == (6, 0, 0) and r1.files == 3 and r1.bytes > 0
    assert len(r1.instant) == 17 and r1.completed > r1.instant and r1.seconds > 0
    upd = pd.DataFrame({"uuid": ["u0000", "u0001", "u0002", "u0100"], "city": ["sf", "nyc", "la", "sf"],
                        "ts": [5, 0, 1, 1], "fare": [100.0, 101.0, 102.0, 103.0]})
    r2 = table.upsert(upd)
    # u0001 has a lower ordering value (0 < 1): it does not replace the stored record;
    # u0002 ties (1 == 1): the later write wins
    assert (r2.inserted, r2.updated, r2.skipped) == (1, 2, 1)
    snap = snapshot(table)
    assert snap["u0000"] == ("sf", 5, 100.0)
    assert snap["u0001"] == ("nyc", 1, 1.0)
    assert snap["u0002"] == ("la", 1, 102.0)
    assert snap["u0100"] == ("sf", 1, 103.0) and len(snap) == 7
    assert "WriteResult(upsert 'trips'" in repr(r2) and "<table>" in r2._repr_html_()


def test_duplicates_in_one_batch_are_combined(table):
    df = pd.DataFrame({"uuid": ["a", "a", "a", "b"], "city": ["sf"] * 4, "ts": [3, 7, 7, 1],
                       "fare": [1.0, 2.0, 3.0, 4.0]})
    r = table.upsert(df)
    assert r.inserted == 2
    snap = snapshot(table)
    assert snap["a"] == ("sf", 7, 3.0)  # greatest ts; on the tie the later row


def test_inputs_of_every_kind(table, spark):
    table.upsert(trips(2))
    table.upsert(pa.Table.from_pandas(trips(2, start=2), preserve_index=False))
    table.upsert(trips(2, start=4).to_dict("records"))
    table.upsert(spark.createDataFrame(trips(2, start=6)))
    assert sorted(snapshot(table)) == [f"u{i:04d}" for i in range(8)]


def test_list_of_dicts_keeps_keys_missing_from_the_first_row():
    from lakesdk.table.data import to_arrow_or_spark
    arrow, _ = to_arrow_or_spark([{"uuid": "a", "ts": 1}, {"uuid": "b", "fare": 2.5}])
    assert arrow.column_names == ["uuid", "ts", "fare"]
    assert arrow.to_pylist() == [{"uuid": "a", "ts": 1, "fare": None}, {"uuid": "b", "ts": None, "fare": 2.5}]


def test_delete_by_keys_and_rows(table):
    table.upsert(trips(9))
    r = table.delete(["u0000", "u0004", "nope"])
    assert r.deleted == 2
    r = table.delete(pd.DataFrame({"uuid": ["u0001"], "city": ["nyc"]}))
    assert r.deleted == 1
    assert sorted(snapshot(table)) == ["u0002", "u0003", "u0005", "u0006", "u0007", "u0008"]


def test_insert_overwrite_partitions_and_table(table):
    table.upsert(trips(9))
    r = table.insert_overwrite(pd.DataFrame({"uuid": ["x"], "city": ["sf"], "ts": [1], "fare": [0.5]}))
    assert r.action == "replacecommit" and r.replaced_file_groups == 1
    snap = snapshot(table)
    assert "x" in snap and not any(v[0] == "sf" and k != "x" for k, v in snap.items()) and len(snap) == 7
    r = table.insert_overwrite(pd.DataFrame({"uuid": ["y"], "city": ["la"], "ts": [1], "fare": [0.5]}), scope="table")
    assert list(snapshot(table)) == ["y"]
    md = table.inspect.commit_metadata(r.instant)
    assert md.operation_type == "INSERT_OVERWRITE_TABLE" and sum(map(len, md.partition_to_replace_file_ids.values())) == 3


def test_bulk_insert_and_insert(table):
    r = table.bulk_insert(trips(30))
    assert r.inserted == 30 and r.operation == "bulk_insert"
    r = table.insert(trips(3, start=30))
    assert r.inserted == 3
    assert len(snapshot(table)) == 33


def test_insert_keeps_duplicate_keys_as_hudi_does(engine_lake):
    # payloads.md T2: the insert operation does not look keys up, so a key written twice appears twice
    t = engine_lake.create_table("dups", key="id", ordering="ts")
    t.insert(pd.DataFrame({"id": [1, 2], "ts": [100, 100], "name": ["A", "B"]}))
    t.insert(pd.DataFrame({"id": [1, 2], "ts": [100, 100], "name": ["A_equal", "B_equal"]}))
    assert sorted(t.read().to_pandas().name) == ["A", "A_equal", "B", "B_equal"]
    t.upsert(pd.DataFrame({"id": [3], "ts": [1], "name": ["C"]}))
    assert len(t.read().to_pandas()) == 5


def test_inserts_fill_small_files_then_new_file_groups(engine_lake):
    t = engine_lake.create_table("sized", key="uuid", ordering="ts")
    t = t.with_options(lk.TableOptions(target_file_size=40_000, small_file_limit=30_000, record_size_estimate=50,
                                engine=t.options.engine))
    t.upsert(trips(200))
    fg1 = t.inspect.file_groups()
    assert len(fg1) == 1
    t.upsert(trips(4000, start=200))
    fg2 = t.inspect.file_groups()
    assert len(fg2) > 2, fg2
    assert fg1["file_id"][0].as_py() in set(fg2["file_id"].to_pylist())  # the small file group was filled, not abandoned
    assert len(snapshot(t)) == 4200


def test_time_travel_and_incremental(table):
    r1 = table.upsert(trips(3))
    r2 = table.upsert(pd.DataFrame({"uuid": ["u0000"], "city": ["sf"], "ts": [2], "fare": [9.0]}))
    r3 = table.upsert(trips(2, start=10))
    assert len(table.as_of(r1.instant).to_pandas()) == 3
    assert table.as_of(r1).to_pandas().set_index("uuid").fare["u0000"] == 0.0
    assert table.as_of(r2.instant).to_pandas().set_index("uuid").fare["u0000"] == 9.0
    assert table.as_of("2000-01-01 00:00:00").to_pandas().empty
    inc = table.incremental(start=r1.completed, end=r2.completed, meta_fields=True).to_pandas()
    assert list(inc.uuid) == ["u0000"] and set(inc._hoodie_commit_time) == {r2.instant}
    inc = table.incremental(start=r2).to_pandas()
    assert sorted(inc.uuid) == ["u0010", "u0011"]
    assert sorted(table.incremental().to_pandas().uuid) == ["u0000", "u0001", "u0002", "u0010", "u0011"]
    h = table.history().to_pydict()
    assert h["instant"] == [r1.instant, r2.instant, r3.instant] and h["inserted"] == [3, 0, 2]


def test_reads_project_filter_and_spark(table):
    table.upsert(trips(9))
    got = table.read(columns=["uuid", "fare"], where="fare > 5 AND city IN ('sf', 'la')").to_pandas()
    assert list(got.columns) == ["uuid", "fare"] and sorted(got.uuid) == ["u0006", "u0008"]
    q = table.read(where="city = 'nyc'")
    assert q.plan().pruned_partitions == 2
    sdf = table.read(where="fare >= 7").to_spark()
    assert sorted(r.uuid for r in sdf.collect()) == ["u0007", "u0008"]
    assert "where='city = \\'nyc\\''" in repr(q) or "city = 'nyc'" in repr(q)


def test_schema_evolution_adds_columns(table):
    table.upsert(trips(3))
    df = trips(1, start=3)
    df["tip"] = [2.5]
    table.upsert(df)
    out = table.read().to_pandas().set_index("uuid")
    assert "tip" in out.columns and out.tip["u0003"] == 2.5 and pd.isna(out.tip["u0000"])
    df2 = trips(1, start=4).drop(columns=["fare"])
    with pytest.raises(MissingColumnError, match=r"lacks table column\(s\) \['fare', 'tip'\]"):
        table.upsert(df2)   # as Hudi: a batch without some table columns is refused
    table.upsert(df2, missing_columns="null")
    assert pd.isna(table.read().to_pandas().set_index("uuid").fare["u0004"])


def test_write_results_say_when_they_change_the_schema(table):
    """An upsert or a merge adding a column evolved the table's schema without a word; the
    result says it (``schema_change``, ``added_columns``, its repr and HTML)."""
    first = table.upsert(trips(3))
    assert first.schema_change is None and first.added_columns == ()   # the first write defines the schema
    same = table.upsert(trips(2, start=3))
    assert same.schema_change is None and "added columns" not in repr(same) + same._repr_html_()
    df = trips(1, start=5)
    df["tip"] = [2.5]
    added = table.upsert(df)
    assert added.added_columns == ("tip",)
    assert added.schema_change == SchemaChange(added=(("tip", "double"),))
    assert repr(added).endswith("; added columns: tip (double))")
    assert "added columns: tip (double)" in added._repr_html_()
    assert table.upsert(df).schema_change is None   # the column is the table's now
    narrow = pa.table({"uuid": ["u0009"], "city": ["sf"], "ts": pa.array([1], pa.int64()), "fare": [1.0],
                       "tip": [1.0], "n": pa.array([7], pa.int32())})
    table.upsert(narrow)
    wide = table.upsert(narrow.set_column(5, "n", pa.array([8], pa.int64())))
    assert wide.schema_change == SchemaChange(widened=(("n", "int32", "int64"),)) and wide.added_columns == ()
    assert "widened columns: n (int32 -> int64)" in repr(wide)
    src = pd.DataFrame({"uuid": ["u0010"], "city": ["la"], "ts": [1], "fare": [3.0], "tip": [0.5], "n": [1],
                        "rating": [4]})
    m = table.merge(src, on="uuid").when_not_matched_insert_all().execute()
    assert m.inserted == 1 and m.added_columns == ("rating",)
    assert m.schema_change == SchemaChange(added=(("rating", "int64"),))
    assert "added columns: rating (int64)" in repr(m) and "added columns: rating (int64)" in m._repr_html_()
    m2 = table.merge(src.assign(fare=4.0), on="uuid").when_matched_update_all().execute()
    assert m2.updated == 1 and m2.schema_change is None
    assert table.delete(["u0000"]).schema_change is None


def test_write_result_schema_change_under_optimistic_concurrency(tmp_path, monkeypatch):
    """With a lock the schema is resolved again at commit: a column another writer added
    meanwhile is not this write's change."""
    from lakesdk.table.write import WriteOperation
    opts = lk.TableOptions(engine="local")
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process", options=opts)
    t = lake.create_table("t", key="uuid", ordering="ts")
    t.upsert(trips(2))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process",
                          options=lk.TableOptions(engine="local", schema_reconcile=True))
    df, df2 = trips(1, start=2), trips(1, start=3)
    df["tip"] = [2.5]
    df2["tip"], df2["tolls"] = [1.0], [0.5]
    run = WriteOperation._run
    concurrent = []

    def run_after_another_write(self, *args, **kwargs):   # the other writer commits while this one writes
        if self.table is other and not concurrent:
            concurrent.append(t.bulk_insert(df))
        return run(self, *args, **kwargs)
    monkeypatch.setattr(WriteOperation, "_run", run_after_another_write)
    r = other.upsert(df2)
    assert concurrent[0].added_columns == ("tip",)
    assert r.schema_change == SchemaChange(added=(("tolls", "double"),))
    assert t.refresh().schema.names[-2:] == ["tip", "tolls"]

# -- bad input: typed errors, table unchanged ----------------------------------------------------
def _unchanged(t, before):
    # the same completed writes and nothing pending (a failed write leaves at most a rollback instant)
    assert len(t.timeline.commits) == before[0] and not t.timeline.pending
    assert snapshot(t) == before[1]
    files = [f for f in t.storage.find("") if not f.path.startswith(".hoodie")]
    assert len(files) == before[2]


def _state(t):
    return (len(t.timeline.commits), snapshot(t), len([f for f in t.storage.find("") if not f.path.startswith(".hoodie")]))


def test_bad_input_leaves_table_unchanged(table):
    table.upsert(trips(3))
    before = _state(table)
    with pytest.raises(MissingColumnError, match="record key field 'uuid'"):
        table.upsert(trips(2).drop(columns=["uuid"]))
    with pytest.raises(NullKeyError, match="null in 1 of 2 rows"):
        table.upsert(pd.DataFrame({"uuid": ["a", None], "city": ["sf", "sf"], "ts": [1, 1], "fare": [1.0, 1.0]}))
    with pytest.raises(MissingColumnError, match="ordering field 'ts'"):
        table.upsert(trips(2).drop(columns=["ts"]))
    with pytest.raises(MissingColumnError, match="partition field 'city'"):
        table.upsert(trips(2).drop(columns=["city"]))
    with pytest.raises(IncompatibleSchemaError, match="fare"):
        table.upsert(trips(2).assign(fare=["a", "b"]))
    with pytest.raises(InvalidFilterError, match="unknown column"):
        table.read(where="nope > 1").to_pandas()
    with pytest.raises(InvalidFilterError, match="cannot parse"):
        table.read(where="fare >>> 1").to_pandas()
    _unchanged(table, before)


def test_null_keys_in_spark_input_are_refused_before_the_instant(table, spark):
    table.upsert(trips(2))
    before = _state(table)
    instants = [(i.requested, i.action, i.state) for i in table.timeline]
    sdf = spark.createDataFrame(pd.DataFrame({"uuid": ["a", None, None], "city": ["sf", "sf", None], "ts": [1, 1, 1],
                                              "fare": [1.0, 2.0, 3.0]}))
    with pytest.raises(NullKeyError, match="'uuid' is null in 2 of 3 rows"):
        table.upsert(sdf)
    with pytest.raises(NullKeyError, match="'uuid' is null in 2 of 3 rows"):
        table.delete(sdf)
    _unchanged(table, before)
    assert [(i.requested, i.action, i.state) for i in table.timeline] == instants   # no instant, no rollback


def test_failed_job_rolls_back_its_files(table, monkeypatch):
    table.upsert(trips(3))
    before = _state(table)
    import lakesdk.engine.local as el
    import lakesdk.engine.spark as es

    def boom(self, df):
        self.ctx.storage.write(f"sf/deadbeef-0_0-1-1_{self.ctx.instant}.parquet", b"partial")
        raise RuntimeError("executor lost")
    monkeypatch.setattr(es.SparkWriteJob, "write_groups", boom)
    monkeypatch.setattr(el.LocalWriteJob, "write_groups", boom)
    with pytest.raises(RuntimeError, match="executor lost"):
        table.upsert(trips(2, start=10))
    _unchanged(table, before)


def test_tables_and_paths(engine_lake, tmp_path):
    engine_lake.create_table("a", key="id")
    with pytest.raises(TableExistsError):
        engine_lake.create_table("a", key="id")
    assert engine_lake.create_table("a", key="id", exist_ok=True).name == "a"
    assert engine_lake.tables() == ["a"]
    with pytest.raises(TableNotFoundError, match="no Hudi table"):
        lk.open_table(str(tmp_path / "nowhere"))
    bad = tmp_path / "bad" / ".hoodie"
    bad.mkdir(parents=True)
    (bad / "hoodie.properties").write_text("hoodie.table.name=x\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=baz\n")
    with pytest.raises(TableConfigError, match="hoodie.table.version"):
        lk.open_table(str(tmp_path / "bad"))
    assert os.path.exists(tmp_path / "lake" / "a" / ".hoodie" / "timeline")


def test_composite_keys_and_nonpartitioned(engine_lake):
    t = engine_lake.create_table("ck", key=["a", "b"], ordering="ts")
    t.upsert(pd.DataFrame({"a": [1, 1, 2], "b": ["x", "y", "x"], "ts": [1, 1, 1], "v": [1, 2, 3]}))
    t.upsert(pd.DataFrame({"a": [1], "b": ["y"], "ts": [2], "v": [20]}))
    t.delete([(2, "x")])
    out = t.read().to_pandas().sort_values(["a", "b"])
    assert list(out.v) == [1, 20]
    assert set(t.read(columns=["_hoodie_record_key"]).to_pandas()._hoodie_record_key) == {"a:1,b:x", "a:1,b:y"}


def test_user_rollback_of_latest_commit(engine_lake):
    from lakesdk.services.rollback import RollbackNotAllowedError
    t = engine_lake.create_table("rb", key="uuid", partition_by="city", ordering="ts")
    r1 = t.upsert(trips(3))
    r2 = t.upsert(trips(2, start=1, ts=5))
    with pytest.raises(RollbackNotAllowedError, match="not the latest completed write"):
        t.maintenance.rollback(r1.instant)
    res = t.maintenance.rollback(r2)
    assert "rolled back commit" in repr(res) and set(res.deleted_files) == set(r2.file_paths)
    assert snapshot(t) == {f"u{i:04d}": (("sf", "nyc", "la")[i], 1, float(i)) for i in range(3)}
    assert [i.action for i in t.timeline] == ["commit", "rollback"]


def test_unexpected_error_in_a_spark_task_is_one_typed_write_error(tmp_path, spark, monkeypatch):
    import lakesdk.engine.spark as spark_engine
    monkeypatch.setattr(spark_engine, "DRIVER_INDEX_KEYS", 0)   # the key index reads the keys in Spark tasks
    t = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark")).create_table(
        "trips", key="uuid", partition_by="city", ordering="ts")
    t.upsert(trips(3))
    commits = len(t.timeline.commits)
    base = next(f for f in t.storage.find("") if f.path.endswith(".parquet") and "sf" in f.path)
    fid = os.path.basename(base.path).split("_")[0]
    t.storage.write(base.path, b"\0" * base.size)    # damaged in place: same name and size, not Parquet
    # the task's Parquet read names the damaged file (CorruptFileError); any other error of a task
    # would be a WriteError: one typed line either way, with the Spark error as its cause
    with pytest.raises((lk.WriteError, lk.CorruptFileError)) as e:
        t.upsert(spark.createDataFrame(trips(3)))
    msg = str(e.value)
    assert fid in msg and "ArrowInvalid" in msg and "\n" not in msg and "org.apache" not in msg
    assert type(e.value.__cause__).__name__ == "PythonException"   # the task's full trace stays the cause
    assert len(t.timeline.commits) == commits and not t.timeline.pending


@pytest.mark.parametrize("dups", [False, True])
def test_a_spark_batch_is_combined_only_when_a_key_repeats(tmp_path, spark, dups):
    """A Spark DataFrame upsert combines its records per (partition, key) by a shuffle only
    when a key repeats: the keys the key index collects tell it (no shuffle otherwise), and the
    result is the same either way, a key in two partitions being two records."""
    from lakesdk.engine.spark import SparkWriteJob
    from lakesdk.engine.tasks import WriteContext
    from lakesdk.merge.columns import OP_UPSERT
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    t.upsert(spark.createDataFrame(trips(6)))
    rows = [("u0000", "sf", 5, 10.0), ("u0001", "sf", 4, 11.0), ("u0001", "nyc", 4, 12.0)]
    if dups:
        rows += [("u0000", "sf", 9, 13.0), ("u0000", "sf", 2, 14.0)]
    upd = spark.createDataFrame(pd.DataFrame(rows, columns=["uuid", "city", "ts", "fare"]))
    ctx = WriteContext.for_table(t.storage, t.config, t.options, instant="20260101000000000", operation="upsert",
                                 schema=pa.schema([("uuid", pa.string()), ("city", pa.string()), ("ts", pa.int64()),
                                                   ("fare", pa.float64())]))
    job = SparkWriteJob(spark, ctx)
    keyed = job.with_keys(upd, OP_UPSERT)
    assert (job.combine(keyed) is keyed) is not dups
    job.release(keyed)
    t.upsert(upd)
    snap = snapshot(t)
    assert snap["u0000"] == ("sf", 9, 13.0) if dups else snap["u0000"] == ("sf", 5, 10.0)
    assert snap["u0001"] == ("sf", 4, 11.0)
    nyc = t.read().to_pandas().query("uuid == 'u0001' and city == 'nyc'")
    assert len(nyc) == 1 and float(nyc.fare.iloc[0]) == 12.0
