"""A real browser on ``display(t)``: Voila runs a notebook whose last cell is the table; the
tabbed view renders, a click on the "Transactions" tab builds the transactions widget in
the kernel, and the bars Chromium draws are the journal's and the timeline's writes, one
lane per writer (screenshot: ``test-output/transactions.png``)."""

from __future__ import annotations

import textwrap

import pytest
from voila_harness import fits_box_js, screenshot, voila_page

pytestmark = pytest.mark.browser

SETUP = textwrap.dedent("""\
    import pandas as pd
    import lakesdk as lk
    from lakesdk.concurrency.journal import TransactionRecord, record_transaction
    from lakesdk.format.instant import parse_instant_time

    def ms(instant):
        return int((parse_instant_time(instant) - parse_instant_time("19700101000000000")).total_seconds() * 1000)

    lake = lk.Lake("lake", options=lk.TableOptions(markers="direct", engine="local"))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    rides = pd.DataFrame({"uuid": [f"r{i}" for i in range(6)], "city": ["ams", "bcn", "cph"] * 2,
                          "ts": [1] * 6, "fare": [float(i) for i in range(6)]})
    t.upsert(rides)                                   # not journaled: the timeline's lane
    won = t.upsert(rides.assign(ts=2).head(2))        # writer A's commit
    groups = sorted({(s.partitionPath, s.fileId) for s in t.inspect.commit_metadata(won.instant).write_stats})
    start, end = ms(won.instant), ms(won.completed)
    _ = record_transaction(t.storage, TransactionRecord(won.instant, "commit", "committed", writer="hostA:1:main",
                                                    started_ms=start, ended_ms=end, file_groups=tuple(groups)))
    _ = record_transaction(t.storage, TransactionRecord(
        won.instant[:-3] + "999", "commit", "conflict", writer="hostB:2:main", started_ms=start - 200,
        ended_ms=end + 200, file_groups=tuple(groups[:1]), reason="same file group",
        conflicts_with={"instant": won.instant, "action": "commit", "file_groups": [list(groups[0])]}))
""")

BARS_JS = """() => {
  const OUTCOMES = ['committed', 'conflict', 'schema_conflict', 'early_conflict', 'failed', 'inflight'];
  const out = [];
  for (const g of document.querySelectorAll('.lakesdk-transactions g.trace.bars')) {
    const tr = g.__data__ && g.__data__[0] && g.__data__[0].trace;
    if (!tr || !OUTCOMES.includes(tr.name)) continue;
    g.querySelectorAll('g.point path').forEach((p, i) => {
      const r = p.getBoundingClientRect();
      const area = g.closest('.js-plotly-plot').querySelector('.nsewdrag').getBoundingClientRect();
      out.push({instant: tr.customdata[i][0], lane: tr.customdata[i][2], outcome: tr.name, width: r.width,
                x: r.x + r.width * 0.9, y: r.y + r.height / 2,
                fx: (r.x + r.width - area.x) / area.width});   // the bar's end across the plot area
    });
  }
  return out;
}"""

#: the selected write's outline (the last trace the click's redraw changes) is drawn
SELECTED_DRAWN_JS = """req => {
  for (const g of document.querySelectorAll('.lakesdk-transactions g.trace.bars')) {
    const tr = g.__data__ && g.__data__[0] && g.__data__[0].trace;
    if (tr && tr.name === 'selected' && (tr.customdata || []).some(c => c[0] === req)
        && g.querySelectorAll('g.point path').length) return true;
  }
  return false;
}"""
PIXELS = 2      # positions are compared with this tolerance: a redraw may lay a bar out a pixel off


def test_display_table_tabs_and_transactions_in_a_browser(tmp_path):
    with voila_page(tmp_path, [SETUP, "t"]) as (page, sync_api):
        # display(t) in a kernel: the tabbed view, summary first, no widget built yet
        page.get_by_role("tab", name="Transactions").wait_for(timeout=60_000)
        assert "lakesdk Table" in page.locator(".lakesdk-table-view").inner_text()
        assert page.locator(".lakesdk-transactions").count() == 0
        for attempt in range(3):   # a click before the tab's model is wired up can be lost
            if attempt:
                page.get_by_role("tab", name="Table").click()
            page.get_by_role("tab", name="Transactions").click()
            try:
                page.wait_for_selector(".lakesdk-transactions g.trace.bars g.point path", timeout=40_000)
                break
            except sync_api.TimeoutError:
                if attempt == 2:
                    raise

        import lakesdk as lk
        from lakesdk.concurrency.journal import read_transactions
        t = lk.open_table(str(tmp_path / "lake" / "trips"))
        journal = read_transactions(t.storage)
        unjournaled = [i for i in t.timeline if i.requested not in {r.instant for r in journal}]
        n = len(journal) + len(unjournaled)
        assert len(journal) == 2 and len(unjournaled) == 1
        page.wait_for_function(f"n => ({BARS_JS})().length === n", arg=n, timeout=30_000)
        page.wait_for_function(fits_box_js(".lakesdk-transactions"), timeout=30_000, polling=250)
        bars = page.evaluate(BARS_JS)
        drawn = sorted((b["instant"], b["lane"], b["outcome"]) for b in bars)
        assert drawn == sorted([(r.instant, r.writer, r.outcome) for r in journal] +
                               [(i.requested, "(not journaled) writes", "committed") for i in unjournaled])
        assert all(b["width"] > 0 for b in bars), bars
        verdicts = page.locator(".lakesdk-transactions .lakesdk-verdicts").inner_text()
        assert "lost (conflict at commit)" in verdicts
        # a click on the losing write, away from the overlap links (the red outline drawn over
        # the bar does not take the click)
        lost = next(b for b in bars if b["outcome"] == "conflict")
        page.mouse.click(lost["x"], lost["y"])
        page.wait_for_function(
            "req => document.querySelector('.lakesdk-transactions .lakesdk-panel')"
            ".getAttribute('data-instant') === req", arg=lost["instant"], timeout=30_000)
        panel = page.locator(".lakesdk-transactions .lakesdk-panel").inner_text()
        assert "lost (conflict at commit)" in panel and "overlaps" in panel
        # the redraw the click caused (the selected write's outline is drawn last) kept the time
        # axis and every bar where it was across the plot area (which follows its box's width),
        # give or take the sub-pixel layout of a redraw
        page.wait_for_function(SELECTED_DRAWN_JS, arg=lost["instant"], timeout=30_000)
        page.wait_for_function(fits_box_js(".lakesdk-transactions"), timeout=30_000, polling=250)
        after = page.evaluate(BARS_JS)
        area = page.evaluate("() => document.querySelector('.lakesdk-transactions .nsewdrag')"
                             ".getBoundingClientRect().width")
        assert page.evaluate("() => document.querySelector('.lakesdk-transactions .js-plotly-plot')"
                             "._fullLayout.xaxis.type") == "date"
        assert sorted(b["instant"] for b in after) == sorted(b["instant"] for b in bars)
        moved = {b["instant"]: (b["fx"], a["fx"]) for b in bars for a in after
                 if a["instant"] == b["instant"] and abs(a["fx"] - b["fx"]) * area > PIXELS}
        assert not moved, f"bars moved by the redraw (instant: (end across the plot before, after)): {moved}"
        screenshot(page, tmp_path, "transactions.png")
