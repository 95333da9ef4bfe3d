"""Commit metadata: what a commit, deltacommit or replacecommit wrote.

Encoding: table version 6 (layout 1) stores it as JSON (Jackson's
``HoodieCommitMetadata``); table version 8+ (layout 2) as an Avro object container file
with one ``org.apache.hudi.avro.model.HoodieCommitMetadata`` (or
``HoodieReplaceCommitMetadata``) record.  ``extraMetadata["schema"]`` holds the table's
Avro schema without meta fields.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro

from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.avro_file import is_avro, read_record

__all__ = ["WriteStat", "CommitMetadata"]


@dataclass
class WriteStat:
    """Statistics of one data file written by a commit (``HoodieWriteStat``)."""

    fileId: str
    path: str
    partitionPath: str
    prevCommit: str = "null"
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    fileSizeInBytes: int = 0
    totalLogRecords: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalLogReadTimeMs: int = 0
    numUpdates: int = 0
    logVersion: int | None = None
    logOffset: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None
    prevBaseFile: str | None = None
    minEventTime: int | None = None
    maxEventTime: int | None = None
    totalLogFiles: int | None = None
    tempPath: str | None = None
    runtimeStats: dict[str, int] | None = None
    cdcStats: dict[str, int] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, typed: bool = False) -> "WriteStat":
        """The stat of a decoded record ``d``: its fields' types checked, unless ``typed`` (an
        Avro record decoded with the model's schema has them)."""
        if not isinstance(d, dict):
            raise CorruptTimelineError(f"a write stat is a {type(d).__name__}, expected an object")
        kw: dict[str, Any]
        if typed:      # the model's record has exactly the dataclass's fields
            kw = dict(d) if d.keys() == _NAME_SET else {name: d.get(name) for name in _NAMES}
        else:
            kw = {}
            for name, check, expected in _STAT_FIELDS:
                v = d.get(name)
                if v is not None and not check(v):
                    raise CorruptTimelineError(f"write stat field {name} is {v!r}, expected {expected}")
                kw[name] = v
        for name in _INT_FIELDS:
            if kw[name] is None:
                kw[name] = 0
        if kw["prevCommit"] is None:
            kw["prevCommit"] = "null"
        # the fields set as the dataclass's __init__ sets them, without its call of 33 keywords
        # (which took as long as the checks above; a plan decodes one stat per file written);
        # kw is the instance's dict itself (no copy of it)
        stat = object.__new__(cls)
        stat.__dict__ = kw
        return stat

    @property
    def written_paths(self) -> list[str]:
        """The files this stat names (relative to the table): its data file, and the CDC log
        files written beside it (``cdcStats``)."""
        return ([self.path] if self.path and self.path != "null" else []) + list(self.cdcStats or {})

    @property
    def file_name(self) -> str:
        return (self.path or "").rsplit("/", 1)[-1]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_int_map(v: Any) -> bool:
    # runtimeStats is a record of nullable longs in the Avro model
    return isinstance(v, dict) and all(isinstance(k, str) and (x is None or _is_int(x)) for k, x in v.items())


_STAT_CHECKS = {
    "str": lambda v: isinstance(v, str), "str | None": lambda v: isinstance(v, str),
    "int": _is_int, "int | None": _is_int,
    "list[str] | None": _is_str_list, "dict[str, int] | None": _is_int_map,
}


#: (name, type check, expected type's words) of every field of a write stat, in field order
_STAT_FIELDS = tuple((f.name, _STAT_CHECKS[str(f.type)], str(f.type).replace(" | None", "")) for f in fields(WriteStat))
_INT_FIELDS = tuple(f.name for f in fields(WriteStat) if f.type == "int")
_NAMES = tuple(f.name for f in fields(WriteStat))
_NAME_SET = frozenset(_NAMES)


def _check_shape(d: Any) -> None:
    """Raise :class:`CorruptTimelineError` unless ``d`` has the shape of commit metadata
    (JSON written by Jackson is not typed by a schema as the Avro record is)."""
    def bad(what: str, found: Any) -> CorruptTimelineError:
        return CorruptTimelineError(f"commit metadata {what}, found {type(found).__name__} {found!r:.80}")
    if not isinstance(d, dict):
        raise bad("is not an object", d)
    p2w = d.get("partitionToWriteStats")
    if p2w is not None:
        if not isinstance(p2w, dict):
            raise bad("partitionToWriteStats is not an object", p2w)
        for stats in p2w.values():
            if stats is not None and not isinstance(stats, list):
                raise bad("partitionToWriteStats holds a value that is not a list", stats)
    extra = d.get("extraMetadata")
    if extra is not None and not (isinstance(extra, dict) and all(isinstance(v, str) for v in extra.values())):
        raise bad("extraMetadata is not an object of strings", extra)
    op = d.get("operationType")
    if op is not None and not isinstance(op, str):
        raise bad("operationType is not a string", op)
    if d.get("compacted") is not None and not isinstance(d.get("compacted"), bool):
        raise bad("compacted is not a boolean", d.get("compacted"))
    rep = d.get("partitionToReplaceFileIds")
    if rep is not None and not (isinstance(rep, dict) and all(v is None or _is_str_list(v) for v in rep.values())):
        raise bad("partitionToReplaceFileIds is not an object of file id lists", rep)


@dataclass
class CommitMetadata:
    """``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str | None = None
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    # -- views --------------------------------------------------------------------------
    @property
    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    @property
    def schema(self) -> dict | None:
        raw = self.extra_metadata.get("schema")
        if not raw:
            return None
        try:
            schema = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            schema = None
        if not isinstance(schema, dict):
            raise CorruptTimelineError(f"commit metadata: extraMetadata schema is not an Avro schema (JSON "
                                       f"object): {raw[:80]!r}")
        return schema

    @property
    def is_replace(self) -> bool:
        return self.partition_to_replace_file_ids is not None

    def totals(self) -> dict[str, int]:
        s = self.write_stats
        return {
            "inserted": sum(w.numInserts for w in s),
            "updated": sum(w.numUpdateWrites for w in s),
            "deleted": sum(w.numDeletes for w in s),
            "written": sum(w.numWrites for w in s),
            "files": len(s),
            "bytes": sum(w.totalWriteBytes for w in s),
            "partitions": len(self.partition_to_write_stats),
        }

    # -- decoding -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any], *, typed: bool = False) -> "CommitMetadata":
        """The metadata of a decoded record ``d`` (``typed``: an Avro record of the model's
        schema, whose write stats need no type checks)."""
        _check_shape(d)
        p2w = {p: [WriteStat.from_dict(s, typed=typed) for s in (stats or [])]
               for p, stats in (d.get("partitionToWriteStats") or {}).items()}
        rep = d.get("partitionToReplaceFileIds")
        return cls(
            partition_to_write_stats=p2w,
            extra_metadata=dict(d.get("extraMetadata") or {}),
            operation_type=d.get("operationType"),
            compacted=bool(d.get("compacted") or False),
            partition_to_replace_file_ids={k: list(v or []) for k, v in rep.items()} if rep is not None else None,
        )

    @classmethod
    def parse(cls, data: bytes, *, layout: int, replace: bool = False) -> "CommitMetadata":
        """Decode timeline-file bytes: JSON on layout 1, Avro on layout 2 (empty = no stats)."""
        if not data or not data.strip():
            return cls(partition_to_replace_file_ids={} if replace else None)
        if is_avro(data):
            return cls.from_dict(read_record(data, ("HoodieCommitMetadata", "HoodieReplaceCommitMetadata"),
                                             "commit metadata"), typed=True)
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise CorruptTimelineError(
                f"commit metadata is neither Avro nor JSON (layout {layout}): {exc}") from exc
        if not isinstance(d, dict):
            raise CorruptTimelineError("commit metadata JSON is not an object")
        return cls.from_dict(d)

    # -- encoding -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "partitionToWriteStats": {p: [asdict(s) for s in stats] for p, stats in self.partition_to_write_stats.items()},
            "extraMetadata": dict(self.extra_metadata),
            "version": 1,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            d["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        else:
            d["compacted"] = self.compacted
        return d

    def to_avro(self) -> bytes:
        """Avro object container bytes, as Hudi 1.0 writes them (codec null)."""
        schema = _schema("HoodieReplaceCommitMetadata" if self.is_replace else "HoodieCommitMetadata")
        buf = io.BytesIO()
        fastavro.writer(buf, schema, [self.to_dict()], codec="null")
        return buf.getvalue()

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2).encode("utf-8")

    def encode(self, *, layout: int) -> bytes:
        """The bytes of a timeline file for a table of timeline ``layout``: JSON on layout 1
        (table version 6, as Hudi 0.x writes it), Avro on layout 2 (versions 8 and 9)."""
        return self.to_json() if layout == 1 else self.to_avro()


@lru_cache(maxsize=None)
def _schema(name: str) -> Any:
    text = resources.files("lakesdk.format").joinpath(f"schemas/{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))
