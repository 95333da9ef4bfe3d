"""ProvenanceWidget: in a partial-update table, which stream last wrote each column group.

A partial-update table (merge mode ``PARTIAL_UPDATE``) keeps one ordering field per column
group (``TableConfig.column_groups``: ordering field -> its columns); each stream writes
its own group, and a group's values move as a whole with the greatest ordering value seen
for it.  The ordering field stored in a row therefore says which event of which stream the
group's values come from.

``widget.matrix`` is a DataFrame: one row per record key, one column per ordering field
(column group), the cell the ordering value the group was last written with (missing: the
stream has not written this key yet).  The figure (``widget.figure``) is one heatmap over
it: ``y`` = record keys, ``x`` = ordering fields, ``text`` = the ordering values, ``z`` =
recency, the value's rank among the keys in its column from 0 (oldest) to 1 (newest)
(streams may use different units, so each column is ranked on its own); hovering a cell
shows the group's column values.  ``widget.rows`` holds the rows read.

Per-group commits are not stored: ``_hoodie_commit_time`` is the last commit that wrote
*any* group of the row, shown per key in the table beside the heatmap.
"""

from __future__ import annotations

import time
from typing import Any

from lakesdk.exceptions import TableConfigError
from lakesdk.widgets._common import TableWidgetBase, esc, go, html_table, ipywidgets, sync_figure
from lakesdk.widgets._figure import FigureWidget

__all__ = ["ProvenanceWidget"]

_COMMIT = "_hoodie_commit_time"
_KEY = "_hoodie_record_key"


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN / NaT
    except (TypeError, ValueError):
        return False


def _show(v: Any) -> str:
    if _missing(v):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


class ProvenanceWidget(TableWidgetBase):
    """Per key, the ordering value each column group (stream) was last written with.

    ``keys``: record keys to show (values of the key field; for a composite key the
    ``_hoodie_record_key`` text), else the first ``limit`` keys in key order.
    """

    title = "Provenance"

    def __init__(self, table: Any, *, keys: Any = None, limit: int = 50) -> None:
        cfg = table.config
        groups = cfg.column_groups
        if cfg.merge_mode != "PARTIAL_UPDATE" or not groups:
            raise TableConfigError(
                f"table {cfg.name!r} is not a partial-update table (merge mode {cfg.merge_mode}): provenance shows "
                "which stream (column group) wrote each group of a row; create the table with "
                "merge_mode='partial_update' and column_groups={ordering_field: [columns]}")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, found {limit}")
        super().__init__(table)
        self.groups: dict[str, list[str]] = groups
        self.requested_keys = None if keys is None else [str(k) for k in ([keys] if isinstance(keys, (str, int)) else keys)]
        self.limit = int(limit)
        self.rows: Any = None
        self.matrix: Any = None
        self.recency: Any = None
        self.figure = FigureWidget(layout=go.Layout(
            height=320, margin=dict(l=10, r=20, t=50, b=40),
            xaxis=dict(type="category", side="top", title=None, showgrid=False),
            yaxis=dict(type="category", automargin=True, autorange="reversed", showgrid=False),
            plot_bgcolor="#f5f5f5", hovermode="closest"))
        self.figure.add_heatmap(name="ordering values", z=[], x=[], y=[], text=[], hovertext=[],
                                texttemplate="%{text}", colorscale=[[0, "#c6dbef"], [1, "#08306b"]], zmin=0, zmax=1, xgap=2, ygap=2,
                                colorbar=dict(title="recency", tickvals=[0, 1], ticktext=["oldest", "newest"]),
                                hovertemplate="%{hovertext}<extra></extra>")
        self.info = ipywidgets.HTML("")
        self.table_html = ipywidgets.HTML("")
        side = ipywidgets.VBox([self.info, self.table_html], layout=ipywidgets.Layout(width="40%"))
        self._set_body(ipywidgets.HBox([ipywidgets.Box([self.figure], layout=ipywidgets.Layout(width="60%")), side]))
        self.add_class("lakesdk-provenance")
        self.refresh()

    @property
    def key_column(self) -> str:
        """The column the keys are matched on: the key field, or ``_hoodie_record_key``."""
        kf = self.table.config.record_key_fields
        return kf[0] if len(kf) == 1 else _KEY

    def refresh(self) -> "ProvenanceWidget":
        """Re-read the rows of the keys shown and redraw."""
        import pandas as pd
        t = self.table
        ordering = list(self.groups)
        cols = list(dict.fromkeys([_KEY, _COMMIT, *t.config.record_key_fields, *ordering,
                                   *(c for cs in self.groups.values() for c in cs)]))
        have = set(t.schema.names) | {_KEY, _COMMIT}
        df = t.read(columns=[c for c in cols if c in have]).to_pandas()
        kc = self.key_column
        df["_key"] = df[kc].astype(str)
        if self.requested_keys is not None:
            df = df[df["_key"].isin(self.requested_keys)]
        df = df.sort_values("_key").head(self.limit).reset_index(drop=True)
        self.rows = df
        self.matrix = pd.DataFrame({o: list(df[o]) if o in df else [None] * len(df) for o in ordering},
                                   index=pd.Index(list(df["_key"]), name="key"), dtype=object)
        self.recency = self.matrix.apply(_rank)
        self._draw()
        missing = [] if self.requested_keys is None else sorted(set(self.requested_keys) - set(df["_key"]))
        self.info.value = self._info_html(missing)
        self.table_html.value = self._table_html()
        self.status.value = (f"<span style='color:#555'>{len(df)} keys × {len(ordering)} column groups"
                             f" · read {time.strftime('%H:%M:%S')}</span>")
        return self

    def _draw(self) -> None:
        df, m = self.rows, self.matrix
        ordering = list(self.groups)
        hover = []
        for i, key in enumerate(m.index):
            line = []
            for o in ordering:
                vals = ", ".join(f"{c}={_show(df.at[i, c])}" for c in self.groups[o] if c in df)
                v = m.at[key, o]
                line.append(f"key <b>{esc(key)}</b><br>{esc(o)} = {esc(_show(v))}"
                            + ("" if not _missing(v) else " (not written yet)")
                            + f"<br>{esc(vals)}<br>row's last commit {esc(df.at[i, _COMMIT])}")
            hover.append(line)
        with self.figure.batch_update():
            h = self.figure.data[0]
            h.x = ordering
            h.y = list(m.index)
            h.z = [[None if _missing(v) else float(v) for v in row] for row in self.recency.values.tolist()]
            h.text = [[_show(v) for v in row] for row in m.values.tolist()]
            h.hovertext = hover
            self.figure.layout.height = max(240, 110 + 26 * len(m))
        sync_figure(self.figure)

    def _info_html(self, missing: list[str]) -> str:
        groups = "".join(f"<li><code>{esc(o)}</code>: {esc(', '.join(cs))}</li>" for o, cs in self.groups.items())
        miss = (f"<div style='color:#b71c1c'>keys not in the table: {esc(', '.join(missing))}</div>"
                if missing else "")
        return (f"<div class='lakesdk-panel'><b>column groups</b> (ordering field: columns)<ul>{groups}</ul>"
                "<div style='color:#555'>A cell is the ordering value its group was last written with; colour "
                "ranks it among the keys (per column). Per-group commits are not stored: "
                "<code>_hoodie_commit_time</code> is the last commit that wrote any group of the row.</div>"
                f"{miss}</div>")

    def _table_html(self) -> str:
        df, m = self.rows, self.matrix
        rows = [(key, *(_show(m.at[key, o]) for o in self.groups), df.at[i, _COMMIT])
                for i, key in enumerate(m.index)]
        return html_table(["key", *self.groups, "row's last commit"], rows, cls="lakesdk-provenance-table")

    def __repr__(self) -> str:
        return f"<ProvenanceWidget {self.table.name!r} groups={list(self.groups)}>"


def _rank(col: Any) -> Any:
    """Recency in [0, 1] within a column: the dense rank of each value (None where missing)."""
    import pandas as pd
    out = pd.Series([None] * len(col), index=col.index, dtype=object)
    present = [(k, v) for k, v in col.items() if not _missing(v)]
    try:
        distinct = sorted({v for _, v in present})
    except TypeError:     # values that do not compare: rank their text
        present = [(k, str(v)) for k, v in present]
        distinct = sorted({v for _, v in present})
    pos = {v: i for i, v in enumerate(distinct)}
    for k, v in present:
        out[k] = pos[v] / (len(distinct) - 1) if len(distinct) > 1 else 1.0
    return out
