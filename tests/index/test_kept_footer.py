"""A rewrite that keeps its file's keys keeps the file's footer (lakesdk.engine.footers.kept_footer).

An upsert whose every record updates a key the base file holds, and a compaction whose logs
only update keys of the base file, write a file of the same keys: its key range and bloom
filter are the stored file's, not hashed again.  Whatever the sequence
of writes (updates only, updates with new keys, deletes, keys stored twice by inserts), every
base file's footer answers every key the file holds, its key range is the range of those keys,
and its filter has the shape a filter built from them has; where a write inserted or deleted,
the footer is built from the keys written, byte for byte.
"""

from __future__ import annotations

import glob
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine.footers import clear_footer_cache
from lakesdk.format import bloom as B
from lakesdk.format import bloom_builder as BB

KEY = "_hoodie_record_key"


def _files(t) -> dict[str, str]:
    """Base file path -> file id, every version."""
    out = {}
    for p in glob.glob(os.path.join(t.path, "**", "*.parquet"), recursive=True):
        if f"{os.sep}.hoodie{os.sep}" not in p:
            out[p] = os.path.basename(p).split("_")[0]
    return out


def _check_footer(path: str, config: B.BloomConfig) -> tuple[bytes | None, bool]:
    """Check the footer of ``path`` against its keys; (its filter text, is it the footer built
    from the keys byte for byte)."""
    pf = pq.ParquetFile(path)
    keys = pf.read(columns=[KEY]).column(KEY).combine_chunks()
    md = pf.metadata.metadata or {}
    want, want_index = BB.file_footer(keys, config)
    index = B.read_footer(md)
    got = {k: v for k, v in md.items() if k in B.FOOTER_KEYS}
    if not len(keys):   # an empty file (every record deleted): an empty filter, no key range, as Hudi writes
        assert index.range is None and want_index.range is None and got == want
        assert index.bloom is not None and not index.bloom.might_contain(pa.array(["k0000"])).any()
        return got[B.BLOOM_FILTER_KEY.encode()], True
    assert index.range is not None
    assert (index.range.min, index.range.max) == (want_index.range.min, want_index.range.max)
    bf = index.bloom
    assert bf is not None and bool(bf.might_contain(keys).all()), f"{path}: the filter misses keys of the file"
    built = want_index.bloom
    assert (bf.type_code, bf.vector_size, bf.nb_hash, bf.num_rows, bf.nr, bf.current) == \
        (built.type_code, built.vector_size, built.nb_hash, built.num_rows, built.nr, built.current)
    return got[B.BLOOM_FILTER_KEY.encode()], got == want


def _table(tmp_path, engine="local", spark=None, table_type="cow", **bloom):
    opts = lk.TableOptions(engine=engine, bloom_num_entries=bloom.get("num_entries", 7), bloom_fpp=0.01,
                           bloom_filter_type=bloom.get("filter_type", "dynamic_v0"),
                           bloom_max_entries=bloom.get("max_entries", 30), metadata=False)
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=opts)
    t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
    return t, B.BloomConfig(num_entries=opts.bloom_num_entries, fpp=opts.bloom_fpp,
                            filter_type=opts.bloom_filter_type.upper(), max_entries=opts.bloom_max_entries)


def _rows(ids, ts: int) -> pd.DataFrame:
    ids = list(ids)
    return pd.DataFrame({"id": [f"k{i:04d}" for i in ids], "ts": [ts] * len(ids), "v": [i * ts for i in ids]})


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_an_update_keeps_the_footer_and_an_insert_builds_it(tmp_path, spark, engine):
    t, config = _table(tmp_path, engine, spark if engine == "spark" else None)
    t.bulk_insert(_rows(range(0, 200, 2), 1))
    seen = _files(t)
    text = {}
    for path, fid in seen.items():
        text[fid], exact = _check_footer(path, config)
        assert exact

    def step(write) -> dict[str, tuple[bytes, bool]]:
        clear_footer_cache()     # the rewrite reads the stored footer itself (a Spark task's case)
        write()
        now = _files(t)
        out = {fid: _check_footer(p, config) for p, fid in now.items() if p not in seen}
        seen.update(now)
        return out

    kept = step(lambda: t.upsert(_rows([10, 98, 150, 0], 2)))     # updates only: every footer kept
    assert kept and all(got == text[fid] for fid, (got, _) in kept.items()), "an update hashed the keys again"
    built = step(lambda: t.upsert(_rows([11, 98], 3)))              # a new key: that file's footer built
    assert any(exact and got != text.get(fid) for fid, (got, exact) in built.items())
    built = step(lambda: t.delete(_rows([98], 4)))                  # a delete: built (the key is gone)
    assert built and all(exact for _, exact in built.values())
    assert len(t.read().to_pandas()) == 100


def test_a_filter_of_other_settings_is_built_again(tmp_path):
    t, _ = _table(tmp_path, num_entries=7, max_entries=30)
    t.bulk_insert(_rows(range(100), 1))
    # the table written on with other bloom settings: Hudi builds the filter its settings say
    opts = lk.TableOptions(engine="local", bloom_num_entries=11, bloom_fpp=0.01, bloom_max_entries=30, metadata=False)
    t2 = lk.Lake(str(tmp_path / "lake"), options=opts).table("t")
    before = set(_files(t2))
    t2.upsert(_rows([5, 50], 2))
    (new,) = set(_files(t2)) - before
    assert _check_footer(new, B.BloomConfig(num_entries=11, fpp=0.01, max_entries=30))[1]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_compaction_of_updates_keeps_the_footer(tmp_path, spark, engine):
    t, config = _table(tmp_path, engine, spark if engine == "spark" else None, table_type="mor")
    t.bulk_insert(_rows(range(0, 200, 2), 1))
    text = {fid: _check_footer(p, config)[0] for p, fid in _files(t).items()}
    t.upsert(_rows([10, 98, 150, 0], 2))      # log updates of stored keys
    before = set(_files(t))
    clear_footer_cache()
    t.maintenance.compact()
    new = {fid: _check_footer(p, config) for p, fid in _files(t).items() if p not in before}
    assert new and all(got == text[fid] for fid, (got, _) in new.items()), "a compaction of updates hashed the keys"
    text.update((fid, got) for fid, (got, _) in new.items())
    t.upsert(_rows([11, 98], 3))              # a new key in the logs (or a new file group)
    t.delete(_rows([150], 4))                 # a delete in the logs
    before = set(_files(t))
    t.maintenance.compact()
    new = {fid: _check_footer(p, config) for p, fid in _files(t).items() if p not in before}
    # a file group whose logs insert or delete is built again; one whose logs only update is kept
    assert all(exact or got == text.get(fid) for fid, (got, exact) in new.items())
    assert any(exact and got != text.get(fid) for fid, (got, exact) in new.items())
    assert len(t.read().to_pandas()) == 100


ops_st = st.lists(st.tuples(st.sampled_from(["update", "upsert", "delete", "insert", "compact"]),
                            st.lists(st.integers(0, 120), min_size=1, max_size=25)), min_size=1, max_size=6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_st, filter_type=st.sampled_from(["simple", "dynamic_v0"]), num_entries=st.integers(3, 40),
       table_type=st.sampled_from(["cow", "mor"]))
def test_every_footer_answers_its_file_whatever_the_writes(tmp_path_factory, ops, filter_type, num_entries, table_type):
    t, config = _table(tmp_path_factory.mktemp("kept"), filter_type=filter_type, num_entries=num_entries,
                       table_type=table_type)
    t.bulk_insert(_rows(range(0, 120, 3), 1))
    live = set(range(0, 120, 3))
    for ts, (op, ids) in enumerate(ops, start=2):
        ids = sorted(set(ids))
        if op == "update":       # stored keys only: the footer is kept
            ids = [i for i in ids if i in live] or sorted(live)[:1]
        if not ids:
            continue
        if op == "compact":
            if table_type == "mor":
                t.maintenance.compact()
        elif op == "delete":
            t.delete(_rows(ids, ts))
            live -= set(ids)
        elif op == "insert":     # a key inserted twice: stored twice in a file
            t.insert(_rows(ids, ts))
            live |= set(ids)
        else:
            t.upsert(_rows(ids, ts))
            live |= set(ids)
        for path in _files(t):
            _check_footer(path, config)
    got = t.read().to_arrow()
    assert set(pa.compute.unique(got.column("id")).to_pylist()) == {f"k{i:04d}" for i in live}
