"""Upgrade a table version 8 table to version 9, as Apache Hudi's ``EightToNineUpgradeHandler`` does.

Versions 8 and 9 share the timeline layout (2), the commit metadata and the data and log
files; version 9 changes ``hoodie.properties`` (:meth:`TableConfig.upgraded`) and gives
every index definition (``hoodie.table.index.defs.path``, written by Hudi's metadata table
indexes) a version, ``V1`` where it has none.  The rewrite runs under the table lock (with
several writers) and writes ``hoodie.properties`` as Hudi's ``HoodieTableConfig.modify``
does (:mod:`lakesdk.commit.table_properties`).  Apache Hudi upgrades a table's metadata table
with it; lakesdk does not upgrade the metadata table and drops it first
(:mod:`lakesdk.services.metadata_table`).

There is no downgrade: a version 9 table goes back to version 8 with Apache Hudi
(``NineToEightDowngradeHandler``, run by a Hudi 1.1+ writer configured with
``hoodie.write.table.version=8``).  A version 6 table upgrades with Apache Hudi too.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from lakesdk.commit.context import context_of
from lakesdk.commit.table_properties import read_properties, rewrite_properties
from lakesdk.exceptions import TableConfigError, UnsupportedTableVersionError
from lakesdk.format.table_config import TableConfig
from lakesdk.services.metadata_table import drop_metadata_table

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["upgrade_table"]

_INDEX_DEFS_KEY = "hoodie.table.index.defs.path"


def upgrade_table(table: "TableContext | Any") -> TableConfig | None:
    """Upgrade a version 8 table to version 9 in place; returns the new config, or None when
    the table is version 9 already.  A version 6 table raises UnsupportedTableVersionError
    (Apache Hudi upgrades it)."""
    ctx = context_of(table)
    lock = ctx.lock()
    with lock if lock is not None else contextlib.nullcontext():
        raw, cfg = read_properties(ctx.storage)
        if cfg.version == 9:
            return None
        if cfg.version != 8:
            raise UnsupportedTableVersionError(
                f"{cfg.name!r} is table version {cfg.version}: lakesdk upgrades version 8 tables to 9; upgrade a "
                f"version {cfg.version} table with Apache Hudi (a Hudi 1.1+ writer upgrades it on its first write)",
                key="hoodie.table.version")
        _version_index_definitions(ctx, cfg)
        # Hudi upgrades the metadata table with the data table; lakesdk builds it again: the
        # version 8 one is dropped first, and a new one built from a listing once the table is
        # version 9 (when the table keeps one); only the indexes lakesdk does not build are lost
        from lakesdk.services.metadata_writer import create_metadata_table, keeps_metadata_table, maintained
        rebuild = keeps_metadata_table(ctx, cfg)
        kept = maintained(ctx, cfg.upgraded()) if rebuild else ()
        drop_metadata_table(ctx, "upgrade", rebuilt=kept)
        raw, cfg = read_properties(ctx.storage)
        new = cfg.upgraded()
        if "record_index" in kept:      # the record index is built again with the others
            from lakesdk.format.record_index import ENABLE_KEY
            new = TableConfig({**new.props, ENABLE_KEY: "true"})
        rewrite_properties(ctx.storage, raw, new)
        if rebuild:
            _, new = create_metadata_table(ctx, new.to_text().encode("utf-8"), new)
        return new


def _version_index_definitions(ctx: "TableContext", cfg: TableConfig) -> None:
    """Give each index definition without a version ``"version": "V1"`` (Hudi's
    ``populateIndexVersionIfMissing``)."""
    rel = (cfg.props.get(_INDEX_DEFS_KEY) or "").strip()
    if not rel or not ctx.storage.exists(rel):
        return
    try:
        doc = json.loads(ctx.storage.read(rel))
        defs = doc["indexDefinitions"]
        if not isinstance(defs, dict) or not all(isinstance(d, dict) for d in defs.values()):
            raise TypeError("indexDefinitions is not an object of objects")
    except (ValueError, KeyError, TypeError) as exc:
        raise TableConfigError(f"{rel} (the index definitions) cannot be read: {exc}; nothing was upgraded",
                               key=_INDEX_DEFS_KEY) from None
    missing = [name for name, d in defs.items() if not d.get("version")]
    if not missing:
        return
    for name in missing:
        defs[name]["version"] = "V1"
    ctx.storage.write(rel, json.dumps(doc, indent=2).encode("utf-8"))
