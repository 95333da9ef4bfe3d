"""``missing_columns="keep"`` for struct fields: an incoming struct that lacks some of the
stored struct's fields takes their stored values (:func:`lakesdk.engine.tasks.keep_stored`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["with_stored_field"]


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
