"""``Table.history()``, ``table.inspect.file_groups()`` and ``table.inspect.transactions().to_arrow()``
are ``pyarrow.Table``s of one fixed schema each, on an empty table and on one with rows, archived
instants and instants without write statistics, copy-on-write and merge-on-read; none of them needs pandas."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.concurrency.journal import TRANSACTIONS_SCHEMA
from lakesdk.format.instant import parse_instant_time
from lakesdk.table.listings import FILE_GROUPS_SCHEMA, HISTORY_SCHEMA

ROOT = Path(__file__).resolve().parents[2]

# The schemas written out: a change to one is a change of the public API, made here on purpose.
HISTORY = [("instant", "string", False), ("completed", "string", True),
           ("completed_at", "timestamp[ms, tz=UTC]", True), ("action", "string", False),
           ("operation", "string", True), ("inserted", "int64", True), ("updated", "int64", True),
           ("deleted", "int64", True), ("files", "int64", True), ("bytes", "int64", True),
           ("partitions", "int64", True), ("archived", "bool", False)]
FILE_GROUPS = [("partition", "string", False), ("file_id", "string", False), ("slices", "int64", False),
               ("base_instant", "string", True), ("base_file", "string", True), ("base_bytes", "int64", False),
               ("log_files", "int64", False)]
TRANSACTIONS = [("instant", "string", False), ("action", "string", False), ("operation", "string", False),
                ("outcome", "string", False), ("conflicts_with", "string", False), ("file_groups", "int64", False),
                ("seconds", "double", False), ("writer", "string", False), ("reason", "string", False)]
STATS = ["operation", "inserted", "updated", "deleted", "files", "bytes", "partitions"]


def _fields(schema: pa.Schema) -> list[tuple[str, str, bool]]:
    return [(f.name, str(f.type), f.nullable) for f in schema]


def _check(table: pa.Table, schema: pa.Schema, spelled: list[tuple[str, str, bool]]) -> None:
    assert isinstance(table, pa.Table)
    assert _fields(table.schema) == _fields(schema) == spelled
    for f in table.schema:
        if not f.nullable:
            assert table[f.name].null_count == 0, f.name


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "ts": [ts] * len(ids), "p": [f"p{i % 2}" for i in ids]})


@pytest.fixture(params=["cow", "mor"])
def table(request, tmp_path):
    opts = lk.TableOptions(engine="local", concurrency="optimistic")
    t = lk.Lake(str(tmp_path / "lake"), options=opts).create_table("t", key="id", partition_by="p", ordering="ts",
                                                                    table_type=request.param)
    yield t
    t.close()


def test_an_empty_table_lists_no_rows_with_the_full_schemas(table):
    _check(table.history(), HISTORY_SCHEMA, HISTORY)
    _check(table.inspect.file_groups(), FILE_GROUPS_SCHEMA, FILE_GROUPS)
    _check(table.inspect.transactions().to_arrow(), TRANSACTIONS_SCHEMA, TRANSACTIONS)
    assert table.history().num_rows == table.inspect.file_groups().num_rows == 0
    assert list(table.history().to_pandas().columns) == [n for n, _, _ in HISTORY]


def test_a_table_with_writes_services_and_archived_instants_keeps_the_schemas(table):
    writes = [table.upsert(_batch(range(4), 1))]
    writes += [table.upsert(_batch([i % 4, 10 + i], 2 + i)) for i in range(5)]
    if table.config.table_type == "MERGE_ON_READ":
        writes.append(table.maintenance.compact())
    table.maintenance.clean(retain_commits=1)
    archived = table.maintenance.archive(min_commits=2, max_commits=3).archived
    assert archived, "nothing was archived"
    table.maintenance.rollback(table.upsert(_batch([99], 9)).instant)     # an instant without write stats

    h = table.history()
    _check(h, HISTORY_SCHEMA, HISTORY)
    rows = h.to_pylist()
    assert [r["instant"] for r in rows if r["action"] in ("commit", "deltacommit", "compaction")] == \
        [w.instant for w in writes]
    assert {r["instant"] for r in rows if r["archived"]} == {i.requested for i in archived}
    assert any(r["archived"] for r in rows) and rows[-1]["action"] == "rollback" and not rows[-1]["archived"]
    for r in rows:
        assert r["completed_at"] == parse_instant_time(r["completed"]).replace(tzinfo=UTC)
        if r["action"] in ("clean", "rollback"):      # no write statistics: nulls, not zeros
            assert all(r[c] is None for c in STATS), r
        else:
            assert all(r[c] is not None for c in STATS), r
    assert rows[0]["inserted"] == 4 and rows[0]["partitions"] == 2
    # the write statistics of a row with nulls stay integers in Arrow (pandas makes them floats)
    assert h.schema.field("inserted").type == pa.int64() and h["inserted"].null_count >= 1

    fg = table.inspect.file_groups()
    _check(fg, FILE_GROUPS_SCHEMA, FILE_GROUPS)
    assert fg.num_rows >= 2 and set(fg["partition"].to_pylist()) == {"p=p0", "p=p1"}
    first = table.inspect.file_groups(as_of=writes[0].instant)
    _check(first, FILE_GROUPS_SCHEMA, FILE_GROUPS)
    assert first["slices"].to_pylist() == [1] * first.num_rows

    tx = table.inspect.transactions()
    _check(tx.to_arrow(), TRANSACTIONS_SCHEMA, TRANSACTIONS)
    assert tx.to_arrow().num_rows == len(tx) >= 6
    assert list(tx.to_pandas().columns) == [n for n, _, _ in TRANSACTIONS]


def test_the_listings_need_no_pandas(table):
    """With pandas impossible to import, the three listings still build (pyarrow itself
    imports pandas when it is there, to recognise pandas inputs: blocking it is the test)."""
    table.upsert(_batch(range(4), 1))
    code = ("import sys\n"
            "class NoPandas:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'pandas':\n"
            "            raise ModuleNotFoundError('pandas is blocked', name=name)\n"
            "sys.meta_path.insert(0, NoPandas())\n"
            "import lakesdk as lk\n"
            f"t = lk.open_table({table.path!r})\n"
            "assert t.history().num_rows == 1 and t.inspect.file_groups().num_rows == 2\n"
            "assert t.inspect.transactions().to_arrow().num_rows == 1\n"
            "assert 'pandas' not in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
