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


# -- null ordering values ----------------------------------------------------------------------------
def test_a_stored_version_without_an_ordering_value_ranks_below_any_value():
    """Writes refuse records without an ordering value (NullOrderingValueError); a table written by
    another writer may still hold such a version: any incoming value replaces it (as Hudi's
    DefaultHoodieRecordPayload decides), on copy-on-write writes and merge-on-read merges alike,
    and a delete without an ordering value always applies."""
    import numpy as np

    from lakesdk.merge.ordering import KEY, OP, OP_DELETE, OP_UPSERT, SEQ, event_time_wins
    from lakesdk.merge.slice_merge import merge_versions

    incoming = pa.chunked_array([pa.array([-5, 0, 3, None], pa.int64())])
    stored = pa.chunked_array([pa.array([None, 1, None, 4], pa.int64())])
    ops = np.array([OP_UPSERT, OP_UPSERT, OP_DELETE, OP_DELETE], dtype=np.int8)
    assert event_time_wins(incoming, stored, ops).tolist() == [True, False, True, True]
    # a file slice: base version (seq 0) of a and b without ordering values, then log blocks
    versions = pa.table({KEY: ["a", "a", "b", "b", "c", "c"], SEQ: pa.array([0, 1, 0, 1, 0, 2], pa.int64()),
                         OP: pa.array([0, 0, 0, 1, 0, 1], pa.int8()), "ts": pa.array([None, -5, None, 2, 9, None], pa.int64()),
                         "v": ["a0", "a1", "b0", "b1", "c0", "c1"]})
    out = merge_versions(versions, ordering="ts", merge_mode="EVENT_TIME_ORDERING")
    assert out.column("v").to_pylist() == ["a1"]    # a: -5 beats null; b: deleted by a later value; c: null delete
