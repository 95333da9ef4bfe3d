"""Spark's own read API: ``spark.read.format("lakesdk")`` (a Python data source) returns the
rows ``t.read().to_spark()`` returns, for snapshot, time-travel and incremental reads of
copy-on-write and merge-on-read tables; pushed partition filters read fewer file slices;
``spark.readStream.format("lakesdk")`` picks up commits in order."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

import lakesdk as lk

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")


def _rows(df, drop_file_name: bool = False) -> list[tuple]:
    cols = [c for c in df.columns if not (drop_file_name and c in ("_hoodie_file_name", "_hoodie_commit_seqno"))]
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=repr)


def _batch(ids, ts, city=None, day=None) -> pd.DataFrame:
    ids = list(ids)
    return pd.DataFrame({"id": ids, "city": city or [("sf", "nyc", "la")[i % 3] for i in ids],
                         "day": day or [dt.date(2024, 1, 1 + i % 2) for i in ids],
                         "ts": [ts] * len(ids), "v": [float(i * 10 + ts) for i in ids]})


@pytest.fixture
def pushdown(spark):
    """Spark's Python data source filter pushdown on for the test."""
    key = "spark.sql.python.filterPushdown.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    yield
    spark.conf.set(key, before)


@pytest.fixture(params=["cow", "mor"])
def table(request, lake):
    t = lake.create_table(f"src_{request.param}", key="id", partition_by="city", ordering="ts",
                          table_type=request.param)
    results = [t.upsert(_batch(range(0, 9), 1)),
               t.upsert(_batch([1, 2, 4, 9, 10], 2)),
               t.delete([3, 10]),
               t.upsert(_batch([0, 5, 11], 3))]
    return t, results


def _source(spark, t, **options):
    r = spark.read.format("lakesdk")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(t.path)


def test_registered_on_first_use_and_by_one_call(spark, table):
    t, _ = table
    assert lk.spark.register(spark) is spark
    df = _source(spark, t)
    assert df.columns == t.read().to_spark().columns == ["id", "city", "day", "ts", "v"]


def test_snapshot_and_time_travel_match_to_spark(spark, table):
    t, results = table
    if t.table_type == "MERGE_ON_READ":
        assert t.read().plan().merges      # log files are merged in the tasks
    assert _rows(_source(spark, t)) == _rows(t.read().to_spark())
    assert _rows(_source(spark, t, meta_fields="true")) == _rows(t.read(meta_fields=True).to_spark())
    for r in results:
        for moment in {r.instant, r.completed}:
            assert _rows(_source(spark, t, **{"as.of.instant": moment})) == _rows(t.as_of(moment).to_spark()), moment
    assert _rows(_source(spark, t, as_of=results[1].instant)) == _rows(t.as_of(results[1].instant).to_spark())


def test_read_optimized_matches(spark, table):
    t, _ = table
    assert _rows(_source(spark, t, **{"hoodie.datasource.query.type": "read_optimized"})) == \
        _rows(t.read(read_optimized=True).to_spark())


def test_incremental_between_every_pair(spark, table):
    t, results = table
    times = [None] + [r.completed for r in results]
    for i, start in enumerate(times):
        for end in times[i + 1:]:
            opts = {"hoodie.datasource.query.type": "incremental",
                    "hoodie.datasource.read.begin.instanttime": start or "earliest",
                    "hoodie.datasource.read.end.instanttime": end}
            want = _rows(t.incremental(start, end).to_spark())
            assert _rows(_source(spark, t, **opts)) == want, (start, end)
    # lakesdk's short option names, open end, a closed range
    start = results[1].completed
    assert _rows(_source(spark, t, start=start)) == _rows(t.incremental(start).to_spark())
    # the _hoodie_* columns when asked for, as t.incremental(meta_fields=True): left out by default
    assert not set(META) & set(_source(spark, t, start=start).columns)
    assert _rows(_source(spark, t, start=start, meta_fields="true")) == \
        _rows(t.incremental(start, meta_fields=True).to_spark())
    assert _rows(_source(spark, t, start=start, start_inclusive="true")) == \
        _rows(t.incremental(start, start_inclusive=True).to_spark())


def _slices(spark, t, where, filters):
    """The file slices the data source plans for Spark's pushed ``filters`` (those of
    ``where``), and the filters it hands back to Spark (the reader's own calls, as Spark
    makes them); the DataFrame filtered by ``where``."""
    from lakesdk.table.spark_source import LakeSource
    df = _source(spark, t, filterPushdown="true").filter(where)
    src = LakeSource({"path": t.path, "filterPushdown": "true"})
    reader = src.reader(src.schema())
    returned = list(reader.pushFilters(filters))
    parts = reader.partitions()
    return df, sum(len(p.parts[0].slices) if p.parts else 0 for p in parts), returned


def test_partition_filter_pushdown_reads_fewer_slices(spark, table, pushdown):
    from pyspark.sql.datasource import EqualTo, GreaterThan, In
    t, _ = table
    all_slices = len(t.read().plan().slices)
    for where, flt in (("city = 'sf'", EqualTo(("city",), "sf")), ("city IN ('sf', 'la')", In(("city",), ("sf", "la")))):
        df, n, returned = _slices(spark, t, where, [flt])
        assert returned == []                  # applied exactly: pruned and filtered in the tasks
        assert 0 < n < all_slices
        assert n == len(t.read(where=where).plan().slices)
        assert _rows(df) == _rows(t.read(where=where).to_spark())
    df, n, returned = _slices(spark, t, "v > 20", [GreaterThan(("v",), 20.0)])   # a double: Spark evaluates it
    assert len(returned) == 1 and n == all_slices
    assert _rows(df) == _rows(t.read(where="v > 20").to_spark())


CONDITIONS = ("city = 'sf'", "city != 'sf'", "city > 'la'", "city <= 'nyc'", "id IN (1, 4, 7)", "id NOT IN (1, 4)",
              "id >= 5 AND city = 'la'", "day = DATE '2024-01-02'", "city LIKE 's%'", "city IS NOT NULL",
              "v IS NULL", "id = 1 OR city = 'la'", "NOT (city = 'sf')", "v > 20")


def test_pushed_filters_of_every_kind_give_spark_rows(spark, table, pushdown):
    t, _ = table
    for cond in CONDITIONS:   # a DataFrame per query: see the next test
        df = _source(spark, t, filterPushdown="true")
        assert _rows(df.filter(cond)) == _rows(t.read().to_spark().filter(cond)), cond


def test_one_dataframe_many_queries(spark, table, pushdown):
    """Without pushdown (the default) a DataFrame read once answers every later query right;
    pyspark 4.3 reuses the read planned for a pushed filter in a later scan of the same
    DataFrame that pushes nothing, which is why pushdown is opt-in."""
    t, _ = table
    df = _source(spark, t)
    want = _rows(t.read().to_spark())
    for cond in CONDITIONS:
        assert _rows(df.filter(cond)) == _rows(t.read().to_spark().filter(cond)), cond
        assert _rows(df) == want, cond


def test_column_selection(spark, table):
    t, _ = table
    assert _rows(_source(spark, t).select("v", "id")) == _rows(t.read(columns=["v", "id"]).to_spark())
    narrowed = _source(spark, t, columns="id, v")
    assert narrowed.columns == ["id", "v"]
    assert _rows(narrowed) == _rows(t.read(columns=["id", "v"]).to_spark())
    assert _rows(_source(spark, t, where="v > 20")) == _rows(t.read(where="v > 20").to_spark())


def test_empty_table_and_bad_options(spark, lake):
    t = lake.create_table("empty", key="id", partition_by="city", ordering="ts")
    t.upsert(_batch([1], 1))
    assert _source(spark, t, where="city = 'nowhere'").count() == 0
    with pytest.raises(Exception, match="snapshot, incremental or read_optimized"):
        _source(spark, t, **{"hoodie.datasource.query.type": "bogus"}).collect()
    # a misspelt option is refused, never read as a snapshot
    with pytest.raises(Exception, match="has no option 'as.of.instants'; did you mean 'as.of.instant'"):
        _source(spark, t, **{"as.of.instants": "20200101000000000"}).collect()
    # incremental bounds with an explicit snapshot query would read the whole snapshot: refused
    for kind in ("snapshot", "read_optimized"):
        with pytest.raises(Exception, match="bound incremental reads"):
            _source(spark, t, **{"hoodie.datasource.query.type": kind,
                                 "hoodie.datasource.read.begin.instanttime": "20200101000000000"}).collect()


def test_unknown_options_are_refused_with_the_closest_known_one():
    from lakesdk.exceptions import OptionsError
    from lakesdk.table.spark_source import check_options

    check_options({"path": "/x", "as.of.instant": "1", "hoodie.datasource.query.type": "snapshot"})
    with pytest.raises(OptionsError, match="did you mean 'hoodie.datasource.read.begin.instanttime'") as e:
        check_options({"hoodie.datasource.read.begin.instantime": "1"})
    assert e.value.key == "hoodie.datasource.read.begin.instantime"


def _batch_writer(out: str):
    """A ``foreachBatch`` function that appends each micro-batch, with its id as ``_batch``, to
    Parquet files under ``out``: on Spark Connect the function runs in a Python process of the
    server, which cannot hand rows to this one."""
    def write(df, batch_id, out=out):
        from pyspark.sql import functions as F
        df.withColumn("_batch", F.lit(batch_id)).write.mode("append").parquet(out)
    return write


def _written(out) -> list[dict]:
    """The rows :func:`_batch_writer` wrote, in no order."""
    import pyarrow.dataset as ds
    return ds.dataset(str(out), format="parquet").to_table().to_pylist() if out.exists() else []


def test_stream_picks_up_three_commits_in_order(spark, lake, tmp_path):
    t = lake.create_table("stream", key="id", partition_by="city", ordering="ts", table_type="mor")
    first = t.upsert(_batch([0, 1], 0))           # before the stream: skipped with startOffset=latest
    out = tmp_path / "batches"
    q = (spark.readStream.format("lakesdk").option("hoodie.datasource.streaming.startOffset", "latest")
         .option("meta_fields", "true").load(t.path).writeStream.foreachBatch(_batch_writer(str(out)))
         .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        q.processAllAvailable()
        commits = []
        for n, ids in enumerate(([2, 3], [1, 4], [5])):
            commits.append(t.upsert(_batch(ids, n + 1)))
            q.processAllAvailable()
    finally:
        q.stop()
    by_batch: dict[int, list[tuple]] = {}
    for r in _written(out):
        by_batch.setdefault(r["_batch"], []).append((r["_hoodie_commit_time"], r["id"], r["v"]))
    seen = [(b, sorted(rows)) for b, rows in sorted(by_batch.items())]
    assert first.instant not in {c for _, rows in seen for c, _, _ in rows}
    assert [sorted({c for c, _, _ in rows}) for _, rows in seen] == [[c.instant] for c in commits]
    assert [[(i, v) for _, i, v in rows] for _, rows in seen] == \
        [[(2, 21.0), (3, 31.0)], [(1, 12.0), (4, 42.0)], [(5, 53.0)]]


def test_stream_from_earliest_reads_what_is_there(spark, lake, tmp_path):
    t = lake.create_table("stream2", key="id", ordering="ts")
    t.upsert(_batch([0, 1], 0))
    t.upsert(_batch([1, 2], 1))
    out = tmp_path / "batches"
    q = (spark.readStream.format("lakesdk").load(t.path).writeStream.foreachBatch(_batch_writer(str(out)))
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    want = t.incremental().to_spark()
    got = [tuple(r[c] for c in want.columns) for r in _written(out)]
    assert sorted(got) == sorted(tuple(r) for r in want.collect())


CDC = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.query.incremental.format": "cdc"}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_cdc_format_returns_the_changes_query(spark, lake, table_type):
    t = lake.create_table(f"cdc_{table_type}", key="id", partition_by="city", ordering="ts", table_type=table_type,
                          cdc=True)
    first = t.upsert(_batch([0, 1, 2], 0))
    t.upsert(_batch([1, 3], 1))
    t.delete([2])
    df = spark.read.format("lakesdk").options(**CDC, **{"hoodie.datasource.read.begin.instanttime": first.completed}) \
        .load(t.path)
    assert df.columns == ["op", "ts_ms", "before", "after"]
    got = sorted((r.op, r.ts_ms, (r.after or r.before).id, r.before.v if r.before else None,
                  r.after.v if r.after else None) for r in df.collect())
    want = sorted((r["op"], r["ts_ms"], (r["after"] or r["before"])["id"], (r["before"] or {}).get("v"),
                   (r["after"] or {}).get("v")) for r in t.changes(first).to_arrow().to_pylist())
    assert got == want and sorted(g[0] for g in got) == ["d", "i", "u"]
    assert df.filter("op = 'd'").select("before.id").collect()[0].id == 2
    only = spark.read.format("lakesdk").options(**CDC, **{"hoodie.datasource.read.begin.instanttime": first.completed,
                                                          "where": "id = 2"}).load(t.path)
    assert [r.op for r in only.collect()] == ["d"]


def test_cdc_format_refuses_snapshot_options(spark, lake):
    t = lake.create_table("cdc_opts", key="id", ordering="ts")
    t.upsert(_batch([0], 0))
    with pytest.raises(Exception, match="incremental.format"):
        spark.read.format("lakesdk").options(**{**CDC, "hoodie.datasource.query.type": "snapshot"}).load(t.path) \
            .collect()
    with pytest.raises(Exception, match="incremental.format"):
        spark.read.format("lakesdk").option("hoodie.datasource.query.incremental.format", "json").load(t.path) \
            .collect()


def test_stream_of_changes(spark, lake, tmp_path):
    t = lake.create_table("cdc_stream", key="id", ordering="ts", cdc=True)
    t.upsert(_batch([0, 1], 0))
    out = tmp_path / "batches"
    q = (spark.readStream.format("lakesdk").option("hoodie.datasource.streaming.startOffset", "latest")
         .option("hoodie.datasource.query.incremental.format", "cdc").load(t.path)
         .writeStream.foreachBatch(_batch_writer(str(out)))
         .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        q.processAllAvailable()
        t.upsert(_batch([1, 2], 1))
        q.processAllAvailable()
        t.delete([0])
        q.processAllAvailable()
    finally:
        q.stop()
    rows = sorted((r["_batch"], r["op"], (r["after"] or r["before"])["id"]) for r in _written(out))
    batches = sorted({b for b, _, _ in rows})
    assert len(batches) == 2        # a micro-batch per commit, in commit order
    assert [sorted((op, i) for b, op, i in rows if b == batch) for batch in batches] == \
        [[("i", 2), ("u", 1)], [("d", 0)]]
