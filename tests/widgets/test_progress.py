"""Progress bars: shown for long work when enabled, never in captured output by default,
and switched off by ``LAKESDK_PROGRESS=0`` or ``TableOptions(progress=False)``."""

from __future__ import annotations

import io

import pytest

import lakesdk as lk
from lakesdk import _progress
from lakesdk._progress import progress, progress_enabled

from ..helpers import rides


@pytest.fixture
def no_delay(monkeypatch):
    """Bars appear at once (the default waits a second, so short work shows none)."""
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    monkeypatch.delenv("LAKESDK_PROGRESS", raising=False)


def table(tmp_path, progress_setting, table_type="cow"):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", progress=progress_setting))
    return lake.create_table("trips", key="uuid", partition_by="city", ordering="ts", table_type=table_type)


def test_enabled_rules(monkeypatch):
    monkeypatch.delenv("LAKESDK_PROGRESS", raising=False)
    assert progress_enabled(True) and not progress_enabled(False)
    assert not progress_enabled("auto")          # pytest captures stderr: not a terminal, not a kernel
    monkeypatch.setenv("LAKESDK_PROGRESS", "1")
    assert progress_enabled("auto") and not progress_enabled(False)
    monkeypatch.setenv("LAKESDK_PROGRESS", "0")
    assert not progress_enabled(True) and not progress_enabled("auto")
    with pytest.raises(ValueError, match="progress must be"):
        monkeypatch.delenv("LAKESDK_PROGRESS")
        progress_enabled("sometimes")


def test_bar_counts_the_items(no_delay):
    out = io.StringIO()
    assert list(progress(range(5), desc="five", setting=True, file=out, leave=True)) == [0, 1, 2, 3, 4]
    text = out.getvalue()
    assert "five" in text and "5/5" in text
    quiet = io.StringIO()
    assert list(progress(range(5), desc="five", setting=False, file=quiet)) == [0, 1, 2, 3, 4]
    assert quiet.getvalue() == ""


def test_short_work_shows_no_bar(monkeypatch):
    monkeypatch.delenv("LAKESDK_PROGRESS", raising=False)
    out = io.StringIO()
    assert list(progress(range(3), desc="quick", setting=True, file=out)) == [0, 1, 2]
    assert out.getvalue() == ""                  # done within DELAY_S


def test_local_write_compaction_clean_and_read_bars(tmp_path, no_delay, capsys):
    """Each bar names the work and counts its tasks (``0/3``: it is cleared when done)."""
    t = table(tmp_path, True, table_type="mor")
    res = t.upsert(rides(9))                                     # three partitions: three write tasks
    err = capsys.readouterr().err
    assert f"writing {res.instant}" in err and "0/3" in err
    t.upsert(rides(6, ts=2))
    capsys.readouterr()
    assert len(t.read().to_pandas()) == 9                        # merge-on-read slices: one task each
    err = capsys.readouterr().err
    assert "reading file slices" in err and "0/3" in err
    plan = t.maintenance.schedule_compaction()
    t.maintenance.compact(plan.instant)
    err = capsys.readouterr().err
    assert f"compacting {plan.instant}" in err and "0/3" in err
    t.upsert(rides(9, ts=3))
    done = t.maintenance.clean(retain_commits=1)
    assert done is not None and done.deleted
    err = capsys.readouterr().err
    assert f"clean {done.instant}" in err and "0/3" in err      # one step per partition


def test_bars_off_by_option_or_environment(tmp_path, no_delay, capsys, monkeypatch):
    t = table(tmp_path, False)
    t.upsert(rides(9))
    assert "writing" not in capsys.readouterr().err
    t2 = table(tmp_path / "b", True)
    monkeypatch.setenv("LAKESDK_PROGRESS", "0")
    t2.upsert(rides(9))
    assert "writing" not in capsys.readouterr().err
    t3 = table(tmp_path / "c", "auto")                           # the default: captured output gets none
    monkeypatch.delenv("LAKESDK_PROGRESS")
    t3.upsert(rides(9))
    assert capsys.readouterr().err == ""
