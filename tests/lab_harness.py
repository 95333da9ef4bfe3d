"""A real-browser harness for JupyterLab 4 and Notebook 7: ``jupyter lab`` or ``jupyter
notebook`` serves a temporary root folder on 127.0.0.1 (a free port, a token, its settings,
workspaces, runtime and config folders inside the temporary folder, so nothing reads or changes
the user's Jupyter setup), Playwright drives Debian's Chromium (never a downloaded browser)
through the front end's own command registry and shell (``window.jupyterapp``, exposed with
``expose_app_in_browser``). Notebook 7 is built from JupyterLab's components: the same
application object, notebook panel and commands, a page per notebook (:data:`FRONT_ENDS`).

The widget notebook the browser tests and ``scripts/widget_screenshots.py`` share is here too:
:data:`WIDGET_CELLS` builds a small merge-on-read table (and the tables of the transactions,
provenance and Kafka monitor widgets) and displays every widget, :func:`widget_figures` builds
the same widgets outside the browser, :data:`DRAWN_JS` reads from the DOM what plotly drew
inside a widget's container, and :func:`assert_widgets_render` renders the notebook ten times
in a row in either front end and fails on what a render got wrong."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from voila_harness import CHROMIUM_ARGS, free_port, stop, wait_port, write_notebook

ROOT = Path(__file__).resolve().parents[1]

#: what a widget-capable notebook needs in this environment: missing, the tests skip
LAB_MODULES = ("jupyterlab", "playwright", "ipywidgets", "plotly", "anywidget")


@dataclass(frozen=True)
class FrontEnd:
    """A Jupyter front end built from JupyterLab's components: the module ``python -m`` runs, the
    application class its options are for, a notebook's page (``{}`` the notebook's path),
    options of that front end only, and the page errors of its own code that a test does not
    fail on: (the error's message, a text of its stack), each an upstream bug."""

    name: str
    module: str
    app: str
    notebook_page: str
    options: tuple[str, ...] = ()
    known_page_errors: tuple[tuple[str, str], ...] = ()


#: JupyterLab's server extension, which ``jupyter notebook`` loads too when JupyterLab is
#: installed: no extension manager that asks PyPI, no update checks. Its settings and workspaces
#: folders are set for both front ends (:func:`lab_server`): Notebook 7 reads its settings
#: through JupyterLab's ``/lab/api/settings`` when both are installed, not through its own
_LAB_EXTENSION_OPTIONS = ("--LabApp.extension_manager=readonly",
                          "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
FRONT_ENDS = {
    "lab": FrontEnd("JupyterLab", "jupyterlab", "LabApp", "lab/tree/{}?reset", _LAB_EXTENSION_OPTIONS),
    # Notebook 7: the notebook alone on its page, no workspace to reset. Its shortcuts plugin
    # reads its own settings before they have loaded when another plugin's settings load first, on
    # most page loads (jupyter/notebook#7862, a race in Notebook 7's bundle): the shortcuts load a
    # moment later, nothing of the notebook or its widgets depends on them
    "notebook": FrontEnd("Notebook 7", "notebook", "JupyterNotebookApp", "notebooks/{}", _LAB_EXTENSION_OPTIONS,
                         (("Cannot read properties of undefined (reading 'schema')", "/static/notebook/notebook_core."),)),
}

#: settings JupyterLab and Notebook 7 read from the temporary user-settings folder: no news or
#: update checks (no network), and widget state saved in the notebook (a reload then has it, as a
#: user's has)
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": True},
}


def require_lab(front_end: str = "lab") -> str:
    """Debian's Chromium path; skips the test when it or a Python module it needs (the front end's
    among them: ``jupyterlab``, or ``notebook`` for Notebook 7) is missing."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; scripts/system-deps.sh does it)")
    import importlib.util
    modules = dict.fromkeys((*LAB_MODULES, FRONT_ENDS[front_end].module))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: JupyterLab and Notebook 7 tests need the lab and test "
                    "dependency groups (make setup)")
    return chromium


class LabServer:
    """A running ``jupyter lab`` or ``jupyter notebook``: its front end, URL, token and root
    folder, and its REST API."""

    def __init__(self, port: int, token: str, root: Path, log: Path, proc: subprocess.Popen,
                 front_end: str = "lab") -> None:
        self.port, self.token, self.root, self.log, self.proc = port, token, root, log, proc
        self.front_end = front_end

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path}{sep}token={self.token}"

    def notebook_url(self, notebook: str) -> str:
        """The page of ``notebook`` (a path under the root folder) in this server's front end."""
        return self.url(FRONT_ENDS[self.front_end].notebook_page.format(notebook))

    def api(self, method: str, path: str) -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown(self) -> None:
        """Shut down every kernel, then the server (its process group, if it lingers)."""
        if self.proc.poll() is None:
            try:
                for kernel in self.api("GET", "kernels"):
                    self.api("DELETE", f"kernels/{kernel['id']}")
                self.api("POST", "shutdown")
                self.proc.wait(20)
            except Exception:  # noqa: BLE001 - the process group is stopped below either way
                pass
        stop(self.proc)


@contextmanager
def lab_server(tmp_path: Path, *, front_end: str = "lab", env: dict[str, str] | None = None) -> Iterator[LabServer]:
    """``jupyter lab`` (``front_end="lab"``) or ``jupyter notebook`` (``"notebook"``, Notebook 7)
    on 127.0.0.1 serving ``tmp_path/root``; stopped with its kernels on exit."""
    fe = FRONT_ENDS[front_end]
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    home = tmp_path / "jupyter"
    for plugin, values in LAB_SETTINGS.items():
        f = home / "settings" / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    log = tmp_path / f"{fe.module}.log"
    full_env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_CONFIG_DIR": str(home / "config"),
                "IPYTHONDIR": str(home / "ipython"), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT),
                "LAKESDK_PROGRESS": "0", **(env or {})}
    folders = [f"--{app}.{trait}={home / name}" for app in dict.fromkeys((fe.app, "LabApp"))
               for trait, name in (("user_settings_dir", "settings"), ("workspaces_dir", "workspaces"))]
    cmd = [sys.executable, "-m", fe.module, "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           *folders, f"--{fe.app}.expose_app_in_browser=True", "--ServerApp.terminals_enabled=False", "--allow-root",
           *fe.options]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                start_new_session=True)
    server = LabServer(port, token, root, log, proc, front_end)
    try:
        wait_port(port, proc, log, 60, f"jupyter {front_end}")
        yield server
    finally:
        server.shutdown()


#: the current notebook panel, ready: its document loaded and a kernel idle
_READY_JS = """async () => {
  const app = window.jupyterapp;
  await app.restored;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
}"""
_IDLE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""
#: every code cell has run (an execution count) and the kernel is idle
_DONE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type === 'code' && (c.executionCount === null || c.executionState === 'running')) return false;
  }
  const kernel = panel.sessionContext.session.kernel;
  return kernel.status === 'idle';
}"""
_OUTPUTS_JS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    out.push(c.type === 'code' ? c.outputs.toJSON() : []);
  }
  return out;
}"""


class LabPage:
    """A Chromium page on a JupyterLab or Notebook 7 server, a notebook open in it; collects
    console errors and page errors (uncaught exceptions and unhandled rejections) in
    :attr:`errors`, but the front end's known ones (:attr:`FrontEnd.known_page_errors`) in
    :attr:`known_errors`."""

    def __init__(self, page: Any, sync_api: Any, server: LabServer) -> None:
        self.page, self.sync_api, self.server = page, sync_api, server
        self.errors: list[str] = []
        self.known_errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", self._page_error)

    def _page_error(self, e: Any) -> None:
        known = FRONT_ENDS[self.server.front_end].known_page_errors
        stack = getattr(e, "stack", None) or ""
        if any(getattr(e, "message", None) == message and where in stack for message, where in known):
            self.known_errors.append(f"pageerror: {e}")
        else:
            self.errors.append(f"pageerror: {e}")

    def open(self, notebook: str, timeout_s: float = 120) -> None:
        """A fresh page load of ``notebook`` (a reload when it is open): its kernel ready and idle."""
        self.page.goto(self.server.notebook_url(notebook), timeout=timeout_s * 1000)
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                    "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=timeout_s * 1000)
        self.page.evaluate(_READY_JS)
        self.page.wait_for_function(_IDLE_JS, timeout=timeout_s * 1000)

    def run_all(self, timeout_s: float = 180) -> list[list[dict[str, Any]]]:
        """Run every cell (the front end's ``notebook:run-all-cells``) and wait until each has run
        and the kernel is idle; returns each cell's outputs. A cell's error fails the test."""
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function(_DONE_JS, timeout=timeout_s * 1000, polling=200)
        outputs = self.outputs()
        errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
        assert not errors, "a cell failed:\n" + "\n".join(
            f"{e['ename']}: {e['evalue']}\n" + "\n".join(e.get("traceback", [])[-5:]) for e in errors)
        return outputs

    def outputs(self) -> list[list[dict[str, Any]]]:
        return self.page.evaluate(_OUTPUTS_JS)

    def restart_kernel(self, timeout_s: float = 60) -> None:
        """Restart the kernel without a dialog and wait until it is idle."""
        self.page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.session"
                           ".kernel.restart(); }")
        self.page.wait_for_function(_IDLE_JS, timeout=timeout_s * 1000)

    def save(self) -> None:
        """Save the notebook (with the widget state: LAB_SETTINGS turns it on)."""
        self.page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")


@contextmanager
def lab_page(server: LabServer, *, viewport: dict[str, int] | None = None) -> Iterator[LabPage]:
    """Chromium (Debian's, headless) with one page on ``server``; closed on exit."""
    chromium = require_lab(server.front_end)
    from playwright import sync_api
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=viewport or {"width": 1400, "height": 1000})
            yield LabPage(page, sync_api, server)
        finally:
            browser.close()


def write_widget_notebook(server: LabServer, name: str = "widgets.ipynb") -> str:
    """The widget notebook in the server's root; returns its name."""
    write_notebook(server.root / name, WIDGET_CELLS)
    return name


# ---------------------------------------------------------------------------------- the notebook
#: the widgets' containers, by name (the PNG names of scripts/widget_screenshots.py)
#: the table each widget shows, under the notebook's "lake" folder (the transactions widget's
#: has two writers' race; the others are the merge-on-read table's)
WIDGET_TABLES = {"transactions": "accounts", "provenance": "orders", "kafka_monitor": "events"}
WIDGETS = {"timeline": "lakesdk-timeline", "file_layout": "lakesdk-file-layout",
           "transactions": "lakesdk-transactions", "markers": "lakesdk-markers",
           "provenance": "lakesdk-provenance", "kafka_monitor": "lakesdk-kafka-monitor", "changes": "lakesdk-changes",
           "table_view": "lakesdk-table-view"}

#: the Kafka monitor's sink status (a snapshot: no broker) after the two rounds the notebook
#: commits to its table ``events``, evaluated in the notebook and here
KAFKA_STATUS = ('SinkStatus(topic="events", running=True, workers=1, coordinator_state="IDLE", '
                'coordinator_worker="events-w0", round=2, instant=events.timeline.commits[-1].requested, '
                'last_committed_instant=events.timeline.commits[-1].requested, committed_rounds=2, '
                'records_committed=7, partitions=(PartitionStatus(0, "events-w0", 4, None, 9, 4, 0), '
                'PartitionStatus(1, "events-w0", 3, None, 5, 3, 0)))')

WIDGET_CELLS = [textwrap.dedent(c) for c in (
    """\
    import shutil
    import pandas as pd
    import lakesdk as lk
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.format.instant import Instant
    from lakesdk.format.timeline import InstantClock
    from lakesdk.markers import DirectWriteMarkers

    shutil.rmtree("lake", ignore_errors=True)
    lake = lk.Lake("lake", options=lk.TableOptions(engine="local", markers="direct", progress=False))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    rides = pd.DataFrame({"uuid": [f"r{i}" for i in range(9)], "city": ["ams", "bcn", "cph"] * 3,
                          "ts": [1] * 9, "fare": [float(i) for i in range(9)]})
    t.upsert(rides)
    t.upsert(rides.assign(ts=2, fare=rides.fare + 1).head(5))    # log files
    t.upsert(rides.assign(ts=3, fare=rides.fare + 2).tail(3))
    plan = t.maintenance.schedule_compaction()
    t.maintenance.compact(plan.instant)
    t.upsert(rides.assign(ts=4).head(2))
    # a write that stopped after it wrote its markers and one of its files: the markers widget's
    store = t.context.store
    pending = Instant("deltacommit", "requested", InstantClock.next(after=t.timeline.max_time()))
    store.create(pending)
    pending = store.transition(pending, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())
    markers = DirectWriteMarkers(t.storage, pending.requested)
    markers.create("city=ams", f"f1-0_0-1-1_{pending.requested}.parquet", "CREATE")
    markers.create("city=bcn", f"f2-0_1-1-2_{pending.requested}.parquet", "MERGE")
    t.storage.write(f"city=ams/f1-0_0-1-1_{pending.requested}.parquet", b"x" * 10)
    """,
    """\
    # the transactions widget's table: two writers race on one file group under optimistic
    # concurrency (bob commits while alice waits at her commit point; alice loses), then one
    # writes elsewhere; the writer ids show a fixed host name, not this machine's
    import socket
    import threading
    from lakesdk.table.write import WriteOperation
    socket.gethostname = lambda: "laptop"
    race = lk.Lake("lake", options=lk.TableOptions(engine="local", progress=False), concurrency="optimistic")
    a = race.create_table("accounts", key="id", partition_by="region", ordering="ts")
    a.upsert(pd.DataFrame({"id": [1, 2, 3], "region": ["eu", "eu", "us"], "ts": [1, 1, 1], "balance": [10.0, 20.0, 30.0]}))
    bob = lk.open_table(a.path, options=a.options)
    finalize = WriteOperation._finalize
    def racing(self, *args):
        if self.table is a and not racing.done:
            racing.done = True
            th = threading.Thread(name="bob", target=lambda: bob.upsert(
                pd.DataFrame({"id": [2], "region": ["eu"], "ts": [2], "balance": [25.0]})))
            th.start()
            th.join()
        return finalize(self, *args)
    racing.done = False
    WriteOperation._finalize = racing
    def alice(df):
        try:
            a.upsert(df)
        except lk.WriteConflictError:
            pass
    th = threading.Thread(name="alice", target=alice, args=(pd.DataFrame(
        {"id": [1], "region": ["eu"], "ts": [2], "balance": [5.0]}),))
    th.start()
    th.join()
    WriteOperation._finalize = finalize
    th = threading.Thread(name="alice", target=alice, args=(pd.DataFrame(
        {"id": [3], "region": ["us"], "ts": [2], "balance": [35.0]}),))
    th.start()
    th.join()
    """,
    """\
    # the provenance widget's table: three streams write their own column groups of one row per order
    orders = lake.create_table("orders", key="order_id", merge_mode="partial_update",
                               column_groups={"order_ts": ["amount"], "pay_ts": ["paid"], "ship_ts": ["carrier"]})
    orders.upsert([{"order_id": "o1", "order_ts": 5, "amount": 10.0}, {"order_id": "o2", "order_ts": 9, "amount": 20.0},
                   {"order_id": "o3", "order_ts": 7, "amount": 30.0}])
    orders.upsert([{"order_id": "o1", "pay_ts": 7, "paid": True}, {"order_id": "o3", "pay_ts": 2, "paid": False}])
    orders.upsert([{"order_id": "o2", "ship_ts": 4, "carrier": "dhl"}])
    # the Kafka monitor's: two rounds as a sink commits them (the offsets in the commit metadata)
    from lakesdk.streaming.kafka.events import KAFKA_OFFSET_KEY, KAFKA_TOPIC_KEY, format_offsets
    from lakesdk.streaming.kafka.status import PartitionStatus, SinkStatus
    from lakesdk.table.transaction import begin, commit, write_batch
    events = lake.create_table("events", key="id", ordering="ts", table_type="mor")
    for n, offsets in ((3, {0: 2, 1: 1}), (4, {0: 4, 1: 3})):
        txn = begin(events)
        stats, schema = write_batch(events, txn, pd.DataFrame({"id": [f"e{i}" for i in range(n)], "ts": [1] * n}))
        commit(events, txn, stats, schema=schema,
               extra_metadata={KAFKA_OFFSET_KEY: format_offsets(offsets), KAFKA_TOPIC_KEY: "events"})
    status = """ + KAFKA_STATUS,
    "t.widgets.timeline()",
    "t.widgets.file_layout()",
    "a.widgets.transactions()",
    "t.widgets.markers()",
    "orders.widgets.provenance()",
    "t.widgets.changes()",
    "from lakesdk.widgets import KafkaMonitorWidget\nKafkaMonitorWidget(status, table=events)",
    "display(t)",
)]


def widget_figures(root: Path, name: str) -> list[Any]:
    """The figures of widget ``name`` (a :data:`WIDGETS` key, not ``table_view``), built here on
    the table the notebook wrote under ``root``: what its view must draw, top to bottom."""
    import lakesdk as lk
    t = lk.open_table(str(root / "lake" / WIDGET_TABLES.get(name, "trips")))
    if name == "kafka_monitor":
        from lakesdk.streaming.kafka.status import PartitionStatus, SinkStatus
        from lakesdk.widgets import KafkaMonitorWidget
        status = eval(KAFKA_STATUS, {"SinkStatus": SinkStatus, "PartitionStatus": PartitionStatus, "events": t})
        w = KafkaMonitorWidget(status, table=t)
        return [w.figure, w.rounds_figure]
    return [getattr(t.widgets, name)().figure]

#: What plotly drew inside each lakesdk widget container of class ``cls`` (outside a table view
#: unless ``cls`` is the table view's): per figure, per trace of bars or markers, its points and
#: how many have a non-zero size on screen; per heatmap, its cells' labels, drawn when its image
#: has a size. Empty axes have no such points.
DRAWN_JS = """cls => {
  const roots = [...document.querySelectorAll('.' + cls)].filter(
    el => cls === 'lakesdk-table-view' || !el.parentElement.closest('.lakesdk-table-view'));
  return roots.map(root => [...root.querySelectorAll('.js-plotly-plot')].map(plot => {
    const traces = {};
    for (const g of plot.querySelectorAll('g.hm')) {
      const tr = g.__data__ && g.__data__[0] && g.__data__[0].trace;
      if (!tr || tr.visible === false) continue;
      const img = g.querySelector('image'), labels = g.querySelectorAll('text').length;
      const r = img ? img.getBoundingClientRect() : {width: 0, height: 0};
      traces[tr.name] = {points: labels, drawn: r.width > 0 && r.height > 0 ? labels : 0};
    }
    for (const g of plot.querySelectorAll('g.trace.bars, g.trace.scatter')) {
      const tr = g.__data__ && g.__data__[0] && g.__data__[0].trace;
      if (!tr || tr.visible === false) continue;
      const pts = g.querySelectorAll('g.point path, path.point');
      let drawn = 0;
      pts.forEach(p => { const r = p.getBoundingClientRect(); if (r.width > 0 && r.height > 0) drawn++; });
      traces[tr.name] = {points: pts.length, drawn: drawn};
    }
    return traces;
  }));
}"""


def wait_drawn(lab: LabPage, cls: str, expected: list[dict[str, tuple[int, int]]] | None = None,
               timeout_s: float = 240) -> list[list[dict[str, dict[str, int]]]]:
    """Wait until each container of class ``cls`` holds figures that each have a drawn point,
    and with ``expected`` (per figure, trace name -> (points, points of a non-zero size)) until
    one container holds those figures with every trace drawn so (plotly draws a figure's traces
    one after another, and draws them again when the box changes size); returns
    :data:`DRAWN_JS`'s answer then.  The time limit only bounds a failing wait: on a loaded
    machine a first render has taken 80 s."""
    ready = f"""exp => {{
      const roots = ({DRAWN_JS})({json.dumps(cls)});
      if (!(roots.length > 0 && roots.every(figs => figs.length > 0 && figs.every(
          traces => Object.values(traces).some(t => t.drawn > 0))))) return false;
      if (exp === null) return true;
      return roots.length === 1 && roots[0].length === exp.length && exp.every((traces, k) =>
        Object.entries(traces).every(([name, [points, sized]]) => {{
          const got = roots[0][k][name] || {{points: 0, drawn: 0}};
          return got.points === points && (!sized || got.drawn > 0);
        }}));
    }}"""
    try:
        lab.page.wait_for_function(ready, arg=expected, timeout=timeout_s * 1000, polling=250)
    except lab.sync_api.TimeoutError:
        pass  # the caller's assertion shows what was drawn
    return lab.page.evaluate(DRAWN_JS, cls)


def open_table_view_tab(lab: LabPage, title: str = "Timeline", timeout_s: float = 60) -> None:
    """Click a tab of the ``display(t)`` view: the kernel builds the widget behind it."""
    root = lab.page.locator(".lakesdk-table-view")
    root.get_by_role("tab", name=title).wait_for(timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    while True:       # a click before the tab's model is wired up can be lost: click again
        root.get_by_role("tab", name=title).click()
        try:
            lab.page.wait_for_selector(".lakesdk-table-view .lakesdk-widget .js-plotly-plot", timeout=10_000)
            return
        except lab.sync_api.TimeoutError:
            if time.monotonic() > deadline:
                raise
            root.get_by_role("tab", name="Table").click()


#: the figures shown on the page (not those of a hidden tab), in the page's order
_SHOWN_JS = """() => [...document.querySelectorAll('.lakesdk-widget .js-plotly-plot')].filter(p => p.offsetParent !== null)"""
#: each shown figure's widget (its container's class, display(t)'s for its tabs), its drawing's
#: and its box's widths on screen
FIT_JS = f"""() => ({_SHOWN_JS})().map(p => {{
    const svg = p.querySelector('svg.main-svg');
    const widget = p.closest('.lakesdk-table-view') ? 'lakesdk-table-view'
      : [...p.closest('.lakesdk-widget').classList].find(c => c !== 'lakesdk-widget');
    return {{widget: widget, svg: svg ? svg.getBoundingClientRect().width : 0,
             box: p.parentElement.getBoundingClientRect().width}};
  }})"""


def figures_wider_than_their_box(lab: Any, timeout_s: float = 30) -> list[str]:
    """Scroll to each shown figure and wait until it is drawn no wider than its box (plotly
    sizes it to the box once the box is laid out); what is still wider when the time is up.

    JupyterLab and Notebook 7 lay out only the cells near the viewport (a cell far below has
    ``content-visibility: auto``): a figure there has no box width to follow, and is sized when
    it comes into view, as a reader scrolls to it, so each is measured on screen."""
    deadline = time.monotonic() + timeout_s
    for i in range(len(lab.page.evaluate(FIT_JS))):
        lab.page.evaluate(f"i => {{ const p = ({_SHOWN_JS})()[i]; if (p) p.scrollIntoView({{block: 'nearest'}}); }}", i)
        fits = f"i => {{ const f = ({FIT_JS})()[i]; return !f || (f.svg > 0 && f.svg <= f.box + 1); }}"
        try:
            lab.page.wait_for_function(fits, arg=i, timeout=max(deadline - time.monotonic(), 1) * 1000, polling=250)
        except lab.sync_api.TimeoutError:
            pass
    return [f"{f['widget']}: a figure {f['svg']:.0f} px wide in a box of {f['box']:.0f} px"
            for f in lab.page.evaluate(FIT_JS) if not f["svg"] <= f["box"] + 1]


# ------------------------------------------------------------------------- ten renders in a row
RENDERS = 10
#: console errors that are about the widgets (anything else is reported with them, not failed on)
WIDGET_ERRORS = ("anywidget", "widget", "plotly", "model")


def expected_traces(root: Path) -> dict[str, list[dict[str, tuple[int, int]]]]:
    """Per widget, per figure, per trace shown: (points, points of a non-zero size), from widgets
    built here on the tables the notebook wrote."""
    out = {}
    for name in WIDGETS:
        if name == "table_view":
            continue
        figures = []
        for fig in widget_figures(root, name):
            traces = {}
            for tr in fig.data:
                if tr.visible in (False, "legendonly"):      # plotly draws it once picked in the legend
                    continue
                if tr.type == "bar":
                    sizes = tr.x if tr.orientation == "h" else tr.y
                    traces[tr.name] = (len(sizes or ()), sum(1 for v in sizes or () if v))
                elif tr.type == "scatter" and "markers" in (tr.mode or ""):
                    traces[tr.name] = (len(tr.x or ()), len(tr.x or ()))
                elif tr.type == "heatmap":                   # a label per cell
                    cells = len(tr.x or ()) * len(tr.y or ())
                    traces[tr.name] = (cells, cells)
            figures.append(traces)
        out[name] = figures
    out["table_view"] = out["timeline"]          # its Timeline tab
    return out


def check_render(lab: LabPage, expected: dict[str, list[dict[str, tuple[int, int]]]]) -> list[str]:
    """What is wrong with the widgets on the page now (empty when each drew its data)."""
    problems = []
    for name, cls in WIDGETS.items():
        views = wait_drawn(lab, cls, expected[name])
        if len(views) != 1 or len(views[0]) != len(expected[name]):
            problems.append(f"{name}: {len(views)} views with {[len(v) for v in views]} figures, expected one "
                            f"with {len(expected[name])}")
            continue
        for k, (drawn, traces) in enumerate(zip(views[0], expected[name])):
            for trace, (points, sized) in traces.items():
                got = drawn.get(trace, {"points": 0, "drawn": 0})
                if got["points"] != points or (sized and not got["drawn"]):
                    problems.append(f"{name}: figure {k + 1}, trace {trace!r} drew {got['points']} points "
                                    f"({got['drawn']} of non-zero size), the figure holds {points} ({sized} of "
                                    "non-zero size)")
    return problems


def assert_widgets_render(tmp_path: Path, front_end: str = "lab", renders: int = RENDERS) -> None:
    """Serve the widget notebook with ``front_end`` and render it ``renders`` times in a row, each
    checked from the DOM: every widget drew each of its figures' data (:func:`check_render`, on
    the tables the last fresh run wrote: the raced writes' lock waits differ from run to run, 0 ms
    in one and a few in another) and every shown figure fits its box
    (:func:`figures_wider_than_their_box`). Renders alternate between a fresh run (kernel
    restarted, every cell run through the front end's command registry, the notebook saved with
    its widget state) and a fresh page load of the executed notebook (the widget manager restores
    every model from the kernel at once). A console error from the widgets or any page error but
    the front end's known ones fails; prints the render times."""
    timings: list[tuple[str, float]] = []
    failures: list[str] = []
    with lab_server(tmp_path, front_end=front_end) as server, lab_page(server) as lab:
        nb = write_widget_notebook(server)
        expected: dict[str, Any] = {}
        for k in range(renders):
            start, seen = time.monotonic(), len(lab.errors)
            if k % 2 == 0:
                kind = "fresh run"
                if k == 0:
                    lab.open(nb)
                else:
                    lab.restart_kernel()
                lab.run_all()
                open_table_view_tab(lab, "Timeline")
            else:
                kind = "page load"
                lab.open(nb)
            if kind == "fresh run":      # a run writes the tables again, a page load shows the last run's
                expected = expected_traces(server.root)
            problems = check_render(lab, expected) + figures_wider_than_their_box(lab)
            if kind == "fresh run":
                lab.save()
            errors = lab.errors[seen:]
            bad = [e for e in errors if e.startswith("pageerror") or any(w in e.lower() for w in WIDGET_ERRORS)]
            if problems or bad:
                failures.append(f"render {k + 1} ({kind}):\n  " + "\n  ".join(problems + errors))
            timings.append((kind, time.monotonic() - start))
        known = lab.known_errors
    summary = ", ".join(f"{kind} {s:.1f} s" for kind, s in timings)
    print(f"{FRONT_ENDS[front_end].name} renders: {summary}")
    if known:
        print(f"{len(known)} known page errors of {FRONT_ENDS[front_end].name} itself, not failed on: {sorted(set(known))}")
    assert not failures, (f"{len(failures)} of {renders} renders failed in {FRONT_ENDS[front_end].name}:\n"
                          + "\n".join(failures) + f"\n(render times: {summary})")
