"""Change data capture (Apache Hudi's RFC-51): the table properties, the CDC log files and
their records, and the changes a commit made to one file group.

A table with ``hoodie.table.cdc.enabled=true`` logs, for each copy-on-write base file a write
rewrites, the changes it made in a CDC log file beside the new base file
(``.<fileId>_<instant>.log.<version>_<writeToken>.cdc``, one ``CDC_DATA`` block of Avro
records, listed in the write stat's ``cdcStats``), as Hudi's ``HoodieMergeHandleWithChangeLog``
does.  ``hoodie.table.cdc.supplemental.logging.mode`` says what a record holds:
``OP_KEY_ONLY`` (``op``, ``record_key``), ``DATA_BEFORE`` (and ``before``) or
``DATA_BEFORE_AFTER`` (``op``, ``ts_ms``, ``before``, ``after``; Hudi's default).  The images
are the record's data columns, without the meta fields.  Merge-on-read writes log no changes:
a reader infers them from the log files (Hudi's ``LOG_FILE`` case)."""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["CDC_ENABLED_KEY", "CDC_MODE_KEY", "MODES", "DEFAULT_MODE", "CDC_SUFFIX", "logging_mode", "changes_schema",
           "diff_records", "cdc_avro_schema", "cdc_block_records", "cdc_log_block", "parse_mode"]

CDC_ENABLED_KEY = "hoodie.table.cdc.enabled"
CDC_MODE_KEY = "hoodie.table.cdc.supplemental.logging.mode"
MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
DEFAULT_MODE = "DATA_BEFORE_AFTER"
#: the suffix of a CDC log file's name (``-cdc`` before Hudi 0.13, still read)
CDC_SUFFIX = ".cdc"
_KEY, _TIME = "_hoodie_record_key", "_hoodie_commit_time"


def parse_mode(value: str) -> str:
    """A logging mode as Hudi reads it (case-insensitive: Hudi 0.13 wrote lower case)."""
    mode = str(value).strip().upper()
    if mode not in MODES:
        raise ValueError(f"{CDC_MODE_KEY} must be one of {', '.join(MODES)}, not {value!r}")
    return mode


def logging_mode(props: Mapping[str, str]) -> str | None:
    """The CDC logging mode of a table's properties, None when CDC is off."""
    if str(props.get(CDC_ENABLED_KEY, "false")).strip().lower() != "true":
        return None
    return parse_mode(props.get(CDC_MODE_KEY) or DEFAULT_MODE)


def cdc_avro_schema(mode: str, table_record: dict) -> dict:
    """The Avro schema of a CDC log's records in ``mode`` (Hudi's ``HoodieCDCUtils``):
    ``table_record`` is the table's Avro record without the meta fields."""
    if mode == "OP_KEY_ONLY":
        return {"type": "record", "name": "Record", "fields": [{"name": "op", "type": ["string", "null"]},
                                                               {"name": "record_key", "type": ["string", "null"]}]}
    def field(name: str, t: object) -> dict:
        return {"name": name, "type": ["null", t], "doc": "", "default": None}
    full = ".".join(p for p in (table_record.get("namespace"), table_record["name"]) if p)
    if mode == "DATA_BEFORE":
        fields = [field("op", "string"), field("record_key", "string"), field("before", table_record)]
    else:
        fields = [field("op", "string"), field("ts_ms", "string"), field("before", table_record),
                  field("after", full)]
    return {"type": "record", "name": "CDC", "doc": "", "fields": fields}


def cdc_log_block(changes: pa.Table, schema: pa.Schema, table_name: str, mode: str, instant: str) -> bytes | None:
    """The CDC log file (one ``CDC_DATA`` block) of the changes :func:`diff_records` found in a
    base file's rewrite, None when there is none to log: no change, or inserts only (Hudi's
    reader then takes the new base file's records as inserts, ``BASE_FILE_INSERT``)."""
    import json

    from lakesdk.format.log_data_blocks import encode_avro_data_block
    from lakesdk.format.log_framing import BlockType, HeaderKey
    from lakesdk.format.schema import arrow_to_avro
    if not changes.num_rows or pc.all(pc.equal(changes.column("op"), "i")).as_py():
        return None
    avro = cdc_avro_schema(mode, arrow_to_avro(schema, table_name))
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: json.dumps(avro)}
    return encode_avro_data_block(cdc_block_records(changes, mode), avro, header, block_type=BlockType.CDC_DATA)


def cdc_block_records(changes: pa.Table, mode: str) -> pa.Table:
    """The records of a CDC log block in ``mode`` of the changes :func:`diff_records` found."""
    if mode == "OP_KEY_ONLY":
        return changes.select(["op", "record_key"])
    if mode == "DATA_BEFORE":
        return changes.select(["op", "record_key", "before"])
    return changes.select(["op", "ts_ms", "before", "after"])


def changes_schema(schema: pa.Schema) -> pa.Schema:
    """The rows of a change query of a table of data schema ``schema``."""
    image = pa.struct(list(schema))
    return pa.schema([pa.field("op", pa.string(), nullable=False), pa.field("ts_ms", pa.string(), nullable=False),
                      pa.field("before", image), pa.field("after", image)])


def diff_records(before: pa.Table, after: pa.Table, instant: str, schema: pa.Schema) -> pa.Table:
    """The changes ``instant`` made to one file group whose records were ``before`` and are
    ``after`` (both with the meta fields and the columns of ``schema``), in key order: ``i``
    for a record it wrote whose key the group did not hold, ``u`` for one whose key it held
    (before: that record), ``d`` for a key the group no longer holds.  A key held more than
    once (an insert of a stored key keeps both) pairs its records in order.  The last column,
    ``record_key``, is each change's ``_hoodie_record_key``."""
    bk, ak = _keys(before), _keys(after)
    written = pc.indices_nonzero(pc.equal(after.column(_TIME).combine_chunks(), instant))
    wk = ak.take(written)
    if len(pc.unique(bk)) == len(bk) and len(pc.unique(wk)) == len(wk) and \
            len(pc.unique(ak)) == len(ak):
        pos = pc.index_in(wk, value_set=bk)                       # null: an insert
        gone = pc.indices_nonzero(pc.invert(pc.is_in(bk, value_set=ak)))
        keys = pa.concat_arrays([wk, bk.take(gone)])
        before_idx = pa.concat_arrays([pos.cast(pa.int64()), gone.cast(pa.int64())])
        after_idx = pa.concat_arrays([written.cast(pa.int64()), pa.nulls(len(gone), pa.int64())])
        ops = pa.concat_arrays([pc.if_else(pos.is_null(), "i", "u"), pa.array(["d"] * len(gone), pa.string())])
    else:
        keys, before_idx, after_idx, ops = _paired(before, after, bk, ak, instant)
    order = pc.sort_indices(pa.table({"k": keys, "o": ops}), sort_keys=[("k", "ascending"), ("o", "ascending")])
    n = len(keys)
    return pa.table({
        "op": ops.take(order),
        "ts_ms": pa.array([instant] * n, pa.string()),
        "before": _images(before, schema).take(before_idx.take(order)),
        "after": _images(after, schema).take(after_idx.take(order)),
        "record_key": keys.take(order),
    })


def _keys(t: pa.Table) -> pa.Array:
    return t.column(_KEY).combine_chunks().cast(pa.string())


def _images(t: pa.Table, schema: pa.Schema) -> pa.Array:
    """The data columns of ``t`` as one struct array (a record's image, no meta fields)."""
    cols = [t.column(f.name).combine_chunks() for f in schema]
    return pa.StructArray.from_arrays(cols, fields=list(schema)) if cols else pa.array([{}] * t.num_rows)


def _paired(before: pa.Table, after: pa.Table, bk: pa.Array, ak: pa.Array,
            instant: str) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """:func:`diff_records` where a key is held more than once: the records a commit kept are
    the same versions (commit time and sequence number) before and after; the others pair in
    order, updates first, the rest inserts or deletes."""
    def version(t: pa.Table) -> list[tuple[str, str]]:
        return list(zip(t.column(_TIME).to_pylist(), t.column("_hoodie_commit_seqno").to_pylist()))
    bv, av = version(before), version(after)
    by_key: dict[str, tuple[list[int], list[int]]] = {}
    for i, k in enumerate(bk.to_pylist()):
        by_key.setdefault(k, ([], []))[0].append(i)
    for i, k in enumerate(ak.to_pylist()):
        by_key.setdefault(k, ([], []))[1].append(i)
    keys: list[str] = []
    bi: list[int | None] = []
    ai: list[int | None] = []
    ops: list[str] = []
    for k, (bs, as_) in by_key.items():
        kept = {av[i] for i in as_ if av[i][0] != instant}
        olds = [i for i in bs if bv[i] not in kept]
        news = [i for i in as_ if av[i][0] == instant]
        for j in range(max(len(olds), len(news))):
            o = olds[j] if j < len(olds) else None
            w = news[j] if j < len(news) else None
            keys.append(k)
            bi.append(o)
            ai.append(w)
            ops.append("u" if o is not None and w is not None else ("i" if o is None else "d"))
    return (pa.array(keys, pa.string()), pa.array(bi, pa.int64()), pa.array(ai, pa.int64()),
            pa.array(ops, pa.string()))
