"""Change data capture benchmark: what CDC logging costs a write, and a change query against a
snapshot read and deltalake's change data feed.

    python bench/cdc.py [--quick] [--rows N] [--repeat R] [--tmp DIR]

On the generated data of ``bench/write.py`` (N rows in 10 partitions; the update batch is
10% of the ids with a higher ``ts``), in one process:

1. lakesdk copy-on-write, for each CDC logging mode and without CDC: ``bulk_insert`` of the N
   rows into a new table (``create_table(..., cdc=mode)``), then ``upsert`` of the update
   batch, timed (best of ``--repeat`` rounds on fresh tables);
2. the change query of that upsert on the ``data_before_after`` table
   (``t.changes(bulk.completed).to_arrow()``: 10% of the rows changed) against a snapshot
   read of the table (``t.read().to_arrow()``), best of 3;
3. deltalake: ``write_deltalake`` and a ``merge`` (update matched / insert not matched) with
   ``delta.enableChangeDataFeed`` on and off, and ``load_cdf`` of the merge's version.

Checks: the change query returns one ``u`` per updated id with the old and new ``ts``; the
CDC logs hold as many records; deltalake's feed holds the same updates (as pre- and
post-images).  A failed check prints the errors and exits 1 without a summary line.

The last line printed is the summary::

    cdc: rows=N upsert_dba_vs_off=X upsert_before_vs_off=X upsert_keys_vs_off=X
         changes_vs_snapshot=X changes_vs_deltalake_cdf=X deltalake_cdf_vs_off=X
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import base_parser, best_of, make_data, ratio, row_count, step, timed  # noqa: E402

MODES = {"off": False, "dba": "data_before_after", "before": "data_before", "keys": "op_key_only"}


def lakesdk_round(root: str, base: pa.Table, upd: pa.Table, mode: object) -> tuple[float, object, object]:
    import lakesdk as lk
    lake = lk.Lake(root, options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="part", ordering="ts", cdc=mode)
    bulk = t.bulk_insert(base)
    secs, _ = timed(lambda: t.upsert(upd))
    return secs, t, bulk


def deltalake_round(root: str, base: pa.Table, upd: pa.Table, cdf: bool) -> float:
    from deltalake import DeltaTable, write_deltalake
    conf = {"delta.enableChangeDataFeed": "true"} if cdf else None
    write_deltalake(root, base, partition_by=["part"], configuration=conf)
    dt = DeltaTable(root)
    secs, _ = timed(lambda: dt.merge(upd, predicate="t.id = s.id", source_alias="s", target_alias="t")
                    .when_matched_update_all().when_not_matched_insert_all().execute())
    return secs


def main() -> int:
    ap = base_parser(__doc__ or "")
    args = ap.parse_args()
    n = row_count(ap, args)
    base, upd = make_data(n)
    m = upd.num_rows
    tmp = tempfile.mkdtemp(prefix="lakesdk-bench-cdc-", dir=args.tmp)
    errors: list[str] = []
    upserts: dict[str, float] = {}
    try:
        step("warm-up")
        lakesdk_round(os.path.join(tmp, "warm"), base.slice(0, 1000), upd.slice(0, 100), "data_before_after")
        kept = None
        for r in range(args.repeat):
            for name, mode in MODES.items():
                step(f"lakesdk upsert, CDC {name}, round {r + 1}")
                root = os.path.join(tmp, f"{name}-{r}")
                secs, t, bulk = lakesdk_round(root, base, upd, mode)
                upserts[name] = min(upserts.get(name, secs), secs)
                if name == "dba" and kept is None:
                    kept = (t, bulk)
                else:
                    t.close()
                    shutil.rmtree(root, ignore_errors=True)
        assert kept is not None
        t, bulk = kept
        step("change query and snapshot read")
        changes_s, ch = best_of(3, lambda: t.changes(bulk).to_arrow())
        snapshot_s, _ = best_of(3, lambda: t.read().to_arrow())
        ops = ch.column("op").to_pylist()
        if ops != ["u"] * m:
            errors.append(f"the change query returned {len(ops)} rows ({sorted(set(ops))}), expected {m} updates")
        else:
            old = pc.struct_field(ch.column("before"), "ts")
            new = pc.struct_field(ch.column("after"), "ts")
            if not pc.all(pc.greater(new, old)).as_py():
                errors.append("an update's ts did not grow from before to after")
        logged = 0
        from lakesdk.format.log_block import read_log_file
        for stat in t.inspect.commit_metadata(t.timeline.commits.instants[-1].requested).write_stats:
            for path in stat.cdcStats or {}:
                logged += sum(b.records(["op"]).num_rows for b in read_log_file(t.storage.read(path)))
        if logged != m:
            errors.append(f"the CDC logs hold {logged} records, expected {m}")
        delta: dict[str, float] = {}
        cdf_s = None
        try:
            import deltalake  # noqa: F401
        except ImportError:
            print("deltalake is not installed: no deltalake figures")
        else:
            for r in range(args.repeat):
                for cdf in (False, True):
                    step(f"deltalake merge, change data feed {'on' if cdf else 'off'}, round {r + 1}")
                    root = os.path.join(tmp, f"delta-{cdf}-{r}")
                    secs = deltalake_round(root, base, upd, cdf)
                    delta[str(cdf)] = min(delta.get(str(cdf), secs), secs)
                    if cdf and r == args.repeat - 1:
                        from deltalake import DeltaTable
                        table = DeltaTable(root)
                        cdf_s, feed = best_of(3, lambda dt=table: pa.table(dt.load_cdf(starting_version=1)))
                        kinds = pc.cast(feed.column("_change_type"), pa.string())
                        post = pc.sum(pc.cast(pc.equal(kinds, "update_postimage"), pa.int64())).as_py()
                        if post != m:
                            errors.append(f"deltalake's feed holds {post} post-images, expected {m}")
                    else:
                        shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"upsert of {m} rows into {n} (best of {args.repeat}, s): "
          + ", ".join(f"CDC {k} {v:.3f}" for k, v in upserts.items()))
    print(f"change query {changes_s:.3f} s, snapshot read {snapshot_s:.3f} s"
          + (f", deltalake load_cdf {cdf_s:.3f} s" if cdf_s is not None else ""))
    if delta:
        print(f"deltalake merge (s): feed off {delta['False']:.3f}, on {delta['True']:.3f}")
    if errors:
        for e in errors:
            print(f"ERROR: {e}", file=sys.stderr)
        print(f"ERROR: {len(errors)} correctness check(s) failed", flush=True)
        return 1
    print(f"cdc: rows={n} upsert_dba_vs_off={ratio(upserts['dba'], upserts['off'])} "
          f"upsert_before_vs_off={ratio(upserts['before'], upserts['off'])} "
          f"upsert_keys_vs_off={ratio(upserts['keys'], upserts['off'])} "
          f"changes_vs_snapshot={ratio(changes_s, snapshot_s)} "
          f"changes_vs_deltalake_cdf={ratio(changes_s, cdf_s)} "
          f"deltalake_cdf_vs_off={ratio(delta.get('True'), delta.get('False'))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
