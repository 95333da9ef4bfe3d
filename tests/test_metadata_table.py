"""Hudi's metadata table (MDT) is never left stale (lakesdk.services.metadata_table).

Every Hudi-written table of the corpus that carries an MDT, after each action lakesdk completes
on it (writes of every kind, a merge, the table services, a failed write rolled back): the
``hudi`` reader (which lists files from the MDT's ``files`` partition whenever
``hoodie.properties`` names it) and lakesdk return the rows of a model (the rows before, with
the action applied), ``hoodie.properties`` names no MDT partition and ``.hoodie/metadata`` is
gone, and the user was told once.  Reads, refused writes and failed writes before their commit
point leave the MDT as it was.
"""

from __future__ import annotations

import decimal
import hashlib
import shutil
import warnings
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.format.metadata_table import INFLIGHT_KEY, METADATA_DIR, PARTITIONS_KEY, metadata_partitions
from lakesdk.format.table_config import TableConfig
from lakesdk.services.transaction import InstantTransaction

from . import helpers

DATA = Path(__file__).parent / "data" / "hudi-rs"


def _zipped_config(z: Path) -> TableConfig:
    with zipfile.ZipFile(z) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith("/.hoodie/hoodie.properties") and "/metadata/" not in n
                   and not n.startswith("__MACOSX")]
        return TableConfig.from_bytes(zf.read(name))


def _mdt_tables() -> dict[str, TableConfig]:
    """The corpus tables whose hoodie.properties names MDT partitions, by zip path."""
    out = {}
    for z in sorted(DATA.rglob("*.zip")):
        cfg = _zipped_config(z)
        if metadata_partitions(cfg.props):
            out[str(z.relative_to(DATA).with_suffix(""))] = cfg
    return out


MDT_TABLES = _mdt_tables()
PARQUET = sorted(rel for rel, cfg in MDT_TABLES.items() if cfg.base_file_format == "PARQUET")
#: partitioned by a time their key generator formats: lakesdk refuses writes that compute partition paths
TIMED = sorted(rel for rel in PARQUET if MDT_TABLES[rel].keygen_type == "TIMESTAMP")
WRITABLE = sorted(set(PARQUET) - set(TIMED))
LANCE = sorted(rel for rel, cfg in MDT_TABLES.items() if cfg.base_file_format == "LANCE")
MOR = {rel for rel, cfg in MDT_TABLES.items() if cfg.is_mor}

OPS = ["upsert", "insert", "bulk_insert", "delete", "merge", "insert_overwrite", "compaction", "clustering",
       "clean", "failed_write", "savepoint", "restore", "archival"]


def test_the_corpus_has_the_tables_with_an_mdt():
    """The v8 trips table and the v9 tables written with the MDT on (the six txns tables among them)."""
    assert len(PARQUET) == 14 and len(LANCE) == 6 and len(TIMED) == 4
    assert "quickstart_trips_table/mor/avro/v8_trips_8i3u1d" in PARQUET
    assert {f"sample_table/{tt}/v9_txns_{k}_meta" for tt in ("cow", "mor/avro")
            for k in ("simple", "complex", "nonpart")} <= set(PARQUET)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return helpers.unpack_zips(DATA, tmp_path_factory.mktemp("mdt-corpus"))


def _copy(corpus: Path, rel: str, dest: Path) -> str:
    src = Path(helpers.zipped_table(corpus, rel))
    shutil.copytree(src, dest / src.name)
    return str(dest / src.name)


def _state(path: str) -> tuple[tuple[str, ...], bool]:
    """(the MDT partitions hoodie.properties names, whether .hoodie/metadata exists)."""
    cfg = TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes())
    return metadata_partitions(cfg.props), (Path(path) / METADATA_DIR).exists()


def _digest(path: str) -> str:
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
        out[k] = f"{out[k]}-lakesdk-{n}"
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


def _fail_the_commit_of(action: str, monkeypatch) -> None:
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


def _prepare(op: str, t: lk.Table, m: Model, path: str, tmp_path: Path) -> None:
    """What the table needs before ``op`` (a log file to compact, a second file version to
    clean, a savepoint to restore): written by lakesdk, then the MDT put back."""
    saved = tmp_path / "saved"
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
    _with_mdt_again(path, saved)


@pytest.mark.interop
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("rel", WRITABLE)
def test_every_action_on_a_table_with_an_mdt_drops_it_and_readers_agree(corpus, rel, op, tmp_path, monkeypatch):
    if op == "compaction" and rel not in MOR:
        pytest.skip("compaction is for merge-on-read tables")
    path = _copy(corpus, rel, tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    m.check(path, "before (the hudi reader lists from the MDT)")
    _prepare(op, t, m, path, tmp_path)
    assert _state(path)[0] and _state(path)[1]
    with pytest.warns(lk.MetadataTableDroppedWarning) as told:
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
            _fail_the_commit_of("deltacommit" if rel in MOR else "commit", monkeypatch)
            with pytest.raises(lk.WriteError, match="injected"):
                t.upsert(m.table([m.new()]))
            assert t.timeline.filter(actions=["rollback"]).completed.instants, "the failed write was rolled back"
        elif op == "savepoint":
            t.maintenance.savepoint()
        elif op == "restore":
            (sp,) = t.maintenance.savepoints()
            t.maintenance.restore(sp)
        elif op == "archival":
            assert t.maintenance.archive(min_commits=2, max_commits=3).archived
    dropped = [w for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    assert len(dropped) == 1, [str(w.message) for w in dropped]
    assert set(dropped[0].message.partitions) == set(metadata_partitions(MDT_TABLES[rel].props))
    assert "files" in str(dropped[0].message) and t.name in str(dropped[0].message)
    assert _state(path) == ((), False), "hoodie.properties names no MDT partition and the MDT is gone"
    props = (Path(path) / ".hoodie/hoodie.properties").read_text()
    assert f"{PARTITIONS_KEY}=\n" in props and f"{INFLIGHT_KEY}=\n" in props
    assert not (Path(path) / ".hoodie/hoodie.properties.backup").exists()
    m.check(path, f"after {op}")
    # the next action finds no MDT and says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        row = m.updated(m.first())
        t.upsert(m.table([row]))
        m.put(row)
    m.check(path, f"after {op} and an upsert")


@pytest.mark.interop
@pytest.mark.parametrize("rel", ["quickstart_trips_table/mor/avro/v8_trips_8i3u1d", "sample_table/cow/v9_txns_simple_meta",
                                 "sample_table/mor/avro/v9_txns_complex_meta"])
def test_reads_and_refused_writes_leave_the_mdt_as_it_was(corpus, rel, tmp_path):
    path = _copy(corpus, rel, tmp_path)
    before = _digest(path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        m = Model(t)
        commits = t.timeline.commits
        t.as_of(commits[0].requested).to_arrow()
        t.incremental(commits[0].completed).to_arrow()
        t.history()
        t.inspect.file_groups()
        t.inspect.check()
        with pytest.raises(lk.MissingColumnError):     # refused before anything is written
            t.upsert(m.table([m.new()]).drop_columns([m.changeable]))
        with pytest.raises(lk.NullKeyError):
            bad = m.new()
            bad.update({f: None for f in t.context.config.record_key_fields})
            t.upsert(m.table([bad]))
    assert _digest(path) == before


@pytest.mark.parametrize("rel", LANCE)
def test_a_refused_write_on_a_lance_table_keeps_its_mdt(corpus, rel, tmp_path):
    """lakesdk writes no Lance base file: the write is refused before its instant exists, and
    the MDT stays."""
    path = _copy(corpus, rel, tmp_path)
    before = _digest(path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    with pytest.raises(lk.TableConfigError, match="LANCE"):
        t.upsert(t.read().to_arrow().slice(0, 1))
    assert _digest(path) == before and _state(path)[1]


@pytest.mark.interop
def test_upgrade_to_version_9_drops_the_version_8_mdt(corpus, tmp_path):
    """Apache Hudi upgrades the MDT with the table; lakesdk, which does not maintain it, drops it."""
    path = _copy(corpus, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    with pytest.warns(lk.MetadataTableDroppedWarning, match="upgrade"):
        new = t.maintenance.upgrade()
    assert new.version == 9 and _state(path) == ((), False)
    assert TableConfig.from_bytes((Path(path) / ".hoodie/hoodie.properties").read_bytes()).version == 9
    m.check(path, "after the upgrade")


def test_an_mdt_folder_no_config_names_is_deleted_by_the_next_action(lake, tmp_path):
    """The folder an interrupted drop left (hoodie.properties already cleared) goes with the next
    commit, silently: it was no MDT any reader trusted."""
    t = lake.create_table("t", key="id", ordering="ts", table_type="cow").with_options(engine="local")
    t.upsert({"id": [1], "ts": [1], "v": ["a"]})
    (Path(t.path) / METADATA_DIR / "files").mkdir(parents=True)
    (Path(t.path) / METADATA_DIR / "files" / "x.hfile").write_bytes(b"left over")
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        t.upsert({"id": [2], "ts": [1], "v": ["b"]})
    assert _state(t.path) == ((), False)


@pytest.mark.interop
@pytest.mark.parametrize("rel", TIMED)
def test_time_partitioned_tables_refuse_writes_with_their_mdt_kept_and_delete_by_key(corpus, rel, tmp_path):
    """A TimestampBasedKeyGenerator formats a time into the partition path, which lakesdk does not
    compute yet: every write that needs a row's partition path is refused before anything is
    written (MDT included); a delete by key values alone finds its keys in any partition."""
    path = _copy(corpus, rel, tmp_path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    before = _digest(path)
    rows = m.table([m.updated(m.first()), m.new()])
    for write in (t.upsert, t.insert, t.bulk_insert, t.insert_overwrite, t.delete,
                  lambda d: t.merge(d).when_matched_update_all().when_not_matched_insert_all().execute()):
        with pytest.raises(lk.TableConfigError, match="does not compute their partition paths"):
            write(rows)
    assert _digest(path) == before
    key = m.first()[t.context.config.record_key_fields[0]]
    with pytest.warns(lk.MetadataTableDroppedWarning):
        t.delete([key])
    m.rows = [r for r in m.rows if r[t.context.config.record_key_fields[0]] != key]
    assert _state(path) == ((), False)
    m.check(path, "after a delete by key")
