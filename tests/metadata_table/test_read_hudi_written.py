"""Reading the metadata tables Apache Hudi wrote: the ``files`` partition lists exactly what
storage holds for the completed instants, and every ``record_index`` entry points to the file
group that holds its key."""

from __future__ import annotations

import pytest

import lakesdk as lk
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file
from lakesdk.read.metadata_table import MetadataTableReader

from .. import helpers
from ..corpus_model import MDT_TABLES, mdt_files, storage_files


@pytest.mark.parametrize("rel", sorted(MDT_TABLES))
def test_files_partition_lists_what_storage_holds(corpus, rel):
    t = lk.open_table(helpers.zipped_table(corpus, rel))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    listed = mdt_files(t)
    assert listed == storage_files(t)
    assert mdt.partitions() == sorted({p for p, _ in listed})


RECORD_INDEXED = sorted(rel for rel, cfg in MDT_TABLES.items()
                        if "record_index" in cfg.props.get("hoodie.table.metadata.partitions", ""))


@pytest.mark.parametrize("rel", RECORD_INDEXED)
def test_record_index_points_to_the_file_group_of_each_key(corpus, rel):
    t = lk.open_table(helpers.zipped_table(corpus, rel))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    rows = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_arrow()
    held: dict[str, set[tuple[str, str]]] = {}     # a Hudi-written table may hold a key twice (an INSERT of it)
    for k, p, f in zip(rows.column("_hoodie_record_key").to_pylist(), rows.column("_hoodie_partition_path").to_pylist(),
                       rows.column("_hoodie_file_name").to_pylist()):
        held.setdefault(k, set()).add((p, _file_id(f)))
    assert held
    index = {k: r.location for k, r in mdt.records("record_index").items() if r.location is not None}
    assert set(index) == set(held)
    for key, loc in index.items():
        assert (loc.partition, loc.file_id) in held[key], key

def _file_id(name: str) -> str:
    """The file group of a ``_hoodie_file_name``: a base file name, a log file name or a file id."""
    if is_base_file(name):
        return BaseFile.parse(name).file_id
    try:
        return LogFile.parse(name).file_id
    except Exception:  # noqa: BLE001 - a bare file id
        return name


def test_damaged_records_are_typed_errors_naming_the_file():
    import json

    from lakesdk.exceptions import CorruptFileError
    from lakesdk.format.metadata_records import FileEntry, decode_record, merge_file_entries, record_schema
    schema = json.dumps(record_schema())
    for bad in (b"", b"\x02", b"\xff" * 12, b"\x00\x04\x02\x02\x02a\x10\x00\x00extra"):
        with pytest.raises(CorruptFileError, match="f.hfile") as e:
            decode_record(bad, schema, key=b"k", path="f.hfile")
        assert e.value.path == "f.hfile"
    import io

    import fastavro
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, record_schema(), {"key": "", "type": 2, "filesystemMetadata": {"a": {
        "size": 3, "isDeleted": False}}})
    good = buf.getvalue()
    assert decode_record(good, schema, key=b"p=1").files == {"a": FileEntry(3, False)}
    with pytest.raises(CorruptFileError, match="not UTF-8"):
        decode_record(good, schema, key=b"\xff", path="f")
    # the files merge is Hudi's: sizes only grow, a deletion removes or stays a tombstone
    assert merge_file_entries({"a": FileEntry(5, False)}, {"a": FileEntry(3, False)}) == {"a": FileEntry(5, False)}
    assert merge_file_entries({"a": FileEntry(0, True)}, {"a": FileEntry(2, False)}) == {"a": FileEntry(2, False)}


def test_opening_a_metadata_table_as_a_table_is_refused(corpus):
    rel = sorted(MDT_TABLES)[0]
    path = helpers.zipped_table(corpus, rel)
    with pytest.raises(lk.TableConfigError, match="metadata table of a Hudi table") as e:
        lk.open_table(f"{path}/.hoodie/metadata")
    assert e.value.key == "hoodie.table.keygenerator.type"
