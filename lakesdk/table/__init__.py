"""The fluent API: Lake and Table handles, queries, writes and results."""

from lakesdk.commit.results import WriteResult
from lakesdk.table.lake import Lake, open_table
from lakesdk.table.query import Query, ReadPlan
from lakesdk.table.table import Table, TableOptions
from lakesdk.table.write import WriteOperation

__all__ = ["Lake", "open_table", "Query", "ReadPlan", "WriteResult", "Table", "TableOptions", "WriteOperation"]
