"""Model-based test: random sequences of writes and table services on random tables,
compared after every step with a pure-Python model (tests/table_model.py) and with the
``hudi`` reader.

A Hypothesis state machine creates a table (copy-on-write or merge-on-read, table version 9
or 8, random columns, hostile partition values and keys), then runs operations: upsert, insert, bulk_insert,
delete by keys and by rows, insert_overwrite (partitions and table), compaction,
clustering, clean (every policy), archival (with and without ``beyond_savepoint``),
savepoint / restore / delete_savepoint, rollback, schema evolution (a new column) and a
writer killed (SIGKILL) at a random step of the write protocol.  Tables written under
optimistic concurrency (drawn at creation) also run writes with another action completing
inside them (``race_upsert``, ``race_service``: an upsert of other keys, a clean or a compaction, by a second handle,
after the write's files and before its commit); the writer killed runs on the others.  Inserts and bulk inserts of
stored keys store them twice (the model keeps every copy, each later update or delete applies
to every copy), and tables may order by a float field holding NaN, -0.0 and infinities (Java's
``Double.compareTo`` order).  ``test_table_matches_model_on_spark`` runs those dimensions with
the Spark engine writing.  Batches may carry Hudi's
delete marker ``_hoodie_is_deleted`` (true, false or null per row): a true row is a delete of
its key.  After every step:

* the snapshot equals the model's rows (values and Arrow types);
* ``as_of`` every earlier write commit equals the model's state after it, or raises
  TimeTravelError where a clean may have deleted its files (and must raise before the last
  clean's earliest retained commit, savepoints excepted);
* incremental reads (completion-time ranges) equal the rows the model says changed;
* the ``hudi`` reader returns the same snapshot (and incremental rows on copy-on-write);
* on tables that keep a metadata table, a filter on a column (meta fields included) and a
  value it holds returns, in a snapshot, an ``as_of`` and an incremental read, the rows the
  same read without it keeps (reads skip files by the column statistics).

An operation may refuse with a typed error (a ``lakesdk.LakeError``) if it does so before
writing anything: the timeline, the data files and the rows must then be unchanged.  Any
other exception, or a typed error after which the table changed, fails the test.  A batch
the documented input rules refuse (a uint64 column, nanosecond digits below the microsecond,
',' in a composite key value, a partition value with '/' or a folder name over 255 bytes
unless the table is ``partition_urlencode``, a null ordering value) must be refused; ``LAKESDK_MODEL_STRICT=1``
also fails on the refusal of a batch those rules accept.  The model stores the normalized
input types and treats '' and None as one partition (one folder).

Known limits of the ``hudi`` reader (0.5.0), where it is not compared:

* it panics on naive timestamps (tables with a timestamp column without a zone);
* it resurfaces stale log updates in merge-on-read incremental reads (no MOR incremental);
* it ignores the time-travel clean guard (no ``as_of`` comparison of cleaned instants);
* it refuses several ordering fields (the tables here have one);
* on merge-on-read it slices a log file by its completion time among every base file, also
  those of a compaction requested after the moment read: a write that completed after a
  compaction requested inside it is missing from a read as of its requested time (no
  ``as_of`` comparison of such a write);
* on merge-on-read it fails to reconcile timestamps inside structs of log blocks with the
  base file's ("Timestamp(us, '+00:00') cannot be re-tagged as Timestamp(us, 'UTC')");
* on merge-on-read it fills a column the winning log record lacks (added after it was written)
  from a losing log record of the same key (a later write skipped on its lower ordering value),
  because it takes a record narrower than the reader schema for a partial update instead of
  reading the block's IS_PARTIAL header: the comparison accepts exactly that difference (the
  model keeps each row's skipped versions for it) and nothing else.

Every hostile dimension is a feature that can be switched off (``DISABLED`` below names the
open defect that keeps each one off in the committed configuration).  Run with everything on::

    LAKESDK_MODEL_FEATURES=all pytest tests/model/test_model.py

or with some turned on: ``LAKESDK_MODEL_FEATURES=+part_slash,+ts_ns``.
``LAKESDK_MODEL_EXAMPLES`` / ``LAKESDK_MODEL_STEPS`` change the budget; the ``soak`` test runs
for ``LAKESDK_SOAK_MINUTES`` (skipped unless it is set).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Callable

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from table_model import FLAG, TableModel, actual_rows, expected_rows, folder, stored

import lakesdk as lk
from lakesdk.exceptions import LakeError, TimeTravelError
from lakesdk.format.keys import escape_partition_value
from lakesdk.testing import strategies as lst

# -- features ----------------------------------------------------------------------------------------
OPERATIONS = frozenset({
    "cow", "mor", "partitioned", "composite_key", "timeline_server_markers",
    "upsert", "insert", "bulk_insert", "delete_keys", "delete_rows", "insert_overwrite", "insert_overwrite_table",
    "compaction", "clustering", "clean_commits", "clean_versions", "clean_hours", "archival", "archival_beyond_savepoint",
    "savepoint", "restore", "rollback", "crash", "add_column", "hudi_reader", "not_null_fields", "as_of_archived",
    "key_in_partitions", "merge", "merge_into_empty", "merge_mor_ts", "hudi_no_active_commit",
    "part_urlencode", "clean_zero_hours", "rollback_replace_after_clean",
    "merge_arrow_types", "null_ordering", "is_deleted",
    "duplicate_keys", "float_ordering", "table_v8", "metadata_table", "race", "incremental_inside_write",
    "metadata_compaction", "record_index",
})
#: writes that must be refused (typed error, table unchanged): the rules under "refusals" below
REFUSALS = frozenset({"merge_key_change", "case_clash"})
ALL = lst.ALL_FEATURES | OPERATIONS | REFUSALS

#: Switched off in the committed configuration, each with the defect that keeps it off.
DISABLED: dict[str, str] = {
    # every dimension is on; a defect found later goes here, with a comment naming it, until it is fixed.
}


def _enabled() -> frozenset[str]:
    spec = os.environ.get("LAKESDK_MODEL_FEATURES", "").strip()
    on = set(ALL) - set(DISABLED)
    if spec == "all":
        return frozenset(ALL)
    if spec.startswith("="):
        on = set()
        spec = spec[1:]
    for item in filter(None, (s.strip() for s in spec.split(","))):
        if item.startswith("-"):
            on.discard(item[1:])
        else:
            on.add(item.lstrip("+"))
    unknown = on - ALL
    assert not unknown, f"unknown features {sorted(unknown)}"
    return frozenset(on)


FEATURES = _enabled()

#: ordering values of float tables (float_ordering): Java's order puts NaN above +inf and -0.0 below 0.0
FLOAT_TS = [float("-inf"), -1.5, -0.0, 0.0, 1.0, float("inf"), float("nan")]

CRASH_POINTS = ["after_requested", "after_markers", "after_data", "during_commit", "after_commit"]
#: the steps of the metadata table's delta commit inside the commit point (tables that keep one)
MDT_CRASH_POINTS = ["metadata_log_written", "metadata_committed"]

WRITER = textwrap.dedent("""
    import os, sys
    os.environ["LAKESDK_CRASH_PID"] = str(os.getpid())
    import pyarrow as pa
    import lakesdk as lk
    keep = True if sys.argv[5] == "metadata" else None
    t = lk.open_table(sys.argv[1], options=lk.TableOptions(engine="local", markers=sys.argv[4], metadata=keep,
                                                           metadata_compact_every=int(sys.argv[6])))
    data = pa.ipc.open_file(sys.argv[2]).read_all()
    getattr(t, sys.argv[3])(data)
    print("WRITE FINISHED")
""")


SPARK: dict[str, Any] = {}     # the test run's Spark session, for merge (the local engine writes)


def _on(name: str) -> bool:
    return name in FEATURES


def _has_ts(t: pa.DataType, units: tuple[str, ...]) -> bool:
    if pa.types.is_timestamp(t):
        return t.unit in units
    if pa.types.is_struct(t):
        return any(_has_ts(t.field(i).type, units) for i in range(t.num_fields))
    return False


def _has_nested_ts(t: pa.DataType, depth: int = 0) -> bool:
    if pa.types.is_timestamp(t):
        return depth > 0
    if pa.types.is_struct(t):
        return any(_has_nested_ts(t.field(i).type, depth + 1) for i in range(t.num_fields))
    return False


def _has_uint(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(_has_uint(t.field(i).type) for i in range(t.num_fields))
    return pa.types.is_unsigned_integer(t)


def _has_uint64(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(_has_uint64(t.field(i).type) for i in range(t.num_fields))
    return t == pa.uint64()


def _sub_micro(col: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a column holds nanosecond timestamps with digits below the microsecond."""
    t = col.type
    if pa.types.is_timestamp(t):
        return t.unit == "ns" and any(v is not None and v % 1000 for v in col.cast(pa.int64()).to_pylist())
    if pa.types.is_struct(t):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks else pa.array([], t)
        return any(_sub_micro(col.field(i)) for i in range(t.num_fields))
    return False


def _has_naive_ts(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return t.tz is None
    if pa.types.is_struct(t):
        return any(_has_naive_ts(t.field(i).type) for i in range(t.num_fields))
    return False


class LakeMachine(RuleBasedStateMachine):
    """One table, its model, and the operations on both."""

    #: steps checked (every rule is followed by the snapshot check), for the soak's report
    steps_checked = 0
    #: the engine of the table's writes (test_table_matches_model_on_spark runs the Spark one)
    engine = "local"

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakesdk-model-")
        self.t: Any = None
        self.m: TableModel | None = None
        self.fresh = 0
        self.home: dict[tuple[str, ...], Any] = {}
        self.crashed = False        # a killed writer left a pending instant (the next write rolls it back)
        self.metadata = False       # the table keeps Hudi's metadata table
        self.compact_every = 10     # its compaction every so many delta commits
        self.record_index = False   # with Hudi's record index in it
        self.optimistic = False     # the table's handles write under optimistic concurrency (the race rule)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- set-up ----------------------------------------------------------------------------------------
    @initialize(data=st.data())
    def create(self, data: st.DataObject) -> None:
        kinds = [k for k in ("cow", "mor") if _on(k)]
        table_type = data.draw(st.sampled_from(kinds), label="table_type")
        composite = _on("composite_key") and data.draw(st.booleans(), label="composite key")
        partitioned = _on("partitioned") and data.draw(st.booleans(), label="partitioned")
        keys = ("k", "k2") if composite else ("k",)
        parts = ("p",) if partitioned else ()
        ntypes = data.draw(st.lists(lst.column_types(FEATURES), min_size=0, max_size=3), label="column types")
        not_null = _on("not_null_fields") and data.draw(st.booleans(), label="keys declared not null")
        fields = [pa.field(k, pa.string(), nullable=not not_null) for k in keys]
        if partitioned:
            fields.append(pa.field("p", pa.string()))
        # float ordering values (NaN, -0.0, infinities): compared in Java's order, as Hudi does
        floats = _on("float_ordering") and data.draw(st.booleans(), label="float ordering")
        self.ts_values = st.sampled_from(FLOAT_TS) if floats else st.integers(0, 4)
        fields.append(pa.field("ts", pa.float64() if floats else pa.int64()))
        fields += [pa.field(f"c{i}", t) for i, t in enumerate(ntypes)]
        schema = pa.schema(fields)
        self.key_pool = data.draw(st.lists(lst.key_values(FEATURES), min_size=2, max_size=6, unique=True),
                                  label="keys")
        # the second part of a composite key may be '' or null (never the first: the key is never entirely so)
        self.part2_pool = data.draw(st.lists(lst.key_part_values(FEATURES, nullable=not not_null), min_size=2,
                                             max_size=6, unique=True), label="second key parts") if composite else []
        self.part_pool = data.draw(st.lists(lst.partition_values(FEATURES), min_size=1, max_size=3, unique=True),
                                   label="partition values") if partitioned else [None]
        self.urlencode = partitioned and _on("part_urlencode") and data.draw(st.booleans(), label="urlencode")
        markers = "timeline_server" if _on("timeline_server_markers") and data.draw(st.booleans()) else "direct"
        self.markers = markers
        # Hudi's metadata table kept at every commit (the hudi reader then lists files from it)
        self.metadata = _on("metadata_table") and data.draw(st.booleans(), label="metadata table")
        # its compaction and clean after every few delta commits (every partition, both versions)
        self.compact_every = data.draw(st.sampled_from([10, 2, 1]), label="MDT compaction every") if (
            self.metadata and _on("metadata_compaction")) else 10
        # Hudi's record index in it (tagging looks the keys up there); a global index, so on tables
        # without partitions, where a key's partition cannot change (the model's keys are per partition)
        self.record_index = self.metadata and not partitioned and _on("record_index") and data.draw(
            st.booleans(), label="record index")
        # Hudi 1.0's table version 8 takes every dimension here (one ordering field, event-time ordering)
        version = data.draw(st.sampled_from([9, 8]), label="table version") if _on("table_v8") else 9
        # several writers: every handle of the table writes under optimistic concurrency with a
        # shared lock, and the race rule runs an action inside a write (a killed writer is then
        # rolled back lazily, once its heartbeat expired: the crash rule runs on the other tables)
        self.optimistic = _on("race") and data.draw(st.booleans(), label="optimistic concurrency")
        self.options = lk.TableOptions(engine=self.engine, markers=markers, metadata=True if self.metadata else None,
                                       concurrency="optimistic" if self.optimistic else "single_writer",
                                       metadata_compact_every=self.compact_every)
        lake = lk.Lake(self.dir, options=self.options, spark=SPARK.get("session"))
        self.t = lake.create_table("t", key=list(keys), partition_by=list(parts) or None, ordering="ts",
                                   table_type=table_type, partition_urlencode=self.urlencode, table_version=version,
                                   index="record" if self.record_index else None)
        self.input_fields = {f.name: f for f in schema}    # the batches' fields (the model keeps stored types)
        self.m = TableModel(keys, parts, "ts", schema)
        note(f"table {table_type} v{version} keys={keys} parts={parts} schema={schema} markers={markers} "
             f"urlencode={self.urlencode} optimistic={self.optimistic} mdt_compact_every={self.compact_every} "
             f"record_index={self.record_index}")

    # -- data ------------------------------------------------------------------------------------------
    def _key(self, data: st.DataObject, *, fresh: bool = False) -> tuple[str, ...]:
        m = self.m
        if fresh:
            self.fresh += 1
            base = data.draw(st.sampled_from(self.key_pool))
            k = (f"{base}~{self.fresh}",)
        else:
            k = (data.draw(st.sampled_from(self.key_pool)),)
        if len(m.key_fields) == 2:
            k = (*k, data.draw(st.sampled_from(self.part2_pool)))
        return k

    def _batch(self, data: st.DataObject, *, fresh: bool = False, schema: pa.Schema | None = None,
               max_rows: int = 5, part: Any = ..., exclude: frozenset[tuple[Any, ...]] = frozenset()) -> pa.Table:
        """A batch of rows with distinct (partition, key) ids; ``fresh`` keys are in no partition yet;
        a key drawn from ``exclude`` is replaced by a fresh one."""
        m = self.m
        schema = schema or pa.schema([self.input_fields[n] for n in m.schema.names])
        n = data.draw(st.integers(1, max_rows), label="rows")
        # now and then a batch whose rows may lack the ordering value (refused: Hudi's rule); 7, not a
        # bound of the range, which Hypothesis draws more often
        null_ts = _on("null_ordering") and data.draw(st.integers(0, 11), label="null ts batch") == 7
        ts = st.one_of(st.none(), self.ts_values) if null_ts else self.ts_values
        cols: dict[str, list[Any]] = {f.name: [] for f in schema}
        seen: set[Any] = set()
        for _ in range(n):
            key = self._key(data, fresh=fresh)
            if key in exclude:
                key = self._key(data, fresh=True)
            p = data.draw(st.sampled_from(self.part_pool)) if part is ... else part
            if not _on("key_in_partitions"):    # each key stays in the partition it was first written to
                p = self.home.setdefault(key, p)
            rid = ((folder(p),) if m.partition_fields else (), key)
            if rid in seen:
                continue
            seen.add(rid)
            for f, v in zip(m.key_fields, key):
                cols[f].append(v)
            if m.partition_fields:
                cols["p"].append(p)
            cols["ts"].append(data.draw(ts, label="ts"))
            for f in schema:
                if f.name in cols and len(cols[f.name]) < len(seen):
                    cols[f.name].append(data.draw(lst.values(f.type, FEATURES)))
        b = lst.arrow_table(cols, schema)
        # now and then a batch carrying Hudi's delete marker: its true rows are deletes of their key
        if _on("is_deleted") and data.draw(st.booleans(), label="delete marker batch"):
            flags = [data.draw(st.sampled_from([None, False, True]), label="_hoodie_is_deleted") for _ in range(len(b))]
            b = b.append_column(FLAG, pa.array(flags, pa.bool_()))
        return b

    # -- the table's state -------------------------------------------------------------------------------
    def _fingerprint(self) -> tuple[Any, ...]:
        timeline, files = self._listing()
        snap = self.t.read().to_arrow()
        return timeline, files, actual_rows(snap, self.m.schema)[0]

    def _listing(self) -> tuple[list[str], list[str]]:
        """The table's timeline files and data files (paths under the table)."""
        root = self.t.path.removeprefix("file://")
        timeline, files = [], []
        for d, _dirs, names in os.walk(root):
            rel = os.path.relpath(d, root)
            for n in names:
                p = os.path.normpath(os.path.join(rel, n))
                if p.startswith(".hoodie/timeline"):
                    timeline.append(p)
                elif not p.startswith(".hoodie"):
                    files.append(p)
        return sorted(timeline), sorted(files)

    def _attempt(self, what: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """Run an operation; a typed error is a legitimate refusal when the table did not change."""
        before = self._fingerprint()
        try:
            res = fn()
        except LakeError as e:
            after = self._fingerprint()
            if self.crashed and after[2] == before[2] and set(after[1]) <= set(before[1]):
                # the failed writer's pending instant may be rolled back before the refusal (its
                # files deleted, a rollback on the timeline): the rows are the table's change
                self._note_crash_repaired()
                before = after
            assert after == before, f"{what} raised {type(e).__name__} after changing the table: {e}"
            event(f"refused: {what}: {type(e).__name__}")
            note(f"{what} refused: {type(e).__name__}: {e}")
            return False, e
        note(f"{what}: {res!r}")
        if self.crashed and what not in ("savepoint", "delete_savepoint"):
            self._note_crash_repaired()
        return True, res

    def _note_crash_repaired(self) -> None:
        if not any(i.action in ("commit", "deltacommit", "replacecommit") for i in self.t.timeline.pending):
            self.crashed = False

    def _refusal(self, b: pa.Table) -> str | None:
        """Why the documented input rules refuse batch ``b`` (None when it must be written)."""
        m = self.m
        if m.ordering in b.column_names and b.column(m.ordering).null_count:
            return f"a null ordering value ({m.ordering!r})"
        for f in b.schema:
            if _has_uint64(f.type):
                return f"uint64 column {f.name!r}"
            if _sub_micro(b.column(f.name)):
                return f"nanoseconds below the microsecond in {f.name!r}"
        if len(m.key_fields) > 1:
            for f in m.key_fields:
                bad = [v for v in b.column(f).to_pylist() if v is not None and (
                    "," in v or v in ("__null__", "__empty__"))]
                if bad:
                    return f"composite key value {bad[0]!r}"
        for f in m.partition_fields:
            for v in b.column(f).to_pylist():
                if not v:
                    continue
                if not self.urlencode and ("/" in v or any(c < " " or c == "\x7f" for c in v)):
                    return f"partition value {v!r}"
                seg = escape_partition_value(v) if self.urlencode else v
                if len(f"{f}={seg}".encode()) > 255:
                    return f"partition value of {len(v)} characters"
        return None

    def _write(self, what: str, fn: Callable[[], Any], apply: Callable[[str, str, str], None],
               batch: pa.Table | None = None) -> None:
        before = self._fingerprint()
        why = self._refusal(batch) if batch is not None else None
        ok, res = self._attempt(what, fn)
        if why is not None:
            # refused, or nothing to write (a merge whose only clauses match no stored key)
            assert not ok or ((res is None or not res.instant) and self._fingerprint() == before), \
                f"{what} of a batch with {why} was written ({res!r}); it must be refused"
            return
        if not ok and batch is not None and os.environ.get("LAKESDK_MODEL_STRICT") == "1":
            raise AssertionError(f"{what} refused a batch the documented rules accept: {res!r}")
        if ok and res is not None and not res.instant:
            # nothing to write (e.g. a delete of keys the table does not have): nothing written
            assert self._fingerprint() == before, f"{what} wrote nothing, yet the table changed: {res!r}"
            return
        if ok and res is not None:
            assert res.completed, f"{what} returned without a completion time: {res!r}"
            apply(res.instant, res.completed, res.action)

    # -- writes ---------------------------------------------------------------------------------------------
    @precondition(lambda self: self.t is not None and _on("upsert"))
    @rule(data=st.data())
    def upsert(self, data: st.DataObject) -> None:
        b = self._batch(data)
        self._write("upsert", lambda: self.t.upsert(b), lambda r, c, a: self.m.upsert(b, r, c, a), b)

    @precondition(lambda self: self.t is not None and _on("insert"))
    @rule(data=st.data())
    def insert(self, data: st.DataObject) -> None:
        b = self._batch(data, fresh=True)
        self._write("insert", lambda: self.t.insert(b), lambda r, c, a: self.m.insert(b, r, c, a), b)

    @precondition(lambda self: self.t is not None and _on("bulk_insert"))
    @rule(data=st.data())
    def bulk_insert(self, data: st.DataObject) -> None:
        b = self._batch(data, fresh=True)
        self._write("bulk_insert", lambda: self.t.bulk_insert(b),
                    lambda r, c, a: self.m.insert(b, r, c, a, "bulk_insert"), b)

    # -- keys stored twice (an insert or bulk insert of stored keys; the other rules then update or
    # delete every copy, compact, cluster, ...: the model keeps each copy, tests/table_model.py) -------
    # (not with the record index: an index of one location per key names one copy of a key stored
    # twice, and a write through it reaches that copy only, as in Hudi; tests/index has the cases)
    @precondition(lambda self: self.t is not None and _on("duplicate_keys") and _on("insert") and self.m.rows
                  and not self.record_index)
    @rule(data=st.data())
    def insert_stored_keys(self, data: st.DataObject) -> None:
        b = self._batch(data)
        self._write("insert of stored keys", lambda: self.t.insert(b), lambda r, c, a: self.m.insert(b, r, c, a), b)

    @precondition(lambda self: self.t is not None and _on("duplicate_keys") and _on("bulk_insert") and self.m.rows
                  and not self.record_index)
    @rule(data=st.data())
    def bulk_insert_stored_keys(self, data: st.DataObject) -> None:
        b = self._batch(data)
        self._write("bulk_insert of stored keys", lambda: self.t.bulk_insert(b),
                    lambda r, c, a: self.m.insert(b, r, c, a, "bulk_insert"), b)

    @precondition(lambda self: self.t is not None and _on("delete_keys"))
    @rule(data=st.data())
    def delete_keys(self, data: st.DataObject) -> None:
        keys = [self._key(data) for _ in range(data.draw(st.integers(1, 3), label="delete keys"))]
        arg = [k[0] for k in keys] if len(self.m.key_fields) == 1 else keys
        self._write("delete by keys", lambda: self.t.delete(arg), lambda r, c, a: self.m.delete_keys(keys, r, c, a))

    @precondition(lambda self: self.t is not None and _on("delete_rows") and self.m.rows)
    @rule(data=st.data())
    def delete_rows(self, data: st.DataObject) -> None:
        m = self.m
        ids = data.draw(st.lists(st.sampled_from(sorted(m.rows, key=repr)), min_size=1, max_size=3, unique=True),
                        label="delete rows")
        cols: dict[str, list[Any]] = {f: [] for f in (*m.key_fields, *m.partition_fields)}
        for rid in ids:
            for f in (*m.key_fields, *m.partition_fields):    # the values as written ('' or None)
                cols[f].append(m.rows[rid].values[f])
        rows = pa.table({f: pa.array(v, pa.string()) for f, v in cols.items()})
        self._write("delete by rows", lambda: self.t.delete(rows), lambda r, c, a: self.m.delete_rows(ids, r, c, a))

    @precondition(lambda self: self.t is not None and _on("insert_overwrite"))
    @rule(data=st.data())
    def insert_overwrite(self, data: st.DataObject) -> None:
        b = self._batch(data)
        self._write("insert_overwrite", lambda: self.t.insert_overwrite(b),
                    lambda r, c, a: self.m.insert_overwrite(b, r, c, a, table=False), b)

    @precondition(lambda self: self.t is not None and _on("insert_overwrite_table"))
    @rule(data=st.data())
    def insert_overwrite_table(self, data: st.DataObject) -> None:
        b = self._batch(data)
        self._write("insert_overwrite_table", lambda: self.t.insert_overwrite(b, scope="table"),
                    lambda r, c, a: self.m.insert_overwrite(b, r, c, a, table=True), b)

    @precondition(lambda self: self.t is not None and _on("add_column"))
    @rule(data=st.data())
    def add_column(self, data: st.DataObject) -> None:
        m = self.m
        new_type = data.draw(lst.column_types(FEATURES), label="new column type")
        new = pa.field(f"c{len(m.schema)}", new_type)
        self.input_fields[new.name] = new
        schema = pa.schema([self.input_fields[n] for n in m.schema.names]).append(new)
        b = self._batch(data, schema=schema)

        def apply(r: str, c: str, a: str) -> None:
            m.evolve(schema)
            m.upsert(b, r, c, a)
        self._write("upsert with a new column", lambda: self.t.upsert(b), apply, b)

    # (a merge into a table with a global index, the record index's, is refused by design: OptionsError)
    @precondition(lambda self: self.t is not None and _on("merge") and not self.record_index
                  and (self.m.commits or _on("merge_into_empty")))
    @rule(data=st.data(), clauses=st.sampled_from([("update", "insert"), ("delete",), ("update",), ("insert",),
                                                   ("delete", "insert")]))
    def merge(self, data: st.DataObject, clauses: tuple[str, ...]) -> None:
        """MERGE INTO on the record key (runs in Spark)."""
        if self.t.table_type == "MERGE_ON_READ" and not _on("merge_mor_ts") and \
                any(_has_ts(f.type, ("s", "ms", "ns")) for f in self.m.schema):
            return
        b = self._batch(data)
        if not _on("merge_arrow_types") and any(
                _has_uint(f.type) or _has_ts(f.type, ("ns",)) for f in b.schema):
            return

        def run() -> Any:
            mb = self.t.merge(b)
            for c in clauses:
                mb = {"update": mb.when_matched_update_all, "delete": mb.when_matched_delete,
                      "insert": mb.when_not_matched_insert_all}[c]()
            r = mb.execute()
            return r.write
        # refusals predicted for inserted rows only, and for any source row without an ordering value
        predict = "insert" in clauses or b.column(self.m.ordering).null_count
        self._write(f"merge {'+'.join(clauses)}", run, lambda r, c, a: self.m.merge(b, clauses, r, c, a),
                    b if predict else None)

    # -- refusals: merges that would change a stored record's key, names equal but for case -----------------
    def _refused_as(self, what: str, fn: Callable[[], Any], expected: type[LakeError], b: pa.Table) -> None:
        """``fn`` is refused with ``expected`` (another typed refusal when the documented input
        rules refuse ``b`` first) and leaves the table as it was (checked by :meth:`_attempt`)."""
        ok, res = self._attempt(what, fn)
        assert not ok, f"{what} was written ({res!r}); it must be refused with {expected.__name__}"
        if self._refusal(b) is None:
            assert isinstance(res, expected), f"{what} raised {type(res).__name__}, not {expected.__name__}: {res}"

    @precondition(lambda self: self.t is not None and _on("merge") and _on("merge_key_change") and self.m.rows
                  and not self.record_index)
    @rule(data=st.data(), how=st.sampled_from(["set_key", "set_partition", "update_all_on_ts"]))
    def merge_changing_key(self, data: st.DataObject, how: str) -> None:
        """A merge clause that would change a stored record's key or partition path: refused
        with KeyChangeError before anything is written (it inserted a second record)."""
        m = self.m
        if how == "set_partition" and not m.partition_fields:
            how = "set_key"
        rid = data.draw(st.sampled_from(sorted(m.rows, key=repr)), label="stored row")
        stored = m.rows[rid].values
        b = self._batch(data, max_rows=1)
        if FLAG in b.column_names and FLAG in m.schema.names:   # a stored column: the row is no delete
            i = b.column_names.index(FLAG)
            b = b.set_column(i, b.schema.field(i), pa.array([False], b.schema.field(i).type))
        elif FLAG in b.column_names:
            b = b.drop_columns([FLAG])
        fixed = {f: stored[f] for f in (*m.key_fields, *m.partition_fields)}
        fixed[m.ordering] = 4
        if how == "update_all_on_ts":   # matched on the ordering value, the source row carries a new key
            fixed[m.key_fields[0]] = f"moved~{self.fresh + 1}"
            v = stored[m.ordering]
            if isinstance(v, str) and pa.types.is_floating(b.schema.field(m.ordering).type):
                v = float("nan") if v == "nan" else float.fromhex(v)   # the model's canonical float text
            fixed[m.ordering] = v
            if fixed[m.ordering] is None:
                return
        for name, v in fixed.items():
            i = b.column_names.index(name)
            b = b.set_column(i, b.schema.field(i), pa.array([v], b.schema.field(i).type))
        self.fresh += 1
        moved = f"moved~{self.fresh}"   # a value no stored row has
        if how == "set_key":
            run = lambda: self.t.merge(b).when_matched_update(updates={m.key_fields[0]: f"'{moved}'"}).execute()  # noqa: E731
        elif how == "set_partition":
            run = lambda: self.t.merge(b).when_matched_update(updates={"p": f"'{moved}'"}).execute()  # noqa: E731
        else:
            # columns the source lacks (the stored _hoodie_is_deleted) keep their values: the refusal is the key's
            run = lambda: self.t.merge(b, on=m.ordering, missing_columns="keep").when_matched_update_all().execute()  # noqa: E731
        self._refused_as(f"merge changing the record ({how})", run, lk.KeyChangeError, b)

    @precondition(lambda self: self.t is not None and _on("case_clash"))
    @rule(data=st.data(), against_table=st.booleans())
    def upsert_case_clash(self, data: st.DataObject, against_table: bool) -> None:
        """Column names equal but for case, in one batch or against a stored column: refused
        with DuplicateColumnError (Spark could no longer read the table)."""
        m = self.m
        b = self._batch(data)
        stored = [n for n in self.t.refresh().schema.names   # columns a commit stored (none before the first)
                  if n in m.schema.names and n not in (*m.key_fields, *m.partition_fields, m.ordering)]
        if against_table and stored:   # the batch spells a stored column another way
            name = data.draw(st.sampled_from(stored), label="respelled column")
            b = b.rename_columns([n.upper() if n == name else n for n in b.column_names])
        else:
            b = b.append_column(m.ordering.upper(), b.column(m.ordering))
        self._refused_as("upsert with column names equal but for case", lambda: self.t.upsert(b),
                         lk.DuplicateColumnError, b)

    # -- services ---------------------------------------------------------------------------------------------
    @precondition(lambda self: self.t is not None and _on("compaction") and _on("mor"))
    @rule()
    def compact(self) -> None:
        if self.t.table_type != "MERGE_ON_READ":
            return
        self._write("compact", lambda: self.t.maintenance.compact(),
                    lambda r, c, a: self.m.service(r, c, a, "compact"))

    @precondition(lambda self: self.t is not None and _on("clustering"))
    @rule(data=st.data())
    def cluster(self, data: st.DataObject) -> None:
        single = data.draw(st.booleans(), label="single_group")
        sort_by = data.draw(st.sampled_from([None, "ts"]), label="sort_by")
        ok, res = self._attempt("cluster", lambda: self.t.maintenance.cluster(single_group=single, sort_by=sort_by))
        if ok and res is not None:
            tl = self.t.timeline
            done = [i for i in tl.commits if i.requested == res.instant]
            assert done and done[0].completed, f"clustering {res!r} is not completed on the timeline"
            self.m.service(res.instant, done[0].completed, done[0].action, "cluster")

    @precondition(lambda self: self.t is not None and (_on("clean_commits") or _on("clean_versions")
                                                        or _on("clean_hours")))
    @rule(data=st.data())
    def clean(self, data: st.DataObject) -> None:
        self._clean(data, self.t)

    def _clean(self, data: st.DataObject, t: Any) -> None:
        """A clean (every policy the features enable) by handle ``t``."""
        policies = [p for p, f in (("KEEP_LATEST_COMMITS", "clean_commits"), ("KEEP_LATEST_FILE_VERSIONS",
                    "clean_versions"), ("KEEP_LATEST_BY_HOURS", "clean_hours")) if _on(f)]
        policy = data.draw(st.sampled_from(policies), label="policy")
        kw = {"retain_commits": data.draw(st.integers(1, 3), label="retain_commits"),
              "retain_versions": data.draw(st.integers(1, 2), label="retain_versions"),
              "retain_hours": data.draw(st.sampled_from([1e-4, 24] + ([0] if _on("clean_zero_hours") else [])),
                                        label="retain_hours")}
        ok, res = self._attempt(f"clean {policy}", lambda: t.maintenance.clean(policy=policy, **kw))
        if ok and res is not None:
            if res.earliest:
                self.m.earliest_retained = max(self.m.earliest_retained or "", res.earliest)
            else:
                self.m.cleaned_without_bound = True

    @precondition(lambda self: self.t is not None and _on("archival"))
    @rule(data=st.data())
    def archive(self, data: st.DataObject) -> None:
        lo = data.draw(st.integers(1, 3), label="min_commits")
        hi = lo + data.draw(st.integers(1, 2), label="max - min")
        beyond = _on("archival_beyond_savepoint") and data.draw(st.booleans(), label="beyond_savepoint")
        ok, res = self._attempt("archive", lambda: self.t.maintenance.archive(min_commits=lo, max_commits=hi,
                                                                             beyond_savepoint=beyond))
        if ok and res is not None and getattr(res, "archived", None):
            self.m.archived = True

    @precondition(lambda self: self.t is not None and _on("savepoint") and self.m.commits)
    @rule(data=st.data())
    def savepoint(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self.m.commits), label="savepoint commit")
        self._attempt("savepoint", lambda: self.t.maintenance.savepoint(c.requested))

    @precondition(lambda self: self.t is not None and _on("savepoint") and self.m.commits)
    @rule(data=st.data())
    def savepoint_in_progress(self, data: st.DataObject) -> None:
        """A savepoint caught between requested and completed (it has the time of the commit
        it saves): the table reads as the model says, the metadata table's listing included
        (found by the service soak), then the savepoint goes."""
        from lakesdk.format.instant import Instant
        c = data.draw(st.sampled_from(self.m.commits), label="savepoint in progress")
        store = self.t.context.store
        if any(i.requested == c.requested and i.action == "savepoint" for i in store.load().instants):
            return
        requested = Instant("savepoint", "requested", c.requested)
        store.create(requested)
        inflight = store.transition(requested, "inflight")
        try:
            self.check_1_snapshot()
            self.check_5_metadata_table()
        finally:
            store.delete(inflight)
            store.delete(requested)

    @precondition(lambda self: self.t is not None and _on("savepoint"))
    @rule(data=st.data())
    def delete_savepoint(self, data: st.DataObject) -> None:
        sps = self.t.maintenance.savepoints()
        if sps:
            sp = data.draw(st.sampled_from(sps), label="delete savepoint")
            self._attempt("delete_savepoint", lambda: self.t.maintenance.delete_savepoint(sp.instant))

    @precondition(lambda self: self.t is not None and _on("restore"))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        sps = self.t.maintenance.savepoints()
        if not sps:
            return
        sp = data.draw(st.sampled_from(sps), label="restore to")
        ok, res = self._attempt("restore", lambda: self.t.maintenance.restore(sp.instant))
        if ok:
            assert any(c.requested == sp.instant for c in self.m.commits), \
                f"restored savepoint {sp.instant} of a commit the model does not have"
            self.m.restore(sp.instant)

    @precondition(lambda self: self.t is not None and _on("rollback") and self.m.commits)
    @rule()
    def rollback(self) -> None:
        last = self.m.commits[-1]
        if last.action in ("replacecommit", "clustering") and not _on("rollback_replace_after_clean") and any(
                i.action == "clean" and i.requested > last.requested for i in self.t.timeline.instants):
            return
        ok, res = self._attempt("rollback", lambda: self.t.maintenance.rollback(last.requested))
        if ok:
            self.m.rollback_last()

    @precondition(lambda self: self.t is not None and _on("crash") and not self.optimistic)
    @rule(data=st.data(), point=st.sampled_from(CRASH_POINTS), op=st.sampled_from(["upsert", "insert"]))
    def crashed_write(self, data: st.DataObject, point: str, op: str) -> None:
        if self.metadata and data.draw(st.booleans(), label="crash in the metadata table's commit"):
            point = data.draw(st.sampled_from(MDT_CRASH_POINTS), label="MDT crash point")
        b = self._batch(data, fresh=op == "insert")
        path = os.path.join(self.dir, "batch.arrow")
        with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, b.schema) as w:
            w.write_table(b)
        known = {i.requested for i in self.t.timeline.instants}
        before = self._fingerprint()
        env = {**os.environ, "LAKESDK_CRASH_AT": point}
        r = subprocess.run([sys.executable, "-c", WRITER, self.t.path, path, op, self.markers,
                            "metadata" if self.metadata else "-", str(self.compact_every)], env=env,
                           capture_output=True, text=True, timeout=240)
        note(f"crashed {op} at {point}: rc={r.returncode}")
        why = self._refusal(b)
        assert why is None or r.returncode != -9, f"a writer of a batch with {why} got to {point}"
        if r.returncode == 0 and "WRITE FINISHED" in r.stdout:
            # nothing to write, so no crash point on the way: every row is flagged
            # _hoodie_is_deleted and deletes nothing stored (or an insert, which writes no flagged row)
            flags = b.column("_hoodie_is_deleted").to_pylist() if "_hoodie_is_deleted" in b.column_names else []
            assert flags and all(flags), f"a writer of a batch with rows to write finished past {point}"
            new = [i for i in self.t.timeline.commits if i.requested not in known]
            after = self._fingerprint()
            repaired = self.crashed      # a dead writer's pending instant rolled back first: its files go
            if repaired:
                self._note_crash_repaired()
            assert after[2 if repaired else 1:] == before[2 if repaired else 1:], \
                f"a {op} that wrote nothing changed the table's files or rows"
            if not new:
                assert repaired or after == before, f"a {op} that wrote nothing changed the timeline"
                return
            # an empty commit (a write into a table without files to find the flagged keys in
            # goes as far as its commit and writes no file; Hudi commits such a write too)
            assert len(new) == 1 and not self.t.inspect.commit_metadata(new[0].requested).write_stats, \
                f"a {op} that wrote nothing committed {new}"
            apply = self.m.upsert if op == "upsert" else self.m.insert
            apply(b, new[0].requested, new[0].completed, new[0].action)
            return
        if r.returncode != -9:
            # a typed refusal before the crash point is fine (the table must then be unchanged)
            assert "lakesdk" in r.stderr and "Error" in r.stderr, \
                f"writer not killed at {point}: rc={r.returncode}\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
            return
        new = [i for i in self.t.timeline.commits if i.requested not in known]
        if point == "after_commit":
            assert len(new) == 1, f"a writer killed after its commit left {new}"
            apply = self.m.upsert if op == "upsert" else self.m.insert
            apply(b, new[0].requested, new[0].completed, new[0].action)
        else:
            assert not new, f"a writer killed at {point} completed {new}"
            self.crashed = True

    # -- several writers: an action completing inside a write ---------------------------------------------
    def _racers(self, *kinds: str) -> list[str]:
        """The actions of ``kinds`` that may race a write on this table."""
        on = {"upsert": _on("upsert"), "clean": _on("clean_commits") or _on("clean_versions") or _on("clean_hours"),
              "compact": _on("compaction") and self.t.table_type == "MERGE_ON_READ"}
        return [k for k in kinds if on[k]] if self.optimistic and not self.crashed and (
            _on("upsert") or _on("insert")) else []

    @precondition(lambda self: self.t is not None and self._racers("upsert"))
    @rule(data=st.data())
    def race_upsert(self, data: st.DataObject) -> None:
        """An upsert of other keys completing inside a write (:meth:`_race`)."""
        self._race(data, "upsert")

    @precondition(lambda self: self.t is not None and self._racers("clean", "compact"))
    @rule(data=st.data())
    def race_service(self, data: st.DataObject) -> None:
        """A clean or a compaction (merge-on-read) completing inside a write (:meth:`_race`)."""
        self._race(data, data.draw(st.sampled_from(self._racers("clean", "compact")), label="action B"))

    def _race(self, data: st.DataObject, racer: str) -> None:
        """A write A (upsert or insert) during which, once its files are written and before its
        commit, another handle of the table runs an action B to completion: an upsert of keys
        A does not write, a clean, or a compaction (merge-on-read).  A then completes, and the
        model applies B, then A (completion order; a read as of A's requested time does not see
        B: ``TableModel.completed_late``), or A fails with WriteConflictError (B wrote a file
        group A writes) and leaves no trace.  Then a filter on a value A wrote (tables with a
        metadata table): each action's partition statistics were computed without the other's files."""
        from lakesdk.table.write import PARTITION_METAFILE, WriteOperation
        m = self.m
        op = data.draw(st.sampled_from([o for o in ("upsert", "insert") if _on(o)]), label="write A")
        a = self._batch(data, fresh=op == "insert")
        a_keys = frozenset(tuple(r[f] for f in m.key_fields) for r in a.select(list(m.key_fields)).to_pylist())
        why = self._refusal(a)
        before = self._fingerprint()
        rows0, n0 = dict(m.rows), len(m.commits)
        schema0 = self.t.refresh().schema
        other = lk.open_table(self.t.path, options=self.options, spark=SPARK.get("session"))
        raced: dict[str, Any] = {}
        original = WriteOperation._finalize

        def b_runs() -> None:
            if racer == "upsert":   # stored or fresh keys, none of A's (two inserts of one new key store it twice)
                b = self._batch(data, fresh=data.draw(st.booleans(), label="B fresh keys"), exclude=a_keys)
                self._write("racing upsert", lambda: other.upsert(b), lambda r, c, x: m.upsert(b, r, c, x), b)
            elif racer == "clean":
                self._clean(data, other)
            else:
                self._write("racing compact", lambda: other.maintenance.compact(),
                            lambda r, c, x: m.service(r, c, x, "compact"))

        def racing(w: Any, ctx: Any, stats: Any, partitions: Any) -> Any:
            if not raced and w.table is self.t:
                raced.update(instant=ctx.instant, files={s.path for s in stats if s.path})
                b_runs()
                raced.update(after=self._listing()[1], schema=other.refresh().schema)
            return original(w, ctx, stats, partitions)
        WriteOperation._finalize = racing     # type: ignore[method-assign]
        try:
            res = (self.t.upsert if op == "upsert" else self.t.insert)(a)
        except LakeError as e:
            res = e
        finally:
            WriteOperation._finalize = original     # type: ignore[method-assign]
            other.close()
        note(f"race: {op} with {racer} inside: {res!r}")
        landed = m.commits[n0:]     # B's commit (an upsert or compaction that wrote something)
        if not raced:      # A was refused (or had nothing to write) before its files: B did not run
            assert self._fingerprint() == before, f"{op} that wrote no file changed the table ({res!r})"
            if isinstance(res, LakeError):
                event(f"refused: race {op}: {type(res).__name__}")
            else:
                assert why is None and not res.instant, f"{op} committed without writing files, or a batch " \
                    f"with {why} was written: {res!r}"
            return
        assert why is None, f"{op} of a batch with {why} got as far as its files; it must be refused"
        if isinstance(res, LakeError):
            # only a conflict with B: A leaves no trace (the table is as B left it)
            assert isinstance(res, lk.WriteConflictError), f"{op} failed after a racing {racer}: {res!r}"
            if isinstance(res, lk.SchemaEvolutionConflictError):
                # Hudi's concurrent schema evolution (RFC-82): B changed the table schema A started
                # with (its first commit, or one adding the delete marker column) to one A does not write
                assert landed and not raced["schema"].equals(schema0), \
                    f"{op} refused a schema conflict although the racing {racer} left the schema as it was: {res}"
            else:
                assert landed and res.other_instant == landed[0].requested, \
                    f"{op} conflicts with {res.other_instant}, not with the racing {racer} ({landed})"
            tl = self.t.timeline
            assert raced["instant"] not in {i.requested for i in tl.commits} | {i.requested for i in tl.pending}, \
                f"{op} that lost to a racing {racer} left its instant {raced['instant']} on the timeline"
            # its files are gone; a partition folder it created keeps its partition metafile (written
            # at its commit point, before the conflict check), as Hudi's rollback keeps it: no rows
            def data_files(files: list[str]) -> set[str]:
                return {f for f in files if not os.path.basename(f).startswith(PARTITION_METAFILE)}
            left, want = data_files(self._listing()[1]), data_files(raced["after"]) - raced["files"]
            assert left == want, f"{op} that lost to a racing {racer}: files left {sorted(left - want)}, " \
                f"gone {sorted(want - left)}"
            event(f"race: {op} lost to a racing {racer}")
            return
        assert res.instant == raced["instant"] and res.completed, f"{op} returned {res!r}"
        assert not landed or res.completed > landed[-1].completed, f"{op} completed before the racing {racer}"
        event(f"race: {op} with a racing {racer}{' that wrote' if landed else ''}")

        def apply() -> None:
            (m.upsert if op == "upsert" else m.insert)(a, res.instant, res.completed, res.action)
        if landed:
            m.completed_late(rows0, apply)
        else:
            apply()
        if self.metadata:
            self._filtered_read(data, written_by=res.instant)

    # -- reads that skip files by the metadata table's column statistics ----------------------------------
    @precondition(lambda self: self.t is not None and self.metadata)
    @rule(data=st.data())
    def filtered_read(self, data: st.DataObject) -> None:
        """A filter on a column of the table (meta fields included) and a value it holds: the
        snapshot, an ``as_of`` and an incremental read with it return the rows the same read
        without it keeps (the file slices its column statistics rule out are skipped)."""
        self._filtered_read(data)

    def _filtered_read(self, data: st.DataObject, written_by: str | None = None) -> None:
        """:meth:`filtered_read`; ``written_by``: the value is one of a row the commit of that
        requested time wrote (when it left one)."""
        import pyarrow.compute as pc

        from lakesdk.read.bind import session_time_zone
        from lakesdk.read.predicate import from_filters
        full = self.t.read(meta_fields=True).to_arrow()
        cols = [f.name for f in full.schema if not pa.types.is_nested(f.type) and not pa.types.is_binary(f.type)]
        if not cols or not len(full):
            return
        col = data.draw(st.sampled_from(cols), label="filter column")
        pool = full if written_by is None else full.filter(pc.equal(full.column("_hoodie_commit_time"), written_by))
        # in an order of their own, not the read's: the files' order follows their random ids, and
        # the draws must not depend on it (a null drawn in one run, a value in its replay)
        values = sorted((pool if len(pool) else full).column(col).to_pylist(), key=lambda v: (v is not None, repr(v)))
        op = data.draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "IN", "IS", "IS NOT"]), label="filter op")
        v = None if op.startswith("IS") else data.draw(st.sampled_from(values), label="filter value")
        if v is None and not op.startswith("IS"):
            return
        filters = [(col, op, [v] if op == "IN" else v)]
        try:
            bound = from_filters(filters).bind(full.schema, session_time_zone())
        except lk.InvalidFilterError:
            return       # a type filters do not compare
        tl = self.t.timeline
        moments = [i.requested for i in tl.commits if i.completed] + [None]
        moment = data.draw(st.sampled_from(moments), label="as_of")
        reads = {"snapshot": lambda q: q, f"as_of {moment}": lambda q: q.as_of(moment) if moment else q}
        for what, pin in reads.items():
            try:
                every = pin(self.t.read(meta_fields=True)).to_arrow()
            except TimeTravelError:
                continue
            try:    # a time travel reads with the schema as of its moment (Hudi's too)
                pinned = from_filters(filters).bind(every.schema, session_time_zone())
            except lk.InvalidFilterError:
                # a column added later than the moment, or typed then so filters do not compare it
                with pytest.raises(lk.InvalidFilterError):
                    pin(self.t.read(meta_fields=True, where=filters)).to_arrow()
                continue
            got = pin(self.t.read(meta_fields=True, where=filters)).to_arrow()
            self._same_rows(f"{what} with filter {filters}", got, every.filter(pinned.to_arrow()))
        try:
            every = self.t.incremental(None, None, meta_fields=True).to_arrow()
        except TimeTravelError:
            return
        got = self.t.incremental(None, None, meta_fields=True, where=filters).to_arrow()
        self._same_rows(f"incremental with filter {filters}", got, every.filter(bound.to_arrow()))

    @staticmethod
    def _same_rows(what: str, got: pa.Table, want: pa.Table) -> None:
        def rows(t: pa.Table) -> list[str]:
            return sorted(repr(r) for r in t.to_pylist())
        assert rows(got) == rows(want), f"{what}: got {len(got)} rows, want {len(want)}: " \
            f"missing {sorted(set(rows(want)) - set(rows(got)))[:3]}"

    # -- checks ---------------------------------------------------------------------------------------------
    def _compare(self, what: str, data: pa.Table, rows: Any, schema: pa.Schema, *, types: bool = True,
                 hudi_mor: bool = False) -> None:
        # the hudi reader types columns as Avro does (int8/int16 as int32, zoned timestamps in UTC,
        # seconds as milliseconds): its values are compared after a safe cast to the written type
        got, problems = actual_rows(data, schema, cast=not types)
        want = expected_rows(rows, schema)
        assert not problems, f"{what}: {problems}"
        if got != want and hudi_mor:
            got = self._without_loser_fill(got, rows, schema)
        if got != want:
            missing = [r for r in want if r not in got]
            extra = [r for r in got if r not in want]
            raise AssertionError(f"{what}: columns {schema.names}\nmissing {missing[:5]}\nunexpected {extra[:5]}")

    def _without_loser_fill(self, got: list[tuple[Any, ...]], rows: Any, schema: pa.Schema) -> list[tuple[Any, ...]]:
        """``got`` (a hudi reader's merge-on-read rows) with each row that differs from the model's
        only by the reader's known limit put back as the model has it: every differing column is
        one the winning version lacks, holding a value of that column in one of the row's skipped
        versions (see the module docstring)."""
        m = self.m
        names = schema.names
        out = []
        for t in got:
            rid = (tuple(folder(t[names.index(f)]) for f in m.partition_fields),
                   tuple(t[names.index(f)] for f in m.key_fields))
            for row in stored(rows[rid]) if rid in rows else []:    # each stored copy of the row id
                if not row.losers:
                    continue
                want = tuple(row.values.get(n) for n in names)
                diff = [i for i, (a, b) in enumerate(zip(t, want)) if a != b]
                if diff and all(names[i] not in row.values and t[i] is not None
                                and any(lost.get(names[i]) == t[i] for lost in row.losers) for i in diff):
                    event("hudi reader: a column filled from a skipped version (known limit)")
                    t = want
                    break
            out.append(t)
        return sorted(out, key=repr)

    @invariant()
    def check_1_snapshot(self) -> None:
        if self.t is None:
            return
        LakeMachine.steps_checked += 1
        self._compare("snapshot", self.t.read().to_arrow(), self.m.rows, self.m.schema)

    @invariant()
    def check_2_time_travel(self) -> None:
        if self.t is None:
            return
        m = self.m
        saved = {s.instant for s in self.t.maintenance.savepoints()}
        tl = self.t.timeline
        active = {i.requested for i in tl.instants}
        pending = min((i.requested for i in tl.pending if i.action in ("commit", "deltacommit", "replacecommit")),
                      default=None)
        for c in m.commits:
            if c.requested not in active and not _on("as_of_archived"):
                continue
            if pending is not None and c.requested >= pending:
                # at or after a pending write (a killed writer's): the answer could change when it completes
                with pytest.raises(TimeTravelError):
                    self.t.as_of(c.requested).to_arrow()
                continue
            guarded = m.earliest_retained is not None and c.requested < m.earliest_retained \
                and c.requested not in saved
            may_fail = guarded or m.cleaned_without_bound or m.archived
            try:
                data = self.t.as_of(c.requested).to_arrow()
            except TimeTravelError as e:
                assert may_fail, f"as_of {c.requested} ({c.operation}) raised although nothing cleaned it: {e}"
                continue
            assert not guarded, (f"as_of {c.requested} answered although the last clean retained only commits "
                                 f"from {m.earliest_retained}")
            self._compare(f"as_of {c.requested} ({c.operation})", data, m.as_of(c), c.schema)

    @invariant()
    def check_3_incremental(self) -> None:
        if self.t is None or not self.m.commits:
            return
        m = self.m
        last = m.commits[-1].completed
        # the range ending at the commit before the last one is typed by the latest schema too
        ranges = [(None, last)] + ([(m.commits[-2].completed, last), (None, m.commits[-2].completed)]
                                   if len(m.commits) > 1 else [])
        for start, end in ranges:
            if not _on("incremental_inside_write") and any(c.requested < end < c.completed for c in m.commits):
                continue     # see DISABLED
            try:
                data = self.t.incremental(start, end, meta_fields=False).to_arrow()
            except TimeTravelError as e:
                assert m.earliest_retained or m.cleaned_without_bound or m.archived, \
                    f"incremental ({start}, {end}] raised although nothing was cleaned: {e}"
                continue
            rows, schema = m.incremental(start, end)
            self._compare(f"incremental ({start}, {end}]", data, rows, schema)

    @invariant()
    def check_5_metadata_table(self) -> None:
        """The metadata table lists exactly the files of the completed instants."""
        if self.t is None or not self.metadata:
            return
        from ..corpus_model import check_mdt
        check_mdt(self.t.path, "in the model test")
        if self.record_index:
            _check_record_index(self.t.path)

    @invariant()
    def check_4_hudi_reader(self) -> None:
        if self.t is None or not _on("hudi_reader") or self.crashed:
            return
        if any(_has_naive_ts(f.type) for f in self.m.schema):
            return      # the hudi reader panics on naive timestamps
        if self.t.table_type == "MERGE_ON_READ" and any(_has_nested_ts(f.type) for f in self.m.schema):
            return      # the hudi reader cannot reconcile a log block's nested timestamps ('+00:00' vs 'UTC')
        if self.m.archived and not _on("hudi_no_active_commit") and not len(self.t.timeline.commits):
            return      # the dimension off: no check of an archived table without active commits
        hudi = pytest.importorskip("hudi")
        m = self.m

        def read(opts: Any) -> pa.Table:
            batches = hudi.HudiTableBuilder.from_base_uri(self.t.path).build().read(opts)
            return pa.Table.from_batches(batches) if batches and sum(b.num_rows for b in batches) else pa.table({})

        mor = self.t.table_type == "MERGE_ON_READ"
        self._compare("hudi reader snapshot", read(hudi.HudiReadOptions()), m.rows, m.schema, types=False,
                      hudi_mor=mor)
        if len(m.commits) < 2:
            return
        prev, last = m.commits[-2], m.commits[-1]
        cleaned = m.earliest_retained is not None or m.cleaned_without_bound or m.archived
        # it slices a log file by its completion time among every base file, also those of a
        # compaction requested after the moment: a write that completed after a compaction
        # requested inside it is then missing from a read as of its requested time
        late_slice = mor and any(c.action == "compaction" and prev.requested < c.requested < prev.completed
                                 for c in m.commits)
        if not cleaned and not late_slice:     # it ignores the time-travel clean guard
            data = read(hudi.HudiReadOptions().with_as_of_timestamp(prev.requested))
            self._compare(f"hudi reader as_of {prev.requested}", data, m.as_of(prev), prev.schema, types=False,
                          hudi_mor=mor)
        if self.t.table_type == "COPY_ON_WRITE" and not cleaned:    # it resurfaces stale log updates on MOR
            opts = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental)
            data = read(opts.with_start_timestamp(prev.completed).with_end_timestamp(last.completed))
            rows, schema = m.incremental(prev.completed, last.completed)
            self._compare(f"hudi reader incremental ({prev.completed}, {last.completed}]", data, rows, schema,
                          types=False)


def _check_record_index(path: str) -> None:
    """The record index names exactly the keys the table holds, each with a file group that
    holds it (a key stored twice, in two file groups, with either)."""
    from lakesdk.read.metadata_table import MetadataTableReader

    from ..metadata_table.test_read_hudi_written import _file_id
    t = lk.open_table(path)
    if not t.timeline.completed.instants:        # nothing written yet: no metadata table
        return
    held: dict[str, set[tuple[str, str]]] = {}
    got = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_arrow()
    for k, p, f in zip(*(got.column(c).to_pylist() for c in got.column_names)):
        held.setdefault(k, set()).add((p or "", _file_id(f)))
    index = MetadataTableReader(t.storage, t.context.store.load()).records("record_index")
    located = {k: (r.location.partition or "", r.location.file_id) for k, r in index.items()}
    assert set(located) == set(held), (f"the record index names {sorted(set(located) - set(held))} the table does "
                                       f"not hold, lacks {sorted(set(held) - set(located))}")
    wrong = {k: (loc, held[k]) for k, loc in located.items() if loc not in held[k]}
    assert not wrong, f"the record index names file groups that do not hold the key: {wrong}"


def _settings(examples: int, steps: int, **kw: Any) -> settings:
    from hypothesis import Phase
    if os.environ.get("LAKESDK_MODEL_SHRINK") == "0":
        kw["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(max_examples=int(os.environ.get("LAKESDK_MODEL_EXAMPLES", examples)),
                    stateful_step_count=int(os.environ.get("LAKESDK_MODEL_STEPS", steps)), deadline=None,
                    suppress_health_check=list(HealthCheck), **kw)


def _spark(request: Any) -> None:
    if _on("merge"):
        SPARK["session"] = request.getfixturevalue("spark")


def test_table_matches_model(request: Any) -> None:
    """Random operation sequences on random tables: every read equals the model."""
    _spark(request)
    # derandomized: CI runs the same budget every time (set LAKESDK_MODEL_RANDOM=1 to explore; the soak is random)
    run_state_machine_as_test(LakeMachine, settings=_settings(40, 20, derandomize=not os.environ.get("LAKESDK_MODEL_RANDOM")))


class SparkLakeMachine(LakeMachine):
    """The machine with the Spark engine writing (the local engine's answers are the model's too)."""

    engine = "spark"


#: the dimensions the Spark run explores: the writes and services around keys stored twice and
#: float ordering values (each Spark write costs seconds: a small budget)
SPARK_RUN = frozenset({"cow", "mor", "partitioned", "upsert", "insert", "bulk_insert", "delete_keys", "delete_rows",
                       "compaction", "clustering", "hudi_reader", "duplicate_keys", "float_ordering"})


def test_table_matches_model_on_spark(request: Any, monkeypatch: Any) -> None:
    """The Spark engine gives the model's table on sequences of the new generators (keys stored
    twice, float ordering values) and the writes and services around them."""
    SPARK["session"] = request.getfixturevalue("spark")
    monkeypatch.setattr(sys.modules[__name__], "FEATURES", FEATURES & SPARK_RUN)
    run_state_machine_as_test(SparkLakeMachine, settings=_settings(4, 8, derandomize=not os.environ.get(
        "LAKESDK_MODEL_RANDOM")))


@pytest.mark.soak
@pytest.mark.skipif(not os.environ.get("LAKESDK_SOAK_MINUTES"), reason="set LAKESDK_SOAK_MINUTES to run the soak")
def test_table_matches_model_soak(request: Any) -> None:
    """The model test for LAKESDK_SOAK_MINUTES minutes, with longer sequences."""
    _spark(request)
    start = time.monotonic()
    stop = start + float(os.environ.get("LAKESDK_SOAK_MINUTES") or 30) * 60
    rounds = 0
    LakeMachine.steps_checked = 0
    while time.monotonic() < stop:
        run_state_machine_as_test(LakeMachine, settings=_settings(50, 40, database=None))
        rounds += 1
    print(f"soak: {(time.monotonic() - start) / 60:.1f} min, {rounds} rounds of up to 50 sequences x 40 steps, "
          f"{LakeMachine.steps_checked} steps checked")
