"""Change queries (``t.changes(start, end)``, lakesdk.read.changes): generated operation
sequences on both table types against a model; every commit's changes are the difference of
the model's states before and after it, every delete and every before-image right."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk import _faults as faults
from lakesdk.exceptions import TimeTravelError
from lakesdk.format.cdc import diff_records
from lakesdk.format.log_block import read_log_file
from lakesdk.format.log_framing import BlockType
from lakesdk.read.changes import iter_changes, plan_changes

PARTS = ("a", "b", "c")
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _batch(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _part(k: int) -> str:
    return PARTS[k % len(PARTS)]


keys = st.lists(st.integers(0, 11), min_size=1, max_size=6, unique=True)
ops = st.one_of(
    st.tuples(st.just("upsert"), keys, st.integers(0, 3)),
    st.tuples(st.just("delete"), keys, st.just(0)),
    st.tuples(st.just("overwrite"), keys, st.integers(0, 3)),
    st.tuples(st.just("merge"), keys, st.integers(0, 3)),
    st.tuples(st.just("insert"), keys, st.integers(0, 3)),
    st.tuples(st.just("fail"), keys, st.integers(0, 3)),
    st.tuples(st.just("compact"), st.just([]), st.just(0)),
    st.tuples(st.just("cluster"), st.just([]), st.just(0)),
)


class Model:
    """The table's records by key, and the changes each commit made."""

    def __init__(self) -> None:
        self.rows: dict[int, list[dict]] = {}      # a key held twice (inserted again) has two records
        self.changes: list[tuple[str, list[tuple]]] = []     # (instant, sorted rows)
        self.n = 0

    def fresh(self, k: int, ts: int) -> dict:
        self.n += 1
        return {"id": k, "p": _part(k), "ts": ts, "v": f"v{self.n}"}

    def upsert(self, batch: list[dict]) -> list[tuple]:
        out = []
        for r in batch:
            olds = self.rows.get(r["id"])
            if not olds:
                out.append(("i", None, r))
                self.rows[r["id"]] = [r]
                continue
            kept = []
            for old in olds:     # every stored copy is updated, unless it wins on its ordering value
                if r["ts"] >= old["ts"]:
                    out.append(("u", old, r))
                    kept.append(r)
                else:
                    kept.append(old)
            self.rows[r["id"]] = kept
        return out

    def delete(self, ks: list[int]) -> list[tuple]:
        out = []
        for k in ks:
            out += [("d", r, None) for r in self.rows.pop(k, [])]
        return out

    def merge(self, batch: list[dict]) -> list[tuple]:
        """A merge deleting the matched keys (event-time ordering applies) and inserting the others."""
        out = []
        for r in batch:
            if r["id"] in self.rows:
                # a delete with a smaller ordering value than a stored copy's leaves that copy
                olds = self.rows.pop(r["id"])
                out += [("d", old, None) for old in olds if old["ts"] <= r["ts"]]
                kept = [old for old in olds if old["ts"] > r["ts"]]
                if kept:
                    self.rows[r["id"]] = kept
            else:
                out.append(("i", None, r))
                self.rows[r["id"]] = [r]
        return out

    def insert(self, batch: list[dict]) -> list[tuple]:
        """An insert of stored keys keeps both copies, as Hudi's insert does."""
        for r in batch:
            self.rows.setdefault(r["id"], []).append(r)
        return [("i", None, r) for r in batch]

    def overwrite(self, batch: list[dict]) -> list[tuple]:
        """insert_overwrite of the batch's partitions: every record there deleted, the batch inserted."""
        parts = {r["p"] for r in batch}
        out = [("d", r, None) for rs in self.rows.values() for r in rs if r["p"] in parts]
        self.rows = {k: rs for k, rs in self.rows.items() if rs[0]["p"] not in parts}
        for r in batch:
            out.append(("i", None, r))
            self.rows[r["id"]] = [r]
        return out


def _rows(t: pa.Table) -> list[tuple]:
    return _expected([(r["op"], r["before"], r["after"]) for r in t.to_pylist()])


def _expected(model_rows: list[tuple]) -> list[tuple]:
    """The changes as a multiset (a key held twice pairs its copies in any order)."""
    return sorted(model_rows, key=lambda x: ((x[2] or x[1])["id"], x[0], repr(x)))


def _run(t, model: Model, op: str, ks: list[int], ts: int, table_type: str) -> str | None:
    """Apply one operation to the table and the model: the commit it made (None: no commit)."""
    if op == "upsert":
        batch = [model.fresh(k, ts) for k in ks]
        expect = model.upsert(batch)
        res = t.upsert(_batch(batch))
    elif op == "delete":
        expect = model.delete(ks)
        res = t.delete(ks)
    elif op == "overwrite":
        batch = [model.fresh(k, ts) for k in ks]
        # a key moving in from another partition is deleted there first (the partitions are by key)
        expect = model.overwrite(batch)
        res = t.insert_overwrite(_batch(batch))
    elif op == "merge":
        batch = [model.fresh(k, ts) for k in ks]
        expect = model.merge(batch)
        res = (t.merge(_batch(batch)).when_matched_delete().when_not_matched_insert_all().execute())
    elif op == "insert":
        batch = [model.fresh(k, ts) for k in ks]
        expect = model.insert(batch)
        res = t.insert(_batch(batch))
    elif op == "fail":
        # a write that fails after its files are written: rolled back, no changes
        def crash(point: str) -> None:
            if point == "after_data":
                raise RuntimeError("a failed write")
        with mock.patch.object(faults, "crash_point", crash), pytest.raises(RuntimeError):
            t.upsert(_batch([model.fresh(k, ts) for k in ks]))
        return None
    elif op == "compact":
        if table_type == "mor":
            t.maintenance.compact()
        return None
    else:
        t.maintenance.cluster(small_file_limit=1 << 30)
        return None
    if res is None or not getattr(res, "instant", None):
        assert not expect
        return None
    model.changes.append((res.instant, expect))
    return res.instant


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(steps=st.lists(ops, min_size=2, max_size=7), table_type=st.sampled_from(["cow", "mor"]),
       cdc=st.sampled_from([False, "data_before_after", "data_before", "op_key_only"]), data=st.data())
def test_changes_of_each_commit_are_the_models_difference(tmp_path_factory, steps, table_type, cdc, data):
    """Each logging mode, and none: the changes are the same; the CDC log files a
    copy-on-write write left hold exactly its changes of their file group, in the mode's shape."""
    lake = lk.Lake(str(tmp_path_factory.mktemp("changes")), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type, cdc=cdc)
    model = Model()
    for op, ks, ts in steps:
        _run(t, model, op, ks, ts, table_type)
    got = t.changes().to_arrow()
    by_commit: dict[str, list[tuple]] = {}
    for row in got.to_pylist():
        by_commit.setdefault(row["ts_ms"], []).append(row)
    for instant, expect in model.changes:
        assert _rows(pa.Table.from_pylist(by_commit.pop(instant, []), schema=got.schema)) == _expected(expect), instant
    assert not by_commit, f"changes of commits the model did not make: {sorted(by_commit)}"
    check_cdc_logs(t, got, cdc)
    # the changes read from the CDC logs are those inferred from the file groups
    inferred = pa.Table.from_batches(list(iter_changes(t.context, plan_changes(t.context, None, None,
                                                                                use_cdc_logs=False))),
                                     schema=got.schema)
    assert _rows(inferred) == _rows(got)
    report = t.inspect.check()          # no CDC log left over by a failed write, the MDT lists them
    assert report.ok, report
    # a range: the commits in it, in commit order
    if len(model.changes) >= 2:
        i = data.draw(st.integers(0, len(model.changes) - 2))
        j = data.draw(st.integers(i + 1, len(model.changes) - 1))
        commits = {c.requested: c for c in t.timeline.completed}
        start, end = commits[model.changes[i][0]].completed, commits[model.changes[j][0]].completed
        ranged = t.changes(start, end).to_arrow()
        want = [inst for inst, rows in model.changes[i + 1:j + 1] if rows]
        assert list(dict.fromkeys(ranged.column("ts_ms").to_pylist())) == want


def check_cdc_logs(t, changes: pa.Table, cdc) -> None:
    """Every CDC log file a commit records holds the changes of that commit to its file group
    (op, key and images as the mode keeps them); none is written without CDC on."""
    logged = 0
    for inst in t.timeline.commits:
        for stat in t.inspect.commit_metadata(inst.requested).write_stats:
            for path in stat.cdcStats or {}:
                assert cdc, f"a CDC log {path} in a table without CDC"
                blocks = read_log_file(t.storage.read(path))
                assert [b.block_type for b in blocks] == [BlockType.CDC_DATA]
                recs = blocks[0].records().to_pylist()
                mine = [r for r in changes.to_pylist() if r["ts_ms"] == inst.requested
                        and f'p={(r["after"] or r["before"])["p"]}' == stat.partitionPath
                        and str((r["after"] or r["before"])["id"]) in {str(x.get("record_key", "")) for x in recs}
                        | {str((x.get("after") or x.get("before") or {}).get("id")) for x in recs}]
                want = {"data_before_after": lambda r: (r["op"], r["ts_ms"], r["before"], r["after"]),
                        "data_before": lambda r: (r["op"], str((r["after"] or r["before"])["id"]), r["before"]),
                        "op_key_only": lambda r: (r["op"], str((r["after"] or r["before"])["id"]))}[cdc]
                assert sorted(map(repr, (tuple(x.values()) for x in recs))) == sorted(map(repr, map(want, mine))), path
                logged += 1
    if cdc and t.table_type == "COPY_ON_WRITE":
        updated = [r for r in changes.to_pylist() if r["op"] == "u"]
        assert not updated or logged, "updates of rewritten base files, and no CDC log"


def test_a_range_reaching_past_a_clean_is_refused(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts")
    first = t.upsert(_batch([{"id": 1, "p": "a", "ts": 1, "v": "x"}]))
    for n in range(2, 6):
        t.upsert(_batch([{"id": 1, "p": "a", "ts": n, "v": f"x{n}"}]))
    t.maintenance.clean(retain_commits=2)         # the slices of the last two commits are kept
    with pytest.raises(TimeTravelError):
        t.changes(first).to_arrow()
    last = t.changes(t.timeline.commits.instants[-2].completed).to_arrow()
    assert last.column("op").to_pylist() == ["u"]


def test_query_builders(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", ordering="ts")
    t.upsert(_batch([{"id": k, "p": "a", "ts": 1, "v": "x"} for k in range(5)]))
    t.delete([0, 1])
    q = t.changes()
    assert q.count() == 7
    assert q.only("d").to_arrow().column("op").to_pylist() == ["d", "d"]
    assert q.limit(3).to_arrow().num_rows == 3
    flat = q.to_arrow(flatten=True)
    assert "before.id" in flat.column_names and "after.v" in flat.column_names
    assert pa.table(q).num_rows == 7
    assert q.to_pandas().shape == (7, 4)
    with pytest.raises(ValueError):
        q.only("x")
    # a filter on the record: after the change, before it for a delete
    assert sorted((r["op"], (r["after"] or r["before"])["id"]) for r in q.where("id <= 1").to_arrow().to_pylist()) \
        == [("d", 0), ("d", 1), ("i", 0), ("i", 1)]
    assert q.where([("id", "=", 4)]).count() == 1 and q.where("id > 3").only("d").count() == 0


@settings(max_examples=60, deadline=None)
@given(before=st.lists(st.integers(0, 4), max_size=6), written=st.lists(st.integers(0, 4), max_size=6),
       kept=st.data())
def test_diff_pairs_the_versions_of_keys_held_more_than_once(before, written, kept):
    """A key held twice (an insert of a stored key keeps both): the versions a commit kept are
    no change; the others pair as updates, the rest inserts and deletes."""
    def table(rows):
        return pa.table({"_hoodie_commit_time": [r[0] for r in rows], "_hoodie_commit_seqno": [r[1] for r in rows],
                         "_hoodie_record_key": [str(r[2]) for r in rows], "_hoodie_partition_path": [""] * len(rows),
                         "_hoodie_file_name": [""] * len(rows), "id": [r[2] for r in rows]},
                        schema=pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_commit_seqno", pa.string()),
                                          ("_hoodie_record_key", pa.string()), ("_hoodie_partition_path", pa.string()),
                                          ("_hoodie_file_name", pa.string()), ("id", pa.int64())]))
    old = [("1", f"1_{n}", k) for n, k in enumerate(before)]
    keep = [r for r in old if kept.draw(st.booleans())]
    new = keep + [("2", f"2_{n}", k) for n, k in enumerate(written)]
    got = diff_records(table(old), table(new), "2", pa.schema([("id", pa.int64())]))
    counts: dict[int, dict[str, int]] = {}
    for op, b, a in zip(got.column("op").to_pylist(), got.column("before").to_pylist(), got.column("after").to_pylist()):
        k = (a or b)["id"]
        counts.setdefault(k, {"i": 0, "u": 0, "d": 0})[op] += 1
    for k in set(before) | set(written):
        olds = sum(1 for r in old if r[2] == k) - sum(1 for r in keep if r[2] == k)
        news = written.count(k)
        want = {"u": min(olds, news), "i": max(news - olds, 0), "d": max(olds - news, 0)}
        assert counts.get(k, {"i": 0, "u": 0, "d": 0}) == want, k


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_partial_updates_show_the_stitched_record(tmp_path, table_type):
    """A partial-update table: each stream writes its column group; an update's images are the
    whole record before and after, the other groups' values kept.  A late event of a group still
    rewrites the record (the write counts it updated): an update with equal images."""
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table(
        "w", key="id", table_type=table_type, merge_mode="partial_update",
        column_groups={"order_ts": ["amount"], "pay_ts": ["paid"]})
    first = t.upsert([{"id": 1, "order_ts": 5, "amount": 10.0}])
    t.upsert([{"id": 1, "pay_ts": 3, "paid": True}])
    late = t.upsert([{"id": 1, "order_ts": 4, "amount": 99.0}])   # late: the stored group wins
    got = t.changes(first).to_arrow().to_pylist()
    assert [r["op"] for r in got] == ["u", "u"]
    assert got[0]["before"] == {"id": 1, "order_ts": 5, "amount": 10.0, "pay_ts": None, "paid": None}
    assert got[0]["after"] == {"id": 1, "order_ts": 5, "amount": 10.0, "pay_ts": 3, "paid": True}
    assert late.updated == 1 and got[1]["ts_ms"] == late.instant and got[1]["before"] == got[1]["after"]


def test_a_column_added_later_reads_null_in_earlier_images(tmp_path):
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", ordering="ts")
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": [1], "ts": [2], "note": ["n"]}))
    got = t.changes().to_arrow()
    assert got.schema.field("after").type.get_field_index("note") >= 0
    rows = got.to_pylist()
    assert [r["after"]["note"] for r in rows if r["op"] == "i"] == [None, None]
    (u,) = [r for r in rows if r["op"] == "u"]
    assert u["before"] == {"id": 1, "ts": 1, "note": None} and u["after"] == {"id": 1, "ts": 2, "note": "n"}
