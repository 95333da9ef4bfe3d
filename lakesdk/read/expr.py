"""The nodes of a parsed filter: columns, literals and operators (:mod:`lakesdk.read.predicate`
parses text and filter tuples into them, :mod:`lakesdk.read.bind` binds them to a schema)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Col", "Lit", "Node"]


@dataclass(frozen=True)
class Col:
    """A column, or a field of a struct column (``path`` = ``("a", "b")`` for ``a.b``)."""

    path: tuple[str, ...]

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Lit:
    """A literal as written: ``kind`` is int, decimal, double, string, bool, null, date or
    timestamp (DATE '...' / TIMESTAMP '...' keep their text until bound to a time zone)."""

    value: Any
    kind: str

    def sql(self) -> str:
        if self.kind == "null":
            return "NULL"
        if self.kind == "bool":
            return "TRUE" if self.value else "FALSE"
        if self.kind == "string":
            return "'" + str(self.value).replace("\\", "\\\\").replace("'", "\\'") + "'"
        if self.kind == "date":
            return f"DATE '{self.value}'"
        if self.kind == "timestamp":
            return f"TIMESTAMP '{self.value}'"
        if self.kind == "double":
            return f"{self.value!r}D"
        if self.kind == "decimal":
            return f"{self.value}BD"
        return str(self.value)


@dataclass(frozen=True)
class Node:
    """``op``: = != < <= > >= (two operands), and, or, not, isnull, notnull, in (an operand and
    a tuple of terms), like (an operand and a pattern)."""

    op: str
    args: tuple
