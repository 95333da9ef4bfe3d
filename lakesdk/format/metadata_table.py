"""Hudi's metadata table (MDT) as the data table's config names it.

The MDT is a merge-on-read Hudi table at ``.hoodie/metadata`` (:data:`METADATA_DIR`) that
Apache Hudi keeps beside every table it writes (``hoodie.metadata.enable``, on by default
since Hudi 0.11): file listings (the ``files`` partition), column and partition statistics,
bloom filters, the record-level index, secondary and expression indexes, each an MDT
"partition" (a folder of the MDT).  The data table's ``hoodie.properties`` names the MDT
partitions that are built (:data:`PARTITIONS_KEY`, comma-separated) and those being built
(:data:`INFLIGHT_KEY`).  A reader trusts the MDT when :data:`PARTITIONS_KEY` names ``files``
(Hudi's ``HoodieTableConfig.isMetadataTableAvailable``; the ``hudi`` reader likewise on
table versions 8 and 9), and an MDT partition when that key names it
(:func:`available_partitions`); a writer keeps the partitions either key names
(:func:`metadata_partitions`), building again the ones named inflight only.

A writer that does not maintain the MDT clears both keys (to empty values, as Hudi's
``HoodieTableConfig.clearMetadataPartitions`` does) before it deletes the MDT's folder, so
that no reader trusts a listing the write makes stale: :func:`without_metadata_table`.

>>> props = {"hoodie.table.name": "t", PARTITIONS_KEY: "files,column_stats", INFLIGHT_KEY: ""}
>>> metadata_partitions(props)
('column_stats', 'files')
>>> available_partitions({PARTITIONS_KEY: "files", INFLIGHT_KEY: "column_stats"})
('files',)
>>> cleared = without_metadata_table(props)
>>> cleared[PARTITIONS_KEY], cleared[INFLIGHT_KEY], metadata_partitions(cleared)
('', '', ())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from lakesdk.format.timeline import Timeline

__all__ = ["METADATA_DIR", "PARTITIONS_KEY", "INFLIGHT_KEY", "metadata_partitions", "available_partitions",
           "inflight_partitions", "without_metadata_table",
           "pending_data_instants", "undone_instants"]

#: the MDT's base path, relative to the data table's
METADATA_DIR = ".hoodie/metadata"
#: ``hoodie.properties``: the MDT partitions built and usable (``files`` makes the MDT usable)
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
#: ``hoodie.properties``: the MDT partitions being built
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"


def _names(props: Mapping[str, str], key: str) -> set[str]:
    return {p.strip() for p in (props.get(key) or "").split(",") if p.strip()}


def metadata_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """The MDT partitions ``hoodie.properties`` names, built or being built, sorted."""
    return tuple(sorted(_names(props, PARTITIONS_KEY) | _names(props, INFLIGHT_KEY)))


def available_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """The MDT partitions ``hoodie.properties`` names built, sorted: the ones a reader trusts
    (Hudi's ``HoodieTableConfig.getMetadataPartitions``); one being built is not among them."""
    return tuple(sorted(_names(props, PARTITIONS_KEY)))


def inflight_partitions(props: Mapping[str, str]) -> tuple[str, ...]:
    """The MDT partitions ``hoodie.properties`` names as being built (or whose build died), sorted."""
    return tuple(sorted(_names(props, INFLIGHT_KEY) - _names(props, PARTITIONS_KEY)))


def without_metadata_table(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` naming no MDT partition: both keys present and empty, every other entry kept
    in its place (Hudi's ``clearMetadataPartitions``)."""
    out = dict(props)
    out[PARTITIONS_KEY] = ""
    out[INFLIGHT_KEY] = ""
    return out


def pending_data_instants(timeline: "Timeline") -> set[str]:
    """The requested times of the data table's pending instants whose MDT delta commits do not
    count yet (Hudi completes the delta commit first).  A pending savepoint is none of them: it
    has the time of the commit it saves, whose delta commit counts (found by the service soak:
    that commit's files left the listing while the savepoint ran)."""
    return {i.requested for i in timeline.pending if i.action != "savepoint"}


def undone_instants(action: str, data: bytes) -> set[str]:
    """The requested times of the instants a completed rollback or restore (its completed
    file ``data``) undoes; none for another action."""
    if action == "rollback":
        from lakesdk.format.rollback_metadata import RollbackMetadataData
        return RollbackMetadataData.parse(data).undone
    if action == "restore":
        from lakesdk.format.restore_metadata import RestoreMetadataData
        return RestoreMetadataData.parse(data).undone
    return set()
