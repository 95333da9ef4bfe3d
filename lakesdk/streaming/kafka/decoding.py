"""Decoding a batch of Kafka record values into rows, and rows into an Arrow table.

A participant decodes the records it takes into a round in batches
(:func:`make_batch_decoder`), and its worker turns a round's rows into one Arrow table
(:func:`rows_to_arrow`).  A batch decodes exactly as the per-record decoder
(:func:`lakesdk.streaming.kafka.config.make_decoder`) does, record by record: the same
rows, the same Python types, and the same records refused with the same error.  JSON values
are parsed with ``orjson`` when it is installed (``pip install 'lakesdk[kafka]'``), about
five times as fast as the standard library; a value ``orjson`` refuses or might read
differently is decoded by the per-record decoder, which then decides:

* ``NaN`` and ``Infinity``, numbers beyond a double (``1e400``), UTF-16 or UTF-32 text,
  lone surrogates: the standard library takes them, ``orjson`` refuses them;
* integers beyond -2**63 .. 2**64-1: ``orjson`` reads them as floats, the standard library
  as integers (which Arrow then refuses, as it did before).  A batch whose values hold a
  run of 20 digits, or 19 after a minus sign, anywhere (in a string too) decodes those
  values with the standard library;
* values nested about a thousand levels deep: the standard library stops at Python's
  recursion limit, ``orjson`` at 1024 levels.  A value of 1,000 bytes or more with 500
  or more opening brackets is decoded with the standard library.

>>> from lakesdk.streaming.kafka.config import SinkConfig
>>> dec = make_batch_decoder(SinkConfig("t", "x", "b"))
>>> batch = dec([b'{"id": 1}', b'[1]', None, b'{"id": 2, "n": {"x": 18446744073709551616}}'])
>>> batch.rows
[{'id': 1}, {'id': 2, 'n': {'x': 18446744073709551616}}]
>>> [(i, str(e)) for i, e in batch.errors]
[(1, 'expected a JSON object, found list'), (2, 'a null value (tombstone) is not a row')]
>>> rows_to_arrow([{"id": 1}, {"id": 2, "v": "b"}]).to_pylist()
[{'id': 1, 'v': None}, {'id': 2, 'v': 'b'}]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from lakesdk.streaming.kafka.config import SinkConfig, make_decoder

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DecodedBatch", "BatchDecoder", "RoundRows", "make_batch_decoder", "batch_decoder_of", "rows_to_arrow",
           "arrow_json_table", "json_parser", "may_hold_wide_integers"]


@dataclass
class DecodedBatch:
    """The rows of the values that decoded, in order, and the others: (index in the batch,
    the per-record decoder's error).  ``table``: the same rows as one Arrow table instead (read
    by :func:`arrow_json_table`; ``rows`` is then empty)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[tuple[int, Exception]] = field(default_factory=list)
    table: pa.Table | None = None

    def __len__(self) -> int:
        return self.table.num_rows if self.table is not None else len(self.rows)


BatchDecoder = Callable[[Sequence[Any]], DecodedBatch]


def _orjson_loads() -> Callable[[bytes], Any] | None:
    try:
        import orjson
    except ImportError:
        return None
    loads: Callable[[bytes], Any] = orjson.loads
    return loads


def json_parser() -> str:
    """The module that parses JSON record values: ``"orjson"`` when installed, else ``"json"``."""
    return "json" if _orjson_loads() is None else "orjson"


# digits -> "0", "-" stays, anything else -> " ": the integer literals orjson reads as floats
# (beyond -2**63 .. 2**64-1) show as 20 zeros, or a minus and 19 zeros
_DIGITS = bytes(48 if 48 <= b <= 57 else 45 if b == 45 else 32 for b in range(256))
_LONG = b"0" * 20
_NEGATIVE = b"-" + b"0" * 19
_DEEP_BYTES, _DEEP_BRACKETS = 1000, 500


def may_hold_wide_integers(data: bytes) -> bool:
    """True when ``data`` has a run of 20 digits, or a minus sign and 19 digits: it may hold an
    integer that ``orjson`` reads as a float.

    >>> may_hold_wide_integers(b'{"a": 9223372036854775807, "b": -922337203685477580}')
    False
    >>> may_hold_wide_integers(b'{"a": -9223372036854775809}')
    True
    """
    t = data.translate(_DIGITS)
    return _LONG in t or _NEGATIVE in t


def batch_decoder_of(decode: Callable[[Any], dict[str, Any]]) -> BatchDecoder:
    """A batch decoder that calls ``decode`` on each value."""
    def decode_each(values: Sequence[Any]) -> DecodedBatch:
        out = DecodedBatch()
        for i, v in enumerate(values):
            try:
                out.rows.append(decode(v))
            except Exception as e:  # noqa: BLE001 - an error record, counted by the caller
                out.errors.append((i, e))
        return out
    return decode_each


# Arrow's JSON reader, where it reads exactly as the per-record decoder and rows_to_arrow do.  One
# translation of the batch's bytes marks what rules it out: a control byte other than the newline that
# separates the values ("!": raw in a string the standard library refuses it, Arrow takes it), and the
# digits, dots and minus signs that show an integer of 16 digits or more (which may lie beyond what a
# double holds exactly, where Arrow reads a double and from_pylist refuses, or beyond 64 bits)
_SCAN = bytes(48 if 48 <= b <= 57 else b if b in (45, 46, 10) else 33 if b < 32 else 32 for b in range(256))
_WIDE_AFTER = (b" " + b"0" * 16, b"-" + b"0" * 16)
_PLAIN = {"null", "bool", "int64", "double", "string"}
_MAX_DEPTH = 64


def _conformed(t: pa.DataType, depth: int = 0) -> pa.DataType | None:
    """``t`` with Arrow's timestamps (inferred from text) as strings, or None where the type is not
    one ``pa.array`` infers from JSON values."""
    import pyarrow as pa
    if depth > _MAX_DEPTH:
        return None
    if pa.types.is_timestamp(t):
        return pa.string()
    if str(t) in _PLAIN:
        return t
    if pa.types.is_list(t):
        v = _conformed(t.value_type, depth + 1)
        return None if v is None else pa.list_(v)
    if pa.types.is_struct(t):
        fields = []
        for f in t:
            ft = _conformed(f.type, depth + 1)
            if ft is None:
                return None
            fields.append(pa.field(f.name, ft))
        return pa.struct(fields)
    return None


def arrow_json_table(values: Sequence[Any]) -> pa.Table | None:
    """The record values as one Arrow table read by Arrow's JSON reader (multithreaded, no Python
    object per value), or None where it might not be exactly what :func:`rows_to_arrow` gives for
    the rows the per-record decoder decodes (then the caller decodes record by record).

    It reads a batch only when every value is a UTF-8 JSON object on one line, that starts with
    ``{``, with no control byte, no ``\\ud800``-``\\udfff`` escape and no integer of 16 digits or
    more, and only when Arrow reads one row per value without an error (a repeated key, two
    objects in one value, ``1e400``: the per-record decoder decides).  Strings Arrow reads as
    timestamps are read again as the strings they are.

    >>> arrow_json_table([b'{"id": 1, "at": "2020-01-01"}', b'{"id": 2.5}']).to_pylist()
    [{'id': 1.0, 'at': '2020-01-01'}, {'id': 2.5, 'at': None}]
    >>> arrow_json_table([b'{"id": 1, "id": 2}']) is None
    True
    """
    import io

    import pyarrow as pa
    import pyarrow.json as pj
    n = len(values)
    if not n:
        return None
    try:
        buf = b"\n".join(values)
    except TypeError:   # a tombstone, or a value that is not bytes
        return None
    if buf[:1] != b"{" or buf.count(b"\n") != n - 1 or buf.count(b"\n{") != n - 1:
        return None
    scan = buf.translate(_SCAN)
    if b"!" in scan or any(w in scan for w in _WIDE_AFTER):
        return None
    if b"\\u" in buf:
        import re
        if re.search(rb"\\u[dD][89a-fA-F]", buf):
            return None
    if len(buf) >= 1 << 30:
        return None
    # one block, read by this thread: pyarrow (26) crashes the process where a column's values
    # change type (a number, then an object) from one block to the next, instead of failing
    opts = pj.ReadOptions(use_threads=False, block_size=len(buf) + 1)
    try:
        t = pj.read_json(io.BytesIO(buf), read_options=opts)
        if t.num_rows != n:
            return None
        want = _conformed(pa.struct(list(t.schema)))
        if want is None:
            return None
        if want != pa.struct(list(t.schema)):
            schema = pa.schema(list(want))
            t = pj.read_json(io.BytesIO(buf), read_options=opts, parse_options=pj.ParseOptions(explicit_schema=schema))
            if t.num_rows != n or t.schema != schema:
                return None
        # the reader takes text that is not UTF-8 (a surrogate written in UTF-8) and, in pyarrow 26,
        # builds a list of nulls with too few values: a table that is not valid is not taken
        t.validate(full=True)
    except (pa.ArrowException, ValueError):
        return None
    return t


def _unified(schemas: list[pa.Schema]) -> pa.Schema | None:
    """The schema ``pa.array`` infers for the rows of tables with these schemas together: a null
    type gives way to any, an integer to a double, structs take each other's fields in the order
    they first appear; None where it would refuse (other types meet)."""
    import pyarrow as pa

    def merge(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
        if a == b or pa.types.is_null(b):
            return a
        if pa.types.is_null(a):
            return b
        if {str(a), str(b)} == {"int64", "double"}:
            return pa.float64()
        if pa.types.is_list(a) and pa.types.is_list(b):
            v = merge(a.value_type, b.value_type)
            return None if v is None else pa.list_(v)
        if pa.types.is_struct(a) and pa.types.is_struct(b):
            fields = merge_fields(list(a), list(b))
            return None if fields is None else pa.struct(fields)
        return None

    def merge_fields(a: list[pa.Field], b: list[pa.Field]) -> list[pa.Field] | None:
        out = {f.name: f.type for f in a}
        for f in b:
            t = merge(out[f.name], f.type) if f.name in out else f.type
            if t is None:
                return None
            out[f.name] = t
        return [pa.field(k, v) for k, v in out.items()]

    fields: list[pa.Field] | None = list(schemas[0])
    for s in schemas[1:]:
        fields = merge_fields(fields, list(s)) if fields is not None else None
    return None if fields is None else pa.schema(fields)


class RoundRows:
    """A round's decoded rows as they were decoded: Arrow tables (:func:`arrow_json_table`) and
    lists of row dicts.  :meth:`to_arrow` gives the table :func:`rows_to_arrow` gives for all of
    them as dicts; iterating gives the dicts."""

    __slots__ = ("pieces", "_len")

    def __init__(self, pieces: Sequence[pa.Table | list[dict[str, Any]]] = ()) -> None:
        self.pieces: list[pa.Table | list[dict[str, Any]]] = [p for p in pieces if len(p)]
        self._len = sum(len(p) for p in self.pieces)

    @classmethod
    def concat(cls, rounds: Sequence[RoundRows]) -> RoundRows:
        return cls([p for r in rounds for p in r.pieces])

    def add(self, batch: DecodedBatch) -> None:
        piece = batch.table if batch.table is not None else batch.rows
        if len(piece):
            self.pieces.append(piece)
            self._len += len(piece)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for p in self.pieces:
            yield from (p if isinstance(p, list) else p.to_pylist())

    def to_arrow(self, schema: pa.Schema | None = None) -> pa.Table:
        """One Arrow table of the rows: ``rows_to_arrow(list(self), schema)``, without a Python
        object per row where every piece is an Arrow table."""
        import pyarrow as pa
        tables = [p for p in self.pieces if not isinstance(p, list)]
        if schema is None and tables and len(tables) == len(self.pieces):
            if len(tables) == 1:
                return tables[0]
            first = tables[0].schema
            out = None
            if all(t.schema == first for t in tables):
                out = pa.concat_tables(tables)
            else:
                want = _unified([t.schema for t in tables])
                if want is not None:
                    # the Arrow pieces hold integers below 10**15 only: a double holds them exactly
                    out = pa.concat_tables(tables, promote_options="permissive")
                    out = out if out.schema == want else None
            if out is not None and out.num_rows == self._len:   # tables of no column lose their rows
                return out
        return rows_to_arrow(list(self), schema)


def make_batch_decoder(cfg: SinkConfig, *, loads: Callable[[bytes], Any] | None = None,
                       arrow: bool = True) -> BatchDecoder:
    """A function from a list of record values to a :class:`DecodedBatch`, equal to calling
    :func:`~lakesdk.streaming.kafka.config.make_decoder` on each value.

    ``arrow`` (JSON): read a batch with Arrow's JSON reader where it reads exactly the same
    (:func:`arrow_json_table`); ``loads``: the fast JSON parser for the others (default:
    ``orjson.loads`` when installed); without one, or for Avro, each value goes through the
    per-record decoder."""
    one = make_decoder(cfg)
    fast = loads if loads is not None else (_orjson_loads() if cfg.format == "json" else None)
    by_arrow = arrow and cfg.format == "json"
    if fast is None and not by_arrow:
        return batch_decoder_of(one)
    each = batch_decoder_of(one)

    def decode_json(values: Sequence[Any]) -> DecodedBatch:
        if by_arrow:
            table = arrow_json_table(values)
            if table is not None:
                return DecodedBatch(table=table)
        if fast is None:
            return each(values)
        out = DecodedBatch()
        rows, errors = out.rows, out.errors
        try:
            careful = may_hold_wide_integers(b"\n".join(values))
        except TypeError:      # a tombstone (None) or a value that is not bytes
            careful = True
        for i, v in enumerate(values):
            if (not careful or (type(v) is bytes and not may_hold_wide_integers(v))) and \
                    (len(v) < _DEEP_BYTES or v.count(b"{") + v.count(b"[") < _DEEP_BRACKETS):
                try:
                    row = fast(v)
                except Exception:  # noqa: BLE001 - the per-record decoder decides below
                    row = None
                if type(row) is dict:
                    rows.append(row)
                    continue
            try:
                rows.append(one(v))
            except Exception as e:  # noqa: BLE001 - an error record, counted by the caller
                errors.append((i, e))
        return out
    return decode_json


def rows_to_arrow(rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """One Arrow table of decoded rows: with ``schema`` (Avro) as ``pa.Table.from_pylist`` builds
    it; without, with a column for every key of any row, in the order the keys first appear
    (the types are inferred over all rows, as ``from_pylist`` infers them)."""
    import pyarrow as pa
    if schema is not None:
        return pa.Table.from_pylist(rows, schema=schema)
    if not rows:
        return pa.table({})
    return pa.Table.from_struct_array(pa.array(rows))
