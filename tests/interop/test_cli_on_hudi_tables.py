"""The ``lakesdk`` command on every table of the Hudi-written corpus (table versions 6, 8 and 9,
copy-on-write and merge-on-read, every key generator, Lance base files, tables without meta
fields; copies, never the originals).

Each command's answer is compared with lakesdk's API and, for the rows, with the ``hudi``
reader: ``read --output json`` (every row, as of the first commit, a few columns, a limit),
``show``, ``timeline``, ``history`` and ``check``.  None of them changes a byte of the table.

The one command that writes, ``kafka-sink``, must refuse before it starts a worker (exit status 2,
a message naming the reason, the table unchanged) a table lakesdk does not write: copy-on-write
tables (the sink writes merge-on-read ones), merge-on-read tables of version 6, tables without
meta fields, Lance base files, partition paths formatted from a time; a table it writes gets
as far as starting its worker (a stand-in here: the sink itself has tests of its own with a
broker, tests/streaming/test_kafka_sink.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lakesdk as lk
from lakesdk.cli.main import _json_floats, _json_value, main
from lakesdk.read.check import check_table
from lakesdk.storage import Storage

from .. import helpers
from ..corpus_model import LANCE, TABLES, TIMED, copy_table

ALL = sorted(TABLES)
#: what the Kafka sink may write: merge-on-read tables lakesdk writes (tests/interop/test_writes_into_hudi_tables.py)
SINKABLE = sorted(rel for rel, cfg in TABLES.items() if cfg.is_mor and cfg.version >= 8 and cfg.populate_meta_fields
                  and rel not in LANCE and rel not in TIMED)


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the command in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def files(path: str) -> dict[str, bytes]:
    """Every file of the table, by its path: what no command may change."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(Path(path).rglob("*")) if f.is_file()}


def as_json(rows: list[dict[str, Any]], columns: list[str] | None = None) -> list[str]:
    """Rows (``to_pylist``) as ``read --output json`` prints them, restricted to ``columns``,
    sorted: the form the answers are compared in."""
    out = []
    for r in rows:
        r = {c: r.get(c) for c in columns} if columns is not None else r
        out.append(json.dumps(json.loads(json.dumps(_json_floats(r), default=_json_value, allow_nan=False)),
                              sort_keys=True))
    return sorted(out)


def json_rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def data_columns(rows: list[dict[str, Any]]) -> list[str]:
    return [c for c in (rows[0] if rows else {}) if not c.startswith("_hoodie_")]


@pytest.mark.interop
@pytest.mark.parametrize("rel", ALL)
def test_every_command_on_a_hudi_written_table_answers_as_the_api_and_changes_nothing(corpus, rel, tmp_path):
    path = copy_table(corpus, rel, tmp_path)
    before = files(path)
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    rows = t.read().to_arrow().to_pylist()

    rc, out, err = cli("read", path, "--output", "json")
    assert (rc, err) == (0, ""), err
    got = json_rows(out)
    assert as_json(got) == as_json(rows), "read --output json is not the API's snapshot"
    if rel not in LANCE:     # the hudi reader (0.5.0) reads Parquet base files
        cols = data_columns(rows)
        theirs = helpers.hudi_read(path)
        assert as_json(got, cols) == as_json(theirs, cols), "read --output json is not the hudi reader's snapshot"

    commits = t.timeline.commits.instants
    if commits:
        first = commits[0].requested
        rc, out, err = cli("read", path, "--output", "json", "--as-of", first)
        assert (rc, err) == (0, ""), err
        assert as_json(json_rows(out)) == as_json(t.as_of(first).to_arrow().to_pylist()), f"--as-of {first}"
    if rows:
        key = t.config.record_key_fields[0]
        rc, out, err = cli("read", path, "--output", "json", "--columns", key, "--limit", "2")
        assert (rc, err) == (0, ""), err
        some = json_rows(out)
        assert len(some) == min(2, len(rows)) and all(list(r) == [key] for r in some)
        assert set(as_json(some)) <= set(as_json(rows, [key])), "--columns/--limit rows that the table lacks"
    rc, out, err = cli("read", path)
    assert rc == 0 and "== rows" in out and ("(no rows)" in out) == (not rows), err

    rc, out, err = cli("show", path)
    assert rc == 0 and repr(t) in out and str(t.timeline) in out, err
    rc, out, err = cli("timeline", path)
    assert rc == 0 and "== timeline" in out, err
    assert all(i.requested in out for i in t.timeline.instants), "timeline leaves out instants"
    rc, out, err = cli("history", path)
    assert rc == 0 and "== history" in out, err
    assert all(r in out for r in t.history()["instant"].to_pylist()), "history leaves out commits"

    report = check_table(Storage(path))
    rc, out, err = cli("check", path)
    assert (rc, out.strip()) == (0 if report.ok else 1, repr(report)), err
    assert files(path) == before, "a command changed the table"


@pytest.mark.parametrize("rel", ALL)
def test_kafka_sink_refuses_the_tables_it_does_not_write(corpus, rel, tmp_path, monkeypatch):
    """Before it starts a worker: a table the sink cannot write is refused (exit status 2, the
    reason on stderr, the table unchanged); a table it writes gets to its worker."""
    path = copy_table(corpus, rel, tmp_path)
    before = files(path)
    started: list[str] = []

    class Worker:      # stands in for the sink's worker (which needs a broker): records that it started
        name = "stand-in"
        error = None

        def __init__(self, cfg: Any) -> None:
            started.append(cfg.table_url)

        def run(self, stop: Any) -> None:
            pass

        def snapshot(self) -> Any:
            return None
    monkeypatch.setattr("lakesdk.streaming.kafka.worker.SinkWorker", Worker)
    monkeypatch.setattr("signal.signal", lambda *a: None)
    rc, out, err = cli("kafka-sink", "--table", path, "--topic", "t", "--bootstrap", "127.0.0.1:9")
    if rel in SINKABLE:
        assert (rc, started) == (0, [path]), err
    else:
        cfg = TABLES[rel]
        assert rc == 2 and not started, f"the sink started on {rel}: {err}"
        reason = ("copy-on-write" if not cfg.is_mor else "hoodie.populate.meta.fields=false"
                  if not cfg.populate_meta_fields else "LANCE" if rel in LANCE else
                  "version 6" if cfg.version < 8 else "partitioned by a time")
        assert err.startswith("lakesdk kafka-sink: ") and reason in err and "\n" not in err.strip(), err
    assert files(path) == before


#: one table of each kind, through ``python -m lakesdk`` (the module entry point: exit status, streams)
ENTRY = [rel for rel in ("sample_table/cow/v6_nonpartitioned", "quickstart_trips_table/mor/avro/v6_trips_8i3d",
                         "quickstart_trips_table/mor/avro/v8_trips_8i3u1d", "sample_table/mor/avro/v9_txns_simple_meta",
                         "sample_table/cow/v8_simplekeygen_hivestyle_no_metafields") if rel in TABLES]


@pytest.mark.parametrize("rel", ENTRY)
def test_python_m_lakesdk_prints_what_the_command_prints(corpus, rel, tmp_path):
    path = copy_table(corpus, rel, tmp_path)
    before = files(path)
    for argv in (["read", path, "--output", "json"], ["check", path],
                 ["kafka-sink", "--table", path, "--topic", "t", "--bootstrap", "127.0.0.1:9"]):
        if argv[0] == "kafka-sink" and TABLES[rel].is_mor and TABLES[rel].version >= 8 \
                and TABLES[rel].populate_meta_fields:
            continue    # it would start the sink
        r = subprocess.run([sys.executable, "-m", "lakesdk", *argv], capture_output=True, text=True, timeout=300)
        rc, out, err = cli(*argv)
        assert (r.returncode, r.stdout) == (rc, out), f"{argv[0]}: {r.stderr}"
        assert r.stderr.strip().endswith(err.strip()) if err else not r.stderr.strip(), r.stderr
    assert files(path) == before
