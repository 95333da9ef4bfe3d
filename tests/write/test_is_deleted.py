"""Rows flagged ``_hoodie_is_deleted`` are deletes of their record key, on every write path,
copy-on-write and merge-on-read alike, as Apache Hudi treats them: an upsert (or merge) deletes
the stored record when the flagged row wins against it under the table's merge mode, an insert
or bulk insert writes no flagged row, and the rows of one key in one batch are combined by
their ordering value whether flagged or not.  The ``hudi`` reader reads every instant as
lakesdk does."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakesdk as lk

from ..helpers import hudi_rows, rows

FLAG = "_hoodie_is_deleted"


def _batch(ids, ts, v, flags):
    n = len(ids)
    ts = ts if isinstance(ts, list) else [ts] * n
    v = v if isinstance(v, list) else [v] * n
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array(ts, pa.int64()), "v": pa.array(v, pa.string()),
                     FLAG: pa.array(flags, pa.bool_())})


def _lake(tmp_path, spark, engine, name="lake"):
    return lk.Lake(str(tmp_path / name), spark=spark if engine == "spark" else None,
                   options=lk.TableOptions(engine=engine))


def _same_on_every_instant(t):
    """lakesdk and the ``hudi`` reader agree on the latest snapshot and on every instant."""
    assert rows(t.read()) == hudi_rows(t.path)
    for inst in t.history()["instant"].to_pylist():
        assert rows(t.as_of(inst)) == hudi_rows(t.path, inst), inst


# the batches of the scenario: (operation, batch); the expected rows after each
STEPS = [
    ("upsert", _batch([1, 2, 3, 4], 10, "a", [None, False, False, False])),
    # 1: flagged, newer: deleted; 2: flag false: updated; 3: flag null: updated; 4: flagged but older
    # than the stored row: loses (event-time ordering); 5: flagged, new key: nothing to delete;
    # 6: flagged then live (greater ordering value wins the combine): inserted;
    # 7: live then flagged (the flagged row is newer): nothing
    ("upsert", _batch([1, 2, 3, 4, 5, 6, 6, 7, 7], [11, 11, 11, 9, 11, 1, 2, 1, 2],
                      ["x", "b", "c", "x", "x", "x", "f", "g", "x"],
                      [True, False, None, True, True, True, False, False, True])),
    # insert: flagged rows are not written (a new key: nothing; a stored key: an insert does
    # not look up stored records, so it stays)
    ("insert", _batch([8, 9, 2], 20, ["h", "x", "x"], [False, True, True])),
    # several rows of one key, one batch, equal ordering values: the later arrival wins
    ("upsert", _batch([3, 3, 8, 8], 30, ["x", "y", "x", "z"], [False, True, True, False])),
]
EXPECTED = [
    [(1, "a"), (2, "a"), (3, "a"), (4, "a")],
    [(2, "b"), (3, "c"), (4, "a"), (6, "f")],
    [(2, "b"), (3, "c"), (4, "a"), (6, "f"), (8, "h")],
    [(2, "b"), (4, "a"), (6, "f"), (8, "z")],
]
COUNTS = [(4, 0, 0, 0), (1, 2, 1, 1), (1, 0, 0, 0), (0, 1, 1, 0)]   # inserted, updated, deleted, skipped


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_flagged_rows_are_deletes_under_event_time_ordering(tmp_path, spark, engine, table_type):
    t = _lake(tmp_path, spark, engine).create_table("t", key="id", ordering="ts", table_type=table_type)
    for (op, b), want, counts in zip(STEPS, EXPECTED, COUNTS):
        r = getattr(t, op)(b)
        assert rows(t.read()) == want, op
        assert (r.inserted, r.updated, r.deleted, r.skipped) == counts, op
    assert t.history()["deleted"].to_pylist() == [c[2] for c in COUNTS]
    # the column stays in the table's schema (as Hudi keeps it); no stored row is flagged
    assert t.schema.field(FLAG).type == pa.bool_()
    assert not any(v is True for v in t.read().to_arrow().column(FLAG).to_pylist())
    _same_on_every_instant(t)
    if table_type == "mor":
        t.maintenance.compact()
        assert rows(t.read()) == EXPECTED[-1] == hudi_rows(t.path)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_merge_on_read_equals_copy_on_write(tmp_path, spark, engine):
    lake = _lake(tmp_path, spark, engine)
    cow = lake.create_table("c", key="id", partition_by="p", ordering="ts", table_type="cow")
    mor = lake.create_table("m", key="id", partition_by="p", ordering="ts", table_type="mor")
    for op, b in STEPS:
        b = b.append_column("p", pa.array([f"p{i % 2}" for i in b.column("id").to_pylist()]))
        rc, rm = getattr(cow, op)(b), getattr(mor, op)(b)
        assert (rc.inserted, rc.updated, rc.deleted, rc.skipped) == (rm.inserted, rm.updated, rm.deleted, rm.skipped)
        assert rows(cow.read()) == rows(mor.read()) == hudi_rows(cow.path) == hudi_rows(mor.path)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_commit_time_ordering_a_flagged_row_always_deletes(tmp_path, table_type):
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts", table_type=table_type,
                                                    merge_mode="commit_time")
    t.upsert(_batch([1, 2], 10, "a", [False, False]))
    r = t.upsert(_batch([1, 2, 2], [1, 5, 1], "x", [True, True, False]))   # 2: the later arrival (live) wins
    assert (r.updated, r.deleted, r.skipped) == (1, 1, 0)
    assert rows(t.read()) == [(2, "x")] == hudi_rows(t.path)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_bulk_insert_writes_no_flagged_row(tmp_path, spark, engine):
    t = _lake(tmp_path, spark, engine).create_table("t", key="id", ordering="ts")
    r = t.bulk_insert(_batch([1, 2, 3], 1, "a", [True, None, False]))
    assert r.inserted == 2
    assert rows(t.read()) == [(2, "a"), (3, "a")] == hudi_rows(t.path)
    t.insert_overwrite(_batch([4, 5], 1, "b", [False, True]))
    assert rows(t.read()) == [(4, "b")] == hudi_rows(t.path)
    assert t.bulk_insert(_batch([6], 1, "c", [True])).files == 0   # nothing to write


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_dataframe_flagged_rows(tmp_path, spark, table_type):
    """A Spark DataFrame's flagged rows: deletes in an upsert (keys computed in Spark, and in
    an Arrow pass for a key field of a date), left out of a bulk insert."""
    lake = _lake(tmp_path, spark, "spark")
    for name, key in (("simple", "id"), ("dated", ["id", "g"])):
        t = lake.create_table(name, key=key, ordering="ts", table_type=table_type)
        sdf = spark.createDataFrame(pd.DataFrame({"id": [1, 2, 3], "g": [date(2024, 1, 1)] * 3, "ts": [1] * 3, "v": ["a"] * 3,
                                                  FLAG: [False, True, None]}))
        assert t.bulk_insert(sdf).inserted == 2
        upd = spark.createDataFrame(pd.DataFrame({"id": [1, 3, 4], "g": [date(2024, 1, 1)] * 3, "ts": [2, 0, 2], "v": ["x"] * 3,
                                                  FLAG: [True, True, True]}))
        r = t.upsert(upd)
        assert (r.inserted, r.updated, r.deleted, r.skipped) == (0, 0, 1, 1)
        assert rows(t.read()) == [(3, "a")] == hudi_rows(t.path)


@pytest.mark.parametrize("bad", [pa.array([0, 1], pa.int64()), pa.array(["true", "false"]), pa.array([0.0, 1.0])])
def test_a_delete_marker_that_is_not_boolean_is_refused_before_anything_is_written(tmp_path, bad):
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts")
    t.upsert(_batch([1], 1, "a", [False]))
    before = t.history()["instant"].to_pylist()
    data = pa.table({"id": [1, 2], "ts": [2, 2], "v": ["x", "y"], FLAG: bad})
    for op in ("upsert", "insert", "bulk_insert"):
        with pytest.raises(lk.DeleteMarkerTypeError, match=FLAG) as err:
            getattr(t, op)(data)
        assert isinstance(err.value, lk.SchemaError)
    assert t.history()["instant"].to_pylist() == before
    assert rows(t.read()) == [(1, "a")]


def test_a_delete_marker_of_nulls_only_is_a_boolean_column(tmp_path):
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"], FLAG: [None, None]}))
    assert t.schema.field(FLAG).type == pa.bool_()
    t.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": ["x"], FLAG: [True]}))
    assert rows(t.read()) == [(2, "b")] == hudi_rows(t.path)


def test_merge_source_rows_flagged_delete(tmp_path):
    """A merge whose written row is flagged (``update_all`` from a flagged source row) deletes."""
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts")
    t.upsert(_batch([1, 2], 1, "a", [False, False]))
    src = _batch([1, 2, 3], 2, "s", [True, False, True])
    (t.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute())
    assert rows(t.read()) == [(2, "s")] == hudi_rows(t.path)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_partial_update_a_flagged_row_deletes_the_whole_record(tmp_path, spark, engine, table_type):
    """On a partial-update table a flagged row deletes the record (every column group), in a
    batch of one row or of several; versions of the key after the flagged row in the same
    batch start the record afresh."""
    groups = {"order_ts": ["amount"], "pay_ts": ["paid"]}
    t = _lake(tmp_path, spark, engine).create_table("w", key="order_id", table_type=table_type,
                                                    merge_mode="partial_update", column_groups=groups)
    t.upsert([{"order_id": k, "order_ts": 5, "amount": 10.0} for k in "abcd"])
    t.upsert([{"order_id": "a", "pay_ts": 7, "paid": True}])
    r = t.upsert([{"order_id": "a", "pay_ts": 8, "paid": False, FLAG: True}])    # a batch of one row
    assert r.deleted == 1
    assert sorted(t.read().to_pandas().order_id) == ["b", "c", "d"]
    r = t.upsert([{"order_id": "b", "pay_ts": 1, "paid": True, FLAG: True},       # deleted
                  {"order_id": "c", "pay_ts": 2, "paid": True, FLAG: None},       # updated
                  {"order_id": "d", "pay_ts": 3, "paid": True, FLAG: False},      # d: written, deleted,
                  {"order_id": "d", "pay_ts": 4, "paid": False, FLAG: True},      # then written afresh
                  {"order_id": "d", "pay_ts": 5, "paid": True, FLAG: False},
                  {"order_id": "e", "pay_ts": 6, "paid": True, FLAG: True}])      # a new key: nothing
    assert r.deleted == 2
    got = t.read().to_pandas().set_index("order_id")
    assert sorted(got.index) == ["c", "d"]
    assert (got.loc["c"].order_ts, got.loc["c"].pay_ts) == (5, 2)
    assert pd.isna(got.loc["d"].order_ts) and got.loc["d"].pay_ts == 5      # no group of the deleted record
    t.upsert([{"order_id": "a", "pay_ts": 9, "paid": True, FLAG: False}])    # starts afresh: no stored groups
    row = t.read().to_pandas().set_index("order_id").loc["a"]
    assert pd.isna(row.order_ts) and bool(row.paid)
    if table_type == "mor":
        def state():
            return sorted(t.read().to_arrow().select(["order_id", "order_ts", "pay_ts"]).to_pylist(), key=repr)
        before = state()
        t.maintenance.compact()
        assert state() == before


def test_transaction_write_batch_flagged_rows(tmp_path):
    from lakesdk.table.transaction import begin, commit, write_batch
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts", table_type="mor")
    t.upsert(_batch([1, 2], 1, "a", [False, False]))
    txn = begin(t)
    stats, schema = write_batch(t, txn, _batch([1, 3], 2, "x", [True, True]))
    commit(t, txn, stats, schema=schema)
    assert rows(t.read()) == [(2, "a")] == hudi_rows(t.path)


def test_a_batch_without_the_marker_writes_live_rows(tmp_path):
    """Once the table has the column, a batch without it is not missing a column: its rows are live."""
    t = _lake(tmp_path, None, "local").create_table("t", key="id", ordering="ts", table_type="mor")
    t.upsert(_batch([1, 2], 1, "a", [False, True]))
    t.upsert(pa.table({"id": [2, 3], "ts": [2, 2], "v": ["b", "c"]}))
    got = t.read().to_arrow().sort_by("id")
    assert rows(t.read()) == [(1, "a"), (2, "b"), (3, "c")] == hudi_rows(t.path)
    assert got.column(FLAG).to_pylist() == [False, None, None]


@pytest.mark.parametrize("key", ["id", ["id", "g"]])
def test_spark_dataframe_merge_changes_keep_their_ops(tmp_path, spark, key):
    """A merge's changes as a Spark DataFrame (how a merge on a Spark cluster writes them)
    keep each row's op, and a flagged row among them deletes: keys computed in Spark (a
    plain key) or in an Arrow pass (a key field of a date)."""
    from lakesdk.table.write import WriteOperation
    t = _lake(tmp_path, spark, "spark").create_table("t", key=key, ordering="ts", table_type="cow")
    g = [date(2024, 1, 1)] * 3
    t.upsert(pd.DataFrame({"id": [1, 2, 3], "g": g, "ts": [1] * 3, "v": ["a"] * 3, FLAG: [False] * 3}))
    changes = spark.createDataFrame(pd.DataFrame({"id": [1, 2, 3], "g": g, "ts": [2] * 3, "v": ["x", "y", "z"],
                                                  FLAG: [False, False, True], "_lk_op": [1, 0, 0]}))
    changes = changes.withColumn("_lk_op", changes["_lk_op"].cast("tinyint"))
    r = WriteOperation(t, "merge", changes).execute()
    assert (r.updated, r.deleted) == (1, 2)
    assert rows(t.read()) == [(2, "y")] == hudi_rows(t.path)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_custom_merger_gets_a_flagged_row_as_a_delete(tmp_path, spark, engine, table_type):
    """A custom merger sees a flagged row as a delete version (``_lk_op`` 1), as it sees a row
    of ``t.delete``; this merger lets deletes win, so the whole record goes."""
    from ..merge.test_custom_merger import keep_max_amount
    lk.register_merger("max_amount_flags", keep_max_amount)
    t = _lake(tmp_path, spark, engine).create_table("c", key="id", table_type=table_type, merge_mode="custom",
                                                    merger="max_amount_flags")
    t.upsert(pd.DataFrame({"id": [1, 2, 3], "amount": [5.0, 7.0, 1.0], FLAG: [False, False, True]}))
    t.upsert(pd.DataFrame({"id": [1, 2, 2], "amount": [1.0, 9.0, 8.0], FLAG: [True, False, None]}))
    got = t.read().to_pandas()
    assert dict(zip(got.id, got.amount)) == {2: 9.0}
    if table_type == "mor":
        t.maintenance.compact()
        assert dict(zip(*t.read(read_optimized=True).to_pandas()[["id", "amount"]].values.T)) == {2: 9.0}


def test_partial_update_merge_deletes_of_several_keys(tmp_path):
    """A merge deleting several keys of a partial-update table in one batch deletes them all."""
    groups = {"order_ts": ["amount"], "pay_ts": ["paid"]}
    t = _lake(tmp_path, None, "local").create_table("w", key="order_id", table_type="cow",
                                                    merge_mode="partial_update", column_groups=groups)
    t.upsert([{"order_id": k, "order_ts": 5, "amount": 10.0} for k in "abc"])
    src = pd.DataFrame({"order_id": ["a", "b"], "order_ts": [6, 6], "amount": [1.0, 1.0]})
    res = t.merge(src, on="order_id").when_matched_delete().execute()
    assert res.deleted == 2
    assert sorted(t.read().to_pandas().order_id) == ["c"]


_VERSION = st.tuples(st.sampled_from("abc"), st.booleans(), st.one_of(st.none(), st.integers(0, 3)),
                     st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 9))


@settings(max_examples=150, deadline=None)
@given(base=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3), st.integers(0, 3)), max_size=3,
                     unique_by=lambda r: r[0]),
       batch=st.lists(_VERSION, min_size=1, max_size=8))
def test_partial_update_combine_keeps_what_the_whole_batch_means(base, batch):
    """Combining a batch first (as a write does) and merging it into the stored records gives
    the records that merging every version of the batch gives, deletes included."""
    from lakesdk.merge.ordering import OP, SEQ, combine_batch
    from lakesdk.merge.slice_merge import merge_versions
    groups = {"o": ["x"], "q": ["y"]}

    def table(rows, seq0):
        return pa.table({"_hoodie_record_key": pa.array([r[0] for r in rows], pa.string()),
                         "_hoodie_partition_path": pa.array([""] * len(rows), pa.string()),
                         "o": pa.array([r[1] for r in rows], pa.int64()), "x": pa.array([r[2] for r in rows], pa.int64()),
                         "q": pa.array([r[3] for r in rows], pa.int64()), "y": pa.array([r[4] for r in rows], pa.int64()),
                         OP: pa.array([r[5] for r in rows], pa.int8()),
                         SEQ: pa.array(range(seq0, seq0 + len(rows)), pa.int64())})
    stored = table([(k, o, x, None, None, 0) for k, o, x in base], 0)
    # a delete carries no ordering value (it always applies); an upsert writes one group or both
    inc = table([(k, None if d else o, v, None if d else q, v, int(d)) for k, d, o, q, v in batch], 100)

    def merged(versions):
        out = merge_versions(versions, ordering=None, merge_mode="PARTIAL_UPDATE", column_groups=groups)
        return sorted(out.select(["_hoodie_record_key", "o", "x", "q", "y"]).to_pylist(), key=repr)
    combined = combine_batch(inc, ordering=None, merge_mode="PARTIAL_UPDATE", column_groups=groups)
    assert merged(pa.concat_tables([stored, combined])) == merged(pa.concat_tables([stored, inc]))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_key_in_two_partitions_is_two_records_to_the_combine(tmp_path, spark, engine, table_type):
    """Without a global index a key written into two partitions is two records: a batch that
    updates one and deletes (flags) the other, on a partial-update table and on a custom
    merger's, keeps the update (the delete of one partition's record is not the other's)."""
    from ..merge.test_custom_merger import keep_max_amount
    lk.register_merger("max_amount_parts", keep_max_amount)
    lake = _lake(tmp_path, spark, engine)
    groups = {"order_ts": ["amount"], "pay_ts": ["paid"]}
    t = lake.create_table("w", key="order_id", partition_by="p", table_type=table_type,
                          merge_mode="partial_update", column_groups=groups)
    t.upsert([{"order_id": "a", "p": "x", "order_ts": 5, "amount": 10.0},
              {"order_id": "a", "p": "y", "order_ts": 5, "amount": 20.0}])
    t.upsert([{"order_id": "a", "p": "x", "pay_ts": 7, "paid": True, FLAG: False},     # both partitions
              {"order_id": "a", "p": "y", "pay_ts": 8, "paid": False, FLAG: False}])   # in one batch
    r = t.upsert([{"order_id": "a", "p": "x", "pay_ts": 9, "paid": False, FLAG: False},
                  {"order_id": "a", "p": "y", "pay_ts": 9, "paid": True, FLAG: True}])
    assert (r.updated, r.deleted) == (1, 1)
    got = t.read().to_arrow().select(["order_id", "p", "order_ts", "amount", "pay_ts", "paid"]).to_pylist()
    assert got == [{"order_id": "a", "p": "x", "order_ts": 5, "amount": 10.0, "pay_ts": 9, "paid": False}]
    c = lake.create_table("c", key="id", partition_by="p", table_type=table_type, merge_mode="custom",
                          merger="max_amount_parts")
    c.upsert(pd.DataFrame({"id": [1, 1], "p": ["x", "y"], "amount": [5.0, 7.0]}))
    batch = pd.DataFrame({"id": [1, 1, 2], "p": ["x", "y", "x"], "amount": [9.0, 1.0, 3.0], FLAG: [False, True, False]})
    c.upsert(spark.createDataFrame(batch) if engine == "spark" else batch)
    assert rows(c.read(), ("id", "p", "amount")) == [(1, "x", 9.0), (2, "x", 3.0)]
