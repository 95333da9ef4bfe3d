"""``hoodie.parquet.bloom.filter.enabled`` (``TableOptions(bloom_filter_enabled=...)``): base
files carry a bloom filter of their keys unless the option is off and the write's index is no
bloom index, as Hudi decides (``HoodieFileWriterFactory.enableBloomFilter``).  Every file keeps
its key range, and a table written without filters answers every write correctly, whichever
index a later write uses (a file without a filter is read for its keys)."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakesdk as lk
from lakesdk.format import bloom as B


def _footers(t) -> list[dict[bytes, bytes]]:
    """The footer entries of every base file of ``t`` (every version)."""
    out = []
    for p in sorted(glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True)):
        if f"{os.sep}.hoodie{os.sep}" not in p:
            md = pq.ParquetFile(p).metadata.metadata or {}
            out.append({k: v for k, v in md.items() if k in B.FOOTER_KEYS})
    return out


def _rows(lo: int, hi: int, ts: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": [f"p{i % 3}" for i in ids],
                     "v": [f"v{ts}-{i}" for i in ids]})


@pytest.mark.parametrize("index, enabled, written", [
    ("record", False, False), ("simple", False, False), ("global_simple", False, False),
    ("bloom", False, True), (None, False, True), ("global_bloom", False, True), ("record", True, True),
])
def test_base_files_carry_a_filter_as_hudi_decides(engine, engine_spark, tmp_path, index, enabled, written):
    lake = lk.Lake(str(tmp_path / "lake"), spark=engine_spark,
                   options=lk.TableOptions(engine=engine, bloom_filter_enabled=enabled))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="part", index=index)
    t.bulk_insert(_rows(0, 300, 1))
    r = t.upsert(pa.concat_tables([_rows(100, 200, 2), _rows(300, 350, 2)]))
    assert (r.updated, r.inserted) == (100, 50)
    footers = _footers(t)
    assert footers
    for f in footers:
        assert B.MIN_KEY.encode() in f and B.MAX_KEY.encode() in f
        assert (B.BLOOM_FILTER_KEY.encode() in f) is written
    got = {row["id"]: row["v"] for row in t.read().to_arrow().to_pylist()}
    assert got == {i: f"v{2 if 100 <= i < 200 or i >= 300 else 1}-{i}" for i in range(350)}


def test_the_hudi_key_turns_the_filter_off(tmp_path):
    opts = lk.TableOptions.from_hoodie({"hoodie.parquet.bloom.filter.enabled": "false",
                                        "hoodie.index.type": "SIMPLE"}, engine="local")
    assert opts.bloom_filter_enabled is False
    t = lk.Lake(str(tmp_path / "lake"), options=opts).create_table("t", key="id", ordering="ts")
    t.bulk_insert(_rows(0, 50, 1))
    assert all(B.BLOOM_FILTER_KEY.encode() not in f for f in _footers(t))


def test_a_bloom_index_write_over_files_without_filters_finds_their_keys(local_lake, tmp_path):
    """Files written without a filter (record index, filters off), then upserts with the bloom
    index: the key index reads those files' keys, so no key is stored twice, and the files
    the bloom-index writes add carry a filter."""
    t = local_lake.create_table("t", key="id", ordering="ts", partition_by="part", index="record")
    off = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", bloom_filter_enabled=False))
    off.table("t").bulk_insert(_rows(0, 200, 1))
    assert all(B.BLOOM_FILTER_KEY.encode() not in f for f in _footers(t))
    bloom = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", index_type="bloom",
                                                                    bloom_filter_enabled=False)).table("t")
    r = bloom.upsert(pa.concat_tables([_rows(50, 100, 2), _rows(200, 220, 2)]))
    assert (r.updated, r.inserted) == (50, 20)
    ids = t.refresh().read().to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(220))
    assert any(B.BLOOM_FILTER_KEY.encode() in f for f in _footers(t))
