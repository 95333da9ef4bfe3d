"""lakesdk writes into tables Apache Hudi wrote: every table of the corpus (table versions 6, 8
and 9, copy-on-write and merge-on-read, every key generator lakesdk writes, with and without
Hudi's metadata table), after each action lakesdk completes on it (writes of every kind, a
merge, the table services, a failed write rolled back): lakesdk and the ``hudi`` reader return
the rows of a model (the rows before, with the action applied), and then again after one more
upsert.

On a table of version 8 or 9 with a metadata table (MDT), lakesdk keeps its ``files``
partition (lakesdk.services.metadata_writer): after every action it lists exactly the files of
the completed instants, and the ``hudi`` reader, which lists files from it, agrees with the
model; the partitions lakesdk does not maintain yet are dropped alone, and the user told once.
A version 6 table's MDT is dropped (lakesdk.services.metadata_table): ``hoodie.properties``
names no MDT partition, ``.hoodie/metadata`` is gone and the user was told once.

Left out, each with a test of its own: Lance tables and tables partitioned by a time their key
generator formats (lakesdk refuses those writes: tests/metadata_table/test_never_stale.py,
tests/interop/test_lance.py, tests/read/test_partition_values.py), merge-on-read tables of version 6 and
tables without meta fields (refused: the last test here), tables without rows (nothing to
update).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import lakesdk as lk
from lakesdk.format.metadata_table import INFLIGHT_KEY, PARTITIONS_KEY, metadata_partitions

from ..corpus_model import (
    LANCE,
    MDT_TABLES,
    MOR,
    OPS,
    TABLES,
    TIMED,
    Model,
    check_mdt,
    copy_table,
    kept_partitions,
    mdt_state,
    prepare,
    prepares_writes,
    run_op,
)

#: tables lakesdk writes into, with rows
WRITABLE = sorted(rel for rel, cfg in TABLES.items() if rel not in LANCE and rel not in TIMED and not rel.endswith("_empty")
                  and cfg.populate_meta_fields and (cfg.version >= 8 or not cfg.is_mor))


@pytest.mark.interop
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("rel", WRITABLE)
def test_every_action_on_a_hudi_written_table_agrees_with_the_model_and_the_hudi_reader(
        corpus, rel, op, tmp_path, monkeypatch):
    if op == "compaction" and rel not in MOR:
        pytest.skip("compaction is for merge-on-read tables")
    path = copy_table(corpus, rel, tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    m.check(path, "before (with an MDT the hudi reader lists from it)")
    named = metadata_partitions(TABLES[rel].props)
    kept = TABLES[rel].version >= 8      # kept, or built from a listing (metadata=True, the default)
    assert bool(mdt_state(path)[0]) == bool(mdt_state(path)[1]) == (rel in MDT_TABLES)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        prepare(op, t, m, path, tmp_path)
        run_op(op, t, m, monkeypatch)
    dropped = [w for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    if kept:
        # the MDT kept (or built where the table had none); the partitions lakesdk does not maintain
        # dropped alone, the user told once (by the preparatory writes, which are told nothing here, when the action has some)
        extra = set(named) - set(kept_partitions(path))
        if extra and not prepares_writes(op):
            assert len(dropped) == 1 and set(dropped[0].message.partitions) == extra, [str(w.message) for w in dropped]
        else:
            assert not dropped
        assert mdt_state(path) == (kept_partitions(path), True)
        check_mdt(path, f"after {op}")
    elif rel in MDT_TABLES:
        assert len(dropped) == 1, [str(w.message) for w in dropped]
        assert set(dropped[0].message.partitions) == set(named)
        assert "files" in str(dropped[0].message) and t.name in str(dropped[0].message)
        props = (Path(path) / ".hoodie/hoodie.properties").read_text()
        assert f"{PARTITIONS_KEY}=\n" in props and f"{INFLIGHT_KEY}=\n" in props
        assert mdt_state(path) == ((), False), "hoodie.properties names no MDT partition and no MDT is left"
    else:
        assert not dropped and mdt_state(path) == ((), False)
    assert not (Path(path) / ".hoodie/hoodie.properties.backup").exists()
    m.check(path, f"after {op}")
    if not m.rows:
        return   # the delete of a table's one row
    # the next action keeps the MDT (or finds none) and says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        row = m.updated(m.first())
        t.upsert(m.table([row]))
        m.put(row)
    m.check(path, f"after {op} and an upsert")
    check_mdt(path, f"after {op} and an upsert")


#: tables whose data files lakesdk does not write as Hudi would: read-only to lakesdk
READ_ONLY = sorted(rel for rel in TABLES if rel not in LANCE and not rel.endswith("_empty") and (
    not TABLES[rel].populate_meta_fields or (TABLES[rel].version < 8 and TABLES[rel].is_mor)))


def test_the_read_only_tables_are_the_version_6_mor_and_no_meta_field_tables():
    assert len(READ_ONLY) == 10 and not set(READ_ONLY) & set(WRITABLE)


@pytest.mark.parametrize("rel", READ_ONLY)
def test_writes_into_tables_lakesdk_does_not_write_are_refused_before_anything_is_written(corpus, rel, tmp_path):
    """Merge-on-read tables of version 6 (log files named by their slice's base instant and
    appended to) and tables without meta fields: every write and every service that writes data
    files is refused with a typed error, and no file of the table changes."""
    path = copy_table(corpus, rel, tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    before = {str(f.relative_to(path)): f.read_bytes() for f in Path(path).rglob("*") if f.is_file()}
    rows = m.table([m.updated(m.first()), m.new()])
    calls = [t.upsert, t.insert, t.bulk_insert, t.insert_overwrite, t.delete,
             lambda d: t.merge(d).when_matched_update_all().when_not_matched_insert_all().execute(),
             lambda d: t.maintenance.cluster(small_file_limit=1 << 40)]
    if rel in MOR:
        calls.append(lambda d: t.maintenance.compact())
    for call in calls:
        with pytest.raises(lk.TableConfigError) as err:
            call(rows)
        assert err.value.key in ("hoodie.table.version", "hoodie.populate.meta.fields")
    after = {str(f.relative_to(path)): f.read_bytes() for f in Path(path).rglob("*") if f.is_file()}
    assert after == before
    m.check(path, "after the refused writes")
