"""Hudi's record index (``create_table(index="record")``, the metadata table's ``record_index``
partition): its format as Hudi writes it, its hashing checked against the record index Hudi
wrote in the corpus, and random writes and services after which every key of the table maps
to the file group that holds it and no deleted key is left, read the same by the `hudi` reader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.metadata_records import decode_file_id
from lakesdk.format.record_index import (
    PARTITION,
    encode_file_id,
    file_group_count,
    file_group_id,
    file_group_index,
    group_count,
    instant_millis,
    java_string_hash,
)
from lakesdk.read.metadata_table import MetadataTableReader

from .. import helpers
from ..corpus_model import MDT_TABLES
from ..metadata_table.test_read_hudi_written import _file_id

COLS = ("id", "p", "ts", "v")


def _java_hash(s: str) -> int:
    """Java's String.hashCode, written as Java does it (int overflow)."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


@given(st.text(max_size=40))
def test_hash_is_javas_string_hash(s):
    assert java_string_hash(s) == _java_hash(s)
    n = 10
    assert 0 <= file_group_index(s, n) < n


def test_hash_edge_cases():
    assert java_string_hash("") == 0 and java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00     # a surrogate pair: two code units
    # Integer.MIN_VALUE: Math.abs keeps it negative, and Java's % keeps the sign
    assert java_string_hash("polygenelubricants") == -2**31
    assert file_group_index("polygenelubricants", 10) == 8
    assert file_group_id(3) == "record-index-0003-0"
    assert file_group_count(10) == 10 and file_group_count(10**12) == 10_000
    assert instant_millis("20260403184016997") == 1775241616997        # Hudi's record in the corpus


@given(st.uuids(), st.integers(0, 2**31 - 1))
def test_uuid_file_ids_round_trip(u, i):
    fid = f"{u}-{i}"
    enc = encode_file_id(fid)
    assert enc["fileIdEncoding"] == 0 and -2**63 <= enc["fileIdHighBits"] < 2**63
    assert decode_file_id(enc) == fid
    assert decode_file_id(encode_file_id("files-0000-0")) == "files-0000-0"
    assert encode_file_id(str(uuid.uuid4()).upper() + "-0")["fileIdEncoding"] == 1   # kept as written
    bare = encode_file_id(str(u))           # Hudi's older file ids: no index (-1)
    assert (bare["fileIdEncoding"], bare["fileIndex"], decode_file_id(bare)) == (0, -1, str(u))
    other = encode_file_id("files-0000-0")  # as Hudi writes a string file id
    assert (other["fileIdHighBits"], other["fileIdLowBits"], other["fileIndex"]) == (-1, -1, -1)


RECORD_INDEXED = sorted(rel for rel, cfg in MDT_TABLES.items()
                        if PARTITION in cfg.props.get("hoodie.table.metadata.partitions", ""))


@pytest.mark.parametrize("rel", RECORD_INDEXED)
def test_hudi_put_each_key_in_the_file_group_lakesdk_hashes_it_to(corpus, rel):
    t = lk.open_table(helpers.zipped_table(corpus, rel))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    n = group_count(mdt.mdt)
    assert n == 10
    seen = 0
    from lakesdk.read.metadata_table import _log_blocks
    for sl in mdt.slices(PARTITION):
        keys = set(mdt._slice_records(sl))
        for path in sl.log_paths:        # deletes too: Hudi wrote them to the key's file group
            for b in _log_blocks(mdt.mdt.url(path), mdt.mdt.read(path)):
                keys |= {r.key for r in b.records} | set(b.deleted)
        for k in keys:
            assert file_group_id(file_group_index(k, n)) == sl.file_id, k
        seen += len(keys)
    assert seen
    # and lakesdk's point lookups find what the whole partition holds
    every = {k: r.location for k, r in mdt.records(PARTITION).items()}
    assert mdt.record_locations(list(every) + ["no-such-key"]) == every


# -- every key where it is ---------------------------------------------------------------------------
def assert_index_exact(t) -> None:
    """Every key of the table maps to the file group holding it, and no other key is indexed."""
    rows = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_arrow()
    held = {}
    for k, p, f in zip(*(rows.column(c).to_pylist() for c in rows.column_names)):
        assert k not in held, f"{k} stored twice"
        held[k] = (p, _file_id(f))
    if not t.timeline.completed.instants:       # nothing written yet: no metadata table
        assert not held
        return
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    index = {k: (r.location.partition, r.location.file_id) for k, r in mdt.records(PARTITION).items()}
    assert index == held
    assert {k: (v.partition, v.file_id) for k, v in mdt.record_locations(list(held)).items()} == held


def df(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLS))


def ours(t) -> list[tuple]:
    out = t.read().to_pandas()
    return [] if out.empty else helpers.rows(out, COLS)


_op = st.one_of(
    st.tuples(st.just("upsert"), st.dictionaries(st.integers(0, 7), st.tuples(st.sampled_from("abc"),
                                                                                st.integers(0, 3)),
                                                 min_size=1, max_size=5)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True)),
    st.tuples(st.sampled_from(["insert", "bulk_insert"]),
              st.dictionaries(st.integers(0, 11), st.tuples(st.sampled_from("abc"), st.integers(0, 3)),
                              min_size=1, max_size=4)),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("cluster"), st.none()),
    st.tuples(st.just("rollback"), st.none()),
    st.tuples(st.just("savepoint"), st.none()),
    st.tuples(st.just("restore"), st.none()),
)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=8), version=st.sampled_from([8, 9]))
@example(ops=[("upsert", {0: ("a", 0)}), ("upsert", {0: ("a", 0), 1: ("a", 0)}), ("cluster", None),
              ("savepoint", None), ("restore", None)], version=9)   # a restore that undoes a clustering
@example(ops=[("upsert", {k: ("a", 0)}) for k in range(7)], version=8)  # two MDT compactions and a clean
def test_random_operations_keep_the_index_exact(tmp_path_factory, table_type, ops, version):
    root = tmp_path_factory.mktemp("rli")
    lake = lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata_compact_every=3))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="record",
                          table_version=version)
    model: dict[int, tuple[str, int, str]] = {}
    states: list[tuple[str, dict]] = []          # (write instant, model after it)
    saved: tuple[str, dict] | None = None
    for n, (kind, arg) in enumerate(ops):
        if kind == "upsert":
            rows = [(k, p, ts, f"w{n}") for k, (p, ts) in sorted(arg.items())]
            r = t.upsert(df(rows))
            for k, p, ts, v in rows:
                if k not in model or ts >= model[k][1]:
                    model[k] = (p, ts, v)
            states.append((r.instant, dict(model)))
        elif kind in ("insert", "bulk_insert"):       # of keys the table does not hold (no lookup)
            rows = [(k, p, ts, f"i{n}") for k, (p, ts) in sorted(arg.items()) if k not in model]
            if not rows:
                continue
            r = getattr(t, kind)(df(rows))
            model.update({k: (p, ts, v) for k, p, ts, v in rows})
            states.append((r.instant, dict(model)))
        elif kind == "delete":
            r = t.delete(arg)
            for k in arg:
                model.pop(k, None)
            if r.instant:
                states.append((r.instant, dict(model)))
        elif kind == "compact":
            if t.config.is_mor:
                t.maintenance.compact()
        elif kind == "cluster":
            t.maintenance.cluster()
        elif kind == "rollback":
            last = t.timeline.completed.instants[-1] if t.timeline.completed.instants else None
            if last is None or not states or last.requested != states[-1][0] or (saved and saved[0] == last.requested):
                continue
            t.maintenance.rollback(last.requested)
            states.pop()
            model = dict(states[-1][1]) if states else {}
        elif kind == "savepoint":
            if states and (saved is None or saved[0] != states[-1][0]):
                t.maintenance.savepoint(states[-1][0])
                saved = (states[-1][0], dict(states[-1][1]))
        elif kind == "restore":
            if saved is None:
                continue
            t.maintenance.restore(saved[0])
            model = dict(saved[1])
            while states and states[-1][0] != saved[0]:
                states.pop()
        want = sorted((k, p, ts, v) for k, (p, ts, v) in model.items())
        assert ours(t) == want, f"after {kind}"
        assert_index_exact(t)
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)
    shutil.rmtree(root, ignore_errors=True)


def _spy_reads(monkeypatch) -> tuple[list[str], list[str]]:
    """The base files whose footers, and those whose record keys, the key index reads from now on."""
    import lakesdk.engine.key_index as key_index
    opened: list[str] = []
    real = key_index.footer_of
    monkeypatch.setattr(key_index, "footer_of", lambda storage, path: opened.append(path) or real(storage, path))
    read_keys: list[str] = []
    real_base = key_index._base_keys
    monkeypatch.setattr(key_index, "_base_keys",
                        lambda storage, path, ordering: read_keys.append(path) or real_base(storage, path, ordering))
    return opened, read_keys


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_an_upsert_reads_only_the_file_groups_the_index_names(tmp_path, monkeypatch, table_type, engine, engine_spark):
    """Tagging looks the incoming keys up in the record index: only the base files of the file
    groups holding them are read (and no bloom filter footer: the index is exact), and a moved
    key moves; on Spark too, whose driver looks up the incoming keys when they are few."""
    lake = lk.Lake(str(tmp_path), spark=engine_spark, options=lk.TableOptions(engine=engine))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="record")
    for i, p in enumerate("abcd"):          # one file group per partition
        t.upsert(df([(k, p, 0, "v") for k in range(i * 10, i * 10 + 10)]))
    opened, read_keys = _spy_reads(monkeypatch)
    # key 3 is in p=a, key 35 moves from p=d to p=b, key 99 is new
    r = t.upsert(df([(3, "a", 1, "u"), (35, "b", 1, "m"), (99, "c", 1, "n")]))
    assert (r.inserted, r.updated) == (2, 1)
    assert not opened and {p.split("/")[0] for p in read_keys} == {"p=a", "p=d"}
    rows = ours(t)
    assert (35, "b", 1, "m") in rows and (3, "a", 1, "u") in rows and (99, "c", 1, "n") in rows
    assert len(rows) == 41
    assert_index_exact(t)
    r = t.delete([35, 12])
    assert r.deleted == 2 and len(ours(t)) == 39
    assert_index_exact(t)
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_create_index_builds_it_from_the_files_of_a_table(tmp_path, table_type):
    """``maintenance.create_index("record")`` on a table written with another index: every key of
    its latest file slices (merge-on-read log records included) indexed; later writes keep it."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="global")
    t.upsert(df([(k, "ab"[k % 2], 0, "v") for k in range(12)]))
    t.upsert(df([(1, "a", 1, "moved"), (20, "b", 1, "new")]))      # a log file on merge-on-read
    t.delete([4])
    want = ours(t)
    mdt = t.maintenance.create_index("record")
    assert group_count(mdt.mdt) == 10
    assert_index_exact(t)
    assert ours(t) == want
    u = lk.open_table(t.path, options=lk.TableOptions(engine="local", index_type="record"))
    u.upsert(df([(3, "a", 2, "moved"), (30, "a", 1, "n")]))
    u.delete([5])
    assert_index_exact(u)
    assert helpers.hudi_rows(u.path, cols=COLS) == ours(u)
    with pytest.raises(lk.OptionsError):
        u.maintenance.create_index("bloom")


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_writes_keep_the_index_exact(tmp_path, spark, table_type):
    """The Spark engine's writes (its tagging is the global index's) keep the index exact: the
    index changes are computed at the commit point, whatever engine wrote the files."""
    lake = lk.Lake(str(tmp_path), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="record")
    t.upsert(df([(k, "ab"[k % 2], 0, "v") for k in range(10)]))
    t.upsert(spark.createDataFrame(df([(1, "b", 1, "moved"), (2, "a", 1, "u"), (11, "a", 0, "n")])))
    t.delete([4])
    assert_index_exact(t)
    assert len(ours(t)) == 10
    if table_type == "mor":
        t.maintenance.compact()
    t.maintenance.cluster()
    assert_index_exact(t)
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)


KILLED_WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pandas as pd
    import lakesdk as lk
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local"))
    t.upsert(pd.DataFrame({"id": [1, 2, 50], "p": ["b", "a", "c"], "ts": [5, 5, 5], "v": ["m", "u", "n"]}))
""")


@pytest.mark.parametrize("point", ["metadata_log_written", "metadata_committed"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_killed_inside_its_metadata_delta_commit_is_undone_in_the_index(tmp_path, table_type, point):
    """A write (a move, an update, an insert) killed with its record index entries written (its
    MDT delta commit completed, or not), then rolled back: the entries it wrote count once its
    instant leaves the timeline, and the rollback says every key where it is again."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="record")
    t.upsert(df([(k, "ab"[k % 2], 0, "v") for k in range(6)]))
    want = ours(t)
    r = subprocess.run([sys.executable, "-c", KILLED_WRITER, t.path], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "LAKESDK_CRASH_AT": point})
    assert r.returncode == -9, f"not killed: rc={r.returncode}\n{r.stderr[-3000:]}"
    t = lk.open_table(t.path, options=lk.TableOptions(engine="local"))
    dead = t.context.store.load().pending.instants
    assert len(dead) == 1
    t.maintenance.rollback(dead[0].requested, force=True)
    assert ours(t) == want
    assert_index_exact(t)
    t.upsert(df([(1, "b", 6, "again")]))
    assert_index_exact(t)
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)


@given(st.dictionaries(st.text(max_size=30), st.tuples(st.sampled_from(["", "p=a", "ünï/x"]),
                                                       st.sampled_from(["files-0000-0", str(uuid.UUID(int=7)) + "-3"]),
                                                       st.integers(0, 2**42)), max_size=20),
       st.sampled_from([8, 9]))
def test_entries_encode_as_their_records(entries, version):
    """The writer encodes a record index entry once per location and splices each key in: the
    bytes are those of each key's whole record, in both table versions' schemas."""
    from lakesdk.format.metadata_files import hfile_of
    from lakesdk.format.metadata_records import record_schema_json
    from lakesdk.format.record_index import IndexEntry
    schema = record_schema_json(version)
    as_entries = {k: IndexEntry(*v) for k, v in entries.items()}
    as_records = {k: e.as_record(k) for k, e in as_entries.items()}
    from lakesdk.format.hfile import HFileReader
    entries_of = list(HFileReader(hfile_of(as_entries, schema_json=schema)))     # (the file info has a time)
    assert entries_of == list(HFileReader(hfile_of(as_records, schema_json=schema)))


@pytest.mark.parametrize("version", [8, 9])
def test_the_metadata_compaction_folds_the_index_into_its_base_files(tmp_path, version):
    """Every MDT partition is compacted and cleaned, on a version 8 table too (whose MDT's own
    config names no partition: its compaction took ``files`` alone, and the clean after it
    deleted the other partitions' files, index entries with them)."""
    from ..corpus_model import check_mdt
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata_compact_every=2))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", index="record", table_version=version)
    for n in range(4):
        t.upsert(df([(k, "ab"[(k + n) % 2], n, f"w{n}") for k in range(n, n + 8)]))   # moves and inserts
        t.delete([n])
        assert_index_exact(t)
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    slices = mdt.slices(PARTITION)
    assert len(slices) == 10 and all(sl.base_file is not None for sl in slices)
    assert any(sl.base_instant != "00000000000000000" for sl in slices)     # compacted at least once
    for part in ("files", "column_stats", "partition_stats"):
        assert all(sl.base_file is not None and sl.base_instant != "00000000000000000" for sl in mdt.slices(part)), part
    check_mdt(t.path, f"on a version {version} table after two MDT compactions")
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_table_without_partitions_tags_through_the_index(tmp_path, monkeypatch, engine, engine_spark):
    """On a table without partitions (where every index is global) the record index names the
    file groups of an upsert's keys too: only their base files are read, by both engines, and
    no footer; the same table written with the bloom index opens the footers."""
    lake = lk.Lake(str(tmp_path), spark=engine_spark, options=lk.TableOptions(engine=engine))
    t = lake.create_table("r", key="id", ordering="ts", index="record")
    for i in range(4):                      # a file group each
        t.bulk_insert(df([(k, "a", 0, "v") for k in range(i * 10, i * 10 + 10)]))
    groups = {f.rsplit("/", 1)[-1].split("_")[0] for f in helpers.data_files(t)}
    assert len(groups) >= 4
    opened, read_keys = _spy_reads(monkeypatch)
    r = t.upsert(df([(3, "a", 1, "u"), (35, "a", 1, "m"), (99, "a", 1, "n")]))
    assert (r.inserted, r.updated) == (1, 2)
    held = _held(t)
    assert not opened and {o.rsplit("/", 1)[-1].split("_")[0] for o in read_keys} == {held["3"][1], held["35"][1]}
    assert_index_exact(t)
    opened.clear()
    t.with_options(index_type="bloom").upsert(df([(4, "a", 2, "b")]))
    assert held["4"][1] in {o.rsplit("/", 1)[-1].split("_")[0] for o in opened}
    assert_index_exact(t)
    rows = ours(t)
    assert len(rows) == 41 and (35, "a", 1, "m") in rows and (4, "a", 2, "b") in rows
    assert helpers.hudi_rows(t.path, cols=COLS) == rows


def _held(t) -> dict[str, tuple[str, str]]:
    rows = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_arrow()
    return {k: (p, _file_id(f)) for k, p, f in zip(*(rows.column(c).to_pylist() for c in rows.column_names))}


def test_a_lookup_reads_the_blocks_of_its_keys_not_the_index(tmp_path, monkeypatch):
    """A lookup of a few keys reads, in the file group of each, the framing of its log blocks,
    the data index and file info of their HFiles and one data block per key: a small part of
    the index's files, which are found the same as by a whole read."""
    import lakesdk.format.byte_ranges as byte_ranges
    from lakesdk.format.hfile_lookup import clear_index_cache
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("r", key="id", ordering="ts", index="record")
    t.bulk_insert(pd.DataFrame({"id": range(100_000), "p": "a", "ts": 0, "v": "v"}))
    t.upsert(df([(k, "a", 1, "u") for k in range(0, 100_000, 1000)]))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    total = sum(f.size for f in mdt.mdt.list(PARTITION))
    read = []
    real = byte_ranges._File.pread
    monkeypatch.setattr(byte_ranges._File, "pread", lambda self, n, at: read.append(n) or real(self, n, at))
    clear_index_cache()
    keys = ["7", "12345", "99999", "no-such-key"]
    found = mdt.record_locations(keys)
    every = {k: r.location for k, r in mdt.records(PARTITION).items()}
    assert found == {k: every[k] for k in keys if k in every} and len(found) == 3
    assert sum(read) < total // 10, (sum(read), total)


@pytest.mark.parametrize("undo", ["rollback", "restore"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_undoing_a_write_that_stored_keys_twice_keeps_their_entries(tmp_path, table_type, undo):
    """A bulk insert of keys the table holds stores them twice (Hudi's bulk insert looks up no
    key), and the index names its new file groups; undone, the keys are held by their first file
    groups alone, which the index names again (it deleted their entries: an upsert of them then
    stored them twice; found by the model test)."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts", table_type=table_type, index="record")
    first = t.upsert(df([(k, "ab"[k % 2], 0, "w0") for k in range(4)]))
    if undo == "restore":
        t.maintenance.savepoint(first.instant)
    twice = t.bulk_insert(df([(k, "ab"[k % 2], 1, "w1") for k in (1, 2)] + [(9, "a", 1, "w1")]))
    if undo == "rollback":
        t.maintenance.rollback(twice.instant)
    else:
        t.maintenance.restore(first.instant)
    assert_index_exact(t)
    t.upsert(df([(k, "ab"[k % 2], 2, "w2") for k in (1, 2)]))
    assert_index_exact(t)
    assert ours(t) == sorted([(0, "a", 0, "w0"), (1, "b", 2, "w2"), (2, "a", 2, "w2"), (3, "b", 0, "w0")])
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(t)


@pytest.mark.parametrize("moment", ["before_mdt_read", "after_mdt_read"])
@pytest.mark.parametrize("built", ["before", "meanwhile"])
def test_a_write_racing_a_key_move_through_the_index_never_stores_the_key_twice(tmp_path, monkeypatch, moment, built):
    """Writer R plans an upsert moving key 1 (its data timeline read first, then the MDT); a
    write W moving key 1 elsewhere completes before or after R reads the MDT, and the record
    index is there from the start or built meanwhile (after two MDT compactions and their
    clean, so the MDT's timeline starts past the index's initial time).  R's lookups never take
    an index that knows W for the truth about R's snapshot: R conflicts with W, or lands after
    it, and key 1 is stored once (found by a review: it was stored twice)."""
    from lakesdk.read import metadata_table
    opts = lk.TableOptions(engine="local", metadata=True, concurrency="optimistic", metadata_compact_every=2)
    lake = lk.Lake(str(tmp_path), options=opts)
    t = lake.create_table("r", key="id", partition_by="p", ordering="ts",
                          index="record" if built == "before" else "global")
    for n in range(6):
        t.upsert(df([(k, "ab"[k % 2], n, f"w{n}") for k in (1, 2, 100 + n)]))
    other = lk.open_table(t.path, options=opts)
    original = metadata_table.MetadataTableReader.__init__
    done: list[bool] = []

    def racing(self, *a, **kw):
        if moment == "after_mdt_read":
            original(self, *a, **kw)
        if not done:
            done.append(True)
            other.upsert(df([(1, "y", 90, "w")]))
            if built == "meanwhile":
                other.maintenance.create_index("record")
        if moment == "before_mdt_read":
            original(self, *a, **kw)
    r = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=True, concurrency="optimistic",
                                                      metadata_compact_every=2, index_type="record"))
    monkeypatch.setattr(metadata_table.MetadataTableReader, "__init__", racing)
    try:
        r.upsert(df([(1, "z", 99, "r")]))
    except lk.WriteConflictError:
        pass
    monkeypatch.undo()
    assert done
    got = lk.open_table(t.path).read().to_pandas()
    assert got.id.is_unique, sorted(zip(got.id, got.p))
    assert helpers.hudi_rows(t.path, cols=COLS) == ours(lk.open_table(t.path))


@pytest.mark.parametrize("scope", ["partitions", "table"])
@pytest.mark.parametrize("undo", ["rollback", "restore"])
def test_undoing_an_overwrite_that_wrote_no_file_names_the_replaced_keys_again(tmp_path, scope, undo):
    """An insert overwrite whose rows are all flagged deleted writes no file and replaces the
    file groups it overwrites (their keys leave the index); undone, it deleted no file, and the
    index names those keys again (it kept none: an upsert of them then stored them twice;
    found by the model test: on a table without partitions, where no partition statistics
    changed either, the undo had no MDT delta commit)."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("r", key="id", ordering="ts", index="record")
    first = t.insert(df([(k, "a", 0, "w0") for k in range(3)]))
    if undo == "restore":
        t.maintenance.savepoint(first.instant)
    flagged = df([(0, "a", 1, "gone")]).assign(_hoodie_is_deleted=True)
    over = t.insert_overwrite(flagged, scope=scope)
    assert ours(t) == [] and not over.files
    if undo == "rollback":
        t.maintenance.rollback(over.instant)
    else:
        t.maintenance.restore(first.instant)
    assert_index_exact(t)
    t.upsert(df([(1, "a", 2, "w2")]))
    assert_index_exact(t)
    assert ours(t) == [(0, "a", 0, "w0"), (1, "a", 2, "w2"), (2, "a", 0, "w0")]
