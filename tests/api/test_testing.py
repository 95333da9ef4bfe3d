"""lakesdk.testing: assert_table_equal compares tables exactly and says where they differ."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.testing import assert_table_equal


@pytest.fixture
def table(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", partition_by="p")
    t.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "v": [1.5, math.nan, -0.0]}))   # Arrow keeps NaN
    return t


def test_a_table_equals_its_rows_in_any_order(table):
    rows = [{"id": 3, "p": "b", "v": -0.0}, {"id": 1, "p": "a", "v": 1.5}, {"id": 2, "p": "a", "v": math.nan}]
    assert_table_equal(table, rows)                       # NaN equals NaN; matched by the record key
    assert_table_equal(table.read(), table.to_arrow())
    assert_table_equal(table.read(where="id = 1"), table.read(where="id = 1").to_pandas())
    assert_table_equal(table.read(where="p = 'a'"), rows[1:])


def test_differences_are_named_by_key_and_column(table):
    with pytest.raises(AssertionError, match=r"id=3: v: '-0x0.0p\+0' != '0x0.0p\+0'"):
        assert_table_equal(table, [{"id": 1, "p": "a", "v": 1.5}, {"id": 2, "p": "a", "v": math.nan},
                                   {"id": 3, "p": "b", "v": 0.0}])             # -0.0 is not 0.0
    with pytest.raises(AssertionError, match=r"id=2: unexpected .*\n.*id=4: missing"):
        assert_table_equal(table.read(where="id > 1"), [{"id": 3, "p": "b", "v": -0.0},
                                                        {"id": 4, "p": "b", "v": 1.0}])
    with pytest.raises(AssertionError, match=r"the columns differ: missing \['w'\], unexpected \['v'\]"):
        assert_table_equal(table, pa.table({"id": [1], "p": ["a"], "w": [1.0]}))


def test_types_compare_unless_told_not_to():
    a = pa.table({"id": pa.array([1], pa.int32())})
    b = pa.table({"id": pa.array([1], pa.int64())})
    with pytest.raises(AssertionError, match="id: int32 != int64"):
        assert_table_equal(a, b)
    assert_table_equal(a, b, check_types=False)
    ts = pa.table({"at": pa.array([1], pa.timestamp("ms"))})
    with pytest.raises(AssertionError, match="at: timestamp"):
        assert_table_equal(ts, pa.table({"at": pa.array([1000], pa.timestamp("us"))}))


def test_duplicates_and_order(table):
    dup = pa.table({"id": [1, 1]})
    with pytest.raises(AssertionError, match="unexpected row"):
        assert_table_equal(dup, [{"id": 1}])
    with pytest.raises(AssertionError, match="id=2"):
        assert_table_equal(pa.table({"id": [1, 2]}), [{"id": 2}, {"id": 1}], check_order=True)
    assert_table_equal(pa.table({"id": [1, 2]}), [{"id": 2}, {"id": 1}])
