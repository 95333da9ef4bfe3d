"""Hudi's metadata table (MDT) is never left stale: kept (lakesdk.services.metadata_writer) or
dropped (lakesdk.services.metadata_table).  Each action on every Hudi-written table with an MDT
is tested in tests/interop/test_writes_into_hudi_tables.py; here: reads, refused writes and failed
writes before their commit point leave the MDT as it was, the upgrade, leftovers, and the
tables whose writes lakesdk refuses.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import lakesdk as lk
from lakesdk.format.metadata_table import METADATA_DIR
from lakesdk.format.table_config import TableConfig

from ..corpus_model import (
    LANCE,
    MDT_TABLES,
    TIMED,
    Model,
    check_mdt,
    copy_table,
    digest,
    kept_partitions,
    mdt_state,
)

PARQUET = sorted(rel for rel, cfg in MDT_TABLES.items() if cfg.base_file_format == "PARQUET")
MDT_LANCE = sorted(set(MDT_TABLES) & set(LANCE))
MDT_TIMED = sorted(set(MDT_TABLES) & set(TIMED))
WRITABLE = sorted(set(PARQUET) - set(TIMED))


def test_the_corpus_has_the_tables_with_an_mdt():
    """The v8 trips table and the v9 tables written with the MDT on (the six txns tables among them)."""
    assert len(PARQUET) == 14 and len(MDT_LANCE) == 6 and len(MDT_TIMED) == 4
    assert "quickstart_trips_table/mor/avro/v8_trips_8i3u1d" in PARQUET
    assert {f"sample_table/{tt}/v9_txns_{k}_meta" for tt in ("cow", "mor/avro")
            for k in ("simple", "complex", "nonpart")} <= set(PARQUET)


@pytest.mark.interop
@pytest.mark.parametrize("rel", ["quickstart_trips_table/mor/avro/v8_trips_8i3u1d", "sample_table/cow/v9_txns_simple_meta",
                                 "sample_table/mor/avro/v9_txns_complex_meta"])
def test_reads_and_refused_writes_leave_the_mdt_as_it_was(corpus, rel, tmp_path):
    path = copy_table(corpus, rel, tmp_path)
    before = digest(path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        m = Model(t)
        commits = t.timeline.commits
        t.as_of(commits[0].requested).to_arrow()
        t.incremental(commits[0].completed).to_arrow()
        t.history()
        t.inspect.file_groups()
        t.inspect.check()
        with pytest.raises(lk.MissingColumnError):     # refused before anything is written
            t.upsert(m.table([m.new()]).drop_columns([m.changeable]))
        with pytest.raises(lk.NullKeyError):
            bad = m.new()
            bad.update({f: None for f in t.context.config.record_key_fields})
            t.upsert(m.table([bad]))
    assert digest(path) == before


@pytest.mark.parametrize("rel", MDT_LANCE)
def test_a_refused_write_on_a_lance_table_keeps_its_mdt(corpus, rel, tmp_path):
    """lakesdk writes no Lance base file: the write is refused before its instant exists, and
    the MDT stays."""
    path = copy_table(corpus, rel, tmp_path)
    before = digest(path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    with pytest.raises(lk.TableConfigError, match="LANCE"):
        t.upsert(t.read().to_arrow().slice(0, 1))
    assert digest(path) == before and mdt_state(path)[1]


@pytest.mark.interop
def test_upgrade_to_version_9_builds_a_version_9_mdt(corpus, tmp_path):
    """Apache Hudi upgrades the MDT with the table; lakesdk drops the version 8 one and builds a
    version 9 one from a listing (its files and column statistics): the indexes it does not
    build are lost, and it says so."""
    path = copy_table(corpus, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    named = mdt_state(path)[0]
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        new = t.maintenance.upgrade()
    lost = set(named) - set(kept_partitions(path))
    dropped = [w.message for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    assert [set(w.partitions) for w in dropped] == ([lost] if lost else [])
    assert new.version == 9 and mdt_state(path) == (kept_partitions(path), True)
    assert TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes()).version == 9
    m.check(path, "after the upgrade")
    check_mdt(path, "after the upgrade")


def test_an_mdt_folder_no_config_names_is_deleted_by_the_next_action(lake, tmp_path):
    """The folder an interrupted drop left (hoodie.properties already cleared) goes with the next
    commit, silently: it was no MDT any reader trusted."""
    t = lake.create_table("t", key="id", ordering="ts", table_type="cow").with_options(engine="local", metadata=None)
    t.upsert({"id": [1], "ts": [1], "v": ["a"]})
    assert mdt_state(t.path) == ((), False)       # metadata=None on a new table: none is built
    (Path(t.path) / METADATA_DIR / "files").mkdir(parents=True)
    (Path(t.path) / METADATA_DIR / "files" / "x.hfile").write_bytes(b"left over")
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        t.upsert({"id": [2], "ts": [1], "v": ["b"]})
    assert mdt_state(t.path) == ((), False)
    (Path(t.path) / METADATA_DIR / "files").mkdir(parents=True)
    (Path(t.path) / METADATA_DIR / "files" / "x.hfile").write_bytes(b"left over")
    t.with_options(metadata=True).upsert({"id": [3], "ts": [1], "v": ["c"]})   # built anew, the folder replaced
    assert mdt_state(t.path)[0] and not (Path(t.path) / METADATA_DIR / "files" / "x.hfile").exists()


@pytest.mark.interop
@pytest.mark.parametrize("rel", MDT_TIMED)
def test_time_partitioned_tables_refuse_writes_with_their_mdt_kept_and_delete_by_key(corpus, rel, tmp_path):
    """A TimestampBasedKeyGenerator formats a time into the partition path, which lakesdk does not
    compute yet: every write that needs a row's partition path is refused before anything is
    written (MDT included); a delete by key values alone finds its keys in any partition."""
    path = copy_table(corpus, rel, tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    before = digest(path)
    rows = m.table([m.updated(m.first()), m.new()])
    for write in (t.upsert, t.insert, t.bulk_insert, t.insert_overwrite, t.delete,
                  lambda d: t.merge(d).when_matched_update_all().when_not_matched_insert_all().execute()):
        with pytest.raises(lk.TableConfigError, match="does not compute their partition paths"):
            write(rows)
    assert digest(path) == before
    key = m.first()[t.context.config.record_key_fields[0]]
    named = mdt_state(path)[0]
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        t.delete([key])
    m.rows = [r for r in m.rows if r[t.context.config.record_key_fields[0]] != key]
    dropped = [w for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    assert len(dropped) == (1 if set(named) - set(kept_partitions(path)) else 0)
    assert mdt_state(path) == (kept_partitions(path), True)   # the partitions lakesdk keeps kept
    check_mdt(path, "after a delete by key")
    m.check(path, "after a delete by key")
