"""Every table of the hudi-rs test corpus is read by lakesdk with the rows the ``hudi`` reader
returns: the tables of ``../shared/conformance`` (table versions 6 and 8) and the ones vendored
in tests/data/hudi-rs (versions 8 and 9, Lance tables included).

For each table: the snapshot (every column, meta fields included where the table has them), a
read as of every commit, and incremental reads between every pair of commits, from the start
and to the latest.  On table version 8+ the bounds of an incremental read are completion times
(the ``hudi`` reader's too); on version 6 requested times.

Known differences, checked precisely rather than skipped:

* ``cow/v9_timebasedkeygen_epochmillis`` and ``cow/v9_timebasedkeygen_unixtimestamp``: the two
  INSERTs wrote the partition field (TimestampBasedKeyGenerator) as ``long``; the UPDATE and
  DELETE (Spark SQL, ``*_PREPPED`` operations) wrote it as ``string``, so the table schema
  evolved long -> string.  Apache Hudi reads a table as of an instant with the schema of that
  instant (``TableSchemaResolver.getTableAvroSchema(asOf)`` in its Spark relations); lakesdk
  does so and returns ``int64`` as of the first two commits, while the ``hudi`` reader 0.5.0
  uses the latest schema (``string``): the rows are the same once the column is cast to
  string, and the values as of the first commit are the ones the table's .sql script inserted.
  Incremental reads are typed by the latest schema in both (Apache Hudi's incremental
  relations read with the latest table schema whatever the range).
* ``*_no_metafields`` (``hoodie.populate.meta.fields=false``): the ``hudi`` reader returns no
  meta columns, lakesdk returns them null (``_hoodie_file_name`` filled); the data columns are
  compared.  lakesdk refuses incremental reads of these tables with a typed error (their rows
  carry no commit time), as Apache Hudi does.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pyarrow as pa
import pytest

import lakesdk as lk

from .. import helpers
from ..corpus_model import DATA, SHARED


def _rels(root: Path) -> list[str]:
    return sorted(str(z.relative_to(root).with_suffix("")) for z in root.rglob("*.zip")) if root.is_dir() else []


VENDORED = _rels(DATA)
SHARED_TABLES = _rels(SHARED)
TABLES = sorted(VENDORED + SHARED_TABLES)

#: tables whose partition field changed type long -> string after two commits: {table: column}
RETYPED = {"sample_table/cow/v9_timebasedkeygen_epochmillis": "ts_millis",
           "sample_table/cow/v9_timebasedkeygen_unixtimestamp": "ts_epoch"}


def test_corpus_is_complete():
    """The 47 tables of hudi-rs ``crates/test/data``: none vendored twice, each zip with its
    .sql script and named in the README."""
    if not SHARED_TABLES:
        pytest.skip(f"conformance corpus not found at {SHARED}")
    assert len(SHARED_TABLES) == 20 and len(VENDORED) == 27 and not set(SHARED_TABLES) & set(VENDORED)
    readme = (DATA / "README.md").read_text()
    assert readme.count("Apache License") == 1
    for rel in VENDORED:
        assert (DATA / f"{rel}.sql").is_file(), rel
        assert f"`{rel}`" in readme, f"{rel} missing from the README"


def _same(ours: pa.Table, theirs: list[dict], cols: list[str], what: str, retyped: str | None,
          seen: set[str]) -> None:
    mine = ours.select(cols).to_pylist()
    if theirs:
        assert set(cols) <= set(theirs[0]), f"{what}: the hudi reader lacks {set(cols) - set(theirs[0])}"
    if retyped and theirs and isinstance(theirs[0][retyped], str) and pa.types.is_integer(ours.schema.field(retyped).type):
        seen.add(what)
        mine = [{**r, retyped: None if r[retyped] is None else str(r[retyped])} for r in mine]
    assert helpers.canon(mine, cols) == helpers.canon(theirs, cols), what


@pytest.mark.interop
@pytest.mark.parametrize("rel", TABLES)
def test_reads_match_the_hudi_reader(corpus, rel):
    path = helpers.zipped_table(corpus, rel)
    t = lk.open_table(path)
    cfg = t.context.config
    if cfg.base_file_format == "LANCE":
        pytest.importorskip("lance")
    meta = cfg.populate_meta_fields
    snap = t.read(meta_fields=meta).to_arrow()
    cols = snap.schema.names
    assert cols and (not meta or cols[0] == "_hoodie_commit_time")
    theirs = helpers.hudi_read(path)
    if theirs:
        assert set(theirs[0]) == set(cols), "the same columns, meta fields included"
    retyped = RETYPED.get(rel)
    seen: set[str] = set()
    _same(snap, theirs, cols, "snapshot", retyped, seen)

    commits = t.timeline.commits
    for c in commits:
        what = f"as of {c.requested}"
        _same(t.as_of(c.requested).with_meta_fields(meta).to_arrow(), helpers.hudi_read(path, as_of=c.requested),
              cols, what, retyped, seen)

    if not meta:
        with pytest.raises(lk.TimeTravelError, match="meta fields are disabled"):
            t.incremental().to_arrow()
        return
    bounds = [c.completed if cfg.version >= 8 else c.requested for c in commits]
    pairs = [(None, b) for b in bounds] + list(itertools.combinations(bounds, 2)) + [(a, None) for a in bounds]
    for a, b in pairs:
        what = f"incremental ({a}, {b}]"
        _same(t.incremental(a, b, meta_fields=True).to_arrow(), helpers.hudi_read(path, start=a, end=b), cols, what, retyped, seen)

    if retyped:
        # the reads typed by the first two commits' own schema (long), and only those
        early = commits[:2]
        assert seen == {f"as of {c.requested}" for c in early}
        first = t.as_of(commits[0].requested).to_arrow()
        assert first.schema.field(retyped).type == pa.int64()
        sql = (DATA / f"{rel}.sql").read_text()
        first_insert = sql.split("INSERT INTO", 2)[1]
        assert sorted(first.column(retyped).to_pylist()) == sorted(int(v) for v in re.findall(r"(\d{10,13})\)[,;]", first_insert))
        assert pa.types.is_string(snap.schema.field(retyped).type)
    else:
        assert not seen
