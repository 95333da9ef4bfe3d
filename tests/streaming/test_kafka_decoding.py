"""The Kafka sink's batch decoder decodes as the per-record decoder does, record by record.

The reference is :func:`lakesdk.streaming.kafka.config.make_decoder` called on each value (the
standard library's ``json.loads``); the batch decoder is run with ``orjson`` (when installed)
and without it.  Generated batches mix JSON objects of every JSON type (nested objects and
lists, nulls, integers beyond 64 bits, floats with NaN and infinities, strings with any
character, lone surrogates among them), written in several ways (ASCII or UTF-8, indented over
several lines, UTF-16), with values that are not rows (tombstones, arrays, numbers, truncated
text, random bytes).  Both give the same rows with the same Python types, the same records
refused with the same error, and the same Arrow table.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesdk.streaming.kafka.config import SinkConfig, make_decoder
from lakesdk.streaming.kafka.decoding import make_batch_decoder, may_hold_wide_integers, rows_to_arrow

CFG = SinkConfig("t", "topic", "127.0.0.1:1")


def _orjson_loads():
    return pytest.importorskip("orjson").loads


PARSERS = {"orjson": _orjson_loads, "json": lambda: None}


def same(a, b) -> bool:
    """Equal with equal types all the way down; NaN equals NaN, -0.0 differs from 0.0 (iterative:
    values nest hundreds of levels deep)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, float):
            if not ((math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))):
                return False
        elif isinstance(x, dict):
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


def reference(values):
    one = make_decoder(CFG)
    rows, errors = [], []
    for i, v in enumerate(values):
        try:
            rows.append(one(v))
        except Exception as e:  # noqa: BLE001
            errors.append((i, type(e), str(e)))
    return rows, errors


def arrow_or_error(rows):
    try:
        t = rows_to_arrow(rows)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return t.schema, t.to_pylist()


def assert_decodes_like_the_reference(values, loads):
    rows, errors = reference(values)
    got = make_batch_decoder(CFG, loads=loads)(values)
    if got.table is not None:
        # Arrow's JSON reader took the batch: only where every value is a row, into the very table
        # the rows give
        assert not errors and len(got) == len(rows) == len(values)
        theirs = arrow_or_error(rows)
        assert isinstance(theirs, tuple), (values, theirs)
        assert got.table.schema == theirs[0] and same(got.table.to_pylist(), theirs[1]), (values, got.table, theirs)
        return
    assert [(i, type(e), str(e)) for i, e in got.errors] == errors
    assert len(got.rows) == len(rows) and all(same(a, b) for a, b in zip(got.rows, rows)), (got.rows, rows)
    ours, theirs = arrow_or_error(got.rows), arrow_or_error(rows)
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and ours[0] == theirs[0] and same(ours[1], theirs[1])
    else:
        assert ours is theirs


# -- generated values --------------------------------------------------------------------------------
WIDE = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1, 10**19, -10**19, 10**30, -(10**30)]
integers = st.one_of(st.integers(-2**63, 2**64 - 1), st.integers(), st.sampled_from(WIDE), st.integers(-10, 10))
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.one_of(st.text(max_size=12), st.text(st.characters(codec=None, categories=None), max_size=6),
                  st.sampled_from(["2020-01-01", "2020-01-01 00:00:00", "1234567890123456789012", "\ud800", "é\n\"\\"]))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(texts, inner, max_size=4)), max_leaves=12)
# objects whose fields repeat across rows (so that columns meet values of several types)
objects = st.dictionaries(st.one_of(st.sampled_from(["id", "v", "n", "s"]), texts), json_values, max_size=5)


@st.composite
def encoded(draw, value):
    """``value`` as a record value, written as a producer might."""
    how = draw(st.sampled_from(["compact", "ascii", "utf8", "indent", "utf16", "bom", "str"]))
    if how == "compact":
        return json.dumps(value, separators=(",", ":")).encode()
    if how == "ascii":
        return json.dumps(value).encode()
    if how == "utf8":
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if how == "indent":
        return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if how == "utf16":
        return json.dumps(value).encode("utf-16")
    if how == "bom":
        return b"\xef\xbb\xbf" + json.dumps(value).encode()
    return json.dumps(value)


not_rows = st.one_of(st.none(), st.binary(max_size=20), json_values.flatmap(encoded),
                     objects.map(lambda o: json.dumps(o).encode()[:-1]),          # truncated
                     objects.map(lambda o: json.dumps(o).encode() + b" x"),       # trailing text
                     st.sampled_from([b"", b"  ", b"null", b"[]", b"3", b'"s"', b"{}{}", b'{"a":1}\n{"a":2}']))
record_values = st.one_of(objects.flatmap(encoded), objects.flatmap(encoded), not_rows)


@pytest.mark.parametrize("parser", sorted(PARSERS))
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(record_values, max_size=12))
def test_batch_decoder_equals_the_per_record_decoder(parser, values):
    assert_decodes_like_the_reference(values, PARSERS[parser]())


@pytest.mark.parametrize("parser", sorted(PARSERS))
@settings(max_examples=200, deadline=None, database=None)
@given(rows=st.lists(st.fixed_dictionaries({"id": st.integers(0, 10**6), "v": json_values}), min_size=1, max_size=8))
def test_one_key_set_gives_the_table_from_pylist_gave(parser, rows):
    """Rows that all carry the first row's keys (the usual stream) give the Arrow table
    ``pa.Table.from_pylist`` gave before, column types included, and fail where it failed (values
    of two types in one column, a lone surrogate: the round's write fails, as before; the two may
    meet a different one of its faults first)."""
    values = [json.dumps(r).encode() for r in rows]
    got = make_batch_decoder(CFG, loads=PARSERS[parser]())(values)
    assert not got.errors
    try:
        before = pa.Table.from_pylist(reference(values)[0])
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        assert got.table is None
        with pytest.raises((pa.ArrowException, ValueError, TypeError, OverflowError)):
            rows_to_arrow(got.rows)
        return
    now = got.table if got.table is not None else rows_to_arrow(got.rows)
    assert now.schema == before.schema and same(now.to_pylist(), before.to_pylist())


# -- named cases -----------------------------------------------------------------------------------------
EDGES = [
    b'{"a":NaN}', b'{"a":Infinity,"b":-Infinity}', b'{"a":1e400}', b'{"a":1.7976931348623159e308}', b'{"a":-0}',
    b'{"a":-0.0}', b'{"a":0.1000000000000000055511151231257827021181583404541015625}', b'{"a":5e-324}',
    b'{"a":18446744073709551615}', b'{"a":18446744073709551616}', b'{"a":-9223372036854775808}',
    b'{"a":-9223372036854775809}', b'{"a":' + b"1" * 30 + b"}", b'{"a":' + b"9" * 5000 + b"}",
    b'{"a":"\\ud800"}', b'{"a":"\\udc00\\ud800"}', b'{"a":"\\ud83d\\ude00"}', b'{"a":"\xed\xa0\x80"}',
    b'{"a":"\xf4\x90\x80\x80"}', b'{"a":"\xff"}', b'\xef\xbb\xbf{"a":1}', '{"a":1}'.encode("utf-16"),
    '{"a":1}'.encode("utf-32"), b'{"a":"x\x01y"}', b'{"a":1,}', b'{"a":1,"a":2}', b'{"a":01}', b'{"a":1}\x00',
    b'  {"a":1}\r\n', b'{"a":{"b":[1,null,{"c":true}]}}', b'{"a":"2020-01-01 00:00:00"}', b"null", b"[1]", b"1",
    b'"s"', b"", None, b'{"a":' * 600 + b"1" + b"}" * 600, b'{"a":' * 2000 + b"1" + b"}" * 2000,
    b"[" * 520 + b"]" * 520, b'{"a":' * 1000 + b"1" + b"}" * 1000, b"[" * 1010 + b"]" * 1010, b'{"k":"' + b"7" * 25 + b'"}', b'{"id":1}',
]


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_named_edge_cases_each_alone_and_together(parser):
    loads = PARSERS[parser]()
    for v in EDGES:
        assert_decodes_like_the_reference([v], loads)
    assert_decodes_like_the_reference(EDGES, loads)


def test_wide_integer_scan():
    assert not may_hold_wide_integers(b'{"a":9999999999999999999,"b":-922337203685477580,"c":"1.5e-300"}')
    assert may_hold_wide_integers(b'{"a":18446744073709551615}')      # 20 digits (orjson reads this one right)
    assert may_hold_wide_integers(b'{"a":-9223372036854775809}')      # a minus and 19 digits
    assert may_hold_wide_integers(b'{"s":"00000000000000000000"}')    # in a string too: decoded carefully


def test_avro_batches_decode_record_by_record():
    import io

    import fastavro
    schema = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}]}
    parsed = fastavro.parse_schema(schema)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"id": 7})
    cfg = SinkConfig("t", "x", "b", format="avro", avro_schema=schema)
    got = make_batch_decoder(cfg)([buf.getvalue(), None])
    assert got.rows == [{"id": 7}] and [i for i, _ in got.errors] == [1] and got.table is None


# -- Arrow's JSON reader and a round's pieces ----------------------------------------------------------
# rows as producers usually write them (one line each), so that Arrow's reader takes most batches; the
# values repeat a few field names and types so that columns meet ints and floats, nulls, nested
# objects with other fields, timestamps written as text, and lists of nulls
ARROW_TEXTS = st.sampled_from(["a", "2020-01-01", "2020-01-01 00:00:00", "2020-01-01T00:00:00Z", "é", "\\u00e9", 'x"y\\z',
                               "1234567890123456", "\U0001f600"])
arrow_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**15 + 1, 10**15 - 1),
                          st.sampled_from([2**53, 2**53 + 1, 10**16, -(10**16), 2**63, 0.5, -0.0, 1e300, 5e-324]),
                          st.floats(allow_nan=False, allow_infinity=False), ARROW_TEXTS)
arrow_values = st.recursive(arrow_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)), max_leaves=6)
arrow_rows = st.dictionaries(st.sampled_from(["id", "v", "w", "n", "s"]), arrow_values, max_size=4)
one_line = st.one_of(arrow_rows.map(lambda r: json.dumps(r, separators=(",", ":")).encode()),
                     arrow_rows.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
                     st.sampled_from([b'{"v":[null,null]}', b'{"v":1,"v":2}', b'{"v":1e400}', b'{"v":"a\tb"}',
                                      b'{"v":"\\ud800"}', b'{"v":"\xed\xa0\x80"}', b'{} {}', b'{"v":NaN}']))


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(one_line, min_size=1, max_size=40))
def test_arrow_reads_a_batch_only_into_the_table_its_rows_give(values):
    """:func:`arrow_json_table` returns a table only where every value is a row and the table is
    the one the per-record decoder's rows give (``rows_to_arrow``), column types included;
    otherwise None, and the batch is decoded record by record."""
    from lakesdk.streaming.kafka.decoding import arrow_json_table
    got = arrow_json_table(values)
    if got is None:
        return
    rows, errors = reference(values)
    assert not errors
    theirs = arrow_or_error(rows)
    assert isinstance(theirs, tuple), (values, theirs)
    assert got.schema == theirs[0] and same(got.to_pylist(), theirs[1]), (values, got, theirs)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(st.one_of(one_line, one_line, record_values), min_size=1, max_size=8),
                        min_size=1, max_size=5))
def test_a_rounds_pieces_give_the_table_all_its_rows_give(batches):
    """A round decoded in batches (some read by Arrow, some record by record) gives, in one table,
    what ``rows_to_arrow`` gives for all its rows in order, or fails where that fails."""
    from lakesdk.streaming.kafka.decoding import RoundRows
    dec = make_batch_decoder(CFG)
    rr = RoundRows()
    for b in batches:
        rr.add(dec(b))
    rows = [r for b in batches for r in reference(b)[0]]
    assert len(rr) == len(rows)
    theirs = arrow_or_error(rows)
    try:
        ours = rr.to_arrow()
    except Exception as e:  # noqa: BLE001
        assert not isinstance(theirs, tuple), (batches, e)
        return
    assert isinstance(theirs, tuple), (batches, ours)
    assert ours.schema == theirs[0] and same(ours.to_pylist(), theirs[1])


def test_arrow_takes_the_usual_stream():
    """The usual records (one line each, the same fields) are read by Arrow, in one piece a batch."""
    dec = make_batch_decoder(CFG)
    values = [json.dumps({"id": i, "ts": i, "part": f"p{i % 4}", "amount": i * 0.5, "at": "2020-01-01"}).encode()
              for i in range(1000)]
    got = dec(values)
    assert got.table is not None and got.table.num_rows == 1000 and not got.rows
    assert got.table.schema.field("at").type == pa.string()
