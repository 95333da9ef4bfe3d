"""The format layer: every on-disk name and encoding parses and formats both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesdk.exceptions import CorruptTimelineError, TableConfigError, TimeTravelError, UnsupportedTableVersionError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.instant import Instant, parse_instant_time, to_instant_time
from lakesdk.format.keys import parse_partition_path, partition_paths, record_keys
from lakesdk.format.properties import format_properties, parse_properties
from lakesdk.format.schema import arrow_to_avro, avro_to_arrow, unify_schemas
from lakesdk.format.table_config import TableConfig, table_checksum
from lakesdk.format.timeline import Timeline

from ..conftest import CONFORMANCE

FILES = CONFORMANCE / "files"
times = st.datetimes(min_value=__import__("datetime").datetime(2000, 1, 1),
                     max_value=__import__("datetime").datetime(2099, 1, 1)).map(
    lambda d: d.strftime("%Y%m%d%H%M%S") + f"{d.microsecond // 1000:03d}")


# -- instants ----------------------------------------------------------------------------------
@given(t=times, c=times, action=st.sampled_from(["commit", "deltacommit", "replacecommit", "clean", "rollback",
                                                     "savepoint", "restore", "indexing"]),
       state=st.sampled_from(["requested", "inflight", "completed"]), layout=st.sampled_from([1, 2]))
def test_instant_file_name_round_trip(t, c, action, state, layout):
    inst = Instant(action, state, t, c if state == "completed" and layout == 2 else None)
    back = Instant.parse_file_name(inst.file_name(layout=layout))
    assert back == inst


def test_instant_names_as_hudi_writes_them():
    assert Instant("commit", "inflight", "20250713011316909").file_name() == "20250713011316909.inflight"
    assert Instant("commit", "requested", "20250713011316909").file_name() == "20250713011316909.commit.requested"
    c = Instant("compaction", "completed", "20251220210129235", "20251220210129883")
    assert c.file_name() == "20251220210129235_20251220210129883.commit"
    assert Instant("commit", "completed", "20240418172804498").file_name(layout=1) == "20240418172804498.commit"


@pytest.mark.parametrize("bad", ["x.commit", "2024.commit", "20250713011316909.frobnicate", "20250713011316909_1.commit"])
def test_bad_timeline_names_are_rejected(bad):
    with pytest.raises(CorruptTimelineError):
        Instant.parse_file_name(bad)


def test_moments():
    assert to_instant_time("2026-11-21 10:30:00") == "20261121103000000"
    assert to_instant_time("20261121103000123") == "20261121103000123"
    assert to_instant_time(__import__("datetime").datetime(2026, 11, 21, 10, 30, 0, 123000)) == "20261121103000123"
    assert parse_instant_time("20261121103000") .year == 2026
    with pytest.raises(TimeTravelError, match="cannot read"):
        to_instant_time("last tuesday")


def test_timeline_folds_states_and_compaction():
    names = ["1.commit.requested", "20250101000000000.commit.requested", "20250101000000000.inflight",
             "20250101000000000_20250101000000500.commit", "20250102000000000.compaction.requested",
             "20250102000000000.compaction.inflight", "20250102000000000_20250102000001000.commit",
             "20250103000000000.deltacommit.requested", "hoodie.properties", "history"]
    tl = Timeline.from_file_names(names, layout=2)
    assert [(i.action, i.state) for i in tl] == [("commit", "completed"), ("compaction", "completed"),
                                                   ("deltacommit", "requested")]
    assert tl.commits[1].completed == "20250102000001000"
    assert tl.in_range("20250101000000400", "20250102000001000").instants == tl.commits.instants
    assert [i.requested for i in tl.visible_as_of("20250101000000000")] == ["20250101000000000"]


@pytest.mark.parametrize("folder", sorted(p.name for p in (FILES / "timeline").iterdir()) if (FILES / "timeline").is_dir() else [])
def test_conformance_timelines_load(folder):
    names = [p.name for p in (FILES / "timeline" / folder / ".hoodie").iterdir()]
    tl = Timeline.from_file_names(names, layout=1)
    assert len(tl.commits) >= 1 and all(i.is_completed for i in tl)


# -- file names ---------------------------------------------------------------------------------
@given(fid=st.uuids().map(lambda u: f"{u}-0"), tok=st.tuples(*[st.integers(0, 9999)] * 3), t=times,
       v=st.integers(1, 999))
def test_data_file_names_round_trip(fid, tok, t, v):
    token = "-".join(map(str, tok))
    b = BaseFile(fid, token, t)
    assert BaseFile.parse(b.name) == b and is_base_file(b.name)
    lf = LogFile(fid, t, v, token)
    assert LogFile.parse(lf.name) == lf and is_log_file(lf.name) and not is_base_file(lf.name)


def test_conformance_log_file_names_parse():
    for d in (FILES / "log_files").iterdir():
        for f in d.iterdir():
            assert is_log_file(f.name), f.name
            assert LogFile.parse(f.name).file_id


# -- properties and table config --------------------------------------------------------------------
@given(st.dictionaries(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12),
                       st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30), max_size=6))
def test_properties_round_trip(props):
    assert parse_properties(format_properties(props)) == props


def test_checksum_matches_hudi():
    assert table_checksum("default", "v6_nonpartitioned") == 1363530505


def _props(name: str) -> str:
    return (FILES / name / ".hoodie" / "hoodie.properties").read_text()


def test_valid_table_configs():
    c = TableConfig.parse(_props("table_props_valid"))
    assert (c.name, c.table_type, c.version, c.record_key_fields, c.partition_fields, c.ordering_field) == \
        ("trips", "COPY_ON_WRITE", 6, ("uuid",), ("city",), "ts")
    assert c.timeline_dir == ".hoodie" and c.keygen_type == "SIMPLE" and not c.hive_style
    m = TableConfig.parse(_props("table_props_valid_minimum"))
    assert m.partition_fields == () and m.keygen_type == "NON_PARTITION"
    assert TableConfig.parse(_props("table_props_no_create_schema")).create_schema is None


def test_invalid_table_config_names_the_bad_key():
    with pytest.raises(TableConfigError) as e:
        TableConfig.parse(_props("table_props_invalid"))
    assert e.value.key == "hoodie.table.name"
    # with a name, each bad value is reported with its key
    text = _props("table_props_invalid") + "\nhoodie.table.name=x\n"
    with pytest.raises(TableConfigError) as e:
        TableConfig.parse(text)
    assert e.value.key == "hoodie.table.type" and "'cow'" in str(e.value)
    fixed = text.replace("hoodie.table.type=cow", "hoodie.table.type=COPY_ON_WRITE")
    with pytest.raises(TableConfigError) as e:
        TableConfig.parse(fixed)
    assert e.value.key == "hoodie.table.version" and "baz" in str(e.value)


def test_unsupported_versions():
    base = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\n"
    with pytest.raises(UnsupportedTableVersionError, match="7"):
        TableConfig.parse(base + "hoodie.table.version=7\nhoodie.timeline.layout.version=1\n")
    with pytest.raises(UnsupportedTableVersionError, match="layout"):
        TableConfig.parse(base + "hoodie.table.version=6\nhoodie.timeline.layout.version=2\n")
    assert TableConfig.parse(base + "hoodie.table.version=9\nhoodie.timeline.layout.version=2\n").timeline_dir == ".hoodie/timeline"


@pytest.mark.parametrize("version", [9, 8])
def test_new_config_round_trips(version):
    c = TableConfig.new(name="trips", table_type="COPY_ON_WRITE", record_key_fields=("uuid",), version=version,
                        partition_fields=("city",), ordering_field="ts", create_schema={"type": "record", "name": "r", "fields": []})
    back = TableConfig.parse(c.to_text())
    assert back.props["hoodie.table.checksum"] == str(table_checksum("default", "trips"))
    assert (back.version, back.layout_version, back.merge_mode, back.hive_style) == (version, 2, "EVENT_TIME_ORDERING", True)
    assert back.create_schema == {"type": "record", "name": "r", "fields": []}
    assert back.ordering_fields == ("ts",)
    if version == 9:   # Hudi 1.1's keys: ordering fields, the merge mode alone
        assert back.props["hoodie.table.ordering.fields"] == "ts" and back.props["hoodie.table.format"] == "native"
        assert not {"hoodie.table.precombine.field", "hoodie.record.merge.strategy.id",
                    "hoodie.compaction.payload.class"} & set(back.props)
    else:              # Hudi 1.0's: the precombine field, strategy id and payload class
        assert back.props["hoodie.table.precombine.field"] == "ts" and "hoodie.table.ordering.fields" not in back.props
        assert back.props["hoodie.record.merge.strategy.id"] == "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
        assert back.props["hoodie.compaction.payload.class"].endswith(".DefaultHoodieRecordPayload")


def test_v9_several_ordering_fields_and_custom_merge_modes():
    c = TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",), ordering_fields=("ts", "seq"))
    assert c.props["hoodie.table.ordering.fields"] == "ts,seq" and c.ordering_fields == ("ts", "seq")
    with pytest.raises(TableConfigError, match="version 9"):
        TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",), ordering_fields=("ts", "seq"),
                        version=8)
    with pytest.raises(UnsupportedTableVersionError):
        TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",), version=6)
    # lakesdk's own mergers stay CUSTOM with their strategy id on version 9
    g = TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",), merge_mode="PARTIAL_UPDATE",
                        extra={"hoodie.lakesdk.partial.update.column.groups": '{"a_ts": ["a"]}'})
    assert (g.props["hoodie.record.merge.mode"], g.merge_mode) == ("CUSTOM", "PARTIAL_UPDATE")
    assert g.props["hoodie.record.merge.strategy.id"] == "5e1f0a52-7c1b-4bde-9b0c-1a2c3d4e5f60"
    # version 9's IGNORE_DEFAULTS partial update mode under commit-time ordering: no merger class
    p = TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",),
                        partial_update_mode="IGNORE_DEFAULTS")
    assert p.props["hoodie.table.partial.update.mode"] == "IGNORE_DEFAULTS"
    assert p.props["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING" and "hoodie.record.merge.strategy.id" not in p.props
    assert (p.merge_mode, p.column_groups) == ("PARTIAL_UPDATE", {})
    # partial update modes lakesdk does not merge are refused, not ignored
    for mode, extra in (("FILL_UNAVAILABLE", {}), ("IGNORE_DEFAULTS", {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING"})):
        q = TableConfig({**p.props, "hoodie.table.partial.update.mode": mode, **extra})
        with pytest.raises(TableConfigError, match="partial.update.mode"):
            q.merge_mode  # noqa: B018
    with pytest.raises(TableConfigError, match="partial update mode"):
        TableConfig({**p.props, "hoodie.table.partial.update.mode": "SOMETIMES"}).validate()


def test_delete_markers_are_refused_where_records_merge():
    """A table that marks deletes by a value (version 9's merge properties, or the AWS DMS and
    Debezium payload classes of older tables) is refused where records merge: a merge that
    ignored the marker would keep deleted rows."""
    base = TableConfig.new(name="t", table_type="MERGE_ON_READ", record_key_fields=("id",), ordering_field="ts")
    assert base.delete_marker is None
    v9 = TableConfig({**base.props, "hoodie.record.merge.property.hoodie.payload.delete.field": "Op",
                      "hoodie.record.merge.property.hoodie.payload.delete.marker": "D"})
    dms = TableConfig({**base.props, "hoodie.table.version": "8",
                       "hoodie.compaction.payload.class": "org.apache.hudi.common.model.AWSDmsAvroPayload"})
    pg = TableConfig({**base.props,
                      "hoodie.table.legacy.payload.class": "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"})
    for cfg, marker in ((v9, ("Op", "D")), (dms, ("Op", "D")), (pg, ("_change_operation_type", "d"))):
        assert cfg.delete_marker == marker
        cfg.validate()            # the table opens (its read-optimized view and timeline read)
        with pytest.raises(TableConfigError, match="marks deleted records") as e:
            cfg.merge_mode  # noqa: B018
        assert e.value.key == "hoodie.record.merge.property.hoodie.payload.delete.field"


_V8_HUDI = """hoodie.table.name=trips
hoodie.table.type=MERGE_ON_READ
hoodie.table.version=8
hoodie.table.initial.version=8
hoodie.timeline.layout.version=2
hoodie.table.recordkey.fields=uuid
hoodie.table.precombine.field=ts
hoodie.record.merge.mode={mode}
hoodie.record.merge.strategy.id={strategy}
hoodie.compaction.payload.class=org.apache.hudi.common.model.{payload}
hoodie.database.name=default
"""


@pytest.mark.parametrize("mode, strategy, payload, want", [
    ("EVENT_TIME_ORDERING", "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5", "DefaultHoodieRecordPayload",
     {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts",
      "hoodie.table.legacy.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}),
    ("COMMIT_TIME_ORDERING", "ce9acb64-bde0-424c-9b91-f6ebba25356d", "OverwriteWithLatestAvroPayload",
     {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts",
      "hoodie.table.legacy.payload.class": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"}),
    ("CUSTOM", "00000000-0000-0000-0000-00000000000a", "PartialUpdateAvroPayload",
     {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS",
      "hoodie.table.ordering.fields": "ts",
      "hoodie.table.legacy.payload.class": "org.apache.hudi.common.model.PartialUpdateAvroPayload"}),
    ("CUSTOM", "00000000-0000-0000-0000-00000000000b", "AWSDmsAvroPayload",
     {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts",
      "hoodie.record.merge.property.hoodie.payload.delete.field": "Op",
      "hoodie.record.merge.property.hoodie.payload.delete.marker": "D",
      "hoodie.table.legacy.payload.class": "org.apache.hudi.common.model.AWSDmsAvroPayload"}),
])
def test_upgrade_8_to_9_as_hudi_does(mode, strategy, payload, want):
    old = TableConfig.parse(_V8_HUDI.format(mode=mode, strategy=strategy, payload=payload))
    new = old.upgraded()
    assert new.version == 9 and new.props["hoodie.table.initial.version"] == "8"
    gone = {"hoodie.table.precombine.field", "hoodie.compaction.payload.class", "hoodie.record.merge.strategy.id"}
    assert not gone & set(new.props)
    assert {k: new.props[k] for k in want} == want
    assert TableConfig.parse(new.to_text()).ordering_fields == ("ts",)
    with pytest.raises(UnsupportedTableVersionError):
        new.upgraded()


def test_upgrade_keeps_a_custom_merger():
    c = TableConfig.new(name="t", table_type="COPY_ON_WRITE", record_key_fields=("id",), version=8, merge_mode="CUSTOM",
                        extra={"hoodie.lakesdk.merger.name": "m"})
    new = c.upgraded()
    assert (new.props["hoodie.record.merge.mode"], new.props["hoodie.record.merge.strategy.id"]) == \
        ("CUSTOM", c.props["hoodie.record.merge.strategy.id"])
    assert new.merge_mode == "CUSTOM" and new.version == 9


# -- commit metadata ---------------------------------------------------------------------------------
def test_v6_json_commit_metadata():
    m = CommitMetadata.parse((FILES / "commit_metadata" / "v6_commit.json").read_bytes(), layout=1)
    assert m.operation_type == "UPSERT" and m.schema["type"] == "record"
    assert m.totals()["written"] == sum(s.numWrites for s in m.write_stats) > 0


def test_v8_avro_commit_metadata_round_trip():
    raw = (FILES / "commit_metadata" / "v8_deltacommit.avro").read_bytes()
    m = CommitMetadata.parse(raw, layout=2)
    assert m.totals()["files"] == 3 and m.write_stats[0].path.startswith("city=")
    assert CommitMetadata.parse(m.to_avro(), layout=2) == m
    r = CommitMetadata(partition_to_write_stats={"p": [WriteStat("f-0", "p/f.parquet", "p", numWrites=3)]},
                       operation_type="INSERT_OVERWRITE", partition_to_replace_file_ids={"p": ["old-0"]})
    assert CommitMetadata.parse(r.to_avro(), layout=2, replace=True) == r


def test_bad_commit_metadata():
    with pytest.raises(CorruptTimelineError):
        CommitMetadata.parse(b"not json", layout=1)
    assert CommitMetadata.parse(b"", layout=2).write_stats == []


# -- keys and schemas ---------------------------------------------------------------------------------
def test_keys_and_partition_paths():
    t = pa.table({"id": [1, 2], "name": ["a", "b"], "d": ["x", ""], "h": [1, None]})
    assert record_keys(t, ("id", "name"), "COMPLEX").to_pylist() == ["id:1,name:a", "id:2,name:b"]
    assert partition_paths(t, ("d", "h"), hive_style=False).to_pylist() == [
        "x/1", "__HIVE_DEFAULT_PARTITION__/__HIVE_DEFAULT_PARTITION__"]
    assert parse_partition_path("byteField=10/shortField=300", ("byteField", "shortField"), hive_style=True) == \
        {"byteField": "10", "shortField": "300"}
    assert parse_partition_path("2023/04/01/12", ("ts_str",), hive_style=False) == {"ts_str": "2023/04/01/12"}


def test_schema_round_trip_and_evolution():
    s = pa.schema([("i", pa.int32()), ("l", pa.int64()), ("d", pa.float64()), ("s", pa.string()), ("b", pa.bool_()),
                   ("dt", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("dec", pa.decimal128(10, 5)),
                   ("arr", pa.list_(pa.int64())), ("st", pa.struct([("x", pa.string())]))])
    avro = arrow_to_avro(s, "t")
    json.dumps(avro)
    back = avro_to_arrow(avro)
    assert [f.type for f in back][:8] == [f.type for f in s][:8]
    assert unify_schemas(s, pa.schema([("i", pa.int16()), ("new", pa.string())])).names == s.names + ["new"]
    assert unify_schemas(pa.schema([("i", pa.int32())]), pa.schema([("i", pa.int64())])).field("i").type == pa.int64()
    from lakesdk.exceptions import IncompatibleSchemaError
    with pytest.raises(IncompatibleSchemaError, match="cast the column"):
        unify_schemas(s, pa.schema([("i", pa.string())]))


def test_format_imports_without_pyspark():
    code = ("import sys; import lakesdk, lakesdk.format, lakesdk.storage, lakesdk.format.timeline, "
            "lakesdk.format.commit_metadata, lakesdk.format.table_config, lakesdk.format.schema, lakesdk.read.view, "
            "lakesdk.merge, lakesdk.engine.tasks; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')); "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(Path(__file__).parents[2]))
    assert r.returncode == 0, r.stdout + r.stderr
