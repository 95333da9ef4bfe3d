"""Table handles: what a path must be, and the resources a handle owns (marker server, threads)."""

from __future__ import annotations

import pytest

import lakesdk as lk
from lakesdk.exceptions import TableNotFoundError


def test_open_table_on_a_file_is_table_not_found(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("not a table")
    with pytest.raises(TableNotFoundError, match="is a file, not a table folder") as ei:
        lk.open_table(str(f))
    assert str(f) in str(ei.value) and ".hoodie/hoodie.properties" in str(ei.value)
    with pytest.raises(TableNotFoundError, match="is a file, not a table folder"):
        lk.Lake(str(tmp_path)).table("notes.txt")
