"""Opening a table: its ``.hoodie/hoodie.properties`` read and checked as a handle (or anything
else that reads the table) takes it.

:func:`load_config` reads the file as Apache Hudi does (``hoodie.properties.backup`` when the
file is damaged, see :mod:`lakesdk.commit.table_properties`), and refuses what no handle should
open: a path that is no table (or names a file), a config without its checksum, the metadata
table of a table, and a table without ``hoodie.table.type`` whose files show it is
merge-on-read.
"""

from __future__ import annotations

import warnings

from lakesdk.exceptions import StorageError, TableConfigError, TableNotFoundError, UnsupportedTableVersionError
from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig
from lakesdk.storage import Storage

__all__ = ["load_config"]


def load_config(storage: Storage) -> TableConfig:
    """The table's ``hoodie.properties``.  A damaged file (bad checksum, truncated, not text)
    is a :class:`~lakesdk.TableConfigError`, unless ``hoodie.properties.backup`` holds a good
    config: Hudi writes that copy while it updates the file and reads it then, as here."""
    try:
        data = storage.read(PROPERTIES_PATH)
    except FileNotFoundError:
        _raise_if_file(storage)
        raise TableNotFoundError(
            f"no Hudi table at {storage.base_url!r}: {PROPERTIES_PATH} does not exist; "
            "check the path, or create the table with Lake.create_table(...)", path=storage.base_url) from None
    except StorageError:
        _raise_if_file(storage)
        raise
    try:
        config = _parse_config(data)
    except UnsupportedTableVersionError:
        raise
    except TableConfigError as exc:
        try:
            config = _parse_config(storage.read(PROPERTIES_PATH + ".backup"))
        except (FileNotFoundError, TableConfigError):
            raise TableConfigError(f"{storage.url(PROPERTIES_PATH)}: {exc}", key=exc.key) from None
        warnings.warn(f"{PROPERTIES_PATH} is damaged ({exc}); using {PROPERTIES_PATH}.backup, as Hudi does",
                      stacklevel=2)
    if "hoodie.table.type" not in config.props:
        _check_untyped_table(storage, config)
    if config.is_metadata_table:
        raise TableConfigError(
            f"{storage.base_url!r} is the metadata table of a Hudi table, not a table to open: open the data table "
            "(the folder that holds this .hoodie/metadata); its metadata is read and kept with it",
            key="hoodie.table.keygenerator.type")
    return config


def _parse_config(data: bytes) -> TableConfig:
    """Parse ``hoodie.properties`` bytes; a config without ``hoodie.table.checksum`` is a
    damaged one (every table of the versions lakesdk reads carries it: a file cut at a line
    boundary shows as a missing checksum)."""
    config = TableConfig.from_bytes(data)
    if not config.props.get("hoodie.table.checksum"):
        raise TableConfigError(
            f"hoodie.properties of {config.name!r} has no hoodie.table.checksum: every table config of a version "
            f"{config.version} table carries one, so the file is incomplete (truncated?) and keys such as the "
            "partition fields or the ordering field may be lost. Restore hoodie.properties (from "
            "hoodie.properties.backup, or write the missing keys back) before opening the table",
            key="hoodie.table.checksum")
    return config


def _check_untyped_table(storage: Storage, config: TableConfig) -> None:
    """``hoodie.table.type`` defaults to COPY_ON_WRITE; a table without it that has delta
    commits or log files is a merge-on-read table whose properties lost the key: opening it as
    copy-on-write would ignore its log files and the next upsert would duplicate keys."""
    from lakesdk.read.check import untyped_merge_on_read
    found = untyped_merge_on_read(storage, config)
    if found:
        raise TableConfigError(
            f"hoodie.properties of {config.name!r} has no hoodie.table.type, which means COPY_ON_WRITE, but the table "
            f"has {found}: expected MERGE_ON_READ there, found no table type. The properties file is damaged: add "
            "hoodie.table.type=MERGE_ON_READ back (or restore hoodie.properties from hoodie.properties.backup) before "
            "opening the table", key="hoodie.table.type")


def _raise_if_file(storage: Storage) -> None:
    """A table path that names a file (not a folder) is no table: say so, with what a table folder holds."""
    try:
        info = storage.info("")
    except (OSError, ValueError):
        return
    if not info.is_dir:
        raise TableNotFoundError(
            f"no Hudi table at {storage.base_url!r}: the path is a file, not a table folder; expected a folder "
            f"holding {PROPERTIES_PATH} (and the timeline under .hoodie/); pass the table's folder, or create "
            "the table with Lake.create_table(...)", path=storage.base_url) from None
