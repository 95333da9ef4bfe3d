"""Dictionary encoding of the Parquet files lakesdk writes (lakesdk.format.parquet_encoding):
columns whose values hardly repeat are written plain from the first page (no column chunk
mixes dictionary and plain pages), columns of few values keep their dictionaries, and
every value round-trips whatever is decided (generated columns)."""

from __future__ import annotations

import glob

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.parquet_encoding import dictionary_columns

from ..helpers import hudi_read

LIMIT = 64 * 1024


def _table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": np.arange(n), "ts": rng.integers(0, 10**12, n), "fare": rng.random(n),
        "name": pa.array([f"name_{i}" for i in range(n)]),
        "part": pa.array([f"p{i % 10}" for i in range(n)]), "cat": rng.integers(0, 3000, n),
        "day": np.sort(rng.integers(0, 30, n)), "flag": rng.integers(0, 2, n).astype(bool),
        "sparse": pa.array([None] * (n - 5) + [1.5] * 5, pa.float64()),
        "many_cats": rng.integers(0, 50_000, n),
        "nested": pa.array([{"a": int(i)} for i in range(n)]),
    })


def test_unique_columns_are_written_plain_and_repeating_ones_keep_their_dictionary():
    t = _table(100_000)
    keep = dictionary_columns(t, limit=LIMIT, never=("cat",))
    assert set(keep) == {"part", "day", "flag", "sparse", "nested"}
    # small column chunks are not sampled: they keep their dictionaries
    assert set(dictionary_columns(_table(1000), limit=LIMIT)) == set(_table(1000).column_names)


def _encodings(path: str) -> dict[str, set[str]]:
    md = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for rg in range(md.num_row_groups):
        for j in range(md.num_columns):
            c = md.row_group(rg).column(j)
            out.setdefault(c.path_in_schema, set()).update(c.encodings)
    return out


def test_base_files_of_a_table_have_no_column_chunk_that_mixes_dictionary_and_plain_pages(tmp_path):
    n = 150_000
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"id": np.arange(n), "ts": rng.integers(0, 10**12, n), "fare": rng.random(n),
                       "part": [f"p{i % 4}" for i in range(n)], "name": [f"n{i}" for i in range(n)]})
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="id", ordering="ts")
    t.bulk_insert(df)
    files = glob.glob(f"{t.path}/*.parquet")
    assert files
    for f in files:
        enc = _encodings(f)
        for col in ("id", "ts", "fare", "name", "_hoodie_record_key", "_hoodie_commit_seqno"):
            assert "RLE_DICTIONARY" not in enc[col] and "PLAIN_DICTIONARY" not in enc[col], (col, enc[col])
        for col in ("part", "_hoodie_commit_time", "_hoodie_file_name"):
            assert "RLE_DICTIONARY" in enc[col], (col, enc[col])
    got = t.read().to_pandas().sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got[df.columns], df, check_dtype=False)
    assert len(hudi_read(t.path)) == n


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 20_000), distinct=st.integers(1, 25_000), nulls=st.floats(0, 1),
       kind=st.sampled_from(["int", "float", "str", "ts"]), seed=st.integers(0, 2**32 - 1))
def test_any_decision_round_trips_every_value(tmp_path_factory, n, distinct, nulls, kind, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, distinct, n)
    mask = rng.random(n) < nulls
    if kind == "int":
        arr = pa.array(codes, mask=mask)
    elif kind == "float":
        arr = pa.array(codes / 7.0, mask=mask)
    elif kind == "str":
        arr = pa.array([f"v{c}" * (1 + c % 3) for c in codes], mask=mask)
    else:
        arr = pa.array(codes * 1_000_003, pa.timestamp("us", "UTC"), mask=mask)
    table = pa.table({"c": arr})
    path = str(tmp_path_factory.mktemp("enc") / "f.parquet")
    pq.write_table(table, path, use_dictionary=dictionary_columns(table, limit=LIMIT),
                   dictionary_pagesize_limit=LIMIT)
    assert pq.read_table(path).column("c").equals(table.column("c"))
