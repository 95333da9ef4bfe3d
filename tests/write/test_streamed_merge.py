"""A file group's rewrite merges one row group of the stored file at a time
(lakesdk.engine.group_merge): generated stored files of several row groups (keys stored more
than once, NaN and null values, a row group size of a few rows) merged with generated
upserts and deletes, with the key index's stored rows (``_lk_row``) and without, write the
same records, counts, statistics and key range as the merge of the whole file."""

from __future__ import annotations

import math
import os
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine import base_file_writer, group_merge
from lakesdk.engine import tasks as T
from lakesdk.merge.ordering import KEY, OP, OP_DELETE, OP_UPSERT, ROW, SEQ
from lakesdk.storage import Storage

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
_KEYS = st.sampled_from([f"k{i}" for i in range(12)])
_TS = st.one_of(st.none(), st.integers(0, 4))
_V = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=32))
_S = st.one_of(st.none(), st.text("ab", max_size=3))


def _ctx(tmp: str, instant: str, *, operation: str = "upsert", keep: tuple[str, ...] = (),
         mode: str = "EVENT_TIME_ORDERING") -> T.WriteContext:
    return T.WriteContext(storage=Storage(tmp), instant=instant, schema=SCHEMA, key_fields=("id",), partition_fields=(),
                          keygen="org.apache.hudi.keygen.NonpartitionedKeyGenerator", hive_style=False,
                          ordering="ts" if mode == "EVENT_TIME_ORDERING" else None, merge_mode=mode,
                          operation=operation, keep_columns=keep)


def _table(rows: list[tuple], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.table({f.name: pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)})


def _incoming(ctx: T.WriteContext, rows: list[tuple], ops: list[int]) -> pa.Table:
    t = T.add_key_columns(ctx, _table(rows))
    return t.append_column(OP, pa.array(ops, pa.int8())).append_column(SEQ, pa.array(range(len(rows)), pa.int64()))


def _norm(v):
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def _records(path: str) -> list[tuple]:
    t = pq.read_table(path).drop_columns(["_hoodie_commit_seqno", "_hoodie_file_name"])
    return sorted((tuple(_norm(x) for x in r.values()) for r in t.to_pylist()), key=repr)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=st.lists(st.tuples(_KEYS, _TS, _V, _S), min_size=0, max_size=30),
       incoming=st.dictionaries(_KEYS, st.tuples(_TS, _V, _S, st.booleans()), max_size=12),
       group=st.integers(1, 7), row_group=st.integers(1, 9), tag_rows=st.booleans(), mode=st.sampled_from(["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"]),
       keep=st.booleans(), operation=st.sampled_from(["upsert", "upsert", "insert"]))
def test_a_rewrite_merged_a_row_group_at_a_time_writes_what_the_whole_merge_does(
        tmp_path_factory, stored, incoming, group, row_group, tag_rows, mode, keep, operation):
    tmp = str(tmp_path_factory.mktemp("g"))
    first = _ctx(tmp, "20260101000000000", operation="insert")
    task = T.TaskInfo(0, 0, 0)
    base = T.write_new_file(first, "", "f0", T.add_key_columns(first, _table(stored)), task) if stored else None
    target = T.FileGroupTarget("", "f0", base.path if base else None, "20260101000000000" if base else None)
    rows = [(k, *v[:3]) for k, v in incoming.items()]
    ops = [OP_DELETE if v[3] and operation == "upsert" else OP_UPSERT for v in incoming.values()]
    keep_cols = ("s",) if keep else ()
    if keep:   # the data lacks ``s``: updated records keep the stored value
        rows = [r[:3] + (None,) for r in rows]
    out, with_stats = {}, {}
    for how in ("whole", "streamed"):
        ctx = _ctx(tmp, "20260101000000001", operation=operation, keep=keep_cols, mode=mode)
        inc = _incoming(ctx, rows, ops)
        if keep:
            inc = inc.drop_columns(["s"])
        if tag_rows and base is not None and operation == "upsert":   # the local engine's key index: one per stored copy
            keys = pq.read_table(os.path.join(tmp, base.path), columns=[KEY]).column(KEY)
            which, stored_at = [], []
            for i, k in enumerate(inc.column(KEY).to_pylist()):
                hits = [j for j, s in enumerate(keys.to_pylist()) if s == k] or [None]
                which += [i] * len(hits)
                stored_at += hits
            inc = inc.take(pa.array(which, pa.int64())).append_column(ROW, pa.array(stored_at, pa.int64()))
        task = T.TaskInfo(0, 0, 0 if how == "whole" else 1)
        if how == "whole":
            stat, counts = T._write_file_group_whole(ctx, target, inc, task, None,
                                                     T.BaseFile("f0", task.write_token, ctx.instant).name, 0.0)
        else:   # the stored rows read ``group`` at a time, written in row groups of ``row_group``
            with mock.patch.object(group_merge, "READ_ROWS", group), \
                    mock.patch.object(base_file_writer, "ROW_GROUP", row_group):
                stat, counts = T.write_file_group(ctx, target, inc, task)
        path = os.path.join(tmp, stat.path)
        md = pq.ParquetFile(path).metadata
        stats_v = [md.row_group(i).column(7).is_stats_set for i in range(md.num_row_groups)]
        out[how] = (_records(path), counts, stat.numWrites, stat.numInserts, stat.numUpdateWrites, stat.numDeletes,
                    md.num_rows)
        if how == "streamed" and md.num_rows:   # every row group but the last holds the row group size
            sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
            assert all(x == row_group for x in sizes[:-1]) and (not sizes or 0 < sizes[-1] <= row_group), sizes
        with_stats[how] = all(stats_v) if md.num_rows else None
    assert out["streamed"] == out["whole"]
    # ``v``'s statistics: none where a NaN is written; the rewrite may also leave them out for
    # the NaN of a stored row it replaced or deleted (decided before its first row group)
    if with_stats["whole"] is False:
        assert with_stats["streamed"] is False
    elif with_stats["streamed"] is False:
        assert any(isinstance(r[2], float) and math.isnan(r[2]) for r in stored)


def test_a_stored_file_damaged_past_its_first_row_group_fails_the_rewrite_and_leaves_no_file(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts")
    n = 5000
    t.bulk_insert(pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": [1] * n,
                            "v": np.random.default_rng(1).random(n), "s": [f"s{i}" for i in range(n)]}))
    (path,) = [os.path.join(r, f) for r, _, fs in os.walk(t.path) if "/.hoodie" not in r for f in fs
               if f.endswith(".parquet")]
    with mock.patch.object(base_file_writer, "ROW_GROUP", 1000):   # the stored file: five row groups
        t.upsert(pa.table({"id": ["k00001"], "ts": [2], "v": [0.5], "s": ["x"]}))
    (path,) = [os.path.join(r, f) for r, _, fs in os.walk(t.path) if "/.hoodie" not in r for f in fs
               if f.endswith(".parquet") and f != os.path.basename(path)]
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups == 5
    col = md.row_group(3).column(8)            # ``s`` of the fourth row group (read by nothing else): damaged
    data = bytearray(open(path, "rb").read())
    start = col.dictionary_page_offset or col.data_page_offset
    data[start:start + col.total_compressed_size] = bytes(col.total_compressed_size)
    open(path, "wb").write(bytes(data))
    before = sorted(os.listdir(os.path.dirname(path)))
    written = []
    real = base_file_writer.write_base_file

    def tracked(storage, p, *a, **kw):
        written.append(p)
        return real(storage, p, *a, **kw)
    with mock.patch.object(group_merge, "READ_ROWS", 1000), mock.patch.object(T, "write_base_file", tracked), \
            pytest.raises(lk.CorruptFileError) as e:
        t.upsert(pa.table({"id": ["k00002"], "ts": [3], "v": [0.25], "s": ["y"]}))
    assert os.path.basename(path) in str(e.value)
    assert written and not os.path.exists(os.path.join(t.path, written[0]))
    assert sorted(os.listdir(os.path.dirname(path))) == before
