"""``.hoodie/hoodie.properties``: the table config.

The file is Java properties text (see :mod:`lakesdk.format.properties`).  The last entry,
``hoodie.table.checksum``, is ``CRC32(UTF-8("<hoodie.database.name>.<hoodie.table.name>"))``.

lakesdk writes table version 9 (Hudi 1.1+, the default) or 8 (Hudi 1.0), both timeline layout 2, and reads
versions 6, 8 and 9.  What version 9 changes in this file (Hudi's ``EightToNineUpgradeHandler``):
``hoodie.table.ordering.fields`` (comma-separated) replaces ``hoodie.table.precombine.field``; the built-in merge
modes carry no payload class and no ``hoodie.record.merge.strategy.id`` (a CUSTOM merge mode keeps its strategy
id); a legacy payload class moves to ``hoodie.table.legacy.payload.class``; ``hoodie.table.partial.update.mode``
and ``hoodie.record.merge.property.*`` describe partial updates and delete markers.
:meth:`TableConfig.upgraded` does that rewrite.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Literal, Mapping

from lakesdk.exceptions import TableConfigError, UnsupportedTableVersionError
from lakesdk.format.keys import HUDI_ENCODING, KEY_ENCODINGS
from lakesdk.format.properties import format_properties, parse_properties

__all__ = ["TableConfig", "table_checksum", "READABLE_VERSIONS", "WRITABLE_VERSIONS", "WRITE_VERSION",
           "PROPERTIES_PATH", "PARTIAL_UPDATE_MODES"]

PROPERTIES_PATH = ".hoodie/hoodie.properties"
READABLE_VERSIONS = (6, 8, 9)
#: the versions a new table can be created with (``create_table(table_version=...)``)
WRITABLE_VERSIONS = (8, 9)
WRITE_VERSION = 9
#: ``hoodie.table.partial.update.mode`` values (Hudi 1.1's ``PartialUpdateMode``, NONE its default)
PARTIAL_UPDATE_MODES = ("NONE", "IGNORE_DEFAULTS", "FILL_UNAVAILABLE")
PARTIAL_UPDATE_MODE_KEY = "hoodie.table.partial.update.mode"
LEGACY_PAYLOAD_KEY = "hoodie.table.legacy.payload.class"
MERGE_PROPERTY_PREFIX = "hoodie.record.merge.property."
_LAYOUT_FOR_VERSION = {6: 1, 7: 1, 8: 2, 9: 2}
#: base file formats lakesdk reads (LANCE through the optional ``pylance`` package)
BASE_FILE_FORMATS = ("PARQUET", "LANCE")

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
_TYPES = {"COPY_ON_WRITE": "COPY_ON_WRITE", "MERGE_ON_READ": "MERGE_ON_READ"}
_KEYGEN_CLASS_TO_TYPE = {
    "org.apache.hudi.keygen.SimpleKeyGenerator": "SIMPLE",
    "org.apache.hudi.keygen.ComplexKeyGenerator": "COMPLEX",
    "org.apache.hudi.keygen.NonpartitionedKeyGenerator": "NON_PARTITION",
    "org.apache.hudi.keygen.TimestampBasedKeyGenerator": "TIMESTAMP",
    "org.apache.hudi.keygen.CustomKeyGenerator": "CUSTOM",
}
EVENT_TIME_STRATEGY_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
#: lakesdk's partial-update merger (one ordering field per column group); CUSTOM to Hudi
PARTIAL_UPDATE_STRATEGY_ID = "5e1f0a52-7c1b-4bde-9b0c-1a2c3d4e5f60"
COLUMN_GROUPS_KEY = "hoodie.lakesdk.partial.update.column.groups"
#: lakesdk's user-defined merger (registered by name in Python); CUSTOM to Hudi
CUSTOM_STRATEGY_ID = "9b0c1a2d-3e4f-4a5b-8c6d-7e8f90a1b2c3"
MERGER_NAME_KEY = "hoodie.lakesdk.merger.name"
#: create_table(index=...): Hudi's write-config key, kept in hoodie.properties for every handle
INDEX_TYPE_KEY = "hoodie.index.type"
COMMIT_TIME_STRATEGY_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
_MODEL = "org.apache.hudi.common.model."
#: payload classes version 9 no longer uses: they move to hoodie.table.legacy.payload.class
_DEPRECATED_PAYLOADS = {_MODEL + n for n in (
    "AWSDmsAvroPayload", "DefaultHoodieRecordPayload", "EventTimeAvroPayload", "debezium.MySqlDebeziumAvroPayload",
    "OverwriteNonDefaultsWithLatestAvroPayload", "OverwriteWithLatestAvroPayload", "PartialUpdateAvroPayload",
    "debezium.PostgresDebeziumAvroPayload")}
_TO_EVENT_TIME = {_MODEL + n for n in ("EventTimeAvroPayload", "debezium.MySqlDebeziumAvroPayload",
                                        "PartialUpdateAvroPayload", "debezium.PostgresDebeziumAvroPayload")}
_TO_COMMIT_TIME = {_MODEL + n for n in ("AWSDmsAvroPayload", "OverwriteNonDefaultsWithLatestAvroPayload")}
_DELETE_KEY, _DELETE_MARKER = "hoodie.payload.delete.field", "hoodie.payload.delete.marker"
#: what the upgrade to version 9 adds for a payload class (merge properties, partial update
#: mode, ordering fields), as Hudi's EightToNineUpgradeHandler does
_PAYLOAD_UPGRADE: dict[str, dict[str, str]] = {
    _MODEL + "AWSDmsAvroPayload": {MERGE_PROPERTY_PREFIX + _DELETE_KEY: "Op", MERGE_PROPERTY_PREFIX + _DELETE_MARKER: "D"},
    _MODEL + "debezium.PostgresDebeziumAvroPayload": {
        MERGE_PROPERTY_PREFIX + "partial.update.unavailable.value": "__debezium_unavailable_value",
        MERGE_PROPERTY_PREFIX + _DELETE_KEY: "_change_operation_type", MERGE_PROPERTY_PREFIX + _DELETE_MARKER: "d",
        PARTIAL_UPDATE_MODE_KEY: "FILL_UNAVAILABLE", "hoodie.table.ordering.fields": "_event_lsn"},
    _MODEL + "debezium.MySqlDebeziumAvroPayload": {
        MERGE_PROPERTY_PREFIX + _DELETE_KEY: "_change_operation_type", MERGE_PROPERTY_PREFIX + _DELETE_MARKER: "d",
        "hoodie.table.ordering.fields": "_event_bin_file,_event_pos"},
    _MODEL + "OverwriteNonDefaultsWithLatestAvroPayload": {PARTIAL_UPDATE_MODE_KEY: "IGNORE_DEFAULTS"},
    _MODEL + "PartialUpdateAvroPayload": {PARTIAL_UPDATE_MODE_KEY: "IGNORE_DEFAULTS"},
}
#: how the table's record keys write a null or empty key part (lakesdk.format.keys): "hudi"
#: (Hudi's __null__/__empty__) or "legacy" (lakesdk's earlier keys); absent: told by the stored keys
KEY_ENCODING_KEY = "hoodie.lakesdk.record.key.encoding"


_RECOVER = ("restore .hoodie/hoodie.properties from a backup (Hudi keeps the previous version in "
            ".hoodie/hoodie.properties.backup while it updates the file) or from a copy of the table")
_FOLDER_RE = re.compile(r"[A-Za-z0-9_.-]+")


def table_checksum(database: str, table: str) -> int:
    """CRC32 of ``"<database>.<table>"``.

    >>> table_checksum("default", "v6_nonpartitioned")
    1363530505
    """
    return zlib.crc32(f"{database}.{table}".encode())


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise TableConfigError(
        f"hoodie.properties: {key}={raw!r} is not a boolean (expected 'true' or 'false'); "
        "fix the value in .hoodie/hoodie.properties", key=key)


def _int(props: Mapping[str, str], key: str) -> int | None:
    raw = props.get(key)
    if raw is None or raw == "":
        return None
    try:
        if not raw.strip().isascii():
            raise ValueError(raw)
        return int(raw.strip())
    except ValueError:
        raise TableConfigError(
            f"hoodie.properties: {key}={raw!r} is not an integer; fix the value in .hoodie/hoodie.properties",
            key=key) from None


def _list(props: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = props.get(key, "")
    return tuple(p.strip() for p in raw.split(",") if p.strip())


@dataclass(frozen=True)
class TableConfig:
    """Typed view of ``hoodie.properties``; ``props`` keeps every raw entry."""

    props: Mapping[str, str] = field(repr=False)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> "TableConfig":
        """Parse and validate; raises :class:`TableConfigError` naming the bad key.

        The text must be what ``Properties.store`` writes: every entry ``key=value`` on a line
        of its own ending with a line break, so a truncated file is an error (only a last
        ``hoodie.table.checksum`` line may lack its line break: the checksum vouches for it).
        """
        try:
            props = parse_properties(text, strict=True)
        except TableConfigError as exc:
            if exc.key != "hoodie.table.checksum" or "line break" not in str(exc):
                raise TableConfigError(f"hoodie.properties cannot be parsed: {exc}; the file is damaged: "
                                       f"{_RECOVER}", key=exc.key) from None
            props = parse_properties(text)
        cfg = cls(props)
        cfg.validate()
        return cfg

    @classmethod
    def from_bytes(cls, data: bytes) -> "TableConfig":
        """:meth:`parse` of the bytes of ``hoodie.properties`` (UTF-8; Hudi writes ASCII)."""
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TableConfigError(
                f"hoodie.properties is not text: byte {exc.start} ({bytes(data)[exc.start:exc.start + 1]!r}) is "
                f"not UTF-8 (Hudi writes ASCII with \\uXXXX escapes); the file is damaged: {_RECOVER}") from None
        return cls.parse(text)

    @classmethod
    def new(
        cls,
        *,
        name: str,
        table_type: TableType,
        record_key_fields: tuple[str, ...],
        partition_fields: tuple[str, ...] = (),
        ordering_field: str | None = None,
        ordering_fields: tuple[str, ...] = (),
        hive_style: bool = True,
        urlencode: bool = False,
        create_schema: dict | None = None,
        database: str = "default",
        merge_mode: str | None = None,
        partial_update_mode: str | None = None,
        version: int = WRITE_VERSION,
        extra: Mapping[str, str] | None = None,
    ) -> "TableConfig":
        """A new table's config as Hudi writes it: version 9 as Hudi 1.1+, version 8 as Hudi 1.0.

        ``ordering_fields`` (or one ``ordering_field``): several fields are compared field by
        field (Hudi 1.1), so they need version 9.  ``partial_update_mode`` (version 9's
        ``hoodie.table.partial.update.mode``): ``IGNORE_DEFAULTS`` with commit-time ordering."""
        if version not in WRITABLE_VERSIONS:
            raise UnsupportedTableVersionError(
                f"lakesdk creates tables of version {' or '.join(map(str, WRITABLE_VERSIONS))}, not {version}",
                key="hoodie.table.version")
        fields = tuple(ordering_fields) or ((ordering_field,) if ordering_field else ())
        if len(fields) > 1 and version < 9:
            raise TableConfigError(
                f"several ordering fields {list(fields)} need table version 9 (Hudi 1.1 compares them field by "
                "field; Hudi 1.0 reads one hoodie.table.precombine.field): create the table with table_version=9",
                key="hoodie.table.precombine.field")
        if partition_fields:
            keygen = "SIMPLE" if len(record_key_fields) == 1 and len(partition_fields) == 1 else "COMPLEX"
        else:
            keygen = "NON_PARTITION"
        if merge_mode is None:
            merge_mode = "EVENT_TIME_ORDERING" if fields else "COMMIT_TIME_ORDERING"
        p: dict[str, str] = {
            "hoodie.table.name": name,
            "hoodie.table.type": table_type,
            "hoodie.table.version": str(version),
            "hoodie.table.initial.version": str(version),
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.recordkey.fields": ",".join(record_key_fields),
            "hoodie.table.keygenerator.type": keygen,
            "hoodie.datasource.write.hive_style_partitioning": str(hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": str(bool(urlencode)).lower(),
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.database.name": database,
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.timeline.timezone": "UTC",
            "hoodie.record.merge.mode": merge_mode,
            KEY_ENCODING_KEY: HUDI_ENCODING,
        }
        if version >= 9:
            p["hoodie.table.format"] = "native"
        if partition_fields:
            p["hoodie.table.partition.fields"] = ",".join(partition_fields)
        if fields:
            p["hoodie.table.ordering.fields" if version >= 9 else "hoodie.table.precombine.field"] = ",".join(fields)
        if merge_mode in ("CUSTOM", "PARTIAL_UPDATE"):
            # lakesdk's own mergers: CUSTOM to Hudi, named by a strategy id (both versions)
            p["hoodie.record.merge.mode"] = "CUSTOM"
            p["hoodie.record.merge.strategy.id"] = (CUSTOM_STRATEGY_ID if merge_mode == "CUSTOM"
                                                    else PARTIAL_UPDATE_STRATEGY_ID)
        elif version < 9:   # version 8 names the built-in merger and its payload class too
            if merge_mode == "EVENT_TIME_ORDERING":
                p["hoodie.record.merge.strategy.id"] = EVENT_TIME_STRATEGY_ID
                p["hoodie.compaction.payload.class"] = _MODEL + "DefaultHoodieRecordPayload"
            elif merge_mode == "COMMIT_TIME_ORDERING":
                p["hoodie.record.merge.strategy.id"] = COMMIT_TIME_STRATEGY_ID
                p["hoodie.compaction.payload.class"] = _MODEL + "OverwriteWithLatestAvroPayload"
        if partial_update_mode is not None and partial_update_mode.upper() != "NONE":
            if version < 9:
                raise TableConfigError(f"hoodie.table.partial.update.mode needs table version 9, not {version}",
                                       key=PARTIAL_UPDATE_MODE_KEY)
            p[PARTIAL_UPDATE_MODE_KEY] = partial_update_mode.upper()
        if create_schema is not None:
            p["hoodie.table.create.schema"] = json.dumps(create_schema, separators=(",", ":"))
        if extra:
            p.update(extra)
        cfg = cls(p)
        cfg.validate()
        return cfg

    def upgraded(self) -> "TableConfig":
        """This version 8 config rewritten as version 9, as Hudi's ``EightToNineUpgradeHandler``
        does: ``hoodie.table.precombine.field`` becomes ``hoodie.table.ordering.fields``; the
        built-in merge modes lose ``hoodie.record.merge.strategy.id``; a deprecated payload class
        moves to ``hoodie.table.legacy.payload.class`` (and, for the payloads version 9 expresses
        with merge modes, sets the merge mode, ``hoodie.table.partial.update.mode`` and
        ``hoodie.record.merge.property.*``).  Every other entry stays."""
        if self.version != 8:
            raise UnsupportedTableVersionError(
                f"only a version 8 table upgrades to version 9; {self.name!r} is version {self.version}",
                key="hoodie.table.version")
        p = {k: v for k, v in self.props.items() if k != "hoodie.table.checksum"}
        payload = p.get("hoodie.compaction.payload.class", "").strip()
        mode = (p.get("hoodie.record.merge.mode") or "").strip().upper()
        if payload in _TO_COMMIT_TIME:
            mode = "COMMIT_TIME_ORDERING"
        elif payload in _TO_EVENT_TIME:
            mode = "EVENT_TIME_ORDERING"
        if mode:
            p["hoodie.record.merge.mode"] = mode
        if mode != "CUSTOM":
            p.pop("hoodie.record.merge.strategy.id", None)
        ordering = p.pop("hoodie.table.precombine.field", None)
        if ordering:
            p["hoodie.table.ordering.fields"] = ordering
        p.update(_PAYLOAD_UPGRADE.get(payload, {}))
        if payload in _DEPRECATED_PAYLOADS:
            p[LEGACY_PAYLOAD_KEY] = payload
            del p["hoodie.compaction.payload.class"]
        p["hoodie.table.version"] = "9"
        cfg = TableConfig(p)
        cfg.validate()
        return cfg

    def to_text(self) -> str:
        """Properties text with the checksum as the last entry."""
        p = {k: v for k, v in self.props.items() if k != "hoodie.table.checksum"}
        p["hoodie.table.checksum"] = str(table_checksum(self.database, self.name))
        return format_properties(p)

    def with_props(self, **updates: str) -> "TableConfig":
        p = dict(self.props)
        p.update(updates)
        return TableConfig(p)

    # -- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        p = self.props
        if not p.get("hoodie.table.name"):
            raise TableConfigError(
                "hoodie.properties has no hoodie.table.name: every Hudi table needs a name; "
                f"the file is damaged or not a Hudi table config: {_RECOVER}", key="hoodie.table.name")
        for key, default in (("hoodie.timeline.path", "timeline"), ("hoodie.timeline.history.path", "history")):
            value = p.get(key, default)
            if not _FOLDER_RE.fullmatch(value) or value in (".", ".."):
                raise TableConfigError(
                    f"hoodie.properties: {key}={value!r} is not a folder name (expected e.g. {default!r})",
                    key=key)
        if "hoodie.table.recordkey.fields" in p and (not self.record_key_fields or any(
                not k.strip() for k in p["hoodie.table.recordkey.fields"].split(","))):
            raise TableConfigError(
                f"hoodie.properties: hoodie.table.recordkey.fields={p['hoodie.table.recordkey.fields']!r} names no "
                "field, or an empty one: expected comma-separated column names. The file is damaged (truncated?): "
                "restore hoodie.properties (from hoodie.properties.backup, or write the key back) before opening the "
                "table", key="hoodie.table.recordkey.fields")
        self.table_type  # noqa: B018 - validates
        version = self.version
        if version not in READABLE_VERSIONS:
            raise UnsupportedTableVersionError(
                f"table version {version} is not supported: lakesdk reads table versions "
                f"{', '.join(map(str, READABLE_VERSIONS))} (Hudi 0.14-0.15, 1.0, 1.1); "
                "upgrade or downgrade the table with Apache Hudi first", key="hoodie.table.version")
        layout = _int(p, "hoodie.timeline.layout.version")
        expected = _LAYOUT_FOR_VERSION[version]
        if layout is None:
            layout = expected
        if layout != expected:
            raise UnsupportedTableVersionError(
                f"table version {version} expects timeline layout version {expected}, "
                f"found hoodie.timeline.layout.version={layout}", key="hoodie.timeline.layout.version")
        if self.base_file_format not in BASE_FILE_FORMATS and not (self.is_metadata_table and self.base_file_format == "HFILE"):
            raise TableConfigError(
                f"hoodie.properties: hoodie.table.base.file.format={p['hoodie.table.base.file.format']!r} "
                "is not supported: lakesdk reads PARQUET and LANCE base files (and writes PARQUET)",
                key="hoodie.table.base.file.format")
        for key in ("hoodie.datasource.write.drop.partition.columns",
                    "hoodie.datasource.write.hive_style_partitioning",
                    "hoodie.datasource.write.partitionpath.urlencode", "hoodie.populate.meta.fields"):
            _bool(p, key, False)
        if self.drop_partition_columns:
            raise TableConfigError(
                "hoodie.datasource.write.drop.partition.columns=true is not supported "
                "(partition values would be missing from the data files)",
                key="hoodie.datasource.write.drop.partition.columns")
        cs = p.get("hoodie.table.checksum")
        if cs is not None:
            try:
                crc = int(cs)
            except ValueError:
                raise TableConfigError(
                    f"hoodie.properties: hoodie.table.checksum={cs!r} is not a number "
                    "(expected CRC32 of '<database>.<table name>')", key="hoodie.table.checksum") from None
            if crc not in (table_checksum(self.database, self.name), table_checksum("", self.name)):
                raise TableConfigError(
                    f"hoodie.properties: hoodie.table.checksum={crc} does not match the table: expected "
                    f"{table_checksum(self.database, self.name)} (CRC32 of {self.database + '.' + self.name!r}); "
                    f"the name, database or checksum line is damaged: {_RECOVER}", key="hoodie.table.checksum")
        self.create_schema  # noqa: B018 - validates
        self.column_groups  # noqa: B018 - validates
        self.key_encoding  # noqa: B018 - validates
        self.partial_update_mode  # noqa: B018 - validates

    # -- typed accessors ----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.props["hoodie.table.name"]

    @property
    def database(self) -> str:
        return self.props.get("hoodie.database.name", "") or ""

    @property
    def table_type(self) -> TableType:
        raw = self.props.get("hoodie.table.type", "COPY_ON_WRITE")
        t = _TYPES.get(raw.strip().upper())
        if t is None:
            raise TableConfigError(
                f"hoodie.properties: hoodie.table.type={raw!r} is not a table type "
                "(expected COPY_ON_WRITE or MERGE_ON_READ)", key="hoodie.table.type")
        return t  # type: ignore[return-value]

    @property
    def base_file_format(self) -> str:
        """``hoodie.table.base.file.format``: ``PARQUET`` (the default) or ``LANCE``."""
        return (self.props.get("hoodie.table.base.file.format") or "PARQUET").strip().upper()

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def version(self) -> int:
        v = _int(self.props, "hoodie.table.version")
        if v is None:
            raise TableConfigError("hoodie.properties has no hoodie.table.version", key="hoodie.table.version")
        return v

    @property
    def layout_version(self) -> int:
        return _int(self.props, "hoodie.timeline.layout.version") or _LAYOUT_FOR_VERSION[self.version]

    @property
    def timeline_dir(self) -> str:
        """Folder of the active timeline, relative to the table base."""
        if self.layout_version >= 2:
            return ".hoodie/" + self.props.get("hoodie.timeline.path", "timeline")
        return ".hoodie"

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        return _list(self.props, "hoodie.table.recordkey.fields")

    @property
    def partition_fields(self) -> tuple[str, ...]:
        # CustomKeyGenerator writes field:TYPE
        return tuple(f.split(":")[0] for f in _list(self.props, "hoodie.table.partition.fields"))

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        return _list(self.props, "hoodie.table.ordering.fields") or _list(self.props, "hoodie.table.precombine.field")

    @property
    def ordering_field(self) -> str | None:
        f = self.ordering_fields
        return f[0] if f else None

    @property
    def ordering_key(self) -> str | tuple[str, ...] | None:
        """What the mergers order by: None, the one ordering field, or a tuple of several
        (compared field by field)."""
        f = self.ordering_fields
        return None if not f else f[0] if len(f) == 1 else f

    @property
    def keygen_type(self) -> str:
        t = self.props.get("hoodie.table.keygenerator.type")
        if t:
            return t.upper()
        cls = self.props.get("hoodie.table.keygenerator.class")
        if cls:
            return _KEYGEN_CLASS_TO_TYPE.get(cls, "CUSTOM")
        if not self.partition_fields:
            return "NON_PARTITION"
        return "SIMPLE" if len(self.record_key_fields) == 1 else "COMPLEX"

    @property
    def is_metadata_table(self) -> bool:
        """A metadata table's config (``<table>/.hoodie/metadata``, HFile base files)."""
        return self.props.get("hoodie.table.keygenerator.type", "").upper() == "HOODIE_TABLE_METADATA"

    @property
    def hive_style(self) -> bool:
        return _bool(self.props, "hoodie.datasource.write.hive_style_partitioning", False)

    @property
    def urlencode(self) -> bool:
        return _bool(self.props, "hoodie.datasource.write.partitionpath.urlencode", False)

    @property
    def drop_partition_columns(self) -> bool:
        return _bool(self.props, "hoodie.datasource.write.drop.partition.columns", False)

    @property
    def populate_meta_fields(self) -> bool:
        return _bool(self.props, "hoodie.populate.meta.fields", True)

    @property
    def column_groups(self) -> dict[str, list[str]] | None:
        """Partial-update tables: ordering field -> the columns it guards.  A version 9 table
        with ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS`` has none (``{}``): every
        column takes its latest non-null value."""
        raw = self.props.get(COLUMN_GROUPS_KEY)
        if not raw:
            if (self.props.get(PARTIAL_UPDATE_MODE_KEY) or "").strip().upper() == "IGNORE_DEFAULTS":
                return {}
            return None
        try:
            groups = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            raise TableConfigError(f"{COLUMN_GROUPS_KEY} is not valid JSON", key=COLUMN_GROUPS_KEY) from None
        if not isinstance(groups, dict) or not all(isinstance(v, list) for v in groups.values()):
            raise TableConfigError(f"{COLUMN_GROUPS_KEY} is not a JSON object of column lists",
                                   key=COLUMN_GROUPS_KEY)
        return {str(k): [str(c) for c in v] for k, v in groups.items()}

    @property
    def key_encoding(self) -> str | None:
        """``hoodie.lakesdk.record.key.encoding``: ``"hudi"`` or ``"legacy"``; None when the
        table does not say (written by Apache Hudi, or created by an earlier lakesdk)."""
        raw = self.props.get(KEY_ENCODING_KEY)
        if raw is None or not raw.strip():
            return None
        value = raw.strip().lower()
        if value not in KEY_ENCODINGS:
            raise TableConfigError(
                f"hoodie.properties: {KEY_ENCODING_KEY}={raw!r} is not a key encoding (expected one of "
                f"{', '.join(KEY_ENCODINGS)}); fix the value or remove the line", key=KEY_ENCODING_KEY)
        return value

    @property
    def merger_name(self) -> str | None:
        return self.props.get(MERGER_NAME_KEY) or None

    @property
    def delete_marker(self) -> tuple[str, str] | None:
        """(field, value) marking a record as deleted: version 9's
        ``hoodie.record.merge.property.hoodie.payload.delete.field`` / ``.marker``, or what an
        older table's payload class implies (AWS DMS: ``Op`` = ``D``; Debezium:
        ``_change_operation_type`` = ``d``).  None: no delete marker."""
        field = (self.props.get(MERGE_PROPERTY_PREFIX + _DELETE_KEY) or "").strip()
        value = self.props.get(MERGE_PROPERTY_PREFIX + _DELETE_MARKER)
        if field and value is not None:
            return field, value
        for key in ("hoodie.compaction.payload.class", LEGACY_PAYLOAD_KEY):
            implied = _PAYLOAD_UPGRADE.get((self.props.get(key) or "").strip(), {})
            f, v = implied.get(MERGE_PROPERTY_PREFIX + _DELETE_KEY), implied.get(MERGE_PROPERTY_PREFIX + _DELETE_MARKER)
            if f and v is not None:
                return f, v
        return None

    @property
    def partial_update_mode(self) -> str:
        """``hoodie.table.partial.update.mode`` (version 9): NONE (absent), IGNORE_DEFAULTS or
        FILL_UNAVAILABLE."""
        raw = (self.props.get(PARTIAL_UPDATE_MODE_KEY) or "NONE").strip().upper()
        if raw not in PARTIAL_UPDATE_MODES:
            raise TableConfigError(
                f"hoodie.properties: {PARTIAL_UPDATE_MODE_KEY}={self.props[PARTIAL_UPDATE_MODE_KEY]!r} is not a "
                f"partial update mode (expected one of {', '.join(PARTIAL_UPDATE_MODES)})", key=PARTIAL_UPDATE_MODE_KEY)
        return raw

    @property
    def merge_mode(self) -> str:
        """How versions of a record merge: EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING, CUSTOM
        (a merger registered by name) or PARTIAL_UPDATE (column groups, or version 9's
        ``IGNORE_DEFAULTS`` partial update mode under commit-time ordering: see
        :attr:`column_groups`).  A partial update mode lakesdk does not implement raises
        :class:`TableConfigError`: merging without it would answer wrong."""
        if self.props.get(COLUMN_GROUPS_KEY):
            return "PARTIAL_UPDATE"
        if self.props.get(MERGER_NAME_KEY):
            return "CUSTOM"
        m = self.props.get("hoodie.record.merge.mode")
        mode = m.upper() if m else ("EVENT_TIME_ORDERING" if self.ordering_field else "COMMIT_TIME_ORDERING")
        marker = self.delete_marker
        if marker is not None:
            raise TableConfigError(
                f"{self.name!r} marks deleted records by a value ({marker[0]} = {marker[1]!r}, "
                f"{MERGE_PROPERTY_PREFIX}{_DELETE_KEY} / {_DELETE_MARKER} or the payload class that implies them), "
                "which lakesdk does not apply when it merges records: merging without it would keep deleted rows. "
                "Read the read-optimized view (read_optimized=True), or read and write the table with Apache Hudi",
                key=MERGE_PROPERTY_PREFIX + _DELETE_KEY)
        partial = self.partial_update_mode
        if partial == "NONE":
            return mode
        if partial == "IGNORE_DEFAULTS" and mode == "COMMIT_TIME_ORDERING":
            return "PARTIAL_UPDATE"
        raise TableConfigError(
            f"{self.name!r} merges records with {PARTIAL_UPDATE_MODE_KEY}={partial} under {mode}, which lakesdk does "
            "not implement (it merges IGNORE_DEFAULTS under COMMIT_TIME_ORDERING only); read and write it with "
            "Apache Hudi", key=PARTIAL_UPDATE_MODE_KEY)

    @property
    def create_schema(self) -> dict | None:
        raw = self.props.get("hoodie.table.create.schema")
        if not raw:
            return None
        try:
            schema = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            raise TableConfigError("hoodie.table.create.schema is not valid Avro schema JSON",
                                   key="hoodie.table.create.schema") from None
        if not isinstance(schema, dict):
            raise TableConfigError("hoodie.table.create.schema is not an Avro record schema (a JSON object)",
                                   key="hoodie.table.create.schema")
        return schema

    @property
    def timezone(self) -> str:
        return (self.props.get("hoodie.table.timeline.timezone") or "UTC").upper()

    def __repr__(self) -> str:
        return (f"TableConfig(name={self.name!r}, type={self.props.get('hoodie.table.type')!r}, "
                f"version={self.props.get('hoodie.table.version')!r})")
