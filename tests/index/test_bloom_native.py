"""The C part of the bloom filters (``lakesdk.format._bloom_native``) against numpy's: the same
positions, the same filter bytes, the same answers, for generated keys (any length and
character), rows, filter shapes and subsets of keys, on filters built and read from footers."""

from __future__ import annotations

import shutil
import sysconfig

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesdk.format import bloom as B
from lakesdk.format import bloom_builder as BB
from lakesdk.format import bloom_hash as BH

NATIVE = BH.native
needs_native = pytest.mark.skipif(NATIVE is None, reason="lakesdk's C part is not built here")

keys_st = st.lists(st.one_of(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=300),
                             st.integers(0, 10**12).map(str)), min_size=1, max_size=300, unique=True)
shape_st = st.tuples(st.integers(1, 5000), st.integers(1, 40))   # (vector size, hashes)


def _numpy(monkeypatch):
    monkeypatch.setattr(BH, "native", None)


def test_the_c_part_is_built_where_a_compiler_is():
    """``make setup`` (an editable install) builds it where a C compiler is: the suite then runs
    both parts, and the benchmarks the C one."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): lakesdk hashes with numpy")
    assert NATIVE is not None


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=keys_st, shape=shape_st)
def test_positions_are_numpys(monkeypatch, keys, shape):
    vs, nb = shape
    arr = pa.array(keys, pa.string())
    got = BH.key_positions(arr, vs, nb)
    with monkeypatch.context() as m:
        _numpy(m)
        want = BH.key_positions(arr, vs, nb)
    assert got.dtype == want.dtype and np.array_equal(got, want)


# keys of one length (ids of as many digits, uuids): the C part hashes their common blocks a block
# at a time across the keys (vectorized); some longer keys among them take the per-key loop after
same_length_st = st.integers(1, 70).flatmap(lambda n: st.lists(
    st.text(st.characters(max_codepoint=0x2FF, exclude_categories=("Cs",)), min_size=n, max_size=n),
    min_size=1, max_size=600, unique=True))
longer_st = st.lists(st.text(min_size=1, max_size=90), max_size=3)
# Java's vector sizes reach 2^31 - 1: the remainder by multiplication holds over the whole range
large_shape_st = st.tuples(st.one_of(st.integers(1, 5000), st.integers(2**20, 2**31 - 1),
                                     st.sampled_from([2**31 - 1, 2**30, 2**30 - 1, 2587966, 3, 7])),
                           st.integers(1, 40))


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=same_length_st, longer=longer_st, shape=large_shape_st, data=st.data())
def test_positions_of_keys_of_one_length_are_numpys(monkeypatch, keys, longer, shape, data):
    vs, nb = shape
    at = data.draw(st.integers(0, len(keys)))
    arr = pa.array(keys[:at] + [k for k in longer if k not in keys] + keys[at:], pa.string())
    got = BH.key_positions(arr, vs, nb)
    with monkeypatch.context() as m:
        _numpy(m)
        want = BH.key_positions(arr, vs, nb)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=keys_st, num_entries=st.integers(1, 120), max_entries=st.integers(1, 400),
       simple=st.booleans(), cuts=st.lists(st.integers(0, 300), max_size=4))
def test_a_filter_built_in_pieces_is_numpys(monkeypatch, keys, num_entries, max_entries, simple, cuts):
    config = B.BloomConfig(num_entries=num_entries, fpp=0.01, filter_type="SIMPLE" if simple else "DYNAMIC_V0",
                           max_entries=max_entries)
    arr = pa.array(keys, pa.string())
    bounds = sorted({0, len(keys), *(c for c in cuts if c < len(keys))})

    def build() -> bytes:
        b = BB.FooterBuilder(config)
        for lo, hi in zip(bounds, bounds[1:]):
            b.add(arr.slice(lo, hi - lo))
        return b.finish()[0][B.BLOOM_FILTER_KEY.encode()]
    got = build()
    with monkeypatch.context() as m:
        _numpy(m)
        want = build()
    assert got == want


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=keys_st, asked=keys_st, num_entries=st.integers(1, 60), data=st.data())
def test_answers_are_numpys_on_built_and_read_filters(monkeypatch, stored, asked, num_entries, data):
    config = B.BloomConfig(num_entries=num_entries, fpp=0.05, max_entries=4 * num_entries)
    bf = BB.build_filter(pa.array(stored, pa.string()), config)
    read = B.BloomFilter.deserialize(bf.serialize(), bf.type_code)
    ask = pa.array(asked + stored[: len(stored) // 2], pa.string())
    among = data.draw(st.none() | st.lists(st.integers(0, len(ask) - 1), unique=True).map(np.array))
    for f in (bf, read):
        got = f.might_contain(ask, among=among)
        with monkeypatch.context() as m:
            _numpy(m)
            want = f.might_contain(ask, among=among)
        assert got.dtype == bool and np.array_equal(got, want)
        held = np.isin(np.asarray(ask.to_pylist(), object), np.asarray(stored, object))
        considered = np.ones(len(ask), bool) if among is None else np.isin(np.arange(len(ask)), among)
        assert got[held & considered].all()   # never a false "no"


@needs_native
def test_the_c_part_refuses_bad_buffers():
    data, off = BH.utf8_buffers(pa.array(["a", "bc"]))
    with pytest.raises(ValueError):
        NATIVE.positions(data, off, 3, 100, np.empty(5, np.uint32))          # too small an output
    with pytest.raises(ValueError):
        NATIVE.set_bits(data, off.astype(np.int32), None, 3, 100, 13, np.zeros(13, np.uint8))   # not int64
    with pytest.raises(ValueError):
        NATIVE.set_bits(data, off, np.array([0, 1], np.int64), 3, 100, 13, np.zeros(13, np.uint8))   # row 1 absent
    with pytest.raises(ValueError):
        NATIVE.set_bits(data, np.array([0, 5, 3], np.int64), None, 3, 100, 13, np.zeros(13, np.uint8))
    with pytest.raises(ValueError):
        NATIVE.key_range(data, np.array([0, 5, 3], np.int64))              # offsets beyond the data
    with pytest.raises(ValueError):
        NATIVE.decimals(b"p_", 7, np.empty(3, np.int32), np.empty(5, np.uint8))   # data too small
    with pytest.raises(ValueError):
        NATIVE.decimals(b"p_", 7, np.empty(3, np.int32), np.empty(50, np.uint8))  # data too large
    with pytest.raises(ValueError):
        NATIVE.decimals(b"p_", -1, np.empty(2, np.int32), np.empty(4, np.uint8))  # a negative number


# keys whose order is decided past their first 8 bytes, by length, by a zero byte, by bytes >= 0x80
_tricky = st.sampled_from(["", "a", "a\x00", "\x00", "aaaaaaaa", "aaaaaaaa\x00", "aaaaaaaab", "é", "\xff",
                           "zzzzzzzzzzzzzzzzz", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaab"])
range_keys_st = st.lists(st.one_of(st.text(max_size=20), st.lists(_tricky, max_size=4).map("".join),
                                   st.integers(0, 10**12).map(str)), min_size=1, max_size=200)


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=range_keys_st, large=st.booleans(), chunks=st.integers(1, 3))
def test_key_ranges_are_arrows(monkeypatch, keys, large, chunks):
    """The footer's least and greatest key (Java's order: the byte order, or UTF-16's with
    characters beyond U+FFFF) from C as from ``pyarrow.compute.min_max``."""
    arr = pa.array(keys, pa.large_string() if large else pa.string())
    step = -(-len(keys) // chunks)
    chunked = pa.chunked_array([arr.slice(i, step) for i in range(0, len(keys), step)], arr.type)
    got = B.key_range(chunked)
    with monkeypatch.context() as m:
        _numpy(m)
        want = B.key_range(chunked)
    assert (got.min, got.max) == (want.min, want.max)
    assert got.min == min(keys, key=lambda s: s.encode("utf-16-be"))
    assert got.max == max(keys, key=lambda s: s.encode("utf-16-be"))


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.one_of(st.integers(0, 2000), st.integers(0, 2**62), st.sampled_from([9, 99, 10**9 - 3, 10**18 - 2])),
       n=st.integers(0, 300), partition=st.integers(0, 100_000), instant=st.sampled_from(["20260101000000000", "1", ""]))
def test_sequence_numbers_are_arrows(monkeypatch, start, n, partition, instant):
    """``_hoodie_commit_seqno`` from C as Arrow computes it: ``<instant>_<partition>_<number>``."""
    from lakesdk.format.keys import sequence_numbers
    got = sequence_numbers(instant, partition, n, start)
    got.validate(full=True)
    with monkeypatch.context() as m:
        _numpy(m)
        want = sequence_numbers(instant, partition, n, start)
    assert got.type == want.type == pa.string() and got.equals(want)
    assert got.to_pylist() == [f"{instant}_{partition}_{start + i}" for i in range(n)]


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 400), n=st.integers(0, 400), nr=st.integers(1, 50), cap=st.integers(1, 12))
def test_dynamic_rows_are_hudis(start, n, nr, cap):
    """The row of each key of a dynamic filter (``InternalDynamicBloomFilter.add``), key by key:
    ``nr`` keys a row until ``cap`` rows are full; then the next key goes to row 0 (the row is
    reset) and the ones after it to rows 0, 1, ... in turn."""
    filled = cap * nr
    want = [i // nr if i < filled else 0 if i == filled else (i - filled - 1) % cap for i in range(start, start + n)]
    got = B.dynamic_rows(start, n, nr, cap)
    assert got.dtype == np.int64 and got.tolist() == want


int_types = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()]


@needs_native
@settings(max_examples=200, deadline=None)
@given(data=st.data(), typ=st.sampled_from(int_types), cut=st.integers(0, 3))
def test_integer_keys_text_is_arrows_cast(data, typ, cut):
    """An integer key's text from the C part is Arrow's cast to string, every integer type
    (uint64 left to Arrow), its extremes, digit-count boundaries and slices."""
    bits = typ.bit_width
    lo, hi = (0, 2**bits - 1) if pa.types.is_unsigned_integer(typ) else (-2**(bits - 1), 2**(bits - 1) - 1)
    edges = [v for e in range(20) for v in (10**e - 1, 10**e, -10**e, 1 - 10**e) if lo <= v <= hi] + [lo, hi, 0]
    values = data.draw(st.lists(st.one_of(st.integers(lo, hi), st.sampled_from(edges)), max_size=300))
    arr = pa.array(values, typ).slice(min(cut, len(values)))
    from lakesdk.format.keys import _as_text, integer_text
    got = integer_text(arr)
    assert got is not None and got.equals(pc.cast(arr, pa.string()))
    chunked = pa.chunked_array([arr, arr.slice(len(arr) // 2)], typ)
    assert _as_text(chunked).equals(pc.cast(chunked, pa.string()))


def test_integer_text_leaves_nulls_and_uint64_to_arrow():
    from lakesdk.format.keys import _as_text, integer_text
    assert integer_text(pa.array([1, None, 3])) is None
    assert integer_text(pa.array([2**64 - 1], pa.uint64())) is None
    col = pa.chunked_array([pa.array([1, None]), pa.array([-3])])
    assert _as_text(col).to_pylist() == ["1", None, "-3"]


@needs_native
def test_integer_text_refuses_bad_buffers():
    v = np.array([5, -12, 300], np.int64)
    with pytest.raises(ValueError):
        NATIVE.integers(v, np.empty(3, np.int32), None)          # n + 1 offsets expected
    off = np.empty(4, np.int32)
    assert NATIVE.integers(v, off, None) == 1 + 3 + 3
    with pytest.raises(ValueError):
        NATIVE.integers(v, off, np.empty(6, np.uint8))           # not the bytes the offsets say
    bad = off.copy()
    bad[2] += 1
    with pytest.raises(ValueError):
        NATIVE.integers(v, bad, np.empty(7, np.uint8))
    data = np.empty(7, np.uint8)
    NATIVE.integers(v, off, data)
    assert data.tobytes() == b"5-12300"
