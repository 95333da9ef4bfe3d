"""A pure-Python model of a Hudi table's rows and commits, for the model-based test
(tests/model/test_model.py).

Rows are identified by (partition values, record key values): the table uses Hudi's
non-global index, so an upsert that moves a key to another partition leaves the old row
where it was, and a merge matches a source row with the stored row of its own partition.
Upserts follow event-time ordering (``hoodie.record.merge.mode=EVENT_TIME_ORDERING``):
the incoming version replaces the stored one when its ordering value is at least the stored
one (ties go to the newer write).  A version written as data never lacks its ordering value:
such a batch is refused before anything is written (as Hudi refuses it), so the model never
sees one; a stored version without one would rank below any value.  Deletes by key values
alone are global (every partition); deletes by rows holding the partition fields delete in
those partitions only.

A row flagged ``_hoodie_is_deleted`` (true) is a delete of its row id, as Hudi's writers
treat it: in an upsert or merge it deletes the stored row when it is at least as new (a new
row id: nothing), an insert or bulk insert does not write it, and an insert_overwrite replaces
the partitions of every row of the batch but writes only the unflagged ones.  The model keeps
the column out of its schema (reads return it false or null for every row).

Partition identity is the partition folder: ``''`` and None share Hudi's
``__HIVE_DEFAULT_PARTITION__`` folder, so they are one partition (an insert_overwrite of ``''``
replaces the None rows too); reads still return each row's value as written.

Input types are normalized as the write stores them (:func:`stored_type`): ``timestamp[ns]`` is
written as ``timestamp[us]``, ``timestamp[s]`` as ``timestamp[ms]``, ``uint8``/``uint16`` as
``int32``, ``uint32`` as ``int64``, and every column is nullable.

Tables with another merge mode (``TableModel.merge_mode``; tests/model/test_merge_modes.py) fold
an upsert into each stored copy as lakesdk documents (docs/concepts.md, "Partial updates with
column groups" and the merge mode table; lakesdk/merge/slice_merge.py):

* ``"ignore_defaults"`` (``partial_update="ignore_defaults"``, Hudi's commit-time ordering with
  ``IGNORE_DEFAULTS``): every column takes the later write's value unless that is null or the
  batch leaves the column out, then the stored one stays;
* ``"column_groups"`` (``merge_mode="partial_update"``): per group, the version with the
  greatest value of the group's ordering field among those that wrote it (a non-null value;
  ties go to the later write) brings every column of the group (one it omits reads null);
  columns in no group take the later non-null value;
* ``"custom_max_v"`` (a custom merger, ``MAX_V`` in tests/model/test_merge_modes.py): the
  version with the greatest ``v`` wins (null lowest, ties go to the later write).

Under all three a delete (``t.delete``, a flagged row) removes the record whatever it holds,
and the merged row carries the commit time of the write that produced it.

Every completed write instant keeps the full state after it, so time travel (``as_of``),
incremental reads (completion-time ranges, table version 8) and rollback / restore are
computed from the history.  The history is in completion order: a commit's ``rows`` are the
state once it completed.  Time travel selects commits by *requested* time (Hudi's, and
``Timeline.visible_as_of``): as of ``T`` a read sees the completed commits requested at or
before ``T``, folded in completion order.  Without concurrent writers both orders agree and a
commit's ``rows`` are also what a read as of its requested time returns.  A write that
completed after a commit requested later (several writers: tests/model/test_model.py's ``race``)
keeps, besides, the rows such a read returns (``Commit.visible``: its changes on the state
before the later-requested commits completed, which is exact when no key is in both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from lakesdk.testing.strategies import canonical

RowId = tuple[tuple[Any, ...], tuple[Any, ...]]     # (partition folders, key values)
FLAG = "_hoodie_is_deleted"


def flagged(r: dict[str, Any]) -> bool:
    """Whether a row of a batch is a delete (``_hoodie_is_deleted`` true)."""
    return r.get(FLAG) is True


def stored_type(t: pa.DataType) -> pa.DataType:
    """The type a write stores for input type ``t`` (uint64 is refused, returned as is)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp({"ns": "us", "s": "ms"}.get(t.unit, t.unit), t.tz)
    if t in (pa.uint8(), pa.uint16()):
        return pa.int32()
    if t == pa.uint32():
        return pa.int64()
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, stored_type(f.type)) for f in t])
    return t


def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The table schema a write of ``schema`` stores: normalized types, every field nullable."""
    return pa.schema([pa.field(f.name, stored_type(f.type)) for f in schema])


def folder(value: Any) -> Any:
    """A partition value's folder identity: '' and None share the default partition."""
    return None if value == "" else value


@dataclass
class Row:
    values: dict[str, Any]     # column -> canonical value
    commit: str                # requested time of the write that wrote this version
    # later versions that lost to this one on ordering (skipped) while carrying columns this one
    # lacks: a merge-on-read write still appends them to a log, where the merge on read drops them
    losers: tuple[dict[str, Any], ...] = ()
    copies: tuple["Row", ...] = ()   # further stored copies of the row id (see "keys stored twice")


# -- keys stored twice ---------------------------------------------------------------------------------
# An insert or bulk insert of a stored row id stores it again (no key lookup, as in Hudi); every
# later update or delete applies to each stored copy on its own, as Hudi's index tags an incoming
# record with every stored record of its key: each copy it beats is replaced (or deleted), the
# others stay.  A row id's Row is its first copy, ``Row.copies`` the others.
def stored(r: Row) -> list[Row]:
    """Every stored copy of a row id (its Row first, without its copies)."""
    return [Row(r.values, r.commit, r.losers), *r.copies] if r.copies else [r]


def packed(rows: list[Row]) -> Row | None:
    """The Row of a row id holding ``rows`` (None: no copy left)."""
    return Row(rows[0].values, rows[0].commit, rows[0].losers, tuple(rows[1:])) if rows else None


def order_key(v: Any) -> Any:
    """An ordering value as Hudi compares it: floats (canonical: hex text or ``"nan"``) in Java's
    ``Double.compareTo`` order (-0.0 < 0.0 < +inf < NaN, NaN = NaN); other values as they are."""
    if isinstance(v, str) and (v == "nan" or "0x" in v or v in ("inf", "-inf")):
        import math
        x = float("nan") if v == "nan" else float.fromhex(v)
        return (1, 0.0, 0.0) if math.isnan(x) else (0, x, math.copysign(1.0, x))
    return v


@dataclass
class Commit:
    requested: str
    completed: str
    action: str
    operation: str
    rows: dict[RowId, Row]
    schema: pa.Schema
    # the rows a read as of ``requested`` returns when they are not ``rows``: the commit completed
    # after commits requested after it, which such a read does not see (see the module docstring)
    visible: dict[RowId, Row] | None = None


@dataclass
class TableModel:
    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    ordering: str | tuple[str, ...]       # one ordering field, or several compared field by field
    schema: pa.Schema
    rows: dict[RowId, Row] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    earliest_retained: str | None = None      # the latest clean's earliest commit to retain
    cleaned_without_bound: bool = False       # a clean without an earliest commit (KEEP_LATEST_FILE_VERSIONS)
    archived: bool = False                    # an archival moved instants into the timeline history
    merge_mode: str = "event_time"            # "event_time", "ignore_defaults", "column_groups", "custom_max_v"
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)   # ordering field -> its columns
    grows: bool = False     # the schema is the columns written so far (batches carry some columns only)

    # -- rows from Arrow ------------------------------------------------------------------------
    def __post_init__(self) -> None:
        self.schema = stored_schema(self.schema)
        self.first_schema = self.schema     # a growing schema's before any commit

    def rows_of(self, data: pa.Table) -> list[dict[str, Any]]:
        """Rows of a batch as the write stores them (normalized types; nanoseconds exact to the
        microsecond, else the write is refused before the model sees it)."""
        data = data.cast(stored_schema(data.schema))
        cols = {n: canonical(data.column(n)) for n in data.column_names}
        return [{n: cols[n][i] for n in data.column_names} for i in range(data.num_rows)]

    def row_id(self, r: dict[str, Any]) -> RowId:
        return tuple(folder(r[f]) for f in self.partition_fields), tuple(r[f] for f in self.key_fields)

    # -- writes ----------------------------------------------------------------------------------
    def _commit(self, requested: str, completed: str, action: str, operation: str) -> None:
        self.commits.append(Commit(requested, completed, action, operation, dict(self.rows), self.schema))

    def _grow(self, data: pa.Table) -> None:
        if self.grows:
            new = [f for f in stored_schema(data.schema) if f.name not in self.schema.names and f.name != FLAG]
            self.schema = pa.schema([*self.schema, *new])

    def evolve(self, schema: pa.Schema) -> None:
        """The table's schema after a write whose data has new columns (old rows read null there)."""
        self.schema = stored_schema(schema)

    def newer(self, r: dict[str, Any], old: Row) -> bool:
        """Whether incoming row ``r`` replaces (or deletes) the stored ``old`` under event-time
        ordering: its ordering value is at least the stored one; a stored null ranks lowest.
        Several ordering fields compare field by field: the first unequal field decides
        (Hudi 1.1's rule); equal on every field is a tie, which the newer write wins."""
        fields = (self.ordering,) if isinstance(self.ordering, str) else self.ordering
        for f in fields:
            new, was = r[f], old.values.get(f)
            assert new is not None, "a row without an ordering value is refused before it is written"
            if was is None or order_key(new) > order_key(was):
                return True
            if order_key(new) < order_key(was):
                return False
        return True

    def merged(self, old: Row, r: dict[str, Any], requested: str) -> Row:
        """Incoming ``r`` merged into the stored ``old`` under a merge mode other than
        event-time ordering (see the module docstring)."""
        if self.merge_mode == "custom_max_v":
            new, was = r.get("v"), old.values.get("v")
            loses = (new is None and was is not None) or (new is not None and was is not None and new < was)
            return old if loses else Row(r, requested)
        values = dict(old.values)
        grouped: set[str] = set()
        for o, cols in self.groups.items():
            grouped |= {o, *cols}
            if r.get(o) is not None and (values.get(o) is None or order_key(r[o]) >= order_key(values[o])):
                values.update({c: r.get(c) for c in (o, *cols)})
        values.update({c: v for c, v in r.items() if c not in grouped and v is not None})
        return Row(values, requested)

    def _apply(self, rid: RowId, r: dict[str, Any], requested: str, *, write: bool) -> None:
        """Incoming ``r`` on every stored copy of ``rid``: each copy it beats is replaced by it
        (``write``) or deleted (not ``write``); the others stay, remembering ``r`` if it lost.
        Under the other merge modes every copy is merged with ``r`` (or deleted)."""
        out = []
        for c in stored(self.rows[rid]):
            if self.merge_mode != "event_time":
                if write:
                    out.append(self.merged(c, r, requested))
            elif self.newer(r, c):
                if write:
                    out.append(Row(r, requested))
            elif write and set(r) - set(c.values):
                out.append(Row(c.values, c.commit, (*c.losers, r)))
            else:
                out.append(c)
        row = packed(out)
        if row is None:
            del self.rows[rid]
        else:
            self.rows[rid] = row

    def upsert(self, data: pa.Table, requested: str, completed: str, action: str, operation: str = "upsert") -> None:
        self._grow(data)
        for r in self.rows_of(data):
            rid = self.row_id(r)
            if rid in self.rows:
                self._apply(rid, r, requested, write=not flagged(r))
            elif not flagged(r):
                self.rows[rid] = Row(r, requested)
        self._commit(requested, completed, action, operation)

    def insert(self, data: pa.Table, requested: str, completed: str, action: str, operation: str = "insert") -> None:
        """Inserts: a stored row id is stored again (another copy: no key lookup, as in Hudi)."""
        self._grow(data)
        for r in self.rows_of(data):
            rid = self.row_id(r)
            if flagged(r):
                continue
            old = self.rows.get(rid)
            self.rows[rid] = Row(r, requested) if old is None else Row(old.values, old.commit, old.losers,
                                                                        (*old.copies, Row(r, requested)))
        self._commit(requested, completed, action, operation)

    def merge(self, data: pa.Table, clauses: tuple[str, ...], requested: str, completed: str, action: str) -> None:
        """MERGE INTO on the record key, within the source row's partition (its folder): matched
        rows are updated (event-time ordering) or deleted (when the source's ordering value is at
        least the stored one), others inserted."""
        for r in self.rows_of(data):
            rid = self.row_id(r)
            if rid not in self.rows:
                if "insert" in clauses and not flagged(r):
                    self.rows[rid] = Row(r, requested)
            elif "delete" in clauses or ("update" in clauses and flagged(r)):
                self._apply(rid, r, requested, write=False)
            elif "update" in clauses:
                self._apply(rid, r, requested, write=True)
        self._commit(requested, completed, action, "merge")

    def delete_keys(self, keys: list[tuple[Any, ...]], requested: str, completed: str, action: str) -> None:
        ks = set(keys)
        self.rows = {rid: r for rid, r in self.rows.items() if rid[1] not in ks}
        self._commit(requested, completed, action, "delete")

    def delete_rows(self, ids: list[RowId], requested: str, completed: str, action: str) -> None:
        for rid in ids:
            self.rows.pop(rid, None)
        self._commit(requested, completed, action, "delete")

    def delete_ordered(self, data: pa.Table, requested: str, completed: str, action: str) -> None:
        """Deletes carrying ordering values (rows with the key, partition and ordering fields):
        a delete older than the stored version is ignored (event-time ordering)."""
        for r in self.rows_of(data):
            rid = self.row_id(r)
            if rid in self.rows:
                self._apply(rid, r, requested, write=False)
        self._commit(requested, completed, action, "delete")

    def insert_overwrite(self, data: pa.Table, requested: str, completed: str, action: str, *, table: bool) -> None:
        self._grow(data)
        new = self.rows_of(data)
        parts = {self.row_id(r)[0] for r in new}
        self.rows = {} if table else {rid: r for rid, r in self.rows.items() if rid[0] not in parts}
        for r in new:
            if not flagged(r):
                self.rows[self.row_id(r)] = Row(r, requested)
        self._commit(requested, completed, action, "insert_overwrite_table" if table else "insert_overwrite")

    def service(self, requested: str, completed: str, action: str, operation: str) -> None:
        """A compaction or clustering: new files, same rows (and the same commit times)."""
        self._commit(requested, completed, action, operation)

    # -- undo ------------------------------------------------------------------------------------
    def rollback_last(self) -> None:
        self.commits.pop()
        self._reset_to_last()

    def restore(self, savepoint: str) -> None:
        """Roll back every commit requested after the savepoint (in any order they completed)."""
        kept = [c for c in self.commits if c.requested <= savepoint]
        gone = {c.requested for c in self.commits} - {c.requested for c in kept}
        for c in kept:
            if c.visible is None:
                continue
            raced = {x.requested for x in self.commits if x.requested > c.requested and x.completed < c.completed}
            if raced <= gone:       # the commits it completed after are rolled back: it is as if it ran alone
                c.rows, c.visible = c.visible, None
            else:
                assert not raced & gone, f"the model cannot restore to {savepoint}: it keeps {c.requested} and " \
                    f"only some of the commits that completed inside it ({sorted(raced)})"
        self.commits = kept
        self._reset_to_last()

    def _reset_to_last(self) -> None:
        if self.commits:
            self.rows = dict(self.commits[-1].rows)
            self.schema = self.commits[-1].schema
        else:
            self.rows = {}
            if self.grows:
                self.schema = self.first_schema

    # -- several writers ---------------------------------------------------------------------------
    def completed_late(self, before: dict[RowId, Row], apply: Callable[[], None]) -> None:
        """Apply (``apply``: one of the write methods above) a write that completed after
        commits requested after it, which completed while it ran: in completion order on the
        current rows, as every write; and, for a read as of its requested time (which does not
        see those commits), on the rows ``before`` they completed.  Exact when no key of this
        write is one of theirs (the order of two writes of disjoint keys does not matter)."""
        rows = self.rows
        self.rows = dict(before)
        apply()
        visible = self.commits.pop().rows
        self.rows = rows
        apply()
        self.commits[-1].visible = visible

    # -- expected reads ----------------------------------------------------------------------------
    def commit(self, requested: str) -> Commit:
        return next(c for c in self.commits if c.requested == requested)

    def as_of(self, c: Commit) -> dict[RowId, Row]:
        """The rows a time-travel read as of ``c.requested`` returns: the commits requested at
        or before it, folded in the order they completed."""
        if c.visible is not None:
            return c.visible
        seen = [x for x in self.commits if x.requested <= c.requested]
        assert [x.requested for x in seen] == [x.requested for x in self.commits[:len(seen)]], \
            f"the model cannot read as of {c.requested}: commits requested later completed before some it sees"
        return seen[-1].rows

    def incremental(self, start: str | None, end: str | None) -> tuple[dict[RowId, Row], pa.Schema]:
        """Rows changed by commits completed in (start, end], in their state as of end, with the
        latest committed schema (an incremental read is typed by it, as Apache Hudi's are)."""
        upto = [c for c in self.commits if end is None or c.completed <= end]
        if not upto:
            return {}, self.schema
        state = upto[-1]
        completed = {c.requested: c.completed for c in self.commits}
        keep = {}
        for rid, row in state.rows.items():
            changed = packed([r for r in stored(row) if (start is None or completed[r.commit] > start)
                              and (end is None or completed[r.commit] <= end)])
            if changed is not None:
                keep[rid] = changed
        return keep, self.commits[-1].schema


def expected_rows(rows: dict[RowId, Row], schema: pa.Schema) -> list[tuple[Any, ...]]:
    """Sorted row tuples over the schema's columns (a column a row lacks reads null)."""
    return sorted((tuple(c.values.get(n) for n in schema.names) for r in rows.values() for c in stored(r)), key=repr)


def actual_rows(data: pa.Table, schema: pa.Schema, *, cast: bool = False) -> tuple[list[tuple[Any, ...]], list[str]]:
    """Sorted row tuples of what a read returned, over the model's columns, and the problems
    seen in the columns: a model column missing, of another type, or an extra column with values.
    ``cast``: a column of another type is cast (safely) to the written type and its values compared."""
    problems = []
    cols = {}
    for f in schema:
        if f.name not in data.column_names:
            if data.num_columns:    # a table without a commit has no schema yet
                problems.append(f"column {f.name!r} missing")
            cols[f.name] = [None] * data.num_rows
            continue
        got = data.schema.field(f.name).type
        col = data.column(f.name)
        if got != f.type:
            if cast:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    problems.append(f"column {f.name!r} is {got} and cannot be cast to {f.type}: {e}")
            else:
                problems.append(f"column {f.name!r} is {got}, written as {f.type}")
        cols[f.name] = canonical(col)
    for n in data.column_names:
        if n not in schema.names and not n.startswith("_hoodie_") and data.column(n).null_count != data.num_rows:
            problems.append(f"extra column {n!r} has values")
    rows = [tuple(cols[n][i] for n in schema.names) for i in range(data.num_rows)]
    return sorted(rows, key=repr), problems
