"""The ``lakesdk`` Spark data source's table side: Spark's read options as a
:class:`~lakesdk.table.query.Query`, planned with the same planner as ``t.read()``
(:mod:`lakesdk.engine.spark_source` is the Spark side).

Options (keys are case-insensitive; Hudi's Spark datasource names, and lakesdk's own):

=====================================================  ==========================================
``hoodie.datasource.query.type``                       ``snapshot`` (default), ``incremental``,
                                                       ``read_optimized``
``as.of.instant`` / ``as_of``                          time travel: the table as of that moment
``hoodie.datasource.read.begin.instanttime`` /         incremental: changes after that time
``start``                                              (exclusive; ``earliest``: from the start)
``hoodie.datasource.read.end.instanttime`` / ``end``   incremental: up to that time (inclusive)
``start_inclusive``                                    ``true``: the range is ``[start, end]``
``read_optimized``                                     ``true``: base files only
``meta_fields``                                        ``true``/``false``: the ``_hoodie_*`` columns
                                                       (default: ``false``, as ``t.read()`` and
                                                       ``t.incremental()``)
``columns``                                            the columns to return, comma separated
``where``                                              a filter in Spark SQL syntax
``storage_options``                                    the store's options, as JSON
``hoodie.datasource.streaming.startOffset``            a stream's start: ``earliest`` (default),
                                                       ``latest`` or an instant time (a stream's
                                                       rows have a snapshot's columns:
                                                       ``meta_fields=true`` adds ``_hoodie_*``)
``filterPushdown``                                     ``true``: take Spark's filters (see
                                                       :mod:`lakesdk.engine.spark_source`)
``hoodie.datasource.query.incremental.format``          ``cdc``: an incremental read returns the
                                                       changes (``t.changes()``: op, ts_ms,
                                                       before, after); ``latest_state`` (default)
=====================================================  ==========================================
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence, TypeVar

import pyarrow as pa

from lakesdk.engine.read import ScanPart, output_schema, split_plan
from lakesdk.engine.spark_source import LakeDataSource, register_source
from lakesdk.exceptions import InvalidFilterError, OptionsError
from lakesdk.format.cdc import changes_schema
from lakesdk.format.instant import to_instant_time
from lakesdk.format.schema import type_family, with_meta_fields
from lakesdk.read.predicate import from_filters
from lakesdk.table.query import Query

if TYPE_CHECKING:
    from lakesdk.table.changes import ChangeQuery
    from lakesdk.table.table import Table

__all__ = ["LakeSource", "TableBackend", "register"]

_Session = TypeVar("_Session")   # a classic or Spark Connect session, returned as given

QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF = "as.of.instant"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
STREAM_START = "hoodie.datasource.streaming.startoffset"
#: ``cdc``: an incremental read returns the changes (op, ts_ms, before, after), as Hudi's CDC
#: queries do; ``latest_state`` (the default): the changed records as they are at the end
INC_FORMAT = "hoodie.datasource.query.incremental.format"
EARLIEST = "earliest"

#: column families whose comparisons lakesdk's Arrow filter evaluates as Spark does
_EXACT = ("string", "int", "bool", "date")


PART_BYTES = "hoodie.lakesdk.read.partition.bytes"
#: every option the source reads (lower case, as Spark hands them over); any other is refused,
#: so that a misspelt time-travel or incremental option cannot silently read the snapshot
KNOWN_OPTIONS = frozenset({
    "path", QUERY_TYPE, AS_OF, "as_of", BEGIN, "start", END, "end", "start_inclusive", "read_optimized",
    "meta_fields", "columns", "where", "storage_options", STREAM_START, "filterpushdown", PART_BYTES, INC_FORMAT})


def check_options(options: dict[str, str]) -> None:
    """Refuse options the source does not read (an :class:`OptionsError` naming the closest
    known one)."""
    import difflib
    for key in options:
        if key.lower() in KNOWN_OPTIONS:
            continue
        near = difflib.get_close_matches(key.lower(), sorted(KNOWN_OPTIONS), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise OptionsError(f'spark.read.format("lakesdk") has no option {key!r}{hint} '
                           f"(it reads: {', '.join(sorted(KNOWN_OPTIONS - {'path'}))})", key=key)


def _flag(options: dict[str, str], key: str) -> bool | None:
    v = options.get(key)
    if v is None:
        return None
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(f"option {key!r} takes true or false, found {v!r}")
    return low == "true"


def _moment(value: str | None) -> str | None:
    if value is None or value.strip().lower() in ("", EARLIEST, "0", "000"):
        return None
    return to_instant_time(value)


def _first(options: dict[str, str], *keys: str) -> str | None:
    return next((options[k] for k in keys if options.get(k) not in (None, "")), None)


class TableBackend:
    """Reads of the table at the option ``path`` (:class:`lakesdk.engine.spark_source.SourceBackend`)."""

    def table(self, options: dict[str, str]) -> Table:
        from lakesdk.table.lake import open_table
        check_options(options)
        path = options.get("path")
        if not path:
            raise ValueError('spark.read.format("lakesdk") needs the table\'s path: .load(path)')
        raw = options.get("storage_options")
        return open_table(path, storage_options=json.loads(raw) if raw else None)

    def query(self, options: dict[str, str], filters: Sequence[tuple[str, str, Any]] = ()) -> Query:
        """The options (and pushed filters) as a query."""
        t = self.table(options)
        kind = (options.get(QUERY_TYPE) or "").strip().lower()
        start, end = _first(options, BEGIN, "start"), _first(options, END, "end")
        if not kind:
            kind = "incremental" if start is not None or end is not None else "snapshot"
        if kind not in ("snapshot", "incremental", "read_optimized"):
            raise ValueError(f"{QUERY_TYPE}={kind!r}: use snapshot, incremental or read_optimized")
        meta = _flag(options, "meta_fields")
        if kind == "incremental":
            if _first(options, AS_OF, "as_of") is not None:
                raise ValueError(f"{AS_OF} is for snapshot reads; an incremental read ends at {END}")
            q = t.incremental(_moment(start), _moment(end), start_inclusive=bool(_flag(options, "start_inclusive")),
                              meta_fields=bool(meta))
        else:
            if start is not None or end is not None:    # a snapshot would read something else
                from lakesdk.exceptions import OptionsError
                raise OptionsError(f"{BEGIN} / {END} bound incremental reads, not {QUERY_TYPE}={kind!r}: drop "
                                   f"them, or set {QUERY_TYPE}=incremental (or leave it out)", key=QUERY_TYPE)
            q = t.read(meta_fields=bool(meta),
                       read_optimized=kind == "read_optimized" or bool(_flag(options, "read_optimized")))
            moment = _first(options, AS_OF, "as_of")
            if moment is not None:
                q = q.as_of(moment)
        cols = [c.strip() for c in (options.get("columns") or "").split(",") if c.strip()]
        if cols:
            q = q.select(*cols)
        if options.get("where"):
            q = q.where(options["where"])
        if filters:
            q = q.where(list(filters))
        return q

    # -- change queries (hoodie.datasource.query.incremental.format=cdc) ---------------------------
    def _cdc(self, options: dict[str, str]) -> bool:
        fmt = (options.get(INC_FORMAT) or "latest_state").strip().lower()
        if fmt not in ("latest_state", "cdc"):
            raise OptionsError(f"{INC_FORMAT}={fmt!r}: use latest_state (the default) or cdc", key=INC_FORMAT)
        if fmt == "cdc":
            kind = (options.get(QUERY_TYPE) or "incremental").strip().lower()
            if kind != "incremental" or _first(options, AS_OF, "as_of") is not None:
                raise OptionsError(f"{INC_FORMAT}=cdc is a kind of incremental query: set {QUERY_TYPE}=incremental "
                                   "and bound it with begin and end instant times, not as.of.instant", key=INC_FORMAT)
            for key in ("columns", "meta_fields", "read_optimized"):
                if options.get(key):
                    raise OptionsError(f"option {key!r} does not apply to a change query ({INC_FORMAT}=cdc)", key=key)
        return fmt == "cdc"

    def change_query(self, options: dict[str, str]) -> ChangeQuery:
        t = self.table(options)
        start, end = _first(options, BEGIN, "start"), _first(options, END, "end")
        return t.changes(_moment(start), _moment(end), start_inclusive=bool(_flag(options, "start_inclusive")),
                         where=options.get("where") or None)

    def _change_parts(self, options: dict[str, str]) -> list[ChangePart]:
        q = self.change_query(options)
        plan = q.plan()
        raw = options.get("storage_options")
        return [ChangePart(q.table.path, raw, plan.timeline.time_of(s.instant), options.get("where") or None)
                for s in plan.steps]

    def schema(self, options: dict[str, str]) -> pa.Schema:
        if self._cdc(options):
            return changes_schema(self.change_query(options).plan().schema)
        q = self.query(options)
        plan = q.plan()
        return output_schema(plan, list(plan.columns))

    def exact(self, options: dict[str, str], filters: Sequence[tuple[str, str, Any]]) -> list[bool]:
        if self._cdc(options):
            return [False] * len(filters)     # Spark filters the changes
        q = self.query(options)
        schema = with_meta_fields(q.plan().schema)
        return [_exact(f, schema) for f in filters]

    def scan(self, options: dict[str, str], filters: Sequence[tuple[str, str, Any]]) -> list[ScanPart | ChangePart]:
        if self._cdc(options):
            return list(self._change_parts(options))
        return list(self._parts(self.query(options, filters), options))

    def _parts(self, q: Query, options: dict[str, str]) -> list[ScanPart]:
        plan = q.plan()
        size = options.get(PART_BYTES)
        return split_plan(q.table.context, plan, list(plan.columns), plan.scan_filter,
                          **({"part_bytes": int(size)} if size else {}))

    # -- streams ----------------------------------------------------------------------------------
    def initial(self, options: dict[str, str]) -> str:
        start = (options.get(STREAM_START) or EARLIEST).strip()
        if start.lower() == EARLIEST:
            return EARLIEST
        if start.lower() == "latest":
            return self.latest(options, EARLIEST)
        return to_instant_time(start)

    def latest(self, options: dict[str, str], start: str) -> str:
        """The time of the newest completed write an incremental read can end at: on table
        version 6 (requested times) the last before the first pending write, so a write that
        completes later cannot fall behind the stream."""
        t = self.table(options)
        timeline = t.timeline
        commits = list(timeline.commits)
        if not commits:
            return start
        if timeline.layout >= 2:
            newest = max(i.completed or i.requested for i in commits)
        else:
            pending = [i.requested for i in timeline.pending if i.action in ("commit", "deltacommit", "replacecommit")]
            floor = min(pending) if pending else None
            ok = [i.requested for i in commits if floor is None or i.requested < floor]
            if not ok:
                return start
            newest = max(ok)
        return newest if start == EARLIEST or newest > start else start

    def changes(self, options: dict[str, str], start: str, end: str) -> list[ScanPart | ChangePart]:
        opts = {k: v for k, v in options.items() if k not in (AS_OF, "as_of", BEGIN, "start", END, "end")}
        opts.update({QUERY_TYPE: "incremental", BEGIN: start, END: end})
        if self._cdc(opts):
            return list(self._change_parts(opts))
        opts.setdefault("meta_fields", "false")   # the stream's schema is a snapshot's (its options say no type)
        return list(self._parts(self.query(opts), opts))


@dataclass(frozen=True)
class ChangePart:
    """One commit of a change query, read in a task: the table opened there, its changes of
    the commit completed at ``time`` (picklable and small)."""

    path: str
    storage_options: str | None     # JSON, as the option holds it
    time: str
    where: str | None = None        # the option ``where``: the changes whose record matches

    def batches(self) -> Iterator[pa.RecordBatch]:
        from lakesdk.table.lake import open_table
        t = open_table(self.path, storage_options=json.loads(self.storage_options) if self.storage_options else None)
        yield from t.changes(self.time, self.time, start_inclusive=True, where=self.where).to_batches()


def _exact(f: tuple[str, str, Any], schema: pa.Schema) -> bool:
    """True when lakesdk's filter of ``f`` keeps exactly the rows Spark's would."""
    col, op, value = f
    if col not in schema.names:
        return False
    if op in ("IS", "IS NOT"):
        return True
    fam = type_family(schema.field(col).type)
    if fam not in _EXACT:
        return False
    values = value if op in ("IN", "NOT IN") else [value]
    want = {"string": str, "int": int, "bool": bool, "date": type(None)}[fam]
    import datetime as _dt
    for v in values:
        if fam == "date":
            if not isinstance(v, _dt.date) or isinstance(v, _dt.datetime):
                return False
        elif not isinstance(v, want) or (fam == "int" and isinstance(v, bool)):
            return False
    try:
        from_filters([f]).bind(schema)
    except (InvalidFilterError, ValueError, TypeError):
        return False
    return True


class LakeSource(LakeDataSource):
    """The ``lakesdk`` Spark data source (``spark.read.format("lakesdk")``)."""

    backend = TableBackend()


_REGISTERED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def register(spark: _Session) -> _Session:
    """Register the ``lakesdk`` format with ``spark`` (a classic or Spark Connect session);
    idempotent.  Returns the session."""
    register_source(spark, LakeSource)
    _REGISTERED.add(spark)
    return spark


def register_once(spark: Any) -> None:
    """:func:`register` unless this session already has it; failures are ignored (a
    session that cannot take Python data sources still runs everything else)."""
    if spark is None or spark in _REGISTERED:
        return
    _REGISTERED.add(spark)
    try:
        register_source(spark, LakeSource)
    except Exception:   # noqa: BLE001 - best effort: lk.spark.register(spark) says why
        pass

