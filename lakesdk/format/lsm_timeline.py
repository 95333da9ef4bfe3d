"""The timeline history of table version 8+: Hudi 1.0's LSM timeline.

Archival moves completed instants out of the active timeline into Parquet files under
``.hoodie/timeline/history/`` (``hoodie.timeline.history.path``)::

    _version_                        the latest snapshot version N (UTF-8 digits)
    manifest_<N>                     JSON {"files": [{"fileName": ..., "fileLen": ...}, ...]}:
                                     the Parquet files that make up snapshot N
    <min>_<max>_<level>.parquet      one row per instant; <min> = smallest requested time,
                                     <max> = largest completion time in the file, <level> = LSM
                                     layer (0 for freshly archived batches)

Parquet columns (``HoodieLSMTimelineInstant``): ``instantTime``, ``completionTime``,
``action`` (the completed action: commit, deltacommit, replacecommit, clean, rollback,
restore, savepoint), ``metadata`` (the bytes of the completed timeline file), ``plan`` (the
bytes of the requested file for clean, compaction, clustering/replacecommit), ``version``.

Every append writes a new level-0 file and a new manifest, then ``_version_``; when a level
holds 10 files they are merged into one file of the next level (universal compaction).
Readers read ``_version_``, then that manifest, then its files, so a reader never sees a
half-written snapshot.  Files that no manifest of the last 3 versions names are deleted.

The ``hudi`` reader (hudi-rs) does not read this history; Hudi's Java readers do.

>>> parse_history_file_name("20250101000000000_20250101000500000_0.parquet")
('20250101000000000', '20250101000500000', 0)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.instant import Instant
from lakesdk.format.table_config import TableConfig

__all__ = ["ArchivedInstant", "history_dir", "parse_history_file_name", "COMPACTION_BATCH"]

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
COMPACTION_BATCH = 10          # files per layer that trigger a merge into the next layer
KEEP_VERSIONS = 3              # snapshot versions kept for readers
_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_TIME_RE = re.compile(r"\d{14}(?:\d{3})?")
_ARCHIVED_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit", "clean", "rollback", "savepoint",
                               "restore", "indexing", "schemacommit", "compaction", "logcompaction", "clustering"})


def parse_history_file_name(name: str) -> tuple[str, str, int]:
    m = _FILE_RE.match(name)
    if not m:
        raise CorruptTimelineError(f"{name!r} is not a history file name (<min>_<max>_<level>.parquet)")
    return m.group(1), m.group(2), int(m.group(3))


def parse_manifest(data: bytes, path: str = MANIFEST_PREFIX) -> list[tuple[str, int]]:
    """(file name, length) of every file a manifest names.  A manifest is JSON
    ``{"files": [{"fileName": "<min>_<max>_<level>.parquet", "fileLen": n}, ...]}``; anything
    else raises :class:`CorruptTimelineError` naming ``path``."""
    def bad(why: str) -> CorruptTimelineError:
        return CorruptTimelineError(
            f"{path}: the timeline history manifest is damaged ({why}); restore it from a backup or a "
            "copy of the table, or move it away so that the previous snapshot version is read")
    try:
        d = json.loads(bytes(data).decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(d, dict) or not isinstance(d.get("files") or [], list):
        raise bad('expected {"files": [...]}')
    out = []
    for f in d.get("files") or []:
        name = f.get("fileName") if isinstance(f, dict) else None
        size = f.get("fileLen", 0) if isinstance(f, dict) else None
        if not isinstance(name, str) or not _FILE_RE.match(name):
            raise bad(f"entry {f!r:.80} does not name a <min>_<max>_<level>.parquet file")
        if size is None:
            size = 0
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad(f"entry {name} has fileLen {size!r}, expected a byte count")
        out.append((name, size))
    return out


def history_dir(config: TableConfig) -> str:
    """Folder of the LSM history, relative to the table base (layout 2 only)."""
    return f"{config.timeline_dir}/" + config.props.get("hoodie.timeline.history.path", "history")


@lru_cache(maxsize=None)
def _avro_schema_text() -> str:
    return resources.files("lakesdk.format").joinpath("schemas/HoodieLSMTimelineInstant.avsc").read_text()


@dataclass(frozen=True)
class ArchivedInstant:
    """One archived instant: the completed instant, its completed file's bytes and its plan."""

    instant: Instant
    metadata: bytes | None = None
    plan: bytes | None = None

    @property
    def action(self) -> str:
        return self.instant.completed_action
