"""Row predicates: Spark SQL's ``WHERE`` syntax (a subset) and DNF filter tuples, parsed once
into one tree.

Grammar (case-insensitive keywords)::

    expr    := and (OR and)*
    and     := not (AND not)*
    not     := NOT not | cmp
    cmp     := sum [ (= | == | != | <> | < | <= | > | >=) sum
                    | IS [NOT] NULL | [NOT] IN ( sum, ... ) | [NOT] BETWEEN sum AND sum
                    | [NOT] LIKE sum ]
    sum     := prod ((+ | - | '||') prod)*
    prod    := unary ((* | /) unary)*
    unary   := - unary | term
    term    := column | literal | ( expr ) | COALESCE ( expr, ... )
    column  := name (. name)*             name: identifier or `back-quoted identifier`
    literal := [-]number | 'text' | "text" | TRUE | FALSE | NULL | DATE 'text' | TIMESTAMP 'text'

Quoting follows Spark SQL: ``'x'`` and ``"x"`` are text, `` `x` `` is a column; inside text
``\\'``, ``''`` and the usual backslash escapes work.  Numbers read as Spark reads them: ``1``
an integer, ``1.5`` an exact decimal, ``1e3`` / ``1.5D`` a double, ``1L`` a long, ``1BD`` a
decimal.

A parsed :class:`Predicate` is bound to the table's schema (:mod:`lakesdk.read.bind`) before
it is evaluated: every literal is then a value of the type it is compared with, and the bound
tree renders to a pyarrow expression, a partition-pruning check and a Spark ``Column``.

>>> p = parse_where("fare > 20 AND city IN ('sf', 'nyc')")
>>> sorted(p.columns)
['city', 'fare']
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import re
from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

from lakesdk.exceptions import InvalidFilterError
from lakesdk.read.expr import Col, Lit, Node

if TYPE_CHECKING:
    import pyarrow as pa

    from lakesdk.read.bind import Bound

__all__ = ["Predicate", "parse_where", "parse_expression", "from_filters", "Col", "Lit", "Node"]


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:BD|bd|[LlSsYyDdFf])?(?![A-Za-z0-9_]))
    | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | `(?P<qid>(?:[^`]|``)+)`
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,|\.|-|\+|\*|/|\|\|)
    )""", re.VERBOSE | re.DOTALL)

_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "TRUE", "FALSE", "DATE", "TIMESTAMP", "LIKE"}
_FUNCTIONS = ("coalesce",)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def _unescape(body: str, quote: str) -> str:
    """A Spark SQL string literal's text: backslash escapes, a doubled quote is one quote."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2:i + 6]):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        if c == quote and body[i + 1:i + 2] == quote:
            out.append(quote)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _number(text: str) -> Lit:
    t = text.upper()
    if t.endswith("BD"):
        return Lit(_decimal.Decimal(t[:-2]), "decimal")
    if t[-1] in "DF":
        return Lit(float(t[:-1]), "double")
    if t[-1] in "LSY":
        return Lit(int(t[:-1]), "int")
    if "E" in t:
        return Lit(float(t), "double")
    if "." in t:
        return Lit(_decimal.Decimal(t), "decimal")
    n = int(t)
    return Lit(n, "int") if n < 2 ** 63 else Lit(_decimal.Decimal(n), "decimal")


def _tokenize(text: str) -> list[tuple[str, Any, int]]:
    pos = 0
    out: list[tuple[str, Any, int]] = []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InvalidFilterError(
                f"cannot parse the filter {text!r} at position {pos}: {text[pos:pos + 20]!r} is not a column, value "
                "or operator. Write text in quotes ('sf'), columns bare or in back quotes (`my col`)")
        start = m.start(m.lastindex or 0)
        pos = m.end()
        kind = cast(str, m.lastgroup)   # every alternative of _TOKEN is a named group
        val = m.group(kind)
        if kind == "id" and val.upper() in _KEYWORDS:
            out.append(("kw", val.upper(), start))
        elif kind == "qid":
            out.append(("id", val.replace("``", "`"), start))
        elif kind == "str":
            out.append(("str", _unescape(val[1:-1], val[0]), start))
        elif kind == "num":
            out.append(("num", _number(val), start))
        else:
            out.append((kind, val, start))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def fail(self, expected: str) -> InvalidFilterError:
        if self.i < len(self.toks):
            got = f"{self.toks[self.i][1]!r} at position {self.toks[self.i][2]}"
        else:
            got = "the end of the text"
        return InvalidFilterError(f"cannot parse the filter {self.text!r}: expected {expected}, found {got}. "
                                  "See docs/filters.md for the syntax (Spark SQL's WHERE)")

    def peek(self, kind: str | None = None, val: Any = None, ahead: int = 0) -> bool:
        if self.i + ahead >= len(self.toks):
            return False
        k, v, _ = self.toks[self.i + ahead]
        return (kind is None or k == kind) and (val is None or v == val)

    def take(self, kind: str | None = None, val: Any = None, expected: str | None = None) -> Any:
        if not self.peek(kind, val):
            raise self.fail(expected or repr(val) if val else expected or kind or "more")
        self.i += 1
        return self.toks[self.i - 1][1]

    def parse(self) -> Any:
        e = self.or_()
        if self.i != len(self.toks):
            raise self.fail("AND, OR or the end of the condition")
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
        left = self.sum()
        if self.peek("op") and self.toks[self.i][1] in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            op = self.take()
            op = {"==": "=", "<>": "!="}.get(op, op)
            return Node(op, (left, self.sum()))
        if self.peek("kw", "IS"):
            self.take()
            negate = bool(self.peek("kw", "NOT") and self.take())
            self.take("kw", "NULL", expected="NULL after IS / IS NOT")
            return Node("notnull" if negate else "isnull", (left,))
        negate = bool(self.peek("kw", "NOT") and self.take())
        n: Any
        if self.peek("kw", "IN"):
            self.take()
            self.take("op", "(", expected="'(' after IN")
            vals = [self.sum()]
            while self.peek("op", ","):
                self.take()
                vals.append(self.sum())
            self.take("op", ")", expected="',' or ')' closing the IN list")
            n = Node("in", (left, tuple(vals)))
        elif self.peek("kw", "BETWEEN"):
            self.take()
            lo = self.sum()
            self.take("kw", "AND", expected="AND in BETWEEN ... AND ...")
            n = Node("and", (Node(">=", (left, lo)), Node("<=", (left, self.sum()))))
        elif self.peek("kw", "LIKE"):
            self.take()
            n = Node("like", (left, self.sum()))
        elif negate:
            raise self.fail("IN, BETWEEN or LIKE after NOT")
        else:
            return left
        return Node("not", (n,)) if negate else n

    def sum(self) -> Any:
        e = self.prod()
        while self.peek("op") and self.toks[self.i][1] in ("+", "-", "||"):
            e = Node(self.take(), (e, self.prod()))
        return e

    def prod(self) -> Any:
        e = self.unary()
        while self.peek("op") and self.toks[self.i][1] in ("*", "/"):
            e = Node(self.take(), (e, self.unary()))
        return e

    def unary(self) -> Any:
        if self.peek("op", "-"):
            self.take()
            if self.peek("num"):
                lit = self.take()
                return Lit(-lit.value, lit.kind)
            return Node("neg", (self.unary(),))
        return self.term()

    def term(self) -> Any:
        if self.peek("op", "("):
            self.take()
            e = self.or_()
            self.take("op", ")", expected="')'")
            return e
        if self.peek("id") and self.peek("op", "(", ahead=1):
            name = self.toks[self.i][1]
            if name.lower() not in _FUNCTIONS:
                raise self.fail(f"a column, a value or one of the functions {', '.join(_FUNCTIONS)} "
                                f"({name}() is not one lakesdk evaluates)")
            self.take()
            self.take()
            args = [self.or_()]
            while self.peek("op", ","):
                self.take()
                args.append(self.or_())
            self.take("op", ")", expected="',' or ')' closing the arguments")
            return Node(name.lower(), tuple(args))
        if self.peek("num"):
            return self.take()
        if self.peek("str"):
            s = self.take()
            while self.peek("str"):   # Spark SQL: adjacent text literals are one literal
                s += self.take()
            return Lit(s, "string")
        if self.peek("id"):
            path = [self.take()]
            while self.peek("op", "."):
                self.take()
                path.append(self.take("id", expected="a field name after '.'"))
            return Col(tuple(path))
        if self.peek("kw"):
            kw = self.toks[self.i][1]
            if kw in ("TRUE", "FALSE"):
                self.take()
                return Lit(kw == "TRUE", "bool")
            if kw == "NULL":
                self.take()
                return Lit(None, "null")
            if kw in ("DATE", "TIMESTAMP"):
                self.take()
                if not self.peek("str"):   # a column named date / timestamp
                    return Col((self.toks[self.i - 1][1].lower(),))
                return Lit(self.take(), kw.lower())
        raise self.fail("a column, a value or '('")


def _columns(n: Any, out: set[str]) -> set[str]:
    if isinstance(n, Col):
        out.add(n.name)
    elif isinstance(n, Node):
        for a in n.args:
            if isinstance(a, tuple):
                for x in a:
                    _columns(x, out)
            else:
                _columns(a, out)
    return out


class Predicate:
    """A parsed row predicate (not yet bound to a schema)."""

    def __init__(self, tree: Any, text: str) -> None:
        self.tree = tree
        self.text = text

    def __repr__(self) -> str:
        return f"Predicate({self.text!r})"

    @property
    def columns(self) -> set[str]:
        """The columns (and ``a.b`` struct fields) the predicate names."""
        return _columns(self.tree, set())

    def bind(self, schema: "pa.Schema", time_zone: str | None = None) -> "Bound":
        """This predicate with every column resolved in ``schema`` and every literal cast to
        the type it is compared with (text read as a timestamp in ``time_zone``, Spark's
        session time zone, UTC by default).  Raises InvalidFilterError before anything is
        read when a column is unknown or two types cannot be compared."""
        from lakesdk.read.bind import bind
        return bind(self.tree, self.text, schema, time_zone or "UTC")

    def bind_value(self, schema: "pa.Schema", time_zone: str | None = None) -> "Bound":
        """This text as a value (not a condition) over ``schema``: a column, a literal, arithmetic
        (``+ - * /`` on numbers), ``||`` on text or ``coalesce(...)``.  Raises InvalidFilterError
        for what lakesdk does not evaluate as Spark SQL does."""
        from lakesdk.read.bind import bind
        return bind(self.tree, self.text, schema, time_zone or "UTC", value=True)

    def validate(self, names: Iterable[str]) -> None:
        names = list(names)
        missing = sorted(c for c in self.columns if c.split(".")[0] not in names)
        if missing:
            raise InvalidFilterError(
                f"the filter {self.text!r} names unknown column(s) {', '.join(map(repr, missing))}; "
                f"the table has: {', '.join(names)}", column=missing[0])

    def __and__(self, other: "Predicate") -> "Predicate":
        return Predicate(Node("and", (self.tree, other.tree)), f"({self.text}) AND ({other.text})")


def parse_where(text: str) -> Predicate:
    if not isinstance(text, str) or not text.strip():
        raise InvalidFilterError("the filter is empty; pass a SQL condition such as \"fare > 20\"")
    return Predicate(_Parser(text).parse(), text)


def parse_expression(text: str) -> Predicate:
    """A value expression (a merge's ``updates=`` / ``values=``): the same grammar as a filter,
    bound with :meth:`Predicate.bind_value` rather than as a condition."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidFilterError(f"the expression {text!r} is empty; pass a SQL expression such as \"s.fare\"")
    return Predicate(_Parser(text).parse(), text)


def _python_literal(value: Any) -> Lit:
    """A filter tuple's Python value as a literal."""
    if value is None:
        return Lit(None, "null")
    if isinstance(value, bool):
        return Lit(value, "bool")
    if isinstance(value, int):
        return Lit(value, "int") if -2 ** 63 <= value < 2 ** 63 else Lit(_decimal.Decimal(value), "decimal")
    if isinstance(value, float):
        return Lit(value, "double")
    if isinstance(value, _decimal.Decimal):
        return Lit(value, "decimal")
    if isinstance(value, str):
        return Lit(value, "string")
    if isinstance(value, _dt.datetime):
        return Lit(value, "timestamp")
    if isinstance(value, _dt.date):
        return Lit(value, "date")
    if hasattr(value, "to_pydatetime"):   # a pandas Timestamp
        return Lit(value.to_pydatetime(), "timestamp")
    if hasattr(value, "item"):            # a numpy scalar
        return _python_literal(value.item())
    raise InvalidFilterError(
        f"filter value {value!r} ({type(value).__name__}) is not a value lakesdk filters compare with; "
        "use None, bool, int, float, Decimal, str, date or datetime")


_TUPLE_OPS = ("=", "==", "!=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN", "LIKE", "NOT LIKE", "IS", "IS NOT")


def _tuple_node(f: Any) -> Any:
    if not (isinstance(f, (tuple, list)) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[1], str)):
        raise InvalidFilterError(f"filter {f!r} is not a (column, op, value) triple such as ('city', '=', 'sf')")
    col, op, val = f
    c = Col(tuple(col.split(".")) if "." in col and "`" not in col else (col.strip("`"),))
    op = " ".join(op.upper().split())
    if op not in _TUPLE_OPS:
        raise InvalidFilterError(f"filter operator {op!r} in {f!r} is not supported; use one of {', '.join(_TUPLE_OPS)}")
    if op in ("IN", "NOT IN"):
        if isinstance(val, (str, bytes)) or not hasattr(val, "__iter__"):
            raise InvalidFilterError(f"filter {f!r}: {op} takes a list of values, found {type(val).__name__}")
        n: Any = Node("in", (c, tuple(_python_literal(v) for v in val)))
    elif op in ("LIKE", "NOT LIKE"):
        n = Node("like", (c, _python_literal(val)))
    elif op in ("IS", "IS NOT"):
        if val is not None:
            raise InvalidFilterError(f"filter {f!r}: {op} takes None (IS NULL), found {val!r}")
        return Node("isnull" if op == "IS" else "notnull", (c,))
    else:
        return Node({"==": "=", "<>": "!="}.get(op, op), (c, _python_literal(val)))
    return Node("not", (n,)) if op.startswith("NOT") else n


def _tuple_text(f: Sequence[Any]) -> str:
    col, op, val = f
    if isinstance(val, (list, tuple, set, frozenset)):
        v = "(" + ", ".join(_python_literal(x).sql() for x in val) + ")"
    else:
        v = _python_literal(val).sql()
    return f"{col} {op.upper()} {v}"


def from_filters(filters: Sequence[Any]) -> Predicate:
    """DNF filter tuples, as pyarrow / deltalake take them, as a predicate:
    ``[(column, op, value), ...]`` is an AND of conditions; a list of such lists is an OR of
    them.  Builds the same tree as the equivalent ``where`` text."""
    if not filters:
        raise InvalidFilterError("filters is empty; pass [(column, op, value), ...]")
    groups = filters if all(isinstance(g, list) and g and isinstance(g[0], (tuple, list)) for g in filters) else [filters]
    tree: Any = None
    texts = []
    for g in groups:
        conj: Any = None
        for f in g:
            n = _tuple_node(f)
            conj = n if conj is None else Node("and", (conj, n))
        if conj is None:
            raise InvalidFilterError("filters holds an empty group; each group is [(column, op, value), ...]")
        tree = conj if tree is None else Node("or", (tree, conj))
        texts.append(" AND ".join(_tuple_text(f) for f in g))
    text = texts[0] if len(texts) == 1 else " OR ".join(f"({t})" for t in texts)
    return Predicate(tree, text)
