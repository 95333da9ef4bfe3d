"""Row predicates: a small SQL ``WHERE`` dialect and DNF filter tuples.

Grammar (case-insensitive keywords)::

    expr    := and (OR and)*
    and     := not (AND not)*
    not     := NOT not | cmp
    cmp     := term [ (= | == | != | <> | < | <= | > | >=) term
                    | IS [NOT] NULL | [NOT] IN ( lit, ... ) | [NOT] BETWEEN term AND term ]
    term    := column | literal | ( expr )
    column  := identifier | `quoted identifier`
    literal := number | 'text' | TRUE | FALSE | NULL | DATE 'yyyy-mm-dd' | TIMESTAMP '...'

A parsed :class:`Predicate` converts to a pyarrow compute expression, evaluates on
partition values for pruning, and names the columns it uses.

>>> p = parse_where("fare > 20 AND city IN ('sf', 'nyc')")
>>> sorted(p.columns)
['city', 'fare']
>>> p.prune({"city": "sf"}), p.prune({"city": "la"})
(True, False)
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import itertools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, cast

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import InvalidFilterError
from lakesdk.format.keys import DEFAULT_PARTITION

__all__ = ["Predicate", "parse_where", "from_filters"]

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d*\.\d+(?:[eE][-+]?\d+)?|-?\d+(?:[eE][-+]?\d+)?)
    | '(?P<str>(?:[^']|'')*)'
    | `(?P<qid>[^`]+)`
    | "(?P<dqid>[^"]+)"
    | (?P<id>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
    )""", re.VERBOSE)

_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "TRUE", "FALSE", "DATE", "TIMESTAMP", "LIKE"}


@dataclass(frozen=True)
class Col:
    name: str


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Node:
    op: str            # cmp ops, and, or, not, isnull, notnull, in
    args: tuple


def _tokenize(text: str) -> list[tuple[str, Any]]:
    pos = 0
    out: list[tuple[str, Any]] = []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InvalidFilterError(f"cannot parse the filter {text!r} at position {pos}: {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = cast(str, m.lastgroup)   # every alternative of _TOKEN is a named group
        val = m.group(kind)
        if kind == "id" and val.upper() in _KEYWORDS:
            out.append(("kw", val.upper()))
        elif kind in ("qid", "dqid"):
            out.append(("id", val))
        elif kind == "str":
            out.append(("str", val.replace("''", "'")))
        elif kind == "num":
            num: int | float | _decimal.Decimal = float(val) if any(c in val for c in ".eE") else int(val)
            if isinstance(num, int) and not -2 ** 63 <= num < 2 ** 63:
                num = _decimal.Decimal(num)   # beyond BIGINT: Spark SQL reads it as a DECIMAL literal
            out.append(("num", num))
        else:
            out.append((kind, val))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self, kind: str | None = None, val: Any = None) -> bool:
        if self.i >= len(self.toks):
            return False
        k, v = self.toks[self.i]
        return (kind is None or k == kind) and (val is None or v == val)

    def take(self, kind: str | None = None, val: Any = None) -> Any:
        if not self.peek(kind, val):
            got = self.toks[self.i][1] if self.i < len(self.toks) else "end of text"
            raise InvalidFilterError(f"cannot parse the filter {self.text!r}: expected {val or kind}, found {got!r}")
        self.i += 1
        return self.toks[self.i - 1][1]

    def parse(self) -> Any:
        e = self.or_()
        if self.i != len(self.toks):
            raise InvalidFilterError(f"cannot parse the filter {self.text!r}: unexpected {self.toks[self.i][1]!r}")
        return e

    def or_(self) -> Any:
        e = self.and_()
        while self.peek("kw", "OR"):
            self.take()
            e = Node("or", (e, self.and_()))
        return e

    def and_(self) -> Any:
        e = self.not_()
        while self.peek("kw", "AND"):
            self.take()
            e = Node("and", (e, self.not_()))
        return e

    def not_(self) -> Any:
        if self.peek("kw", "NOT"):
            self.take()
            return Node("not", (self.not_(),))
        return self.cmp()

    def cmp(self) -> Any:
        left = self.term()
        if self.peek("op") and self.toks[self.i][1] in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            op = self.take()
            op = {"==": "=", "<>": "!="}.get(op, op)
            return Node(op, (left, self.term()))
        negate = False
        if self.peek("kw", "IS"):
            self.take()
            if self.peek("kw", "NOT"):
                self.take()
                negate = True
            self.take("kw", "NULL")
            return Node("notnull" if negate else "isnull", (left,))
        if self.peek("kw", "NOT"):
            self.take()
            negate = True
        if self.peek("kw", "IN"):
            self.take()
            self.take("op", "(")
            vals = [self.literal()]
            while self.peek("op", ","):
                self.take()
                vals.append(self.literal())
            self.take("op", ")")
            n = Node("in", (left, tuple(v.value for v in vals)))
            return Node("not", (n,)) if negate else n
        if self.peek("kw", "BETWEEN"):
            self.take()
            lo = self.term()
            self.take("kw", "AND")
            hi = self.term()
            n = Node("and", (Node(">=", (left, lo)), Node("<=", (left, hi))))
            return Node("not", (n,)) if negate else n
        if self.peek("kw", "LIKE"):
            raise InvalidFilterError("LIKE is not supported in lakesdk filters; use .to_spark().filter(...) for it")
        if negate:
            raise InvalidFilterError(f"cannot parse the filter {self.text!r}: NOT must precede IN or BETWEEN here")
        return left

    def literal(self) -> Lit:
        t = self.term()
        if not isinstance(t, Lit):
            raise InvalidFilterError(f"cannot parse the filter {self.text!r}: IN lists hold literals only")
        return t

    def term(self) -> Any:
        if self.peek("op", "("):
            self.take()
            e = self.or_()
            self.take("op", ")")
            return e
        if self.peek("num"):
            return Lit(self.take())
        if self.peek("str"):
            return Lit(self.take())
        if self.peek("id"):
            return Col(self.take())
        if self.peek("kw"):
            kw = self.take()
            if kw in ("TRUE", "FALSE"):
                return Lit(kw == "TRUE")
            if kw == "NULL":
                return Lit(None)
            if kw == "DATE":
                return Lit(_dt.date.fromisoformat(self.take("str")))
            if kw == "TIMESTAMP":
                return Lit(_dt.datetime.fromisoformat(self.take("str")))
        got = self.toks[self.i][1] if self.i < len(self.toks) else "end of text"
        raise InvalidFilterError(f"cannot parse the filter {self.text!r}: unexpected {got!r}")


def _coerce(text: str | None, like: Any) -> Any:
    """Partition value text -> the literal's Python type (for pruning)."""
    if text is None:
        return None
    try:
        if isinstance(like, bool):
            return text.lower() == "true"
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, _dt.datetime):
            return _dt.datetime.fromisoformat(text)
        if isinstance(like, _dt.date):
            return _dt.date.fromisoformat(text)
    except ValueError:
        return text
    return text


_UNKNOWN = object()


def _comparable(x: Any, y: Any) -> bool:
    """Both text, both numbers, both booleans, or both dates/times."""
    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float, _decimal.Decimal)):
            return "num"
        if isinstance(v, (_dt.date, _dt.datetime)):
            return "time"
        return type(v).__name__
    return kind(x) == kind(y)


class Predicate:
    """A parsed row predicate."""

    def __init__(self, tree: Any, text: str) -> None:
        self.tree = tree
        self.text = text

    def __repr__(self) -> str:
        return f"Predicate({self.text!r})"

    @property
    def columns(self) -> set[str]:
        out: set[str] = set()

        def walk(n: Any) -> None:
            if isinstance(n, Col):
                out.add(n.name)
            elif isinstance(n, Node):
                for a in n.args:
                    walk(a)
        walk(self.tree)
        return out

    def validate(self, names: Iterable[str]) -> None:
        names = list(names)
        missing = sorted(self.columns - set(names))
        if missing:
            raise InvalidFilterError(
                f"the filter {self.text!r} names unknown column(s) {', '.join(map(repr, missing))}; "
                f"the table has: {', '.join(names)}")

    def to_arrow(self, schema: pa.Schema | None = None) -> pc.Expression:
        """A pyarrow compute expression; with the table's ``schema``, literals are read as the
        type of the column they are compared with where Spark SQL would cast them (an integer
        for a decimal column, ``'2024-01-01'`` for a date column)."""
        def lit_for(col: Any, value: Any) -> Any:
            if schema is None or not isinstance(col, Col) or col.name not in schema.names or value is None:
                return value
            t = schema.field(col.name).type
            if pa.types.is_decimal(t) and isinstance(value, int) and not isinstance(value, bool):
                return pa.scalar(_decimal.Decimal(value))
            if (pa.types.is_temporal(t) and isinstance(value, (str, _dt.date))
                    and not pa.types.is_duration(t) and not pa.types.is_interval(t)):
                try:
                    return pa.scalar(value).cast(t)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
                    raise InvalidFilterError(
                        f"the filter {self.text!r} compares column {col.name!r} ({t}) with {value!r}, which cannot be "
                        f"read as {t} ({err}); write the value as {t} text, e.g. DATE '2024-01-31' or "
                        f"TIMESTAMP '2024-01-31 12:00:00'") from None
            return value

        def in_values(col: Col, values: tuple) -> Any:
            if schema is None or col.name not in schema.names:
                return values
            t = schema.field(col.name).type
            if not (pa.types.is_decimal(t) or pa.types.is_temporal(t)):
                return values
            if pa.types.is_decimal(t):
                if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
                    return values
                values = tuple(None if v is None else _decimal.Decimal(str(v)) for v in values)
            try:
                return pa.array(list(values)).cast(t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return values   # check_types names the mismatch

        def conv(n: Any) -> Any:
            if isinstance(n, Col):
                return pc.field(n.name)
            if isinstance(n, Lit):
                return n.value
            a = n.args
            if n.op not in ("and", "or", "not", "isnull", "notnull", "in"):
                if isinstance(a[0], Col) and isinstance(a[1], Lit):
                    a = (a[0], Lit(lit_for(a[0], a[1].value)))
                elif isinstance(a[1], Col) and isinstance(a[0], Lit):
                    a = (Lit(lit_for(a[1], a[0].value)), a[1])
            if n.op == "in" and isinstance(a[0], Col):
                a = (a[0], in_values(a[0], a[1]))
            if n.op == "and":
                return expr(a[0]) & expr(a[1])
            if n.op == "or":
                return expr(a[0]) | expr(a[1])
            if n.op == "not":
                return ~expr(a[0])
            if n.op == "isnull":
                return expr(a[0]).is_null()
            if n.op == "notnull":
                return expr(a[0]).is_valid()
            if n.op == "in":
                return expr(a[0]).isin(a[1] if isinstance(a[1], pa.Array) else list(a[1]))
            lhs, rhs = conv(a[0]), conv(a[1])
            if not isinstance(lhs, pc.Expression) and not isinstance(rhs, pc.Expression):
                lhs = pc.scalar(lhs)
            ops = {"=": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__"}
            if not isinstance(lhs, pc.Expression):
                flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
                return getattr(rhs, ops[flip[n.op]])(lhs)
            return getattr(lhs, ops[n.op])(rhs)

        def expr(n: Any) -> pc.Expression:
            e = conv(n)
            return e if isinstance(e, pc.Expression) else pc.scalar(e)
        return expr(self.tree)

    def to_spark(self) -> Any:
        """A Spark Column built from the parsed tree, so Spark sees the literals this parser
        read (Spark SQL text would read backslashes in string literals as escapes)."""
        from pyspark.sql import functions as F

        def conv(n: Any) -> Any:
            if isinstance(n, Col):
                return F.col(f"`{n.name.replace('`', '``')}`")
            if isinstance(n, Lit):
                return F.lit(n.value)
            a = n.args
            if n.op == "and":
                return conv(a[0]) & conv(a[1])
            if n.op == "or":
                return conv(a[0]) | conv(a[1])
            if n.op == "not":
                return ~conv(a[0])
            if n.op == "isnull":
                return conv(a[0]).isNull()
            if n.op == "notnull":
                return conv(a[0]).isNotNull()
            if n.op == "in":
                return conv(a[0]).isin(*[F.lit(v) for v in a[1]])
            lhs, rhs = conv(a[0]), conv(a[1])
            return {"=": lhs.__eq__, "!=": lhs.__ne__, "<": lhs.__lt__, "<=": lhs.__le__, ">": lhs.__gt__,
                    ">=": lhs.__ge__}[n.op](rhs)
        return conv(self.tree)

    def check_types(self, schema: pa.Schema) -> None:
        """Raise InvalidFilterError when a condition cannot be evaluated on columns of these
        types (text compared with a number, a struct with a literal, NOT of a text column...);
        checked on no rows, before anything is read."""
        empty = schema.empty_table()

        def leaves(n: Any) -> Iterable[Any]:
            if isinstance(n, Node) and n.op in ("and", "or"):
                for x in n.args:
                    yield from leaves(x)
            elif isinstance(n, Node) and n.op == "not" and not isinstance(n.args[0], Col):
                yield from leaves(n.args[0])
                yield n
            else:
                yield n

        def describe(n: Any) -> str:
            if isinstance(n, Col):
                return f"column {n.name!r} ({schema.field(n.name).type})" if n.name in schema.names else repr(n.name)
            if isinstance(n, Lit):
                return f"{n.value!r} ({type(n.value).__name__})"
            if isinstance(n, Node) and n.op == "in":
                return describe(n.args[0]) + " and the list " + repr(list(n.args[1]))
            return " and ".join(describe(a) for a in n.args if isinstance(a, (Col, Lit, Node)))

        for leaf in [*leaves(self.tree), self.tree]:
            try:
                empty.filter(Predicate(leaf, self.text).to_arrow(schema))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as err:
                what = describe(leaf) if isinstance(leaf, (Col, Node)) else repr(leaf)
                if isinstance(leaf, Col) or (isinstance(leaf, Node) and leaf.op == "not"):
                    what += " used as a condition (expected a boolean)"
                else:
                    what = "it compares " + what + ", types that do not compare"
                raise InvalidFilterError(
                    f"the filter {self.text!r} cannot be evaluated: {what} "
                    f"({str(err).splitlines()[0]}). Compare a column with a literal of its type (text in quotes, "
                    "numbers bare, DATE '...'/TIMESTAMP '...'), or use .to_spark().filter(...) for SQL casts") from None

    def prune(self, values: dict[str, str | None]) -> bool:
        """False only if no row of a partition with these values can match.

        ``None`` is the default partition (``__HIVE_DEFAULT_PARTITION__``), which holds the
        rows whose value is null, empty or literally ``__HIVE_DEFAULT_PARTITION__``: the
        partition is kept if any of them can match."""
        defaults = [k for k, v in values.items() if v is None]
        if not defaults:
            return self._prune_one(values)
        for combo in itertools.product((None, "", DEFAULT_PARTITION), repeat=len(defaults)):
            if self._prune_one({**values, **dict(zip(defaults, combo))}):
                return True
        return False

    def _prune_one(self, values: dict[str, str | None]) -> bool:
        def truth(n: Any) -> Any:
            """``n`` as a condition: True, False, None (SQL NULL) or unknown."""
            x = ev(n)
            if isinstance(n, Col) and isinstance(x, str):   # a boolean partition column used bare
                return {"true": True, "false": False}.get(x.lower(), _UNKNOWN)
            return x if x is None or x is _UNKNOWN or isinstance(x, bool) else _UNKNOWN

        def ev(n: Any) -> Any:
            if isinstance(n, Col):
                return values[n.name] if n.name in values else _UNKNOWN
            if isinstance(n, Lit):
                return n.value
            a = n.args
            if n.op in ("and", "or"):
                x, y = truth(a[0]), truth(a[1])
                if n.op == "and":
                    if x is False or y is False:
                        return False
                    return True if x is True and y is True else _UNKNOWN
                if x is True or y is True:
                    return True
                return False if x is False and y is False else _UNKNOWN
            if n.op == "not":
                x = truth(a[0])
                return x if x is _UNKNOWN or x is None else not x
            if n.op in ("isnull", "notnull"):
                x = ev(a[0])
                if x is _UNKNOWN:
                    return _UNKNOWN
                return (x is None) == (n.op == "isnull")
            if n.op == "in":
                x = ev(a[0])
                if x is _UNKNOWN:
                    return _UNKNOWN
                vals = a[1]
                x = _coerce(x, vals[0]) if vals else x
                if x is None:
                    return None
                if any(not _comparable(x, v) for v in vals if v is not None):
                    return _UNKNOWN
                return x in vals
            x, y = ev(a[0]), ev(a[1])
            if x is _UNKNOWN or y is _UNKNOWN:
                return _UNKNOWN
            if isinstance(a[0], Col) and isinstance(x, str):
                x = _coerce(x, y)
            if isinstance(a[1], Col) and isinstance(y, str):
                y = _coerce(y, x)
            if x is None or y is None:
                return None
            if not _comparable(x, y):   # the row filter decides (or raises InvalidFilterError)
                return _UNKNOWN
            try:
                return {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[n.op]
            except TypeError:
                return _UNKNOWN
        r = truth(self.tree)
        return r is not False and r is not None

    def __and__(self, other: "Predicate") -> "Predicate":
        return Predicate(Node("and", (self.tree, other.tree)), f"({self.text}) AND ({other.text})")


def parse_where(text: str) -> Predicate:
    if not isinstance(text, str) or not text.strip():
        raise InvalidFilterError("the filter is empty; pass a SQL condition such as \"fare > 20\"")
    return Predicate(_Parser(text).parse(), text)


def from_filters(filters: Sequence[tuple[str, str, Any]]) -> Predicate:
    """``[(column, op, value), ...]`` (ANDed, as in pyarrow/deltalake/hudi) -> Predicate."""
    tree: Any = None
    parts = []
    for f in filters:
        if not (isinstance(f, (tuple, list)) and len(f) == 3):
            raise InvalidFilterError(f"filter {f!r} is not a (column, op, value) triple")
        col, op, val = f
        op = op.upper().strip()
        if op in ("IN", "NOT IN"):
            n: Any = Node("in", (Col(col), tuple(val)))
            if op == "NOT IN":
                n = Node("not", (n,))
        elif op in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            n = Node({"==": "=", "<>": "!="}.get(op, op), (Col(col), Lit(val)))
        else:
            raise InvalidFilterError(f"filter operator {op!r} is not supported (use = != < <= > >= IN NOT IN)")
        tree = n if tree is None else Node("and", (tree, n))
        parts.append(f"{col} {op} {val!r}")
    if tree is None:
        raise InvalidFilterError("filters is empty")
    return Predicate(tree, " AND ".join(parts))
