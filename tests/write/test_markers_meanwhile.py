"""The local engine creates the markers of a write's files in one request and works meanwhile:
a bulk insert computes its files' footers (the bloom filters), an upsert reads and merges its
file groups, while the marker server waits for its batch interval.  No data file exists
before every marker does, and a write whose markers cannot be created writes no file."""

from __future__ import annotations

import glob
import os
import threading
import time

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk import _faults as faults
from lakesdk.engine import local, tasks
from lakesdk.markers.client import TimelineServerWriteMarkers


def _rows(n: int, ts: int = 1, start: int = 0) -> pd.DataFrame:
    ids = range(start, start + n)
    return pd.DataFrame({"id": [f"k{i}" for i in ids], "ts": ts, "v": list(ids), "p": [f"p{i % 4}" for i in ids]})


def _data_files(t) -> list[str]:
    return [f for f in glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True) if "/.hoodie/" not in f]


def _wait_until(cond, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def _held_write(t, write, counted, expect: int):
    """Run ``write`` with the markers held after their creation: while held, no data file
    exists and ``counted`` (calls of the work done meanwhile) reaches ``expect``."""
    before = set(_data_files(t))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)
    with faults.hold_at("after_markers") as hold:
        th = threading.Thread(target=run)
        th.start()
        assert hold.wait_for(1, timeout=60)
        assert _wait_until(lambda: len(counted) >= expect), counted
        assert set(_data_files(t)) == before          # nothing written before the markers exist
    th.join(120)
    assert not th.is_alive() and not errors, errors
    return set(_data_files(t)) - before


@pytest.fixture
def table(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    yield t
    t.close()


def test_bulk_insert_computes_footers_while_its_markers_are_created(table, monkeypatch):
    footers: list[int] = []
    real = local.base_file_footer

    def counting(ctx, keys):
        footers.append(len(keys))
        return real(ctx, keys)
    monkeypatch.setattr(local, "base_file_footer", counting)
    written = _held_write(table, lambda: table.bulk_insert(_rows(400)), footers, expect=4)
    assert len(written) == 4 and sum(footers) == 400
    assert table.read().to_arrow().num_rows == 400
    # the footers are the ones of the files as written
    from lakesdk.engine.footers import clear_footer_cache, footer_of
    clear_footer_cache()
    for f in written:
        fi = footer_of(table.storage, os.path.relpath(f, table.path))
        assert fi.bloom is not None and fi.range is not None


def test_upsert_reads_and_merges_while_its_markers_are_created(table, monkeypatch):
    table.bulk_insert(_rows(400))
    merged: list[int] = []
    real = tasks._with_meta

    def counting(ctx, rows, *a, **kw):
        merged.append(rows.num_rows)
        return real(ctx, rows, *a, **kw)
    monkeypatch.setattr(tasks, "_with_meta", counting)
    written = _held_write(table, lambda: table.upsert(_rows(400, ts=2)), merged, expect=1)
    assert len(written) == 4
    got = table.read().to_pandas()
    assert len(got) == 400 and (got.ts == 2).all()


@pytest.mark.parametrize("op", ["bulk_insert", "upsert"])
def test_a_write_whose_markers_fail_writes_no_file(table, monkeypatch, op):
    table.bulk_insert(_rows(40))
    before = set(_data_files(table))

    def refuse(self, markers):
        time.sleep(0.05)   # the tasks are at work meanwhile
        raise RuntimeError("marker server refused")
    monkeypatch.setattr(TimelineServerWriteMarkers, "create_many", refuse)
    with pytest.raises(RuntimeError, match="marker server refused"):
        getattr(table, op)(_rows(40, ts=2, start=20))
    monkeypatch.undo()
    assert set(_data_files(table)) == before
    got = table.read().to_pandas()
    assert len(got) == 40 and (got.ts == 1).all()
