"""The merge builder against a pandas reference, and Hudi's MERGE INTO cases (payloads.md E11-E13)."""

from __future__ import annotations

import pandas as pd
import pytest

from lakesdk.table.merge import MergeConflictError

pytestmark = pytest.mark.spark


def target_rows():
    return pd.DataFrame({"id": list(range(10)), "city": ["x", "y"] * 5, "ts": [100] * 10,
                         "fare": [float(i) for i in range(10)]})


def source_rows():
    # each id in the city the target holds it in: a source row matches within its partition
    return pd.DataFrame({"id": list(range(5, 15)), "city": ["y", "x"] * 5,
                         "ts": [90, 110, 120, 100, 130, 140, 150, 160, 170, 180],
                         "fare": [-1.0, 51.0, 52.0, 53.0, 54.0, 55.0, -56.0, 57.0, 58.0, 59.0],
                         "deleted": [False, False, True, False, False, False, False, False, False, True]})


def reference(tgt: pd.DataFrame, src: pd.DataFrame) -> pd.DataFrame:
    """What the clauses below mean, computed row by row."""
    out = {r.id: r._asdict() for r in tgt.itertuples(index=False)}
    srcd = {r.id: r._asdict() for r in src.itertuples(index=False)}
    for k, s in srcd.items():
        if k in out:
            t = out[k]
            if s["deleted"]:
                del out[k]
            elif s["ts"] > t["ts"]:
                out[k] = {**t, "fare": s["fare"] * 2, "ts": s["ts"]}
        elif s["fare"] > 0:
            out[k] = {c: s[c] for c in ("id", "city", "ts", "fare")}
    for k in [k for k, t in out.items() if k not in srcd and t["city"] == "x" and k in set(tgt.id)]:
        del out[k]
    return pd.DataFrame(list(out.values()))[["id", "city", "ts", "fare"]].sort_values("id").reset_index(drop=True)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_clauses_match_pandas_reference(engine_lake, table_type):
    t = engine_lake.create_table("m", key="id", partition_by="city", ordering="ts", table_type=table_type)
    t.upsert(target_rows())
    before_groups = set(t.inspect.file_groups()["file_id"].to_pylist())
    res = (t.merge(source_rows(), on="id")
           .when_matched_delete(where="s.deleted")
           .when_matched_update(updates={"fare": "s.fare * 2", "ts": "s.ts"}, where="s.ts > t.ts")
           .when_not_matched_insert_all(where="s.fare > 0")
           .when_not_matched_by_source_delete(where="t.city = 'x'")
           .execute())
    got = t.read().to_pandas()[["id", "city", "ts", "fare"]].sort_values("id").reset_index(drop=True)
    want = reference(target_rows(), source_rows())
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # per clause: delete id 7; update 6 and 9 (5 has ts 90 and 8 ts 100: not newer); insert 10, 11, 13, 14
    # (12 has a negative fare; 14 is flagged deleted but unmatched, so the insert clause applies);
    # by-source delete 0, 2, 4 (city x, not in the source)
    assert [n for _, n in res.per_clause] == [1, 2, 4, 3]
    assert (res.updated, res.inserted, res.deleted, res.source_rows, res.unchanged) == (2, 4, 4, 10, 3)  # 5, 8, 12
    assert "MergeResult(10 source rows" in repr(res) and "<table>" in res._repr_html_()
    assert res.engine == t.context.engine() and (res.instant, res.completed) == (res.write.instant, res.write.completed)
    assert before_groups <= set(t.inspect.file_groups()["file_id"].to_pylist()) | before_groups


def _base_instants(t):
    """partition -> the base instant of its file group's latest slice."""
    fg = t.inspect.file_groups()
    return dict(zip(fg["partition"].to_pylist(), fg["base_instant"].to_pylist()))


def test_merge_touches_only_matched_file_groups(engine_lake):
    t = engine_lake.create_table("few", key="id", partition_by="city", ordering="ts")
    t.upsert(target_rows())
    groups = _base_instants(t)
    res = t.merge(pd.DataFrame({"id": [1], "city": ["y"], "ts": [200], "fare": [9.9]})).when_matched_update_all().execute()
    after = _base_instants(t)
    assert after["city=x"] == groups["city=x"]        # the partition without matched keys is not rewritten
    assert after["city=y"] == res.write.instant


def test_merge_rejects_duplicate_source_keys(engine_lake):
    t = engine_lake.create_table("d", key="id", ordering="ts")
    t.upsert(target_rows())
    src = pd.DataFrame({"id": [1, 1], "city": ["x", "x"], "ts": [1, 2], "fare": [1.0, 2.0]})
    with pytest.raises(MergeConflictError, match="several rows for the same key"):
        t.merge(src, on="id").when_matched_update_all().execute()
    assert len(t.timeline.commits) == 1


def test_hudi_merge_into_event_time_cases_e11_e13(engine_lake):
    """payloads.md E11-E13 on a merge-on-read event-time table."""
    t = engine_lake.create_table("e", key="id", ordering="ts", table_type="mor")
    rows = [(0, "A0", 0.0, 100), (1, "A", 10.0, 100), (2, "B", 20.0, 100), (3, "C", 30.0, 100),
            (4, "D", 40.0, 100), (5, "E", 50.0, 100), (6, "F", 60.0, 100)]
    t.upsert(pd.DataFrame(rows, columns=["id", "name", "price", "ts"]))
    dels = pd.DataFrame([(0, 100), (1, 101), (2, 99)], columns=["id", "ts"])
    res = t.merge(dels, on="id").when_matched_delete().execute()                       # E11
    assert sorted(t.read().to_pandas().id) == [2, 3, 4, 5, 6]                          # id 2 kept: lower ts
    # counts say what happened to the table: the delete of id 2 was ignored
    assert (res.deleted, res.skipped, res.per_clause[0][1]) == (2, 1, 3) and "skipped=1" in repr(res)
    upd = pd.DataFrame([(4, "D2", 45.0, 101), (5, "E2", 55.0, 99), (6, "F2", 65.0, 100)],
                       columns=["id", "name", "price", "ts"])
    res = t.merge(upd, on="id").when_matched_update_all().execute()                    # E12
    assert (res.updated, res.skipped) == (2, 1)                                        # id 5 has a lower ts
    got = {r.id: (r.name, r.price, r.ts) for r in t.read().to_pandas().itertuples()}
    assert got == {2: ("B", 20.0, 100), 3: ("C", 30.0, 100), 4: ("D2", 45.0, 101), 5: ("E", 50.0, 100),
                   6: ("F2", 65.0, 100)}
    ins = pd.DataFrame([(7, "G", 70.0, 99), (8, "H", 80.0, 99)], columns=["id", "name", "price", "ts"])
    t.merge(ins, on="id").when_not_matched_insert_all().execute()                      # E13
    assert sorted(t.read().to_pandas().id) == [2, 3, 4, 5, 6, 7, 8]


def test_merge_with_explicit_clauses_does_not_add_source_only_columns(engine_lake):
    """A source column that no clause writes stays out of the table (it became a column of
    nulls, and the next upsert without it was refused as lacking a table column)."""
    import pandas as pd
    t = engine_lake.create_table("m", key="id", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": [10, 20]}))
    src = pd.DataFrame({"id": [1, 3], "ts": [2, 2], "v": [11, 30], "flag": [True, False]})
    (t.merge(src, on="id").when_matched_update(updates={"v": "s.v", "ts": "s.ts"})
     .when_not_matched_insert(values={"id": "s.id", "ts": "s.ts", "v": "s.v"}).execute())
    assert t.refresh().schema.names[-3:] == ["id", "ts", "v"]
    t.upsert(pd.DataFrame({"id": [2], "ts": [3], "v": [21]}))
    assert sorted(t.read().to_pandas()[["id", "v"]].itertuples(index=False, name=None)) == [(1, 11), (2, 21), (3, 30)]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_all_clauses_with_a_source_lacking_table_columns_are_refused_unless_opted_in(engine_lake, table_type):
    from lakesdk.exceptions import MissingColumnError, OptionsError
    t = engine_lake.create_table("mc", key="id", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "fare": [10.0, 20.0], "note": ["a", "b"]}))
    src = pd.DataFrame({"id": [2, 3], "ts": [2, 2], "fare": [21.0, 30.0]})          # lacks "note"
    timeline = [(i.requested, i.action, i.state) for i in t.timeline]

    def rows():
        return {r.id: (r.fare, r.note) for r in t.read().to_pandas().itertuples()}

    for builder in (t.merge(src).when_not_matched_insert_all(),
                    t.merge(src).when_matched_update_all(),
                    t.merge(src).when_matched_update_all().when_not_matched_insert_all()):
        with pytest.raises(MissingColumnError, match=r"\['note'\]"):
            builder.execute()
    assert [(i.requested, i.action, i.state) for i in t.timeline] == timeline      # nothing written
    with pytest.raises(OptionsError):
        t.merge(src, missing_columns="drop")
    # explicit clauses name their columns: unaffected
    t.merge(src).when_matched_update(updates={"fare": "s.fare", "ts": "s.ts"}).execute()
    assert rows() == {1: (10.0, "a"), 2: (21.0, "b")}
    keep = pd.DataFrame({"id": [2, 3], "ts": [3, 3], "fare": [22.0, 30.0]})
    t.merge(keep, missing_columns="keep").when_matched_update_all().when_not_matched_insert_all().execute()
    assert rows() == {1: (10.0, "a"), 2: (22.0, "b"), 3: (30.0, None)}
    null = pd.DataFrame({"id": [1, 4], "ts": [4, 4], "fare": [11.0, 40.0]})
    t.merge(null, missing_columns="null").when_matched_update_all().when_not_matched_insert_all().execute()
    assert rows() == {1: (11.0, None), 2: (22.0, "b"), 3: (30.0, None), 4: (40.0, None)}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_as_first_commit_keeps_the_source_types_and_values(tmp_path, spark, table_type):
    import pyarrow as pa

    import lakesdk as lk
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("first", key="k", ordering="ts", table_type=table_type)
    s = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("a", pa.timestamp("us", "Asia/Tokyo")),
                   ("n", pa.struct([("q", pa.timestamp("us"))])), ("m", pa.timestamp("ms", "UTC")),
                   ("z", pa.timestamp("us")), ("sec", pa.timestamp("s", "UTC")), ("l", pa.list_(pa.timestamp("ms")))])
    src = pa.table({"k": ["a", "b"], "ts": [1, 1], "a": [1_000_001, None], "n": [{"q": 2_000_002}, None],
                    "m": [3003, 1], "z": [4_000_004, 0], "sec": [5, 6], "l": [[6006], []]}, schema=s)
    res = t.merge(src, on="k").when_not_matched_insert_all().execute()
    assert res.inserted == 2
    want = s.set(s.get_field_index("sec"), pa.field("sec", pa.timestamp("ms", "UTC")))   # normalized as on write
    out = t.read().to_arrow().sort_by("k")
    assert str(out.schema) == str(want)
    assert out.equals(src.cast(want))                                    # no value moved
    assert str(t.schema) == str(want)


def test_merge_source_types_are_normalized_as_a_write_normalizes_them(engine_lake):
    """Found by the model test: a merge handed Arrow nanosecond timestamps and unsigned integers
    to Spark as they were (digits below the microsecond dropped silently, uint64 values wrong)."""
    import pyarrow as pa

    import lakesdk as lk
    t = engine_lake.create_table("norm", key="k", ordering="ts")
    t.upsert(pa.table({"k": ["a"], "ts": [1], "at": pa.array([1_000], pa.timestamp("us")), "u": pa.array([1], pa.int64())}))
    src = pa.table({"k": ["a", "b"], "ts": [2, 2], "at": pa.array([5_000_001, 7_000_000], pa.timestamp("ns")),
                    "u": pa.array([2, 3], pa.uint32())})
    with pytest.raises(lk.IncompatibleSchemaError, match="nanosecond|microsecond"):
        t.merge(src, on="k").when_matched_update_all().when_not_matched_insert_all().execute()
    ok = src.set_column(2, "at", pa.array([5_000_000, 7_000_000], pa.timestamp("ns")))
    with pytest.raises(lk.IncompatibleSchemaError, match="uint64"):
        t.merge(ok.set_column(3, "u", pa.array([2, 3], pa.uint64())), on="k").when_not_matched_insert_all().execute()
    t.merge(ok, on="k").when_matched_update_all().when_not_matched_insert_all().execute()
    out = t.read().to_arrow().sort_by("k")
    assert out.column("at").type == pa.timestamp("us") and out.column("u").type == pa.int64()
    assert out.column("at").cast(pa.int64()).to_pylist() == [5_000, 7_000] and out.column("u").to_pylist() == [2, 3]


def test_merge_matches_a_source_row_within_its_own_partition_only(engine_lake):
    """A partitioned table's records are (partition, key), as Hudi's MERGE INTO tags them through
    its (non-global) index: a source row whose key the table holds in another partition matches
    nothing there.  Found by the model test: a when_matched_delete() of key f arriving in another
    partition deleted the f stored in partition ''."""
    import pyarrow as pa
    schema = pa.schema([("k", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])

    def src(p, ts, v):
        return pa.table({"k": ["f"], "p": [p], "ts": [ts], "v": [v]}, schema=schema)

    def rows():
        return sorted(tuple(r.values()) for r in t.read(columns=["k", "p", "ts", "v"]).to_arrow().to_pylist())

    t = engine_lake.create_table("parts", key="k", partition_by="p", ordering="ts")
    t.upsert(pa.table({"k": ["f", "g"], "p": ["", "a"], "ts": [0, 0], "v": [1, 2]}, schema=schema))
    res = t.merge(src("b", 1, 9)).when_matched_delete().execute()
    assert (res.deleted, res.unchanged, res.write) == (0, 1, None)
    res = t.merge(src("b", 1, 9)).when_matched_update_all().execute()
    assert (res.updated, res.inserted, res.unchanged, res.write) == (0, 0, 1, None)
    assert rows() == [("f", "", 0, 1), ("g", "a", 0, 2)]
    # '' and null share one partition folder (__HIVE_DEFAULT_PARTITION__): they match each other
    res = t.merge(src(None, 1, 7)).when_matched_update_all().execute()
    assert (res.updated, res.inserted) == (1, 0)
    assert rows() == [("f", None, 1, 7), ("g", "a", 0, 2)]
    res = t.merge(src("", 2, 0)).when_matched_delete().execute()
    assert res.deleted == 1 and rows() == [("g", "a", 0, 2)]
    # an unmatched source row is inserted in its own partition, next to the same key elsewhere
    t.merge(src("a", 1, 3).set_column(0, "k", pa.array(["g"]))).when_matched_update_all().execute()
    t.merge(src("b", 1, 4).set_column(0, "k", pa.array(["g"]))).when_not_matched_insert_all().execute()
    assert rows() == [("g", "a", 1, 3), ("g", "b", 1, 4)]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_source_rows_without_an_ordering_value_are_refused(engine_lake, spark, table_type):
    """Under event-time ordering a merge source row needs its ordering value, whichever clause
    takes it (Hudi's MERGE INTO writes the source rows as records and refuses a null one): refused
    before anything is written, for Arrow and Spark sources.  The model test's merge took such a
    delete as older than the stored row, lakesdk as applying."""
    import pyarrow as pa

    from lakesdk.exceptions import NullOrderingValueError
    t = engine_lake.create_table("nullord", key="id", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [5, 5], "v": [1, 2]}))
    t.upsert(pd.DataFrame({"id": [2], "ts": [6], "v": [20]}))                    # a log file on MOR
    timeline = [(i.requested, i.action, i.state) for i in t.timeline]
    arrow = pa.table({"id": [1, 3], "ts": pa.array([None, 7], pa.int64()), "v": [10, 30]})
    sdf = spark.createDataFrame([(1, None, 10), (3, 7, 30)], "id long, ts long, v long")
    for source in (arrow, sdf):
        for builder in (t.merge(source).when_matched_delete(),
                        t.merge(source).when_matched_update_all().when_not_matched_insert_all()):
            with pytest.raises(NullOrderingValueError, match=r"'ts' is null in 1 of 2 rows of the merge source"):
                builder.execute()
    # an insert clause that leaves the ordering field out would write it null: refused too
    ok = pa.table({"id": [3], "ts": [7], "v": [30]})
    with pytest.raises(NullOrderingValueError, match=r"null in 1 of 1 rows of the merge's updates and inserts"):
        t.merge(ok).when_not_matched_insert(values={"id": "s.id", "v": "s.v"}).execute()
    assert [(i.requested, i.action, i.state) for i in t.timeline] == timeline       # nothing written
    assert sorted(t.read().to_pandas()[["id", "ts", "v"]].itertuples(index=False, name=None)) == [(1, 5, 1), (2, 6, 20)]
    res = t.merge(ok.set_column(0, "id", pa.array([1]))).when_matched_delete().execute()
    assert res.deleted == 1 and sorted(t.read().to_pandas().id) == [2]


def _key_table(lake):
    t = lake.create_table("k", key="id", partition_by="city", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "city": ["x", "y"], "ts": [1, 1], "email": ["a", "b"], "nid": [10, 20]}))
    return t


@pytest.mark.parametrize("clauses", [
    lambda m: m.when_matched_update(updates={"id": "s.nid"}),
    lambda m: m.when_matched_update(updates={"city": "'z'"}),
    lambda m: m.when_not_matched_by_source_update(updates={"id": "t.id + 100"}),
    lambda m: m.when_matched_delete(where="s.ts > 5").when_matched_update(updates={"id": "s.nid", "ts": "s.ts"}),
], ids=["set-key", "set-partition", "by-source-set-key", "after-another-clause"])
def test_merge_changing_a_record_key_or_partition_is_refused_before_writing(engine_lake, clauses):
    """Hudi does not change a stored record's key or partition path: written, the change
    inserted a second record and kept the stored one (inserted=1 from a merge without an
    insert clause)."""
    import lakesdk as lk
    t = _key_table(engine_lake)
    before = t.refresh().timeline.completed
    src = pd.DataFrame({"id": [1], "city": ["x"], "ts": [2], "email": ["a"], "nid": [11]})
    with pytest.raises(lk.KeyChangeError) as err:
        clauses(t.merge(src, on="id")).execute()
    assert err.value.columns and "nothing was written" in str(err.value)
    t = t.refresh()
    assert t.timeline.completed == before
    assert sorted(t.read().to_pandas().id) == [1, 2]


def test_merge_update_all_on_another_column_with_another_key_is_refused(engine_lake):
    import lakesdk as lk
    t = _key_table(engine_lake)
    src = pd.DataFrame({"id": [5], "city": ["x"], "ts": [2], "email": ["a"], "nid": [11]})
    with pytest.raises(lk.KeyChangeError) as err:
        t.merge(src, on="email").when_matched_update_all().execute()
    assert err.value.columns == ("id",) and "1 -> 5" in str(err.value)
    assert sorted(t.refresh().read().to_pandas().id) == [1, 2]


def test_merge_clauses_that_keep_the_key_still_run(engine_lake):
    """Setting a key field to the value it has, or matching on another column with the same
    key, is no change: the merge updates in place."""
    t = _key_table(engine_lake)
    src = pd.DataFrame({"id": [1], "city": ["x"], "ts": [2], "email": ["a"], "nid": [11]})
    res = t.merge(src, on="id").when_matched_update(updates={"id": "s.id", "city": "t.city", "nid": "s.nid"}).execute()
    assert (res.updated, res.inserted) == (1, 0)
    res = t.merge(src.assign(ts=3, nid=12), on="email").when_matched_update_all().execute()
    assert (res.updated, res.inserted) == (1, 0)
    got = t.refresh().read().to_pandas().sort_values("id")
    assert list(got.id) == [1, 2] and list(got.nid) == [12, 20]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_all_clauses_with_source_structs_lacking_fields_are_refused_unless_null(engine_lake, table_type):
    """A source struct without some of the table's struct fields: the *_all clauses wrote nulls
    there silently; refused as a missing column is, unless missing_columns="null"."""
    import pyarrow as pa

    from lakesdk.exceptions import MissingColumnError
    t = engine_lake.create_table("s", key="id", ordering="ts", table_type=table_type)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "st": [{"a": 1, "b": "x"}, {"a": 9, "b": "z"}]}))
    src = pa.table({"id": [1, 3], "ts": [3, 3], "st": [{"a": 3}, {"a": 5}]})
    for mc in ("error", "keep"):
        with pytest.raises(MissingColumnError, match=r"\['st.b'\]"):
            t.merge(src, on="id", missing_columns=mc).when_matched_update_all().when_not_matched_insert_all().execute()
    assert [r["st"]["b"] for r in sorted(t.read().to_arrow().to_pylist(), key=lambda r: r["id"])] == ["x", "z"]
    t.merge(src, on="id", missing_columns="null").when_matched_update_all().when_not_matched_insert_all().execute()
    got = sorted(t.refresh().read().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["st"] for r in got] == [{"a": 3, "b": None}, {"a": 9, "b": "z"}, {"a": 5, "b": None}]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_merge_whose_changes_stay_in_spark_writes_what_the_arrow_path_writes(tmp_path, spark, monkeypatch,
                                                                               table_type):
    """A merge on the Spark engine takes its changes to this process as Arrow where Spark runs
    here, and writes them from Spark where it runs elsewhere (a cluster, a Connect server of
    another process), cast back to the table's types there (``spark_merge.typed_as``): both
    write the same naive timestamps (which Spark makes zoned), a column a null literal fills
    (``missing_columns="null"``) and a struct lacking a field."""
    import pyarrow as pa

    import lakesdk as lk
    from lakesdk.commit.context import TableContext

    def merged(elsewhere: bool) -> pa.Table:
        if elsewhere:
            monkeypatch.setattr(TableContext, "spark_is_local", lambda self: False)
        lake = lk.Lake(str(tmp_path / f"elsewhere_{elsewhere}"), spark=spark, options=lk.TableOptions(engine="spark"))
        t = lake.create_table("m", key="id", ordering="ts", table_type=table_type)
        t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "at": pa.array([1_000_001, 2_000_002], pa.timestamp("us")),
                           "note": ["a", "b"], "st": [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]}))
        src = pa.table({"id": [2, 3], "ts": [2, 2], "at": pa.array([5_000_005, None], pa.timestamp("us")),
                        "st": [{"a": 3}, {"a": 4}]})
        t.merge(src, on="id", missing_columns="null").when_matched_update_all().when_not_matched_insert_all().execute()
        out = t.read().to_arrow().sort_by("id")
        return out.select(["id", "ts", "at", "note", "st"])
    here = merged(False)
    assert here.to_pylist() == [
        {"id": 1, "ts": 1, "at": here.column("at")[0].as_py(), "note": "a", "st": {"a": 1, "b": "x"}},
        {"id": 2, "ts": 2, "at": here.column("at")[1].as_py(), "note": None, "st": {"a": 3, "b": None}},
        {"id": 3, "ts": 2, "at": None, "note": None, "st": {"a": 4, "b": None}}]
    assert here.column("at").type == pa.timestamp("us")
    assert here.column("at").cast(pa.int64()).to_pylist() == [1_000_001, 5_000_005, None]
    elsewhere = merged(True)
    assert elsewhere.schema == here.schema and elsewhere.equals(here)
