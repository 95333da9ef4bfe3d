"""Values computed in a predicate or a merge expression: ``+ - * /`` (and ``-x``), ``||`` and
``coalesce(...)``, typed as Spark SQL types them and rendered to pyarrow as Spark SQL's ANSI
mode computes them (:mod:`lakesdk.read.bind` binds the rest of the tree).  What lakesdk does
not evaluate as Spark does raises InvalidFilterError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import InvalidFilterError
from lakesdk.format.schema import type_family
from lakesdk.read.expr import Lit

__all__ = ["BCall", "BLit", "arith", "typed", "arrow_call", "family", "ARITH"]


family = type_family      # the name this module and the binder use


@dataclass(frozen=True)
class BLit:
    value: Any
    type: pa.DataType


@dataclass(frozen=True)
class BCall:
    """A typed value computed from others: ``+ - * /`` (``neg``), ``||``, ``coalesce``; its
    operands are already of ``type`` (the type Spark SQL gives the result)."""

    op: str
    args: tuple
    type: pa.DataType
    text: str = "an expression"

    @property
    def name(self) -> str:
        return self.text


ARITH = ("+", "-", "*", "/", "neg", "||", "coalesce")
INT32 = 2 ** 31


def type_of(x: Any) -> pa.DataType:
    return x.type if hasattr(x, "type") else pa.bool_()


def unsupported(self: Any, what: str) -> InvalidFilterError:
    return InvalidFilterError(
        f"the expression {self.text!r} cannot be evaluated by lakesdk: {what}; lakesdk evaluates column "
        "references, literals, + - * / on integer and floating-point numbers, || on text and coalesce() "
        "of values of one kind. Run it on Spark (TableOptions(engine='spark')) or rewrite it. "
        "See docs/filters.md")


def typed(self: Any, x: Any, other_type: pa.DataType | None = None) -> Any:
    """An operand of arithmetic as a typed value: a literal gets Spark SQL's type for it
    (an integer fits int, else bigint; ``1.5`` a decimal, as a double beside a floating-point value)."""
    if not isinstance(x, Lit):
        return x
    if x.kind == "int":
        return BLit(x.value, pa.int32() if -INT32 <= x.value < INT32 else pa.int64())
    if x.kind == "decimal" and other_type is not None and family(other_type) == "float":
        return BLit(float(x.value), pa.float64())
    if x.kind == "null":
        return BLit(None, other_type if other_type is not None else pa.null())
    return self.literal(x)

def arith(self: Any, n: Any) -> BCall:
    op, a = n.op, n.args
    if op == "neg":
        x = typed(self, self.value(a[0]))
        if family(type_of(x)) not in ("int", "float"):
            raise unsupported(self, f"-x of {self.describe(x)}")
        return BCall("neg", (x,), type_of(x), self.text)
    if op == "coalesce":
        vals = [self.value(v) for v in a]
        known = [type_of(v) for v in vals if not isinstance(v, Lit)]
        ref = known[0] if known else None
        vals = [typed(self, v, ref) for v in vals]
        t = common(self, [type_of(v) for v in vals], "coalesce()")
        return BCall("coalesce", tuple(vals), t, self.text)
    x0, y0 = self.value(a[0]), self.value(a[1])
    x = typed(self, x0, None if isinstance(y0, Lit) else type_of(y0))
    y = typed(self, y0, None if isinstance(x0, Lit) else type_of(x0))
    tx, ty = type_of(x), type_of(y)
    if op == "||":
        if {family(tx), family(ty)} - {"string", "null"}:
            raise unsupported(self, f"|| of {self.describe(x)} and {self.describe(y)} (text only)")
        return BCall("||", (x, y), pa.string(), self.text)
    for v in (x, y):
        if family(type_of(v)) not in ("int", "float", "null"):
            raise unsupported(self, f"{op} on {self.describe(v)} (integer and floating-point numbers only)")
    t = pa.float64() if op == "/" else common(self, [tx, ty], op)
    if pa.types.is_null(t):
        raise unsupported(self, f"{op} of two NULLs")
    return BCall(op, (x, y), t, self.text)

def common(self: Any, types: list[pa.DataType], what: str) -> pa.DataType:
    """The type Spark SQL widens ``types`` to, where lakesdk widens the same way."""
    real = [t for t in types if not pa.types.is_null(t)]
    if not real:
        return pa.null()
    fams = {family(t) for t in real}
    if len({str(t) for t in real}) == 1 and fams <= {"int", "float", "string", "bool", "date"}:
        return real[0]
    if fams <= {"int"}:
        return max(real, key=lambda t: t.bit_width)
    if fams <= {"int", "float"}:   # Spark: float beside an integer is float, beside a double double
        return pa.float64() if any(pa.types.is_float64(t) for t in real) else pa.float32()
    raise unsupported(self, f"{what} of values of types {', '.join(map(str, types))}")



def arrow_call(n: BCall, render: Callable[[Any], pc.Expression]) -> pc.Expression:
    """Arithmetic as Spark SQL (ANSI mode) computes it: an overflow or a division by zero is
    an error (pyarrow's checked kernels), NULL in gives NULL out."""
    op, t = n.op, n.type
    args = [render(x) if pa.types.is_null(type_of(x)) or type_of(x) == t or op == "||"
            else render(x).cast(t) for x in n.args]
    if op == "neg":
        return pc.negate_checked(args[0])
    if op == "coalesce":
        return pc.coalesce(*[a if not pa.types.is_null(type_of(x)) else a.cast(t)
                             for a, x in zip(args, n.args)]) if not pa.types.is_null(t) else args[0]
    if op == "||":
        return pc.binary_join_element_wise(*[a.cast(pa.string()) for a in args], "")
    fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked, "/": pc.divide_checked}[op]
    return fn(*[a.cast(t) for a in args])
