"""Writing into the Hudi-written tables of the corpus: the tables (vendored hudi-rs tables and the
conformance tables), a model of their rows, and the actions lakesdk runs on them, with what each
needs first.  Used by tests/interop/test_writes_into_hudi_tables.py, tests/metadata_table/test_never_stale.py and
the crash tests."""

from __future__ import annotations

import decimal
import hashlib
import math
import shutil
import warnings
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import lakesdk as lk
from lakesdk.format.metadata_table import METADATA_DIR, available_partitions, metadata_partitions
from lakesdk.format.table_config import TableConfig
from lakesdk.services.transaction import InstantTransaction

from . import helpers
from .conftest import CONFORMANCE

DATA = Path(__file__).parent / "data" / "hudi-rs"
SHARED = CONFORMANCE / "tables"


def zipped_config(z: Path) -> TableConfig:
    with zipfile.ZipFile(z) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith("/.hoodie/hoodie.properties") and "/metadata/" not in n
                   and not n.startswith("__MACOSX")]
        return TableConfig.from_bytes(zf.read(name))


def corpus_tables() -> dict[str, TableConfig]:
    """Every table of the corpus by its zip path (relative, without .zip), with its config."""
    out = {}
    for root in (DATA, SHARED):
        for z in sorted(root.rglob("*.zip")) if root.is_dir() else ():
            out[str(z.relative_to(root).with_suffix(""))] = zipped_config(z)
    return out


TABLES = corpus_tables()
#: the tables whose hoodie.properties names MDT partitions
MDT_TABLES = {rel: cfg for rel, cfg in TABLES.items() if metadata_partitions(cfg.props)}
#: partitioned by a time their key generator formats: lakesdk refuses writes that compute partition paths
TIMED = sorted(rel for rel, cfg in TABLES.items() if cfg.keygen_type == "TIMESTAMP")
LANCE = sorted(rel for rel, cfg in TABLES.items() if cfg.base_file_format == "LANCE")
MOR = {rel for rel, cfg in TABLES.items() if cfg.is_mor}

OPS = ["upsert", "insert", "bulk_insert", "delete", "merge", "insert_overwrite", "compaction", "clustering",
       "clean", "failed_write", "savepoint", "restore", "archival"]


def unpack_corpus(out: Path) -> Path:
    helpers.unpack_zips(DATA, out)
    if SHARED.is_dir():
        helpers.unpack_zips(SHARED, out)
    return out


def copy_table(corpus: Path, rel: str, dest: Path) -> str:
    src = Path(helpers.zipped_table(corpus, rel))
    shutil.copytree(src, dest / src.name)
    remember_hudi_partition_stats(str(dest / src.name))
    return str(dest / src.name)


#: table path -> the partition_stats records Hudi wrote (key -> (range, tight)), as a copy of a
#: corpus table held them: Hudi's records of partitions lakesdk did not touch since may be wider
#: than the rows (see lakesdk.services.partition_stats), lakesdk's equal them
_HUDI_PARTITION_STATS: dict[str, dict[str, tuple]] = {}


def remember_hudi_partition_stats(path: str) -> None:
    """Note the partition_stats records of a Hudi-written table (before lakesdk writes to it)."""
    from lakesdk.format.column_stats import range_of_record
    from lakesdk.read.metadata_table import MetadataTableReader
    cfg = TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes())
    if "partition_stats" not in metadata_partitions(cfg.props):
        return
    t = lk.open_table(path)
    recs = MetadataTableReader(t.storage, t.context.store.load()).records("partition_stats")
    _HUDI_PARTITION_STATS[str(Path(path).resolve())] = {
        k: (range_of_record(r.raw["ColumnStatsMetadata"], exact=True), bool(r.raw["ColumnStatsMetadata"].get("isTightBound")))
        for k, r in recs.items() if r.raw is not None}


def mdt_state(path: str) -> tuple[tuple[str, ...], bool]:
    """(the MDT partitions hoodie.properties names, whether .hoodie/metadata exists)."""
    cfg = TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes())
    return metadata_partitions(cfg.props), (Path(path) / METADATA_DIR).exists()


def kept_partitions(path: str, *, partition_stats: bool = True) -> tuple[str, ...]:
    """The MDT partitions lakesdk keeps on this table (column_stats on versions 8 and 9, on 8
    when every indexed column has a type lakesdk writes Hudi 1.0's records of, and with
    ``partition_stats`` (the option on, the default) partition_stats on a partitioned table not
    of Lance files)."""
    from lakesdk.services.metadata_stats import v1_columns_faithful
    from lakesdk.services.record_index import keeps_record_index
    cfg = TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes())
    rli = ("record_index",) if keeps_record_index(cfg) else ()    # Hudi's record index, which lakesdk keeps
    if cfg.version < 8 or (cfg.version == 8 and not v1_columns_faithful(lk.open_table(path).context)):
        return ("files", *rli)
    partitioned = partition_stats and bool(cfg.partition_fields) and cfg.base_file_format != "LANCE"
    return (("column_stats", "files", "partition_stats") if partitioned else ("column_stats", "files")) + rli


def storage_files(t: lk.Table) -> dict[tuple[str, str], int]:
    """The data files in storage written by completed instants (or instants older than the
    active timeline, archived): (partition, file name) -> size."""
    import posixpath

    from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file
    from lakesdk.read.view import list_data_files
    from lakesdk.services.archival import archived_instants
    tl = t.context.store.load()
    done = {i.requested for i in tl.completed} | {a.instant.requested for a in archived_instants(t.context)
                                                   if a.instant.is_completed}
    first = min((i.requested for i in tl.instants), default="")   # version 6: history not read
    out = {}
    for f in list_data_files(t.storage):
        name = posixpath.basename(f.path)
        inst = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        if inst in done or inst < first:
            out[(posixpath.dirname(f.path), name)] = f.size
    return out


def mdt_files(t: lk.Table) -> dict[tuple[str, str], int]:
    """The files the MDT's files partition lists: (partition, file name) -> size."""
    from lakesdk.read.metadata_table import MetadataTableReader
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    return {(lst.partition, n): size for lst in mdt.listings() for n, size in lst.files.items()}


def check_mdt(path: str, what: str) -> None:
    """The MDT hoodie.properties names lists exactly the files of the completed instants, and
    its column statistics say each stored file's values (checked against the rows it holds)."""
    t = lk.open_table(path)
    named = available_partitions(t.context.config.props)      # the partitions readers trust
    if "files" in named:
        listed, stored = mdt_files(t), storage_files(t)
        assert listed == stored, (f"the MDT's files partition {what}: listed, not stored: "
                                  f"{sorted(set(listed.items()) - set(stored.items()))}; stored, not listed: "
                                  f"{sorted(set(stored.items()) - set(listed.items()))}")
        if "column_stats" in named:
            check_column_stats(t, stored, what)
        if "partition_stats" in named:
            check_partition_stats(t, what)


def file_rows(t: lk.Table, path: str, columns: list[str]) -> pa.Table | None:
    """The rows a data file holds (a log file: its data blocks), or None for a Lance file."""
    import pyarrow.parquet as pq

    from lakesdk.format.log_block import read_log_file
    from lakesdk.format.log_framing import BlockType
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".parquet"):
        have = pq.ParquetFile(t.storage.url(path)).schema_arrow.names
        return pq.read_table(t.storage.url(path), columns=[c for c in columns if c in have])
    if ".log." not in name:
        return None
    blocks = [b.records([c for c in columns]) for b in read_log_file(t.storage.read(path))
              if b.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA)]
    return pa.concat_tables(blocks, promote_options="permissive") if blocks else None


def check_column_stats(t: lk.Table, stored: dict[tuple[str, str], int], what: str) -> None:
    """Every stored file has a column_stats record per indexed column whose bounds and counts
    are those of the rows it holds (NaN left out of float bounds), and no live record names a
    file that is not stored."""
    from lakesdk.format.column_stats import INDEX_DEFS_PATH, column_stats_key, range_of_record, read_index_columns
    from lakesdk.read.metadata_table import MetadataTableReader
    columns = (read_index_columns(t.storage.read(INDEX_DEFS_PATH)) if t.storage.exists(INDEX_DEFS_PATH) else None) or []
    recs = MetadataTableReader(t.storage, t.context.store.load()).records("column_stats")
    live = {(r.raw["ColumnStatsMetadata"]["fileName"]) for r in recs.values() if not r.deleted}
    names = {n for _, n in stored}
    assert live <= names, f"column_stats {what}: records of files not stored: {sorted(live - names)}"
    for part, name in stored:
        path = f"{part}/{name}" if part else name
        data = file_rows(t, path, columns)
        if data is None:
            continue
        for c in columns:
            rec = recs.get(column_stats_key(c, part, name))
            if c not in data.column_names or (rec is None and len(data) == 0):
                continue        # Hudi writes no statistics of a file without rows
            assert rec is not None and not rec.deleted, f"column_stats {what}: no record of {c} in {path}"
            got = range_of_record(rec.raw["ColumnStatsMetadata"], exact=True)
            col = data.column(c)
            nan = pa.types.is_floating(col.type) and bool(pc.any(pc.fill_null(pc.is_nan(col), False)).as_py())
            if pa.types.is_floating(col.type):
                col = pc.filter(col, pc.invert(pc.fill_null(pc.is_nan(col), False)))
            mm = pc.min_max(_counted(col))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            assert got is not None and got.value_count == len(data), (what, path, c, got, len(data))
            # every record says bounds (a record without them makes Hudi's data skipping leave
            # the file out); a column holding NaN has the maximum NaN (its minimum NaN when it
            # holds only NaN), unless a Parquet footer left NaN out of bounds it has
            assert got.null_count == data.column(c).null_count, (what, path, c, got)
            if nan:
                lo, hi = (math.nan if lo is None else lo), (got.max_value if _is_nan(got.max_value) else hi)
            assert _same_bound(stored_value(got.min_value, col.type, got.info), lo) and \
                _same_bound(stored_value(got.max_value, col.type, got.info), hi), (what, path, c, got, lo, hi)


def check_partition_stats(t: lk.Table, what: str) -> None:
    """Every partition with files has a partition_stats record per indexed column whose bounds
    and counts are those of the rows its latest file slices hold (computed from the rows, NaN
    left out of float bounds; unknown where a file's statistics of the column are), a
    partition without files none but deleted ones.  A record Hudi wrote that lakesdk has not
    rewritten since holds the rows (bounds around theirs, counts at least theirs)."""
    import math

    from lakesdk.format.column_stats import INDEX_DEFS_PATH, partition_stats_key, range_of_record, read_index_columns
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.read.view import FileSystemView, list_data_files
    columns = (read_index_columns(t.storage.read(INDEX_DEFS_PATH)) if t.storage.exists(INDEX_DEFS_PATH) else None) or []
    tl = t.context.store.load()
    recs = MetadataTableReader(t.storage, tl).records("partition_stats")
    hudi = _HUDI_PARTITION_STATS.get(str(Path(t.path).resolve()), {})
    view = FileSystemView(t.storage, t.context.config, t.context.store, tl, files=list_data_files(t.storage))
    parts: dict[str, list[str]] = {}
    for g in view.file_groups:
        s = g.latest
        if s is not None:
            parts.setdefault(g.partition, []).extend(([s.base_path] if s.base_path else []) + s.log_paths)
    for key, rec in recs.items():
        name = rec.raw["ColumnStatsMetadata"]["fileName"]
        assert name in parts or rec.deleted or key in hudi, f"partition_stats {what}: a live record of {name!r}, no file"
    for part, paths in sorted(parts.items()):
        datas = [d for d in (file_rows(t, p, columns) for p in paths) if d is not None and len(d)]
        for c in columns:
            key = partition_stats_key(c, part)
            rec = recs.get(key)
            where = (what, part, c)
            assert rec is not None and not rec.deleted, f"partition_stats {what}: no record of {c} in {part!r}"
            cs = rec.raw["ColumnStatsMetadata"]
            got = range_of_record(cs, exact=True)
            assert got is not None and cs["fileName"] == part, where
            rows = sum(len(d) for d in datas)
            cols = [d.column(c) for d in datas if c in d.column_names]
            nulls = sum(col.null_count for col in cols)
            mixed = len({str(col.type) for col in cols}) > 1     # files of the column in other types
            bounds = [] if mixed else [_bounds(col) for col in cols]
            los = [b[0] for b in bounds if b[0] is not None]
            his = [b[1] for b in bounds if b[1] is not None]
            lo, hi = (min(los) if los else None), (max(his) if his else None)
            typ = cols[0].type if cols and not mixed else None
            if hudi.get(key) == (got, bool(cs.get("isTightBound"))):
                assert got.value_count >= rows and (got.null_count < 0 or got.null_count >= nulls), (where, got)
                if got.null_count >= 0 and lo is not None and typ is not None and got.min_value is not None:
                    assert stored_value(got.min_value, typ, got.info) <= lo and \
                        stored_value(got.max_value, typ, got.info) >= hi, (where, got)
                continue
            assert cs.get("isTightBound") and got.value_count == rows, (where, got, rows)
            if got.null_count < 0:
                # unknown: files holding the column in types whose values do not compare; the
                # bounds of every value of the type (Hudi leaves out a partition without bounds)
                from lakesdk.format.partition_stats import universal_bounds
                assert mixed, (where, got)
                ub = universal_bounds(got.value_type, got.info) or (None, None)
                assert _same_bound(got.min_value, ub[0]) and _same_bound(got.max_value, ub[1]), (where, got)
                continue
            # a file without the column: its rows are nulls of it
            nulls += sum(len(d) for d in datas if c not in d.column_names)
            assert got.null_count == nulls, (where, got, nulls)
            if isinstance(got.max_value, float) and math.isnan(got.max_value):
                continue        # a NaN bound (Hudi's log file ranges) bounds nothing
            assert (stored_value(got.min_value, typ, got.info), stored_value(got.max_value, typ, got.info)) == (lo, hi), \
                (where, got, lo, hi)


def _is_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _same_bound(a, b) -> bool:
    """Equal bounds, NaN equal to NaN."""
    return (_is_nan(a) and _is_nan(b)) or (not _is_nan(a) and not _is_nan(b) and a == b)


def _bounds(col) -> tuple:
    """The smallest and largest value of a column, NaN left out."""
    if pa.types.is_floating(col.type):
        col = pc.filter(col, pc.invert(pc.fill_null(pc.is_nan(col), False)))
    mm = pc.min_max(_counted(col))
    return mm["min"].as_py(), mm["max"].as_py()


def _counted(col):
    """``col`` with timestamps and dates as their counts of units, as the MDT stores them (a
    zoned value at an end of the range has no Python datetime in its zone)."""
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.int64())
    if pa.types.is_date32(col.type):
        return col.cast(pa.int32())
    return col


def stored_value(v, t: pa.DataType, info: str | None = None):
    """A column_stats bound as the column's Python value (``info``: the record's ``precision,scale``
    of a decimal; a version 8 record holds a decimal at scale 15); a date's or a timestamp's
    count of units."""
    import decimal
    if v is None:
        return None
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        return v        # its count of units, as :func:`_counted` compares it
    if pa.types.is_decimal(t):
        scale = int(info.split(",")[1]) if info else t.scale
        return decimal.Decimal(f"{int(v)}E{-scale}")
    return v


def digest(path: str) -> str:
    """A digest of every file under .hoodie (names and bytes): what a read must not change."""
    h = hashlib.sha256()
    for f in sorted((Path(path) / ".hoodie").rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class Model:
    """The table's rows (data columns only), as a list: a record is its partition and key, and a
    Hudi-written table may hold a key twice (an INSERT of a stored key); the changes lakesdk
    makes replace or remove every row of a record."""

    def __init__(self, t: lk.Table) -> None:
        self.t = t
        self.snap = t.read().to_arrow()
        self.cols = self.snap.schema.names
        self.rows = self.snap.to_pylist()
        cfg = t.context.config
        self.ident = [*cfg.record_key_fields, *cfg.partition_fields]
        fixed = {*cfg.record_key_fields, *cfg.partition_fields, *cfg.ordering_fields}
        self.changeable = next(f.name for f in self.snap.schema if f.name not in fixed and (
            pa.types.is_string(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)))

    def key(self, row: dict) -> tuple:
        return tuple(row[f] for f in self.ident)

    def first(self) -> dict:
        """The first row (in a stable order) of a record stored once."""
        keys = [self.key(r) for r in self.rows]
        return min((r for r, k in zip(self.rows, keys) if keys.count(k) == 1), key=repr)

    def updated(self, row: dict) -> dict:
        out = dict(row)
        v = out[self.changeable]
        out[self.changeable] = ("changed" if v is None else v + "!") if isinstance(v, str) or v is None else (
            v + decimal.Decimal(1) if isinstance(v, decimal.Decimal) else v + 1.0)
        for f in self.t.context.config.ordering_fields:
            out[f] = out[f] + 1000
        return out

    def new(self, n: int = 0) -> dict:
        out = dict(self.first())
        k = self.t.context.config.record_key_fields[0]
        out[k] = f"{out[k]}-lakesdk-{n}" if isinstance(out[k], str) else out[k] * 1000 + 100 + n
        return out

    def table(self, rows: list[dict]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=self.snap.schema)

    def remove(self, row: dict) -> None:
        self.rows = [r for r in self.rows if self.key(r) != self.key(row)]

    def put(self, *rows: dict) -> None:
        for r in rows:
            self.remove(r)
            self.rows.append(r)

    def check(self, path: str, what: str) -> None:
        """lakesdk and the hudi reader both return the model's rows."""
        want = helpers.canon(self.rows, self.cols)
        assert helpers.canon(self.t.read().to_arrow().to_pylist(), self.cols) == want, f"lakesdk {what}"
        assert helpers.canon(helpers.hudi_read(path), self.cols) == want, f"hudi reader {what}"


def fail_the_commit_of(action: str, monkeypatch) -> None:
    """The commit point of the first ``action`` instant fails (as a lost lock or a full disk
    would make it fail) before it changes anything; its writer then rolls the instant back."""
    real = InstantTransaction.commit
    failed: list[str] = []

    def commit(self, *args, **kwargs):
        if self.instant.action == action and not failed:
            failed.append(self.instant.requested)
            raise lk.WriteError("the commit failed (injected)")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(InstantTransaction, "commit", commit)


def _with_mdt_again(path: str, saved: Path) -> None:
    """Put back the MDT and hoodie.properties saved before a preparatory write (which dropped
    them), so that the action under test meets a table with an MDT again."""
    shutil.rmtree(Path(path) / METADATA_DIR, ignore_errors=True)
    shutil.copytree(saved / "metadata", Path(path) / METADATA_DIR)
    shutil.copy(saved / "hoodie.properties", Path(path) / ".hoodie/hoodie.properties")


def _save_mdt(path: str, saved: Path) -> None:
    shutil.copytree(Path(path) / METADATA_DIR, saved / "metadata")
    shutil.copy(Path(path) / ".hoodie/hoodie.properties", saved / "hoodie.properties")


def prepares_writes(op: str) -> bool:
    """Whether :func:`prepare` writes before ``op``."""
    return op in ("archival", "compaction", "clean", "clustering", "restore")


def prepare(op: str, t: lk.Table, m: Model, path: str, tmp_path: Path) -> None:
    """What the table needs before ``op`` (a log file to compact, a second file version to
    clean, a savepoint to restore): written by lakesdk, then a dropped MDT put back."""
    saved = tmp_path / "saved"
    # lakesdk keeps the MDT of a version 8 or 9 table (and drops the partitions it does not
    # maintain); a version 6 table's MDT it drops: put back for the action under test
    has_mdt = (Path(path) / METADATA_DIR).exists() and t.context.config.version < 8
    if has_mdt:
        _save_mdt(path, saved)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lk.MetadataTableDroppedWarning)
        for _ in range(3 if op == "archival" else 1 if op in ("compaction", "clean") else 0):
            row = m.updated(m.first())
            t.upsert(m.table([row]))
            m.put(row)
        if op == "clean" and t.context.config.is_mor:   # a second file slice
            t.maintenance.compact()
        if op == "clustering":     # a second small file group beside the first row's
            row = m.new(8)
            t.bulk_insert(m.table([row]))
            m.put(row)
        if op == "restore":
            t.maintenance.savepoint()
            t.upsert(m.table([m.new(9)]))   # undone by the restore
    if has_mdt:
        _with_mdt_again(path, saved)


def run_op(op: str, t: lk.Table, m: Model, monkeypatch) -> None:
    """Run ``op`` on the table (prepared by :func:`prepare`) and apply it to the model."""
    if op == "upsert":
        rows = [m.updated(m.first()), m.new()]
        t.upsert(m.table(rows))
        m.put(*rows)
    elif op in ("insert", "bulk_insert"):
        row = m.new()
        getattr(t, op)(m.table([row]))
        m.put(row)
    elif op == "delete":
        row = m.first()
        assert t.delete(m.table([row])).deleted == 1
        m.remove(row)
    elif op == "merge":
        rows = [m.updated(m.first()), m.new()]
        t.merge(m.table(rows)).when_matched_update_all().when_not_matched_insert_all().execute()
        m.put(*rows)
    elif op == "insert_overwrite":
        row = m.new()
        part = {f: row[f] for f in t.context.config.partition_fields}
        m.rows = [r for r in m.rows if {f: r[f] for f in part} != part]
        t.insert_overwrite(m.table([row]))
        m.put(row)
    elif op == "compaction":
        assert t.maintenance.compact() is not None
    elif op == "clustering":
        assert t.maintenance.cluster(small_file_limit=1 << 40) is not None
    elif op == "clean":
        assert t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1) is not None
    elif op == "failed_write":
        fail_the_commit_of("deltacommit" if t.context.config.is_mor else "commit", monkeypatch)
        import pytest
        with pytest.raises(lk.WriteError, match="injected"):
            t.upsert(m.table([m.new()]))
        assert t.timeline.filter(actions=["rollback"]).completed.instants, "the failed write was rolled back"
    elif op == "savepoint":
        t.maintenance.savepoint()
    elif op == "restore":
        sp = t.maintenance.savepoints()[-1]
        t.maintenance.restore(sp)
    elif op == "archival":
        if t.context.config.version == 6:
            import pytest
            with pytest.raises(lk.UnsupportedTableVersionError):
                t.maintenance.archive(min_commits=2, max_commits=3)
            return
        assert t.maintenance.archive(min_commits=2, max_commits=3).archived
    else:
        raise ValueError(op)


