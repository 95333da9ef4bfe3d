"""Spark jobs for writes and reads.

Write job (upsert): keys computed in Arrow (mapInArrow) -> de-duplicate by key ->
tag against the key index of the touched partitions -> assign inserts to small files or
new file groups -> one applyInArrow group per file group, each writing its next base file
and returning a WriteStat.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.engine.group_write import write_group
from lakesdk.engine.key_index import read_key_index
from lakesdk.engine.spark_cluster import arrow_frame, by_task, parallelism, shuffle_partitions
from lakesdk.engine.spark_errors import _guard_task, _task_failure, reraise_task_error
from lakesdk.engine.spark_keys import spark_arrow_schema, spark_key_columns
from lakesdk.engine.spark_order import descending
from lakesdk.engine.spark_types import for_spark_exchange
from lakesdk.engine.tasks import (
    STORED_ORDERING,
    FileGroupTarget,
    TaskInfo,
    WriteContext,
    add_key_columns,
    index_ordering_type,
    stored_ordering_type,
    write_new_files,
)
from lakesdk.exceptions import LakeError
from lakesdk.format.commit_metadata import WriteStat
from lakesdk.merge.columns import IS_DELETED
from lakesdk.merge.ordering import (
    KEY,
    OP,
    OP_DELETE,
    OP_UPSERT,
    PART,
    ROW,
    SEQ,
    MergeCounts,
    fields_of,
)

__all__ = ["spark_arrow_schema", "check_spark_casts", "SparkWriteJob", "reraise_task_error", "drop_flagged",
           "cast_column", "file_group_runs", "parallelism", "shuffle_partitions"]

FID = "_lk_fid"
#: incoming keys up to which the key index runs on the driver over the base files' footers
DRIVER_INDEX_KEYS = 1_000_000




def _flagged() -> Any:
    """Whether a row is flagged ``_hoodie_is_deleted`` (null: not), as a Spark expression."""
    from pyspark.sql import functions as F
    return F.coalesce(F.col(IS_DELETED), F.lit(False))


def drop_flagged(df: Any) -> Any:
    """The rows of ``df`` not flagged ``_hoodie_is_deleted`` (a bulk insert or an overwrite
    writes no flagged row, as Hudi's create handle)."""
    return df.filter(~_flagged())


def cast_column(df: Any, name: str, typ: str) -> Any:
    """``df`` with column ``name`` cast to the Spark SQL type ``typ``."""
    from pyspark.sql import functions as F
    return df.withColumn(name, F.col(f"`{name}`").cast(typ))


def _op_column(df: Any, op: int) -> Any:
    """The op of each row: its own (a merge's rows carry ``_lk_op``) or ``op``, and a delete
    where an upsert's row is flagged ``_hoodie_is_deleted``."""
    from pyspark.sql import functions as F
    base = F.col(OP) if OP in df.columns else F.lit(op)
    if op != OP_UPSERT or IS_DELETED not in df.columns:
        return base.cast("byte")
    return F.when(_flagged(), F.lit(OP_DELETE)).otherwise(base).cast("byte")


def check_spark_casts(df: Any, schema: pa.Schema) -> Any:
    """Spark input: columns whose Spark type differs from the table's are checked value by
    value in one Spark job, before anything is written (a value the table's type cannot hold
    exactly is an :class:`IncompatibleSchemaError`, as for local data), then cast."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    from lakesdk.exceptions import IncompatibleSchemaError
    incoming = spark_arrow_schema(df)
    checks, casts = [], {}
    for f in schema:
        src = incoming.field(f.name).type if f.name in incoming.names else f.type
        if src == f.type:   # the same type, or a column the data lacks
            continue
        lossy_by_type = ((pa.types.is_floating(src) and pa.types.is_integer(f.type))
                         or (pa.types.is_integer(src) and pa.types.is_floating(f.type))
                         or (pa.types.is_floating(src) and pa.types.is_floating(f.type) and src.bit_width > f.type.bit_width)
                         or (pa.types.is_integer(src) and pa.types.is_integer(f.type) and src.bit_width > f.type.bit_width))
        if not lossy_by_type:
            continue
        c = F.col(f"`{f.name}`")
        stype = df.schema[f.name].dataType
        back = c.try_cast(from_arrow_type(f.type)).try_cast(stype)
        bad = c.isNotNull() & (back.isNull() | (back != c) | F.isnan(c.cast("double")))
        checks.append(F.first(F.when(bad, c.cast("string")), ignorenulls=True).alias(f.name))
        casts[f.name] = f.type
    if not checks:
        return df
    row = df.select(*checks).collect()[0]
    for name, value in row.asDict().items():
        if value is not None:
            raise IncompatibleSchemaError(
                f"column {name!r}: the table stores {casts[name]}, the incoming {incoming.field(name).type} column "
                f"holds {value}, which {casts[name]} cannot hold exactly; nothing was written. Cast or round the "
                f"column to {casts[name]} first, or write it under a new column name")
    return df


def _task_info() -> TaskInfo:
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        return TaskInfo()
    return TaskInfo(tc.partitionId(), tc.stageId(), tc.taskAttemptId(), tc.attemptNumber())


def _stat_schema() -> Any:
    from pyspark.sql.types import StringType, StructField, StructType
    return StructType([StructField("stat", StringType()), StructField("counts", StringType())])


class SparkWriteJob:
    """One write of one instant, run as Spark jobs."""

    def __init__(self, spark: Any, ctx: WriteContext) -> None:
        self.spark = spark
        self.ctx = ctx
        self._small_index = False   # key_index returned the pruned index (the incoming keys' records only)
        self.record_index: Any = None   # (slices, keys) -> the slices the record index names for the keys
        self.key_ranges: Any = None     # partitions -> (partition, base file name) -> record key range
        self._new_fids: set[str] = set()   # new file groups assign_inserts planned
        self._touched: set[str] | None = None   # the stored file groups the records update (small index)
        self._inserts: dict[str, int] | None = None   # untagged upserts by partition, known on the driver
        self._persisted: list[Any] = []   # DataFrames kept for the write's later jobs (released after it)
        self._keys_alone = False   # the records' partition path is a constant (a delete by keys alone)
        self._keys: tuple[Any, pa.Table] | None = None   # (records, their keys) collected last

    # -- preparation -------------------------------------------------------------------------
    def with_keys(self, df: Any, op: int, *, global_keys: bool = False) -> Any:
        """Append key, partition path, op and sequence columns: as Spark expressions when
        :func:`spark_key_columns` can compute them (no Python pass), else in Arrow."""
        from pyspark.sql import functions as F
        ctx = replace(self.ctx, partition_fields=()) if global_keys else self.ctx
        exprs = spark_key_columns(df, ctx)
        if exprs is not None:
            key, part = exprs
            base = [F.col(f"`{f.name}`") for f in df.schema.fields if f.name not in (KEY, PART, OP, SEQ)]
            # SEQ orders the records of one key by arrival: the input partition, then the row
            return df.select(*base, key.alias(KEY), part.alias(PART), _op_column(df, op).alias(OP),
                             F.monotonically_increasing_id().alias(SEQ))
        return self.with_keys_arrow(df, op, ctx)

    def with_keys_arrow(self, df: Any, op: int, ctx: WriteContext) -> Any:
        """:meth:`with_keys` in an Arrow pass (:func:`add_key_columns` in each task)."""
        from pyspark.sql.types import ByteType, LongType, StringType, StructField, StructType
        base_fields = [f for f in df.schema.fields if f.name not in (KEY, PART, OP, SEQ)]
        out = StructType(base_fields + [StructField(KEY, StringType()), StructField(PART, StringType()),
                                        StructField(OP, ByteType()), StructField(SEQ, LongType())])
        names = [f.name for f in base_fields]
        own_ops = OP in df.columns   # a merge's rows carry their op

        def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            from lakesdk.engine.slice_reader import deleted_flags
            tc = TaskContext.get()
            offset = (tc.partitionId() if tc else 0) << 40
            i = 0
            for b in batches:
                whole = pa.Table.from_batches([b])
                t = add_key_columns(ctx, whole.select(names))
                n = t.num_rows
                ops = np.asarray(pc.fill_null(whole.column(OP), op).to_numpy(zero_copy_only=False), dtype=np.int8).copy() \
                    if own_ops else np.full(n, op, dtype=np.int8)
                flag = deleted_flags(t) if op == OP_UPSERT else None   # a flagged row deletes its record key
                if flag is not None:
                    ops[np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool)] = OP_DELETE
                t = t.append_column(OP, pa.array(ops, pa.int8()))
                t = t.append_column(SEQ, pa.array(np.arange(offset + i, offset + i + n, dtype=np.int64)))
                i += n
                yield from t.to_batches()
        return df.mapInArrow(fn, out)

    def combine(self, df: Any, *, by_key_alone: bool = False) -> Any:
        """Keep one record per (partition, key): greatest ordering value, then latest arrival
        (partial-update tables: stitch the column groups of a key's records).
        ``by_key_alone``: the partition path is one constant (:meth:`combine_by_key`)."""
        from lakesdk.merge.ordering import combine_keeping_deletes
        n = shuffle_partitions(self.spark)
        if self.ctx.merger is not None:
            fn = self.ctx.merger
            return df.repartition(n, KEY).groupBy(KEY).applyInArrow(lambda t: combine_keeping_deletes(t, fn),
                                                                   df.schema)
        if self.ctx.merge_mode == "PARTIAL_UPDATE" and self.ctx.column_groups is not None:
            from lakesdk.merge.slice_merge import merge_partial
            groups = self.ctx.column_groups
            return df.repartition(n, KEY).groupBy(KEY).applyInArrow(
                lambda t: combine_keeping_deletes(t, lambda v: merge_partial(v, column_groups=groups)), df.schema)
        if not by_key_alone and self._unique_keys(df):
            return df   # no (partition, key) twice: every record is its key's one record
        order = []
        if self.ctx.merge_mode == "EVENT_TIME_ORDERING":   # floating point: Java's order (lakesdk.engine.spark_order)
            order += descending(df, fields_of(self.ctx.ordering), nulls_last=True)
        return _first_by_key(df, order, n, self._shuffle_keys(by_key_alone))

    def _unique_keys(self, df: Any) -> bool:
        """Whether no (partition, key) is twice in ``df``, told from its keys on the driver
        (:meth:`_incoming_keys`, which the key index then takes as collected; False beyond
        ``DRIVER_INDEX_KEYS``).  A batch without a repeated key skips the combine."""
        t = self._incoming_keys(df)
        if t is None:
            return False
        cols = [KEY] if self._shuffle_keys() == [KEY] else [PART, KEY]
        return t.select(cols).group_by(cols).aggregate([]).num_rows == t.num_rows

    def combine_deletes(self, df: Any) -> Any:
        """One delete per (partition, key): one without an ordering value (it always applies),
        else the greatest ordering value (event-time ordering), else the last arrival."""
        from pyspark.sql import functions as F
        order = []
        fields = fields_of(self.ctx.ordering)
        if fields and self.ctx.merge_mode == "EVENT_TIME_ORDERING" and all(f in df.columns for f in fields):
            none = F.lit(True)
            for f in fields:
                none = none & F.col(f"`{f}`").isNull()
            order.append(F.when(none, 0).otherwise(1))   # a delete without ordering values first
            order += descending(df, fields)
        return _first_by_key(df, order, shuffle_partitions(self.spark), self._shuffle_keys())

    def _shuffle_keys(self, by_key_alone: bool = False) -> list[str]:
        """The columns the write's records are shuffled by: (partition, key), or the key
        alone where the partition path is a constant (no partition fields, or a delete by
        keys alone), which Spark's plans drop from a window's or a join's keys."""
        return [KEY] if by_key_alone or self._keys_alone or not self.ctx.partition_fields else [PART, KEY]

    # -- the engine interface shared with LocalWriteJob ------------------------------------
    def prepare(self, arrow: pa.Table | None = None, sdf: Any = None, op: int = OP_UPSERT, *,
                global_keys: bool = False) -> Any:
        """A DataFrame with key columns: from driver-side Arrow (keys already computed) or
        from a Spark DataFrame (:meth:`with_keys`).  ``global_keys``: a delete by keys alone
        (no partition fields); the key index then supplies the partition."""
        self._keys_alone = global_keys
        if arrow is not None:
            return arrow_frame(self.spark, arrow)
        return self.with_keys(sdf, op, global_keys=global_keys)

    def partitions(self, df: Any) -> list[str]:
        from pyspark.sql import functions as F
        if not self.ctx.partition_fields:
            return [""]
        # one aggregate over the whole DataFrame: a task per input partition and one to merge
        return sorted(df.agg(F.collect_set(PART)).first()[0])

    def untagged(self, df: Any) -> Any:
        from pyspark.sql import functions as F
        return df.withColumn(FID, F.lit(None).cast("string"))

    def drop_untagged_deletes(self, df: Any) -> Any:
        from pyspark.sql import functions as F
        return df.filter(F.col(FID).isNotNull() | (F.col(OP) == 0))

    def only_tagged(self, df: Any) -> Any:
        from pyspark.sql import functions as F
        return df.filter(F.col(FID).isNotNull())

    def untagged_counts(self, df: Any) -> dict[str, int]:
        """Untagged upserts (the inserts) by partition: known on the driver when the key
        index was (:meth:`key_index`), else counted in a job that keeps ``df`` for the write."""
        from pyspark.sql import functions as F
        if self._inserts is not None:
            return dict(self._inserts)
        self._persist(df)
        return {r[0]: int(r[1]) for r in df.filter(F.col(FID).isNull()).groupBy(PART).count().collect()}

    def tagged_file_ids(self, df: Any, fids: set[str]) -> set[str]:
        """Which of ``fids`` the tagged incoming records update or delete."""
        from pyspark.sql import functions as F
        return set(df.filter(F.col(FID).isin(sorted(fids))).agg(F.collect_set(FID)).first()[0])

    def _persist(self, df: Any) -> None:
        df.persist()
        self._persisted.append(df)

    def release(self, df: Any) -> None:
        """Unpersist what this job persisted (never a DataFrame it was given)."""
        for d in self._persisted:
            try:
                d.unpersist()
            except Exception:  # noqa: BLE001
                pass
        self._persisted.clear()

    # -- tagging -----------------------------------------------------------------------------
    def _incoming_keys(self, data: Any) -> pa.Table | None:
        """(partition, key) of the incoming records on the driver, or None when there are
        more than ``DRIVER_INDEX_KEYS`` (the index then reads every key in Spark tasks)."""
        from pyspark.sql import functions as F
        if self._keys is not None and self._keys[0] is data:   # collected already (the combine's check)
            return self._keys[1]
        self._persist(data)   # the write reads the records again: combined once, not per job
        t = data.select(F.col(PART), F.col(KEY), F.col(OP)).limit(DRIVER_INDEX_KEYS + 1).toArrow()
        if t.num_rows > DRIVER_INDEX_KEYS:
            return None
        self._keys = (data, t)
        return t

    def key_index(self, slices: list[Any], slice_ctx: Any = None, data: Any = None, *,
                  global_keys: bool = False) -> Any:
        """DataFrame (key, partition, file id) of the stored records of the keys of ``data``
        in the given file slices (merge-on-read under event-time ordering: with the stored
        ordering value too).  Up to ``DRIVER_INDEX_KEYS`` incoming keys, the driver prunes
        the files by their footers' key ranges and bloom filters and reads the candidates'
        keys (:func:`~lakesdk.engine.key_index.pruned_key_index`); beyond, or without
        ``data``, every key of the slices is read in Spark tasks."""
        from pyspark.sql.types import IntegerType, StringType, StructField, StructType
        storage = self.ctx.storage
        schema = StructType([StructField(KEY, StringType()), StructField(PART, StringType()), StructField(FID, StringType())])
        otype = index_ordering_type(self.ctx) if global_keys else stored_ordering_type(self.ctx)
        ordering = (self.ctx.ordering, otype) if otype is not None and self.ctx.ordering else None
        if ordering is not None:
            from pyspark.sql.pandas.types import from_arrow_type
            schema = schema.add(StructField(STORED_ORDERING, from_arrow_type(otype)))
        if not slices:
            return self.spark.createDataFrame([], schema)
        if data is not None:
            keys = self._incoming_keys(data)
            if keys is not None:   # the index of the incoming keys, on the driver
                slices = self.record_index(slices, keys.column(KEY)) if self.record_index else slices
                from lakesdk.engine.key_index import incoming_keys, pruned_key_index, untagged_upserts
                ranges = self.key_ranges({sl.partition for sl in slices}) \
                    if self.key_ranges is not None and not self.record_index else None
                found = pruned_key_index(storage, slices, incoming_keys(keys.column(KEY), None if global_keys else
                                                                       keys.column(PART)),
                                         slice_ctx=slice_ctx, ordering=ordering, ranges=ranges,
                                         footers=not self.record_index)
                self._small_index = True
                if ROW in found.column_names:   # a stored record's row in its base file: the rewrite reads no key
                    schema = schema.add(StructField(ROW, IntegerType()))
                self._touched = set(pc.unique(found.column(FID)).to_pylist()) - {None}
                if not global_keys:   # the inserts follow from the same keys: no counting job
                    self._inserts = untagged_upserts(keys, found)
                found = found.select(schema.fieldNames())
                return arrow_frame(self.spark, found.cast(for_spark_exchange(found.schema)), schema,
                                   exchange_types=True)
        n = max(1, min(len(slices), parallelism(self.spark) * 2))
        src = self.spark.createDataFrame([(i,) for i in range(len(slices))], "i int").repartition(n)

        def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                part = [slices[i] for i in b.column(0).to_pylist()]
                t = _guard_task(f"the key index of file group(s) {', '.join(getattr(s, 'file_id', '?') for s in part)}",
                                lambda part=part: read_key_index(storage, part, slice_ctx, ordering))
                yield from t.to_batches()
        return src.mapInArrow(fn, schema)

    def tag(self, df: Any, index: Any, *, global_keys: bool = False) -> Any:
        """Left-join incoming records with the key index: ``_lk_fid`` is set for known keys."""
        from pyspark.sql import functions as F
        extra = [F.col(c) for c in (STORED_ORDERING, ROW) if c in index.columns]
        idx = index.select(F.col(KEY).alias("_ik"), F.col(PART).alias("_ip"), F.col(FID), *extra)
        n = shuffle_partitions(self.spark)
        # the pruned index holds only the incoming keys' records: sent to every task.  Else the
        # records come shuffled by their keys (combined, :func:`_first_by_key`) and the index
        # is shuffled alike, into as many partitions (a join of two shuffles would take at
        # least spark.sql.shuffle.partitions)
        if global_keys:
            idx = F.broadcast(idx) if self._small_index else idx.repartition(n, "_ik").hint("merge")
            keyed = df.drop(PART)
            j = keyed.join(idx, keyed[KEY] == idx["_ik"], "left")
            return j.withColumn(PART, F.col("_ip")).drop("_ik", "_ip")
        keys = ["_ip", "_ik"] if self._shuffle_keys() == [PART, KEY] else ["_ik"]
        idx = F.broadcast(idx) if self._small_index else idx.repartition(n, *keys).hint("merge")
        j = df.join(idx, (df[KEY] == idx["_ik"]) & (df[PART] == idx["_ip"]), "left")
        return j.drop("_ik", "_ip")

    def tag_global(self, df: Any, index: Any) -> Any:
        """Global index: records whose key is stored in another partition move there or stay,
        by the table's ordering (:func:`~lakesdk.engine.global_index.route_moves`, run per key
        group); ``index`` holds the stored records of the keys in every partition."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        from lakesdk.engine.global_index import STORED_PART, route_moves
        extra = [F.col(c) for c in (STORED_ORDERING, ROW) if c in index.columns]
        idx = index.select(F.col(KEY).alias("_ik"), F.col(PART).alias(STORED_PART), F.col(FID), *extra)
        n = shuffle_partitions(self.spark)
        idx = F.broadcast(idx) if self._small_index else idx.repartition(n, "_ik").hint("merge")
        # the records come shuffled by key (:meth:`combine_by_key`): the index is shuffled alike,
        # and the grouping by key takes the join's partitions
        df = df.drop(*[c for c in (FID, STORED_ORDERING, STORED_PART) if c in df.columns])
        j = df.join(idx, df[KEY] == idx["_ik"], "left").drop("_ik")
        keep_ord = stored_ordering_type(self.ctx) is not None   # merge-on-read: what the log write compares with
        out = StructType([f for f in j.schema.fields
                          if f.name != STORED_PART and (keep_ord or f.name != STORED_ORDERING)])
        names = out.fieldNames()
        ordering, mode, move = self.ctx.ordering, self.ctx.merge_mode, self.ctx.update_partition_path

        def fn(t: pa.Table) -> pa.Table:
            return _guard_task("the global index", lambda: route_moves(
                t, ordering=ordering, merge_mode=mode, update_partition_path=move).select(names))
        return j.groupBy(KEY).applyInArrow(fn, out)

    def combine_by_key(self, df: Any) -> Any:
        """:meth:`combine` per key alone (a global index: one record per key whatever its
        partition, as Hudi de-duplicates then)."""
        from pyspark.sql import functions as F
        own = "_lk_own_part"
        work = df.withColumnRenamed(PART, own).withColumn(PART, F.lit(""))
        return self.combine(work, by_key_alone=True).drop(PART).withColumnRenamed(own, PART).select(*df.columns)

    def assign_inserts(self, df: Any, buckets: dict[str, list[tuple[str, float]]]) -> Any:
        """Give untagged records a file id by hashing the key into weighted buckets."""
        from pyspark.sql import functions as F
        rows = []
        for part, bs in buckets.items():
            lo = 0.0
            for i, (fid, w) in enumerate(bs):
                hi = 1.0 + 1e-9 if i == len(bs) - 1 else lo + w
                rows.append((part, lo, hi, fid))
                lo = hi
        self._new_fids = {r[3] for r in rows} - set(self.ctx.targets)
        if not rows:
            return df
        bdf = F.broadcast(self.spark.createDataFrame(rows, "_bp string, _lo double, _hi double, _bf string"))
        frac = (F.pmod(F.xxhash64(F.col(KEY)), F.lit(1000003)) / F.lit(1000003.0))
        ins = df.filter(F.col(FID).isNull()).withColumn("_lk_frac", frac)
        ins = ins.join(bdf, (ins[PART] == bdf["_bp"]) & (ins["_lk_frac"] >= bdf["_lo"]) & (ins["_lk_frac"] < bdf["_hi"]), "left")
        ins = ins.withColumn(FID, F.col("_bf")).drop("_bp", "_lo", "_hi", "_bf", "_lk_frac")
        return df.filter(F.col(FID).isNotNull()).unionByName(ins)

    # -- execution -----------------------------------------------------------------------------
    def write_groups(self, df: Any) -> tuple[list[WriteStat], MergeCounts]:
        """Run one write task per file group; collect stats."""
        from pyspark.sql import functions as F
        ctx = self.ctx

        def one(table: pa.Table) -> pa.RecordBatch:
            fid = table.column(FID)[0].as_py()
            part = table.column(PART)[0].as_py()
            target = ctx.targets.get(fid) or FileGroupTarget(part, fid)
            incoming = table.drop_columns([FID])
            stat, counts = _guard_task(f"file group {fid} (partition {part!r})",
                                       lambda: write_group(ctx, target, incoming, _task_info()))
            return pa.RecordBatch.from_pydict({"stat": [json.dumps(asdict(stat))], "counts": [json.dumps(asdict(counts))]})

        def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from (one(group) for group in file_group_runs(batches))

        # one shuffle by file group, into a number of partitions fixed here: adaptive execution
        # would coalesce this shuffle by its bytes (the incoming records), while a task's work
        # is the file groups it rewrites; each file group to a task of its own, up to two per
        # core (:func:`by_task`).  Each task's records sorted by file group reach Python as
        # batches (mapInArrow: cheaper than a grouped map) and are cut into file groups there,
        # one group in memory at a time.
        groups = sorted((set(ctx.targets) if self._touched is None else self._touched) | self._new_fids)
        df = by_task(self.spark, df, FID, groups).sortWithinPartitions(F.col(FID))
        rows = self._collect(df.mapInArrow(fn, _stat_schema()))
        stats = [WriteStat.from_dict(json.loads(r["stat"])) for r in rows]
        total = MergeCounts()
        for r in rows:
            total += MergeCounts(**json.loads(r["counts"]))
        return stats, total

    def write_new(self, df: Any) -> list[WriteStat]:
        """Bulk insert: every task writes its records into new file groups (one shuffle puts
        each partition's records into one task).  Records without the key columns (a bulk
        insert's input as given) get them in the task that writes them: one Python pass."""
        from pyspark.sql import functions as F
        ctx = self.ctx
        keyed = KEY in df.columns
        if ctx.partition_fields:
            df = df.repartition(shuffle_partitions(self.spark),
                                F.col(PART) if keyed else F.col(f"`{ctx.partition_fields[0]}`"),
                                *([] if keyed else [F.col(f"`{f}`") for f in ctx.partition_fields[1:]]))

        def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            info = _task_info()
            tables = (pa.Table.from_batches([b]) if keyed else add_key_columns(ctx, pa.Table.from_batches([b]))
                      for b in batches)
            try:
                for stat in write_new_files(ctx, tables, info):
                    yield pa.RecordBatch.from_pydict({"stat": [json.dumps(asdict(stat))], "counts": ["{}"]})
            except LakeError:
                raise
            except Exception as e:  # noqa: BLE001 - re-typed with its context
                raise _task_failure(f"new files of Spark partition {info.partition_id}", e) from e
        rows = self._collect(df.mapInArrow(fn, _stat_schema()))
        return [WriteStat.from_dict(json.loads(r["stat"])) for r in rows]

    def _collect(self, df: Any) -> list[Any]:
        try:
            return df.collect()
        except Exception as err:  # noqa: BLE001 - re-typed below
            reraise_task_error(err)
            raise


def _first_by_key(df: Any, order: list[Any], n: int, keys: list[str]) -> Any:
    """The first record of each (partition, key) by ``order``, then the latest arrival: one
    shuffle by ``keys`` into ``n`` partitions, which the window and the tagging join that
    follows both take as it is."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy(PART, KEY).orderBy(*order, F.col(SEQ).desc())
    return (df.repartition(n, *keys).withColumn("_lk_rn", F.row_number().over(w)).filter("_lk_rn = 1")
            .drop("_lk_rn"))


def file_group_runs(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The records of each file group from ``batches`` sorted by ``_lk_fid``: one table per
    run of equal file ids (a null id is a run too), holding only the current run."""
    pending: list[pa.RecordBatch] = []
    current: Any = None
    for b in batches:
        if b.num_rows == 0:
            continue
        if any(not f.nullable for f in b.schema):   # batches of one task may differ in nullability
            b = pa.RecordBatch.from_arrays(b.columns, schema=pa.schema([f.with_nullable(True) for f in b.schema]))
        ids = b.column(b.schema.get_field_index(FID))
        # where the id changes within the batch (nulls compare as one value)
        same = pc.fill_null(pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1)),
                            pc.and_(ids.slice(1).is_null(), ids.slice(0, len(ids) - 1).is_null()))
        cuts = np.flatnonzero(~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), b.num_rows]
        for a, e in zip(starts, ends):
            fid = ids[a].as_py()
            if pending and fid != current:
                yield pa.Table.from_batches(pending)
                pending = []
            current = fid
            pending.append(b.slice(a, e - a))
    if pending:
        yield pa.Table.from_batches(pending)


def compact_slices_spark(spark: Any, ctx: WriteContext, slice_ctx: Any, slices: list[Any]) -> list[WriteStat]:
    """Run the compaction of the file slices in Spark tasks (each makes its files' markers in
    one request); collect the write stats."""
    from lakesdk.engine.tasks import compact_file_slice, compacted_file
    if not slices:
        return []
    n = max(1, min(len(slices), parallelism(spark) * 2))
    src = spark.createDataFrame([(i,) for i in range(len(slices))], "i int").repartition(n)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        info = _task_info()
        mine = [slices[i] for b in batches for i in b.column(0).to_pylist()]
        if ctx.markers is not None and mine:   # the task's markers in one request
            ctx.markers.create_many([compacted_file(ctx, sl, info) for sl in mine])
        unmarked = replace(ctx, markers=None)
        for sl in mine:
            stat = compact_file_slice(unmarked, slice_ctx, sl, info)
            yield pa.RecordBatch.from_pydict({"stat": [json.dumps(asdict(stat))], "counts": ["{}"]})
    rows = src.mapInArrow(fn, _stat_schema()).collect()
    return [WriteStat.from_dict(json.loads(r["stat"])) for r in rows]
