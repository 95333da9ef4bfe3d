"""Write counts describe what happened to the table: copy-on-write and merge-on-read, both
engines, checked against a model of event-time ordering."""

from __future__ import annotations

import random

import pandas as pd
import pytest

import lakesdk as lk


def _rows(ids, ts, v=0, part=None):
    ids = list(ids)
    ts = ts if isinstance(ts, list) else [ts] * len(ids)
    d = {"id": ids, "ts": ts, "v": [v] * len(ids)}
    d["p"] = part if isinstance(part, list) else [f"p{int(i[1:]) % 2}" for i in ids]
    return pd.DataFrame(d)


@pytest.fixture(params=["cow", "mor"])
def local_table(request, tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=request.param)
    t.upsert(_rows([f"k{i}" for i in range(100)], 10))
    yield t
    t.close()


def test_upsert_rows_that_lose_on_ordering_are_skipped_not_updated(local_table):
    t = local_table
    r = t.upsert(_rows([f"k{i}" for i in range(100)], [5] * 20 + [20] * 80, v=1))
    assert (r.inserted, r.updated, r.deleted, r.skipped) == (0, 80, 0, 20)
    got = t.read().to_pandas().set_index("id")
    assert (got.loc[[f"k{i}" for i in range(20)], "v"] == 0).all() and (got.v == 1).sum() == 80
    hist = t.history().to_pylist()[-1]
    assert (hist["inserted"], hist["updated"], hist["deleted"]) == (0, 80, 0)


def test_delete_counts_each_stored_row_once_and_not_stale_or_missing_keys(local_table):
    t = local_table
    r = t.delete(_rows(["k1", "k1", "k999"], 30))            # a key twice, and a key the table lacks
    assert (r.deleted, r.skipped) == (1, 0)
    r = t.delete(_rows(["k2", "k2"], 1))                        # older than the stored record: ignored
    assert (r.deleted, r.skipped) == (0, 1)
    r = t.delete(["k3", "k3", "k4"])                             # no ordering value: always applies
    assert (r.deleted, r.skipped) == (3 - 1, 0)
    assert t.history()["deleted"][-1].as_py() == 2
    assert sorted(set(f"k{i}" for i in range(100)) - set(t.read().to_pandas().id)) == ["k1", "k3", "k4"]


# -- the model ---------------------------------------------------------------------------------
class Model:
    """Event-time ordering, as a dict: key -> (ts, v)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, int]] = {}

    def upsert(self, batch: pd.DataFrame) -> tuple[int, int, int, int]:
        best: dict[str, tuple[int, int]] = {}
        for r in batch.itertuples():          # the batch is combined first: greatest ts, then the later row
            if r.id not in best or r.ts >= best[r.id][0]:
                best[r.id] = (r.ts, r.v)
        ins = upd = skip = 0
        for k, (ts, v) in best.items():
            if k not in self.rows:
                ins += 1
            elif ts >= self.rows[k][0]:
                upd += 1
            else:
                skip += 1
                continue
            self.rows[k] = (ts, v)
        return ins, upd, 0, skip

    def delete(self, batch: pd.DataFrame) -> tuple[int, int, int, int]:
        dele = skip = 0
        by_key: dict[str, list] = {}
        for r in batch.itertuples():
            by_key.setdefault(r.id, []).append(getattr(r, "ts", None))
        for k, tss in by_key.items():
            if k not in self.rows:
                continue
            if any(ts is None or pd.isna(ts) or ts >= self.rows[k][0] for ts in tss):
                del self.rows[k]
                dele += 1
            else:
                skip += 1
        return 0, 0, dele, skip

    def merge(self, src: pd.DataFrame) -> tuple[int, int, int, int]:
        """when_matched_delete(s.gone) / when_matched_update(v, ts) / when_not_matched_insert."""
        ins = upd = dele = skip = 0
        for r in src.itertuples():
            if r.id in self.rows:
                if r.ts < self.rows[r.id][0]:
                    skip += 1
                elif r.gone:
                    del self.rows[r.id]
                    dele += 1
                else:
                    self.rows[r.id] = (r.ts, r.v)
                    upd += 1
            elif not r.gone:
                self.rows[r.id] = (r.ts, r.v)
                ins += 1
        return ins, upd, dele, skip


def _counts(r) -> tuple[int, int, int, int]:
    return r.inserted, r.updated, r.deleted, r.skipped


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_write_counts_match_the_model(tmp_path, spark, engine, table_type):
    rng = random.Random(f"{engine}-{table_type}")
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine=engine))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    model = Model()
    pool = [f"k{i}" for i in range(40)]
    fresh = iter(f"k{i}" for i in range(1000, 2000))

    def batch(n: int) -> pd.DataFrame:
        ids = [rng.choice(pool) for _ in range(n)]
        return _rows(ids, [rng.randint(0, 6) for _ in ids], v=rng.randint(1, 10 ** 6))

    first = _rows(pool[:25], [rng.randint(0, 6) for _ in range(25)], v=1)
    assert _counts(t.upsert(first)) == model.upsert(first)
    steps = ["upsert", "delete", "upsert", "insert", "delete_keys", "merge", "upsert", "delete"]
    for step in steps:
        if step == "upsert":
            b = batch(20)
            got, want = t.upsert(b), model.upsert(b)
        elif step == "insert":
            ids = [next(fresh) for _ in range(5)]
            b = _rows(ids, 3, v=7)
            got, want = t.insert(b), model.upsert(b)
        elif step == "delete":
            b = batch(8)[["id", "ts", "p"]]
            b = pd.concat([b, b.head(2), _rows(["k999"], 0)[["id", "ts", "p"]]])   # repeated and unknown keys
            got, want = t.delete(b), model.delete(b)
        elif step == "delete_keys":
            ids = [rng.choice(pool) for _ in range(4)]
            b = pd.DataFrame({"id": ids + ids[:1], "p": [f"p{int(i[1:]) % 2}" for i in ids + ids[:1]]})
            got, want = t.delete(b), model.delete(b)
        else:
            src = batch(12).drop_duplicates("id")
            src["gone"] = [rng.random() < 0.3 for _ in range(len(src))]
            res = (t.merge(src, on="id")
                   .when_matched_delete(where="s.gone")
                   .when_matched_update(updates={"v": "s.v", "ts": "s.ts"})
                   .when_not_matched_insert(values={"id": "s.id", "ts": "s.ts", "v": "s.v", "p": "s.p"},
                                            where="NOT s.gone")
                   .execute())
            want = model.merge(src)
            assert (res.inserted, res.updated, res.deleted, res.skipped) == want, step
            got = res.write
        assert _counts(got) == want, (step, _counts(got), want)
        snap = {r.id: (r.ts, r.v) for r in t.read().to_pandas().itertuples()}
        assert snap == model.rows, step
    t.close()


@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_dataframe_delete_counts_each_key_once(tmp_path, spark, table_type):
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark)
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(_rows([f"k{i}" for i in range(10)], 10))
    # k1: one stale and one newer delete (the newer applies); k2: only stale ones; k999: not in the table
    dels = spark.createDataFrame(_rows(["k1", "k1", "k2", "k2", "k999"], [1, 30, 1, 2, 30]))
    r = t.delete(dels)
    assert (r.deleted, r.skipped) == (1, 1)
    assert sorted(t.read().to_pandas().id) == sorted(f"k{i}" for i in range(10) if i != 1)
    t.close()


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_delete_by_key_values_deletes_the_key_in_every_partition(tmp_path, spark, engine, table_type):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine=engine))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"id": ["0", "0", "1", "2"], "p": ["x", "y", "x", "y"], "ts": [1, 1, 1, 1], "v": [0] * 4}))
    r = t.delete(["0"])                                  # no partition values: every copy of the key
    assert (r.deleted, r.skipped) == (2, 0)
    assert t.history()["deleted"][-1].as_py() == 2
    assert sorted(zip(*t.read().to_pandas()[["id", "p"]].T.values)) == [("1", "x"), ("2", "y")]
    r = t.delete(pd.DataFrame({"id": ["1", "2"], "p": ["y", "y"]}))   # rows with the partition: there only
    assert r.deleted == 1
    assert sorted(zip(*t.read().to_pandas()[["id", "p"]].T.values)) == [("1", "x")]
    t.close()
