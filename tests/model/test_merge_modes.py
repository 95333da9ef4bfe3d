"""Model-based test of the tables that do not merge by event time alone: partial-update tables
(``partial_update="ignore_defaults"``, and ``merge_mode="partial_update"`` with column groups:
several streams, each ordering field guarding its own columns) and a custom merger.

The machine is the model test's (tests/model/test_model.py: its operations, its services, its
crashed writers and its checks after every step: snapshot, time travel, incremental reads and
the ``hudi`` reader) on such a table, with the model (tests/table_model.py) folding each upsert
as the table's merge mode says:

* ``ignore_defaults`` (table version 9 only: on version 8 ``create_table`` refuses it, which the
  machine checks): a batch leaves columns out, or holds nulls, and the stored values stay;
* column groups: each batch is one stream's (the key, its ordering field, its columns and now
  and then the columns in no group), or every stream's at once (a new column); a row whose
  ordering field is null does not write its group (its columns are null then);
* a custom merger (:func:`max_v`, registered here): the version with the greatest ``v``.

What these tables refuse is tried too, and must be refused with its typed error and the table
unchanged: ``create_table(index="global")``, an upsert through a handle with a global index
into a partitioned table (``lk.OptionsError``: a moved key would need merging column by
column), an upsert of a column-group table without any ordering field
(``lk.MissingColumnError``).  Keys stored twice and merges (Spark) are left to the model test.

The ``hudi`` reader merges ``IGNORE_DEFAULTS`` itself; a table merged by lakesdk's own merger
(column groups, a custom merger) is ``CUSTOM`` to Hudi, so the reader is compared on such a
table only while no log file exists (copy-on-write, or merge-on-read after a compaction and
the clean of the logs: docs/reading-hudi-tables.md, "Known differences").
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule, run_state_machine_as_test
from table_model import FLAG, TableModel

import lakesdk as lk
from lakesdk.testing import strategies as lst

from . import test_model as tm

KINDS = ("ignore_defaults", "column_groups", "custom")
MERGER = "model_max_v"
SMALL = st.sampled_from([None, 0, 1, 2, 3, 4])     # ordering values and v: ties and nulls often


def max_v(versions: pa.Table) -> pa.Table:
    """Per record key, in commit order (``_lk_seq``): a delete removes the record, and after it
    the version with the greatest ``v`` wins (null lowest; ties: the later version)."""
    keys = versions.column("_hoodie_record_key").to_pylist()
    v = versions.column("v").to_pylist() if "v" in versions.column_names else [None] * len(keys)
    seq = versions.column("_lk_seq").to_pylist()
    op = versions.column("_lk_op").to_pylist()
    best: dict[str, int | None] = {}
    for i in sorted(range(len(keys)), key=lambda i: seq[i]):
        j = best.get(keys[i])
        if op[i] == 1:
            best[keys[i]] = None
        elif j is None or v[i] is not None and (v[j] is None or v[i] >= v[j]) or v[i] is v[j] is None:
            best[keys[i]] = i
    return versions.take(pa.array(sorted(i for i in best.values() if i is not None), pa.int64()))


lk.register_merger(MERGER, max_v)

#: the model test's dimensions this machine leaves out: merges (Spark; their column rules are the
#: model test's), keys stored twice (a custom merger folds every version of a key into one),
#: event-time ordering's null and float values, column names equal but for case
LEFT_OUT = {"merge", "merge_key_change", "merge_into_empty", "duplicate_keys", "null_ordering", "float_ordering",
            "case_clash"}


class MergeModeMachine(tm.LakeMachine):
    """A partial-update or custom-merger table, its model, and the model test's operations."""

    kind = ""

    @initialize(data=st.data())
    def create(self, data: st.DataObject) -> None:
        on = tm._on
        kind = data.draw(st.sampled_from(KINDS), label="merge mode")
        self.kind = kind
        table_type = data.draw(st.sampled_from([k for k in ("cow", "mor") if on(k)]), label="table_type")
        composite = on("composite_key") and data.draw(st.booleans(), label="composite key")
        partitioned = on("partitioned") and data.draw(st.booleans(), label="partitioned")
        version = data.draw(st.sampled_from([9, 8]), label="table version") if on("table_v8") else 9
        keys = ("k", "k2") if composite else ("k",)
        parts = ("p",) if partitioned else ()
        fields = [pa.field(k, pa.string()) for k in keys] + [pa.field(p, pa.string()) for p in parts]
        fields.append(pa.field("ts", pa.int64()))     # the first group's ordering field, else plain data
        fields += [pa.field("v", pa.int64())] if kind == "custom" else []
        fields += [pa.field("ts2", pa.int64())] if kind == "column_groups" else []
        ntypes = data.draw(st.lists(lst.column_types(tm.FEATURES), min_size=1, max_size=3), label="column types")
        cols = [f"c{i}" for i in range(len(ntypes))]
        fields += [pa.field(c, t) for c, t in zip(cols, ntypes)]
        schema = pa.schema(fields)
        groups: dict[str, list[str]] = {"ts": [], "ts2": []}
        if kind == "column_groups":     # each column in a group, or in none
            for c in cols:
                g = data.draw(st.sampled_from(["ts", "ts2", None]), label=f"group of {c}")
                if g:
                    groups[g].append(c)
        self.key_pool = data.draw(st.lists(lst.key_values(tm.FEATURES), min_size=2, max_size=6, unique=True),
                                  label="keys")
        self.part2_pool = data.draw(st.lists(lst.key_part_values(tm.FEATURES, nullable=True), min_size=2, max_size=6,
                                             unique=True), label="second key parts") if composite else []
        self.part_pool = data.draw(st.lists(lst.partition_values(tm.FEATURES), min_size=1, max_size=3, unique=True),
                                   label="partition values") if partitioned else [None]
        self.urlencode = partitioned and on("part_urlencode") and data.draw(st.booleans(), label="urlencode")
        self.markers = "timeline_server" if on("timeline_server_markers") and data.draw(st.booleans()) else "direct"
        self.options = lk.TableOptions(engine=self.engine, markers=self.markers)
        self.ts_values = st.integers(0, 4)
        kw: dict[str, Any] = {"ignore_defaults": {"partial_update": "ignore_defaults"},
                              "column_groups": {"merge_mode": "partial_update", "column_groups": groups},
                              "custom": {"merge_mode": "custom", "merger": MERGER}}[kind]
        lake = lk.Lake(self.dir, options=self.options)
        args = dict(key=list(keys), partition_by=list(parts) or None, table_type=table_type,
                    partition_urlencode=self.urlencode, **kw)
        # refused before anything is created: on version 8 Hudi 1.1's partial update mode, and a global
        # index (a key moved between partitions would need merging column by column)
        if kind == "ignore_defaults" and version == 8:
            with pytest.raises(lk.SchemaError, match="table_version=9"):
                lake.create_table("t", table_version=8, **args)
            version = 9
        with pytest.raises(lk.SchemaError, match="global index"):
            lake.create_table("t", index="global", table_version=version, **args)
        assert not lake.tables(), "a refused create_table left a table"
        self.t = lake.create_table("t", table_version=version, **args)
        self.input_fields = {f.name: f for f in schema}
        merge = {"ignore_defaults": "ignore_defaults", "column_groups": "column_groups", "custom": "custom_max_v"}
        # the table's schema is the columns written so far: a stream writes its own columns
        self.m = TableModel(keys, parts, "ts", pa.schema(fields[:len(keys) + len(parts)]), merge_mode=merge[kind], grows=True,
                            groups={o: tuple(c) for o, c in groups.items()} if kind == "column_groups" else {})
        note(f"table {kind} {table_type} v{version} keys={keys} parts={parts} schema={schema} groups={groups} "
             f"markers={self.markers} urlencode={self.urlencode}")

    # -- data ------------------------------------------------------------------------------------------
    def _batch(self, data: st.DataObject, *, fresh: bool = False, schema: pa.Schema | None = None,
               max_rows: int = 5, part: Any = ...) -> pa.Table:
        """The model test's batch, cut to what this table's writers send."""
        every = schema is None      # not a batch adding a column (its schema is the model's and the new one)
        if schema is not None and "ts" not in schema.names:     # the model test's batches carry it
            schema = schema.append(self.input_fields["ts"])
        b = super()._batch(data, fresh=fresh, schema=schema or pa.schema(list(self.input_fields.values())),
                           max_rows=max_rows, part=part)
        m = self.m
        fixed = {*m.key_fields, *m.partition_fields, FLAG}
        if self.kind == "ignore_defaults":      # a batch may leave columns out: their stored values stay
            # (not a batch adding a column: the model's schema takes the new column)
            optional = [c for c in b.column_names if c not in fixed] if every else []
            left_out = data.draw(st.lists(st.sampled_from(optional), unique=True), label="columns left out") \
                if optional else []
            return b.drop_columns(left_out)
        if self.kind == "custom":
            return self._set(b, "v", [data.draw(SMALL, label="v") for _ in range(len(b))]) if "v" in b.column_names \
                else b
        if every:      # one stream: its ordering field and columns (the ungrouped ones now and then)
            o = data.draw(st.sampled_from(sorted(m.groups)), label="stream")
            grouped = {c for g, cs in m.groups.items() for c in (g, *cs)}
            ungrouped = {c for c in b.column_names if c not in grouped} if data.draw(st.booleans(), label="ungrouped") \
                else set()
            keep = fixed | {o, *m.groups[o]} | ungrouped
            b = b.select([c for c in b.column_names if c in keep])
        for o, cols in m.groups.items():
            if o not in b.column_names:
                continue
            values = [data.draw(SMALL, label=o) for _ in range(len(b))]
            b = self._set(b, o, values)
            unwritten = pa.array([v is None for v in values], pa.bool_())
            for c in cols:      # a row that does not write its group (null ordering value) holds no value there
                if c in b.column_names:
                    col = b.column(c)
                    b = b.set_column(b.column_names.index(c), b.schema.field(c),
                                     pc.if_else(unwritten, pa.scalar(None, col.type), col))
        return b

    @staticmethod
    def _set(b: pa.Table, name: str, values: list[Any]) -> pa.Table:
        i = b.column_names.index(name)
        return b.set_column(i, b.schema.field(i), pa.array(values, b.schema.field(i).type))

    def _refusal(self, b: pa.Table) -> str | None:
        """The model test's input rules but the one on null ordering values: these tables store
        them (a column group's null one: the stream did not write the group)."""
        return super()._refusal(b.drop_columns(["ts"]) if "ts" in b.column_names else b)

    # -- refusals ----------------------------------------------------------------------------------------
    @precondition(lambda self: self.t is not None and tm._on("upsert"))
    @rule(data=st.data())
    def upsert_with_global_index(self, data: st.DataObject) -> None:
        """A handle with a global index: on a partitioned table an upsert would merge a key moved
        between partitions with its stored version column by column, which lakesdk refuses
        (``lk.OptionsError``); on an unpartitioned one every index is the same."""
        b = self._batch(data)
        g = lk.open_table(self.t.path, options=replace(self.options, index_type="global_simple"))
        try:
            if self.m.partition_fields:
                self._refused_as("upsert with a global index", lambda: g.upsert(b), lk.OptionsError, b)
            else:
                self._write("upsert with a global index", lambda: g.upsert(b),
                            lambda r, c, a: self.m.upsert(b, r, c, a), b)
        finally:
            g.close()

    @precondition(lambda self: self.t is not None and self.kind == "column_groups" and tm._on("upsert"))
    @rule(data=st.data())
    def upsert_without_ordering_fields(self, data: st.DataObject) -> None:
        """A batch of a column-group table holding none of its ordering fields: no stream's
        (``lk.MissingColumnError``)."""
        b = self._batch(data)
        b = b.drop_columns([o for o in self.m.groups if o in b.column_names])
        self._refused_as("upsert without an ordering field", lambda: self.t.upsert(b), lk.MissingColumnError, b)

    # -- checks -----------------------------------------------------------------------------------------
    @invariant()
    def check_4_hudi_reader(self) -> None:
        if self.t is None:
            return
        if self.kind != "ignore_defaults" and self.t.table_type == "MERGE_ON_READ" and any(
                ".log." in n for _d, _s, names in os.walk(self.t.path.removeprefix("file://")) for n in names):
            return      # CUSTOM to Hudi: the hudi reader refuses log files it cannot merge (documented)
        super().check_4_hudi_reader()


def _features() -> frozenset[str]:
    return tm.FEATURES - LEFT_OUT


def test_merge_mode_tables_match_model(monkeypatch: Any) -> None:
    """Random operation sequences on partial-update and custom-merger tables: every read equals
    the model."""
    monkeypatch.setattr(tm, "FEATURES", _features())
    run_state_machine_as_test(MergeModeMachine, settings=tm._settings(
        12, 15, derandomize=not os.environ.get("LAKESDK_MODEL_RANDOM")))


@pytest.mark.soak
@pytest.mark.skipif(not os.environ.get("LAKESDK_SOAK_MINUTES"), reason="set LAKESDK_SOAK_MINUTES to run the soak")
def test_merge_mode_tables_match_model_soak(monkeypatch: Any) -> None:
    """The merge-mode machine for LAKESDK_SOAK_MINUTES minutes, with longer sequences."""
    monkeypatch.setattr(tm, "FEATURES", _features())
    start = time.monotonic()
    stop = start + float(os.environ.get("LAKESDK_SOAK_MINUTES") or 30) * 60
    rounds = 0
    tm.LakeMachine.steps_checked = 0
    while time.monotonic() < stop:
        run_state_machine_as_test(MergeModeMachine, settings=tm._settings(50, 40, database=None))
        rounds += 1
    print(f"soak: {(time.monotonic() - start) / 60:.1f} min, {rounds} rounds of up to 50 sequences x 40 steps, "
          f"{tm.LakeMachine.steps_checked} steps checked")
