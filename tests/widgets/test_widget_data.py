"""Notebook widgets: the figures' data is checked against the table (bars = instants,
markers = files under .hoodie/.temp, file groups = inspect.file_groups()), and clicks are
delivered the way the browser delivers them (the FigureWidget's points-callback message)."""

from __future__ import annotations

import posixpath
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

import lakesdk as lk  # noqa: E402
from lakesdk.format.commit_metadata import CommitMetadata  # noqa: E402
from lakesdk.format.instant import Instant  # noqa: E402
from lakesdk.format.timeline import InstantClock  # noqa: E402
from lakesdk.markers import TEMP_DIR, DirectWriteMarkers, parse_marker_name  # noqa: E402

from ..helpers import click, rides  # noqa: E402

pytestmark = pytest.mark.spark


def start_pending_write(t, action: str = "commit") -> Instant:
    store = t.context.store
    inst = Instant(action, "requested", InstantClock.next(after=t.timeline.max_time()))
    store.create(inst)
    # as a writer does: the inflight file names the operation
    return store.transition(inst, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())


@pytest.fixture
def trips(lake):
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    results = [t.upsert(rides(6)), t.upsert(rides(4, ts=2, start=3)), t.delete(["r1"])]
    return t, results


# --------------------------------------------------------------------------------- timeline
def test_timeline_bars_are_the_instants(trips):
    """One slot per instant in requested-time order, its bar on a lane, its three stages as
    dots filled up to its state, and the completed ones again in completion order."""
    t, results = trips
    pending = start_pending_write(t)
    w = t.widgets.timeline()
    timeline = t.timeline
    fig = w.figure

    assert [tr.name for tr in fig.data] == ["requested", "inflight", "completed", "stages", "completion order",
                                            "order links"]
    assert sum(len(tr.x) for tr in fig.data[:3]) == len(timeline) == 4
    shown = {(cd[0], cd[2], cd[3]) for tr in fig.data[:3] for cd in tr.customdata}
    assert shown == {(i.requested, i.action, i.state) for i in timeline}
    # the writes ran one after another: one lane, a slot each in requested order
    done = fig.data[2]
    assert [cd[0] for cd in done.customdata] == [r.instant for r in results]
    for k, r in enumerate(results):
        assert done.customdata[k][1] == r.completed and done.customdata[k][4:] == [k, 0]
        assert done.base[k] == pytest.approx(k - 0.4) and done.x[k] == pytest.approx(0.8) and done.y[k] == 0
        assert done.text[k] == "commit"
    # the pending write is an inflight bar in the last slot
    infl = fig.data[1]
    assert list(infl.customdata) == [[pending.requested, "", "commit", "inflight", 3, 0]]
    assert w.bars["inflight"] == [pending] and len(fig.data[0].x) == 0
    # stages: completed instants fill all three dots, the inflight one two
    stages = fig.data[3]
    white = ["#ffffff" == c for c in stages.marker.color]
    assert len(stages.x) == 12 and white == [False] * 9 + [False, False, True]
    # the completion order: the three completed writes, linked to their requested slots
    comp = fig.data[4]
    assert [cd[0] for cd in comp.customdata] == [r.instant for r in results]
    assert list(comp.y) == [comp.y[0]] * 3 and comp.y[0] > 0
    links = fig.data[5]
    assert [x for x in links.x if x is not None] == [0, 0, 1, 1, 2, 2]
    assert "4 instants (1 pending) on 1 lane" in w.status.value and "out of requested order" not in w.status.value
    # hover text carries the commit metadata
    md = t.inspect.commit_metadata(results[0].instant).totals()
    assert "operation UPSERT" in done.hovertext[0]
    assert f"inserted {md['inserted']} · updated {md['updated']} · deleted {md['deleted']}" in done.hovertext[0]
    assert f"files {md['files']}" in done.hovertext[0] and f"partitions {md['partitions']}" in done.hovertext[0]
    assert "operation DELETE" in done.hovertext[2] and "deleted 1" in done.hovertext[2]
    assert "operation UPSERT" in infl.hovertext[0]  # read from the inflight file
    bars = w.to_pandas()
    assert list(bars.requested) == sorted(i.requested for i in timeline) and list(bars.slot) == [0, 1, 2, 3]
    assert list(bars.completion_slot[:3]) == [0, 1, 2] and pd.isna(bars.completion_slot[3])


def test_racing_instants_get_their_own_lanes_and_the_completion_order_shows_it(lake):
    """A compaction scheduled, two writes while it is pending, then the compaction: the writes
    overlap it (a second lane), and it completes after them (its link crosses theirs)."""
    t = lake.create_table("mor", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t.upsert(rides(6))
    t.upsert(rides(3, ts=2))                          # a log file to compact
    plan = t.maintenance.schedule_compaction()
    during = [t.upsert(rides(2, ts=3)), t.upsert(rides(2, ts=4, start=10))]
    t.maintenance.compact(plan.instant)
    w = t.widgets.timeline()
    df = w.to_pandas()
    by = {r.requested: r for r in df.itertuples()}
    assert by[plan.instant].lane == 0 and [by[r.instant].lane for r in during] == [1, 1]
    assert by[plan.instant].slot == 2 and by[plan.instant].completion_slot == 4
    assert [by[r.instant].completion_slot for r in during] == [2, 3]
    assert "on 2 lanes, 1 completed out of requested order" in w.status.value
    assert list(w.figure.layout.yaxis.ticktext) == ["lane 1", "lane 2", "completion order"]
    # a click changes the outline only: no bar moves, the axes keep their ranges
    before = (w.figure.to_dict()["layout"]["yaxis"]["range"], [list(tr.base) for tr in w.figure.data[:3]],
              [list(tr.y) for tr in w.figure.data[:3]])
    click(w.figure, 2, [cd[0] for cd in w.figure.data[2].customdata].index(plan.instant))
    assert w.selected.requested == plan.instant
    after = (w.figure.to_dict()["layout"]["yaxis"]["range"], [list(tr.base) for tr in w.figure.data[:3]],
             [list(tr.y) for tr in w.figure.data[:3]])
    assert after == before


def test_the_as_of_slider_shows_rows_and_pins_linked_file_layouts(lake):
    t = lake.create_table("mor", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    results = [t.upsert(rides(6)), t.upsert(rides(4, ts=2, start=10)), t.delete(["r1"])]
    w = t.widgets.timeline()
    assert [v for _, v in w.slider.options] == [r.instant for r in results] and w.slider.value == results[-1].instant
    assert "Move the" in w.as_of_output.value          # nothing read until the slider moves
    fl = w.link(t.widgets.file_layout())
    w.slider.value = results[0].instant               # what a user's move does
    assert f"data-instant='{results[0].instant}'" in w.as_of_output.value and "6 rows" in w.as_of_output.value
    assert fl.as_of == results[0].instant and len(fl.groups) == len(t.as_of(results[0].instant).plan().slices)
    rows = w.show_as_of(results[1].instant)
    assert w.slider.value == results[1].instant and "10 rows" in w.as_of_output.value and rows.num_rows == 5
    assert fl.as_of == results[1].instant
    # a refresh keeps the slider where the user left it
    t.upsert(rides(1, ts=9, start=30))
    w.refresh()
    assert w.slider.value == results[1].instant and len(w.slider.options) == 4
    # a read that fails: the slider shows the typed error under the figure, show_as_of raises it
    first_base = next(p for p in results[0].file_paths if p.endswith(".parquet"))
    t.storage.delete(first_base)
    w.slider.value = results[0].instant
    assert "DataFileMissingError" in w.as_of_output.value
    with pytest.raises(lk.DataFileMissingError):
        w.show_as_of(results[0].instant)
    assert w.slider.value == results[0].instant


def test_click_selects_instant_files_and_time_travel(trips):
    t, results = trips
    w = t.widgets.timeline()
    assert w.selected is None and "Click a bar" in w.panel.value and w.travel_button.disabled
    second = results[1]
    k = [cd[0] for cd in w.figure.data[2].customdata].index(second.instant)
    click(w.figure, 2, k)
    assert w.selected == t.timeline.get(second.instant)
    stats = t.inspect.commit_metadata(second.instant).write_stats
    assert w.selected_files == sorted(s.path for s in stats) == sorted(second.file_paths)
    assert f"data-instant='{second.instant}'" in w.panel.value
    for path in w.selected_files:
        assert posixpath.basename(path) in w.panel.value
    assert list(w.figure.data[2].marker.line.width) == [3 if i == k else 1 for i in range(3)]
    # the time-travel button shows the table as of that instant
    assert not w.travel_button.disabled
    w.travel_button.click()
    expected = t.as_of(second.instant).to_pandas()
    assert f"{len(expected)} rows" in w.travel_output.value and len(expected) == 7
    got = w.time_travel()
    assert sorted(got.uuid) == sorted(expected.uuid) and "r1" in set(got.uuid)   # before the delete
    # a click on another trace's empty point list does not change the selection
    w._on_click(w.figure.data[0], type("P", (), {"point_inds": []})())
    assert w.selected.requested == second.instant


def test_live_mode_picks_up_new_writes(trips):
    t, _ = trips
    w = t.widgets.timeline(live=True, interval_s=0.1)
    try:
        assert w.live and w.live_toggle.value
        n = len(t.timeline)
        res = t.upsert(rides(2, ts=5, start=20))
        deadline = time.time() + 10

        def shown_done() -> bool:   # a refresh during the write may show it inflight first
            return res.instant in [cd[0] for cd in w.figure.data[2].customdata]
        while time.time() < deadline and not shown_done():
            time.sleep(0.05)
        assert sum(len(tr.x) for tr in w.figure.data[:3]) == n + 1
        assert res.instant in [cd[0] for cd in w.figure.data[2].customdata]
    finally:
        w.stop_live()
    assert not w.live and not w.live_toggle.value
    count = w.refreshes
    time.sleep(0.3)
    assert w.refreshes == count


def test_to_html_writes_a_static_figure(trips, tmp_path):
    t, results = trips
    out = t.widgets.timeline().to_html(str(tmp_path / "docs" / "timeline.html"), include_plotlyjs="cdn")
    text = open(out).read()
    assert "plotly" in text and results[0].instant in text


# --------------------------------------------------------------------------------- markers
def test_a_widget_displays_live_with_a_static_figure_beside(trips):
    """Jupyter shows the live widget; nbconvert and the documentation site, which run no
    widgets, show the static figure (the same bars)."""
    t, results = trips
    tl = t.widgets.timeline()
    bundle = tl._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == tl.model_id
    html = bundle["text/html"]
    assert "lakesdk-widget-static" in html and "cdn.plot.ly" in html and "Plotly.newPlot" in html
    for state in ("requested", "inflight", "completed"):
        assert f'"name":"{state}"' in html
    assert results[0].instant in html
    assert bundle["text/plain"] == repr(tl)


def test_markers_of_a_simulated_failed_write(trips):
    t, _ = trips
    pending = start_pending_write(t)
    m = DirectWriteMarkers(t.storage, pending.requested)
    made = [m.create("city=ams", f"f1-0_0-1-1_{pending.requested}.parquet", "CREATE"),
            m.create("city=ams", f"f2-0_0-1-2_{pending.requested}.parquet", "CREATE"),
            m.create("city=bcn", f"f3-0_1-1-3_{pending.requested}.parquet", "MERGE")]
    # the failed writer got as far as writing two of the three data files
    t.storage.write(f"city=ams/f1-0_0-1-1_{pending.requested}.parquet", b"x" * 10)
    t.storage.write(f"city=bcn/f3-0_1-1-3_{pending.requested}.parquet", b"y" * 20)

    w = t.widgets.markers()
    assert [c.requested for c in w.candidates] == [pending.requested]
    assert w.selected.requested == pending.requested and w.picker.value == pending.requested
    assert w.marker_type == "DIRECT"
    assert "no heartbeat: failed" in w.selected.status
    # the bars count the marker files under .hoodie/.temp/<instant>
    on_disk = [f.path for f in t.storage.find(f"{TEMP_DIR}/{pending.requested}")]
    assert len(on_disk) == 3 == sum(w.counts().values())
    assert w.counts() == {("city=ams", "CREATE"): 2, ("city=bcn", "MERGE"): 1}
    y = w.figure.layout.yaxis                  # whole numbers: no fractional ticks
    assert (y.tick0, y.dtick, y.tickformat) == (0, 1, "d")
    assert sorted(w.markers.marker) == sorted(made)
    exists = dict(zip(w.markers.data_path, w.markers.exists))
    assert exists == {parse_marker_name(n).data_path: n.startswith(("city=ams/f1", "city=bcn")) for n in made}
    # preview: exactly the marker's data files, and nothing is deleted
    preview = w.preview_rollback()
    assert preview == sorted(parse_marker_name(n).data_path for n in made)
    for p in preview:
        assert p in w.preview_output.value
    assert f"{t.context.store.dir}/{pending.file_name()}" in w.preview_output.value
    assert t.storage.exists(f"city=ams/f1-0_0-1-1_{pending.requested}.parquet")
    assert len(t.storage.find(f"{TEMP_DIR}/{pending.requested}")) == 3
    assert t.timeline.get(pending.requested).state == "inflight"


def test_markers_roll_back_a_failed_write_step_by_step(trips):
    """The widget rolls the failed write back and walks through the rollback's steps: each
    says what it did, the paths it deleted, and the two instants' timeline files after it."""
    t, _ = trips
    pending = start_pending_write(t)
    m = DirectWriteMarkers(t.storage, pending.requested)
    m.create("city=ams", f"f1-0_0-1-1_{pending.requested}.parquet", "CREATE")
    data = f"city=ams/f1-0_0-1-1_{pending.requested}.parquet"
    t.storage.write(data, b"x" * 10)
    before = sorted(t.read().to_pandas().uuid)
    w = t.widgets.markers()
    assert not w.rollback_button.disabled and all(b.layout.display == "none" for b in w.step_buttons)
    w.rollback_button.click()
    res = w.rollback_result
    assert res is not None and res.rolled_back.requested == pending.requested
    assert [s.name for s in res.steps] == ["planned", "started", "deleted data files", "completed",
                                           "removed the instant"]
    rb = res.rollback_instant
    tl = [s.timeline for s in res.steps]
    assert f"{rb}.rollback.requested" in tl[0] and f"{pending.requested}.inflight" in tl[0]   # Hudi names a commit inflight "<t>.inflight"
    assert f"{rb}.rollback.inflight" in tl[1]
    assert any(n.startswith(f"{rb}_") and n.endswith(".rollback") for n in tl[3])
    assert not any(n.startswith(pending.requested) for n in tl[4])          # the failed instant is gone
    assert res.steps[0].paths == res.steps[2].paths == (data,) and not t.storage.exists(data)
    assert f".hoodie/.temp/{pending.requested}/" in res.steps[4].paths
    assert "step 1 of 5: planned" in w.step_output.value and w.step_buttons[0].disabled
    w.step_buttons[1].click()
    assert w.step_index == 1 and "step 2 of 5: started" in w.step_output.value
    w.show_step(99)
    assert w.step_index == 4 and w.step_buttons[1].disabled and "removed the instant" in w.step_output.value
    assert w.candidates == [] and sorted(t.read().to_pandas().uuid) == before and not t.timeline.pending
    assert w.rollback_button.disabled               # nothing left to roll back
    with pytest.raises(ValueError):
        w.roll_back()


def test_markers_show_a_refused_rollback(trips):
    """A write whose writer is alive (fresh heartbeat) is not rolled back: the widget shows
    the typed error in place and deletes nothing."""
    from lakesdk.concurrency.heartbeat import Heartbeat
    t, _ = trips
    pending = start_pending_write(t)
    Heartbeat(t.storage, pending.requested).beat()
    w = t.widgets.markers()
    w.rollback_button.click()
    assert w.rollback_result is None and "RollbackNotAllowedError" in w.step_output.value
    assert t.timeline.get(pending.requested).state == "inflight"


def test_markers_of_a_real_write_stopped_mid_way(trips, monkeypatch):
    """A real upsert (timeline-server markers, the default) is held after its data files
    are written and before it commits: the widget shows its markers and data files."""
    from lakesdk import _faults
    t, _ = trips
    reached, release = threading.Event(), threading.Event()
    real = _faults.crash_point

    def hold(point: str) -> None:
        if point == "after_data" and threading.current_thread().name == "writer":
            reached.set()
            assert release.wait(30)
        real(point)

    monkeypatch.setattr(_faults, "crash_point", hold)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("res", t.upsert(rides(4, ts=9, start=2))), name="writer")
    th.start()
    try:
        assert reached.wait(60), "the write did not reach its data files"
        inflight = t.timeline.pending[0]
        w = t.widgets.markers()
        assert w.selected.requested == inflight.requested
        assert w.marker_type == "TIMELINE_SERVER_BASED"
        assert "fresh" in w.selected.status                 # its heartbeat is beating
        written = sorted(f.path for f in t.storage.find("") if not f.path.startswith(".hoodie")
                         and f"_{inflight.requested}." in posixpath.basename(f.path))
        assert written and sorted(w.markers.data_path) == written and w.markers.exists.all()
        # MARKERS<n> lines under .hoodie/.temp/<instant> are what the bars count
        lines = [ln for f in t.storage.find(f"{TEMP_DIR}/{inflight.requested}") if f.path.split("/")[-1] != "MARKERS.type"
                 for ln in t.storage.read(f.path).decode().splitlines() if ln.strip()]
        assert sum(w.counts().values()) == len(lines) == len(written)
        assert w.preview_rollback() == written
    finally:
        release.set()
        th.join(60)
    assert out["res"].instant == inflight.requested
    w.refresh()
    assert w.candidates == [] and w.selected is None and w.counts() == {}
    assert "No pending or failed writes" in w.info.value


# --------------------------------------------------------------------------------- file layout
def test_file_layout_matches_inspect(lake):
    t = lake.create_table("mor", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t.upsert(rides(9))
    t.upsert(rides(3, ts=2))
    t.upsert(rides(2, ts=3, start=9))
    w = t.widgets.file_layout(small_file_bytes=10**9)
    expect = t.inspect.file_groups().to_pandas()
    cols = list(expect.columns)
    pd.testing.assert_frame_equal(w.groups[cols].reset_index(drop=True), expect.reset_index(drop=True),
                                  check_dtype=False)
    # log bytes are the sizes of the latest slices' log files on storage
    from lakesdk.read.view import FileSystemView
    store = t.context.store
    view = FileSystemView(t.storage, t.config, store, store.load())
    sizes = {(g.partition, g.file_id): sum(t.storage.size(p) for p in g.latest.log_paths) for g in view.file_groups}
    assert {(r.partition, r.file_id): r.log_bytes for r in w.groups.itertuples()} == sizes
    assert w.groups.log_bytes.sum() > 0 and w.groups.small.all()
    big, small, logs = w.figure.data
    assert len(big.y) == 0 and len(small.y) == len(expect)
    assert sum(small.x) == expect.base_bytes.sum() and sum(logs.x) == w.groups.log_bytes.sum()
    assert len(w.slices) == expect.slices.sum()
    # no file is small under a 1-byte limit
    assert not t.widgets.file_layout(small_file_bytes=1).groups.small.any()
    # click a bar: its file group's slices
    gid = list(small.customdata[0])
    click(w.figure, 1, 0)
    assert w.selected == tuple(gid) and f"data-file-group='{gid[1]}'" in w.detail.value
    # records as written, beside the bytes: the base files hold the 11 inserted rows, the log files the 3 updates
    assert w.groups.base_records.sum() == 11 and w.groups.log_records.sum() == 3
    w.measure_toggle.value = "records"                # what a click on the toggle does
    assert w.measure == "records" and sorted(small.x) == sorted(w.groups.base_records) and sum(logs.x) == 3
    assert "records" in w.figure.layout.xaxis.title.text
    w.set_measure("bytes")
    assert w.measure_toggle.value == "bytes" and sum(logs.x) == w.groups.log_bytes.sum()
    with pytest.raises(ValueError, match="measure"):
        w.set_measure("rows")


def test_timeline_shows_a_scheduled_compaction(lake):
    t = lake.create_table("mor", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t.upsert(rides(6))
    t.upsert(rides(3, ts=2))
    plan = t.maintenance.schedule_compaction()
    w = t.widgets.timeline()
    assert [(i.action, i.requested) for i in w.bars["requested"]] == [("compaction", plan.instant)]
    assert [i.action for i in w.bars["completed"]] == ["deltacommit", "deltacommit"]
    assert [cd[2] for tr in w.figure.data[:3] for cd in tr.customdata if cd[3] == "requested"] == ["compaction"]
    w.select(plan.instant)
    assert w.selected_files == sorted(f"{o.partition}/{o.file_id}" for o in plan.operations)
    assert "file groups to compact" in w.panel.value
    # once executed, a refresh shows the same instant completed, still selected
    t.maintenance.compact(plan.instant)
    w.refresh()
    assert w.selected.requested == plan.instant and w.selected.state == "completed"
    assert [i.action for i in w.bars["completed"]][-1] == "compaction" and not w.bars["requested"]
    assert "operation COMPACT" in w.figure.data[2].hovertext[-1]


def test_widgets_are_a_lazy_leaf_layer():
    code = ("import sys, lakesdk, lakesdk.table.table, lakesdk.widgets\n"
            "t = lakesdk.widgets.TableWidgets\n"
            "bad = [m for m in ('plotly', 'ipywidgets', 'anywidget') if m in sys.modules]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    core = subprocess.run(["grep", "-rln", "lakesdk.widgets", "lakesdk", "--include=*.py"],
                          capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    users = sorted(p for p in core.stdout.split() if not p.startswith("lakesdk/widgets/"))
    # only the lazy `Table.widgets` property (and display(t)) and `KafkaSink.widget()`
    assert users == ["lakesdk/streaming/kafka/sink.py", "lakesdk/table/table.py"], users


def test_file_layout_shows_the_metadata_table(lake):
    t = lake.create_table("mdt", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t = t.with_options(metadata=False)
    t.upsert(rides(9))
    w = t.widgets.file_layout()
    assert w.metadata is None and "metadata table</b>: none" in w.summary.value
    t = t.with_options(metadata=True)       # the default: built from a listing by the next write
    t.upsert(rides(3, ts=2))
    w = t.widgets.file_layout()
    files = int(w.groups.log_files.sum()) + int(w.groups.base_file.notna().sum())
    assert w.metadata["partitions"] == ["column_stats", "files", "partition_stats"] and w.metadata["files_listed"] == files
    assert w.metadata["base_file"].endswith(".hfile") and w.metadata["log_files"] == 1
    assert f"lists {files} files" in w.summary.value
