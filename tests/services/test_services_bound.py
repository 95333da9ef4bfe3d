"""Table services keep a table bounded: many upserts with inline clustering, inline clean and
archival leave a number of files that depends on the settings, not on the number of commits;
and a restore to a savepoint still gives exactly the savepointed rows after later commits,
cleans and clusterings.  Local engine, tiny batches; the reference is a plain dict fold."""

from __future__ import annotations

import os
from functools import partial

import pandas as pd
import pytest

import lakesdk as lk

from .. import helpers

ID_P_V = ("id", "p", "v")
rows = partial(helpers.rows, cols=ID_P_V)           # this module's rows: (id, p, v)
hudi_rows = partial(helpers.hudi_rows, cols=ID_P_V)

PARTS = ("a", "b")


def ref_rows(ref):
    return sorted((k, p, v) for (k, p), v in ref.items())


def counts(path):
    """(data files, active timeline files) on storage."""
    data = 0
    for _root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        data += sum(1 for f in files if f.endswith(".parquet") or ".log." in f)
    tl = os.path.join(path, ".hoodie", "timeline")
    return data, sum(1 for e in os.scandir(tl) if e.is_file())


def step(n):
    """Commit n: 2 new keys per partition and 2 updates per partition of keys written earlier."""
    recs = []
    for p in PARTS:
        recs += [(f"{p}{n:04d}{j}", p, n, float(n)) for j in range(2)]
        if n:
            recs += [(f"{p}{(n * 7 + j) % n:04d}{j}", p, n, float(-n)) for j in range(2)]
    return pd.DataFrame(recs, columns=["id", "p", "ts", "v"])


def fold(ref, df):
    for r in df.itertuples():
        ref[(r.id, r.p)] = r.v


@pytest.mark.slow
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_200_upserts_with_inline_clean_clustering_and_archival_stay_bounded(tmp_path, table_type):
    K, R = 5, 2                 # cluster after every K commits; clean retains R commits
    MIN, MAX = 4, 8             # archival keeps MIN..MAX completed commits active
    P = len(PARTS)
    opts = lk.TableOptions(engine="local", markers="direct", small_file_limit=0,   # inserts: new file groups
                           cluster_every=K, cluster_small_file_limit=1 << 20,
                           clean_after_write=True, clean_retain_commits=R,
                           compact_every=3 if table_type == "mor" else None)
    t = lk.Lake(str(tmp_path), options=opts).create_table("bounded", key="id", partition_by="p", ordering="ts",
                                                          table_type=table_type)
    # The bound.  Between clusterings a partition has at most K + 1 live file groups (the last
    # clustering's output and one new file group per commit).  Each commit writes at most
    # K + 2 files per partition (the new file group, one new version per live file group it
    # updates: base files on COW, log files on MOR; compaction and clustering write fewer).
    # The clean after each write keeps the files of the last R commits plus, per file group
    # alive at its earliest retained commit, one older slice (a merge-on-read slice is a base
    # file and up to compact_every log files).  So data files <= P * (R*(K+2) + (K+1)*S) with
    # S = 1 on COW and 1 + 3 on MOR.
    S = 1 if table_type == "cow" else 4
    data_bound = P * (R * (K + 2) + (K + 1) * S)
    # Timeline: each commit, delta commit, clean, clustering and compaction is 3 files.  Archival
    # keeps at most MAX commits active, held back by up to R + 1 more while a clustering's
    # replaced files wait for the clean: W = MAX + R + 1 commits.  Each brings its inline clean
    # (archived with it); a clustering comes every K commits, a compaction every 3 delta commits.
    W = MAX + R + 1
    timeline_bound = 3 * (2 * W + -(-W // K) + (-(-W // 3) if table_type == "mor" else 0))
    ref: dict = {}
    peak = (0, 0)
    for n in range(200):
        df = step(n)
        t.upsert(df)
        fold(ref, df)
        t.maintenance.archive(min_commits=MIN, max_commits=MAX)
        d, tl = counts(t.path)
        peak = (max(peak[0], d), max(peak[1], tl))
        assert d <= data_bound, f"commit {n}: {d} data files > bound {data_bound}"
        assert tl <= timeline_bound, f"commit {n}: {tl} timeline files > bound {timeline_bound}"
        assert len(t.inspect.file_groups()) <= P * (K + 1)
        if n % 10 == 9:
            assert rows(t.read()) == ref_rows(ref), f"after commit {n}"
        if n in (49, 149):
            assert hudi_rows(t.path) == ref_rows(ref), f"hudi reader after commit {n}"
    assert rows(t.read()) == ref_rows(ref) == hudi_rows(t.path)
    tl = t.timeline
    assert sum(1 for i in tl if i.action == "clustering") >= 1
    hist = t.history()
    assert hist["operation"].to_pylist().count("CLUSTER") >= 200 // (K + 1) - 1       # clustered all along
    assert len(ref) == 200 * 2 * P and peak[0] <= data_bound


@pytest.mark.slow
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_restore_to_savepoint_after_20_commits_with_clean_and_clustering(tmp_path, table_type):
    opts = lk.TableOptions(engine="local", markers="direct", small_file_limit=0, cluster_every=4,
                           cluster_small_file_limit=1 << 20, clean_after_write=True, clean_retain_commits=2,
                           compact_every=3 if table_type == "mor" else None)
    t = lk.Lake(str(tmp_path), options=opts).create_table("sp", key="id", partition_by="p", ordering="ts",
                                                          table_type=table_type)
    ref: dict = {}
    for n in range(6):
        df = step(n)
        t.upsert(df)
        fold(ref, df)
    sp = t.maintenance.savepoint()
    expected = ref_rows(ref)
    assert rows(t.read()) == expected
    for n in range(6, 26):                    # 20 later commits: updates, inserts, a delete
        if n == 15:
            t.delete([k for k, _ in list(ref)[:3]])
        else:
            t.upsert(step(n))
    actions = [i.action for i in t.timeline]
    assert actions.count("clustering") >= 3 and actions.count("clean") >= 3
    store = t.context.store
    from lakesdk.format.clean_metadata import CleanMetadataData
    cleaned = [CleanMetadataData.parse(store.read_bytes(i)) for i in t.timeline if i.action == "clean"]
    assert sum(md.total_deleted for md in cleaned) > 0              # cleans deleted files in between
    assert rows(t.as_of(sp.instant)) == expected                    # the savepoint survived cleaning
    t.maintenance.restore(sp)
    assert rows(t.read()) == expected == hudi_rows(t.path)
    t.upsert(step(99))                        # the table keeps working after the restore
    fold(ref, step(99))
    assert rows(t.read()) == ref_rows(ref)
