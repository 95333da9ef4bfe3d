"""The `hudi` package (Apache Hudi's Rust reader) reads every table lakesdk writes with
identical rows: snapshot, as of each instant, and incrementally between each pair."""

from __future__ import annotations

import itertools

import pandas as pd
import pyarrow as pa
import pytest

hudi = pytest.importorskip("hudi")

pytestmark = [pytest.mark.spark, pytest.mark.interop]


@pytest.fixture(params=["local", "spark"])
def lake(request, tmp_path, spark):
    import lakesdk as lk
    return lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine=request.param))

DATA_COLS = ["uuid", "city", "ts", "fare"]


def hudi_rows(path: str, *, as_of: str | None = None, start: str | None = None, end: str | None = None,
              cols=DATA_COLS) -> list[tuple]:
    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    opts = hudi.HudiReadOptions()
    if start is not None or end is not None:
        opts = opts.with_query_type(hudi.HudiQueryType.Incremental)
        opts = opts.with_start_timestamp(start or "19700101000000000")
        if end is not None:
            opts = opts.with_end_timestamp(end)
    elif as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    batches = table.read(opts)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return []
    t = pa.Table.from_batches(batches).select(cols)
    return sorted(tuple(r.values()) for r in t.to_pylist())


def our_rows(query, cols=DATA_COLS) -> list[tuple]:
    t = query.to_arrow().select(cols)
    return sorted(tuple(r.values()) for r in t.to_pylist())


def check_all(t, results):
    """Snapshot, as of each instant, incremental between each pair: lakesdk == hudi."""
    path = t.path
    assert our_rows(t.read()) == hudi_rows(path)
    for r in results:
        assert our_rows(t.as_of(r.instant)) == hudi_rows(path, as_of=r.instant), f"as of {r.instant}"
    bounds = [None] + [r.completed for r in results]
    for a, b in itertools.combinations(bounds, 2):
        assert our_rows(t.incremental(a, b)) == hudi_rows(path, start=a, end=b), f"incremental ({a}, {b}]"
    # the reader agrees with our timeline too
    ht = hudi.HudiTableBuilder.from_base_uri(path).build()
    commits = [i.timestamp for i in ht.get_timeline().get_completed_commits()]
    replaces = [i.timestamp for i in ht.get_timeline().get_completed_replacecommits()]
    assert sorted(commits + replaces) == [r.instant for r in results]


def df(rows):
    return pd.DataFrame(rows, columns=DATA_COLS)


@pytest.mark.parametrize("partition_by", ["city", None])
def test_hudi_reads_every_step(lake, partition_by):
    t = lake.create_table(f"trips_{partition_by or 'np'}", key="uuid", partition_by=partition_by, ordering="ts")
    results = []
    results.append(t.insert(df([(f"u{i}", ["sf", "nyc", "la"][i % 3], 1, float(i)) for i in range(12)])))
    check_all(t, results)
    results.append(t.upsert(df([("u1", "nyc", 5, 50.0), ("u2", "la", 0, -1.0), ("u20", "sf", 1, 20.0)])))
    check_all(t, results)
    results.append(t.delete(["u3", "u4", "u20"]))
    check_all(t, results)
    results.append(t.insert_overwrite(df([("z1", "sf", 1, 1.0), ("z2", "sf", 1, 2.0)])))
    check_all(t, results)
    results.append(t.bulk_insert(df([("b1", "la", 1, 1.0)])))
    check_all(t, results)
    assert len(our_rows(t.read())) == len(hudi_rows(t.path)) > 0


def test_hudi_reads_schema_and_types(lake):
    import datetime as dt
    t = lake.create_table("types", key="id", partition_by="day", ordering="ts")
    data = pa.table({
        "id": pa.array([1, 2], pa.int64()), "day": ["2026-11-01", "2026-11-02"], "ts": pa.array([1, 2], pa.int32()),
        "amount": pa.array([1.5, 2.5], pa.float64()), "flag": [True, False], "tiny": pa.array([1, 2], pa.int8()),
        "when": pa.array([dt.datetime(2026, 11, 1, 12), None], pa.timestamp("us", tz="UTC")),
        "date": pa.array([dt.date(2026, 11, 1), dt.date(2026, 11, 2)]),
        "price": pa.array([pa_decimal("12.34"), pa_decimal("0.01")], pa.decimal128(10, 2)),
        "tags": pa.array([["a", "b"], []], pa.list_(pa.string())),
    })
    t.upsert(data)
    ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
    theirs = pa.Table.from_batches(ht.read()).sort_by("id")
    ours = t.read().to_arrow().sort_by("id")
    for c in data.column_names:
        assert theirs.column(c).to_pylist() == ours.column(c).to_pylist(), c
    assert [f.name for f in ht.get_schema()] == data.column_names
    assert [f.name for f in ht.get_schema_with_meta_fields()][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                              "_hoodie_partition_path", "_hoodie_file_name"]


def pa_decimal(s: str):
    import decimal
    return decimal.Decimal(s)
