"""What the engine takes of a table: its storage, config and options, the Spark session, the
merger and the engine choice.

The engine's reads and write jobs take a :class:`EngineContext`;
:class:`lakesdk.commit.context.TableContext`, a layer up, is the one the other layers pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakesdk.config.options import TableOptions
    from lakesdk.engine.spark_types import SparkSession
    from lakesdk.format.table_config import TableConfig
    from lakesdk.merge.registry import MergerFn
    from lakesdk.storage import Storage

__all__ = ["TableParts", "EngineContext"]


class TableParts(Protocol):
    """A table's storage, config and options, and the Spark session of its reads and writes:
    what a table context and a table handle (:class:`lakesdk.commit.context.TableHandle`)
    both hold."""

    @property
    def storage(self) -> Storage: ...
    @property
    def config(self) -> TableConfig: ...
    @property
    def options(self) -> TableOptions: ...
    @property
    def spark(self) -> SparkSession: ...


class EngineContext(TableParts, Protocol):
    """One table as the engine sees it (see the module doc)."""

    def merger(self) -> MergerFn | None:
        """The user-defined merger function of a custom-merge table."""
        ...

    def engine(self) -> str:
        """``local`` or ``spark``: the engine of driver-side data."""
        ...
