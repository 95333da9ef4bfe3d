"""fsspec-backed storage rooted at a base URL."""

from __future__ import annotations

import builtins
import os
import posixpath
import threading
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator

import fsspec

from lakesdk.exceptions import MissingDependencyError, StorageError

__all__ = ["FileInfo", "Storage"]

_MEMORY_LOCK = threading.Lock()
_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
           "abfs": ("adlfs", "azure"), "az": ("adlfs", "azure")}


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listed entry: ``path`` is relative to the storage base."""

    path: str
    size: int
    is_dir: bool
    modified: float | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


def _local_temp(path: str, data: bytes) -> str:
    """A new temp file beside the local ``path`` (its folder made) holding ``data``: a write
    renames it, an exclusive create links it into place."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    return tmp


def _split_protocol(url: str) -> tuple[str, str]:
    if "://" in url:
        proto, rest = url.split("://", 1)
        return proto.lower(), rest
    return "file", url


class Storage:
    """Storage rooted at ``base_url``; all paths are relative to it.

    >>> s = Storage("memory://doctest-storage")
    >>> s.create_exclusive("a/b.txt", b"hi")
    True
    >>> s.create_exclusive("a/b.txt", b"again")
    False
    >>> s.read("a/b.txt")
    b'hi'
    """

    def __init__(self, base_url: str, storage_options: dict[str, Any] | None = None) -> None:
        proto, rest = _split_protocol(str(base_url))
        if proto == "file":
            rest = os.path.abspath(os.path.expanduser(rest))
        if proto == "s3a":
            proto = "s3"
        self.protocol = proto
        self.root = rest.rstrip("/") if rest != "/" else rest
        self.storage_options = dict(storage_options or {})
        self._fs: fsspec.AbstractFileSystem | None = None

    # -- identity -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.root if self.protocol == "file" else f"{self.protocol}://{self.root}"

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        if self._fs is None:
            opts = dict(self.storage_options)
            if self.protocol not in ("file", "memory"):
                # Files are written by other processes (Spark executors, other writers): a
                # process-local listings cache would hide them (stale ls/info/exists).
                opts.setdefault("use_listings_cache", False)
            try:
                self._fs = fsspec.filesystem(self.protocol, **opts)
            except ImportError as exc:
                pkg, extra = _EXTRAS.get(self.protocol, (self.protocol, "all"))
                raise MissingDependencyError(pkg, extra, f"Storage at {self.base_url!r}") from exc
        return self._fs

    def child(self, rel: str) -> "Storage":
        """A storage rooted at ``rel`` below this one: of the same class, with a copy of its
        attributes (its options and file system; what a subclass holds, as it is now), so that a
        storage that counts, delays or fails calls makes the child's calls do the same."""
        s = object.__new__(type(self))
        s.__dict__.update(self.__dict__)
        s.root = self._abs(rel)
        return s

    def _abs(self, rel: str) -> str:
        rel = rel.strip("/")
        return f"{self.root}/{rel}" if rel else self.root

    def url(self, rel: str = "") -> str:
        """Full URL of ``rel`` (a plain path for local files)."""
        a = self._abs(rel)
        return a if self.protocol == "file" else f"{self.protocol}://{a}"

    def _rel(self, absolute: str) -> str:
        absolute = absolute.split("://", 1)[-1] if "://" in absolute else absolute
        root = self.root.split("://", 1)[-1]
        if self.protocol == "memory":
            absolute, root = absolute.lstrip("/"), root.lstrip("/")
        if absolute == root:
            return ""
        if not absolute.startswith(root + "/"):
            raise StorageError(f"path {absolute!r} is outside the storage base {self.root!r}")
        return absolute[len(root) + 1:]

    def __getstate__(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "root": self.root, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fs = None

    def __repr__(self) -> str:
        return f"Storage({self.base_url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Storage) and (self.protocol, self.root) == (other.protocol, other.root)

    def __hash__(self) -> int:
        return hash((self.protocol, self.root))

    # -- reading ----------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._abs(rel)))

    def read(self, rel: str) -> bytes:
        try:
            with self.fs.open(self._abs(rel), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as exc:  # pragma: no cover - depends on backend
            raise StorageError(f"could not read {self.url(rel)!r}: {exc}") from exc

    def open_input(self, rel: str) -> BinaryIO:
        """A seekable binary file object (for pyarrow's Parquet reader)."""
        return self.fs.open(self._abs(rel), "rb")

    def size(self, rel: str) -> int:
        return int(self.fs.size(self._abs(rel)))

    def info(self, rel: str) -> FileInfo:
        i = self.fs.info(self._abs(rel))
        return self._to_info(i)

    def _to_info(self, i: dict[str, Any]) -> FileInfo:
        mtime: Any = i.get("mtime") or i.get("LastModified") or i.get("created")
        if hasattr(mtime, "timestamp"):
            mtime = mtime.timestamp()
        return FileInfo(self._rel(i["name"]), int(i.get("size") or 0), i.get("type") == "directory",
                        float(mtime) if mtime is not None else None)

    def list(self, rel: str = "") -> list[FileInfo]:
        """Entries directly under ``rel`` (files and folders); empty if it does not exist."""
        try:
            entries = self.fs.ls(self._abs(rel), detail=True)
        except FileNotFoundError:
            return []
        out = [self._to_info(e) for e in entries]
        me = rel.strip("/")
        return sorted((e for e in out if e.path != me), key=lambda e: e.path)

    def walk_files(self, rel: str = "") -> Iterator[FileInfo]:
        """Every file below ``rel``, recursively."""
        for e in self.list(rel):
            if e.is_dir:
                yield from self.walk_files(e.path)
            else:
                yield e

    def find(self, rel: str = "") -> builtins.list[FileInfo]:
        """Every file below ``rel`` (one recursive listing call where the backend has one)."""
        base = self._abs(rel)
        if self.protocol == "file":
            out: builtins.list[FileInfo] = []
            if not os.path.isdir(base):
                return out
            for dirpath, _dirnames, filenames in os.walk(base):
                for fn in filenames:
                    p = os.path.join(dirpath, fn)
                    try:
                        st = os.stat(p)
                    except FileNotFoundError:
                        continue
                    out.append(FileInfo(self._rel(p), st.st_size, False, st.st_mtime))
            return out
        try:
            found = self.fs.find(base, detail=True, withdirs=False)
        except FileNotFoundError:
            return []
        return [self._to_info(i) for i in found.values() if i.get("type") != "directory"]

    # -- writing ----------------------------------------------------------------------------
    def makedirs(self, rel: str) -> None:
        if self.protocol in ("file", "memory"):
            self.fs.makedirs(self._abs(rel), exist_ok=True)

    def write(self, rel: str, data: bytes) -> None:
        """Write (or overwrite) a whole file.  Local writes are atomic (temp file + rename)."""
        path = self._abs(rel)
        if self.protocol == "file":
            os.replace(_local_temp(path, data), path)
            return
        self.makedirs(posixpath.dirname(rel))
        with self.fs.open(path, "wb") as f:
            f.write(data)

    def open_output(self, rel: str) -> BinaryIO:
        """A binary file object for streaming a new file (data files)."""
        path = self._abs(rel)
        if self.protocol == "file":
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return self.fs.open(path, "wb")

    def create_exclusive(self, rel: str, data: bytes = b"") -> bool:
        """Atomically create ``rel`` with ``data`` unless it exists.

        Returns True if this call created it, False if it already existed.  Readers never
        see a partial file: local files are written to a temp name and hard-linked into
        place; S3-compatible stores use a conditional put (``If-None-Match: *``).
        """
        path = self._abs(rel)
        if self.protocol == "file":
            tmp = _local_temp(path, data)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        if self.protocol == "memory":
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, data)
                return True
        try:
            with self.fs.open(path, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError):
            # Backend without conditional create: best effort (documented limitation).
            if self.fs.exists(path):
                return False
            with self.fs.open(path, "wb") as f:
                f.write(data)
            return True
        except OSError as exc:
            if "PreconditionFailed" in repr(exc) or "412" in repr(exc):
                return False
            raise

    def delete(self, rel: str, *, missing_ok: bool = True) -> None:
        try:
            self.fs.rm_file(self._abs(rel))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, rel: str) -> None:
        try:
            self.fs.rm(self._abs(rel), recursive=True)
        except FileNotFoundError:
            pass

    def touch(self, rel: str) -> None:
        """Create or refresh an empty file (its modification time is now)."""
        self.write(rel, b"")

