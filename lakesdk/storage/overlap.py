"""Storage calls made at the same time, so that their round trips to an object store overlap.

>>> at_once(lambda: 1, lambda: 2)
[1, 2]
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["at_once"]


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """The results of ``calls``, made together: the first on the calling thread, each other one
    on a thread of its own (storage calls wait on the network, not the interpreter).  Every call
    has returned before this does; the first error, in the order of ``calls``, is raised then."""
    if len(calls) <= 1:
        return [c() for c in calls]
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:   # re-raised on the calling thread
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), name=f"lakesdk-storage-{i}", daemon=True)
               for i in range(1, len(calls))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results
