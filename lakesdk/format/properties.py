"""Java ``.properties`` text, as ``java.util.Properties.store`` writes it.

Grammar: ``#``/``!`` comment lines; ``key=value`` (also ``key:value`` or ``key value``);
a trailing unescaped backslash continues a line; escapes ``\\:``, ``\\=``, ``\\\\``, ``\\n``,
``\\t``, ``\\r``, ``\\f`` and ``\\uXXXX``.

>>> text = format_properties({"a.b": "x=1:2"}, header=None)
>>> text
'a.b=x\\\\=1\\\\:2\\n'
>>> parse_properties(text)
{'a.b': 'x=1:2'}
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

from lakesdk.exceptions import TableConfigError

__all__ = ["parse_properties", "format_properties"]

_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")


def _logical_lines(text: str) -> list[tuple[str, bool]]:
    """Logical lines (continuations joined) and whether each ended with a line break."""
    out: list[tuple[str, bool]] = []
    buf = ""
    # lines end with \n, \r or \r\n, as Java reads them (not at the other characters splitlines knows)
    raws = [m.group(0) for m in _LINE_RE.finditer(text) if m.group(0)]
    for raw in raws:
        terminated = raw.endswith(("\n", "\r"))
        line = raw.rstrip("\r\n").lstrip(" \t\f")
        if not buf and (not line or line[0] in "#!"):
            continue
        # count trailing backslashes: an odd count continues the line
        n = len(line) - len(line.rstrip("\\"))
        if n % 2 == 1 and terminated:
            buf += line[:-1]
            continue
        out.append((buf + line, terminated))
        buf = ""
    if buf:
        out.append((buf, False))
    return out


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u":
                hexits = s[i + 2:i + 6]
                if len(hexits) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hexits):
                    raise TableConfigError(f"malformed \\uxxxx escape {s[i:i + 6]!r} in {s[:60]!r}")
                out.append(chr(int(hexits, 16)))
                i += 6
                continue
            out.append(_UNESCAPE.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    # join surrogate pairs written as two \\u escapes
    try:
        return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        raise TableConfigError(f"an escape in {s[:60]!r} is half of a UTF-16 surrogate pair") from None


def parse_properties(text: str, *, strict: bool = False) -> dict[str, str]:
    """Parse Java properties text into an ordered dict.

    Malformed escapes raise :class:`~lakesdk.exceptions.TableConfigError`.  With ``strict``
    (files ``Properties.store`` wrote), an entry without a ``=``/``:`` separator or a last
    entry without its line break (a truncated file) raises it too.  The same text is parsed
    once (a commit reads ``hoodie.properties`` several times); each call returns a new dict.
    """
    return dict(_parsed(text, strict))


@lru_cache(maxsize=32)
def _parsed(text: str, strict: bool) -> tuple[tuple[str, str], ...]:
    props: dict[str, str] = {}
    for line, terminated in _logical_lines(text):
        i = 0
        key_chars = []
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line):
                key_chars.append(line[i:i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        rest = line[i:].lstrip(" \t\f")
        has_separator = rest[:1] in ("=", ":")
        if has_separator:
            rest = rest[1:].lstrip(" \t\f")
        key = _unescape("".join(key_chars))
        if strict and not has_separator:
            raise TableConfigError(f"the line {line[:80]!r} has no '=' (a truncated or damaged line)", key=key)
        if strict and not terminated:
            raise TableConfigError(
                f"the last line {line[:80]!r} has no line break: the file ends in the middle of an entry "
                "(truncated)", key=key)
        props[key] = _unescape(rest)
    return tuple(props.items())


def _escape(s: str, *, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) > 0xFFFF:  # Java escapes UTF-16 code units: a surrogate pair
            b = c.encode("utf-16-be")
            out.append(f"\\u{int.from_bytes(b[:2], 'big'):04x}\\u{int.from_bytes(b[2:], 'big'):04x}")
        elif ord(c) > 126 or ord(c) < 32:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: dict[str, str], *, header: str | None = "Properties saved",
                      now: datetime | None = None) -> str:
    """Format properties as ``Properties.store`` does (two comment lines, then entries)."""
    lines = []
    if header is not None:
        now = now or datetime.now(UTC)
        lines.append(f"#{header} on {now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}")
        lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    for k, v in props.items():
        lines.append(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}")
    return "\n".join(lines) + "\n"
