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

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_options_page_lists_every_option_with_its_hoodie_key():
    """docs/api/options.md's table names every option of the registry, in its order, with
    its ``hoodie.*`` key (or says it is lakesdk's own): the registry is where each is written."""
    import re

    from lakesdk.config.options import OPTIONS
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", (ROOT / "docs" / "api" / "options.md").read_text(), re.M)
    assert [name for name, _ in rows] == [o.name for o in OPTIONS]
    for (name, key), o in zip(rows, OPTIONS):
        assert (f"`{o.key}`" in key) if o.key else ("lakesdk only" in key or "`hoodie." in key), (name, key)
