"""Building the metadata table, or a partition of it, as Apache Hudi does: the partitions are
named inflight in ``hoodie.properties`` while they are built and readers trust the built ones
only; a writer killed at each step of a build leaves every reader (lakesdk and the ``hudi``
reader) with the last completed commit and the partitions still named, and the next writer,
even one that only keeps what the table has (``metadata=None``), builds them again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakesdk as lk
from lakesdk import _faults as faults
from lakesdk.commit.table_properties import read_properties
from lakesdk.format.metadata_table import available_partitions, inflight_partitions, metadata_partitions

from ..helpers import hudi_rows, rows

#: what is built: a partition of an MDT whose files partition is built (partition_stats
#: turned on by a write; the record index asked for), or the whole MDT (a table without one)
MODES = {"stats": ("partition_stats", {"metadata": True, "metadata_partition_stats": False}),
         "record": ("record_index", {"metadata": True}),
         "whole": ("files", {"metadata": False})}
POINTS = ["metadata_partitions_inflight", "metadata_partition_written", "metadata_partition_committed"]

BUILDER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pyarrow.parquet as pq
    import lakesdk as lk
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local", metadata=True))
    if sys.argv[3] == "record":
        t.maintenance.create_index("record")
    else:
        t.upsert(pq.read_table(sys.argv[2]))
    print("BUILT")
""")


def batch(i: int, ids=(1, 2, 3)) -> pa.Table:
    return pa.table({"id": list(ids), "p": ["a" if k % 2 else "b" for k in ids], "ts": [i] * len(ids),
                     "v": [f"v{i}"] * len(ids)})


def _table(tmp_path: Path, mode: str, table_type: str = "cow") -> lk.Table:
    opts = MODES[mode][1]
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", **opts))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(3, 4, 5)))
    return t


def _props(t: lk.Table) -> dict[str, str]:
    return read_properties(t.storage)[1].props


def _agree(t: lk.Table, expected: list[tuple], what: str) -> None:
    fresh = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=None))
    assert rows(fresh.read()) == expected, f"lakesdk {what}"
    assert hudi_rows(t.path) == expected, f"the hudi reader {what}"
    report = fresh.inspect.check()
    assert report.ok, f"lakesdk check {what}: {report}"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_read_while_the_mdt_is_built_takes_the_last_commit_from_what_is_built(mode, tmp_path):
    """A writer held with the partition's base files written (its delta commit pending): the
    partition is named inflight only, reads (lakesdk's, planned then, and the ``hudi`` reader's)
    answer with the last completed commit; released, the partition is built and trusted."""
    part = MODES[mode][0]
    t = _table(tmp_path, mode)
    before = rows(t.read())
    assert part not in metadata_partitions(_props(t))
    errors: list[BaseException] = []

    def build() -> None:
        try:
            h = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=True))
            h.maintenance.create_index("record") if mode == "record" else h.upsert(batch(2, ids=(1, 6)))
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    with faults.hold_at("metadata_partition_written") as hold:
        writer = threading.Thread(target=build)
        writer.start()
        assert hold.wait_for(1), "the build reached its files written"
        props = _props(t)
        assert part in inflight_partitions(props) and part not in available_partitions(props)
        _agree(t, before, "while the MDT is built")
    writer.join(120)
    assert not writer.is_alive() and not errors, errors
    props = _props(t)
    assert part in available_partitions(props) and not inflight_partitions(props)
    after = before if mode == "record" else sorted({**dict(before), 1: "v2", 6: "v2"}.items())
    _agree(t, after, "after the build")


def _kill(t: lk.Table, mode: str, point: str, tmp_path: Path) -> None:
    pq.write_table(batch(2, ids=(1, 6)), tmp_path / "batch.parquet")
    env = {**os.environ, "LAKESDK_CRASH_AT": point}
    r = subprocess.run([sys.executable, "-c", BUILDER, t.path, str(tmp_path / "batch.parquet"), mode],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == -9, f"the builder was not killed at {point}: rc={r.returncode}\n{r.stderr[-3000:]}"


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("mode,table_type", [("stats", "cow"), ("stats", "mor"), ("record", "cow"),
                                             ("whole", "cow"), ("whole", "mor")])
def test_a_build_killed_at_each_step_is_built_again_by_the_next_writer(mode, table_type, point, tmp_path):
    """Killed at each step of the build (named inflight; its files written; its delta commit
    completed): readers answer with the last completed commit, ``lakesdk check`` finds nothing,
    the partition is still named (inflight, not trusted); the next writer keeping only what
    the table has builds it again, and the MDT then agrees with storage (the record index
    names the file group of every key)."""
    from ..corpus_model import check_mdt
    part = MODES[mode][0]
    t = _table(tmp_path, mode, table_type)
    before = rows(t.read())
    _kill(t, mode, point, tmp_path)
    props = _props(t)
    assert part in metadata_partitions(props) and part not in available_partitions(props), props
    if mode != "whole":
        assert "files" in available_partitions(props), "the files partition stays trusted"
    _agree(t, before, f"after a kill at {point}")
    nxt = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=None))
    nxt.upsert(batch(3, ids=(2, 7)))
    props = _props(t)
    assert part in available_partitions(props) and not inflight_partitions(props), props
    after = sorted({**dict(before), 2: "v3", 7: "v3"}.items())
    _agree(t, after, f"after a kill at {point} and the next write")
    check_mdt(t.path, f"after a kill at {point} and the next write")
    if mode == "record":
        from ..index.test_record_index import assert_index_exact
        assert_index_exact(lk.open_table(t.path))
    mdt = lk.open_table(t.path).maintenance.create_metadata_table()
    assert not mdt.store.load().pending, "nothing of the killed build is pending"


def _after_first_mdt_snapshot(monkeypatch, then) -> None:
    """Run ``then`` once, right after the first metadata table reader of the process read the
    MDT's timeline (its snapshot), before the plan reads ``hoodie.properties`` again."""
    from lakesdk.read import metadata_table
    original = metadata_table.MetadataTableReader.__init__
    done: list[bool] = []

    def snapshot_then(self, *a, **kw):
        original(self, *a, **kw)
        if not done:
            done.append(True)
            then()
    monkeypatch.setattr(metadata_table.MetadataTableReader, "__init__", snapshot_then)


def test_an_index_built_after_a_writers_mdt_snapshot_is_not_taken_for_empty(tmp_path, monkeypatch):
    """A writer's plan reads the MDT, then another process builds the record index, then the
    plan reads ``hoodie.properties``, which names it built: the writer's snapshot holds none of
    its files, so its lookups do not tell "no such key" (keys moved to another partition were
    stored twice); it tags through every file group instead."""
    opts = lk.TableOptions(engine="local", metadata=True, concurrency="optimistic")
    t = lk.Lake(str(tmp_path), options=opts).create_table("t", key="id", partition_by="p", ordering="ts",
                                                         index="global")
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(4, 5)))
    other = lk.open_table(t.path, options=opts)
    _after_first_mdt_snapshot(monkeypatch, lambda: other.maintenance.create_index("record"))
    moved = pa.table({"id": [1, 2], "p": ["z", "z"], "ts": [50, 50], "v": ["v50", "v50"]})
    lk.open_table(t.path, options=opts).upsert(moved)
    monkeypatch.undo()
    got = lk.open_table(t.path).read().to_pandas()
    assert got.id.is_unique, sorted(zip(got.id, got.p))
    assert dict(zip(got.id, got.p))[1] == "z"
    assert hudi_rows(t.path) == rows(got)


def test_a_plan_with_a_config_older_than_a_whole_build_never_reads_it_half_done(tmp_path, monkeypatch):
    """A handle whose config names the MDT built (read before another writer dropped it) plans
    while the MDT is built again: its MDT snapshot is of the build's files before their delta
    commit completed, and the build completes before the plan reads ``hoodie.properties``
    again.  The plan reads the MDT again (or lists storage), never the empty listing of its
    snapshot (a false DataFileMissingError)."""
    t = _table(tmp_path, "stats")
    h = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=None))
    with pytest.warns(lk.MetadataTableDroppedWarning):
        lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=False)).upsert(batch(2, ids=(6,)))
    expected = rows(lk.open_table(t.path).read())
    builder = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=True))
    hold = faults.hold_at("metadata_partition_written")
    writer = threading.Thread(target=builder.maintenance.create_metadata_table)
    writer.start()
    assert hold.wait_for(1), "the build reached its files written"

    def finish() -> None:
        hold.release()
        writer.join(120)
    _after_first_mdt_snapshot(monkeypatch, finish)
    assert rows(h.read()) == expected
    assert not writer.is_alive()


@pytest.mark.parametrize("version", [8, 9])
def test_a_partition_built_alone_keeps_two_slices_through_the_mdt_clean(tmp_path, version):
    """The record index built alone (at ``00000000000000001``) into an MDT compacted twice
    already: the clean after the next compaction keeps both of its slices (a reader of the MDT
    before that compaction still finds its base files), the one after the compaction then drops
    the first; the index stays exact and every partition agrees with storage."""
    from ..corpus_model import check_mdt
    from ..index.test_record_index import assert_index_exact
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", metadata_compact_every=2))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_version=version)
    for i in range(6):
        t.upsert(batch(i, ids=(i, 10 + i)))
    t.maintenance.create_index("record")
    index = Path(t.path) / ".hoodie/metadata/record_index"

    def bases() -> set[str]:
        return {n.name.rpartition("_")[2].split(".")[0] for n in index.glob("*.hfile")}
    assert bases() == {"00000000000000001"}
    seen = []
    for i in range(6, 12):
        t.upsert(batch(i, ids=(1, 20 + i)))
        seen.append(bases())
        assert_index_exact(lk.open_table(t.path))
    assert any(len(b) == 2 and "00000000000000001" in b for b in seen), seen
    assert "00000000000000001" not in seen[-1], seen
    check_mdt(t.path, "after the clean")
    assert rows(lk.open_table(t.path).read()) == hudi_rows(t.path)
