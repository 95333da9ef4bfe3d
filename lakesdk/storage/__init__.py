"""Bytes-only storage over fsspec.  Knows nothing of Hudi.

A :class:`Storage` is rooted at a base URL (a local folder, ``memory://...``,
``s3://bucket/prefix`` ...).  Every path passed to it is relative to that base, with
``/`` separators.  Storage objects are picklable so that Spark executors can use them.
"""

from lakesdk.storage.fs import FileInfo, Storage

__all__ = ["FileInfo", "Storage"]
