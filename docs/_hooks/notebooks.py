"""MkDocs hook: the tutorials are the notebooks in ``notebooks/``, rendered by mkdocs-jupyter.

The notebooks stay where nbval runs them; this hook adds each ``notebooks/<name>.ipynb`` of
the repository to the site's files under the same path (no copy in ``docs/``), before
mkdocs-jupyter turns ``.ipynb`` files into pages.  The nav and the pages refer to them as
``notebooks/<name>.ipynb``; they are rendered as stored, without executing them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def notebook_sources() -> dict[str, Path]:
    """Path in the site's files (as the nav names it) -> notebook file, for every tutorial."""
    return {p.relative_to(ROOT).as_posix(): p for p in sorted(NOTEBOOKS.glob("*.ipynb"))}


@event_priority(100)  # before mkdocs-jupyter's on_files (priority 0)
def on_files(files: Files, config: Any) -> Files:
    for uri in notebook_sources():
        if files.get_file_from_path(uri) is None:
            files.append(File(uri, src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))
    return files
