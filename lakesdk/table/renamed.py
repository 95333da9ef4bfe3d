"""Keywords of the public API that were renamed, kept working for a release.

One filter keyword everywhere: ``where=`` (SQL's ``WHERE`` and PySpark's
``DataFrame.where``): ``t.read(filters=...)`` and the merge clauses' ``condition=`` are its
old names.  A merge's update clauses take their assignments as ``updates=`` (deltalake's
name) instead of ``set=``, which shadowed a builtin.  An old name still works and emits a
:class:`DeprecationWarning` naming the new one; passing both is an
:class:`~lakesdk.exceptions.OptionsError` before anything is read or written.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from lakesdk.exceptions import OptionsError

__all__ = ["RENAMED", "renamed_keyword"]

#: the renamed keywords, old -> new, as the changelog lists them
RENAMED = {"filters": "where", "condition": "where", "set": "updates"}

T = TypeVar("T")


def renamed_keyword(call: str, new: str, new_value: T | None, old: str, old_value: T | None) -> T | None:
    """The value passed to ``call`` under the keyword ``new`` or under its deprecated name
    ``old`` (a :class:`DeprecationWarning` pointing at the caller's line, naming ``new``).
    Both given is an :class:`OptionsError` (``key``: the new name); neither gives None."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise OptionsError(f"{call}() was given both {new}= and {old}=, which is the deprecated name of {new}=: "
                           f"pass the value once, as {new}=...; nothing was read or written", key=new)
    # stacklevel 3: this function, the public method, then the line that called it
    warnings.warn(f"{call}({old}=...) is deprecated and will be removed in a later release: pass {new}=... "
                  f"(the same value)", DeprecationWarning, stacklevel=3)
    return old_value
