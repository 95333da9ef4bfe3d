"""Storage calls made at the same time, so that their round trips to an object store overlap.

>>> at_once(lambda: 1, lambda: 2)
[1, 2]
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["at_once"]


def at_once(*calls: Callable[[], Any], threads: int = 16, parallel: bool = True) -> list[Any]:
    """The results of ``calls``, made together: the first on the calling thread, the others on
    up to ``threads`` threads (storage calls wait on the network, not the interpreter).  Every
    call has returned before this does; the first error, in the order of ``calls``, is raised
    then.  Not ``parallel`` (a local file system, whose calls take microseconds, less than a
    thread does to start): one after the other."""
    if len(calls) <= 1 or not parallel:
        return [c() for c in calls]
    from concurrent.futures import ThreadPoolExecutor
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:   # re-raised on the calling thread
            errors[i] = exc

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(calls) - 1)),
                            thread_name_prefix="lakesdk-storage") as pool:
        for i in range(1, len(calls)):
            pool.submit(run, i)
        run(0)
    for exc in errors:
        if exc is not None:
            raise exc
    return results
