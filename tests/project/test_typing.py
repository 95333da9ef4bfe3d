"""The package type-checks: mypy, with the ``[tool.mypy]`` settings of pyproject.toml, finds
no issue in ``lakesdk/`` (``make lint`` runs it too; this test is how CI, which runs
``make test``, runs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

try:
    import mypy  # noqa: F401
except ImportError:  # pragma: no cover - mypy is part of the dev requirements
    pytest.skip("mypy is not installed: make setup (uv sync --group dev)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_issue(tmp_path: Path) -> None:
    # the cache goes to a temporary folder: the checkout stays clean and no stale cache is trusted
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mypy reports issues:\n{proc.stdout}{proc.stderr}"
    assert "Success: no issues found" in proc.stdout
