"""A compaction merges a file slice a batch of its base file at a time
(lakesdk.engine.group_merge.SlicePieces): generated merge-on-read tables (a base file of
generated rows, then upserts and deletes in log files, NaN and null values, new keys) compacted
with a batch of a few rows write the rows, in the order, that the slice read whole gives; the
file's statistics leave out a float column holding NaN; the table reads the same before and
after; and a base file damaged past its first batch fails the compaction and leaves no file."""

from __future__ import annotations

import math
import tempfile
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine import group_merge
from lakesdk.engine import tasks as T
from lakesdk.engine.slice_reader import read_slice
from lakesdk.exceptions import CorruptFileError

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
_KEYS = st.sampled_from([f"k{i:02d}" for i in range(16)])
_ROW = st.tuples(st.integers(0, 4), st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=32)),
                 st.one_of(st.none(), st.text("ab", max_size=3)))
_OPS = st.lists(st.tuples(st.sampled_from(["upsert", "delete"]), st.dictionaries(_KEYS, _ROW, min_size=1, max_size=8)),
                min_size=1, max_size=3)


def _table(rows: dict[str, tuple]) -> pa.Table:
    ids = sorted(rows)
    return pa.table({"id": pa.array(ids), "ts": pa.array([rows[k][0] for k in ids], pa.int64()),
                     "v": pa.array([rows[k][1] for k in ids], pa.float64()),
                     "s": pa.array([rows[k][2] for k in ids], pa.string())}, schema=SCHEMA)


def _norm(t: pa.Table) -> list[tuple]:
    return [tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in r.values()) for r in t.to_pylist()]


def _rows(t: pa.Table) -> list[tuple]:
    return sorted(_norm(t.select(SCHEMA.names)), key=repr)


def _mor(root: str, base: dict[str, tuple], ops: list[tuple[str, dict[str, tuple]]]) -> lk.Table:
    lake = lk.Lake(root, options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts", table_type="mor", schema=SCHEMA)
    t.bulk_insert(_table(base))
    for op, rows in ops:
        if op == "upsert":
            t.upsert(_table(rows))
        else:
            t.delete(_table(rows).select(["id"]))
    return t


@settings(max_examples=60, deadline=None, database=None)
@given(base=st.dictionaries(_KEYS, _ROW, min_size=1, max_size=16), ops=_OPS, batch=st.integers(1, 7))
def test_a_compaction_merged_a_batch_at_a_time_writes_the_slice_read_whole(base, ops, batch):
    with tempfile.TemporaryDirectory() as root:
        t = _mor(root, base, ops)
        before = _rows(t.read().to_arrow())
        seen: list[tuple[list[pa.Table], pa.Table, bool | list[str]]] = []

        class Spy(group_merge.SlicePieces):
            def __iter__(self):
                got = list(super().__iter__())
                seen.append((got, read_slice(self.ctx, self.slice), self.statistics))
                return iter(got)

        with mock.patch.object(group_merge, "READ_ROWS", batch), mock.patch.object(T, "SlicePieces", Spy):
            res = t.maintenance.compact()
        assert _rows(t.read().to_arrow()) == before
        if res is None:
            return
        for got, whole, statistics in seen:
            streamed = pa.concat_tables(got) if got else whole.slice(0, 0)
            assert streamed.schema.names == whole.schema.names
            assert _norm(streamed) == _norm(whole)        # the same rows, in the same order
            if any(len(p) > batch for p in got[:-1]):
                pytest.fail("a piece of the base file larger than a batch")
            if statistics is not True and "v" not in statistics:
                continue
            assert not any(isinstance(x, float) and math.isnan(x) for x in whole.column("v").to_pylist())
        for path in res.file_paths:
            f = pq.ParquetFile(path if path.startswith("/") else f"{t.path}/{path}")
            values = f.read(columns=["v"]).column("v").to_pylist()
            at = f.schema_arrow.get_field_index("v")
            stats = [f.metadata.row_group(i).column(at).statistics for i in range(f.metadata.num_row_groups)]
            if any(isinstance(x, float) and math.isnan(x) for x in values):
                assert all(s is None or not s.has_min_max for s in stats)


def test_a_base_file_damaged_past_its_first_batch_fails_the_compaction_and_leaves_no_file(tmp_path):
    base = {f"k{i:02d}": (0, float(i), "a") for i in range(16)}
    t = _mor(str(tmp_path / "lake"), base, [("upsert", {"k03": (1, 0.5, "b")})])
    before = _rows(t.read().to_arrow())
    real = group_merge.StoredRows.batches

    def damaged(self):
        for i, b in enumerate(real(self)):
            if i == 1:
                raise CorruptFileError(f"{self.path} is damaged", path=self.path)
            yield b
    files = _data_files(tmp_path)
    with mock.patch.object(group_merge, "READ_ROWS", 4), mock.patch.object(group_merge.StoredRows, "batches", damaged):
        with pytest.raises(CorruptFileError):
            t.maintenance.compact()
    assert _data_files(tmp_path) == files      # the compacted file removed as its rows failed to come
    assert _rows(t.read().to_arrow()) == before


def _data_files(root) -> set[str]:
    return {str(p) for p in root.rglob("*.parquet") if ".hoodie" not in p.parts}


def test_a_compaction_that_fails_before_its_file_is_written_closes_the_base_file(tmp_path):
    """The marker refused after the first batch was read: the base file is closed then, not
    when the error is collected."""
    base = {f"k{i:02d}": (0, float(i), "a") for i in range(16)}
    t = _mor(str(tmp_path / "lake"), base, [("upsert", {"k03": (1, 0.5, "b")})])
    made: list[group_merge.StoredRows] = []
    real = group_merge.StoredRows.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        made.append(self)
    with mock.patch.object(group_merge.StoredRows, "__init__", init), \
            mock.patch.object(T, "_mark", side_effect=OSError("marker refused")), \
            mock.patch.object(group_merge, "READ_ROWS", 4):
        with pytest.raises(Exception, match="marker refused"):
            t.maintenance.compact()
        assert made and all(r._pf is None for r in made)
