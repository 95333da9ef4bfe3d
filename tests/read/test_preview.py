"""What a table, a query and a lake show in a notebook: a few rows, the schema, the commits
and the size, read cheaply, with a failed read shown in place and values escaped."""

from __future__ import annotations

import html as _html
import re

import pyarrow as pa
import pytest

from lakesdk._display import PREVIEW_ROWS


def _rows_shown(html: str) -> list[list[str]]:
    """The cells of the preview table's body rows, tags stripped."""
    body = html.split("class='lakesdk-preview'", 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[_html.unescape(re.sub("<[^>]+>", "", c)) for c in re.findall("<td[^>]*>(.*?)</td>", r)]
            for r in re.findall("<tr>(.*?)</tr>", body)]


def test_a_new_table_says_it_has_no_rows_yet(local_lake):
    t = local_lake.create_table("trips", key="id", ordering="ts")
    html = t._repr_html_()
    assert "none yet" in html and "no rows yet" in html and "lakesdk-preview" not in html


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_table_shows_its_commits_size_schema_and_first_rows(local_lake, table_type):
    t = local_lake.create_table("trips", key="id", partition_by="city", ordering="ts", table_type=table_type)
    t.upsert(pa.table({"id": list(range(12)), "city": ["sf", "nyc"] * 6, "ts": [1] * 12,
                       "note": ["<b>bold</b>" + "x" * 60] * 12}))
    t.upsert({"id": [1], "city": ["nyc"], "ts": [2], "note": [None]})
    html = t._repr_html_()
    assert "2 on the active timeline" in html and "2 partitions" in html and " KiB in " in html
    for name, typ in [("id", "int64"), ("city", "string"), ("ts", "int64"), ("note", "string")]:
        assert f"<code>{name}</code>&nbsp;<span style='color:#757575'>{typ}</span>" in html
    shown = _rows_shown(html)
    assert len(shown) == PREVIEW_ROWS and all(len(r) == 4 for r in shown)
    everything = {r["id"]: r for r in t.read().to_arrow().to_pylist()}
    for cells in shown:                   # each shown row is a row of the table, long values cut
        row = everything[int(cells[0])]
        assert cells[1] == row["city"]
        assert cells[3] == ("null" if row["note"] is None else row["note"][:39] + "…")
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html      # values escaped


def test_a_query_shows_its_columns_and_rows_within_its_limit(local_lake):
    t = local_lake.create_table("trips", key="id", ordering="ts")
    t.upsert({"id": list(range(10)), "ts": [0] * 10, "v": [f"v{i}" for i in range(10)]})
    few = t.read().where("id < 3").select("id", "v")._repr_html_()
    assert "all rows" in few and sorted(_rows_shown(few)) == [["0", "v0"], ["1", "v1"], ["2", "v2"]]
    assert "<code>ts</code>" not in few
    many = t.read()._repr_html_()
    assert "first rows" in many and len(_rows_shown(many)) == PREVIEW_ROWS
    capped = t.read().limit(2)._repr_html_()
    assert "all rows" in capped and len(_rows_shown(capped)) == 2
    assert "<Query 'trips' snapshot limit=2>" in capped.replace("&lt;", "<").replace("&gt;", ">").replace("&#x27;", "'")
    old = t.timeline.commits.last
    t.upsert({"id": [11], "ts": [0], "v": ["new"]})
    assert len(_rows_shown(t.read().as_of(old.requested).where("id > 8")._repr_html_())) == 1


def test_a_failed_read_is_shown_in_place_of_the_rows(local_lake):
    t = local_lake.create_table("trips", key="id", ordering="ts")
    t.upsert({"id": [1, 2], "ts": [0, 0]})
    for f in t.read().plan().files:
        t.storage.delete(f)
    html = t._repr_html_()
    assert "DataFileMissingError" in html and "1 on the active timeline" in html
    assert "DataFileMissingError" in t.read()._repr_html_()


def test_a_lake_lists_its_tables_and_shows_one_it_cannot_read(local_lake):
    assert "no tables yet" in local_lake._repr_html_()
    a = local_lake.create_table("a", key="id", ordering="ts", table_type="mor")
    a.upsert({"id": [1], "ts": [0]})
    a.upsert({"id": [2], "ts": [0]})
    local_lake.create_table("b", key="id", ordering="ts")
    bad = local_lake.create_table("c", key="id", ordering="ts")
    bad.storage.write(".hoodie/hoodie.properties", b"hoodie.table.version=banana\n")
    html = local_lake._repr_html_()
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall("<td[^>]*>(.*?)</td>", html)]
    assert cells[:5] == ["a", "mor", "v9", "2", cells[4]] and cells[5:9] == ["b", "cow", "v9", "0"]
    assert "c" in cells and "Error" in html
