"""Griffe extension for the docs build: show lakesdk's reST-flavoured docstrings as Markdown.

The source docstrings follow Sphinx habits (they are also doctests): ``:class:`X``` roles,
``>>>`` doctest blocks, ``text::`` before an indented literal block, and one simple reST
table.  This extension rewrites the docstring text that mkdocstrings renders, and only that
(the source files are untouched):

* ``:class:`~a.b.C``` and the other Python roles become code spans (``C``, or the full
  name without ``~``);
* a doctest block (``>>>`` lines and their output, up to a blank line) becomes a fenced
  ``pycon`` block;
* a paragraph ending in ``::`` ends in ``:`` (its indented block is a Markdown code block);
* a simple reST table (``====  ====`` borders) becomes a fenced text block (without the
  reST double backticks).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_BORDER = re.compile(r"^=+(?:\s+=+)+\s*$")


def _role(m: re.Match[str]) -> str:
    target = m.group(2).strip()
    if m.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rst_to_markdown(text: str) -> str:
    """The Markdown form of one docstring (see the module doc)."""
    text = _ROLE.sub(_role, text)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    in_code = False          # inside an indented (literal) block
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if in_code and stripped and _indent(line) < 4:
            in_code = False
        if not in_code and stripped.startswith(">>>") and _indent(line) < 4:
            pad = " " * _indent(line)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(pad):] if lines[i].startswith(pad) else lines[i].lstrip())
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [f"{pad}```pycon", *(pad + b for b in block), f"{pad}```"]
            continue
        if not in_code and _BORDER.match(stripped) and _indent(line) < 4:
            # a simple table: border, header, border, rows, border
            block = [line]
            i += 1
            borders = 1
            while i < len(lines) and borders < 3:
                block.append(lines[i])
                if _BORDER.match(lines[i].strip()):
                    borders += 1
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += ["```text", *(b.replace("``", "") for b in block), "```"]
            continue
        if not in_code and stripped.endswith("::"):
            if stripped == "::":
                line = ""
            else:
                line = line.rstrip()[:-1]
            in_code = True
        out.append(line)
        i += 1
    return "\n".join(out)


class RstDocstrings(griffe.Extension):
    """Rewrite every docstring with :func:`rst_to_markdown` once the package is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and not obj.is_alias:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
