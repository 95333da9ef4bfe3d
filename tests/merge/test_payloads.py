"""The merger case tables of payloads.md, through the table API (COW and MOR).

Covered here: E1-E10 (event-time ordering), T1-T6 (commit-time ordering), P7/P21 (stored
newer record kept under event time, replaced under commit time), P22-like partial updates
are in test_partial_update.py, E11-E13 in test_merge.py, I1 (merge-mode inference).
Not applicable: P1-P6, P8-P20, P23 test Java payload classes' methods directly (lakesdk
has no payload classes; their observable effects are the E/T rows); P24 needs several
ordering fields compared lexicographically, which the `hudi` reader rejects (one ordering
field only), so lakesdk does not write such tables.
"""

from __future__ import annotations

import pandas as pd
import pytest

from lakesdk.exceptions import MissingColumnError

pytestmark = pytest.mark.spark
COLS = ["id", "name", "price", "ts"]


def rows(t) -> list[tuple]:
    df = t.read().to_pandas()
    return sorted((int(r.id), r.name, float(r.price), int(r.ts)) for r in df.itertuples())


def df(*r) -> pd.DataFrame:
    return pd.DataFrame(list(r), columns=COLS)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_event_time_ordering_e1_e10(lake, table_type):
    t = lake.create_table("et", key="id", ordering="ts", table_type=table_type)
    assert t.config.merge_mode == "EVENT_TIME_ORDERING"                                        # E1, I1
    # table version 9: the built-in merge mode alone (no strategy id, no payload class)
    assert t.config.props["hoodie.table.ordering.fields"] == "ts"
    assert "hoodie.record.merge.strategy.id" not in t.config.props and "hoodie.compaction.payload.class" not in t.config.props
    t.upsert(df((1, "A", 10.0, 100), (2, "B", 20.0, 100)))
    t.upsert(df((1, "A_equal", 60.0, 100), (2, "B_equal", 70.0, 100)))                          # E2: ties replace
    assert rows(t) == [(1, "A_equal", 60.0, 100), (2, "B_equal", 70.0, 100)]
    t.upsert(df((1, "A_equal", 50.0, 100)))                                                    # E3
    assert rows(t) == [(1, "A_equal", 50.0, 100), (2, "B_equal", 70.0, 100)]
    t.upsert(df((1, "A", 30.0, 99), (2, "B", 40.0, 99)))                                        # E4: lower ts ignored
    t.upsert(df((1, "A_equal", 50.0, 98)))                                                      # E5
    assert rows(t) == [(1, "A_equal", 50.0, 100), (2, "B_equal", 70.0, 100)]
    t.upsert(df((1, "A", 30.0, 101), (2, "B", 40.0, 101)))                                      # E6
    t.upsert(df((1, "A", 50.0, 102)))                                                           # E7
    assert rows(t) == [(1, "A", 50.0, 102), (2, "B", 40.0, 101)]
    with pytest.raises(MissingColumnError, match="ordering field 'ts'"):                        # E8
        t.upsert(pd.DataFrame({"id": [1], "name": ["A"], "price": [1.0]}))
    t.delete([1])                                                                              # E10: no ordering value
    assert rows(t) == [(2, "B", 40.0, 101)]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_commit_time_ordering_t1_t6(lake, table_type):
    t = lake.create_table("ct", key="id", table_type=table_type, merge_mode="commit_time")
    assert t.config.merge_mode == "COMMIT_TIME_ORDERING"                                       # T1
    assert "hoodie.table.precombine.field" not in t.config.props and "hoodie.table.ordering.fields" not in t.config.props
    t.upsert(df((1, "A", 10.0, 100), (2, "B", 20.0, 100)))
    t.upsert(df((1, "A_equal", 60.0, 100), (2, "B_equal", 70.0, 100)))                          # T3
    t.upsert(df((1, "A", 30.0, 99), (2, "B", 40.0, 99)))                                        # T4: lower ts wins
    assert rows(t) == [(1, "A", 30.0, 99), (2, "B", 40.0, 99)]
    t.upsert(df((1, "A", 50.0, 98)))                                                            # T5
    assert rows(t) == [(1, "A", 50.0, 98), (2, "B", 40.0, 99)]
    t.delete([1])
    assert rows(t) == [(2, "B", 40.0, 99)]


def test_commit_time_insert_keeps_duplicates_t2(lake):
    t = lake.create_table("t2", key="id", merge_mode="commit_time")
    t.insert(df((1, "A", 10.0, 100), (2, "B", 20.0, 100)))
    t.insert(df((1, "A_equal", 60.0, 100), (2, "B_equal", 70.0, 100)))
    assert len(rows(t)) == 4                                                                   # T2


def test_stored_newer_record_kept_p7_p21(lake):
    et = lake.create_table("p21e", key="id", ordering="ts")
    ct = lake.create_table("p21c", key="id", ordering="ts", merge_mode="commit_time")
    for t in (et, ct):
        t.upsert(df((1, "name_2", 2.0, 2)))
        t.upsert(df((1, "name_1", 1.0, 1)))
    assert rows(et) == [(1, "name_2", 2.0, 2)]     # DHRP / event time: stored newer kept
    assert rows(ct) == [(1, "name_1", 1.0, 1)]     # OWL / commit time: latest write wins


def test_delete_with_ordering_value(lake):
    """A delete carrying a lower ordering value than the stored record is ignored; equal or
    higher applies (payloads.md section 4)."""
    t = lake.create_table("dd", key="id", ordering="ts", table_type="mor")
    t.upsert(df((1, "A", 1.0, 10), (2, "B", 2.0, 10), (3, "C", 3.0, 10)))
    t.delete(pd.DataFrame({"id": [1, 2, 3], "ts": [9, 10, 11]}))
    assert rows(t) == [(1, "A", 1.0, 10)]
