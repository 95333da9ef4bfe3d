"""The documentation site: ``mkdocs build --strict`` succeeds (no warning at all), every page
the nav lists exists, and every one of them is rendered."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import mkdocs  # noqa: F401
except ImportError:  # pragma: no cover - the docs extra is part of dev
    pytest.skip("mkdocs is not installed: pip install -e '.[docs]' to build and test the documentation site",
                allow_module_level=True)

import yaml

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"


def _nav_pages(nav: object) -> list[str]:
    """Every page path in a mkdocs nav (external links left out)."""
    out: list[str] = []
    if isinstance(nav, str):
        if "://" not in nav:
            out.append(nav)
    elif isinstance(nav, list):
        for item in nav:
            out += _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            out += _nav_pages(value)
    return out


def _notebook_sources() -> dict[str, Path]:
    """The tutorial notebooks the site's hook adds (``notebooks/<name>.ipynb``)."""
    spec = importlib.util.spec_from_file_location("lakesdk_docs_hook", DOCS / "_hooks" / "notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.notebook_sources()


def _config() -> dict:
    # mkdocs.yml uses no custom YAML tags, so the plain loader reads it
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def _rendered(site: Path, page: str) -> Path:
    """Where mkdocs (use_directory_urls) writes ``page``."""
    stem = page.rsplit(".", 1)[0]
    if stem == "index" or stem.endswith("/index"):
        return site / stem.removesuffix("index") / "index.html"
    return site / stem / "index.html"


def test_every_nav_page_exists():
    pages = _nav_pages(_config()["nav"])
    assert pages, "mkdocs.yml has no nav"
    notebooks = _notebook_sources()
    missing = [p for p in pages if not (DOCS / p).is_file() and p not in notebooks]
    assert not missing, f"pages in the mkdocs.yml nav that do not exist under docs/ (or notebooks/): {missing}"
    # every tutorial notebook is in the nav, and every page under docs/ too
    assert set(notebooks) <= set(pages), f"notebooks missing from the nav: {sorted(set(notebooks) - set(pages))}"
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_hooks" not in p.parts}
    assert on_disk <= set(pages), f"pages under docs/ missing from the nav: {sorted(on_disk - set(pages))}"


def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(CONFIG), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    seconds = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed (exit {proc.returncode}):\n{log[-6000:]}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    for page in _nav_pages(_config()["nav"]):
        out = _rendered(site, page)
        assert out.is_file(), f"{page} was not rendered ({out} is missing)"
    # the API reference is generated from the docstrings, not left empty
    table_html = (site / "api" / "table" / "index.html").read_text(encoding="utf-8")
    for anchor in ("lakesdk.table.table.Table", "lakesdk.table.table.Maintenance.compact",
                   "lakesdk.table.table.Inspect.file_groups"):
        assert f'id="{anchor}"' in table_html, f"{anchor} is missing from the API reference"
    options_html = (site / "api" / "options" / "index.html").read_text(encoding="utf-8")
    assert 'id="lakesdk.config.options.TableOptions"' in options_html, "TableOptions is missing from the API reference"
    # the notebooks are rendered with their code cells
    quickstart = (site / "notebooks" / "01_quickstart" / "index.html").read_text(encoding="utf-8")
    assert "create_table" in quickstart
    # ... and with their stored outputs: the quickstart's tables are rendered HTML tables
    assert '<table' in quickstart and 'class="dataframe"' in quickstart and "ride-9" in quickstart
    # ... and the widgets as their static figures (plotly.js draws them)
    tutorial = (site / "notebooks" / "02_time_travel_and_incremental" / "index.html").read_text(encoding="utf-8")
    assert "lakesdk-widget-static" in tutorial and "Plotly.newPlot" in tutorial
    # ... with plotly.js from the site itself, so they draw offline
    assert "cdn.plot.ly" not in tutorial and 'src="../../assets/javascripts/plotly.min.js"' in tutorial
    assert (site / "assets" / "javascripts" / "plotly.min.js").stat().st_size > 1_000_000
    assert not [p for p in site.rglob("*.html") if "cdn.plot.ly" in p.read_text(encoding="utf-8")]
    print(f"mkdocs build --strict: {seconds:.1f} s")


def test_notebooks_store_a_whole_run_without_machine_details():
    """The site shows the notebooks' stored outputs (``make notebooks`` refreshes them): each
    notebook holds the outputs of one run top to bottom, with no paths of the machine that ran
    it, no stderr and no widget state (a widget keeps its static figure); the quickstart's data
    tables are checked by nbval."""
    for name, path in _notebook_sources().items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        counts = [c.get("execution_count") for c in code]
        assert counts == list(range(1, len(code) + 1)), f"{name}: not one whole run ({counts}); run make notebooks"
        outputs = [o for c in code for o in c.get("outputs", [])]
        assert any("text/html" in o.get("data", {}) for o in outputs), f"{name} stores no rendered output"
        assert not [o for o in outputs if o.get("name") == "stderr"], f"{name} stores stderr"
        assert not [o for o in outputs if o.get("output_type") == "error"], f"{name} stores an error"
        text = json.dumps(outputs)
        host = socket.gethostname()
        for machine in (str(ROOT), "/tmp/", "/home/", "/root/", *([f">{host}:"] if host != "localhost" else [])):
            assert machine not in text, f"{name}: an output names {machine}"
        assert "widgets" not in nb["metadata"], f"{name} stores widget state"
        assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})], \
            f"{name} stores a widget view without its state"
    quickstart = json.loads((ROOT / "notebooks" / "01_quickstart.ipynb").read_text(encoding="utf-8"))
    checked = [c for c in quickstart["cells"] if "nbval-check-output" in c["metadata"].get("tags", [])]
    assert checked, "no quickstart cell is tagged nbval-check-output"
    for c in checked:
        assert any('class="dataframe"' in "".join(o.get("data", {}).get("text/html", "")) for o in c["outputs"])



#: (notebook, text in its stored outputs, how docs/tutorials/workshop.md gives it as an answer)
WORKSHOP_ANSWERS = [
    ("01_quickstart", "inserted=1, updated=1, deleted=0, skipped=1", "`inserted=1, updated=1, skipped=1`"),
    ("01_quickstart", "ride-5  43.4", "only `ride-5` (43.4)"),
    ("04_markers_and_failure_recovery", "Timeline 3 instants (3 completed, 0 pending)", "*Answer:* 3, all completed"),
    ("05_multi_writer_concurrency", "5 writes (4 committed, 1 conflict)", "*Answer:* 5: 4 committed"),
    ("07_multi_stream_partial_updates", "450 events, 239 of them late", "*Answer:* 239"),
    ("07_multi_stream_partial_updates", "30 groups written; in 23 of them", "*Answer:* 23 of the 30"),
    ("08_kafka_sink", "lag=1500", "`lag=1500` (502, 479 and 519 per partition)"),
    ("08_kafka_sink", "records offsets {0: 1489, 1: 1488, 2: 1523}", "`{0: 1489, 1: 1488, 2: 1523}`"),
    ("08_kafka_sink", "<Timeline 2 instants", "*Answer:* 2, one delta commit per round"),
    ("09_change_data_capture", "'cy': 0.0", "What total does `cy` end with? *Answer:* 0.0"),
]


def test_the_workshop_path_keeps_to_the_measured_figures_and_the_stored_answers():
    """docs/tutorials/workshop.md: its slots fill 90 minutes, its "runs in" and "peak memory"
    are the figures of docs/tutorials/index.md, and its answers are in the notebooks' stored
    outputs (a new run that changes one fails here: update the page)."""
    import re
    page = (DOCS / "tutorials" / "workshop.md").read_text(encoding="utf-8")
    slots = re.findall(r"^\| \d:\d\d \| (\d+) min \|([^|]+)\|([^|]*)\|([^|]*)\|$", page, re.M)
    assert sum(int(m) for m, *_ in slots) == 90, slots
    index = (DOCS / "tutorials" / "index.md").read_text(encoding="utf-8")
    measured = {name: (time_, peak) for name, peak, time_ in
                re.findall(r"^\| ([^|]+?) \| [^|]+ \| (\d+ MB) \| (\d+ s) \|", index, re.M)}
    tutorials = [(re.sub(r"\[(.+)\]\(#.+\)", r"\1", name.strip()), runs.strip(), peak.strip())
                 for _, name, runs, peak in slots if runs.strip()]
    assert [name for name, *_ in tutorials] == list(measured), "the workshop has every tutorial, in order"
    assert {name: (runs, peak) for name, runs, peak in tutorials} == measured
    outputs = {}
    for name, path in _notebook_sources().items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        outputs[Path(name).stem] = json.dumps([o for c in nb["cells"] if c["cell_type"] == "code"
                                               for o in c.get("outputs", [])])
    for notebook, stored, answer in WORKSHOP_ANSWERS:
        assert json.dumps(stored)[1:-1] in outputs[notebook], f"{notebook} no longer shows {stored!r}"
        assert answer in " ".join(page.split()), f"the workshop page no longer answers {answer!r}"

def test_the_options_page_lists_every_option_with_its_hoodie_key():
    """docs/api/options.md's table names every option of the registry, in its order, with
    its ``hoodie.*`` key (or says it is lakesdk's own): the registry is where each is written."""
    import re

    from lakesdk.config.options import OPTIONS
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", (ROOT / "docs" / "api" / "options.md").read_text(), re.M)
    assert [name for name, _ in rows] == [o.name for o in OPTIONS]
    for (name, key), o in zip(rows, OPTIONS):
        assert (f"`{o.key}`" in key) if o.key else ("lakesdk only" in key or "`hoodie." in key), (name, key)
