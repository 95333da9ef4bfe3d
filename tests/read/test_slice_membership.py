"""The integer membership test the merge-on-read read splits base rows with: the same answer as
``pyarrow.compute.is_in`` for every integer type, chunking and range."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.engine.slice_reader import is_in

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@st.composite
def cases(draw):
    t = draw(st.sampled_from(TYPES))
    lo, hi = (-(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1) if pa.types.is_signed_integer(t) \
        else (0, 2 ** t.bit_width - 1)
    # dense values near a random centre (the lookup-table path) or anywhere (extremes, overflow)
    centre = draw(st.integers(lo, hi))
    near = st.integers(max(lo, centre - 300), min(hi, centre + 300))
    anywhere = st.integers(lo, hi)
    value = st.one_of(near, anywhere) if draw(st.booleans()) else near
    chunks = draw(st.lists(st.lists(value, max_size=60), min_size=1, max_size=3))
    keys = draw(st.lists(st.one_of(value, st.just(lo), st.just(hi)), max_size=40))
    return t, chunks, keys


@settings(max_examples=300, deadline=None)
@given(cases(), st.booleans())
def test_is_in_answers_as_arrow_does(case, chunked):
    t, chunks, keys = case
    values = pa.chunked_array([pa.array(c, t) for c in chunks], t) if chunked else \
        pa.array([v for c in chunks for v in c], t)
    key_array = pc.unique(pa.array(keys, t))
    got = is_in(values, key_array)
    want = pc.is_in(values, value_set=key_array)
    assert type(got) is type(want)
    assert got.to_pylist() == want.to_pylist()


def test_is_in_with_nulls_and_other_types_falls_back():
    values = pa.array([1, None, 3], pa.int64())
    assert is_in(values, pa.array([3, 1], pa.int64())).to_pylist() == [True, False, True]
    assert is_in(pa.array(["a", "b"]), pa.array(["b"])).to_pylist() == [False, True]
    assert is_in(pa.array([1, 2], pa.int32()), pa.array([2], pa.int64())).to_pylist() == [False, True]
