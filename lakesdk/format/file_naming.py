"""Data file names.

Grammar::

    base file   <fileId>_<writeToken>_<instantTime>.<ext>
    log file    .<fileId>_<instantTime>.log.<version>_<writeToken>
    fileId      <uuid>-<n>            e.g. 97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0
    writeToken  <taskPartitionId>-<stageId>-<taskAttemptId>

>>> b = BaseFile.parse("97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet")
>>> (b.file_id, b.write_token, b.instant)
('97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0', '1-98-142', '20240418172802262')
>>> b.name == BaseFile(b.file_id, b.write_token, b.instant).name
True
>>> LogFile.parse(".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85").version
1
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

__all__ = ["PARTITION_METAFILE", "BaseFile", "LogFile", "new_file_id", "make_write_token", "is_base_file", "is_log_file",
           "UNKNOWN_WRITE_TOKEN", "written_by", "parse_data_file"]

UNKNOWN_WRITE_TOKEN = "1-0-1"
PARTITION_METAFILE = ".hoodie_partition_metadata"   # a partition folder's metadata file (not a data file)
_BASE_RE = re.compile(r"^(?P<fid>[^._][^_]*)_(?P<tok>\d+-\d+-\d+)_(?P<inst>\d{14,17})\.(?P<ext>[a-z]+)$")
_LOG_RE = re.compile(r"^\.(?P<fid>[^_]+)_(?P<inst>\d{14,17})\.(?P<ext>log)\.(?P<ver>\d+)(?:_(?P<tok>\d+-\d+-\d+))?(?P<cdc>[.-]cdc)?$")


def new_file_id(n: int = 0) -> str:
    """A fresh file id: ``<uuid4>-<n>``."""
    return f"{uuid.uuid4()}-{n}"


def make_write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


@dataclass(frozen=True, slots=True)
class BaseFile:
    file_id: str
    write_token: str
    instant: str
    extension: str = "parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}.{self.extension}"

    @classmethod
    def parse(cls, name: str) -> "BaseFile":
        m = _BASE_RE.match(name)
        if not m:
            raise ValueError(f"{name!r} is not a base file name (<fileId>_<writeToken>_<instant>.<ext>)")
        return _base_of(m)


@dataclass(frozen=True, slots=True)
class LogFile:
    file_id: str
    instant: str
    version: int
    write_token: str = UNKNOWN_WRITE_TOKEN
    #: ``".cdc"`` for a CDC log file (changes of a copy-on-write write, not data of the slice;
    #: ``"-cdc"`` as Hudi named them before 0.13), else empty
    suffix: str = ""

    @property
    def name(self) -> str:
        return f".{self.file_id}_{self.instant}.log.{self.version}_{self.write_token}{self.suffix}"

    @property
    def is_cdc(self) -> bool:
        """A CDC log file: the changes a write made (lakesdk.format.cdc), no records of the slice."""
        return bool(self.suffix)

    @classmethod
    def parse(cls, name: str) -> "LogFile":
        m = _LOG_RE.match(name)
        if not m:
            raise ValueError(f"{name!r} is not a log file name (.<fileId>_<instant>.log.<version>_<writeToken>)")
        return _log_of(m)


_BASE_EXTENSIONS = ("parquet", "orc", "hfile", "lance")


def _base_of(m: re.Match[str]) -> BaseFile:
    return BaseFile(*m.groups())      # fid, tok, inst, ext: the fields in order


def _log_of(m: re.Match[str]) -> LogFile:
    return LogFile(m.group("fid"), m.group("inst"), int(m.group("ver")), m.group("tok") or UNKNOWN_WRITE_TOKEN,
                   m.group("cdc") or "")


def parse_data_file(name: str) -> "BaseFile | LogFile | None":
    """A data file's name parsed (one match of its pattern): a base file, a log file, or None
    for any other name (what :func:`is_base_file` and :func:`is_log_file` say)."""
    m = _BASE_RE.match(name)
    if m is not None:
        groups = m.groups()
        return BaseFile(*groups) if groups[3] in _BASE_EXTENSIONS else None
    m = _LOG_RE.match(name)
    return None if m is None else _log_of(m)


def is_base_file(name: str) -> bool:
    m = _BASE_RE.match(name)
    return m is not None and m.group("ext") in _BASE_EXTENSIONS


def is_log_file(name: str) -> bool:
    return bool(_LOG_RE.match(name))


def written_by(name: str, instant: str) -> bool:
    """Is ``name`` a data file that ``instant`` wrote: its base file, its log file, or the
    ``.tmp`` file a local write leaves when it crashes?"""
    if name.endswith(".tmp"):
        name = name.rsplit(".", 2)[0]
    return name.endswith(f"_{instant}.parquet") or (name.startswith(".") and f"_{instant}.log." in name)
