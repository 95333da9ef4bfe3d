"""The input side of a staged write: the arguments of :class:`~lakesdk.table.write.WriteOperation`,
and the checks and preparation of its data before an instant exists (a refused batch writes
nothing)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.commit.schema_store import resolve_schema
from lakesdk.engine.tasks import WriteContext, add_key_columns, record_size
from lakesdk.exceptions import DeleteMarkerTypeError, MissingColumnError, OptionsError, SchemaError, TableConfigError
from lakesdk.format.file_naming import PARTITION_METAFILE
from lakesdk.format.keys import HUDI_ENCODING, has_missing_key_parts
from lakesdk.format.schema import (
    META_FIELDS,
    arrow_to_avro,
    cast_to_schema,
    concrete_type,
    data_schema,
    invalid_avro_names,
    missing_fields,
    normalize_input,
    normalize_type,
    nullable,
    unify_schemas,
)
from lakesdk.merge.columns import IS_DELETED
from lakesdk.merge.ordering import (
    OP,
    OP_DELETE,
    OP_UPSERT,
    PART,
    SEQ,
    Ordering,
    event_time_field,
    event_time_fields,
    null_ordering_error,
)
from lakesdk.table.data import keys_to_arrow, to_arrow_or_spark

if TYPE_CHECKING:
    from lakesdk.format.table_config import TableConfig
    from lakesdk.table.handle import Handle

__all__ = ["WriteInput", "Operation", "MISSING_COLUMNS", "PARTITION_METAFILE"]

Operation = Literal["upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table", "merge"]
_OPERATION_TYPE = {"upsert": "UPSERT", "merge": "UPSERT", "insert": "INSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE",
                   "insert_overwrite": "INSERT_OVERWRITE", "insert_overwrite_table": "INSERT_OVERWRITE_TABLE"}
MISSING_COLUMNS = ("error", "null", "keep")
# operations that merge incoming records into stored ones: only there can a missing column keep its value
_MERGING = ("upsert", "merge")
# operations that write every record into new files (no merge with stored records)
_WRITES_NEW = ("bulk_insert", "insert_overwrite", "insert_overwrite_table")



@dataclass
class WriteSnapshot:
    """A write's input, prepared, and the table's state it was prepared against, taken once
    per operation and passed down: the timeline (one load), the schema, and the checked
    file-system view (set once the write checked it, before its instant)."""

    ctx: WriteContext
    arrow: pa.Table | None
    sdf: Any
    store: Any
    timeline: Any
    partitions: list[str] | None
    global_delete: bool
    target_schema: pa.Schema
    table_schema: pa.Schema | None = None
    view: Any = None          # a FileSystemView of ``timeline``


@dataclass
class WriteInput:
    """The input side of a staged write (:class:`~lakesdk.table.write.WriteOperation`):
    its arguments, and the checks and preparation of its data before any instant exists."""

    table: "Handle"
    operation: Operation
    data: Any
    missing_columns: str = "error"       # a table column the data lacks: "error", "null" or "keep"
    truncate_nanoseconds: bool = False   # timestamp[ns] values with digits below the microsecond
    key_encoding: str | None = None      # how null/empty key values are written; None: the table's (see _prepare)
    commit_empty: bool = False           # a delete by predicate matching no row commits (as one of absent keys)
    #: the timeline read before the caller read the rows this write was computed from (a merge's
    #: target, a delete's rows matching ``where``): writes completed since are checked at commit
    read_at: Any = None

    def __post_init__(self) -> None:
        if self.missing_columns not in MISSING_COLUMNS:
            raise OptionsError(f"missing_columns must be one of {list(MISSING_COLUMNS)}, not {self.missing_columns!r}")
        if self.missing_columns == "keep" and self.operation not in _MERGING:
            raise OptionsError(
                f"missing_columns='keep' keeps stored values of columns the data lacks, which only an upsert "
                f"(or merge) does; {self.operation} does not merge with stored records: "
                "pass missing_columns='null' or add the columns")

    # -- validation ---------------------------------------------------------------------------
    def _prepare_input(self) -> tuple[pa.Table | None, Any, pa.Schema]:
        cfg = self.table.config
        if not cfg.record_key_fields:
            from lakesdk.exceptions import TableConfigError
            raise TableConfigError(
                f"{cfg.name!r} has no record key (hoodie.table.recordkey.fields is not set): lakesdk writes keyed "
                "tables only; set the key in hoodie.properties if the file lost it", key="hoodie.table.recordkey.fields")
        if self.operation == "delete":
            arrow, sdf = keys_to_arrow(self.data, cfg.record_key_fields)
        else:
            arrow, sdf = to_arrow_or_spark(self.data)
        if arrow is not None:
            if self.operation != "delete":
                arrow = normalize_input(arrow, truncate_nanoseconds=self.truncate_nanoseconds)
            schema = arrow.schema
        else:
            from lakesdk.engine.spark import spark_arrow_schema
            schema = spark_arrow_schema(sdf)
        names = set(schema.names)
        for f in cfg.record_key_fields:
            if f not in names:
                raise MissingColumnError(
                    f"record key field {f!r} is missing from the data (columns: {', '.join(schema.names)}); "
                    f"the table {cfg.name!r} is keyed by {list(cfg.record_key_fields)}")
        if self.operation != "delete":
            for f in cfg.partition_fields:
                if f not in names:
                    raise MissingColumnError(
                        f"partition field {f!r} is missing from the data (columns: {', '.join(schema.names)}); "
                        f"the table is partitioned by {list(cfg.partition_fields)}")
            groups = cfg.column_groups
            if groups and self.operation in ("upsert", "insert") and not any(g in names for g in groups):
                raise MissingColumnError(
                    f"none of the ordering fields {list(groups)} is in the data (columns: {', '.join(schema.names)}); "
                    f"each stream of {cfg.name!r} writes its ordering field with the columns it guards")
            # under event-time ordering every written record needs its ordering values (Hudi's rule;
            # the values are checked for nulls in _prepare), for overwrites and bulk inserts too
            for o in cfg.ordering_fields:
                if o in names or not (self.operation in ("upsert", "insert", "merge")
                                      or event_time_field(o, cfg.merge_mode)):
                    continue
                raise MissingColumnError(
                    f"ordering field {o!r} is missing from the data (columns: {', '.join(schema.names)}); "
                    f"upserts into {cfg.name!r} decide between versions of a record by {o!r}: add it to every row")
        bad = [n for n in schema.names if n in META_FIELDS or (n.startswith("_lk_") and not (
            self.operation == "merge" and n == OP))]
        if bad and self.operation != "delete":
            if arrow is not None:
                arrow = arrow.drop_columns(bad)
                schema = arrow.schema
            else:
                sdf = sdf.drop(*bad)
                schema = pa.schema([f for f in schema if f.name not in bad])
        if OP in schema.names:   # merge: the per-row op is not a table column
            schema = pa.schema([f for f in schema if f.name != OP])
        if IS_DELETED in schema.names and self.operation != "delete":
            arrow, sdf, schema = _delete_marker(arrow, sdf, schema, cfg.name)
        return arrow, sdf, schema

    # -- execution ------------------------------------------------------------------------------
    def _prepare(self) -> "WriteSnapshot | None":
        """Validate the input and compute keys and the target schema; None when there is
        nothing to write.  Reads the timeline, writes nothing."""
        t = self.table
        cfg = t.config
        t.context.check_writable(self.operation)
        arrow, sdf, in_schema = self._prepare_input()
        check_partition_paths(cfg, self.operation, in_schema)
        store = t.context.store
        timeline = store.load()
        table_schema = resolve_schema(store, timeline, create_schema=cfg.create_schema)
        keep: tuple[str, ...] = ()
        if self.operation == "delete":
            if table_schema is None:
                return None
            target_schema = table_schema
        else:
            target_schema = unify_schemas(table_schema, in_schema) if table_schema is not None else data_schema(in_schema)
            if table_schema is not None:
                _case_clashes(table_schema, in_schema, target_schema, cfg.name)
            keep = self._missing_columns(table_schema, in_schema)
            if len(target_schema) == 0:
                raise SchemaError("the data has no columns to write")
        # every schema check before the instant exists: the table's types as files carry them
        # (microsecond timestamps, ...), every column nullable (Hudi's Avro schema), each
        # column's values checked against its type, the Avro schema derivable
        target_schema = nullable(pa.schema([  # a column (or nested field) of nulls only is a string, as its Avro type says
            f.with_type(concrete_type(normalize_type(f.type, f.name))) for f in target_schema]))
        arrow_to_avro(target_schema, cfg.name)
        new_fields = [f for f in target_schema if table_schema is None or f.name not in table_schema.names]
        bad_names = invalid_avro_names(new_fields)
        if bad_names:
            raise SchemaError(
                f"column name(s) {bad_names} are not valid Avro names (letters, digits and underscores, not starting "
                "with a digit), so Hudi's table schema cannot hold them and Hudi readers could not read the table; "
                "rename the columns before writing")
        if arrow is not None and self.operation != "delete":
            arrow = cast_to_schema(arrow, target_schema)
            _check_ordering_values(arrow, cfg.ordering_key, cfg.merge_mode, cfg.name, self.operation)
        elif sdf is not None and self.operation != "delete":
            from lakesdk.engine.spark import check_spark_casts
            sdf = check_spark_casts(sdf, target_schema)
        is_delete = self.operation == "delete"
        global_index, update_partition_path = t.context.global_index()
        if global_index:
            self._check_global_index(keep)
        # a delete finds its keys in any partition when the rows lack the partition fields, and
        # always with a global index (Hudi's global index ignores a delete's partition path)
        global_delete = is_delete and (global_index or not all(f in in_schema.names for f in cfg.partition_fields))
        ctx = WriteContext.for_table(
            t.storage, cfg, t.options, instant="", schema=target_schema, operation=self.operation,
            merger=t.context.merger(), target_file_bytes=t.options.target_file_size,
            record_size_estimate=self._record_size(store, timeline, t.options.record_size_estimate),
            merge_on_read=cfg.is_mor, keep_columns=keep, key_encoding=self.key_encoding or cfg.key_encoding or HUDI_ENCODING,
            log_block_format=t.options.log_block_format,
            global_index=global_index and self.operation in (*_MERGING, "insert_overwrite", "insert_overwrite_table"),
            update_partition_path=update_partition_path,
        )
        # a table that does not name its key encoding: its stored keys tell, read only when a
        # row has a null or empty key value (the only rows the encodings write differently)
        resolve = t._key_encoding if self.key_encoding is None and cfg.key_encoding is None else None
        op_code = OP_DELETE if is_delete else OP_UPSERT
        partitions: list[str] | None = None
        if sdf is not None:
            from lakesdk.engine.spark_keys import check_key_values_spark
            # refuse rows without a key, values that cannot round-trip; the rows' partitions come with it
            partitions = check_key_values_spark(sdf, ctx, resolve)
            if global_delete:   # the key index supplies the partitions
                partitions = None
        if arrow is not None:
            if arrow.num_rows == 0 and not (self.commit_empty and is_delete):
                return None
            if resolve is not None and has_missing_key_parts(arrow, cfg.record_key_fields):
                ctx.key_encoding = resolve()
            if global_delete:
                ctx_keys = replace(ctx, partition_fields=())
                arrow = add_key_columns(ctx_keys, arrow)
            else:
                arrow = add_key_columns(ctx, arrow)
                partitions = sorted(set(pc.unique(arrow.column(PART)).to_pylist()))
            n = arrow.num_rows
            if OP in arrow.column_names:   # merge: each row says whether it is an upsert or a delete
                arrow = arrow.set_column(arrow.column_names.index(OP), OP, pc.cast(arrow.column(OP), pa.int8()))
            else:
                arrow = arrow.append_column(OP, pa.repeat(pa.scalar(op_code, pa.int8()), n))
            arrow = arrow.append_column(SEQ, pa.array(np.arange(n, dtype=np.int64)))
            if IS_DELETED in arrow.column_names and not is_delete:
                arrow = _flagged_as_deletes(arrow, self.operation)
                if arrow.num_rows == 0 and self.operation == "bulk_insert":
                    return None
            if ctx.record_size_estimate is None and not is_delete:   # no commit tells it: the rows do
                ctx.record_size_estimate = record_size(ctx, arrow)
        elif sdf is not None and IS_DELETED in sdf.columns and self.operation in _WRITES_NEW:
            from lakesdk.engine.spark import drop_flagged
            sdf = drop_flagged(sdf)
        return WriteSnapshot(ctx=ctx, arrow=arrow, sdf=sdf, store=store, timeline=timeline, partitions=partitions,
                             global_delete=global_delete, target_schema=target_schema, table_schema=table_schema)

    def _check_global_index(self, keep: tuple[str, ...]) -> None:
        """What a global index cannot do yet, refused before anything is written: a MERGE INTO
        (its clauses match the source by partition and key), and an upsert that would have to
        merge a moved key with its stored version column by column (partial updates, a custom
        merger, ``missing_columns="keep"``)."""
        cfg = self.table.config
        what = "an upsert that moves a key between partitions"
        if self.operation == "merge":
            raise global_merge_error(cfg.name)
        if self.operation != "upsert":
            return
        if cfg.merge_mode not in ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"):
            raise OptionsError(
                f"upsert into {cfg.name!r}: a global index (hoodie.index.type) works with event-time or commit-time "
                f"ordering; {cfg.merge_mode} would need {what} to merge it with its stored version column by "
                "column, which lakesdk does not do yet; nothing was written", key="hoodie.index.type")
        if keep:
            raise OptionsError(
                f"upsert into {cfg.name!r}: missing_columns='keep' with a global index (hoodie.index.type) would need "
                f"{what} to take the stored values of {list(keep)}, which lakesdk does not do yet; nothing was "
                "written. Add the columns, or pass missing_columns='null'", key="hoodie.index.type")

    def _missing_columns(self, table_schema: pa.Schema | None, in_schema: pa.Schema) -> tuple[str, ...]:
        """Table columns the data lacks: an error (Hudi rejects such a batch), unless the caller
        opted in; returns the columns whose stored values an upsert keeps (``"keep"``)."""
        cfg = self.table.config
        if table_schema is None or (cfg.merge_mode == "PARTIAL_UPDATE" and cfg.column_groups is not None):
            return ()   # a partial-update table: each stream writes its own column groups
        # a batch without the delete marker is a batch of live rows: its column is written null
        missing = [f.name for f in table_schema if f.name not in META_FIELDS and f.name != IS_DELETED
                   and f.name not in in_schema.names]
        # a struct lacking stored fields follows the same rules, field by field (a.b)
        nested = [m for f in table_schema if f.name in in_schema.names
                  for m in missing_fields(f.type, in_schema.field(f.name).type, f.name)]
        if not (missing or nested) or self.missing_columns == "null":
            return ()
        in_lists = [p for p, inner in nested if inner]
        if self.missing_columns == "keep" and not in_lists:
            return (*missing, *(p for p, _ in nested))
        if self.missing_columns == "keep":
            raise MissingColumnError(
                f"{self.operation} into {cfg.name!r}: the data's list or map elements lack stored field(s) "
                f"{in_lists}; missing_columns='keep' keeps stored values of columns and struct fields, not of "
                "elements of a list or map (which stored element would it be?). Add the fields, or pass "
                "missing_columns='null' to write nulls")
        what = [*missing, *(p for p, _ in nested)]
        raise MissingColumnError(
            f"{self.operation} into {cfg.name!r}: the data lacks table column(s) {what} (data columns: "
            f"{', '.join(in_schema.names)}); Hudi rejects such a batch, and writing it would set those "
            f"{'columns and fields' if nested else 'columns'} to null in every written record. Add them, or pass "
            "missing_columns='null' to write nulls"
            + (" or missing_columns='keep' to keep the stored values of updated records (a partial update)"
               if self.operation in _MERGING else ""))

    @staticmethod
    def _record_size(store: Any, timeline: Any, default: int | None) -> int | None:
        for inst in reversed(timeline.commits.by_completion()):
            tot = store.commit_metadata(inst).totals()
            if tot["written"] > 0 and tot["bytes"] > 0:
                return max(1, tot["bytes"] // tot["written"])
        return default


def check_partition_paths(cfg: TableConfig, operation: str, in_schema: pa.Schema | None) -> None:
    """Refuse a write whose rows' partition paths lakesdk cannot compute as the table's key
    generator does: Hudi's TimestampBasedKeyGenerator (and a CustomKeyGenerator's
    ``field:TIMESTAMP`` parts) format a time into the path (``2024/01/15/10``), which lakesdk
    does not do yet; writing the raw values would put records in partitions of their own and
    duplicate their keys.  A delete by key values alone finds its keys in any partition and
    computes no path: it stays allowed (``in_schema``: the input's columns; None for a merge,
    which is refused before its source is matched)."""
    raw = [f.strip() for f in (cfg.props.get("hoodie.table.partition.fields") or "").split(",")]
    timed = cfg.keygen_type == "TIMESTAMP" or any(f.upper().endswith(":TIMESTAMP") for f in raw)
    if not timed or (operation == "delete" and in_schema is not None
                     and not any(f in in_schema.names for f in cfg.partition_fields)):
        return
    raise TableConfigError(
        f"{cfg.name!r} is partitioned by a time its key generator formats (hoodie.table.keygenerator.type="
        f"{cfg.keygen_type}, hoodie.table.partition.fields={cfg.props.get('hoodie.table.partition.fields')!r}): "
        f"lakesdk reads such tables and runs their table services, but does not compute their partition paths yet, "
        f"so it refuses this {operation} (nothing was written). Write it with Apache Hudi; to delete records, pass "
        "their record key values only (t.delete([...])), which finds them in any partition",
        key="hoodie.table.keygenerator.type")


def _case_clashes(table_schema: pa.Schema, in_schema: pa.Schema, target_schema: pa.Schema, table: str) -> None:
    """A data column whose name differs only by case from a stored column's is refused
    (:class:`DuplicateColumnError`): Spark and Hudi would take them for one column."""
    from lakesdk.exceptions import DuplicateColumnError
    from lakesdk.format.schema import name_clashes
    stored = set(name_clashes(table_schema))   # clashes a table already holds do not block its writes
    new = [g for g in name_clashes(target_schema) if g not in stored]
    if new:
        pairs = "; ".join(f"{[n for n in g if n in in_schema.names]} against the table's "
                          f"{[n for n in g if n in table_schema.names]}" for g in new)
        raise DuplicateColumnError(
            f"write into {table!r}: the data's column names differ only by case from the table's ({pairs}); Spark "
            "and Hudi resolve column names case-insensitively, so the table could not hold both (Spark could no "
            "longer read it: COLUMN_ALREADY_EXISTS). Use the table's spelling to write into the stored column, or "
            "another name; nothing was written", columns=tuple(n for g in new for n in g))


def global_merge_error(table: str) -> OptionsError:
    """A MERGE INTO a table with a global index: refused (its clauses match by partition and key)."""
    return OptionsError(
        f"t.merge(...) into {table!r}: the table uses a global index (hoodie.index.type), and a merge matches "
        "source rows by partition and key; nothing was written. Use t.upsert(...) and t.delete(...), which find "
        "a key in any partition, or open the table with options=TableOptions(index_type='bloom') to merge by "
        "partition", key="hoodie.index.type")


def _delete_marker(arrow: pa.Table | None, sdf: Any, schema: pa.Schema, table: str) -> tuple[pa.Table | None, Any, pa.Schema]:
    """Check the type of the data's ``_hoodie_is_deleted`` column before anything is written:
    a boolean (null: not flagged), or a column of nulls only (cast to boolean); any other
    type is refused, as a value that is not a boolean cannot say whether the row is a delete."""
    typ = schema.field(IS_DELETED).type
    if pa.types.is_boolean(typ):
        return arrow, sdf, schema
    if not pa.types.is_null(typ):
        raise DeleteMarkerTypeError(
            f"{IS_DELETED} is Hudi's delete marker and must be a boolean column (true: the row deletes its "
            f"record key; false or null: a live row), but the data for {table!r} has type {typ}; "
            f"cast it to boolean before writing")
    if arrow is not None:
        arrow = arrow.set_column(arrow.column_names.index(IS_DELETED), IS_DELETED, arrow.column(IS_DELETED).cast(pa.bool_()))
    else:
        from lakesdk.engine.spark import cast_column
        sdf = cast_column(sdf, IS_DELETED, "boolean")
    i = schema.get_field_index(IS_DELETED)
    return arrow, sdf, schema.set(i, schema.field(i).with_type(pa.bool_()))


def _flagged_as_deletes(arrow: pa.Table, operation: str) -> pa.Table:
    """Rows flagged ``_hoodie_is_deleted`` (true) are deletes of their record key, as Hudi's
    writers treat them: an upsert, insert or merge carries them as deletes (they take part in
    the combine of the batch by their ordering value, and delete the stored record when they
    win against it, under the table's merge mode); a bulk insert or an overwrite, which
    merges with nothing, leaves them out (Hudi's create handle writes no flagged record)."""
    from lakesdk.engine.slice_reader import deleted_flags
    flag = deleted_flags(arrow)
    if flag is None:
        return arrow
    if operation in _WRITES_NEW:
        return arrow.filter(pc.invert(flag))
    ops = pc.if_else(flag, pa.scalar(OP_DELETE, pa.int8()), arrow.column(OP))
    return arrow.set_column(arrow.column_names.index(OP), OP, ops)


def _check_ordering_values(arrow: pa.Table, ordering: Ordering, merge_mode: str, table: str, operation: str) -> None:
    """Under event-time ordering, refuse records written as data (every row; a merge's
    upserts) whose ordering value is null (any of several ordering fields), before the
    instant exists (Hudi refuses them)."""
    for o in event_time_fields(ordering, merge_mode):
        if o not in arrow.column_names:
            continue
        col = arrow.column(o)
        what = operation
        if OP in arrow.column_names:   # a merge: its deletes may go without an ordering value
            col = col.filter(pc.equal(arrow.column(OP), OP_UPSERT))
            what = "merge's updates and inserts"
        if col.null_count:
            raise null_ordering_error(o, col.null_count, len(col), table, what)
