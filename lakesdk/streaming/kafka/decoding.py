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
from typing import TYPE_CHECKING, Any, Callable, Sequence

from lakesdk.streaming.kafka.config import SinkConfig, make_decoder

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DecodedBatch", "BatchDecoder", "make_batch_decoder", "batch_decoder_of", "rows_to_arrow",
           "json_parser", "may_hold_wide_integers"]


@dataclass
class DecodedBatch:
    """The rows of the values that decoded, in order, and the others: (index in the batch,
    the per-record decoder's error)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[tuple[int, Exception]] = field(default_factory=list)


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


def make_batch_decoder(cfg: SinkConfig, *, loads: Callable[[bytes], Any] | None = None) -> BatchDecoder:
    """A function from a list of record values to a :class:`DecodedBatch`, equal to calling
    :func:`~lakesdk.streaming.kafka.config.make_decoder` on each value.

    ``loads``: the fast JSON parser (default: ``orjson.loads`` when installed); without one, or
    for Avro, each value goes through the per-record decoder."""
    one = make_decoder(cfg)
    fast = loads if loads is not None else (_orjson_loads() if cfg.format == "json" else None)
    if fast is None:
        return batch_decoder_of(one)

    def decode_json(values: Sequence[Any]) -> DecodedBatch:
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
