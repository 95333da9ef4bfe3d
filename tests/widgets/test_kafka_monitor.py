"""The Kafka sink monitor, fed with SinkStatus snapshots built here (no broker): bars =
the partitions' lags, rounds = the delta commits that carry the topic's offsets."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

import lakesdk as lk  # noqa: E402
from lakesdk.streaming.kafka.events import KAFKA_OFFSET_KEY, KAFKA_TOPIC_KEY, format_offsets  # noqa: E402
from lakesdk.streaming.kafka.sink import KafkaSink, PartitionStatus, SinkStatus  # noqa: E402
from lakesdk.table.transaction import begin, commit, write_batch  # noqa: E402
from lakesdk.widgets import KafkaMonitorWidget  # noqa: E402


def status(round_: int = 3, ends=(10, 5, None), committed=(3, 5, 0), **kw) -> SinkStatus:
    parts = tuple(PartitionStatus(p, f"orders-w{p % 2}", c, c + 1, e, 10 * (p + 1), p)
                  for p, (c, e) in enumerate(zip(committed, ends)))
    base = dict(topic="orders", running=True, workers=2, coordinator_state="WRITING", coordinator_worker="orders-w0",
                round=round_, instant="20261122000000000", last_committed_instant="20261121000000000",
                committed_rounds=round_ - 1, aborted_rounds=1, partitions=parts)
    base.update(kw)
    return SinkStatus(**base)


def sink_round(t, n: int, offsets: dict[int, int], topic: str = "orders"):
    """One round as the sink's coordinator commits it: files first, then the instant with
    the offsets in its extra metadata."""
    txn = begin(t)
    stats, schema = write_batch(t, txn, pd.DataFrame({"id": [f"k{i}" for i in range(n)], "ts": [1] * n}))
    return commit(t, txn, stats, schema=schema,
                  extra_metadata={KAFKA_OFFSET_KEY: format_offsets(offsets), KAFKA_TOPIC_KEY: topic})


@pytest.fixture
def table(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("orders", key="id", ordering="ts", table_type="mor")
    rounds = [sink_round(t, 3, {0: 3, 1: 5}), sink_round(t, 2, {0: 4, 1: 6}, topic="payments"),
              sink_round(t, 4, {0: 7, 1: 8})]
    t.upsert(pd.DataFrame({"id": ["x"], "ts": [2]}))          # a batch write: no offsets
    return t, [rounds[0], rounds[2]]


def test_lag_bars_are_the_partitions_lags(table):
    t, rounds = table
    st = status()
    w = KafkaMonitorWidget(st, table=t)
    lag, off = w.figure.data
    known = [p for p in st.partitions if p.lag is not None]
    assert list(lag.x) == ["p0", "p1"] and list(lag.y) == [p.lag for p in known] == [7, 0]
    assert list(off.x) == ["p0", "p1", "p2"] and list(off.y) == [3, 5, 0]
    assert "end 10" in lag.hovertext[0] and "orders-w0" in lag.hovertext[0]
    assert "total ?" in w.figure.layout.title.text         # p2's end is unknown: the total is too
    assert "WRITING on orders-w0" in w.info.value and "data-round='3'" in w.info.value
    assert "2 / 1" in w.info.value
    for p in st.partitions:
        assert f"<td style='white-space:nowrap;padding-right:8px'>{p.worker}</td>" in w.partitions_html.value
    # the rounds the table committed for this topic (not the other topic's, not the batch write)
    assert list(w.rounds.instant) == [r.instant for r in rounds]
    assert list(w.rounds.completed) == [r.completed for r in rounds]
    assert list(w.rounds.offsets) == [{0: 3, 1: 5}, {0: 7, 1: 8}] and list(w.rounds.records) == [3, 4]
    assert list(w.rounds_figure.data[0].y) == [8, 15]
    assert rounds[1].instant in w.rounds_html.value and repr(w) == "<KafkaMonitorWidget topic='orders'>"


def test_refresh_follows_the_source(table):
    t, rounds = table
    snaps = [status(3), status(4, ends=(12, 9, 4), committed=(12, 6, 1), coordinator_state="COMMITTING")]
    calls = []

    def source():
        calls.append(1)
        return snaps[min(len(calls), len(snaps)) - 1]

    w = KafkaMonitorWidget(source, table=t)
    assert list(w.figure.data[0].y) == [7, 0]
    w.refresh()
    assert list(w.figure.data[0].x) == ["p0", "p1", "p2"] and list(w.figure.data[0].y) == [0, 3, 3]
    assert [(o["round"], o["state"]) for o in w.observed] == [(3, "WRITING"), (4, "COMMITTING")]
    assert "COMMITTING" in w.rounds_html.value
    w.refresh()                                                  # same round: nothing new observed
    assert len(w.observed) == 2 and w.refreshes == 3
    # a sink that reports its round history (SinkStatus.history of committed rounds): shown as given
    Round = dataclasses.make_dataclass("CommittedRound", [("instant", str), ("offsets", dict), ("records", int)],
                                       frozen=True)
    history = (Round(rounds[0].instant, {0: 3, 1: 5}, 3), Round(rounds[1].instant, {0: 7, 1: 8}, 4))
    if "history" in {f.name for f in dataclasses.fields(SinkStatus)}:
        hs = dataclasses.replace(snaps[0], history=history)
    else:   # a SinkStatus without the attribute yet: the monitor reads it with getattr
        Hist = dataclasses.make_dataclass("HistStatus", [("history", tuple, dataclasses.field(default=()))],
                                          bases=(SinkStatus,), frozen=True)
        hs = Hist(**{f.name: getattr(snaps[0], f.name) for f in dataclasses.fields(SinkStatus)}, history=history)
    hw = KafkaMonitorWidget(hs)
    assert hw.status_rounds() == [{"instant": rounds[0].instant, "offsets": "p0=3, p1=5", "records": 3},
                                  {"instant": rounds[1].instant, "offsets": "p0=7, p1=8", "records": 4}]
    assert "rounds reported by the sink" in hw.rounds_html.value and "p0=7, p1=8" in hw.rounds_html.value
    assert len(hw.rounds) == 0                                   # no table given: nothing read


def test_live_mode_and_sink_widget(table):
    t, rounds = table
    n = []

    def source():
        n.append(1)
        return status(len(n))

    w = KafkaMonitorWidget(source, table=t, live=True, interval_s=0.05)
    try:
        assert w.live and w.live_toggle.value
        deadline = time.time() + 10
        while time.time() < deadline and w.refreshes < 3:
            time.sleep(0.02)
        assert w.refreshes >= 3 and w.sink_status.round >= 3
    finally:
        w.stop_live()
    assert not w.live and not w.live_toggle.value
    # a sink that is not started: its (empty) status, and the rounds of its table
    sink = KafkaSink(t.path, "orders", "127.0.0.1:9")
    sw = sink.widget()
    assert not sw.sink_status.running and len(sw.figure.data[0].x) == 0
    assert list(sw.rounds.instant) == [r.instant for r in rounds]
    assert "No partitions assigned" in sw.partitions_html.value
    with pytest.raises(TypeError, match="KafkaSink, a SinkStatus"):
        KafkaMonitorWidget(42)


def test_the_static_picture_draws_the_lag_and_the_rounds(table):
    """Where widgets do not run (the documentation site, nbconvert) the monitor is its static
    picture: the lag bars, empty once the sink has caught up, and the committed rounds below them."""
    t, rounds = table
    w = KafkaMonitorWidget(status(ends=(3, 5, 0)), table=t)             # every partition caught up
    html = w.static_html()
    assert html.count("Plotly.newPlot") == 2 and html.count('src="https://cdn.plot.ly/') == 1
    _, lag_bars, rounds_chart = html.split("Plotly.newPlot")
    assert "lag per partition (total 0)" in lag_bars and "committed offsets (sum)" in rounds_chart
    assert all(r.instant in rounds_chart for r in rounds)


#: a thread imports pandas, halted in the middle (as a sink's worker in its first round) until the
#: main thread waits for that import to finish, or for 20 s; the main thread then builds a monitor
HALF_IMPORTED_PANDAS = textwrap.dedent("""\
    import importlib.abc, importlib.util, sys, threading, time

    main, started, release = threading.main_thread().ident, threading.Event(), threading.Event()

    class HaltedPandas(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "pandas":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module
            def exec_module(module):       # pandas is in sys.modules, empty, until release
                started.set()
                release.wait(20)
                run(module)
            spec.loader.exec_module = exec_module
            return spec

    def watch():                           # release once the main thread waits for the import
        while not release.is_set():
            f = sys._current_frames().get(main)
            while f is not None and f.f_code.co_name != "_lock_unlock_module":
                f = f.f_back
            if f is not None:
                release.set()
            time.sleep(0.01)

    assert "pandas" not in sys.modules
    sys.meta_path.insert(0, HaltedPandas())
    threading.Thread(target=__import__, args=("pandas",)).start()
    assert started.wait(60)
    threading.Thread(target=watch, daemon=True).start()
    try:
        from lakesdk.streaming.kafka.status import SinkStatus
        from lakesdk.widgets.kafka_monitor import KafkaMonitorWidget
        w = KafkaMonitorWidget(SinkStatus(topic="orders", running=True, workers=1))
    finally:
        release.set()
    print("built", len(w.figure.data))
""")


def test_a_monitor_built_while_a_worker_imports_pandas():
    """``sink.start(); sink.widget()``: the sink's worker thread imports pandas in its first
    round while the kernel builds the monitor. plotly uses pandas when it is in sys.modules,
    without waiting for the import: the figure failed with "partially initialized module
    'pandas' has no attribute 'Series'". Building a widget now waits for the import."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-c", HALF_IMPORTED_PANDAS], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0 and "built 2" in r.stdout, r.stderr[-3000:]


def test_axes_from_zero_and_one_round_in_a_minute(tmp_path):
    """The lag and the offsets are drawn from zero; a single round gets a minute of time axis
    around it (plotly's autorange gives one date a few milliseconds), more rounds the autorange."""
    from datetime import datetime, timedelta
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("orders", key="id", ordering="ts", table_type="mor")
    first = sink_round(t, 3, {0: 3, 1: 5})
    w = KafkaMonitorWidget(status(ends=(3, 5, 0)), table=t)
    assert w.figure.layout.yaxis.rangemode == w.rounds_figure.layout.yaxis.rangemode == "tozero"
    ax = w.rounds_figure.layout.xaxis
    lo, hi = (datetime.fromisoformat(x) for x in ax.range)
    assert ax.autorange is False and hi - lo == timedelta(seconds=60)
    assert lo < datetime.fromisoformat(w.rounds_figure.data[0].x[0]) < hi
    assert first.instant in w.rounds.instant.tolist()
    sink_round(t, 1, {0: 4, 1: 5})
    w.refresh()
    assert ax.autorange is True and ax.range is None and len(w.rounds_figure.data[0].x) == 2
