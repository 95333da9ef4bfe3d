"""Building the metadata table, or an index of it, for an existing table
(``table.maintenance.create_metadata_table()`` and ``create_index``).

The partition is named in ``hoodie.properties`` and the metadata table built from a listing
with it (:func:`lakesdk.services.metadata_writer.create_metadata_table`); the record index
(:mod:`lakesdk.services.record_index`) has its keys read from the latest file slices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakesdk.format.metadata_table import available_partitions
from lakesdk.format.record_index import ENABLE_KEY, PARTITION
from lakesdk.services.metadata_writer import create_metadata_table

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.read.metadata_table import MetadataTableReader

__all__ = ["build_metadata_table", "build_record_index"]


def build_metadata_table(ctx: "TableContext") -> "MetadataTableReader":
    """``table.maintenance.create_metadata_table()``: under the table lock, build the MDT from a
    listing unless the table has one (version 8 and 9 tables)."""
    return _build(ctx, "files", "metadata table")


def build_record_index(ctx: "TableContext") -> "MetadataTableReader":
    """``table.maintenance.create_index("record")``: under the table lock, name the record index
    in ``hoodie.properties`` (``hoodie.metadata.record.index.enable=true``) and build the MDT
    again from a listing with it (its keys read from the latest file slices), unless the table
    has one.  Tagging goes through it once the table's index is ``record``."""
    return _build(ctx, PARTITION, "record index", {ENABLE_KEY: "true"})


def _build(ctx: "TableContext", partition: str, what: str,
           enable: dict[str, str] | None = None) -> "MetadataTableReader":
    """Under the table lock, unless ``hoodie.properties`` names the MDT ``partition``: write the
    ``enable`` properties (if any) and build the MDT from a listing."""
    from lakesdk.commit.table_properties import read_properties, rewrite_properties
    from lakesdk.concurrency.instants import holding
    from lakesdk.exceptions import UnsupportedTableVersionError
    from lakesdk.format.table_config import TableConfig
    from lakesdk.read.metadata_table import MetadataTableReader
    if ctx.config.version < 8:
        raise UnsupportedTableVersionError(
            f"{ctx.name!r} is a version {ctx.config.version} table: lakesdk builds the {what} of version 8 "
            "and 9 tables; upgrade the table first (table.maintenance.upgrade())", key="hoodie.table.version")
    with holding(ctx.lock()):
        raw, cfg = read_properties(ctx.storage)
        if partition not in available_partitions(cfg.props):
            if enable:
                new = TableConfig({**cfg.props, **enable})
                rewrite_properties(ctx.storage, raw, new)
                raw, cfg = new.to_text().encode("utf-8"), new
            create_metadata_table(ctx, raw, cfg)
    return MetadataTableReader(ctx.storage, ctx.store.load())
