"""Rewrite record keys written in lakesdk's earlier key encoding as Apache Hudi writes them.

lakesdk wrote an empty composite-key value as nothing (``id:1,name:``); Hudi's key
generators write ``id:1,name:__empty__``.  :func:`upgrade_key_encoding` rewrites the
partitions holding earlier keys with one ``insert_overwrite`` whose keys are Hudi's (see
:mod:`lakesdk.format.keys`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.compute as pc

from lakesdk.exceptions import NullKeyError, SchemaError
from lakesdk.format.keys import HUDI_ENCODING, legacy_key_pattern, partition_paths
from lakesdk.format.schema import META_FIELDS

if TYPE_CHECKING:
    from lakesdk.commit.results import WriteResult
    from lakesdk.table.handle import Handle

__all__ = ["upgrade_key_encoding"]


def upgrade_key_encoding(table: "Handle") -> WriteResult | None:
    """Rewrite the partitions whose rows have keys in lakesdk's earlier encoding; returns the
    WriteResult of the ``insert_overwrite``, or None when no key needs rewriting."""
    from lakesdk.table.query import Query
    from lakesdk.table.write import WriteOperation
    cfg = table.config
    if cfg.key_encoding == HUDI_ENCODING:
        return None   # a table created with Hudi's encoding never held earlier keys
    fields = cfg.record_key_fields
    snap = Query(table, meta=True).to_arrow()
    keys = snap.column("_hoodie_record_key")
    earlier = pc.fill_null(pc.match_substring_regex(keys, legacy_key_pattern(fields, cfg.keygen_type)), False)
    n = pc.sum(earlier).as_py() or 0
    if not n:
        table._stored_key_encoding = HUDI_ENCODING
        return None
    if len(fields) == 1:
        shown = pc.filter(keys, earlier)[0].as_py()
        raise NullKeyError(
            f"{n} row(s) of {cfg.name!r} have an empty record key ({shown!r}); Hudi refuses an empty key, so it has "
            f"no encoding to rewrite it to. Delete those rows first (t.delete(['']) deletes the key of an empty "
            f"{fields[0]!r}), then upgrade again")
    paths = snap.column("_hoodie_partition_path")
    touched = pc.unique(pc.filter(paths, earlier))
    rows = snap.filter(pc.is_in(paths, touched)).sort_by([("_hoodie_commit_time", "ascending")])
    data = rows.drop_columns([c for c in META_FIELDS if c in rows.column_names])
    again = partition_paths(data, cfg.partition_fields, hive_style=cfg.hive_style, urlencode=cfg.urlencode)
    moved = pc.invert(pc.equal(again, rows.column("_hoodie_partition_path")))
    if pc.any(moved).as_py():
        first = pc.filter(rows.column("_hoodie_partition_path"), moved)[0].as_py()
        raise SchemaError(
            f"the rows of partition {first!r} compute another partition path from their values "
            f"({pc.filter(again, moved)[0].as_py()!r}), so rewriting them would move them; the key encoding of "
            f"{cfg.name!r} cannot be upgraded by lakesdk")
    result = WriteOperation(table, "insert_overwrite", data, key_encoding=HUDI_ENCODING).execute()
    table._stored_key_encoding = HUDI_ENCODING
    return result
