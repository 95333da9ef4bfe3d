"""Tables with a damaged file: reads and writes stop with a typed error that names the file,
says what was expected and how to recover, before anything is written."""

from __future__ import annotations

import glob
import os
import shutil

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.exceptions import CorruptFileError, CorruptTimelineError, TableConfigError

pytestmark = pytest.mark.spark

GARBAGE = bytes((i * 37 + 11) % 256 for i in range(300))


@pytest.fixture
def table(tmp_path, spark):
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    t.upsert(pd.DataFrame({"id": [3], "ts": [1], "v": ["c"]}))
    return t


def _open(t, spark):
    return lk.open_table(t.path, spark=spark, options=lk.TableOptions(engine="local"))


def _listing(path: str) -> list[str]:
    return sorted(os.path.relpath(p, path) for p in glob.glob(f"{path}/**", recursive=True))


def test_garbage_completed_commit_stops_reads_and_writes_with_a_recovery_hint(table, spark):
    last = sorted(glob.glob(f"{table.path}/.hoodie/timeline/*_*.commit"))[-1]
    with open(last, "wb") as f:
        f.write(GARBAGE)
    before = _listing(table.path)
    for attempt in (lambda: _open(table, spark).read().to_pandas(),
                    lambda: _open(table, spark).upsert(pd.DataFrame({"id": [4], "ts": [1], "v": ["d"]}))):
        with pytest.raises(CorruptTimelineError) as info:
            attempt()
        msg = str(info.value)
        assert os.path.basename(last) in msg and info.value.path.endswith(os.path.basename(last))
        assert "Expected an Avro file holding one HoodieCommitMetadata record" in msg
        assert "Restore the file from a backup" in msg and "move the file out of" in msg
    assert _listing(table.path) == before          # the failed write wrote nothing

    # the recovery the message names: without the file the instant is a failed write
    shutil.move(last, f"{table.path}/../{os.path.basename(last)}")
    t = _open(table, spark)
    assert sorted(t.read().to_pandas()["id"]) == [1, 2]
    t.upsert(pd.DataFrame({"id": [4], "ts": [1], "v": ["d"]}))
    assert sorted(_open(table, spark).read().to_pandas()["id"]) == [1, 2, 4]


def test_damaged_hoodie_properties_stops_open_with_a_table_config_error(table, spark):
    props = f"{table.path}/.hoodie/hoodie.properties"
    with open(props, "rb") as f:
        data = f.read()
    with open(props, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(TableConfigError, match="hoodie.properties"):
        _open(table, spark)


def test_damaged_base_file_is_a_corrupt_file_error_naming_it(table, spark):
    base = max(glob.glob(f"{table.path}/*.parquet"), key=lambda p: p.rsplit("_", 1)[-1])  # the latest slice
    with open(base, "rb") as f:
        data = f.read()
    with open(base, "wb") as f:
        f.write(data[:-40])
    with pytest.raises(CorruptFileError) as info:
        _open(table, spark).read().to_pandas()
    assert os.path.basename(base) in str(info.value) and "restore the file" in str(info.value)
