"""The internal columns of the batches the mergers work on.

Incoming batches carry ``_lk_op`` (int8: 0 upsert, 1 delete) and ``_lk_seq`` (int64: arrival
order, used to break ties inside one batch); ``_lk_row`` optionally carries the row of the
record's key in its file group's base file.
"""

from __future__ import annotations

__all__ = ["OP", "SEQ", "ROW", "OP_UPSERT", "OP_DELETE", "KEY", "PART", "IS_DELETED"]

OP = "_lk_op"
SEQ = "_lk_seq"
ROW = "_lk_row"   # optional: the row of the record's key in its file group's base file
OP_UPSERT = 0
OP_DELETE = 1
KEY = "_hoodie_record_key"
PART = "_hoodie_partition_path"
# Hudi's delete marker: an incoming or stored row whose (boolean) value is true is a delete
# of its record key (null and false: a live row)
IS_DELETED = "_hoodie_is_deleted"
