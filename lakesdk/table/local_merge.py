"""The local side of ``t.merge(...)`` (:mod:`lakesdk.table.merge`): an Arrow source merged
without Spark, with the same meaning as :mod:`lakesdk.engine.spark_merge`.

The target rows that can match (the source's keys, in the source rows' partitions; the whole
snapshot when a ``when_not_matched_by_source_*`` clause needs every row) are read by the
Arrow reader and joined with the source in Arrow.  Conditions (``where=``) and ``updates`` /
``values`` expressions are the predicate tree of :mod:`lakesdk.read.predicate`, bound to the joined
schema (a struct ``s`` of the source's columns, a struct ``t`` of the target's) and evaluated
by pyarrow with Spark SQL's semantics.  Each clause's condition is evaluated on the rows no
earlier clause took (as Spark's ``CASE WHEN`` does), each assignment on the rows of its clause.

:func:`local_merge_plan` raises :class:`LocalMergeUnsupported` for an expression outside
what lakesdk evaluates (the caller then runs the merge on Spark) and InvalidFilterError for
one that names an unknown column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import InvalidFilterError, MergeConflictError, SchemaError, _LocalMergeUnsupported
from lakesdk.read.expr import Col, Node

if TYPE_CHECKING:
    from lakesdk.commit.context import TableHandle
    from lakesdk.read.bind import Bound

__all__ = ["LocalMergeUnsupported", "LocalMergeChanges", "local_merge_plan"]


LocalMergeUnsupported = _LocalMergeUnsupported   # an expression not evaluated locally: the merge runs on Spark


@dataclass(frozen=True)
class LocalMergeChanges:
    """The rows a merge changes (an Arrow table with ``_lk_op``) and the rows each clause selected."""

    changes: pa.Table
    counts: dict[int | None, int]
    source_rows: int
    unchanged: int
    acted: int


def _qualified(tree: Any, text: str, names: dict[str, list[str]]) -> None:
    """Every column is ``s.<source column>`` or ``t.<target column>``: else InvalidFilterError."""
    if isinstance(tree, Col):
        side = tree.path[0].lower() if len(tree.path) > 1 else None
        if side not in names:
            raise InvalidFilterError(
                f"the merge expression {text!r} names column {tree.name!r} without s. or t.; write "
                f"s.{tree.name} for the source's column or t.{tree.name} for the table's", column=tree.name)
        if not any(tree.path[1].lower() == n.lower() for n in names[side]):
            what = "source" if side == "s" else "table"
            raise InvalidFilterError(
                f"the merge expression {text!r} names unknown column {tree.name!r}: the {what} has no column "
                f"{tree.path[1]!r} (it has: {', '.join(names[side])})", column=tree.name)
    elif isinstance(tree, Node):
        for a in tree.args:
            for x in (a if isinstance(a, tuple) else (a,)):
                _qualified(x, text, names)


def _bind(text: str, schema: pa.Schema, names: dict[str, list[str]], *, value: bool) -> "Bound":
    from lakesdk.read.predicate import parse_expression, parse_where
    try:
        p = parse_expression(text) if value else parse_where(text)
    except InvalidFilterError as err:
        raise LocalMergeUnsupported(err) from None
    _qualified(p.tree, text, names)   # an unknown column is an error on every engine
    try:
        return p.bind_value(schema) if value else p.bind(schema)
    except InvalidFilterError as err:
        raise LocalMergeUnsupported(err) from None


def _folder(col: pa.ChunkedArray | pa.Array) -> Any:
    """A partition value's folder identity: '' and __HIVE_DEFAULT_PARTITION__ are the folder of nulls."""
    from lakesdk.format.keys import DEFAULT_PARTITION
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return col
    return pc.if_else(pc.is_in(col, pa.array(["", DEFAULT_PARTITION], col.type)), pa.scalar(None, col.type), col)


def _evaluate(table: pa.Table, exprs: dict[str, Any]) -> pa.Table:
    import pyarrow.dataset as ds
    try:
        return ds.dataset(table).to_table(columns=exprs)
    except pa.ArrowInvalid as err:   # as Spark SQL's ANSI mode: an overflow or a division by zero fails
        raise InvalidFilterError(f"a merge expression failed on a row: {err} (Spark SQL raises the same error "
                                 "in ANSI mode); exclude such rows with the clause's where= condition") from None


def local_merge_plan(t: "TableHandle", src: pa.Table, *, on: Sequence[str], clauses: Sequence[Any],
                     lacking_columns: Callable[[list[str]], set[str]],
                     key_guards: dict[int, tuple[str, ...]] | None = None) -> Callable[[], LocalMergeChanges]:
    """Bind every clause of the merge of ``src`` into ``t``; returns the function that runs it.
    Raises LocalMergeUnsupported before anything is read when an expression is outside the
    local subset.  ``key_guards``: the key and partition fields a clause must leave as stored
    (by clause index; a change is a KeyChangeError)."""
    src_cols = src.column_names
    missing = [k for k in on if k not in src_cols]
    if missing:
        raise SchemaError(f"merge key(s) {missing} are not columns of the source ({', '.join(src_cols)})")
    tschema = t.schema
    has_target = bool(tschema.names)
    if not has_target:
        tschema = src.schema
    joined_schema = pa.schema([pa.field("s", pa.struct(list(src.schema))), pa.field("t", pa.struct(list(tschema)))])
    names = {"s": list(src_cols), "t": list(tschema.names)}
    conds = [_bind(c.condition, joined_schema, names, value=False) if c.condition else None for c in clauses]
    target_cols = list(tschema.names)
    all_cols = list(dict.fromkeys([*target_cols, *[c for c in src_cols if c not in target_cols]]))
    sets: list[dict[str, Any]] = []
    for c in clauses:
        vals = c.values or {}
        unknown = [k for k in vals if k not in all_cols]
        if unknown:
            raise SchemaError(f"merge clause sets unknown column(s) {unknown}; the table has {target_cols}")
        sets.append({k: _bind(v, joined_schema, names, value=True) for k, v in vals.items()})

    def run() -> LocalMergeChanges:
        return _run(t, src, tschema, has_target, on, clauses, conds, sets, lacking_columns(src_cols), key_guards or {})
    return run


def _read_target(t: "TableHandle", src: pa.Table, tschema: pa.Schema, on: Sequence[str], parts: list[str],
                 everything: bool) -> pa.Table:
    """The target rows that can match: those with the source's keys in the source's
    partitions (a superset; the join decides), or every row."""
    from dataclasses import replace

    from lakesdk.engine.read import read_arrow
    from lakesdk.format.read_plan import ScanFilter
    from lakesdk.read.expr import Lit
    from lakesdk.read.predicate import Predicate, _python_literal
    from lakesdk.table.query import Query
    q = Query(t)
    expr = None
    if not everything:
        tree: Any = None
        for f in parts:   # prune the partitions the source does not touch
            vals = pc.unique(src.column(f)).to_pylist()
            ftype = src.column(f).type
            if (None in vals or "" in vals) and (pa.types.is_string(ftype) or pa.types.is_large_string(ftype)):
                # '' and null share one partition folder: the plan also skips files by their
                # column statistics, where a stored null is not '' (the join decides)
                vals = [v for v in vals if v is not None and v != ""] + ["", None]
            lits = tuple(_python_literal(v) for v in vals if v is not None)
            n: Any = Node("in", (Col((f,)), lits)) if lits else Lit(False, "bool")
            if None in vals:
                n = Node("or", (n, Node("isnull", (Col((f,)),))))
            tree = n if tree is None else Node("and", (tree, n))
        if tree is not None:
            q = replace(q, predicate=Predicate(tree, "the merge source's partitions"))
        for k in on:
            # floating keys: NaN and -0.0 match as the join compares them (not as is_in does): every row
            if k in parts or k not in tschema.names or pa.types.is_floating(tschema.field(k).type):
                continue
            try:
                keys = pc.unique(src.column(k)).cast(tschema.field(k).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                continue
            e = ScanFilter.of(pc.field(k).isin(keys), [k])     # no floating keys: bounds prune it rightly
            expr = e if expr is None else (expr & e)
    try:
        plan = q.plan()
    except InvalidFilterError:   # a partition value that does not bind: read every partition
        plan = Query(t).plan()
    return read_arrow(t.context, plan, list(tschema.names), expr)


def _join_keys(cols: list[Any], nulls_match: list[bool], side: int, fills: list[Any]) -> dict[str, Any]:
    """Join columns: a flag (0 a value, 1 a null that matches a null, 2/3 a null that matches
    nothing, 4 a NaN) and the value.  Floating values compare as Spark SQL compares them in a
    join: NaN equals NaN, -0.0 equals 0.0 (``NormalizeFloatingNumbers``)."""
    out: dict[str, Any] = {}
    for i, (c, match, fill) in enumerate(zip(cols, nulls_match, fills)):
        isnull = pc.is_null(c)
        flag = pc.if_else(isnull, pa.scalar(1 if match else 2 + side, pa.int8()), pa.scalar(0, pa.int8()))
        if pa.types.is_floating(c.type):
            nan = pc.fill_null(pc.is_nan(c), False)
            flag = pc.if_else(nan, pa.scalar(4, pa.int8()), flag)
            c = pc.if_else(nan, pa.scalar(0.0, c.type), pc.add(c, pa.scalar(0.0, c.type)))   # -0.0 + 0.0 is 0.0
            fill = 0.0 if fill is not None else None
        out[f"__f{i}"] = flag
        if fill is not None:
            out[f"__v{i}"] = pc.fill_null(c, pa.scalar(fill, c.type))
    return out


def _struct(table: pa.Table, idx: pa.Array, schema: pa.Schema) -> pa.StructArray:
    arrays = [pc.take(table.column(f.name), idx).combine_chunks() if table.num_rows
              else pa.nulls(len(idx), f.type) for f in schema]
    arrays = [a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, schema)]
    return pa.StructArray.from_arrays(arrays, fields=list(schema), mask=pc.is_null(idx))


def _run(t: "TableHandle", src: pa.Table, tschema: pa.Schema, has_target: bool, on: Sequence[str],
         clauses: Sequence[Any], conds: list[Any], sets: list[dict[str, Any]], lacking: set[str],
         guards: dict[int, tuple[str, ...]]) -> LocalMergeChanges:
    cfg = t.config
    src_cols = src.column_names
    parts = [f for f in cfg.partition_fields if f in src_cols]
    # duplicate keys (within a partition folder): ambiguous
    dup_cols = {k: (_folder(src.column(k)) if k in parts else src.column(k)) for k in on}
    dup_cols.update({f: _folder(src.column(f)) for f in parts if f not in on})
    if src.num_rows:
        grouped = pa.table(dup_cols).group_by(list(dup_cols)).aggregate([([], "count_all")])
        dup = grouped.filter(pc.greater(grouped.column("count_all"), 1))
        if dup.num_rows:
            keys = [tuple(r[k] for k in on) for r in dup.slice(0, 3).to_pylist()]
            raise MergeConflictError(
                f"the merge source has several rows for the same key (e.g. {keys}); a target row can be "
                "matched by one source row only: de-duplicate the source first")
    by_source = any(c.kind.startswith("by_source") for c in clauses)
    tgt = _read_target(t, src, tschema, on, parts, by_source) if has_target else tschema.empty_table()
    # the join: null-safe on the record key and the partition folders, as the Spark merge joins
    by_key = set(on) == set(t.key)
    jcols = [*on, *[f for f in parts if f not in on and f in tschema.names]]
    scols, tcols, match, fills = [], [], [], []
    for k in jcols:
        s_c, t_c = src.column(k), tgt.column(k)
        if k in parts:
            s_c, t_c = _folder(s_c), _folder(t_c)
        if s_c.type != t_c.type:
            try:
                s_c = s_c.cast(t_c.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                t_c = t_c.cast(s_c.type)
        scols.append(s_c)
        tcols.append(t_c)
        match.append(k in parts or by_key)
        both = pc.drop_null(pa.chunked_array([*pa.chunked_array(s_c).chunks, *pa.chunked_array(t_c).chunks],
                                             type=s_c.type))
        fills.append(both[0] if len(both) else None)
    left = pa.table({**_join_keys(scols, match, 0, fills), "__s_row": pa.array(np.arange(src.num_rows))})
    right = pa.table({**_join_keys(tcols, match, 1, fills), "__t_row": pa.array(np.arange(tgt.num_rows))})
    keys = [c for c in left.column_names if c != "__s_row"]
    pairs = left.join(right, keys=keys, join_type="full outer" if by_source else "left outer",
                      use_threads=False)
    s_idx = pairs.column("__s_row").combine_chunks()
    t_idx = pairs.column("__t_row").combine_chunks()
    joined = pa.table({"s": _struct(src, s_idx, src.schema), "t": _struct(tgt, t_idx, tschema),
                       "__row": pa.array(np.arange(pairs.num_rows))})
    s_present = pc.is_valid(s_idx).to_numpy(zero_copy_only=False)
    t_present = pc.is_valid(t_idx).to_numpy(zero_copy_only=False)
    kinds = {"matched": s_present & t_present, "not_matched": s_present & ~t_present,
             "by_source": ~s_present & t_present}
    action = np.full(pairs.num_rows, -1, dtype=np.int64)
    for i, (c, cond) in enumerate(zip(clauses, conds)):
        kind = "matched" if c.kind.startswith("matched") else "not_matched" if c.kind.startswith("not_matched") \
            else "by_source"
        rows = np.flatnonzero(kinds[kind] & (action < 0))
        if cond is not None and len(rows):   # evaluated on the rows still open, as CASE WHEN does
            ok = _evaluate(joined.take(pa.array(rows)), {"c": cond.to_arrow()}).column("c")
            rows = rows[pc.fill_null(ok, False).to_numpy(zero_copy_only=False)]
        action[rows] = i
    counts: dict[int | None, int] = {}
    for i in range(len(clauses)):
        counts[i] = int((action == i).sum())
    counts[None] = int((action < 0).sum())
    source_rows = src.num_rows
    unchanged = int(((action < 0) & s_present).sum())
    # one output row per acted-on row, in the target schema, with its op
    o = set(cfg.ordering_fields)
    target_cols = list(tschema.names)
    all_cols = list(dict.fromkeys([*target_cols, *[c for c in src_cols if c not in target_cols]]))
    outs = []
    for i, c in enumerate(clauses):
        rows = np.flatnonzero(action == i)
        if not len(rows):
            continue
        sub = joined.take(pa.array(rows))
        exprs: dict[str, Any] = {}
        if c.kind.endswith("delete"):
            for k in target_cols:
                exprs[k] = pc.coalesce(pc.field("s", k), pc.field("t", k)) if k in o and k in src_cols \
                    else pc.field("t", k)
            op = 1
        elif c.kind in ("matched_update_all", "not_matched_insert_all"):
            for k in all_cols:
                exprs[k] = (pc.field("s", k) if k in src_cols
                            else pc.field("t", k) if k in target_cols and k not in lacking
                            else pc.scalar(pa.scalar(None, tschema.field(k).type)))
            op = 0
        else:
            vals = sets[i]
            base = c.kind != "not_matched_insert"
            for k in dict.fromkeys([*target_cols, *vals]):
                if k in vals:
                    exprs[k] = vals[k].to_arrow()
                elif k in on:
                    exprs[k] = pc.coalesce(pc.field("s", k), pc.field("t", k).cast(src.schema.field(k).type)) \
                        if k in target_cols else pc.field("s", k)
                elif base and k in target_cols:
                    exprs[k] = pc.field("t", k)
                else:
                    typ = tschema.field(k).type if k in target_cols else pa.null()
                    exprs[k] = pc.scalar(pa.scalar(None, typ))
            op = 0
        exprs["_lk_op"] = pc.scalar(pa.scalar(op, pa.int8()))
        out = _evaluate(sub, exprs)
        if i in guards:
            _check_keys_kept(t, c, guards[i], out, sub.column("t"))
        outs.append(out)
    acted = sum(counts.get(i, 0) for i in range(len(clauses)))
    changes = pa.concat_tables(outs, promote_options="permissive") if outs else pa.table({})
    return LocalMergeChanges(changes, counts, source_rows, unchanged, acted)


def _check_keys_kept(t: "TableHandle", clause: Any, columns: Sequence[str], out: pa.Table, stored: Any) -> None:
    """The rows a clause rewrites keep their record key and partition folder: else KeyChangeError."""
    from lakesdk.engine.spark_merge import key_change_error
    parts = set(t.config.partition_fields)
    changed = np.zeros(out.num_rows, dtype=bool)
    pairs: list[tuple[Any, Any]] = []
    for k in columns:
        old = pc.struct_field(stored, k)
        new = out.column(k).combine_chunks()
        if k in parts:
            old, new = _folder(old), _folder(new)
        try:
            new = new.cast(old.type)
            differs = pc.fill_null(pc.not_equal(new, old), True)
            same_null = pc.and_(pc.is_null(new), pc.is_null(old))
            diff = pc.and_not(differs, same_null).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            diff = np.ones(out.num_rows, dtype=bool)   # a value the stored type cannot hold: a change
        changed |= diff
        pairs += [(o, n) for o, n in zip(old.filter(pa.array(diff)).to_pylist()[:3],
                                          new.filter(pa.array(diff)).to_pylist()[:3])]
    if changed.any():
        raise key_change_error(t.config.name, clause, columns, pairs, int(changed.sum()), t.config.record_key_fields)
