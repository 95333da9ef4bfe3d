"""Dropping Hudi's metadata table (MDT), so that it is never left stale: what an action does
on a table whose MDT lakesdk does not keep (``TableOptions(metadata=False)``, table version 6;
:mod:`lakesdk.services.metadata_writer` keeps the others).

Apache Hudi's readers and writers (and the ``hudi`` reader on table versions 8 and 9) list a
table's files from the MDT's ``files`` partition, and find a key's file group in its
``record_index``, whenever ``hoodie.properties`` names those partitions
(:mod:`lakesdk.format.metadata_table`).  A commit that changes the table without an MDT
deltacommit of its own would leave every such reader answering from a stale listing.  So
:func:`drop_metadata_table` does what Apache Hudi does when a writer runs with
``hoodie.metadata.enable=false`` on a table that has one (``HoodieTable.maybeDeleteMetadataTable``,
``HoodieTableMetadataUtil.deleteMetadataTable``): it clears the MDT partitions named in
``hoodie.properties``, then deletes ``.hoodie/metadata``.  Apache Hudi builds the MDT again
from a listing on its next write with the MDT enabled.

It runs at the commit point of every action (:meth:`lakesdk.services.transaction.InstantTransaction.commit`,
under the table lock with several writers, before the completed file is written) and under
the lock of an archival and of the upgrade to version 9.  A crash at any step leaves a state
no reader misreads, and the next action finishes the drop:

* before ``hoodie.properties`` is rewritten: the MDT and its listing are untouched and the
  instant is not completed (rolled back by the next writer);
* after it (the MDT's folder still there, maybe in part): no reader trusts the MDT any more,
  and the next action deletes the folder (:func:`drop_metadata_table` deletes an MDT folder
  that ``hoodie.properties`` no longer names).

Reads never change the table: only writers and table services call this.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING

from lakesdk import _faults as faults
from lakesdk.commit.table_properties import read_properties, rewrite_properties
from lakesdk.exceptions import MetadataTableDroppedWarning
from lakesdk.format.metadata_table import METADATA_DIR, metadata_partitions, without_metadata_table
from lakesdk.format.table_config import TableConfig

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["drop_metadata_table", "has_metadata_table"]


def has_metadata_table(ctx: "TableContext") -> bool:
    """Whether the table may have an MDT to drop: its config (as the handle read it) names MDT
    partitions, or ``.hoodie/metadata`` exists (an MDT another writer built since, or the
    folder of an interrupted drop).  One existence check when neither."""
    return bool(metadata_partitions(ctx.config.props)) or ctx.storage.exists(METADATA_DIR)


def drop_metadata_table(ctx: "TableContext", action: str, *, rebuilt: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Drop the table's MDT before ``action`` completes (see the module doc): clear the MDT
    partitions in ``hoodie.properties`` (read again now: another writer may have changed it),
    then delete ``.hoodie/metadata``.  Returns the partitions the config named (empty when it
    named none); warns once, with :class:`~lakesdk.MetadataTableDroppedWarning`, when it
    cleared any the caller does not build again at once (``rebuilt``).  The caller holds the
    table lock (with several writers).

    Crash points for the crash tests: ``metadata_table_unlisted`` (``hoodie.properties`` names
    no MDT partition, the folder is still there) and ``metadata_table_deleted`` (both gone, the
    action not completed)."""
    if not has_metadata_table(ctx):
        return ()
    storage = ctx.storage
    raw, cfg = read_properties(storage)
    named = metadata_partitions(cfg.props)
    if named:
        rewrite_properties(storage, raw, TableConfig(without_metadata_table(cfg.props)))
        faults.crash_point("metadata_table_unlisted")
    storage.delete_dir(METADATA_DIR)
    faults.crash_point("metadata_table_deleted")
    lost = tuple(p for p in named if p not in rebuilt)
    if lost:
        warnings.warn(MetadataTableDroppedWarning(
            f"lakesdk dropped the Hudi metadata table of {cfg.name!r} ({METADATA_DIR}: {', '.join(lost)}) before "
            f"its {action} completed: lakesdk does not keep it {_why(cfg, action)}, and Hudi's readers list the "
            "table's files from it, so keeping it would leave them answering from a stale listing. Apache Hudi "
            "builds it again from a listing on its next write with hoodie.metadata.enable=true; the indexes it held "
            "are gone with it until then.", table=cfg.name, partitions=lost),
            stacklevel=_outside_lakesdk())
    return named


def _why(cfg: TableConfig, action: str) -> str:
    if action == "upgrade":
        return "through the upgrade to version 9 (Hudi upgrades it with the table)"
    if cfg.version < 8:
        return "on a table of version 6"
    return "with TableOptions(metadata=False) (hoodie.metadata.enable=false)"


def _outside_lakesdk() -> int:
    """The ``stacklevel`` of a warning issued by this module's caller that points at the first
    frame outside lakesdk (the user's call), or at the outermost frame of a thread."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    return level
