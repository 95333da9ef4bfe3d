"""Helpers for testing code that uses lakesdk: :func:`assert_table_equal` compares tables
exactly; :mod:`lakesdk.testing.strategies` holds Hypothesis strategies for tables (it needs
``hypothesis``)."""

from lakesdk.testing.assertions import assert_table_equal, canonical

__all__ = ["assert_table_equal", "canonical"]
