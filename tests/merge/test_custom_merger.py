"""User-defined mergers registered by name (never loaded from the table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakesdk as lk
from lakesdk.merge.registry import MergerNotRegisteredError

pytestmark = pytest.mark.spark


def keep_max_amount(versions: pa.Table) -> pa.Table:
    """Per key, the version with the largest amount (ties: the later one); deletes win."""
    keys = versions.column("_hoodie_record_key").to_pylist()
    amount = pc.fill_null(versions.column("amount"), -np.inf).to_pylist()
    seq = versions.column("_lk_seq").to_pylist()
    op = versions.column("_lk_op").to_pylist()
    best: dict[str, int] = {}
    deleted: set[str] = set()
    for i, k in enumerate(keys):
        if op[i] == 1:
            deleted.add(k)
            continue
        j = best.get(k)
        if j is None or (amount[i], seq[i]) >= (amount[j], seq[j]):
            best[k] = i
    keep = sorted(i for k, i in best.items() if k not in deleted)
    return versions.take(pa.array(keep, pa.int64()))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_custom_merger_on_write_read_and_compaction(engine_lake, table_type):
    lk.register_merger("max_amount", keep_max_amount)
    t = engine_lake.create_table("c", key="id", table_type=table_type, merge_mode="custom", merger="max_amount")
    assert t.config.props["hoodie.lakesdk.merger.name"] == "max_amount" and t.config.merge_mode == "CUSTOM"
    t.upsert(pd.DataFrame({"id": [1, 2, 2], "amount": [5.0, 7.0, 3.0]}))     # in-batch: 7 beats 3
    t.upsert(pd.DataFrame({"id": [1, 2], "amount": [4.0, 9.0]}))            # 4 loses to 5, 9 beats 7
    got = dict(zip(*t.read().to_pandas()[["id", "amount"]].values.T))
    assert got == {1: 5.0, 2: 9.0}
    if table_type == "mor":
        t.maintenance.compact()
        assert dict(zip(*t.read(read_optimized=True).to_pandas()[["id", "amount"]].values.T)) == {1: 5.0, 2: 9.0}


def test_unregistered_merger_is_a_clear_error(engine_lake):
    with pytest.raises(MergerNotRegisteredError, match="register_merger"):
        engine_lake.create_table("x", key="id", merge_mode="custom", merger="nope")


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_stored_record_the_merger_keeps_keeps_its_commit_time(engine_lake, table_type):
    """When the merger chooses the stored version over the incoming one, the record stays as
    stored, its commit time too (Hudi's merge handle copies the old record then): an incremental
    read after the first commit does not return it, and the write counts it as skipped (found by
    tests/model/test_merge_modes.py)."""
    lk.register_merger("max_amount", keep_max_amount)
    t = engine_lake.create_table("c", key="id", table_type=table_type, merge_mode="custom", merger="max_amount")
    first = t.upsert(pd.DataFrame({"id": [1, 2], "amount": [5.0, 7.0]}))
    res = t.upsert(pd.DataFrame({"id": [1, 2], "amount": [4.0, 9.0]}))       # 4 loses to 5, 9 beats 7
    if table_type == "cow":
        assert (res.updated, res.skipped) == (1, 1)
    rows = t.read(meta_fields=True).to_pandas().set_index("id")
    assert rows.amount.to_dict() == {1: 5.0, 2: 9.0}
    assert rows._hoodie_commit_time.to_dict() == {1: first.instant, 2: res.instant}
    changed = t.incremental(first.completed).to_pandas()
    assert changed.id.tolist() == [2]
