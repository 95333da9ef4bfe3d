"""The real-browser harness the browser tests share: Voila serves a notebook on 127.0.0.1,
Playwright drives Debian's Chromium (never a downloaded browser), screenshots go to
``test-output/``."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float, name: str = "voila") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"{name} did not listen on 127.0.0.1:{port} within {timeout} s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    """Stop a server the test started (its process group: voila and its kernel)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def write_notebook(path: Path, cells: list[str]) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))


@contextmanager
def voila_page(tmp_path: Path, cells: list[str], *, env: dict[str, str] | None = None) -> Iterator[tuple[Any, Any]]:
    """Serve a notebook of ``cells`` with Voila and open it in Chromium: yields
    ``(page, playwright.sync_api)``; everything is stopped on exit."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; scripts/system-deps.sh does it)")
    # voila and playwright are in the test extra: missing, they fail the test (pip install -e '.[test]')
    import voila  # noqa: F401
    from playwright import sync_api

    write_notebook(tmp_path / "nb.ipynb", cells)
    port = free_port()
    log = tmp_path / "voila.log"
    full_env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(ROOT), **(env or {})}
    voila_bin = Path(sys.executable).with_name("voila")
    cmd = [str(voila_bin) if voila_bin.exists() else "voila", "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
           "--show_tracebacks=True", "nb.ipynb"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                start_new_session=True)
    try:
        wait_port(port, proc, log, 30)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
                yield page, sync_api
            finally:
                browser.close()
    finally:
        stop(proc)


def fits_box_js(widget: str) -> str:
    """A page function: the widget's figure is drawn as wide as its box. plotly draws a figure
    700 px wide first and sizes it to its box a moment later, once the box is laid out: a test
    that measures positions to click waits for this first."""
    return """() => {
  const p = document.querySelector(SELECTOR);
  const svg = p && p.querySelector('svg.main-svg');
  if (!svg) return false;
  const w = svg.getBoundingClientRect().width;
  return w > 0 && Math.abs(w - p.parentElement.getBoundingClientRect().width) <= 1;
}""".replace("SELECTOR", repr(f"{widget} .js-plotly-plot"))


def screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot without a hover label, kept under ``test-output/<name>``."""
    shot = tmp_path / name
    page.mouse.move(5, 5)
    page.wait_for_timeout(300)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    out_dir = ROOT / "test-output"
    out_dir.mkdir(exist_ok=True)
    shutil.copyfile(shot, out_dir / name)
    return out_dir / name
