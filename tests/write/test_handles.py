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
    """The lake owns what its handles' writes start: 30 handles that write share one marker
    server for their table, and ``lake.close()`` leaves no listening socket and no lakesdk
    thread.  A table opened alone owns its own, which ``close()``, a ``with`` block or the
    garbage collector ends."""
    import gc
    import threading
    gc.collect()
    base_threads, base_listening = set(threading.enumerate()), _listening()
    handles = [lake_local.table("t") for _ in range(30)]
    for i, t in enumerate(handles):
        assert t.upsert(_rows(i)).inserted == 2
    assert _listening() == base_listening + 1 and lake_local.resources.running == 1   # one per table
    lake_local.close()
    lake_local.close()   # idempotent
    assert _listening() == base_listening and _new_threads(base_threads) == []
    # a handle of a closed lake still writes (a new server), which the next close ends
    assert handles[0].upsert(_rows(0)).updated == 2 and _listening() == base_listening + 1
    with lake_local:
        assert handles[1].upsert(_rows(1)).updated == 2
    assert _listening() == base_listening and _new_threads(base_threads) == []
    # tables opened alone: each owns its server; dropped without closing, the collector ends them
    path = handles[0].path
    del handles, t
    alone = [lk.open_table(path, options=lake_local.options) for _ in range(5)]
    for i, t in enumerate(alone):
        t.upsert(_rows(i))
    assert _listening() == base_listening + 5
    del alone, t
    gc.collect()
    assert _listening() == base_listening and _new_threads(base_threads) == []
    # a with block; a closed handle still writes (a new server), and closes again; a refreshed
    # handle and one with other options share their owner
    with lk.open_table(path, options=lake_local.options) as t:
        assert t.upsert(_rows(1)).updated == 2
    assert _listening() == base_listening and _new_threads(base_threads) == []
    assert t.upsert(_rows(2)).updated == 2 and _listening() == base_listening + 1
    t2 = t.refresh().with_options(marker_threads=2)
    assert t2.context.resources is t.context.resources and t2.options.marker_threads == 2
    assert t2.upsert(_rows(3)).updated == 2 and _listening() == base_listening + 1
    t.close()
    assert _listening() == base_listening and _new_threads(base_threads) == []
    assert len(lake_local.table("t").to_pandas()) == 2 * 30


def test_a_handle_is_a_value(lake_local):
    t = lake_local.table("t")
    with pytest.raises(AttributeError, match="with_options"):
        t.options = lk.TableOptions()
    t2 = t.with_options(engine="local", compact_every=3)
    assert t.options.compact_every != 3 and t2.options.compact_every == 3 and t2.context is not t.context
    with pytest.raises(lk.OptionsError):
        t.with_options(engine="gpu")
