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
    assert main(["history", table]) == 0 and "DELETE" in capsys.readouterr().out
    assert main(["read", table, "--where", "fare > 40"]) == 0 and "ride-008" in capsys.readouterr().out
    assert main(["show", str(tmp_path / "nothing")]) == 2
    assert "no Hudi table" in capsys.readouterr().err
