"""Small formatting helpers for reprs (no I/O, no dependencies)."""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(n: float | None) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    >>> human_bytes(512), human_bytes(1536), human_bytes(3 * 1024 ** 4)
    ('512 B', '1.5 KiB', '3.0 TiB')
    """
    x = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"
