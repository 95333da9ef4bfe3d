"""The typed error of a view whose files a commit's write stats name are missing or damaged."""

from __future__ import annotations

import posixpath
from typing import Any, Callable

__all__ = ["raise_damage"]


def raise_damage(view: Any, keep: Callable[[Any], bool] | None) -> None:
    """Raise the error :meth:`~lakesdk.read.view.FileSystemView.verify` says of the first file
    of ``view`` (``keep`` selects) that is missing or of another size than its commit recorded;
    return when there is none."""
    missing = view.missing_files(keep)
    if not missing:
        short = view.short_files(keep)
        if short:
            from lakesdk.exceptions import CorruptFileError
            e, size = short[0]
            more = f" (and {len(short) - 1} more)" if len(short) > 1 else ""
            raise CorruptFileError(
                f"{e.kind} file {e.path} of file group {e.file_id}, written by completed commit {e.instant}, is "
                f"damaged: expected {e.size} bytes (its commit's write stat), found {size}{more}. Reading it would "
                "return some of its records and silently drop the rest. Run `lakesdk check` on the table to list "
                "every damaged file, then restore the file or roll the table back (maintenance.restore to a "
                "savepoint, or rollback of the commit) before reading or writing again", path=e.path)
        return
    from lakesdk.exceptions import DataFileMissingError, TimeTravelError
    e = missing[0]
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    cleaned = _cleaned_by(view, e)
    if cleaned is not None and view.as_of is not None:
        raise TimeTravelError(
            f"Cleaner cleaned up the timestamp of interest: time travel to {view.as_of} needs {e.path}, written by "
            f"commit {e.instant}, which clean {cleaned} deleted{more}. Time travel to a later instant, or retain "
            "more versions with the cleaner (or savepoint the instant) before it runs")
    what = f"clean {cleaned} deleted it" if cleaned is not None else "it is not in storage"
    raise DataFileMissingError(
        f"{e.kind} file {e.path} of file group {e.file_id}, written by completed commit {e.instant}, is missing: "
        f"expected it in storage (the commit's write stats record {e.size} bytes), found none: {what}{more}. "
        "Run `lakesdk check` on the table to list every damaged file, then restore the file or roll the table "
        "back (maintenance.restore to a savepoint, or rollback of the commit) before reading or writing again",
        path=e.path, instant=e.instant)


def _cleaned_by(view: Any, e: Any) -> str | None:
    """The clean of the active timeline that deleted ``e``, if any: a completed one that
    records it, or one still running whose plan names it (the timeline as it is now: a
    clean may have started or completed since the view was built)."""
    from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
    name = posixpath.basename(e.path)
    for inst in view.store.load().instants:
        if inst.action != "clean":
            continue
        try:
            if inst.is_completed:
                found = name in view.store.metadata(inst, CleanMetadataData).deleted.get(e.partition, ())
            else:
                found = (e.partition, name) in view.store.plan(inst, CleanerPlanData).file_names()
        except Exception:  # noqa: BLE001 - an unreadable clean proves nothing about this file
            continue
        if found:
            return inst.requested
    return None
