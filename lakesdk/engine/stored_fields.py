"""``missing_columns="keep"``: the columns the data lacks take the stored values of the records
being updated (:func:`keep_stored`), and an incoming struct that lacks some of the stored
struct's fields takes their stored values (:func:`with_stored_field`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.merge.ordering import KEY, ROW, positions

__all__ = ["keep_stored", "with_stored_field"]


def with_stored_field(new: Any, stored: Any, path: list[str]) -> Any:
    """The struct column ``new`` with its field at ``path`` (``["b"]``, ``["b", "c"]``) taken
    from ``stored`` (the stored struct of the same records, row for row).  A null incoming
    struct stays null; a field of a null stored struct is null."""
    new = new.combine_chunks() if isinstance(new, pa.ChunkedArray) else new
    stored = stored.combine_chunks() if isinstance(stored, pa.ChunkedArray) else stored
    if not (pa.types.is_struct(new.type) and pa.types.is_struct(stored.type)):
        return new
    fields = [new.type.field(i) for i in range(new.type.num_fields)]
    names = [f.name for f in fields]
    if stored.type.get_field_index(path[0]) < 0:
        return new
    kids = [new.field(i) for i in range(len(fields))]
    old = stored.field(path[0])
    if stored.null_count:
        old = pc.if_else(pc.is_valid(stored), old, pa.nulls(len(old), old.type))
    if path[0] not in names:   # the incoming struct type lacks the field (the table's schema places it)
        fields.append(stored.type.field(path[0]))
        kids.append(old)
    else:
        i = names.index(path[0])
        kids[i] = with_stored_field(kids[i], old, path[1:]) if len(path) > 1 else old.cast(kids[i].type)
    return pa.StructArray.from_arrays(kids, fields=fields, mask=pc.is_null(new) if new.null_count else None)


def keep_stored(keep_columns: Sequence[str], new: pa.Table, stored: pa.Table | None) -> pa.Table:
    """``missing_columns="keep"``: the ``keep_columns`` the data lacks (a write's
    ``WriteContext.keep_columns``; ``a.b`` a field of struct ``a``) take the stored values of
    the records being updated (null for new records), as a partial update would."""
    if not keep_columns or stored is None or new.num_rows == 0:
        return new
    if ROW in new.column_names:   # the stored row each update replaces (merge_into_base: one per stored copy)
        pos_np = np.asarray(pc.fill_null(new.column(ROW), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        pos_np = positions(new.column(KEY), stored.column(KEY))
    pos = pa.array(np.maximum(pos_np, 0), mask=pos_np < 0)
    for c in keep_columns:
        top, _, rest = c.partition(".")   # a struct field the data lacks: a.b
        if top not in stored.column_names:
            continue
        vals = stored.column(top).take(pos) if stored.num_rows else pa.nulls(new.num_rows, stored.schema.field(top).type)
        if rest and top in new.column_names:
            vals = with_stored_field(new.column(top), vals, rest.split("."))
        if top in new.column_names:
            new = new.set_column(new.column_names.index(top), top, vals)
        else:
            new = new.append_column(top, vals)
    return new
