"""The README's main job: `lakesdk demo`, and the table commands."""

from __future__ import annotations

import pytest

from lakesdk.cli.main import main

pytestmark = pytest.mark.spark


def test_demo_and_table_commands(tmp_path, spark, capsys):
    assert main(["demo", "--path", str(tmp_path / "lake")]) == 0
    out = capsys.readouterr().out
    assert "== table now" in out and "ride-008" in out and "Spark over the table" in out
    assert "<Timeline 3 instants (3 completed, 0 pending)" in out
    table = str(tmp_path / "lake" / "trips")
    props = (tmp_path / "lake" / "trips" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=9" in props.splitlines()
    assert f"The table is a Hudi table of version 9 at {table}" in out   # what it wrote (it said v8)
    assert main(["history", table]) == 0 and "DELETE" in capsys.readouterr().out
    assert main(["read", table, "--where", "fare > 40"]) == 0 and "ride-008" in capsys.readouterr().out
    assert main(["show", str(tmp_path / "nothing")]) == 2
    assert "no Hudi table" in capsys.readouterr().err
    # a second run replaces the table the first one created
    assert main(["demo", "--path", str(tmp_path / "lake")]) == 0
    assert "<Timeline 3 instants (3 completed, 0 pending)" in capsys.readouterr().out


def test_demo_refuses_to_remove_a_folder_it_did_not_create(tmp_path, capsys):
    import lakesdk as lk
    mine = tmp_path / "mine" / "trips"
    mine.mkdir(parents=True)
    (mine / "thesis.txt").write_text("years of work")
    assert main(["demo", "--path", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err
    assert "not a table created by `lakesdk demo`" in err and str(mine) in err
    assert (mine / "thesis.txt").read_text() == "years of work"
    # a Hudi table of the same name that the demo did not create is kept too
    other = lk.Lake(str(tmp_path / "other")).create_table("trips", key="id")
    assert main(["demo", "--path", str(tmp_path / "other")]) == 2
    assert "not a table created by `lakesdk demo`" in capsys.readouterr().err
    assert lk.open_table(other.path).name == "trips"
    # a symlink named like the table is not followed
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "trips").symlink_to(mine)
    assert main(["demo", "--path", str(tmp_path / "link")]) == 2
    assert (mine / "thesis.txt").exists()


def test_version(capsys):
    import lakesdk as lk
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"lakesdk {lk.__version__}"


def test_changes_command(tmp_path, capsys):
    import json

    import pyarrow as pa

    import lakesdk as lk
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", ordering="ts")
    first = t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    t.upsert(pa.table({"id": [2], "ts": [2], "v": ["c"]}))
    t.delete([1])
    assert main(["changes", t.path]) == 0
    out = capsys.readouterr().out
    assert "== changes" in out and "before.v" in out and "after.v" in out
    assert main(["changes", t.path, "--start", first.completed, "--output", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["op"], (r["after"] or r["before"])["v"]) for r in rows] == [("u", "c"), ("d", "a")]
    assert rows[0]["before"] == {"id": 2, "ts": 1, "v": "b"}
