"""The meta columns and footers of the base files lakesdk writes, as readers find them: a new
file's commit time, file name and partition path are handed to the Parquet writer as
dictionaries of one value, yet every file reads back with the schema it would have from plain
strings (its ``ARROW:schema`` and the Parquet schema the same), a dictionary column of the
table's own stays one; and a file of no record carries an empty bloom filter and no key range,
as Hudi's writer leaves it (its bloom index reads every file's filter)."""

from __future__ import annotations

import base64
import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format import bloom as B
from lakesdk.format.schema import META_FIELDS


def _base_files(t) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True)
                  if f"{os.sep}.hoodie{os.sep}" not in p)


def _as_plain_strings_would_be(path: str) -> None:
    """The file's ``ARROW:schema`` and Parquet schema are those of the same rows written by
    pyarrow from plain strings."""
    pf = pq.ParquetFile(path)
    rows = pf.read()
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    again = pq.ParquetFile(pa.BufferReader(sink.getvalue()))
    assert pf.schema.equals(again.schema)
    named = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(pf.metadata.metadata[b"ARROW:schema"])))
    assert named.equals(again.schema_arrow, check_metadata=False)
    for f in META_FIELDS:
        assert named.field(f).type == rows.schema.field(f).type == pa.string()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 300), parts=st.sampled_from([None, ("p",), ("p", "q")]), hive=st.booleans(),
       table_type=st.sampled_from(["cow", "mor"]))
def test_a_bulk_inserted_file_reads_as_plain_strings(tmp_path_factory, n, parts, hive, table_type):
    root = tmp_path_factory.mktemp("meta")
    lake = lk.Lake(str(root), options=lk.TableOptions(metadata=False))
    t = lake.create_table("t", key="id", ordering="ts", partition_by=list(parts) if parts else None,
                          table_type=table_type, hive_style=hive)
    data = pa.table({"id": list(range(n)), "ts": [1] * n, "p": [f"p{i % 3}" for i in range(n)],
                     "q": [i % 2 for i in range(n)],
                     "cat": pa.array([["x", "y"][i % 2] for i in range(n)]).dictionary_encode()})
    t.bulk_insert(data)
    files = _base_files(t)
    assert files
    for path in files:
        _as_plain_strings_would_be(path)
        schema = pq.read_schema(path)
        assert pa.types.is_dictionary(schema.field("cat").type)     # the table's own dictionary stays one
        got = pq.read_table(path)
        name = os.path.basename(path)
        assert set(got.column("_hoodie_file_name").to_pylist()) == {name}
        assert len(set(got.column("_hoodie_commit_time").to_pylist())) == 1
        assert len(set(got.column("_hoodie_partition_path").to_pylist())) == 1
    assert t.read().to_arrow().num_rows == n


@pytest.mark.parametrize("cdc", [False, True])
def test_a_file_group_emptied_by_deletes_gets_an_empty_filter(tmp_path, cdc):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(metadata=False))
    t = lake.create_table("t", key="id", ordering="ts", cdc=cdc)
    t.bulk_insert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1]}))
    t.delete(pa.table({"id": [1, 2, 3], "ts": [2, 2, 2]}))
    empty = [p for p in _base_files(t) if pq.ParquetFile(p).metadata.num_rows == 0]
    for path in empty:
        md = pq.ParquetFile(path).metadata.metadata
        index = B.read_footer(md)
        assert index.range is None and B.MIN_KEY.encode() not in md
        assert index.bloom is not None and not index.bloom.might_contain(pa.array(["1", "2", "3"])).any()
    assert t.read().to_arrow().num_rows == 0
    # the bloom index reads the empty file's filter and finds no key there
    assert t.upsert(pa.table({"id": [2], "ts": [3]})).inserted == 1


ops_st = st.lists(st.tuples(st.sampled_from(["upsert", "delete", "insert"]),
                            st.lists(st.integers(0, 60), min_size=1, max_size=25, unique=True)),
                  min_size=1, max_size=4)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 80), parts=st.sampled_from([None, ("p",)]), ops=ops_st, small=st.booleans())
def test_a_rewritten_file_reads_as_plain_strings(tmp_path_factory, n, parts, ops, small):
    """A rewrite reads the stored file's commit times, partition paths and file names as
    dictionaries and writes its new records' alike: the file reads back as plain strings, each
    kept record with the commit time and file name it had, each written one with this commit's."""
    root = tmp_path_factory.mktemp("rewrite")
    opts = lk.TableOptions(metadata=False, small_file_limit=100 * 2**20 if small else 0)   # inserts into small files or not
    t = lk.Lake(str(root), options=opts).create_table("t", key="id", ordering="ts",
                                                      partition_by=list(parts) if parts else None)

    def rows(ids, ts):
        return pa.table({"id": ids, "ts": [ts] * len(ids), "p": [f"p{i % 2}" for i in ids],
                         "cat": pa.array([["x", "y"][i % 2] for i in ids]).dictionary_encode()})
    t.bulk_insert(rows(list(range(n)), 1))
    model = {i: 1 for i in range(n)}
    for step, (op, ids) in enumerate(ops, start=2):
        before = {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_file_name"])
                  for r in t.read(meta_fields=True).to_arrow().to_pylist()}
        if op == "insert":   # an insert appends (a stored key twice): new keys only, for the model
            ids = [i for i in ids if i not in model]
            if not ids:
                continue
        r = getattr(t, op)(rows(ids, step))
        if op == "delete":
            for i in ids:
                model.pop(i, None)
        else:
            model.update({i: step for i in ids})
        got = t.read(meta_fields=True).to_arrow()
        assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == model
        for path in _base_files(t):
            if r.instant in os.path.basename(path):    # the files of this commit
                _as_plain_strings_would_be(path)
                assert pa.types.is_dictionary(pq.read_schema(path).field("cat").type)
        for rec in got.to_pylist():
            if rec["ts"] == step:        # written by this commit
                assert rec["_hoodie_commit_time"] == r.instant and r.instant in rec["_hoodie_file_name"]
            else:                        # kept as stored
                assert (rec["_hoodie_commit_time"], rec["_hoodie_file_name"]) == before[rec["id"]]


def test_pieces_of_other_dictionaries_keep_one_per_row_group(tmp_path):
    """The rewrite's pieces each bring their own dictionaries (stored commit times, the new
    one): the writer gets one per row group, so the column stays dictionary-encoded instead of
    falling back to plain values part-way."""
    from lakesdk.engine.base_file_writer import write_base_file
    from lakesdk.storage import Storage
    n = 40_000
    name = "f" * 70

    def piece(value: str) -> pa.Table:
        d = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array([value]))
        return pa.table({"_hoodie_record_key": [str(i) for i in range(n)], "_hoodie_file_name": d})
    storage = Storage(str(tmp_path))
    write_base_file(storage, "x.parquet", [piece(name), piece(name[:-1] + "g"), piece(name)], compression="snappy",
                    schema=piece(name).schema, bloom=None)
    md = pq.ParquetFile(tmp_path / "x.parquet").metadata
    chunk = md.row_group(0).column(1)
    assert md.num_row_groups == 1 and chunk.total_compressed_size < 2_000     # a plain fallback: hundreds of KB
    assert pq.read_table(tmp_path / "x.parquet").column("_hoodie_file_name").to_pylist() == \
        [name] * n + [name[:-1] + "g"] * n + [name] * n


def test_a_narrow_dictionary_that_outgrows_its_indices_fails_the_write(tmp_path):
    """A table column of ``dictionary<int8, string>`` whose rewrite would hold more than 127
    values in a row group: no file holds them under that type (Arrow's reader refuses index
    128), so the write fails with a typed error and the table keeps its rows."""
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(metadata=False)).create_table("t", key="id", ordering="ts")

    def rows(ids, prefix, ts):
        cat = pa.DictionaryArray.from_arrays(pa.array(range(len(ids)), pa.int8()),
                                             pa.array([f"{prefix}{i}" for i in range(len(ids))]))
        return pa.table({"id": ids, "ts": [ts] * len(ids), "cat": cat})
    t.bulk_insert(rows(list(range(120)), "a", 1))
    with pytest.raises(lk.IncompatibleSchemaError, match="cat"):
        t.upsert(rows(list(range(1000, 1120)), "b", 2))
    got = t.read().to_arrow()
    assert got.num_rows == 120 and set(got.column("cat").to_pylist()) == {f"a{i}" for i in range(120)}
