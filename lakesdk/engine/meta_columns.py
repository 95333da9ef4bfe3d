"""The five meta columns Hudi writes first in every record of a base file: commit time,
sequence number (:func:`~lakesdk.format.keys.sequence_numbers`), record key, partition path
and file name."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.engine.slice_reader import conform
from lakesdk.format.keys import sequence_numbers
from lakesdk.format.schema import META_FIELDS
from lakesdk.merge.ordering import KEY, PART

__all__ = ["with_meta", "CONSTANT_META", "with_dictionaries"]

#: the meta columns a file's records share a few values of: a new file's rows one each (its
#: commit time, partition path and file name); a rewritten file's kept rows those of the commits
#: that wrote them.  Read and written as dictionaries, they cost neither a string per row nor
#: the Parquet writer's hashing of each value.
CONSTANT_META = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name")


def with_dictionaries(schema: pa.Schema, names: tuple[str, ...] | list[str] = CONSTANT_META) -> pa.Schema:
    """``schema`` with its string columns ``names`` as dictionaries of strings."""
    return pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in names and f.type == pa.string() else f
                      for f in schema], metadata=schema.metadata)


def with_meta(rows: pa.Table, *, instant: str, file_name: str, partition_id: int, seq_start: int,
              schema: pa.Schema, file_schema: pa.Schema, partition: str | None = None,
              dictionaries: bool = False) -> pa.Table:
    """``rows`` (with their key columns, on the table's ``schema``) as the records of the base
    file ``file_name`` written by task ``partition_id`` of the write of ``instant``, numbered
    from ``seq_start``: their meta columns first, on the ``file_schema``.  ``partition``: the
    partition path of every row, when they share one; the columns of one value are then
    dictionaries of it, which the file's writer takes as they are (written as plain strings:
    :func:`~lakesdk.engine.base_file_writer.write_base_file`).  ``dictionaries``: the
    :data:`CONSTANT_META` columns as dictionaries whatever the rows' partitions (a rewrite
    whose stored rows are read so)."""
    n = rows.num_rows
    dictionaries = dictionaries or partition is not None

    def same(value: str) -> pa.Array:
        if not dictionaries:
            return pa.repeat(pa.scalar(value, pa.string()), n)
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))

    def partitions() -> pa.Array | pa.ChunkedArray:
        if partition is not None:
            return same(partition)
        if not dictionaries:
            return rows.column(PART)
        return pc.dictionary_encode(rows.column(PART).combine_chunks().cast(pa.string()))

    meta = {"_hoodie_commit_time": same(instant),
            "_hoodie_commit_seqno": sequence_numbers(instant, partition_id, n, seq_start),
            "_hoodie_record_key": rows.column(KEY),
            "_hoodie_partition_path": partitions(),
            "_hoodie_file_name": same(file_name)}
    arrays = [meta[m] for m in META_FIELDS] + conform(rows, schema).columns
    if dictionaries:   # the meta columns of few values as the dictionaries they are; the others as the file says
        file_schema = with_dictionaries(file_schema)
    return pa.Table.from_arrays(arrays, schema=file_schema)
