"""Concurrent schema evolution (Hudi RFC-82), checked under the lock at commit time.

Three schemas decide: the table schema when the write started, the table schema now (at
validation), and the writer's schema.  The decision table (scenario: start / validation /
writer -> outcome):

    1  none / none / S1  -> S1         5  S1 / S1 / S2  -> S2
    2  none / S1   / S1  -> S1         6  S1 / S2 / S1  -> S2 (the newer table schema)
    3  none / S2   / S3  -> conflict   7  S1 / S2 / S2  -> S2
    4  S1   / S1   / S1  -> S1         8  S1 / S2 / S3  -> conflict

Only equality is compared, as in Hudi.  lakesdk adds what the RFC names as the future
improvement, as an option (``reconcile=True``): in scenarios 3 and 8, when the writer's
schema evolved the start schema without dropping a column and every column both sides
have can hold both sides' values, the writer and the concurrently committed schema are
unified instead of failing (lakesdk never drops columns, so two writers that each added
columns reconcile).
"""

from __future__ import annotations

import pyarrow as pa

from lakesdk.exceptions import IncompatibleSchemaError, SchemaError, SchemaEvolutionConflictError
from lakesdk.format.schema import data_schema, unify_schemas

__all__ = ["SchemaEvolutionConflictError", "ensure_schema_unchanged", "resolve_concurrent_schema", "schemas_equal"]


def schemas_equal(a: pa.Schema | None, b: pa.Schema | None) -> bool:
    """Positional equality of column names and types (metadata and nullability ignored)."""
    if a is None or b is None:
        return a is b
    a, b = data_schema(a), data_schema(b)
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]


def _evolvable(start: pa.Schema | None, newer: pa.Schema, writer: pa.Schema) -> pa.Schema | None:
    """``newer`` unified with ``writer``, if the writer kept every column it started with."""
    if start is not None and not set(data_schema(start).names) <= set(writer.names):
        return None
    try:
        return unify_schemas(newer, writer)
    except (IncompatibleSchemaError, SchemaError):
        return None


def _describe(s: pa.Schema | None) -> str:
    return "none" if s is None else "{" + ", ".join(f"{f.name}: {f.type}" for f in data_schema(s)) + "}"


def resolve_concurrent_schema(start: pa.Schema | None, validation: pa.Schema | None, writer: pa.Schema, *,
                              table: str = "", instant: str = "", reconcile: bool = False) -> pa.Schema:
    """The schema to record in the commit, or :class:`SchemaEvolutionConflictError`."""
    if validation is None:                                        # scenario 1
        return writer
    if schemas_equal(writer, validation):                          # 2, 4, 7
        return writer
    if start is not None and schemas_equal(start, validation):     # 5: nobody else changed it
        return writer
    if start is not None and schemas_equal(writer, start):         # 6: keep the newer table schema
        return validation
    if reconcile:                                                  # 3, 8 with the improvement
        merged = _evolvable(start, validation, writer)
        if merged is not None:
            return merged
    raise SchemaEvolutionConflictError(
        f"Detected incompatible concurrent schema evolution. Write {instant} to {table!r} started with table "
        f"schema {_describe(start)} and writes {_describe(writer)}, but a concurrent commit changed the table "
        f"schema to {_describe(validation)}. This write was rolled back: re-read the table schema and retry"
        + (" with data whose columns fit both schemas (schema_reconcile is on, but a column's types clash)."
           if reconcile else
           ", or open the table with TableOptions(schema_reconcile=True) to unify compatible schemas."),
        instant=instant or None)


def ensure_schema_unchanged(target: pa.Schema, now: pa.Schema | None, *, table: str = "", instant: str = "") -> None:
    """A write whose files were listed again when its instant was created (a clean, archival or
    rollback ran since its snapshot) plans against commits its conflict check no longer sees;
    it writes its files with the schema ``target``, so when a concurrent commit gave the table
    (schema ``now``) a column ``target`` lacks, or another type, the file groups this write
    rewrites would lose it: a :class:`SchemaEvolutionConflictError` before anything is written."""
    if now is None:
        return
    have = {f.name: f.type for f in data_schema(target)}
    if all(have.get(f.name) == f.type for f in data_schema(now)):
        return
    raise SchemaEvolutionConflictError(
        f"Write {instant} to {table!r} writes schema {_describe(target)}, but a concurrent commit changed the table "
        f"schema to {_describe(now)} while a table service ran; nothing was written: retry the write (it then reads "
        "the new schema).", instant=instant or None)
