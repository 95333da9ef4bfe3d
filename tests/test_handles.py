"""Table handles: what a path must be, and the resources a handle owns (marker server, threads)."""

from __future__ import annotations

import pytest

import lakesdk as lk
from lakesdk.exceptions import TableNotFoundError


def test_open_table_on_a_file_is_table_not_found(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("not a table")
    with pytest.raises(TableNotFoundError, match="is a file, not a table folder") as ei:
        lk.open_table(str(f))
    assert str(f) in str(ei.value) and ".hoodie/hoodie.properties" in str(ei.value)
    with pytest.raises(TableNotFoundError, match="is a file, not a table folder"):
        lk.Lake(str(tmp_path)).table("notes.txt")


def _listening() -> int:
    import psutil
    return sum(1 for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN)


def _new_threads(baseline: set) -> list:
    import threading
    return [t for t in threading.enumerate() if t not in baseline]


def _rows(i: int):
    import pandas as pd
    return pd.DataFrame({"id": [f"k{i}", f"k{i + 1000}"], "v": [i, i]})


@pytest.fixture
def lake_local(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    lake.create_table("t", key="id").close()
    return lake


def test_table_handles_release_marker_servers_and_threads(lake_local):
    import gc
    import threading
    gc.collect()
    base_threads, base_listening = set(threading.enumerate()), _listening()
    # closed explicitly
    handles = [lake_local.table("t") for _ in range(30)]
    for i, t in enumerate(handles):
        assert t.upsert(_rows(i)).inserted == 2
    assert _listening() >= base_listening + 30
    for t in handles:
        t.close()
        t.close()   # idempotent
    assert _listening() == base_listening and _new_threads(base_threads) == []
    # dropped without closing: garbage collection stops the servers
    handles = [lake_local.table("t") for _ in range(30)]
    for i, t in enumerate(handles):
        t.upsert(_rows(i))
    del handles, t
    gc.collect()
    assert _listening() == base_listening and _new_threads(base_threads) == []
    # a with block; a closed handle still writes (a new server), and closes again
    with lk.open_table(lake_local.table("t").path, options=lake_local.options) as t:
        assert t.upsert(_rows(1)).updated == 2
    assert _listening() == base_listening and _new_threads(base_threads) == []
    assert t.upsert(_rows(2)).updated == 2 and _listening() == base_listening + 1
    t.close()
    # the lake closes the handles it handed out
    with lake_local as lake:
        kept = [lake.table("t") for _ in range(3)]
        for k in kept:
            k.upsert(_rows(3))
    assert _listening() == base_listening and _new_threads(base_threads) == []
    assert len(lake_local.table("t").to_pandas()) == 2 * 30
