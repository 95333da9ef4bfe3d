"""Reading a file the table needs: damaged bytes become a :class:`~lakesdk.CorruptFileError`
that names the file.

Parquet readers (Arrow) check the footer against the file: the ``PAR1`` magic at both ends,
a footer length that fits inside the file and a footer that decodes, so a truncated or
overwritten base file, log block or history file raises ``ArrowInvalid``/``OSError``;
:func:`damaged_file` turns those (and a log block's :class:`LogBlockError`) into a typed
error with the file's path and what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from lakesdk.exceptions import CorruptFileError, LakeError

__all__ = ["damaged_file", "damaged_files"]


@contextmanager
def damaged_file(path: str, what: str = "Parquet file") -> Iterator[None]:
    """Raise :class:`CorruptFileError` naming ``path`` for a read of damaged bytes inside the block.

    A missing file stays ``FileNotFoundError`` (the callers decide what a missing file means)."""
    from lakesdk.format.log_block import LogBlockError

    try:
        yield
    except FileNotFoundError:
        raise
    except CorruptFileError:
        raise
    except LogBlockError as exc:
        raise CorruptFileError(f"{path}: the {what} is damaged: {exc}; {_HINT}", path=path) from None
    except LakeError:
        raise
    except (pa.ArrowException, OSError, EOFError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{path}: the {what} cannot be read, its bytes are damaged "
                               f"({type(exc).__name__}: {exc}); {_HINT}", path=path) from None


@contextmanager
def damaged_files(paths: list[str], what: str = "Parquet file") -> Iterator[None]:
    """:func:`damaged_file` for a read of several files at once (an Arrow dataset): an Arrow
    error that names one of ``paths`` (Arrow names the file it cannot open or decode) becomes a
    :class:`CorruptFileError` naming it; any other error passes unchanged."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, EOFError) as exc:
        text = str(exc)
        named = sorted((p for p in paths if p in text), key=len, reverse=True)
        if not named:
            raise
        raise CorruptFileError(f"{named[0]}: the {what} cannot be read, its bytes are damaged "
                               f"({type(exc).__name__}: {exc}); {_HINT}", path=named[0]) from None


_HINT = "restore the file from a backup or from a copy of the table"
