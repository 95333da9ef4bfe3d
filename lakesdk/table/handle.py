"""A table handle as the modules that make it up see it.

:class:`~lakesdk.table.table.Table` imports its queries, staged writes, merges and namespaces;
they take the handle typed as :class:`Handle` (never as ``Table``), so that none of them
imports the module that imports them.
"""

from __future__ import annotations

from typing import Protocol

from lakesdk.commit.context import TableContext, TableHandle

__all__ = ["Handle"]


class Handle(TableHandle, Protocol):
    """:class:`~lakesdk.commit.context.TableHandle` and what the handle keeps for its own
    modules: its context (a table upgrade swaps it) and the record-key encoding its stored keys
    showed (see ``Table._key_encoding``), and what it does after a write (``Table._after_write``)."""

    _ctx: TableContext
    _stored_key_encoding: str | None

    def _key_encoding(self) -> str: ...

    def _after_write(self) -> None: ...
