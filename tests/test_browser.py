"""A real browser: Voila serves a notebook that displays ``t.widgets.timeline()`` on
127.0.0.1, Playwright drives Debian's Chromium, checks that the bars rendered are the
table's instants, clicks one and waits for the side panel to show that instant, and saves
a screenshot (``<tmp>/timeline.png``, copied to ``test-output/timeline.png``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]

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
    store = t._store()
    pending = Instant("commit", "requested", InstantClock.next(after=t.timeline.max_time()))
    store.create(pending)
    pending = store.transition(pending, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())
""")


def _notebook(path: Path) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell("w = t.widgets.timeline()\nw")]
    nbformat.write(nb, str(path))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"voila exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"voila did not listen on 127.0.0.1:{port} within {timeout} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop voila and its kernel (the process group this test started)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# the bars plotly drew, per trace name, in point order: what a user sees
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
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; scripts/system-deps.sh does it)")
    # voila and playwright are in the test extra: missing, they fail the test (pip install -e '.[test]')
    import voila  # noqa: F401
    from playwright import sync_api

    _notebook(tmp_path / "nb.ipynb")
    port = _free_port()
    log = tmp_path / "voila.log"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(ROOT)}
    voila_bin = Path(sys.executable).with_name("voila")
    cmd = [str(voila_bin) if voila_bin.exists() else "voila", "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
           "--show_tracebacks=True", "nb.ipynb"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        _wait_port(port, proc, log, 30)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
                page.wait_for_selector(".lakesdk-timeline .js-plotly-plot g.trace.bars g.point path", timeout=60_000)

                # the notebook has run: the bars must be exactly the table's instants
                import lakesdk as lk
                timeline = lk.open_table(str(tmp_path / "lake" / "trips")).timeline
                assert len(timeline) == 4
                page.wait_for_function(
                    "n => document.querySelectorAll('.lakesdk-timeline g.trace.bars g.point path').length === n",
                    arg=len(timeline), timeout=30_000)
                bars = page.evaluate(BARS_JS)
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

                shot = tmp_path / "timeline.png"
                page.mouse.move(5, 5)   # no hover label over the bars
                page.wait_for_timeout(300)
                page.screenshot(path=str(shot), full_page=True)
            finally:
                browser.close()
        assert shot.stat().st_size > 10_000
        out_dir = ROOT / "test-output"
        out_dir.mkdir(exist_ok=True)
        shutil.copyfile(shot, out_dir / "timeline.png")
        (out_dir / "timeline.json").write_text(json.dumps({"bars": drawn, "clicked": target["requested"]}, indent=1))
    finally:
        _stop(proc)
