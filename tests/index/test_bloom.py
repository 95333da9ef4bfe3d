"""Base files' bloom filters and key ranges (Hudi's footers) and the key index that uses them.

The format: hashing against a plain transcription of Hadoop's MurmurHash (Java int
arithmetic), any key added is found after a round trip through the footer text, the dynamic
filter's row assignment against a step-by-step model of Hudi's, and Hudi-written base files
of the conformance corpus (their filters answer their keys; ours for the same keys are the
same bytes).  The index: tags and counts stay exact with many false positives, with base
files without footers, with merge-on-read log files, deletes by key alone and both engines.
"""

from __future__ import annotations

import base64
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine.footers import clear_footer_cache
from lakesdk.format import bloom as B
from lakesdk.format import bloom_builder as BB

from ..helpers import hudi_rows

# ---------------------------------------------------------------------------------- reference


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def _ref_murmur(data: bytes, seed: int) -> int:
    """Hadoop's MurmurHash.hash(byte[], length, seed), transcribed with Java int semantics."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    sb = [b - 256 if b >= 128 else b for b in data]   # Java bytes are signed
    h = _i32(seed ^ length)
    len4 = length >> 2
    for i in range(len4):
        i4 = i << 2
        k = sb[i4 + 3]
        k = _i32(k << 8) | (sb[i4 + 2] & 0xFF)
        k = _i32(k << 8) | (sb[i4 + 1] & 0xFF)
        k = _i32(k << 8) | (sb[i4] & 0xFF)
        k = _i32(k * m)
        k = _i32(k ^ ((k & 0xFFFFFFFF) >> r))
        k = _i32(k * m)
        h = _i32(h * m)
        h = _i32(h ^ k)
    left = length - (len4 << 2)
    if left:
        if left >= 3:
            h = _i32(h ^ (sb[length - 3] << 16))
        if left >= 2:
            h = _i32(h ^ (sb[length - 2] << 8))
        h = _i32(h ^ sb[length - 1])
        h = _i32(h * m)
    h = _i32(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = _i32(h * m)
    return _i32(h ^ ((h & 0xFFFFFFFF) >> 15))


def _ref_positions(key: str, vector_size: int, nb_hash: int) -> list[int]:
    out, seed = [], 0
    for _ in range(nb_hash):
        seed = _ref_murmur(key.encode("utf-8"), seed)
        rem = abs(seed) % vector_size   # |Java remainder| = |h| mod size
        out.append(rem)
    return out


def _ref_rows(n: int, nr: int, max_nr: int) -> tuple[list[int], int, int]:
    """InternalDynamicBloomFilter.add, key by key: each key's row, rows, currentNbRecord."""
    rows, cur, reached, ci, out = 1, 0, False, 0, []
    for _ in range(n):
        if reached:
            row = ci % rows
            ci += 1
        elif cur >= nr and rows * nr < max_nr:
            rows += 1
            cur = 0
            row = rows - 1
        elif cur >= nr and rows * nr >= max_nr:
            reached = True
            row = 0
        else:
            row = rows - 1
        out.append(row)
        cur += 1
    return out, rows, cur


keys_st = st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=60, unique=True)


# ---------------------------------------------------------------------------------- format
@settings(max_examples=150, deadline=None)
@given(keys=keys_st, seed=st.integers(-(1 << 31), (1 << 31) - 1))
def test_murmur_matches_hadoop(keys, seed):
    got = B.murmur_hash(pa.array(keys, pa.string()), seed).tolist()
    assert got == [_ref_murmur(k.encode("utf-8"), seed) for k in keys]


@settings(max_examples=80, deadline=None)
@given(keys=keys_st, size=st.integers(1, 5000), nb=st.integers(1, 8))
def test_positions_match_hudi(keys, size, nb):
    pos = B.key_positions(pa.array(keys, pa.string()), size, nb)
    assert pos.T.tolist() == [_ref_positions(k, size, nb) for k in keys]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 400), nr=st.integers(1, 60), max_nr=st.integers(1, 300))
def test_dynamic_rows_follow_hudi(n, nr, max_nr):
    want_rows, want_n, want_cur = _ref_rows(n, nr, max_nr)
    rows, cur, filled, late = B._dynamic_rows(n, nr, max_nr)
    got = [i // nr for i in range(filled)] + late.tolist()
    assert (got, rows, cur) == (want_rows, want_n, want_cur)


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=300, unique=True),
       kind=st.sampled_from([B.SIMPLE, B.DYNAMIC_V0]), entries=st.integers(1, 100), fpp=st.sampled_from([0.3, 0.01]),
       max_entries=st.integers(1, 400))
def test_every_added_key_is_found(keys, kind, entries, fpp, max_entries):
    cfg = B.BloomConfig(num_entries=entries, fpp=fpp, filter_type=kind, max_entries=max_entries)
    footer = BB.footer_metadata(pa.array(keys, pa.string()), cfg)
    fi = B.read_footer(footer)
    assert fi.bloom is not None and fi.bloom.might_contain(keys).all()
    assert (footer.get(B.TYPE_CODE_KEY.encode()) == b"DYNAMIC_V0") == (kind == B.DYNAMIC_V0)
    assert B.BloomFilter.deserialize(fi.bloom.serialize(), kind).serialize() == fi.bloom.serialize()
    assert B.in_range(pa.array(keys, pa.string()), fi.range).all()


def test_hudi_defaults():
    cfg = B.BloomConfig()
    assert (cfg.vector_size, cfg.nb_hash) == (2587966, 30)


def test_key_range_in_java_order():
    # U+FF01 sorts after U+1F600 by code point (UTF-8 bytes) but before it in UTF-16 units
    keys = pa.array(["\U0001F600", "\uFF01", "a"])
    rng = B.key_range(keys)
    assert (rng.min, rng.max) == ("a", "\uFF01")
    assert B.in_range(keys, rng).all()
    # a range Java orders differently from bytes cannot prune
    assert B.in_range(pa.array(["zz"]), B.KeyRange("\U0001F600", "\uFF01")).all()
    assert not B.in_range(pa.array(["zz", "0"]), B.KeyRange("a", "b")).any()


def test_unreadable_footers_are_left_out():
    fi = B.read_footer({B.BLOOM_FILTER_KEY.encode(): b"not a filter", B.MIN_KEY.encode(): b"a"})
    assert fi.bloom is None and fi.range is None
    assert B.read_footer(None).bloom is None
    # Hudi never hashes an empty key: no filter then, the key range only
    footer = BB.footer_metadata(pa.array(["", "b"]))
    assert B.BLOOM_FILTER_KEY.encode() not in footer and footer[B.MIN_KEY.encode()] == b""


def test_hudi_written_filters(conformance_dir):
    """Every base file of the corpus with a bloom filter: ours decodes it and answers its
    keys, and our encoder writes the same bytes for the same keys (Hudi's defaults)."""
    files = [p for p in conformance_dir.rglob("*.parquet") if p.stat().st_size]
    checked = 0
    for p in files:
        md = pq.read_metadata(p).metadata or {}
        if B.BLOOM_FILTER_KEY.encode() not in md:
            continue
        keys = pq.read_table(p, columns=["_hoodie_record_key"]).column(0)
        fi = B.read_footer(md)
        assert fi.bloom is not None and fi.bloom.might_contain(keys).all(), p
        assert BB.footer_metadata(keys)[B.BLOOM_FILTER_KEY.encode()] == md[B.BLOOM_FILTER_KEY.encode()], p
        assert fi.range is not None and B.in_range(keys, fi.range).all()
        checked += 1
    assert checked >= 10


# ---------------------------------------------------------------------------------- written files
def _footers(t) -> list[tuple[str, dict]]:
    out = []
    for f in t.storage.find(""):
        if f.path.endswith(".parquet") and "/.hoodie/" not in "/" + f.path:
            out.append((f.path, pq.read_metadata(t.storage.url(f.path)).metadata))
    return out


def test_written_footers_answer_every_key_at_the_configured_rate(tmp_path):
    fpp = 0.01
    opts = lk.TableOptions(engine="local", bloom_num_entries=20000, bloom_fpp=fpp, bloom_filter_type="simple")
    t = lk.Lake(str(tmp_path / "lake"), options=opts).create_table("t", key="id")
    n = 20000
    t.bulk_insert(pd.DataFrame({"id": np.arange(n), "v": np.arange(n) * 2}))
    (path, md), = _footers(t)
    fi = B.read_footer(md)
    keys = pq.read_table(t.storage.url(path), columns=["_hoodie_record_key"]).column(0)
    assert fi.bloom.type_code == B.SIMPLE and B.TYPE_CODE_KEY.encode() not in md
    assert fi.bloom.might_contain(keys).all()
    assert (fi.range.min, fi.range.max) == ("0", "9999")   # Java String order
    probe = pa.array([f"x{i}" for i in range(50000)])
    rate = fi.bloom.might_contain(probe).mean()
    assert 0.004 < rate < 0.02, rate
    # the footers live in Parquet's key-value metadata only: reads do not carry them
    assert b"org.apache.hudi.bloomfilter" not in (t.read().to_arrow().schema.metadata or {})


def test_default_footers_and_hudi_reader(tmp_path):
    t = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local")).create_table(
        "t", key="id", partition_by="p", ordering="ts")
    t.upsert(pd.DataFrame({"id": range(300), "p": ["abc"[i % 3] for i in range(300)], "ts": 1, "v": range(300)}))
    t.upsert(pd.DataFrame({"id": range(0, 300, 7), "p": ["abc"[i % 3] for i in range(0, 300, 7)], "ts": 2, "v": -1}))
    for path, md in _footers(t):
        assert md[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
        fi = B.read_footer(md)
        keys = pq.read_table(t.storage.url(path), columns=["_hoodie_record_key"]).column(0)
        assert (fi.bloom.vector_size, fi.bloom.nb_hash) == (2587966, 30)
        assert fi.bloom.might_contain(keys).all()
        assert not fi.bloom.might_contain([f"nope{i}" for i in range(2000)]).any()
    mine = sorted(t.read().to_pandas()[["id", "v"]].itertuples(index=False, name=None))
    assert hudi_rows(t.path, cols=("id", "v")) == mine


# ---------------------------------------------------------------------------------- the index
def _keyed(ids, v, part=None):
    d = {"id": [f"k{i:05d}" for i in ids], "ts": v, "v": v}
    if part is not None:
        d["p"] = [part(i) for i in ids]
    return pd.DataFrame(d)


def _state(t) -> dict:
    df = t.read().to_pandas()
    assert not df.id.duplicated().any()
    return dict(zip(df.id, df.v))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_false_positives_keep_counts_exact(tmp_path, spark, engine):
    """A tiny filter answers "maybe" for most keys: the candidate files' keys decide."""
    opts = lk.TableOptions(engine=engine, bloom_num_entries=20, bloom_fpp=0.5, bloom_filter_type="simple",
                           target_file_size=40 * 1024, record_size_estimate=100)
    t = lk.Lake(str(tmp_path / "lake"), spark=spark, options=opts).create_table(
        "t", key="id", partition_by="p", ordering="ts")
    part = lambda i: "ab"[i % 2]   # noqa: E731
    t.bulk_insert(_keyed(range(0, 4000, 2), 1, part))
    assert len(t.inspect.file_groups()) > 4
    clear_footer_cache()
    r = t.upsert(_keyed(range(0, 300, 3), 2, part))   # half of them exist
    assert (r.updated, r.inserted) == (50, 50)
    r = t.delete(_keyed(range(1001, 1400, 2), 9, part))   # none exist
    assert r.deleted == 0
    r = t.delete(_keyed(range(0, 40, 4), 9, part))
    assert r.deleted == 10
    s = _state(t)
    assert len(s) == 2000 + 50 - 10
    assert all(s[f"k{i:05d}"] == 2 for i in range(0, 300, 6) if i % 4)


def test_bloom_filters_are_asked_only_where_they_can_spare_a_read(tmp_path, monkeypatch):
    """A file's bloom filter is asked when its candidate keys (after the key range) are few
    against its rows; with as many candidates as rows the file's keys are read at once.
    Tags and counts are exact either way."""
    from lakesdk.engine import key_index
    opts = lk.TableOptions(engine="local", target_file_size=40 * 1024, record_size_estimate=100)
    t = lk.Lake(str(tmp_path / "lake"), options=opts).create_table("t", key="id", ordering="ts")
    t.bulk_insert(_keyed(range(0, 4000, 2), 1))
    files = len(t.inspect.file_groups())
    assert files > 2
    asked = []
    real = B.BloomFilter.might_contain

    def spy(self, *a, **kw):
        asked.append(1)
        return real(self, *a, **kw)
    monkeypatch.setattr(B.BloomFilter, "might_contain", spy)
    clear_footer_cache()
    r = t.upsert(_keyed([10, 11], 2))                 # few candidates: every file in range is asked
    assert (r.updated, r.inserted) == (1, 1) and asked
    asked.clear()
    clear_footer_cache()
    r = t.upsert(_keyed(range(0, 8000, 2), 3))        # as many candidates as rows: no filter asked
    assert (r.updated, r.inserted) == (2000, 2000) and not asked
    assert key_index.BLOOM_PROBE_SHARE > 1
    s = _state(t)
    assert len(s) == 4001 and s["k00010"] == 3 and s["k00011"] == 2 and s["k07998"] == 3


def test_files_without_footers_are_read(tmp_path, monkeypatch):
    """Base files without key range or bloom filter (as some Hudi writers leave them) next
    to files with them."""
    import lakesdk.engine.tasks as tasks
    opts = lk.TableOptions(engine="local", target_file_size=40 * 1024, record_size_estimate=100)
    t = lk.Lake(str(tmp_path / "lake"), options=opts).create_table("t", key="id", ordering="ts")
    with monkeypatch.context() as m:
        m.setattr(tasks, "file_footer", lambda keys, config: ({}, B.FooterIndex()))
        t.bulk_insert(_keyed(range(0, 3000, 2), 1))
    bare = {p for p, md in _footers(t)}
    assert all(b"hoodie_min_record_key" not in md for _, md in _footers(t))
    t.bulk_insert(_keyed(range(1, 3000, 2), 1))
    assert all(b"org.apache.hudi.bloomfilter" in md for p, md in _footers(t) if p not in bare)
    clear_footer_cache()
    r = t.upsert(_keyed([*range(0, 3000, 10), 5001], 5))
    assert (r.updated, r.inserted) == (300, 1)
    s = _state(t)
    assert len(s) == 3001 and sum(v == 5 for v in s.values()) == 301


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_merge_on_read_logs_and_global_deletes(tmp_path, spark, engine):
    opts = lk.TableOptions(engine=engine, target_file_size=40 * 1024, record_size_estimate=100)
    t = lk.Lake(str(tmp_path / "lake"), spark=spark, options=opts).create_table(
        "t", key="id", partition_by="p", ordering="ts", table_type="mor")
    part = lambda i: "ab"[i % 2]   # noqa: E731
    t.bulk_insert(_keyed(range(1000), 1, part))
    r = t.upsert(_keyed(range(0, 1000, 5), 2, part))          # into log files
    assert (r.updated, r.inserted) == (200, 0)
    r = t.upsert(_keyed([*range(0, 1000, 10), 5000], 3, part))   # slices with logs, and one new key
    assert (r.updated, r.inserted) == (100, 1)
    r = t.upsert(_keyed(range(0, 1000, 10), 1, part))          # lower ordering value: nothing changes
    assert r.updated == 0
    r = t.delete(pd.DataFrame({"id": [f"k{i:05d}" for i in range(0, 20)]}))   # by key alone: any partition
    assert r.deleted == 20
    s = _state(t)
    assert len(s) == 981 and s["k00030"] == 3 and s["k00035"] == 2 and s["k00031"] == 1


def test_damaged_base_file_is_named(tmp_path):
    t = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local")).create_table("t", key="id")
    t.upsert(_keyed(range(10), 1))
    (path, _), = _footers(t)
    url = t.storage.url(path)
    size = os.path.getsize(url)
    with open(url, "wb") as f:
        f.write(b"\0" * size)
    clear_footer_cache()
    with pytest.raises(lk.CorruptFileError, match=os.path.basename(path).split("_")[0]):
        t.upsert(_keyed(range(5), 2))


def test_damaged_footers_are_named(tmp_path):
    """The key index reads a base file's footer: a file cut short, or with bytes of its tail
    changed, gives a footer or a CorruptFileError naming the file, never another error
    (generated)."""
    from hypothesis import HealthCheck

    from lakesdk.engine.footers import footer_of
    from lakesdk.storage import Storage
    t = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local")).create_table("t", key="id")
    t.upsert(_keyed(range(300), 1))
    (path, _), = _footers(t)
    url = t.storage.url(path)
    with open(url, "rb") as f:
        good = f.read()
    os.makedirs(str(tmp_path / "bad"), exist_ok=True)
    storage = Storage(str(tmp_path / "bad"))
    keys = pa.array([f"k{i:05d}" for i in range(300)])

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cut=st.integers(0, len(good)),
           flips=st.lists(st.tuples(st.integers(1, 2000), st.integers(1, 255)), max_size=3))
    def check(cut, flips):
        data = bytearray(good[:cut])
        for back, x in flips:
            if back <= len(data):
                data[-back] ^= x
        clear_footer_cache()
        with open(storage.url("f.parquet"), "wb") as f:
            f.write(bytes(data))
        try:
            fi = footer_of(storage, "f.parquet")
        except lk.CorruptFileError as e:
            assert "f.parquet" in str(e)
            return
        if bytes(data) == good:
            assert (fi.range.min, fi.range.max) == ("k00000", "k00299")
            assert fi.bloom.might_contain(keys).all()
    check()


def test_filter_read_in_its_text_answers_as_decoded():
    keys = pa.array([f"key-{i}" for i in range(3000)])
    probe = pa.array([f"other-{i}" for i in range(20000)])
    for cfg in (B.BloomConfig(num_entries=1000, fpp=0.05, max_entries=2500), B.BloomConfig(1500, 0.05, "SIMPLE")):
        text = BB.build_filter(keys, cfg).serialize()
        lazy = B.BloomFilter.deserialize(text, cfg.filter_type)
        whole = B._decode_whole(base64.b64decode(text), cfg.filter_type.upper())
        assert lazy._text is not None and whole._text is None
        assert lazy.might_contain(keys).all()
        assert np.array_equal(lazy.might_contain(probe), whole.might_contain(probe))
        assert 0 < whole.might_contain(probe).mean() < 0.5   # some false positives, compared above
        assert [r.tobytes() for r in lazy.rows] == [r.tobytes() for r in whole.rows]
        # a damaged character reads as set bits: "maybe", never "no"
        damaged = bytearray(text)
        damaged[len(damaged) // 2: len(damaged) // 2 + 400] = b"!" * 400
        hurt = B.BloomFilter.deserialize(bytes(damaged), cfg.filter_type)
        assert hurt.might_contain(keys).all()
        assert B.read_footer({B.BLOOM_FILTER_KEY.encode(): bytes(damaged), B.TYPE_CODE_KEY.encode():
                              cfg.filter_type.encode()}).bloom is not None


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=30),
       bounds=st.lists(st.text(min_size=1, max_size=4), min_size=2, max_size=2))
def test_key_set_ranges_answer_as_each_key(keys, bounds):
    arr = pa.array(keys, pa.string())
    rng = B.KeyRange(*sorted(bounds, key=lambda s: s.encode("utf-16-be")))
    assert B.KeySet(arr).in_range(rng).tolist() == B.in_range(arr, rng).tolist()
    # never out of range in Java's order when it is in
    java = [rng.min.encode("utf-16-be") <= k.encode("utf-16-be") <= rng.max.encode("utf-16-be") for k in keys]
    got = B.KeySet(arr).in_range(rng).tolist()
    assert all(g for g, j in zip(got, java) if j)


def test_an_empty_key_is_looked_up_without_hashing_it(tmp_path):
    """A legacy-encoded table allows an empty single key; a file with a bloom filter never
    holds one (Hudi cannot hash it), so the index answers "not there" for it without hashing,
    and reads the key column of files written without a filter."""
    from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig

    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id")
    t.upsert(pa.table({"id": ["x", "z"], "v": [1, 2]}))          # a bloom filter, range [x, z]
    cfg = TableConfig({**t.config.props, "hoodie.lakesdk.record.key.encoding": "legacy"})
    t.storage.write(PROPERTIES_PATH, cfg.to_text().encode())
    t = t.refresh()
    r = t.upsert(pa.table({"id": ["", "y"], "v": [10, 20]}))
    assert (r.inserted, r.updated) == (2, 0)
    r = t.upsert(pa.table({"id": ["", "x"], "v": [11, 12]}))    # "" now in a file without a filter
    assert (r.inserted, r.updated) == (0, 2)
    got = t.read().to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == ["", "x", "y", "z"]
    assert got.column("v").to_pylist() == [11, 12, 20, 2]
