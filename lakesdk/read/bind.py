"""A parsed predicate bound to a table's schema, rendered three ways from one tree.

Binding resolves every column (``a.b`` a field of struct ``a``) and casts every literal to
the type of what it is compared with, the way Spark SQL (ANSI mode) casts it: ``'1'`` for an
int column is 1, ``'2024-01-02'`` for a date or timestamp column is that day (a timestamp in
the session time zone, UTC by default), ``500`` for a decimal column is ``Decimal(500)``.
Text that cannot be cast, and types that do not compare, raise InvalidFilterError here,
before anything is read.  The bound tree then renders to a pyarrow expression
(:meth:`Bound.to_arrow`), a Spark ``Column`` (:meth:`Bound.to_spark`) and a partition
check (:meth:`Bound.prune`); all three follow SQL's three-valued logic (a row is kept only
when the condition is true, not false or NULL).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import difflib
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import InvalidFilterError
from lakesdk.format.keys import DEFAULT_PARTITION
from lakesdk.format.read_plan import ScanFilter
from lakesdk.read.expr import Col, Lit, Node
from lakesdk.read.values import ARITH as _ARITH
from lakesdk.read.values import BCall, BLit, arith, arrow_call, typed
from lakesdk.read.values import family as _family

__all__ = ["Bound", "bind", "session_time_zone"]

_CMP = ("=", "!=", "<", "<=", ">", ">=")
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}
_DATE = re.compile(r"\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ].*)?)?)?\s*", re.DOTALL)
_TS = re.compile(r"""\s*(\d{4,})(?:-(\d{1,2})(?:-(\d{1,2})
    (?:[T ](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?)?)?)?
    \s*(Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2})?|[A-Za-z_]+/[A-Za-z_/+-]+)?\s*""", re.VERBOSE)


@dataclass(frozen=True)
class BCol:
    path: tuple[str, ...]
    type: pa.DataType

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class BNode:
    op: str
    args: tuple


def session_time_zone(spark: Any = None) -> str:
    """Spark's session time zone (of ``spark`` or the active session), else UTC."""
    from lakesdk.engine.session import session_time_zone as zone
    return zone(spark)


def _zone(name: str) -> _dt.tzinfo:
    if name.upper() in ("Z", "UTC", "GMT"):
        return _dt.UTC
    m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", name)
    if m:
        delta = _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return _dt.timezone(delta if m.group(1) == "+" else -delta)
    from zoneinfo import ZoneInfo
    return ZoneInfo(name)


_NUMERIC = ("int", "float", "decimal")
_LIT_TYPES = {"int": pa.int64(), "double": pa.float64(), "string": pa.string(), "bool": pa.bool_(),
              "null": pa.null(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC")}
_FIX = {"int": "write a whole number (id = 1 or id = '1')",
        "float": "write a number (x > 1.5)",
        "decimal": "write a number (amount > 500 or amount > 500.25)",
        "string": "put the value in quotes (city = '1')",
        "bool": "write TRUE or FALSE",
        "date": "write the day as text or a DATE literal (d = '2024-01-02' or d = DATE '2024-01-02')",
        "timestamp": "write the moment as text (at > '2024-01-02 10:00:00', read in the session time zone; "
                     "append Z or +01:00 for another zone)"}


def _dec_type(v: _decimal.Decimal) -> pa.DataType:
    sign, digits, exp = v.as_tuple()
    scale = max(0, -int(exp))
    precision = max(len(digits), scale, 1)
    return pa.decimal128(min(precision, 38), scale)


class _Binder:
    def __init__(self, text: str, schema: pa.Schema, tz: str) -> None:
        self.text = text
        self.schema = schema
        self.tz_name = tz
        self.tz = _zone(tz)

    # -- errors ------------------------------------------------------------------------------------
    def error(self, what: str, col: BCol | None = None, lit: Lit | None = None, fix: str | None = None,
              value_type: str | None = None) -> InvalidFilterError:
        msg = f"the filter {self.text!r} cannot be evaluated: {what}"
        if fix:
            msg += f"; {fix}"
        return InvalidFilterError(msg + ". See docs/filters.md", column=col.name if col else None,
                                  column_type=str(col.type) if col else None,
                                  value_type=value_type or (lit.kind if lit else None))

    # -- columns -------------------------------------------------------------------------------------
    def column(self, c: Col) -> BCol:
        fields = list(self.schema)
        t: pa.DataType | None = None
        path: list[str] = []
        for i, part in enumerate(c.path):
            names = [f.name for f in fields]
            match = part if part in names else next(iter([n for n in names if n.lower() == part.lower()][:1]), None)
            if match is None or (part not in names and sum(n.lower() == part.lower() for n in names) > 1):
                where = "the table" if i == 0 else f"struct {'.'.join(path)!r}"
                close = difflib.get_close_matches(part, names, n=3)
                hint = f"; did you mean {' or '.join(map(repr, close))}" if close else ""
                shown = ", ".join(n for n in names if i > 0 or not n.startswith("_hoodie_"))
                raise InvalidFilterError(
                    f"the filter {self.text!r} names unknown column {c.name!r}: {where} has no field {part!r} "
                    f"(it has: {shown}){hint}. Back-quote names with spaces or dots: `my col`. See docs/filters.md",
                    column=c.name)
            f = fields[names.index(match)]
            path.append(f.name)
            t = f.type
            if i + 1 < len(c.path):
                if not pa.types.is_struct(t):
                    raise InvalidFilterError(
                        f"the filter {self.text!r} reads field {c.path[i + 1]!r} of column {'.'.join(path)!r}, which "
                        f"is {t}, not a struct; back-quote the whole name if it is one column: `{c.name}`. "
                        "See docs/filters.md",
                        column=c.name, column_type=str(t))
                fields = list(t)
        assert t is not None
        return BCol(tuple(path), t)

    # -- literals ------------------------------------------------------------------------------------
    @staticmethod
    def against(col: BCol | None) -> str:
        return f"it compares {col.name!r} ({col.type}) with " if col is not None else "it reads "

    def timestamp(self, lit: Lit, naive: bool, col: BCol | None) -> _dt.datetime:
        v = lit.value
        if isinstance(v, _dt.datetime):
            d = v
        elif isinstance(v, _dt.date):
            d = _dt.datetime(v.year, v.month, v.day)
        else:
            m = _TS.fullmatch(str(v))
            if not m:
                raise self.error(f"{self.against(col)}{lit.sql()}, which is not a timestamp", col, lit, _FIX["timestamp"])
            y, mo, da, h, mi, s, frac, zone = m.groups()
            try:
                d = _dt.datetime(int(y), int(mo or 1), int(da or 1), int(h or 0), int(mi or 0), int(s or 0),
                                 int((frac or "").ljust(6, "0")[:6]))
                if zone:
                    d = d.replace(tzinfo=_zone(zone))
            except (ValueError, KeyError, LookupError) as err:
                raise self.error(f"{self.against(col)}{lit.sql()}, which is not a timestamp ({err})", col, lit,
                                 _FIX["timestamp"]) from None
        if d.tzinfo is None:
            if naive:
                return d
            d = d.replace(tzinfo=self.tz)
        if naive:   # a moment with a zone for a local (zone-less) column: its wall time in the session zone
            return d.astimezone(self.tz).replace(tzinfo=None)
        return d.astimezone(_dt.UTC)

    def date(self, lit: Lit, col: BCol | None) -> _dt.date:
        if isinstance(lit.value, _dt.date):
            return lit.value if not isinstance(lit.value, _dt.datetime) else lit.value.date()
        m = _DATE.fullmatch(str(lit.value))
        try:
            if not m:
                raise ValueError("expected yyyy-mm-dd")
            return _dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
        except ValueError as err:
            raise self.error(f"{self.against(col)}{lit.sql()}, which is not a date ({err})", col, lit,
                             _FIX["date"]) from None

    def literal(self, lit: Lit) -> BLit:
        """A literal compared with another literal: its own type."""
        if lit.kind == "decimal":
            return BLit(lit.value, _dec_type(lit.value))
        if lit.kind == "date":
            return BLit(self.date(lit, None), pa.date32())
        if lit.kind == "timestamp":
            return BLit(self.timestamp(lit, False, None), pa.timestamp("us", tz="UTC"))
        return BLit(lit.value, _LIT_TYPES[lit.kind])

    def cast(self, lit: Lit, col: Any) -> BLit:
        """``lit`` as a value of ``col``'s type (Spark's implicit cast of a literal)."""
        t, fam, k, v = col.type, _family(col.type), lit.kind, lit.value
        if k == "null":
            return BLit(None, t)
        mismatch = self.error(f"it compares {col.name!r} ({t}) with {lit.sql()} ({k}), types that do not compare",
                              col, lit, _FIX.get(fam, "compare the column with a column or value of its type"))
        if fam == "other":
            raise self.error(f"column {col.name!r} is {t}, which filters cannot compare", col, lit,
                             "filter on its fields (a.b) or use .to_spark() for other expressions")
        if fam in ("int", "float", "decimal"):
            if k == "string":
                s = str(v).strip()
                try:
                    if fam == "int":
                        if not re.fullmatch(r"[+-]?\d+", s):
                            raise ValueError
                        return BLit(int(s), pa.int64())
                    if fam == "float":
                        return BLit(float(s), pa.float64())
                    d = _decimal.Decimal(s)
                    if not d.is_finite():
                        raise ValueError
                    return BLit(d, _dec_type(d))
                except (ValueError, _decimal.InvalidOperation):
                    raise self.error(f"it compares {col.name!r} ({t}) with {lit.sql()}, text that is not "
                                     f"{'a whole number' if fam == 'int' else 'a number'}", col, lit,
                                     _FIX[fam]) from None
            if k == "int":
                if fam == "float":
                    return BLit(float(v), pa.float64())
                if fam == "decimal":
                    d = _decimal.Decimal(v)
                    return BLit(d, _dec_type(d))
                return BLit(v, pa.int64())
            if k == "decimal":
                return BLit(float(v), pa.float64()) if fam == "float" else BLit(v, _dec_type(v))
            if k == "double":
                return BLit(float(v), pa.float64())
            raise mismatch
        if fam == "string":
            if k == "string":
                return BLit(str(v), pa.string())
            raise mismatch
        if fam == "bool":
            if k == "bool":
                return BLit(bool(v), pa.bool_())
            if k == "string" and str(v).strip().lower() in _TRUE | _FALSE:
                return BLit(str(v).strip().lower() in _TRUE, pa.bool_())
            raise mismatch
        if fam == "date":
            if k in ("date", "string"):
                return BLit(self.date(lit, col), pa.date32())
            if k == "timestamp":   # the day is compared as its midnight in the session time zone
                return BLit(self.timestamp(lit, True, col), pa.timestamp("us"))
            raise mismatch
        if fam == "timestamp":
            if k in ("date", "string", "timestamp"):
                naive = t.tz is None
                unit = "ns" if t.unit == "ns" else "us"
                return BLit(self.timestamp(lit, naive, col), pa.timestamp(unit, tz=None if naive else "UTC"))
            raise mismatch
        raise mismatch

    # -- the tree ------------------------------------------------------------------------------------
    def value(self, n: Any) -> Any:
        if isinstance(n, Col):
            return self.column(n)
        if isinstance(n, Lit):
            return n
        if n.op in _ARITH:
            return arith(self, n)
        return self.condition(n)

    @staticmethod
    def type_of(x: Any) -> pa.DataType:
        return x.type if isinstance(x, (BCol, BLit, BCall)) else pa.bool_()

    def condition(self, n: Any) -> Any:
        if isinstance(n, Node) and n.op in _ARITH:
            raise self.error("a value (arithmetic, || or coalesce) is used as a condition, which needs a boolean",
                             fix="compare it with a value (x + 1 > ...)")
        if isinstance(n, Col):
            c = self.column(n)
            if _family(c.type) != "bool":
                raise self.error(f"column {c.name!r} ({c.type}) is used as a condition, which needs a boolean", c,
                                 fix=f"compare it with a value ({c.name} = ...) or test {c.name} IS NOT NULL")
            return c
        if isinstance(n, Lit):
            if n.kind in ("bool", "null"):
                return BLit(n.value, pa.bool_())
            raise self.error(f"the value {n.sql()} is used as a condition, which needs a boolean",
                             fix="compare a column with it (x = ...)", value_type=n.kind)
        op, a = n.op, n.args
        if op in ("and", "or"):
            return BNode(op, (self.condition(a[0]), self.condition(a[1])))
        if op == "not":
            return BNode("not", (self.condition(a[0]),))
        if op in ("isnull", "notnull"):
            x = self.value(a[0])
            return BNode(op, (self.literal(x) if isinstance(x, Lit) else x,))
        if op == "in":
            x = self.value(a[0])
            if isinstance(x, Lit):
                x = self.literal(x)
            items = []
            for v in a[1]:
                try:
                    items.append(self.compare("=", x, self.value(v)).args[1])
                except InvalidFilterError as err:
                    shown = "[" + ", ".join(i.sql() if isinstance(i, Lit) else "..." for i in a[1]) + "]"
                    raise InvalidFilterError(f"{err} (in the list {shown})", column=err.column,
                                             column_type=err.column_type, value_type=err.value_type) from None
            return BNode("in", (x, tuple(items)))
        if op == "like":
            x, p = self.value(a[0]), self.value(a[1])
            if isinstance(x, Lit):
                x = self.literal(x)
            if _family(self.type_of(x)) != "string":
                raise self.error(f"LIKE needs text, {getattr(x, 'name', 'the value')!r} is {self.type_of(x)}",
                                 x if isinstance(x, BCol) else None, fix="use LIKE on string columns")
            if not isinstance(p, Lit) or p.kind not in ("string", "null"):
                raise self.error("the pattern of LIKE must be text in quotes", x if isinstance(x, BCol) else None,
                                 fix="write x LIKE 'abc%'")
            return BNode("like", (x, BLit(p.value, pa.string())))
        return self.compare(op, self.value(a[0]), self.value(a[1]))

    def compare(self, op: str, x: Any, y: Any) -> BNode:
        if isinstance(x, Lit) and isinstance(y, Lit):
            x, y = self.literal(x), self.literal(y)
        elif isinstance(y, Lit):
            y = self.cast(y, x) if isinstance(x, (BCol, BCall)) else self.literal(y) if isinstance(x, BLit) else \
                self.cast(y, BCol(("(condition)",), pa.bool_()))
        elif isinstance(x, Lit):
            x = self.cast(x, y) if isinstance(y, (BCol, BCall)) else self.literal(x) if isinstance(y, BLit) else \
                self.cast(x, BCol(("(condition)",), pa.bool_()))
        fx, fy = _family(self.type_of(x)), _family(self.type_of(y))
        ok = fx == fy or "null" in (fx, fy) or (fx in _NUMERIC and fy in _NUMERIC) or {fx, fy} == {"date", "timestamp"}
        if fx == "other" or fy == "other" or not ok:
            col = x if isinstance(x, BCol) else y if isinstance(y, BCol) else None
            raise self.error(f"it compares {self.describe(x)} with {self.describe(y)}, types that do not compare", col,
                             fix="compare values of one kind: numbers with numbers, text with text, "
                                 "dates and timestamps with each other", value_type=str(self.type_of(y)))
        return BNode(op, (x, y))

    @staticmethod
    def describe(x: Any) -> str:
        if isinstance(x, BCol):
            return f"column {x.name!r} ({x.type})"
        if isinstance(x, BCall):
            return f"{x.op} ({x.type})"
        if isinstance(x, Lit):
            return f"{x.sql()} ({x.kind})"
        if isinstance(x, BLit):
            return f"{x.value!r} ({x.type})"
        return "a condition (boolean)"


def bind(tree: Node | Col | Lit, text: str, schema: pa.Schema, time_zone: str = "UTC", *,
         value: bool = False) -> "Bound":
    """The parsed ``tree`` of a predicate (its ``text``, for errors) bound as a condition, or
    (``value=True``) as a value: a column, a literal (typed as Spark SQL types it),
    arithmetic, ``||`` or ``coalesce``."""
    b = _Binder(text, schema, time_zone)
    if not value:
        return Bound(b.condition(tree), text, schema, time_zone)
    bound = b.value(tree)
    if isinstance(bound, Lit):
        bound = typed(b, bound)
    return Bound(bound, text, schema, time_zone)


# -- rendering ---------------------------------------------------------------------------------------

def _arrow_scalar(x: BLit) -> pc.Expression:
    return pc.scalar(pa.scalar(x.value, x.type))


def _arrow(n: Any) -> pc.Expression:
    if isinstance(n, BCol):
        return pc.field(*n.path)
    if isinstance(n, BLit):
        return _arrow_scalar(n)
    if isinstance(n, BCall):
        return arrow_call(n, _arrow)
    op, a = n.op, n.args
    if op == "and":
        return pc.and_kleene(_arrow(a[0]), _arrow(a[1]))
    if op == "or":
        return pc.or_kleene(_arrow(a[0]), _arrow(a[1]))
    if op == "not":
        return pc.invert(_arrow(a[0]))
    if op == "isnull":
        return pc.is_null(_arrow(a[0]))
    if op == "notnull":
        return pc.is_valid(_arrow(a[0]))
    if op == "like":
        if a[1].value is None:
            return pc.scalar(pa.scalar(None, pa.bool_()))
        return pc.match_like(_arrow(a[0]), pattern=a[1].value)
    if op == "in":   # x IN (a, b) is x = a OR x = b: NULL when nothing matches and a NULL is involved
        out: pc.Expression | None = None
        for v in a[1]:
            e = _arrow(BNode("=", (a[0], v)))
            out = e if out is None else pc.or_kleene(out, e)
        assert out is not None
        return out
    x, y = a
    tx, ty = _Binder.type_of(x), _Binder.type_of(y)
    if pa.types.is_null(tx) or pa.types.is_null(ty) or (isinstance(x, BLit) and x.value is None) or \
            (isinstance(y, BLit) and y.value is None):
        return pc.scalar(pa.scalar(None, pa.bool_()))
    ex, ey = _arrow(x), _arrow(y)
    fx, fy = _family(tx), _family(ty)
    if fx != fy and fx in _NUMERIC and fy in _NUMERIC and "float" in (fx, fy) or \
            {fx, fy} == {"decimal", "int"} and not (isinstance(x, BLit) or isinstance(y, BLit)):
        ex, ey = ex.cast(pa.float64()), ey.cast(pa.float64())
    elif fx == "timestamp" and fy == "timestamp" and tx != ty:
        ex, ey = _widen_ts(ex, tx, ty), _widen_ts(ey, ty, tx)
    elif {fx, fy} == {"date", "timestamp"}:
        ex = ex.cast(pa.timestamp("us")) if fx == "date" else ex
        ey = ey.cast(pa.timestamp("us")) if fy == "date" else ey
    if "float" in (fx, fy):
        return _float_compare(op, ex, ey, fx == "float", fy == "float")
    return {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}[op](ex, ey)


def _float_compare(op: str, ex: pc.Expression, ey: pc.Expression, x_float: bool, y_float: bool) -> pc.Expression:
    """A comparison of floating-point values as Spark SQL makes it: NaN equals NaN and is above
    every other number (IEEE comparisons, Arrow's, make every comparison with NaN false); NULL
    stays NULL."""
    false = pc.scalar(False)
    nx = pc.is_nan(ex) if x_float else false
    ny = pc.is_nan(ey) if y_float else false

    def less(a: pc.Expression, b: pc.Expression, na: pc.Expression, nb: pc.Expression, *, equal: bool) -> pc.Expression:
        if equal:     # a <= b: b is NaN, or a <= b as numbers
            return pc.or_kleene(pc.less_equal(a, b), nb)
        return pc.or_kleene(pc.less(a, b), pc.and_kleene(nb, pc.invert(na)))    # a < b: b NaN and a not
    if op in ("=", "!="):
        eq = pc.or_kleene(pc.equal(ex, ey), pc.and_kleene(nx, ny))
        return eq if op == "=" else pc.invert(eq)
    if op in ("<", "<="):
        return less(ex, ey, nx, ny, equal=op == "<=")
    return less(ey, ex, ny, nx, equal=op == ">=")


def _widen_ts(e: pc.Expression, t: pa.DataType, other: pa.DataType) -> pc.Expression:
    unit = "ns" if "ns" in (t.unit, other.unit) else "us"
    return e if t.unit == unit and t.tz == other.tz else e.cast(pa.timestamp(unit, tz=other.tz if t.tz else None))


def _bounds_safe(n: Any) -> bool:
    """Whether Arrow may prune row groups by condition ``n`` (not AND, OR or NOT): it reads no
    floating-point column's values.  Parquet writers leave NaN out of a column chunk's bounds
    (a chunk of 1.0 and NaN says [1, 1], and Arrow takes such bounds for the chunk's one value),
    so a condition on the values, Spark SQL's comparisons (:func:`_float_compare`: NaN above
    every number) and arithmetic alike, could be found false for a chunk whose NaN rows make it
    true.  Whether such a column is NULL is safe: null counts count NaN as a value."""
    if isinstance(n, BNode) and n.op in ("isnull", "notnull") and isinstance(n.args[0], BCol):
        return True
    return not any(_family(c.type) == "float" for c in _cols(n, []))


def _exact(n: Any) -> bool:
    """Whether Arrow may prune row groups by the whole filter ``n``."""
    if isinstance(n, BNode) and n.op in ("and", "or", "not"):
        return all(_exact(a) for a in n.args)
    return _bounds_safe(n)


def _relaxed(n: Any, keep: bool) -> pc.Expression | bool:
    """Filter ``n`` with each condition Arrow may not prune by (:func:`_bounds_safe`) replaced:
    by TRUE where the filter keeps a row when it holds, FALSE below an odd number of NOTs.
    AND and OR are monotone and NOT reverses the order FALSE < NULL < TRUE, so the result is
    TRUE wherever ``n`` is (``keep``; not ``keep``: FALSE wherever ``n`` is): a scan pruning by
    it keeps every row ``n`` keeps.  A Python bool for a constant."""
    if isinstance(n, BNode) and n.op in ("and", "or"):
        x, y = _relaxed(n.args[0], keep), _relaxed(n.args[1], keep)
        absorbing = n.op == "or"        # TRUE absorbs an OR, FALSE an AND; the other is neutral
        if x is absorbing or y is absorbing:
            return absorbing
        if isinstance(x, bool):
            return y
        if isinstance(y, bool):
            return x
        return pc.or_kleene(x, y) if n.op == "or" else pc.and_kleene(x, y)
    if isinstance(n, BNode) and n.op == "not":
        x = _relaxed(n.args[0], not keep)
        return (not x) if isinstance(x, bool) else pc.invert(x)
    return _arrow(n) if _bounds_safe(n) else keep


_UNKNOWN = object()


def _cols(n: Any, out: list[BCol]) -> list[BCol]:
    if isinstance(n, BCol):
        out.append(n)
    elif isinstance(n, (BNode, BCall)):
        for a in n.args:
            for x in (a if isinstance(a, tuple) else (a,)):
                _cols(x, out)
    return out


class Bound:
    """A predicate bound to a schema: renders to pyarrow, Spark and a partition check."""

    def __init__(self, tree: Any, text: str, schema: pa.Schema, time_zone: str) -> None:
        self.tree = tree
        self.text = text
        self.schema = schema
        self.time_zone = time_zone

    def __repr__(self) -> str:
        return f"<Bound {self.text!r} time_zone={self.time_zone}>"

    def to_arrow(self) -> pc.Expression:
        return _arrow(self.tree)

    def scan_filter(self) -> ScanFilter:
        """The filter as a scan of base files applies it: the columns it reads, and pushed into
        Arrow's Parquet scanner whole, or (when it reads floating-point values, whose Parquet
        bounds leave NaN out) as :func:`_relaxed`, the filter applied after reading."""
        expr = self.to_arrow()
        names = frozenset(c.path[0] for c in _cols(self.tree, []))
        if _exact(self.tree):
            return ScanFilter.of(expr, names)
        prune = _relaxed(self.tree, True)
        if isinstance(prune, bool):
            prune = None if prune else pc.scalar(False)
        return ScanFilter(expr, names, prune, False)

    def to_spark(self) -> Any:
        """A Spark ``Column`` (:func:`lakesdk.engine.spark_filter.to_spark_column`)."""
        from lakesdk.engine.spark_filter import to_spark_column
        return to_spark_column(self.tree)

    def prune(self, values: dict[str, str | None]) -> bool:
        """False only if no row of a partition with these values can match.

        ``values`` are the partition path's values as text; ``None`` is the default partition
        (``__HIVE_DEFAULT_PARTITION__``), which holds the rows whose value is null, empty or
        literally ``__HIVE_DEFAULT_PARTITION__``: the partition is kept if any can match."""
        defaults = [k for k, v in values.items() if v is None]
        options = []
        for k in defaults:
            t = self.schema.field(k).type if k in self.schema.names else pa.string()
            options.append((None, "", DEFAULT_PARTITION) if _family(t) == "string" else (None,))
        import itertools
        for combo in itertools.product(*options):
            r = self._truth(self.tree, {**values, **dict(zip(defaults, combo))})
            if r is _UNKNOWN or r is True:
                return True
        return False

    def holds_for(self, values: dict[str, str | None]) -> bool:
        """True only if every row of a partition with these values matches (the filter is
        decided by the partition values alone); False when unsure.  A default partition
        (``None``) is never decided: its rows may be null, empty or the marker text."""
        if any(v is None for v in values.values()):
            return False
        return self._truth(self.tree, values) is True

    def _truth(self, n: Any, values: dict[str, str | None]) -> Any:
        """True, False, None (NULL) or _UNKNOWN (depends on columns other than these)."""
        if isinstance(n, BNode) and n.op in ("and", "or"):
            x, y = self._truth(n.args[0], values), self._truth(n.args[1], values)
            stop, go = (False, True) if n.op == "and" else (True, False)
            if x is stop or y is stop:
                return stop
            if x is _UNKNOWN or y is _UNKNOWN:
                return _UNKNOWN
            return go if x is go and y is go else None
        if isinstance(n, BNode) and n.op == "not":
            x = self._truth(n.args[0], values)
            return x if x is _UNKNOWN or x is None else not x
        cols = _cols(n, [])
        if any(len(c.path) > 1 or c.path[0] not in values for c in cols):
            return _UNKNOWN
        arrays = {}
        for c in cols:
            try:
                arrays[c.path[0]] = pa.array([values[c.path[0]]], pa.string()).cast(c.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return _UNKNOWN   # a partition value lakesdk cannot read as its type: keep it
        row = pa.table(arrays) if arrays else pa.table({"_": [0]})
        e = _arrow(n)
        try:
            if row.filter(e).num_rows:
                return True
            return False if row.filter(pc.invert(e)).num_rows else None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return _UNKNOWN
