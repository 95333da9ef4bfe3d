"""The provenance widget: per key and column group, the ordering value the group was last
written with (the stream's event that won), ranked per column for the colour."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

from lakesdk.exceptions import TableConfigError  # noqa: E402

GROUPS = {"order_ts": ["amount", "status"], "pay_ts": ["paid", "method"], "ship_ts": ["carrier"]}


@pytest.fixture
def orders(local_lake):
    t = local_lake.create_table("orders", key="order_id", table_type="mor", merge_mode="partial_update",
                          column_groups=GROUPS)
    t.upsert([{"order_id": "a", "order_ts": 5, "amount": 10.0, "status": "new"},
              {"order_id": "b", "order_ts": 9, "amount": 20.0, "status": "paid"}])
    t.upsert([{"order_id": "a", "pay_ts": 7, "paid": True, "method": "card"},
              {"order_id": "c", "pay_ts": 2, "paid": False, "method": "cash"}])
    t.upsert([{"order_id": "a", "order_ts": 3, "amount": 99.0, "status": "stale"}])   # late: loses
    t.upsert([{"order_id": "b", "ship_ts": 4, "carrier": "dhl"}])
    return t


def test_matrix_is_the_winning_ordering_values(orders):
    t = orders
    w = t.widgets.provenance()
    assert list(w.matrix.columns) == list(GROUPS) and list(w.matrix.index) == ["a", "b", "c"]
    got = {k: {o: (None if v is None or v != v else int(v)) for o, v in row.items()}
           for k, row in w.matrix.to_dict("index").items()}
    assert got == {"a": {"order_ts": 5, "pay_ts": 7, "ship_ts": None},
                   "b": {"order_ts": 9, "pay_ts": None, "ship_ts": 4},
                   "c": {"order_ts": None, "pay_ts": 2, "ship_ts": None}}
    # the matrix is what the table holds
    df = t.read().to_pandas().set_index("order_id")
    for k in "abc":
        for o in GROUPS:
            v = df.at[k, o]
            assert (got[k][o] is None) == (v != v or v is None)
    h = w.figure.data[0]
    assert list(h.x) == list(GROUPS) and list(h.y) == ["a", "b", "c"]
    assert [list(r) for r in h.text] == [["5", "7", "-"], ["9", "-", "4"], ["-", "2", "-"]]
    # colour = recency within each column: oldest 0, newest 1, missing blank
    assert [list(r) for r in h.z] == [[0.0, 1.0, None], [1.0, None, 1.0], [None, 0.0, None]]
    # hover: the group's values (the late order event did not win) and the row's last commit
    assert "status=new" in h.hovertext[0][0] and "amount=10" in h.hovertext[0][0]
    assert "stale" not in str(list(h.hovertext))
    commit_a = t.read(columns=["order_id", "_hoodie_commit_time"]).to_pandas().set_index("order_id").loc[
        "a", "_hoodie_commit_time"]
    assert f"row's last commit {commit_a}" in h.hovertext[0][1]
    assert commit_a in w.table_html.value and "Per-group commits are not stored" in w.info.value


def test_keys_and_limit(orders):
    w = orders.widgets.provenance(keys=["c", "zz"])
    assert list(w.matrix.index) == ["c"] and "keys not in the table: zz" in w.info.value
    assert list(orders.widgets.provenance(limit=2).matrix.index) == ["a", "b"]
    # a refresh picks up a newer event of a stream
    orders.upsert([{"order_id": "c", "ship_ts": 8, "carrier": "ups"}])
    w.refresh()
    assert int(w.matrix.at["c", "ship_ts"]) == 8 and w.figure.data[0].text[0][2] == "8"


def test_not_a_partial_update_table(local_lake):
    t = local_lake.create_table("plain", key="id", ordering="ts")
    t.upsert([{"id": 1, "ts": 1}])
    with pytest.raises(TableConfigError, match="not a partial-update table.*merge_mode='partial_update'"):
        t.widgets.provenance()
