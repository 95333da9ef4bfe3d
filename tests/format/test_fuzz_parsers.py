"""Fuzzing every parser of on-disk bytes.

Damaged input must give a typed lakesdk error (a :class:`~lakesdk.LakeError`), never a crash
(a raw ``IndexError``, ``KeyError``, ``struct.error``, ``UnicodeDecodeError``, ``ArrowInvalid``,
fastavro's errors, ``RecursionError``), a hang or a huge allocation (lengths are bounded by the
file size), or a wrong read (a truncated file must not parse as a shorter valid one where a
length or magic says otherwise).

Seeds are valid files: the conformance corpus (files and the tables' zips) and files lakesdk
writes itself.  Hypothesis mutates them (truncation, byte flips, insertions, deletions,
splices, duplicated ranges) and adds random bytes.  The default run is derandomized and small
(the whole file well under a minute); ``-m slow`` runs the soak variant with many more examples.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesdk.exceptions import (
    CorruptFileError,
    CorruptTimelineError,
    LakeError,
    SchemaError,
    TableConfigError,
    TimeTravelError,
    UnsupportedFileFeatureError,
)
from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
from lakesdk.format.clustering_plan import ClusteringGroupData, ClusteringPlanData, ClusteringSliceInfo
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.compaction_plan import CompactionOperation, CompactionPlanData
from lakesdk.format.hfile import TRAILER_SIZE, HFileReader
from lakesdk.format.hfile_writer import write_hfile
from lakesdk.format.instant import Instant
from lakesdk.format.log_block import (
    BlockType,
    HeaderKey,
    LogBlockError,
    encode_avro_data_block,
    encode_block,
    encode_delete_block,
    encode_rollback_block,
    scan_log_file,
)
from lakesdk.format.lsm_timeline import ArchivedInstant, parse_manifest
from lakesdk.format.restore_metadata import RestoreMetadataData, RestorePlanData
from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData, RollbackRequest
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.format.schema import arrow_to_avro, avro_to_arrow
from lakesdk.format.table_config import TableConfig
from lakesdk.storage import Storage
from lakesdk.timeline.history import LSMTimeline

from .test_hfile import answers, assert_right_or_refused

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(os.environ.get("LAKESDK_SHARED", ROOT.parent / "shared")) / "conformance"

CI_EXAMPLES = 100
SOAK_EXAMPLES = 3000


@pytest.fixture(autouse=True, scope="module")
def _bounded_memory():
    """While these tests run, the process may grow by at most 3 GiB of address space: a parser
    that allocates from a damaged length field fails its test with a MemoryError instead of
    exhausting the machine's memory."""
    try:
        import resource
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + 3 * 2**30
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# -- seeds --------------------------------------------------------------------------------------
def _conformance_files() -> dict[str, bytes]:
    """Every small file of the conformance corpus: loose files and the tables' zips (by path)."""
    out: dict[str, bytes] = {}
    files = CONFORMANCE / "files"
    if files.is_dir():
        for p in sorted(files.rglob("*")):
            if p.is_file() and p.stat().st_size < 64 * 1024:
                out[str(p.relative_to(files))] = p.read_bytes()
    tables = CONFORMANCE / "tables"
    if tables.is_dir():
        for z in sorted(tables.rglob("*.zip")):
            with zipfile.ZipFile(z) as zf:
                for info in zf.infolist():
                    name = info.filename
                    if "__MACOSX" in name or "/._" in name or info.is_dir() or info.file_size >= 64 * 1024:
                        continue
                    if "/.hoodie/" in name or ".log." in name:
                        out[f"{z.stem}/{name}"] = zf.read(info)
    return out


CORPUS = _conformance_files()
TIMELINE_NAME_SEEDS = sorted({k.rsplit("/", 1)[-1] for k in CORPUS if Instant.is_timeline_file(k.rsplit("/", 1)[-1])})


def _by_name(pred: Callable[[str], bool]) -> list[bytes]:
    return [v for k, v in sorted(CORPUS.items()) if pred(k)]


def _schema() -> dict:
    return arrow_to_avro(pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", "UTC")),
                                    ("price", pa.decimal128(10, 2)), ("tags", pa.list_(pa.string()))]),
                         "fuzz", meta=True)


def _records() -> pa.Table:
    import datetime
    import decimal
    return pa.table({
        "_hoodie_commit_time": ["20250101000000000"] * 2, "_hoodie_commit_seqno": ["a", "b"],
        "_hoodie_record_key": ["k1", "k2"], "_hoodie_partition_path": ["p", "p"], "_hoodie_file_name": ["f", "f"],
        "id": [1, 2], "name": ["x", None],
        "ts": pa.array([datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC), None], pa.timestamp("us", "UTC")),
        "price": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50")], pa.decimal128(10, 2)),
        "tags": [["a", "b"], []],
    })


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _stat(i: int) -> WriteStat:
    return WriteStat(fileId=f"f{i}", path=f"p/f{i}_0-1-1_20250101000000000.parquet", partitionPath="p",
                     numWrites=3, numInserts=3, totalWriteBytes=100, fileSizeInBytes=100)


def _lakesdk_log_file() -> bytes:
    h = {HeaderKey.INSTANT_TIME: "20250101000000000"}
    keys = pa.table({"_hoodie_record_key": ["k1", "k2"], "_hoodie_partition_path": ["p", "p"],
                     "ordering_value": pa.array([5, None], pa.int64())})
    return b"".join([
        encode_avro_data_block(_records(), _schema(), h),
        encode_delete_block(keys, h),
        encode_block(BlockType.PARQUET_DATA, h, _parquet_bytes(_records())),
        encode_rollback_block("20250101000000000", "20250102000000000"),
        encode_block(BlockType.HFILE_DATA, {**h, HeaderKey.SCHEMA: json.dumps(_schema())},
                     write_hfile([(b"k1", b"v1"), (b"k2", b"")], file_info={"schema": b"{}"}, create_time_ms=0)),
    ])


COMMIT_SEEDS = (
    _by_name(lambda k: k.endswith((".commit", ".deltacommit", ".replacecommit", ".json", ".avro")))
    + [CommitMetadata({"p": [_stat(1), _stat(2)]}, {"schema": json.dumps(_schema())}, "upsert").to_avro(),
       CommitMetadata({"p": [_stat(1)]}, {}, "insert_overwrite", partition_to_replace_file_ids={"p": ["f0"]}).to_avro(),
       CommitMetadata({"p": [_stat(1)]}, {"schema": json.dumps(_schema())}, "upsert").to_json()])

PLAN_PARSERS: list[tuple[Callable[[bytes], object], bytes]] = [
    (CompactionPlanData.parse, CompactionPlanData((CompactionOperation(
        "f1", "p", "20250101000000000", "f1_0-1-1_20250101000000000.parquet",
        (".f1_20250101000000000.log.1_0-1-1",), {"TOTAL_LOG_FILES": 1.0}),)).to_avro()),
    (RollbackPlanData.parse, RollbackPlanData("20250101000000000", "commit", (RollbackRequest(
        "p", "f1", ("p/f1_0-1-1_20250101000000000.parquet",)),)).to_avro()),
    (RollbackMetadataData.parse, RollbackMetadataData("20250102000000000", 5, (("20250101000000000", "commit"),),
                                                      {"p": ("f1_0-1-1_20250101000000000.parquet",)}).to_avro()),
    (ClusteringPlanData.parse, ClusteringPlanData((ClusteringGroupData((ClusteringSliceInfo(
        "p", "f1", "f1_0-1-1_20250101000000000.parquet"),), 1, {"size": 1.0}),),
        strategy_params={"hoodie.clustering.plan.strategy.sort.columns": "id"}).to_avro("/t")),
    (CleanerPlanData.parse, CleanerPlanData("KEEP_LATEST_COMMITS", "20250101000000000", "commit", "20250102000000000",
                                            {"p": ("/t/p/f1_0-1-1_20241231000000000.parquet",)}, ("20241201000000000",)).to_avro()),
    (CleanMetadataData.parse, CleanMetadataData("20250102000000000", 3, "KEEP_LATEST_COMMITS", "20250101000000000",
                                                "20250102000000000", {"p": ("f1_0-1-1_20241231000000000.parquet",)}).to_avro()),
    (SavepointMetadataData.parse, SavepointMetadataData("me", 1700000000000, "c",
                                                        {"p": ("f1_0-1-1_20241231000000000.parquet",)}).to_avro()),
    (RestorePlanData.parse, RestorePlanData((("20250101000000000", "commit"),), "20241231000000000").to_avro()),
    (RestoreMetadataData.parse, RestoreMetadataData("20250103000000000", 4, (("20250101000000000", "commit"),),
                                                    {"20250101000000000": []}).to_avro()),
]
CLUSTERING_SEEDS = _by_name(lambda k: k.endswith("replacecommit.requested"))

PROPS_SEEDS = _by_name(lambda k: k.endswith("hoodie.properties")) + [
    TableConfig.new(name="trips", table_type="MERGE_ON_READ", record_key_fields=("id",), partition_fields=("city",),
                    ordering_field="ts", create_schema=_schema()).to_text().encode()]

LOG_SEEDS = _by_name(lambda k: ".log." in k) + [_lakesdk_log_file()]

HISTORY_ENTRIES = [ArchivedInstant(Instant("commit", "completed", "20250101000000000", "20250101000001000"),
                                   CommitMetadata({"p": [_stat(1)]}).to_avro(), None),
                   ArchivedInstant(Instant("clean", "completed", "20250101000002000", "20250101000003000"), b"x", b"y")]
HISTORY_FILE = LSMTimeline._parquet(HISTORY_ENTRIES)
MANIFEST = json.dumps({"files": [{"fileName": "20250101000000000_20250101000003000_0.parquet",
                                  "fileLen": len(HISTORY_FILE)}]}, indent=2).encode()
PARQUET_SEEDS = [_parquet_bytes(_records()), HISTORY_FILE]


# -- mutations ----------------------------------------------------------------------------------
@st.composite
def damaged(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A valid seed, damaged: truncated, bytes flipped, inserted, deleted, spliced or duplicated
    (one to three times), or plain random bytes."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=300))
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "splice", "duplicate", "int"]))
        i = draw(st.integers(0, n))
        if kind == "truncate":
            data = data[:i]
        elif kind == "flip" and n:
            j = min(i, n - 1)
            data[j] = draw(st.sampled_from([0x00, 0xFF, 0x80, 0x7F, data[j] ^ (1 << draw(st.integers(0, 7)))]))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 32))]
        elif kind == "splice":
            other = draw(st.sampled_from(seeds))
            data = data[:i] + other[draw(st.integers(0, len(other))):]
        elif kind == "duplicate" and n:
            j = draw(st.integers(i, min(n, i + 64)))
            k = draw(st.integers(0, n))
            data[k:k] = data[i:j]
        elif kind == "int" and n >= 4:
            # overwrite four or eight bytes with an extreme integer (a length or count field)
            width = draw(st.sampled_from([4, 8]))
            value = draw(st.sampled_from([-1, 0, 1, 2**31 - 1, -2**31, 2**62, 2**63 - 1, -2**63, 7]))
            fmt = ">i" if width == 4 else ">q"
            value = max(min(value, 2**31 - 1), -2**31) if width == 4 else value
            j = min(i, n - width) if n >= width else 0
            data[j:j + width] = struct.pack(fmt, value)
    return bytes(data)


@st.composite
def damaged_blocks(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A valid log file with one block's content or header value damaged and the block framed
    again (valid magic and lengths), so that the block decoders see the damage."""
    data = draw(st.sampled_from(seeds))
    blocks, _ = scan_log_file(data)
    b = draw(st.sampled_from(blocks))
    header = dict(b.header)
    content = b.content
    if header and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(header, key=int)))
        raw = header[key].encode()
        header[key] = draw(damaged([raw] if raw else [b"x"])).decode("utf-8", "replace")
    else:
        content = draw(damaged([content] if content else [b"\x00"]))
    block_type = b.block_type
    if draw(st.integers(0, 9)) == 0:
        block_type = draw(st.sampled_from(list(BlockType)))
    framed = encode_block(block_type, header, content, b.footer)
    return data[:b.offset] + framed + data[b.offset + b.size:]


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=8)


@st.composite
def reshaped_json(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A valid JSON seed with the value at one path replaced by another JSON value: well-formed
    JSON of the wrong shape."""
    doc = json.loads(draw(st.sampled_from(seeds)))
    node = doc
    for _ in range(draw(st.integers(0, 4))):
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) \
            else []
        children = [(k, v) for k, v in children if isinstance(v, (dict, list)) and v]
        if not children:
            break
        node = draw(st.sampled_from(children))[1]
    if isinstance(node, dict) and node:
        node[draw(st.sampled_from(sorted(node)))] = draw(JSON_VALUES)
    elif isinstance(node, list) and node:
        node[draw(st.integers(0, len(node) - 1))] = draw(JSON_VALUES)
    return json.dumps(doc).encode()


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, derandomize=examples <= CI_EXAMPLES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# -- what each parser may do with damaged bytes ---------------------------------------------------
def check_props(data: bytes) -> None:
    try:
        cfg = TableConfig.from_bytes(data)
    except TableConfigError:
        return
    # a config that opens answers every question without a raw crash
    for attr in ("name", "database", "table_type", "version", "layout_version", "timeline_dir", "record_key_fields",
                 "partition_fields", "ordering_fields", "keygen_type", "hive_style", "urlencode", "merge_mode",
                 "create_schema", "column_groups", "populate_meta_fields", "timezone"):
        try:
            getattr(cfg, attr)
        except TableConfigError:
            pass
    cfg.to_text()


def check_commit(data: bytes) -> None:
    for layout in (1, 2):
        for replace in (False, True):
            try:
                md = CommitMetadata.parse(data, layout=layout, replace=replace)
            except CorruptTimelineError:
                continue
            md.totals()
            _ = [s.file_name for s in md.write_stats]
            try:
                if md.schema is not None:
                    avro_to_arrow(md.schema)
            except (CorruptTimelineError, SchemaError):
                pass


def check_log(data: bytes) -> None:
    blocks, corrupt = scan_log_file(data)
    assert corrupt >= 0
    for b in blocks:
        assert 0 <= b.offset and b.offset + b.size <= len(data)
        assert data[b.offset:b.offset + 6] == b"#HUDI#"
        try:
            _ = b.avro_schema
            if b.block_type in (BlockType.AVRO_DATA, BlockType.CDC_DATA, BlockType.PARQUET_DATA):
                b.records().to_pylist()
            elif b.block_type == BlockType.DELETE:
                b.delete_records().to_pylist()
            elif b.block_type == BlockType.HFILE_DATA:
                list(b.hfile("log"))
        except (LogBlockError, SchemaError):
            pass
        except (CorruptFileError, UnsupportedFileFeatureError) as exc:
            assert exc.path == "log"


def check_manifest(data: bytes) -> None:
    try:
        parse_manifest(data, "manifest_1")
    except CorruptTimelineError:
        pass


def _history_storage(manifest: bytes, history_file: bytes) -> tuple[Storage, TableConfig]:
    import uuid
    storage = Storage(f"memory://fuzz-{uuid.uuid4().hex}")
    cfg = TableConfig.new(name="t", table_type="COPY_ON_WRITE", record_key_fields=("id",))
    d = ".hoodie/timeline/history"
    storage.write(f"{d}/_version_", b"1")
    storage.write(f"{d}/manifest_1", manifest)
    storage.write(f"{d}/20250101000000000_20250101000003000_0.parquet", history_file)
    return storage, cfg


def check_history(manifest: bytes, history_file: bytes) -> None:
    storage, cfg = _history_storage(manifest, history_file)
    try:
        for a in LSMTimeline(storage, cfg).load():
            assert a.instant.is_completed and a.instant.requested
    except (CorruptTimelineError, CorruptFileError):
        pass
    finally:
        storage.delete_dir("")


def check_parquet(data: bytes) -> None:
    import uuid

    from lakesdk.engine.tasks import read_parquet
    storage = Storage(f"memory://fuzz-{uuid.uuid4().hex}")
    storage.write("p/f.parquet", data)
    try:
        read_parquet(storage, "p/f.parquet")
    except CorruptFileError as exc:
        assert exc.path == "p/f.parquet" and "p/f.parquet" in str(exc)
    finally:
        storage.delete_dir("")


def check_plan(parse: Callable[[bytes], object], data: bytes) -> None:
    try:
        parse(data)
    except CorruptTimelineError:
        pass


def check_instant_name(name: str) -> None:
    try:
        inst = Instant.parse_file_name(name)
    except CorruptTimelineError:
        return
    assert inst.file_name(layout=2 if inst.completed else 1) == name  # the name it is read back under
    try:
        _ = (inst.requested_at, inst.completed_at)
    except TimeTravelError:
        pass


@st.composite
def damaged_hfile(draw: st.DrawFn, seeds: list[bytes]) -> tuple[bytes, bytes]:
    """(seed, the seed damaged): truncated, bytes flipped, inserted, deleted or duplicated, or an
    int written over a length, offset or count, half the time in the index, file info or
    trailer (the end of the file).  No splices: they can make another valid file."""
    seed = draw(st.sampled_from(seeds))
    data = bytearray(seed)
    load_on_open = HFileReader(seed).trailer.load_on_open_offset
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        i = draw(st.integers(0, n) if draw(st.booleans()) else st.integers(min(load_on_open, n), n))
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "duplicate", "int", "trailer"]))
        if kind == "trailer" and n >= TRAILER_SIZE:
            i = n - TRAILER_SIZE + draw(st.integers(8, 8 + data[n - TRAILER_SIZE + 8]))
            kind = "flip"
        if kind == "truncate":
            data = data[:i]
        elif kind == "flip" and n:
            j = min(i, n - 1)
            data[j] = draw(st.sampled_from([0x00, 0xFF, 0x80, 0x7F, data[j] ^ (1 << draw(st.integers(0, 7)))]))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 32))]
        elif kind == "duplicate" and n:
            k = draw(st.integers(0, n))
            data[k:k] = data[i:draw(st.integers(i, min(n, i + 64)))]
        elif kind == "int" and n >= 8:
            width = draw(st.sampled_from([4, 8]))
            value = draw(st.sampled_from([-1, 0, 1, 33, 2**31 - 1, -2**31, 2**62, 2**63 - 1]))
            j = min(i, n - width)
            data[j:j + width] = struct.pack(">i" if width == 4 else ">q",
                                            max(min(value, 2**31 - 1), -2**31) if width == 4 else value)
    return seed, bytes(data)


def _hfile_seeds(checksum: str) -> list[bytes]:
    """Small HFiles: lakesdk's (several blocks, a meta block; GZ and NONE) and, with checksums
    or compression, Hudi's and HBase's (a metadata-table file of each, hudi-rs's repeated keys)."""
    entries = [(b"key-%04d" % i, b"v" * (i % 7) * 9) for i in range(120)]
    out = [write_hfile(entries, file_info={"schema": b"{}"}, meta_blocks={"bloomFilter": b"b" * 99}, block_size=500,
                       compression=c, checksum=checksum) for c in ("GZ", "NONE")]
    if checksum == "none":
        return out[1:]
    out.append((ROOT / "tests/data/hfile/hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile").read_bytes())
    for z, part in (("sample_table/mor/avro/v9_txns_simple_meta.zip", "/column_stats/"),
                    ("quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip", "/files/")):
        with zipfile.ZipFile(ROOT / "tests/data/hudi-rs" / z) as zf:
            out.append(zf.read(next(n for n in zf.namelist() if part in n and n.endswith(".hfile")
                                    and "__MACOSX" not in n)))
    return out


HFILE_SEEDS = _hfile_seeds("crc32")


def check_hfile(seed: bytes, data: bytes) -> None:
    """Damage in an HFile with checksums or compression: a typed error naming it, or the
    intact file's answers (a prefix of its entries where a scan stops at the damage)."""
    assert_right_or_refused(data, answers(seed))


def check_hfile_unprotected(seed: bytes, data: bytes) -> None:
    """An HFile without checksums or compression: a typed error, or answers (which a changed
    byte of a key or value may change)."""
    try:
        r = HFileReader(data, name="f.hfile")
        for k, _ in r.items():
            r.get(k)
        for name in r.meta_block_names:
            r.meta_block(name)
    except (CorruptFileError, UnsupportedFileFeatureError) as exc:
        assert exc.path == "f.hfile"


# -- the CI fuzz tests ----------------------------------------------------------------------------
def _run(strategy: st.SearchStrategy, check: Callable, examples: int) -> None:
    @_settings(examples)
    @given(strategy)
    def run(value: object) -> None:
        try:
            check(*value) if isinstance(value, tuple) else check(value)
        except LakeError as exc:  # a typed error outside what the check allows still names a damaged file
            raise AssertionError(f"unexpected {type(exc).__name__}: {exc}") from exc
    run()


TARGETS: dict[str, tuple[st.SearchStrategy, Callable]] = {
    "hoodie.properties": (damaged(PROPS_SEEDS), check_props),
    "commit metadata": (damaged(COMMIT_SEEDS), check_commit),
    "commit metadata JSON": (reshaped_json([d for d in COMMIT_SEEDS if d.lstrip()[:1] == b"{"]), check_commit),
    "log file": (damaged(LOG_SEEDS), check_log),
    "log blocks": (damaged_blocks(LOG_SEEDS), check_log),
    "history manifest": (damaged([MANIFEST]), check_manifest),
    "history file": (st.tuples(st.sampled_from([MANIFEST]), damaged([HISTORY_FILE])), check_history),
    "parquet footer": (damaged(PARQUET_SEEDS), check_parquet),
    "hfile": (damaged_hfile(HFILE_SEEDS), check_hfile),
    "hfile without checksums": (damaged_hfile(_hfile_seeds("none")), check_hfile_unprotected),
    "plans": (st.sampled_from(PLAN_PARSERS).flatmap(lambda pp: st.tuples(st.just(pp[0]), damaged([pp[1]]))),
              check_plan),
    "clustering plans (conformance)": (st.tuples(st.just(ClusteringPlanData.parse), damaged(CLUSTERING_SEEDS or
                                                                                            [PLAN_PARSERS[3][1]])),
                                       check_plan),
    "timeline file names": (st.one_of(st.text(max_size=60), st.sampled_from(TIMELINE_NAME_SEEDS or ["x"]).flatmap(
        lambda s: st.builds(lambda i, t: s[:i] + t + s[i:], st.integers(0, len(s)), st.text(max_size=3)))),
        check_instant_name),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_damaged_bytes_give_typed_errors(target: str) -> None:
    strategy, check = TARGETS[target]
    _run(strategy, check, CI_EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_damaged_bytes_give_typed_errors_soak(target: str) -> None:
    strategy, check = TARGETS[target]
    _run(strategy, check, SOAK_EXAMPLES)


def test_corpus_seeds_are_present() -> None:
    if not CORPUS:
        pytest.skip(f"conformance corpus not found at {CONFORMANCE}")
    assert LOG_SEEDS and COMMIT_SEEDS and PROPS_SEEDS and TIMELINE_NAME_SEEDS


# -- truncation at every offset: never a shorter valid file ----------------------------------------
def _avro_seeds() -> list[tuple[Callable[[bytes], object], bytes, int]]:
    out = [(p, d, 0) for p, d in PLAN_PARSERS]
    # an empty commit file is empty commit metadata, as in Hudi (HoodieCommitMetadata.fromBytes)
    out += [(lambda b: CommitMetadata.parse(b, layout=2), d, 1) for d in COMMIT_SEEDS if d[:4] == b"Obj\x01"]
    return out


@pytest.mark.parametrize("i", range(len(_avro_seeds())))
def test_truncated_avro_timeline_file_is_never_read_as_a_shorter_one(i: int) -> None:
    parse, data, first = _avro_seeds()[i]
    parse(data)
    for cut in range(first, len(data)):
        with pytest.raises(CorruptTimelineError):
            parse(data[:cut])


@pytest.mark.parametrize("i", range(len(LOG_SEEDS)))
def test_truncated_log_file_keeps_only_whole_blocks(i: int) -> None:
    data = LOG_SEEDS[i]
    full, corrupt = scan_log_file(data)
    assert full and corrupt == 0
    ends = {b.offset + b.size for b in full}
    whole = {(b.offset, b.size, b.block_type, b.content) for b in full}
    for cut in range(len(data)):
        blocks, corrupt = scan_log_file(data[:cut])
        assert {(b.offset, b.size, b.block_type, b.content) for b in blocks} <= whole
        assert corrupt == (0 if cut in ends or cut == 0 else 1)
        assert len(blocks) == sum(1 for e in ends if e <= cut)


@pytest.mark.parametrize("i", range(len(PROPS_SEEDS)))
def test_truncated_properties_open_only_when_cut_between_lines(i: int) -> None:
    data = PROPS_SEEDS[i]
    try:
        TableConfig.from_bytes(data)
    except TableConfigError:
        pytest.skip("an invalid conformance config")
    for cut in range(len(data)):
        try:
            TableConfig.from_bytes(data[:cut])
        except TableConfigError:
            continue
        # cut between lines, or only the final line break of a complete checksum line is missing
        assert data[:cut].endswith(b"\n") or data[cut:] == b"\n", f"a config cut inside a line at byte {cut} opened"


@pytest.mark.parametrize("i", range(len(PARQUET_SEEDS)))
def test_truncated_parquet_file_is_a_corrupt_file_error(i: int) -> None:
    data = PARQUET_SEEDS[i]
    for cut in list(range(0, len(data), max(1, len(data) // 200))) + list(range(len(data) - 16, len(data))):
        with pytest.raises(CorruptFileError):
            check_parquet_strict(data[:cut])


def check_parquet_strict(data: bytes) -> None:
    from lakesdk.engine.tasks import read_parquet
    storage = Storage("memory://fuzz-strict")
    storage.write("f.parquet", data)
    try:
        read_parquet(storage, "f.parquet")
    finally:
        storage.delete_dir("")


# -- named regressions: each failed on the code before the fuzzing found it -----------------------
def _avro_with(seed: bytes, old: bytes, new: bytes) -> bytes:
    assert old in seed
    return seed.replace(old, new, 1)


def test_rollback_metadata_with_a_damaged_schema_is_a_corrupt_timeline_error() -> None:
    seed = PLAN_PARSERS[2][1]
    damaged_schema = _avro_with(seed, b'"type": "map", "values": "long"}]}]', b'"\x7fype": "map", "values": "long"}]}]')
    with pytest.raises(CorruptTimelineError, match="rollback metadata"):
        RollbackMetadataData.parse(damaged_schema)
    with pytest.raises(CorruptTimelineError, match="rollback metadata"):
        RollbackMetadataData.parse(b"")


def test_avro_timeline_file_of_another_record_is_not_read_as_commit_metadata() -> None:
    clean = PLAN_PARSERS[5][1]                           # HoodieCleanMetadata
    with pytest.raises(CorruptTimelineError, match="HoodieCleanMetadata"):
        CommitMetadata.parse(clean, layout=2)
    with pytest.raises(CorruptTimelineError, match="HoodieCleanMetadata"):
        CompactionPlanData.parse(clean)


def test_avro_timeline_file_cut_after_its_header_is_not_an_empty_one() -> None:
    data = CommitMetadata({"p": [_stat(1)]}).to_avro()
    header_end = data.index(b"\x00", data.index(b'"operationType"')) + 1 + 16   # map end + sync marker
    with pytest.raises(CorruptTimelineError, match="no record"):
        CommitMetadata.parse(data[:header_end], layout=2)
    with pytest.raises(CorruptTimelineError, match="truncated"):
        CompactionPlanData.parse(PLAN_PARSERS[0][1][:-20])


def test_avro_container_with_a_huge_record_count_fails_fast() -> None:
    data = CommitMetadata({"p": [_stat(1)]}).to_avro()
    header_end = data.index(b"\x00", data.index(b'"operationType"')) + 1 + 16
    huge = b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f"               # zig-zag 2**62 - 1 records
    with pytest.raises(CorruptTimelineError, match="records in"):
        CommitMetadata.parse(data[:header_end] + huge + data[header_end + 1:], layout=2)


@pytest.mark.parametrize("text", [b'["should", "not"]', b'{"partitionToWriteStats": 5}',
                                  b'{"partitionToWriteStats": {"p": [{"fileId": 7}]}}',
                                  b'{"partitionToWriteStats": {"p": [{"numWrites": "3"}]}}',
                                  b'{"extraMetadata": {"schema": 1}}', b'{"operationType": []}',
                                  b'[' * 100000])
def test_commit_metadata_json_of_the_wrong_shape_is_a_corrupt_timeline_error(text: bytes) -> None:
    with pytest.raises(CorruptTimelineError):
        CommitMetadata.parse(text, layout=1).totals()


def test_commit_metadata_schema_that_is_not_json_is_an_error_not_a_fallback() -> None:
    md = CommitMetadata({}, {"schema": '{"type": "rec'})
    with pytest.raises(CorruptTimelineError, match="schema"):
        _ = md.schema
    assert CommitMetadata({}, {}).schema is None                # no schema at all stays None


def _block(block_type: BlockType, content: bytes, schema: dict | None = None) -> bytes:
    header = {HeaderKey.INSTANT_TIME: "20250101000000000"}
    if schema is not None:
        header[HeaderKey.SCHEMA] = json.dumps(schema)
    return encode_block(block_type, header, content)


def _only(data: bytes):
    [b] = scan_log_file(data)[0]
    return b


def test_log_block_with_a_schema_header_that_is_not_json_is_a_log_block_error() -> None:
    b = _only(encode_block(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: '{"type": "rec'},
                           b"\x00\x00\x00\x03\x00\x00\x00\x00"))
    with pytest.raises(LogBlockError, match="not JSON"):
        b.records()
    b = _only(_block(BlockType.AVRO_DATA, b"\x00\x00\x00\x03\x00\x00\x00\x00", {"type": "record", "fields": 3}))
    with pytest.raises((LogBlockError, SchemaError)):
        b.records()


def test_avro_data_block_whose_record_count_is_too_small_is_an_error() -> None:
    data = encode_avro_data_block(_records(), _schema(), {HeaderKey.INSTANT_TIME: "20250101000000000"})
    b = _only(data)
    content = struct.pack(">ii", 3, 1) + b.content[8:]                 # says 1 record, holds 2
    with pytest.raises(LogBlockError, match="after its 1 records"):
        _only(encode_block(BlockType.AVRO_DATA, b.header, content)).records()
    content = struct.pack(">ii", 3, 2**31 - 1) + b.content[8:]         # a huge count fails fast
    with pytest.raises(LogBlockError, match="cannot hold"):
        _only(encode_block(BlockType.AVRO_DATA, b.header, content)).records()


def test_avro_data_block_whose_schema_repeats_empty_items_fails_fast() -> None:
    empty = {"type": "record", "name": "e", "fields": []}
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": empty}}]}
    # an array of 2**20 empty records: refused before decoding (a damaged count of 2**62 would
    # otherwise make the decoder loop and allocate without end; the test keeps its own input small)
    record = b"\x80\x80\x80\x01\x00"
    content = struct.pack(">iii", 3, 1, len(record)) + record
    with pytest.raises(LogBlockError, match="take no bytes"):
        _only(_block(BlockType.AVRO_DATA, content, schema)).records()


def test_delete_block_with_bytes_after_its_keys_is_an_error() -> None:
    keys = pa.table({"_hoodie_record_key": ["k1"], "_hoodie_partition_path": ["p"]})
    b = _only(encode_delete_block(keys, {HeaderKey.INSTANT_TIME: "20250101000000000"}))
    with pytest.raises(LogBlockError, match="bytes of keys"):
        _only(encode_block(BlockType.DELETE, b.header, b.content + b"\x00")).delete_records()
    n = len(b.content) - 8
    garbage = struct.pack(">ii", 3, n) + b"\xff" * n
    with pytest.raises(LogBlockError, match="cannot be decoded"):
        _only(encode_block(BlockType.DELETE, b.header, garbage)).delete_records()


def test_damaged_parquet_data_block_is_a_log_block_error() -> None:
    parquet = _parquet_bytes(_records())
    with pytest.raises(LogBlockError, match="PARQUET_DATA"):
        _only(_block(BlockType.PARQUET_DATA, parquet[:-10] + b"\x00" * 10)).records()
    bad_utf8 = parquet.replace(b"k1", b"\xff\xfe", 1)
    with pytest.raises(LogBlockError, match="PARQUET_DATA"):
        _only(_block(BlockType.PARQUET_DATA, bad_utf8)).records().to_pylist()


def test_log_block_with_huge_length_fields_is_skipped_as_corrupt() -> None:
    good = encode_rollback_block("20250101000000000", "20250102000000000")
    for offset, fmt, value in [(6, ">q", 2**62), (6, ">q", -2**63), (22, ">i", 2**31 - 1)]:
        bad = bytearray(good)
        bad[offset:offset + struct.calcsize(fmt)] = struct.pack(fmt, value)
        blocks, corrupt = scan_log_file(bytes(bad) + good)
        assert corrupt == 1 and [b.offset for b in blocks] == [len(good)]


@pytest.mark.parametrize("text, match", [
    (b"hoodie.table.name=t\xff\n", "not UTF-8"),
    (b"hoodie.table.name=t\\u00zz\nhoodie.table.version=8\n", "malformed"),
    (b"hoodie.table.name=t\\ud800\nhoodie.table.version=8\n", "surrogate"),
    (b"hoodie.table.name=t\nhoodie.table.type\nhoodie.table.version=8\n", "no '='"),
    (b"hoodie.table.name=t\nhoodie.table.version=8\nhoodie.table.type=MERGE_ON_RE", "truncated"),
    (b"hoodie.table.name=t\nhoodie.table.version=8\nhoodie.table.recordkey.fields=\n", "names no field"),
    (b"hoodie.table.name=t\nhoodie.table.version=8\nhoodie.table.recordkey.fields= , \n", "names no field"),
    (b"hoodie.table.name=t\nhoodie.database.name=default\nhoodie.table.version=8\nhoodie.table.checksum=12\n",
     "does not match"),
    (b"hoodie.table.name=t\nhoodie.table.version=\xef\xbc\x98\n", "not an integer"),
    (b"hoodie.table.name=t\nhoodie.table.version=8\nhoodie.timeline.path=../x\n", "folder name"),
    (b"hoodie.table.name=t\nhoodie.table.version=8\nhoodie.table.create.schema=[1]\n", "create.schema"),
])
def test_damaged_hoodie_properties_is_a_table_config_error_at_open(text: bytes, match: str) -> None:
    with pytest.raises(TableConfigError, match=match) as info:
        TableConfig.from_bytes(text)
    assert "Traceback" not in str(info.value)


def test_hoodie_properties_with_a_complete_last_line_without_line_break_opens() -> None:
    text = TableConfig.new(name="t", table_type="COPY_ON_WRITE", record_key_fields=("id",)).to_text()
    assert TableConfig.parse(text.rstrip("\n")).name == "t"


def test_damaged_hoodie_properties_falls_back_to_the_backup_as_hudi_does() -> None:
    from lakesdk.read.properties import load_config
    good = TableConfig.new(name="t", table_type="COPY_ON_WRITE", record_key_fields=("id",)).to_text().encode()
    storage = Storage("memory://fuzz-backup")
    try:
        storage.write(".hoodie/hoodie.properties", good[:-30])
        with pytest.raises(TableConfigError, match="hoodie.properties"):
            load_config(storage)
        storage.write(".hoodie/hoodie.properties.backup", good)
        with pytest.warns(UserWarning, match="backup"):
            assert load_config(storage).name == "t"
    finally:
        storage.delete_dir("")


@pytest.mark.parametrize("manifest, match", [
    (b"\xff", "not JSON"), (b"[1]", "files"), (b'{"files": [{"fileLen": 3}]}', "does not name"),
    (b'{"files": [{"fileName": "../../x.parquet"}]}', "does not name"),
    (b'{"files": [{"fileName": "1_2_0.parquet", "fileLen": "9"}]}', "byte count"),
    (b"{" * 100000, "not JSON"),
])
def test_damaged_history_manifest_is_a_corrupt_timeline_error(manifest: bytes, match: str) -> None:
    with pytest.raises(CorruptTimelineError, match=match):
        parse_manifest(manifest, "manifest_1")


def test_damaged_history_file_is_a_corrupt_file_error_naming_it() -> None:
    not_an_instant = LSMTimeline._parquet([ArchivedInstant(Instant("commit", "completed", "garbage", None))])
    for history in (HISTORY_FILE[:-100], not_an_instant):
        storage, cfg = _history_storage(MANIFEST, history)
        try:
            with pytest.raises(CorruptFileError, match="20250101000000000_20250101000003000_0.parquet"):
                LSMTimeline(storage, cfg).load()
        finally:
            storage.delete_dir("")


def test_negative_history_version_falls_back_to_the_manifests() -> None:
    storage, cfg = _history_storage(MANIFEST, HISTORY_FILE)
    try:
        storage.write(".hoodie/timeline/history/_version_", b"-5")
        assert len(LSMTimeline(storage, cfg).load()) == 2
    finally:
        storage.delete_dir("")


@pytest.mark.parametrize("name", ["20250101000000000.foo", "20250101000000000_20250101000001000.compaction",
                                  "20250101000000000_20250101000001000.commit.requested",
                                  "20250101000000000.commit.inflight", "20250101000000000.commit\n",
                                  "２０２５０１０１０００００００００.commit"])
def test_names_that_are_not_timeline_files_are_ignored_by_the_timeline(name: str) -> None:
    assert not Instant.is_timeline_file(name)
    with pytest.raises(CorruptTimelineError):
        Instant.parse_file_name(name)
    from lakesdk.format.timeline import Timeline
    t = Timeline.from_file_names([name, "20250101000000000.commit.requested"], layout=2)
    assert [(i.action, i.state) for i in t] == [("commit", "requested")]


def test_instant_time_with_an_impossible_date_is_a_time_travel_error() -> None:
    inst = Instant.parse_file_name("20251399000000000_20251301000000000.commit")
    with pytest.raises(TimeTravelError, match="not a valid date"):
        _ = inst.requested_at


@pytest.mark.parametrize("schema", [[1], {"fields": 3}, {"fields": [{"name": "a"}]}, {"fields": [{"type": "int"}]},
                                    {"fields": [{"name": "a", "type": {"type": "fixed", "size": -1}}]},
                                    {"fields": [{"name": "a", "type": {"type": "fixed", "logicalType": "decimal",
                                                                       "precision": 99, "size": 4}}]}])
def test_avro_schema_that_is_not_a_record_schema_is_a_schema_error(schema: object) -> None:
    with pytest.raises(SchemaError):
        avro_to_arrow(schema)  # type: ignore[arg-type]


def test_damaged_plan_read_from_the_timeline_names_its_file() -> None:
    from lakesdk.timeline.store import TimelineStore
    storage = Storage("memory://fuzz-plan")
    try:
        store = TimelineStore(storage, TableConfig.new(name="t", table_type="COPY_ON_WRITE", record_key_fields=("id",)))
        inst = Instant("clean", "requested", "20250101000000000")
        store.create(inst, PLAN_PARSERS[4][1][:-30])
        with pytest.raises(CorruptTimelineError, match="20250101000000000.clean.requested: clean plan") as info:
            CleanerPlanData.parse(store.read_bytes(inst))
        assert info.value.path.endswith(".hoodie/timeline/20250101000000000.clean.requested")
    finally:
        storage.delete_dir("")


def test_properties_lines_end_only_at_line_feeds_and_carriage_returns() -> None:
    from lakesdk.format.properties import parse_properties
    text = "hoodie.table.name=a\x0cb\x1cc\u2028d\r\nhoodie.table.version=8\rx=1\\\n  2\n"
    assert parse_properties(text, strict=True) == {
        "hoodie.table.name": "a\x0cb\x1cc\u2028d", "hoodie.table.version": "8", "x": "12"}


def test_write_stats_with_runtime_stats_of_nulls_still_parse() -> None:
    stat = _stat(1)
    stat.runtimeStats = {"totalScanTime": None, "totalCreateTime": 5, "totalUpsertTime": None}
    md = CommitMetadata.parse(CommitMetadata({"p": [stat]}).to_avro(), layout=2)
    assert md.write_stats[0].runtimeStats == {"totalScanTime": None, "totalCreateTime": 5, "totalUpsertTime": None}


def test_the_valid_seeds_parse_without_error() -> None:
    """The checks above allow typed errors; the undamaged seeds must not raise any."""
    for data in LOG_SEEDS:
        blocks, corrupt = scan_log_file(data)
        assert blocks and corrupt == 0
        for b in blocks:
            if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                assert b.records().num_rows > 0
            elif b.block_type == BlockType.DELETE:
                assert b.delete_records().num_rows > 0
    for data in COMMIT_SEEDS:
        if data[:4] == b"Obj\x01" or data.lstrip()[:1] == b"{":
            CommitMetadata.parse(data, layout=2 if data[:4] == b"Obj\x01" else 1).totals()
    for parse, data in PLAN_PARSERS:
        parse(data)
    assert len(LSMTimeline(*_history_storage(MANIFEST, HISTORY_FILE)).load()) == 2
    for data in PARQUET_SEEDS:
        check_parquet_strict(data)
