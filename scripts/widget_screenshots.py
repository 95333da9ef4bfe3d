"""Screenshots of every widget as JupyterLab draws it, for the documentation.

    python scripts/widget_screenshots.py [OUT_DIR]        (default: docs/images/widgets)

Starts JupyterLab on 127.0.0.1 in a temporary folder (its own settings, nothing of the user's
Jupyter setup read or changed), runs the widget notebook of ``tests/lab_harness.py`` in
Debian's Chromium (headless, driven by Playwright): a small merge-on-read table with upserts, a
compaction and a write stopped after its markers (and the tables of the transactions,
provenance and Kafka monitor widgets); then saves a PNG of each widget's element (not the whole
page) as ``OUT_DIR/<name>.png``: ``timeline``, ``file_layout``, ``transactions``, ``markers``,
``provenance``, ``kafka_monitor`` and ``table_view`` (``display(t)``, its Timeline tab open).
docs/api/widgets.md shows them; run it again after a change to how a widget looks.
Needs the lab and test dependency groups (``make setup``) and ``chromium``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab_harness import (  # noqa: E402
    WIDGETS,
    figures_wider_than_their_box,
    lab_page,
    lab_server,
    open_table_view_tab,
    wait_drawn,
    write_widget_notebook,
)


def main(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    with tempfile.TemporaryDirectory(prefix="lakesdk-widget-shots-") as tmp:
        with lab_server(Path(tmp)) as server, lab_page(server, viewport={"width": 1280, "height": 1000}) as lab:
            nb = write_widget_notebook(server)
            lab.open(nb)
            lab.run_all()
            open_table_view_tab(lab, "Timeline")
            wide = figures_wider_than_their_box(lab)       # plotly sizes each figure to its box
            if wide:
                raise SystemExit(f"figures wider than their boxes: {wide}; not saving screenshots of them")
            for name, cls in WIDGETS.items():
                drawn = wait_drawn(lab, cls)
                if not drawn or not any(t["drawn"] for figs in drawn for traces in figs for t in traces.values()):
                    raise SystemExit(f"{name}: the widget drew no data ({drawn}); not saving a screenshot of it")
                element = lab.page.locator(f".{cls}").first     # the standalone widget's cell comes first
                element.scroll_into_view_if_needed()
                lab.page.mouse.move(0, 0)        # no hover label in the picture
                path = out_dir / f"{name}.png"
                element.screenshot(path=str(path), animations="disabled")
                saved.append(path)
            bad = [e for e in lab.errors if "anywidget" in e or e.startswith("pageerror")]
            if bad:
                raise SystemExit("the page reported errors:\n" + "\n".join(bad))
    return saved


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "widgets"
    for p in main(target):
        print(f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}: {p.stat().st_size} bytes")
