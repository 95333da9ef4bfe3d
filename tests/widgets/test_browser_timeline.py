"""A real browser: Voila serves a notebook that displays ``t.widgets.timeline()`` on
127.0.0.1, Playwright drives Debian's Chromium, checks that the bars rendered are the
table's instants, clicks one and waits for the side panel to show that instant, and saves
a screenshot (``<tmp>/timeline.png``, copied to ``test-output/timeline.png``)."""

from __future__ import annotations

import json
import textwrap

import pytest
from voila_harness import ROOT, fits_box_js, screenshot, voila_page

pytestmark = pytest.mark.browser

SETUP = textwrap.dedent("""\
    import pandas as pd
    import lakesdk as lk
    import lakesdk.widgets.timeline  # noqa: F401  (import plotly now, so the pending bar below stays short)
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.format.instant import Instant
    from lakesdk.format.timeline import InstantClock

    # direct markers: no marker server, so no Spark JVM starts in this kernel
    lake = lk.Lake("lake", options=lk.TableOptions(markers="direct"))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    rides = pd.DataFrame({"uuid": [f"r{i}" for i in range(6)], "city": ["ams", "bcn", "cph"] * 2,
                          "ts": [1] * 6, "fare": [float(i) for i in range(6)]})
    t.upsert(rides)
    t.upsert(rides.assign(ts=2, fare=rides.fare * 2).head(4))
    t.delete(["r5"])
    # a write that is still running: requested -> inflight, not completed
    store = t.context.store
    pending = Instant("commit", "requested", InstantClock.next(after=t.timeline.max_time()))
    store.create(pending)
    pending = store.transition(pending, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())
""")


# the bars plotly drew, per trace name, in point order: what a user sees (the instants' bars by
# state, and the completion order's)
BARS_JS = """() => {
  const out = {};
  for (const g of document.querySelectorAll('.lakesdk-timeline g.trace.bars')) {
    const cd = g.__data__ && g.__data__[0] && g.__data__[0].trace;
    if (!cd) continue;
    out[cd.name] = Array.from(g.querySelectorAll('g.point path')).map((p, i) => {
      const r = p.getBoundingClientRect();
      return {requested: cd.customdata[i][0], state: cd.customdata[i][3], x: r.x + r.width / 2,
              y: r.y + r.height / 2, width: r.width, height: r.height};
    });
  }
  return out;
}"""


def test_timeline_renders_and_reacts_to_a_click(tmp_path):
    with voila_page(tmp_path, [SETUP, "w = t.widgets.timeline()\nw"]) as (page, _):
        page.wait_for_selector(".lakesdk-timeline .js-plotly-plot g.trace.bars g.point path", timeout=60_000)

        # the notebook has run: the bars must be exactly the table's instants
        import lakesdk as lk
        timeline = lk.open_table(str(tmp_path / "lake" / "trips")).timeline
        assert len(timeline) == 4
        # every instant's bar, and every completed one's again in completion order
        page.wait_for_function(
            "n => document.querySelectorAll('.lakesdk-timeline g.trace.bars g.point path').length === n",
            arg=len(timeline) + len(timeline.completed), timeout=30_000)
        page.wait_for_function(fits_box_js(".lakesdk-timeline"), timeout=30_000, polling=250)
        bars = page.evaluate(BARS_JS)
        done_order = bars.pop("completion order")
        assert [b["requested"] for b in done_order] == [i.requested for i in timeline.by_completion()
                                                        if i.is_completed]
        drawn = sorted((b["requested"], b["state"]) for v in bars.values() for b in v)
        assert drawn == sorted((i.requested, i.state) for i in timeline)
        assert [b["requested"] for b in bars["inflight"]] == [i.requested for i in timeline.pending]
        assert all(b["width"] > 0 and b["height"] > 0 for v in bars.values() for b in v), bars

        # click a commit's bar (the widest, to hit it for sure): the side panel changes to it
        panel = page.locator(".lakesdk-timeline .lakesdk-panel")
        assert panel.get_attribute("data-instant") == ""
        target = max(bars["completed"], key=lambda b: b["width"])
        page.mouse.click(target["x"], target["y"])
        page.wait_for_function(
            "req => document.querySelector('.lakesdk-timeline .lakesdk-panel')"
            ".getAttribute('data-instant') === req", arg=target["requested"], timeout=30_000)
        text = panel.inner_text()
        table = lk.open_table(str(tmp_path / "lake" / "trips"))
        stats = table.inspect.commit_metadata(target["requested"]).write_stats
        assert target["requested"] in text and f"written files (write stats) ({len(stats)})" in text
        assert all(s.file_name in text for s in stats)
        # and the time-travel button shows the table as of that instant
        page.get_by_role("button", name="Time travel").click()
        travel = page.locator(".lakesdk-timeline .lakesdk-travel")
        travel.wait_for(timeout=30_000)
        assert travel.get_attribute("data-instant") == target["requested"]
        expected_rows = len(table.as_of(target["requested"]).to_pandas())
        assert f"{expected_rows} rows" in travel.inner_text()

        screenshot(page, tmp_path, "timeline.png")
    (ROOT / "test-output" / "timeline.json").write_text(json.dumps({"bars": drawn, "clicked": target["requested"]}, indent=1))
