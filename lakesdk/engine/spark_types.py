"""The Spark classes lakesdk's signatures name, for type checkers only.

pyspark is imported under ``lakesdk/engine/`` only, so the layers above import these names from
here inside ``if TYPE_CHECKING:``; importing this module does not import pyspark.  A Spark
Connect session is typed as a :class:`SparkSession`, as pyspark's own builder types it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as DataFrame
    from pyspark.sql import SparkSession as SparkSession
