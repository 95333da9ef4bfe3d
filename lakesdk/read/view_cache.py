"""The files of a table as its metadata table listed them against a timeline, kept by the
process: a plan of a timeline this process planned already reads no file of the MDT.

The MDT's ``files`` partition says, for each completed instant of the data timeline, which
files it added and deleted; its delta commit completes before the instant does.  The files of
the table as of a timeline are then a function of that timeline, once a view checked that no
clean, restore or archival started while it listed them
(:meth:`~lakesdk.read.view.FileSystemView._list`): the same instants in the same states, with
the same completion times, list the same files, build the same file groups and pass the same
check of the write stats.  So a view of a timeline planned before takes them from here (as
Hudi's timeline server keeps its file system views, synced when the timeline changes).

Kept: the listing of a whole table from its MDT, under the table's URL, its
``hoodie.properties`` as the handle read them, and its timeline; the file groups and the check
of each (``as_of``, clock) a view of it built.  Not kept: a listing of storage (storage may
hold other files than the timeline says, which only a listing tells: a killed writer's, a
damaged table's), or of some partitions only.  Only the newest timeline of a table is kept (a
plan loads the timeline anew: an older one serves no later plan), and at most
:data:`MAX_FILES` files in all.

A view whose files come from here reads the MDT itself (its reader, for statistics and the
record index, and the partitions ``hoodie.properties`` names) only when a caller asks for it:
:func:`metadata_of`.  It reads the timeline again and lists again when a clean, restore or
archival started since its timeline was read, as a listing does; a read's plan, which read the
timeline just before, takes the files without (``FileSystemView(fresh=True)``): one round trip.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Iterable

from lakesdk._lru import WeightedLRU

if TYPE_CHECKING:
    from lakesdk.format.file_group import FileGroup
    from lakesdk.format.table_config import TableConfig
    from lakesdk.format.timeline import Timeline
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.storage import Storage

__all__ = ["Listed", "Built", "key_of", "get", "keep", "clear", "metadata_of", "add_built", "add_verified", "MAX_FILES",
           "MAX_MOMENTS"]

#: the files the cache holds at most, over every table
MAX_FILES = 1_000_000
#: the (as_of, clock) moments before the latest state whose file groups an entry keeps at most
#: (the first asked for): each is a copy of the table's file groups
MAX_MOMENTS = 4

#: (file groups by (partition, file id), the same sorted by key, the archived instants' completion
#: times the build read (None: none)) of one (as_of, clock)
Built = tuple[dict[tuple[str, str], "FileGroup"], list["FileGroup"], "dict[str, str] | None"]


@dataclass
class Listed:
    """A whole table's files as its MDT listed them against one timeline."""

    partitions: list[str]
    by_partition: list[tuple[str, dict[str, int]]]
    #: when its timeline was read (``time.monotonic()``)
    loaded_at: float
    #: what views of each (as_of, clock) built from them, and those whose check passed
    built: dict[tuple[str | None, str], Built] = field(default_factory=dict)
    verified: set[tuple[str | None, str]] = field(default_factory=set)


_LISTED: WeightedLRU[Hashable, Listed] = WeightedLRU(MAX_FILES)
#: the key of the entry kept for each table (its URL and timeline folder)
_NEWEST: dict[tuple[str, str], Hashable] = {}
_LOCK = threading.Lock()


def key_of(storage: "Storage", config: "TableConfig", timeline: "Timeline") -> Hashable:
    """The key of a table's listing against ``timeline``."""
    return (storage.base_url, config.timeline_dir, tuple(sorted(config.props.items())), timeline.layout,
            timeline.instants)


def get(key: Hashable) -> Listed | None:
    return _LISTED.get(key)


def keep(storage: "Storage", config: "TableConfig", timeline: "Timeline", partitions: list[str],
         by_partition: list[tuple[str, dict[str, int]]]) -> Listed | None:
    """Keep a whole table's listing from its MDT against ``timeline`` (read from storage: not
    one a caller made), in place of the one of an older timeline of the table; None when the
    table's kept timeline was read later."""
    if not timeline.loaded_at:
        return None
    entry = Listed(list(partitions), list(by_partition), timeline.loaded_at)
    key = key_of(storage, config, timeline)
    table = (storage.base_url, config.timeline_dir)
    with _LOCK:
        old = _NEWEST.get(table)
        if old is not None and old != key:
            current = _LISTED.get(old)
            if current is not None and current.loaded_at > timeline.loaded_at:
                return None
            _LISTED.discard(old)
        _NEWEST[table] = key
        _LISTED.put(key, entry, max(1, sum(len(files) for _, files in by_partition)))
        for t, k in list(_NEWEST.items()):     # tables whose entry the weight limit dropped
            if k not in _LISTED:
                del _NEWEST[t]
    return entry


def add_built(entry: Listed, moment: tuple[str | None, str], built: Built) -> None:
    """Keep what a view of ``moment`` built from ``entry`` (the latest state's, and those of up
    to :data:`MAX_MOMENTS` other moments)."""
    with _LOCK:     # views of other threads add theirs
        if _room(entry.built, moment):
            entry.built[moment] = built


def add_verified(entry: Listed, moment: tuple[str | None, str]) -> None:
    """Note that a view of ``moment`` checked ``entry`` against the write stats (the moments
    :func:`add_built` keeps)."""
    with _LOCK:
        if _room(entry.verified, moment):
            entry.verified.add(moment)


def _room(kept: Iterable[tuple[str | None, str]], moment: tuple[str | None, str]) -> bool:
    """Whether ``moment`` may be kept beside ``kept``: the latest state's always, another moment
    while fewer than :data:`MAX_MOMENTS` others are (or when it is kept already)."""
    if moment[0] is None:
        return True
    others = [m for m in kept if m[0] is not None]
    return moment in others or len(others) < MAX_MOMENTS


def clear() -> None:
    """Forget every listing (a cold plan, in a benchmark)."""
    with _LOCK:
        _LISTED.clear()
        _NEWEST.clear()


def metadata_of(storage: "Storage", config: "TableConfig", timeline: "Timeline") -> tuple["MetadataTableReader | None", tuple[str, ...]]:
    """The MDT reader against ``timeline`` and the MDT partitions ``hoodie.properties`` names,
    read after it (as a listing from the MDT reads them): None when it no longer names
    ``files`` (dropped since: a caller then reads without statistics or the record index)."""
    from lakesdk.commit.table_properties import read_properties
    from lakesdk.format.metadata_table import available_partitions
    from lakesdk.read.metadata_table import MetadataTableReader
    reader: Any
    try:
        reader = MetadataTableReader(storage, timeline, timeline_dir=config.timeline_dir)
    except FileNotFoundError:
        reader = None
    named = available_partitions(read_properties(storage)[1].props)
    return (reader if "files" in named else None), named
