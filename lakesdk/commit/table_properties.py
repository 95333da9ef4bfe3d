"""Rewriting ``.hoodie/hoodie.properties`` in place, as Apache Hudi's ``HoodieTableConfig.modify``
does, for the writers that change a table's config (the upgrade to version 9, dropping the
metadata table).

The rewrite is crash-safe for readers: the current bytes are first copied to
``hoodie.properties.backup`` (which readers take while ``hoodie.properties`` is missing or
damaged: :func:`lakesdk.read.properties.load_config`), then ``hoodie.properties`` is replaced
(atomically on local storage, one PUT on object stores), then the backup is deleted.  A crash
leaves the old file, or the new one, with at most a stale backup beside it; the next rewrite
replaces that backup.  Callers hold the table lock (with several writers) around
:func:`read_properties` and :func:`rewrite_properties`, so two rewrites do not interleave.
"""

from __future__ import annotations

from lakesdk import _faults as faults
from lakesdk.exceptions import TableConfigError
from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig
from lakesdk.storage import Storage

__all__ = ["read_properties", "rewrite_properties", "BACKUP_PATH"]

BACKUP_PATH = PROPERTIES_PATH + ".backup"


def read_properties(storage: Storage) -> tuple[bytes, TableConfig]:
    """The bytes of ``hoodie.properties`` and the config they hold; the backup's when the file
    is missing or damaged and the backup is good (a rewrite was interrupted), as Hudi reads it."""
    try:
        raw = storage.read(PROPERTIES_PATH)
        return raw, TableConfig.from_bytes(raw)
    except (FileNotFoundError, TableConfigError) as exc:
        try:
            raw = storage.read(BACKUP_PATH)
            return raw, TableConfig.from_bytes(raw)
        except (FileNotFoundError, TableConfigError):
            raise exc from None


def rewrite_properties(storage: Storage, old: bytes, new: TableConfig) -> None:
    """Replace ``hoodie.properties`` (whose current bytes are ``old``) with ``new`` (see the
    module doc).  Crash points for the crash tests: ``properties_backup_written`` (the backup
    exists, the file is still the old one)."""
    storage.write(BACKUP_PATH, old)
    faults.crash_point("properties_backup_written")
    storage.write(PROPERTIES_PATH, new.to_text().encode("utf-8"))
    storage.delete(BACKUP_PATH)
