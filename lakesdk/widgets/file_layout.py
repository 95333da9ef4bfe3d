"""FileLayoutWidget: file groups and file slices per partition, base vs log bytes.

``widget.groups`` has one row per file group with the columns of
``table.inspect.file_groups()`` (``partition, file_id, slices, base_instant, base_file,
base_bytes, log_files``: the latest slice) plus ``log_bytes``, ``total_bytes`` and
``small``, and ``base_records`` / ``log_records``: the records the writes put in the latest
slice's files (write stats; a log file's deletes included; None where unknown);
``widget.slices`` one row per file slice.  The figure (``widget.figure``) draws one
horizontal bar per file group, its latest slice's base and log files stacked, in bytes or in
records (``measure``, the toggle above it: a base file of few rows is mostly its bloom-filter
footer, which hides the log files in bytes): traces ``base file``, ``base file (small)`` and
``log files``.  A base file is *small*
below ``small_file_bytes`` (default: the handle's ``TableOptions.small_file_limit``, Hudi's
``hoodie.parquet.small.file.limit``): inserts are routed to small files to grow them.
Click a bar to list the group's slices.  ``widget.metadata`` describes Hudi's metadata table
when the table keeps one (None otherwise): the partitions built, the files its ``files``
partition lists, and its file slice (a base HFile and the log files of the delta commits since
its last compaction), shown beside the per-partition summary.
"""

from __future__ import annotations

import posixpath
import time
from typing import TYPE_CHECKING, Any

from lakesdk.format.instant import WRITE_ACTIONS
from lakesdk.widgets._common import TableWidgetBase, esc, go, html_table, human_bytes, ipywidgets, sync_figure
from lakesdk.widgets._figure import FigureWidget

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FileLayoutWidget"]

GROUP_COLUMNS = ["partition", "file_id", "slices", "base_instant", "base_file", "base_bytes", "log_files",
                 "log_bytes", "total_bytes", "small", "base_records", "log_records"]
#: what the bars measure: x-axis title and the columns of the base and log bars
MEASURES = {"bytes": ("bytes (latest file slice)", "base_bytes", "log_bytes"),
            "records": ("records written (latest file slice)", "base_records", "log_records")}
SLICE_COLUMNS = ["partition", "file_id", "base_instant", "base_file", "base_bytes", "log_files", "log_bytes",
                 "latest"]


class FileLayoutWidget(TableWidgetBase):
    """File groups and slices of a table (``as_of``: a moment to pin, None = latest)."""

    title = "File layout"

    def __init__(self, table: Any, *, as_of: Any = None, small_file_bytes: int | None = None,
                 measure: str = "bytes") -> None:
        super().__init__(table)
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, found {measure!r}")
        self.as_of = as_of
        self.measure = measure
        self.small_file_bytes = int(small_file_bytes if small_file_bytes is not None
                                    else table.options.small_file_limit)
        self.groups: Any = None
        self.slices: Any = None
        self.metadata: dict[str, Any] | None = None
        self.selected: tuple[str, str] | None = None
        self._labels: dict[str, tuple[str, str]] = {}
        self.figure = FigureWidget(layout=go.Layout(
            barmode="stack", height=320, margin=dict(l=10, r=20, t=70, b=40),
            xaxis=dict(title="bytes (latest file slice)"), yaxis=dict(type="category", automargin=True),
            title=dict(x=0, xanchor="left", y=0.97, font=dict(size=14)), showlegend=True,
            legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"), hovermode="closest"))
        self.figure.add_bar(name="base file", orientation="h", x=[], y=[], customdata=[], marker=dict(color="#1565c0"))
        self.figure.add_bar(name="base file (small)", orientation="h", x=[], y=[], customdata=[],
                            marker=dict(color="#ffb300", line=dict(color="#e65100", width=1)))
        self.figure.add_bar(name="log files", orientation="h", x=[], y=[], customdata=[], marker=dict(color="#8e24aa"))
        for trace in self.figure.data:
            trace.on_click(self._on_click)
        self.summary = ipywidgets.HTML("")
        self.detail = ipywidgets.HTML("")
        self.measure_toggle = ipywidgets.ToggleButtons(
            options=list(MEASURES), value=measure, tooltips=[
                "bytes on storage (a base file carries its bloom-filter footer)",
                "records the writes put in each file (a log file holds only the records its delta commit wrote)"],
            style={"button_width": "80px"})
        self.measure_toggle.observe(lambda ch: self.set_measure(ch["new"]), names="value")
        side = ipywidgets.VBox([self.summary, self.detail], layout=ipywidgets.Layout(width="42%", min_width="0"))
        left = ipywidgets.VBox([self.measure_toggle, self.figure], layout=ipywidgets.Layout(width="58%", min_width="0"))
        self._set_body(ipywidgets.HBox([left, side], layout=ipywidgets.Layout(width="100%")))
        self.add_class("lakesdk-file-layout")
        self.refresh()

    def refresh(self) -> "FileLayoutWidget":
        """Re-list the table's files and redraw."""
        import pandas as pd

        from lakesdk.commit.results import moment_time
        from lakesdk.read.view import FileSystemView
        t = self.table
        store = t.context.store
        view = FileSystemView(t.storage, t.config, store, store.load(), as_of=moment_time(self.as_of), fresh=True)
        groups, slices = [], []
        counts = _record_counts(t, store, view)
        for g in view.file_groups:
            s = g.latest
            base_bytes = s.base_size if s else 0
            log_bytes = sum(s.log_sizes) if s else 0
            groups.append({"partition": g.partition, "file_id": g.file_id, "slices": len(g.slices),
                           "base_instant": s.base_instant if s else None, "base_file": s.base_path if s else None,
                           "base_bytes": base_bytes, "log_files": len(s.log_files) if s else 0,
                           "log_bytes": log_bytes, "total_bytes": base_bytes + log_bytes,
                           "small": bool(s is not None and s.base_file is not None
                                         and base_bytes < self.small_file_bytes),
                           "base_records": counts.get(s.base_path) if s and s.base_path else 0,
                           "log_records": _sum_known([counts.get(p) for p in s.log_paths]) if s else 0})
            for k, sl in enumerate(g.slices):
                slices.append({"partition": g.partition, "file_id": g.file_id, "base_instant": sl.base_instant,
                               "base_file": sl.base_path, "base_bytes": sl.base_size,
                               "log_files": len(sl.log_files), "log_bytes": sum(sl.log_sizes),
                               "latest": k == len(g.slices) - 1})
        self.groups = pd.DataFrame(groups, columns=GROUP_COLUMNS)
        self.slices = pd.DataFrame(slices, columns=SLICE_COLUMNS)
        self.metadata = _metadata_table(t)
        self._draw()
        self.summary.value = self._summary_html() + _metadata_html(self.metadata)
        if self.selected is not None:
            self.select(*self.selected)
        self.status.value = (f"<span style='color:#555'>{len(self.groups)} file groups, {len(self.slices)} slices"
                             f" · read {time.strftime('%H:%M:%S')}</span>")
        return self

    @staticmethod
    def label(partition: str, file_id: str) -> str:
        return f"{partition or '(root)'} · {file_id[:8]}"

    def _draw(self) -> None:
        df = self.groups
        self._labels = {self.label(r.partition, r.file_id): (r.partition, r.file_id) for r in df.itertuples()}
        order = [self.label(r.partition, r.file_id) for r in df.sort_values(["partition", "file_id"],
                                                                             ascending=False).itertuples()]
        big, small, logs = df[~df.small & df.base_file.notna()], df[df.small], df[df.log_files > 0]
        title, base_col, log_col = MEASURES[self.measure]
        unit = "bytes" if self.measure == "bytes" else "records"
        with self.figure.batch_update():
            for trace, part, col, what in ((self.figure.data[0], big, base_col, "base file"),
                                           (self.figure.data[1], small, base_col, "small base file"),
                                           (self.figure.data[2], logs, log_col, "log files")):
                trace.y = [self.label(r.partition, r.file_id) for r in part.itertuples()]
                trace.x = [0 if v is None or v != v else int(v) for v in part[col]]
                trace.customdata = [[r.partition, r.file_id] for r in part.itertuples()]
                trace.hovertemplate = f"%{{y}}<br>{what} %{{x}} {unit}<extra></extra>"
            self.figure.layout.xaxis.title = title
            self.figure.layout.yaxis.categoryorder = "array"
            self.figure.layout.yaxis.categoryarray = order
            self.figure.layout.height = max(280, 120 + 26 * len(df))
            self.figure.layout.title = (f"{len(df)} file groups · small files (base < "
                                        f"{human_bytes(self.small_file_bytes)}): {int(df.small.sum())}")
        sync_figure(self.figure)

    def set_measure(self, measure: str) -> "FileLayoutWidget":
        """Draw the bars in ``"bytes"`` or ``"records"`` (the records the writes put in each
        file: a base file's bytes are mostly its bloom-filter footer when it holds few rows, so
        bytes hide what log files hold)."""
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, found {measure!r}")
        self.measure = measure
        if self.measure_toggle.value != measure:
            self.measure_toggle.value = measure          # calls back here
            return self
        self._draw()
        return self

    def _summary_html(self) -> str:
        df = self.groups
        if not len(df):
            return "<div class='lakesdk-panel'><b>No file groups</b> (nothing committed yet).</div>"
        per = df.groupby("partition", dropna=False).agg(groups=("file_id", "size"), slices=("slices", "sum"),
                                                        base=("base_bytes", "sum"), logs=("log_files", "sum"),
                                                        log_bytes=("log_bytes", "sum"), small=("small", "sum"),
                                                        base_records=("base_records", "sum"),
                                                        log_records=("log_records", "sum"))
        rows = [(p or "(root)", r.groups, r.slices, f"{human_bytes(r.base)} · {int(r.base_records)} rec",
                 r.logs, f"{human_bytes(r.log_bytes)} · {int(r.log_records)} rec", r.small) for p, r in per.iterrows()]
        return ("<div class='lakesdk-panel'><b>per partition</b> (latest slices; records as written)" +
                html_table(["partition", "file groups", "slices", "base files", "log files", "log files",
                            "small files"], rows) + "</div>")

    def _on_click(self, trace: Any, points: Any, _state: Any = None) -> None:
        if not points.point_inds:
            return
        i = points.point_inds[0]
        cd = list(trace.customdata or [])
        if 0 <= i < len(cd):
            self.select(cd[i][0], cd[i][1])

    def select(self, partition: str, file_id: str) -> pd.DataFrame:
        """Show the slices of one file group; returns them as a DataFrame."""
        self.selected = (partition, file_id)
        s = self.slices
        rows = s[(s.partition == partition) & (s.file_id == file_id)]
        self.detail.value = (
            f"<div class='lakesdk-panel' data-file-group='{esc(file_id)}'><b>file group</b> "
            f"<code>{esc(partition or '(root)')}/{esc(file_id)}</code>: {len(rows)} slices" +
            html_table(["base instant", "base file", "base bytes", "log files", "log bytes", "latest"],
                       [(r.base_instant, (r.base_file or "-").rsplit("/", 1)[-1], human_bytes(r.base_bytes),
                         r.log_files, human_bytes(r.log_bytes), "yes" if r.latest else "")
                        for r in rows.itertuples()], clip=(1,)) + "</div>")
        return rows


def _sum_known(values: list[int | None]) -> int | None:
    """The sum, or None when a value is unknown."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _record_counts(t: Any, store: Any, view: Any) -> dict[str, int | None]:
    """Records each file of the latest slices holds as written: a write stat's ``numWrites``
    (a log file's deletes added: its delete block holds them) of the active timeline's commits,
    else a base file's Parquet footer; a log file of an archived commit is unknown (None)."""
    want = {p for g in view.file_groups if g.latest is not None
            for p in ([g.latest.base_path] if g.latest.base_path else []) + g.latest.log_paths}
    from lakesdk.format.file_naming import BaseFile, LogFile
    written = {(LogFile.parse(n).instant if n.startswith(".") else BaseFile.parse(n).instant)
               for n in map(posixpath.basename, want)}
    out: dict[str, int | None] = {}
    for inst in store.load().completed:
        if inst.requested not in written or inst.completed_action not in WRITE_ACTIONS:
            continue
        try:
            for st in store.commit_metadata(inst).write_stats:
                if st.path in want:        # a log file's delete block holds its deletes as records
                    log = posixpath.basename(st.path).startswith(".")
                    out[st.path] = int(st.numWrites or 0) + (int(st.numDeletes or 0) if log else 0)
        except Exception:  # noqa: BLE001 - counts are a teaching aid; the bytes stay right
            continue
    for p in want - set(out):
        out[p] = _footer_rows(t, p) if not posixpath.basename(p).startswith(".") else None
    return out


def _footer_rows(t: Any, path: str) -> int | None:
    try:
        import pyarrow.parquet as pq
        with t.storage.open(path) as f:
            return int(pq.ParquetFile(f).metadata.num_rows)
    except Exception:  # noqa: BLE001 - not Parquet (Lance, HFile) or unreadable: unknown
        return None


def _metadata_table(t: Any) -> dict[str, Any] | None:
    """What ``widget.metadata`` holds (see the module doc)."""
    from lakesdk.commit.table_properties import read_properties
    from lakesdk.format.metadata_table import available_partitions
    from lakesdk.read.metadata_table import MetadataTableReader
    named = available_partitions(read_properties(t.storage)[1].props)
    if "files" not in named or t.config.version < 8:
        return None
    reader = MetadataTableReader(t.storage, t.context.store.load())
    slices = reader.slices("files")
    sl = slices[0] if slices else None
    listed = sum(len(lst.files) for lst in reader.listings())
    return {"partitions": list(named), "files_listed": listed, "data_partitions": len(reader.partitions()),
            "base_file": sl.base_file.name if sl is not None and sl.base_file is not None else None,
            "log_files": len(sl.log_files) if sl is not None else 0}


def _metadata_html(md: dict[str, Any] | None) -> str:
    if md is None:
        return ("<div class='lakesdk-panel lakesdk-mdt'><b>metadata table</b>: none. Readers list storage to find "
                "the files (TableOptions(metadata=True) keeps one).</div>")
    base = esc(md["base_file"] or "-")
    return (f"<div class='lakesdk-panel lakesdk-mdt'><b>metadata table</b> (<code>.hoodie/metadata</code>, "
            f"partitions {esc(', '.join(md['partitions']))}): its files partition lists {md['files_listed']} files "
            f"in {md['data_partitions']} partitions, so readers plan without listing storage. It is one base HFile "
            f"(<code>{base}</code>) and {md['log_files']} log files, one per delta commit since its last compaction: "
            "each commit of the table writes one before it completes.</div>")

