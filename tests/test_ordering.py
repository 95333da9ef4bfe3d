"""Key positions used by the merge (lakesdk.merge.ordering.positions) against a dict reference."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.merge.ordering import positions


def reference_positions(probe: list, build: list) -> list[int]:
    first: dict = {}
    for i, v in enumerate(build):
        first.setdefault(v, i)
    return [first.get(v, -1) for v in probe]


def test_positions_repeated_probe_keys_all_get_a_position():
    # The probe side is smaller than the build side: each equal probe key finds its row.
    assert positions(pa.array(["a", "a"]), pa.array(["a", "b", "c"])).tolist() == [0, 0]
    assert positions(pa.array(["c", "a", "c", "z"]), pa.array(["a", "b", "c", "d", "e"])).tolist() == [2, 0, 2, -1]


def test_positions_equal_build_keys_give_the_first_row_either_way():
    build = pa.array(["b", "a", "a", "b", "c"])
    assert positions(pa.array(["a", "b"]), build).tolist() == [1, 0]
    assert positions(pa.array(["a", "b", "a", "b", "a", "z"]), build).tolist() == [1, 0, 1, 0, 1, -1]


keys = st.lists(st.sampled_from(["a", "b", "c", "d", "e", None]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(probe=keys, build=keys)
def test_positions_match_a_dict_reference(probe, build):
    got = positions(pa.array(probe, pa.string()), pa.array(build, pa.string()))
    assert got.tolist() == reference_positions(probe, build)


@settings(max_examples=100, deadline=None)
@given(probe=st.lists(st.integers(0, 6), max_size=10), build=st.lists(st.integers(0, 6), max_size=10))
def test_positions_match_a_dict_reference_chunked_ints(probe, build):
    got = positions(pa.chunked_array([pa.array(probe, pa.int64())]), pa.chunked_array([pa.array(build, pa.int64())]))
    assert got.tolist() == reference_positions(probe, build)
