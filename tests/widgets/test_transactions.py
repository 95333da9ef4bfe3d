"""The transactions widget: lanes = writers, bars = journaled writes plus the timeline's
writes the journal does not know, overlaps = shared file groups at overlapping times."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

import lakesdk as lk  # noqa: E402
from lakesdk.concurrency.heartbeat import Heartbeat  # noqa: E402
from lakesdk.concurrency.journal import TransactionRecord, read_transactions, record_transaction  # noqa: E402
from lakesdk.format.commit_metadata import CommitMetadata  # noqa: E402
from lakesdk.format.instant import Instant, parse_instant_time  # noqa: E402
from lakesdk.format.timeline import InstantClock  # noqa: E402
from lakesdk.widgets.transactions import LANE_WRITES, OUTCOMES  # noqa: E402

from ..helpers import click, rides  # noqa: E402


def ms(instant: str) -> int:
    return int(round((parse_instant_time(instant) - parse_instant_time("19700101000000000")).total_seconds() * 1000))


def plotly_date(ms_: int) -> str:
    from lakesdk.widgets._common import fmt_time, utc_from_ms
    return fmt_time(utc_from_ms(ms_))


def pending_write(t) -> Instant:
    store = t.context.store
    inst = Instant("commit", "requested", InstantClock.next(after=t.timeline.max_time()))
    store.create(inst)
    return store.transition(inst, "inflight", CommitMetadata(operation_type="UPSERT").to_avro())


@pytest.fixture
def table(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    return lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")


def groups_of(t, instant: str) -> list[tuple[str, str]]:
    return sorted({(s.partitionPath, s.fileId) for s in t.inspect.commit_metadata(instant).write_stats})


@pytest.fixture
def raced(table):
    """A single-writer commit, then two writers racing on one file group (A commits, B
    loses), a schema conflict, a failed write and two pending writes (one beating)."""
    t = table
    first = t.upsert(rides(6))                            # not journaled: a timeline lane
    won = t.upsert(rides(2, ts=2))                        # writer A's commit (r0: ams, r1: bcn)
    a_groups = groups_of(t, won.instant)
    ams = [g for g in a_groups if g[0] == "city=ams"]
    s0, s1 = ms(won.instant), ms(won.completed)
    cph = groups_of(t, first.instant)[-1]
    assert cph[0] == "city=cph"
    lost_at = InstantClock.next(after=won.instant)
    recs = [
        TransactionRecord(won.instant, "commit", "committed", operation="upsert", writer="hostA:11:main",
                          started_ms=s0, ended_ms=s1, file_groups=tuple(a_groups)),
        TransactionRecord(lost_at, "commit", "conflict", operation="upsert", writer="hostB:22:main",
                          started_ms=s0 + 1, ended_ms=s1 + 50, file_groups=(*ams, cph),
                          conflicts_with={"instant": won.instant, "action": "commit", "file_groups": [list(ams[0])]},
                          reason="a concurrent commit wrote the same file group"),
        TransactionRecord(InstantClock.next(after=lost_at), "commit", "schema_conflict", operation="insert",
                          writer="hostC:33:main", started_ms=s1 + 100, ended_ms=s1 + 300,
                          conflicts_with={"instant": won.instant, "action": "commit"},
                          schema=(("uuid", "string"), ("fare", "string")),
                          schema_at_start=(("uuid", "string"), ("fare", "double")),
                          schema_at_commit=(("uuid", "string"), ("fare", "double"), ("tip", "double")),
                          reason="fare: string is not double"),
        TransactionRecord("20200101000000000", "commit", "failed", writer="hostD:44:main",
                          started_ms=ms("20200101000000000"), ended_ms=ms("20200101000001000"),
                          reason="OSError: disk full"),
    ]
    for r in recs:
        assert record_transaction(t.storage, r)
    beating = pending_write(t)
    Heartbeat(t.storage, beating.requested).beat()        # one beat, no thread: fresh for two minutes
    silent = pending_write(t)
    return t, first, won, recs, beating, silent


def test_lanes_bars_and_outcomes(raced):
    t, first, won, recs, beating, silent = raced
    w = t.widgets.transactions()
    fig = w.figure
    assert [tr.name for tr in fig.data] == [*OUTCOMES, "overlap", "selected", "overlap links", "waiting for the lock",
                                            "holding the lock", "steps"]
    assert len(read_transactions(t.storage)) == 4
    # every journal record, the unjournaled commit and the two pending writes: one bar each
    assert sum(len(tr.x) for tr in fig.data[:len(OUTCOMES)]) == 4 + 1 + 2 == len(w.writes)
    by = {cd[0]: (tr.name, cd[2], k) for tr in fig.data[:len(OUTCOMES)] for k, cd in enumerate(tr.customdata)}
    assert by[won.instant][:2] == ("committed", "hostA:11:main")
    assert by[first.instant][:2] == ("committed", LANE_WRITES)
    assert by[recs[1].instant][:2] == ("conflict", "hostB:22:main")
    assert by[recs[2].instant][:2] == ("schema_conflict", "hostC:33:main")
    assert by[recs[3].instant][:2] == ("failed", "hostD:44:main")
    assert by[beating.requested][:2] == ("inflight", f"pending {beating.requested}")
    assert by[silent.requested][:2] == ("inflight", f"pending {silent.requested}")
    # one lane per writer, in order of first write
    assert set(w.lanes) == {"hostA:11:main", "hostB:22:main", "hostC:33:main", "hostD:44:main", LANE_WRITES,
                            f"pending {beating.requested}", f"pending {silent.requested}"}
    assert list(fig.layout.yaxis.categoryarray)[::-1] == w.lanes and w.lanes[0] == "hostD:44:main"
    # the writers the journal names are counted; lanes of unjournaled writes are no writers
    assert "7 writes by 4 writers, 3 not journaled (writer unknown)" in w.status.value
    # a journaled bar spans started_ms -> ended_ms; a timeline bar requested -> completed
    done = fig.data[0]
    k = by[won.instant][2]
    assert done.base[k] == plotly_date(recs[0].started_ms)
    assert done.x[k] == pytest.approx(recs[0].ended_ms - recs[0].started_ms)
    k = by[first.instant][2]
    assert done.x[k] == pytest.approx(ms(first.completed) - ms(first.instant))
    # the unjournaled commit's file groups come from its commit metadata
    span = next(s for s in w.writes if s.instant == first.instant)
    assert list(span.file_groups) == groups_of(t, first.instant) and span.operation == "upsert"
    assert "operation upsert" in done.hovertext[k]


def test_overlaps_and_verdicts(raced):
    t, first, won, recs, beating, silent = raced
    w = t.widgets.transactions()
    # A and B ran at the same time on the ams file group: the one overlap
    assert [(o.a.instant, o.b.instant) for o in w.overlaps] == [(won.instant, recs[1].instant)]
    ams = [g for g in groups_of(t, won.instant) if g[0] == "city=ams"]
    assert list(w.overlaps[0].file_groups) == ams
    outline, selected, links = w.figure.data[len(OUTCOMES):len(OUTCOMES) + 3]
    assert list(links.y) == ["hostA:11:main", "hostB:22:main"] and links.x[0] == links.x[1]
    assert all(v is not None for v in (*links.x, *links.y))   # a None blanks the axis in the browser
    assert ams[0][1] in links.hovertext[0]
    # both bars, and only they, are outlined in red: the same bars drawn again, unfilled
    bars = {cd[0]: (tr.base[k], tr.x[k], tr.y[k]) for tr in w.figure.data[:len(OUTCOMES)]
            for k, cd in enumerate(tr.customdata)}
    assert sorted(cd[0] for cd in outline.customdata) == sorted([won.instant, recs[1].instant])
    assert [(b, x, y) for b, x, y in zip(outline.base, outline.x, outline.y)] == [
        bars[cd[0]] for cd in outline.customdata]
    assert outline.marker.line.color == "#d50000" and outline.hoverinfo == "skip"
    assert len(selected.x) == 0
    v = w.verdicts().set_index("instant")
    assert v.loc[won.instant, "verdict"] == f"{won.instant} committed at {won.completed}; won against " \
                                            f"{recs[1].instant}, {recs[2].instant}"
    lost = v.loc[recs[1].instant, "verdict"]
    assert lost.startswith(f"{recs[1].instant} lost (conflict at commit) to commit {won.instant}, which committed")
    assert lost.endswith(f"on 1 file group in {ams[0][0]}") and "same file group" not in lost   # the reason: the panel
    assert "schema conflict" in v.loc[recs[2].instant, "verdict"]
    assert v.loc[recs[3].instant, "verdict"] == f"{recs[3].instant} failed: OSError: disk full"
    assert "fresh" in v.loc[beating.requested, "heartbeat"]
    assert v.loc[silent.requested, "heartbeat"] == "no heartbeat: its writer is gone"
    html = w.verdicts_html.value
    assert all(r.instant in html for r in recs) and "which committed first" in html
    # inflight bars: hatched when the writer is gone
    infl = w.figure.data[OUTCOMES.index("inflight")]
    shapes = dict(zip([cd[0] for cd in infl.customdata], infl.marker.pattern.shape))
    assert shapes == {beating.requested: "", silent.requested: "/"}
    # schema versions: the columns whose types differ
    sv = w.schema_versions()
    assert sv[["column", "writer_type", "type_at_start", "type_at_commit"]].values.tolist() == [
        ["fare", "string", "double", "double"], ["tip", None, None, "double"]]
    assert "tip" in w.schemas_html.value


def test_click_selects_a_write(raced):
    t, first, won, recs, beating, silent = raced
    w = t.widgets.transactions()
    assert w.selected is None and "Click a bar" in w.panel.value
    conflict = OUTCOMES.index("conflict")
    click(w.figure, conflict, 0)
    assert w.selected.instant == recs[1].instant
    assert f"data-instant='{recs[1].instant}'" in w.panel.value
    assert "overlaps</b> (1)" in w.panel.value and won.instant in w.panel.value
    selected = w.figure.data[len(OUTCOMES) + 1]
    assert [cd[0] for cd in selected.customdata] == [recs[1].instant]
    assert selected.base[0] == w.figure.data[conflict].base[0] and selected.x[0] == w.figure.data[conflict].x[0]
    with pytest.raises(KeyError, match="no write"):
        w.select("19990101000000000")


def test_single_writer_table_without_journal(table):
    t = table
    results = [t.upsert(rides(3)), t.upsert(rides(3, ts=2)), t.delete(["r1"])]
    w = t.widgets.transactions()
    assert w.lanes == [LANE_WRITES]
    assert [s.instant for s in w.bars["committed"]] == [r.instant for r in results]
    assert w.overlaps == [] and "No transaction journal" in w.verdicts_html.value
    assert "3 writes (not journaled: writers unknown)" in w.status.value
    assert sum(len(tr.x) for tr in w.figure.data[:len(OUTCOMES)]) == 3
    # a later write shows up on refresh; compaction-free tables have no service lane
    res = t.upsert(rides(2, ts=3, start=10))
    w.refresh()
    assert w.bars["committed"][-1].instant == res.instant and w.refreshes == 2
    assert w.to_pandas().outcome.tolist() == ["committed"] * 4
    # only the newest writes when asked: the oldest two are left out, and said so
    few = t.widgets.transactions(limit=2)
    assert [s.instant for s in few.writes] == [results[2].instant, res.instant] and few.hidden == 2
    assert "2 older not shown" in few.status.value


def test_a_compaction_is_no_second_writer(tmp_path):
    """One writer and a table service: one writer's writes and a service, not "2 writers"."""
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts", table_type="mor")
    t.upsert(rides(3))
    t.upsert(rides(3, ts=2))
    assert t.maintenance.compact() is not None
    status = t.widgets.transactions().status.value
    assert "3 writes (not journaled: writers unknown), 1 by table services" in status and "2 writers" not in status


def test_a_real_lost_race(tmp_path, monkeypatch):
    """Two optimistic writers race on one file group: the journal the writers keep is what
    the widget draws (a lane each, the overlap, the verdict)."""
    import threading

    from lakesdk.concurrency import journal
    from lakesdk.table.write import WriteOperation
    if not hasattr(journal, "outcome_of"):
        pytest.skip("the writers do not keep the transaction journal in this version")
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"), concurrency="optimistic")
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    base = t.upsert(rides(6))
    other = lk.open_table(t.path, options=t.options)
    original = WriteOperation._finalize
    won = []

    def racing(self, *args, **kwargs):   # just before t commits, another writer commits first
        if not won and self.table is t:
            th = threading.Thread(target=lambda: won.append(other.upsert(rides(1, ts=5))), name="writer-2")
            th.start()
            th.join()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WriteOperation, "_finalize", racing)
    with pytest.raises(lk.WriteConflictError):
        t.upsert(rides(1, ts=4))
    monkeypatch.setattr(WriteOperation, "_finalize", original)
    recs = read_transactions(t.storage)
    lost = next(r for r in recs if r.outcome == "conflict")
    winner = won[0]

    w = t.widgets.transactions()
    assert sorted((s.instant, s.outcome) for s in w.writes) == sorted((r.instant, r.outcome) for r in recs)
    assert {s.instant for s in w.bars["committed"]} == {base.instant, winner.instant}
    assert [s.instant for s in w.bars["conflict"]] == [lost.instant]
    lanes = {s.instant: s.lane for s in w.writes}
    assert lanes[winner.instant].endswith(":writer-2") and lanes[lost.instant] == lanes[base.instant] != \
        lanes[winner.instant]
    assert [{o.a.instant, o.b.instant} for o in w.overlaps] == [{lost.instant, winner.instant}]
    v = w.verdicts().set_index("instant").verdict
    assert v[lost.instant].startswith(f"{lost.instant} lost (conflict at commit) to commit {winner.instant}, "
                                      "which committed first")
    assert v[winner.instant].endswith(f"won against {lost.instant}")
    # the steps each writer reached through the commit protocol, in order: the winner all of
    # them, the loser up to the lock, then aborted by the conflict check
    from lakesdk.concurrency.journal import STEPS
    steps = {r.instant: [n for n, _ms in r.steps] for r in recs}
    assert steps[winner.instant] == ["requested", "files_written", "lock_requested", "lock_acquired", "checked",
                                     "metadata_table", "completed"]     # new tables keep Hudi's metadata table
    assert steps[lost.instant] == ["requested", "files_written", "lock_requested", "lock_acquired"]
    for r in recs:
        times = [ms_ for _n, ms_ in r.steps]
        assert times == sorted(times) and all(n in STEPS for n in steps[r.instant])
    # the loser wrote its files before the winner ran (the hook ran the winner inside its
    # _finalize), and acquired the lock after the winner completed
    at = {r.instant: dict(r.steps) for r in recs}
    assert at[lost.instant]["files_written"] >= at[winner.instant]["completed"]
    assert at[lost.instant]["requested"] <= at[winner.instant]["requested"]
    drawn = w.figure.data
    marks = next(tr for tr in drawn if tr.name == "steps")
    assert len(marks.x) == sum(len(v) for v in steps.values()) + 1     # + the loser's abort
    assert list(marks.marker.symbol).count("circle-x") == 1
    held = next(tr for tr in drawn if tr.name == "holding the lock")
    assert sorted(held.customdata[i][0] for i in range(len(held.y))) == sorted(steps)
    w.select(lost.instant)
    panel = w.panel.value
    assert "steps" in panel and "the conflict check under the lock failed" in panel and "+0 ms" in panel
