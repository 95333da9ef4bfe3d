"""Resolving a table's schema as of an instant."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from lakesdk.engine.base_file import BASE_FILE_EXTENSIONS, file_schema
from lakesdk.format.commit_metadata import CommitMetadata
from lakesdk.format.schema import arrow_to_avro, avro_to_arrow, data_schema
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

__all__ = ["ARROW_SCHEMA_KEY", "schema_extra_metadata", "resolve_schema"]

ARROW_SCHEMA_KEY = "lakesdk.arrow.schema"


def schema_extra_metadata(schema: pa.Schema, table_name: str) -> dict[str, str]:
    """extraMetadata entries for a commit: Hudi's Avro schema and the exact Arrow schema."""
    return {
        "schema": json.dumps(arrow_to_avro(schema, table_name), separators=(",", ":")),
        ARROW_SCHEMA_KEY: base64.b64encode(data_schema(schema).remove_metadata().serialize().to_pybytes()).decode(),
    }


def _from_metadata(md: CommitMetadata) -> pa.Schema | None:
    raw = md.extra_metadata.get(ARROW_SCHEMA_KEY)
    if raw:
        try:
            return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw)))
        except Exception:  # noqa: BLE001 - fall back to the Avro schema
            pass
    return None


def resolve_schema(store: TimelineStore, timeline: Timeline, *, create_schema: dict | None,
                   base_file: str | Callable[[], str | None] | None = None,
                   history: Iterable[Any] = ()) -> pa.Schema | None:
    """Data schema (no meta fields) as of the latest instant of ``timeline``.

    ``history``: archived write instants (:class:`~lakesdk.format.lsm_timeline.ArchivedInstant`)
    that are visible too (a time-travel read to an archived commit); their commit metadata
    counts as the active ones' does.

    Order: lakesdk's exact Arrow schema in commit metadata; the footer of a base file
    written by that commit; Hudi's Avro schema in commit metadata; the table's create schema.
    """
    archived = {a.instant: a.metadata or b"" for a in history}
    writes = sorted([*timeline.commits.by_completion(), *archived],
                    key=lambda i: (i.completed or i.requested, i.requested))
    # table services do not evolve the schema (RFC-82's schema-evolution timeline): a
    # compaction that completes after a concurrent schema change carries the older schema
    services = [i for i in writes if i.action in ("compaction", "clustering")]
    writes = services + [i for i in writes if i.action not in ("compaction", "clustering")]
    for inst in reversed(writes):
        md = (CommitMetadata.parse(archived[inst], layout=2, replace=inst.completed_action == "replacecommit")
              if inst in archived else store.commit_metadata(inst))
        s = _from_metadata(md)
        if s is not None:
            return s
        for st in md.write_stats:
            if st.path and st.path.endswith(BASE_FILE_EXTENSIONS):
                try:
                    return data_schema(file_schema(store.storage, st.path))
                except FileNotFoundError:
                    continue
        if md.schema:
            return avro_to_arrow(md.schema)
    if callable(base_file):     # found only when no commit says the schema
        base_file = base_file()
    if base_file:
        return data_schema(file_schema(store.storage, base_file))
    if create_schema:
        return data_schema(avro_to_arrow(create_schema))
    return None


