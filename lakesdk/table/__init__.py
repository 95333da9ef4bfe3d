"""The fluent API: Lake and Table handles, queries, writes and results."""

from typing import Any

from lakesdk.commit.results import WriteResult
from lakesdk.engine.session import on_session
from lakesdk.format.read_plan import ReadPlan
from lakesdk.table.lake import Lake, open_table
from lakesdk.table.query import Query
from lakesdk.table.table import Table, TableOptions
from lakesdk.table.write import WriteOperation

__all__ = ["Lake", "open_table", "Query", "ReadPlan", "WriteResult", "Table", "TableOptions", "WriteOperation"]


def _register_spark_source(spark: Any) -> None:
    """Make the ``lakesdk`` Spark data source known to each session lakesdk uses."""
    from lakesdk.table.spark_source import register_once
    register_once(spark)


on_session(_register_spark_source)
