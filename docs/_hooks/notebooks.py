"""MkDocs hook: the tutorials are the notebooks in ``notebooks/``, rendered by mkdocs-jupyter.

The notebooks stay where nbval runs them; this hook adds each ``notebooks/<name>.ipynb`` of
the repository to the site's files under the same path (no copy in ``docs/``), before
mkdocs-jupyter turns ``.ipynb`` files into pages.  The nav and the pages refer to them as
``notebooks/<name>.ipynb``; they are rendered as stored, without executing them.

The widgets' stored outputs draw their figures with plotly.js, which they load from its CDN;
the site serves its own copy instead (the installed plotly package's, at
``assets/javascripts/plotly.min.js``), so its pages draw the figures offline too.
"""

from __future__ import annotations

import re
import shutil
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


#: the script tag a widget's stored output loads plotly.js from its CDN with
_CDN = re.compile(r'<script[^>]*src="https://cdn\.plot\.ly/plotly-[0-9.]+(?:\.min)?\.js"[^>]*></script>')
PLOTLY_ASSET = "assets/javascripts/plotly.min.js"


def on_post_page(output: str, page: Any, config: Any) -> str:
    """plotly.js from the site, not from the CDN (once per page: later tags are dropped)."""
    if "cdn.plot.ly" not in output:
        return output
    tag = f'<script charset="utf-8" src="{"../" * page.url.count("/")}{PLOTLY_ASSET}"></script>'
    seen: list[bool] = []

    def local(_m: re.Match[str]) -> str:
        first = not seen
        seen.append(True)
        return tag if first else ""
    return _CDN.sub(local, output)


def on_post_build(config: Any) -> None:
    """Copy the installed plotly package's plotly.js into the site."""
    import plotly
    src = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    dest = Path(config["site_dir"]) / PLOTLY_ASSET
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
