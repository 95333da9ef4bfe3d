"""Merge-on-read tables: log blocks on write, merged snapshot reads, read-optimized reads,
and the merge-on-read tables Apache Hudi wrote."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakesdk as lk

from ..conftest import conformance_table
from ..helpers import batch as make_batch
from ..helpers import data_files
from ..interop.test_conformance import FIRST3, ROWS4, rows

pytestmark = pytest.mark.spark


@pytest.fixture(params=[("local", "parquet"), ("local", "avro"), ("spark", "parquet")],
                ids=["local-parquet", "local-avro", "spark-parquet"])
def lake(request, tmp_path, spark):
    """Both engines, and both log data block formats (hoodie.logfile.data.block.format)."""
    engine, block_format = request.param
    return lk.Lake(str(tmp_path / "lake"), spark=spark,
                   options=lk.TableOptions(engine=engine, log_block_format=block_format))


# -- Hudi-written merge-on-read tables -----------------------------------------------------------
MOR = ["v6_nonpartitioned", "v6_complexkeygen_hivestyle", "v6_simplekeygen_nonhivestyle",
       "v6_simplekeygen_hivestyle_no_metafields"]


@pytest.mark.parametrize("name", MOR)
def test_conformance_mor_snapshot(conformance_dir, name):
    t = lk.open_table(conformance_table(conformance_dir, f"sample_table/mor/parquet/{name}"))
    assert t.config.is_mor
    assert rows(t.read()) == ROWS4
    if name != "v6_simplekeygen_hivestyle_no_metafields":
        assert rows(t.as_of(t.timeline.commits[0].requested)) == FIRST3


def test_conformance_mor_read_optimized(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/mor/parquet/v6_nonpartitioned"))
    q = t.read(read_optimized=True)
    assert all(not s.log_files for s in q.plan().slices)
    assert rows(q) == [(1, "Alice", True), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True)]
    assert any(s.log_files for s in t.read().plan().slices)


def test_conformance_mor_filters(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/mor/parquet/v6_complexkeygen_hivestyle"))
    assert rows(t.read(where="byteField >= 10 AND byteField < 20 AND shortField != 100")) == [
        (1, "Alice", False), (3, "Carol", True)]
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle"))
    assert rows(t.read(where="byteField = 10")) == [(1, "Alice", False), (3, "Carol", True)]


def test_conformance_mor_overwrite_incremental(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable"))
    c1, c2, c3 = (i.requested for i in t.timeline.commits)
    assert rows(t.incremental(None, c1)) == FIRST3
    assert rows(t.incremental(c1, c2)) == [(1, "Alice", False), (4, "Diana", True)]
    assert rows(t.incremental(c2, c3)) == [(4, "Diana", False)]
    assert rows(t.incremental(c1, None)) == [(4, "Diana", False)]
    assert rows(t.incremental(c3, None)) == []
    assert rows(t.read()) == [(4, "Diana", False)]


def _fares(t, query=None) -> dict[str, float]:
    df = (query or t.read()).to_pandas()
    return dict(zip(df.rider, df.fare))


def test_conformance_trips_update(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "quickstart_trips_table/mor/avro/v6_trips_8i1u"))
    now = _fares(t)
    assert len(now) == 8 and now["rider-D"] == 25.0
    first = _fares(t, t.as_of(t.timeline.commits[0].requested))
    assert first["rider-D"] == pytest.approx(33.9)


def test_conformance_trips_delete(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "quickstart_trips_table/mor/avro/v6_trips_8i3d"))
    now = _fares(t)
    assert len(now) == 5 and not {"rider-A", "rider-C", "rider-D"} & set(now)
    first = _fares(t, t.as_of(t.timeline.commits[0].requested))
    assert [round(first[r], 2) for r in ("rider-A", "rider-C", "rider-D")] == [19.10, 27.70, 33.90]


def test_conformance_mor_through_spark(conformance_dir, spark):
    t = lk.open_table(conformance_table(conformance_dir, "quickstart_trips_table/mor/avro/v6_trips_8i3d"), spark=spark)
    assert t.read().to_spark().count() == 5


@pytest.mark.parametrize("typ", [pa.decimal64(12, 2), pa.decimal256(20, 2), pa.binary(4)], ids=str)
def test_merged_slices_of_types_spark_takes_after_a_cast_read_to_spark(tmp_path, spark, typ):
    """Merged merge-on-read slices reach Spark from Arrow tasks: a column of a type Spark's
    Arrow exchange refuses as it is (32/64/256-bit decimals, fixed-size binary) is cast to
    one it takes, with the same values."""
    from decimal import Decimal
    value = (lambda i: Decimal(i).scaleb(-2)) if pa.types.is_decimal(typ) else (lambda i: i.to_bytes(4, "big"))
    t = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", ordering="ts", table_type="mor")
    t.bulk_insert(pa.table({"id": pa.array(range(10), pa.int64()), "ts": pa.array([1] * 10, pa.int64()),
                            "v": pa.array([value(i) for i in range(10)], typ)}))
    t.upsert(pa.table({"id": pa.array(range(5), pa.int64()), "ts": pa.array([2] * 5, pa.int64()),
                       "v": pa.array([value(100 + i) for i in range(5)], typ)}))
    got = {r["id"]: r["v"] for r in t.read().to_spark().collect()}
    assert got == {i: value(100 + i) if i < 5 else value(i) for i in range(10)}


# -- lakesdk merge-on-read writes ---------------------------------------------------------------
def trips(rows):
    return pd.DataFrame(rows, columns=["uuid", "city", "ts", "fare"])


def snap(q) -> dict[str, tuple]:
    return {r.uuid: (r.city, r.ts, r.fare) for r in q.to_pandas().itertuples()}


def test_mor_writes_logs_and_merges_by_event_time(lake):
    t = lake.create_table("m", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    r1 = t.upsert(trips([(f"u{i}", "ab"[i % 2], 1, float(i)) for i in range(6)]))
    assert r1.action == "deltacommit" and r1.inserted == 6
    r2 = t.upsert(trips([("u0", "a", 5, 50.0), ("u1", "b", 0, 51.0), ("u9", "a", 1, 59.0)]))
    r3 = t.delete(["u2"])
    assert r3.deleted == 1
    logs = [f for f in t.storage.find("") if ".log." in f.path]
    assert logs, "updates and deletes go to log files"
    s = snap(t.read())
    assert s["u0"] == ("a", 5, 50.0)          # newer ts wins
    assert s["u1"] == ("b", 1, 1.0)           # older ts loses
    assert "u2" not in s and s["u9"] == ("a", 1, 59.0) and len(s) == 6
    ro = snap(t.read(read_optimized=True))
    assert ro["u0"] == ("a", 1, 0.0) and "u2" in ro  # base files only
    assert snap(t.as_of(r1.instant)) == {f"u{i}": ("ab"[i % 2], 1, float(i)) for i in range(6)}
    assert sorted(snap(t.incremental(start=r1.completed))) == ["u0", "u9"]
    spark_rows = t.read().to_spark().toPandas()
    assert {r.uuid: (r.city, r.ts, r.fare) for r in spark_rows.itertuples()} == s
    assert [i.action for i in t.timeline] == ["deltacommit"] * 3
    md = t.inspect.commit_metadata(r2.instant)
    logstat = [w for w in md.write_stats if w.logFiles]
    assert logstat and logstat[0].baseFile.endswith(".parquet") and logstat[0].path.split("/")[-1].startswith(".")


def test_mor_delete_then_reinsert_and_commit_time(lake):
    t = lake.create_table("c", key="id", table_type="mor")   # no ordering field: commit-time ordering
    assert t.config.merge_mode == "COMMIT_TIME_ORDERING"
    t.upsert(pd.DataFrame({"id": [1, 2], "v": ["a", "b"]}))
    t.upsert(pd.DataFrame({"id": [1], "v": ["a2"]}))
    t.delete([2])
    t.upsert(pd.DataFrame({"id": [2], "v": ["b3"]}))
    got = dict(zip(*t.read().to_pandas()[["id", "v"]].values.T))
    assert got == {1: "a2", 2: "b3"}


def test_hudi_reader_agrees_on_mor(lake):
    hudi = pytest.importorskip("hudi")
    t = lake.create_table("agree", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    results = [t.upsert(trips([(f"u{i}", "ab"[i % 2], 1, float(i)) for i in range(8)]))]
    results.append(t.upsert(trips([("u0", "a", 5, 50.0), ("u1", "b", 0, 51.0), ("u10", "a", 1, 10.0)])))
    results.append(t.delete(["u2", "u3"]))
    results.append(t.upsert(trips([("u2", "a", 9, 2.5)])))

    def theirs(**kw):
        ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
        opts = hudi.HudiReadOptions()
        if "as_of" in kw:
            opts = opts.with_as_of_timestamp(kw["as_of"])
        if kw.get("ro"):
            opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
        b = ht.read(opts)
        tab = pa.Table.from_batches(b) if b else None
        return [] if tab is None else sorted((r["uuid"], r["city"], r["ts"], r["fare"]) for r in tab.to_pylist())

    def ours(q):
        return sorted((r.uuid, r.city, r.ts, r.fare) for r in q.to_pandas().itertuples())

    assert ours(t.read()) == theirs(), "snapshot"
    # read-optimized reads base files only: u2, deleted in a log and re-inserted into a new
    # file group, is there twice (as in Hudi) until a compaction
    ro = ours(t.read(read_optimized=True))
    assert ro == theirs(ro=True) and [r[0] for r in ro].count("u2") == 2
    for r in results:
        assert ours(t.as_of(r.instant)) == theirs(as_of=r.instant), f"as of {r.instant}"


def test_compaction_keeps_rows_before_during_and_after(lake):
    hudi = pytest.importorskip("hudi")
    t = lake.create_table("cmp", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t.upsert(trips([(f"u{i}", "ab"[i % 2], 1, float(i)) for i in range(10)]))
    t.upsert(trips([("u0", "a", 2, 100.0), ("u1", "b", 2, 101.0)]))
    t.delete(["u3"])
    before = snap(t.read())
    plan = t.maintenance.plan_compaction()
    assert len(plan) == 2 and plan.log_files == 3 and "CompactionPlan('cmp' (not scheduled)" in repr(plan)
    scheduled = t.maintenance.schedule_compaction()
    assert scheduled.instant and t.maintenance.pending_compactions()[0].requested == scheduled.instant
    assert snap(t.read()) == before                       # during: pending compaction is invisible
    t.upsert(trips([("u4", "a", 3, 44.0)]))               # a write while the compaction is pending
    during = snap(t.read())
    assert during["u4"] == ("a", 3, 44.0)
    res = t.maintenance.compact()
    assert res.operation == "compact" and res.files == 2 and res.instant == scheduled.instant
    assert snap(t.read()) == during                       # after: same rows
    ro = snap(t.read(read_optimized=True))
    assert ro["u0"] == ("a", 2, 100.0) and "u3" not in ro  # the compacted base files hold the merged rows
    assert ro["u4"] == ("a", 1, 4.0)                       # the later log is not part of the compaction
    assert t.timeline.completed[-1].action == "compaction" or any(i.action == "compaction" for i in t.timeline)
    ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
    theirs = {r["uuid"]: (r["city"], r["ts"], r["fare"]) for r in pa.Table.from_batches(ht.read()).to_pylist()}
    assert theirs == during
    assert t.maintenance.compact() is not None  # the later log can be compacted too
    assert snap(t.read()) == during and not any(s.log_files for s in t.read().plan().slices)
    assert t.maintenance.compact() is None


def test_inline_compaction_every_n_deltacommits(lake):
    t = lake.create_table("inl", key="id", ordering="ts", table_type="mor")
    t = t.with_options(lk.TableOptions(compact_every=2, engine=t.options.engine))
    r1 = t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    assert r1.compaction is None
    r2 = t.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": ["a2"]}))
    assert r2.compaction is not None and "then compacted" in repr(r2)
    assert dict(zip(*t.read(read_optimized=True).to_pandas()[["id", "v"]].values.T)) == {1: "a2", 2: "b"}


def test_spark_reads_and_merges_mor_slices_with_millisecond_timestamps(tmp_path, spark):
    lake_ = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="spark"))
    t = lake_.create_table("ms", key="k", ordering="ts", table_type="mor")
    s = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("at", pa.timestamp("ms", "Asia/Kolkata")),
                   ("n", pa.struct([("q", pa.timestamp("ms"))])), ("l", pa.list_(pa.timestamp("ms", "UTC")))])
    t.upsert(pa.table({"k": ["a", "b"], "ts": [1, 1], "at": [1, 2], "n": [{"q": 5}, None], "l": [[7], []]}, schema=s))
    t.upsert(pa.table({"k": ["a"], "ts": [2], "at": [3], "n": [{"q": 6}], "l": [[8, 9]]}, schema=s))
    assert any(s_.log_files for s_ in t.read().plan().slices)               # a merged slice goes through Spark
    got = {r["k"]: r for r in t.read().to_spark().collect()}
    assert got["a"]["at"] == pd.Timestamp(3, unit="ms").to_pydatetime()   # the session time zone is UTC
    assert got["a"]["n"]["q"] == pd.Timestamp(6, unit="ms").to_pydatetime()
    assert [v.microsecond for v in got["a"]["l"]] == [8000, 9000]
    assert t.read().to_arrow().schema == s                                  # the Arrow path keeps milliseconds
    src = pa.table({"k": ["a", "c"], "ts": [3, 1], "at": [10, 11], "n": [{"q": 12}, {"q": 13}], "l": [[14], [15]]},
                   schema=s)
    res = t.merge(src, on="k").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (res.updated, res.inserted) == (1, 1)
    out = t.read().to_arrow().sort_by("k")
    assert out.schema == s
    assert out.column("at").cast(pa.int64()).to_pylist() == [10, 2, 11]


def test_snapshot_merges_only_the_keys_the_logs_touch(tmp_path):
    """Base rows without a log version pass through untouched, in base file order; the winners
    of touched keys (a deleted key has none) and keys new in the logs follow them (a snapshot
    read promises no row order beyond that).  A custom merger sees only the versions of
    touched keys."""
    seen: list[set] = []

    def latest(versions: pa.Table) -> pa.Table:
        seen.append(set(versions.column("_hoodie_record_key").to_pylist()))
        keys = versions.column("_hoodie_record_key").to_pylist()
        seq = versions.column("_lk_seq").to_pylist()
        op = versions.column("_lk_op").to_pylist()
        best: dict = {}
        for i, k in enumerate(keys):
            if k not in best or seq[i] >= seq[best[k]]:
                best[k] = i
        keep = sorted(i for i in best.values() if op[i] == 0)
        return versions.take(pa.array(keep, pa.int64()))

    lk.register_merger("latest_for_slice_test", latest)
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    for mode, kw in (("event", {"ordering": "ts"}), ("custom", {"merge_mode": "custom", "merger": "latest_for_slice_test"})):
        t = lake.create_table(f"order_{mode}", key="id", table_type="mor", **kw)
        t.bulk_insert(pa.table({"id": list(range(10)), "ts": [1] * 10, "v": [f"b{i}" for i in range(10)]}))
        t.upsert(pa.table({"id": [7, 3, 42], "ts": [2, 2, 2], "v": ["u7", "u3", "n42"]}))
        t.delete([5])
        seen.clear()
        got = t.read().to_arrow()
        rows = list(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))
        assert sorted(r for r in rows if r[0] != 42) == [(0, "b0"), (1, "b1"), (2, "b2"), (3, "u3"), (4, "b4"),
                                                         (6, "b6"), (7, "u7"), (8, "b8"), (9, "b9")]
        assert [r for r in rows if r[0] not in (3, 7, 42)] == [(0, "b0"), (1, "b1"), (2, "b2"), (4, "b4"),
                                                               (6, "b6"), (8, "b8"), (9, "b9")]
        assert (42, "n42") in rows
        if mode == "custom":
            assert seen and all(keys <= {"3", "5", "7", "42"} for keys in seen)


def test_split_touched_by_an_integer_key_field_matches_the_record_key_split():
    """A simple key that is the text of an integer field: base rows are matched to the log
    keys by the field (no record key column read) exactly as by the record key; log keys that
    are not that text ("007") are refused, and the read falls back to the record key."""
    from lakesdk.engine.slice_reader import _tag, split_touched
    from lakesdk.merge.ordering import KEY, OP_UPSERT

    base = pa.table({KEY: ["1", "2", "3", "4"], "id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]})
    log = _tag(pa.table({KEY: ["3", "9", "1"], "id": pa.array([3, 9, 1], pa.int64()), "v": ["x", "y", "z"]}), 1, OP_UPSERT)
    by_key = split_touched(base, [log])
    by_field = split_touched(base.drop_columns([KEY]), [log], "id")
    assert by_key[2] == by_field[2] == 3
    assert by_field[0].column("id").to_pylist() == by_key[0].column("id").to_pylist() == [2, 4]
    assert by_field[1].select([KEY, "id", "v"]).equals(by_key[1].select([KEY, "id", "v"]))
    odd = _tag(pa.table({KEY: ["007"], "id": pa.array([7], pa.int64()), "v": ["q"]}), 1, OP_UPSERT)
    with pytest.raises(pa.ArrowInvalid):
        split_touched(base.drop_columns([KEY]), [odd], "id")


def test_read_matches_by_the_record_key_where_log_keys_are_not_the_key_fields_text(tmp_path, monkeypatch):
    """A merge-on-read read matches base rows and log versions by the integer key field; a
    slice whose delete-block keys are not that field's text is read again by the record key,
    with the same rows."""
    import lakesdk.engine.slice_reader as slice_reader

    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts", table_type="mor", partition_by="p")
    n = 3000
    t.bulk_insert(pa.table({"id": list(range(n)), "ts": [1] * n, "p": [f"p{i % 3}" for i in range(n)],
                            "v": [f"b{i}" for i in range(n)]}))
    t.upsert(pa.table({"id": list(range(0, n, 7)), "ts": [2] * len(range(0, n, 7)),
                       "p": [f"p{i % 3}" for i in range(0, n, 7)], "v": [f"u{i}" for i in range(0, n, 7)]}))
    t.delete(list(range(3, n, 11)))
    expected = t.read().to_arrow().sort_by("id")

    def refuse(keys, key_type):
        raise pa.ArrowInvalid("record keys that are not the text of the key field")

    monkeypatch.setattr(slice_reader, "keys_as", refuse)
    got = t.read().to_arrow().sort_by("id")
    assert got.equals(expected)
    ids = set(range(n)) - set(range(3, n, 11))
    assert got.column("id").to_pylist() == sorted(ids)
    assert {i: v for i, v in zip(got.column("id").to_pylist(), got.column("v").to_pylist())} == {
        i: (f"u{i}" if i % 7 == 0 else f"b{i}") for i in ids}


def test_base_rows_flagged_deleted_read_alike_on_every_path(tmp_path, monkeypatch):
    """A base row flagged ``_hoodie_is_deleted`` (written by another writer: Hudi's row-writer
    bulk insert stores such rows as they are) is a deleted record on every read path (the
    whole-table read, a limited read slice by slice, a filtered read, a count), whether its
    slice has log files or not, whether any slice of the table has, and as of an instant before
    its slice's log files; a later write of the key inserts it afresh."""
    from lakesdk.table import write_input
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    with monkeypatch.context() as m:   # lakesdk's writers take flagged rows for deletes: store them as data
        m.setattr(write_input, "_flagged_as_deletes", lambda arrow, operation: arrow)
        first = t.upsert(pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"], "ts": [1, 1, 1, 9], "v": [1, 2, 3, 4],
                                   "_hoodie_is_deleted": [False, True, False, True]}))
    stored = pa.concat_tables([pq.read_table(f, columns=["id", "_hoodie_is_deleted"]) for f in data_files(t)])
    assert sorted(stored.to_pylist(), key=lambda r: r["id"])[1] == {"id": 2, "_hoodie_is_deleted": True}
    # no slice has log files yet: the flagged rows are dropped all the same, and counted out
    assert sorted(t.read().to_arrow().column("id").to_pylist()) == [1, 3] and t.read().count() == 2
    assert sorted(t.read(limit=10).to_arrow().column("id").to_pylist()) == [1, 3]
    t.upsert(pa.table({"id": [3], "p": ["b"], "ts": [2], "v": [33], "_hoodie_is_deleted": [False]}))

    def reads():
        out = []
        for q in (t.read(), t.read(limit=100), t.read(where="v > 0")):
            got = q.to_arrow()
            out.append(sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())))
        return out

    assert reads() == [[(1, 1), (3, 33)]] * 3
    assert t.read().count() == 2
    # as of the first commit: the slice of key 4 has a log file, none of whose versions is visible
    then = t.read(as_of=first.instant).to_arrow()
    assert sorted(zip(then.column("id").to_pylist(), then.column("v").to_pylist())) == [(1, 1), (3, 3)]
    t.upsert(pa.table({"id": [4], "p": ["b"], "ts": [5], "v": [44], "_hoodie_is_deleted": [False]}))
    assert reads() == [[(1, 1), (3, 33), (4, 44)]] * 3


def test_whole_table_read_merges_every_slice_however_the_scan_and_the_merges_are_cut(tmp_path_factory):
    """The whole-table merge-on-read read merges slices while the base files are still being
    scanned, in groups of about ``_MERGE_BATCH_ROWS`` versions: generated upserts and deletes
    over several partitions read the same (against a dict model) with the scan cut into
    batches of a few rows and merges of one slice or of many, with slices matched by the
    integer key field and (``by_key``: delete blocks whose keys are refused as the field's
    text) slices matched by the record key in the same merges."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import lakesdk.engine.read as read_mod
    import lakesdk.engine.slice_reader as slice_reader

    def refuse(keys, key_type):
        raise pa.ArrowInvalid("record keys that are not the text of the key field")

    op = st.tuples(st.sampled_from(["upsert", "delete"]),
                   st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=12))

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ops=st.lists(op, min_size=1, max_size=5), batch_rows=st.sampled_from([1, 3, 1000]),
           merge_rows=st.sampled_from([2, 64, 32_768]), by_key=st.booleans())
    def check(ops, batch_rows, merge_rows, by_key):
        lake = lk.Lake(str(tmp_path_factory.mktemp("lake")), options=lk.TableOptions(engine="local"))
        t = lake.create_table("t", key="id", ordering="ts", table_type="mor", partition_by="p")
        t.bulk_insert(pa.table({"id": list(range(0, 40, 2)), "ts": [0] * 20, "p": [f"p{i % 3}" for i in range(0, 40, 2)],
                                "v": [f"b{i}" for i in range(0, 40, 2)]}))
        model = {i: (0, f"b{i}") for i in range(0, 40, 2)}
        for n, (kind, batch) in enumerate(ops):
            last = {k: ts for k, ts in batch}     # one version per key and batch
            if kind == "upsert":
                t.upsert(pa.table({"id": list(last), "ts": list(last.values()), "p": [f"p{k % 3}" for k in last],
                                   "v": [f"u{n}_{k}" for k in last]}))
                for k, ts in last.items():
                    if k not in model or ts >= model[k][0]:
                        model[k] = (ts, f"u{n}_{k}")
            else:
                t.delete(list(last))
                for k in last:
                    model.pop(k, None)
        original = read_mod._scan_tagged

        def in_pieces(*a, **kw):
            for path, batch in original(*a, **kw):
                for i in range(0, batch.num_rows, batch_rows):
                    yield path, batch.slice(i, batch_rows)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(read_mod, "_scan_tagged", in_pieces)
            m.setattr(slice_reader, "_MERGE_BATCH_ROWS", merge_rows)
            if by_key:
                m.setattr(slice_reader, "keys_as", refuse)
            got = t.read().to_arrow()
        assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == \
            sorted((k, v) for k, (_, v) in model.items())
    check()


def test_log_files_of_a_group_without_base_file_make_one_slice(lake):
    """Hudi writes file groups of log files only (inserts into log files: the metadata table's
    record index, bucket-indexed tables): every log file of such a group belongs to the slice
    the first one began, as Hudi's HoodieFileGroup adds them, not each to a slice of its own
    (the read would see the last delta commit's records only)."""
    from lakesdk.read.view import FileSystemView
    t = lake.create_table("log_only", key="id", ordering="ts", table_type="mor")
    for i in range(3):
        t.upsert(make_batch(i))
    store = t.context.store
    files = [f for f in FileSystemView(t.storage, t.config, store, store.load())._files
             if f.path.rsplit("/", 1)[-1].startswith(".")]          # the log files: as if no base file were written
    assert len(files) == 2
    view = FileSystemView(t.storage, t.config, store, store.load(), files=files)
    [group] = view.file_groups
    assert len(group.slices) == 1 and len(group.latest.log_files) == 2
