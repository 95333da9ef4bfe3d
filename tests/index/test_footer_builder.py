"""A base file's footer built as its keys come (lakesdk.format.bloom_builder.FooterBuilder):
for generated keys (ids, text with characters beyond U+FFFF, an empty key), bloom settings
(SIMPLE, DYNAMIC_V0 with few keys a row and a low bound, so keys are dealt to the rows in
turn) and cuts of the keys into pieces, the same footer bytes and key index as the footer of
all the keys at once (lakesdk.format.bloom_builder.file_footer)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.format import bloom as B
from lakesdk.format import bloom_builder as BB
from lakesdk.format import bloom_hash
from lakesdk.format.bloom_builder import FooterBuilder

configs_st = st.one_of(st.none(), st.builds(
    B.BloomConfig, num_entries=st.integers(1, 40), fpp=st.sampled_from([0.3, 0.05, 0.001]),
    filter_type=st.sampled_from([B.SIMPLE, B.DYNAMIC_V0]), max_entries=st.integers(1, 200)))
keys_st = st.one_of(
    st.lists(st.integers(0, 10**9).map(str), max_size=300),
    st.lists(st.text(max_size=6), max_size=200),
    st.lists(st.sampled_from(["a", "\U0001F600", "\uFFFF", "ab", "b\U00010000"]), max_size=50),
)


def _check(keys: list[str], config, cuts: list[int]) -> None:
    col = pa.array(keys, pa.string())
    built = FooterBuilder(config)
    at = 0
    for c in sorted(set(min(c, len(keys)) for c in cuts)) + [len(keys)]:
        built.add(col.slice(at, c - at))
        at = c
    entries, index = built.finish()
    if not keys and config is None:
        assert (entries, index) == ({}, None)
        return
    if not keys:   # a file of no key: an empty filter and no key range, as Hudi writes it
        assert B.BLOOM_FILTER_KEY.encode() in entries and B.MIN_KEY.encode() not in entries
        assert index is not None and index.range is None and index.rows == 0
        assert not index.bloom.might_contain(pa.array(["a", "zz"])).any()
        return
    want, want_index = BB.file_footer(col, config)
    assert entries == want
    assert index is not None and index.rows == want_index.rows == len(keys)
    assert (index.range.min, index.range.max) == (want_index.range.min, want_index.range.max)
    assert (index.bloom is None) == (want_index.bloom is None)


@settings(max_examples=200, deadline=None)
@given(keys=keys_st, config=configs_st, cuts=st.lists(st.integers(0, 300), max_size=6),
       chunk=st.sampled_from([1, 3, bloom_hash.CHUNK]))
def test_a_footer_built_piece_by_piece_is_the_footer_of_all_the_keys(keys, config, cuts, chunk):
    was = bloom_hash.CHUNK
    bloom_hash.CHUNK = chunk
    try:
        _check(keys, config, cuts)
    finally:
        bloom_hash.CHUNK = was


@settings(max_examples=10, deadline=None)
@given(start=st.integers(0, 10**9), n=st.integers(100_001, 150_000), cut=st.integers(1, 100_000))
def test_hudis_default_filter_of_a_file_written_in_pieces(start, n, cut):
    """Hudi's defaults past their bound (100,000 keys: the keys dealt to the two rows in turn)."""
    keys = np.arange(start, start + n).astype(str).tolist()
    _check(keys, B.BloomConfig(), [cut, cut + 32_768])
