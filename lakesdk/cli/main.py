"""The ``lakesdk`` command: ``demo``, ``show``, ``timeline``, ``history``, ``read``."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main"]


def _print_frame(title: str, frame: Any) -> None:
    """Print a pandas DataFrame or a pyarrow Table (whose integer columns with nulls print as
    integers and <NA>, not as floats)."""
    import pandas as pd
    import pyarrow as pa
    if isinstance(frame, pa.Table):
        frame = frame.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    print(f"\n== {title}")
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_rows", 40):
        print(frame.to_string(index=False) if len(frame) else "(no rows)")


DEMO_TABLE = "trips"
DEMO_MARKER = ".hoodie/lakesdk-demo"   # written by the demo into the table it creates
_DEMO_MARKER_TEXT = "created by `lakesdk demo`; `lakesdk demo` replaces this table when it runs again\n"


def _is_demo_table(folder: Path) -> bool:
    """True when ``folder`` is a table the demo created: a real folder (no symlink) holding a Hudi
    table named like the demo's and the demo's marker file."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    marker = folder / DEMO_MARKER
    if not marker.is_file() or marker.read_text(errors="replace") != _DEMO_MARKER_TEXT:
        return False
    try:
        from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig
        cfg = TableConfig.parse((folder / PROPERTIES_PATH).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable or no table config: not the demo's table
        return False
    return cfg.name == DEMO_TABLE


def demo(path: str, master: str | None) -> int:
    """Create a table on local Spark and local files, write, time-travel and read incrementally."""
    import pandas as pd

    import lakesdk as lk
    from lakesdk.engine.session import get_spark

    root = Path(path).resolve()
    target = root / DEMO_TABLE
    if target.exists() or target.is_symlink():
        if not _is_demo_table(target):
            print(f"error: {target} exists and is not a table created by `lakesdk demo` (no {DEMO_MARKER} marker "
                  f"in a Hudi table named {DEMO_TABLE!r}); the demo replaces only its own table. Move or remove "
                  "that folder yourself, or pass another --path", file=sys.stderr)
            return 2
        shutil.rmtree(target)
    t0 = time.perf_counter()
    print(f"Starting Spark ({master or 'local[*]'}) ...", flush=True)
    spark = get_spark(master=master)
    print(f"Spark {spark.version} ready in {time.perf_counter() - t0:.1f}s; lake at {root}")
    lake = lk.Lake(str(root), spark=spark)
    t = lake.create_table(DEMO_TABLE, key="uuid", partition_by="city", ordering="ts")
    (target / DEMO_MARKER).write_text(_DEMO_MARKER_TEXT)   # so a later run may replace this table
    print(t)

    rides = pd.DataFrame({
        "uuid": [f"ride-{i:03d}" for i in range(8)],
        "city": ["san_francisco", "sao_paulo", "chennai", "san_francisco", "sao_paulo", "chennai", "san_francisco", "chennai"],
        "rider": [f"rider-{c}" for c in "ABCDEFGH"],
        "ts": [1000 + i for i in range(8)],
        "fare": [19.10, 27.70, 33.90, 93.50, 34.15, 43.40, 64.27, 17.85],
    })
    r1 = t.upsert(rides)
    print("\n1. upsert 8 rides:", r1)
    changes = pd.DataFrame({"uuid": ["ride-003", "ride-001", "ride-008"], "city": ["san_francisco", "sao_paulo", "chennai"],
                            "rider": ["rider-D", "rider-B", "rider-I"], "ts": [2000, 500, 2000],
                            "fare": [25.00, 99.99, 41.06]})
    r2 = t.upsert(changes)
    print("2. upsert 3 (ride-001 carries an older ts, so the stored ride wins):", r2)
    r3 = t.delete(["ride-002", "ride-005"])
    print("3. delete 2 rides:", r3)

    _print_frame("table now", t.read().to_pandas().sort_values("uuid"))
    _print_frame(f"time travel: as of the first commit ({r1.instant})", t.as_of(r1.instant).to_pandas().sort_values("uuid"))
    _print_frame("fares above 40 in chennai (where=\"fare > 40 AND city = 'chennai'\")",
                 t.read(columns=["uuid", "rider", "fare"], where="fare > 40 AND city = 'chennai'").to_pandas())
    by_city = t.read().to_spark().groupBy("city").sum("fare").withColumnRenamed("sum(fare)", "fares")
    _print_frame("Spark over the table: t.read().to_spark().groupBy('city').sum('fare')",
                 by_city.orderBy("city").toArrow().to_pandas())   # through Arrow, as lakesdk's reads
    inc = t.incremental(start=r1.completed, meta_fields=True).to_pandas()
    _print_frame(f"incremental: records changed after the first commit (completed {r1.completed})",
                 inc[["_hoodie_commit_time", "uuid", "rider", "fare"]].sort_values("uuid"))
    print("\n== timeline")
    print(t.timeline)
    _print_frame("timeline instants", t.timeline.to_pandas())
    _print_frame("history", t.history())
    assert len(t.read().to_pandas()) == 7, "demo: expected 7 rides"
    version = t.refresh().config.version   # as hoodie.properties says it
    print(f"\nDemo finished in {time.perf_counter() - t0:.1f}s. The table is a Hudi table of version {version} "
          f"at {t.path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from lakesdk import __version__
    p = argparse.ArgumentParser(prog="lakesdk", description="Apache Hudi tables from Python, with Spark.")
    p.add_argument("--version", action="version", version=f"lakesdk {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="create a table, write, time-travel and read incrementally")
    d.add_argument("--path", default="demo-lake", help="lake folder (default: ./demo-lake)")
    d.add_argument("--master", default=None, help="Spark master or Spark Connect URL (default: local[*])")
    for name, hlp in (("show", "table summary"), ("timeline", "list the timeline"), ("history", "completed commits"),
                      ("read", "print rows"), ("changes", "print what each commit of a range changed")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("table", help="table path or URL")
        if name == "changes":
            s.add_argument("--start", default=None, help="after this commit (its completion time; default: the first)")
            s.add_argument("--end", default=None, help="up to this commit, included (default: the last)")
        if name in ("read", "changes"):
            s.add_argument("--limit", type=_limit, default=None,
                           help="at most N rows, reading stops there (default: 20 for the table output, "
                                "all rows for --output json)")
            s.add_argument("--output", choices=("table", "json"), default="table",
                           help="table (default), or json: one JSON object per line (NaN and "
                                "infinite floats as the strings \"NaN\", \"Infinity\", \"-Infinity\")")
        if name == "read":
            s.add_argument("--where", default=None, help="a filter: \"city = 'sf' AND fare > 40\"")
            s.add_argument("--as-of", default=None, help="time travel to this instant time or ISO moment")
            s.add_argument("--columns", default=None, help="comma-separated columns to print (default: all)")
    c = sub.add_parser("check", help="check a table's integrity (properties, timeline, data files, orphans); "
                                     "exit status 0 when clean, 1 when a problem is found")
    c.add_argument("table", help="table path or URL")
    from lakesdk.cli import kafka as kafka_cli
    kafka_cli.add_arguments(sub.add_parser("kafka-sink", help="exactly-once sink from a Kafka topic into a MOR table"))
    a = p.parse_args(argv)
    if a.cmd == "kafka-sink":
        raw = list(sys.argv[1:] if argv is None else argv)
        return kafka_cli.run(a, raw[raw.index("kafka-sink") + 1:])
    if a.cmd == "demo":
        return demo(a.path, a.master)
    import lakesdk as lk
    if a.cmd == "check":
        from lakesdk.read.check import check_table
        from lakesdk.storage import Storage
        try:
            report = check_table(Storage(str(a.table)))
        except lk.LakeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(repr(report))
        return 0 if report.ok else 1
    try:
        t = lk.open_table(a.table)
        if a.cmd == "show":
            print(t)
            print(t.timeline)
            _print_frame("file groups", t.inspect.file_groups())
        elif a.cmd == "timeline":
            _print_frame("timeline", t.timeline.to_pandas())
        elif a.cmd == "history":
            _print_frame("history", t.history())
        elif a.cmd == "read":
            return read(t, a)
        elif a.cmd == "changes":
            return read(t, a, changes=True)
    except lk.LakeError as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


def _limit(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, found {text!r}")
    return n


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _json_value(v: Any) -> Any:
    """A value JSON cannot hold as is: moments and days in ISO 8601, decimals as their exact
    text, bytes as hex, anything else as its text."""
    import datetime as dt
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def _json_floats(v: Any) -> Any:
    """``v`` with every NaN and infinite float (nested ones too) as the string ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"``: JSON has no such numbers (``json.dumps`` would print
    ``NaN``, which JSON parsers reject), and null would say the value is missing."""
    import math
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: _json_floats(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_floats(x) for x in v]
    return v


def read(t: Any, a: argparse.Namespace, *, changes: bool = False) -> int:
    """``lakesdk read`` (``changes``: ``lakesdk changes``): stream the rows (up to the limit,
    which stops the reading) as a table or as JSON lines.  A closed pipe (``| head -1``) ends
    the command quietly."""
    import json
    limit = a.limit if a.limit is not None else (20 if a.output == "table" else None)
    if changes:
        q = t.changes(a.start, a.end).limit(limit)
    else:
        columns = [c.strip() for c in a.columns.split(",") if c.strip()] if a.columns else None
        q = t.read(columns=columns, where=a.where, as_of=a.as_of, limit=limit)
    try:
        if a.output == "table":
            _print_frame("changes" if changes else "rows", q.to_arrow(**({"flatten": True} if changes else {}))
                         .to_pandas())
        else:
            reader = q.to_batches()
            out = sys.stdout
            for batch in reader:
                for row in batch.to_pylist():
                    out.write(json.dumps(_json_floats(row), default=_json_value, ensure_ascii=False,
                                         allow_nan=False) + "\n")
            out.flush()
    except BrokenPipeError:
        _quiet_stdout()
    return 0


def _quiet_stdout() -> None:
    """After the reader of stdout went away: point stdout at /dev/null so that the flush at exit
    does not raise again (Python's advice for SIGPIPE)."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
