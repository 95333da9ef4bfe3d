"""A bulk insert written from batches (each Spark task's Arrow batches) rolls its files over at
the target's rows: every file of a partition but its last holds exactly that many, and no file
is left small in between (a flush used to write the rows past its last full file as a file of
their own: a Spark bulk insert left a file of one Arrow batch beside every full one)."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.engine import tasks as T
from lakesdk.merge.ordering import KEY, PART


class _Ctx:
    target_file_bytes = 0
    record_size_estimate = 1


@settings(max_examples=200, deadline=None, database=None)
@given(per_file=st.integers(1, 40),
       batches=st.lists(st.lists(st.sampled_from(["a", "b", "c"]), min_size=0, max_size=60), max_size=12))
def test_every_file_but_a_partitions_last_holds_the_target_rows(per_file, batches):
    written: list[tuple[str, list[str]]] = []

    def write_new_file(ctx, partition, file_id, rows, task, seq_start=0, footer=None):
        written.append((partition, rows.column(KEY).to_pylist()))
        return file_id
    ctx = _Ctx()
    ctx.target_file_bytes = per_file
    n = 0
    tables = []
    for parts in batches:
        keys = [f"k{n + i}" for i in range(len(parts))]
        n += len(parts)
        tables.append(pa.table({KEY: pa.array(keys, pa.string()), PART: pa.array(parts, pa.string())}))
    with mock.patch.object(T, "write_new_file", write_new_file):
        list(T.write_new_files(ctx, tables, T.TaskInfo(0, 0, 0)))
    # every row once, each in its partition, in arrival order within the partition
    by_part: dict[str, list[str]] = {}
    for t in tables:
        for k, p in zip(t.column(KEY).to_pylist(), t.column(PART).to_pylist()):
            by_part.setdefault(p, []).append(k)
    got: dict[str, list[list[str]]] = {}
    for part, keys in written:
        got.setdefault(part, []).append(keys)
    assert {p: [k for f in files for k in f] for p, files in got.items()} == by_part
    for files in got.values():
        assert all(len(f) == per_file for f in files[:-1]), [len(f) for f in files]
        assert 1 <= len(files[-1]) <= per_file
