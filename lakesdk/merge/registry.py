"""User-defined record mergers, registered by name in Python.

A table created with ``merge_mode="custom", merger="<name>"`` stores only the *name*
(``hoodie.lakesdk.merger.name``) in hoodie.properties; code is never loaded from the table.
Each process that reads or writes the table registers the function first::

    def keep_max_amount(versions: pa.Table) -> pa.Table:
        # all versions of some keys: the data columns plus _hoodie_record_key,
        # _lk_seq (commit order: larger is later) and _lk_op (0 upsert, 1 delete);
        # return one row per key to keep (drop a key to delete it)
        ...
    lk.register_merger("max_amount", keep_max_amount)

The function is used for write-side combining, copy-on-write merges, merge-on-read reads
and compaction alike.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from lakesdk.exceptions import MergerNotRegisteredError

__all__ = ["register_merger", "get_merger", "registered_mergers", "MergerNotRegisteredError"]

MergerFn = Callable[[pa.Table], pa.Table]
_REGISTRY: dict[str, MergerFn] = {}


def register_merger(name: str, fn: MergerFn) -> None:
    """Register ``fn`` as the merger called ``name`` in this process."""
    if not callable(fn):
        raise TypeError("a merger is a function taking the versions (pyarrow.Table) and returning the winners")
    _REGISTRY[name] = fn


def registered_mergers() -> list[str]:
    return sorted(_REGISTRY)


def get_merger(name: str) -> MergerFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise MergerNotRegisteredError(
            f"this table merges records with the custom merger {name!r}, which is not registered in this "
            f"process; call lakesdk.register_merger({name!r}, fn) before reading or writing it", name=name) from None
