"""Run the tutorial notebooks top to bottom and store their outputs, for the documentation site.

    python scripts/run_notebooks.py [notebooks/NAME.ipynb ...]     (default: every notebook)

The site (mkdocs-jupyter) shows the notebooks as stored, so the stored outputs are what a
reader sees; ``make notebooks`` refreshes them after a change to lakesdk or to a notebook.
Each notebook runs in ``notebooks/`` (its lakes are relative folders there). Before saving,
outputs lose what belongs to this machine or this run only: Spark's and Python's messages on
stderr, execution timings, the repository's absolute path (written as ``.``), the host name
in writer ids (written as ``host``), and the widgets' live views with their state (megabytes
of JavaScript per notebook): a lakesdk widget keeps its static figure (``text/html``), which
the site draws. CI runs the notebooks again with nbval, which compares the cells tagged
``nbval-check-output`` (tables without instant times) with these stored outputs.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# this machine's name where it appears before ``:<pid>`` (writer ids are host:pid:thread)
HOST = re.compile(rf"(?<![\w.-]){re.escape(socket.gethostname())}(?=:\d)")


def _clean(text: str) -> str:
    text = text.replace(str(NOTEBOOKS) + "/", "").replace(str(ROOT), ".")
    return HOST.sub("host", text)


def _scrub(value: object) -> object:
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    return value


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=False, store_widget_state=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for o in cell.outputs:
            if o.get("output_type") == "stream" and o.get("name") == "stderr":
                continue
            # without the widgets' state a widget view refers to nothing: keep its static form
            o.get("data", {}).pop(WIDGET_VIEW, None)
            outputs.append(nbformat.from_dict(_scrub(o)))
        cell.outputs = outputs
    nb.metadata = nbformat.from_dict(_scrub(nb.metadata))
    nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for p in paths:
        t0 = time.perf_counter()
        run(p)
        print(f"{p.relative_to(ROOT)}: {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
