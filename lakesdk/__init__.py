"""lakesdk: Apache Hudi tables from Python notebooks, with Spark as the data plane.

>>> import lakesdk as lk
>>> lk.__version__ != ""
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakesdk.exceptions import *  # noqa: F403
from lakesdk.exceptions import __all__ as _exc_all

if TYPE_CHECKING:   # the names __getattr__ imports on first use, for type checkers
    from lakesdk import spark as spark
    from lakesdk.commit.results import WriteResult as WriteResult
    from lakesdk.engine.session import get_spark as get_spark
    from lakesdk.format.instant import Instant as Instant
    from lakesdk.format.timeline import Timeline as Timeline
    from lakesdk.merge.registry import register_merger as register_merger
    from lakesdk.table.lake import Lake as Lake
    from lakesdk.table.lake import open_table as open_table
    from lakesdk.table.query import Query as Query
    from lakesdk.table.table import Table as Table
    from lakesdk.table.table import TableOptions as TableOptions

__version__ = "0.1.0"

_LAZY = {
    "Lake": "lakesdk.table.lake",
    "open_table": "lakesdk.table.lake",
    "Table": "lakesdk.table.table",
    "TableOptions": "lakesdk.table.table",
    "Query": "lakesdk.table.query",
    "WriteResult": "lakesdk.commit.results",
    "Instant": "lakesdk.format.instant",
    "Timeline": "lakesdk.format.timeline",
    "get_spark": "lakesdk.engine.session",
    "register_merger": "lakesdk.merge.registry",
}

#: submodules reached as attributes (``lk.spark.register(spark)``), imported on first use
_SUBMODULES = {"spark": "lakesdk.spark"}

__all__ = ["__version__", *_LAZY, *_SUBMODULES, *_exc_all]


def __getattr__(name: str) -> Any:
    import importlib
    if name in _SUBMODULES:
        value = importlib.import_module(_SUBMODULES[name])
        globals()[name] = value
        return value
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'lakesdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
