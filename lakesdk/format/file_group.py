"""File groups and file slices.

A file group (partition path + file id) holds versions called file slices; a slice is a
base file plus the log files appended onto it.  ``instant`` of a base file is the
requested time of the commit that wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakesdk.format.file_naming import BaseFile, LogFile

__all__ = ["FileSlice", "FileGroup"]


@dataclass(frozen=True, slots=True)
class FileSlice:
    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    base_size: int = 0
    log_files: tuple[LogFile, ...] = ()
    log_sizes: tuple[int, ...] = ()
    #: the CDC log files the write of the base file left beside it (name, size): the changes
    #: it made, not records of the slice; cleaned with the slice
    cdc_files: tuple[tuple[LogFile, int], ...] = ()

    @property
    def base_path(self) -> str | None:
        """Path of the base file relative to the table base."""
        if self.base_file is None:
            return None
        return f"{self.partition}/{self.base_file.name}" if self.partition else self.base_file.name

    @property
    def log_paths(self) -> list[str]:
        return [f"{self.partition}/{lf.name}" if self.partition else lf.name for lf in self.log_files]

    @property
    def cdc_paths(self) -> list[str]:
        return [f"{self.partition}/{lf.name}" if self.partition else lf.name for lf, _ in self.cdc_files]

    @property
    def total_size(self) -> int:
        return self.base_size + sum(self.log_sizes)

    def __repr__(self) -> str:
        base = self.base_file.name if self.base_file else "-"
        logs = f", {len(self.log_files)} log files" if self.log_files else ""
        return f"FileSlice({self.partition or '<root>'}/{self.file_id}, base={base}{logs})"


@dataclass(slots=True)
class FileGroup:
    partition: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)

    @property
    def latest(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None

    def __repr__(self) -> str:
        return f"FileGroup({self.partition or '<root>'}/{self.file_id}, {len(self.slices)} slices)"
